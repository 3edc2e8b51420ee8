//! The lock-free generator: one `AtomicU64` advanced by compare-exchange around the pure step.
//!
//! * `mod.rs`: [`Generator`], its state words and accessors.
//! * `hot.rs`: the hot path — clock → step → fence → compare-exchange.
//! * `check.rs`: whether a call could issue now, without issuing (health checks).
//! * `wait.rs`: the waiting calls (`next_id`, `next_ids`).
//! * `step.rs`: the pure state step every flavour shares.
//! * `fence.rs`: the words that stop issuing (reservation limit, lease deadline, fork).
//! * `builder.rs`, `batch.rs` ([`Ids`]), `per_core.rs` ([`PerCore`]).
//! * `per_thread/`: [`PerThread`] and its [`LocalSlot`] handle: a slot of the sequence space
//!   per thread, advanced as plain numbers.
//! * `id_generator.rs`: the [`IdGenerator`] contract every flavour implements.

mod batch;
mod builder;
mod check;
mod fence;
mod hot;
mod id_generator;
mod per_core;
mod per_thread;
mod state_step;
pub(crate) mod step;
#[cfg(test)]
mod test_clock;
mod wait;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_utils::CachePadded;

pub use self::batch::Ids;
pub use self::builder::{GeneratorBuilder, MAX_LEAD_LIMIT};
pub use self::fence::fence_refuses;
pub(crate) use self::fence::{Fence, Refusal};
pub use self::id_generator::IdGenerator;
pub(crate) use self::id_generator::id_generator_by_inherent_methods;
pub use self::per_core::PerCore;
pub(crate) use self::per_core::Slots as PerCoreSlots;
pub use self::per_thread::{LocalIds, LocalSlot, PerThread};
pub(crate) use self::per_thread::{Owner, Shared as PerThreadShared};
pub use self::state_step::StateStep;
use self::step::{Now, StepParams};
use crate::clock::{LockedClock, TimeSource};
use crate::stats::{Counters, Stats};
use crate::sync::{AtomicU64, Ordering};
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
/// * **A forked child does not issue.** Every call compares the process generation with the
///   one the generator was built in (one load): on Linux it sits in a page the kernel wipes in
///   any child (`MADV_WIPEONFORK`), so every fork — libc's `fork`, a raw `syscall(SYS_fork)`,
///   glibc's `_Fork`, `clone` — is caught on the first call; elsewhere `pthread_atfork` counts
///   forks and a process-id check off the common path catches the rest. The child gets
///   [`Error::Forked`] and issues nothing under the parent's node.
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
    /// Who explains a refusal of the fence (the lease), if anyone owns it.
    refusal: Option<Arc<dyn Refusal>>,
    params: StepParams,
    out: Output,
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
    /// What stops issuing: reservation limit, lease deadline, fork guard.
    pub(crate) fence: Fence,
}

/// How a state value becomes an ID.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Output {
    /// Width of the sequence part of the state (the layout's, less any per-core slot bits).
    pub(crate) sequence_bits: u32,
    /// `mask(sequence_bits)`, precomputed.
    pub(crate) sequence_mask: u64,
    pub(crate) time_shift: u32,
    pub(crate) sequence_shift: u32,
    /// The node value and the per-core slot, already shifted into place.
    pub(crate) fixed: u64,
}

impl Output {
    #[inline]
    pub(crate) const fn id(&self, state: u64) -> Id {
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
            .field("fence", &self.core.fence.words())
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
    /// [`Error::OutOfRange`] when `node` does not fit the layout; as
    /// [`GeneratorBuilder::build`] otherwise (a system clock before the layout's epoch, fork
    /// detection that cannot be set up).
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
        GeneratorBuilder::new(layout, LockedClock::new())
    }
}

impl<C: TimeSource> Generator<C> {
    /// The largest batch [`Generator::try_next_ids`] and [`Generator::next_ids`] can ever
    /// issue: a batch must end within `max_lead` ticks ahead of the clock's tick, so at most
    /// `(max_lead_ticks + 1) * 2^sequence_bits` IDs (`u64::MAX` where that does not fit in a
    /// `u64`). A larger one is refused at once with [`Error::BatchTooLarge`].
    ///
    /// ```
    /// use monoflake::{Error, Generator, Layout};
    ///
    /// // Twitter's layout: 4096 IDs a millisecond, 100 ms of lead by default.
    /// let g = Generator::new(Layout::twitter(), 1)?;
    /// assert_eq!(g.max_batch(), 101 * 4096);
    /// assert!(matches!(
    ///     g.try_next_ids(500_000),
    ///     Err(Error::BatchTooLarge { requested: 500_000, limit: 413_696, .. })
    /// ));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn max_batch(&self) -> u64 {
        self.params
            .max_lead
            .checked_add(1)
            .and_then(|ticks| ticks.checked_mul(1 << self.params.sequence_bits))
            .unwrap_or(u64::MAX)
    }

    /// How long a waiting call ([`Generator::next_id`], [`Generator::next_ids`]) waits at the
    /// lead limit before it reports [`Error::TimedOut`]: the builder's
    /// [`max_wait`](GeneratorBuilder::max_wait), raised for a leased generator to at least a
    /// reservation window plus a tick.
    ///
    /// ```
    /// let g = monoflake::Generator::new(monoflake::Layout::twitter(), 1)?;
    /// assert_eq!(g.max_wait(), monoflake::DEFAULT_MAX_WAIT);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn max_wait(&self) -> Duration {
        self.max_wait
    }

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

    /// The fence words, for the owner of the node (the lease keeper).
    pub(crate) fn fence(&self) -> &Fence {
        &self.core.fence
    }

    /// Stops the generator for good and returns the last state value issued: after this
    /// returns no call issues anything — a compare-exchange still in flight fails against the
    /// sealed value, and every later call sees the zero limit.
    pub(crate) fn seal(&self) -> u64 {
        self.core.fence.close();
        // Ordering: Relaxed; the swap is a read-modify-write, so it returns the last value in
        // the atomic's modification order, which holds every value ever issued.
        let last = self.core.state.swap(u64::MAX, Ordering::Relaxed);
        if last != u64::MAX {
            // Ordering: Relaxed; a statistic (the issued count after the seal).
            self.counters.sealed_state.store(last, Ordering::Relaxed);
        }
        last
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
            last & crate::layout::mask(self.params.sequence_bits),
        )
    }

    /// Sets the fence as a lease keeper does (`Fence::set`), to a limit
    /// `limit_ahead` ticks after the clock's tick and no deadline, for the loom models (only
    /// in `--cfg loom` builds).
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_set_fence(&self, limit_ahead: u64) {
        let now = self.now_of(self.clock.now_ns()).tick;
        self.core.fence.set(now + limit_ahead, u64::MAX);
    }

    /// Off the common path: a jump to a later tick (values passed over) or a borrowed tick.
    #[cold]
    #[inline(never)]
    pub(crate) fn count_jump_or_borrow(&self, cur: u64, first: u64, last: u64, now: u64) {
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
    /// let layout = Layout::builder().epoch_ms(Layout::twitter().epoch_ms()).sequence_bits(2).build()?;
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
        let state = match self.core.state.load(Ordering::Relaxed) {
            // Sealed (count up to the last value issued), or the last value of a layout that
            // fills 64 bits issued: the counter holds which.
            u64::MAX => self.counters.sealed_state.load(Ordering::Relaxed),
            state => state,
        };
        let clock = self.clock.report();
        let (spins, yields, sleeps) = (
            load(&c.wait_spins),
            load(&c.wait_yields),
            load(&c.wait_sleeps),
        );
        Stats {
            issued: state
                .wrapping_sub(self.start)
                .saturating_sub(load(&c.skipped)),
            borrowed_ticks: load(&c.borrowed_ticks),
            max_lead_ticks: load(&c.max_lead_ticks),
            would_block_returned: load(&c.would_block_returned),
            waiting_calls: load(&c.waiting_calls),
            wait_retries: spins + yields + sleeps,
            wait_spins: spins,
            wait_yields: yields,
            wait_sleeps: sleeps,
            timed_out: load(&c.timed_out),
            reanchors: clock.forward_steps,
            max_skew_ns: clock.max_skew_ns,
            skew_ns: clock.last_skew_ns,
            slew_left_ns: clock.slew_left_ns,
            clock_held_back_ns: clock.held_back_ns,
            ..Stats::default()
        }
    }

    /// The tick of a Unix nanosecond, and how far into it (the tick 0 before the epoch).
    #[inline]
    pub(crate) fn now_of(&self, unix_ns: u64) -> Now {
        let since = unix_ns.saturating_sub(self.params.epoch_ns);
        // Most layouts tick in milliseconds: a division by a constant is a multiply.
        let tick = if self.tick_ms == 1 {
            since / 1_000_000
        } else {
            since / self.params.tick_ns
        };
        Now {
            tick,
            rem_ns: since - tick * self.params.tick_ns,
        }
    }
}
