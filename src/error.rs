//! The crate's one error type.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong in monoflake, with the numbers a person needs to act on it.
///
/// The enum is `#[non_exhaustive]`: new failure modes may be added in minor releases, and no
/// cargo feature ever adds or removes a variant.
///
/// # Example
///
/// ```
/// use monoflake::{Error, Layout};
///
/// // 37 + 20 + 16 = 73 bits cannot fit in a 64-bit ID.
/// let err = Layout::builder().epoch_ms(Layout::twitter().epoch_ms())
///     .time_bits(37)
///     .node_field("server", 20)
///     .sequence_bits(16)
///     .build()
///     .unwrap_err();
/// assert!(matches!(err, Error::LayoutTooWide { total: 73, max: 63, .. }));
/// assert_eq!(
///     err.to_string(),
///     "layout needs 73 bits (time 37 + node 20 + sequence 16) but an ID holds at most 63; \
///      time and sequence leave 10 bits for the node fields (64 if the layout may use the sign bit)"
/// );
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The bit widths of a layout add up to more than an ID holds.
    #[non_exhaustive]
    LayoutTooWide {
        /// Bits of the time field.
        time_bits: u32,
        /// Bits of all node fields together.
        node_bits: u32,
        /// Bits of the sequence field.
        sequence_bits: u32,
        /// `time_bits + node_bits + sequence_bits`.
        total: u32,
        /// 63, or 64 when the layout may use the sign bit.
        max: u32,
    },
    /// A layout field has zero bits (`"time"`, `"sequence"` or a node field's name).
    #[non_exhaustive]
    ZeroBits {
        /// Which field.
        field: String,
    },
    /// A node field's name is empty, repeated, reserved or not made of `[a-z0-9_]`.
    #[non_exhaustive]
    InvalidFieldName {
        /// The offending name.
        name: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// A layout's name is empty, too long, or has characters other than `[A-Za-z0-9_.-]` (it
    /// names a directory of the file store and a key prefix in etcd).
    #[non_exhaustive]
    InvalidLayoutName {
        /// The offending name.
        name: String,
    },
    /// A layout's tick is zero milliseconds.
    ZeroTick,
    /// A layout's tick is so long that the generator's arithmetic cannot hold it: the tick in
    /// nanoseconds, or the end of the time field in Unix milliseconds
    /// (`epoch + 2^time_bits * tick`), would not fit in a `u64`.
    #[non_exhaustive]
    TickTooLong {
        /// The tick asked for, in milliseconds.
        tick_ms: u64,
        /// The longest tick this layout's time width and epoch allow, in milliseconds.
        max_ms: u64,
    },
    /// A custom layout was built without an epoch
    /// ([`LayoutBuilder::epoch`](crate::LayoutBuilder::epoch)): a default epoch nobody chose
    /// is how layouts run out early.
    MissingEpoch,
    /// The epoch given to [`LayoutBuilder::epoch`](crate::LayoutBuilder::epoch) (or
    /// [`LayoutBuilder::epoch_at`](crate::LayoutBuilder::epoch_at)) is not one.
    #[non_exhaustive]
    InvalidEpoch {
        /// The epoch as given.
        input: String,
        /// What is wrong with it, and the forms accepted.
        reason: String,
    },
    /// A layout's epoch lies after the current time.
    #[non_exhaustive]
    EpochInFuture {
        /// The epoch asked for, in Unix milliseconds.
        epoch_ms: u64,
        /// The current time, in Unix milliseconds.
        now_ms: u64,
    },
    /// A layout spec (`time=41,worker=10,sequence=12,epoch=…`) cannot be read: the part that
    /// is wrong (empty when the whole spec lacks something) and why.
    #[non_exhaustive]
    InvalidLayoutSpec {
        /// The offending `NAME=VALUE` part, or empty.
        part: String,
        /// What is wrong, and what was expected.
        reason: String,
    },
    /// No preset has this name.
    #[non_exhaustive]
    UnknownPreset {
        /// The name asked for.
        name: String,
        /// The names that exist.
        known: &'static [&'static str],
    },
    /// A value does not fit its field: a node ID, a sequence or a time.
    #[non_exhaustive]
    OutOfRange {
        /// The field (`"node"`, `"sequence"`, `"time"` or a node field's name).
        field: String,
        /// The value given.
        value: u64,
        /// The largest value the field holds.
        max: u64,
    },
    /// A string is not an ID.
    #[non_exhaustive]
    InvalidId {
        /// The input, as given.
        input: String,
        /// What is wrong with it.
        reason: &'static str,
        /// Byte offset of the first bad character, when there is one.
        position: Option<usize>,
    },
    /// A key for opaque IDs is malformed.
    #[non_exhaustive]
    InvalidKey {
        /// What is wrong with it.
        reason: String,
    },
    /// The operating system's random source failed (making an
    /// [`OpaqueKey`](crate::OpaqueKey)).
    #[non_exhaustive]
    RandomSource {
        /// What the system said.
        reason: String,
    },
    /// An ID uses bits its layout does not have.
    #[non_exhaustive]
    IdTooWide {
        /// The ID.
        id: u64,
        /// How many bits the layout uses.
        layout_bits: u32,
    },
    /// The ID has its top bit set, so it does not fit in an `i64`.
    #[non_exhaustive]
    SignBitSet {
        /// The ID.
        id: u64,
    },
    /// Issuing now would have to wait: the time field would run further ahead of the clock
    /// than `max_lead` allows ([`BlockedOn::LeadLimit`]), or a leased generator's reservation
    /// or claim check is due and its keeper is renewing it now ([`BlockedOn::LeaseKeeper`]).
    ///
    /// Nothing was issued. Retry after `retry_after`, or use the waiting call (`next_id`).
    #[non_exhaustive]
    WouldBlock {
        /// How long until the request may fit: the clock catching up, or about one round of
        /// the keeper with the node store.
        retry_after: Duration,
        /// What it waits for.
        blocked_on: BlockedOn,
    },
    /// A batch of IDs larger than the generator can ever issue at once: `n` IDs must fit
    /// within `max_lead` ticks ahead of the clock, at most `limit` =
    /// `(max_lead_ticks + 1) * 2^sequence_bits` (Twitter's layout with the default 100 ms
    /// lead: 413,696). Refused at once, by the waiting calls too; nothing was issued and the
    /// generator goes on issuing. Ask for fewer at a time.
    #[non_exhaustive]
    BatchTooLarge {
        /// How many IDs were asked for.
        requested: u64,
        /// The largest batch the generator can issue at once.
        limit: u64,
    },
    /// A waiting call (`next_id`, `next_ids`) waited its `max_wait` and gave up. Nothing was
    /// issued; at the lead limit ([`BlockedOn::LeadLimit`]) the clock stood still or the demand
    /// is far above the layout's capacity; on a lease ([`BlockedOn::LeaseKeeper`]) the keeper
    /// did not get the reservation or the claim confirmed in time.
    #[non_exhaustive]
    TimedOut {
        /// How long the call waited.
        waited: Duration,
        /// How long until the request may fit, as last seen.
        retry_after: Duration,
        /// What it waited for, as last seen.
        blocked_on: BlockedOn,
    },
    /// Every slot of a per-thread generator ([`PerThread`](crate::PerThread)) is held by
    /// another thread or handle: a slot comes free when its thread exits or its handle drops.
    /// Nothing was issued. Build the generator with more slots, or issue from fewer threads.
    #[non_exhaustive]
    NoFreeSlot {
        /// How many slots the generator has.
        slots: u64,
    },
    /// The layout's time field has run out: no ID can ever be issued under it again.
    #[non_exhaustive]
    Exhausted {
        /// When the time field ran out, in Unix milliseconds.
        expired_at_ms: u64,
    },
    /// The node store has not acknowledged what issuing needs — the time reservation could
    /// not be extended, or the claim has not been confirmed for two check intervals (see
    /// [`Leased`](crate::Leased)) — so issuing is paused. It resumes, with the same node, once
    /// the store answers; the error is retryable.
    #[non_exhaustive]
    ReservationUnavailable {
        /// The node ID held.
        node: u64,
        /// What is missing, and what the store said.
        reason: String,
    },
    /// The claim on the node ID was lost (not renewed before its deadline, taken over, or
    /// the process was forked), so issuing stopped.
    #[non_exhaustive]
    LeaseLost {
        /// The node ID that was held.
        node: u64,
        /// Why it was lost.
        reason: String,
    },
    /// The process was forked after the generator was built: the child shares the parent's
    /// state and node, so it refuses to issue. Build a new generator in the child.
    #[non_exhaustive]
    Forked {
        /// The node ID the parent holds.
        node: u64,
    },
    /// Fork detection could not be set up (Linux before 4.14 has no `MADV_WIPEONFORK`;
    /// `pthread_atfork` failed elsewhere), so a generator cannot be built safely; or the
    /// process-wide default cannot be rebuilt in this forked child.
    #[non_exhaustive]
    ForkDetection {
        /// What the system said.
        reason: String,
    },
    /// A generator setting is outside what can be kept safely (a reservation window, a lead,
    /// a number of per-core slots, a clock before the layout's epoch).
    #[non_exhaustive]
    InvalidConfig {
        /// The setting, e.g. `"reservation_window"`.
        setting: &'static str,
        /// The value given, as a person reads it.
        value: String,
        /// What is allowed, with the numbers.
        allowed: String,
    },
    /// [`configure_default`](crate::configure_default) was called after the default generator
    /// was built.
    DefaultAlreadyBuilt,
    /// No node ID of the layout can be claimed: each is held by a live claimant, or (when
    /// claiming any node) free but reserved further ahead of this clock than the tolerance.
    /// A claim of any node searches again a few times, after short randomized waits, before
    /// reporting this, so a node held only for a moment by another claimant's search is not
    /// counted as held.
    #[non_exhaustive]
    AllNodesHeld {
        /// How many node IDs the layout has.
        count: u64,
        /// How many of them were free but passed over because their reservation is too far
        /// ahead of this clock (see [`Error::ReservationAhead`]).
        ahead: u64,
        /// How many could not be used at all: their records are damaged, cannot be trusted,
        /// or are not what they should be (a directory where a lock file belongs).
        unusable: u64,
        /// Why, for the first few of those.
        unusable_reasons: Vec<String>,
    },
    /// The node's time reservation is further ahead of this clock than the tolerance
    /// ([`GeneratorBuilder::future_reservation_tolerance`](crate::GeneratorBuilder::future_reservation_tolerance)):
    /// a holder once ran with its clock ahead, or this clock is behind — or this layout's epoch
    /// was moved later (or its tick made longer) than a layout of the same bit shape that used
    /// the node: reservations are ID values shared by every layout of a shape
    /// ([`Layout::shape_key`](crate::Layout::shape_key)), and a moved epoch reads them ahead by
    /// as much as it moved. Issuing under it would stamp IDs with that future time, or stall
    /// until the clock gets there; issuing below it would repeat IDs.
    #[non_exhaustive]
    ReservationAhead {
        /// The node ID.
        node: u64,
        /// Where the reservation ends (Unix ms): no earlier time may be issued on this node.
        reserved_until_ms: u64,
        /// How far that is ahead of this clock.
        ahead: Duration,
        /// The largest lead accepted (and waited out).
        tolerance: Duration,
    },
    /// The node ID asked for is held by another live claimant.
    #[non_exhaustive]
    NodeHeld {
        /// The node ID.
        node: u64,
        /// Who holds it, when the store can tell: the file store names the process on this
        /// host that holds the node's host-wide claim (its pid and uid).
        holder: Option<String>,
    },
    /// The state directory cannot be created, locked, read or written.
    #[non_exhaustive]
    StateDir {
        /// The path involved.
        path: PathBuf,
        /// What was being done.
        action: &'static str,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A node's reservation record is damaged (truncated, changed, unreadable as a time). It is
    /// never read as a smaller time: the node is refused until an operator acts.
    #[non_exhaustive]
    DamagedReservation {
        /// The file (or key) holding the reservation.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The state directory, a directory or link on its path, or a record in it can be changed
    /// by someone the directory does not trust (a directory every user can write, a file
    /// owned by another user, a symbolic link where a record belongs). Whoever can write the
    /// node store can forge the reservations that keep IDs unique, so such a store is refused,
    /// never believed.
    #[non_exhaustive]
    UntrustedState {
        /// The directory, link or file.
        path: PathBuf,
        /// What is wrong with it, and how to fix it.
        reason: String,
    },
    /// A node's reservation was written by monoflake 0.1, without a checksum: a damaged value
    /// cannot be told from a good one, so it is refused until an operator who has checked the
    /// state directory migrates it ([`FileStore::migrate_v1`](crate::FileStore::migrate_v1)).
    #[non_exhaustive]
    LegacyReservation {
        /// The reservation file.
        path: PathBuf,
    },
    /// The node store cannot be reached or refused a request.
    #[non_exhaustive]
    Store {
        /// The store (e.g. `"etcd http://127.0.0.1:2379"`).
        store: String,
        /// What went wrong.
        reason: String,
        /// The underlying error, when there is one (see [`std::error::Error::source`]).
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },
}

/// What a call that would block waits for ([`Error::WouldBlock`], [`Error::TimedOut`]).
///
/// ```
/// use std::time::Duration;
/// use monoflake::{BlockedOn, Error, Generator, Layout, ManualClock};
///
/// // A clock that stands still, one ID per tick, no lead: the second call must wait a tick.
/// let layout = Layout::builder().epoch_ms(Layout::twitter().epoch_ms()).sequence_bits(1).build()?;
/// let g = Generator::builder(layout)
///     .clock(ManualClock::new(1_700_000_000_000))
///     .max_lead(Duration::ZERO)
///     .build()?;
/// g.try_next_id()?;
/// g.try_next_id()?;
/// assert!(matches!(
///     g.try_next_id(),
///     Err(Error::WouldBlock { blocked_on: BlockedOn::LeadLimit, .. })
/// ));
/// # Ok::<(), monoflake::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BlockedOn {
    /// The time field would run further ahead of the clock than `max_lead` allows: the clock
    /// must catch up (or the demand is above the layout's capacity).
    LeadLimit,
    /// A leased generator reached the end of its reservation, or the deadline of its last
    /// confirmed claim check, while the node store is healthy: its keeper is extending the
    /// reservation or confirming the claim now (one round with the store). Also while the
    /// keeper seals a generator whose claim it just found lost, before the loss is reported.
    LeaseKeeper,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::LayoutTooWide {
                time_bits,
                node_bits,
                sequence_bits,
                total,
                max,
            } => {
                write!(
                    f,
                    "layout needs {total} bits (time {time_bits} + node {node_bits} + sequence \
                     {sequence_bits}) but an ID holds at most {max}"
                )?;
                let left = max.saturating_sub(time_bits + sequence_bits);
                if *node_bits > 0 {
                    write!(
                        f,
                        "; time and sequence leave {left} bits for the node fields"
                    )?;
                }
                if *max < 64 {
                    write!(f, " (64 if the layout may use the sign bit)")?;
                }
                Ok(())
            }
            Error::ZeroBits { field } => {
                write!(f, "the {field} field needs at least 1 bit, got 0")
            }
            Error::InvalidFieldName { name, reason } => {
                write!(f, "invalid node field name {name:?}: {reason}")
            }
            Error::InvalidLayoutName { name } => write!(
                f,
                "invalid layout name {name:?}: 1 to 64 characters of [A-Za-z0-9_.-], not . or .."
            ),
            Error::ZeroTick => write!(f, "the tick must be at least 1 ms, got 0"),
            Error::TickTooLong { tick_ms, max_ms } => write!(
                f,
                "a tick of {tick_ms} ms is too long: with this time width and epoch the tick \
                 is at most {max_ms} ms"
            ),
            Error::MissingEpoch => write!(
                f,
                "the layout has no epoch: choose the instant its time field counts from, close \
                 to the first ID it will issue (LayoutBuilder::epoch(\"2024-01-01\"), epoch_at, \
                 epoch_ms); a default epoch nobody chose is how layouts run out early"
            ),
            Error::InvalidEpoch { input, reason } => {
                write!(f, "invalid epoch {input:?}: {reason}")
            }
            Error::EpochInFuture { epoch_ms, now_ms } => write!(
                f,
                "epoch {epoch_ms} (unix ms) is {} ms in the future (now {now_ms})",
                epoch_ms - now_ms
            ),
            Error::InvalidLayoutSpec { part, reason } if part.is_empty() => {
                write!(f, "invalid layout spec: {reason}")
            }
            Error::InvalidLayoutSpec { part, reason } => {
                write!(f, "invalid layout spec at {part:?}: {reason}")
            }
            Error::UnknownPreset { name, known } => {
                write!(
                    f,
                    "unknown layout preset {name:?}; known presets: {}",
                    known.join(", ")
                )
            }
            Error::OutOfRange { field, value, max } => {
                write!(
                    f,
                    "{field} {value} is out of range: the field holds 0..={max}"
                )
            }
            Error::InvalidId {
                input,
                reason,
                position: Some(p),
            } => match input.get(*p..).and_then(|rest| rest.chars().next()) {
                Some(c) => write!(f, "invalid ID {input:?}: {reason} {c:?} at position {p}"),
                None => write!(f, "invalid ID {input:?}: {reason} at position {p}"),
            },
            Error::InvalidId {
                input,
                reason,
                position: None,
            } => {
                write!(f, "invalid ID {input:?}: {reason}")
            }
            Error::InvalidKey { reason } => write!(f, "invalid opaque-ID key: {reason}"),
            Error::RandomSource { reason } => {
                write!(f, "the operating system's random source failed: {reason}")
            }
            Error::IdTooWide { id, layout_bits } => write!(
                f,
                "ID {id} uses {} bits but the layout has only {layout_bits}",
                64 - id.leading_zeros()
            ),
            Error::SignBitSet { id } => {
                write!(f, "ID {id} has its top bit set and does not fit in an i64")
            }
            Error::TimedOut {
                waited,
                retry_after,
                blocked_on: BlockedOn::LeaseKeeper,
            } => write!(
                f,
                "the lease keeper did not extend the reservation or confirm the claim within the \
                 whole wait ({} ms); retry after {} µs",
                waited.as_millis(),
                retry_after.as_micros()
            ),
            Error::TimedOut {
                waited,
                retry_after,
                ..
            } => write!(
                f,
                "the generator stayed at its time lead limit for the whole wait ({} ms); retry \
                 after {} µs, or spread the load over more nodes",
                waited.as_millis(),
                retry_after.as_micros()
            ),
            Error::BatchTooLarge { requested, limit } => write!(
                f,
                "a batch of {requested} IDs can never be issued at once: at most {limit} fit \
                 within max_lead; ask for fewer at a time"
            ),
            Error::WouldBlock {
                retry_after,
                blocked_on: BlockedOn::LeaseKeeper,
            } => write!(
                f,
                "the lease keeper is extending the reservation or confirming the claim now; \
                 retry after {} µs",
                retry_after.as_micros()
            ),
            Error::WouldBlock { retry_after, .. } => write!(
                f,
                "the generator is at its time lead limit; retry after {} µs",
                retry_after.as_micros()
            ),
            Error::NoFreeSlot { slots } => write!(
                f,
                "all {slots} slots of the per-thread generator are held by other threads or \
                 handles; a slot comes free when its thread exits or its handle drops (build \
                 the generator with more slots, or issue from fewer threads)"
            ),
            Error::Exhausted { expired_at_ms } => write!(
                f,
                "the layout's time field ran out at unix ms {expired_at_ms} ({}); no more IDs \
                 can be issued under it",
                crate::id::rfc3339(*expired_at_ms)
            ),
            Error::ReservationUnavailable { node, reason } => write!(
                f,
                "node {node}: issuing is paused until the node store confirms the claim and the \
                 time it needs ({reason})"
            ),
            Error::LeaseLost { node, reason } => {
                write!(
                    f,
                    "node {node}: the lease was lost ({reason}); issuing stopped"
                )
            }
            Error::Forked { node } => write!(
                f,
                "node {node}: this process was forked after the generator was built; the child \
                 must not issue under the parent's node (build a new generator in the child)"
            ),
            Error::ForkDetection { reason } => {
                write!(f, "fork detection: {reason}")
            }
            Error::InvalidConfig {
                setting,
                value,
                allowed,
            } => write!(f, "invalid {setting} {value}: {allowed}"),
            Error::DefaultAlreadyBuilt => write!(
                f,
                "the default generator is already built; configure it before the first next_id()"
            ),
            Error::AllNodesHeld {
                count,
                ahead,
                unusable,
                unusable_reasons,
            } => {
                if *ahead == 0 && *unusable == 0 {
                    return write!(
                        f,
                        "all {count} node IDs of the layout are held by live claimants"
                    );
                }
                write!(
                    f,
                    "no node ID of the layout can be claimed: of {count}, {} are held by live \
                     claimants",
                    count.saturating_sub(*ahead).saturating_sub(*unusable)
                )?;
                if *ahead > 0 {
                    write!(
                        f,
                        ", {ahead} are free but reserved too far ahead of this clock (a clock \
                         that is behind, or holders that ran with their clock ahead)"
                    )?;
                }
                if *unusable > 0 {
                    write!(f, ", {unusable} cannot be used")?;
                    if !unusable_reasons.is_empty() {
                        write!(f, " ({}", unusable_reasons.join("; "))?;
                        if *unusable > unusable_reasons.len() as u64 {
                            write!(f, "; ...")?;
                        }
                        write!(f, ")")?;
                    }
                }
                Ok(())
            }
            Error::ReservationAhead {
                node,
                reserved_until_ms,
                ahead,
                tolerance,
            } => {
                write!(
                    f,
                    "node {node}'s time reservation runs to {} (unix ms {reserved_until_ms}), \
                     {} ahead of this clock, more than the {} accepted: a holder once ran with \
                     its clock ahead, this clock is behind, or this layout's epoch was moved \
                     later or its tick made longer than those of a layout of the same bit \
                     shape that used the node (reservations are ID values, shared by every \
                     layout of a shape). Check the clock and the layout or use another node; \
                     if this clock is wrong now and was right then, trust the reservation \
                     (GeneratorBuilder::trust_future_reservation)",
                    crate::id::rfc3339(*reserved_until_ms),
                    human_duration(*ahead),
                    human_duration(*tolerance)
                )
            }
            Error::NodeHeld { node, holder } => match holder {
                Some(holder) => write!(f, "node {node} is held by {holder}"),
                None => write!(f, "node {node} is held by another live claimant"),
            },
            Error::StateDir {
                path,
                action,
                source,
            } => {
                write!(
                    f,
                    "state directory: cannot {action} {}: {source}",
                    path.display()
                )
            }
            Error::DamagedReservation { path, reason } => write!(
                f,
                "the reservation {} is damaged: {reason}. It is not read as a smaller time. If \
                 the clock has passed every ID this node issued (a window after its last use), \
                 delete the file; otherwise claim another node until then (never restore it from \
                 a backup: a backup holds an earlier time)",
                path.display()
            ),
            Error::UntrustedState { path, reason } => write!(
                f,
                "state directory: {} cannot be trusted: {reason}",
                path.display()
            ),
            Error::LegacyReservation { path } => write!(
                f,
                "the reservation {} was written by monoflake 0.1, without a checksum: a damaged \
                 value cannot be told from a good one, so it is not read. Check the state \
                 directory, then migrate its version-1 reservations (FileStore::migrate_v1)",
                path.display()
            ),
            Error::Store { store, reason, .. } => write!(f, "node store {store}: {reason}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::StateDir { source, .. } => Some(source),
            Error::Store {
                source: Some(source),
                ..
            } => Some(&**source),
            _ => None,
        }
    }
}

impl Error {
    /// A waiting call's time-out, for callers that wait at the lead limit themselves (with
    /// [`IdGenerator::try_next_ids`](crate::IdGenerator::try_next_ids) in a loop of their
    /// own) and give up after [`Generator::max_wait`](crate::Generator::max_wait): the same
    /// error a waiting call of the library reports.
    ///
    /// ```
    /// use std::time::Duration;
    /// let e = monoflake::Error::timed_out(Duration::from_secs(1), Duration::from_micros(250));
    /// assert!(matches!(e, monoflake::Error::TimedOut { .. }));
    /// assert_eq!(e.retry_after(), Some(Duration::from_micros(250)));
    /// ```
    pub fn timed_out(waited: Duration, retry_after: Duration) -> Self {
        Self::timed_out_on(waited, retry_after, BlockedOn::LeadLimit)
    }

    /// [`Error::timed_out`] for a wait on something other than the lead limit, as the last
    /// [`Error::WouldBlock`] said.
    ///
    /// ```
    /// use std::time::Duration;
    /// use monoflake::{BlockedOn, Error};
    /// let e = Error::timed_out_on(Duration::from_secs(1), Duration::from_millis(2), BlockedOn::LeaseKeeper);
    /// assert!(matches!(e, Error::TimedOut { blocked_on: BlockedOn::LeaseKeeper, .. }));
    /// assert!(e.to_string().contains("lease keeper"), "{e}");
    /// ```
    pub fn timed_out_on(waited: Duration, retry_after: Duration, blocked_on: BlockedOn) -> Self {
        Error::TimedOut {
            waited,
            retry_after,
            blocked_on,
        }
    }

    /// A store failure, for [`NodeStore`](crate::NodeStore) implementations: `store` names
    /// the store (as [`NodeStore::describe`](crate::NodeStore::describe) does), `reason` says
    /// what went wrong.
    ///
    /// ```
    /// let e = monoflake::Error::store("etcd http://127.0.0.1:2379", "connection refused");
    /// assert_eq!(e.to_string(), "node store etcd http://127.0.0.1:2379: connection refused");
    /// assert!(e.is_retryable());
    /// ```
    pub fn store(store: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Store {
            store: store.into(),
            reason: reason.into(),
            source: None,
        }
    }

    /// A store failure caused by another error, which [`std::error::Error::source`] returns.
    ///
    /// ```
    /// use std::error::Error as _;
    /// let io = std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer");
    /// let e = monoflake::Error::store_caused_by("etcd", "claim failed", io);
    /// assert_eq!(e.source().unwrap().to_string(), "no answer");
    /// ```
    pub fn store_caused_by(
        store: impl Into<String>,
        reason: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Store {
            store: store.into(),
            reason: reason.into(),
            source: Some(Box::new(source)),
        }
    }

    /// The claim on `node` is lost, for [`NodeStore`](crate::NodeStore) implementations.
    ///
    /// ```
    /// let e = monoflake::Error::lease_lost(3, "the key was deleted");
    /// assert_eq!(e.to_string(), "node 3: the lease was lost (the key was deleted); issuing stopped");
    /// ```
    pub fn lease_lost(node: u64, reason: impl Into<String>) -> Self {
        Error::LeaseLost {
            node,
            reason: reason.into(),
        }
    }

    /// How long to wait before trying again, when the error says: [`Error::WouldBlock`] and
    /// [`Error::TimedOut`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use monoflake::{Generator, Layout, ManualClock};
    ///
    /// // A clock that stands still, one ID per tick, no lead: the second call must wait a tick.
    /// let layout = Layout::builder().epoch_ms(Layout::twitter().epoch_ms()).sequence_bits(1).build()?;
    /// let g = Generator::builder(layout)
    ///     .clock(ManualClock::new(1_700_000_000_000))
    ///     .max_lead(Duration::ZERO)
    ///     .build()?;
    /// g.try_next_id()?;
    /// g.try_next_id()?;
    /// let e = g.try_next_id().unwrap_err();
    /// assert_eq!(e.retry_after(), Some(Duration::from_millis(1)));
    /// assert_eq!(monoflake::Error::store("s", "down").retry_after(), None);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::WouldBlock { retry_after, .. } | Error::TimedOut { retry_after, .. } => {
                Some(*retry_after)
            }
            _ => None,
        }
    }

    /// Whether the input was at fault (a layout, node ID, ID string or key that is not
    /// valid, a batch too large ever to fit): the same input will fail again. A command line exits 2 for these.
    ///
    /// ```
    /// let e = "12x".parse::<monoflake::Id>().unwrap_err();
    /// assert!(e.is_bad_input());
    /// assert!(!monoflake::Error::store("s", "down").is_bad_input());
    /// ```
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            Error::LayoutTooWide { .. }
                | Error::ZeroBits { .. }
                | Error::InvalidFieldName { .. }
                | Error::InvalidLayoutName { .. }
                | Error::ZeroTick
                | Error::TickTooLong { .. }
                | Error::MissingEpoch
                | Error::InvalidEpoch { .. }
                | Error::EpochInFuture { .. }
                | Error::UnknownPreset { .. }
                | Error::InvalidLayoutSpec { .. }
                | Error::OutOfRange { .. }
                | Error::InvalidId { .. }
                | Error::IdTooWide { .. }
                | Error::SignBitSet { .. }
                | Error::InvalidKey { .. }
                | Error::InvalidConfig { .. }
                | Error::BatchTooLarge { .. }
        )
    }

    /// Whether the same call may succeed later without any change: the generator is at its
    /// lead limit ([`Error::WouldBlock`], [`Error::TimedOut`]), the store has not acknowledged
    /// the time needed yet ([`Error::ReservationUnavailable`]) or cannot be reached
    /// ([`Error::Store`]), or every node (or the one asked for) is held right now. A lost lease,
    /// a fork, an exhausted layout or bad input never heal by retrying.
    ///
    /// ```
    /// assert!(monoflake::Error::store("etcd", "unreachable").is_retryable());
    /// assert!(!monoflake::Error::lease_lost(1, "gone").is_retryable());
    /// ```
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::WouldBlock { .. }
                | Error::TimedOut { .. }
                | Error::ReservationUnavailable { .. }
                | Error::Store { .. }
                | Error::AllNodesHeld { .. }
                | Error::NodeHeld { .. }
                | Error::NoFreeSlot { .. }
        )
    }
}

/// A duration the way a person reads it: `850 ms`, `5.1 s`, `1.0 h`, `3.2 days`, `4.0 years`.
fn human_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 1.0 {
        format!("{} ms", d.as_millis())
    } else if s < 120.0 {
        format!("{s:.1} s")
    } else if s < 7_200.0 {
        format!("{:.1} min", s / 60.0)
    } else if s < 172_800.0 {
        format!("{:.1} h", s / 3_600.0)
    } else if s < 2.0 * 31_557_600.0 {
        format!("{:.1} days", s / 86_400.0)
    } else {
        format!("{:.1} years", s / 31_557_600.0)
    }
}
