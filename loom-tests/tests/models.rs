//! loom models of the generator: every interleaving (up to `LOOM_MAX_PREEMPTIONS`) of the same
//! code that ships, with the atomics swapped for loom's by `--cfg loom`.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p monoflake-loom-tests --release`
//!
//! Each model asserts uniqueness and per-thread strict increase. `.ci/run` also builds the
//! generator with `--cfg monoflake_broken_cas` (the compare-exchange replaced by a plain store)
//! and checks that these models then fail.
#![cfg(loom)]

use std::sync::Arc;
use std::time::Duration;

use loom::thread;
use monoflake::{Error, Generator, Id, Layout, ManualClock};

const T0: u64 = 1_700_000_000_000;

/// Two sequence bits: four IDs per tick.
fn two_bit_layout() -> Layout {
    Layout::builder()
        .epoch_ms(Layout::twitter().epoch_ms())
        .sequence_bits(2)
        .node_field("n", 2)
        .build()
        .unwrap()
}

/// One sequence bit: two IDs per tick, so two threads taking two IDs each force the carry.
fn one_bit_layout() -> Layout {
    Layout::builder()
        .epoch_ms(Layout::twitter().epoch_ms())
        .sequence_bits(1)
        .node_field("n", 2)
        .build()
        .unwrap()
}

fn assert_unique_and_increasing(runs: &[Vec<Id>]) {
    for run in runs {
        assert!(
            run.windows(2).all(|w| w[0] < w[1]),
            "a thread's IDs did not increase: {run:?}"
        );
    }
    let mut all: Vec<Id> = runs.iter().flatten().copied().collect();
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "duplicate IDs: {runs:?}");
}

/// A generator on `layout` at a clock frozen at `T0`, with a lead of 10 ms.
fn at_a_frozen_clock(layout: &Layout) -> Arc<Generator<ManualClock>> {
    Arc::new(
        Generator::builder(layout.clone())
            .clock(ManualClock::new(T0))
            .max_lead(Duration::from_millis(10))
            .build()
            .unwrap(),
    )
}

/// Two threads take two IDs each from one generator on `layout` at a frozen clock (a lead of
/// 10 ms): their IDs, checked unique and increasing per thread.
fn two_threads_take_two_each(layout: &Layout) -> [Vec<Id>; 2] {
    let g = at_a_frozen_clock(layout);
    let spawn = |g: Arc<Generator<ManualClock>>| {
        thread::spawn(move || (0..2).map(|_| g.try_next_id().unwrap()).collect::<Vec<_>>())
    };
    let a = spawn(Arc::clone(&g));
    let b = spawn(Arc::clone(&g));
    let runs = [a.join().unwrap(), b.join().unwrap()];
    assert_unique_and_increasing(&runs);
    runs
}

#[test]
fn two_threads_force_the_sequence_carry() {
    loom::model(|| {
        let runs = two_threads_take_two_each(&one_bit_layout());
        // Four IDs at a frozen clock fill tick 0 and carry into tick 1.
        let layout = one_bit_layout();
        let ticks: Vec<u64> = runs
            .iter()
            .flatten()
            .map(|id| id.parts(&layout).unwrap().unix_ms() - T0)
            .collect();
        assert_eq!(ticks.iter().filter(|&&t| t == 1).count(), 2);
    });
}

#[test]
fn clock_jumps_forward_then_back_while_two_threads_generate() {
    loom::model(|| {
        let clock = Arc::new(ManualClock::new(T0));
        let g = Arc::new(
            Generator::builder(one_bit_layout())
                .clock(Arc::clone(&clock))
                .max_lead(Duration::from_millis(10))
                .build()
                .unwrap(),
        );
        let mover = thread::spawn(move || {
            clock.advance_ms(5);
            clock.rewind_ms(50);
        });
        // Behind the state by more than the lead, a full sequence must report WouldBlock
        // rather than borrow further; every other outcome is an ID.
        let spawn = |g: Arc<Generator<Arc<ManualClock>>>| {
            thread::spawn(move || {
                (0..2)
                    .filter_map(|_| match g.try_next_id() {
                        Ok(id) => Some(id),
                        Err(Error::WouldBlock { .. }) => None,
                        Err(e) => panic!("unexpected {e}"),
                    })
                    .collect::<Vec<_>>()
            })
        };
        let a = spawn(Arc::clone(&g));
        let b = spawn(Arc::clone(&g));
        mover.join().unwrap();
        let runs = [a.join().unwrap(), b.join().unwrap()];
        assert_unique_and_increasing(&runs);
        let layout = one_bit_layout();
        for run in &runs {
            let t: Vec<u64> = run
                .iter()
                .map(|id| id.parts(&layout).unwrap().unix_ms())
                .collect();
            assert!(t.windows(2).all(|w| w[0] <= w[1]), "time went back: {t:?}");
        }
    });
}

#[test]
fn three_threads_against_zero_lead() {
    loom::model(|| {
        let g = Arc::new(
            Generator::builder(one_bit_layout())
                .clock(ManualClock::new(T0))
                .max_lead(Duration::ZERO)
                .build()
                .unwrap(),
        );
        let handles: Vec<_> = (0..3)
            .map(|_| {
                let g = Arc::clone(&g);
                thread::spawn(move || g.try_next_id())
            })
            .collect();
        let results: Vec<Result<Id, Error>> =
            handles.into_iter().map(|h| h.join().unwrap()).collect();
        // A frozen clock and no lead: exactly the two values of the current tick are issued.
        let ok: Vec<Id> = results
            .iter()
            .filter_map(|r| r.as_ref().ok().copied())
            .collect();
        assert_eq!(ok.len(), 2, "{results:?}");
        assert_ne!(ok[0], ok[1]);
        let blocked = results
            .iter()
            .filter(|r| matches!(r, Err(Error::WouldBlock { .. })))
            .count();
        assert_eq!(blocked, 1, "{results:?}");
    });
}

#[test]
fn a_batch_races_single_ids() {
    loom::model(|| {
        let layout = Layout::builder()
            .epoch_ms(Layout::twitter().epoch_ms())
            .sequence_bits(2)
            .build()
            .unwrap();
        let g = Arc::new(
            Generator::builder(layout)
                .clock(ManualClock::new(T0))
                .max_lead(Duration::from_millis(10))
                .build()
                .unwrap(),
        );
        let batch = {
            let g = Arc::clone(&g);
            thread::spawn(move || g.try_next_ids(3).unwrap().collect::<Vec<_>>())
        };
        let single = {
            let g = Arc::clone(&g);
            thread::spawn(move || (0..2).map(|_| g.try_next_id().unwrap()).collect::<Vec<_>>())
        };
        let runs = [batch.join().unwrap(), single.join().unwrap()];
        assert_unique_and_increasing(&runs);
        // The batch is one contiguous run.
        let b = &runs[0];
        assert_eq!(b[2].as_u64() - b[0].as_u64(), 2, "{b:?}");
    });
}

#[test]
fn a_release_racing_issuers_never_lets_an_id_past_the_seal() {
    loom::model(|| {
        let layout = one_bit_layout();
        let g = at_a_frozen_clock(&layout);
        let issuer = {
            let g = Arc::clone(&g);
            thread::spawn(move || {
                (0..2)
                    .filter_map(|_| g.try_next_id().ok())
                    .collect::<Vec<_>>()
            })
        };
        let sealer = {
            let g = Arc::clone(&g);
            thread::spawn(move || g.loom_seal())
        };
        let issued = issuer.join().unwrap();
        let (last_tick, last_seq) = sealer.join().unwrap();
        // What the release writes as the final reservation covers every ID issued.
        for id in &issued {
            let p = id.parts(&layout).unwrap();
            assert!(
                (p.tick(), p.sequence()) <= (last_tick, last_seq),
                "{id:?} past the seal"
            );
        }
        // And it is the last of them, when any was issued (on a frozen clock the state holds
        // nothing but the IDs issued).
        if let Some(last) = issued.iter().max() {
            let p = last.parts(&layout).unwrap();
            assert_eq!((p.tick(), p.sequence()), (last_tick, last_seq));
        }
        // Nothing is issued after it.
        assert!(g.try_next_id().is_err());
    });
}

/// Two threads at the paced lead limit (two sequence bits, a lead of one tick, a frozen clock
/// at the start of its tick): the last slot of the current tick and the first slot of the
/// next — the only one open yet — go to exactly one caller each; the other two calls are told
/// to wait less than a tick. Also exercises a paced slot lost to the other caller.
#[test]
fn two_threads_at_the_paced_lead_limit() {
    loom::model(|| {
        let layout = two_bit_layout();
        let g = Arc::new(
            Generator::builder(layout)
                .clock(ManualClock::new(T0))
                .max_lead(Duration::from_millis(1))
                .build()
                .unwrap(),
        );
        for _ in 0..3 {
            g.try_next_id().unwrap();
        }
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let g = Arc::clone(&g);
                thread::spawn(move || [g.try_next_id(), g.try_next_id()])
            })
            .collect();
        let results: Vec<Result<Id, Error>> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        let mut ok: Vec<Id> = results
            .iter()
            .filter_map(|r| r.as_ref().ok().copied())
            .collect();
        ok.sort_unstable();
        ok.dedup();
        assert_eq!(ok.len(), 2, "{results:?}");
        let waits = results
            .iter()
            .filter(|r| {
                matches!(r, Err(Error::WouldBlock { retry_after, .. })
                    if *retry_after < Duration::from_millis(1))
            })
            .count();
        assert_eq!(waits, 2, "{results:?}");
    });
}

/// One ID on the two-bit layout, then two threads taking `each` IDs while the clock moves on
/// by one tick: every interleaving gives unique IDs, increasing per thread, none beyond tick
/// `last_tick` (counted from the first).
fn race_across_a_tick(offset_bits: u32, each: usize, last_tick: u64) {
    loom::model(move || {
        let layout = two_bit_layout();
        let clock = Arc::new(ManualClock::new(T0));
        let g = Arc::new(
            Generator::builder(layout.clone())
                .clock(Arc::clone(&clock))
                .start_offset_bits(offset_bits)
                .max_lead(Duration::from_millis(10))
                .build()
                .unwrap(),
        );
        // The first ID enters tick 0 by the general step; the next ones stay in it.
        let first = g.try_next_id().unwrap();
        let spawn = |g: Arc<Generator<Arc<ManualClock>>>| {
            thread::spawn(move || {
                (0..each)
                    .map(|_| g.try_next_id().unwrap())
                    .collect::<Vec<_>>()
            })
        };
        let a = spawn(Arc::clone(&g));
        let b = spawn(Arc::clone(&g));
        clock.advance_ms(1);
        let runs = [vec![first], a.join().unwrap(), b.join().unwrap()];
        assert_unique_and_increasing(&runs);
        for id in runs.iter().flatten() {
            let t = id.parts(&layout).unwrap().unix_ms() - T0;
            assert!(
                t <= last_tick,
                "tick {t} is beyond the clock and the borrows"
            );
        }
    });
}

/// The common case (the clock inside the state's tick, room in its sequence: one comparison
/// and the compare-exchange) racing itself, the general step, and the clock moving on to the
/// next tick. Five IDs, four per tick: whether the clock moved on first or not, they fit in
/// ticks 0 and 1 (at most the fifth borrows tick 1).
#[test]
fn the_common_case_races_the_general_step_across_a_tick() {
    race_across_a_tick(0, 2, 1);
}

/// With a start offset, a tick entered by a borrow keeps counting from where the borrow left
/// it once the clock reaches it, while a tick the step jumps to starts at its offset: two
/// threads fill tick 0 and borrow tick 1 while the clock moves to tick 1, in every order.
/// Seven IDs, at least three per tick (an offset is 0 or 1 of four values): ticks 0 to 2.
#[test]
fn a_borrowed_tick_reached_by_the_clock_races_the_common_case() {
    race_across_a_tick(1, 3, 2);
}

/// A lease keeper raises the fence's limit (its only writes until it closes the fence, which
/// the seal model covers) while two threads issue on the one-bit layout with a frozen clock:
/// the clock's tick is full, the limit is that tick, and the keeper raises it by one (two
/// more IDs, borrowed). The limit, the deadline and the common case's one-word bound are three
/// relaxed stores, so an issuer may see any mix of old and new words. Every interleaving gives
/// unique IDs, increasing per thread, none past the highest limit set, and the refusals are
/// the fence's (the generator has no lease to name: `LeaseLost`).
#[test]
fn the_keeper_raising_the_fence_races_two_issuers() {
    loom::model(|| {
        let layout = one_bit_layout();
        let g = at_a_frozen_clock(&layout);
        let before = [g.try_next_id().unwrap(), g.try_next_id().unwrap()];
        let t0 = before[1].parts(&layout).unwrap().tick();
        g.loom_set_fence(0);
        let issuers: Vec<_> = (0..2)
            .map(|_| {
                let g = Arc::clone(&g);
                thread::spawn(move || [g.try_next_id(), g.try_next_id()])
            })
            .collect();
        let keeper = {
            let g = Arc::clone(&g);
            thread::spawn(move || g.loom_set_fence(1))
        };
        let results: Vec<[Result<Id, Error>; 2]> =
            issuers.into_iter().map(|h| h.join().unwrap()).collect();
        keeper.join().unwrap();
        for e in results.iter().flatten().filter_map(|r| r.as_ref().err()) {
            assert!(matches!(e, Error::LeaseLost { .. }), "{e:?}");
        }
        let mut runs: Vec<Vec<Id>> = results
            .iter()
            .map(|run| {
                run.iter()
                    .filter_map(|r| r.as_ref().ok().copied())
                    .collect()
            })
            .collect();
        for id in runs.iter().flatten() {
            assert_eq!(id.parts(&layout).unwrap().tick(), t0 + 1, "{runs:?}");
        }
        let issued = runs.iter().flatten().count();
        runs.push(before.to_vec());
        assert_unique_and_increasing(&runs);
        // Once the keeper's words are all in, the raised limit holds: the next ID is issued
        // unless the two IDs it allows were taken.
        match g.try_next_id() {
            Ok(id) => assert!(issued < 2 && runs.iter().flatten().all(|&x| x < id)),
            Err(e) => assert!(matches!(e, Error::LeaseLost { .. }) && issued == 2, "{e:?}"),
        }
    });
}

/// Two threads take two IDs each on the two-bit layout (four per tick) at a frozen clock. A
/// caller that loses a compare-exchange waits, then tries once from the state as it was
/// before the wait (which fails if the other issued meanwhile, and returns the current value)
/// and at once from the value found: in every interleaving the four IDs are exactly the four
/// values of the clock's tick, none skipped, none repeated, increasing per thread.
#[test]
fn a_loser_retries_from_the_old_state_then_from_the_one_it_found() {
    loom::model(|| {
        let layout = two_bit_layout();
        let runs = two_threads_take_two_each(&layout);
        let mut slots: Vec<(u64, u64)> = runs
            .iter()
            .flatten()
            .map(|id| {
                let p = id.parts(&layout).unwrap();
                (p.unix_ms() - T0, p.sequence())
            })
            .collect();
        slots.sort_unstable();
        assert_eq!(slots, [(0, 0), (0, 1), (0, 2), (0, 3)], "{runs:?}");
    });
}
