//! What a generator has been doing, as counters a person can act on.

use std::fmt;

use crate::sync::{AtomicU64, Ordering};

/// A snapshot of a generator's counters, from [`Generator::stats`](crate::Generator::stats)
/// (and [`PerCore::stats`](crate::PerCore::stats), [`Leased::stats`](crate::Leased::stats)).
///
/// * `borrowed_ticks` and `max_lead_ticks` grow when the sequence fills faster than the clock
///   ticks. When even the lead runs out, a call that does not wait (`try_next_id`,
///   `try_next_ids`) returns [`Error::WouldBlock`](crate::Error::WouldBlock)
///   (`would_block_returned`), and a call that waits (`next_id`, `next_ids`) spins, yields or
///   sleeps and tries again (`waiting_calls`, `wait_spins`, `wait_yields`, `wait_sleeps`;
///   `timed_out` when it gave up). Often in normal operation: a layout with more sequence
///   bits, or more nodes, would serve the load.
/// * `reanchors`, `skew_ns`, `max_skew_ns` and `slew_left_ns` come from the clock: a large
///   skew means the monotonic clock drifted, the host slept, or the wall clock was stepped; the
///   clock steps forward to the wall clock and slews back to it (see
///   [`LockedClock`](crate::LockedClock)).
/// * The node, reservation and lease counters come from the node store, when the generator is
///   leased.
///
/// Which calls move each counter is said on each field. A compare-exchange lost to another
/// thread (which waits 2 µs before it tries again) is not counted: the count would be one more
/// write on the contended path.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use monoflake::{Error, Generator, Layout, ManualClock};
///
/// // Two IDs per tick, no lead, a clock that stands still: the third call must wait.
/// let layout = Layout::builder().epoch_ms(1_288_834_974_657).sequence_bits(1).build()?;
/// let generator = Generator::builder(layout)
///     .clock(ManualClock::new(1_700_000_000_000))
///     .max_lead(Duration::ZERO)
///     .max_wait(Duration::from_millis(1))
///     .build()?;
/// generator.next_id()?;
/// generator.next_id()?;
/// assert!(matches!(generator.try_next_id(), Err(Error::WouldBlock { .. })));
/// assert!(matches!(generator.next_id(), Err(Error::TimedOut { .. })));
/// let stats = generator.stats();
/// assert_eq!((stats.issued, stats.would_block_returned), (2, 1));
/// assert_eq!((stats.waiting_calls, stats.timed_out), (1, 1));
/// assert_eq!(
///     stats.wait_retries,
///     stats.wait_spins + stats.wait_yields + stats.wait_sleeps
/// );
/// println!("{stats}");
/// # Ok::<(), monoflake::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// IDs issued (by every call).
    pub issued: u64,
    /// Ticks entered ahead of the clock because the sequence was full (by any issuing call).
    pub borrowed_ticks: u64,
    /// The furthest the time field ran ahead of the clock, in ticks.
    pub max_lead_ticks: u64,
    /// [`Error::WouldBlock`](crate::Error::WouldBlock) returned to callers: by `try_next_id`
    /// and `try_next_ids` at the lead limit, or while a leased generator's next reservation is
    /// being written. The waiting calls never return it (their retries are counted below).
    pub would_block_returned: u64,
    /// Calls of `next_id` and `next_ids` that met the lead limit (or a reservation being
    /// written) and waited, whatever came of it.
    pub waiting_calls: u64,
    /// The tries those waiting calls made again: one after each spin, yield and sleep
    /// (`wait_spins + wait_yields + wait_sleeps`).
    pub wait_retries: u64,
    /// Busy-waits of the waiting calls: for a slot that opens within 20 µs (at the lead limit
    /// each ID's slot opens at its own time), or the first few steps of the back-off.
    pub wait_spins: u64,
    /// Times the waiting calls yielded their thread (the back-off after the spins).
    pub wait_yields: u64,
    /// Sleeps taken by the waiting calls (at least 50 µs each), once spinning and yielding are
    /// used up.
    pub wait_sleeps: u64,
    /// Waiting calls that gave up after `max_wait` with [`Error::TimedOut`](crate::Error::TimedOut).
    pub timed_out: u64,
    /// Times the clock stepped forward to the wall clock.
    pub reanchors: u64,
    /// The largest difference seen between the clock and the wall clock, in nanoseconds.
    pub max_skew_ns: u64,
    /// Wall clock minus the generator's clock at its last comparison, in nanoseconds (negative:
    /// the generator's clock is ahead and slews back).
    pub skew_ns: i64,
    /// Lead over the wall clock still being slewed away, in nanoseconds (0: not slewing).
    pub slew_left_ns: u64,
    /// How far the wall clock was ahead of the generator's clock at its last comparison and
    /// not followed, in nanoseconds: a leased generator on a store with a clock of its own
    /// follows the wall clock forward only as far as the store's clock confirms
    /// ([`ClockReport::held_back_ns`](crate::ClockReport::held_back_ns); docs/operations.md,
    /// "Clock stepped forward while running"). Not 0 for long means this host's wall clock
    /// (or the store's) is wrong.
    pub clock_held_back_ns: u64,
    /// Free nodes passed over when claiming any node because their time reservation was
    /// further ahead of the clock than the tolerance (see
    /// [`GeneratorBuilder::future_reservation_tolerance`](crate::GeneratorBuilder::future_reservation_tolerance)).
    pub nodes_skipped_ahead: u64,
    /// How far this generator's IDs may sort below IDs issued earlier in the same store, in
    /// milliseconds: the furthest a skipped node's reservation (the end of what its holders
    /// issued, or reserved) was ahead of the clock when this generator was built. Not 0 means
    /// this clock is behind what the store saw before — the clock was set back since, or an
    /// earlier holder's was ahead — and this generator took another node rather than wait
    /// that long: its IDs are unique, but sort below IDs issued up to this long ago. Said
    /// once as a `tracing` warning (feature `tracing`), and on standard error by the command
    /// line.
    pub sorts_below_ms: u64,
    /// Nodes passed over when claiming any node because their records could not be used: a
    /// damaged or untrusted reservation, a lock file that is a directory or a link (the final
    /// error names them when no node is left).
    pub nodes_skipped_unusable: u64,
    /// How long building the leased generator waited, in milliseconds: for a reservation
    /// more than `max_lead` ahead of the clock, for a node with no record, and between
    /// searches that met another claimant (see "What a build waits for" under
    /// [`GeneratorBuilder::build_leased`](crate::GeneratorBuilder::build_leased)).
    pub claim_wait_ms: u64,
    /// Reservations written to the node store.
    pub reservation_writes: u64,
    /// Reservation writes that failed.
    pub reservation_failures: u64,
    /// Successful lease renewals.
    pub lease_renewals: u64,
    /// Leases lost (renewal refused, or the deadline passed without one).
    pub lease_losses: u64,
    /// The node store could not use the host's anchors in `/var/tmp`
    /// ([`Caveat::AnchorsUnused`](crate::Caveat::AnchorsUnused)): said once as a `tracing`
    /// warning, and on standard error by the command line.
    pub anchors_unused: bool,
    /// This process is in a network namespace other than the host's, out of the reach of
    /// the file store's host-wide claim
    /// ([`Caveat::OtherNetworkNamespace`](crate::Caveat::OtherNetworkNamespace)).
    pub other_network_namespace: bool,
}

impl fmt::Display for Stats {
    /// One line, e.g. `issued 10, borrowed ticks 0 (max lead 0), would-block returned 0,
    /// waiting calls 0 (retries 0: spins 0, yields 0, sleeps 0; timed out 0), ...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "issued {}, borrowed ticks {} (max lead {}), would-block returned {}, waiting \
             calls {} (retries {}: spins {}, yields {}, sleeps {}; timed out {}), forward \
             steps {} (skew {} µs, max {} µs, slewing {} µs, held back {} µs), nodes skipped ahead {} \
             (sorting below by up to {} ms; unusable {}), claim wait {} ms, reservation writes {} (failed {}), lease renewals \
             {} (lost {}){}{}",
            self.issued,
            self.borrowed_ticks,
            self.max_lead_ticks,
            self.would_block_returned,
            self.waiting_calls,
            self.wait_retries,
            self.wait_spins,
            self.wait_yields,
            self.wait_sleeps,
            self.timed_out,
            self.reanchors,
            self.skew_ns / 1000,
            self.max_skew_ns / 1000,
            self.slew_left_ns / 1000,
            self.clock_held_back_ns / 1000,
            self.nodes_skipped_ahead,
            self.sorts_below_ms,
            self.nodes_skipped_unusable,
            self.claim_wait_ms,
            self.reservation_writes,
            self.reservation_failures,
            self.lease_renewals,
            self.lease_losses,
            if self.anchors_unused {
                ", caveat: the host's anchors unused"
            } else {
                ""
            },
            if self.other_network_namespace {
                ", caveat: another network namespace"
            } else {
                ""
            }
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
    pub would_block_returned: AtomicU64,
    pub waiting_calls: AtomicU64,
    pub wait_spins: AtomicU64,
    pub wait_yields: AtomicU64,
    pub wait_sleeps: AtomicU64,
    pub timed_out: AtomicU64,
    /// What a state of `u64::MAX` stands for: the last state value issued before the
    /// generator was sealed, or `u64::MAX` itself until then. On a layout whose time and
    /// sequence fields fill all 64 bits, the field's very last value is `u64::MAX` too, and
    /// stays so when a generator that issued it is sealed (the seal stores nothing then).
    pub sealed_state: AtomicU64,
}

impl Counters {
    pub(crate) fn new() -> Self {
        Counters {
            skipped: AtomicU64::new(0),
            borrowed_ticks: AtomicU64::new(0),
            max_lead_ticks: AtomicU64::new(0),
            would_block_returned: AtomicU64::new(0),
            waiting_calls: AtomicU64::new(0),
            wait_spins: AtomicU64::new(0),
            wait_yields: AtomicU64::new(0),
            wait_sleeps: AtomicU64::new(0),
            timed_out: AtomicU64::new(0),
            sealed_state: AtomicU64::new(u64::MAX),
        }
    }

    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}
