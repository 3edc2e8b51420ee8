//! The generator's invariants: unique, increasing, honest time, fail loud.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use monoflake::{CoarseClock, Error, Generator, Id, Layout, ManualClock, TimeSource};

mod common;

use common::hammer;

const T0: u64 = 1_700_000_000_000;

/// A layout of `bits` sequence bits and no node field, from Twitter's epoch, 1 ms ticks.
fn sequence_of(bits: u32) -> Layout {
    Layout::builder()
        .epoch_ms(Layout::twitter().epoch_ms())
        .sequence_bits(bits)
        .build()
        .unwrap()
}

/// The time fields of the next `n` IDs, counted from tick `from`.
fn next_ticks<C: TimeSource>(g: &Generator<C>, from: u64, n: usize) -> Vec<u64> {
    (0..n)
        .map(|_| g.try_next_id().unwrap().parts(g.layout()).unwrap().tick() - from)
        .collect()
}

#[test]
fn ten_million_ids_from_two_threads_are_distinct_and_increasing_per_thread() {
    let generator = Generator::new(Layout::twitter(), 1).unwrap();
    let all = hammer(&generator, 2, 5_000_000);
    assert_eq!(all.len(), 10_000_000);
    let layout = Layout::twitter();
    assert!(all.iter().all(|id| id.parts(&layout).unwrap().node() == 1));
}

#[test]
fn four_threads_on_a_wide_layout() {
    let layout = Layout::builder()
        .epoch_ms(Layout::twitter().epoch_ms())
        .node_field("n", 1)
        .sequence_bits(21)
        .build()
        .unwrap();
    let generator = Generator::new(layout, 1).unwrap();
    assert_eq!(hammer(&generator, 4, 500_000).len(), 2_000_000);
}

#[test]
fn clock_set_back_an_hour_mid_stream() {
    let clock = Arc::new(ManualClock::new(T0));
    let layout = Layout::twitter();
    let g = Generator::builder(layout.clone())
        .node(3)
        .clock(Arc::clone(&clock))
        .build()
        .unwrap();
    let mut ids = Vec::new();
    for i in 0..3000 {
        if i % 100 == 0 {
            clock.advance_ms(1);
        }
        if i == 1500 {
            clock.rewind_ms(3_600_000);
        }
        ids.push(g.try_next_id().unwrap());
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    let times: Vec<u64> = ids
        .iter()
        .map(|id| id.parts(&layout).unwrap().unix_ms())
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "an ID's time went back"
    );
    // While the clock is an hour behind, IDs stay in the last tick issued.
    assert_eq!(times[1499], T0 + 15);
    assert_eq!(times[2999], T0 + 15);
    // When the clock passes that tick again, the time follows it.
    clock.set_ms(T0 + 20);
    assert_eq!(
        g.try_next_id().unwrap().parts(&layout).unwrap().unix_ms(),
        T0 + 20
    );
}

#[test]
fn a_full_sequence_borrows_ticks_then_would_block_at_max_lead() {
    let clock = Arc::new(ManualClock::new(T0));
    // 2 sequence bits: 4 IDs per tick; lead of 3 ticks. At a frozen clock (at the start of its
    // tick) ticks +0 to +2 are whole; the last tick the lead allows, +3, is paced: one slot
    // per quarter of the clock's tick, so only its first slot is open yet.
    let layout = Layout::builder()
        .epoch_ms(Layout::twitter().epoch_ms())
        .sequence_bits(2)
        .node_field("n", 4)
        .build()
        .unwrap();
    let g = Generator::builder(layout.clone())
        .clock(Arc::clone(&clock))
        .max_lead(Duration::from_millis(3))
        .build()
        .unwrap();
    let now = layout.tick_at(T0);
    assert_eq!(
        next_ticks(&g, now, 13),
        [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3]
    );
    // The next slot opens a quarter of a tick later.
    assert!(matches!(
        g.try_next_id(),
        Err(Error::WouldBlock { retry_after, .. }) if retry_after == Duration::from_nanos(250_001)
    ));
    // At its lead limit the generator is busy, not broken: check() says so and takes no ID.
    let issued = g.stats().issued;
    g.check().unwrap();
    assert_eq!(g.stats().issued, issued);
    assert!(matches!(g.try_next_ids(5), Err(Error::WouldBlock { .. })));
    // The clock moves one tick: the rest of tick +3, and the first slot of the new last tick.
    clock.advance_ms(1);
    assert_eq!(next_ticks(&g, now, 4), [3, 3, 3, 4]);
    assert!(g.try_next_id().is_err());
    // The waiting call gives up after max_wait on a clock that stands still.
    let g2 = Generator::builder(layout)
        .clock(ManualClock::new(T0))
        .max_lead(Duration::ZERO)
        .max_wait(Duration::from_millis(20))
        .build()
        .unwrap();
    for _ in 0..4 {
        g2.next_id().unwrap();
    }
    assert!(matches!(g2.next_id(), Err(Error::TimedOut { .. })));
}

/// `max_lead` is a duration, counted in the layout's ticks and rounded down: 35 ms on 10 ms
/// ticks is a lead of 3 ticks, as 3 ms is on 1 ms ticks above.
#[test]
fn a_lead_counts_the_layouts_ticks_rounded_down() {
    let layout = Layout::builder()
        .epoch_ms(Layout::twitter().epoch_ms())
        .tick_ms(10)
        .sequence_bits(2)
        .build()
        .unwrap();
    // A clock frozen at the start of a tick, as above.
    let now = layout.tick_at(T0);
    let clock = Arc::new(ManualClock::new(layout.epoch_ms() + now * 10));
    let g = Generator::builder(layout.clone())
        .clock(Arc::clone(&clock))
        .max_lead(Duration::from_millis(35))
        .build()
        .unwrap();
    assert_eq!(
        next_ticks(&g, now, 13),
        [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3]
    );
    assert!(matches!(g.try_next_id(), Err(Error::WouldBlock { .. })));
}

#[test]
fn exhausted_at_the_end_of_the_time_field_and_forever_after() {
    let layout = Layout::builder()
        .time_bits(4)
        .sequence_bits(1)
        .epoch_ms(T0)
        .build()
        .unwrap();
    let clock = Arc::new(ManualClock::new(T0 + 15)); // the last tick
    let g = Generator::builder(layout.clone())
        .clock(Arc::clone(&clock))
        .max_lead(Duration::from_millis(5))
        .build()
        .unwrap();
    assert_eq!(g.try_next_id().unwrap().as_u64(), 15 << 1);
    assert_eq!(g.try_next_id().unwrap().as_u64(), 15 << 1 | 1);
    assert_eq!(g.last_tick(), 15);
    // The sequence is full in the last tick: no borrowing past the end.
    let end = layout.expires_at_ms();
    assert!(
        matches!(g.check(), Err(Error::Exhausted { expired_at_ms, .. }) if expired_at_ms == end)
    );
    assert!(
        matches!(g.try_next_id(), Err(Error::Exhausted { expired_at_ms, .. }) if expired_at_ms == end)
    );
    clock.advance_ms(1);
    assert!(matches!(g.try_next_id(), Err(Error::Exhausted { .. })));
    assert!(matches!(g.next_id(), Err(Error::Exhausted { .. })));
    // A clock that comes back does not revive it.
    clock.set_ms(T0);
    assert!(matches!(g.try_next_id(), Err(Error::Exhausted { .. })));

    // Past the end the first call fails, and never wraps to small IDs.
    let g = Generator::builder(layout)
        .clock(ManualClock::new(T0 + 1000))
        .build()
        .unwrap();
    assert!(matches!(g.try_next_id(), Err(Error::Exhausted { .. })));
    // Baidu's default layout ran out in November 2024.
    let baidu = Generator::new(Layout::baidu(), 0).unwrap();
    assert!(matches!(
        baidu.next_id(),
        Err(Error::Exhausted {
            expired_at_ms: 1_732_109_056_000,
            ..
        })
    ));
}

/// A reservation at or past the time field's last tick leaves nothing to issue: the generator
/// starts at the field's last value (its last tick shows so) and its first call is
/// `Exhausted`, on a layout of 63 bits and on one whose time and sequence fill all 64 (where
/// one past the last tick, shifted, would wrap to 0). On that layout the very last value is
/// `u64::MAX`: a batch ending there knows its length, and the generator counts it issued.
#[test]
fn resuming_after_the_last_tick_is_exhausted_at_once() {
    let full = Layout::builder()
        .epoch_ms(1_000)
        .time_bits(44)
        .sequence_bits(20)
        .allow_sign_bit(true)
        .build()
        .unwrap();
    for layout in [Layout::twitter(), full.clone()] {
        for after in [layout.max_tick(), u64::MAX] {
            let g = Generator::builder(layout.clone())
                .clock(ManualClock::new(T0))
                .resume_after(after)
                .build()
                .unwrap();
            assert_eq!(g.last_tick(), layout.max_tick(), "{layout:?} after {after}");
            let end = layout.expires_at_ms();
            assert!(
                matches!(g.try_next_id(), Err(Error::Exhausted { expired_at_ms, .. }) if expired_at_ms == end),
                "{layout:?} after {after}"
            );
            assert_eq!(g.last_tick(), layout.max_tick());
            assert_eq!(g.stats().issued, 0);
        }
    }
    // A generator that issues the very last value, `u64::MAX` on the full layout, counts it.
    let clock = ManualClock::new(full.epoch_ms() + full.max_tick());
    let g = Generator::builder(full.clone())
        .clock(clock)
        .max_lead(Duration::ZERO)
        .build()
        .unwrap();
    let run = g.try_next_ids(1 << 20).unwrap();
    assert_eq!(run.len(), 1 << 20);
    let ids: Vec<Id> = run.collect();
    assert_eq!(ids.len(), 1 << 20);
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(ids.last().map(|id| id.as_u64()), Some(u64::MAX));
    assert_eq!(g.stats().issued, 1 << 20);
    assert!(matches!(g.try_next_id(), Err(Error::Exhausted { .. })));
    assert_eq!(g.stats().issued, 1 << 20);
}

/// Resuming after the tick before the last leaves the last tick to issue: the first ID is its
/// first value, and the generator is exhausted only once the tick is used up.
#[test]
fn resuming_after_the_tick_before_the_last_issues_the_last_tick() {
    let small = Layout::builder()
        .epoch_ms(1_000)
        .time_bits(44)
        .sequence_bits(2)
        .allow_sign_bit(true)
        .build()
        .unwrap();
    for layout in [Layout::twitter(), small] {
        let last = layout.max_tick();
        let g = Generator::builder(layout.clone())
            .clock(ManualClock::new(T0))
            .max_lead(Duration::ZERO)
            .resume_after(last - 1)
            .build()
            .unwrap();
        assert_eq!(g.last_tick(), last - 1, "{layout:?}");
        let id = g.try_next_id().unwrap();
        let parts = id.parts(&layout).unwrap();
        assert_eq!((parts.tick(), parts.sequence()), (last, 0), "{layout:?}");
        if layout.max_sequence() == 3 {
            let rest: Vec<u64> = (0..3)
                .map(|_| g.try_next_id().unwrap().parts(&layout).unwrap().sequence())
                .collect();
            assert_eq!(rest, [1, 2, 3]);
            assert!(matches!(g.try_next_id(), Err(Error::Exhausted { .. })));
            assert_eq!(g.stats().issued, 4);
        }
    }
}

/// A batch that does not fit before the time field's end is refused, and leaves the values
/// that are left to calls that fit: the generator is not pinned at the end until the clock
/// itself is past it.
#[test]
fn a_batch_past_the_end_of_the_time_field_leaves_the_rest_to_smaller_calls() {
    let layout = Layout::builder()
        .time_bits(4)
        .sequence_bits(2)
        .epoch_ms(T0)
        .build()
        .unwrap();
    let g = Generator::builder(layout.clone())
        .clock(ManualClock::new(T0 + 15)) // the last tick
        .max_lead(Duration::from_millis(5))
        .build()
        .unwrap();
    assert_eq!(g.try_next_id().unwrap().as_u64(), 15 << 2);
    let end = layout.expires_at_ms();
    assert!(
        matches!(g.try_next_ids(4), Err(Error::Exhausted { expired_at_ms, .. }) if expired_at_ms == end)
    );
    assert!(g.check().is_ok());
    let rest: Vec<u64> = g.try_next_ids(3).unwrap().map(|id| id.as_u64()).collect();
    assert_eq!(rest, [15 << 2 | 1, 15 << 2 | 2, 15 << 2 | 3]);
    assert!(matches!(g.try_next_id(), Err(Error::Exhausted { .. })));
    assert_eq!(g.stats().issued, 4);
}

/// A waiting call at the lead limit, on a clock that stands still: a slot that opens within
/// the spin bound (20 µs) is spun for, each spin counted and the time asked for added up; a
/// later one is slept for, and the last nap is cut to what is left of `max_wait`, so the
/// call gives up after exactly `max_wait` (the time asked for, not the time slept).
#[test]
fn a_wait_counts_its_spins_and_sleeps_no_longer_than_max_wait() {
    let lead_limited = |sequence_bits: u32, max_wait: Duration| {
        let layout = sequence_of(sequence_bits);
        let g = Generator::builder(layout)
            .clock(ManualClock::new(T0))
            .max_lead(Duration::from_millis(1))
            .max_wait(max_wait)
            .build()
            .unwrap();
        // The clock's tick, then the first value of the next (the last the lead allows):
        // the second of that tick opens 1/2^bits of a tick (plus 1 ns) after the clock's.
        g.try_next_ids((1 << sequence_bits) + 1).unwrap();
        g
    };
    // How long a call that timed out waited, and what it last saw.
    let timed_out = |g: &Generator<ManualClock>| match g.next_id() {
        Err(Error::TimedOut {
            waited,
            retry_after,
            ..
        }) => (waited, retry_after),
        other => panic!("{other:?}"),
    };
    // 4096 values a tick: the next slot opens in 245 ns; five spins pass 1 µs.
    let g = lead_limited(12, Duration::from_micros(1));
    assert_eq!(
        timed_out(&g),
        (Duration::from_nanos(5 * 245), Duration::from_nanos(245))
    );
    let stats = g.stats();
    assert_eq!(
        (
            stats.wait_spins,
            stats.wait_yields,
            stats.wait_sleeps,
            stats.timed_out
        ),
        (5, 0, 0, 1),
        "{stats:?}"
    );
    // A max_wait of exactly four such slots: four spins, and the call gives up when they have
    // added up to it (not after a fifth).
    let g = lead_limited(12, Duration::from_nanos(4 * 245));
    assert_eq!(
        timed_out(&g),
        (Duration::from_nanos(4 * 245), Duration::from_nanos(245))
    );
    assert_eq!(g.stats().wait_spins, 4, "{:?}", g.stats());
    // 4 values a tick: the next slot opens in 250,001 ns; each nap ends 200 µs short of it
    // (what a sleep may overshoot by; the rest would be spun), 50,001 ns: nineteen of them and
    // a last one of the 49,981 ns left of the millisecond.
    let g = lead_limited(2, Duration::from_millis(1));
    assert_eq!(
        timed_out(&g),
        (Duration::from_millis(1), Duration::from_nanos(250_001))
    );
    let stats = g.stats();
    assert_eq!((stats.wait_sleeps, stats.timed_out), (20, 1), "{stats:?}");
    // 16 values a tick: the next slot opens in 62,501 ns, which is spun for, and the spins
    // add up to max_wait exactly: after the back-off's six spins and ten yields, sixteen
    // spins of the slot's time (the last cut to the 62,485 ns left), each counted.
    let g = lead_limited(4, Duration::from_millis(1));
    assert_eq!(
        timed_out(&g),
        (Duration::from_millis(1), Duration::from_nanos(62_501))
    );
    let stats = g.stats();
    assert_eq!(
        (
            stats.wait_spins,
            stats.wait_yields,
            stats.wait_sleeps,
            stats.timed_out
        ),
        (6 + 16, 10, 0, 1),
        "{stats:?}"
    );
}

#[test]
fn batches_race_single_ids_without_overlap() {
    let layout = Layout::builder()
        .epoch_ms(Layout::twitter().epoch_ms())
        .node_field("n", 2)
        .sequence_bits(16)
        .build()
        .unwrap();
    let g = Generator::new(layout, 2).unwrap();
    let ids: Vec<Vec<Id>> = std::thread::scope(|s| {
        let batcher = s.spawn(|| {
            let mut v = Vec::new();
            for _ in 0..2000 {
                v.extend(g.next_ids(64).unwrap());
            }
            v
        });
        let single = s.spawn(|| {
            (0..128_000)
                .map(|_| g.next_id().unwrap())
                .collect::<Vec<_>>()
        });
        vec![batcher.join().unwrap(), single.join().unwrap()]
    });
    for run in &ids {
        assert!(run.windows(2).all(|w| w[0] < w[1]));
    }
    let all: HashSet<Id> = ids.iter().flatten().copied().collect();
    assert_eq!(all.len(), 256_000);
}

#[test]
fn a_batch_spans_ticks_and_an_empty_batch_is_empty() {
    let layout = sequence_of(3);
    let g = Generator::builder(layout.clone())
        .clock(ManualClock::new(T0))
        .build()
        .unwrap();
    let run: Vec<Id> = g.try_next_ids(20).unwrap().collect();
    assert_eq!(run.len(), 20);
    let parts: Vec<(u64, u64)> = run
        .iter()
        .map(|id| {
            id.parts(&layout)
                .map(|p| (p.unix_ms() - T0, p.sequence()))
                .unwrap()
        })
        .collect();
    assert_eq!(parts[0], (0, 0));
    assert_eq!(parts[8], (1, 0));
    assert_eq!(parts[19], (2, 3));
    assert_eq!(g.try_next_ids(0).unwrap().len(), 0);
    assert_eq!(
        g.try_next_id().unwrap().parts(&layout).unwrap().sequence(),
        4
    );
}

#[test]
fn sonyflake_generator_keeps_the_machine_in_the_low_bits() {
    let layout = Layout::sonyflake();
    let g = Generator::builder(layout.clone())
        .node(0xBEEF)
        .clock(ManualClock::new(T0))
        .build()
        .unwrap();
    let ids: Vec<Id> = (0..300).map(|_| g.try_next_id().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    for (i, id) in ids.iter().enumerate() {
        let p = id.parts(&layout).unwrap();
        assert_eq!(p.node(), 0xBEEF);
        assert_eq!(p.sequence(), i as u64 % 256);
        assert_eq!(id.as_u64() & 0xFFFF, 0xBEEF);
    }
}

#[test]
fn resume_after_never_reissues_a_reserved_tick() {
    let layout = Layout::twitter();
    let clock = Arc::new(ManualClock::new(T0));
    let reserved = layout.tick_at(T0) + 500; // a reservation 500 ms ahead of the clock
    let g = Generator::builder(layout.clone())
        .clock(Arc::clone(&clock))
        .resume_after(reserved)
        .build()
        .unwrap();
    let first = g.try_next_id().unwrap().parts(&layout).unwrap();
    assert_eq!((first.tick(), first.sequence()), (reserved + 1, 0));
}

#[test]
fn start_offset_spreads_low_bits() {
    let layout = Layout::twitter();
    let clock = Arc::new(ManualClock::new(T0));
    let g = Generator::builder(layout.clone())
        .clock(Arc::clone(&clock))
        .start_offset_bits(3)
        .build()
        .unwrap();
    let mut odd = 0;
    for _ in 0..1000 {
        clock.advance_ms(1);
        let s = g.try_next_id().unwrap().parts(&layout).unwrap().sequence();
        assert!(s < 8);
        odd += s % 2;
    }
    assert!(
        (300..700).contains(&odd),
        "{odd} of 1000 one-per-tick IDs are odd"
    );
}

/// A start offset asked wider than the sequence is capped at all but one of its bits: on a
/// two-bit sequence, every tick's first ID starts in the tick's first half (offset 0 or 1),
/// so it carries the clock's tick and leaves room in that tick for at least one more ID.
#[test]
fn a_start_offset_wider_than_the_sequence_is_capped_below_it() {
    let layout = sequence_of(2);
    let clock = Arc::new(ManualClock::new(T0));
    let g = Generator::builder(layout.clone())
        .clock(Arc::clone(&clock))
        .start_offset_bits(64)
        .max_lead(Duration::ZERO)
        .build()
        .unwrap();
    let mut seen = [0u32; 2];
    for _ in 0..256 {
        clock.advance_ms(1);
        let first = g.try_next_id().unwrap().parts(&layout).unwrap();
        assert_eq!(first.tick(), layout.tick_at(clock.now_ms()));
        assert!(first.sequence() < 2, "{first:?}");
        seen[first.sequence() as usize] += 1;
    }
    assert!(seen.iter().all(|&n| n > 0), "offsets seen: {seen:?}");
}

#[test]
fn a_stopped_ticker_neither_freezes_nor_blocks_the_generator() {
    let (clock, ticker) = CoarseClock::start(Duration::from_millis(1)).unwrap();
    drop(ticker); // the coarse reading now stands still, as after fork() or on a stalled host
    let frozen = clock.now_ms();
    let layout = sequence_of(1); // 2 IDs per ms
    let g = Generator::builder(layout.clone())
        .clock(clock.clone())
        .max_lead(Duration::ZERO)
        .build()
        .unwrap();
    let ids: Vec<Id> = (0..40).map(|_| g.next_id().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    let last = ids[39].parts(&layout).unwrap().unix_ms();
    assert!(
        last >= frozen + 19,
        "time must follow the precise clock: {last} vs {frozen}"
    );
    // The precise reads pushed the coarse value forward too.
    assert!(clock.now_ms() > frozen);
}

#[test]
fn coarse_clock_generator_is_unique_across_threads() {
    let (clock, _ticker) = CoarseClock::start(monoflake::DEFAULT_TICKER_INTERVAL).unwrap();
    let g = Generator::builder(Layout::twitter())
        .clock(clock)
        .node(9)
        .build()
        .unwrap();
    assert_eq!(hammer(&g, 2, 1_000_000).len(), 2_000_000);
}

#[test]
fn per_core_slots_never_collide_and_keep_each_threads_order() {
    for layout in [Layout::twitter(), Layout::sonyflake()] {
        let g = Generator::builder(layout.clone())
            .node(5)
            .build_per_core(4)
            .unwrap();
        assert_eq!(g.slots(), 4);
        let per_thread = if layout.name() == "sonyflake" {
            3_000
        } else {
            300_000
        };
        // Per-thread order and uniqueness across threads: the shared hammer checks both.
        let all = hammer(&g, 4, per_thread);
        assert_eq!(all.len(), 4 * per_thread, "{}", layout.name());
        assert!(all.iter().all(|id| id.parts(&layout).unwrap().node() == 5));
        assert_eq!(g.stats().issued, 4 * per_thread as u64);
    }
    // The slots take sequence bits: not all of them.
    let two_bits = sequence_of(2);
    assert!(matches!(
        Generator::builder(two_bits).build_per_core(4),
        Err(Error::OutOfRange {
            value: 4,
            max: 2,
            ..
        })
    ));
}

#[test]
fn batches_compose_like_single_ids_in_every_layout_order() {
    // The batch iterator adds one sequence step within a tick; check it against `compose` for
    // the node-in-the-middle order, Sonyflake's node-lowest order and a per-core slot.
    for layout in [Layout::twitter(), Layout::sonyflake()] {
        let g = Generator::builder(layout.clone())
            .node(7)
            .clock(ManualClock::new(T0))
            .max_lead(Duration::from_secs(1))
            .build()
            .unwrap();
        let run: Vec<Id> = g
            .try_next_ids(3 * (layout.max_sequence() + 1) + 5)
            .unwrap()
            .collect();
        for (i, id) in run.iter().enumerate() {
            let i = i as u64; // a fresh generator starts its clock's tick at sequence 0
            let per_tick = layout.max_sequence() + 1;
            let expected = layout
                .compose(layout.tick_at(T0) + i / per_tick, 7, i % per_tick)
                .unwrap();
            assert_eq!(*id, expected, "{} #{i}", layout.name());
        }
    }
    let per_core = Generator::builder(Layout::sonyflake())
        .node(7)
        .build_per_core(2)
        .unwrap();
    let run: Vec<Id> = per_core.next_ids(100).unwrap().collect();
    assert!(run.windows(2).all(|w| w[0] < w[1]));
    assert!(
        run.iter()
            .all(|id| id.parts(&Layout::sonyflake()).unwrap().node() == 7)
    );
}

/// `next_id` and `next_ids` at the lead limit wait for the clock, then issue in the tick it
/// reaches. The clock is moved only once the waiting call has begun to wait (no timing:
/// the mover waits for that evidence, however late either thread runs).
#[test]
fn next_id_and_next_ids_wait_at_the_lead_limit_then_issue_when_the_clock_moves() {
    let layout = Layout::builder()
        .time_bits(20)
        .sequence_bits(2)
        .epoch_ms(T0)
        .build()
        .unwrap();
    let clock = Arc::new(ManualClock::new(T0 + 10));
    let g = Arc::new(
        Generator::builder(layout.clone())
            .clock(Arc::clone(&clock))
            .max_lead(Duration::ZERO)
            .max_wait(Duration::from_secs(600))
            .build()
            .unwrap(),
    );
    // The tick's four IDs, then the limit.
    let first: Vec<Id> = (0..4).map(|_| g.next_id().unwrap()).collect();
    assert!(matches!(g.try_next_id(), Err(Error::WouldBlock { .. })));
    for (tick, wanted) in [(11, 1), (12, 3)] {
        let waiting = g.stats().waiting_calls;
        let mover = {
            let (g, clock) = (Arc::clone(&g), Arc::clone(&clock));
            std::thread::spawn(move || {
                while g.stats().waiting_calls == waiting {
                    std::thread::yield_now();
                }
                clock.set_ms(T0 + tick);
            })
        };
        let ids: Vec<Id> = if wanted == 1 {
            vec![g.next_id().unwrap()]
        } else {
            g.next_ids(wanted).unwrap().collect()
        };
        mover.join().unwrap();
        assert_eq!(ids.len() as u64, wanted);
        for (k, id) in ids.iter().enumerate() {
            let parts = id.parts(&layout).unwrap();
            assert_eq!(parts.unix_ms(), T0 + tick, "{ids:?}");
            assert_eq!(parts.sequence(), k as u64, "{ids:?}");
        }
        assert!(ids[0] > *first.last().unwrap());
        // Back at the limit: the rest of the tick.
        while g.try_next_id().is_ok() {}
    }
}

#[test]
fn a_batch_that_can_never_fit_is_refused_at_once_and_the_generator_goes_on() {
    // Twitter's layout, 100 ms of lead: at most 101 ticks of 4096 IDs end within the lead.
    let clock = Arc::new(ManualClock::new(T0));
    let g = Generator::builder(Layout::twitter())
        .node(1)
        .clock(Arc::clone(&clock))
        .max_lead(Duration::from_millis(100))
        .max_wait(Duration::from_secs(3600))
        .build()
        .unwrap();
    assert_eq!(g.max_batch(), 413_696);
    let before = g.try_next_id().unwrap();
    for n in [413_697, 500_000, 10u64.pow(12), 1 << 61, u64::MAX] {
        for answer in [g.try_next_ids(n), g.next_ids(n)] {
            match answer {
                Err(Error::BatchTooLarge {
                    requested, limit, ..
                }) => assert_eq!((requested, limit), (n, 413_696)),
                other => panic!("{n}: {other:?}"),
            }
        }
    }
    // Nothing was issued, nothing damaged: the next ID follows the one before.
    let after = g.try_next_id().unwrap();
    assert!(after > before);
    assert_eq!(g.stats().issued, 2);
    // A batch within the limit still fits once the clock allows it (here at once).
    assert_eq!(g.try_next_ids(409_000).unwrap().len(), 409_000);
}

/// The waiting call issues a batch of `max_batch()` on the real clock, on a fresh generator
/// and after IDs: it fits only while the clock is in a tick's last slot (244 ns here), which a
/// wait that sleeps to the slot's opening overshoots every time (each try then starts a tick
/// later and needs that tick's last slot): it timed out after `max_wait`, whatever that was.
#[test]
fn the_largest_batch_is_issued_by_the_waiting_call_on_the_real_clock() {
    let g = Generator::builder(Layout::twitter())
        .node(1)
        .max_lead(Duration::from_millis(100))
        // A liveness bound only: a machine that never runs the thread for a tick's last slot.
        .max_wait(Duration::from_secs(120))
        .build()
        .unwrap();
    let max = g.max_batch();
    let mut last = None;
    for round in 0..3 {
        let before = g.next_id().unwrap();
        assert!(last < Some(before), "round {round}");
        let ids: Vec<Id> = g
            .next_ids(max)
            .unwrap_or_else(|e| panic!("round {round}: {e}"))
            .collect();
        assert_eq!(ids.len() as u64, max, "round {round}");
        assert!(ids[0] > before, "round {round}");
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "round {round}");
        last = ids.last().copied();
    }
    assert_eq!(g.stats().issued, 3 * (max + 1));
}

/// A clock frozen at a nanosecond.
struct AtNs(u64);

impl TimeSource for AtNs {
    fn now_ms(&self) -> u64 {
        self.0 / 1_000_000
    }

    fn now_ns(&self) -> u64 {
        self.0
    }
}

/// The largest batch is not refused as too large: it fits once the last tick of the lead
/// has opened whole (pacing opens it over the clock's tick; here at its last nanosecond), and
/// runs from the clock's tick to the last value of the lead's last tick.
#[test]
fn the_largest_batch_fits_at_the_end_of_a_tick() {
    let g = Generator::builder(Layout::twitter())
        .clock(AtNs(T0 * 1_000_000 + 999_999))
        .max_lead(Duration::from_millis(100))
        .build()
        .unwrap();
    assert_eq!(g.max_batch(), 413_696);
    let ids: Vec<Id> = g.try_next_ids(413_696).unwrap().collect();
    assert_eq!(ids.len(), 413_696);
    let parts = |id: &Id| {
        let p = id.parts(g.layout()).unwrap();
        (p.tick(), p.sequence())
    };
    let tick = T0 - Layout::twitter().epoch_ms();
    assert_eq!(parts(&ids[0]), (tick, 0));
    assert_eq!(parts(&ids[413_695]), (tick + 100, 4095));
}

#[test]
fn per_thread_and_per_core_refuse_an_impossible_batch_too() {
    let per_core = Generator::builder(Layout::twitter())
        .node(1)
        .build_per_core(2)
        .unwrap();
    assert!(matches!(
        per_core.next_ids(1 << 61),
        Err(Error::BatchTooLarge { .. })
    ));
    let per_thread = Generator::builder(Layout::twitter())
        .node(1)
        .build_per_thread(2)
        .unwrap();
    assert!(matches!(
        per_thread.next_ids(1 << 61),
        Err(Error::BatchTooLarge { .. })
    ));
    assert!(per_thread.next_id().is_ok());
}

/// What a generator shows in `Debug`: its layout's name, node, state word, fence, lead and
/// clock.
#[test]
fn a_generator_shows_its_layout_node_state_fence_lead_and_clock() {
    let clock = Arc::new(ManualClock::new(T0));
    let g = Generator::builder(Layout::twitter())
        .node(7)
        .clock(Arc::clone(&clock))
        .max_lead(Duration::from_millis(3))
        .build()
        .unwrap();
    let first = g.try_next_id().unwrap();
    // The state is the last ID's time and sequence: tick T0 (since Twitter's epoch), value 0.
    let state = (T0 - Layout::twitter().epoch_ms()) << 12;
    assert_eq!(first.as_u64(), (state << 10) | (7 << 12));
    // Unleased, the fence never stops it: no limit, no deadline.
    let max = u64::MAX;
    assert_eq!(
        format!("{g:?}"),
        format!(
            "Generator {{ layout: \"twitter\", node: 7, state: {state}, fence: ({max}, {max}), \
             max_lead_ticks: 3, clock: {clock:?}, .. }}"
        )
    );
}

/// The pure step a host with its own state word uses ([`monoflake::StateStep`]), exactly: its
/// first state, the values it reserves, their ticks and IDs, the lead's wait measured from the
/// nanoseconds into the clock's tick, and its errors.
#[test]
fn a_state_step_reserves_exact_values_and_waits() {
    let layout = Layout::twitter();
    let tick = layout.tick_at(T0);
    let step = Generator::builder(layout.clone())
        .node(3)
        .max_lead(Duration::from_millis(2))
        .build_step()
        .unwrap();
    assert_eq!(
        (step.start(), step.layout().name(), step.node()),
        (0, "twitter", 3)
    );
    // A quarter of a millisecond into the tick of T0.
    let now_ns = T0 * 1_000_000 + 250_000;
    let (first, last) = step.next(step.start(), now_ns, 1).unwrap();
    assert_eq!((first, last), (tick << 12, tick << 12));
    assert_eq!(step.tick_of(last), tick);
    let parts = step.id(first).parts(&layout).unwrap();
    assert_eq!(
        (parts.unix_ms(), parts.node(), parts.sequence()),
        (T0, 3, 0)
    );
    assert_eq!(step.next(last, now_ns, 3).unwrap(), (first + 1, first + 3));
    // The rest of this tick and the next: issued (the state is not written, so the same `cur`
    // is asked again below).
    let cur = first + 3;
    let room = 2 * 4096 - 4;
    assert_eq!(
        step.next(cur, now_ns, room).unwrap(),
        (first + 4, ((tick + 2) << 12) - 1)
    );
    let lead_wait = |n| match step.next(cur, now_ns, n) {
        Err(Error::WouldBlock {
            retry_after,
            blocked_on: monoflake::BlockedOn::LeadLimit,
            ..
        }) => retry_after,
        other => panic!("expected the lead's wait, got {other:?}"),
    };
    // Into the last tick the lead allows, paced: its value 2048 opens half a tick after the
    // clock's tick starts, 250 µs (and 1 ns) after the reading.
    assert_eq!(lead_wait(room + 2049), Duration::from_nanos(250_001));
    // A tick beyond the lead: wait until the clock's next tick, 750 µs away.
    assert_eq!(lead_wait(3 * 4096 - 3), Duration::from_micros(750));
    assert!(matches!(
        step.next(cur, now_ns, 0),
        Err(Error::InvalidConfig { setting: "n", .. })
    ));
    let end_ns = (layout.expires_at_ms() + 1) * 1_000_000;
    match step.next(cur, end_ns, 1) {
        Err(Error::Exhausted { expired_at_ms, .. }) => {
            assert_eq!(expired_at_ms, layout.expires_at_ms())
        }
        other => panic!("expected the layout's end, got {other:?}"),
    }
    // A step resuming after a reserved tick starts at that tick's last value.
    let resumed = Generator::builder(layout.clone())
        .node(3)
        .resume_after(tick + 10)
        .build_step()
        .unwrap();
    assert_eq!(resumed.start(), ((tick + 11) << 12) - 1);
    assert_eq!(resumed.tick_of(resumed.start()), tick + 10);
    let (first, _) = resumed.next(resumed.start(), now_ns, 1).unwrap();
    assert_eq!(resumed.id(first).parts(&layout).unwrap().tick(), tick + 11);
}

/// In the common case an ID costs one clock reading and no trip through the general step
/// (which reads the clock again), for a plain generator and a leased one (whose fence the
/// common case asks for the state's tick): 1,000 IDs in one tick take 1,000 readings and at
/// most a few more.
#[test]
fn the_common_case_reads_the_clock_once_an_id() {
    let dir = common::TempDir::new("common-case-readings");
    let store = Arc::new(monoflake::FileStore::open(dir.path()).unwrap());
    let plain = Arc::new(common::Counting::new(T0, false));
    let leased = Arc::new(common::Counting::new(T0, false));
    let reads = |clock: &common::Counting| {
        let (cheap, precise) = clock.reads();
        cheap + precise
    };
    let g = Generator::builder(Layout::twitter())
        .clock(Arc::clone(&plain))
        .build()
        .unwrap();
    let l = Generator::builder(Layout::twitter())
        .clock(Arc::clone(&leased))
        .build_leased(store, monoflake::NodeRequest::Any)
        .unwrap();
    g.try_next_id().unwrap();
    l.try_next_id().unwrap();
    let (before_plain, before_leased) = (reads(&plain), reads(&leased));
    for _ in 0..1000 {
        g.try_next_id().unwrap();
        l.try_next_id().unwrap();
    }
    for (how, n) in [
        ("plain", reads(&plain) - before_plain),
        ("leased", reads(&leased) - before_leased),
    ] {
        assert!(
            (1000..=1003).contains(&n),
            "{how}: {n} clock readings for 1,000 IDs"
        );
    }
}
