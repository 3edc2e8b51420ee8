//! The words a [`Holder`](super::Holder) and its shell speak: what it is held to
//! ([`Terms`]), what it is told ([`Event`], [`Now`], [`Failure`], [`ClaimRead`]) and what it
//! asks for ([`Action`], [`LetGo`], [`Outcome`], [`Loss`]).

use super::Limits;
use crate::Layout;

/// What a holder is held to: constant for its life.
///
/// ```
/// use monoflake::{Layout, handover::{Limits, Terms}};
/// let layout = Layout::twitter();
/// let limits = Limits { max_lead_ms: 100, tolerance_ms: 5_100, unrecorded_wait_ms: 250, trust: false };
/// let terms = Terms { layout: &layout, limits, window_ms: 5_000, check_us: 100_000 };
/// assert_eq!(terms.bound_us(), 200_000);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Terms<'a> {
    /// The layout: every store time becomes a tick through its arithmetic.
    pub layout: &'a Layout,
    /// What a build may wait for and accept.
    pub limits: Limits,
    /// How far ahead of need the reservation is extended, ms (at least two validities once a
    /// renewal says how long the claim lasts).
    pub window_ms: u64,
    /// The store's check interval, µs.
    pub check_us: u64,
}

impl Terms<'_> {
    /// The confirm bound: how long after the start of a check that found the claim standing
    /// the holder may go on issuing, µs ([`confirm_bound_ms`](super::confirm_bound_ms)).
    pub const fn bound_us(&self) -> u64 {
        self.check_us.saturating_mul(2)
    }

    /// The check interval in whole ms.
    pub(super) const fn check_ms(&self) -> u64 {
        self.check_us / 1_000
    }
}

/// A reading of a holder's two clocks, taken by the shell just before a check is sent.
///
/// ```
/// let now = monoflake::handover::Now { ms: 1_700_000_000_000, mono_us: 5 };
/// assert_eq!(now.ms, 1_700_000_000_000);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Now {
    /// The generator's clock, Unix ms.
    pub ms: u64,
    /// The monotonic clock, µs since the holder's own origin: the lease's deadline and the
    /// confirm bound run on it, so that a step of the generator's clock cannot stretch them.
    pub mono_us: u64,
}

/// How a store call failed, as far as the protocol cares (the shell keeps the error itself).
///
/// ```
/// use monoflake::handover::Failure;
/// assert_ne!(Failure::Lost, Failure::Failed);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Failure {
    /// The store says the claim is gone ([`Error::LeaseLost`](crate::Error::LeaseLost)).
    Lost,
    /// Anything else: the store could not be reached, a write failed. The claim may stand.
    Failed,
}

/// Why a holder's claim was lost.
///
/// ```
/// use monoflake::handover::Loss;
/// assert_ne!(Loss::Renewal, Loss::Validity);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Loss {
    /// A renewal found the claim gone (or refused it: a clock too far ahead of the store's).
    Renewal,
    /// An extension of the reservation found the claim gone.
    Extension,
    /// No renewal succeeded within the lease's validity.
    Validity,
}

/// How the claim is let go at the end.
///
/// ```
/// use monoflake::handover::LetGo;
/// assert_eq!(LetGo::Release { until_ms: 7 }, LetGo::Release { until_ms: 7 });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LetGo {
    /// Write the final reservation and give the node up ([`NodeStore::release`](crate::NodeStore::release)).
    Release {
        /// The final reservation.
        until_ms: u64,
    },
    /// Give the node up writing nothing ([`NodeStore::abandon`](crate::NodeStore::abandon)).
    Abandon,
    /// Keep the claim until the process exits: what it issued is in no record yet, and the
    /// file store's host-wide claim refuses a successor on this host meanwhile.
    Keep,
}

/// How a holder's life ended.
///
/// ```
/// use monoflake::handover::{Failure, Outcome};
/// assert_ne!(Outcome::Released, Outcome::Failed(Failure::Failed));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Released: what [`NodeStore::release`](crate::NodeStore::release) answers.
    Released,
    /// The claim was lost; what it issued is written back.
    Lost,
    /// The claim was lost and what it issued could not be written back: the claim is kept.
    Unwritten,
    /// The build refused the node: its reservation is this far ahead, beyond the tolerance,
    /// and not trusted.
    Refused {
        /// How far ahead of the clock, ms.
        ahead_ms: u64,
    },
    /// The build cannot start: the layout's time field has run out at this clock (or at the
    /// trusted reservation).
    Exhausted,
    /// The build was told to trust a reservation ahead, and the clock cannot be moved.
    Unmovable,
    /// A store call of the build failed.
    Failed(Failure),
}

/// What the shell does next. Each is answered by one [`Event`] (listed with it).
///
/// ```
/// use monoflake::handover::Action;
/// assert_eq!(Action::Seal { releasing: true }, Action::Seal { releasing: true });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Sleep `ms`; with `renew_every_ms`, renew the claim every that long meanwhile.
    /// Answer: [`Event::Waited`] (`Err` for the first renewal that failed).
    Sleep {
        /// How long, ms.
        ms: u64,
        /// Renew the claim at this period while sleeping (a claim that expires outlives the
        /// wait).
        renew_every_ms: Option<u64>,
    },
    /// Move the generator's clock forward to `to_ms` (a trusted reservation ahead).
    /// Answer: [`Event::ClockMoved`].
    AdvanceClock {
        /// Unix ms.
        to_ms: u64,
    },
    /// Read the node's reservation again ([`NodeStore::reservation`](crate::NodeStore::reservation)),
    /// then the clock. Answer: [`Event::Reread`].
    Reread,
    /// Read the clocks, then renew the claim ([`NodeStore::renew`](crate::NodeStore::renew)),
    /// the store comparing its clock with that reading. Answer: [`Event::Renewed`].
    Renew,
    /// Write the reservation `until_ms` under the claim ([`NodeStore::extend`](crate::NodeStore::extend)).
    /// Answer: [`Event::Extended`].
    Extend {
        /// Unix ms.
        until_ms: u64,
    },
    /// Build the generator — above `resume_after` (a tick), with these first fence words —
    /// and start the keeper. Answer: [`Event::Done`].
    Build {
        /// Issue only ticks after this one.
        resume_after: Option<u64>,
        /// The fence's limit: the highest tick that may be issued.
        limit: u64,
        /// The fence's deadline: the first clock tick at which nothing may be issued.
        deadline: u64,
    },
    /// Publish the fence words. Answer: [`Event::Done`].
    Fence {
        /// The highest tick that may be issued.
        limit: u64,
        /// The first clock tick at which nothing may be issued.
        deadline: u64,
    },
    /// Wait `us` for the next round, or until woken or stopped. Answer: [`Event::Round`] or
    /// [`Event::Stop`].
    Idle {
        /// µs.
        us: u64,
    },
    /// Stop the generator for good (`releasing`: because the holder lets go, not because the
    /// claim was lost). Answer: [`Event::Sealed`] with the highest tick anything was or will
    /// be issued in.
    Seal {
        /// The holder is releasing the node.
        releasing: bool,
    },
    /// Write back `until_ms` beside the node's records ([`NodeStore::restore`](crate::NodeStore::restore)).
    /// Answer: [`Event::WrittenBack`].
    WriteBack {
        /// Unix ms.
        until_ms: u64,
    },
    /// The claim is lost: refusals say so from now on. `unwritten`: its write-back failed
    /// (the reason says so; it is retried each round). Answer: [`Event::Done`].
    Lost {
        /// Why.
        why: Loss,
        /// The write-back has not been written.
        unwritten: bool,
    },
    /// Cap how far the generator's clock follows the wall clock forward at what the store's
    /// clock confirms ([`TimeSource::set_ceiling`](crate::TimeSource::set_ceiling), a
    /// [`Ceiling`](crate::Ceiling) of `ms` at the monotonic time `at_mono_us`, moved on to
    /// now by [`ceiling_ns_at`](super::ceiling_ns_at)). Answer: [`Event::Done`].
    Ceiling {
        /// The ceiling at `at_mono_us`, Unix ms.
        ms: u64,
        /// When, on the holder's monotonic clock, µs.
        at_mono_us: u64,
        /// How far past it a wall clock may still be right, ms ([`StoreReading::slack_ms`]).
        slack_ms: u64,
    },
    /// Let the claim go and end, lifting the clock's ceiling (if a [`Action::Ceiling`] set
    /// one). Nothing follows.
    End {
        /// How.
        let_go: LetGo,
        /// What the holder's life came to.
        outcome: Outcome,
    },
}

/// What happened, fed back to [`Holder::step`](super::Holder::step).
///
/// ```
/// use monoflake::handover::{Event, Failure};
/// assert_ne!(Event::Extended(Ok(())), Event::Extended(Err(Failure::Failed)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    /// A [`Action::Sleep`] ended.
    Waited(Result<(), Failure>),
    /// An [`Action::AdvanceClock`]: whether the clock could be moved.
    ClockMoved(bool),
    /// An [`Action::Reread`]: what the store read, and the clock after (Unix ms).
    Reread {
        /// The node's reservation and evidence, merged.
        result: Result<Option<u64>, Failure>,
        /// The generator's clock, read after.
        now_ms: u64,
    },
    /// An [`Action::Renew`]: the clocks read before it was sent, the store's answer (how long
    /// the claim stays valid, µs; `None` as long as the process lives), the generator's last
    /// tick read after (0 before it is built) and, from a store with a clock of its own that
    /// confirmed the claim, that clock as the renewal read it.
    Renewed {
        /// The readings before the renewal.
        at: Now,
        /// The store's answer.
        result: Result<Option<u64>, Failure>,
        /// The highest tick issued (or moved into) so far.
        last_tick: u64,
        /// The store's clock, when it has one and the renewal confirmed the claim.
        store: Option<StoreReading>,
    },
    /// An [`Action::Extend`]'s answer.
    Extended(Result<(), Failure>),
    /// An action with nothing to report was carried out.
    Done,
    /// The keeper's next round is due (its period passed, or a caller woke it).
    Round,
    /// The holder lets go: a release or a drop.
    Stop,
    /// An [`Action::Seal`]: the highest tick anything was or will be issued in.
    Sealed {
        /// A tick.
        last_tick: u64,
    },
    /// An [`Action::WriteBack`]'s answer.
    WrittenBack(Result<(), Failure>),
}

/// A store's own clock as a renewal that confirmed the claim read it (PostgreSQL's
/// `clock_timestamp()`, etcd's `Date`), noted by the store on the claim
/// ([`Claim::note_store_clock`](crate::Claim::note_store_clock)) and passed in by the shell
/// with the monotonic time after the renewal returned: the next renewal confirms the holder
/// whatever its clock reads up to `ms + lead_ms` plus the time passed since (at the store's
/// rate), and the holder keeps its clock under that ([`Action::Ceiling`]).
///
/// ```
/// let r = monoflake::handover::StoreReading { ms: 1_700_000_000_000, lead_ms: 250, slack_ms: 0, after_mono_us: 9 };
/// assert_eq!(r.lead_ms, 250);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StoreReading {
    /// The store's clock as the renewal read it, Unix ms.
    pub ms: u64,
    /// How far ahead of it, plus the time passed since, a holder's clock is still confirmed
    /// at a later check, ms (PostgreSQL: `max_clock_lead`; etcd: `max_clock_lead` too —
    /// its `Date` is truncated to the second, `R`, and a later check confirms up to
    /// `d' + R + max_clock_lead`, with `d' + R` above the member's clock then, at least
    /// `ms` plus the time passed: `ms + lead_ms` plus that never exceeds what it confirms).
    pub lead_ms: u64,
    /// How far below its clock the store's reading may be, ms (etcd: the `Date`'s second; 0
    /// for PostgreSQL): a wall clock within this past the ceiling may be right.
    pub slack_ms: u64,
    /// The holder's monotonic clock when the renewal returned, µs.
    pub after_mono_us: u64,
}

/// What a claim read, as the store answered it ([`Claim`](crate::Claim)).
///
/// ```
/// let read = monoflake::handover::ClaimRead { reserved_ms: None, recorded: false, store_clock: None };
/// assert!(!read.recorded);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ClaimRead {
    /// The node's reservation and evidence, merged ([`reservation_of`](super::reservation_of)), Unix ms.
    pub reserved_ms: Option<u64>,
    /// Whether the node's own record was there (not only evidence beside it).
    pub recorded: bool,
    /// A store with a clock: its clock at the claim and the most a holder's clock may lead
    /// it, ms.
    pub store_clock: Option<(u64, u64)>,
}
