//! The locked clock: the wall clock read once, then advanced by quanta's monotonic counter;
//! stepped forward to the wall clock, slewed (never stepped) back to it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::{ClockReport, TimeSource, wall_clock_ns};
use crate::sync::{AtomicU64, Ordering};

/// How often a [`LockedClock`] compares itself with the wall clock, by default.
pub const DEFAULT_REANCHOR_INTERVAL: Duration = Duration::from_secs(1);
/// By how much the wall clock must be ahead before a [`LockedClock`] steps forward, by default.
pub const DEFAULT_REANCHOR_TOLERANCE: Duration = Duration::from_millis(1);
/// How much slower than its counter a [`LockedClock`] runs while it is ahead of the wall clock:
/// 1000 parts per million, i.e. it gives back 1 ms of lead per second.
///
/// Why this rate:
/// * it is more than ten times the worst drift of a calibrated counter seen in practice (a few
///   ppm here, up to ~80 ppm reported), so a counter that runs fast is always caught up;
/// * it is twice the largest slew NTP (and `adjtime`) applies to the wall clock, so the clock
///   still converges while NTP slews the wall clock the other way;
/// * it is small enough that durations measured from IDs stay within 0.1 % of real ones.
///
/// A deliberate step back of the wall clock (an operator undoing a mistake) is closed by the
/// same slew: one hour back takes about 42 days to absorb, during which IDs keep increasing
/// and their time runs 0.1 % slow. That is harmless; stepping back would not be.
pub const SLEW_PPM: u64 = 1000;

/// How long after the comparison that finds the clock ahead of the wall clock its slew begins
/// (when it was not slewing already): until then the new piece of the line continues the old
/// one exactly, so a reading taken from the old piece while the new one is being published —
/// by a writer delayed up to this long between its counter reading and the publication — is
/// never above a later reading from the new piece.
const SLEW_GRACE: Duration = Duration::from_millis(100);

/// [`SLEW_GRACE`] in nanoseconds.
const SLEW_GRACE_NS: u64 = SLEW_GRACE.as_nanos() as u64;

/// `1_000_000 / SLEW_PPM`: the clock gives back one nanosecond per this many counter ones.
const SLEW_DIVISOR: u64 = 1_000_000 / SLEW_PPM;

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

/// The counter the clock advances by: quanta's, or (in unit tests) a simulated one that
/// counts nanoseconds.
enum Counter {
    Quanta {
        clock: quanta::Clock,
        /// Nanoseconds per counter unit, times 2^32, from quanta's calibration: one
        /// multiplication by a constant turns a counter difference into nanoseconds.
        ns_per_unit: u64,
    },
    #[cfg(test)]
    Simulated(Arc<std::sync::atomic::AtomicU64>),
}

impl Counter {
    fn quanta() -> Self {
        let clock = quanta::Clock::new();
        // quanta scales a counter difference by its calibration; scaling 2^32 units gives the
        // factor with 32 fractional bits (within 1 ns per 2^32 units: below one part per
        // billion at any counter rate above 1 GHz). Without a calibrated counter quanta's raw
        // reading is in nanoseconds already, and the factor is exactly 2^32.
        let ns_per_unit = clock.delta_as_nanos(0, 1 << 32).max(1);
        Counter::Quanta { clock, ns_per_unit }
    }

    /// The counter's reading, in its own units.
    #[inline]
    fn raw(&self) -> u64 {
        match self {
            Counter::Quanta { clock, .. } => clock.raw(),
            #[cfg(test)]
            Counter::Simulated(ns) => ns.load(std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// A difference of counter units in nanoseconds.
    #[inline]
    fn ns(&self, units: u64) -> u64 {
        match self {
            Counter::Quanta { ns_per_unit, .. } => {
                let ns = (u128::from(units) * u128::from(*ns_per_unit)) >> 32;
                u64::try_from(ns).unwrap_or(u64::MAX)
            }
            #[cfg(test)]
            Counter::Simulated(_) => units,
        }
    }

    /// How much a piece of the line that continues another at a counter reading `c` starts
    /// above the old piece's reading there, so that it never reads below it later: `ns(c - s) +
    /// ns(d - c)` can be 1 below `ns(d - s)` when the conversion rounds, and 0 when it is exact
    /// (a counter in nanoseconds).
    fn slack(&self) -> u64 {
        match self {
            Counter::Quanta { ns_per_unit, .. } => u64::from(*ns_per_unit & 0xffff_ffff != 0),
            #[cfg(test)]
            Counter::Simulated(_) => 0,
        }
    }

    /// A number of nanoseconds in counter units (the inverse of [`Counter::ns`]).
    fn units(&self, ns: u64) -> u64 {
        match self {
            Counter::Quanta { ns_per_unit, .. } => {
                let units = (u128::from(ns) << 32) / u128::from(*ns_per_unit);
                u64::try_from(units).unwrap_or(u64::MAX)
            }
            #[cfg(test)]
            Counter::Simulated(_) => ns,
        }
    }

    /// How many counter units [`Counter::ns_within`] converts: below it, the product of a
    /// difference and the scale fits in 64 bits, so the result is below 2^32 ns (4.3 s).
    fn straight_limit(&self) -> u64 {
        match self {
            Counter::Quanta { ns_per_unit, .. } => u64::MAX / *ns_per_unit,
            #[cfg(test)]
            Counter::Simulated(_) => 1 << 32,
        }
    }

    /// [`Counter::ns`] in 64-bit arithmetic, for `units` below [`Counter::straight_limit`]:
    /// the same value, one multiplication and one shift.
    #[inline]
    fn ns_within(&self, units: u64) -> u64 {
        match self {
            Counter::Quanta { ns_per_unit, .. } => units.wrapping_mul(*ns_per_unit) >> 32,
            #[cfg(test)]
            Counter::Simulated(_) => units,
        }
    }
}

/// One piece of the clock's line: from the counter reading `start` on, the clock reads
/// `at + d - clamp(d - slew_from, 0, slew_for) / SLEW_DIVISOR` where `d` is the counter time
/// since `start` in nanoseconds: straight, then (while slewing) slower. The bounds are kept in counter units, so a reading takes one
/// subtraction and one multiplication from the counter to the clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Segment {
    /// The counter reading (its own units) where the piece begins.
    start: u64,
    /// The clock's reading (Unix ns) at `start`.
    at: u64,
    /// For how many nanoseconds of counter time the clock runs slow (0: not slewing).
    slew_for: u64,
    /// How many nanoseconds of counter time after `start` the slow part begins: a slew that
    /// begins where the line ran straight begins [`SLEW_GRACE`] later, so the new piece and
    /// the old one agree for that long — a reader that used the old piece while the new one
    /// was being published never reads more than a reader of the new one, later.
    slew_from: u64,
    /// The counter reading (its own units) at which the next comparison with the wall clock
    /// is due.
    check_at: u64,
}

impl Segment {
    /// The reading `d` nanoseconds of counter time after `start`.
    #[inline]
    fn read(&self, d: u64) -> u64 {
        if self.slew_for == 0 {
            return self.at.saturating_add(d);
        }
        self.at.saturating_add(d - self.slowed(d) / SLEW_DIVISOR)
    }

    /// How much of the slow part has run `d` ns of counter time after `start`.
    fn slowed(&self, d: u64) -> u64 {
        d.saturating_sub(self.slew_from).min(self.slew_for)
    }

    /// How much of the slew is still to be given back `d` ns of counter time after `start`.
    fn slew_left(&self, d: u64) -> u64 {
        (self.slew_for - self.slowed(d)) / SLEW_DIVISOR
    }

    /// Whether the line runs straight from `d` ns of counter time after `start` on, up to the
    /// next comparison: no slew, or its slow part over.
    fn slew_done(&self, d: u64) -> bool {
        self.slew_for == 0 || d >= self.slew_from.saturating_add(self.slew_for)
    }

    /// Whether the line runs slow `d` ns of counter time after `start`.
    fn slewing(&self, d: u64) -> bool {
        d >= self.slew_from && self.slowed(d) < self.slew_for
    }
}

/// Where a [`Segment`] reads straight from its start, worked out when it is published so that
/// a reading there takes one subtraction, one 64-bit multiplication and one addition (no
/// 128-bit product, no saturation, no branch on the slew): what [`LockedClock::now_ns`] does
/// first. Below `width` counter units after `start` the segment reads `at + ns(d)`: all of it
/// up to the next comparison when it does not slew, the grace before its slow part when it
/// does, and never further than 64-bit arithmetic reaches ([`Counter::straight_limit`]).
///
/// There it gives exactly what [`Segment::read`] gives (tested). Past a slow part the line is
/// straight again, and the first reader there publishes a segment that starts straight
/// ([`LockedClock::straighten`]), so the straight part is always at the start of a segment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Straight {
    start: u64,
    at: u64,
    width: u64,
}

impl Straight {
    /// The straight part at the start of `s`, on `counter`.
    fn of(s: &Segment, counter: &Counter) -> Straight {
        // No comparison due, and within 64-bit arithmetic (a result below 2^32 ns).
        let end = s
            .check_at
            .saturating_sub(s.start)
            .min(counter.straight_limit());
        // A sum with a result below 2^32 ns that cannot saturate.
        let fits = s.at <= u64::MAX - (1 << 32);
        let width = if !fits {
            0
        } else if s.slew_for == 0 {
            end
        } else {
            // Before the slow part: `ns(d) < slew_from` for every `d` below `units(slew_from)`.
            counter.units(s.slew_from).min(end)
        };
        Straight {
            start: s.start,
            at: s.at,
            width,
        }
    }

    /// The reading at counter difference `d` (wrapping: a reading before `start` is far
    /// outside), if `d` is in the straight part.
    #[inline]
    fn read(&self, d: u64, counter: &Counter) -> Option<u64> {
        (d < self.width).then(|| self.at + counter.ns_within(d))
    }
}

/// A segment stored in atomics, with its own sequence number (even: complete).
struct Slot {
    seq: AtomicU64,
    start: AtomicU64,
    at: AtomicU64,
    slew_for: AtomicU64,
    slew_from: AtomicU64,
    check_at: AtomicU64,
}

/// The current segment's [`Straight`] part, in one place with no indirection: the three
/// fields and a version, read together by the fast path. A reader that finds a write under
/// way (an odd version, or a different one after its loads) does not wait: it reads the
/// double-buffered slots instead.
struct Fast {
    version: AtomicU64,
    start: AtomicU64,
    at: AtomicU64,
    width: AtomicU64,
}

/// The current segment, double-buffered: a writer fills the slot readers are not using, then
/// publishes its generation. Readers never wait for a writer (a reader retries only if two
/// writes overlapped its read), and a writer that stops half-way — a forked child inherits a
/// writer that no longer exists — leaves the published slot intact.
///
/// Beside it, [`Fast`]: the current segment's straight part, which the writer closes (an odd
/// version) before it publishes a segment and opens (even) once the new one is published.
struct Line {
    // Ordering: two sequence locks, with every field an atomic (no data race).
    //
    // Slots, the classic double-buffered one. Writer: slot.seq = odd (Relaxed),
    // fence(Release), fields (Relaxed), slot.seq = even (Release), current = generation
    // (Release). Reader: current (Acquire), slot.seq (Acquire), fields (Relaxed),
    // fence(Acquire), slot.seq again (Relaxed): equal and even → consistent.
    //
    // Fast, a single one. Writer: version = odd (Relaxed), fence(Release), then the slots as
    // above, then fields (Relaxed), version = even (Release). Reader: version (Acquire),
    // fields (Relaxed), fence(Acquire), version again (Relaxed): equal and even → consistent.
    // The odd version is stored before the new generation is released, so a thread that has
    // read the new segment (acquired `current`) finds the old straight part closed: it never
    // reads the old segment's straight part again after the new segment (a forward step).
    fast: Fast,
    current: AtomicU64,
    slots: [Slot; 2],
}

impl Slot {
    fn new() -> Self {
        Slot {
            seq: AtomicU64::new(0),
            start: AtomicU64::new(0),
            at: AtomicU64::new(0),
            slew_for: AtomicU64::new(0),
            slew_from: AtomicU64::new(0),
            check_at: AtomicU64::new(0),
        }
    }
}

impl Line {
    fn new(first: Segment, counter: &Counter) -> Self {
        let line = Line {
            fast: Fast {
                version: AtomicU64::new(1),
                start: AtomicU64::new(0),
                at: AtomicU64::new(0),
                width: AtomicU64::new(0),
            },
            current: AtomicU64::new(0),
            slots: [Slot::new(), Slot::new()],
        };
        line.store_slot(0, first);
        line.open(Straight::of(&first, counter));
        line
    }

    #[inline]
    fn load(&self) -> Segment {
        loop {
            let generation = self.current.load(Ordering::Acquire);
            let slot = &self.slots[(generation & 1) as usize];
            let seq = slot.seq.load(Ordering::Acquire);
            let segment = Segment {
                start: slot.start.load(Ordering::Relaxed),
                at: slot.at.load(Ordering::Relaxed),
                slew_for: slot.slew_for.load(Ordering::Relaxed),
                slew_from: slot.slew_from.load(Ordering::Relaxed),
                check_at: slot.check_at.load(Ordering::Relaxed),
            };
            crate::sync::fence(Ordering::Acquire);
            if seq == generation * 2 && slot.seq.load(Ordering::Relaxed) == seq {
                return segment;
            }
            core::hint::spin_loop();
        }
    }

    /// The current segment's straight part, unless a writer is at work on it (see the
    /// ordering above): then `None`, and the caller reads [`Line::load`] instead.
    #[inline]
    fn load_straight(&self) -> Option<Straight> {
        let fast = &self.fast;
        let version = fast.version.load(Ordering::Acquire);
        let straight = Straight {
            start: fast.start.load(Ordering::Relaxed),
            at: fast.at.load(Ordering::Relaxed),
            width: fast.width.load(Ordering::Relaxed),
        };
        crate::sync::fence(Ordering::Acquire);
        let again = fast.version.load(Ordering::Relaxed);
        (version == again && version & 1 == 0).then_some(straight)
    }

    /// Publishes the next segment. Callers hold the writer lock.
    fn publish(&self, segment: Segment, counter: &Counter) {
        // Close the straight part first: see the ordering above.
        let version = self.fast.version.load(Ordering::Relaxed);
        self.fast.version.store(version | 1, Ordering::Relaxed);
        crate::sync::fence(Ordering::Release);
        let next = self.current.load(Ordering::Relaxed) + 1;
        self.store_slot(next, segment);
        self.current.store(next, Ordering::Release);
        self.open(Straight::of(&segment, counter));
    }

    /// Stores `straight` and opens it (an even version). The version is odd on entry.
    fn open(&self, straight: Straight) {
        let fast = &self.fast;
        let version = fast.version.load(Ordering::Relaxed);
        fast.start.store(straight.start, Ordering::Relaxed);
        fast.at.store(straight.at, Ordering::Relaxed);
        fast.width.store(straight.width, Ordering::Relaxed);
        fast.version.store(version + 1, Ordering::Release);
    }

    fn store_slot(&self, generation: u64, s: Segment) {
        let slot = &self.slots[(generation & 1) as usize];
        slot.seq.store(generation * 2 + 1, Ordering::Relaxed);
        crate::sync::fence(Ordering::Release);
        slot.start.store(s.start, Ordering::Relaxed);
        slot.at.store(s.at, Ordering::Relaxed);
        slot.slew_for.store(s.slew_for, Ordering::Relaxed);
        slot.slew_from.store(s.slew_from, Ordering::Relaxed);
        slot.check_at.store(s.check_at, Ordering::Relaxed);
        slot.seq.store(generation * 2, Ordering::Release);
    }
}

/// The lock that serialises the writers of a [`Line`]: the id of the process whose thread
/// holds it, plus one (0: free).
///
/// A forked child has a copy of its parent's memory but only the thread that forked: a lock
/// another thread of the parent held at the fork is held by no thread of the child and would
/// never be given back there (a `Mutex` would make [`LockedClock::reanchor`] and
/// [`LockedClock::advance_to`] wait for ever, and readers stop comparing). The holder's process
/// id tells such a lock from one a thread of this process holds, and the child takes it over.
/// What the parent's writer left half-done, the child's next publication redoes whole: it
/// closes the straight part again, fills the slot after the published one, and opens it
/// ([`Line::publish`]).
///
/// A thread that waits for the lock ([`WriterLock::lock`]: a comparison asked for, a forward
/// move) says so, and readers then leave the lock to it (its comparison reads the line again);
/// it sleeps until the holder gives the lock back and wakes it.
struct WriterLock {
    // Ordering: Acquire when taken, Release when given back: writers' work is ordered, as
    // under a mutex.
    holder: AtomicU64,
    /// How many threads wait in [`WriterLock::lock`].
    // Ordering: Relaxed; a hint (a wake-up it misses is made up for by the sleep's timeout).
    waiting: AtomicU64,
    /// Where waiting threads sleep. Only tried, never waited for: a forked child may inherit it
    /// taken too.
    park: std::sync::Mutex<()>,
    wake: std::sync::Condvar,
}

/// A taken [`WriterLock`], given back when dropped (also on a panic: the line is consistent
/// between publications).
struct WriterGuard<'a>(&'a WriterLock);

impl Drop for WriterGuard<'_> {
    fn drop(&mut self) {
        self.0.holder.store(0, Ordering::Release);
        if self.0.waiting.load(Ordering::Relaxed) != 0 {
            self.0.wake.notify_all();
        }
    }
}

impl WriterLock {
    fn new() -> Self {
        WriterLock {
            holder: AtomicU64::new(0),
            waiting: AtomicU64::new(0),
            park: std::sync::Mutex::new(()),
            wake: std::sync::Condvar::new(),
        }
    }

    /// Takes the lock if it is free and nobody waits for it or, with `take_over`, also if held
    /// in another process (inherited across a fork); otherwise `None`. Asks the process id (a
    /// system call) only to take it: a reader that finds it taken, without `take_over`, pays
    /// two loads.
    fn try_lock(&self, take_over: bool) -> Option<WriterGuard<'_>> {
        let held = self.holder.load(Ordering::Relaxed);
        if !take_over && (held != 0 || self.waiting.load(Ordering::Relaxed) != 0) {
            return None;
        }
        self.take(held, u64::from(std::process::id()) + 1)
    }

    /// Takes the lock from `held` (free, or held in another process) for the process `me`.
    fn take(&self, held: u64, me: u64) -> Option<WriterGuard<'_>> {
        if held == me {
            return None;
        }
        self.holder
            .compare_exchange(held, me, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| WriterGuard(self))
    }

    /// Takes the lock, waiting for a thread of this process that holds it.
    fn lock(&self) -> WriterGuard<'_> {
        let me = u64::from(std::process::id()) + 1;
        self.waiting.fetch_add(1, Ordering::Relaxed);
        let mut step = 0;
        let guard = loop {
            if let Some(guard) = self.take(self.holder.load(Ordering::Relaxed), me) {
                break guard;
            }
            if crate::sync::backoff(step) {
                step += 1;
            } else if let Ok(park) = self.park.try_lock() {
                // Woken when the holder gives the lock back; the timeout bounds a wake-up
                // given between the check above and the wait.
                drop(self.wake.wait_timeout(park, Duration::from_micros(200)));
            } else {
                crate::sync::sleep(Duration::from_micros(50));
            }
        };
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        guard
    }
}

struct LockedInner {
    counter: Counter,
    base_ns: u64,
    /// The comparison interval in counter units.
    interval: u64,
    tolerance_ns: u64,
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
}

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
                interval,
                tolerance_ns: u64::try_from(tolerance.as_nanos()).unwrap_or(u64::MAX),
                wall: Box::new(wall),
                line,
                writer: WriterLock::new(),
                forward_ns: AtomicU64::new(0),
                last_skew_ns: AtomicU64::new(0),
                max_skew_ns: AtomicU64::new(0),
                reanchors: AtomicU64::new(0),
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
            let take_over = raw - segment.check_at >= self.inner.interval;
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
                check_at: raw.saturating_add(i.interval),
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
        segment.read(self.inner.counter.ns(raw.saturating_sub(segment.start)))
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
        let skew = i128::from(wall) - i128::from(now);
        let skew = i64::try_from(skew).unwrap_or(if skew < 0 { i64::MIN } else { i64::MAX });
        // Ordering: Relaxed; statistics.
        i.last_skew_ns.store(skew as u64, Ordering::Relaxed);
        i.max_skew_ns
            .fetch_max(skew.unsigned_abs(), Ordering::Relaxed);
        let check_at = raw.saturating_add(i.interval);
        let next = if skew > 0 && skew.unsigned_abs() > i.tolerance_ns {
            // The wall clock is ahead: step forward.
            i.forward_ns
                .fetch_add(skew.unsigned_abs(), Ordering::Relaxed);
            i.reanchors.fetch_add(1, Ordering::Relaxed);
            #[cfg(feature = "tracing")]
            tracing::info!(
                skew_ns = skew,
                "monoflake: clock stepped forward to the wall clock"
            );
            Segment {
                start: raw,
                at: wall,
                slew_for: 0,
                slew_from: 0,
                check_at,
            }
        } else {
            // Ahead of the wall clock (slew the whole difference back) or within the
            // tolerance behind it (stop slewing). The new piece must never read below the old
            // one within `SLEW_GRACE` of counter time from here, for readers that use the old
            // piece while a writer held up after its counter reading publishes the new one:
            // it may run slow there only where the old one does.
            let ahead = if skew < 0 { skew.unsigned_abs() } else { 0 };
            let slew_for = ahead.saturating_mul(SLEW_DIVISOR);
            let d = i.counter.ns(raw.saturating_sub(current.start));
            let grace_end = d.saturating_add(SLEW_GRACE_NS);
            // The old piece's line is the clock's reading here (no caller read more): a new
            // plan that leaves the line as it is up to here keeps the piece's start, so that
            // nothing is rounded and comparisons as frequent as reads add nothing to the
            // reading.
            let on_line = raw >= current.start && now == self.read_at(&current, raw);
            // The old piece's slow part, begun or still to begin, lasts at least the grace
            // from here: a new slow part may begin where it began.
            let slow_holds = current.slew_for > 0
                && current.slew_from.saturating_add(current.slew_for) >= grace_end;
            if on_line && ahead == 0 {
                // Straight from here (what has been slowed stays slowed).
                Segment {
                    slew_for: current.slowed(d),
                    check_at,
                    ..current
                }
            } else if on_line && slow_holds {
                // Slow from where the old slow part begins until `ahead` more is given back.
                Segment {
                    slew_for: current.slowed(d).saturating_add(slew_for),
                    check_at,
                    ..current
                }
            } else if on_line && current.slew_for == 0 {
                // A slew on a straight piece: its slow part begins a grace later.
                Segment {
                    slew_for,
                    slew_from: grace_end,
                    check_at,
                    ..current
                }
            } else {
                // A new piece, which starts where the old one is (one above where the
                // conversion rounds: see `Counter::slack`): its slow part begins at once if
                // the old one's runs through the grace, otherwise a grace later.
                Segment {
                    start: raw,
                    at: now.saturating_add(i.counter.slack()),
                    slew_for,
                    slew_from: if current.slewing(d) && slow_holds {
                        0
                    } else {
                        SLEW_GRACE_NS
                    },
                    check_at,
                }
            }
        };
        i.line.publish(next, &i.counter);
        Some(self.read_at(&next, raw))
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
        }
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
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn the_counter_scales_as_quanta_does_within_a_part_per_billion() {
        let counter = Counter::quanta();
        let Counter::Quanta { clock, .. } = &counter else {
            unreachable!("Counter::quanta is quanta's counter")
        };
        for units in [
            1u64,
            1_000,
            1 << 20,
            1 << 32,
            1 << 40,
            3 << 44,
            u64::MAX >> 8,
        ] {
            let ours = counter.ns(units);
            let theirs = clock.delta_as_nanos(0, units);
            assert!(
                ours.abs_diff(theirs) <= 1 + theirs / 1_000_000_000,
                "{units} units: {ours} ns here, {theirs} ns by quanta"
            );
            // Back to units, within the units of one nanosecond (the reading's resolution).
            let back = counter.units(ours);
            assert!(
                back.abs_diff(units) <= 2 + counter.units(1) + units / 1_000_000_000,
                "{units} units -> {ours} ns -> {back} units"
            );
        }
        assert_eq!(counter.ns(0), 0);
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
                    (i128::from(START + c.load(Relaxed)) + i128::from(s.load(Relaxed) as i64))
                        as u64
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

    #[test]
    fn a_segment_reads_continuously_across_its_slew() {
        let s = Segment {
            start: 100,
            at: 1_000_000,
            slew_for: 5_000,
            slew_from: 0,
            check_at: u64::MAX,
        };
        assert_eq!(s.read(0), 1_000_000);
        assert_eq!(s.read(1_000), 1_000_000 + 1_000 - 1);
        assert_eq!(s.read(5_000), 1_000_000 + 5_000 - 5);
        assert_eq!(s.read(6_000), 1_000_000 + 6_000 - 5);
        assert_eq!(s.slew_left(0), 5);
        assert_eq!(s.slew_left(9_900), 0);
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
        let wall_at =
            |counter: u64, stepped: bool| START + counter + if stepped { 10 * MS } else { 0 };
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

    /// A quanta counter scaled by `ns_per_unit` (nanoseconds per unit, times 2^32).
    fn scaled(ns_per_unit: u64) -> Counter {
        Counter::Quanta {
            clock: quanta::Clock::new(),
            ns_per_unit,
        }
    }

    /// Wherever the straight part answers, it answers exactly what the segment reads; it
    /// answers nowhere at or past `check_at`; and it answers everywhere strictly inside the
    /// segment's straight start, up to a few units at its end.
    fn check_straight(segment: Segment, counter: &Counter, ds: impl IntoIterator<Item = u64>) {
        let straight = Straight::of(&segment, counter);
        for d in ds {
            let exact = segment.read(counter.ns(d));
            match straight.read(d, counter) {
                Some(fast) => {
                    assert_eq!(fast, exact, "d {d} on {segment:?}, {straight:?}");
                    assert!(segment.start.saturating_add(d) < segment.check_at);
                }
                None => {
                    let ns = counter.ns(d);
                    let before_slow = segment.slew_for == 0 || ns < segment.slew_from;
                    let due = segment.start.saturating_add(d.saturating_add(2)) >= segment.check_at;
                    let too_far = d.saturating_add(2) >= counter.straight_limit();
                    let near_slow = segment.slew_for > 0
                        && counter.ns(d.saturating_add(2)) >= segment.slew_from;
                    let too_high = segment.at > u64::MAX - (1 << 32);
                    assert!(
                        !before_slow || due || too_far || near_slow || too_high,
                        "d {d} ({ns} ns) is straight on {segment:?} but not in {straight:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_straight_part_reads_as_the_segment_at_its_end() {
        // Counters from 10 GHz to 24 MHz (0.1 to 41.7 ns per unit).
        for k in [
            429_496_730u64,
            1_431_655_765,
            1 << 32,
            5 << 32,
            179_000_000_000,
        ] {
            let counter = scaled(k);
            for (slew_for, slew_from) in [(0, 0), (5_000_000, 100 * MS), (7_000, 0), (3 << 40, 5)] {
                let segment = Segment {
                    start: 1_000_000,
                    at: START,
                    slew_for,
                    slew_from,
                    check_at: 1_000_000 + counter.units(900 * MS),
                };
                let end = Straight::of(&segment, &counter).width;
                let ds = end.saturating_sub(4)..end.saturating_add(4);
                check_straight(segment, &counter, ds.chain([0, 1, u64::MAX, u64::MAX - 3]));
            }
        }
        // A reading near the end of u64 is left to the exact path.
        let counter = scaled(1 << 32);
        let far = Segment {
            at: u64::MAX - 10,
            check_at: u64::MAX,
            ..Segment::default()
        };
        assert_eq!(Straight::of(&far, &counter).read(5, &counter), None);
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

    /// A piece of the line that continues another at a counter reading `c` (a comparison that
    /// slews, or a straightening) starts `Counter::slack` above the old piece's reading there,
    /// so it never reads below it afterwards, though the conversion rounds: without the slack
    /// it does, by 1 ns.
    #[test]
    fn a_continuing_piece_never_reads_below_the_old_one_where_the_conversion_rounds() {
        let counter = scaled(1_431_655_765); // 3 GHz
        assert_eq!(counter.slack(), 1);
        assert_eq!(scaled(5 << 32).slack(), 0);
        let old = Segment {
            start: 1_000,
            at: START,
            ..Segment::default()
        };
        let mut below_without = 0;
        for c in (1_000..4_000).step_by(7) {
            let at_c = old.read(counter.ns(c - old.start));
            for x in c..c + 40 {
                let continued = |slack: u64| Segment {
                    start: c,
                    at: at_c + slack,
                    ..Segment::default()
                };
                let was = old.read(counter.ns(x - old.start));
                let with = continued(counter.slack()).read(counter.ns(x - c));
                assert!(with >= was, "c {c}, x {x}: {with} after {was}");
                assert!(with <= was + 1, "c {c}, x {x}: {with} is ahead of {was}");
                below_without += u32::from(continued(0).read(counter.ns(x - c)) < was);
            }
        }
        assert!(
            below_without > 0,
            "the slack made no difference: the test cannot fail"
        );
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

        #[test]
        fn the_straight_part_reads_as_the_segment(
            k in 1u64..(1 << 40),
            start in 0u64..(1 << 62),
            at in 0u64..u64::MAX,
            slew_for in proptest::prop_oneof![proptest::strategy::Just(0u64), 0u64..(1 << 42)],
            slew_from in 0u64..(1 << 33),
            interval in 0u64..(1 << 34),
            ds in proptest::collection::vec(0u64..(1 << 34), 16),
        ) {
            let counter = scaled(k);
            let segment = Segment {
                start,
                at,
                slew_for,
                slew_from,
                check_at: start.saturating_add(interval),
            };
            let end = Straight::of(&segment, &counter).width;
            let near = end.saturating_sub(2)..end.saturating_add(2);
            check_straight(segment, &counter, ds.into_iter().chain(near));
        }
    }
}
