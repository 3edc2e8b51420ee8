//! The hot path: clock → step → fence → compare-exchange, and nothing else. Statistics, the
//! explanation of a refusal and the test-only broken variant live in cold functions below.

use std::time::Duration;

use super::step::{InTick, Now, Step, next_state};
use super::{Generator, Ids};
use crate::clock::TimeSource;
use crate::stats::Counters;
use crate::sync::{self, Ordering};
use crate::{BlockedOn, Error, Id};

/// Where [`Generator::reserve_common`] left off.
pub(super) struct Miss {
    /// The state it found.
    cur: u64,
    /// The clock's reading, when it has one (the clock was outside the common case's window).
    now_ns: Option<u64>,
    /// Whether its compare-exchange was lost to another thread.
    lost: bool,
}

impl Miss {
    /// Left off at state `cur`, with no clock reading and no lost compare-exchange.
    fn at(cur: u64) -> Miss {
        Miss {
            cur,
            now_ns: None,
            lost: false,
        }
    }
}

impl<C: TimeSource> Generator<C> {
    /// Reserves one state value in the common case — the tick the state holds is the clock's
    /// or one borrowed within the lead, with room in its sequence ([`InTick`]) — or
    /// says where it left off, for [`Generator::try_next_id_beyond`]. Small enough to inline
    /// into every caller, and its answer fits in registers.
    #[inline(always)]
    pub(super) fn reserve_common(&self) -> Result<u64, Miss> {
        // Ordering: Relaxed; a stale value only makes the compare-exchange fail. Loaded before
        // the clock is read: the common case's window of time, and the fence, depend on it
        // alone and are worked out while the clock is read.
        let cur = self.core.state.load(Ordering::Relaxed);
        // A coarse reading may lag: the common case then takes only the clock's own tick, as
        // the general step re-reads the precise clock before it issues in a borrowed one.
        let behind_ns = if self.clock.is_coarse() {
            0
        } else {
            self.params.behind_ns
        };
        let window = InTick::of(cur, behind_ns, &self.params);
        let now_ns = self.clock.now_ns();
        if now_ns.wrapping_sub(window.from_ns) >= window.width_ns {
            return Err(Miss {
                cur,
                now_ns: Some(now_ns),
                lost: false,
            });
        }
        // Fence: as in the general path, for the clock's tick, which is the state's.
        if self.core.fence.refuses_in(cur >> self.params.sequence_bits) {
            return Err(Miss::at(cur));
        }
        match self.commit(cur, window.next) {
            // A forked child must not issue under the parent's node: asked once per call,
            // after the compare-exchange (which changed only the child's copy of the state),
            // where it costs least.
            Ok(()) if !self.core.fence.fork_watch().forked_on_common_path() => Ok(window.next),
            Ok(()) => Err(Miss::at(window.next)),
            // Only a spurious failure of the weak compare-exchange leaves the state as it was.
            Err(actual) => Err(Miss {
                cur,
                now_ns: None,
                lost: actual != cur,
            }),
        }
    }

    /// [`Generator::try_next_id`] beyond the common case: a new tick, a borrow, a refusal, or
    /// a compare-exchange lost to another thread. Out of line, so the common case needs no
    /// stack frame; its answer goes straight to the caller's. `RETURNED`: the answer goes to
    /// the caller of `try_next_id` (a `WouldBlock` is counted as returned); otherwise a waiting
    /// call retries it.
    #[inline(never)]
    pub(super) fn try_next_id_beyond<const RETURNED: bool>(&self, miss: Miss) -> Result<Id, Error> {
        let now_ns = miss.now_ns.unwrap_or_else(|| self.clock.now_ns());
        let answer = self
            .reserve_from(1, miss.cur, now_ns, miss.lost)
            .map(|(first, _)| self.out.id(first));
        if RETURNED && matches!(answer, Err(Error::WouldBlock { .. })) {
            self.returned_would_block();
        }
        answer
    }

    /// Counts a [`Error::WouldBlock`] returned to a caller of `try_next_id` or `try_next_ids`.
    #[cold]
    #[inline(never)]
    pub(super) fn returned_would_block(&self) {
        Counters::add(&self.counters.would_block_returned, 1);
    }

    /// Reserves `n >= 1` consecutive state values with one compare-exchange and returns the
    /// first and the last.
    #[inline]
    pub(crate) fn reserve(&self, n: u64) -> Result<(u64, u64), Error> {
        let now_ns = self.clock.now_ns();
        // Ordering: Relaxed; a stale value only makes the first compare-exchange fail.
        let cur = self.core.state.load(Ordering::Relaxed);
        self.reserve_from(n, cur, now_ns, false)
    }

    /// The general path: `n` values after the state `cur` (as loaded, perhaps stale) at the
    /// clock reading `now_ns`; `lost` when a compare-exchange was just lost to another thread.
    #[inline]
    fn reserve_from(
        &self,
        n: u64,
        mut cur: u64,
        now_ns: u64,
        lost: bool,
    ) -> Result<(u64, u64), Error> {
        // A forked child must not issue under the parent's node: checked once per call.
        let forked = self.core.fence.forked();
        // Clock: the cheap reading first; a coarse one is replaced by a precise one (once)
        // before anything depends on it being current.
        let mut clock = self.now_of(now_ns);
        let mut precise = !self.clock.is_coarse();
        // Whether the last compare-exchange was the first after a wait for another thread.
        let mut waited = false;
        if lost {
            self.after_a_lost_round(&mut clock, &mut precise);
            waited = true;
        }
        loop {
            // Step: pure.
            let step = next_state(cur, clock, n, &self.params);
            let now = clock.tick;
            if !precise && step.wants_precise_time(now, self.params.sequence_bits) {
                clock = self.now_of(self.clock.precise_now_ns());
                precise = true;
                continue;
            }
            let Step::Issue { first, last } = step else {
                // A refusal from the state as it was before a wait is not an answer: the step
                // is not monotone in the state (from an earlier tick it jumps to the clock's
                // tick at the start offset; from a state a borrow carried into that tick, below
                // the offset, it goes on from there; after a clock stepped back, a full old
                // state borrows beyond the lead where a later state with room goes on in its
                // own tick), so the current state may well issue.
                if waited {
                    waited = false;
                    cur = self.reload();
                    continue;
                }
                return Err(self.refuse(step));
            };
            // Fence: never a tick the store has not acknowledged, never after the lease
            // deadline, never in a forked child (a move into a later tick — a jump or a
            // borrow — also asks the pid, to catch forks that skip pthread_atfork; once per
            // tick, not once per borrowed ID).
            let last_tick = last >> self.params.sequence_bits;
            let slow = (last_tick > cur >> self.params.sequence_bits) | (n > 1);
            // One branch on the common path for all of it.
            if forked | slow | self.core.fence.refuses(now, last_tick) {
                // Nor is the fence's refusal of a tick the stale step ran to.
                if waited && self.core.fence.refuses(now, last_tick) {
                    waited = false;
                    cur = self.reload();
                    continue;
                }
                self.check_slow(forked, now, last_tick)?;
            }
            // Compare-exchange.
            match self.commit(cur, last) {
                Ok(()) => {
                    if slow {
                        self.count_jump_or_borrow(cur, first, last, now);
                    }
                    return Ok((first, last));
                }
                // A spurious failure of the weak compare-exchange: the state is as it was.
                Err(actual) if actual == cur => {}
                // A paced slot (in the last tick the lead allows) taken by another caller: the
                // next slot is computed at once, and waited for as its own (the cap, not the
                // cache line, is what callers queue for there).
                Err(actual)
                    if self.params.max_lead > 0
                        && last_tick >= now.saturating_add(self.params.max_lead) =>
                {
                    cur = actual;
                }
                // The first compare-exchange after a wait, from the state as it was before
                // the wait, fails (the other thread has issued since) but brings the state's
                // cache line here: at once, the next one from the value it found lands.
                Err(actual) if waited => {
                    waited = false;
                    cur = actual;
                }
                Err(_) => {
                    self.after_a_lost_round(&mut clock, &mut precise);
                    waited = true;
                }
            }
        }
    }

    /// After a compare-exchange lost to another thread: wait [`sync::CONTENDED_WAIT`], then
    /// read the clock again and try once more from the state as it was before the wait.
    ///
    /// Why wait that long (two microseconds, not a few spins): while two threads hammer
    /// one generator, the one whose compare-exchange lands owns the state's cache line and
    /// issues at full speed; the loser's retry has to take the line from it, and a retry from
    /// a value read before a short wait is already stale when it lands, so it fails again.
    /// With crossbeam's exponential `Backoff` (1, 2, 4 … 64 spins) the loser was measured
    /// getting 5 % of the IDs; with no wait at all the line changed hands on every ID and the
    /// pair issued a fifth as many. A fixed wait, the same for every loser, lets the winner
    /// run a streak while the loser waits, then the loser takes over: both threads get about
    /// half the IDs, at about the rate of one (see `docs/benchmarks.md`).
    ///
    /// Why not load the state after the wait: a load fetches the line shared, the winner's
    /// next compare-exchange takes it back, and the loser's own then fails against a value
    /// that moved meanwhile — two trips of the line for nothing, and another wait. The
    /// compare-exchange from the old value fails too, but it takes the line for writing and
    /// returns the current value, so the next one, right after it ([`Generator::reserve_from`]:
    /// no wait in between), lands before the winner can take the line back. Measured on two
    /// threads sharing one generator (coarse clock, wide layout, interleaved with the previous
    /// way in three pairs of runs): 194–213 M/s against 181–184 M/s. A refusal (the step's or
    /// the fence's) from the old value is not returned: the state is loaded again and the step
    /// retried from it, since the step is not monotone in the state (see
    /// `tests/stale_retry.rs`: a batch from a state a borrow carried below the tick's start
    /// offset runs less far than from an older state in an earlier tick).
    #[cold]
    #[inline(never)]
    fn after_a_lost_round(&self, clock: &mut Now, precise: &mut bool) {
        sync::spin_for(sync::CONTENDED_WAIT);
        *clock = self.now_of(self.clock.now_ns());
        *precise = !self.clock.is_coarse();
    }

    /// The state as it is now, for a step whose refusal must not come from the state as it was
    /// before a wait.
    #[cold]
    #[inline(never)]
    fn reload(&self) -> u64 {
        // Ordering: Relaxed, as every access to the state.
        self.core.state.load(Ordering::Relaxed)
    }

    /// Moves the state from `cur` to `last`, or returns the value found instead.
    #[inline]
    #[cfg(not(monoflake_broken_cas))]
    fn commit(&self, cur: u64, last: u64) -> Result<(), u64> {
        // Ordering: Relaxed on success and failure; the value is all there is to agree on,
        // and the modification order of this one atomic decides it.
        self.core
            .state
            .compare_exchange_weak(cur, last, Ordering::Relaxed, Ordering::Relaxed)
            .map(drop)
    }

    /// A deliberately broken variant (a plain store instead of a compare-exchange), compiled
    /// only to check that the loom models catch it.
    #[cfg(monoflake_broken_cas)]
    fn commit(&self, _cur: u64, last: u64) -> Result<(), u64> {
        self.core.state.store(last, Ordering::Relaxed);
        Ok(())
    }

    /// The error for a step that did not issue (lead limit or end of the time field).
    #[cold]
    #[inline(never)]
    pub(super) fn refuse(&self, step: Step) -> Error {
        // A refusal at the lead limit issues nothing and is frequent under sustained demand
        // (one per paced slot): it does not ask the pid, only the fork count (a load). The
        // other refusals ask both. (A forked child's common case moves its copy of the state
        // before it finds the fork, so its step may well stop at the lead limit.)
        if self.core.fence.forked()
            || (!matches!(step, Step::Lead { .. }) && self.core.fence.another_process())
        {
            return Error::Forked { node: self.node };
        }
        match step {
            Step::Lead { wait_ns } => Error::WouldBlock {
                retry_after: Duration::from_nanos(wait_ns),
                blocked_on: BlockedOn::LeadLimit,
            },
            Step::Exhausted { for_good } => {
                if for_good && !self.core.fence.is_closed() {
                    // Pin the state at its largest value so every later call fails too,
                    // whatever a clock does afterwards.
                    let end = self.params.max_tick << self.params.sequence_bits
                        | crate::layout::mask(self.params.sequence_bits);
                    // Ordering: Relaxed; fetch_max only ever raises the state.
                    let before = self.core.state.fetch_max(end, Ordering::Relaxed);
                    Counters::add(&self.counters.skipped, end.saturating_sub(before));
                }
                self.exhausted()
            }
            Step::Issue { .. } => unreachable!("an issuing step is not a refusal"),
        }
    }

    /// Off the common path (a new tick, a borrow, a batch, or a refusal already seen): asks
    /// the process id too, then the fence.
    #[cold]
    #[inline(never)]
    pub(super) fn check_slow(&self, forked: bool, now: u64, last_tick: u64) -> Result<(), Error> {
        let forked = forked || self.core.fence.another_process();
        if forked || self.core.fence.refuses(now, last_tick) {
            return Err(self.fence_error(forked, now));
        }
        Ok(())
    }

    /// The error for a step that found the time field exhausted. A sealed generator's state
    /// is `u64::MAX`, which the step reads as exhausted: it says why its fence closed instead.
    pub(super) fn exhausted(&self) -> Error {
        if self.core.fence.is_closed() {
            return self.fence_error(false, 0);
        }
        Error::Exhausted {
            expired_at_ms: self.expires_at_ms,
        }
    }

    /// Why the fence refused: the fork, the lease deadline or the reservation (a
    /// `WouldBlock` when the clock passed a healthy store's reservation: the owner was asked
    /// to extend it).
    pub(super) fn fence_error(&self, forked: bool, now: u64) -> Error {
        if forked {
            return Error::Forked { node: self.node };
        }
        let deadline_passed = self.core.fence.late(now);
        match &self.refusal {
            Some(owner) => owner.refusal(self.node, deadline_passed),
            None => Error::LeaseLost {
                node: self.node,
                reason: "no lease".into(),
            },
        }
    }

    /// Issues one ID without waiting.
    ///
    /// # Errors
    ///
    /// * [`Error::WouldBlock`]: the sequence is full and borrowing another tick would exceed
    ///   `max_lead`; nothing was issued. `retry_after` says when the clock will have caught up.
    /// * [`Error::Exhausted`]: the layout's time field has run out.
    /// * [`Error::Forked`]: the process forked after the generator was built.
    /// * [`Error::LeaseLost`], [`Error::ReservationUnavailable`]: only for a leased generator
    ///   (see [`Leased`](crate::Leased)): its lease or its time reservation is gone.
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
        match self.reserve_common() {
            Ok(first) => Ok(self.out.id(first)),
            Err(miss) => self.try_next_id_beyond::<true>(miss),
        }
    }

    /// Reserves `n` consecutive IDs with one compare-exchange, without waiting. The IDs are
    /// strictly increasing and may run into later ticks (within `max_lead`). `n = 0` gives an
    /// empty run.
    ///
    /// # Errors
    ///
    /// As [`Generator::try_next_id`], and [`Error::BatchTooLarge`] (with the limit) for a batch
    /// larger than [`Generator::max_batch`]: one that can never fit within `max_lead`, refused
    /// at once rather than reported as [`Error::WouldBlock`].
    ///
    /// ```
    /// let generator = monoflake::Generator::new(monoflake::Layout::twitter(), 1)?;
    /// let ids: Vec<_> = generator.try_next_ids(64)?.collect();
    /// assert_eq!(ids.len(), 64);
    /// assert!(ids.windows(2).all(|w| w[0] < w[1]));
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn try_next_ids(&self, n: u64) -> Result<Ids, Error> {
        let answer = self.reserve_ids(n);
        if matches!(answer, Err(Error::WouldBlock { .. })) {
            self.returned_would_block();
        }
        answer
    }

    /// [`Generator::try_next_ids`] without counting a `WouldBlock` as returned: for the
    /// waiting call, which retries it.
    pub(super) fn reserve_ids(&self, n: u64) -> Result<Ids, Error> {
        if n == 0 {
            return Ok(Ids::empty(self.out));
        }
        let limit = self.max_batch();
        if n > limit {
            return Err(Error::BatchTooLarge {
                requested: n,
                limit,
            });
        }
        self.reserve(n)
            .map(|(first, last)| Ids::new(first, last, self.out))
    }
}

/// The scripted clock of `tests/stale_retry.rs`, for the unit tests below.
#[cfg(test)]
#[path = "../../tests/common/scripted.rs"]
mod scripted;

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    use std::time::Duration;

    use super::super::step::{Now, Step, next_state};
    use crate::{Error, Generator, Layout};

    use super::super::test_clock::NsClock;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// A real generator (builder, common case, general path, pinning) against a model
        /// that only ever takes the general step: the same IDs and the same refusals, call by
        /// call, for clocks that jump, stand still and go back, across layouts of small
        /// sequences, long ticks, far epochs, start offsets and floors.
        #[test]
        fn the_generator_issues_what_the_general_step_issues(
            sequence_bits in 1u32..=4,
            time_bits in 2u32..=41,
            tick_ms in proptest::sample::select(vec![1u64, 7, 1_000, 60_000]),
            epoch_ms in proptest::sample::select(vec![0u64, 1_288_834_974_657, 1_700_000_000_000]),
            offset_bits in 0u32..4,
            lead_ticks in 0u64..3,
            floor in proptest::option::of(0u64..64),
            start_ticks in 0u64..64,
            steps in proptest::collection::vec(
                (proptest::prop_oneof![
                    3 => 0i64..1,
                    3 => -3i64..3,
                    2 => -2_000_000i64..2_000_000,
                    1 => -1i64..=1,
                ], 0u32..3, 1usize..6),
                1..60,
            ),
        ) {
            let layout = Layout::builder()
                .time_bits(time_bits)
                .sequence_bits(sequence_bits)
                .node_field("n", 1)
                .tick_ms(tick_ms)
                .epoch_ms(epoch_ms)
                .build()
                .unwrap();
            let tick_ns = tick_ms * 1_000_000;
            let epoch_ns = epoch_ms * 1_000_000;
            let now = Arc::new(AtomicU64::new(epoch_ns + start_ticks * tick_ns));
            let mut builder = Generator::builder(layout.clone())
                .clock(NsClock(Arc::clone(&now)))
                .node(1)
                .max_lead(Duration::from_millis(lead_ticks * tick_ms))
                .start_offset_bits(offset_bits);
            if let Some(f) = floor {
                builder = builder.resume_after(f);
            }
            let g = builder.build().unwrap();
            let p = g.params;
            let mut model = g.core.state.load(Relaxed);
            for (delta, unit, calls) in steps {
                // A step in ns, in ticks, or to a tick's edge.
                let t = now.load(Relaxed);
                let next = match unit {
                    0 => t.saturating_add_signed(delta),
                    1 => t.saturating_add_signed(delta.signum() * tick_ns as i64 + delta % 3),
                    _ => {
                        let since = t.saturating_sub(epoch_ns);
                        epoch_ns + since / tick_ns * tick_ns + tick_ns - 1 + (delta % 3).unsigned_abs()
                    }
                };
                now.store(next.max(epoch_ns.saturating_sub(5)), Relaxed);
                for _ in 0..calls {
                    let ns = now.load(Relaxed);
                    let since = ns.saturating_sub(epoch_ns);
                    let reading = Now { tick: since / tick_ns, rem_ns: since % tick_ns };
                    let want = next_state(model, reading, 1, &p);
                    let got = g.try_next_id();
                    match (want, &got) {
                        (Step::Issue { first, last }, Ok(id)) => {
                            proptest::prop_assert_eq!(*id, g.out.id(first), "clock {}", ns);
                            model = last;
                        }
                        (Step::Lead { .. }, Err(Error::WouldBlock { .. })) => {}
                        (Step::Exhausted { for_good }, Err(Error::Exhausted { .. })) => {
                            if for_good {
                                model = model.max(p.max_tick << p.sequence_bits | p.sequence_mask);
                            }
                        }
                        _ => proptest::prop_assert!(
                            false,
                            "clock {}: the step says {:?}, the generator {:?}",
                            ns,
                            want,
                            got
                        ),
                    }
                    proptest::prop_assert_eq!(g.core.state.load(Relaxed), model);
                }
            }
        }
    }

    use super::scripted::{Hook, Scripted};

    /// A generator of 2^32 values a tick (so shifting its state the wrong way wraps to a small
    /// tick), no start offset, its clock in the middle of tick `tick`, 1 ms ticks from the
    /// epoch, and no lease: a refusing fence says `LeaseLost`.
    fn wide_sequence(tick: u64) -> Generator<NsClock> {
        let layout = Layout::builder()
            .time_bits(20)
            .sequence_bits(32)
            .node_field("n", 4)
            .epoch_ms(EPOCH_MS)
            .build()
            .unwrap();
        Generator::builder(layout)
            .clock(NsClock(Arc::new(AtomicU64::new(at(tick, 500_000)))))
            .start_offset_bits(0)
            .build()
            .unwrap()
    }

    /// The common case asks the fence about the state's tick: after the first ID of tick `T`
    /// (its state `(T, 0)`), a limit of `T - 1` refuses the second, and nothing is issued.
    /// Asked about another number (the state shifted the wrong way is `0` here), the fence
    /// would let the common case issue past the limit.
    #[test]
    fn the_common_case_asks_the_fence_about_the_states_tick() {
        let g = wide_sequence(T);
        let first = g.try_next_id().unwrap();
        let parts = first.parts(g.layout()).unwrap();
        assert_eq!((parts.tick(), parts.sequence()), (T, 0));
        assert_eq!(g.core.state.load(Relaxed), T << 32);
        g.core.fence.set(T - 1, u64::MAX);
        let got = g.try_next_id();
        assert!(matches!(got, Err(Error::LeaseLost { .. })), "{got:?}");
        assert_eq!(g.core.state.load(Relaxed), T << 32);
        assert_eq!(g.stats().issued, 1);
    }

    /// The general path asks the fence about every ID it issues: a jump to a tick past the
    /// limit is refused, and so is an ID in the state's own tick once the deadline has come,
    /// a single one or a batch; nothing is issued, and the error says why (`LeaseLost`: no
    /// lease).
    #[test]
    fn the_general_path_refuses_past_the_limit_and_the_deadline() {
        let g = wide_sequence(T);
        g.try_next_id().unwrap();
        g.core.fence.set(T, u64::MAX);
        g.clock.0.store(at(T + 1, 500_000), Relaxed);
        let got = g.try_next_id();
        assert!(matches!(got, Err(Error::LeaseLost { .. })), "{got:?}");
        assert_eq!(g.core.state.load(Relaxed), T << 32);
        g.core.fence.set(u64::MAX, u64::MAX);
        g.try_next_id().unwrap();
        assert_eq!(g.core.state.load(Relaxed), (T + 1) << 32);
        g.core.fence.set(u64::MAX, T + 1);
        let one = g.try_next_id();
        assert!(matches!(one, Err(Error::LeaseLost { .. })), "{one:?}");
        let batch = g.try_next_ids(2);
        assert!(matches!(batch, Err(Error::LeaseLost { .. })), "{batch:?}");
        assert_eq!(g.core.state.load(Relaxed), (T + 1) << 32);
        assert_eq!(g.stats().issued, 2);
    }

    /// `check` asks the fence about the tick the next ID would take: a fresh generator at
    /// tick `T` would issue `(T, 0)`, which a limit of `T - 1` refuses; a limit of `T` lets it.
    #[test]
    fn check_asks_the_fence_about_the_next_ids_tick() {
        let g = wide_sequence(T);
        g.core.fence.set(T - 1, u64::MAX);
        let got = g.check();
        assert!(matches!(got, Err(Error::LeaseLost { .. })), "{got:?}");
        g.core.fence.set(T, u64::MAX);
        let got = g.check();
        assert!(got.is_ok(), "{got:?}");
        assert_eq!(g.stats().issued, 0);
    }

    const EPOCH_MS: u64 = 1_700_000_000_000;
    /// A tick whose start offset (three offset bits) is 7.
    const T: u64 = 510;

    /// Unix ns at `ticks` 1 ms ticks after the epoch and `frac_ns` into the tick.
    fn at(ticks: u64, frac_ns: u64) -> u64 {
        (EPOCH_MS + ticks) * 1_000_000 + frac_ns
    }

    /// A generator of 16 values per tick, three offset bits and a lead of `lead_ms`, its state
    /// at `(T - 1, 0)` (carried there by a borrow, below the tick's start offset), its clock
    /// at `T - 1` and a half; and the script of one `try_next_ids(27)` from there: another
    /// caller takes 17 values (to `(T, 1)`) at the precise reading its borrow asks for, so its
    /// compare-exchange fails; the clock moves to the start of `T` at the reading after its
    /// wait. From the stale `(T - 1, 0)` the step then runs 27 from `(T, 7)` to `(T + 2, 1)`;
    /// from the current `(T, 1)`, to `(T + 1, 12)`.
    fn racing_a_batch(lead_ms: u64) -> (Arc<Generator<Scripted>>, Scripted) {
        let layout = Layout::builder()
            .sequence_bits(4)
            .node_field("n", 4)
            .epoch_ms(EPOCH_MS)
            .build()
            .unwrap();
        let clock = Scripted::new(at(T - 2, 900_000));
        let g = Arc::new(
            Generator::builder(layout)
                .clock(clock.clone())
                .start_offset_bits(3)
                .max_lead(Duration::from_millis(lead_ms))
                .build()
                .unwrap(),
        );
        assert_eq!(super::super::step::start_offset(T, 7), 7);
        while g.core.state.load(Relaxed) >> 4 < T - 1 {
            g.try_next_id().unwrap();
        }
        assert_eq!(g.core.state.load(Relaxed), (T - 1) << 4);
        clock.set_ns(at(T - 1, 500_000));
        let other = Arc::clone(&g);
        let c = clock.clone();
        let hooks: Vec<Hook> = vec![
            Box::new(|| {}),
            Box::new(move || {
                other.try_next_ids(17).unwrap();
                assert_eq!(other.core.state.load(Relaxed), T << 4 | 1);
            }),
            Box::new(move || c.set_ns(at(T, 0))),
        ];
        clock.script(hooks);
        (g, clock)
    }

    /// The fence's limit at `T + 1` refuses the tick the stale step runs to (`T + 2`), not
    /// the one the current state runs to: the batch is issued, from `(T, 2)`.
    #[test]
    fn a_fence_refusing_only_the_stale_step_does_not_refuse_the_batch() {
        let (g, clock) = racing_a_batch(3);
        g.core.fence.set(T + 1, u64::MAX);
        let ids = g.try_next_ids(27).unwrap();
        assert_eq!(clock.hooks_left(), 0, "the script ran");
        assert_eq!(ids.len(), 27);
        assert_eq!(g.core.state.load(Relaxed), (T + 1) << 4 | 12);
    }

    /// Sealed while the batch waits: the call says why the fence closed (`LeaseLost`), not
    /// `WouldBlock` from the stale step's pacing (it would then be retried for nothing).
    #[test]
    fn sealed_while_a_batch_waits_the_batch_reports_the_closed_fence() {
        let (g, clock) = racing_a_batch(2);
        let sealer = Arc::clone(&g);
        clock.script(vec![Box::new(move || {
            sealer.seal();
        })]);
        // The reading after the wait moves the clock; the next one (the stale step's precise
        // reading) seals the generator.
        let got = g.try_next_ids(27);
        assert_eq!(clock.hooks_left(), 0, "the script ran");
        assert!(matches!(got, Err(Error::LeaseLost { .. })), "{got:?}");
        assert_eq!(g.core.state.load(Relaxed), u64::MAX);
    }
}
