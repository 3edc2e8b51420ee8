//! loom models of the per-thread generator's slots: the hand-over of a slot's state from a
//! holder that gives it back to the next one to take it, and the seal racing a holder that
//! moves into a later tick.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p monoflake-loom-tests --release --test slots`
//!
//! `.ci/run` also builds the generator with `--cfg monoflake_broken_slots` (the hand-over's
//! Release and Acquire made Relaxed, and a tick published with a load and a plain store
//! instead of a read-modify-write) and checks that both models then fail.
#![cfg(loom)]

use std::sync::Arc;
use std::time::Duration;

use loom::thread;
use monoflake::{Error, Generator, Id, Layout, ManualClock, PerThread};

const T0: u64 = 1_700_000_000_000;

/// One slot of a generator on a two-bit layout (four values per tick) at a clock frozen at
/// `T0`, with a lead of 10 ms.
fn one_slot() -> Arc<PerThread<ManualClock>> {
    Arc::new(
        Generator::builder(
            Layout::builder()
                .epoch_ms(Layout::twitter().epoch_ms())
                .sequence_bits(2)
                .build()
                .unwrap(),
        )
        .clock(ManualClock::new(T0))
        .max_lead(Duration::from_millis(10))
        .build_per_thread(1)
        .unwrap(),
    )
}

/// Two threads, one slot: each takes the slot (waiting while the other holds it), issues two
/// IDs and gives it back. Whichever goes second goes on from the exact state the first left:
/// the four IDs are distinct and, in the order the slot was held, increasing — exactly the
/// first four values of the clock's tick.
#[test]
fn a_slot_handed_over_goes_on_from_its_last_state() {
    loom::model(|| {
        let g = one_slot();
        let spawn = |g: Arc<PerThread<ManualClock>>| {
            thread::spawn(move || {
                let local = loop {
                    match g.local() {
                        Ok(local) => break local,
                        Err(Error::NoFreeSlot { .. }) => thread::yield_now(),
                        Err(e) => panic!("{e}"),
                    }
                };
                [local.next_id().unwrap(), local.next_id().unwrap()]
            })
        };
        let a = spawn(Arc::clone(&g));
        let b = spawn(Arc::clone(&g));
        let (a, b) = (a.join().unwrap(), b.join().unwrap());
        let layout = g.layout().clone();
        let mut all: Vec<(u64, u64)> = a
            .iter()
            .chain(&b)
            .map(|id| {
                let p = id.parts(&layout).unwrap();
                (p.unix_ms() - T0, p.sequence())
            })
            .collect();
        all.sort_unstable();
        assert_eq!(all, [(0, 0), (0, 1), (0, 2), (0, 3)], "{a:?} {b:?}");
        assert!(a[0] < a[1] && b[0] < b[1]);
        assert!(
            a[1] < b[0] || b[1] < a[0],
            "the holders interleaved: {a:?} {b:?}"
        );
    });
}

/// A holder fills its tick and moves into the next (a borrow: one sequence bit, two values
/// per tick) while another thread seals the generator, as a lease's release does: every ID
/// issued lies in a tick at or below the tick the seal returns.
#[test]
fn a_seal_racing_a_holder_moving_into_a_later_tick() {
    loom::model(|| {
        let g = Arc::new(
            Generator::builder(
                Layout::builder()
                    .epoch_ms(Layout::twitter().epoch_ms())
                    .sequence_bits(1)
                    .build()
                    .unwrap(),
            )
            .clock(ManualClock::new(T0))
            .max_lead(Duration::from_millis(10))
            .build_per_thread(1)
            .unwrap(),
        );
        let holder = {
            let g = Arc::clone(&g);
            thread::spawn(move || {
                let local = g.local().unwrap();
                let mut issued: Vec<Id> = Vec::new();
                for _ in 0..3 {
                    match local.try_next_id() {
                        Ok(id) => issued.push(id),
                        Err(Error::LeaseLost { .. }) => break,
                        Err(e) => panic!("{e}"),
                    }
                }
                issued
            })
        };
        let sealer = {
            let g = Arc::clone(&g);
            thread::spawn(move || g.loom_seal())
        };
        let issued = holder.join().unwrap();
        let sealed = sealer.join().unwrap();
        let layout = g.layout().clone();
        for id in &issued {
            let tick = id.parts(&layout).unwrap().tick();
            assert!(
                tick <= sealed,
                "{id:?} in tick {tick}, past the seal's {sealed}"
            );
        }
        assert!(issued.windows(2).all(|w| w[0] < w[1]));
    });
}
