//! Configuring and building a generator: the node, the clock, the lead and wait bounds, the
//! start after a time reservation, and the per-core and per-thread flavours.

use std::sync::Arc;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use super::state_step::StateStep;
use super::step::StepParams;
use super::{
    Core, Counters, DEFAULT_MAX_LEAD, DEFAULT_MAX_WAIT, Fence, Generator, Output, PerCore,
    PerThread, Refusal,
};
use crate::clock::TimeSource;
use crate::sync::AtomicU64;
use crate::{Error, Layout};

/// The longest `max_lead` a generator accepts: an hour.
pub const MAX_LEAD_LIMIT: Duration = Duration::from_secs(3600);

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
    /// Used only by `build_leased`: how far ahead the reservation is written, how far ahead
    /// of the clock a node's reservation may be, and whether to trust one further ahead.
    lease: LeaseSettings,
}

/// The settings only `build_leased` reads (see `crate::lease::build`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LeaseSettings {
    pub(crate) window: Option<Duration>,
    pub(crate) future_tolerance: Option<Duration>,
    pub(crate) trust_future: bool,
}

impl<C: TimeSource> GeneratorBuilder<C> {
    /// Node 0, the given clock, the defaults.
    pub(crate) fn new(layout: Layout, clock: C) -> Self {
        GeneratorBuilder {
            layout,
            node: 0,
            clock,
            max_lead: DEFAULT_MAX_LEAD,
            max_wait: DEFAULT_MAX_WAIT,
            offset_bits: 0,
            after_tick: None,
            lease: LeaseSettings::default(),
        }
    }

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

    /// The time source (default a new [`LockedClock`](crate::LockedClock)).
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
            lease: self.lease,
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

    /// Starts the sequence of each tick the generator moves to with the clock at a value in
    /// `0..2^bits` derived from the tick, so low traffic does not always give even IDs
    /// (default 0: start at 0). A tick entered by a borrow (a full sequence carried into it)
    /// keeps counting from where the borrow left it. At most `sequence_bits - 1`; larger
    /// values are capped.
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

    pub(crate) fn max_lead_ref(&self) -> Duration {
        self.max_lead
    }

    /// The lease settings asked for (the lease picks its defaults for the rest).
    pub(crate) fn lease_settings(&mut self) -> &mut LeaseSettings {
        &mut self.lease
    }

    /// Checks the settings that do not depend on the node: the lead is at most
    /// [`MAX_LEAD_LIMIT`] and the clock does not read before the layout's epoch (an ID would then carry
    /// a time ahead of the real one).
    pub(crate) fn check(&self) -> Result<(), Error> {
        let layout = &self.layout;
        if self.max_lead > MAX_LEAD_LIMIT {
            return Err(Error::InvalidConfig {
                setting: "max_lead",
                value: format!("{} ms", self.max_lead.as_millis()),
                allowed: format!(
                    "at most {} s: an ID's time may run ahead of the clock by the lead, and \
                     further ahead it is no longer a time",
                    MAX_LEAD_LIMIT.as_secs()
                ),
            });
        }
        let now_ms = self.clock.precise_now_ms();
        if now_ms < layout.epoch_ms() {
            return Err(Error::InvalidConfig {
                setting: "clock",
                value: format!("{} (unix ms {now_ms})", crate::rfc3339(now_ms)),
                allowed: format!(
                    "a clock at or after the layout's epoch {} (unix ms {}); this clock is {} ms \
                     before it",
                    crate::rfc3339(layout.epoch_ms()),
                    layout.epoch_ms(),
                    layout.epoch_ms() - now_ms
                ),
            });
        }
        Ok(())
    }

    pub(crate) fn raise_max_wait(&mut self, at_least: Duration) {
        self.max_wait = self.max_wait.max(at_least);
    }

    /// Checks the node and builds the generator.
    ///
    /// # Errors
    ///
    /// [`Error::OutOfRange`] when the node does not fit the layout; [`Error::InvalidConfig`]
    /// when `max_lead` is longer than [`MAX_LEAD_LIMIT`] or the clock reads before the
    /// layout's epoch; [`Error::ForkDetection`] when `pthread_atfork` fails (out of memory).
    ///
    /// ```
    /// use monoflake::{Generator, Layout};
    /// let err = Generator::builder(Layout::sonyflake()).node(70_000).build().unwrap_err();
    /// assert_eq!(err.to_string(), "node 70000 is out of range: the field holds 0..=65535");
    /// ```
    pub fn build(self) -> Result<Generator<C>, Error> {
        self.build_with(None, u64::MAX, u64::MAX)
    }

    /// Builds the pure step alone, for a host that keeps the state word itself (one word of
    /// a PostgreSQL server's shared memory, advanced by every backend): the same step, layout
    /// checks and resume floor as [`GeneratorBuilder::build`], without the clock, the fence
    /// or the waiting. See [`StateStep`].
    ///
    /// # Errors
    ///
    /// As [`GeneratorBuilder::build`].
    pub fn build_step(self) -> Result<StateStep, Error> {
        let generator = self.build_with(None, u64::MAX, u64::MAX)?;
        Ok(StateStep::new(
            generator.params,
            generator.out,
            generator.start,
            generator.layout,
            generator.node,
        ))
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
        self.build_per_core_with(slots, None, u64::MAX, u64::MAX)
    }

    /// [`GeneratorBuilder::build_per_core`] with first fence words (every slot's) and who
    /// explains their refusals (the lease, when it is leased).
    pub(crate) fn build_per_core_with(
        self,
        slots: usize,
        refusal: Option<Arc<dyn Refusal>>,
        limit: u64,
        deadline: u64,
    ) -> Result<PerCore<C>, Error>
    where
        C: Clone,
    {
        let slot_bits = self.slot_bits(slots)?;
        let slots = 1usize << slot_bits;
        let generators = (0..slots as u64)
            .map(|slot| {
                self.clone()
                    .build_slot(refusal.clone(), limit, deadline, slot_bits, slot)
            })
            .collect::<Result<Vec<_>, Error>>()?;
        debug_assert_eq!(generators.len(), slots);
        Ok(PerCore::from_slots(generators))
    }

    /// Builds a per-thread generator (see [`PerThread`]) with `slots` slots, rounded up to a
    /// power of two: each thread (or [`LocalSlot`](crate::LocalSlot) handle) takes a slot of
    /// its own, whose number is in the top bits of the sequence, and gives it back when it
    /// exits (or the handle drops). At most this many threads issue at once.
    ///
    /// # Errors
    ///
    /// As [`GeneratorBuilder::build`]; [`Error::OutOfRange`] (field `"slots"`) when the
    /// slots would take every sequence bit.
    ///
    /// On a layout whose time and sequence fields fill all 64 bits (no node field, the sign
    /// bit allowed) a generator has at least two slots, as one slot's last state would be the
    /// marker of a sealed slot; such a layout needs at least 2 sequence bits
    /// ([`Error::InvalidConfig`], setting `"slots"`).
    ///
    /// ```
    /// let ids = monoflake::Generator::builder(monoflake::Layout::twitter())
    ///     .node(1)
    ///     .build_per_thread(8)?;
    /// assert_eq!(ids.slots(), 8);
    /// assert!(matches!(
    ///     monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_thread(4096),
    ///     Err(monoflake::Error::OutOfRange { max: 2048, .. })
    /// ));
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn build_per_thread(self, slots: usize) -> Result<PerThread<C>, Error>
    where
        C: 'static,
    {
        self.build_per_thread_with(slots, None, u64::MAX, u64::MAX)
    }

    /// [`GeneratorBuilder::build_per_thread`] with first fence words and who explains their
    /// refusals (the lease, when it is leased).
    pub(crate) fn build_per_thread_with(
        self,
        slots: usize,
        refusal: Option<Arc<dyn Refusal>>,
        limit: u64,
        deadline: u64,
    ) -> Result<PerThread<C>, Error>
    where
        C: 'static,
    {
        // A slot's last state is `max_tick << sequence bits | sequence mask`: on a layout whose
        // time and sequence fields fill all 64 bits, with one slot that is `u64::MAX`, the
        // sealed marker. At least one slot bit keeps every state a slot can hold below it.
        let fills_64 = self.layout.time_bits() + self.layout.sequence_bits() >= 64;
        if fills_64 && self.layout.sequence_bits() < 2 {
            return Err(Error::InvalidConfig {
                setting: "slots",
                value: slots.to_string(),
                allowed: "a per-thread generator needs 2 sequence bits on a layout whose time \
                          and sequence fields fill 64 bits (one for the slot)"
                    .into(),
            });
        }
        let slot_bits = self.slot_bits(slots)?.max(u32::from(fills_64));
        let base = self.build_slot(refusal, limit, deadline, slot_bits, 0)?;
        Ok(PerThread::from_base(base, slot_bits))
    }

    /// The slot bits for `slots` slots (rounded up to a power of two), at most all but one of
    /// the sequence bits.
    pub(crate) fn slot_bits(&self, slots: usize) -> Result<u32, Error> {
        let sequence_bits = self.layout.sequence_bits();
        // Checked before rounding up, so no size overflows.
        let max_slots = 1u64 << (sequence_bits - 1);
        if slots as u64 > max_slots {
            return Err(Error::OutOfRange {
                field: "slots".into(),
                value: slots as u64,
                max: max_slots,
            });
        }
        Ok(slots.max(1).next_power_of_two().trailing_zeros())
    }

    /// Builds the generator with first fence words and who explains their refusals (the
    /// lease, when it is leased).
    pub(crate) fn build_with(
        self,
        refusal: Option<Arc<dyn Refusal>>,
        limit: u64,
        deadline: u64,
    ) -> Result<Generator<C>, Error> {
        self.build_slot(refusal, limit, deadline, 0, 0)
    }

    /// Builds one state; `slot_bits` high bits of the sequence carry `slot`.
    fn build_slot(
        self,
        refusal: Option<Arc<dyn Refusal>>,
        limit: u64,
        deadline: u64,
        slot_bits: u32,
        slot: u64,
    ) -> Result<Generator<C>, Error> {
        self.check()?;
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
        let tick_ns = layout.tick_ms().saturating_mul(1_000_000);
        let epoch_ns = layout.epoch_ms().saturating_mul(1_000_000);
        let out = Output {
            sequence_bits,
            sequence_mask: crate::layout::mask(sequence_bits),
            time_shift: layout.time_shift(),
            sequence_shift: layout.sequence_shift(),
            fixed: node << layout.node_shift()
                | slot_number(slot) << (sequence_bits + layout.sequence_shift()),
        };
        Ok(Generator {
            counters: CachePadded::new(Counters::new()),
            start,
            core: CachePadded::new(Core {
                state: AtomicU64::new(start),
                fence: Fence::new(limit, deadline)?.in_ids_shifted_by(layout.time_shift()),
            }),
            refusal,
            params: StepParams {
                sequence_bits,
                sequence_mask: crate::layout::mask(sequence_bits),
                max_tick: layout.max_tick(),
                max_lead,
                offset_mask: crate::layout::mask(offset_bits),
                floor_tick,
                tick_ns,
                epoch_ns,
                common_mask: StepParams::common_mask(
                    crate::layout::mask(sequence_bits),
                    layout.max_tick(),
                    tick_ns,
                    epoch_ns,
                ),
                behind_ns: StepParams::behind_ns(max_lead, tick_ns),
            },
            out,
            tick_ms: layout.tick_ms(),
            max_wait: self.max_wait,
            expires_at_ms: layout.expires_at_ms(),
            clock: self.clock,
            layout,
            node,
        })
    }
}

/// The number a slot puts in its IDs: its own. (A deliberately broken build, compiled only for
/// the loom model that must catch it, puts 0 in every slot's IDs.)
const fn slot_number(slot: u64) -> u64 {
    if cfg!(monoflake_broken_per_core) {
        0
    } else {
        slot
    }
}
