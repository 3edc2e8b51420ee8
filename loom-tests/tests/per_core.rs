//! A loom model of the per-core generator: threads spread over its slots' states (each thread
//! taking a number on its first call), each slot's IDs carrying the slot's number.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p monoflake-loom-tests --release --test per_core`
//!
//! Broken build it must fail against: `monoflake_broken_per_core` (every slot puts 0 in its
//! IDs' slot bits); `scripts/mutants.sh` builds it and checks.
#![cfg(loom)]

use std::sync::Arc;
use std::time::Duration;

use loom::thread;
use monoflake::{Generator, Id, Layout, ManualClock, PerCore};

const T0: u64 = 1_700_000_000_000;

/// Two slots on two sequence bits (two values per tick per slot) at a frozen clock: two
/// threads, on a slot each (the first two numbers taken), and a third on the first again,
/// issue two IDs each — all six distinct, each thread's increasing, both slots used.
#[test]
fn threads_on_per_core_slots_never_share_an_id() {
    loom::model(|| {
        let g: Arc<PerCore<Arc<ManualClock>>> = Arc::new(
            Generator::builder(
                Layout::builder()
                    .epoch_ms(Layout::twitter().epoch_ms())
                    .sequence_bits(2)
                    .build()
                    .unwrap(),
            )
            .clock(Arc::new(ManualClock::new(T0)))
            .max_lead(Duration::from_millis(10))
            .build_per_core(2)
            .unwrap(),
        );
        let spawn = |g: Arc<PerCore<Arc<ManualClock>>>| {
            thread::spawn(move || [g.try_next_id().unwrap(), g.try_next_id().unwrap()])
        };
        let (a, b) = (spawn(Arc::clone(&g)), spawn(Arc::clone(&g)));
        let c = [g.try_next_id().unwrap(), g.try_next_id().unwrap()];
        let runs = [a.join().unwrap(), b.join().unwrap(), c];
        for run in &runs {
            assert!(run[0] < run[1], "{run:?}");
        }
        let mut all: Vec<Id> = runs.concat();
        // The slot is the sequence's top bit: the first two numbers land on both slots.
        let slot = |id: &Id| id.parts(g.layout()).unwrap().sequence() >> 1;
        assert!(
            all.iter().any(|id| slot(id) == 0),
            "slot 0 unused: {runs:?}"
        );
        assert!(
            all.iter().any(|id| slot(id) == 1),
            "slot 1 unused: {runs:?}"
        );
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 6, "an ID issued twice: {runs:?}");
    });
}
