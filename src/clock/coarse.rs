//! The coarse clock: a locked clock sampled by a background ticker thread.

use std::sync::Arc;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use super::{LockedClock, TimeSource};
use crate::sync::{AtomicBool, AtomicU64, Ordering};

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
    now_ns: CachePadded<AtomicU64>,
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
            now_ns: CachePadded::new(AtomicU64::new(precise.now_ns())),
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
                        .now_ns
                        .fetch_max(worker.precise.now_ns(), Ordering::Relaxed);
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
                pid: std::process::id(),
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
        self.now_ns() / 1_000_000
    }

    #[inline]
    fn now_ns(&self) -> u64 {
        self.inner.now_ns.load(Ordering::Relaxed)
    }

    fn precise_now_ms(&self) -> u64 {
        self.precise_now_ns() / 1_000_000
    }

    fn precise_now_ns(&self) -> u64 {
        let now = self.inner.precise.now_ns();
        self.inner.now_ns.fetch_max(now, Ordering::Relaxed);
        now
    }

    fn is_coarse(&self) -> bool {
        true
    }

    fn report(&self) -> super::ClockReport {
        self.inner.precise.report()
    }

    fn set_ceiling(&self, ceiling: Option<super::Ceiling>) -> bool {
        self.inner.precise.set_ceiling(ceiling);
        true
    }

    fn advance_to_ms(&self, unix_ms: u64) -> bool {
        self.inner.precise.advance_to_ms(unix_ms);
        self.inner
            .now_ns
            .fetch_max(self.inner.precise.now_ns(), Ordering::Relaxed);
        true
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
    /// The process that started the thread.
    pid: u32,
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.inner.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            if std::process::id() != self.pid {
                // A forked child has no ticker thread to join.
                std::mem::forget(t);
                return;
            }
            t.thread().unpark();
            let _ = t.join();
        }
    }
}
