//! [`Caveat`]: what a node store cannot promise on this host, said out loud.

use std::fmt;

/// Something a [`NodeStore`](crate::NodeStore) cannot promise where it runs, found when it is
/// opened ([`NodeStore::caveats`](crate::NodeStore::caveats)). Never silent: a leased build
/// emits a `tracing` warning for each (feature `tracing`) and counts it in
/// [`Stats`](crate::Stats); the command line and `monoflake serve` print each once on
/// standard error, the Python package as a warning. Each says what to do.
///
/// ```
/// let caveat = monoflake::Caveat::AnchorsUnused { why: "/var/tmp is missing".into() };
/// assert!(caveat.to_string().starts_with("the host's anchors in /var/tmp are not used"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Caveat {
    /// The file store's anchors in `/var/tmp` — what every node used, for every state
    /// directory on the host — cannot be used here: two state directories used in turn with
    /// the clock set back between them can then issue the same IDs.
    AnchorsUnused {
        /// Why, as found.
        why: String,
    },
    /// This process is in a network namespace other than the host's: the file store's
    /// host-wide claim (an abstract Unix socket) does not reach processes outside it, so a
    /// process with another state directory there can hold the same node at once.
    OtherNetworkNamespace {
        /// Why, as found.
        why: String,
    },
}

impl fmt::Display for Caveat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Caveat::AnchorsUnused { why } => write!(
                f,
                "the host's anchors in /var/tmp are not used ({why}): state directories used \
                 in turn with the clock set back between them can issue the same IDs. Keep one \
                 state directory for every process of the host (share it with a group), or \
                 give /var/tmp back to the host (root's, mode 1777; no PrivateTmp= for this \
                 unit)"
            ),
            Caveat::OtherNetworkNamespace { why } => write!(
                f,
                "this process is in a network namespace of its own ({why}): the host-wide claim \
                 of a node does not reach processes outside it, and one of them with another \
                 state directory can hold the same node at once. Give this service a node \
                 range of its own (--node), or a store that spans hosts (etcd, PostgreSQL)"
            ),
        }
    }
}
