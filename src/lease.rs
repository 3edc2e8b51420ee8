//! A generator that holds its node ID through a [`NodeStore`] and never issues a tick the store
//! has not acknowledged as reserved.

use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::clock::TimeSource;
use crate::generator::{Generator, GeneratorBuilder};
use crate::store::{Claim, NodeRequest, NodeStore};
use crate::sync::{AtomicBool, AtomicU64, Ordering};
use crate::{Error, Layout, LockedClock, Stats};

/// How far ahead of need a leased generator reserves time, by default.
pub const DEFAULT_RESERVATION_WINDOW: Duration = Duration::from_secs(5);

/// The fewest milliseconds subtracted from a lease's validity, to cover a coarse clock's lag.
const DEADLINE_MARGIN_MS: u64 = 2;

/// What the hot path needs to explain a refusal; written by the keeper.
#[derive(Debug)]
pub(crate) struct LeaseStatus {
    node: u64,
    store: String,
    // Ordering: Relaxed; status words read only to word an error.
    deadline_ms: AtomicU64,
    released: AtomicBool,
    last_error: Mutex<Option<String>>,
    /// The state when it was sealed (`u64::MAX` until then), for the issued count.
    sealed_state: AtomicU64,
    reservation_writes: AtomicU64,
    reservation_failures: AtomicU64,
    renewals: AtomicU64,
    losses: AtomicU64,
}

impl LeaseStatus {
    fn new(node: u64, store: String) -> Self {
        LeaseStatus {
            node,
            store,
            deadline_ms: AtomicU64::new(u64::MAX),
            released: AtomicBool::new(false),
            last_error: Mutex::new(None),
            sealed_state: AtomicU64::new(u64::MAX),
            reservation_writes: AtomicU64::new(0),
            reservation_failures: AtomicU64::new(0),
            renewals: AtomicU64::new(0),
            losses: AtomicU64::new(0),
        }
    }

    /// The state the generator had when the lease was released.
    pub(crate) fn sealed_state(&self) -> Option<u64> {
        let s = self.sealed_state.load(Ordering::Relaxed);
        (s != u64::MAX).then_some(s)
    }

    /// Adds the store's counters to a snapshot.
    pub(crate) fn fill(&self, stats: &mut Stats) {
        stats.reservation_writes = self.reservation_writes.load(Ordering::Relaxed);
        stats.reservation_failures = self.reservation_failures.load(Ordering::Relaxed);
        stats.lease_renewals = self.renewals.load(Ordering::Relaxed);
        stats.lease_losses = self.losses.load(Ordering::Relaxed);
    }

    fn count(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn record(&self, e: Option<&Error>) {
        *self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = e.map(Error::to_string);
    }

    /// The error for a refused call: `deadline_passed` when the clock reached the lease
    /// deadline, otherwise the reservation ran out.
    pub(crate) fn error(&self, deadline_passed: bool) -> Error {
        let node = self.node;
        let last = self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if self.released.load(Ordering::Relaxed) {
            return Error::LeaseLost {
                node,
                reason: "the lease was released".into(),
            };
        }
        if deadline_passed {
            let deadline = self.deadline_ms.load(Ordering::Relaxed);
            let why = last.unwrap_or_else(|| "no renewal succeeded".into());
            return Error::LeaseLost {
                node,
                reason: format!(
                    "not renewed with {} before its deadline (unix ms {deadline}): {why}",
                    self.store
                ),
            };
        }
        Error::ReservationUnavailable {
            node,
            reason: last.unwrap_or_else(|| format!("{} has not acknowledged it yet", self.store)),
        }
    }
}

/// The first tick that starts at or after `unix_ms`.
fn first_tick_from(layout: &Layout, unix_ms: u64) -> u64 {
    let since = unix_ms.saturating_sub(layout.epoch_ms());
    since.div_ceil(layout.tick_ms())
}

/// The deadline of a claim renewed at `start_ms` and valid for `valid`, in Unix ms, with the
/// margin taken off.
fn deadline_ms(start_ms: u64, valid: Duration) -> u64 {
    let valid_ms = u64::try_from(valid.as_millis()).unwrap_or(u64::MAX);
    start_ms
        .saturating_add(valid_ms)
        .saturating_sub(DEADLINE_MARGIN_MS)
}

/// The first clock tick at which a lease with this deadline may no longer issue: the tick
/// holding the deadline (so every ID is issued before it). `u64::MAX` for no deadline.
fn deadline_tick(layout: &Layout, deadline_ms: u64) -> u64 {
    if deadline_ms == u64::MAX {
        u64::MAX
    } else {
        layout.tick_at(deadline_ms)
    }
}

/// The last tick that starts before `until_ms` (0 when none does).
fn last_tick_before(layout: &Layout, until_ms: u64) -> u64 {
    first_tick_from(layout, until_ms).saturating_sub(1)
}

/// A [`Generator`] holding its node ID through a [`NodeStore`], with a keeper thread that
/// renews the claim and extends the time reservation ahead of need.
///
/// * **Never a shared node ID**: the node ID comes from [`NodeStore::claim`].
/// * **Never a reissued tick**: the generator starts after the reservation the previous holder
///   left, and issues only ticks the store has acknowledged (two relaxed loads on the hot path,
///   on the state's own cache line).
/// * **Stops on its own**: when the reservation cannot be extended in time, issuing stops with
///   [`Error::ReservationUnavailable`]; when the claim is not renewed before its deadline
///   (measured on the generator's clock, which is monotonic), with [`Error::LeaseLost`].
/// * **Released on drop**: dropping (or [`Leased::release`]) stops the keeper, seals the
///   generator (every clone of it then reports [`Error::LeaseLost`]), writes the final
///   reservation — the end of the last tick issued — and gives the node ID up.
/// * After an unclean stop the next holder starts at the old reservation, up to the
///   reservation window ahead of its clock; it issues `max_lead` beyond that and then waits
///   for its clock (so `next_id` waits up to the window).
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use monoflake::{FileStore, Generator, Layout, NodeRequest};
///
/// let dir = std::env::temp_dir().join(format!("monoflake-doc-leased-{}", std::process::id()));
/// let store = Arc::new(FileStore::open(&dir)?);
/// let first = Generator::builder(Layout::twitter()).build_leased(store.clone(), NodeRequest::Any)?;
/// let second = Generator::builder(Layout::twitter()).build_leased(store.clone(), NodeRequest::Any)?;
/// assert_ne!(first.node(), second.node());
/// let a = first.next_id()?;
/// first.release()?;
/// // The node is free again, and its next holder starts after everything issued.
/// let third = Generator::builder(Layout::twitter()).build_leased(store, NodeRequest::Any)?;
/// assert_eq!(third.node(), 0);
/// assert!(third.next_id()? > a);
/// # drop((second, third)); std::fs::remove_dir_all(&dir).ok();
/// # Ok::<(), monoflake::Error>(())
/// ```
pub struct Leased<C: TimeSource + 'static = LockedClock> {
    generator: Arc<Generator<C>>,
    stop: Arc<(Mutex<bool>, Condvar)>,
    keeper: Option<JoinHandle<Result<(), Error>>>,
}

impl<C: TimeSource + 'static> fmt::Debug for Leased<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leased")
            .field("node", &self.generator.node())
            .field("layout", &self.generator.layout().name())
            .finish_non_exhaustive()
    }
}

impl<C: TimeSource + 'static> Deref for Leased<C> {
    type Target = Generator<C>;
    fn deref(&self) -> &Generator<C> {
        &self.generator
    }
}

impl<C: TimeSource + 'static> Leased<C> {
    /// A shared handle to the generator, e.g. for other threads. Once the lease is released
    /// every call through it reports [`Error::LeaseLost`].
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("monoflake-doc-shared-{}", std::process::id()));
    /// # let store = std::sync::Arc::new(monoflake::FileStore::open(&dir)?);
    /// let leased = monoflake::Generator::builder(monoflake::Layout::twitter())
    ///     .build_leased(store, monoflake::NodeRequest::Any)?;
    /// let shared = leased.generator();
    /// assert!(shared.next_id().is_ok());
    /// drop(leased);
    /// assert!(matches!(shared.next_id(), Err(monoflake::Error::LeaseLost { .. })));
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn generator(&self) -> Arc<Generator<C>> {
        Arc::clone(&self.generator)
    }

    /// Stops issuing, writes the final reservation and gives the node ID up.
    ///
    /// # Errors
    ///
    /// The store's error if the final write fails (the node ID is given up all the same; the
    /// reservation then stays at the last extension, which is later, so nothing is unsafe).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("monoflake-doc-release-{}", std::process::id()));
    /// # let store = std::sync::Arc::new(monoflake::FileStore::open(&dir)?);
    /// let leased = monoflake::Generator::builder(monoflake::Layout::twitter())
    ///     .build_leased(store, monoflake::NodeRequest::Exact(7))?;
    /// leased.release()?;
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn release(mut self) -> Result<(), Error> {
        self.stop_keeper()
    }

    fn stop_keeper(&mut self) -> Result<(), Error> {
        let Some(keeper) = self.keeper.take() else {
            return Ok(());
        };
        let (flag, wake) = &*self.stop;
        *flag.lock().unwrap_or_else(PoisonError::into_inner) = true;
        wake.notify_all();
        keeper.join().unwrap_or_else(|_| {
            Err(Error::LeaseLost {
                node: self.generator.node(),
                reason: "the keeper panicked".into(),
            })
        })
    }
}

impl<C: TimeSource + 'static> Drop for Leased<C> {
    fn drop(&mut self) {
        let _ = self.stop_keeper();
    }
}

/// The keeper thread's state.
struct Keeper<C: TimeSource + 'static> {
    generator: Arc<Generator<C>>,
    store: Arc<dyn NodeStore>,
    status: Arc<LeaseStatus>,
    window_ms: u64,
    interval: Duration,
    reserved_until_ms: u64,
}

impl<C: TimeSource + 'static> Keeper<C> {
    fn run(mut self, claim: Claim, stop: Arc<(Mutex<bool>, Condvar)>) -> Result<(), Error> {
        let (flag, wake) = &*stop;
        let mut stopped = flag.lock().unwrap_or_else(PoisonError::into_inner);
        while !*stopped {
            stopped = wake
                .wait_timeout(stopped, self.interval)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            if !*stopped {
                drop(stopped);
                self.maintain(&claim);
                stopped = flag.lock().unwrap_or_else(PoisonError::into_inner);
            }
        }
        drop(stopped);
        self.seal_and_release(claim)
    }

    /// Renews the claim, extends the reservation when less than half a window is left, and
    /// publishes the new limit.
    fn maintain(&mut self, claim: &Claim) {
        let g = &*self.generator;
        let layout = g.layout();
        let start_ms = g.clock().precise_now_ms();
        let mut error = None;
        let was_lost = start_ms >= self.status.deadline_ms.load(Ordering::Relaxed);
        match self.store.renew(claim) {
            Ok(valid) => {
                LeaseStatus::count(&self.status.renewals);
                if !was_lost {
                    let deadline = valid.map_or(u64::MAX, |v| deadline_ms(start_ms, v));
                    self.status.deadline_ms.store(deadline, Ordering::Relaxed);
                }
                if let Some(valid) = valid {
                    // The reservation runs at least two validity periods ahead, so a store that
                    // goes away shows up as LeaseLost at the deadline, not as a reservation gap.
                    let twice = u64::try_from(valid.as_millis())
                        .unwrap_or(u64::MAX)
                        .saturating_mul(2);
                    self.window_ms = self.window_ms.max(twice);
                    self.interval = self.interval.min(valid / 3);
                }
            }
            Err(e) => {
                if matches!(e, Error::LeaseLost { .. }) {
                    self.status.deadline_ms.store(0, Ordering::Relaxed);
                }
                #[cfg(feature = "tracing")]
                tracing::warn!(node = self.status.node, error = %e, "monoflake: lease renewal failed");
                error = Some(e);
            }
        }
        // Once the deadline has passed the lease is lost for good: the node may already be
        // someone else's. Count it once; issuing stays stopped.
        if !was_lost && start_ms >= self.status.deadline_ms.load(Ordering::Relaxed) {
            LeaseStatus::count(&self.status.losses);
            #[cfg(feature = "tracing")]
            tracing::error!(
                node = self.status.node,
                "monoflake: lease lost; issuing stopped"
            );
        }
        let lost = start_ms >= self.status.deadline_ms.load(Ordering::Relaxed);
        if error.is_none() && !lost {
            let issued_end = layout.unix_ms_of_tick(g.last_tick().saturating_add(1));
            let base = start_ms.max(issued_end);
            if self.reserved_until_ms < base.saturating_add(self.window_ms / 2) {
                let want = base.saturating_add(self.window_ms);
                match self.store.extend(claim, want) {
                    Ok(()) => {
                        LeaseStatus::count(&self.status.reservation_writes);
                        self.reserved_until_ms = want;
                    }
                    Err(e) => {
                        LeaseStatus::count(&self.status.reservation_failures);
                        #[cfg(feature = "tracing")]
                        tracing::warn!(node = self.status.node, error = %e, "monoflake: reservation write failed");
                        error = Some(e);
                    }
                }
            }
        }
        self.status.record(error.as_ref());
        let deadline = self.status.deadline_ms.load(Ordering::Relaxed);
        // Ordering: Relaxed; see `Core::limit`. The keeper is their only writer until release.
        g.core().limit.store(
            last_tick_before(layout, self.reserved_until_ms),
            Ordering::Relaxed,
        );
        g.core()
            .deadline
            .store(deadline_tick(layout, deadline), Ordering::Relaxed);
    }

    /// Stops the generator for good, then writes the end of the last tick issued as the final
    /// reservation and releases the claim.
    fn seal_and_release(self, claim: Claim) -> Result<(), Error> {
        let g = &*self.generator;
        self.status.released.store(true, Ordering::Relaxed);
        let last = g.seal();
        self.status.sealed_state.store(last, Ordering::Relaxed);
        let last_tick = g.tick_of_state(last);
        let until = g.layout().unix_ms_of_tick(last_tick.saturating_add(1));
        // Never below what was read at the claim: a node that issued nothing keeps the old one.
        let until = until.max(claim.reserved_until_ms().unwrap_or(0));
        self.store.release(claim, until)
    }
}

impl<C: TimeSource + 'static> GeneratorBuilder<C> {
    /// How far ahead of need the reservation is extended (default
    /// [`DEFAULT_RESERVATION_WINDOW`]; at least two lease validity periods for stores whose
    /// claims expire). Only used by [`GeneratorBuilder::build_leased`].
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("monoflake-doc-window-{}", std::process::id()));
    /// # let store = std::sync::Arc::new(monoflake::FileStore::open(&dir)?);
    /// let leased = monoflake::Generator::builder(monoflake::Layout::twitter())
    ///     .reservation_window(std::time::Duration::from_secs(2))
    ///     .build_leased(store, monoflake::NodeRequest::Any)?;
    /// assert!(leased.next_id().is_ok());
    /// # drop(leased); std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn reservation_window(mut self, window: Duration) -> Self {
        self.set_window(window);
        self
    }

    /// Claims a node ID from `store` and builds a generator that holds it (see [`Leased`]).
    /// The builder's node is replaced by the claimed one.
    ///
    /// # Errors
    ///
    /// The store's errors from [`NodeStore::claim`] (e.g. [`Error::AllNodesHeld`],
    /// [`Error::NodeHeld`]) and from writing the first reservation.
    ///
    /// ```
    /// use monoflake::{Error, FileStore, Generator, Layout, NodeRequest};
    /// # let dir = std::env::temp_dir().join(format!("monoflake-doc-build-leased-{}", std::process::id()));
    /// let store = std::sync::Arc::new(FileStore::open(&dir)?);
    /// let leased = Generator::builder(Layout::twitter()).build_leased(store.clone(), NodeRequest::Exact(5))?;
    /// assert_eq!(leased.node(), 5);
    /// let again = Generator::builder(Layout::twitter()).build_leased(store, NodeRequest::Exact(5));
    /// assert!(matches!(again, Err(Error::NodeHeld { node: 5 })));
    /// # drop(leased); std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), Error>(())
    /// ```
    pub fn build_leased(
        self,
        store: Arc<dyn NodeStore>,
        request: NodeRequest,
    ) -> Result<Leased<C>, Error> {
        let layout = self.layout_ref().clone();
        let claim = store.claim(&layout, request)?;
        let node = claim.node();
        let window = self.window();
        let window_ms = u64::try_from(window.as_millis()).unwrap_or(u64::MAX);
        let now_ms = self.clock_ref().precise_now_ms();
        let floor_tick = claim
            .reserved_until_ms()
            .map_or(0, |u| first_tick_from(&layout, u));
        let start_ms = now_ms.max(layout.unix_ms_of_tick(floor_tick));
        let until = start_ms.saturating_add(window_ms);
        if let Err(e) = store.extend(&claim, until) {
            let previous = claim.reserved_until_ms().unwrap_or(0);
            let _ = store.release(claim, previous);
            return Err(e);
        }
        let status = Arc::new(LeaseStatus::new(node, store.describe()));
        LeaseStatus::count(&status.reservation_writes); // the first reservation, just written
        // The first renewal tells how long the claim lasts, before anything is issued.
        let mut interval = window / 4;
        let mut deadline = u64::MAX;
        match store.renew(&claim) {
            Ok(None) => LeaseStatus::count(&status.renewals),
            Ok(Some(valid)) => {
                LeaseStatus::count(&status.renewals);
                let ms = deadline_ms(now_ms, valid);
                status.deadline_ms.store(ms, Ordering::Relaxed);
                deadline = deadline_tick(&layout, ms);
                interval = interval.min(valid / 3);
            }
            Err(e) => {
                let previous = claim.reserved_until_ms().unwrap_or(0).max(until);
                let _ = store.release(claim, previous);
                return Err(e);
            }
        }
        let mut builder = self.node(node);
        if let Some(after) = floor_tick.checked_sub(1) {
            builder = builder.resume_after(after);
        }
        builder.raise_max_wait(window + layout.tick());
        let generator = Arc::new(builder.build_with(
            Some(Arc::clone(&status)),
            last_tick_before(&layout, until),
            deadline,
        )?);
        let keeper = Keeper {
            generator: Arc::clone(&generator),
            store,
            status,
            window_ms,
            interval,
            reserved_until_ms: until,
        };
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let keeper_stop = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name(format!("monoflake-lease-{node}"))
            .spawn(move || keeper.run(claim, keeper_stop))
            .map_err(|e| Error::LeaseLost {
                node,
                reason: format!("cannot start the keeper: {e}"),
            })?;
        Ok(Leased {
            generator,
            stop,
            keeper: Some(thread),
        })
    }
}
