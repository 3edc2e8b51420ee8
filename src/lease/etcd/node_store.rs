//! [`EtcdStore`] as a [`NodeStore`]: claims, keep-alives and reservations as transactions
//! compared against the claim key's create revision.

use std::collections::HashSet;
use std::sync::PoisonError;
use std::time::Duration;

use etcd_client::{GetOptions, Txn, TxnOp, TxnOpResponse};

use super::{
    ETCD_CHECK_INTERVAL, EtcdStore, Found, KeepAliveFailure, UNUSABLE_NAMED, keep_alive_failure,
};
use crate::lease::etcd_clock;
use crate::lease::store::{Claim, NodeRequest, NodeStore};
use crate::lease::{handover, shape};
use crate::{Error, Layout};

impl NodeStore for EtcdStore {
    fn describe(&self) -> String {
        format!("etcd {}", self.endpoints.join(","))
    }

    /// Half a second, or a third of the TTL when shorter: each check is a keep-alive and one
    /// read of the claim key.
    fn check_interval(&self) -> Duration {
        ETCD_CHECK_INTERVAL.min(self.ttl / 3)
    }

    fn claim(&self, layout: &Layout, request: NodeRequest) -> Result<Claim, Error> {
        let ttl = i64::try_from(self.ttl.as_secs()).unwrap_or(i64::MAX);
        let mut client = self.client.clone();
        let lease = self
            .run("grant a lease", client.lease_grant(ttl, None))?
            .id();
        let result = match request {
            NodeRequest::Exact(node) => layout.check_node(node).and_then(|node| {
                match self.try_node(layout, node, lease)? {
                    Found::Claimed(claim) => Ok(claim),
                    Found::Held => Err(Error::NodeHeld { node, holder: None }),
                    Found::Unusable(e) => Err(e),
                }
            }),
            NodeRequest::Any => {
                // One read of the held node keys, then a guarded create for each free one.
                let (probe, _, _) = self.keys(layout, 0);
                let dir = probe.trim_end_matches('0').to_owned();
                let held: HashSet<u64> = self
                    .run(
                        "list claims",
                        client.get(
                            dir.as_str(),
                            Some(GetOptions::new().with_prefix().with_keys_only()),
                        ),
                    )?
                    .kvs()
                    .iter()
                    .filter_map(|kv| kv.key_str().ok()?.strip_prefix(dir.as_str())?.parse().ok())
                    .collect();
                let mut unusable = 0;
                let mut reasons = Vec::new();
                let mut found = None;
                for node in (0..=layout.max_node()).filter(|n| !held.contains(n)) {
                    match self.try_node(layout, node, lease) {
                        Ok(Found::Claimed(claim)) => {
                            found = Some(Ok(claim.with_unusable(unusable)));
                            break;
                        }
                        Ok(Found::Held) => {}
                        // One bad record must not stop every claim: skipped, counted, named.
                        Ok(Found::Unusable(e)) => {
                            unusable += 1;
                            if reasons.len() < UNUSABLE_NAMED {
                                reasons.push(format!("node {node}: {e}"));
                            }
                        }
                        Err(e) => {
                            found = Some(Err(e));
                            break;
                        }
                    }
                }
                found.unwrap_or(Err(Error::AllNodesHeld {
                    count: layout.max_node().saturating_add(1),
                    ahead: 0,
                    unusable,
                    unusable_reasons: reasons,
                }))
            }
        };
        if result.is_err() {
            let _ = self.run("revoke the lease", client.lease_revoke(lease));
        }
        result
    }

    fn extend(&self, claim: &Claim, until_ms: u64) -> Result<(), Error> {
        let token = self.token(claim)?;
        let txn = token.guarded([TxnOp::put(
            token.reservation_key.as_str(),
            shape::to_stored(&token.layout, until_ms).to_string(),
            None,
        )]);
        let mut client = self.client.clone();
        if self
            .run("write the reservation", client.txn(txn))?
            .succeeded()
        {
            Ok(())
        } else {
            Err(Error::LeaseLost {
                node: claim.node(),
                reason: format!("{} expired or was taken over", token.node_key),
            })
        }
    }

    fn renew(&self, claim: &Claim) -> Result<Option<Duration>, Error> {
        let token = self.token(claim)?;
        // The holder's clock, then etcd's, both before the read that confirms the claim: a
        // holder whose clock leads etcd's by more than allowed loses the claim here — its
        // keeper seals it at once and writes back what it used — so every ID a holder issues
        // lies below etcd's clock at its last confirmed check plus the allowance, two check
        // intervals and `max_lead`, and a claimant that finds no record starts above that
        // (`etcd_clock::claim_clock`; docs/design.md, "one inequality", the third case).
        let holder_ms = claim.holder_now_ms();
        let etcd_ms = self
            .runtime
            .block_on(self.clock.now_ms())
            .map_err(|reason| self.fail(reason))?;
        let allowed = etcd_clock::check_allowance_ms(self.max_clock_lead_ms);
        if let Some((holder, lead)) = holder_ms
            .and_then(|h| handover::clock_lead_refused(h, etcd_ms, allowed).map(|lead| (h, lead)))
        {
            return Err(Error::LeaseLost {
                node: claim.node(),
                // `Date` is truncated: the member's clock was up to a second past it, so
                // the lead is a range.
                reason: format!(
                    "this clock is {} to {lead} ms ahead of etcd's (the Date of {}, to the \
                     second): this clock read {}, etcd's Date {}; more than the {allowed} ms \
                     allowed (EtcdOptions::max_clock_lead, plus a second for Date's \
                     resolution). Is this host's wall clock right?",
                    lead.saturating_sub(etcd_clock::DATE_RESOLUTION_MS - 1),
                    self.describe(),
                    crate::id::rfc3339(holder),
                    crate::id::rfc3339(etcd_ms),
                ),
            });
        }
        // The lease may live on while the claim key is gone (`etcdctl del --prefix`, a bad
        // migration): then the node is free for anyone, and this claim is lost.
        let mut client = self.client.clone();
        let held = self
            .run("read the claim", client.get(token.node_key.as_str(), None))?
            .kvs()
            .first()
            .is_some_and(|kv| kv.create_revision() == token.create_revision);
        if !held {
            return Err(Error::LeaseLost {
                node: claim.node(),
                reason: format!("{} was deleted or taken over", token.node_key),
            });
        }
        let mut slot = token
            .keep_alive
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut client = self.client.clone();
        if slot.is_none() {
            *slot = Some(self.run("open keep-alive", client.lease_keep_alive(token.lease))?);
        }
        let Some((keeper, stream)) = slot.as_mut() else {
            unreachable!("just filled")
        };
        let answer = self.runtime.block_on(async {
            tokio::time::timeout(self.timeout, async {
                keeper.keep_alive().await?;
                stream.message().await
            })
            .await
        });
        let failure = match answer {
            Ok(Ok(Some(response))) if response.ttl() > 0 => {
                // Confirmed: the holder keeps its clock under what the next check confirms,
                // `etcd_ms + max_clock_lead` plus the time since (`handover::StoreReading`).
                claim.note_store_clock(
                    etcd_ms,
                    Duration::from_millis(self.max_clock_lead_ms),
                    Duration::from_millis(etcd_clock::DATE_RESOLUTION_MS),
                );
                return Ok(Some(Duration::from_secs(
                    u64::try_from(response.ttl()).unwrap_or(0),
                )));
            }
            Ok(Ok(Some(_))) => {
                return Err(Error::LeaseLost {
                    node: claim.node(),
                    reason: format!("lease {:x} expired", token.lease),
                });
            }
            Ok(Ok(None)) => KeepAliveFailure::Closed,
            Ok(Err(e)) => KeepAliveFailure::Etcd(e),
            Err(_) => KeepAliveFailure::Unanswered(self.timeout),
        };
        // The stream is closed or broken: the next check opens another.
        *slot = None;
        Err(self.fail(keep_alive_failure(failure)))
    }

    fn reservation(&self, claim: &Claim) -> Result<Option<u64>, Error> {
        let token = self.token(claim)?;
        let txn = Txn::new().and_then([
            TxnOp::get(token.reservation_key.as_str(), None),
            TxnOp::get(
                token.restored_prefix.as_str(),
                Some(GetOptions::new().with_prefix()),
            ),
        ]);
        let mut client = self.client.clone();
        let response = self.run("read the reservation", client.txn(txn))?;
        let now = Self::largest(response.op_responses().iter().filter_map(|op| match op {
            TxnOpResponse::Get(get) => Some(get),
            _ => None,
        }))?;
        Ok(handover::reservation_of([
            now.map(|v| shape::from_stored(&token.layout, v)),
            token.legacy,
        ]))
    }

    /// Puts `<prefix>/<shape>/restored/<N>/<lease>`: a key of this holder's own, with no
    /// lease (it outlives the holder), never replacing another's.
    fn restore(&self, claim: &Claim, until_ms: u64) -> Result<(), Error> {
        let token = self.token(claim)?;
        let key = format!("{}{:x}", token.restored_prefix, token.lease);
        let mut client = self.client.clone();
        self.run(
            "restore the reservation",
            client.put(
                key.as_str(),
                shape::to_stored(&token.layout, until_ms).to_string(),
                None,
            ),
        )
        .map(drop)
    }

    /// Deletes the claim key (when it is still this claim's) and revokes the lease; the
    /// reservation key is left as it is.
    fn abandon(&self, claim: Claim) -> Result<(), Error> {
        let token = self.token(&claim)?;
        let txn = token.guarded([TxnOp::delete(token.node_key.as_str(), None)]);
        let mut client = self.client.clone();
        let deleted = self.run("give the node up", client.txn(txn)).map(drop);
        let _ = self.run("revoke the lease", client.lease_revoke(token.lease));
        deleted
    }

    fn release(&self, claim: Claim, until_ms: u64) -> Result<(), Error> {
        let token = self.token(&claim)?;
        let txn = token.guarded([
            TxnOp::put(
                token.reservation_key.as_str(),
                shape::to_stored(&token.layout, until_ms).to_string(),
                None,
            ),
            TxnOp::delete(token.node_key.as_str(), None),
        ]);
        let mut client = self.client.clone();
        let written = self.run("release", client.txn(txn)).map(|r| r.succeeded());
        let _ = self.run("revoke the lease", client.lease_revoke(token.lease));
        match written? {
            true => Ok(()),
            false => Err(Error::LeaseLost {
                node: claim.node(),
                reason: format!(
                    "{} expired or was taken over before release",
                    token.node_key
                ),
            }),
        }
    }
}
