//! The fence's boundary, exactly, for every leased flavour: once the store stops
//! acknowledging reservations, no ID is ever issued in the tick that starts at or after the
//! last reservation acknowledged — the tick a successor that reads it starts in — and every
//! tick before it can still be reached. Checked over many layouts (ticks of 1 ms to 1 s,
//! epochs at any millisecond), windows and start times, every ID of the whole run, for a
//! `Leased`, a leased `PerThread`, a leased `PerCore` and a `StateLease`'s published words.
//!
//! A fence one tick late (`last_tick_before` replaced by `tick_at`) fails here on every
//! layout whose reservation ends on a tick's start (every 1 ms layout).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use monoflake::handover::first_tick_from;
use monoflake::{
    BlockedOn, Error, Generator, Id, Layout, ManualClock, NodeRequest, NodeStore, OutsideState,
    StateLease, StateStep,
};
use proptest::prelude::*;

const T0: u64 = 1_700_000_000_000;
const EPOCH: u64 = 1_600_000_000_000;

/// The flavours.
#[derive(Clone, Copy, Debug)]
enum Flavour {
    Leased,
    PerThread,
    PerCore,
}

/// One case: a layout of `tick_ms` ticks with its epoch `epoch_off` ms past [`EPOCH`], a
/// reservation window of `window_ms`, the clock starting `start_off` ms past [`T0`].
#[derive(Clone, Copy, Debug)]
struct Case {
    tick_ms: u64,
    epoch_off: u64,
    window_ms: u64,
    start_off: u64,
}

fn layout(case: Case) -> Layout {
    Layout::builder()
        .node_field("worker", 4)
        .sequence_bits(3)
        .tick_ms(case.tick_ms)
        .epoch_ms(EPOCH + case.epoch_off)
        .build()
        .unwrap()
}

/// A store whose node 0 was released at the clock's start (so the build waits for nothing).
fn store(dir: &std::path::Path, layout: &Layout, at: u64) -> Arc<common::Flaky> {
    let store = common::Flaky::new(dir, None);
    let claim = store.claim(layout, NodeRequest::Exact(0)).unwrap();
    store.release(claim, at).unwrap();
    store
}

/// Waits until `renewals()` has counted two more keeper rounds (each republishes the fence
/// from a check made at the clock's reading now).
fn two_rounds(renewals: &dyn Fn() -> u64) {
    let from = renewals();
    let give_up = std::time::Instant::now() + Duration::from_secs(60);
    while renewals() < from + 2 {
        assert!(std::time::Instant::now() < give_up, "the keeper stopped");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs `case` on `flavour`; returns every tick issued, the boundary (the first tick the
/// fence must refuse) and the last refusal.
fn run(flavour: Flavour, case: Case) -> (Vec<u64>, u64, Option<Error>) {
    let dir = common::TempDir::new(&format!("fence-boundary-{flavour:?}"));
    let layout = layout(case);
    let start = T0 + case.start_off;
    let store = store(dir.path(), &layout, start);
    let clock = Arc::new(ManualClock::new(start));
    let builder = Generator::builder(layout.clone())
        .clock(Arc::clone(&clock))
        .reservation_window(Duration::from_millis(case.window_ms))
        .max_lead(Duration::from_millis(2 * case.tick_ms));
    type Issue = Box<dyn Fn() -> Result<Id, Error>>;
    let (issue, renewals): (Issue, Box<dyn Fn() -> u64>) = match flavour {
        Flavour::Leased => {
            let g = Arc::new(
                builder
                    .build_leased(store.clone(), NodeRequest::Exact(0))
                    .unwrap(),
            );
            let h = Arc::clone(&g);
            (
                Box::new(move || g.try_next_id()),
                Box::new(move || h.stats().lease_renewals),
            )
        }
        Flavour::PerThread => {
            let g = Arc::new(
                builder
                    .build_leased_per_thread(store.clone(), NodeRequest::Exact(0), 2)
                    .unwrap(),
            );
            let h = Arc::clone(&g);
            (
                Box::new(move || g.try_next_id()),
                Box::new(move || h.stats().lease_renewals),
            )
        }
        Flavour::PerCore => {
            let g = Arc::new(
                builder
                    .build_leased_per_core(store.clone(), NodeRequest::Exact(0), 2)
                    .unwrap(),
            );
            let h = Arc::clone(&g);
            (
                Box::new(move || g.try_next_id()),
                Box::new(move || h.stats().lease_renewals),
            )
        }
    };
    // From now on no reservation is acknowledged: the last one written bounds the run.
    store.fail_extend.store(true, Ordering::SeqCst);
    two_rounds(&*renewals);
    let until = *store.extended.lock().unwrap().last().unwrap();
    let boundary = first_tick_from(&layout, until);
    let mut ticks = Vec::new();
    let mut refused = None;
    // The clock just short of the reservation, at it, and past it.
    let tick = case.tick_ms;
    for at in [
        until.saturating_sub(2 * tick + 1),
        until.saturating_sub(tick),
        until - 1,
        until,
        until + tick,
        until + 3 * tick,
    ] {
        clock.set_ms(at.max(start));
        two_rounds(&*renewals);
        for _ in 0..64 {
            match issue() {
                Ok(id) => ticks.push(id.parts(&layout).unwrap().tick()),
                Err(e) => refused = Some(e),
            }
        }
    }
    (ticks, boundary, refused)
}

fn check(flavour: Flavour, case: Case) -> Result<(), TestCaseError> {
    let (ticks, boundary, refused) = run(flavour, case);
    let past: Vec<u64> = ticks.iter().copied().filter(|&t| t >= boundary).collect();
    prop_assert!(
        past.is_empty(),
        "{flavour:?} {case:?}: {} of {} IDs at or past the first unreserved tick {boundary}: {:?}",
        past.len(),
        ticks.len(),
        &past[..past.len().min(8)]
    );
    // The boundary was reached: the last tick before it was issued in.
    prop_assert!(
        ticks.contains(&(boundary - 1)),
        "{flavour:?} {case:?}: the last reserved tick {} was never issued in (highest {:?})",
        boundary - 1,
        ticks.iter().max()
    );
    // And the refusal past it says the store failed, as it did.
    prop_assert!(
        matches!(refused, Some(Error::ReservationUnavailable { node: 0, .. })),
        "{flavour:?} {case:?}: refused with {refused:?}"
    );
    Ok(())
}

fn cases() -> impl Strategy<Value = Case> {
    (
        prop::sample::select(vec![1_u64, 1, 1, 2, 7, 10, 40, 1_000]),
        0_u64..1_000,
        prop::sample::select(vec![10_u64, 37, 100, 250]),
        0_u64..1_000,
    )
        .prop_map(|(tick_ms, epoch_off, window_ms, start_off)| Case {
            tick_ms,
            epoch_off,
            window_ms: window_ms.max(2 * tick_ms + 10),
            start_off,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn a_leased_generator_never_issues_at_or_past_its_reservation(case in cases()) {
        check(Flavour::Leased, case)?;
    }

    #[test]
    fn a_leased_per_thread_generator_never_issues_at_or_past_its_reservation(case in cases()) {
        check(Flavour::PerThread, case)?;
    }

    #[test]
    fn a_leased_per_core_generator_never_issues_at_or_past_its_reservation(case in cases()) {
        check(Flavour::PerCore, case)?;
    }
}

/// A host's word that records what it was started at; the test issues nothing through it.
struct Word(AtomicU64);

impl OutsideState for Word {
    fn start(&self, step: &StateStep) {
        self.0.store(step.tick_of(step.start()), Ordering::Relaxed);
    }
    fn last_tick(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
    fn seal(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A `StateLease` on node 0 of a case of `tick_ms` ticks (its store released the node at the
/// clock's start), with its directory, case, layout, store and clock.
#[allow(clippy::type_complexity)]
fn state_lease(
    tick_ms: u64,
    tag: &str,
) -> (
    common::TempDir,
    Case,
    Layout,
    Arc<common::Flaky>,
    Arc<ManualClock>,
    StateLease<Arc<ManualClock>>,
) {
    let case = Case {
        tick_ms,
        epoch_off: 13,
        window_ms: 250.max(2 * tick_ms + 10),
        start_off: 101,
    };
    let dir = common::TempDir::new(tag);
    let layout = layout(case);
    let start = T0 + case.start_off;
    let store = store(dir.path(), &layout, start);
    let clock = Arc::new(ManualClock::new(start));
    let lease = Generator::builder(layout.clone())
        .clock(Arc::clone(&clock))
        .reservation_window(Duration::from_millis(case.window_ms))
        .build_state_lease(
            store.clone(),
            NodeRequest::Exact(0),
            Arc::new(Word(AtomicU64::new(0))),
        )
        .unwrap();
    (dir, case, layout, store, clock, lease)
}

/// A `StateLease`'s `check` (what a host asks before it issues) answers at the fence's
/// deadline exactly: `Ok` to the last ms of the tick before the deadline tick, refused (wait
/// for the keeper) from the deadline tick's first ms — on 1 ms ticks and on long ones, where
/// the tick of a ms, the first tick from it and the last tick before it differ.
#[test]
fn a_state_lease_check_refuses_from_its_deadline_tick_exactly() {
    for tick_ms in [1, 40] {
        let (_dir, case, layout, store, clock, lease) =
            state_lease(tick_ms, "fence-boundary-check");
        let start = T0 + case.start_off;
        two_rounds(&|| lease.stats().lease_renewals);
        // The keeper held in a renewal: the fence stays as its last round published it.
        store.hold_renew.store(true, Ordering::SeqCst);
        let give_up = std::time::Instant::now() + Duration::from_secs(60);
        while store.held_since.lock().unwrap().is_none() {
            assert!(
                std::time::Instant::now() < give_up,
                "the keeper never renewed"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        let (_, deadline) = lease.fence();
        let deadline_ms = layout.unix_ms_of_tick(deadline);
        assert!(deadline_ms > start, "{case:?}: deadline {deadline_ms}");
        clock.set_ms(deadline_ms - 1);
        let before = lease.check();
        clock.set_ms(deadline_ms);
        let at = lease.check();
        store.hold_renew.store(false, Ordering::SeqCst);
        assert!(
            before.is_ok(),
            "{case:?}: refused at {} ms, the last before the deadline tick {deadline}: {before:?}",
            deadline_ms - 1
        );
        assert!(
            matches!(
                at,
                Err(Error::WouldBlock {
                    blocked_on: BlockedOn::LeaseKeeper,
                    ..
                })
            ),
            "{case:?}: at the deadline tick's first ms {deadline_ms}: {at:?}"
        );
    }
}

/// A `StateLease` (the PostgreSQL extension's shared word) is told the same limit: the last
/// tick before the reservation, exactly, once the store stops acknowledging.
#[test]
fn a_state_lease_publishes_the_last_tick_before_its_reservation() {
    for tick_ms in [1, 7, 40, 1_000] {
        let (_dir, case, layout, store, clock, lease) =
            state_lease(tick_ms, "fence-boundary-state");
        store.fail_extend.store(true, Ordering::SeqCst);
        two_rounds(&|| lease.stats().lease_renewals);
        let until = *store.extended.lock().unwrap().last().unwrap();
        clock.set_ms(until + tick_ms);
        two_rounds(&|| lease.stats().lease_renewals);
        let (limit, _) = lease.fence();
        assert_eq!(
            limit + 1,
            first_tick_from(&layout, until),
            "{case:?}: the limit {limit} is not the last tick before {until}"
        );
    }
}
