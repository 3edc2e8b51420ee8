//! Which node to take when reservations run ahead of the clock: prefer a settled node, take
//! one slightly ahead (a holder that crashed moments ago) only when no settled one is free,
//! refuse one absurdly far ahead (a clock that is or was wrong) unless told to trust it.

use std::hash::{BuildHasher, RandomState};
use std::time::{Duration, Instant};

use super::store::{Claim, NodeRequest, NodeStore};
use crate::{Error, Layout};

/// How many free nodes with a reservation ahead of the clock a claim of any node holds while
/// it looks further for a settled one. Each is held until the choice is made (so the store's
/// "lowest free node" moves on), then given back.
const MAX_PASSED_OVER: usize = 64;

/// How many times a claim of any node searches again when the store answered that every node
/// is held: another claimant may be holding free nodes it passed over for a moment, and gives
/// them back once its own search ends.
const RACE_RETRIES: u32 = 8;

/// The longest single wait between two searches.
const RACE_WAIT_CAP: Duration = Duration::from_millis(250);

/// The node chosen, and how many were passed over as too far ahead or unusable.
#[derive(Debug)]
pub(crate) struct Chosen {
    pub(crate) claim: Claim,
    pub(crate) skipped_ahead: u64,
    pub(crate) skipped_unusable: u64,
}

/// How far the claim's reservation is ahead of `now_ms`, in ms (0 for none, or one passed).
pub(crate) fn ahead_ms(claim: &Claim, now_ms: u64) -> u64 {
    claim
        .reserved_until_ms()
        .map_or(0, |until| until.saturating_sub(now_ms))
}

/// Claims a node for `request`: see the module comment. `now_ms` reads the clock (Unix ms);
/// `tolerance_ms` is the largest lead accepted; `trust` accepts any lead (the caller moves its
/// clock to the reservation).
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
    tolerance_ms: u64,
    trust: bool,
) -> Result<Chosen, Error> {
    if let NodeRequest::Exact(_) = request {
        let claim = store.claim(layout, request)?;
        let now_ms = now_ms();
        if !trust && ahead_ms(&claim, now_ms) > tolerance_ms {
            let error = ahead_error(&claim, now_ms, tolerance_ms);
            give_back(store, claim);
            return Err(error);
        }
        return Ok(Chosen {
            claim,
            skipped_ahead: 0,
            skipped_unusable: 0,
        });
    }
    // Any node. A search that ends with every node held may have met another claimant holding
    // the free nodes it passed over, for the length of its own search: search again after a
    // randomized wait that grows with each attempt (and with how long a search takes here),
    // a bounded number of times. Between searches this claimant holds nothing.
    let mut attempt = 0;
    loop {
        let started = Instant::now();
        let result = search_any(store, layout, now_ms(), tolerance_ms, trust);
        match result {
            Err(Error::AllNodesHeld { .. }) if attempt < RACE_RETRIES => {
                let round = started.elapsed().max(Duration::from_millis(1));
                std::thread::sleep(race_wait(round, attempt));
                attempt += 1;
            }
            other => return other,
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

/// One search for any node: the first settled one wins; nodes ahead are held (so the store
/// offers the next one) and given back once the choice is made. Returns with at most the
/// chosen node held.
fn search_any(
    store: &dyn NodeStore,
    layout: &Layout,
    now_ms: u64,
    tolerance_ms: u64,
    trust: bool,
) -> Result<Chosen, Error> {
    let too_far = |claim: &Claim| !trust && ahead_ms(claim, now_ms) > tolerance_ms;
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
                if ahead_ms(&claim, now_ms) == 0 {
                    break Ok(Some(claim));
                }
                passed.push(claim);
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
    let skipped_ahead = passed.iter().filter(|c| too_far(c)).count() as u64;
    let chosen = match outcome {
        Ok(Some(settled)) => Ok(settled),
        Ok(None) => {
            // No settled node: the least-ahead one within the tolerance, if any.
            let best = passed
                .iter()
                .enumerate()
                .filter(|(_, c)| !too_far(c))
                .min_by_key(|(_, c)| ahead_ms(c, now_ms))
                .map(|(i, _)| i);
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
    for claim in passed {
        give_back(store, claim);
    }
    chosen.map(|claim| Chosen {
        claim,
        skipped_ahead,
        skipped_unusable: unusable,
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

/// Gives a node back untouched: its reservation stays what it was.
fn give_back(store: &dyn NodeStore, claim: Claim) {
    let until = claim.reserved_until_ms().unwrap_or(0);
    // Best effort: the claim is given up either way, and the record is unchanged.
    let _ = store.release(claim, until);
}
