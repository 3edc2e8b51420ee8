//! The locked clock: the wall clock read once, then advanced by quanta's monotonic counter;
//! stepped forward to the wall clock, slewed (never stepped) back to it.
//!
//! Its rooms, each of one purpose:
//!
//! * `counter.rs`: the counter and its calibration (counter units to nanoseconds);
//! * `segment.rs`: the line's arithmetic, pure: a piece of the line, its slew, its straight
//!   part;
//! * `publication.rs`: the piece published to readers: a double-buffered sequence lock, and
//!   the straight part behind a sequence lock of its own;
//! * `writer.rs`: the writer lock, which a forked child takes over;
//! * `policy.rs`: what a comparison with the wall clock makes of the line, pure;
//! * this file: [`LockedClock`], which ties them together: the hot read, the comparison (wall
//!   clock and counter read under the writer lock, the policy asked, the piece published), the
//!   straightening past a slew, forward moves and the report.
//!
//! This file alone reads the wall clock and keeps the statistics. The arrows run one way: it
//! uses all five; `policy` and `publication` use `segment` and `counter`; `segment` uses
//! `counter`; `writer` and `counter` use none of them. The unit tests that drive the clock as
//! a whole are in `tests.rs`; the pure parts' own are beside them.

mod counter;
mod policy;
mod publication;
mod segment;
#[cfg(test)]
mod tests;
mod writer;

pub use self::policy::{DEFAULT_REANCHOR_INTERVAL, DEFAULT_REANCHOR_TOLERANCE};
pub use self::segment::SLEW_PPM;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use self::counter::Counter;
use self::policy::Policy;
use self::publication::Line;
use self::segment::{SLEW_DIVISOR, SLEW_GRACE_NS, Segment, Straight};
use self::writer::WriterLock;
use super::{Ceiling, ClockReport, TimeSource, wall_clock_ns};
use crate::sync::{AtomicU64, Ordering};

type WallFn = dyn Fn() -> u64 + Send + Sync;

/// The default time source: the wall clock read once, then advanced by quanta's monotonic
/// counter; stepped forward to the wall clock, slewed back to it, never stepped back.
///
/// * Setting the system clock back changes nothing at once: after the start only the
///   monotonic counter moves this clock.
/// * The monotonic counter misses suspend time and drifts with its calibration, so every
///   [`DEFAULT_REANCHOR_INTERVAL`] (checked on a read, no thread needed) the clock compares
///   itself with the wall clock:
///   * wall clock ahead by more than the tolerance: the clock **steps forward** to it;
///   * wall clock behind: the clock **slews**, running [`SLEW_PPM`] slower than its counter
///     until it meets the wall clock. It never moves back, and a reading never decreases.
///
///   With a counter that drifts ±200 ppm the clock stays within about 1.2 ms of the wall
///   clock. [`LockedClock::report`] gives the skew and the slew left.
/// * One read costs one counter read (`rdtsc` where quanta can use it) plus a handful of
///   loads from one cache line.
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
    counter: Counter,
    base_ns: u64,
    /// When to compare with the wall clock, and what to make of it.
    policy: Policy,
    wall: Box<WallFn>,
    line: Line,
    /// Serialises writers of `line`; a reader that finds it taken leaves the work to the
    /// holder.
    writer: WriterLock,
    // Ordering: Relaxed; statistics, each a lone value.
    forward_ns: AtomicU64,
    last_skew_ns: AtomicU64,
    max_skew_ns: AtomicU64,
    reanchors: AtomicU64,
    /// The ceiling on forward steps ([`TimeSource::set_ceiling`]): the counter reading at
    /// which it was set, its value there (Unix ns; [`NO_CEILING`] for none) and its slack.
    /// Written and read under the writer lock only: comparisons read it, the hot path never.
    ceiling_raw: AtomicU64,
    ceiling_ns: AtomicU64,
    ceiling_slack_ns: AtomicU64,
    // Ordering: Relaxed; statistics.
    held_back_ns: AtomicU64,
    /// Whether the last comparison found the wall clock past the ceiling and its slack (said
    /// once, when that begins). Under the writer lock.
    beyond_ceiling: AtomicU64,
}

/// `ceiling_ns` when no ceiling is set.
const NO_CEILING: u64 = u64::MAX;

impl fmt::Debug for LockedClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockedClock")
            .field("base_ns", &self.inner.base_ns)
            .field("forward_ns", &self.forward_ns())
            .field("last_skew_ns", &self.last_skew_ns())
            .field("slew_left_ns", &self.report().slew_left_ns)
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

    /// Locks the time given by `wall` (Unix nanoseconds), which is also what later comparisons
    /// use. `interval` is how often a read compares; `tolerance` how far ahead the wall clock
    /// must be before the clock steps forward (when it is behind, the clock slews). Tests use
    /// this to simulate clock steps and drift.
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
    /// // The wall clock is set back an hour: the locked clock does not follow, it slews.
    /// WALL.fetch_sub(3_600_000_000_000, Ordering::Relaxed);
    /// clock.reanchor();
    /// assert!(clock.now_ms() >= 1_700_000_000_000);
    /// assert!(clock.report().slew_left_ns > 3_599_000_000_000);
    /// // It jumps ahead a minute: the locked clock steps forward to it.
    /// WALL.fetch_add(3_660_000_000_000, Ordering::Relaxed);
    /// clock.reanchor();
    /// assert!(clock.now_ms() >= 1_700_000_060_000);
    /// assert_eq!(clock.report().slew_left_ns, 0);
    /// ```
    pub fn with_wall_clock(
        wall: impl Fn() -> u64 + Send + Sync + 'static,
        interval: Duration,
        tolerance: Duration,
    ) -> Self {
        Self::with_counter(Counter::quanta(), wall, interval, tolerance)
    }

    fn with_counter(
        counter: Counter,
        wall: impl Fn() -> u64 + Send + Sync + 'static,
        interval: Duration,
        tolerance: Duration,
    ) -> Self {
        let base_ns = wall();
        let interval_ns = u64::try_from(interval.as_nanos()).unwrap_or(u64::MAX);
        let interval = counter.units(interval_ns);
        let start = counter.raw();
        let first = Segment {
            start,
            at: base_ns,
            slew_for: 0,
            slew_from: 0,
            check_at: start.saturating_add(interval),
        };
        let line = Line::new(first, &counter);
        LockedClock {
            inner: Arc::new(LockedInner {
                counter,
                base_ns,
                policy: Policy {
                    interval,
                    tolerance_ns: u64::try_from(tolerance.as_nanos()).unwrap_or(u64::MAX),
                },
                wall: Box::new(wall),
                line,
                writer: WriterLock::new(),
                forward_ns: AtomicU64::new(0),
                last_skew_ns: AtomicU64::new(0),
                max_skew_ns: AtomicU64::new(0),
                reanchors: AtomicU64::new(0),
                ceiling_raw: AtomicU64::new(0),
                ceiling_ns: AtomicU64::new(NO_CEILING),
                ceiling_slack_ns: AtomicU64::new(0),
                held_back_ns: AtomicU64::new(0),
                beyond_ceiling: AtomicU64::new(0),
            }),
        }
    }

    /// The current time in Unix nanoseconds. Never less than an earlier reading on the same
    /// thread.
    ///
    /// ```
    /// let clock = monoflake::LockedClock::new();
    /// assert!(clock.now_ns() / 1_000_000 >= 1_700_000_000_000);
    /// ```
    #[inline]
    pub fn now_ns(&self) -> u64 {
        let i = &*self.inner;
        // The counter first: a segment published after this read starts at or after it, and
        // reads as its own start — never less than the older segment gave.
        let raw = i.counter.raw();
        if let Some(straight) = i.line.load_straight()
            && let Some(now) = straight.read(raw.wrapping_sub(straight.start), &i.counter)
        {
            return now;
        }
        self.now_beyond(raw)
    }

    /// [`LockedClock::now_ns`] outside the straight part: in a slew's slow part or past it,
    /// before the segment's start, once the next comparison with the wall clock is due, or
    /// while a writer publishes.
    #[cold]
    #[inline(never)]
    fn now_beyond(&self, raw: u64) -> u64 {
        // Loaded after `raw` was read, as the straight part was.
        let segment = self.inner.line.load();
        let now = self.read_at(&segment, raw);
        if raw >= segment.check_at {
            // A reader a whole interval late takes the lock over if a parent's thread held it
            // when this process was forked; one less late finds it taken and goes on.
            let take_over = raw - segment.check_at >= self.inner.policy.interval;
            return self.compare(raw, now, false, take_over).unwrap_or(now);
        }
        // (Not where the new piece could have no straight part either: near the end of u64.)
        if raw > segment.start
            && now < u64::MAX - (1 << 32)
            && segment.slew_done(self.inner.counter.ns(raw - segment.start))
        {
            self.straighten();
        }
        now
    }

    /// Past a slew's slow part the line runs straight again, but the straight part a reader
    /// reads first is at the start of a segment: publish the line from here on as a segment of
    /// its own, straight from its start. Called by a reader that found the line straight but
    /// outside the straight part (others find the writer lock taken and go on); nothing to do
    /// if another did it first.
    #[cold]
    #[inline(never)]
    fn straighten(&self) {
        let i = &*self.inner;
        let Some(_writer) = i.writer.try_lock(false) else {
            return;
        };
        // Under the lock: the counter now, and the segment as it is now.
        let raw = i.counter.raw();
        let current = i.line.load();
        if raw < current.start || raw >= current.check_at {
            return;
        }
        let d = raw - current.start;
        if !current.slew_done(i.counter.ns(d))
            || Straight::of(&current, &i.counter)
                .read(d, &i.counter)
                .is_some()
        {
            return;
        }
        // The new piece reads what the old one reads here (and one more where the conversion
        // rounds), at the counter's rate: never below the old piece from here on.
        let next = Segment {
            start: raw,
            at: self
                .read_at(&current, raw)
                .saturating_add(i.counter.slack()),
            slew_for: 0,
            slew_from: 0,
            check_at: current.check_at,
        };
        // Nothing gained where the new piece has no straight part either (a reading that 64-bit
        // arithmetic cannot reach, near the end of u64).
        if Straight::of(&next, &i.counter).width > 0 {
            i.line.publish(next, &i.counter);
        }
    }

    /// Compares with the wall clock now: steps forward if it is ahead by more than the
    /// tolerance, otherwise slews towards it. Returns the skew measured (wall minus this
    /// clock, in nanoseconds; negative when this clock is ahead and slewing).
    ///
    /// ```
    /// let clock = monoflake::LockedClock::new();
    /// let skew = clock.reanchor();
    /// assert!(skew.abs() < 1_000_000_000);
    /// ```
    pub fn reanchor(&self) -> i64 {
        let raw = self.inner.counter.raw();
        let now = self.read_at(&self.inner.line.load(), raw);
        self.compare(raw, now, true, true);
        self.last_skew_ns()
    }

    /// Moves the clock forward to `unix_ns` at once, if it is behind it (it then slews back
    /// towards the wall clock like after any other lead). For operators who know the wall
    /// clock is behind, e.g. when trusting a node's time reservation
    /// ([`GeneratorBuilder::trust_future_reservation`](crate::GeneratorBuilder::trust_future_reservation)).
    /// Returns the clock's reading afterwards.
    ///
    /// ```
    /// let clock = monoflake::LockedClock::new();
    /// let ahead = clock.now_ns() + 3_600_000_000_000;
    /// assert!(clock.advance_to(ahead) >= ahead);
    /// assert!(clock.now_ns() >= ahead);
    /// ```
    pub fn advance_to(&self, unix_ns: u64) -> u64 {
        let i = &*self.inner;
        let _writer = i.writer.lock();
        let raw = i.counter.raw();
        let now = self.read_at(&i.line.load(), raw);
        if unix_ns <= now {
            return now;
        }
        i.line.publish(
            Segment {
                start: raw,
                at: unix_ns,
                slew_for: 0,
                slew_from: 0,
                check_at: raw.saturating_add(i.policy.interval),
            },
            &i.counter,
        );
        i.forward_ns.fetch_add(unix_ns - now, Ordering::Relaxed);
        i.reanchors.fetch_add(1, Ordering::Relaxed);
        unix_ns
    }

    /// The reading of `segment` at the counter reading `raw`.
    #[inline]
    fn read_at(&self, segment: &Segment, raw: u64) -> u64 {
        segment.read_at(raw, &self.inner.counter)
    }

    /// The comparison: called by the first reader past `check_at` (others find the writer
    /// lock taken and go on; `take_over`: unless a thread of this process holds it) or by
    /// [`LockedClock::reanchor`] (`wait`: take the lock). Returns
    /// the clock's reading on the new line at the counter reading the comparison took (at or
    /// after `raw`, the caller's), or `None` when it did not compare.
    #[cold]
    #[inline(never)]
    fn compare(&self, raw: u64, now: u64, wait: bool, take_over: bool) -> Option<u64> {
        let i = &*self.inner;
        let _writer = if wait {
            i.writer.lock()
        } else {
            i.writer.try_lock(take_over)?
        };
        // Another reader may have compared in the meantime; read the line again.
        let current = i.line.load();
        if !wait && raw < current.check_at {
            return None;
        }
        // The wall clock first, then the counter, both under the lock: the new segment starts
        // at a counter reading taken after the wall time it may step to (the clock is then
        // behind the wall clock by the read, never ahead of it), and after the readings other
        // threads took of the old segment while this caller was held up (none of them finds
        // the new segment below what the old one gave it; and a slew it begins starts
        // `SLEW_GRACE` later, for a writer held up between this read and the publication).
        // The caller's `raw` may be long past.
        let wall = (i.wall)();
        let raw = i.counter.raw().max(raw);
        let now = now.max(self.read_at(&current, raw));
        // What the clock follows: the wall clock, or less of it under a ceiling.
        let ceiling = self.ceiling_at(raw);
        let target = follows(wall, now, ceiling);
        let decision = i.policy.decide(current, raw, now, target, &i.counter);
        let skew = i128::from(wall) - i128::from(now);
        let skew = i64::try_from(skew).unwrap_or(if skew < 0 { i64::MIN } else { i64::MAX });
        // Ordering: Relaxed; statistics.
        i.last_skew_ns.store(skew as u64, Ordering::Relaxed);
        i.max_skew_ns
            .fetch_max(skew.unsigned_abs(), Ordering::Relaxed);
        if decision.forward {
            // The wall clock (or the ceiling below it) is ahead: the clock steps forward.
            i.forward_ns
                .fetch_add(decision.skew.unsigned_abs(), Ordering::Relaxed);
            i.reanchors.fetch_add(1, Ordering::Relaxed);
            #[cfg(feature = "tracing")]
            tracing::info!(
                skew_ns = decision.skew,
                "monoflake: clock stepped forward to the wall clock"
            );
        }
        i.line.publish(decision.next, &i.counter);
        let after = self.read_at(&decision.next, raw);
        self.held_back(wall, after, ceiling);
        Some(after)
    }

    /// The ceiling at the counter reading `raw` and its slack, when one is set: its value
    /// when set plus the counter time since, less `SLEW_PPM` of it, less what this clock can
    /// gain on it before its next comparison (it runs at the counter's rate between
    /// comparisons, and a slew begins `SLEW_GRACE` after one). Under the writer lock.
    fn ceiling_at(&self, raw: u64) -> Option<(u64, u64)> {
        let i = &*self.inner;
        let at = i.ceiling_ns.load(Ordering::Relaxed);
        if at == NO_CEILING {
            return None;
        }
        let since = i
            .counter
            .ns(raw.saturating_sub(i.ceiling_raw.load(Ordering::Relaxed)));
        let gain = i
            .counter
            .ns(i.policy.interval)
            .saturating_add(SLEW_GRACE_NS)
            / SLEW_DIVISOR;
        let ceiling = at
            .saturating_add(since - since / SLEW_DIVISOR)
            .saturating_sub(gain);
        Some((ceiling, i.ceiling_slack_ns.load(Ordering::Relaxed)))
    }

    /// Counts what a comparison left of the wall clock's lead under the ceiling (the clock
    /// reads `after` once it is done), and says so once when the wall clock is past the
    /// ceiling and its slack. Under the writer lock.
    fn held_back(&self, wall: u64, after: u64, ceiling: Option<(u64, u64)>) {
        let i = &*self.inner;
        let (held, beyond) = match ceiling {
            Some((c, slack)) if wall > c => {
                (wall.saturating_sub(after), wall > c.saturating_add(slack))
            }
            _ => (0, false),
        };
        // Ordering: Relaxed; statistics.
        i.held_back_ns.store(held, Ordering::Relaxed);
        let was = i.beyond_ceiling.swap(u64::from(beyond), Ordering::Relaxed) != 0;
        #[cfg(feature = "tracing")]
        if beyond && !was {
            tracing::warn!(
                held_back_ms = held / 1_000_000,
                "monoflake: the wall clock is {} ms ahead of what the node store's clock \
                 confirms; not followed (this clock keeps within the store's max_clock_lead)",
                held / 1_000_000
            );
        } else if was && !beyond {
            tracing::info!("monoflake: the wall clock is back within the node store's clock");
        }
        #[cfg(not(feature = "tracing"))]
        let _ = was;
    }

    /// The skew found by the last comparison with the wall clock: wall minus this clock, in
    /// nanoseconds (positive: the wall clock was ahead, and this clock stepped forward if it
    /// was beyond the tolerance; negative: this clock was ahead and slews back).
    ///
    /// ```
    /// let clock = monoflake::LockedClock::new();
    /// assert_eq!(clock.last_skew_ns(), 0); // no comparison yet
    /// ```
    pub fn last_skew_ns(&self) -> i64 {
        self.inner.last_skew_ns.load(Ordering::Relaxed) as i64
    }

    /// How far forward steps have moved this clock in total, in nanoseconds.
    ///
    /// ```
    /// assert_eq!(monoflake::LockedClock::new().forward_ns(), 0);
    /// ```
    pub fn forward_ns(&self) -> u64 {
        self.inner.forward_ns.load(Ordering::Relaxed)
    }

    /// How many times this clock stepped forward.
    ///
    /// ```
    /// assert_eq!(monoflake::LockedClock::new().reanchor_count(), 0);
    /// ```
    pub fn reanchor_count(&self) -> u64 {
        self.inner.reanchors.load(Ordering::Relaxed)
    }

    /// The clock's state: forward steps, the skew, the slew still to give back.
    ///
    /// ```
    /// let report = monoflake::LockedClock::new().report();
    /// assert_eq!((report.forward_steps, report.slew_left_ns), (0, 0));
    /// ```
    pub fn report(&self) -> ClockReport {
        let i = &*self.inner;
        let raw = i.counter.raw();
        let segment = i.line.load();
        ClockReport {
            forward_steps: self.reanchor_count(),
            last_skew_ns: self.last_skew_ns(),
            max_skew_ns: i.max_skew_ns.load(Ordering::Relaxed),
            slew_left_ns: segment.slew_left(i.counter.ns(raw.saturating_sub(segment.start))),
            held_back_ns: i.held_back_ns.load(Ordering::Relaxed),
        }
    }

    /// Caps forward steps at `ceiling` from now on, or lifts the cap (`None`); see
    /// [`Ceiling`] and [`TimeSource::set_ceiling`]. Nothing moves now: the next comparison
    /// with the wall clock (at most [`DEFAULT_REANCHOR_INTERVAL`] away, by default) applies it.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use std::time::Duration;
    /// use monoflake::{Ceiling, LockedClock};
    ///
    /// static WALL: AtomicU64 = AtomicU64::new(1_700_000_000_000_000_000);
    /// let clock = LockedClock::with_wall_clock(
    ///     || WALL.load(Ordering::Relaxed),
    ///     Duration::from_secs(1),
    ///     Duration::from_millis(1),
    /// );
    /// // The store's clock confirms up to 250 ms past this clock, no further.
    /// clock.set_ceiling(Some(Ceiling { unix_ns: clock.now_ns() + 250_000_000, slack_ns: 0 }));
    /// // The wall clock jumps an hour ahead: the clock follows only up to the ceiling.
    /// WALL.fetch_add(3_600_000_000_000, Ordering::Relaxed);
    /// clock.reanchor();
    /// assert!(clock.now_ns() < 1_700_000_001_000_000_000);
    /// assert!(clock.report().held_back_ns > 3_599_000_000_000);
    /// // Lifted: it follows the wall clock again.
    /// clock.set_ceiling(None);
    /// clock.reanchor();
    /// assert!(clock.now_ns() >= 1_700_003_600_000_000_000);
    /// ```
    pub fn set_ceiling(&self, ceiling: Option<Ceiling>) {
        let i = &*self.inner;
        let _writer = i.writer.lock();
        // Ordering: Relaxed; written and read under the writer lock.
        match ceiling {
            Some(c) => {
                i.ceiling_raw.store(i.counter.raw(), Ordering::Relaxed);
                i.ceiling_slack_ns.store(c.slack_ns, Ordering::Relaxed);
                i.ceiling_ns
                    .store(c.unix_ns.min(NO_CEILING - 1), Ordering::Relaxed);
            }
            None => i.ceiling_ns.store(NO_CEILING, Ordering::Relaxed),
        }
    }
}

/// What a comparison makes the clock follow, reading `now`, with the wall clock at `wall`
/// and a ceiling `(ceiling, slack)` if set: the wall clock without one, or at or below it;
/// the ceiling when the wall clock is past it and its slack (it is wrong, or the store's
/// clock is); between the two, the wall clock, but forward no further than the ceiling.
fn follows(wall: u64, now: u64, ceiling: Option<(u64, u64)>) -> u64 {
    match ceiling {
        None => wall,
        Some((c, slack)) if wall > c.saturating_add(slack) => c,
        Some((c, _)) => wall.min(c.max(now)),
    }
}

impl TimeSource for LockedClock {
    #[inline]
    fn now_ms(&self) -> u64 {
        LockedClock::now_ns(self) / 1_000_000
    }

    #[inline]
    fn now_ns(&self) -> u64 {
        LockedClock::now_ns(self)
    }

    fn report(&self) -> ClockReport {
        LockedClock::report(self)
    }

    fn advance_to_ms(&self, unix_ms: u64) -> bool {
        self.advance_to(unix_ms.saturating_mul(1_000_000));
        true
    }

    fn set_ceiling(&self, ceiling: Option<Ceiling>) -> bool {
        LockedClock::set_ceiling(self, ceiling);
        true
    }
}
