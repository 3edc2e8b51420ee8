//! The per-core generator's thread numbering and statistics (what `cargo mutants` found no
//! test for). In a binary of its own: the thread numbers are process-wide, so no other test
//! may take numbers between this one's threads.

use std::sync::Arc;
use std::time::Duration;

use monoflake::{Generator, Layout, ManualClock, PerCore};

const T0: u64 = 1_700_000_000_000;

/// Two slots on two sequence bits (two values per tick per slot), at a clock frozen at `T0`.
fn two_slots() -> PerCore<Arc<ManualClock>> {
    Generator::builder(
        Layout::builder()
            .epoch_ms(Layout::twitter().epoch_ms())
            .sequence_bits(2)
            .build()
            .unwrap(),
    )
    .clock(Arc::new(ManualClock::new(T0)))
    .max_lead(Duration::from_millis(10))
    .max_wait(Duration::ZERO)
    .build_per_core(2)
    .unwrap()
}

/// Threads take consecutive numbers on their first call and use slot `number & (n - 1)`: two
/// threads one after the other land on the two slots (the slot bit is the sequence's top bit),
/// then the statistics add up both slots' borrowed ticks and keep the largest lead.
#[test]
fn threads_spread_over_the_slots_and_stats_add_up() {
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
