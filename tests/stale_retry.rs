//! A caller that lost a compare-exchange waits, then steps once from the state it had before
//! the wait (stale). These tests put another caller's work and a clock move exactly into that
//! window, through a clock whose readings run scripted actions, and check that the stale
//! step's answer is never the call's answer when the current state would issue.
//!
//! The step is not monotone in the state: from a state in an earlier tick, a jump to the
//! clock's tick starts at the tick's start offset; from a state a borrow carried into the
//! clock's tick, it goes on from just above the carry, which may be below the offset. A batch
//! from the stale state then runs further than the same batch from the current one.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use monoflake::{Error, Generator, Layout, ManualClock, TimeSource};

#[path = "common/scripted.rs"]
mod scripted;
use scripted::Scripted;

const EPOCH_MS: u64 = 1_700_000_000_000;
const MS: u64 = 1_000_000;
/// A tick whose start offset (3 offset bits) is 7, the largest: 510 = 2^9 - 2.
const T: u64 = 510;

/// 4 sequence bits (16 per tick), 1 ms ticks, `time_bits` wide.
fn layout(time_bits: u32) -> Layout {
    Layout::builder()
        .time_bits(time_bits)
        .sequence_bits(4)
        .node_field("n", 4)
        .epoch_ms(EPOCH_MS)
        .tick_ms(1)
        .build()
        .unwrap()
}

/// The clock at `ticks` ticks after the epoch and `frac_ns` into the tick.
fn at(ticks: u64, frac_ns: u64) -> u64 {
    (EPOCH_MS + ticks) * MS + frac_ns
}

/// An ID's (tick, sequence).
fn tick_and_sequence(layout: &Layout, id: monoflake::Id) -> (u64, u64) {
    let p = id.parts(layout).unwrap();
    (p.tick(), p.sequence())
}

/// Tick `T` starts its sequence at 7 with three offset bits (checked, not assumed).
fn offset_of_t(time_bits: u32) -> u64 {
    let layout = layout(time_bits);
    let probe = Generator::builder(layout.clone())
        .clock(ManualClock::new(EPOCH_MS + T))
        .start_offset_bits(3)
        .build()
        .unwrap();
    tick_and_sequence(&layout, probe.try_next_id().unwrap()).1
}

/// A generator with a two-tick lead whose state is `(T - 1, 0)`: carried there by a borrow,
/// below the tick's start offset. Returns it with its clock at `T - 1` and a half.
fn carried_into_t_minus_1(time_bits: u32) -> (Arc<Generator<Scripted>>, Scripted, Layout) {
    let layout = layout(time_bits);
    let clock = Scripted::new(at(T - 2, 900_000));
    let g = Arc::new(
        Generator::builder(layout.clone())
            .clock(clock.clone())
            .start_offset_bits(3)
            .max_lead(Duration::from_millis(2))
            .build()
            .unwrap(),
    );
    loop {
        let id = g.try_next_id().unwrap();
        if tick_and_sequence(&layout, id).0 == T - 1 {
            assert_eq!(tick_and_sequence(&layout, id), (T - 1, 0));
            break;
        }
    }
    clock.set_ns(at(T - 1, 500_000));
    (g, clock, layout)
}

/// The script of one `try_next_ids(27)` from state `(T - 1, 0)`:
/// 1. its first reading (before it loads the state): nothing;
/// 2. the precise reading its borrow asks for: another caller takes 17 IDs, up to `(T, 1)`, so
///    its compare-exchange (to `(T, 11)`) fails;
/// 3. the reading after its wait: the clock moves to the start of `T`;
/// 4. the precise reading again: nothing.
///
/// From the stale state `(T - 1, 0)` at `T` the step jumps to `(T, 7)` and runs 27 to
/// `(T + 2, 1)`; from the current `(T, 1)` it runs to `(T + 1, 12)`.
fn script_the_race(g: &Arc<Generator<Scripted>>, clock: &Scripted) {
    let other = Arc::clone(g);
    let c = clock.clone();
    clock.script(vec![
        Box::new(|| {}),
        Box::new(move || {
            let ids: Vec<_> = other.try_next_ids(17).unwrap().collect();
            assert_eq!(ids.len(), 17);
        }),
        Box::new(move || c.set_ns(at(T, 0))),
        Box::new(|| {}),
    ]);
}

/// The race on a generator with `time_bits` bits of time: one `try_next_ids(27)` that lost its
/// compare-exchange issues 27 values from `(T, 2)` to `(T + 1, 12)`, in order, as the current
/// state does. Returns the generator.
fn the_batch_issues_from_the_current_state(time_bits: u32) -> Arc<Generator<Scripted>> {
    assert_eq!(offset_of_t(time_bits), 7);
    let (g, clock, layout) = carried_into_t_minus_1(time_bits);
    script_the_race(&g, &clock);
    let got = g.try_next_ids(27);
    assert_eq!(clock.hooks_left(), 0, "the script ran");
    let ids: Vec<_> = match got {
        Ok(ids) => ids.collect(),
        Err(e) => panic!("the current state (T, 1) issues 27 at T, but: {e:?}"),
    };
    assert_eq!(ids.len(), 27);
    assert_eq!(tick_and_sequence(&layout, ids[0]), (T, 2));
    assert_eq!(tick_and_sequence(&layout, ids[26]), (T + 1, 12));
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    g
}

/// A batch that lost its compare-exchange, with the lead at `T + 2`: the stale step would
/// stop at the lead (its last value in slot 1 of `T + 2`, which opens 1/16 of a tick into `T`)
/// while the current state issues within `T + 1`.
#[test]
fn a_stale_step_after_a_wait_does_not_refuse_a_batch_the_current_state_issues() {
    the_batch_issues_from_the_current_state(41);
}

/// The same with a 9-bit time field (the last tick is `T + 1`): the stale step would run past
/// the time field and report `Exhausted` — a wrong variant: the current state issues.
#[test]
fn a_stale_step_after_a_wait_does_not_report_exhausted_when_the_current_state_issues() {
    let g = the_batch_issues_from_the_current_state(9);
    // Not pinned: the generator goes on issuing within the time field.
    assert!(g.try_next_ids(3).is_ok());
    // And the time field's end is where it is: the next carry would leave it.
    assert!(matches!(g.try_next_id(), Err(Error::Exhausted { .. })));
}

/// Three threads taking batches of 1 to 20 and single IDs from a generator of 16 values per
/// tick, three offset bits and a two-tick lead, while a fourth moves the clock on a tick at a
/// time (so ticks are entered by borrows below their offsets, and by the clock at them):
/// every batch is a run of consecutive values, no value is issued twice, each thread's IDs
/// increase, and the only refusal is `WouldBlock` (the time field is far from its end).
#[test]
fn racing_batches_with_start_offsets_and_a_moving_clock_stay_contiguous_and_unique() {
    let layout = layout(41);
    let clock = Arc::new(ManualClock::new(EPOCH_MS + 1_000));
    let g = Generator::builder(layout.clone())
        .clock(Arc::clone(&clock))
        .start_offset_bits(3)
        .max_lead(Duration::from_millis(2))
        .build()
        .unwrap();
    let done = AtomicU64::new(0);
    let state = |id: monoflake::Id| {
        let (tick, seq) = tick_and_sequence(&layout, id);
        tick << 4 | seq
    };
    let runs: Vec<Vec<u64>> = std::thread::scope(|s| {
        s.spawn(|| {
            while done.load(Ordering::SeqCst) < 3 {
                clock.advance_ms(1);
                std::thread::yield_now();
            }
        });
        let workers: Vec<_> = (0..3u64)
            .map(|t| {
                let (g, done, state) = (&g, &done, &state);
                s.spawn(move || {
                    let mut mine = Vec::new();
                    for i in 0..20_000u64 {
                        let n = (i * 7 + t * 3) % 21;
                        let got = if n == 0 {
                            g.try_next_id().map(|id| vec![id])
                        } else {
                            g.try_next_ids(n).map(|ids| ids.collect::<Vec<_>>())
                        };
                        match got {
                            Ok(ids) => {
                                let values: Vec<u64> = ids.into_iter().map(state).collect();
                                assert_eq!(values.len() as u64, n.max(1));
                                assert!(
                                    values.windows(2).all(|w| w[1] == w[0] + 1),
                                    "a batch is not contiguous: {values:?}"
                                );
                                mine.extend(values);
                            }
                            Err(Error::WouldBlock { .. }) => {}
                            Err(e) => panic!("unexpected refusal: {e:?}"),
                        }
                    }
                    done.fetch_add(1, Ordering::SeqCst);
                    mine
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let mut all = Vec::new();
    for run in &runs {
        assert!(
            run.windows(2).all(|w| w[0] < w[1]),
            "a thread's IDs went back"
        );
        all.extend_from_slice(run);
    }
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "a value was issued twice");
}

/// Without start offsets, with a clock stepped back: another caller took `(9, 0)` at 9 while
/// this one waited; then the clock reads 4. From the stale full `(5, 3)` the step would borrow
/// tick 6, beyond the lead (1 tick) of 4, and refuse; from the current `(9, 0)` it goes on in
/// the tick the state holds, as a clock behind the state always does: `(9, 1)`.
#[test]
fn a_stale_step_after_a_wait_does_not_refuse_when_the_clock_stepped_back() {
    let layout = Layout::builder()
        .sequence_bits(2)
        .node_field("n", 4)
        .epoch_ms(EPOCH_MS)
        .build()
        .unwrap();
    let clock = Scripted::new(at(5, 0));
    let g = Arc::new(
        Generator::builder(layout.clone())
            .clock(clock.clone())
            .max_lead(Duration::from_millis(1))
            .build()
            .unwrap(),
    );
    for s in 0..4 {
        assert_eq!(tick_and_sequence(&layout, g.try_next_id().unwrap()), (5, s));
    }
    let other = Arc::clone(&g);
    let (c1, c2) = (clock.clone(), clock.clone());
    let l = layout.clone();
    // 1. the common case's reading (no room in tick 5: nothing to do);
    // 2. the precise reading the borrow of tick 6 asks for: the clock moves to 9 and another
    //    caller takes (9, 0), so this one's compare-exchange (to (9, 0) too) fails;
    // 3. the reading after the wait: the clock is stepped back to 4.
    clock.script(vec![
        Box::new(|| {}),
        Box::new(move || {
            c1.set_ns(at(9, 0));
            assert_eq!(tick_and_sequence(&l, other.try_next_id().unwrap()), (9, 0));
        }),
        Box::new(move || c2.set_ns(at(4, 0))),
    ]);
    let got = g.try_next_id();
    assert_eq!(clock.hooks_left(), 0, "the script ran");
    match got {
        Ok(id) => assert_eq!(tick_and_sequence(&layout, id), (9, 1)),
        Err(e) => panic!("the current state (9, 0) issues (9, 1), but: {e:?}"),
    }
}
