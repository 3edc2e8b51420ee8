//! What a generator has been doing, as counters a person can act on.

use std::fmt;

use crate::sync::{AtomicU64, Ordering};

/// A snapshot of a generator's counters, from [`Generator::stats`](crate::Generator::stats).
///
/// * `borrowed_ticks` and `max_lead_ticks` grow when the sequence fills faster than the clock
///   ticks; `would_block` and `waits` when even the lead ran out — a sign to pick a layout with
///   more sequence bits, or to spread load over more nodes.
/// * `reanchors`, `skew_ns`, `max_skew_ns` and `slew_left_ns` come from the clock: a large
///   skew means the monotonic clock drifted, the host slept, or the wall clock was stepped; the
///   clock steps forward to the wall clock and slews back to it (see
///   [`LockedClock`](crate::LockedClock)).
/// * The reservation and lease counters come from the node store, when the generator is leased.
///
/// # Example
///
/// ```
/// let generator = monoflake::Generator::new(monoflake::Layout::twitter(), 1)?;
/// for _ in 0..10 {
///     generator.next_id()?;
/// }
/// let stats = generator.stats();
/// assert_eq!(stats.issued, 10);
/// println!("{stats}");
/// # Ok::<(), monoflake::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// IDs issued.
    pub issued: u64,
    /// Ticks entered ahead of the clock because the sequence was full.
    pub borrowed_ticks: u64,
    /// The furthest the time field ran ahead of the clock, in ticks.
    pub max_lead_ticks: u64,
    /// Calls refused with `WouldBlock` (the lead limit reached).
    pub would_block: u64,
    /// Sleeps taken by the waiting calls (`next_id`, `next_ids`).
    pub waits: u64,
    /// Times the clock stepped forward to the wall clock.
    pub reanchors: u64,
    /// The largest difference seen between the clock and the wall clock, in nanoseconds.
    pub max_skew_ns: u64,
    /// Wall clock minus the generator's clock at its last comparison, in nanoseconds (negative:
    /// the generator's clock is ahead and slews back).
    pub skew_ns: i64,
    /// Lead over the wall clock still being slewed away, in nanoseconds (0: not slewing).
    pub slew_left_ns: u64,
    /// Free nodes passed over when claiming any node because their time reservation was
    /// further ahead of the clock than the tolerance (see
    /// [`GeneratorBuilder::future_reservation_tolerance`](crate::GeneratorBuilder::future_reservation_tolerance)).
    pub nodes_skipped_ahead: u64,
    /// Nodes passed over when claiming any node because their records could not be used: a
    /// damaged or untrusted reservation, a lock file that is a directory or a link (the final
    /// error names them when no node is left).
    pub nodes_skipped_unusable: u64,
    /// How long the claim waited for a reservation slightly ahead of the clock (a holder that
    /// crashed moments ago), in milliseconds.
    pub claim_wait_ms: u64,
    /// Reservations written to the node store.
    pub reservation_writes: u64,
    /// Reservation writes that failed.
    pub reservation_failures: u64,
    /// Successful lease renewals.
    pub lease_renewals: u64,
    /// Leases lost (renewal refused, or the deadline passed without one).
    pub lease_losses: u64,
}

impl fmt::Display for Stats {
    /// One line, e.g. `issued 10, borrowed ticks 0 (max lead 0), would-block 0, waits 0, ...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "issued {}, borrowed ticks {} (max lead {}), would-block {}, waits {}, forward steps \
             {} (skew {} µs, max {} µs, slewing {} µs), nodes skipped ahead {} (unusable {}), claim \
             wait {} ms, \
             reservation writes {} (failed {}), lease renewals {} (lost {})",
            self.issued,
            self.borrowed_ticks,
            self.max_lead_ticks,
            self.would_block,
            self.waits,
            self.reanchors,
            self.skew_ns / 1000,
            self.max_skew_ns / 1000,
            self.slew_left_ns / 1000,
            self.nodes_skipped_ahead,
            self.nodes_skipped_unusable,
            self.claim_wait_ms,
            self.reservation_writes,
            self.reservation_failures,
            self.lease_renewals,
            self.lease_losses
        )
    }
}

/// The generator's own counters, off the state's cache line and touched only off the common
/// path (a jump to a new tick, a borrow, a refusal, a wait).
// Ordering: Relaxed for all; they are statistics, each a lone value.
#[derive(Debug)]
pub(crate) struct Counters {
    /// State values passed over without being issued (jumps to a later tick).
    pub skipped: AtomicU64,
    pub borrowed_ticks: AtomicU64,
    pub max_lead_ticks: AtomicU64,
    pub would_block: AtomicU64,
    pub waits: AtomicU64,
    /// The last state value issued before the generator was sealed (0 until then).
    pub sealed_state: AtomicU64,
}

impl Counters {
    pub(crate) fn new() -> Self {
        Counters {
            skipped: AtomicU64::new(0),
            borrowed_ticks: AtomicU64::new(0),
            max_lead_ticks: AtomicU64::new(0),
            would_block: AtomicU64::new(0),
            waits: AtomicU64::new(0),
            sealed_state: AtomicU64::new(0),
        }
    }

    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}
