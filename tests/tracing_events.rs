//! The rare events reach `tracing` (feature `tracing`): a re-anchor, a failed reservation write,
//! a lost lease, a claim that passed over nodes reserved ahead of its clock.
#![cfg(feature = "tracing")]

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use monoflake::{
    Error, FileStore, Generator, Layout, LockedClock, ManualClock, NodeRequest, NodeStore,
};
use tracing::field::{Field, Visit};
use tracing::{Event, Metadata, Subscriber, span};

/// Keeps every event as "LEVEL message field=value ...".
struct Recorder(Arc<Mutex<Vec<String>>>);

struct Line(String);

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0 += &format!(" {}={:?}", field.name(), value);
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
        span::Id::from_u64(1)
    }
    fn record(&self, _: &span::Id, _: &span::Record<'_>) {}
    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut line = Line(event.metadata().level().to_string());
        event.record(&mut line);
        self.0.lock().unwrap().push(line.0);
    }
    fn enter(&self, _: &span::Id) {}
    fn exit(&self, _: &span::Id) {}
}

#[test]
fn rare_events_are_reported() {
    let events = Arc::new(Mutex::new(Vec::new()));
    tracing::subscriber::set_global_default(Recorder(Arc::clone(&events))).unwrap();

    // A wall clock that jumps a minute ahead: the locked clock steps forward.
    static WALL: AtomicU64 = AtomicU64::new(1_700_000_000_000_000_000);
    let clock = LockedClock::with_wall_clock(
        || WALL.load(Ordering::Relaxed),
        Duration::from_secs(1),
        Duration::from_millis(1),
    );
    WALL.fetch_add(60_000_000_000, Ordering::Relaxed);
    clock.reanchor();

    // A store that fails: each keeper reports the failed renewal and the lost lease, naming
    // its node — a generator's (5), a PerThread's (6), a PerCore's (7), a host state word's (8).
    let dir = std::env::temp_dir().join(format!("monoflake-test-tracing-{}", std::process::id()));
    let store = common::Flaky::new(&dir, Some(Duration::from_secs(60)));
    let builder = || {
        Generator::builder(Layout::twitter())
            .clock(Arc::new(ManualClock::new(1_700_000_000_000)))
            .reservation_window(Duration::from_millis(40))
    };
    let leased = builder()
        .build_leased(store.clone(), NodeRequest::Exact(5))
        .unwrap();
    let per_thread = builder()
        .build_leased_per_thread(store.clone(), NodeRequest::Exact(6), 2)
        .unwrap();
    let per_core = builder()
        .build_leased_per_core(store.clone(), NodeRequest::Exact(7), 2)
        .unwrap();
    let state_lease = builder()
        .build_state_lease(
            store.clone(),
            NodeRequest::Exact(8),
            Arc::new(common::StartTick::default()),
        )
        .unwrap();
    store.fail_renew.store(2, Ordering::SeqCst);
    let start = std::time::Instant::now();
    let lost =
        |node: u64| {
            events.lock().unwrap().iter().any(|e| {
                e.contains("lease lost") && e.split(' ').any(|f| f == format!("node={node}"))
            })
        };
    while !(lost(5) && lost(6) && lost(7) && lost(8)) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{:?}",
            events.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(matches!(
        leased.try_next_id(),
        Err(Error::LeaseLost { node: 5, .. })
    ));
    assert!(matches!(
        per_thread.try_next_id(),
        Err(Error::LeaseLost { node: 6, .. })
    ));
    assert!(matches!(
        per_core.try_next_id(),
        Err(Error::LeaseLost { node: 7, .. })
    ));
    assert_eq!(state_lease.fence(), (0, 0), "closed once lost");
    drop((leased, per_thread, per_core, state_lease));
    let _ = std::fs::remove_dir_all(&dir);

    // A node reserved an hour ahead of this clock is passed over for another, with a warning:
    // this generator's IDs sort below those issued up to an hour before.
    let ahead_dir = dir.with_extension("ahead");
    let ahead_store = Arc::new(FileStore::open(&ahead_dir).unwrap());
    let claim = ahead_store
        .claim(&Layout::twitter(), NodeRequest::Exact(0))
        .unwrap();
    ahead_store.release(claim, 1_700_003_600_000).unwrap();
    let passed_over = builder()
        .build_leased(ahead_store, NodeRequest::Any)
        .unwrap();
    assert_eq!(passed_over.node(), 1);
    assert_eq!(passed_over.stats().sorts_below_ms, 3_600_000);
    drop(passed_over);
    let _ = std::fs::remove_dir_all(&ahead_dir);

    let events = events.lock().unwrap();
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("INFO") && e.contains("stepped forward")),
        "{events:?}"
    );
    assert!(
        events.iter().any(|e| e.starts_with("WARN")
            && e.contains("renewal failed")
            && e.contains(" node=5 ")
            && e.contains("taken over")),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("ERROR") && e.contains("lease lost")),
        "{events:?}"
    );
    // Only that claim passed a node over: the others' builds said nothing of it.
    let sort_below: Vec<&String> = events.iter().filter(|e| e.contains("sort below")).collect();
    assert_eq!(sort_below.len(), 1, "{sort_below:?}");
    assert!(
        sort_below[0].starts_with("WARN")
            && sort_below[0].contains(" node=1 ")
            && sort_below[0].contains(" sorts_below_ms=3600000"),
        "{sort_below:?}"
    );
}
