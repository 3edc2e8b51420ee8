//! The keeper thread: the shell that carries out a held node's [`Holder`] — renewals,
//! reservation extensions, the fence words, the seal, the write-back and the release — and
//! feeds back what happened. It decides nothing: every rule is the holder's.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::handover::{
    self, Action, Event, Failure, Holder, LetGo, Loss, Now, Outcome, StoreReading, Terms,
};
use super::status::{LeaseStatus, Wakeup};
use super::store::{Claim, NodeStore};
use crate::clock::{Ceiling, TimeSource};
use crate::generator::{PerCoreSlots, PerThreadShared};
use crate::sync::Ordering;
use crate::{Error, Generator, Layout};

/// What the keeper needs of the generator whose node it holds: a [`Generator`], the slots of a
/// [`PerThread`](crate::PerThread), or those of a [`PerCore`](crate::PerCore).
pub(crate) trait Held: Send + Sync + 'static {
    type Clock: TimeSource;
    fn layout(&self) -> &Layout;
    fn clock(&self) -> &Self::Clock;
    #[cfg(feature = "tracing")]
    fn node(&self) -> u64;
    /// The highest tick issued (or, per thread, moved into), for the next extension.
    fn last_tick(&self) -> u64;
    /// Writes the fence words: issue no tick past `limit`, none at or past `deadline`.
    fn set_fence(&self, limit: u64, deadline: u64);
    /// Stops issuing for good and returns the highest tick anything was or will be issued in:
    /// what the final reservation must cover.
    fn seal(&self) -> u64;
}

impl<C: TimeSource + 'static> Held for Generator<C> {
    type Clock = C;
    fn layout(&self) -> &Layout {
        Generator::layout(self)
    }
    fn clock(&self) -> &C {
        Generator::clock(self)
    }
    #[cfg(feature = "tracing")]
    fn node(&self) -> u64 {
        Generator::node(self)
    }
    fn last_tick(&self) -> u64 {
        Generator::last_tick(self)
    }
    fn set_fence(&self, limit: u64, deadline: u64) {
        Generator::fence(self).set(limit, deadline);
    }
    fn seal(&self) -> u64 {
        // The swap returns the last value issued: nothing is issued after it.
        self.tick_of_state(Generator::seal(self))
    }
}

impl<C: TimeSource + 'static> Held for PerThreadShared<C> {
    type Clock = C;
    fn layout(&self) -> &Layout {
        self.generator().layout()
    }
    fn clock(&self) -> &C {
        self.generator().clock()
    }
    #[cfg(feature = "tracing")]
    fn node(&self) -> u64 {
        self.generator().node()
    }
    fn last_tick(&self) -> u64 {
        PerThreadShared::last_tick(self)
    }
    fn set_fence(&self, limit: u64, deadline: u64) {
        self.generator().fence().set(limit, deadline);
    }
    fn seal(&self) -> u64 {
        // The highest tick any slot published before its swap: a holder issues only in ticks
        // it published first (see `PerThreadShared::seal`).
        self.generator().tick_of_state(PerThreadShared::seal(self))
    }
}

impl<C: TimeSource + 'static> Held for PerCoreSlots<C> {
    type Clock = C;
    fn layout(&self) -> &Layout {
        self[0].layout()
    }
    fn clock(&self) -> &C {
        self[0].clock()
    }
    #[cfg(feature = "tracing")]
    fn node(&self) -> u64 {
        self[0].node()
    }
    fn last_tick(&self) -> u64 {
        self.iter().map(Generator::last_tick).max().unwrap_or(0)
    }
    fn set_fence(&self, limit: u64, deadline: u64) {
        // Slot by slot: until its turn, a slot issues under the words of the last round —
        // bounds the keeper published then, used a few microseconds longer, as when the
        // keeper runs that much late (which the protocol's bounds allow for).
        // Mutant: only the first slot's fence is written.
        #[cfg(monoflake_mutant_per_core_one_fence)]
        let slots = &self[..1];
        #[cfg(not(monoflake_mutant_per_core_one_fence))]
        let slots = &self[..];
        for g in slots {
            g.fence().set(limit, deadline);
        }
    }
    fn seal(&self) -> u64 {
        // Each swap returns its slot's last value: nothing is issued in any slot after its
        // own swap, so the highest of them bounds every ID.
        // Mutant: only the first slot is sealed.
        #[cfg(monoflake_mutant_per_core_one_seal)]
        let slots = &self[..1];
        #[cfg(not(monoflake_mutant_per_core_one_seal))]
        let slots = &self[..];
        slots.iter().map(Held::seal).max().unwrap_or(0)
    }
}

/// The keeper thread's state: the holder's machine and what it acts on.
pub(crate) struct Keeper<G: Held> {
    pub(crate) holder: Holder,
    pub(crate) terms: KeeperTerms,
    pub(crate) generator: Arc<G>,
    pub(crate) store: Arc<dyn NodeStore>,
    pub(crate) status: Arc<LeaseStatus>,
}

/// The holder's terms, owned (a [`Terms`] borrows its layout from the generator).
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeeperTerms {
    pub(crate) limits: super::handover::Limits,
    pub(crate) window_ms: u64,
    pub(crate) check_us: u64,
}

impl KeeperTerms {
    pub(crate) fn with<'a>(&self, layout: &'a Layout) -> Terms<'a> {
        Terms {
            layout,
            limits: self.limits,
            window_ms: self.window_ms,
            check_us: self.check_us,
        }
    }
}

/// What a store call's error means to the holder.
pub(crate) fn failure(e: &Error) -> Failure {
    match e {
        Error::LeaseLost { .. } => Failure::Lost,
        _ => Failure::Failed,
    }
}

/// What the store noted of its clock at the renewal that just returned
/// ([`Claim::note_store_clock`]), with the monotonic time now; `None` for a renewal that
/// failed (whatever was noted is dropped) or a store without a clock.
pub(crate) fn store_reading<T>(
    claim: &Claim,
    result: &Result<T, Error>,
    status: &LeaseStatus,
) -> Option<StoreReading> {
    let noted = claim.take_store_clock();
    let after_mono_us = status.mono_us();
    match (result, noted) {
        (Ok(_), Some((ms, lead_ms, slack_ms))) => Some(StoreReading {
            ms,
            lead_ms,
            slack_ms,
            after_mono_us,
        }),
        _ => None,
    }
}

/// The [`Ceiling`] an [`Action::Ceiling`] sets, carried on to now.
pub(crate) fn ceiling_now(
    ms: u64,
    at_mono_us: u64,
    slack_ms: u64,
    status: &LeaseStatus,
) -> Ceiling {
    Ceiling {
        unix_ns: handover::ceiling_ns_at(ms, at_mono_us, status.mono_us()),
        slack_ns: slack_ms.saturating_mul(1_000_000),
    }
}

/// The reason a store's `LeaseLost` gives, or the error's text.
fn reason_of(e: &Error) -> String {
    match e {
        Error::LeaseLost { reason, .. } => reason.clone(),
        other => other.to_string(),
    }
}

impl<G: Held> Keeper<G> {
    /// Carries out the holder's actions from the start of its keeper (the generator just
    /// built) to its end: rounds every interval, or at once when a caller finds the clock
    /// past the reservation, until told to stop; then the seal and the release.
    pub(crate) fn run(mut self, claim: Claim) -> Result<(), Error> {
        let generator = Arc::clone(&self.generator);
        let layout = generator.layout().clone();
        let terms = self.terms.with(&layout);
        let mut action = self.holder.step(&terms, Event::Done);
        // The last error a store call gave in this round (for refusals and loss reasons).
        let mut error: Option<Error> = None;
        // Why the claim was lost, as the store said it.
        let mut lost: Option<String> = None;
        let mut round_started: Option<Instant> = None;
        let mut written_back: Option<Error> = None;
        loop {
            let event = match action {
                Action::Idle { us } => {
                    if let Some(started) = round_started.take() {
                        let took = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                        self.status.round_us.store(took, Ordering::Relaxed);
                    }
                    match self.status.signal.wait(Duration::from_micros(us)) {
                        Wakeup::Round => {
                            round_started = Some(Instant::now());
                            error = None;
                            Event::Round
                        }
                        Wakeup::Stop => Event::Stop,
                    }
                }
                Action::Renew => {
                    let at = Now {
                        ms: generator.clock().precise_now_ms(),
                        mono_us: self.status.mono_us(),
                    };
                    let result = self.store.renew(&claim);
                    let store = store_reading(&claim, &result, &self.status);
                    let last_tick = generator.last_tick();
                    let result = match result {
                        Ok(valid) => {
                            LeaseStatus::count(&self.status.renewals);
                            Ok(valid.map(|v| u64::try_from(v.as_micros()).unwrap_or(u64::MAX)))
                        }
                        Err(e) => {
                            #[cfg(feature = "tracing")]
                            tracing::warn!(node = generator.node(), error = %e, "monoflake: lease renewal failed");
                            let f = failure(&e);
                            if f == Failure::Lost {
                                lost.get_or_insert_with(|| reason_of(&e));
                            }
                            error = Some(e);
                            Err(f)
                        }
                    };
                    Event::Renewed {
                        at,
                        result,
                        last_tick,
                        store,
                    }
                }
                Action::Ceiling {
                    ms,
                    at_mono_us,
                    slack_ms,
                } => {
                    let ceiling = ceiling_now(ms, at_mono_us, slack_ms, &self.status);
                    generator.clock().set_ceiling(Some(ceiling));
                    Event::Done
                }
                Action::Extend { until_ms } => match self.store.extend(&claim, until_ms) {
                    Ok(()) => {
                        LeaseStatus::count(&self.status.reservation_writes);
                        Event::Extended(Ok(()))
                    }
                    Err(e) => {
                        LeaseStatus::count(&self.status.reservation_failures);
                        #[cfg(feature = "tracing")]
                        tracing::warn!(node = generator.node(), error = %e, "monoflake: reservation write failed");
                        let f = failure(&e);
                        if f == Failure::Lost {
                            lost.get_or_insert_with(|| reason_of(&e));
                        }
                        error = Some(e);
                        Event::Extended(Err(f))
                    }
                },
                Action::Fence { limit, deadline } => {
                    self.status.record(error.as_ref());
                    generator.set_fence(limit, deadline);
                    Event::Done
                }
                Action::Seal { releasing } => {
                    if releasing {
                        self.status.released.store(true, Ordering::Relaxed);
                    }
                    Event::Sealed {
                        last_tick: generator.seal(),
                    }
                }
                Action::WriteBack { until_ms } => match self.store.restore(&claim, until_ms) {
                    Ok(()) => {
                        written_back = None;
                        Event::WrittenBack(Ok(()))
                    }
                    Err(e) => {
                        // Never silent: the reason every refusal carries says it, and the
                        // write-back is tried again each round while the process lives.
                        #[cfg(feature = "tracing")]
                        tracing::error!(node = generator.node(), error = %e, "monoflake: cannot write back the time used");
                        let f = failure(&e);
                        written_back = Some(e);
                        Event::WrittenBack(Err(f))
                    }
                },
                Action::Lost { why, unwritten } => {
                    let mut reason = match why {
                        Loss::Validity => {
                            let why = error.as_ref().map_or_else(
                                || "no renewal succeeded".to_owned(),
                                Error::to_string,
                            );
                            format!(
                                "not renewed with {} within its validity: {why}",
                                self.status.store
                            )
                        }
                        Loss::Renewal | Loss::Extension => lost
                            .clone()
                            .unwrap_or_else(|| "the store says the claim is gone".to_owned()),
                    };
                    if unwritten && let Some(e) = &written_back {
                        reason = format!(
                            "{reason}; what it issued (up to {} Unix ms) could not be written \
                             back to {}: {e}",
                            self.holder_final_ms(&terms),
                            self.status.store
                        );
                    }
                    // The reason first, then the deadline of 0 (`lose` writes both, in that
                    // order): a refusal that sees the loss sees why.
                    self.status.lose(&reason);
                    LeaseStatus::count(&self.status.losses);
                    #[cfg(feature = "tracing")]
                    tracing::error!(
                        node = generator.node(),
                        "monoflake: lease lost; issuing stopped"
                    );
                    lost.get_or_insert(reason);
                    Event::Done
                }
                Action::End { let_go, outcome } => {
                    generator.clock().set_ceiling(None);
                    return self.end(claim, let_go, outcome, lost, written_back);
                }
                Action::Sleep { .. }
                | Action::AdvanceClock { .. }
                | Action::Reread
                | Action::Build { .. } => {
                    unreachable!("a build's action after the build: {action:?}")
                }
            };
            action = self.holder.step(&terms, event);
            // A deadline of 0 (lost) is published by `Action::Lost`, with its reason.
            let deadline = self.holder.lease_deadline_us();
            if deadline != 0 {
                self.status.set_deadline_us(deadline);
            }
        }
    }

    /// The final reservation the holder writes or wrote back, for messages.
    fn holder_final_ms(&self, terms: &Terms<'_>) -> u64 {
        self.holder.final_reservation_ms(terms)
    }

    /// Lets the claim go as the holder said, and reports how its life ended.
    fn end(
        self,
        claim: Claim,
        let_go: LetGo,
        outcome: Outcome,
        lost: Option<String>,
        written_back: Option<Error>,
    ) -> Result<(), Error> {
        let node = claim.node();
        let released = match let_go {
            LetGo::Release { until_ms } => self.store.release(claim, until_ms),
            LetGo::Abandon => {
                // Best effort: the claim is given up either way.
                let _ = self.store.abandon(claim);
                Ok(())
            }
            LetGo::Keep => {
                // What it issued is still in no record: keep the claim — the file store's
                // lock and the node's host-wide claim — until the process exits, so that a
                // successor on this host is refused rather than start unaware of it.
                std::mem::forget(claim);
                Ok(())
            }
        };
        match outcome {
            Outcome::Released => released,
            Outcome::Unwritten => {
                let why = written_back.map_or_else(String::new, |e| format!(": {e}"));
                Err(Error::LeaseLost {
                    node,
                    reason: format!(
                        "{}; what it issued could not be written back to {}{why}; the node stays \
                         held on this host until this process exits",
                        lost.unwrap_or_else(|| "the lease was lost".to_owned()),
                        self.status.store
                    ),
                })
            }
            _ => Err(Error::LeaseLost {
                node,
                reason: lost.unwrap_or_else(|| "the lease was lost".to_owned()),
            }),
        }
    }
}
