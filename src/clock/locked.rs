//! The locked clock: the wall clock read once, then advanced by quanta's monotonic counter.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::{TimeSource, wall_clock_ns};
use crate::sync::{AtomicU64, Ordering};

/// How often a [`LockedClock`] compares itself with the wall clock, by default.
pub const DEFAULT_REANCHOR_INTERVAL: Duration = Duration::from_secs(1);
/// By how much the wall clock must be ahead before a [`LockedClock`] moves forward, by default.
pub const DEFAULT_REANCHOR_TOLERANCE: Duration = Duration::from_millis(1);

type WallFn = dyn Fn() -> u64 + Send + Sync;

/// The default time source: the wall clock read once, then advanced by quanta's monotonic
/// counter, re-anchored forward only.
///
/// * Setting the system clock back changes nothing: after the start only the monotonic counter
///   moves this clock.
/// * The monotonic counter misses suspend time and drifts with its calibration, so every
///   [`DEFAULT_REANCHOR_INTERVAL`] (checked on a read, no thread needed) the clock compares
///   itself with the wall clock. When the wall clock is ahead by more than the tolerance it
///   moves forward to it; it never moves back. [`LockedClock::last_skew_ns`] reports the skew.
/// * One read costs one counter read (`rdtsc` where quanta can use it) plus a relaxed load.
///
/// Clones share the anchor: they read the same time.
///
/// # Example
///
/// ```
/// use monoflake::{LockedClock, TimeSource};
///
/// let clock = LockedClock::new();
/// let a = clock.now_ms();
/// let b = clock.now_ms();
/// assert!(b >= a);
/// // Within a second or so of the wall clock right after the start.
/// let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
/// assert!(a.abs_diff(wall.as_millis() as u64) < 1000);
/// ```
#[derive(Clone)]
pub struct LockedClock {
    inner: Arc<LockedInner>,
}

struct LockedInner {
    counter: quanta::Clock,
    start_raw: u64,
    base_ns: u64,
    interval_ns: u64,
    tolerance_ns: u64,
    wall: Box<WallFn>,
    // Ordering: these are statistics and a forward-only offset; each is a self-contained value
    // read and written with Relaxed. The offset is combined with fetch_max, so concurrent
    // re-anchors agree without a lock and the offset never decreases.
    offset_ns: AtomicU64,
    next_check_ns: AtomicU64,
    last_skew_ns: AtomicU64,
    max_skew_ns: AtomicU64,
    reanchors: AtomicU64,
}

impl fmt::Debug for LockedClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockedClock")
            .field("base_ns", &self.inner.base_ns)
            .field("offset_ns", &self.forward_ns())
            .field("last_skew_ns", &self.last_skew_ns())
            .finish_non_exhaustive()
    }
}

impl Default for LockedClock {
    fn default() -> Self {
        Self::new()
    }
}

impl LockedClock {
    /// Locks the current wall time, with the default re-anchor interval and tolerance.
    ///
    /// ```
    /// let clock = monoflake::LockedClock::new();
    /// assert_eq!(clock.reanchor_count(), 0);
    /// ```
    pub fn new() -> Self {
        Self::with_wall_clock(
            wall_clock_ns,
            DEFAULT_REANCHOR_INTERVAL,
            DEFAULT_REANCHOR_TOLERANCE,
        )
    }

    /// Locks the time given by `wall` (Unix nanoseconds), which is also what later re-anchors
    /// compare with. `interval` is how often a read compares; `tolerance` how far ahead the
    /// wall clock must be before the clock moves forward. Tests use this to simulate clock
    /// steps.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use std::time::Duration;
    /// use monoflake::{LockedClock, TimeSource};
    ///
    /// static WALL: AtomicU64 = AtomicU64::new(1_700_000_000_000_000_000);
    /// let clock = LockedClock::with_wall_clock(
    ///     || WALL.load(Ordering::Relaxed),
    ///     Duration::from_secs(1),
    ///     Duration::from_millis(1),
    /// );
    /// // The wall clock is set back an hour: the locked clock does not follow.
    /// WALL.fetch_sub(3_600_000_000_000, Ordering::Relaxed);
    /// clock.reanchor();
    /// assert!(clock.now_ms() >= 1_700_000_000_000);
    /// // It jumps ahead a minute: the locked clock follows, forward.
    /// WALL.fetch_add(3_660_000_000_000, Ordering::Relaxed);
    /// clock.reanchor();
    /// assert!(clock.now_ms() >= 1_700_000_060_000);
    /// ```
    pub fn with_wall_clock(
        wall: impl Fn() -> u64 + Send + Sync + 'static,
        interval: Duration,
        tolerance: Duration,
    ) -> Self {
        let counter = quanta::Clock::new();
        let start_raw = counter.raw();
        let base_ns = wall();
        let interval_ns = u64::try_from(interval.as_nanos()).unwrap_or(u64::MAX);
        LockedClock {
            inner: Arc::new(LockedInner {
                counter,
                start_raw,
                base_ns,
                interval_ns,
                tolerance_ns: u64::try_from(tolerance.as_nanos()).unwrap_or(u64::MAX),
                wall: Box::new(wall),
                offset_ns: AtomicU64::new(0),
                next_check_ns: AtomicU64::new(base_ns.saturating_add(interval_ns)),
                last_skew_ns: AtomicU64::new(0),
                max_skew_ns: AtomicU64::new(0),
                reanchors: AtomicU64::new(0),
            }),
        }
    }

    /// The current time in Unix nanoseconds.
    ///
    /// ```
    /// let clock = monoflake::LockedClock::new();
    /// assert!(clock.now_ns() / 1_000_000 >= 1_700_000_000_000);
    /// ```
    #[inline]
    pub fn now_ns(&self) -> u64 {
        let i = &*self.inner;
        let (now, elapsed) = self.read();
        // Ordering: Relaxed; a stale read only delays the next comparison by one read.
        if now >= i.next_check_ns.load(Ordering::Relaxed) {
            i.next_check_ns
                .store(now.saturating_add(i.interval_ns), Ordering::Relaxed);
            return self.reanchor_from(now, elapsed);
        }
        now
    }

    /// Compares with the wall clock now and moves forward if it is ahead by more than the
    /// tolerance. Returns the skew measured (wall minus this clock, in nanoseconds; negative
    /// when this clock is ahead, which is never corrected).
    ///
    /// ```
    /// let clock = monoflake::LockedClock::new();
    /// let skew = clock.reanchor();
    /// assert!(skew.abs() < 1_000_000_000);
    /// ```
    pub fn reanchor(&self) -> i64 {
        let (now, elapsed) = self.read();
        self.reanchor_from(now, elapsed);
        self.last_skew_ns()
    }

    /// The current time in Unix nanoseconds and the counter's elapsed nanoseconds since the
    /// start, without the periodic comparison.
    #[inline]
    fn read(&self) -> (u64, u64) {
        let i = &*self.inner;
        let elapsed = i.counter.delta_as_nanos(i.start_raw, i.counter.raw());
        // Ordering: Relaxed; the offset is a lone value (see the field comment).
        let offset = i.offset_ns.load(Ordering::Relaxed);
        (
            i.base_ns.saturating_add(elapsed).saturating_add(offset),
            elapsed,
        )
    }

    #[cold]
    #[inline(never)]
    fn reanchor_from(&self, now: u64, elapsed: u64) -> u64 {
        let i = &*self.inner;
        let wall = (i.wall)();
        let skew = i128::from(wall) - i128::from(now);
        let skew = i64::try_from(skew).unwrap_or(if skew < 0 { i64::MIN } else { i64::MAX });
        // Ordering: Relaxed; statistics.
        i.last_skew_ns.store(skew as u64, Ordering::Relaxed);
        i.max_skew_ns
            .fetch_max(skew.unsigned_abs(), Ordering::Relaxed);
        if skew > 0 && skew.unsigned_abs() > i.tolerance_ns {
            let target = wall.saturating_sub(i.base_ns).saturating_sub(elapsed);
            // Ordering: Relaxed; fetch_max keeps the offset forward-only under races.
            i.offset_ns.fetch_max(target, Ordering::Relaxed);
            i.reanchors.fetch_add(1, Ordering::Relaxed);
            #[cfg(feature = "tracing")]
            tracing::info!(
                skew_ns = skew,
                "monoflake: clock re-anchored forward to the wall clock"
            );
            return now.max(wall);
        }
        now
    }

    /// The skew found by the last comparison with the wall clock: wall minus this clock, in
    /// nanoseconds (positive: the wall clock was ahead, and this clock moved forward if it was
    /// beyond the tolerance).
    ///
    /// ```
    /// let clock = monoflake::LockedClock::new();
    /// assert_eq!(clock.last_skew_ns(), 0); // no comparison yet
    /// ```
    pub fn last_skew_ns(&self) -> i64 {
        self.inner.last_skew_ns.load(Ordering::Relaxed) as i64
    }

    /// How far forward re-anchoring has moved this clock in total, in nanoseconds.
    ///
    /// ```
    /// assert_eq!(monoflake::LockedClock::new().forward_ns(), 0);
    /// ```
    pub fn forward_ns(&self) -> u64 {
        self.inner.offset_ns.load(Ordering::Relaxed)
    }

    /// How many times re-anchoring moved this clock forward.
    ///
    /// ```
    /// assert_eq!(monoflake::LockedClock::new().reanchor_count(), 0);
    /// ```
    pub fn reanchor_count(&self) -> u64 {
        self.inner.reanchors.load(Ordering::Relaxed)
    }
}

impl TimeSource for LockedClock {
    #[inline]
    fn now_ms(&self) -> u64 {
        self.now_ns() / 1_000_000
    }

    fn reanchor_stats(&self) -> (u64, u64) {
        (
            self.reanchor_count(),
            self.inner.max_skew_ns.load(Ordering::Relaxed),
        )
    }
}
