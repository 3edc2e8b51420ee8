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
/// let err = Layout::builder()
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
    ZeroBits {
        /// Which field.
        field: String,
    },
    /// A node field's name is empty, repeated, reserved or not made of `[a-z0-9_]`.
    InvalidFieldName {
        /// The offending name.
        name: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// A layout's name is empty, too long, or has characters other than `[A-Za-z0-9_.-]` (it
    /// names a directory of the file store and a key prefix in etcd).
    InvalidLayoutName {
        /// The offending name.
        name: String,
    },
    /// A layout's tick is zero milliseconds.
    ZeroTick,
    /// A layout's epoch lies after the current time.
    EpochInFuture {
        /// The epoch asked for, in Unix milliseconds.
        epoch_ms: u64,
        /// The current time, in Unix milliseconds.
        now_ms: u64,
    },
    /// No preset has this name.
    UnknownPreset {
        /// The name asked for.
        name: String,
        /// The names that exist.
        known: &'static [&'static str],
    },
    /// A value does not fit its field: a node ID, a sequence or a time.
    OutOfRange {
        /// The field (`"node"`, `"sequence"`, `"time"` or a node field's name).
        field: String,
        /// The value given.
        value: u64,
        /// The largest value the field holds.
        max: u64,
    },
    /// A string is not an ID.
    InvalidId {
        /// The input, as given.
        input: String,
        /// What is wrong with it.
        reason: &'static str,
        /// Byte offset of the first bad character, when there is one.
        position: Option<usize>,
    },
    /// A key for opaque IDs is malformed.
    InvalidKey {
        /// What is wrong with it.
        reason: String,
    },
    /// An ID uses bits its layout does not have.
    IdTooWide {
        /// The ID.
        id: u64,
        /// How many bits the layout uses.
        layout_bits: u32,
    },
    /// The ID has its top bit set, so it does not fit in an `i64`.
    SignBitSet {
        /// The ID.
        id: u64,
    },
    /// Issuing now would run the time field further ahead of the clock than `max_lead` allows.
    ///
    /// Nothing was issued. Retry after `retry_after`, or use the waiting call (`next_id`).
    WouldBlock {
        /// How long until the clock catches up enough for the request to fit.
        retry_after: Duration,
    },
    /// The layout's time field has run out: no ID can ever be issued under it again.
    Exhausted {
        /// When the time field ran out, in Unix milliseconds.
        expired_at_ms: u64,
    },
    /// The node's time reservation could not be extended in time, so issuing stopped.
    ReservationUnavailable {
        /// The node ID whose reservation could not be written.
        node: u64,
        /// What the store said.
        reason: String,
    },
    /// The claim on the node ID was lost (not renewed before its deadline, taken over, or
    /// the process was forked), so issuing stopped.
    LeaseLost {
        /// The node ID that was held.
        node: u64,
        /// Why it was lost.
        reason: String,
    },
    /// The process was forked after the generator was built: the child shares the parent's
    /// state and node, so it refuses to issue. Build a new generator in the child.
    Forked {
        /// The node ID the parent holds.
        node: u64,
    },
    /// Fork detection (`pthread_atfork`) could not be set up, so a generator cannot be built
    /// safely.
    ForkDetection {
        /// What the system said.
        reason: String,
    },
    /// [`configure_default`](crate::configure_default) was called after the default generator
    /// was built.
    DefaultAlreadyBuilt,
    /// Every node ID of the layout is held by a live claimant.
    AllNodesHeld {
        /// How many node IDs the layout has.
        count: u64,
    },
    /// The node ID asked for is held by another live claimant.
    NodeHeld {
        /// The node ID.
        node: u64,
    },
    /// The state directory cannot be created, locked, read or written.
    StateDir {
        /// The path involved.
        path: PathBuf,
        /// What was being done.
        action: &'static str,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The node store cannot be reached or refused a request.
    Store {
        /// The store (e.g. `"etcd http://127.0.0.1:2379"`).
        store: String,
        /// What went wrong.
        reason: String,
    },
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
            Error::EpochInFuture { epoch_ms, now_ms } => write!(
                f,
                "epoch {epoch_ms} (unix ms) is {} ms in the future (now {now_ms})",
                epoch_ms - now_ms
            ),
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
            Error::IdTooWide { id, layout_bits } => write!(
                f,
                "ID {id} uses {} bits but the layout has only {layout_bits}",
                64 - id.leading_zeros()
            ),
            Error::SignBitSet { id } => {
                write!(f, "ID {id} has its top bit set and does not fit in an i64")
            }
            Error::WouldBlock { retry_after } => write!(
                f,
                "the generator is at its time lead limit; retry after {} µs",
                retry_after.as_micros()
            ),
            Error::Exhausted { expired_at_ms } => write!(
                f,
                "the layout's time field ran out at unix ms {expired_at_ms} ({}); no more IDs \
                 can be issued under it",
                crate::id::rfc3339(*expired_at_ms)
            ),
            Error::ReservationUnavailable { node, reason } => write!(
                f,
                "node {node}: the time reservation could not be extended ({reason}); issuing \
                 stopped"
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
                write!(f, "cannot set up fork detection: {reason}")
            }
            Error::DefaultAlreadyBuilt => write!(
                f,
                "the default generator is already built; configure it before the first next_id()"
            ),
            Error::AllNodesHeld { count } => {
                write!(
                    f,
                    "all {count} node IDs of the layout are held by live claimants"
                )
            }
            Error::NodeHeld { node } => write!(f, "node {node} is held by another live claimant"),
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
            Error::Store { store, reason } => write!(f, "node store {store}: {reason}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::StateDir { source, .. } => Some(source),
            _ => None,
        }
    }
}
