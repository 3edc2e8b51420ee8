//! Where generators get the time: the locked clock, its coarse variant, and a manual clock.
//!
//! * `mod.rs`: the [`TimeSource`] contract and the wall clock.
//! * `locked/`: [`LockedClock`], wall time read once and advanced by a monotonic counter.
//! * `coarse.rs`: [`CoarseClock`] and its [`Ticker`] thread handle.
//! * `manual.rs`: [`ManualClock`], moved by hand in tests and models.

mod coarse;
mod locked;
mod manual;

pub use coarse::{CoarseClock, DEFAULT_TICKER_INTERVAL, Ticker};
pub use locked::{DEFAULT_REANCHOR_INTERVAL, DEFAULT_REANCHOR_TOLERANCE, LockedClock, SLEW_PPM};
pub use manual::ManualClock;

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

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

    /// The current Unix time in nanoseconds, what generators read: the lead limit paces IDs
    /// within a tick by it. Defaults to [`TimeSource::now_ms`] in nanoseconds (a source
    /// without a finer reading then opens a tick's slots at its start).
    fn now_ns(&self) -> u64 {
        self.now_ms().saturating_mul(1_000_000)
    }

    /// [`TimeSource::precise_now_ms`] in nanoseconds. Defaults to it, in nanoseconds.
    fn precise_now_ns(&self) -> u64 {
        self.precise_now_ms().saturating_mul(1_000_000)
    }

    /// Whether [`TimeSource::now_ms`] may lag behind [`TimeSource::precise_now_ms`].
    fn is_coarse(&self) -> bool {
        false
    }

    /// How the source compares with the wall clock (forward steps, skew, slew): see
    /// [`ClockReport`]. Sources that do not compare report zeros.
    fn report(&self) -> ClockReport {
        ClockReport::default()
    }

    /// Moves the source forward to `unix_ms` at once if it is behind it; returns whether the
    /// source supports that. Used when an operator trusts a node's time reservation over the
    /// wall clock ([`GeneratorBuilder::trust_future_reservation`](crate::GeneratorBuilder::trust_future_reservation)).
    /// The default supports nothing and returns `false`.
    fn advance_to_ms(&self, unix_ms: u64) -> bool {
        let _ = unix_ms;
        false
    }

    /// Caps how far the source follows the wall clock forward ([`Ceiling`]), or with `None`
    /// lifts the cap; returns whether the source honours ceilings. A leased generator on a
    /// node store with a clock of its own (PostgreSQL, etcd) sets one after every renewal:
    /// the furthest ahead its clock may be and still be confirmed at the next, so that a wall
    /// clock stepped past the real time costs the holder nothing but the step
    /// (docs/design.md, "A wall clock ahead of the store's"). It never moves the source back.
    /// The default honours none and returns `false`: such a source follows whatever it
    /// follows, and a renewal that finds it too far ahead of the store's clock loses the
    /// claim. A clock holds one ceiling: give each leased generator a clock of its own (the
    /// builder's default), not clones of one.
    ///
    /// ```
    /// use monoflake::{Ceiling, LockedClock, ManualClock, TimeSource};
    /// let ceiling = Ceiling { unix_ns: 5_000_000, slack_ns: 0 };
    /// assert!(!ManualClock::new(5).set_ceiling(Some(ceiling)));
    /// // (`LockedClock::set_ceiling` itself returns nothing: it always honours one.)
    /// assert!(TimeSource::set_ceiling(&LockedClock::new(), Some(ceiling)));
    /// ```
    fn set_ceiling(&self, ceiling: Option<Ceiling>) -> bool {
        let _ = ceiling;
        false
    }
}

/// A ceiling on how far a clock follows the wall clock forward ([`TimeSource::set_ceiling`]):
/// from the moment it is set, `unix_ns` plus the time passed since, less
/// [`SLEW_PPM`](crate::SLEW_PPM) of it (the store's clock may run that much slower than this
/// host's counter). A [`LockedClock`] honours it at each comparison with the wall clock:
///
/// * a wall clock at most `slack_ns` past the ceiling may be right (the store's clock is read
///   that coarsely: etcd's `Date`, to the second): the clock steps forward no further than
///   the ceiling, and otherwise goes on as it would;
/// * a wall clock further past it is wrong, or the store's is: the clock steps forward to the
///   ceiling at most and slews back towards it when above it, at [`SLEW_PPM`](crate::SLEW_PPM)
///   (never a step back), and says so once (a `tracing` warning, and
///   [`ClockReport::held_back_ns`]).
///
/// ```
/// let ceiling = monoflake::Ceiling { unix_ns: 1_700_000_000_000_000_000, slack_ns: 1_000_000_000 };
/// assert_eq!(ceiling.slack_ns, 1_000_000_000);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ceiling {
    /// The ceiling now, Unix ns.
    pub unix_ns: u64,
    /// How far past the ceiling a wall clock may still be right, ns.
    pub slack_ns: u64,
}

/// How a clock compares with the wall clock, for [`Stats`](crate::Stats) and monitoring.
///
/// ```
/// use monoflake::{ManualClock, TimeSource};
/// // A clock that does not compare with the wall clock reports zeros.
/// assert_eq!(ManualClock::new(5).report(), monoflake::ClockReport::default());
/// let report = monoflake::LockedClock::new().report();
/// assert_eq!(report.forward_steps, 0);
/// assert_eq!(report.slew_left_ns, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClockReport {
    /// Times the clock stepped forward to the wall clock (or was moved forward on purpose).
    pub forward_steps: u64,
    /// Wall clock minus this clock at the last comparison, in nanoseconds: positive when the
    /// wall clock was ahead, negative when this clock was ahead (and slews back).
    pub last_skew_ns: i64,
    /// The largest skew seen, either direction, in nanoseconds.
    pub max_skew_ns: u64,
    /// How much lead over the wall clock is still being given back by slewing, in nanoseconds
    /// (0: not slewing).
    pub slew_left_ns: u64,
    /// How far the wall clock was ahead of this clock at the last comparison and not followed
    /// because of the clock's [`Ceiling`] (what the node store's clock confirms), in
    /// nanoseconds; 0 when nothing was held back.
    pub held_back_ns: u64,
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
            fn now_ns(&self) -> u64 {
                (**self).now_ns()
            }
            fn precise_now_ns(&self) -> u64 {
                (**self).precise_now_ns()
            }
            fn is_coarse(&self) -> bool {
                (**self).is_coarse()
            }
            fn report(&self) -> ClockReport {
                (**self).report()
            }
            fn advance_to_ms(&self, unix_ms: u64) -> bool {
                (**self).advance_to_ms(unix_ms)
            }
            fn set_ceiling(&self, ceiling: Option<Ceiling>) -> bool {
                (**self).set_ceiling(ceiling)
            }
        }
    )*};
}

forward_time_source!(Arc<T>, &T);

/// The system's wall clock in Unix milliseconds (0 before 1970).
pub(crate) fn wall_clock_ms() -> u64 {
    wall_clock_ns() / 1_000_000
}

pub(crate) fn wall_clock_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}
