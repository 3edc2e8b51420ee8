//! Building a leased generator (one state, or per thread): claim a node, write the first
//! reservation, learn the claim's validity, start the keeper.

use std::sync::Arc;
use std::time::Duration;

use super::choose::{Limits, choose};
use super::handover::{self, Step};
use super::holding::Holding;
use super::keeper::{Held, Keeper};
use super::status::{LeaseStatus, deadline_tick, duration_ms, first_tick_from, last_tick_before};
use super::store::{NodeRequest, NodeStore};
use super::{DEFAULT_RESERVATION_WINDOW, Leased};

/// The shortest reservation window: the keeper extends at half a window, so shorter ones
/// would have it write to the store without pause.
pub const MIN_RESERVATION_WINDOW: Duration = Duration::from_millis(10);
/// The longest reservation window: a day. A crashed holder's node is ahead of the clock by
/// up to one window, so longer ones only push restarts further into the future.
pub const MAX_RESERVATION_WINDOW: Duration = Duration::from_secs(86_400);
use crate::clock::TimeSource;
use crate::generator::Refusal;
use crate::sync::Ordering;
use crate::{Error, GeneratorBuilder, PerCore, PerThread};

impl<C: TimeSource + 'static> GeneratorBuilder<C> {
    /// How far ahead of need the reservation is extended (default
    /// [`DEFAULT_RESERVATION_WINDOW`]; at least two lease validity periods for stores whose
    /// claims expire). Only used by [`GeneratorBuilder::build_leased`], which refuses a window
    /// outside [`MIN_RESERVATION_WINDOW`]`..=`[`MAX_RESERVATION_WINDOW`] with
    /// [`Error::InvalidConfig`] before it writes anything.
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("monoflake-doc-window-{}", std::process::id()));
    /// let store = std::sync::Arc::new(monoflake::FileStore::open(&dir)?);
    /// let leased = monoflake::Generator::builder(monoflake::Layout::twitter())
    ///     .reservation_window(std::time::Duration::from_secs(2))
    ///     .build_leased(store, monoflake::NodeRequest::Any)?;
    /// assert!(leased.next_id().is_ok());
    /// # drop(leased); std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn reservation_window(mut self, window: Duration) -> Self {
        self.lease_settings().window = Some(window);
        self
    }

    /// How far ahead of the clock a node's stored reservation may be before
    /// [`GeneratorBuilder::build_leased`] refuses the node (default: the reservation window
    /// plus `max_lead`, what a holder that crashed moments ago leaves behind).
    ///
    /// * Within it, the build waits until a reservation more than `max_lead` ahead is at most
    ///   `max_lead` ahead, so the first IDs carry honest time
    ///   ([`Stats::claim_wait_ms`](crate::Stats::claim_wait_ms)); [`NodeRequest::Any`] takes
    ///   such a node only when no free node costs a shorter wait (see "What a build waits
    ///   for" under [`GeneratorBuilder::build_leased`]).
    /// * Beyond it: [`Error::ReservationAhead`] for [`NodeRequest::Exact`]; skipped by
    ///   [`NodeRequest::Any`] (counted in [`Stats::nodes_skipped_ahead`](crate::Stats::nodes_skipped_ahead)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use monoflake::{Error, FileStore, Generator, Layout, NodeRequest, NodeStore};
    /// let dir = std::env::temp_dir().join(format!("monoflake-doc-tolerance-{}", std::process::id()));
    /// let store = std::sync::Arc::new(FileStore::open(&dir)?);
    /// // Node 3 was last used by a host whose clock was a day ahead.
    /// let claim = store.claim(&Layout::twitter(), NodeRequest::Exact(3))?;
    /// let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    /// store.release(claim, now.as_millis() as u64 + 86_400_000)?;
    /// let refused = Generator::builder(Layout::twitter())
    ///     .future_reservation_tolerance(Duration::from_secs(60))
    ///     .build_leased(store.clone(), NodeRequest::Exact(3));
    /// assert!(matches!(refused, Err(Error::ReservationAhead { node: 3, .. })));
    /// // Any node skips it.
    /// let any = Generator::builder(Layout::twitter()).build_leased(store, NodeRequest::Any)?;
    /// assert_eq!(any.node(), 0);
    /// # drop(any); std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), Error>(())
    /// ```
    pub fn future_reservation_tolerance(mut self, tolerance: Duration) -> Self {
        self.lease_settings().future_tolerance = Some(tolerance);
        self
    }

    /// Trusts a node's reservation however far ahead of the clock it is (default `false`):
    /// the clock is moved forward to the reservation at once and then slews back towards the
    /// wall clock at [`SLEW_PPM`](crate::SLEW_PPM) instead of the node being refused. For
    /// operators who know this clock is wrong now and was right when the reservation was
    /// written. The IDs stay above everything the node issued before.
    ///
    /// ```
    /// use monoflake::{FileStore, Generator, Layout, NodeRequest, NodeStore};
    /// let dir = std::env::temp_dir().join(format!("monoflake-doc-trust-{}", std::process::id()));
    /// let store = std::sync::Arc::new(FileStore::open(&dir)?);
    /// let claim = store.claim(&Layout::twitter(), NodeRequest::Exact(3))?;
    /// let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    /// let ahead = now.as_millis() as u64 + 3_600_000;
    /// store.release(claim, ahead)?;
    /// let leased = Generator::builder(Layout::twitter())
    ///     .trust_future_reservation(true)
    ///     .build_leased(store, NodeRequest::Exact(3))?;
    /// assert!(leased.next_id()?.parts(leased.layout())?.unix_ms() >= ahead);
    /// # drop(leased); std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn trust_future_reservation(mut self, trust: bool) -> Self {
        self.lease_settings().trust_future = trust;
        self
    }

    /// Claims a node ID from `store` and builds a generator that holds it (see [`Leased`]).
    /// The builder's node is replaced by the claimed one.
    ///
    /// # What a build waits for
    ///
    /// A build claims a node, writes its first reservation (on the file store, a file written
    /// and fsynced: about a millisecond) and renews the claim once. Before it returns it may
    /// also wait, at most once, for one of two reasons, so that the first IDs are both above
    /// everything the node issued before and honest (at most `max_lead` ahead of the clock):
    ///
    /// * **The node's reservation is more than `max_lead` ahead of the clock**: its last
    ///   holder borrowed further ahead than this generator's lead, or stopped without a clean
    ///   release moments ago (it had reserved up to a window ahead), or a clock was set back.
    ///   The build waits until the reservation is `max_lead` ahead: at most the
    ///   [tolerance](GeneratorBuilder::future_reservation_tolerance) less `max_lead` (by
    ///   default the reservation window, 5 s). Further ahead than the tolerance, the node is
    ///   refused or skipped, unless [trusted](GeneratorBuilder::trust_future_reservation).
    /// * **The node has no record** (never used, or its record was deleted): two and a half
    ///   check intervals ([`NodeStore::check_interval`]; 250 ms on the file store, 1.25 s on
    ///   etcd by default), because a holder whose record was deleted under it may go on
    ///   issuing for up to two.
    ///
    /// For [`NodeRequest::Any`] the build takes the free node that costs the least wait: one
    /// whose record is at most `max_lead` ahead costs none and is taken as soon as the search
    /// meets it (a generator dropped or released moments ago gets its node back at once), then
    /// the shortest wait of the nodes met, the lower node on a tie. A search that finds every
    /// node held searches again, up to eight times, after randomized waits of up to 250 ms
    /// each: another claimant may hold free nodes for the length of its own search.
    /// [`NodeRequest::Exact`] waits what its node costs. Every one of these waits is counted
    /// in [`Stats::claim_wait_ms`](crate::Stats::claim_wait_ms).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use monoflake::{FileStore, Generator, Layout, NodeRequest};
    ///
    /// let dir = std::env::temp_dir().join(format!("monoflake-doc-comes-back-{}", std::process::id()));
    /// let store = Arc::new(FileStore::open(&dir)?);
    /// // A node with no record yet: the build waits 250 ms (the file store's check interval
    /// // is 100 ms).
    /// let first = Generator::builder(Layout::twitter()).build_leased(store.clone(), NodeRequest::Any)?;
    /// assert_eq!((first.node(), first.stats().claim_wait_ms), (0, 250));
    /// let last = first.next_id()?;
    /// drop(first); // released: its reservation ends with the last tick it issued
    ///
    /// // Built again: the same node, not a never-used one, and above everything it issued.
    /// let again = Generator::builder(Layout::twitter()).build_leased(store, NodeRequest::Any)?;
    /// assert_eq!(again.node(), 0);
    /// assert!(again.next_id()? > last);
    /// # drop(again); std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// The store's errors from [`NodeStore::claim`] (e.g. [`Error::AllNodesHeld`],
    /// [`Error::NodeHeld`]) and from writing the first reservation.
    ///
    /// ```
    /// use monoflake::{Error, FileStore, Generator, Layout, NodeRequest};
    /// let dir = std::env::temp_dir().join(format!("monoflake-doc-build-leased-{}", std::process::id()));
    /// let store = std::sync::Arc::new(FileStore::open(&dir)?);
    /// let leased = Generator::builder(Layout::twitter()).build_leased(store.clone(), NodeRequest::Exact(5))?;
    /// assert_eq!(leased.node(), 5);
    /// let again = Generator::builder(Layout::twitter()).build_leased(store, NodeRequest::Exact(5));
    /// assert!(matches!(again, Err(Error::NodeHeld { node: 5, .. })));
    /// # drop(leased); std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), Error>(())
    /// ```
    pub fn build_leased(
        self,
        store: Arc<dyn NodeStore>,
        request: NodeRequest,
    ) -> Result<Leased<C>, Error> {
        let (generator, holding) = self.lease_with(store, request, |builder, refusal, until| {
            let generator = Arc::new(builder.build_with(Some(refusal), until.0, until.1)?);
            Ok((Arc::clone(&generator), generator))
        })?;
        Ok(Leased { generator, holding })
    }

    /// Claims a node ID from `store` and builds a per-thread generator that holds it (see
    /// [`PerThread`]), with `slots` slots (rounded up to a power of two). The node is held as
    /// by [`GeneratorBuilder::build_leased`]: the keeper extends the reservation ahead of the
    /// highest tick any slot has moved into, the fence stops every slot, and dropping (or
    /// [`PerThread::release`]) seals every slot — a thread moving into a later tick after
    /// that issues nothing there — and writes the end of the highest tick any slot moved
    /// into as the final reservation.
    ///
    /// # Errors
    ///
    /// As [`GeneratorBuilder::build_leased`]; [`Error::OutOfRange`] (field `"slots"`),
    /// before anything is claimed, when the slots would take every sequence bit.
    ///
    /// ```
    /// use monoflake::{FileStore, Generator, Layout, NodeRequest};
    /// # let dir = std::env::temp_dir().join(format!("monoflake-doc-leased-per-thread-{}", std::process::id()));
    /// let store = std::sync::Arc::new(FileStore::open(&dir)?);
    /// let ids = Generator::builder(Layout::twitter())
    ///     .build_leased_per_thread(store.clone(), NodeRequest::Exact(4), 8)?;
    /// let a = ids.next_id()?;
    /// ids.release()?;
    /// // The node's next holder starts after everything any thread issued.
    /// let next = Generator::builder(Layout::twitter()).build_leased(store, NodeRequest::Exact(4))?;
    /// assert!(next.next_id()? > a);
    /// # drop(next); std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn build_leased_per_thread(
        self,
        store: Arc<dyn NodeStore>,
        request: NodeRequest,
        slots: usize,
    ) -> Result<PerThread<C>, Error> {
        self.slot_bits(slots)?;
        let (per_thread, holding) =
            self.lease_with(store, request, |builder, refusal, until| {
                let per_thread =
                    builder.build_per_thread_with(slots, Some(refusal), until.0, until.1)?;
                let shared = Arc::clone(per_thread.shared());
                Ok((per_thread, shared))
            })?;
        Ok(per_thread.owned_by(Box::new(holding)))
    }

    /// Claims a node ID from `store` and builds a per-core generator that holds it (see
    /// [`PerCore`]), with `slots` slots (rounded up to a power of two). The node is held as by
    /// [`GeneratorBuilder::build_leased`]: one keeper extends the reservation ahead of the
    /// highest tick any slot issued in and writes every slot's fence, and dropping (or
    /// [`PerCore::release`]) seals every slot and writes the end of the highest tick any slot
    /// issued in as the final reservation.
    ///
    /// # Errors
    ///
    /// As [`GeneratorBuilder::build_leased`]; [`Error::OutOfRange`] (field `"slots"`),
    /// before anything is claimed, when the slots would take every sequence bit.
    ///
    /// ```
    /// use monoflake::{FileStore, Generator, Layout, NodeRequest};
    /// # let dir = std::env::temp_dir().join(format!("monoflake-doc-leased-per-core-{}", std::process::id()));
    /// let store = std::sync::Arc::new(FileStore::open(&dir)?);
    /// let ids = Generator::builder(Layout::twitter())
    ///     .build_leased_per_core(store.clone(), NodeRequest::Exact(6), 4)?;
    /// assert_eq!((ids.node(), ids.slots()), (6, 4));
    /// let a = ids.next_id()?;
    /// ids.release()?;
    /// // The node's next holder starts after everything any slot issued.
    /// let next = Generator::builder(Layout::twitter()).build_leased(store, NodeRequest::Exact(6))?;
    /// assert!(next.next_id()? > a);
    /// # drop(next); std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn build_leased_per_core(
        self,
        store: Arc<dyn NodeStore>,
        request: NodeRequest,
        slots: usize,
    ) -> Result<PerCore<C>, Error>
    where
        C: Clone,
    {
        self.slot_bits(slots)?;
        let (per_core, holding) = self.lease_with(store, request, |builder, refusal, until| {
            let per_core = builder.build_per_core_with(slots, Some(refusal), until.0, until.1)?;
            let shared = Arc::clone(per_core.shared());
            Ok((per_core, shared))
        })?;
        Ok(per_core.owned_by(Box::new(holding)))
    }

    /// Claims a node, writes its first reservation, confirms the claim, builds the generator
    /// with `build` (given the builder for the node, who explains the fence's refusals, and
    /// the first fence words: limit and deadline) and starts the keeper over what `build`
    /// returns for it.
    pub(super) fn lease_with<G: Held<Clock = C>, T>(
        mut self,
        store: Arc<dyn NodeStore>,
        request: NodeRequest,
        build: impl FnOnce(
            GeneratorBuilder<C>,
            Arc<dyn Refusal>,
            (u64, u64),
        ) -> Result<(T, Arc<G>), Error>,
    ) -> Result<(T, Holding), Error> {
        let layout = self.layout_ref().clone();
        let settings = *self.lease_settings();
        let window = settings.window.unwrap_or(DEFAULT_RESERVATION_WINDOW);
        // Checked before anything is written: a window too long would push the reservation
        // past the layout's end (a bricked node); one too short would have the keeper write
        // without pause.
        if !(MIN_RESERVATION_WINDOW..=MAX_RESERVATION_WINDOW).contains(&window) {
            return Err(Error::InvalidConfig {
                setting: "reservation_window",
                value: format!("{window:?}"),
                allowed: format!(
                    "from {} ms to {} s",
                    MIN_RESERVATION_WINDOW.as_millis(),
                    MAX_RESERVATION_WINDOW.as_secs()
                ),
            });
        }
        self.check()?;
        let max_lead_ms = duration_ms(self.max_lead_ref());
        let window_ms = duration_ms(window);
        let tolerance_ms = settings
            .future_tolerance
            .map_or(window_ms.saturating_add(max_lead_ms), duration_ms);
        let check = store.check_interval();
        let status = Arc::new(LeaseStatus::new(store.describe(), check));
        let limits = Limits {
            max_lead_ms,
            tolerance_ms,
            unrecorded_wait_ms: handover::unrecorded_wait_ms(duration_ms(check)),
            trust: settings.trust_future,
        };
        let chosen = choose(
            &*store,
            &layout,
            request,
            &|| self.clock_ref().precise_now_ms(),
            &limits,
        )?;
        let mut claim = chosen.claim;
        let node = claim.node();
        status
            .skipped_ahead
            .store(chosen.skipped_ahead, Ordering::Relaxed);
        status
            .sorts_below_ms
            .store(chosen.sorts_below_ms, Ordering::Relaxed);
        #[cfg(feature = "tracing")]
        if chosen.sorts_below_ms > 0 {
            tracing::warn!(
                node,
                sorts_below_ms = chosen.sorts_below_ms,
                "monoflake: this clock is behind what the store saw before; the IDs of this \
                 generator sort below IDs issued up to that long ago"
            );
        }
        status
            .skipped_unusable
            .store(chosen.skipped_unusable, Ordering::Relaxed);
        status
            .claim_wait_ms
            .fetch_add(chosen.waited_ms, Ordering::Relaxed);
        // The protocol's decision (`handover.rs`; docs/design.md, "The hand-over"): start,
        // wait for a reservation ahead of the clock, jump the clock to a trusted one, or —
        // for a node with no record — wait and read the record again.
        //
        // A node with no record at all may have had one that was deleted under a live holder
        // (the state directory removed, the store's keys cleared). That holder stops issuing
        // within `confirm_bound` of its last successful check, which came before the deletion,
        // and never issued a time beyond its clock plus its lead: the wait covers that, with a
        // margin for the two clocks to disagree. Meanwhile that holder, finding its records
        // gone, writes back the time it used (`NodeStore::restore`): the re-read after the
        // wait finds it, so a holder whose clock ran ahead of this one (a wall clock stepped
        // back under it) is not overlapped either.
        let claimed_ms = self.clock_ref().precise_now_ms();
        let mut step = handover::after_claim(
            claim.reserved_until_ms(),
            claim.recorded(),
            claimed_ms,
            &limits,
        );
        let floor_ms = loop {
            match step {
                Step::Start { floor_ms } => break floor_ms,
                Step::Jump { to_ms } => {
                    if !self.clock_ref().advance_to_ms(to_ms) {
                        let _ = store.abandon(claim);
                        return Err(Error::InvalidConfig {
                            setting: "trust_future_reservation",
                            value: "true".into(),
                            allowed: "only with a clock that can be moved forward (LockedClock, \
                                      CoarseClock, ManualClock)"
                                .into(),
                        });
                    }
                    break to_ms;
                }
                Step::Refuse { ahead_ms } => {
                    let reserved_until_ms =
                        self.clock_ref().precise_now_ms().saturating_add(ahead_ms);
                    let _ = store.abandon(claim);
                    return Err(Error::ReservationAhead {
                        node,
                        reserved_until_ms,
                        ahead: Duration::from_millis(ahead_ms),
                        tolerance: Duration::from_millis(tolerance_ms),
                    });
                }
                Step::WaitThenStart { ms, floor_ms } => {
                    #[cfg(feature = "tracing")]
                    tracing::info!(
                        node,
                        wait_ms = ms,
                        "monoflake: waiting for the node's reservation, ahead of the clock"
                    );
                    // In steps of the store's check interval, renewing the claim at each, so a
                    // claim that expires (an etcd lease) outlives the wait.
                    let nap_ms = duration_ms(store.check_interval()).max(1);
                    let mut left = ms;
                    while left > 0 {
                        let nap = left.min(nap_ms);
                        std::thread::sleep(Duration::from_millis(nap));
                        left -= nap;
                        if let Err(e) = store.renew(&claim) {
                            let _ = store.abandon(claim);
                            return Err(e);
                        }
                    }
                    status.claim_wait_ms.fetch_add(ms, Ordering::Relaxed);
                    step = Step::Start { floor_ms };
                }
                Step::WaitThenReread { ms } => {
                    std::thread::sleep(Duration::from_millis(ms));
                    status.claim_wait_ms.fetch_add(ms, Ordering::Relaxed);
                    match store.reservation(&claim) {
                        Ok(again) => {
                            // A store with a clock of its own: above what any holder it
                            // confirmed can have issued before the claim, whatever that
                            // holder's clock did (docs/design.md, "one inequality").
                            let by_store = claim.store_clock().and_then(|(store_ms, lead)| {
                                handover::store_floor_ms(
                                    store_ms,
                                    duration_ms(check),
                                    lead,
                                    max_lead_ms,
                                )
                            });
                            // That floor lies ahead of the store's clock by its own margin
                            // (the check bound, the lead, `max_lead`): judged against the
                            // tolerance as a record is, it is this claimant's clock behind the
                            // store's that must stay within it, not the margin too.
                            let margin_ms = claim
                                .store_clock()
                                .zip(by_store)
                                .map_or(0, |((store_ms, _), floor)| floor.saturating_sub(store_ms));
                            let judged = Limits {
                                tolerance_ms: limits.tolerance_ms.saturating_add(margin_ms),
                                ..limits
                            };
                            let again = handover::reservation_of([again, by_store]);
                            let now_ms = self.clock_ref().precise_now_ms();
                            step = handover::after_wait(again, claimed_ms, now_ms, &judged);
                        }
                        Err(e) => {
                            let _ = store.abandon(claim);
                            return Err(e);
                        }
                    }
                }
            }
        };
        let now_ms = self.clock_ref().precise_now_ms();
        let floor_tick = first_tick_from(&layout, floor_ms);
        let start_ms = now_ms.max(layout.unix_ms_of_tick(floor_tick));
        // A clock past the layout's end (or a trusted reservation there): nothing can be
        // issued, so nothing is written; the node's record stays as it was.
        if start_ms >= layout.expires_at_ms() {
            let _ = store.abandon(claim);
            return Err(Error::Exhausted {
                expired_at_ms: layout.expires_at_ms(),
            });
        }
        // The first renewal tells how long the claim lasts, before anything is issued, and
        // confirms it: issuing may go on until `confirm_bound` after this check began. It
        // comes before the first reservation is written: a claimant the check refuses (a
        // store with a clock, ours too far ahead of it) has issued nothing and gives the node
        // back as it found it. (Written first, that reservation — on a node with no record,
        // the store's floor plus a window — stayed, and refused the next honest claimant; and
        // a claimant that jumped to a trusted reservation wrote it a window further ahead at
        // every refused attempt.)
        let mut interval = (window / 4).min(check);
        let renew_mono = status.mono_us();
        let renew_ms = self.clock_ref().precise_now_ms();
        // A store with a clock compares ours, as read at the start of the check, with its own.
        claim.read_holder_clock(Arc::new(move || renew_ms));
        match store.renew(&claim) {
            Ok(valid) => {
                LeaseStatus::count(&status.renewals);
                status.renewed(renew_mono, valid);
                status.confirmed(renew_mono, renew_ms);
                if let Some(valid) = valid {
                    interval = interval.min(valid / 3);
                }
            }
            Err(e) => {
                let _ = store.abandon(claim);
                return Err(e);
            }
        }
        let until = start_ms.saturating_add(window_ms);
        let first_round = std::time::Instant::now();
        if let Err(e) = store.extend(&claim, until) {
            let _ = store.abandon(claim);
            return Err(e);
        }
        let write_us = first_round.elapsed().as_micros();
        LeaseStatus::count(&status.reservation_writes); // the first reservation, just written
        let round_us = u64::try_from(write_us).unwrap_or(u64::MAX);
        status.round_us.store(round_us, Ordering::Relaxed);
        let deadline = deadline_tick(&layout, status.fence_deadline_ms(renew_ms, renew_mono));
        let mut builder = self.node(node);
        if let Some(after) = floor_tick.checked_sub(1) {
            builder = builder.resume_after(after);
        }
        builder.raise_max_wait(window + layout.tick());
        let refusal: Arc<dyn Refusal> = status.clone();
        let (built, generator) = build(
            builder,
            refusal,
            (last_tick_before(&layout, until), deadline),
        )?;
        // From now on the holder's clock is the generator's, read at each check.
        let held = Arc::clone(&generator);
        claim.read_holder_clock(Arc::new(move || held.clock().precise_now_ms()));
        let keeper = Keeper {
            sealed: None,
            restore_pending: None,
            generator,
            store,
            status: Arc::clone(&status),
            window_ms,
            interval,
            reserved_until_ms: until,
        };
        let thread = std::thread::Builder::new()
            .name(format!("monoflake-lease-{node}"))
            .spawn(move || keeper.run(claim))
            .map_err(|e| Error::LeaseLost {
                node,
                reason: format!("cannot start the keeper: {e}"),
            })?;
        Ok((built, Holding::new(status, node, thread)))
    }
}
