//! The locked clock on quanta's real counter: extreme settings, and readers racing its
//! comparisons with the wall clock.

use std::time::Duration;

use monoflake::{LockedClock, TimeSource};

fn wall() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// An interval and a tolerance of `Duration::MAX` (never compare, never step) and of zero
/// (compare on every read, step at any lead of the wall clock): no overflow, no panic,
/// readings that never decrease on one thread, a report that holds together.
#[test]
fn extreme_intervals_and_tolerances_neither_overflow_nor_go_back() {
    for (interval, tolerance) in [
        (Duration::MAX, Duration::MAX),
        (Duration::MAX, Duration::ZERO),
        (Duration::ZERO, Duration::MAX),
        (Duration::ZERO, Duration::ZERO),
        (Duration::from_nanos(1), Duration::from_nanos(1)),
    ] {
        let clock = LockedClock::with_wall_clock(wall, interval, tolerance);
        let mut last = 0;
        for _ in 0..10_000 {
            let now = clock.now_ns();
            assert!(now >= last, "{interval:?}/{tolerance:?}: {last} then {now}");
            last = now;
        }
        clock.reanchor();
        assert!(clock.now_ns() >= last);
        let report = clock.report();
        assert!(report.slew_left_ns < 1_000_000_000, "{report:?}");
    }
}

/// `advance_to` with the largest value: the clock stays there (it never goes back), and
/// comparing with a wall clock far behind neither panics nor moves it.
#[test]
fn advance_to_the_end_of_time() {
    let clock = LockedClock::with_wall_clock(wall, Duration::ZERO, Duration::ZERO);
    assert_eq!(clock.advance_to(u64::MAX), u64::MAX);
    assert_eq!(clock.now_ns(), u64::MAX);
    clock.reanchor();
    assert_eq!(clock.now_ns(), u64::MAX);
    assert!(clock.last_skew_ns() < 0);
    assert_eq!(clock.now_ms(), u64::MAX / 1_000_000);
    assert!(clock.report().slew_left_ns > 0);
    assert_eq!(clock.advance_to(u64::MAX - 1), u64::MAX);
}

/// Threads reading a clock that compares on every read (the comparison runs under a lock
/// that readers only try): every thread's readings never decrease.
#[test]
fn readers_racing_comparisons_on_every_read_never_go_back() {
    let clock = LockedClock::with_wall_clock(wall, Duration::ZERO, Duration::ZERO);
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                let mut last = 0;
                for i in 0..1_000_000u32 {
                    let now = clock.now_ns();
                    assert!(
                        now >= last,
                        "read {i}: {last} then {now}: {} ns back",
                        last - now
                    );
                    last = now;
                }
            });
        }
    });
}

/// Readers racing comparisons (`reanchor`) with a wall clock that is slow to read (a syscall
/// on a loaded machine: here 1 ms) and 10 ms behind, so that every comparison slews: the
/// readers keep reading the old segment meanwhile, and must not read less once the new one is
/// published.
#[test]
fn readers_racing_a_slow_wall_clock_read_never_go_back() {
    let slow_wall = || {
        std::thread::sleep(Duration::from_millis(1));
        wall() - 10_000_000
    };
    let clock = LockedClock::with_wall_clock(slow_wall, Duration::MAX, Duration::ZERO);
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let mut last = 0;
                let mut reads = 0u64;
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    let now = clock.now_ns();
                    assert!(
                        now >= last,
                        "read {reads}: {last} then {now}: {} ns back",
                        last - now
                    );
                    last = now;
                    reads += 1;
                }
            });
        }
        for _ in 0..100 {
            clock.reanchor();
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
    });
}

/// A comparison whose wall-clock read is slow (50 ms: a loaded machine) and finds the wall
/// clock ahead steps forward to that later wall time as if it were the time at its earlier
/// counter reading: the clock then runs 50 ms ahead of the wall clock it follows, and a
/// generator with no lead at all issues IDs 50 ms in the future.
#[test]
fn a_slow_wall_clock_read_does_not_put_the_clock_or_ids_ahead_of_it() {
    // The wall clock the locked clock follows: 5 ms ahead of the system's, slow to read.
    let followed = || wall() + 5_000_000;
    let slow = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s = std::sync::Arc::clone(&slow);
    let clock = LockedClock::with_wall_clock(
        move || {
            if s.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
            }
            followed()
        },
        Duration::MAX,
        Duration::from_millis(1),
    );
    let generator = monoflake::Generator::builder(monoflake::Layout::twitter())
        .clock(clock.clone())
        .max_lead(Duration::ZERO)
        .build()
        .unwrap();
    slow.store(true, std::sync::atomic::Ordering::Relaxed);
    clock.reanchor();
    let id = generator.try_next_id().unwrap();
    let id_ms = id.parts(generator.layout()).unwrap().unix_ms();
    let wall_ms = followed() / 1_000_000;
    assert!(
        id_ms <= wall_ms,
        "an ID {} ms ahead of the wall clock with max_lead 0",
        id_ms - wall_ms
    );
}

/// Readers (the clock, and a generator on it) racing a thread that moves the wall clock both
/// ways by up to 20 ms, compares (`reanchor`) and moves the clock forward (`advance_to`) in a
/// loop, with comparisons also due on reads every 50 µs: every thread's readings never
/// decrease, its IDs increase, and no ID repeats across threads.
#[test]
fn readers_racing_a_wall_clock_that_jumps_both_ways_never_go_back() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicI64, Ordering::Relaxed};

    let offset = Arc::new(AtomicI64::new(0));
    let o = Arc::clone(&offset);
    let clock = LockedClock::with_wall_clock(
        move || (wall() as i64 + o.load(Relaxed)) as u64,
        Duration::from_micros(50),
        Duration::from_micros(10),
    );
    let generator = monoflake::Generator::builder(monoflake::Layout::twitter())
        .clock(clock.clone())
        .build()
        .unwrap();
    let done = AtomicBool::new(false);
    let ids = std::thread::scope(|s| {
        let readers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let (mut last, mut last_id, mut ids) = (0, 0, Vec::new());
                    while !done.load(Relaxed) {
                        for _ in 0..64 {
                            let now = clock.now_ns();
                            assert!(now >= last, "{last} then {now}: {} ns back", last - now);
                            last = now;
                        }
                        if let Ok(id) = generator.try_next_id() {
                            assert!(id.as_u64() > last_id, "{last_id} then {}", id.as_u64());
                            last_id = id.as_u64();
                            ids.push(last_id);
                        }
                    }
                    ids
                })
            })
            .collect();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            offset.store((x % 40_000_001) as i64 - 20_000_000, Relaxed);
            match x % 3 {
                0 => {
                    clock.reanchor();
                }
                1 => {
                    clock.advance_to(clock.now_ns() + x % 100_000);
                }
                _ => std::thread::yield_now(),
            }
        }
        done.store(true, Relaxed);
        readers
            .into_iter()
            .flat_map(|r| r.join().unwrap())
            .collect::<Vec<_>>()
    });
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), ids.len(), "an ID repeated");
}
