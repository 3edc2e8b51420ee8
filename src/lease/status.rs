//! What the keeper knows of the lease, for the generator's refusals and for statistics, and
//! the conversions between store times (Unix ms) and ticks.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::generator::Refusal;
use crate::sync::{AtomicBool, AtomicU64, Ordering};
use crate::{Error, Layout, Stats};

/// The fewest milliseconds subtracted from a lease's validity, to cover a coarse clock's lag.
const DEADLINE_MARGIN_MS: u64 = 2;

/// What the hot path needs to explain a refusal; written by the keeper.
#[derive(Debug)]
pub(crate) struct LeaseStatus {
    pub(crate) store: String,
    // Ordering: Relaxed; status words read only to word an error.
    pub(crate) deadline_ms: AtomicU64,
    pub(crate) released: AtomicBool,
    pub(crate) last_error: Mutex<Option<String>>,
    pub(crate) reservation_writes: AtomicU64,
    pub(crate) reservation_failures: AtomicU64,
    pub(crate) renewals: AtomicU64,
    pub(crate) losses: AtomicU64,
}

impl LeaseStatus {
    pub(crate) fn new(store: String) -> Self {
        LeaseStatus {
            store,
            deadline_ms: AtomicU64::new(u64::MAX),
            released: AtomicBool::new(false),
            last_error: Mutex::new(None),
            reservation_writes: AtomicU64::new(0),
            reservation_failures: AtomicU64::new(0),
            renewals: AtomicU64::new(0),
            losses: AtomicU64::new(0),
        }
    }

    /// Adds the store's counters to a snapshot.
    pub(crate) fn fill(&self, stats: &mut Stats) {
        stats.reservation_writes = self.reservation_writes.load(Ordering::Relaxed);
        stats.reservation_failures = self.reservation_failures.load(Ordering::Relaxed);
        stats.lease_renewals = self.renewals.load(Ordering::Relaxed);
        stats.lease_losses = self.losses.load(Ordering::Relaxed);
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
}

impl Refusal for LeaseStatus {
    /// The error for a refused call: `deadline_passed` when the clock reached the lease
    /// deadline, otherwise the reservation ran out.
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
/// A duration in whole milliseconds, saturating at `u64::MAX`.
pub(crate) fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The first tick that starts at or after `unix_ms`.
pub(crate) fn first_tick_from(layout: &Layout, unix_ms: u64) -> u64 {
    let since = unix_ms.saturating_sub(layout.epoch_ms());
    since.div_ceil(layout.tick_ms())
}

/// The deadline of a claim renewed at `start_ms` and valid for `valid`, in Unix ms, with the
/// margin taken off.
pub(crate) fn deadline_ms(start_ms: u64, valid: Duration) -> u64 {
    let valid_ms = duration_ms(valid);
    start_ms
        .saturating_add(valid_ms)
        .saturating_sub(DEADLINE_MARGIN_MS)
}

/// The first clock tick at which a lease with this deadline may no longer issue: the tick
/// holding the deadline (so every ID is issued before it). `u64::MAX` for no deadline.
pub(crate) fn deadline_tick(layout: &Layout, deadline_ms: u64) -> u64 {
    if deadline_ms == u64::MAX {
        u64::MAX
    } else {
        layout.tick_at(deadline_ms)
    }
}

/// The last tick that starts before `until_ms` (0 when none does).
pub(crate) fn last_tick_before(layout: &Layout, until_ms: u64) -> u64 {
    first_tick_from(layout, until_ms).saturating_sub(1)
}
