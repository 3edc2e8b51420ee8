//! [`PgStore`] as a [`NodeStore`]: each call one statement, guarded by the claim's identity.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{PG_CHECK_INTERVAL, PgStore, confirmed_ms, table_gone};
use crate::lease::store::{Claim, NodeRequest, NodeStore};
use crate::lease::{handover, shape};
use crate::{Error, Layout};

impl NodeStore for PgStore {
    fn describe(&self) -> String {
        self.describe_store()
    }

    /// Half a second, or a third of the TTL when shorter: each check is one guarded
    /// `UPDATE`.
    fn check_interval(&self) -> Duration {
        PG_CHECK_INTERVAL.min(self.ttl / 3)
    }

    /// A table dropped since the store connected is made again first when the store may
    /// create it (a server that re-claims after its table was dropped under it).
    fn claim(&self, layout: &Layout, request: NodeRequest) -> Result<Claim, Error> {
        self.check_replication()?;
        let state = shape::key(layout);
        let attempt = || match request {
            NodeRequest::Any => self.claim_any(layout, &state),
            NodeRequest::Exact(node) => self.claim_exact(layout, &state, node),
        };
        let claim = match attempt() {
            Err(e) if self.create_table && table_gone(&e) => {
                self.link.prepare_table(true)?;
                attempt()
            }
            other => other,
        }?;
        match self.legacy_floor(layout, claim.node()) {
            Ok(floor) => Ok(claim.with_floor(floor)),
            Err(e) => {
                let _ = self.release_with(claim, None);
                Err(e)
            }
        }
    }

    fn extend(&self, claim: &Claim, until_ms: u64) -> Result<(), Error> {
        let token = self.token(claim)?;
        let stored = shape::to_stored(&token.shape_of, until_ms);
        let until = i64::try_from(stored).unwrap_or(i64::MAX);
        self.guarded(claim, "write the reservation", |s| &s.extend, &[&until])?;
        token.acknowledged.fetch_max(until, Ordering::Relaxed);
        Ok(())
    }

    fn renew(&self, claim: &Claim) -> Result<Option<Duration>, Error> {
        let token = self.token(claim)?;
        let ttl = self.ttl_ms();
        let acknowledged = Some(token.acknowledged.load(Ordering::Relaxed)).filter(|v| *v >= 0);
        // Read before the renewal is sent: never below the holder's clock at the start of the
        // check its confirm deadline counts from.
        let holder_ms = claim.holder_now_ms();
        let row = self.guarded(
            claim,
            "renew the lease",
            |s| &s.renew,
            &[&ttl, &acknowledged],
        )?;
        let valid = confirmed_ms(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0));
        // A holder whose clock runs further ahead of the database's than allowed loses the
        // claim here: its keeper seals it at once and writes back what it used. (A refusal
        // the keeper would retry is not enough: its fence's deadline is recomputed each round
        // from the generator's clock, so a clock stepped ahead would go on issuing, on the
        // stepped clock, until the last confirmed check's bound.) So every ID a holder issues
        // lies below the database's clock at its last confirmed check plus the lead, two check
        // intervals and `max_lead`, and a claimant that finds no row starts above that
        // (docs/design.md, "one inequality", the third case).
        let db_ms = u64::try_from(row.get::<_, i64>(1)).unwrap_or(0);
        let allowed = crate::lease::status::duration_ms(self.max_clock_lead);
        if let Some((holder, lead)) = holder_ms
            .and_then(|h| handover::clock_lead_refused(h, db_ms, allowed).map(|lead| (h, lead)))
        {
            return Err(Error::LeaseLost {
                node: claim.node(),
                reason: format!(
                    "this clock is {lead} ms ahead of the database's clock_timestamp() ({}): \
                     this clock read {}, the database's {}; more than the {allowed} ms allowed \
                     (PgOptions::max_clock_lead). Is this host's wall clock right?",
                    self.describe_store(),
                    crate::id::rfc3339(holder),
                    crate::id::rfc3339(db_ms),
                ),
            });
        }
        // Confirmed: the holder keeps its clock under what the next check confirms
        // (`handover::StoreReading`; docs/design.md, "A wall clock ahead of the store's").
        claim.note_store_clock(db_ms, self.max_clock_lead, Duration::ZERO);
        Ok(Some(Duration::from_millis(valid)))
    }

    /// The row's reservation, read again under the claim's guard: it includes whatever a
    /// holder that lost the node restored into it since the claim.
    fn reservation(&self, claim: &Claim) -> Result<Option<u64>, Error> {
        let token = self.token(claim)?;
        let row = self.guarded(claim, "read the reservation", |s| &s.reservation, &[])?;
        let reserved: Option<i64> = row.get(0);
        let now = match reserved {
            None => None,
            Some(r) => Some(u64::try_from(r).map_err(|_| Error::DamagedReservation {
                path: format!("{} node={}", self.table, claim.node()).into(),
                reason: format!(
                    "its reservation {r} is negative (the table's checks were dropped)"
                ),
            })?),
        };
        let before = self.legacy_floor(&token.shape_of, claim.node())?;
        Ok(handover::reservation_of([
            now.map(|v| shape::from_stored(&token.shape_of, v)),
            before,
        ]))
    }

    /// Raises the node's reservation to `until_ms` whoever holds the row now, and makes the
    /// row (free, with only the reservation) when it was deleted. A table dropped under the
    /// holder is made again first when the store may create it.
    fn restore(&self, claim: &Claim, until_ms: u64) -> Result<(), Error> {
        let token = self.token(claim)?;
        let stored = shape::to_stored(&token.shape_of, until_ms);
        let until = i64::try_from(stored).unwrap_or(i64::MAX);
        let write = || {
            self.link.run(|s| async move {
                s.client
                    .query_one(&s.restore, &[&token.layout, &token.node, &until])
                    .await
            })
        };
        match write() {
            Ok(_) => Ok(()),
            Err(_) if self.create_table => {
                self.link.prepare_table(true)?;
                write()
                    .map(drop)
                    .map_err(|e| self.link.failed("restore the reservation", e))
            }
            Err(e) => Err(self.link.failed("restore the reservation", e)),
        }
    }

    /// Ends the claim and leaves the row's reservation as it is.
    fn abandon(&self, claim: Claim) -> Result<(), Error> {
        self.release_with(claim, None)
    }

    fn release(&self, claim: Claim, until_ms: u64) -> Result<(), Error> {
        // A node that never had a reservation and is given back untouched (until 0) keeps
        // having none: its next claimant must then wait as for a node with no record.
        let stored = shape::to_stored(&self.token(&claim)?.shape_of, until_ms);
        let until = match (claim.reserved_until_ms(), until_ms) {
            (None, 0) => None,
            _ => Some(i64::try_from(stored).unwrap_or(i64::MAX)),
        };
        self.release_with(claim, until)
    }
}
