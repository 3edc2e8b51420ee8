//! The cluster node store: claims and reservations in etcd.

mod node_store;

use std::fmt;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, GetOptions, LeaseKeepAliveStream, LeaseKeeper,
    PutOptions, Txn, TxnOp, TxnOpResponse,
};

use super::etcd_clock::{self, EtcdClock};
use super::etcd_options::EtcdOptions;
use super::store::{Claim, NodeStore};
use super::{handover, shape};
use crate::{Error, Layout};

/// The default lease TTL of an [`EtcdStore`].
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(10);

/// A node store in etcd, for clusters (feature `etcd`).
///
/// Keys live under a prefix (default `/monoflake`), per bit shape ([`Layout::shape_key`]: every
/// layout whose IDs can equal another's shares its node claims and reservations):
/// `<prefix>/<shape>/node/<N>` marks a claim and `<prefix>/<shape>/reservation/<N>` holds the
/// node's reservation, decimal, as an ID value (Unix ms of the preset's clock for a preset's
/// shape, else the time-field value), so that layouts with different epochs or ticks compare
/// what they used. A layout's keys of before (`<prefix>/<state name>/…`, Unix ms of that
/// layout) are read at a claim as a floor, and a live claim key there makes the node held.
///
/// * **Claim**: one transaction that creates the node key only if it is absent, attached to a
///   fresh lease of `ttl`, and reads the reservation key in the same step.
/// * **Reservation**: a transaction that writes the reservation only if the node key still
///   has the claim's create revision — a stale holder (its lease expired and the node taken
///   over) gets [`Error::LeaseLost`], never a write.
/// * **Renewal**: a lease keep-alive; the answer's TTL tells the generator its deadline. The
///   generator renews every TTL/3 at most.
/// * **Release**: the final reservation and the deletion of the node key in one compare-guarded
///   transaction, then the lease is revoked. A crash leaves the key to expire with the lease.
/// * Every request is bounded by a timeout; an unreachable etcd is an [`Error::Store`].
///
/// # Example
///
/// ```no_run
/// use std::sync::Arc;
/// use monoflake::{EtcdStore, Generator, Layout, NodeRequest};
///
/// let store = EtcdStore::connect(&["http://127.0.0.1:2379"], "/monoflake", monoflake::DEFAULT_LEASE_TTL)?;
/// let leased = Generator::builder(Layout::twitter()).build_leased(Arc::new(store), NodeRequest::Any)?;
/// println!("node {} issued {}", leased.node(), leased.next_id()?);
/// # Ok::<(), monoflake::Error>(())
/// ```
pub struct EtcdStore {
    runtime: tokio::runtime::Runtime,
    client: Client,
    endpoints: Vec<String>,
    prefix: String,
    ttl: Duration,
    timeout: Duration,
    /// etcd's clock (`etcd_clock.rs`), read at every check and at a claim with no record.
    clock: EtcdClock,
    /// [`EtcdOptions::max_clock_lead`], in ms.
    max_clock_lead_ms: u64,
    /// [`EtcdOptions::max_member_skew`], in ms.
    max_member_skew_ms: u64,
}

impl fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdStore")
            .field("endpoints", &self.endpoints)
            .field("prefix", &self.prefix)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

/// How one node fared in a claim.
enum Found {
    Claimed(Claim),
    Held,
    Unusable(Error),
}

/// How many unusable nodes an [`Error::AllNodesHeld`] describes.
const UNUSABLE_NAMED: usize = 3;

/// The etcd store's claim token.
struct EtcdClaim {
    lease: i64,
    create_revision: i64,
    node_key: String,
    reservation_key: String,
    /// `<prefix>/<shape>/restored/<N>/`: records written back by holders whose keys were
    /// deleted under them ([`NodeStore::restore`]), one key per holder's lease.
    restored_prefix: String,
    /// The layout claimed for: the values stored are ID values of its shape (`shape.rs`).
    layout: Layout,
    /// What the layout's keys of before said, as a floor in its Unix ms (read at the claim).
    legacy: Option<u64>,
    keep_alive: Mutex<Option<(LeaseKeeper, LeaseKeepAliveStream)>>,
}

impl EtcdClaim {
    /// A transaction that runs `ops` only while the claim key is still this claim's (its
    /// create revision unchanged): extend, release and abandon are fenced by it.
    fn guarded<const N: usize>(&self, ops: [TxnOp; N]) -> Txn {
        Txn::new()
            .when([Compare::create_revision(
                self.node_key.as_str(),
                CompareOp::Equal,
                self.create_revision,
            )])
            .and_then(ops)
    }
}

impl EtcdStore {
    /// Connects to etcd. `ttl` is the lease TTL of every claim (whole seconds, at least 1).
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when no endpoint answers within a few seconds.
    ///
    /// ```no_run
    /// let store = monoflake::EtcdStore::connect(
    ///     &["http://127.0.0.1:2379"],
    ///     "/ids",
    ///     std::time::Duration::from_secs(5),
    /// )?;
    /// println!("{store:?}");
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn connect(endpoints: &[&str], prefix: &str, ttl: Duration) -> Result<Self, Error> {
        Self::connect_with(endpoints, prefix, ttl, &EtcdOptions::new())
    }

    /// [`EtcdStore::connect`] with TLS and credentials: what a production etcd cluster
    /// requires (see [`EtcdOptions`]).
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when no endpoint answers within a few seconds, the TLS handshake
    /// fails or etcd refuses the credentials.
    ///
    /// ```no_run
    /// let options = monoflake::EtcdOptions::new().user("monoflake", "s3cret");
    /// let store = monoflake::EtcdStore::connect_with(
    ///     &["http://127.0.0.1:2379"],
    ///     "/ids",
    ///     monoflake::DEFAULT_LEASE_TTL,
    ///     &options,
    /// )?;
    /// println!("{store:?}");
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn connect_with(
        endpoints: &[&str],
        prefix: &str,
        ttl: Duration,
        extra: &EtcdOptions,
    ) -> Result<Self, Error> {
        let endpoints: Vec<String> = endpoints.iter().map(|s| (*s).to_owned()).collect();
        let describe = format!("etcd {}", endpoints.join(","));
        let fail = |reason: String| Error::store(describe.clone(), reason);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| fail(format!("cannot start the I/O runtime: {e}")))?;
        let timeout = Duration::from_secs(2).min(ttl.max(Duration::from_secs(1)));
        let options = extra.apply(
            ConnectOptions::new()
                .with_connect_timeout(timeout)
                .with_timeout(timeout),
        );
        let mut client = runtime
            .block_on(bounded(
                timeout * 2,
                Client::connect(endpoints.clone(), Some(options)),
            ))
            .map_err(|e| e.into_error(&describe, "cannot connect"))?;
        // A connection is lazy: ask for something to prove an endpoint answers.
        runtime
            .block_on(bounded(timeout * 2, client.get("/", None)))
            .map_err(|e| e.into_error(&describe, "cannot reach"))?;
        // And its clock, which every check needs: a gateway that cannot be read fails here.
        let clock = EtcdClock::new(&endpoints, extra, timeout).map_err(fail)?;
        runtime.block_on(clock.now_ms()).map_err(fail)?;
        Ok(EtcdStore {
            runtime,
            client,
            endpoints,
            prefix: prefix.trim_end_matches('/').to_owned(),
            ttl: ttl.max(Duration::from_secs(1)),
            timeout,
            clock,
            max_clock_lead_ms: super::status::duration_ms(extra.max_clock_lead),
            max_member_skew_ms: super::status::duration_ms(extra.max_member_skew),
        })
    }

    fn fail(&self, reason: impl fmt::Display) -> Error {
        Error::store(self.describe(), reason.to_string())
    }

    fn run<T>(
        &self,
        what: &str,
        f: impl Future<Output = Result<T, etcd_client::Error>>,
    ) -> Result<T, Error> {
        self.runtime
            .block_on(bounded(self.timeout, f))
            .map_err(|e| e.into_error(&self.describe(), what))
    }

    /// A node's keys: the claim, the reservation and the prefix of restored records.
    fn keys(&self, layout: &Layout, node: u64) -> (String, String, String) {
        self.keys_under(&shape::key(layout), node)
    }

    /// A node's keys under `name`: a shape key, or a layout's state name of before.
    fn keys_under(&self, name: &str, node: u64) -> (String, String, String) {
        let base = format!("{}/{name}", self.prefix);
        (
            format!("{base}/node/{node}"),
            format!("{base}/reservation/{node}"),
            format!("{base}/restored/{node}/"),
        )
    }

    /// The largest reservation in the answers to reads of a node's reservation key and
    /// restored records (`Err`: the key holding something that is not one).
    fn largest<'a>(
        gets: impl Iterator<Item = &'a etcd_client::GetResponse>,
    ) -> Result<Option<u64>, Error> {
        let mut largest = None;
        for kv in gets.flat_map(|get| get.kvs()) {
            let text = kv.value_str().unwrap_or("");
            let until = text
                .trim()
                .parse::<u64>()
                .map_err(|_| Error::DamagedReservation {
                    path: kv.key_str().unwrap_or("?").into(),
                    reason: format!("it holds {text:?}, not a reservation (a decimal number)"),
                })?;
            largest = handover::reservation_of([largest, Some(until)]);
        }
        Ok(largest)
    }

    /// Tries to claim `node` under `lease`: claimed, held by another, or unusable (its
    /// reservation key holds no reservation: the node key just made is deleted again).
    fn try_node(&self, layout: &Layout, node: u64, lease: i64) -> Result<Found, Error> {
        let (node_key, reservation_key, restored_prefix) = self.keys(layout, node);
        let holder = format!("pid {} lease {lease:x}", std::process::id());
        let mut free = vec![Compare::version(node_key.as_str(), CompareOp::Equal, 0)];
        let mut ops = vec![
            TxnOp::put(
                node_key.as_str(),
                holder,
                Some(PutOptions::new().with_lease(lease)),
            ),
            TxnOp::get(reservation_key.as_str(), None),
            TxnOp::get(
                restored_prefix.as_str(),
                Some(GetOptions::new().with_prefix()),
            ),
        ];
        // The layout's keys of before: a claim there (a holder of an earlier version) makes
        // the node held; their reservation is a floor.
        if let Some(old) = shape::legacy_key(layout) {
            let (old_node, old_reservation, old_restored) = self.keys_under(&old, node);
            free.push(Compare::version(old_node.as_str(), CompareOp::Equal, 0));
            ops.push(TxnOp::get(old_reservation.as_str(), None));
            ops.push(TxnOp::get(
                old_restored.as_str(),
                Some(GetOptions::new().with_prefix()),
            ));
        }
        let txn = Txn::new().when(free).and_then(ops);
        let mut client = self.client.clone();
        let response = self.run("claim", client.txn(txn))?;
        if !response.succeeded() {
            return Ok(Found::Held);
        }
        // The transaction's revision is the node key's create revision.
        let create_revision = response.header().map_or(0, |h| h.revision());
        let gets = response.op_responses();
        // The reservation key's answer is the first get: the node's own record, apart from
        // the restored ones beside it.
        let recorded = gets
            .iter()
            .find_map(|op| match op {
                TxnOpResponse::Get(get) => Some(!get.kvs().is_empty()),
                _ => None,
            })
            .unwrap_or(false);
        let answers: Vec<_> = gets
            .iter()
            .filter_map(|op| match op {
                TxnOpResponse::Get(get) => Some(get),
                _ => None,
            })
            .collect();
        // The shape's keys hold ID values; the keys of before, this layout's Unix ms.
        let read = Self::largest(answers.iter().take(2).copied())
            .map(|r| r.map(|v| shape::from_stored(layout, v)))
            .and_then(|now| Ok((now, Self::largest(answers.iter().skip(2).copied())?)));
        let (reserved, legacy) = match read {
            Ok((now, before)) => (handover::reservation_of([now, before]), before),
            Err(damaged) => {
                self.give_back(&node_key, create_revision)?;
                return Ok(Found::Unusable(damaged));
            }
        };
        // No record of the node's own: etcd's clock, read after the claim (so after whatever
        // deleted the records, and after the last check that confirmed any holder before),
        // bounds what such a holder can have issued (`etcd_clock::claim_clock`).
        let store_clock = if recorded {
            None
        } else {
            match self.runtime.block_on(self.clock.now_ms()) {
                Ok(ms) => Some(etcd_clock::claim_clock(
                    ms,
                    self.max_member_skew_ms,
                    self.max_clock_lead_ms,
                )),
                Err(reason) => {
                    let _ = self.give_back(&node_key, create_revision);
                    return Err(self.fail(reason));
                }
            }
        };
        let claim = Claim::new(
            node,
            reserved,
            EtcdClaim {
                lease,
                create_revision,
                node_key,
                reservation_key,
                restored_prefix,
                layout: layout.clone(),
                legacy,
                keep_alive: Mutex::new(None),
            },
        );
        Ok(Found::Claimed(match store_clock {
            None => claim,
            Some((store_ms, lead_ms)) => claim
                .with_store_clock(store_ms, Duration::from_millis(lead_ms))
                .evidence_only(),
        }))
    }

    /// Deletes a node key this claim just made (while it still has that create revision).
    fn give_back(&self, node_key: &str, create_revision: i64) -> Result<(), Error> {
        let undo = Txn::new()
            .when([Compare::create_revision(
                node_key,
                CompareOp::Equal,
                create_revision,
            )])
            .and_then([TxnOp::delete(node_key, None)]);
        let mut client = self.client.clone();
        self.run("give the node back", client.txn(undo)).map(drop)
    }

    fn token<'a>(&self, claim: &'a Claim) -> Result<&'a EtcdClaim, Error> {
        claim.token::<EtcdClaim>().ok_or_else(|| Error::LeaseLost {
            node: claim.node(),
            reason: "the claim was not made by an etcd store".into(),
        })
    }
}

/// Runs `f` for at most `limit`.
/// How often an etcd holder checks its claim: see [`NodeStore::check_interval`].
const ETCD_CHECK_INTERVAL: Duration = Duration::from_millis(500);

async fn bounded<T>(
    limit: Duration,
    f: impl Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, Unanswered> {
    match tokio::time::timeout(limit, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(Unanswered::Etcd(e)),
        Err(_) => Err(Unanswered::Timeout(limit)),
    }
}

/// Why a bounded request got no good answer.
enum Unanswered {
    Etcd(etcd_client::Error),
    Timeout(Duration),
}

impl Unanswered {
    /// The store error for `what` failing, keeping etcd's error as its source.
    fn into_error(self, store: &str, what: &str) -> Error {
        match self {
            Unanswered::Etcd(e) => Error::store_caused_by(store, format!("{what}: {e}"), e),
            Unanswered::Timeout(limit) => Error::store(
                store,
                format!("{what}: no answer within {} ms", limit.as_millis()),
            ),
        }
    }
}

/// Why a keep-alive renewed nothing, short of the lease being gone.
enum KeepAliveFailure {
    /// etcd, or the connection to it, answered with an error.
    Etcd(etcd_client::Error),
    /// No answer within the request timeout.
    Unanswered(Duration),
    /// The keep-alive stream ended.
    Closed,
}

/// The reason a store error gives for a keep-alive that renewed nothing.
fn keep_alive_failure(failure: KeepAliveFailure) -> String {
    match failure {
        KeepAliveFailure::Etcd(e) => format!("keep-alive: {e}"),
        KeepAliveFailure::Unanswered(limit) => {
            format!("keep-alive: no answer within {} ms", limit.as_millis())
        }
        KeepAliveFailure::Closed => "keep-alive: the stream closed".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A keep-alive that renewed nothing says why: etcd's error, the time it waited, or the
    /// stream's end.
    #[test]
    fn a_failed_keep_alive_says_why() {
        assert_eq!(
            keep_alive_failure(KeepAliveFailure::Etcd(etcd_client::Error::InvalidArgs(
                "no such lease".into()
            ))),
            "keep-alive: invalid arguments: no such lease"
        );
        assert_eq!(
            keep_alive_failure(KeepAliveFailure::Unanswered(Duration::from_secs(2))),
            "keep-alive: no answer within 2000 ms"
        );
        assert_eq!(
            keep_alive_failure(KeepAliveFailure::Closed),
            "keep-alive: the stream closed"
        );
    }
}
