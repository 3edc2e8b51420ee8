//! The slots' words, the fence on a thread's numbers and the seal, seen from inside.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use crate::generator::test_clock::NsClock;
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

/// The fence stops an iterator's numbers, kept in registers, as it stops the handle's: the
/// common case issues inside the limit's tick; a borrow past the limit is refused, and so is
/// every later item; a handle goes on where the iterator stopped once the fence opens.
#[test]
fn the_fence_stops_an_iterator() {
    let clock = Arc::new(ManualClock::new(T0));
    let g = Generator::builder(small())
        .clock(Arc::clone(&clock))
        .build_per_thread(4)
        .unwrap();
    let base = &g.shared().base;
    let tick = base.now_of(T0 * 1_000_000).tick;
    base.fence().set(tick, u64::MAX);
    let mut local = g.local().unwrap();
    let mut ids = local.ids();
    let run: Vec<Id> = (&mut ids).take(4).map(Result::unwrap).collect();
    assert!(run.windows(2).all(|w| w[0] < w[1]));
    // The slot's four values are used: the next one borrows tick + 1, past the limit.
    assert!(matches!(ids.next(), Some(Err(Error::LeaseLost { .. }))));
    assert!(matches!(ids.next(), Some(Err(Error::LeaseLost { .. }))));
    base.fence().set(tick + 1, u64::MAX);
    let next = ids.next().unwrap().unwrap();
    assert_eq!(next.parts(&small()).unwrap().tick(), tick + 1);
    // The deadline is the clock's tick: the common case (room left in tick + 1) refuses.
    base.fence().set(tick + 1, tick);
    assert!(matches!(ids.next(), Some(Err(Error::LeaseLost { .. }))));
    drop(ids);
    base.fence().set(tick + 1, u64::MAX);
    assert_eq!(local.next_id().unwrap().as_u64(), next.as_u64() + 1);
}

/// A seal racing four threads that issue (two by handles, one by a handle's iterator, one by
/// the thread-local way in) on a layout of four values per tick per slot, so that threads move
/// into later ticks all the time: every ID any thread issued, before or after the seal, lies in a tick at or below the
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
            let workers: Vec<_> = (0..4)
                .map(|k| {
                    let g = &g;
                    s.spawn(move || {
                        // Every ID up to the closed fence's error.
                        let until_lost = |mut next: Box<dyn FnMut() -> Result<Id, Error> + '_>| {
                            let mut run = Vec::new();
                            loop {
                                match next() {
                                    Ok(id) => run.push(id),
                                    Err(Error::LeaseLost { .. }) => break run,
                                    Err(e) => panic!("round {round}: {e}"),
                                }
                            }
                        };
                        match k {
                            0 | 1 => {
                                let local = g.local().unwrap();
                                until_lost(Box::new(|| local.next_id()))
                            }
                            2 => {
                                let mut local = g.local().unwrap();
                                let mut ids = local.ids();
                                until_lost(Box::new(move || ids.next().unwrap()))
                            }
                            _ => until_lost(Box::new(|| g.next_id())),
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

/// How a model test asks a slot for IDs.
#[derive(Clone, Copy, Debug)]
enum Way {
    /// [`LocalSlot::try_next_id`](super::LocalSlot::try_next_id), one call each.
    Handle,
    /// One [`LocalIds`](super::LocalIds) for the whole test, across clock moves (it waits at
    /// the lead as `next_id` does, for at most a zero `max_wait`).
    Iterator,
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// A slot's numbers (common case and general step) against a model that only ever takes
    /// the general step: the same IDs and the same refusals, call by call, for clocks that
    /// jump, stand still and go back, across small sequences, long ticks, start offsets,
    /// floors and slot counts — by the handle's calls and by one iterator that lives through
    /// every move of the clock.
    #[test]
    fn a_slot_issues_what_the_general_step_issues(
        iterator in proptest::bool::ANY,
        sequence_bits in 2u32..=5,
        slot_bits in 1u32..=1,
        tick_ms in proptest::sample::select(vec![1u64, 7, 1_000]),
        offset_bits in 0u32..3,
        lead_ticks in 0u64..3,
        floor in proptest::option::of(0u64..64),
        start_ticks in 0u64..64,
        steps in proptest::collection::vec(
            (proptest::prop_oneof![
                3 => 0i64..1,
                3 => -3i64..3,
                2 => -2_000_000i64..2_000_000,
            ], 0u32..3, 1usize..8),
            1..40,
        ),
    ) {
        let way = if iterator { Way::Iterator } else { Way::Handle };
        slot_against_the_step(
            way, sequence_bits, slot_bits, tick_ms, offset_bits, lead_ticks, floor, start_ticks,
            &steps,
        )?;
    }
}

/// The body of `a_slot_issues_what_the_general_step_issues`.
#[allow(clippy::too_many_arguments)]
fn slot_against_the_step(
    way: Way,
    sequence_bits: u32,
    slot_bits: u32,
    tick_ms: u64,
    offset_bits: u32,
    lead_ticks: u64,
    floor: Option<u64>,
    start_ticks: u64,
    steps: &[(i64, u32, usize)],
) -> Result<(), proptest::test_runner::TestCaseError> {
    use super::super::step::{Now, Step, next_state};
    let epoch_ms = 1_288_834_974_657u64;
    let layout = Layout::builder()
        .time_bits(41)
        .sequence_bits(sequence_bits)
        .node_field("n", 1)
        .tick_ms(tick_ms)
        .epoch_ms(epoch_ms)
        .build()
        .unwrap();
    let tick_ns = tick_ms * 1_000_000;
    let epoch_ns = epoch_ms * 1_000_000;
    let now = Arc::new(std::sync::atomic::AtomicU64::new(
        (1_700_000_000_000 + start_ticks * tick_ms) * 1_000_000,
    ));
    let mut builder = Generator::builder(layout)
        .clock(NsClock(Arc::clone(&now)))
        .node(1)
        .max_lead(Duration::from_millis(lead_ticks * tick_ms))
        .max_wait(Duration::ZERO)
        .start_offset_bits(offset_bits);
    if let Some(f) = floor {
        builder = builder.resume_after(f + (1_700_000_000_000 - epoch_ms) / tick_ms);
    }
    let g = builder.build_per_thread(1 << slot_bits).unwrap();
    let mut local = g.local().unwrap();
    let shared = Arc::clone(g.shared());
    let p = shared.base.params;
    let mut model = local.run.state();
    // The ID of a state in the handle's slot, worked out apart from the handle (which the
    // iterator borrows).
    let (out, fixed) = (shared.base.out, shared.fixed(local.slot()));
    let id_of = |state: u64| out.id(state).as_u64() | fixed;
    let mut issue: Box<dyn FnMut() -> Result<Id, Error>> = match way {
        Way::Handle => {
            let local = &local;
            Box::new(move || local.try_next_id())
        }
        Way::Iterator => {
            let mut ids = local.ids();
            Box::new(move || ids.next().unwrap())
        }
    };
    for &(delta, unit, calls) in steps {
        let t = now.load(Relaxed);
        let next = match unit {
            0 => t.saturating_add_signed(delta),
            1 => t.saturating_add_signed(delta.signum() * tick_ns as i64 + delta % 3),
            _ => {
                let since = t - epoch_ns;
                epoch_ns + since / tick_ns * tick_ns + tick_ns - 1 + (delta % 3).unsigned_abs()
            }
        };
        now.store(next, Relaxed);
        for _ in 0..calls {
            let since = now.load(Relaxed) - epoch_ns;
            let reading = Now {
                tick: since / tick_ns,
                rem_ns: since % tick_ns,
            };
            let want = next_state(model, reading, 1, &p);
            let got = issue();
            match (want, &got, way) {
                (Step::Issue { first, last }, Ok(id), _) => {
                    proptest::prop_assert_eq!(id.as_u64(), id_of(first));
                    model = last;
                }
                (Step::Lead { .. }, Err(Error::WouldBlock { .. }), Way::Handle)
                | (Step::Lead { .. }, Err(Error::TimedOut { .. }), Way::Iterator)
                | (Step::Exhausted { .. }, Err(Error::Exhausted { .. }), _) => {}
                _ => proptest::prop_assert!(false, "the step says {:?}, the slot {:?}", want, got),
            }
        }
    }
    // The iterator (if any) gives the numbers back: the handle is where the model is.
    drop(issue);
    proptest::prop_assert_eq!(local.run.state(), model);
    Ok(())
}

/// A thread's key matches on the common path exactly when it names the same shared parts and
/// the process is the one that built them: for 64-aligned addresses next to each other and
/// apart in every bit, and every generation up to well past the folded ones (0 is a child that
/// has not armed one yet).
#[test]
fn a_key_matches_only_its_own_parts_in_its_own_process() {
    use super::{MAX_FOLDED_GENERATION, is_key_now, key_of};
    let base = 0x7f3a_5c00_1240u64;
    let mut addrs = vec![base, base + 64, base - 64];
    addrs.extend([6, 7, 11, 12, 31, 46, 56].map(|bit| base ^ 1 << bit));
    for &a in &addrs {
        assert_eq!(a % 64, 0);
        for &b in &addrs {
            for built in 1..80 {
                let key = key_of(a, built);
                assert_ne!(key, 0, "0 is no key");
                for now in 0..80 {
                    let expected = a == b && built == now && built <= MAX_FOLDED_GENERATION;
                    assert_eq!(
                        is_key_now(key, b, now),
                        expected,
                        "{a:#x} built {built}, {b:#x} now {now}"
                    );
                }
                // And the highest generations, where the word is all but full.
                for now in [u64::MAX, u64::MAX - 1, 1 << 63, 64 + built, 128 + built] {
                    assert!(!is_key_now(key, b, now), "{a:#x} built {built}, now {now}");
                }
            }
        }
    }
}

/// Generators made and dropped one after another on one thread, each used once: the memory of
/// a dropped one is soon another's, and each ID carries the node of the generator asked.
#[test]
fn a_generator_in_a_dropped_ones_memory_issues_its_own_ids() {
    let layout = Layout::twitter();
    let mut seen = std::collections::HashSet::new();
    for i in 0..300u64 {
        let node = i % 1024;
        let g = Generator::builder(layout.clone())
            .node(node)
            .build_per_thread(2)
            .unwrap();
        seen.insert(Arc::as_ptr(g.shared()) as usize);
        for _ in 0..3 {
            let id = g.next_id().unwrap();
            assert_eq!(id.parts(&layout).unwrap().node(), node, "generator {i}");
        }
    }
    assert!(
        seen.len() < 300,
        "no memory was reused: the case is not exercised"
    );
}
