//! Which node to take for [`NodeRequest::Any`]: the free node that costs the build the least
//! wait. A node with a record at most `max_lead` ahead of the clock costs nothing (its IDs are
//! honest within the lead) and ends the search, as does one that costs no more than a tick
//! and [`SETTLED_SLACK_MS`] (a node just released); a node with no record costs the unrecorded
//! wait; a node further ahead costs the time until it is `max_lead` ahead; one further ahead
//! than the tolerance is refused (a clock that is or was wrong) unless told to trust it.

use std::hash::{BuildHasher, RandomState};
use std::time::{Duration, Instant};

use super::handover::{self, Cost};
use super::store::{Claim, NodeRequest, NodeStore};
use crate::{Error, Layout};

/// How many free nodes that cost a wait a claim of any node holds while it looks further for
/// one that costs none. Each is held until the choice is made (so the store's "lowest free
/// node" moves on), then given back.
const MAX_PASSED_OVER: usize = 64;

/// How many times a claim of any node searches again when the store answered that every node
/// is held: another claimant may be holding free nodes it passed over for a moment, and gives
/// them back once its own search ends.
const RACE_RETRIES: u32 = 8;

/// A wait this short ends the search like no wait at all: a released node's record is the
/// end of the last tick its holder issued, up to `max_lead` plus a tick ahead of that
/// holder's clock, which may read a few ms apart from this one — and looking further costs
/// more than that (each node held and given back is a durable write). Added to the layout's
/// tick.
const SETTLED_SLACK_MS: u64 = 10;

/// The longest single wait between two searches.
const RACE_WAIT_CAP: Duration = Duration::from_millis(250);

/// What a build may wait for and accept: the protocol's (see [`handover::Limits`]).
pub(crate) use super::handover::Limits;

/// What taking `claim` costs at `now_ms`, or `None` when it may not be taken: the protocol's
/// [`handover::cost`].
fn cost(claim: &Claim, now_ms: u64, limits: &Limits) -> Option<Cost> {
    handover::cost(claim.reserved_until_ms(), claim.recorded(), now_ms, limits)
}

/// The node chosen, how many were passed over as too far ahead or unusable, and how long the
/// searches waited for one another (ms).
#[derive(Debug)]
pub(crate) struct Chosen {
    pub(crate) claim: Claim,
    pub(crate) skipped_ahead: u64,
    /// How far ahead of the clock the furthest skipped node's reservation was (ms): this
    /// generator's IDs may sort below what was issued there.
    pub(crate) sorts_below_ms: u64,
    pub(crate) skipped_unusable: u64,
    pub(crate) waited_ms: u64,
}

/// How far the claim's reservation is ahead of `now_ms`, in ms (0 for none, or one passed).
pub(crate) fn ahead_ms(claim: &Claim, now_ms: u64) -> u64 {
    handover::ahead_ms(claim.reserved_until_ms(), now_ms)
}

/// Claims a node for `request`: see the module comment. `now_ms` reads the clock (Unix ms).
///
/// # Errors
///
/// The store's errors; [`Error::ReservationAhead`] for an exact node reserved too far ahead;
/// [`Error::AllNodesHeld`] (with the count of nodes passed over) when no node is usable, after
/// [`RACE_RETRIES`] more searches.
pub(crate) fn choose(
    store: &dyn NodeStore,
    layout: &Layout,
    request: NodeRequest,
    now_ms: &dyn Fn() -> u64,
    limits: &Limits,
) -> Result<Chosen, Error> {
    if let NodeRequest::Exact(_) = request {
        let claim = store.claim(layout, request)?;
        let now_ms = now_ms();
        if cost(&claim, now_ms, limits).is_none() {
            let error = ahead_error(&claim, now_ms, limits.tolerance_ms);
            give_back(store, claim, now_ms, limits);
            return Err(error);
        }
        return Ok(Chosen {
            claim,
            skipped_ahead: 0,
            sorts_below_ms: 0,
            skipped_unusable: 0,
            waited_ms: 0,
        });
    }
    // Any node. A search that ends with every node held may have met another claimant holding
    // the free nodes it passed over, for the length of its own search: search again after a
    // randomized wait that grows with each attempt (and with how long a search takes here),
    // a bounded number of times. Between searches this claimant holds nothing.
    let mut attempt = 0;
    let mut waited = Duration::ZERO;
    loop {
        let started = Instant::now();
        let result = search_any(store, layout, now_ms, limits);
        match result {
            Err(Error::AllNodesHeld { .. }) if attempt < RACE_RETRIES => {
                let round = started.elapsed().max(Duration::from_millis(1));
                let wait = race_wait(round, attempt);
                std::thread::sleep(wait);
                waited += wait;
                attempt += 1;
            }
            other => {
                return other.map(|chosen| Chosen {
                    waited_ms: u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
                    ..chosen
                });
            }
        }
    }
}

/// The wait before search `attempt + 2`: random in `[d/2, d]`, `d = round * 2^attempt`,
/// capped at [`RACE_WAIT_CAP`], so two claimants that collided do not collide again in step.
fn race_wait(round: Duration, attempt: u32) -> Duration {
    let d = round
        .saturating_mul(1 << attempt.min(16))
        .min(RACE_WAIT_CAP);
    let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(2);
    // A fresh `RandomState` is keyed differently on each call: enough randomness for a jitter.
    let r = RandomState::new().hash_one((attempt, std::thread::current().id()));
    Duration::from_nanos(nanos / 2 + r % (nanos / 2 + 1))
}

/// One search for any node, lowest first: a node that costs nothing ends it; every other node
/// met is held (so the store offers the next one), and the one that costs least (the lower on
/// a tie) is kept once the search ends; the rest are given back. Returns with at most the
/// chosen node held.
///
/// The search also ends at the first node with no record of its own that may be taken: the
/// store hands nodes out lowest first, so the nodes above it are most likely unused too, and
/// each one held is one more to give back. Not at one that may not: evidence beside a deleted
/// record (a host anchor) further ahead than the tolerance says nothing of the nodes above it
/// — a claimant whose clock was set back an hour found its first nodes so, ended its search
/// there, and was refused every node for minutes while a thousand had never been used (the
/// soak at seed 4404).
fn search_any(
    store: &dyn NodeStore,
    layout: &Layout,
    now_ms: &dyn Fn() -> u64,
    limits: &Limits,
) -> Result<Chosen, Error> {
    let now = now_ms();
    let mut passed: Vec<Claim> = Vec::new();
    // The store's count of nodes it could not use (each search counts them again), and why.
    let mut unusable = 0;
    let mut reasons = Vec::new();
    let outcome = loop {
        if passed.len() >= MAX_PASSED_OVER {
            break Ok(None);
        }
        match store.claim(layout, NodeRequest::Any) {
            Ok(claim) => {
                unusable = unusable.max(claim.unusable());
                let unrecorded = claim.reserved_until_ms().is_none() || !claim.recorded();
                let settled = layout.tick_ms().saturating_add(SETTLED_SLACK_MS);
                if !unrecorded
                    && matches!(cost(&claim, now, limits), Some(Cost::Wait(w)) if w <= settled)
                {
                    break Ok(Some(claim));
                }
                let usable = cost(&claim, now, limits).is_some();
                passed.push(claim);
                if unrecorded && usable {
                    break Ok(None);
                }
            }
            Err(Error::AllNodesHeld {
                unusable: n,
                unusable_reasons,
                ..
            }) => {
                if n >= unusable {
                    unusable = n;
                    reasons = unusable_reasons;
                }
                break Ok(None);
            }
            Err(e) => break Err(e),
        }
    };
    let skipped = || passed.iter().filter(|c| cost(c, now, limits).is_none());
    let skipped_ahead = skipped().count() as u64;
    let sorts_below_ms = skipped().map(|c| ahead_ms(c, now)).max().unwrap_or(0);
    let chosen = match outcome {
        Ok(Some(free)) => Ok(free),
        Ok(None) => {
            let best = passed
                .iter()
                .enumerate()
                .filter_map(|(i, c)| cost(c, now, limits).map(|cost| (cost, c.node(), i)))
                .min()
                .map(|(_, _, i)| i);
            match best {
                Some(i) => Ok(passed.swap_remove(i)),
                None => Err(Error::AllNodesHeld {
                    count: layout.max_node().saturating_add(1),
                    ahead: skipped_ahead,
                    unusable,
                    unusable_reasons: reasons,
                }),
            }
        }
        Err(e) => Err(e),
    };
    if !passed.is_empty() {
        for claim in passed {
            give_back(store, claim, now, limits);
        }
    }
    chosen.map(|claim| Chosen {
        claim,
        skipped_ahead,
        sorts_below_ms,
        skipped_unusable: unusable,
        waited_ms: 0,
    })
}

/// The error for a claim whose reservation is too far ahead.
fn ahead_error(claim: &Claim, now_ms: u64, tolerance_ms: u64) -> Error {
    Error::ReservationAhead {
        node: claim.node(),
        reserved_until_ms: claim.reserved_until_ms().unwrap_or(0),
        ahead: Duration::from_millis(ahead_ms(claim, now_ms)),
        tolerance: Duration::from_millis(tolerance_ms),
    }
}

/// Gives a node back unused: what [`handover::give_back`] says to write — nothing, so a
/// node with a record keeps it and a node with none keeps having none, and whoever takes it
/// next waits the unrecorded wait and reads its record again before issuing, as this claimant
/// would have ([`NodeStore::abandon`]).
fn give_back(store: &dyn NodeStore, claim: Claim, now_ms: u64, limits: &Limits) {
    let read = claim.reserved_until_ms();
    let floor = handover::start_floor_ms(read, now_ms, limits);
    // Best effort: the claim is given up either way.
    let _ = match handover::give_back(read, floor) {
        None => store.abandon(claim),
        Some(until) => store.release(claim, until),
    };
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    const NOW: u64 = 1_700_000_000_000;

    /// A store of a few nodes whose records the test sets: a claim of any node takes the
    /// lowest free one, as every store does; a release records what it was given.
    #[derive(Debug)]
    struct Nodes {
        /// `(held, record)` per node.
        nodes: Mutex<Vec<(bool, Option<u64>)>>,
        /// Per node, what evidence beside a missing record reads (a host anchor).
        evidence: Vec<Option<u64>>,
        /// How many claims of any node were answered.
        claims: Mutex<usize>,
        /// What a claim of any node that finds none free says it could not use.
        unusable: u64,
    }

    impl Nodes {
        fn new(records: &[Option<u64>]) -> Nodes {
            Nodes {
                nodes: Mutex::new(records.iter().map(|r| (false, *r)).collect()),
                evidence: Vec::new(),
                claims: Mutex::new(0),
                unusable: 0,
            }
        }

        fn with_evidence(mut self, evidence: &[Option<u64>]) -> Nodes {
            self.evidence = evidence.to_vec();
            self
        }

        fn record(&self, node: u64) -> Option<u64> {
            self.nodes.lock().unwrap()[node as usize].1
        }

        fn held(&self) -> Vec<u64> {
            let nodes = self.nodes.lock().unwrap();
            (0..nodes.len() as u64)
                .filter(|&n| nodes[n as usize].0)
                .collect()
        }
    }

    impl NodeStore for Nodes {
        fn describe(&self) -> String {
            "test".into()
        }

        fn claim(&self, layout: &Layout, request: NodeRequest) -> Result<Claim, Error> {
            let mut nodes = self.nodes.lock().unwrap();
            let node = match request {
                NodeRequest::Exact(n) => n as usize,
                NodeRequest::Any => {
                    *self.claims.lock().unwrap() += 1;
                    match nodes.iter().position(|(held, _)| !held) {
                        Some(n) => n,
                        None => {
                            return Err(Error::AllNodesHeld {
                                count: layout.max_node() + 1,
                                ahead: 0,
                                unusable: self.unusable,
                                unusable_reasons: (0..self.unusable)
                                    .map(|n| format!("reason {n}"))
                                    .collect(),
                            });
                        }
                    }
                }
            };
            if nodes[node].0 {
                return Err(Error::NodeHeld {
                    node: node as u64,
                    holder: None,
                });
            }
            nodes[node].0 = true;
            match (nodes[node].1, self.evidence.get(node).copied().flatten()) {
                (None, Some(evidence)) => {
                    Ok(Claim::new(node as u64, Some(evidence), ()).evidence_only())
                }
                (record, _) => Ok(Claim::new(node as u64, record, ()).with_unusable(self.unusable)),
            }
        }

        fn extend(&self, claim: &Claim, until_ms: u64) -> Result<(), Error> {
            self.nodes.lock().unwrap()[claim.node() as usize].1 = Some(until_ms);
            Ok(())
        }

        fn renew(&self, _: &Claim) -> Result<Option<Duration>, Error> {
            Ok(None)
        }

        fn release(&self, claim: Claim, until_ms: u64) -> Result<(), Error> {
            self.extend(&claim, until_ms)?;
            self.nodes.lock().unwrap()[claim.node() as usize].0 = false;
            Ok(())
        }

        fn abandon(&self, claim: Claim) -> Result<(), Error> {
            self.nodes.lock().unwrap()[claim.node() as usize].0 = false;
            Ok(())
        }
    }

    const LIMITS: Limits = Limits {
        max_lead_ms: 100,
        tolerance_ms: 5_100,
        unrecorded_wait_ms: 250,
        trust: false,
    };

    fn layout() -> Layout {
        Layout::builder()
            .epoch_ms(1_288_834_974_657)
            .node_field("n", 3)
            .build()
            .unwrap()
    }

    /// Chooses any node at `NOW`; returns the node, the records left and the nodes held.
    fn any(store: &Nodes, limits: &Limits) -> Result<u64, Error> {
        let chosen = choose(store, &layout(), NodeRequest::Any, &|| NOW, limits)?;
        let node = chosen.claim.node();
        assert_eq!(store.held(), vec![node], "only the chosen node is held");
        Ok(node)
    }

    #[test]
    fn a_node_released_moments_ago_comes_back_before_a_never_used_one() {
        // Node 0 released 1 ms ahead of the clock (its last tick), node 1 never used.
        let store = Nodes::new(&[Some(NOW + 1), None, None]);
        assert_eq!(any(&store, &LIMITS).unwrap(), 0);
        // It ended the search: nothing above it was claimed, so nothing was written there.
        assert_eq!(*store.claims.lock().unwrap(), 1);
        assert_eq!(store.record(1), None);
        // Exactly max_lead ahead costs nothing either.
        let store = Nodes::new(&[Some(NOW + 100), None]);
        assert_eq!(any(&store, &LIMITS).unwrap(), 0);
    }

    #[test]
    fn the_least_wait_wins_and_ties_go_to_the_lower_node() {
        // Node 0 ahead by 300 ms (a 200 ms wait), node 1 by 150 (50 ms), node 2 never used
        // (250 ms): node 1.
        let store = Nodes::new(&[Some(NOW + 300), Some(NOW + 150), None, None]);
        assert_eq!(any(&store, &LIMITS).unwrap(), 1);
        // The nodes passed over keep their records, and the never-used node that ended the
        // search keeps having none: its next claimant waits and reads it again.
        assert_eq!(store.record(0), Some(NOW + 300));
        assert_eq!(store.record(2), None);
        assert_eq!(store.record(3), None, "the search stopped at node 2");
        // A wait longer than the unrecorded one: the never-used node.
        let store = Nodes::new(&[Some(NOW + 2_000), None]);
        assert_eq!(any(&store, &LIMITS).unwrap(), 1);
        assert_eq!(store.record(0), Some(NOW + 2_000));
        // A tie: the lower node.
        let store = Nodes::new(&[Some(NOW + 350), None]);
        assert_eq!(any(&store, &LIMITS).unwrap(), 0);
        let store = Nodes::new(&[Some(NOW + 400), Some(NOW + 400), Some(NOW + 2_000)]);
        assert_eq!(any(&store, &LIMITS).unwrap(), 0);
    }

    #[test]
    fn a_node_further_ahead_than_the_tolerance_is_taken_only_when_trusted() {
        let store = Nodes::new(&[Some(NOW + 86_400_000), Some(NOW + 6_000)]);
        match choose(&store, &layout(), NodeRequest::Any, &|| NOW, &LIMITS) {
            Err(Error::AllNodesHeld { ahead: 2, .. }) => {}
            other => panic!("{other:?}"),
        }
        assert!(store.held().is_empty());
        let trusting = Limits {
            trust: true,
            ..LIMITS
        };
        // Trusted: the least ahead, and a wait within the tolerance before any jump.
        assert_eq!(any(&store, &trusting).unwrap(), 1);
        let store = Nodes::new(&[Some(NOW + 86_400_000), Some(NOW + 5_000)]);
        assert_eq!(any(&store, &trusting).unwrap(), 1);
        match choose(&store, &layout(), NodeRequest::Exact(0), &|| NOW, &LIMITS) {
            Err(Error::ReservationAhead { node: 0, .. }) => {}
            other => panic!("{other:?}"),
        }
        assert_eq!(store.record(0), Some(NOW + 86_400_000));
    }

    #[test]
    fn evidence_beyond_the_tolerance_does_not_end_the_search() {
        // Nodes 0 and 1: records deleted, their host anchors an hour ahead of this clock (set
        // back since): passed over, not taken and not the end of the search; node 2, never
        // used, is taken.
        let hour_ahead = Some(NOW + 3_600_000);
        let store = Nodes::new(&[None, None, None, None]).with_evidence(&[hour_ahead, hour_ahead]);
        assert_eq!(any(&store, &LIMITS).unwrap(), 2);
        assert_eq!(*store.claims.lock().unwrap(), 3);
        // Evidence within the tolerance still ends the search (its node costs the unrecorded
        // wait, as a never-used node does): node 0.
        let store = Nodes::new(&[None, None]).with_evidence(&[Some(NOW + 1_000)]);
        assert_eq!(any(&store, &LIMITS).unwrap(), 0);
        assert_eq!(*store.claims.lock().unwrap(), 1);
    }

    #[test]
    fn the_search_is_bounded() {
        // Every node 1 s ahead: the first MAX_PASSED_OVER are looked at, the lowest kept.
        let records = vec![Some(NOW + 1_000); MAX_PASSED_OVER + 10];
        let store = Nodes::new(&records);
        let chosen = choose(&store, &layout_wide(), NodeRequest::Any, &|| NOW, &LIMITS).unwrap();
        assert_eq!(chosen.claim.node(), 0);
        assert_eq!(*store.claims.lock().unwrap(), MAX_PASSED_OVER);
        assert_eq!(store.held(), vec![0]);
    }

    #[test]
    fn every_node_held_reports_what_the_store_could_not_use() {
        // Both nodes held, and the store could not use two more: the search ends, after its
        // retries, with the store's count and reasons, and nothing held.
        let mut store = Nodes::new(&[None, None]);
        store.unusable = 2;
        for node in 0..2 {
            store.nodes.lock().unwrap()[node].0 = true;
        }
        match choose(&store, &layout(), NodeRequest::Any, &|| NOW, &LIMITS) {
            Err(Error::AllNodesHeld {
                count: 8,
                ahead: 0,
                unusable: 2,
                unusable_reasons,
            }) => assert_eq!(unusable_reasons, ["reason 0", "reason 1"]),
            other => panic!("{other:?}"),
        }
        assert_eq!(*store.claims.lock().unwrap(), 1 + RACE_RETRIES as usize);
        assert_eq!(store.held(), vec![0, 1], "only the test's own holds");
    }

    #[test]
    fn a_search_that_ends_held_keeps_the_reasons_of_the_count_it_reports() {
        // Node 0 a day ahead (passed over: beyond the tolerance, untrusted), node 1 held: the
        // claim of node 0 counts two unusable nodes, and so does the search's last answer,
        // which names them: the error reports the count with its reasons.
        let mut store = Nodes::new(&[Some(NOW + 86_400_000), None]);
        store.unusable = 2;
        store.nodes.lock().unwrap()[1].0 = true;
        match choose(&store, &layout(), NodeRequest::Any, &|| NOW, &LIMITS) {
            Err(Error::AllNodesHeld {
                count: 8,
                ahead: 1,
                unusable: 2,
                unusable_reasons,
            }) => assert_eq!(unusable_reasons, ["reason 0", "reason 1"]),
            other => panic!("{other:?}"),
        }
        assert_eq!(store.held(), vec![1], "only the test's own hold");
    }

    #[test]
    fn a_chosen_node_reports_the_furthest_reservation_it_passed_over() {
        // Nodes 0 and 1 beyond the tolerance (a day and 6 s ahead), node 2 never used: node 2,
        // whose IDs may sort below what was issued on node 0, a day ahead.
        let store = Nodes::new(&[Some(NOW + 86_400_000), Some(NOW + 6_000), None]);
        let chosen = choose(&store, &layout(), NodeRequest::Any, &|| NOW, &LIMITS).unwrap();
        assert_eq!(chosen.claim.node(), 2);
        assert_eq!(
            (chosen.skipped_ahead, chosen.sorts_below_ms),
            (2, 86_400_000)
        );
        assert_eq!(store.held(), vec![2]);
    }

    #[test]
    fn a_race_wait_is_random_between_half_and_all_of_the_doubled_round() {
        for round_ns in [1, 1_000, 1_000_000, 3_000_000, 100_000_000] {
            let round = Duration::from_nanos(round_ns);
            for attempt in 0..20 {
                let d = round
                    .saturating_mul(1 << attempt.min(16))
                    .min(RACE_WAIT_CAP)
                    .max(Duration::from_nanos(2));
                let waits: Vec<Duration> = (0..64).map(|_| race_wait(round, attempt)).collect();
                for &w in &waits {
                    assert!(
                        w >= d / 2 && w <= d,
                        "{w:?} for {d:?} ({round:?}, {attempt})"
                    );
                }
                if d >= Duration::from_micros(1) {
                    // 64 draws from the whole range (a thousand values or more): they spread
                    // over more than an eighth of it.
                    let spread = *waits.iter().max().unwrap() - *waits.iter().min().unwrap();
                    assert!(spread > d / 16, "{round:?}, {attempt}: {waits:?}");
                }
            }
        }
        // Doubled at each attempt, up to the cap.
        let round = Duration::from_millis(1);
        assert!(race_wait(round, 3) >= Duration::from_millis(4));
        assert!(race_wait(round, 3) <= Duration::from_millis(8));
        assert!(race_wait(Duration::from_secs(1), 0) >= RACE_WAIT_CAP / 2);
        assert!(race_wait(Duration::from_secs(1), 0) <= RACE_WAIT_CAP);
    }

    fn layout_wide() -> Layout {
        Layout::builder()
            .epoch_ms(1_288_834_974_657)
            .node_field("n", 10)
            .build()
            .unwrap()
    }
}
