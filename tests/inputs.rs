//! Builder inputs that would panic, brick a node or issue IDs ahead of the real time are refused
//! with typed errors, before anything is written.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::TempDir;
use monoflake::{
    Error, FileStore, Generator, Layout, MAX_RESERVATION_WINDOW, MIN_RESERVATION_WINDOW,
    ManualClock, NodeRequest, NodeStore,
};

fn invalid_setting<T: std::fmt::Debug>(r: Result<T, Error>) -> &'static str {
    match r {
        Err(Error::InvalidConfig { setting, .. }) => setting,
        other => panic!("expected InvalidConfig, got {other:?}"),
    }
}

#[test]
fn reservation_windows_outside_the_bounds_are_refused_before_any_write() {
    let dir = TempDir::new("window");
    let store = Arc::new(FileStore::open(dir.path()).unwrap());
    for window in [
        Duration::MAX,
        Duration::ZERO,
        MIN_RESERVATION_WINDOW - Duration::from_nanos(1),
        MAX_RESERVATION_WINDOW + Duration::from_millis(1),
    ] {
        let r = Generator::builder(Layout::twitter())
            .reservation_window(window)
            .build_leased(store.clone(), NodeRequest::Exact(0));
        assert_eq!(invalid_setting(r), "reservation_window");
    }
    let e = Generator::builder(Layout::twitter())
        .reservation_window(Duration::MAX)
        .build_leased(store.clone(), NodeRequest::Exact(0))
        .unwrap_err();
    assert!(e.is_bad_input());
    assert!(
        e.to_string().starts_with("invalid reservation_window"),
        "{e}"
    );
    assert!(e.to_string().ends_with("from 10 ms to 86400 s"), "{e}");
    // Nothing was written: the node is free and carries no reservation.
    let claim = store
        .claim(&Layout::twitter(), NodeRequest::Exact(0))
        .unwrap();
    assert_eq!(claim.reserved_until_ms(), None);
    drop(claim);
    // The bounds themselves are accepted, and the node still works afterwards.
    for window in [MIN_RESERVATION_WINDOW, MAX_RESERVATION_WINDOW] {
        let g = Generator::builder(Layout::twitter())
            .reservation_window(window)
            .build_leased(store.clone(), NodeRequest::Exact(0))
            .unwrap();
        assert!(g.next_id().is_ok());
    }
}

#[test]
fn slots_beyond_the_sequence_bits_are_refused_without_overflow() {
    for slots in [usize::MAX, usize::MAX / 2 + 2, 4097] {
        let r = Generator::builder(Layout::twitter()).build_per_core(slots);
        assert!(
            matches!(r, Err(Error::OutOfRange { max: 2048, .. })),
            "{slots}: {r:?}"
        );
    }
    assert_eq!(
        Generator::builder(Layout::twitter())
            .build_per_core(2048)
            .unwrap()
            .slots(),
        2048
    );
}

#[test]
fn a_clock_before_the_layout_epoch_is_refused() {
    let layout = Layout::builder()
        .epoch_ms(1_700_000_000_000)
        .build()
        .unwrap();
    let r = Generator::builder(layout.clone())
        .clock(ManualClock::new(1_700_000_000_000 - 86_400_000))
        .build();
    match r {
        Err(Error::InvalidConfig {
            setting, allowed, ..
        }) => {
            assert_eq!(setting, "clock");
            assert!(
                allowed.ends_with("this clock is 86400000 ms before it"),
                "{allowed}"
            );
        }
        other => panic!("{other:?}"),
    }
    let dir = TempDir::new("epoch");
    let r = Generator::builder(layout.clone())
        .clock(ManualClock::new(1))
        .build_leased(
            Arc::new(FileStore::open(dir.path()).unwrap()),
            NodeRequest::Any,
        );
    assert_eq!(invalid_setting(r), "clock");
    // At the epoch itself it works.
    let g = Generator::builder(layout)
        .clock(ManualClock::new(1_700_000_000_000))
        .build()
        .unwrap();
    assert_eq!(g.next_id().unwrap().as_u64() >> 22, 0);
}

#[test]
fn a_lead_longer_than_an_hour_is_refused() {
    let short = Layout::builder()
        .time_bits(10)
        .sequence_bits(4)
        .epoch_ms(1_700_000_000_000)
        .build()
        .unwrap();
    let r = Generator::builder(short.clone())
        .clock(ManualClock::new(1_700_000_000_000))
        .max_lead(Duration::MAX)
        .build();
    assert_eq!(invalid_setting(r), "max_lead");
    assert!(
        Generator::builder(short)
            .clock(ManualClock::new(1_700_000_000_000))
            .max_lead(monoflake::MAX_LEAD_LIMIT)
            .build()
            .is_ok()
    );
}
