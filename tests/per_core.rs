//! The per-core generator's thread numbering and statistics (what `cargo mutants` found no
//! test for). In a binary of its own: the thread numbers are process-wide, so no other test
//! may take numbers between this one's threads.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use monoflake::{Generator, Layout, ManualClock, PerCore};

const T0: u64 = 1_700_000_000_000;

/// Held by each test whose threads take thread numbers, so that no other test's threads take
/// numbers between its own (the tests of this binary run side by side).
static NUMBERS: Mutex<()> = Mutex::new(());

/// Two slots on two sequence bits (two values per tick per slot), at a clock frozen at `T0`.
fn two_slots() -> PerCore<Arc<ManualClock>> {
    two_slots_with(
        Arc::new(ManualClock::new(T0)),
        Duration::from_millis(10),
        Duration::ZERO,
    )
}

/// Two slots on two sequence bits (Twitter's epoch) on `clock`, with this lead and wait.
fn two_slots_with<C: monoflake::TimeSource + Clone>(
    clock: C,
    max_lead: Duration,
    max_wait: Duration,
) -> PerCore<C> {
    Generator::builder(
        Layout::builder()
            .epoch_ms(Layout::twitter().epoch_ms())
            .sequence_bits(2)
            .build()
            .unwrap(),
    )
    .clock(clock)
    .max_lead(max_lead)
    .max_wait(max_wait)
    .build_per_core(2)
    .unwrap()
}

/// Threads take consecutive numbers on their first call and use slot `number & (n - 1)`: two
/// threads one after the other land on the two slots (the slot bit is the sequence's top bit),
/// then the statistics add up both slots' borrowed ticks and keep the largest lead.
#[test]
fn threads_spread_over_the_slots_and_stats_add_up() {
    let _numbers = NUMBERS.lock().unwrap_or_else(|e| e.into_inner());
    let g = two_slots();
    let layout = g.layout().clone();
    let slot_of = |id: monoflake::Id| id.parts(&layout).unwrap().sequence() >> 1;
    // Three IDs per thread: two in the clock's tick, then one borrowed from the next.
    let run = || {
        std::thread::scope(|s| {
            s.spawn(|| (0..3).map(|_| g.try_next_id().unwrap()).collect::<Vec<_>>())
                .join()
                .unwrap()
        })
    };
    let (a, b) = (run(), run());
    let slots_a: Vec<u64> = a.iter().map(|&id| slot_of(id)).collect();
    let slots_b: Vec<u64> = b.iter().map(|&id| slot_of(id)).collect();
    assert!(slots_a.iter().all(|&s| s == slots_a[0]), "{slots_a:?}");
    assert!(slots_b.iter().all(|&s| s == slots_b[0]), "{slots_b:?}");
    assert_ne!(slots_a[0], slots_b[0], "two threads on one slot");
    let stats = g.stats();
    assert_eq!(stats.issued, 6);
    assert_eq!(stats.borrowed_ticks, 2, "{stats:?}");
    assert_eq!(stats.max_lead_ticks, 1, "{stats:?}");
}

/// What a per-core generator shows in `Debug`: its slot count and its lease, if any.
#[test]
fn a_per_core_generator_shows_its_slots_and_owner() {
    assert_eq!(
        format!("{:?}", two_slots()),
        "PerCore { slots: 2, owner: None, .. }"
    );
}

/// A clock frozen at `T0` that reports a comparison with the wall clock, as a locked clock
/// does.
#[derive(Clone)]
struct Reporting;

impl monoflake::TimeSource for Reporting {
    fn now_ms(&self) -> u64 {
        T0
    }

    fn report(&self) -> monoflake::ClockReport {
        let mut report = monoflake::ClockReport::default();
        report.forward_steps = 3;
        report.last_skew_ns = -7;
        report.max_skew_ns = 11;
        report.slew_left_ns = 13;
        report
    }
}

/// Every counter of a per-core generator adds up its slots' (the lead the largest, the
/// clock's comparison as the clock reports it): a thread on each slot does the same — IDs up
/// to the lead, a `WouldBlock` returned, a wait that times out — and the second thread doubles
/// what the first left.
#[test]
fn every_counter_adds_up_the_slots() {
    let _numbers = NUMBERS.lock().unwrap_or_else(|e| e.into_inner());
    let g = two_slots_with(
        Reporting,
        Duration::from_millis(1),
        Duration::from_millis(3),
    );
    let run = || {
        std::thread::scope(|s| {
            s.spawn(|| {
                // Two values in the clock's tick and the first of the next, which the lead
                // allows (its second opens half a tick later: paced).
                for _ in 0..3 {
                    g.try_next_id().unwrap();
                }
                assert!(matches!(
                    g.try_next_id(),
                    Err(monoflake::Error::WouldBlock { .. })
                ));
                assert!(matches!(
                    g.next_id(),
                    Err(monoflake::Error::TimedOut { .. })
                ));
            })
            .join()
            .unwrap()
        })
    };
    run();
    let one = g.stats();
    assert_eq!(
        (one.issued, one.borrowed_ticks, one.max_lead_ticks),
        (3, 1, 1),
        "{one:?}"
    );
    assert_eq!(
        (one.would_block_returned, one.waiting_calls, one.timed_out),
        (1, 1, 1)
    );
    assert!(
        one.wait_spins > 0 && one.wait_yields > 0 && one.wait_sleeps > 0,
        "{one:?}"
    );
    assert_eq!(
        one.wait_retries,
        one.wait_spins + one.wait_yields + one.wait_sleeps
    );
    assert_eq!(
        (
            one.reanchors,
            one.skew_ns,
            one.max_skew_ns,
            one.slew_left_ns
        ),
        (3, -7, 11, 13)
    );
    run();
    let two = g.stats();
    let sums = |s: monoflake::Stats| {
        [
            s.issued,
            s.borrowed_ticks,
            s.would_block_returned,
            s.waiting_calls,
            s.wait_retries,
            s.wait_spins,
            s.wait_yields,
            s.wait_sleeps,
            s.timed_out,
        ]
    };
    assert_eq!(sums(two), sums(one).map(|n| 2 * n), "{two:?}");
    assert_eq!(
        (
            two.max_lead_ticks,
            two.reanchors,
            two.skew_ns,
            two.max_skew_ns,
            two.slew_left_ns
        ),
        (1, 3, -7, 11, 13)
    );
}
