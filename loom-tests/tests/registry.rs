//! loom models of the per-thread generator's thread-local registry and of its slots' reuse:
//! numbers parked and brought back when a thread switches generators, slots given back when a
//! thread exits, a slot reused after its holder borrowed ticks, a handle's iterator lending its
//! numbers, and a seal racing a give-back.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p monoflake-loom-tests --release --test registry`
//!
//! Each model has a deliberately broken build of the library it must fail against (named in
//! its docs); `scripts/mutants.sh` builds each and checks that its model fails.
#![cfg(loom)]

use std::sync::Arc;
use std::time::Duration;

use loom::thread;
use monoflake::{Error, Generator, Id, Layout, ManualClock, PerThread};

const T0: u64 = 1_700_000_000_000;

/// A generator with one slot on a layout of `sequence_bits` sequence bits at a clock frozen at
/// `T0`, with a lead of 10 ms.
fn one_slot(sequence_bits: u32) -> Arc<PerThread<ManualClock>> {
    Arc::new(
        Generator::builder(
            Layout::builder()
                .epoch_ms(Layout::twitter().epoch_ms())
                .sequence_bits(sequence_bits)
                .build()
                .unwrap(),
        )
        .clock(ManualClock::new(T0))
        .max_lead(Duration::from_millis(10))
        .build_per_thread(1)
        .unwrap(),
    )
}

/// Retries `call` while every slot is held (another thread has it), yielding to loom.
fn when_free<T>(mut call: impl FnMut() -> Result<T, Error>) -> T {
    loop {
        match call() {
            Err(Error::NoFreeSlot { .. }) => thread::yield_now(),
            other => return other.unwrap(),
        }
    }
}

/// `ids`, which must be distinct, as (ms after `T0`, sequence), sorted.
fn distinct(ids: &[Id], layout: &Layout) -> Vec<(u64, u64)> {
    let mut all: Vec<(u64, u64)> = ids
        .iter()
        .map(|id| {
            let p = id.parts(layout).unwrap();
            (p.unix_ms() - T0, p.sequence())
        })
        .collect();
    all.sort_unstable();
    let n = all.len();
    all.dedup();
    assert_eq!(all.len(), n, "an ID issued twice: {ids:?}");
    all
}

/// A thread switches between two generators (A, B, A, B: A's numbers parked, brought back,
/// parked again) and exits, giving A's slot back from where it was parked; a second thread
/// waits for the slot and issues two more: A's four IDs are exactly the tick's four values. Broken build: `monoflake_broken_park` (parking does not
/// save the numbers in use).
#[test]
fn numbers_parked_and_brought_back_go_on_where_they_were() {
    loom::model(|| {
        let a = one_slot(2);
        let b = one_slot(2);
        let first = {
            let (a, b) = (Arc::clone(&a), Arc::clone(&b));
            thread::spawn(move || {
                let a1 = when_free(|| a.try_next_id());
                b.try_next_id().unwrap();
                let a2 = a.try_next_id().unwrap();
                b.try_next_id().unwrap();
                [a1, a2]
            })
        };
        let second = {
            let a = Arc::clone(&a);
            thread::spawn(move || [when_free(|| a.try_next_id()), a.try_next_id().unwrap()])
        };
        let (first, second) = (first.join().unwrap(), second.join().unwrap());
        let all = distinct(&[first, second].concat(), a.layout());
        assert_eq!(all, [(0, 0), (0, 1), (0, 2), (0, 3)]);
    });
}

/// A thread issues two IDs by the implicit path and exits; its slot goes back with the state
/// it reached, and a second thread waiting for the slot goes on after it. Broken build:
/// `monoflake_mutant_exit_stale` (an exiting thread gives back the numbers it took the slot
/// with).
#[test]
fn a_thread_exiting_gives_its_slot_back_at_its_last_state() {
    loom::model(|| {
        let g = one_slot(2);
        let spawn = |g: Arc<PerThread<ManualClock>>| {
            thread::spawn(move || [when_free(|| g.try_next_id()), g.try_next_id().unwrap()])
        };
        let (a, b) = (spawn(Arc::clone(&g)), spawn(Arc::clone(&g)));
        let ids = [a.join().unwrap(), b.join().unwrap()].concat();
        assert_eq!(distinct(&ids, g.layout()), [(0, 0), (0, 1), (0, 2), (0, 3)]);
    });
}

/// A thread fills its tick and borrows the next (one sequence bit: two values per tick), issues
/// both values there and exits; a second thread waiting for the slot goes on after the
/// borrowed tick's last value, not from its first (which is all the move into it published).
/// Broken build: `monoflake_mutant_giveback_unpublished` (the give-back does not publish the
/// last state).
#[test]
fn a_slot_reused_after_its_holder_borrowed_a_tick() {
    loom::model(|| {
        let g = one_slot(1);
        let holder = {
            let g = Arc::clone(&g);
            thread::spawn(move || {
                let first = when_free(|| g.try_next_id());
                let rest: Vec<Id> = (0..3).map(|_| g.try_next_id().unwrap()).collect();
                [vec![first], rest].concat()
            })
        };
        let next = {
            let g = Arc::clone(&g);
            thread::spawn(move || vec![when_free(|| g.try_next_id())])
        };
        let (holder, next) = (holder.join().unwrap(), next.join().unwrap());
        let all = distinct(&[holder.clone(), next.clone()].concat(), g.layout());
        assert_eq!(all.len(), 5);
        // Whoever held the slot second went on after the other's last value.
        assert!(
            next[0] > holder[3] || next[0] < holder[0],
            "{holder:?} {next:?}"
        );
    });
}

/// A handle lends its numbers to an iterator, which issues two IDs and is forgotten (never
/// settles); the handle is dropped and the slot goes to a second thread: it goes on after the
/// rest of the lent tick, never from the value the iterator was lent at. Broken build:
/// `monoflake_broken_lend` (lending leaves the handle's numbers where they were).
#[test]
fn numbers_lent_to_an_iterator_are_never_issued_again() {
    loom::model(|| {
        let g = one_slot(2);
        let lender = {
            let g = Arc::clone(&g);
            thread::spawn(move || {
                let mut local = when_free(|| g.local());
                let mut ids = local.ids();
                let lent = [ids.next().unwrap().unwrap(), ids.next().unwrap().unwrap()];
                std::mem::forget(ids);
                drop(local);
                lent
            })
        };
        let next = {
            let g = Arc::clone(&g);
            thread::spawn(move || {
                let local = when_free(|| g.local());
                [local.try_next_id().unwrap()]
            })
        };
        let (lent, next) = (lender.join().unwrap(), next.join().unwrap());
        distinct(&[&lent[..], &next[..]].concat(), g.layout());
    });
}

/// A holder issues one ID and gives its slot back while another thread seals the generator
/// (as a lease's release does): the seal's tick bounds the ID, and the slot stays sealed
/// whichever came first — a second seal finds nothing but sealed slots. Broken build:
/// `monoflake_broken_seal_giveback` (the give-back publishes with a plain store, which can
/// overwrite the seal).
#[test]
fn a_seal_racing_a_give_back_leaves_the_slot_sealed() {
    loom::model(|| {
        let g = one_slot(2);
        let holder = {
            let g = Arc::clone(&g);
            thread::spawn(move || {
                let local = g.local().unwrap();
                match local.try_next_id() {
                    Ok(id) => Some(id),
                    Err(Error::LeaseLost { .. }) => None,
                    Err(e) => panic!("{e}"),
                }
            })
        };
        let sealer = {
            let g = Arc::clone(&g);
            thread::spawn(move || g.loom_seal())
        };
        let (issued, sealed) = (holder.join().unwrap(), sealer.join().unwrap());
        if let Some(id) = issued {
            let tick = id.parts(g.layout()).unwrap().tick();
            assert!(
                tick <= sealed,
                "{id:?} in tick {tick}, past the seal's {sealed}"
            );
        }
        let all_sealed = g.loom_seal();
        assert!(
            all_sealed > sealed,
            "a slot was unsealed: a second seal found tick {all_sealed}"
        );
    });
}
