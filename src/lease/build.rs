//! Building a leased generator (one state, or per thread): claim a node, write the first
//! reservation, learn the claim's validity, start the keeper.

use std::sync::Arc;
use std::time::Duration;

use super::choose::{Limits, choose};
use super::handover::{self, Action, ClaimRead, Event, Holder, LetGo, Now, Outcome};
use super::holding::Holding;
use super::keeper::{Held, Keeper, KeeperTerms, ceiling_now, failure, store_reading};
use super::status::{LeaseStatus, duration_ms};
use super::store::{Claim, NodeRequest, NodeStore};
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
use crate::{Caveat, Error, GeneratorBuilder, PerCore, PerThread};

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
        let check = store.check_interval();
        let tolerance_ms = settings.future_tolerance.map_or(
            handover::default_tolerance_ms(window_ms, max_lead_ms, duration_ms(check)),
            duration_ms,
        );
        let status = Arc::new(LeaseStatus::new(store.describe(), check));
        let limits = Limits {
            max_lead_ms,
            tolerance_ms,
            unrecorded_wait_ms: handover::unrecorded_wait_ms(duration_ms(check)),
            trust: settings.trust_future,
        };
        for caveat in store.caveats() {
            #[cfg(feature = "tracing")]
            tracing::warn!("monoflake: {caveat}");
            let flag = match caveat {
                Caveat::AnchorsUnused { .. } => &status.anchors_unused,
                Caveat::OtherNetworkNamespace { .. } => &status.other_network_namespace,
            };
            flag.store(true, Ordering::Relaxed);
        }
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
        // The protocol (`handover::Holder`; docs/design.md, "The hand-over") decides: start,
        // wait for a reservation ahead of the clock, jump the clock to a trusted one, or — for
        // a node with no record — wait and read the record again; then the first renewal and
        // the first reservation. This loop only carries out what it says.
        let keeper_terms = KeeperTerms {
            limits,
            window_ms,
            check_us: u64::try_from(check.as_micros()).unwrap_or(u64::MAX),
        };
        let terms = keeper_terms.with(&layout);
        let read = ClaimRead {
            reserved_ms: claim.reserved_until_ms(),
            recorded: claim.recorded(),
            store_clock: claim.store_clock(),
        };
        let (mut holder, mut action) =
            Holder::claim(&terms, read, self.clock_ref().precise_now_ms());
        // The error of the last store call that failed, for an `Outcome::Failed`.
        let mut failed: Option<Error> = None;
        let (resume_after, limit, deadline) = loop {
            let event = match action {
                Action::Sleep { ms, renew_every_ms } => {
                    let result = nap(&*store, &claim, ms, renew_every_ms);
                    status.claim_wait_ms.fetch_add(ms, Ordering::Relaxed);
                    Event::Waited(result.map_err(|e| {
                        let f = failure(&e);
                        failed = Some(e);
                        f
                    }))
                }
                Action::AdvanceClock { to_ms } => {
                    Event::ClockMoved(self.clock_ref().advance_to_ms(to_ms))
                }
                Action::Reread => {
                    let result = store.reservation(&claim).map_err(|e| {
                        let f = failure(&e);
                        failed = Some(e);
                        f
                    });
                    Event::Reread {
                        result,
                        now_ms: self.clock_ref().precise_now_ms(),
                    }
                }
                Action::Renew => {
                    let at = Now {
                        ms: self.clock_ref().precise_now_ms(),
                        mono_us: status.mono_us(),
                    };
                    // A store with a clock compares ours, as read at the start of the check,
                    // with its own.
                    claim.read_holder_clock(Arc::new(move || at.ms));
                    let renewed = store.renew(&claim);
                    let reading = store_reading(&claim, &renewed, &status);
                    let result = match renewed {
                        Ok(valid) => {
                            LeaseStatus::count(&status.renewals);
                            Ok(valid.map(|v| u64::try_from(v.as_micros()).unwrap_or(u64::MAX)))
                        }
                        Err(e) => {
                            let f = failure(&e);
                            failed = Some(e);
                            Err(f)
                        }
                    };
                    Event::Renewed {
                        at,
                        result,
                        last_tick: 0,
                        store: reading,
                    }
                }
                Action::Ceiling {
                    ms,
                    at_mono_us,
                    slack_ms,
                } => {
                    let ceiling = ceiling_now(ms, at_mono_us, slack_ms, &status);
                    self.clock_ref().set_ceiling(Some(ceiling));
                    Event::Done
                }
                Action::Extend { until_ms } => {
                    let started = std::time::Instant::now();
                    let result = store.extend(&claim, until_ms);
                    let took = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                    status.round_us.store(took, Ordering::Relaxed);
                    Event::Extended(match result {
                        Ok(()) => {
                            LeaseStatus::count(&status.reservation_writes);
                            Ok(())
                        }
                        Err(e) => {
                            let f = failure(&e);
                            failed = Some(e);
                            Err(f)
                        }
                    })
                }
                Action::Build {
                    resume_after,
                    limit,
                    deadline,
                } => break (resume_after, limit, deadline),
                Action::End { let_go, outcome } => {
                    self.clock_ref().set_ceiling(None);
                    if let LetGo::Release { until_ms } = let_go {
                        let _ = store.release(claim, until_ms);
                    } else {
                        let _ = store.abandon(claim);
                    }
                    return Err(self.build_error(node, outcome, failed, tolerance_ms));
                }
                other => unreachable!("a keeper's action before the keeper: {other:?}"),
            };
            action = holder.step(&terms, event);
        };
        status.set_deadline_us(holder.lease_deadline_us());
        let mut builder = self.node(node);
        if let Some(after) = resume_after {
            builder = builder.resume_after(after);
        }
        builder.raise_max_wait(window + layout.tick());
        let refusal: Arc<dyn Refusal> = status.clone();
        let (built, generator) = build(builder, refusal, (limit, deadline))?;
        // From now on the holder's clock is the generator's, read at each check.
        let held = Arc::clone(&generator);
        claim.read_holder_clock(Arc::new(move || held.clock().precise_now_ms()));
        let keeper = Keeper {
            holder,
            terms: keeper_terms,
            generator,
            store,
            status: Arc::clone(&status),
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

impl<C: TimeSource + 'static> GeneratorBuilder<C> {
    /// The error a build that ended without a generator returns.
    fn build_error(
        &self,
        node: u64,
        outcome: Outcome,
        failed: Option<Error>,
        tolerance_ms: u64,
    ) -> Error {
        match outcome {
            Outcome::Refused { ahead_ms } => Error::ReservationAhead {
                node,
                reserved_until_ms: self.clock_ref().precise_now_ms().saturating_add(ahead_ms),
                ahead: Duration::from_millis(ahead_ms),
                tolerance: Duration::from_millis(tolerance_ms),
            },
            Outcome::Exhausted => Error::Exhausted {
                expired_at_ms: self.layout_ref().expires_at_ms(),
            },
            Outcome::Unmovable => Error::InvalidConfig {
                setting: "trust_future_reservation",
                value: "true".into(),
                allowed: "only with a clock that can be moved forward (LockedClock, \
                          CoarseClock, ManualClock)"
                    .into(),
            },
            _ => failed.unwrap_or_else(|| Error::LeaseLost {
                node,
                reason: "the claim could not be confirmed".into(),
            }),
        }
    }
}

/// Sleeps `ms`; with `renew_every_ms`, in naps of that length, renewing the claim after each
/// so that a claim that expires (an etcd lease) outlives the wait.
fn nap(
    store: &dyn NodeStore,
    claim: &Claim,
    ms: u64,
    renew_every_ms: Option<u64>,
) -> Result<(), Error> {
    let Some(every) = renew_every_ms else {
        std::thread::sleep(Duration::from_millis(ms));
        return Ok(());
    };
    let mut left = ms;
    while left > 0 {
        let nap = left.min(every.max(1));
        std::thread::sleep(Duration::from_millis(nap));
        left -= nap;
        store.renew(claim)?;
    }
    Ok(())
}
