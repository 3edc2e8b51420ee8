//! The lock-free generator: one `AtomicU64` advanced by compare-exchange around the pure step.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use crate::clock::{LockedClock, TimeSource};
use crate::layout::mask;
use crate::lease::LeaseStatus;
use crate::state::{Step, StepParams, next_state};
use crate::stats::{Counters, Stats};
use crate::sync::{self, AtomicU64, Ordering};
use crate::{Error, Id, Layout};

/// How far the time field may run ahead of the clock by default when the sequence is full.
pub const DEFAULT_MAX_LEAD: Duration = Duration::from_millis(100);
/// How long [`Generator::next_id`] waits at most by default before it gives up.
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(1);

/// Issues unique, strictly increasing IDs for one node under one layout.
///
/// * **Lock-free, no syscall, no allocation per ID.** The state (`tick << sequence_bits |
///   sequence`) is one `AtomicU64` on its own cache line; an ID is a clock read, a load, the
///   pure step and one `compare_exchange_weak`.
/// * **Unique and strictly increasing.** Every value comes from the atomic's modification
///   order, and the step only moves it up: IDs from one generator, across all threads, are
///   distinct and each is greater than every ID issued before it.
/// * **The clock cannot move IDs back.** A clock read that goes back continues the sequence
///   of the tick already held.
/// * **A full sequence borrows future ticks** instead of stalling, at most `max_lead` ahead of
///   the clock ([`GeneratorBuilder::max_lead`]). Beyond that [`Generator::try_next_id`]
///   returns [`Error::WouldBlock`] and [`Generator::next_id`] waits (spin, yield, then sleep),
///   at most `max_wait`.
/// * **Fails loudly.** Past the end of the time field every call returns
///   [`Error::Exhausted`]; the field never wraps.
///
/// # Memory ordering
///
/// All operations on the state are `Relaxed`. The state publishes no other memory: an ID is
/// computed from the state value alone, so there is nothing for Acquire/Release to order.
/// Uniqueness and increase follow from the single atomic's modification order, which every
/// read-modify-write observes in full (a successful compare-exchange replaces exactly the value
/// it read). The loom models in `loom-tests/` check this.
///
/// # Example
///
/// ```
/// use monoflake::{Generator, Layout};
///
/// let generator = Generator::new(Layout::twitter(), 7)?;
/// let a = generator.next_id()?;
/// let b = generator.next_id()?;
/// assert!(b > a);
/// assert_eq!(b.parts(generator.layout())?.node(), 7);
/// # Ok::<(), monoflake::Error>(())
/// ```
pub struct Generator<C: TimeSource = LockedClock> {
    core: CachePadded<Core>,
    counters: CachePadded<Counters>,
    /// The state the generator started from, for counting what it issued.
    start: u64,
    lease: Option<Arc<LeaseStatus>>,
    params: StepParams,
    out: Output,
    epoch_ms: u64,
    tick_ms: u64,
    max_wait: Duration,
    expires_at_ms: u64,
    clock: C,
    layout: Layout,
    node: u64,
}

/// The words the hot path touches, on one cache line of their own.
#[derive(Debug)]
pub(crate) struct Core {
    /// The last value issued: `tick << sequence_bits | sequence`.
    // Ordering: Relaxed for every access; see the type docs.
    pub(crate) state: AtomicU64,
    /// The highest tick that may be issued: the reservation acknowledged by the node store;
    /// `u64::MAX` without a lease, 0 once released.
    // Ordering: Relaxed, as `deadline`: lone values written by the lease keeper. A stale read
    // is an older, lower bound (a needless refusal) or, right after a release, a higher one —
    // which the release's swap of `state` makes harmless.
    pub(crate) limit: AtomicU64,
    /// The first clock tick at which nothing may be issued: the lease deadline; `u64::MAX`
    /// without one, 0 once released.
    pub(crate) deadline: AtomicU64,
    /// The fork count seen when the generator was built (read-only, next to the state so the
    /// per-call fork check touches no other cache line).
    fork: forkguard::Guard,
}

/// How a state value becomes an ID.
#[derive(Clone, Copy, Debug)]
struct Output {
    /// Width of the sequence part of the state (the layout's, less any per-core slot bits).
    sequence_bits: u32,
    /// `mask(sequence_bits)`, precomputed.
    sequence_mask: u64,
    time_shift: u32,
    sequence_shift: u32,
    /// The node value and the per-core slot, already shifted into place.
    fixed: u64,
}

impl Output {
    #[inline]
    const fn id(&self, state: u64) -> Id {
        let tick = state >> self.sequence_bits;
        let sequence = state & self.sequence_mask;
        Id::from_u64(tick << self.time_shift | self.fixed | sequence << self.sequence_shift)
    }
}

impl<C: TimeSource + fmt::Debug> fmt::Debug for Generator<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Generator")
            .field("layout", &self.layout.name())
            .field("node", &self.node)
            .field("state", &self.core.state.load(Ordering::Relaxed))
            .field("limit", &self.core.limit.load(Ordering::Relaxed))
            .field("deadline", &self.core.deadline.load(Ordering::Relaxed))
            .field("max_lead_ticks", &self.params.max_lead)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

impl Generator<LockedClock> {
    /// A generator for `node` under `layout` on a new [`LockedClock`], with the defaults.
    ///
    /// # Errors
    ///
    /// [`Error::OutOfRange`] when `node` does not fit the layout.
    ///
    /// ```
    /// use monoflake::{Error, Generator, Layout};
    /// assert!(Generator::new(Layout::twitter(), 1023).is_ok());
    /// assert!(matches!(
    ///     Generator::new(Layout::twitter(), 1024),
    ///     Err(Error::OutOfRange { value: 1024, max: 1023, .. })
    /// ));
    /// ```
    pub fn new(layout: Layout, node: u64) -> Result<Self, Error> {
        Self::builder(layout).node(node).build()
    }

    /// Starts configuring a generator for `layout` (node 0, [`LockedClock`], the defaults).
    ///
    /// ```
    /// use std::time::Duration;
    /// let generator = monoflake::Generator::builder(monoflake::Layout::discord())
    ///     .node(5)
    ///     .max_lead(Duration::from_millis(10))
    ///     .build()?;
    /// assert_eq!(generator.node(), 5);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn builder(layout: Layout) -> GeneratorBuilder<LockedClock> {
        GeneratorBuilder {
            layout,
            node: 0,
            clock: LockedClock::new(),
            max_lead: DEFAULT_MAX_LEAD,
            max_wait: DEFAULT_MAX_WAIT,
            offset_bits: 0,
            after_tick: None,
            window: crate::lease::DEFAULT_RESERVATION_WINDOW,
        }
    }
}

impl<C: TimeSource> Generator<C> {
    /// The layout IDs are issued under.
    ///
    /// ```
    /// let g = monoflake::Generator::new(monoflake::Layout::sonyflake(), 1)?;
    /// assert_eq!(g.layout().name(), "sonyflake");
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The node value every ID carries.
    ///
    /// ```
    /// let g = monoflake::Generator::new(monoflake::Layout::sonyflake(), 9)?;
    /// assert_eq!(g.node(), 9);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub const fn node(&self) -> u64 {
        self.node
    }

    /// The time source.
    ///
    /// ```
    /// use monoflake::TimeSource;
    /// let g = monoflake::Generator::new(monoflake::Layout::twitter(), 0)?;
    /// assert!(g.clock().now_ms() > 0);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The time-field value of the last ID issued (or of the start point), for monitoring
    /// how far the generator runs ahead of its clock.
    ///
    /// ```
    /// let g = monoflake::Generator::new(monoflake::Layout::twitter(), 0)?;
    /// let id = g.next_id()?;
    /// assert_eq!(g.last_tick(), id.parts(g.layout())?.tick());
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn last_tick(&self) -> u64 {
        self.core.state.load(Ordering::Relaxed) >> self.params.sequence_bits
    }

    /// The hot-path words, for the lease keeper.
    pub(crate) fn core(&self) -> &Core {
        &self.core
    }

    /// Stops the generator for good and returns the last state value issued: after this
    /// returns no call issues anything — a compare-exchange still in flight fails against the
    /// sealed value, and every later call sees the zero limit.
    pub(crate) fn seal(&self) -> u64 {
        // Ordering: Relaxed; see `Core::limit`.
        self.core.limit.store(0, Ordering::Relaxed);
        self.core.deadline.store(0, Ordering::Relaxed);
        // Ordering: Relaxed; the swap is a read-modify-write, so it returns the last value in
        // the atomic's modification order, which holds every value ever issued.
        self.core.state.swap(u64::MAX, Ordering::Relaxed)
    }

    /// The time-field value of a state value.
    pub(crate) const fn tick_of_state(&self, state: u64) -> u64 {
        state >> self.params.sequence_bits
    }

    /// [`Generator::seal`] for the loom models (only in `--cfg loom` builds).
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_seal(&self) -> (u64, u64) {
        let last = self.seal();
        (
            self.tick_of_state(last),
            last & mask(self.params.sequence_bits),
        )
    }

    /// Off the common path: a jump to a later tick (values passed over) or a borrowed tick.
    #[cold]
    #[inline(never)]
    fn count_jump_or_borrow(&self, cur: u64, first: u64, last: u64, now: u64) {
        let s = self.params.sequence_bits;
        Counters::add(&self.counters.skipped, first - cur - 1);
        let now = now.max(self.params.floor_tick);
        let (cur_tick, last_tick) = (cur >> s, last >> s);
        if last_tick > now {
            Counters::add(&self.counters.borrowed_ticks, last_tick - cur_tick.max(now));
            // Ordering: Relaxed; a statistic.
            self.counters
                .max_lead_ticks
                .fetch_max(last_tick - now, Ordering::Relaxed);
        }
    }

    /// What the generator has been doing: see [`Stats`].
    ///
    /// ```
    /// use monoflake::{Generator, Layout, ManualClock};
    ///
    /// // 4 IDs per tick at a clock that stands still: the fifth borrows the next tick.
    /// let layout = Layout::builder().sequence_bits(2).build()?;
    /// let g = Generator::builder(layout).clock(ManualClock::new(1_700_000_000_000)).build()?;
    /// for _ in 0..5 {
    ///     g.try_next_id()?;
    /// }
    /// let stats = g.stats();
    /// assert_eq!((stats.issued, stats.borrowed_ticks, stats.max_lead_ticks), (5, 1, 1));
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn stats(&self) -> Stats {
        let c = &self.counters;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let state = self.core.state.load(Ordering::Relaxed);
        let state = match &self.lease {
            Some(status) if state == u64::MAX => status.sealed_state().unwrap_or(state),
            _ => state,
        };
        let (reanchors, max_skew_ns) = self.clock.reanchor_stats();
        let mut stats = Stats {
            issued: state
                .wrapping_sub(self.start)
                .saturating_sub(load(&c.skipped)),
            borrowed_ticks: load(&c.borrowed_ticks),
            max_lead_ticks: load(&c.max_lead_ticks),
            would_block: load(&c.would_block),
            waits: load(&c.waits),
            reanchors,
            max_skew_ns,
            ..Stats::default()
        };
        if let Some(status) = &self.lease {
            status.fill(&mut stats);
        }
        stats
    }

    /// Why issuing stopped: the fork, the lease deadline or the reservation.
    #[cold]
    #[inline(never)]
    fn fenced(&self, forked: bool, deadline_passed: bool) -> Error {
        if forked {
            return Error::Forked { node: self.node };
        }
        match &self.lease {
            Some(status) => status.error(deadline_passed),
            None => Error::LeaseLost {
                node: self.node,
                reason: "no lease".into(),
            },
        }
    }

    #[inline]
    fn tick_of(&self, unix_ms: u64) -> u64 {
        let since = unix_ms.saturating_sub(self.epoch_ms);
        // Most layouts tick in milliseconds: skip the division.
        if self.tick_ms == 1 {
            since
        } else {
            since / self.tick_ms
        }
    }

    /// Reserves `n >= 1` consecutive state values with one compare-exchange and returns the
    /// first and the last.
    #[inline]
    fn reserve(&self, n: u64) -> Result<(u64, u64), Error> {
        let mut now = self.tick_of(self.clock.now_ms());
        let mut precise = !self.clock.is_coarse();
        // A forked child must not issue under the parent's node: checked once per call.
        let forked = self.core.fork.clone().detected_fork();
        // Ordering: Relaxed; a stale value only makes the first compare-exchange fail.
        #[cfg_attr(monoflake_broken_cas, allow(unused_mut))]
        let mut cur = self.core.state.load(Ordering::Relaxed);
        loop {
            match next_state(cur, now, n, &self.params) {
                Step::Issue { first, last } => {
                    let last_tick = last >> self.params.sequence_bits;
                    let ahead = last_tick > now;
                    // A coarse reading may lag: before borrowing a tick, look at the real time.
                    if ahead && !precise {
                        now = self.tick_of(self.clock.precise_now_ms());
                        precise = true;
                        continue;
                    }
                    // The lease fence: never a tick the store has not acknowledged, never after
                    // the lease deadline, never in a forked child.
                    // Evaluated without short-circuits: one branch for the three checks.
                    let late = now >= self.core.deadline.load(Ordering::Relaxed);
                    let unreserved = last_tick > self.core.limit.load(Ordering::Relaxed);
                    if forked | late | unreserved {
                        return Err(self.fenced(forked, late));
                    }
                    // A deliberately broken variant (a load then a plain store instead of a
                    // compare-exchange), compiled only to check that the loom models catch it.
                    #[cfg(monoflake_broken_cas)]
                    {
                        self.core.state.store(last, Ordering::Relaxed);
                        return Ok((first, last));
                    }
                    // Ordering: Relaxed on success and failure; the value is all there is to
                    // agree on, and the modification order of this one atomic decides it.
                    #[cfg_attr(monoflake_broken_cas, allow(unreachable_code))]
                    match self.core.state.compare_exchange_weak(
                        cur,
                        last,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => {
                            if (first != cur + 1) | ahead {
                                self.count_jump_or_borrow(cur, first, last, now);
                            }
                            return Ok((first, last));
                        }
                        Err(actual) => cur = actual,
                    }
                }
                Step::Lead { ticks } => {
                    if !precise {
                        now = self.tick_of(self.clock.precise_now_ms());
                        precise = true;
                        continue;
                    }
                    Counters::add(&self.counters.would_block, 1);
                    return Err(Error::WouldBlock {
                        retry_after: Duration::from_millis(ticks.saturating_mul(self.tick_ms)),
                    });
                }
                Step::Exhausted { for_good } => {
                    if self.core.limit.load(Ordering::Relaxed) == 0 {
                        return Err(self.fenced(false, true)); // released: the state is sealed
                    }
                    if !precise {
                        now = self.tick_of(self.clock.precise_now_ms());
                        precise = true;
                        continue;
                    }
                    if for_good {
                        // Pin the state at its largest value so every later call fails too,
                        // whatever a clock does afterwards.
                        let end = self.params.max_tick << self.params.sequence_bits
                            | mask(self.params.sequence_bits);
                        // Ordering: Relaxed; fetch_max only ever raises the state.
                        let before = self.core.state.fetch_max(end, Ordering::Relaxed);
                        Counters::add(&self.counters.skipped, end.saturating_sub(before));
                    }
                    return Err(Error::Exhausted {
                        expired_at_ms: self.expires_at_ms,
                    });
                }
            }
        }
    }

    /// Issues one ID without waiting.
    ///
    /// # Errors
    ///
    /// * [`Error::WouldBlock`]: the sequence is full and borrowing another tick would exceed
    ///   `max_lead`; nothing was issued. `retry_after` says when the clock will have caught up.
    /// * [`Error::Exhausted`]: the layout's time field has run out.
    ///
    /// ```
    /// use monoflake::{Error, Generator, Layout};
    ///
    /// let generator = Generator::new(Layout::twitter(), 1)?;
    /// let id = generator.try_next_id()?;
    /// assert_eq!(id.parts(generator.layout())?.node(), 1);
    /// // Baidu's default layout ran out in November 2024.
    /// let baidu = Generator::new(Layout::baidu(), 1)?;
    /// assert!(matches!(baidu.try_next_id(), Err(Error::Exhausted { .. })));
    /// # Ok::<(), Error>(())
    /// ```
    #[inline]
    pub fn try_next_id(&self) -> Result<Id, Error> {
        self.reserve(1).map(|(first, _)| self.out.id(first))
    }

    /// Issues one ID, waiting when the generator is at its lead limit: a few spins, then
    /// yields, then sleeps until the clock has caught up, for at most `max_wait`
    /// ([`GeneratorBuilder::max_wait`]).
    ///
    /// # Errors
    ///
    /// * [`Error::WouldBlock`]: still at the lead limit after `max_wait` (a clock that stands
    ///   still).
    /// * [`Error::Exhausted`]: the layout's time field has run out.
    ///
    /// ```
    /// let generator = monoflake::Generator::new(monoflake::Layout::twitter(), 1)?;
    /// let ids: Vec<_> = (0..10_000).map(|_| generator.next_id()).collect::<Result<_, _>>()?;
    /// assert!(ids.windows(2).all(|w| w[0] < w[1]));
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn next_id(&self) -> Result<Id, Error> {
        self.waiting(|| self.try_next_id())
    }

    /// Reserves `n` consecutive IDs with one compare-exchange, without waiting. The IDs are
    /// strictly increasing and may run into later ticks (within `max_lead`). `n = 0` gives an
    /// empty run.
    ///
    /// # Errors
    ///
    /// As [`Generator::try_next_id`]; a batch larger than the sequence space within
    /// `max_lead` can never succeed and reports [`Error::WouldBlock`].
    ///
    /// ```
    /// let generator = monoflake::Generator::new(monoflake::Layout::twitter(), 1)?;
    /// let ids: Vec<_> = generator.try_next_ids(64)?.collect();
    /// assert_eq!(ids.len(), 64);
    /// assert!(ids.windows(2).all(|w| w[0] < w[1]));
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn try_next_ids(&self, n: u64) -> Result<Ids, Error> {
        if n == 0 {
            return Ok(Ids {
                next: 1,
                last: 0,
                prev: u64::MAX,
                out: self.out,
            });
        }
        self.reserve(n).map(|(first, last)| Ids {
            next: first,
            last,
            prev: u64::MAX,
            out: self.out,
        })
    }

    /// [`Generator::try_next_ids`], waiting like [`Generator::next_id`] when at the lead limit.
    ///
    /// # Errors
    ///
    /// As [`Generator::next_id`].
    ///
    /// ```
    /// let generator = monoflake::Generator::new(monoflake::Layout::twitter(), 1)?;
    /// let first_run: Vec<_> = generator.next_ids(4096)?.collect();
    /// let next = generator.next_id()?;
    /// assert!(next > *first_run.last().unwrap());
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn next_ids(&self, n: u64) -> Result<Ids, Error> {
        self.waiting(|| self.try_next_ids(n))
    }

    fn waiting<T>(&self, mut attempt: impl FnMut() -> Result<T, Error>) -> Result<T, Error> {
        let mut step = 0;
        let mut slept = Duration::ZERO;
        loop {
            match attempt() {
                Err(Error::WouldBlock { retry_after }) => {
                    if !sync::backoff(step) {
                        if slept >= self.max_wait {
                            return Err(Error::WouldBlock { retry_after });
                        }
                        let nap = retry_after
                            .min(self.max_wait - slept)
                            .max(Duration::from_micros(50));
                        Counters::add(&self.counters.waits, 1);
                        sync::sleep(nap);
                        slept += nap;
                    }
                    step = step.saturating_add(1);
                }
                other => return other,
            }
        }
    }
}

/// A run of consecutive IDs reserved by [`Generator::next_ids`]; iterating allocates nothing.
///
/// ```
/// let generator = monoflake::Generator::new(monoflake::Layout::twitter(), 1)?;
/// let run = generator.next_ids(3)?;
/// assert_eq!(run.len(), 3);
/// # Ok::<(), monoflake::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Ids {
    next: u64,
    last: u64,
    /// The ID of `next - 1`, valid when `next` is not the first value of a tick.
    prev: u64,
    out: Output,
}

impl Iterator for Ids {
    type Item = Id;

    #[inline]
    fn next(&mut self) -> Option<Id> {
        if self.next > self.last {
            return None;
        }
        // Within a tick consecutive values differ by one step of the sequence field; only the
        // first value of a run or of a tick needs the full formula.
        let id = if self.next & self.out.sequence_mask != 0 && self.prev != u64::MAX {
            self.prev + (1 << self.out.sequence_shift)
        } else {
            self.out.id(self.next).as_u64()
        };
        self.prev = id;
        // At the very end of the state space `last` is u64::MAX: stop by making the run empty.
        match self.next.checked_add(1) {
            Some(n) => self.next = n,
            None => self.last = 0,
        }
        Some(Id::from_u64(id))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from((self.last + 1).saturating_sub(self.next)).unwrap_or(usize::MAX);
        (n, Some(n))
    }
}

impl ExactSizeIterator for Ids {}

/// Configures a [`Generator`]; see [`Generator::builder`].
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use monoflake::{Generator, Layout, ManualClock};
///
/// let clock = Arc::new(ManualClock::new(1_700_000_000_000));
/// let generator = Generator::builder(Layout::twitter())
///     .node(3)
///     .clock(clock)
///     .max_lead(Duration::ZERO)
///     .start_offset_bits(3)
///     .build()?;
/// assert!(generator.try_next_id().is_ok());
/// # Ok::<(), monoflake::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct GeneratorBuilder<C> {
    layout: Layout,
    node: u64,
    clock: C,
    max_lead: Duration,
    max_wait: Duration,
    offset_bits: u32,
    after_tick: Option<u64>,
    window: Duration,
}

impl<C: TimeSource> GeneratorBuilder<C> {
    /// The node value every ID carries (default 0). Checked against the layout by
    /// [`GeneratorBuilder::build`].
    ///
    /// ```
    /// let g = monoflake::Generator::builder(monoflake::Layout::twitter()).node(12).build()?;
    /// assert_eq!(g.node(), 12);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn node(mut self, node: u64) -> Self {
        self.node = node;
        self
    }

    /// The time source (default a new [`LockedClock`]).
    ///
    /// ```
    /// let g = monoflake::Generator::builder(monoflake::Layout::twitter())
    ///     .clock(monoflake::ManualClock::new(1_700_000_000_000))
    ///     .build()?;
    /// assert_eq!(g.next_id()?.parts(g.layout())?.unix_ms(), 1_700_000_000_000);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn clock<D: TimeSource>(self, clock: D) -> GeneratorBuilder<D> {
        GeneratorBuilder {
            layout: self.layout,
            node: self.node,
            clock,
            max_lead: self.max_lead,
            max_wait: self.max_wait,
            offset_bits: self.offset_bits,
            after_tick: self.after_tick,
            window: self.window,
        }
    }

    /// How far the time field may run ahead of the clock when the sequence is full (default
    /// [`DEFAULT_MAX_LEAD`], rounded down to whole ticks). Zero forbids borrowing.
    ///
    /// ```
    /// let g = monoflake::Generator::builder(monoflake::Layout::twitter())
    ///     .max_lead(std::time::Duration::from_millis(5))
    ///     .build()?;
    /// assert!(g.next_id().is_ok());
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn max_lead(mut self, lead: Duration) -> Self {
        self.max_lead = lead;
        self
    }

    /// How long [`Generator::next_id`] waits at most (default [`DEFAULT_MAX_WAIT`]).
    ///
    /// ```
    /// let g = monoflake::Generator::builder(monoflake::Layout::twitter())
    ///     .max_wait(std::time::Duration::from_millis(50))
    ///     .build()?;
    /// assert!(g.next_id().is_ok());
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn max_wait(mut self, wait: Duration) -> Self {
        self.max_wait = wait;
        self
    }

    /// Starts each new tick's sequence at a value in `0..2^bits` derived from the tick, so low
    /// traffic does not always give even IDs (default 0: start at 0). At most
    /// `sequence_bits - 1`; larger values are capped.
    ///
    /// ```
    /// let g = monoflake::Generator::builder(monoflake::Layout::twitter())
    ///     .start_offset_bits(4)
    ///     .build()?;
    /// assert!(g.next_id()?.parts(g.layout())?.sequence() < 16);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn start_offset_bits(mut self, bits: u32) -> Self {
        self.offset_bits = bits;
        self
    }

    /// Never issues a time-field value at or below `tick`: the generator reads its clock as
    /// at least `tick + 1`. This is how a time reservation survives a restart: a node that
    /// restarts before its clock has passed the reservation issues from `tick + 1` on (ahead of
    /// its clock by at most the reservation window, plus `max_lead`), never below it.
    ///
    /// ```
    /// let layout = monoflake::Layout::twitter();
    /// let far = layout.tick_at(1_900_000_000_000); // a reservation years ahead
    /// let g = monoflake::Generator::builder(layout).resume_after(far).build()?;
    /// assert_eq!(g.try_next_id()?.parts(g.layout())?.tick(), far + 1);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn resume_after(mut self, tick: u64) -> Self {
        self.after_tick = Some(tick);
        self
    }

    pub(crate) fn layout_ref(&self) -> &Layout {
        &self.layout
    }

    pub(crate) fn clock_ref(&self) -> &C {
        &self.clock
    }

    pub(crate) fn window(&self) -> Duration {
        self.window
    }

    pub(crate) fn set_window(&mut self, window: Duration) {
        self.window = window;
    }

    pub(crate) fn raise_max_wait(&mut self, at_least: Duration) {
        self.max_wait = self.max_wait.max(at_least);
    }

    /// Checks the node and builds the generator.
    ///
    /// # Errors
    ///
    /// [`Error::OutOfRange`] when the node does not fit the layout; [`Error::ForkDetection`]
    /// when `pthread_atfork` fails (out of memory).
    ///
    /// ```
    /// use monoflake::{Generator, Layout};
    /// let err = Generator::builder(Layout::sonyflake()).node(70_000).build().unwrap_err();
    /// assert_eq!(err.to_string(), "node 70000 is out of range: the field holds 0..=65535");
    /// ```
    pub fn build(self) -> Result<Generator<C>, Error> {
        self.build_with(None, u64::MAX, u64::MAX)
    }

    /// Builds a [`PerCore`] generator with `slots` states (rounded up to a power of two), each
    /// on its own cache line and owning a slice of the sequence bits.
    ///
    /// # Errors
    ///
    /// As [`GeneratorBuilder::build`]; [`Error::OutOfRange`] (`field: "slots"`) when the
    /// slots would take every sequence bit.
    ///
    /// ```
    /// let per_core = monoflake::Generator::builder(monoflake::Layout::twitter())
    ///     .node(1)
    ///     .build_per_core(4)?;
    /// assert_eq!(per_core.slots(), 4);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn build_per_core(self, slots: usize) -> Result<PerCore<C>, Error>
    where
        C: Clone,
    {
        let slots = slots.max(1).next_power_of_two();
        let slot_bits = slots.trailing_zeros();
        let sequence_bits = self.layout.sequence_bits();
        if slot_bits >= sequence_bits {
            return Err(Error::OutOfRange {
                field: "slots".into(),
                value: slots as u64,
                max: 1 << (sequence_bits - 1),
            });
        }
        let generators = (0..slots as u64)
            .map(|slot| {
                self.clone()
                    .build_slot(None, u64::MAX, u64::MAX, slot_bits, slot)
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(PerCore {
            generators: generators.into_boxed_slice(),
            mask: slots - 1,
        })
    }

    /// Builds the generator, with a lease status and a first limit when it is leased.
    pub(crate) fn build_with(
        self,
        lease: Option<Arc<LeaseStatus>>,
        limit: u64,
        deadline: u64,
    ) -> Result<Generator<C>, Error> {
        self.build_slot(lease, limit, deadline, 0, 0)
    }

    /// Builds one state; `slot_bits` high bits of the sequence carry `slot`.
    fn build_slot(
        self,
        lease: Option<Arc<LeaseStatus>>,
        limit: u64,
        deadline: u64,
        slot_bits: u32,
        slot: u64,
    ) -> Result<Generator<C>, Error> {
        let layout = self.layout;
        let node = layout.check_node(self.node)?;
        let sequence_bits = layout.sequence_bits() - slot_bits;
        let offset_bits = self.offset_bits.min(sequence_bits - 1);
        let max_lead = u64::try_from(self.max_lead.as_millis() / u128::from(layout.tick_ms()))
            .unwrap_or(u64::MAX);
        // After a reservation R the clock reads as at least R + 1, and the state starts as the
        // last value of tick R. Past the end of the time field the first call is Exhausted.
        let (start, floor_tick) = match self.after_tick {
            Some(tick) => match tick.checked_add(1) {
                Some(next) if next <= layout.max_tick() => ((next << sequence_bits) - 1, next),
                _ => (
                    layout.max_tick() << sequence_bits | layout.max_sequence(),
                    u64::MAX,
                ),
            },
            None => (0, 0),
        };
        let out = Output {
            sequence_bits,
            sequence_mask: mask(sequence_bits),
            time_shift: layout.time_shift(),
            sequence_shift: layout.sequence_shift(),
            fixed: node << layout.node_shift() | slot << (sequence_bits + layout.sequence_shift()),
        };
        Ok(Generator {
            counters: CachePadded::new(Counters::new()),
            start,
            core: CachePadded::new(Core {
                state: AtomicU64::new(start),
                limit: AtomicU64::new(limit),
                deadline: AtomicU64::new(deadline),
                fork: forkguard::Guard::try_new().map_err(|e| Error::ForkDetection {
                    reason: e.to_string(),
                })?,
            }),
            lease,
            params: StepParams {
                sequence_bits,
                max_tick: layout.max_tick(),
                max_lead,
                offset_mask: mask(offset_bits),
                floor_tick,
            },
            out,
            epoch_ms: layout.epoch_ms(),
            tick_ms: layout.tick_ms(),
            max_wait: self.max_wait,
            expires_at_ms: layout.expires_at_ms(),
            clock: self.clock,
            layout,
            node,
        })
    }
}

/// Several generator states for one node, each on its own cache line and owning a slice of the
/// sequence bits (its slot number in their top bits), for many-core hosts.
///
/// * Threads are mapped to slots without locks: each thread takes a number once (one atomic
///   increment, on its first call) and uses slot `number % slots` from then on.
/// * IDs are unique — different slots differ in their slot bits, and each slot is a
///   [`Generator`] — and increasing per thread; across threads they are k-sorted (ordered by
///   time, not strictly).
/// * Each slot has `2^(sequence_bits - slot_bits)` IDs per tick: borrowing starts sooner when
///   one thread does all the work.
///
/// # Example
///
/// ```
/// use monoflake::{Generator, Layout};
///
/// let per_core = Generator::builder(Layout::twitter()).node(3).build_per_core(2)?;
/// let ids: Vec<_> = std::thread::scope(|s| {
///     let a = s.spawn(|| (0..1000).map(|_| per_core.next_id().unwrap()).collect::<Vec<_>>());
///     let b = s.spawn(|| (0..1000).map(|_| per_core.next_id().unwrap()).collect::<Vec<_>>());
///     [a.join().unwrap(), b.join().unwrap()].concat()
/// });
/// let mut unique = ids.clone();
/// unique.sort();
/// unique.dedup();
/// assert_eq!(unique.len(), 2000);
/// # Ok::<(), monoflake::Error>(())
/// ```
pub struct PerCore<C: TimeSource = LockedClock> {
    generators: Box<[Generator<C>]>,
    mask: usize,
}

impl<C: TimeSource + fmt::Debug> fmt::Debug for PerCore<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PerCore")
            .field("slots", &self.generators.len())
            .finish_non_exhaustive()
    }
}

/// The calling thread's number, taken on its first call.
fn thread_number() -> usize {
    use std::cell::Cell;
    use std::sync::atomic::AtomicUsize;
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static NUMBER: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    NUMBER.with(|n| {
        if n.get() == usize::MAX {
            // Ordering: Relaxed; only distinctness matters.
            n.set(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        }
        n.get()
    })
}

impl<C: TimeSource> PerCore<C> {
    /// The number of slots.
    ///
    /// ```
    /// let g = monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_core(3)?;
    /// assert_eq!(g.slots(), 4); // rounded up to a power of two
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn slots(&self) -> usize {
        self.generators.len()
    }

    /// The calling thread's slot.
    #[inline]
    fn mine(&self) -> &Generator<C> {
        &self.generators[thread_number() & self.mask]
    }

    /// As [`Generator::try_next_id`], on the calling thread's slot.
    ///
    /// # Errors
    ///
    /// As [`Generator::try_next_id`].
    ///
    /// ```
    /// let g = monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_core(2)?;
    /// assert!(g.try_next_id().is_ok());
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    #[inline]
    pub fn try_next_id(&self) -> Result<Id, Error> {
        self.mine().try_next_id()
    }

    /// As [`Generator::next_id`], on the calling thread's slot.
    ///
    /// # Errors
    ///
    /// As [`Generator::next_id`].
    ///
    /// ```
    /// let g = monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_core(2)?;
    /// assert!(g.next_id()? < g.next_id()?);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn next_id(&self) -> Result<Id, Error> {
        self.mine().next_id()
    }

    /// As [`Generator::next_ids`], on the calling thread's slot.
    ///
    /// # Errors
    ///
    /// As [`Generator::next_ids`].
    ///
    /// ```
    /// let g = monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_core(2)?;
    /// assert_eq!(g.next_ids(100)?.len(), 100);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn next_ids(&self, n: u64) -> Result<Ids, Error> {
        self.mine().next_ids(n)
    }

    /// The counters of all slots added up.
    ///
    /// ```
    /// let g = monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_core(2)?;
    /// g.next_id()?;
    /// assert_eq!(g.stats().issued, 1);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn stats(&self) -> Stats {
        self.generators
            .iter()
            .map(Generator::stats)
            .fold(Stats::default(), |a, b| Stats {
                issued: a.issued + b.issued,
                borrowed_ticks: a.borrowed_ticks + b.borrowed_ticks,
                max_lead_ticks: a.max_lead_ticks.max(b.max_lead_ticks),
                would_block: a.would_block + b.would_block,
                waits: a.waits + b.waits,
                reanchors: b.reanchors,
                max_skew_ns: b.max_skew_ns,
                ..Stats::default()
            })
    }
}
