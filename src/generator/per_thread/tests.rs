//! The slots' words, the fence on a thread's numbers and the seal, seen from inside.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use crate::{Error, Generator, Id, Layout, ManualClock};

const T0: u64 = 1_700_000_000_000;

/// Four sequence bits, four slots: four values per tick per slot.
fn small() -> Layout {
    Layout::builder()
        .epoch_ms(Layout::twitter().epoch_ms())
        .sequence_bits(4)
        .build()
        .unwrap()
}

/// A slot's word holds the first value of each tick its holder moves into, before anything is
/// issued there, and the exact last value once the slot is given back.
#[test]
fn the_slot_word_follows_ticks_then_the_last_value() {
    let clock = Arc::new(ManualClock::new(T0));
    let g = Generator::builder(small())
        .clock(Arc::clone(&clock))
        .build_per_thread(4)
        .unwrap();
    let shared = Arc::clone(g.shared());
    let tick = shared.base.now_of(T0 * 1_000_000).tick;
    let local = g.local().unwrap();
    let slot = local.slot();
    let word = || shared.slots[slot].state.load(Relaxed);
    local.next_id().unwrap();
    assert_eq!(word(), tick << 2);
    local.next_id().unwrap();
    local.next_id().unwrap();
    assert_eq!(word(), tick << 2, "inside a tick, nothing is published");
    drop(local);
    assert_eq!(word(), tick << 2 | 2);
    assert_eq!(shared.issued(), 3);
}

/// The fence stops a thread's numbers as it stops a shared state: inside the limit's tick the
/// common case issues; a borrow past the limit is refused; once the deadline has come, even
/// the common case refuses.
#[test]
fn the_fence_stops_a_threads_numbers() {
    let clock = Arc::new(ManualClock::new(T0));
    let g = Generator::builder(small())
        .clock(Arc::clone(&clock))
        .build_per_thread(4)
        .unwrap();
    let base = &g.shared().base;
    let tick = base.now_of(T0 * 1_000_000).tick;
    base.fence().set(tick, u64::MAX);
    let local = g.local().unwrap();
    let run: Vec<Id> = (0..4).map(|_| local.next_id().unwrap()).collect();
    assert_eq!(run.len(), 4);
    // The slot's four values are used: the next one borrows tick + 1, past the limit.
    assert!(matches!(local.try_next_id(), Err(Error::LeaseLost { .. })));
    base.fence().set(tick + 1, u64::MAX);
    local.next_id().unwrap();
    // The deadline is the clock's tick: the common case (room left in tick + 1) refuses.
    base.fence().set(tick + 1, tick);
    assert!(matches!(local.try_next_id(), Err(Error::LeaseLost { .. })));
    assert!(matches!(g.try_next_id(), Err(Error::LeaseLost { .. })));
}

/// A seal racing three threads that issue (two by handles, one by the thread-local way in) on
/// a layout of four values per tick per slot, so that threads move into later ticks all the
/// time: every ID any thread issued, before or after the seal, lies in a tick at or below the
/// tick the seal returns, and every thread stops with the closed fence's error.
#[test]
fn a_seal_racing_issuers_bounds_every_id() {
    for round in 0..20 {
        let g = Generator::builder(small())
            .max_lead(Duration::from_millis(50))
            .build_per_thread(4)
            .unwrap();
        let shared = Arc::clone(g.shared());
        let (sealed, runs) = std::thread::scope(|s| {
            let workers: Vec<_> = (0..3)
                .map(|k| {
                    let g = &g;
                    s.spawn(move || {
                        let local = if k < 2 {
                            Some(g.local().unwrap())
                        } else {
                            None
                        };
                        let mut run = Vec::new();
                        loop {
                            let got = match &local {
                                Some(l) => l.next_id(),
                                None => g.next_id(),
                            };
                            match got {
                                Ok(id) => run.push(id),
                                Err(Error::LeaseLost { .. }) => break run,
                                Err(e) => panic!("round {round}: {e}"),
                            }
                        }
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_millis(2 + round % 5));
            let sealed = shared.base.tick_of_state(shared.seal());
            let runs: Vec<Vec<Id>> = workers.into_iter().map(|w| w.join().unwrap()).collect();
            (sealed, runs)
        });
        let layout = small();
        let mut all: Vec<Id> = runs.concat();
        for id in &all {
            let tick = id.parts(&layout).unwrap().tick();
            assert!(
                tick <= sealed,
                "round {round}: tick {tick} past the seal's {sealed}"
            );
        }
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n);
        // Nothing more, from any way in.
        assert!(g.try_next_id().is_err());
        assert!(g.local().unwrap().try_next_id().is_err());
    }
}
