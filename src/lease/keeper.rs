//! The keeper thread: renews the claim, extends the time reservation ahead of need, and
//! publishes the generator's fence words; at the end, seals the generator and releases.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::handover;
use super::status::{LeaseStatus, Wakeup, deadline_tick, duration_ms, last_tick_before};
use super::store::{Claim, NodeStore};
use crate::clock::TimeSource;
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

/// The keeper thread's state.
pub(crate) struct Keeper<G: Held> {
    pub(crate) generator: Arc<G>,
    pub(crate) store: Arc<dyn NodeStore>,
    pub(crate) status: Arc<LeaseStatus>,
    pub(crate) window_ms: u64,
    pub(crate) interval: Duration,
    pub(crate) reserved_until_ms: u64,
    /// The highest tick issued in, once the generator was sealed because the lease was lost.
    pub(crate) sealed: Option<u64>,
    /// What a lost claim's write-back ([`NodeStore::restore`]) must still record, while it
    /// has not been written: tried again every round.
    pub(crate) restore_pending: Option<u64>,
}

impl<G: Held> Keeper<G> {
    /// Runs a round every interval, or at once when a caller found the clock past the
    /// reservation, until told to stop; then seals the generator and releases.
    pub(crate) fn run(mut self, claim: Claim) -> Result<(), Error> {
        while self.status.signal.wait(self.interval) == Wakeup::Round {
            let started = Instant::now();
            self.maintain(&claim);
            let took = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            self.status.round_us.store(took, Ordering::Relaxed);
        }
        self.seal_and_release(claim)
    }

    /// Renews the claim, extends the reservation when less than half a window is left, and
    /// publishes the new limit. A `LeaseLost` from either closes the fence at the end of this
    /// round, for good.
    fn maintain(&mut self, claim: &Claim) {
        if let Some(until) = self.restore_pending
            && self.store.restore(claim, until).is_ok()
        {
            self.restore_pending = None;
        }
        let generator = Arc::clone(&self.generator);
        let g = &*generator;
        let layout = g.layout();
        let start_ms = g.clock().precise_now_ms();
        let start_mono = self.status.mono_us();
        let mut error = None;
        let was_lost = self.status.lost_at(start_mono);
        match self.store.renew(claim) {
            Ok(valid) => {
                LeaseStatus::count(&self.status.renewals);
                if !was_lost {
                    self.status.renewed(start_mono, valid);
                    self.status.confirmed(start_mono, start_ms);
                }
                if let Some(valid) = valid {
                    // The reservation runs at least two validity periods ahead, so a store that
                    // goes away shows up as LeaseLost at the deadline, not as a reservation gap.
                    let twice = duration_ms(valid).saturating_mul(2);
                    self.window_ms = self.window_ms.max(twice);
                    self.interval = self.interval.min(valid / 3);
                }
            }
            Err(e) => {
                if let Error::LeaseLost { reason, .. } = &e {
                    self.lose(claim, reason);
                }
                #[cfg(feature = "tracing")]
                tracing::warn!(node = self.generator.node(), error = %e, "monoflake: lease renewal failed");
                error = Some(e);
            }
        }
        // Once the deadline has passed the lease is lost for good: the node may already be
        // someone else's. Count it once; issuing stays stopped.
        if !was_lost && self.status.lost_at(start_mono) {
            let why = error
                .as_ref()
                .map_or_else(|| "no renewal succeeded".to_owned(), Error::to_string);
            let reason = format!(
                "not renewed with {} within its validity: {why}",
                self.status.store
            );
            self.lose(claim, &reason);
            LeaseStatus::count(&self.status.losses);
            #[cfg(feature = "tracing")]
            tracing::error!(
                node = self.generator.node(),
                "monoflake: lease lost; issuing stopped"
            );
        }
        let lost = self.status.lost_at(start_mono);
        if error.is_none() && !lost {
            let issued_end = layout.unix_ms_of_tick(g.last_tick().saturating_add(1));
            if let Some(want) =
                handover::extension(self.reserved_until_ms, start_ms, issued_end, self.window_ms)
            {
                match self.store.extend(claim, want) {
                    Ok(()) => {
                        LeaseStatus::count(&self.status.reservation_writes);
                        self.reserved_until_ms = want;
                    }
                    Err(e) => {
                        LeaseStatus::count(&self.status.reservation_failures);
                        #[cfg(feature = "tracing")]
                        tracing::warn!(node = self.generator.node(), error = %e, "monoflake: reservation write failed");
                        if let Error::LeaseLost { reason, .. } = &e {
                            // The store says the claim is gone (its key deleted, taken over):
                            // the node may be someone else's already. Stop now, for good —
                            // not when the reservation already written runs out.
                            self.lose(claim, reason);
                            LeaseStatus::count(&self.status.losses);
                        }
                        error = Some(e);
                    }
                }
            }
        }
        self.status.record(error.as_ref());
        let deadline = self.status.fence_deadline_ms(start_ms, start_mono);
        // Mutant: the fence ignores the keeper's deadline (only the reservation stops it).
        #[cfg(monoflake_mutant_fence_no_deadline)]
        let deadline = if deadline == 0 { 0 } else { u64::MAX };
        // The keeper is the fence's only writer until the release; once the lease is lost the
        // seal has closed it for good.
        if self.sealed.is_none() {
            g.set_fence(
                last_tick_before(layout, self.reserved_until_ms),
                deadline_tick(layout, deadline),
            );
        }
    }

    /// The lease is lost: stops the generator for good (exactly: the seal swaps the state),
    /// writes back the time it used beside the node's records as they are now
    /// ([`NodeStore::restore`]) — if they were deleted under it, a claimant that found no
    /// record reads this before it issues, so a clock of ours that runs ahead of the
    /// claimant's cannot be overlapped — and only then says the lease is lost. Once.
    fn lose(&mut self, claim: &Claim, reason: &str) {
        let mut reason = reason.to_owned();
        if self.sealed.is_none() {
            let g = &*self.generator;
            // Mutant: a lost lease does not stop the generator (it goes on until the fence's
            // deadline or limit stops it).
            #[cfg(monoflake_mutant_no_seal)]
            let last_tick = g.last_tick();
            #[cfg(not(monoflake_mutant_no_seal))]
            let last_tick = g.seal();
            self.sealed = Some(last_tick);
            let used = g.layout().unix_ms_of_tick(last_tick.saturating_add(1));
            let until = handover::final_reservation(used, claim.reserved_until_ms());
            let restored = self.store.restore(claim, until);
            // Mutant: a write-back that fails is ignored (issue 34, case 2).
            #[cfg(monoflake_mutant_write_back_ignored)]
            let restored = restored.or(Ok::<(), Error>(()));
            if let Err(e) = restored {
                // Never silent: the reason every refusal carries says it, and the keeper
                // tries again each round while the process lives.
                #[cfg(feature = "tracing")]
                tracing::error!(node = g.node(), error = %e, "monoflake: cannot write back the time used");
                reason = format!(
                    "{reason}; what it issued (up to {until} Unix ms) could not be written \
                     back to {}: {e}",
                    self.status.store
                );
                self.restore_pending = Some(until);
            }
        }
        self.status.lose(&reason);
    }

    /// Stops the generator for good, then writes the end of the last tick issued as the final
    /// reservation and releases the claim.
    fn seal_and_release(self, claim: Claim) -> Result<(), Error> {
        let g = &*self.generator;
        if let Some(until) = self.restore_pending
            && let Err(e) = self.store.restore(&claim, until)
        {
            // What it issued is still in no record: keep the claim — the file store's lock
            // and the node's host-wide claim — until the process exits, so that a successor
            // on this host is refused rather than start unaware of it.
            let node = claim.node();
            std::mem::forget(claim);
            return Err(Error::LeaseLost {
                node,
                reason: format!(
                    "what it issued (up to {until} Unix ms) could not be written back to {}: \
                     {e}; the node stays held on this host until this process exits",
                    self.status.store
                ),
            });
        }
        self.status.released.store(true, Ordering::Relaxed);
        let last_tick = self.sealed.unwrap_or_else(|| g.seal());
        let used = g.layout().unix_ms_of_tick(last_tick.saturating_add(1));
        // Never below what was read at the claim: a node that issued nothing keeps the old one.
        let until = handover::final_reservation(used, claim.reserved_until_ms());
        // A release whose write finds the claim gone (its records deleted since the last
        // round) writes back what was used, as a round that found the claim lost does: a
        // successor that found no record reads it after its wait. So the final reservation is
        // written under the claim first, and the claim given up after.
        let written = self.store.extend(&claim, until);
        // Mutant: a release that finds its claim gone lets go without writing back.
        #[cfg(monoflake_mutant_release_no_write_back)]
        let written = written.or(Ok::<(), Error>(()));
        match written {
            Err(Error::LeaseLost { node, reason }) => match self.store.restore(&claim, until) {
                Ok(()) => {
                    let _ = self.store.abandon(claim);
                    Err(Error::LeaseLost { node, reason })
                }
                Err(e) => {
                    // As above: the claim (the file store's host-wide claim) stays until the
                    // process exits, so a successor on this host is refused.
                    std::mem::forget(claim);
                    Err(Error::LeaseLost {
                        node,
                        reason: format!(
                            "{reason}; what it issued (up to {until} Unix ms) could not be \
                             written back to {}: {e}; the node stays held on this host until \
                             this process exits",
                            self.status.store
                        ),
                    })
                }
            },
            _ => self.store.release(claim, until),
        }
    }
}
