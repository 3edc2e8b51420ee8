//! What the keeper knows of the lease, mirrored from its [`Holder`](super::handover::Holder)
//! for the generator's refusals, and the lease's statistics.

use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::generator::Refusal;
use crate::sync::{AtomicBool, AtomicU64, Ordering};
use crate::{BlockedOn, Error, Stats};

/// The shortest wait a caller is told to take for the keeper to extend the reservation.
const MIN_RETRY: Duration = Duration::from_micros(200);

/// How the keeper is told to stop, or to run a round at once.
#[derive(Debug, Default)]
pub(crate) struct KeeperSignal {
    flags: Mutex<Flags>,
    cond: Condvar,
    /// A wake is pending: callers that find it set need not lock.
    // Ordering: Relaxed; a hint that saves a lock, the mutex carries the real flag.
    pending: AtomicBool,
}

#[derive(Debug, Default)]
struct Flags {
    stop: bool,
    wake: bool,
}

/// What ended a keeper's wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wakeup {
    Stop,
    Round,
}

impl KeeperSignal {
    /// Tells the keeper to stop.
    pub(crate) fn stop(&self) {
        self.flags
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .stop = true;
        self.cond.notify_all();
    }

    /// Asks the keeper for a round now (the clock moved past the reservation).
    pub(crate) fn wake(&self) {
        if self.pending.swap(true, Ordering::Relaxed) {
            return;
        }
        self.flags
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .wake = true;
        self.cond.notify_all();
    }

    /// Waits up to `timeout` for a stop or a wake.
    pub(crate) fn wait(&self, timeout: Duration) -> Wakeup {
        let mut flags = self.flags.lock().unwrap_or_else(PoisonError::into_inner);
        if !flags.stop && !flags.wake {
            flags = self
                .cond
                .wait_timeout(flags, timeout)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        if flags.stop {
            return Wakeup::Stop;
        }
        flags.wake = false;
        self.pending.store(false, Ordering::Relaxed);
        Wakeup::Round
    }
}

/// What the hot path needs to explain a refusal; written by the keeper.
#[derive(Debug)]
pub(crate) struct LeaseStatus {
    pub(crate) store: String,
    pub(crate) signal: KeeperSignal,
    /// How long the keeper's last round with the store took (renewal and reservation write),
    /// in microseconds: what a caller refused for a reservation not yet written waits.
    pub(crate) round_us: AtomicU64,
    /// Where the monotonic clock of the deadline starts.
    origin: Instant,
    /// The lease's deadline on the monotonic clock (µs since `origin`): `u64::MAX` for a claim
    /// that lasts as long as the process, 0 once lost for good. Kept on `Instant`, not on the
    /// generator's clock, so that a forward step of that clock is not mistaken for a lost
    /// lease, and its slewing cannot stretch the lease.
    // Ordering: Relaxed, status words read only to word an error or by the keeper itself;
    // but the store of 0 in `lose` is Release and `lost_at` loads with Acquire, so that a
    // refusal that sees the loss sees the reason `lose` wrote before it.
    deadline_us: AtomicU64,
    /// The confirm bound ([`confirm_bound`]), µs: for the words of a refusal.
    bound_us: u64,
    pub(crate) released: AtomicBool,
    pub(crate) last_error: Mutex<Option<String>>,
    /// Why the store said the claim is gone, once it did ([`LeaseStatus::lose`]).
    lost_reason: Mutex<Option<String>>,
    pub(crate) reservation_writes: AtomicU64,
    pub(crate) reservation_failures: AtomicU64,
    pub(crate) renewals: AtomicU64,
    pub(crate) losses: AtomicU64,
    /// Free nodes passed over at the claim because their reservation was too far ahead.
    pub(crate) skipped_ahead: AtomicU64,
    /// How far ahead of the clock the furthest skipped node's reservation was, in ms.
    pub(crate) sorts_below_ms: AtomicU64,
    /// Nodes passed over at the claim because their records could not be used.
    pub(crate) skipped_unusable: AtomicU64,
    /// How long the claim waited for a reservation slightly ahead of the clock, in ms.
    pub(crate) claim_wait_ms: AtomicU64,
    /// The store's caveats ([`crate::Caveat`]), as found at the build.
    pub(crate) anchors_unused: AtomicBool,
    pub(crate) other_network_namespace: AtomicBool,
}

impl LeaseStatus {
    /// The status of a claim on `store`, whose holder checks the claim every `check`.
    pub(crate) fn new(store: String, check: Duration) -> Self {
        LeaseStatus {
            store,
            signal: KeeperSignal::default(),
            round_us: AtomicU64::new(0),
            origin: Instant::now(),
            deadline_us: AtomicU64::new(u64::MAX),
            bound_us: u64::try_from(confirm_bound(check).as_micros()).unwrap_or(u64::MAX),
            released: AtomicBool::new(false),
            last_error: Mutex::new(None),
            lost_reason: Mutex::new(None),
            reservation_writes: AtomicU64::new(0),
            reservation_failures: AtomicU64::new(0),
            renewals: AtomicU64::new(0),
            losses: AtomicU64::new(0),
            skipped_ahead: AtomicU64::new(0),
            sorts_below_ms: AtomicU64::new(0),
            skipped_unusable: AtomicU64::new(0),
            claim_wait_ms: AtomicU64::new(0),
            anchors_unused: AtomicBool::new(false),
            other_network_namespace: AtomicBool::new(false),
        }
    }

    /// Now on the deadline's monotonic clock, in µs.
    pub(crate) fn mono_us(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_micros()).unwrap_or(u64::MAX - 1)
    }

    /// Whether the lease is lost at monotonic time `mono_us`.
    pub(crate) fn lost_at(&self, mono_us: u64) -> bool {
        mono_us >= self.deadline_us.load(Ordering::Acquire)
    }

    /// Mirrors the holder's lease deadline (µs on the monotonic clock; `u64::MAX` for none,
    /// 0 once lost), which refusals compare with.
    pub(crate) fn set_deadline_us(&self, deadline_us: u64) {
        // Ordering: Release, as `lose`'s store of 0 (see the field).
        self.deadline_us.store(deadline_us, Ordering::Release);
    }

    /// The lease is lost for good: the store said so, for `reason` (the first reason given
    /// is kept).
    pub(crate) fn lose(&self, reason: &str) {
        self.lost_reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(|| reason.to_owned());
        self.deadline_us.store(0, Ordering::Release);
    }

    /// Adds the store's counters to a snapshot.
    pub(crate) fn fill(&self, stats: &mut Stats) {
        stats.reservation_writes = self.reservation_writes.load(Ordering::Relaxed);
        stats.reservation_failures = self.reservation_failures.load(Ordering::Relaxed);
        stats.lease_renewals = self.renewals.load(Ordering::Relaxed);
        stats.lease_losses = self.losses.load(Ordering::Relaxed);
        stats.nodes_skipped_ahead = self.skipped_ahead.load(Ordering::Relaxed);
        stats.sorts_below_ms = self.sorts_below_ms.load(Ordering::Relaxed);
        stats.nodes_skipped_unusable = self.skipped_unusable.load(Ordering::Relaxed);
        stats.claim_wait_ms = self.claim_wait_ms.load(Ordering::Relaxed);
        stats.anchors_unused = self.anchors_unused.load(Ordering::Relaxed);
        stats.other_network_namespace = self.other_network_namespace.load(Ordering::Relaxed);
    }

    pub(crate) fn count(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn record(&self, e: Option<&Error>) {
        *self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = e.map(Error::to_string);
    }

    /// The reason the store gave when it said the claim is gone, if it has.
    fn lost_reason(&self) -> Option<String> {
        self.lost_reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// A refusal that only needs the keeper to run a round now: wake it and wait about one
    /// round with the store.
    fn wait_for_keeper(&self) -> Error {
        self.signal.wake();
        let round = Duration::from_micros(self.round_us.load(Ordering::Relaxed));
        Error::WouldBlock {
            retry_after: round.max(MIN_RETRY),
            blocked_on: BlockedOn::LeaseKeeper,
        }
    }
}

impl Refusal for LeaseStatus {
    /// The error for a refused call: `deadline_passed` when the generator's clock reached the
    /// fence's deadline, otherwise the reservation ran out.
    fn refusal(&self, node: u64, deadline_passed: bool) -> Error {
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
        // The store said the claim is gone: its reason, whichever word of the fence refused
        // first (the keeper closes both at the end of the round that found it).
        let lost = self.lost_reason();
        if let Some(reason) = lost {
            return Error::LeaseLost { node, reason };
        }
        if deadline_passed {
            if !self.lost_at(self.mono_us()) {
                // The lease is still valid, but the fence's deadline came: either the claim
                // has not been confirmed within `confirm_bound` (the store failing, or the
                // keeper held up), or the generator's clock stepped forward past it. The keeper
                // checks the claim and recomputes the fence.
                if let Some(reason) = last {
                    self.signal.wake();
                    return Error::ReservationUnavailable {
                        node,
                        reason: format!(
                            "the claim with {} has not been confirmed for {} ms: {reason}",
                            self.store,
                            self.bound_us / 1000
                        ),
                    };
                }
                return self.wait_for_keeper();
            }
            // The keeper may have found the claim lost since `lost_reason` was read above: its
            // reason, then, not the validity's (`lose` writes it before the deadline).
            if let Some(reason) = self.lost_reason() {
                return Error::LeaseLost { node, reason };
            }
            let why = last.unwrap_or_else(|| "no renewal succeeded".into());
            return Error::LeaseLost {
                node,
                reason: format!("not renewed with {} within its validity: {why}", self.store),
            };
        }
        match last {
            // The store failed: say so.
            Some(reason) => Error::ReservationUnavailable { node, reason },
            // The store is healthy and the clock simply moved past the reservation (a forward
            // step, or the keeper ran late): have the keeper extend it now.
            None => self.wait_for_keeper(),
        }
    }
}

/// How long a holder may go on issuing after the start of a check that found its claim
/// standing: the protocol's [`confirm_bound_ms`](super::handover::confirm_bound_ms) — twice
/// the store's check interval (the keeper checks once per interval, so a keeper late by up to
/// one interval does not stop issuing) — kept to the microsecond here. The successor of a
/// node with **no record** relies on it ([`unrecorded_wait_ms`](super::handover::unrecorded_wait_ms)).
pub(crate) fn confirm_bound(check: Duration) -> Duration {
    check.saturating_mul(2)
}

/// A duration in whole milliseconds, saturating at `u64::MAX`.
pub(crate) fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
