//! The hand-over protocol's decisions, as pure functions: no I/O, no threads, no sleeping,
//! time passed in (Unix ms of the caller's clock, unless said otherwise).
//!
//! A node passes from one holder to the next through its records in a
//! [`NodeStore`](crate::NodeStore). Every leased generator — a [`Leased`](crate::Leased) or a
//! leased [`PerThread`](crate::PerThread), on the file store, etcd or PostgreSQL — makes its
//! decisions here and nowhere else; the stores only carry the reads and writes, and merge
//! what they read with [`reservation_of`] and what a lost holder writes back with
//! [`restored`]. The model checker (`handover-check` in this workspace) drives these very
//! functions through every interleaving of a few holders and claimants, with records deleted
//! or lost, clocks stepped both ways, pauses and crashes, and asserts that no tick is issued
//! twice. docs/design.md, "The hand-over", is the protocol in words and the argument for
//! uniqueness.
//!
//! The steps, in order:
//!
//! 1. **Claim** the node; the store reads its record in the same atomic step.
//!    [`after_claim`] decides: take it, wait, jump the clock to a trusted reservation, or
//!    refuse.
//! 2. **Wait** what [`after_claim`] said. A node with no record waits [`unrecorded_wait_ms`]
//!    — a holder whose records were deleted under it issues for at most
//!    [`confirm_bound_ms`] after its last check — then **re-reads** the record, which such a
//!    holder writes back once it finds its claim lost. On a store with a clock of its own
//!    (PostgreSQL) it also starts above [`store_floor_ms`] of that clock at its claim, which
//!    needs no write-back: a holder stopped with its clock ahead is covered too.
//! 3. **Start** above [`start_floor_ms`], write the first reservation, confirm the claim.
//! 4. **Hold**: each keeper round renews the claim and extends the reservation when
//!    [`extension`] says so; the fence issues only ticks before the reservation and before
//!    [`confirm_bound_ms`] after the last check that found the claim standing. A store with a
//!    clock of its own confirms a check only when [`clock_lead_refused`] finds the holder's
//!    clock not too far ahead of it.
//! 5. **Lose**: a holder that finds its claim gone seals its generator and writes back
//!    [`final_reservation`] beside whatever is there (the store keeps the larger, [`restored`]).
//! 6. **Release** with [`final_reservation`], or **give back** a node that issued nothing:
//!    [`give_back`] writes nothing, so the next claimant of a node with no record still waits
//!    and re-reads.
//!
//! ```
//! use monoflake::handover::{Limits, Step, after_claim, after_wait};
//! let limits = Limits { max_lead_ms: 5, tolerance_ms: 5_005, unrecorded_wait_ms: 250, trust: false };
//! // A node with no record: wait, then read its record again.
//! assert_eq!(after_claim(None, false, 1_000, &limits), Step::WaitThenReread { ms: 250 });
//! // After the wait (at 1,250) a holder's write-back turned up: start above it and the
//! // wait's floor.
//! assert_eq!(after_wait(Some(1_254), 1_000, 1_250, &limits), Step::Start { floor_ms: 1_255 });
//! ```

mod holder;
mod ticks;
mod words;

pub use self::holder::Holder;
pub use self::ticks::{deadline_tick, end_of_tick, first_tick_from, last_tick_before};
pub use self::words::{
    Action, ClaimRead, Event, Failure, LetGo, Loss, Now, Outcome, StoreReading, Terms,
};
pub use super::shape::{from_stored, to_stored};
pub use crate::generator::fence_refuses;

/// What a build may wait for and accept, in ms.
///
/// ```
/// let limits = monoflake::handover::Limits {
///     max_lead_ms: 5,
///     tolerance_ms: 5_005,
///     unrecorded_wait_ms: 250,
///     trust: false,
/// };
/// assert!(!limits.trust);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The generator's `max_lead`: a reservation this far ahead of the clock is issued past
    /// at once.
    pub max_lead_ms: u64,
    /// The furthest ahead of the clock a reservation may be and be waited out.
    pub tolerance_ms: u64,
    /// What a node with no record waits: [`unrecorded_wait_ms`] of the store's check
    /// interval.
    pub unrecorded_wait_ms: u64,
    /// Whether a reservation beyond the tolerance is trusted: the clock jumps to it.
    pub trust: bool,
}

/// What taking a node costs a build. Ordered: any wait before a trusted jump of the clock
/// (which stamps IDs with a time ahead of the real one), shorter waits first.
///
/// ```
/// use monoflake::handover::Cost;
/// assert!(Cost::Wait(10_000) < Cost::Jump(1));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Cost {
    /// The build waits this many ms (0: none).
    Wait(u64),
    /// The reservation is beyond the tolerance and trusted: no wait, the clock jumps this many
    /// ms ahead.
    Jump(u64),
}

/// What a claimant does next.
///
/// ```
/// use monoflake::handover::{Limits, Step, after_claim};
/// let limits = Limits { max_lead_ms: 5, tolerance_ms: 100, unrecorded_wait_ms: 250, trust: false };
/// assert_eq!(after_claim(Some(1_000), true, 1_000, &limits), Step::Start { floor_ms: 1_000 });
/// assert_eq!(after_claim(Some(1_050), true, 1_000, &limits), Step::WaitThenStart { ms: 45, floor_ms: 1_050 });
/// assert_eq!(after_claim(Some(9_000), true, 1_000, &limits), Step::Refuse { ahead_ms: 8_000 });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// Issue from the first tick starting at or after `floor_ms` (and not before the clock).
    Start {
        /// No tick starting before this Unix ms may be issued.
        floor_ms: u64,
    },
    /// Wait `ms` (renewing the claim meanwhile), then start above `floor_ms`: the node's
    /// reservation is more than `max_lead` ahead of the clock.
    WaitThenStart {
        /// How long, in ms.
        ms: u64,
        /// The reservation read.
        floor_ms: u64,
    },
    /// The node has no record: wait `ms`, read the record again ([`after_wait`]).
    WaitThenReread {
        /// How long, in ms: [`Limits::unrecorded_wait_ms`].
        ms: u64,
    },
    /// A trusted reservation beyond the tolerance: move the clock forward to `to_ms`, start
    /// there.
    Jump {
        /// The reservation, in Unix ms.
        to_ms: u64,
    },
    /// The reservation is further ahead than the tolerance and not trusted: give the node
    /// back ([`give_back`]) and refuse ([`Error::ReservationAhead`](crate::Error::ReservationAhead)),
    /// or, searching for any node, pass it over.
    Refuse {
        /// How far ahead of the clock, in ms.
        ahead_ms: u64,
    },
}

/// How far the reservation `read` is ahead of `now_ms` (0 for none, or one passed).
///
/// ```
/// assert_eq!(monoflake::handover::ahead_ms(Some(1_500), 1_000), 500);
/// assert_eq!(monoflake::handover::ahead_ms(None, 1_000), 0);
/// ```
pub fn ahead_ms(read: Option<u64>, now_ms: u64) -> u64 {
    read.map_or(0, |until| until.saturating_sub(now_ms))
}

/// What taking a node whose records read `read` costs at `now_ms`, or `None` when it may not
/// be taken (a reservation beyond the tolerance, not trusted). `recorded`: whether the node's
/// own reservation record was there — not only evidence beside it (a lost holder's
/// write-back, the file store's host anchor). A node without its own record costs the
/// unrecorded wait whatever the evidence says: its records may have been deleted under a
/// live holder, and a write-back from an earlier holder says nothing about that one.
///
/// ```
/// use monoflake::handover::{Cost, Limits, cost};
/// let limits = Limits { max_lead_ms: 5, tolerance_ms: 100, unrecorded_wait_ms: 250, trust: true };
/// assert_eq!(cost(None, false, 1_000, &limits), Some(Cost::Wait(250)));
/// assert_eq!(cost(Some(1_003), true, 1_000, &limits), Some(Cost::Wait(0)));
/// assert_eq!(cost(Some(1_003), false, 1_000, &limits), Some(Cost::Wait(250)));
/// // Evidence beyond the tolerance: as a record there, skipped unless trusted.
/// assert_eq!(cost(Some(2_000), false, 1_000, &limits), Some(Cost::Jump(1_000)));
/// assert_eq!(cost(Some(2_000), true, 1_000, &limits), Some(Cost::Jump(1_000)));
/// ```
pub fn cost(read: Option<u64>, recorded: bool, now_ms: u64, limits: &Limits) -> Option<Cost> {
    #[cfg(monoflake_mutant_evidence_as_record)]
    let recorded = recorded || read.is_some();
    // Evidence counts as a record does for how far ahead the start may be: a claim never
    // starts further ahead of the clock than the tolerance, whatever it read.
    let ahead = ahead_ms(read, now_ms);
    if ahead > limits.tolerance_ms {
        return limits.trust.then_some(Cost::Jump(ahead));
    }
    let wait = ahead.saturating_sub(limits.max_lead_ms);
    if read.is_none() || !recorded {
        return Some(Cost::Wait(wait.max(limits.unrecorded_wait_ms)));
    }
    Some(Cost::Wait(wait))
}

/// What a claimant does with a node just claimed whose records read `read` (the store's
/// [`reservation_of`] its records), at `now_ms`; `recorded` as for [`cost`]: without the
/// node's own record it waits and re-reads, whatever evidence it found.
///
/// ```
/// use monoflake::handover::{Limits, Step, after_claim};
/// let limits = Limits { max_lead_ms: 5, tolerance_ms: 100, unrecorded_wait_ms: 250, trust: true };
/// assert_eq!(after_claim(Some(2_000), true, 1_000, &limits), Step::Jump { to_ms: 2_000 });
/// assert_eq!(after_claim(Some(990), false, 1_000, &limits), Step::WaitThenReread { ms: 250 });
/// ```
pub fn after_claim(read: Option<u64>, recorded: bool, now_ms: u64, limits: &Limits) -> Step {
    #[cfg(monoflake_mutant_evidence_as_record)]
    let recorded = recorded || read.is_some();
    let Some(cost) = cost(read, recorded, now_ms, limits) else {
        return Step::Refuse {
            ahead_ms: ahead_ms(read, now_ms),
        };
    };
    let Some(until) = read.filter(|_| recorded) else {
        // Mutant: a claimant that found no record of the node's own does not wait.
        #[cfg(monoflake_mutant_no_unrecorded_wait)]
        return Step::WaitThenReread { ms: 0 };
        #[cfg(not(monoflake_mutant_no_unrecorded_wait))]
        return Step::WaitThenReread {
            ms: limits.unrecorded_wait_ms,
        };
    };
    match cost {
        Cost::Jump(_) => Step::Jump { to_ms: until },
        Cost::Wait(0) => Step::Start { floor_ms: until },
        Cost::Wait(ms) => Step::WaitThenStart {
            ms,
            floor_ms: until,
        },
    }
}

/// Where a claimant that found no record of the node's own starts once it has waited: above
/// what the records read now (`reread`: a lost holder's write-back, the host's anchor), and
/// above what a holder whose records were deleted could have issued — its clock plus its
/// lead, up to [`confirm_bound_ms`] after a check that came before the claim: the claim's
/// time `claimed_ms` plus the wait, plus `max_lead`. Both: evidence from one earlier holder
/// says nothing of another that may still be issuing.
///
/// ```
/// use monoflake::handover::{Limits, Step, after_wait};
/// let limits = Limits { max_lead_ms: 5, tolerance_ms: 100, unrecorded_wait_ms: 250, trust: false };
/// assert_eq!(after_wait(None, 1_000, 1_250, &limits), Step::Start { floor_ms: 1_255 });
/// assert_eq!(after_wait(Some(9), 1_000, 1_250, &limits), Step::Start { floor_ms: 1_255 });
/// assert_eq!(after_wait(Some(1_300), 1_000, 1_250, &limits), Step::WaitThenStart { ms: 45, floor_ms: 1_300 });
/// // Evidence an hour ahead: refused as a record would be, never started at.
/// assert_eq!(after_wait(Some(3_601_250), 1_000, 1_250, &limits), Step::Refuse { ahead_ms: 3_600_000 });
/// ```
pub fn after_wait(reread: Option<u64>, claimed_ms: u64, now_ms: u64, limits: &Limits) -> Step {
    let floor_ms = start_floor_ms(reread, claimed_ms, limits);
    // What was read again is judged as a record would be: waited out while it is more than
    // `max_lead` ahead, refused beyond the tolerance unless trusted. (The wait's own floor,
    // `claimed_ms` plus the wait and the lead, is the clock plus the lead by now.)
    match reread.map(|r| cost(Some(r), true, now_ms, limits)) {
        Some(None) => Step::Refuse {
            ahead_ms: ahead_ms(reread, now_ms),
        },
        Some(Some(Cost::Jump(_))) => Step::Jump { to_ms: floor_ms },
        Some(Some(Cost::Wait(ms))) if ms > 0 => Step::WaitThenStart { ms, floor_ms },
        _ => Step::Start { floor_ms },
    }
}

/// The floor of [`after_wait`], in Unix ms.
///
/// ```
/// use monoflake::handover::{Limits, start_floor_ms};
/// let limits = Limits { max_lead_ms: 5, tolerance_ms: 100, unrecorded_wait_ms: 250, trust: false };
/// assert_eq!(start_floor_ms(Some(9), 1_000, &limits), 1_255);
/// ```
pub fn start_floor_ms(reread: Option<u64>, claimed_ms: u64, limits: &Limits) -> u64 {
    let unrecorded = claimed_ms
        .saturating_add(limits.unrecorded_wait_ms)
        .saturating_add(limits.max_lead_ms);
    reread.map_or(unrecorded, |until| until.max(unrecorded))
}

/// What giving back a node that issued nothing writes to its record: nothing, whatever it
/// read (`read`) and wherever it would have started (`floor_ms`). A node with a record keeps
/// it; a node with none keeps having none, so its next claimant waits and re-reads as this one
/// would have. (A give-back that wrote a record for a node that had none let the next claimant
/// skip both and start below a holder whose records had been deleted under it while its clock
/// ran ahead: millions of duplicates. The model checker's broken variant,
/// `--cfg monoflake_broken_give_back`, does exactly that.)
///
/// ```
/// assert_eq!(monoflake::handover::give_back(None, 1_355), None);
/// assert_eq!(monoflake::handover::give_back(Some(7), 1_355), None);
/// ```
pub fn give_back(read: Option<u64>, floor_ms: u64) -> Option<u64> {
    #[cfg(monoflake_broken_give_back)]
    if read.is_none() {
        return Some(floor_ms);
    }
    let _ = (read, floor_ms);
    None
}

/// A node's reservation as a store reads it: the largest of its reservation, any record a
/// lost holder wrote back ([`restored`]) and any other evidence the store keeps (the file
/// store's host anchors), or `None` when there is none.
///
/// ```
/// assert_eq!(monoflake::handover::reservation_of([Some(5), None, Some(9)]), Some(9));
/// assert_eq!(monoflake::handover::reservation_of([None, None]), None);
/// ```
pub fn reservation_of<const N: usize>(evidence: [Option<u64>; N]) -> Option<u64> {
    evidence.into_iter().flatten().max()
}

/// What a lost holder's write-back leaves beside a record that reads `existing`: never
/// lower, never replacing a higher one (a successor may have written since).
///
/// ```
/// assert_eq!(monoflake::handover::restored(Some(10), 7), 10);
/// assert_eq!(monoflake::handover::restored(None, 7), 7);
/// ```
pub fn restored(existing: Option<u64>, used_until_ms: u64) -> u64 {
    existing.map_or(used_until_ms, |e| e.max(used_until_ms))
}

/// What the file store's host anchor of a node (`/var/tmp`, one per node, bit shape and user)
/// holds after a write of `written` over `existing`. The anchor is a floor every claimant on
/// the host starts above. Only its node's host-wide claim holder writes it (`holds_host`):
/// that holder is the only one on the host who can have raised it since it took the node, so
/// its writes replace the value — a release gives back the unused rest of its own reservation
/// by writing what it used. A write without the host-wide claim (none should be made: a lost
/// holder writes back once, then lets the claim go) only ever raises it: a successor on the
/// host may have raised it since.
///
/// ```
/// use monoflake::handover::anchor_after;
/// assert_eq!(anchor_after(Some(9_000), 7_000, true), 7_000);
/// assert_eq!(anchor_after(Some(9_000), 7_000, false), 9_000);
/// assert_eq!(anchor_after(None, 7_000, false), 7_000);
/// ```
pub fn anchor_after(existing: Option<u64>, written: u64, holds_host: bool) -> u64 {
    match existing {
        Some(now) if !holds_host => now.max(written),
        _ => written,
    }
}

/// Whether a keeper round extends the reservation, and to what: when less than half a
/// window is left above the later of the clock (`now_ms`) and the end of the last tick issued
/// (`issued_end_ms`), a window above that.
///
/// ```
/// use monoflake::handover::extension;
/// assert_eq!(extension(1_400, 1_000, 1_001, 1_000), Some(2_001));
/// assert_eq!(extension(1_600, 1_000, 1_001, 1_000), None);
/// ```
pub fn extension(
    reserved_until_ms: u64,
    now_ms: u64,
    issued_end_ms: u64,
    window_ms: u64,
) -> Option<u64> {
    let base = now_ms.max(issued_end_ms);
    (reserved_until_ms < base.saturating_add(window_ms / 2)).then(|| base.saturating_add(window_ms))
}

/// What a holder writes when it lets go of a node — a release, or a write-back once its claim
/// was lost: the end of the last tick issued (`used_end_ms`), never below what its claim read
/// (`read`).
///
/// ```
/// assert_eq!(monoflake::handover::final_reservation(1_000, Some(1_200)), 1_200);
/// assert_eq!(monoflake::handover::final_reservation(1_000, None), 1_000);
/// ```
pub fn final_reservation(used_end_ms: u64, read: Option<u64>) -> u64 {
    used_end_ms.max(read.unwrap_or(0))
}

/// The tolerance a build has by default: how far ahead of its clock a node's reservation may
/// be and be waited out. What a holder killed moments ago leaves — a reservation up to a
/// window (`window_ms`) past the end of what it borrowed, `max_lead_ms` past its clock — and
/// a check interval (`check_ms`) more, for the claimant's clock behind the holder's (the
/// protocol assumes they agree within half a check interval). Beyond it a node is refused
/// (`Error::ReservationAhead`) or passed over.
///
/// ```
/// assert_eq!(monoflake::handover::default_tolerance_ms(5_000, 100, 100), 5_200);
/// ```
pub const fn default_tolerance_ms(window_ms: u64, max_lead_ms: u64, check_ms: u64) -> u64 {
    window_ms
        .saturating_add(max_lead_ms)
        .saturating_add(check_ms)
}

/// How long after the start of a check that found the claim standing a holder may go on
/// issuing: two check intervals.
///
/// ```
/// assert_eq!(monoflake::handover::confirm_bound_ms(100), 200);
/// ```
pub const fn confirm_bound_ms(check_ms: u64) -> u64 {
    check_ms.saturating_mul(2)
}

/// How long a claimant that found no record waits before it re-reads and issues: the confirm
/// bound and half a check interval more (the margin for the two parties' clocks).
///
/// ```
/// assert_eq!(monoflake::handover::unrecorded_wait_ms(100), 250);
/// ```
pub const fn unrecorded_wait_ms(check_ms: u64) -> u64 {
    confirm_bound_ms(check_ms).saturating_add(check_ms / 2)
}

/// How far a holder's clock may run ahead of a store's own clock at a check that confirms its
/// claim, by default: a quarter of a second, half of a PostgreSQL store's default check
/// interval — the margin for the two parties' clocks that [`unrecorded_wait_ms`] already
/// leaves, now enforced against the store's clock instead of assumed.
///
/// ```
/// assert_eq!(monoflake::handover::DEFAULT_MAX_CLOCK_LEAD_MS, 250);
/// ```
pub const DEFAULT_MAX_CLOCK_LEAD_MS: u64 = 250;

/// For a store with a clock of its own (PostgreSQL's `clock_timestamp()`): whether a check
/// must not confirm the claim because the holder's clock is too far ahead of the store's.
/// `holder_ms` is the holder's clock read before the check was sent (never below its reading
/// at the start of the check, which its confirm deadline counts from), `store_ms` the store's
/// clock as the check read it. Returns how far ahead the holder is when that is more than
/// `max_clock_lead_ms`; `None` when the check may confirm.
///
/// A check that does not confirm stops the holder within [`confirm_bound_ms`] of the last one
/// that did. So every check that lets a holder issue found its clock `c` at the check's start
/// at most `max_clock_lead_ms` ahead of the store's clock `d` in the check, and what it issues
/// on that check is below `c` plus [`confirm_bound_ms`] plus `max_lead`: below
/// [`store_floor_ms`] of any claim the store answers after that check (its clock read there
/// is at least `d`), whatever the holder's clock does meanwhile.
///
/// ```
/// use monoflake::handover::clock_lead_refused;
/// assert_eq!(clock_lead_refused(10_100, 10_000, 250), None);
/// assert_eq!(clock_lead_refused(10_250, 10_000, 250), None);
/// assert_eq!(clock_lead_refused(13_000, 10_000, 250), Some(3_000));
/// ```
pub fn clock_lead_refused(holder_ms: u64, store_ms: u64, max_clock_lead_ms: u64) -> Option<u64> {
    // Mutant: the holder's clock is never compared with the store's.
    if cfg!(monoflake_broken_db_lead) {
        return None;
    }
    let lead = holder_ms.saturating_sub(store_ms);
    (lead > max_clock_lead_ms).then_some(lead)
}

/// What a holder's clock ceiling keeps short of what the store's clock confirms, ms: the
/// store's and the holder's readings are each truncated to the ms, the locked clock runs up to
/// 0.1 % of its comparison interval and grace past the ceiling between comparisons, and the
/// monotonic clock the ceiling is carried on is not the clock's own counter.
///
/// ```
/// assert_eq!(monoflake::handover::CEILING_MARGIN_MS, 5);
/// ```
pub const CEILING_MARGIN_MS: u64 = 5;

/// A holder's clock ceiling after a renewal that read the store's clock `reading`, given the
/// ceiling it had (`before`: Unix ms at a monotonic µs): `(Unix ms, monotonic µs)` at the
/// renewal's return. The larger of what this reading confirms (`ms + lead_ms`, less
/// [`CEILING_MARGIN_MS`]) and the one before carried on to now ([`ceiling_ns_at`]) — both
/// bound what the next check confirms, and the larger is the tighter estimate of the store's
/// clock (etcd's `Date`, to the second, is closest to the member's clock just after a second
/// begins). See docs/design.md, "A wall clock ahead of the store's".
///
/// ```
/// use monoflake::handover::{StoreReading, clock_ceiling};
/// let r = StoreReading { ms: 10_000, lead_ms: 250, slack_ms: 0, after_mono_us: 2_000_000 };
/// assert_eq!(clock_ceiling(r, None), (10_245, 2_000_000));
/// // A ceiling of 2 s before, carried on 2 ms less (the 0.1 % it rises slower): the larger wins.
/// assert_eq!(clock_ceiling(r, Some((8_300, 0))), (10_298, 2_000_000));
/// assert_eq!(clock_ceiling(r, Some((8_200, 0))), (10_245, 2_000_000));
/// ```
pub fn clock_ceiling(reading: StoreReading, before: Option<(u64, u64)>) -> (u64, u64) {
    let at = reading.after_mono_us;
    let fresh = reading
        .ms
        .saturating_add(reading.lead_ms)
        .saturating_sub(CEILING_MARGIN_MS);
    let carried = before.map_or(0, |(ms, mono)| ceiling_ns_at(ms, mono, at) / 1_000_000);
    (fresh.max(carried), at)
}

/// A ceiling of `ms` (Unix ms) at the monotonic time `at_mono_us`, carried on to `mono_us`,
/// Unix ns: rising [`SLEW_PPM`](crate::SLEW_PPM) slower than the monotonic clock, so that it
/// stays under a store's clock that runs up to that much slower (NTP slews at most 500 ppm).
///
/// ```
/// use monoflake::handover::ceiling_ns_at;
/// assert_eq!(ceiling_ns_at(10_000, 0, 2_000_000), 11_998_000_000);
/// assert_eq!(ceiling_ns_at(10_000, 5, 3), 10_000_000_000);
/// ```
pub fn ceiling_ns_at(ms: u64, at_mono_us: u64, mono_us: u64) -> u64 {
    let since_ns = mono_us.saturating_sub(at_mono_us).saturating_mul(1_000);
    ms.saturating_mul(1_000_000)
        .saturating_add(since_ns - since_ns / (1_000_000 / crate::SLEW_PPM))
}

/// For a store with a clock of its own: the floor of a claimant that found no record of the
/// node's own, from the store's clock `store_ms` as the claim read it — above everything a
/// holder whose checks [`clock_lead_refused`] let through can have issued by then (the check
/// came before the deletion, the deletion before the claim): its clock at the check, at most
/// `max_clock_lead_ms` ahead of the store's, plus [`confirm_bound_ms`] of the check interval
/// `check_ms`, plus the lead `max_lead_ms`. In the store's clock, so no assumption about any
/// party's clock but that the store's does not go back. `None` in the broken variant
/// `--cfg monoflake_broken_db_floor`.
///
/// ```
/// use monoflake::handover::store_floor_ms;
/// assert_eq!(store_floor_ms(10_000, 500, 250, 5), Some(11_255));
/// ```
pub fn store_floor_ms(
    store_ms: u64,
    check_ms: u64,
    max_clock_lead_ms: u64,
    max_lead_ms: u64,
) -> Option<u64> {
    // Mutant: a claimant that found no record takes no floor from the store's clock.
    if cfg!(monoflake_broken_db_floor) {
        return None;
    }
    Some(
        store_ms
            .saturating_add(confirm_bound_ms(check_ms))
            .saturating_add(max_clock_lead_ms)
            .saturating_add(max_lead_ms),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        max_lead_ms: 5,
        tolerance_ms: 100,
        unrecorded_wait_ms: 250,
        trust: false,
    };

    /// The boundaries `cargo mutants` found no example on: a record exactly the tolerance
    /// ahead is waited out (one further is not), and a reservation exactly half a window
    /// ahead of what is needed is not extended yet (one less is).
    #[test]
    fn the_boundaries_are_where_the_docs_put_them() {
        assert_eq!(
            cost(Some(1_100), true, 1_000, &LIMITS),
            Some(Cost::Wait(95))
        );
        assert_eq!(cost(Some(1_101), true, 1_000, &LIMITS), None);
        assert_eq!(extension(1_500, 1_000, 900, 1_000), None);
        assert_eq!(extension(1_499, 1_000, 900, 1_000), Some(2_000));
        assert_eq!(extension(2_099, 1_000, 1_600, 1_000), Some(2_600));
    }

    /// A claimant that re-reads, after its wait, a write-back beyond the tolerance jumps to
    /// it when it trusts reservations ahead (and refuses when it does not).
    #[test]
    fn a_trusted_reread_far_ahead_is_a_jump() {
        let trusting = Limits {
            trust: true,
            ..LIMITS
        };
        assert_eq!(
            after_wait(Some(9_000), 1_000, 1_250, &trusting),
            Step::Jump { to_ms: 9_000 }
        );
        assert_eq!(
            after_wait(Some(9_000), 1_000, 1_250, &LIMITS),
            Step::Refuse { ahead_ms: 7_750 }
        );
    }
}
