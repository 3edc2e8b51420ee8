//! The node-store abstraction: claim a node ID with its time reservation, extend the
//! reservation, renew the claim, release it.

use std::any::Any;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::Caveat;
use crate::{Error, Layout};

/// Which node ID to claim.
///
/// ```
/// use monoflake::NodeRequest;
/// assert_ne!(NodeRequest::Any, NodeRequest::Exact(3));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NodeRequest {
    /// A free node ID: the one that costs the build the least wait, lowest first. A node
    /// whose reservation is at most `max_lead` ahead of the clock costs none (a generator
    /// dropped moments ago gets its node back at once); a node with no record costs two and
    /// a half check intervals; a node reserved further ahead, the time until it is `max_lead`
    /// ahead. Nodes whose records cannot be used, or reserved further ahead than the
    /// [tolerance](crate::GeneratorBuilder::future_reservation_tolerance), are skipped. See
    /// [`GeneratorBuilder::build_leased`](crate::GeneratorBuilder::build_leased), "What a
    /// build waits for".
    Any,
    /// Exactly this node ID (operators who assign IDs by hand, StatefulSet ordinals); an error
    /// if another live claimant holds it.
    Exact(u64),
}

/// A held node ID, as returned by [`NodeStore::claim`].
///
/// It carries the reservation the previous holder left: the first Unix millisecond that holder
/// was *not* allowed to issue. A new holder starts at or after it, so a restart — even with the
/// clock set back — never reissues a time its node already used.
///
/// ```
/// use monoflake::Claim;
/// let claim = Claim::new(7, Some(1_700_000_005_000), ());
/// assert_eq!(claim.node(), 7);
/// assert_eq!(claim.reserved_until_ms(), Some(1_700_000_005_000));
/// assert!(claim.token::<()>().is_some());
/// ```
pub struct Claim {
    node: u64,
    reserved_until_ms: Option<u64>,
    recorded: bool,
    unusable: u64,
    /// The store's own clock at the claim and the most a holder's clock may lead it at a
    /// check that confirms (see [`Claim::with_store_clock`]).
    store_clock: Option<(u64, u64)>,
    /// The holder's clock, for a store that compares it with its own at each check (set by
    /// the build before the first check).
    holder_clock: Option<HolderClock>,
    /// The store's clock as the last renewal that confirmed the claim read it, with the lead
    /// and slack it allows, ms (see [`Claim::note_store_clock`]); taken by the shell.
    store_reading: Mutex<Option<(u64, u64, u64)>>,
    token: Box<dyn Any + Send + Sync>,
}

/// Reads the holder's clock (Unix ms).
pub(crate) type HolderClock = Arc<dyn Fn() -> u64 + Send + Sync>;

impl fmt::Debug for Claim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Claim")
            .field("node", &self.node)
            .field("reserved_until_ms", &self.reserved_until_ms)
            .field("recorded", &self.recorded)
            .field("unusable", &self.unusable)
            .field("store_clock", &self.store_clock)
            .finish_non_exhaustive()
    }
}

impl Claim {
    /// A claim on `node`, with the stored reservation (`None` when the node was never
    /// reserved) and the backend's own token (a lock file, a lease ID).
    ///
    /// ```
    /// let claim = monoflake::Claim::new(1, None, 42u64);
    /// assert_eq!(claim.token::<u64>(), Some(&42));
    /// ```
    pub fn new(node: u64, reserved_until_ms: Option<u64>, token: impl Any + Send + Sync) -> Self {
        Claim {
            node,
            reserved_until_ms,
            recorded: reserved_until_ms.is_some(),
            unusable: 0,
            store_clock: None,
            holder_clock: None,
            store_reading: Mutex::new(None),
            token: Box::new(token),
        }
    }

    /// The claim, noting that a claim of any node skipped `unusable` nodes whose records
    /// could not be used (a damaged or untrusted reservation, a lock file that is not one).
    ///
    /// ```
    /// let claim = monoflake::Claim::new(3, None, ()).with_unusable(2);
    /// assert_eq!(claim.unusable(), 2);
    /// ```
    #[must_use]
    pub fn with_unusable(mut self, unusable: u64) -> Self {
        self.unusable = unusable;
        self
    }

    /// The claim, noting that its reservation comes only from evidence beside the node's
    /// records — a lost holder's write-back, the file store's host anchor — and that the
    /// node's own reservation record was not there (deleted, or never written). Its claimant
    /// then waits and reads again as for a node with no record
    /// ([`handover::after_claim`](crate::handover::after_claim)): the records may have been
    /// deleted under a holder that is still issuing, of which that evidence says nothing.
    ///
    /// ```
    /// let claim = monoflake::Claim::new(3, Some(1_000), ()).evidence_only();
    /// assert_eq!((claim.reserved_until_ms(), claim.recorded()), (Some(1_000), false));
    /// ```
    #[must_use]
    pub fn evidence_only(mut self) -> Self {
        self.recorded = false;
        self
    }

    /// The claim, noting the store's own clock at the claim (`store_ms`, Unix ms, read in the
    /// claim's atomic step) and the most a holder's clock may lead the store's at a check
    /// that confirms its claim (`max_clock_lead`): a store with a clock of its own
    /// (PostgreSQL's `clock_timestamp()`) that refuses to confirm a holder further ahead
    /// ([`handover::clock_lead_refused`](crate::handover::clock_lead_refused)). A claimant
    /// that found no record of the node's own then starts above
    /// [`handover::store_floor_ms`](crate::handover::store_floor_ms) of it as well: above
    /// everything a holder whose records were deleted can have issued, whatever the holder's
    /// clock did.
    ///
    /// ```
    /// let claim = monoflake::Claim::new(3, None, ())
    ///     .with_store_clock(1_700_000_000_000, std::time::Duration::from_millis(250));
    /// assert_eq!(claim.store_clock(), Some((1_700_000_000_000, 250)));
    /// ```
    #[must_use]
    pub fn with_store_clock(mut self, store_ms: u64, max_clock_lead: Duration) -> Self {
        let lead = u64::try_from(max_clock_lead.as_millis()).unwrap_or(u64::MAX);
        self.store_clock = Some((store_ms, lead));
        self
    }

    /// The store's clock at the claim and the most a holder's clock may lead it, in ms, when
    /// the store has a clock of its own (see [`Claim::with_store_clock`]).
    ///
    /// ```
    /// assert_eq!(monoflake::Claim::new(3, None, ()).store_clock(), None);
    /// ```
    pub const fn store_clock(&self) -> Option<(u64, u64)> {
        self.store_clock
    }

    /// For a store with a clock of its own, in [`NodeStore::renew`] when it confirms the
    /// claim: its clock as the renewal read it (`store_ms`, Unix ms), how far ahead of that,
    /// plus the time that passes, a holder's clock is still confirmed at a later renewal
    /// (`lead`), and how far below its clock the reading may be (`slack`: a clock read to the
    /// second, like etcd's `Date`). The holder then keeps its generator's clock under what the
    /// next renewal confirms ([`handover::StoreReading`](crate::handover::StoreReading),
    /// [`TimeSource::set_ceiling`](crate::TimeSource::set_ceiling)): a wall clock stepped
    /// ahead is followed only that far, and the claim is kept.
    ///
    /// ```
    /// use std::time::Duration;
    /// let claim = monoflake::Claim::new(3, None, ());
    /// claim.note_store_clock(1_700_000_000_000, Duration::from_millis(250), Duration::ZERO);
    /// ```
    pub fn note_store_clock(&self, store_ms: u64, lead: Duration, slack: Duration) {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        *self
            .store_reading
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some((store_ms, ms(lead), ms(slack)));
    }

    /// What [`Claim::note_store_clock`] noted since the last call: `(store_ms, lead_ms,
    /// slack_ms)`.
    pub(crate) fn take_store_clock(&self) -> Option<(u64, u64, u64)> {
        self.store_reading
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// Has the store read `clock` as the holder's clock at each check from now on.
    pub(crate) fn read_holder_clock(&mut self, clock: HolderClock) {
        self.holder_clock = Some(clock);
    }

    /// The holder's clock now (Unix ms), once the build said how to read it.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn holder_now_ms(&self) -> Option<u64> {
        self.holder_clock.as_ref().map(|read| read())
    }

    /// The claim with `floor` (Unix ms) merged into its reservation, the larger kept; whether
    /// the node's own record was there is unchanged. For a store that reads more than one
    /// record of a node (the records of before they were kept by bit shape).
    #[must_use]
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn with_floor(mut self, floor: Option<u64>) -> Self {
        self.reserved_until_ms = super::handover::reservation_of([self.reserved_until_ms, floor]);
        self
    }

    /// Whether the node's own reservation record was there at the claim (see
    /// [`Claim::evidence_only`]); `true` whenever a reservation was read, unless the store
    /// said otherwise.
    ///
    /// ```
    /// assert!(monoflake::Claim::new(3, Some(5), ()).recorded());
    /// assert!(!monoflake::Claim::new(3, None, ()).recorded());
    /// ```
    pub const fn recorded(&self) -> bool {
        self.recorded
    }

    /// How many nodes a claim of any node skipped because their records could not be used
    /// (see [`Claim::with_unusable`]).
    ///
    /// ```
    /// assert_eq!(monoflake::Claim::new(3, None, ()).unusable(), 0);
    /// ```
    pub const fn unusable(&self) -> u64 {
        self.unusable
    }

    /// The node ID held.
    ///
    /// ```
    /// assert_eq!(monoflake::Claim::new(3, None, ()).node(), 3);
    /// ```
    pub const fn node(&self) -> u64 {
        self.node
    }

    /// The reservation read when the node was claimed: no tick starting before this Unix
    /// millisecond may be issued.
    ///
    /// ```
    /// assert_eq!(monoflake::Claim::new(3, None, ()).reserved_until_ms(), None);
    /// ```
    pub const fn reserved_until_ms(&self) -> Option<u64> {
        self.reserved_until_ms
    }

    /// The backend's token, if it is a `T`.
    ///
    /// ```
    /// assert!(monoflake::Claim::new(3, None, ()).token::<String>().is_none());
    /// ```
    pub fn token<T: Any>(&self) -> Option<&T> {
        self.token.downcast_ref()
    }
}

/// How often a leased generator checks its claim with the store, by default: see
/// [`NodeStore::check_interval`].
pub const DEFAULT_CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// Where node IDs are claimed and time reservations kept.
///
/// A store guarantees that:
///
/// * a node ID is held by at most one live claimant at a time ([`NodeStore::claim`] is atomic
///   and reads the node's reservation in the same step);
/// * [`NodeStore::extend`] returns only once the new reservation is durable, and fails — rather
///   than succeeding — for a claimant that has lost its claim;
/// * a claim dies with its holder: the process (file locks) or the lease (etcd, PostgreSQL).
///
/// Implementations: [`FileStore`](crate::FileStore) (one host, no server, the default),
/// `EtcdStore` (feature `etcd`, clusters) and `PgStore` (feature `postgres`, rows in a
/// PostgreSQL table). The same conformance suite (`tests/store_conformance.rs`) runs against
/// each.
///
/// # Example
///
/// ```
/// use monoflake::{FileStore, Layout, NodeRequest, NodeStore};
///
/// let dir = std::env::temp_dir().join(format!("monoflake-doc-store-{}", std::process::id()));
/// let store = FileStore::open(&dir)?;
/// let claim = store.claim(&Layout::twitter(), NodeRequest::Any)?;
/// store.extend(&claim, 1_900_000_000_000)?;
/// store.release(claim, 1_900_000_000_000)?;
/// let again = store.claim(&Layout::twitter(), NodeRequest::Any)?;
/// assert_eq!(again.reserved_until_ms(), Some(1_900_000_000_000));
/// # drop(again); std::fs::remove_dir_all(&dir).ok();
/// # Ok::<(), monoflake::Error>(())
/// ```
pub trait NodeStore: Send + Sync + fmt::Debug {
    /// Names the store in messages, e.g. `file /var/lib/monoflake`.
    fn describe(&self) -> String;

    /// How often a holder asks [`NodeStore::renew`] whether its claim still stands (default
    /// [`DEFAULT_CHECK_INTERVAL`]). A holder issues nothing later than twice this after the
    /// start of its last check that found the claim standing — a holder whose records were
    /// deleted under it (a removed state directory, cleared keys), or that was paused, stops
    /// within that — so a claimant that finds no record of a node waits two and a half times
    /// this before it issues.
    ///
    /// ```
    /// use monoflake::NodeStore;
    /// let dir = std::env::temp_dir().join(format!("monoflake-doc-check-{}", std::process::id()));
    /// let store = monoflake::FileStore::open(&dir)?;
    /// assert_eq!(store.check_interval(), monoflake::DEFAULT_CHECK_INTERVAL);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    fn check_interval(&self) -> Duration {
        DEFAULT_CHECK_INTERVAL
    }

    /// Claims a node ID of `layout` (`0..=layout.max_node()`), reading its reservation in the
    /// same atomic step.
    ///
    /// # Errors
    ///
    /// [`Error::NodeHeld`] for an exact request held by another claimant,
    /// [`Error::AllNodesHeld`] when every node ID is held (or, for any node, cannot be used:
    /// count those with [`Claim::with_unusable`] and in the error, and skip them rather than
    /// fail), [`Error::OutOfRange`] for a node the layout does not have,
    /// [`Error::DamagedReservation`] or [`Error::UntrustedState`] for an exact node whose
    /// record cannot be used, [`Error::StateDir`] or [`Error::Store`] when the store fails.
    fn claim(&self, layout: &Layout, request: NodeRequest) -> Result<Claim, Error>;

    /// Durably records that ticks starting before `until_ms` (Unix ms) may be used by this
    /// claim.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] when the claim is no longer held; [`Error::StateDir`] or
    /// [`Error::Store`] when the write fails.
    fn extend(&self, claim: &Claim, until_ms: u64) -> Result<(), Error>;

    /// Renews the claim. Returns how long it stays valid from the start of this call, or
    /// `None` when it lasts as long as the process.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] when the claim is gone; [`Error::Store`] when the store cannot be
    /// reached (the claim may still be valid until its deadline).
    fn renew(&self, claim: &Claim) -> Result<Option<Duration>, Error>;

    /// Reads the node's reservation again, for a claim held: the larger of its reservation and
    /// any record [`NodeStore::restore`] wrote for it. A claimant that found no record reads
    /// it again after its wait, before it issues. Default: what the claim read.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] when the claim is gone; [`Error::DamagedReservation`],
    /// [`Error::UntrustedState`], [`Error::StateDir`] or [`Error::Store`] when the record
    /// cannot be read.
    fn reservation(&self, claim: &Claim) -> Result<Option<u64>, Error> {
        Ok(claim.reserved_until_ms())
    }

    /// Called by a holder that found its claim lost — typically its records deleted under it
    /// (a removed state directory, a cleared key prefix): records, beside the node's records
    /// as they are now, that times before `until_ms` (the end of the last tick it issued)
    /// were used on the node, needing no claim and never lowering or replacing what is there.
    /// A claimant of the node reads it at its claim or, if it found no record, after its wait
    /// ([`NodeStore::reservation`]), and starts above it: a holder whose clock runs ahead of
    /// the claimant's (a wall clock stepped back under it) cannot be overlapped. The holder
    /// sealed its generator first and issues nothing more under the claim, so once the record
    /// is written a store may let go of whatever else it holds for the claim (the file store:
    /// the node's host-wide claim, which refuses a successor on this host until then).
    /// Default: does nothing.
    ///
    /// # Errors
    ///
    /// The store's, when the record cannot be written: the holder says so in its lease-lost
    /// reason and tries again at each later round while it lives.
    fn restore(&self, claim: &Claim, until_ms: u64) -> Result<(), Error> {
        let _ = (claim, until_ms);
        Ok(())
    }

    /// What this store cannot promise where it runs ([`Caveat`]), found when it was opened:
    /// a leased build warns of each and counts it in [`Stats`](crate::Stats); a command line
    /// prints each once. Default: none.
    ///
    /// ```
    /// use monoflake::NodeStore;
    /// let dir = std::env::temp_dir().join(format!("monoflake-doc-caveats-{}", std::process::id()));
    /// let store = monoflake::FileStore::open(&dir)?;
    /// for caveat in store.caveats() {
    ///     eprintln!("monoflake: warning: {caveat}");
    /// }
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    fn caveats(&self) -> Vec<Caveat> {
        Vec::new()
    }

    /// Gives the node ID up unused, writing nothing: the node's records stay exactly as the
    /// claim found them. A claim that issued nothing — a node passed over by a search for
    /// any node, or a build that failed before its first ID — ends this way, never with a
    /// release: a record written for a node that had none (its floor, or 0) would let the next
    /// claimant skip the wait and the re-read that a node with no record gets, which guard
    /// against a holder whose records were deleted under it. Default: a release that writes
    /// back what the claim read, or, for a node with no record, drops the claim (a store
    /// whose claims end with the handle, or expire).
    ///
    /// # Errors
    ///
    /// The store's, when it cannot be told; the claim is given up either way.
    ///
    /// ```
    /// use monoflake::{FileStore, Layout, NodeRequest, NodeStore};
    /// let dir = std::env::temp_dir().join(format!("monoflake-doc-abandon-{}", std::process::id()));
    /// let store = FileStore::open(&dir)?;
    /// let claim = store.claim(&Layout::twitter(), NodeRequest::Exact(6))?;
    /// store.abandon(claim)?;
    /// // Free again, and still without a record: its next claimant waits as for a new node.
    /// let again = store.claim(&Layout::twitter(), NodeRequest::Exact(6))?;
    /// assert_eq!(again.reserved_until_ms(), None);
    /// # drop(again); std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    fn abandon(&self, claim: Claim) -> Result<(), Error> {
        match claim.reserved_until_ms() {
            Some(until) => self.release(claim, until),
            None => {
                drop(claim);
                Ok(())
            }
        }
    }

    /// Writes the final reservation (the end of the last tick issued) and gives the node ID
    /// up.
    ///
    /// # Errors
    ///
    /// As [`NodeStore::extend`]; the claim is given up even when the write fails.
    fn release(&self, claim: Claim, until_ms: u64) -> Result<(), Error>;
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// A store that implements only what it must: the defaults do the rest.
    #[derive(Debug, Default)]
    struct Minimal {
        released: Mutex<Vec<(u64, u64)>>,
    }

    impl NodeStore for Minimal {
        fn describe(&self) -> String {
            "minimal".into()
        }
        fn claim(&self, _: &Layout, _: NodeRequest) -> Result<Claim, Error> {
            unreachable!("not claimed through")
        }
        fn extend(&self, _: &Claim, _: u64) -> Result<(), Error> {
            Ok(())
        }
        fn renew(&self, _: &Claim) -> Result<Option<Duration>, Error> {
            Ok(None)
        }
        fn release(&self, claim: Claim, until_ms: u64) -> Result<(), Error> {
            self.released.lock().unwrap().push((claim.node(), until_ms));
            Ok(())
        }
    }

    #[test]
    fn the_defaults_read_again_what_the_claim_read_and_abandon_without_a_new_record() {
        let store = Minimal::default();
        assert_eq!(store.check_interval(), DEFAULT_CHECK_INTERVAL);
        // Read again: what the claim read, a record or none (evidence included).
        let recorded = Claim::new(1, Some(1_700_000_000_123), ());
        assert_eq!(
            store.reservation(&recorded).unwrap(),
            Some(1_700_000_000_123)
        );
        assert_eq!(store.reservation(&Claim::new(2, None, ())).unwrap(), None);
        let evidence = Claim::new(3, Some(1_700_000_000_456), ()).evidence_only();
        assert_eq!(
            store.reservation(&evidence).unwrap(),
            Some(1_700_000_000_456)
        );
        // A write-back does nothing; an abandon writes back what the claim read, and a node
        // that had no record is dropped without one.
        store.restore(&recorded, 1_800_000_000_000).unwrap();
        store.abandon(recorded).unwrap();
        store.abandon(Claim::new(2, None, ())).unwrap();
        assert_eq!(*store.released.lock().unwrap(), [(1, 1_700_000_000_123)]);
    }
}
