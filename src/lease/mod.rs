//! Leases: a generator that holds its node ID through a [`NodeStore`] and never issues a tick
//! the store has not acknowledged as reserved.
//!
//! * `mod.rs`: [`Leased`], the handle (releases on drop).
//! * `build.rs`: [`GeneratorBuilder::build_leased`](crate::GeneratorBuilder::build_leased):
//!   claim, first reservation, first renewal, keeper start.
//! * `keeper.rs`: the keeper thread: renewals, reservation extensions, the fence words.
//! * `outside.rs`: [`StateLease`], the same lease for a state word kept outside this crate
//!   (a PostgreSQL server's shared memory).
//! * `holding.rs`: what a leased generator owns besides its generator (the keeper), and how
//!   it lets go.
//! * `status.rs`: what the keeper knows, for refusals and statistics; store time ↔ ticks.
//! * `handover.rs`: the hand-over protocol's decisions, pure (public as
//!   [`monoflake::handover`](crate::handover), for the model checker).
//! * `caveat.rs`: [`Caveat`], what a store cannot promise where it runs.
//! * `store.rs`: the [`NodeStore`] trait and [`Claim`]; `file/`, `etcd.rs` and `postgres/`
//!   implement it (`etcd_options.rs`, `postgres_options.rs`: how they connect;
//!   `etcd_clock.rs`: etcd's clock, the `Date` of its HTTP gateway).

mod build;
mod caveat;
mod choose;
#[cfg(feature = "etcd")]
mod etcd;
#[cfg(feature = "etcd")]
mod etcd_clock;
#[cfg(feature = "etcd")]
mod etcd_options;
#[cfg(unix)]
mod file;
pub mod handover;
mod holding;
mod keeper;
mod outside;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "postgres")]
mod postgres_options;
mod shape;
mod status;
mod store;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

pub use self::build::{MAX_RESERVATION_WINDOW, MIN_RESERVATION_WINDOW};
pub use self::caveat::Caveat;
#[cfg(feature = "etcd")]
pub use self::etcd::{DEFAULT_LEASE_TTL, EtcdStore};
#[cfg(feature = "etcd")]
pub use self::etcd_options::{DEFAULT_MAX_MEMBER_SKEW, EtcdOptions};
#[cfg(unix)]
pub use self::file::{DEFAULT_STATE_DIR, FileStore};
use self::holding::Holding;
pub use self::outside::{OutsideState, StateLease};
#[cfg(feature = "postgres")]
pub use self::postgres::PgStore;
#[cfg(feature = "postgres")]
pub use self::postgres_options::{DEFAULT_PG_LEASE_TTL, DEFAULT_PG_TABLE, PgFailover, PgOptions};
pub use self::store::{Claim, DEFAULT_CHECK_INTERVAL, NodeRequest, NodeStore};
use crate::clock::TimeSource;
use crate::generator::id_generator_by_inherent_methods;
use crate::{Error, Generator, Id, IdGenerator, Ids, Layout, LockedClock, Stats};

/// How far ahead of need a leased generator reserves time, by default.
pub const DEFAULT_RESERVATION_WINDOW: Duration = Duration::from_secs(5);

/// A [`Generator`] holding its node ID through a [`NodeStore`], with a keeper thread that
/// renews the claim and extends the time reservation ahead of need.
///
/// * **Never a shared node ID**: the node ID comes from [`NodeStore::claim`].
/// * **Never a reissued tick**: the generator starts after the reservation the previous holder
///   left, and issues only ticks the store has acknowledged (two relaxed loads on the hot path,
///   on the state's own cache line).
/// * **Stops on its own**: when the reservation cannot be extended in time, issuing stops with
///   [`Error::ReservationUnavailable`]; when the claim is not renewed before its deadline
///   (measured on the monotonic clock, [`std::time::Instant`]), with [`Error::LeaseLost`].
/// * **Never past what a successor assumes**: nothing is issued later than two check
///   intervals ([`NodeStore::check_interval`]) after the start of the last check that found
///   the claim standing — a paused process, a frozen VM or a store that cannot be reached
///   stops issuing there ([`Error::WouldBlock`], or [`Error::ReservationUnavailable`] while
///   checks fail) and resumes once a check succeeds. A claimant that finds no record of a node
///   (deleted under its holder) relies on it (docs/design.md, "Holder and successor").
/// * **Released on drop**: dropping (or [`Leased::release`]) stops the keeper, seals the
///   generator (a call racing the release then reports [`Error::LeaseLost`]), writes the final
///   reservation — the end of the last tick issued — and gives the node ID up.
/// * **Forks**: a forked child refuses to issue ([`Error::Forked`]); dropping or releasing the
///   inherited handle in the child does nothing (the keeper, the claim and the node stay the
///   parent's).
/// * **Waits only when it starts**: building may wait once, for a reservation more than
///   `max_lead` ahead of the clock (a holder that borrowed ahead or stopped without a clean
///   release) or for a node with no record (two and a half check intervals), so that its
///   first IDs are above everything the node issued and honest; a released node is taken
///   back at once. See [`GeneratorBuilder::build_leased`](crate::GeneratorBuilder::build_leased),
///   "What a build waits for"; the wait is in [`Stats::claim_wait_ms`].
///
/// * **One handle.** `Leased` is not a smart pointer to a [`Generator`]: it implements
///   [`IdGenerator`] itself, and nothing it hands out outlives it. Share it across threads by
///   reference (scoped threads) or in an `Arc`; the lease is released when the last owner drops
///   it.
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
    /// Shared with the keeper thread only.
    generator: Arc<Generator<C>>,
    /// The keeper; released on drop.
    holding: Holding,
}

impl<C: TimeSource + 'static> fmt::Debug for Leased<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leased")
            .field("node", &self.generator.node())
            .field("layout", &self.generator.layout().name())
            .finish_non_exhaustive()
    }
}

impl<C: TimeSource + 'static> Leased<C> {
    /// Issues one ID without waiting; see [`Generator::try_next_id`].
    ///
    /// # Errors
    ///
    /// As [`Generator::try_next_id`], notably [`Error::LeaseLost`] once the lease is lost or
    /// released and [`Error::ReservationUnavailable`] when the store has not acknowledged the
    /// time needed.
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("monoflake-doc-leased-try-{}", std::process::id()));
    /// let store = std::sync::Arc::new(monoflake::FileStore::open(&dir)?);
    /// let leased = monoflake::Generator::builder(monoflake::Layout::twitter())
    ///     .build_leased(store, monoflake::NodeRequest::Any)?;
    /// assert!(leased.try_next_id()? < leased.try_next_id()?);
    /// # drop(leased); std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    #[inline]
    pub fn try_next_id(&self) -> Result<Id, Error> {
        self.generator.try_next_id()
    }

    /// Whether a call could issue now, without issuing anything; see [`Generator::check`].
    /// For a service's readiness probe: `Ok` while the node is held and its reservation can
    /// be extended, [`Error::LeaseLost`] once the lease is lost or released.
    ///
    /// # Errors
    ///
    /// As [`Leased::try_next_id`], except [`Error::WouldBlock`].
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("monoflake-doc-leased-check-{}", std::process::id()));
    /// let store = std::sync::Arc::new(monoflake::FileStore::open(&dir)?);
    /// let leased = monoflake::Generator::builder(monoflake::Layout::twitter())
    ///     .build_leased(store, monoflake::NodeRequest::Any)?;
    /// leased.check()?;
    /// assert_eq!(leased.stats().issued, 0);
    /// # drop(leased); std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn check(&self) -> Result<(), Error> {
        self.generator.check()
    }

    /// Issues one ID, waiting at the lead limit; see [`Generator::next_id`].
    ///
    /// # Errors
    ///
    /// As [`Leased::try_next_id`], and [`Error::TimedOut`] instead of [`Error::WouldBlock`].
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("monoflake-doc-leased-next-{}", std::process::id()));
    /// let store = std::sync::Arc::new(monoflake::FileStore::open(&dir)?);
    /// let leased = monoflake::Generator::builder(monoflake::Layout::twitter())
    ///     .build_leased(store, monoflake::NodeRequest::Exact(3))?;
    /// assert_eq!(leased.next_id()?.parts(leased.layout())?.node(), 3);
    /// # drop(leased); std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    #[inline]
    pub fn next_id(&self) -> Result<Id, Error> {
        self.generator.next_id()
    }

    /// Reserves `n` consecutive IDs without waiting; see [`Generator::try_next_ids`].
    ///
    /// # Errors
    ///
    /// As [`Leased::try_next_id`].
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("monoflake-doc-leased-tryids-{}", std::process::id()));
    /// let store = std::sync::Arc::new(monoflake::FileStore::open(&dir)?);
    /// let leased = monoflake::Generator::builder(monoflake::Layout::twitter())
    ///     .build_leased(store, monoflake::NodeRequest::Any)?;
    /// assert_eq!(leased.try_next_ids(100)?.len(), 100);
    /// # drop(leased); std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn try_next_ids(&self, n: u64) -> Result<Ids, Error> {
        self.generator.try_next_ids(n)
    }

    /// Reserves `n` consecutive IDs, waiting at the lead limit; see [`Generator::next_ids`].
    ///
    /// # Errors
    ///
    /// As [`Leased::next_id`].
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("monoflake-doc-leased-ids-{}", std::process::id()));
    /// let store = std::sync::Arc::new(monoflake::FileStore::open(&dir)?);
    /// let leased = monoflake::Generator::builder(monoflake::Layout::twitter())
    ///     .build_leased(store, monoflake::NodeRequest::Any)?;
    /// let ids: Vec<_> = leased.next_ids(5000)?.collect();
    /// assert!(ids.windows(2).all(|w| w[0] < w[1]));
    /// # drop(leased); std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn next_ids(&self, n: u64) -> Result<Ids, Error> {
        self.generator.next_ids(n)
    }

    /// The generator's counters plus the lease's: reservation writes and failures, renewals,
    /// losses.
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("monoflake-doc-leased-stats-{}", std::process::id()));
    /// let store = std::sync::Arc::new(monoflake::FileStore::open(&dir)?);
    /// let leased = monoflake::Generator::builder(monoflake::Layout::twitter())
    ///     .build_leased(store, monoflake::NodeRequest::Any)?;
    /// leased.next_id()?;
    /// let stats = leased.stats();
    /// assert_eq!((stats.issued, stats.reservation_writes), (1, 1));
    /// # drop(leased); std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn stats(&self) -> Stats {
        let mut stats = self.generator.stats();
        self.holding.status.fill(&mut stats);
        stats
    }

    /// The layout IDs are issued under.
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("monoflake-doc-leased-layout-{}", std::process::id()));
    /// let store = std::sync::Arc::new(monoflake::FileStore::open(&dir)?);
    /// let leased = monoflake::Generator::builder(monoflake::Layout::discord())
    ///     .build_leased(store, monoflake::NodeRequest::Any)?;
    /// assert_eq!(leased.layout().name(), "discord");
    /// # drop(leased); std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn layout(&self) -> &Layout {
        self.generator.layout()
    }

    /// How long [`Leased::next_id`] and [`Leased::next_ids`] wait at the lead limit before
    /// they report [`Error::TimedOut`]: at least the reservation window plus one tick, so a
    /// reservation being written or a long tick is waited out.
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("monoflake-doc-leased-wait-{}", std::process::id()));
    /// let store = std::sync::Arc::new(monoflake::FileStore::open(&dir)?);
    /// let leased = monoflake::Generator::builder(monoflake::Layout::twitter())
    ///     .build_leased(store, monoflake::NodeRequest::Any)?;
    /// let at_least = monoflake::DEFAULT_RESERVATION_WINDOW + leased.layout().tick();
    /// assert!(leased.max_wait() >= at_least);
    /// # drop(leased); std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn max_wait(&self) -> Duration {
        self.generator.max_wait()
    }

    /// The node ID held.
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("monoflake-doc-leased-node-{}", std::process::id()));
    /// let store = std::sync::Arc::new(monoflake::FileStore::open(&dir)?);
    /// let leased = monoflake::Generator::builder(monoflake::Layout::twitter())
    ///     .build_leased(store, monoflake::NodeRequest::Exact(9))?;
    /// assert_eq!(leased.node(), 9);
    /// # drop(leased); std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn node(&self) -> u64 {
        self.generator.node()
    }

    /// The time source.
    ///
    /// ```
    /// use monoflake::TimeSource;
    /// let dir = std::env::temp_dir().join(format!("monoflake-doc-leased-clock-{}", std::process::id()));
    /// let store = std::sync::Arc::new(monoflake::FileStore::open(&dir)?);
    /// let leased = monoflake::Generator::builder(monoflake::Layout::twitter())
    ///     .build_leased(store, monoflake::NodeRequest::Any)?;
    /// assert!(leased.clock().now_ms() > 0);
    /// # drop(leased); std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn clock(&self) -> &C {
        self.generator.clock()
    }

    /// The time-field value of the last ID issued (or of the start point).
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("monoflake-doc-leased-tick-{}", std::process::id()));
    /// let store = std::sync::Arc::new(monoflake::FileStore::open(&dir)?);
    /// let leased = monoflake::Generator::builder(monoflake::Layout::twitter())
    ///     .build_leased(store, monoflake::NodeRequest::Any)?;
    /// let id = leased.next_id()?;
    /// assert_eq!(leased.last_tick(), id.parts(leased.layout())?.tick());
    /// # drop(leased); std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn last_tick(&self) -> u64 {
        self.generator.last_tick()
    }

    /// Stops issuing, writes the final reservation and gives the node ID up.
    ///
    /// # Errors
    ///
    /// The store's error if the final write fails (the node ID is given up all the same; the
    /// reservation then stays at the last extension, which is later, so nothing is unsafe).
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("monoflake-doc-release-{}", std::process::id()));
    /// let store = std::sync::Arc::new(monoflake::FileStore::open(&dir)?);
    /// let leased = monoflake::Generator::builder(monoflake::Layout::twitter())
    ///     .build_leased(store, monoflake::NodeRequest::Exact(7))?;
    /// leased.release()?;
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn release(mut self) -> Result<(), Error> {
        self.holding.stop()
    }
}

id_generator_by_inherent_methods!(Leased, TimeSource + 'static);
