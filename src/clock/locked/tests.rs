//! The locked clock's unit tests as a whole: clocks on a simulated counter (in nanoseconds)
//! or on quanta's mock counter (whose conversion rounds, as a real counter's does), moved by
//! hand against a wall clock that drifts, steps and is held up. They check the policy, the
//! publication, the writer lock and the straightening through the clock's own reads,
//! comparisons and forward moves; the pure parts have their own tests beside them
//! (`counter.rs`, `segment.rs`).

use super::segment::{SLEW_GRACE, SLEW_GRACE_NS};
use super::*;
use std::sync::atomic::AtomicU64 as StdAtomic;
use std::sync::atomic::Ordering::Relaxed;

const START: u64 = 1_700_000_000_000_000_000;
const MS: u64 = 1_000_000;

/// A clock on a simulated counter, and a wall clock that runs `ppm` parts per million
/// faster (positive) or slower (negative) than the counter, plus a settable step.
fn simulated(ppm: i64) -> (LockedClock, Arc<StdAtomic>, Arc<StdAtomic>) {
    let counter = Arc::new(StdAtomic::new(0));
    let step = Arc::new(StdAtomic::new(0));
    let (c, s) = (Arc::clone(&counter), Arc::clone(&step));
    let wall = move || {
        let e = c.load(Relaxed) as i128;
        let drift = e * i128::from(ppm) / 1_000_000;
        (i128::from(START) + e + drift + i128::from(s.load(Relaxed) as i64)) as u64
    };
    let clock = on_counter(&counter, wall);
    (clock, counter, step)
}

/// A clock on the simulated `counter` with the default interval and tolerance, comparing
/// with `wall`.
fn on_counter(
    counter: &Arc<StdAtomic>,
    wall: impl Fn() -> u64 + Send + Sync + 'static,
) -> LockedClock {
    LockedClock::with_counter(
        Counter::Simulated(Arc::clone(counter)),
        wall,
        DEFAULT_REANCHOR_INTERVAL,
        DEFAULT_REANCHOR_TOLERANCE,
    )
}

fn wall_of(ppm: i64, e: u64, step: i64) -> i128 {
    i128::from(START) + e as i128 + e as i128 * i128::from(ppm) / 1_000_000 + i128::from(step)
}

/// The first counter reading of `xs` at which `new` reads below `old`, with both readings:
/// where a reader still using the old piece would then see the clock go back.
fn first_back(
    clock: &LockedClock,
    old: &Segment,
    new: &Segment,
    xs: impl IntoIterator<Item = u64>,
) -> Option<(u64, u64, u64)> {
    xs.into_iter()
        .map(|x| (x, clock.read_at(old, x), clock.read_at(new, x)))
        .find(|&(_, was, is)| is < was)
}

#[test]
fn drift_of_200_ppm_either_way_stays_within_2_ms_and_never_goes_back() {
    for ppm in [200, -200, 50, -50, 0] {
        let (clock, counter, _) = simulated(ppm);
        let mut last = 0;
        let mut worst_after_warmup = 0i128;
        // 60 simulated seconds, read every 100 µs.
        for step in 1..=600_000u64 {
            counter.store(step * 100_000, Relaxed);
            let now = clock.now_ns();
            assert!(now >= last, "ppm {ppm}: went back from {last} to {now}");
            last = now;
            let skew = wall_of(ppm, step * 100_000, 0) - i128::from(now);
            if step > 30_000 {
                worst_after_warmup = worst_after_warmup.max(skew.abs());
            }
        }
        eprintln!("ppm {ppm:+}: worst |wall - locked| after 3 s: {worst_after_warmup} ns");
        assert!(
            worst_after_warmup <= 2 * MS as i128,
            "ppm {ppm}: skew reached {worst_after_warmup} ns"
        );
        if ppm < 0 {
            assert!(clock.report().max_skew_ns > 0);
        }
    }
}

#[test]
fn a_step_back_is_slewed_at_the_documented_rate_and_a_step_forward_is_taken_at_once() {
    let (clock, counter, step) = simulated(0);
    counter.store(10 * MS, Relaxed);
    let before = clock.now_ns();
    // The wall clock goes back 100 ms.
    step.store((-100 * MS as i64) as u64, Relaxed);
    clock.reanchor();
    assert_eq!(clock.report().slew_left_ns, 100 * MS);
    // 10 s of counter later, 9.9 ms have been given back: the slew began 100 ms after the
    // comparison (SLEW_GRACE) and gives back 1 ms per second.
    counter.store(10_010 * MS, Relaxed);
    let now = clock.now_ns();
    assert!(now > before);
    assert_eq!(now, START + 10 * MS + 10_000 * MS - 9_900_000);
    // After 100 s it has met the wall clock, and runs at the counter's rate again.
    counter.store(110 * 1_000 * MS, Relaxed);
    clock.reanchor();
    let skew = clock.last_skew_ns();
    assert!(skew.abs() <= MS as i64, "skew {skew}");
    // A forward step of an hour is taken at the next comparison.
    step.store(3_600_000 * MS, Relaxed);
    counter.store(111 * 1_000 * MS + 1, Relaxed);
    let now = clock.now_ns();
    assert_eq!(
        now as i128,
        wall_of(0, 111 * 1_000 * MS + 1, 3_600_000 * MS as i64)
    );
    assert_eq!(clock.reanchor_count(), 1);
    assert_eq!(clock.report().slew_left_ns, 0);
}

#[test]
fn advance_to_moves_forward_only_and_then_slews_back() {
    let (clock, counter, _) = simulated(0);
    counter.store(MS, Relaxed);
    let now = clock.now_ns();
    assert_eq!(clock.advance_to(now - 5), now);
    assert_eq!(clock.advance_to(now + 10 * MS), now + 10 * MS);
    counter.store(MS + DEFAULT_REANCHOR_INTERVAL.as_nanos() as u64, Relaxed);
    let at_check = clock.now_ns();
    assert!(at_check >= now + 10 * MS);
    assert!(clock.report().slew_left_ns > 9 * MS);
}

/// As `a_new_slew_continues_the_old_line_through_the_grace`, with comparisons every
/// millisecond — or on every read: the grace was cut to half the interval (0.5 ms, or
/// nothing), so a writer held up longer than that after its counter reading (preempted: a
/// loaded machine) published a piece that reads below what readers of the old one read
/// meanwhile (10 ms held up: 9.5 µs, or 10 µs, back).
#[test]
fn a_new_slew_continues_the_old_line_through_the_grace_whatever_the_interval() {
    for interval in [Duration::from_millis(1), Duration::ZERO] {
        let counter = Arc::new(StdAtomic::new(0));
        let step = Arc::new(StdAtomic::new(0));
        let (c, s) = (Arc::clone(&counter), Arc::clone(&step));
        let clock = LockedClock::with_counter(
            Counter::Simulated(Arc::clone(&counter)),
            move || {
                (i128::from(START + c.load(Relaxed)) + i128::from(s.load(Relaxed) as i64)) as u64
            },
            interval,
            DEFAULT_REANCHOR_TOLERANCE,
        );
        counter.store(5 * MS, Relaxed);
        clock.now_ns();
        let old = clock.inner.line.load();
        // The wall clock goes back 50 ms; the writer compares at 6 ms of counter time.
        step.store((-50 * MS as i64) as u64, Relaxed);
        counter.store(6 * MS, Relaxed);
        clock.reanchor();
        let new = clock.inner.line.load();
        assert!(new.slew_for > 0, "{interval:?}: {new:?}");
        let grace = (6 * MS..6 * MS + SLEW_GRACE.as_nanos() as u64).step_by(99_991);
        assert_eq!(first_back(&clock, &old, &new, grace), None, "{interval:?}");
    }
}

/// A writer reads the counter, then publishes a piece that begins a slew; readers that
/// used the old piece in between (the writer delayed up to SLEW_GRACE) read exactly what
/// the new piece gives at the same counter reading, so no reading goes back.
#[test]
fn a_new_slew_continues_the_old_line_through_the_grace() {
    let (clock, counter, step) = simulated(0);
    counter.store(5 * MS, Relaxed);
    let old = clock.inner.line.load();
    assert_eq!(old.slew_for, 0);
    // The wall clock goes back 50 ms; the writer compares at 6 ms of counter time.
    step.store((-50 * MS as i64) as u64, Relaxed);
    counter.store(6 * MS, Relaxed);
    clock.reanchor();
    let new = clock.inner.line.load();
    assert!(new.slew_for > 0);
    // Its slow part begins a grace after the comparison.
    assert_eq!(
        new.slew_from - clock.inner.counter.ns(6 * MS - new.start),
        SLEW_GRACE.as_nanos() as u64
    );
    for raw in (6 * MS..6 * MS + 100 * MS).step_by(997) {
        assert_eq!(
            clock.read_at(&new, raw),
            clock.read_at(&old, raw),
            "at {raw}"
        );
    }
    // Past the grace it runs slow, and it never reads less than before.
    let mut last = 0;
    for raw in (6 * MS..6 * MS + 2_000 * MS).step_by(10_007) {
        let now = clock.read_at(&new, raw);
        assert!(now >= last);
        last = now;
    }
    assert!(clock.read_at(&new, 1_006 * MS) < clock.read_at(&old, 1_006 * MS));
}

/// A clock on a simulated counter whose first comparison (due at the counter reading
/// `interval`, returned) is held inside its wall-clock read, after its counter read and
/// with the writer lock taken: a writer thread starts it, and is held once this returns;
/// `gate.wait()` releases it. `wall(counter, held)` is the wall clock; `held` is true for
/// the held read only.
fn held_comparison(
    wall: impl Fn(u64, bool) -> u64 + Send + Sync + 'static,
) -> (
    LockedClock,
    Arc<StdAtomic>,
    Arc<std::sync::Barrier>,
    std::thread::JoinHandle<u64>,
    u64,
) {
    let counter = Arc::new(StdAtomic::new(0));
    let hold = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let gate = Arc::new(std::sync::Barrier::new(2));
    let (c, h, g) = (Arc::clone(&counter), Arc::clone(&hold), Arc::clone(&gate));
    let read = move || {
        let held = h.swap(false, Relaxed);
        if held {
            g.wait(); // inside the comparison, the writer lock held
            g.wait(); // released by the test
        }
        wall(c.load(Relaxed), held)
    };
    let clock = on_counter(&counter, read);
    let interval = DEFAULT_REANCHOR_INTERVAL.as_nanos() as u64;
    counter.store(interval, Relaxed);
    hold.store(true, Relaxed);
    let writer = {
        let clock = clock.clone();
        std::thread::spawn(move || clock.now_ns())
    };
    gate.wait();
    (clock, counter, gate, writer, interval)
}

/// A reader past `check_at` that is held up between its counter read and its publish (here
/// inside the wall clock, in real life preempted) publishes a segment starting at its old
/// counter reading. A second reader that read the old segment at a later counter reading
/// meanwhile must not then read less: "never less than an earlier reading on the same
/// thread".
#[test]
fn a_comparison_held_up_after_its_counter_read_does_not_move_another_reader_back() {
    // The held comparison finds the wall clock 100 ms behind: it slews.
    let (clock, counter, gate, writer, interval) =
        held_comparison(|c, held| START + c - if held { 100 * MS } else { 0 });
    // The writer read the counter at `interval` and holds the lock; 10 ms of counter time
    // later this reader finds the lock taken and reads the old segment.
    counter.store(interval + 10 * MS, Relaxed);
    let first = clock.now_ns();
    assert_eq!(first, START + interval + 10 * MS);
    gate.wait();
    writer.join().unwrap();
    let second = clock.now_ns();
    assert!(
        second >= first,
        "the same thread read {first} then {second}: {} ns back",
        first - second
    );
}

/// A comparison held up between its counter read and its wall-clock read (preempted)
/// steps forward to a wall time read later, as if it were the time at the earlier counter
/// reading: the clock then reads ahead of a wall clock that never went back — and IDs carry
/// a time ahead of the real one.
#[test]
fn a_comparison_held_up_before_its_wall_read_does_not_run_ahead_of_the_wall_clock() {
    // The wall clock runs with the counter; it has stepped forward 10 ms by the time the
    // held comparison reads it, 50 ms of counter time after its counter read.
    let wall_at = |counter: u64, stepped: bool| START + counter + if stepped { 10 * MS } else { 0 };
    let (clock, counter, gate, writer, interval) = held_comparison(wall_at);
    counter.store(interval + 50 * MS, Relaxed);
    gate.wait();
    writer.join().unwrap();
    let wall = wall_at(interval + 50 * MS, true);
    // A generator on this clock with no lead at all issues an ID 50 ms in the future.
    let generator = crate::Generator::builder(crate::Layout::twitter())
        .clock(clock.clone())
        .max_lead(Duration::ZERO)
        .build()
        .unwrap();
    let id = generator.try_next_id().unwrap();
    let id_ms = id.parts(generator.layout()).unwrap().unix_ms();
    assert!(
        id_ms <= wall / MS,
        "an ID {} ms ahead of the wall clock with max_lead 0",
        id_ms - wall / MS
    );
    let now = clock.now_ns();
    assert!(
        now <= wall,
        "the clock reads {} ns ahead of the wall clock, which never went back",
        now - wall
    );
}

/// A clock on quanta's mock counter scaled by `ns_per_unit` (a scale with fractional bits
/// makes the conversion round, as a real counter's does), comparing with `wall(ns)`, where
/// `ns` is the counter's reading converted; and the mock, to move the counter.
fn on_mock(
    ns_per_unit: u64,
    wall: impl Fn(u64) -> u64 + Send + Sync + 'static,
) -> (LockedClock, Arc<quanta::Mock>) {
    on_mock_every(ns_per_unit, DEFAULT_REANCHOR_INTERVAL, wall)
}

/// [`on_mock`], comparing every `interval`.
fn on_mock_every(
    ns_per_unit: u64,
    interval: Duration,
    wall: impl Fn(u64) -> u64 + Send + Sync + 'static,
) -> (LockedClock, Arc<quanta::Mock>) {
    let (clock, mock) = quanta::Clock::mock();
    let m = Arc::clone(&mock);
    let counter = Counter::Quanta { clock, ns_per_unit };
    let clock = LockedClock::with_counter(
        counter,
        move || wall(((u128::from(m.value()) * u128::from(ns_per_unit)) >> 32) as u64),
        interval,
        DEFAULT_REANCHOR_TOLERANCE,
    );
    (clock, mock)
}

/// A clock that compares on every read (`interval` zero, documented and tested in
/// tests/locked_clock.rs) on a counter whose conversion rounds: each comparison that
/// continued the line at a new start added `Counter::slack` (1 ns), so the clock ran ahead
/// of a wall clock it agreed with by 1 ns per read — a million reads of a stopped counter,
/// a millisecond — and a slew (1 ns per µs) never caught up with reads faster than one per µs.
#[test]
fn comparing_on_every_read_does_not_run_ahead_of_the_wall_clock() {
    let k = 1_431_655_765; // 3 GHz
    // In step with the wall clock: the counter stopped, then moving 10 ns per read.
    let (clock, mock) = on_mock_every(k, Duration::ZERO, |ns| START + ns);
    mock.increment(12_345);
    let first = clock.now_ns();
    for _ in 0..10_000 {
        assert_eq!(clock.now_ns(), first, "a stopped counter");
    }
    let mut last = first;
    for _ in 0..100_000 {
        mock.increment(30);
        let now = clock.now_ns();
        assert!(now >= last, "went back from {last} to {now}");
        last = now;
    }
    let wall = START + clock.inner.counter.ns(mock.value());
    assert!(
        last.abs_diff(wall) <= 1_000,
        "{} ns from a wall clock it agreed with",
        i128::from(last) - i128::from(wall)
    );
    // The wall clock 1 ms behind: 300 ms of counter time, read every µs, give back 0.2 ms
    // (the slow part begins a grace, 100 ms, after the first comparison).
    let (clock, mock) = on_mock_every(k, Duration::ZERO, |ns| {
        if ns == 0 { START } else { START + ns - MS }
    });
    let mut last = 0;
    for _ in 0..300_000 {
        mock.increment(3_000);
        let now = clock.now_ns();
        assert!(now >= last, "went back from {last} to {now}");
        last = now;
    }
    let left = clock.report().slew_left_ns;
    assert!(
        left <= 850_000,
        "{left} ns of slew left: it does not converge"
    );
}

/// A comparison that finds the clock ahead while it is slewing continues the slow part at
/// once; but when the old slow part was about to end (here 10 ms after the comparison's
/// counter reading) and the wall clock has gone further back, the new piece runs slow where
/// the old one ran straight: a reader that used the old piece while the new one was being
/// published (a writer held up, as `SLEW_GRACE` allows) reads less from the new one later.
#[test]
fn a_slew_continued_near_the_end_of_its_slow_part_does_not_read_below_the_old_one() {
    let (clock, counter, step) = simulated(0);
    counter.store(10 * MS, Relaxed);
    step.store((-2 * MS as i64) as u64, Relaxed);
    clock.reanchor();
    // Slow from 110 ms to 2.11 s of counter time.
    counter.store(2_100 * MS, Relaxed);
    let old = clock.inner.line.load();
    assert!(old.slewing(2_090 * MS), "{old:?}");
    step.store((-3 * MS as i64) as u64, Relaxed);
    clock.reanchor();
    let new = clock.inner.line.load();
    assert!(new.slew_for > 0, "{new:?}");
    let grace = (2_100 * MS..2_100 * MS + SLEW_GRACE.as_nanos() as u64).step_by(99_991);
    assert_eq!(
        first_back(&clock, &old, &new, grace),
        None,
        "{old:?}, {new:?}"
    );
}

/// The wall clock falls 2 ms behind the counter at once: the first comparison (1 s) begins
/// a slew, the next two continue it, and its slow part ends at about 3.1 s of counter time.
/// Readings to 3.95 s never go back; past the slow part the first reader publishes a
/// segment that starts straight — once — and the fast path answers from it.
#[test]
fn past_the_slow_part_the_line_is_straightened_once_and_never_reads_back() {
    for (k, step) in [
        (1_431_655_765u64, 9_973u64),
        (429_496_730, 99_991),
        (5 << 32, 997),
        (1 << 32, 3_001),
    ] {
        let (clock, mock) = on_mock(k, |ns| if ns == 0 { START } else { START + ns - 2 * MS });
        let counter = &clock.inner.counter;
        let end = counter.units(3_950 * MS);
        let mut last = 0;
        while mock.value() < end {
            mock.increment(step);
            // A reader that loaded the line before this read (and was then held up) reads
            // no more, at any later counter reading, than the line after it.
            let before = clock.inner.line.load();
            let now = clock.now_ns();
            assert!(now >= last, "k {k}: went back from {last} to {now}");
            last = now;
            let after = clock.inner.line.load();
            let xs = (mock.value()..).step_by(5).take(4);
            assert_eq!(
                first_back(&clock, &before, &after, xs),
                None,
                "k {k}: {before:?}, {after:?}"
            );
        }
        // Three comparisons, then one straightened segment.
        assert_eq!(clock.inner.line.current.load(Relaxed), 4, "k {k}");
        let segment = clock.inner.line.load();
        assert_eq!((segment.slew_for, segment.slew_from), (0, 0), "k {k}");
        let slow_end = counter.units(3_100 * MS);
        assert!(
            segment.start > slow_end - counter.units(MS),
            "k {k}: {segment:?}"
        );
        // The comparison still due at about 4 s (where the third one set it).
        let check = counter.units(4_000 * MS);
        assert!(
            segment.check_at.abs_diff(check) <= 4 * step,
            "k {k}: {segment:?}"
        );
        let straight = clock.inner.line.load_straight().expect("no writer at work");
        assert_eq!(straight, Straight::of(&segment, counter));
        let d = mock.value() - straight.start;
        assert_eq!(straight.read(d, counter), Some(clock.now_ns()), "k {k}");
        assert_eq!(clock.report().slew_left_ns, 0);
        assert!(clock.last_skew_ns() < 0, "k {k}: the clock was ahead");
    }
}

/// A writer that stopped after closing the straight part, the writer lock taken (by a
/// thread of this process) for good, leaves every reader on the exact path, which still
/// reads the line.
#[test]
fn a_writer_stopped_half_way_leaves_readers_on_the_exact_path() {
    let (clock, counter, _) = simulated(0);
    counter.store(5 * MS, Relaxed);
    assert_eq!(clock.now_ns(), START + 5 * MS);
    std::mem::forget(clock.inner.writer.lock());
    clock.inner.line.fast.version.fetch_or(1, Relaxed);
    assert_eq!(clock.inner.line.load_straight(), None);
    for c in [6 * MS, 500 * MS, 2_000 * MS, 5_000 * MS] {
        counter.store(c, Relaxed);
        assert_eq!(clock.now_ns(), START + c);
    }
    assert_eq!(
        clock.inner.line.current.load(Relaxed),
        0,
        "nothing published"
    );
}

/// What a forked child inherits from a parent caught publishing: the writer lock held by a
/// thread of another process, the straight part closed, the next slot half-written. The
/// first reader due to compare takes the lock over and publishes whole; the straight part
/// opens again; `reanchor` and `advance_to` do not wait.
#[test]
fn a_writer_lock_inherited_from_another_process_is_taken_over() {
    let (clock, counter, _) = simulated(0);
    counter.store(5 * MS, Relaxed);
    assert_eq!(clock.now_ns(), START + 5 * MS);
    let line = &clock.inner.line;
    let parent = u64::from(std::process::id()) + 2;
    clock.inner.writer.holder.store(parent, Relaxed);
    line.fast.version.fetch_or(1, Relaxed);
    line.slots[1].seq.store(3, Relaxed);
    line.slots[1].at.store(12_345, Relaxed);
    // Readers read on, on the exact path, while a comparison is due less than an interval
    // (a thread of this process might be comparing).
    let due = DEFAULT_REANCHOR_INTERVAL.as_nanos() as u64;
    for c in [500 * MS, due, 2 * due - 1] {
        counter.store(c, Relaxed);
        assert_eq!(clock.now_ns(), START + c);
        assert_eq!(line.current.load(Relaxed), 0);
        assert_eq!(clock.inner.writer.holder.load(Relaxed), parent);
    }
    // A whole interval late, a reader takes it over.
    let due = 2 * due;
    counter.store(due, Relaxed);
    assert_eq!(clock.now_ns(), START + due);
    assert_eq!(
        line.current.load(Relaxed),
        1,
        "the due comparison published"
    );
    assert_eq!(clock.inner.writer.holder.load(Relaxed), 0, "given back");
    let straight = line.load_straight().expect("the straight part open again");
    assert_eq!(straight, Straight::of(&line.load(), &clock.inner.counter));
    counter.store(due + MS, Relaxed);
    assert_eq!(clock.now_ns(), START + due + MS);
    // Held in another process again: the waiting writers take it over too.
    clock.inner.writer.holder.store(parent, Relaxed);
    clock.reanchor();
    clock.inner.writer.holder.store(parent, Relaxed);
    assert_eq!(clock.advance_to(START + 2 * due), START + 2 * due);
    assert_eq!(line.current.load(Relaxed), 3);
    assert_eq!(clock.now_ns(), START + 2 * due);
}

/// Threads reading a clock on a rounding counter (quanta's mock at 3 GHz) while another
/// moves the counter, moves the wall clock both ways, compares and moves the clock
/// forward; comparisons due every millisecond, so readers compare, slew and straighten
/// too: every thread's readings never decrease.
#[test]
fn readers_racing_writers_on_a_rounding_counter_never_go_back() {
    use std::sync::atomic::{AtomicBool, AtomicI64};
    let offset = Arc::new(AtomicI64::new(0));
    let o = Arc::clone(&offset);
    let (clock, mock) = on_mock_every(1_431_655_765, Duration::from_millis(1), move |ns| {
        (i128::from(START + ns) + i128::from(o.load(Relaxed))) as u64
    });
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let mut last = 0;
                while !done.load(Relaxed) {
                    let now = clock.now_ns();
                    assert!(now >= last, "{last} then {now}: {} ns back", last - now);
                    last = now;
                }
            });
        }
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..1_000_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            mock.increment(x % 300_000);
            match x % 64 {
                0 => offset.store(((x >> 8) % 10_000_000) as i64 - 5_000_000, Relaxed),
                1 => {
                    clock.reanchor();
                }
                2 => {
                    clock.advance_to(clock.now_ns() + x % 1_000);
                }
                _ => {}
            }
        }
        done.store(true, Relaxed);
    });
}

/// While a thread waits for the writer lock (`reanchor`, `advance_to`), readers due to
/// compare leave the lock to it, so that readers comparing on every read, taking the lock
/// in turn, never hold it up; a reader a whole interval late still compares.
#[test]
fn readers_leave_the_writer_lock_to_a_thread_waiting_for_it() {
    let (clock, counter, _) = simulated(0);
    let due = DEFAULT_REANCHOR_INTERVAL.as_nanos() as u64;
    clock.inner.writer.waiting.fetch_add(1, Relaxed);
    for c in [due, 2 * due - 1] {
        counter.store(c, Relaxed);
        assert_eq!(clock.now_ns(), START + c);
        assert_eq!(
            clock.inner.line.current.load(Relaxed),
            0,
            "a reader compared"
        );
    }
    counter.store(2 * due, Relaxed);
    assert_eq!(clock.now_ns(), START + 2 * due);
    assert_eq!(clock.inner.line.current.load(Relaxed), 1);
    clock.inner.writer.waiting.fetch_sub(1, Relaxed);
    counter.store(3 * due, Relaxed);
    assert_eq!(clock.now_ns(), START + 3 * due);
    assert_eq!(clock.inner.line.current.load(Relaxed), 2);
}

/// The ceiling at counter time `e` ns after it was set at `at` (Unix ns): rising `SLEW_PPM`
/// slower than the counter.
fn ceiling_after(at: u64, e: u64) -> u64 {
    at + e - e / SLEW_DIVISOR
}

/// A wall clock stepped an hour ahead under a ceiling: the clock steps forward to the ceiling
/// less what it can gain on it before its next comparison, says how much of the wall clock it
/// did not follow, and from then on never reads above the ceiling; lifted, it follows the
/// wall clock again.
#[test]
fn a_forward_step_goes_no_further_than_the_ceiling() {
    let (clock, counter, step) = simulated(0);
    counter.store(10 * MS, Relaxed);
    let set_at = clock.now_ns() + 250 * MS;
    clock.set_ceiling(Some(Ceiling {
        unix_ns: set_at,
        slack_ns: 0,
    }));
    step.store(3_600_000 * MS, Relaxed);
    counter.store(2_010 * MS, Relaxed);
    clock.reanchor();
    let at = clock.now_ns();
    // 2 s after it was set: 2 ms less (0.1 %), and 1.1 ms less again (a second's interval and
    // the grace, at 0.1 %).
    assert_eq!(at, set_at + 2_000 * MS - 2 * MS - 1_100_000);
    assert_eq!(clock.reanchor_count(), 1);
    let wall = wall_of(0, 2_010 * MS, 3_600_000 * MS as i64) as u64;
    assert_eq!(clock.report().held_back_ns, wall - at);
    // The skew is the wall clock's over the clock before the comparison: the whole step.
    assert_eq!(clock.last_skew_ns(), 3_600_000 * MS as i64);
    // A minute read every millisecond: never above the ceiling, never back, within 3 ms of it.
    let mut last = at;
    for ms in 2_011..62_000u64 {
        counter.store(ms * MS, Relaxed);
        let now = clock.now_ns();
        let ceiling = ceiling_after(set_at, (ms - 10) * MS);
        assert!(now >= last, "back at {ms} ms");
        assert!(
            now <= ceiling,
            "{} ns above the ceiling at {ms} ms",
            now - ceiling
        );
        assert!(
            ceiling - now < 3 * MS,
            "{} ns below the ceiling at {ms} ms",
            ceiling - now
        );
        last = now;
    }
    clock.set_ceiling(None);
    counter.store(62_001 * MS, Relaxed);
    clock.reanchor();
    assert_eq!(
        clock.now_ns(),
        wall_of(0, 62_001 * MS, 3_600_000 * MS as i64) as u64
    );
    assert_eq!(clock.report().held_back_ns, 0);
}

/// A store's clock 500 ppm slower than this host's counter (NTP slewing it at its fastest),
/// or faster, its reading set as the ceiling every 500 ms (what a holder does after each
/// renewal, 250 ms lead less a 5 ms margin), with the wall clock an hour ahead for ten
/// minutes: at every renewal the clock is within the lead of the store's, and it keeps close
/// under it; with the wall clock back, it slews back to it.
#[test]
fn under_a_ceiling_renewed_from_a_drifting_store_the_clock_keeps_within_the_lead() {
    for ppm in [-500i64, 500, 0] {
        let (clock, counter, step) = simulated(0);
        let store = |e: u64| {
            (i128::from(START) + e as i128 + e as i128 * i128::from(ppm) / 1_000_000) as u64
        };
        step.store(3_600_000 * MS, Relaxed);
        let mut worst = 0u64;
        let mut lowest = u64::MAX;
        for renewal in 1..=1_200u64 {
            let e = renewal * 500 * MS;
            // Read as the renewal reads it (before it is sent), compared with the store's.
            counter.store(e, Relaxed);
            let holder = clock.now_ns();
            let lead = holder.saturating_sub(store(e));
            if renewal > 1 {
                worst = worst.max(lead);
                lowest = lowest.min(lead);
            }
            assert!(
                lead <= 250 * MS,
                "ppm {ppm}: {lead} ns ahead at renewal {renewal}"
            );
            clock.set_ceiling(Some(Ceiling {
                unix_ns: store(e) + 245 * MS,
                slack_ns: 0,
            }));
            // Read every 10 ms until the next renewal.
            for k in 1..50 {
                counter.store(e + k * 10 * MS, Relaxed);
                clock.now_ns();
            }
        }
        eprintln!("ppm {ppm:+}: lead over the store's clock {lowest}..={worst} ns");
        assert!(
            lowest > 230 * MS,
            "ppm {ppm}: fell {lowest} ns behind the lead"
        );
        // The wall clock right again (the store's): the clock slews back to it.
        let e = 1_201 * 500 * MS;
        step.store(
            (e as i128 * i128::from(ppm) / 1_000_000) as i64 as u64,
            Relaxed,
        );
        counter.store(e, Relaxed);
        clock.reanchor();
        assert!(
            clock.report().slew_left_ns > 200 * MS,
            "ppm {ppm}: {:?}",
            clock.report()
        );
    }
}

/// A wall clock within the slack past the ceiling may be right (etcd's `Date` is read to the
/// second): a clock at it is not slewed back, and a forward step still stops at the ceiling.
/// Past the slack, the clock slews back towards the ceiling.
#[test]
fn within_the_slack_the_clock_is_left_alone_beyond_it_slewed_to_the_ceiling() {
    let (clock, counter, step) = simulated(0);
    counter.store(10 * MS, Relaxed);
    let now = clock.now_ns();
    // The store's reading was truncated: the ceiling is 300 ms below the (right) wall clock.
    let set_at = now - 300 * MS;
    clock.set_ceiling(Some(Ceiling {
        unix_ns: set_at,
        slack_ns: 1_000 * MS,
    }));
    for s in 1..=10u64 {
        counter.store(10 * MS + s * 1_000 * MS, Relaxed);
        clock.reanchor();
    }
    let e = 10 * MS + 10_000 * MS;
    assert_eq!(clock.now_ns(), wall_of(0, e, 0) as u64);
    assert_eq!(clock.report().slew_left_ns, 0);
    assert!(clock.report().held_back_ns == 0);
    // The wall clock 500 ms ahead (still within the slack past the ceiling): not followed.
    step.store(500 * MS, Relaxed);
    counter.store(e + 1_000 * MS, Relaxed);
    clock.reanchor();
    assert_eq!(clock.now_ns(), wall_of(0, e + 1_000 * MS, 0) as u64);
    assert_eq!(clock.report().held_back_ns, 500 * MS);
    assert_eq!(clock.reanchor_count(), 0);
    // 5 s ahead: beyond the slack; the clock slews back towards the ceiling.
    step.store(5_000 * MS, Relaxed);
    counter.store(e + 2_000 * MS, Relaxed);
    clock.reanchor();
    let ceiling = ceiling_after(set_at, e + 2_000 * MS - 10 * MS) - 1_100_000;
    assert_eq!(
        clock.report().slew_left_ns,
        wall_of(0, e + 2_000 * MS, 0) as u64 - ceiling
    );
    assert_eq!(clock.reanchor_count(), 0);
}

/// `now` under a ceiling, in every case: the wall clock below it, within its slack past it,
/// beyond.
#[test]
fn what_a_comparison_follows_under_a_ceiling() {
    assert_eq!(follows(100, 50, None), 100);
    assert_eq!(follows(100, 50, Some((200, 0))), 100);
    assert_eq!(follows(300, 50, Some((200, 0))), 200);
    assert_eq!(follows(300, 250, Some((200, 0))), 200);
    assert_eq!(follows(300, 50, Some((200, 150))), 200);
    assert_eq!(follows(300, 250, Some((200, 150))), 250);
    assert_eq!(follows(300, 350, Some((200, 150))), 300);
    assert_eq!(follows(400, 250, Some((200, 150))), 200);
}

proptest::proptest! {
    /// Reads, comparisons and forward moves at any counter readings, with a wall clock that
    /// jumps both ways and comparisons due every second, every millisecond or on every
    /// read: each new piece reads no less than the old one through the grace after the
    /// counter reading it was published at, and readings on one thread never go back.
    #[test]
    fn every_new_piece_continues_the_line_through_the_grace(
        k in proptest::prop_oneof![
            proptest::strategy::Just(1u64 << 32),
            proptest::strategy::Just(1_431_655_765u64),
            1u64 << 28..1u64 << 38,
        ],
        interval in proptest::sample::select(vec![1_000_000_000u64, 1_000_000, 0]),
        steps in proptest::collection::vec(
            (0u64..3_000_000_000, -20_000_000i64..20_000_000, 0u8..4),
            1..40,
        ),
    ) {
        let offset = Arc::new(std::sync::atomic::AtomicI64::new(0));
        let o = Arc::clone(&offset);
        let (clock, mock) = on_mock_every(k, Duration::from_nanos(interval), move |ns| {
            (i128::from(START + ns) + i128::from(o.load(Relaxed))) as u64
        });
        let counter = &clock.inner.counter;
        let grace = counter.units(SLEW_GRACE_NS);
        let mut last = 0u64;
        for (advance_ns, jump, op) in steps {
            mock.increment(counter.units(advance_ns));
            offset.store(jump, Relaxed);
            let old = clock.inner.line.load();
            let c = mock.value();
            let now = match op {
                0 => {
                    clock.reanchor();
                    clock.now_ns()
                }
                1 => clock.advance_to(last.saturating_add(advance_ns % 5_000_000)),
                _ => clock.now_ns(),
            };
            proptest::prop_assert!(now >= last, "{} then {}", last, now);
            last = now;
            let new = clock.inner.line.load();
            let xs = (c..c + grace).step_by((grace / 97).max(1) as usize).chain([c + grace]);
            let back = first_back(&clock, &old, &new, xs);
            proptest::prop_assert_eq!(back, None, "{:?} then {:?}", old, new);
        }
    }
}
