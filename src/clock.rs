//! Where generators get the time: the locked clock, its coarse variant, and a manual clock.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crossbeam_utils::CachePadded;

use crate::sync::{AtomicBool, AtomicU64, Ordering};

/// A source of Unix time in milliseconds for a [`Generator`](crate::Generator).
///
/// The generator never trusts a single reading: its state only moves forward, so a source that
/// jumps back (a test clock, a TSC read on another core) can slow the time field down but never
/// make an ID go back or repeat.
///
/// * [`LockedClock`]: the default. Wall time read once at start, advanced by a monotonic counter.
/// * [`CoarseClock`]: a [`LockedClock`] sampled by a background ticker; one atomic load per read.
/// * [`ManualClock`]: moved by hand, for tests.
///
/// # Example
///
/// ```
/// use monoflake::TimeSource;
///
/// // A clock frozen at one instant: the generator borrows ticks, then reports WouldBlock.
/// struct Frozen(u64);
/// impl TimeSource for Frozen {
///     fn now_ms(&self) -> u64 {
///         self.0
///     }
/// }
/// assert_eq!(Frozen(5).precise_now_ms(), 5);
/// ```
pub trait TimeSource: Send + Sync {
    /// The current Unix time in milliseconds. May be a cheap, slightly stale reading when
    /// [`TimeSource::is_coarse`] says so.
    fn now_ms(&self) -> u64;

    /// An exact reading, consulted on the slow path (sequence full, lead check) when the source
    /// is coarse. Defaults to [`TimeSource::now_ms`].
    fn precise_now_ms(&self) -> u64 {
        self.now_ms()
    }

    /// Whether [`TimeSource::now_ms`] may lag behind [`TimeSource::precise_now_ms`].
    fn is_coarse(&self) -> bool {
        false
    }

    /// How many times the source moved forward to the wall clock, and the largest skew it saw
    /// between itself and the wall clock (nanoseconds, either direction). Sources that do not
    /// re-anchor report `(0, 0)`.
    fn reanchor_stats(&self) -> (u64, u64) {
        (0, 0)
    }
}

/// A shared or borrowed time source is a time source: `Arc<ManualClock>` for tests that move
/// the clock while a generator reads it, `&T` for generators that borrow one.
macro_rules! forward_time_source {
    ($($outer:ty),*) => {$(
        impl<T: TimeSource + ?Sized> TimeSource for $outer {
            fn now_ms(&self) -> u64 {
                (**self).now_ms()
            }
            fn precise_now_ms(&self) -> u64 {
                (**self).precise_now_ms()
            }
            fn is_coarse(&self) -> bool {
                (**self).is_coarse()
            }
            fn reanchor_stats(&self) -> (u64, u64) {
                (**self).reanchor_stats()
            }
        }
    )*};
}

forward_time_source!(Arc<T>, &T);

/// The system's wall clock in Unix milliseconds (0 before 1970).
pub(crate) fn wall_clock_ms() -> u64 {
    wall_clock_ns() / 1_000_000
}

fn wall_clock_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

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

/// How often a [`CoarseClock`]'s ticker samples the locked clock, by default.
pub const DEFAULT_TICKER_INTERVAL: Duration = Duration::from_micros(200);

/// A [`LockedClock`] sampled by a background ticker: a read is one relaxed atomic load.
///
/// * Started by [`CoarseClock::start`], which returns the clock and the [`Ticker`] handle; the
///   ticker thread stops and is joined when the handle is dropped.
/// * A reading lags the locked clock by up to one ticker interval (plus scheduling delay).
/// * The reading is only a hint: generators consult [`TimeSource::precise_now_ms`] on their
///   slow path (sequence full, lead check), so a stalled or stopped ticker (a loaded machine,
///   a child after `fork()`) can neither freeze a generator nor make it report `WouldBlock`
///   wrongly. That precise read also pushes the coarse value forward.
///
/// # Example
///
/// ```
/// use monoflake::{CoarseClock, TimeSource};
///
/// let (clock, ticker) = CoarseClock::start(monoflake::DEFAULT_TICKER_INTERVAL)?;
/// assert!(clock.is_coarse());
/// let coarse = clock.now_ms();
/// assert!(clock.precise_now_ms() >= coarse);
/// drop(ticker); // stops and joins the thread; the clock still answers (precise on demand)
/// assert!(clock.precise_now_ms() >= coarse);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct CoarseClock {
    inner: Arc<CoarseInner>,
}

#[derive(Debug)]
struct CoarseInner {
    // Ordering: Relaxed everywhere; the value is a lone, forward-only number (fetch_max), and
    // readers need no other memory published with it.
    now_ms: CachePadded<AtomicU64>,
    stop: AtomicBool,
    precise: LockedClock,
}

impl CoarseClock {
    /// Starts a ticker over a new [`LockedClock`].
    ///
    /// # Errors
    ///
    /// The I/O error of spawning the thread.
    ///
    /// ```
    /// use monoflake::TimeSource;
    /// let (clock, _ticker) = monoflake::CoarseClock::start(std::time::Duration::from_millis(1))?;
    /// assert!(clock.now_ms() > 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn start(interval: Duration) -> std::io::Result<(CoarseClock, Ticker)> {
        Self::start_over(LockedClock::new(), interval)
    }

    /// Starts a ticker over the given locked clock.
    ///
    /// # Errors
    ///
    /// The I/O error of spawning the thread.
    ///
    /// ```
    /// let locked = monoflake::LockedClock::new();
    /// let (clock, _ticker) = monoflake::CoarseClock::start_over(locked, monoflake::DEFAULT_TICKER_INTERVAL)?;
    /// assert_eq!(clock.locked().reanchor_count(), 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn start_over(
        precise: LockedClock,
        interval: Duration,
    ) -> std::io::Result<(CoarseClock, Ticker)> {
        let inner = Arc::new(CoarseInner {
            now_ms: CachePadded::new(AtomicU64::new(precise.now_ms())),
            stop: AtomicBool::new(false),
            precise,
        });
        let worker = Arc::clone(&inner);
        let thread = std::thread::Builder::new()
            .name("monoflake-ticker".into())
            .spawn(move || {
                // Ordering: Relaxed; the flag carries no data, and the join in Ticker::drop is the
                // synchronisation that matters.
                while !worker.stop.load(Ordering::Relaxed) {
                    worker
                        .now_ms
                        .fetch_max(worker.precise.now_ms(), Ordering::Relaxed);
                    std::thread::park_timeout(interval);
                }
            })?;
        Ok((
            CoarseClock {
                inner: Arc::clone(&inner),
            },
            Ticker {
                inner,
                thread: Some(thread),
            },
        ))
    }

    /// The locked clock underneath.
    ///
    /// ```
    /// let (clock, _t) = monoflake::CoarseClock::start(monoflake::DEFAULT_TICKER_INTERVAL)?;
    /// assert_eq!(clock.locked().reanchor_count(), 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn locked(&self) -> &LockedClock {
        &self.inner.precise
    }
}

impl TimeSource for CoarseClock {
    #[inline]
    fn now_ms(&self) -> u64 {
        self.inner.now_ms.load(Ordering::Relaxed)
    }

    fn precise_now_ms(&self) -> u64 {
        let now = self.inner.precise.now_ms();
        self.inner.now_ms.fetch_max(now, Ordering::Relaxed);
        now
    }

    fn is_coarse(&self) -> bool {
        true
    }

    fn reanchor_stats(&self) -> (u64, u64) {
        self.inner.precise.reanchor_stats()
    }
}

/// The handle of a [`CoarseClock`]'s ticker thread: dropping it stops and joins the thread.
///
/// ```
/// let (_clock, ticker) = monoflake::CoarseClock::start(monoflake::DEFAULT_TICKER_INTERVAL)?;
/// drop(ticker);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Ticker {
    inner: Arc<CoarseInner>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.inner.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// A clock moved only by hand, for tests and models: it stands still until told to move,
/// and it can move forward or back.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use monoflake::{Generator, Layout, ManualClock};
///
/// let clock = Arc::new(ManualClock::new(1_700_000_000_000));
/// let generator = Generator::builder(Layout::twitter()).clock(Arc::clone(&clock)).build()?;
/// let a = generator.try_next_id()?;
/// clock.rewind_ms(3_600_000); // an hour back
/// let b = generator.try_next_id()?;
/// assert!(b > a);
/// # Ok::<(), monoflake::Error>(())
/// ```
#[derive(Debug)]
pub struct ManualClock {
    // Ordering: Relaxed; a lone value that tests move from any thread.
    now_ms: AtomicU64,
}

impl ManualClock {
    /// A clock standing at `unix_ms`.
    ///
    /// ```
    /// use monoflake::TimeSource;
    /// assert_eq!(monoflake::ManualClock::new(5).now_ms(), 5);
    /// ```
    pub fn new(unix_ms: u64) -> Self {
        ManualClock {
            now_ms: AtomicU64::new(unix_ms),
        }
    }

    /// Sets the time.
    ///
    /// ```
    /// use monoflake::TimeSource;
    /// let c = monoflake::ManualClock::new(5);
    /// c.set_ms(2);
    /// assert_eq!(c.now_ms(), 2);
    /// ```
    pub fn set_ms(&self, unix_ms: u64) {
        self.now_ms.store(unix_ms, Ordering::Relaxed);
    }

    /// Moves the time forward by `ms`.
    ///
    /// ```
    /// use monoflake::TimeSource;
    /// let c = monoflake::ManualClock::new(5);
    /// c.advance_ms(3);
    /// assert_eq!(c.now_ms(), 8);
    /// ```
    pub fn advance_ms(&self, ms: u64) {
        self.now_ms.fetch_add(ms, Ordering::Relaxed);
    }

    /// Moves the time back by `ms` (not below 0).
    ///
    /// ```
    /// use monoflake::TimeSource;
    /// let c = monoflake::ManualClock::new(5);
    /// c.rewind_ms(3);
    /// assert_eq!(c.now_ms(), 2);
    /// ```
    pub fn rewind_ms(&self, ms: u64) {
        let now = self.now_ms.load(Ordering::Relaxed);
        self.now_ms.store(now.saturating_sub(ms), Ordering::Relaxed);
    }
}

impl TimeSource for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now_ms.load(Ordering::Relaxed)
    }
}
