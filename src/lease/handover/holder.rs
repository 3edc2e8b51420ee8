//! [`Holder`]: a leased generator's whole life with its node — claim read, waits, re-read,
//! first renewal, first reservation, the keeper's rounds, the loss, the write-back, the
//! release — as one pure state machine: events in, actions out, no I/O, no clock, no sleeping.
//!
//! The shape of raft-rs's `RawNode`: the program's shell (`build.rs`, `keeper.rs`) carries
//! out each [`Action`] against the store, the clock and the generator, and feeds back what
//! happened as the next [`Event`]. It decides nothing. The model checker (`handover-check`)
//! drives this very type against simulated stores, so every rule here is the rule the program
//! runs: the fence's limit and deadline, the start tick, the write-back (exactly once), what a
//! release writes.

use super::ticks::{deadline_tick, end_of_tick, first_tick_from, last_tick_before};
use super::words::{
    Action, ClaimRead, Event, Failure, LetGo, Loss, Now, Outcome, StoreReading, Terms,
};
use super::{
    Limits, Step, after_claim, after_wait, clock_ceiling, confirm_bound_ms, extension,
    final_reservation, reservation_of, store_floor_ms,
};

/// The fewest milliseconds a fence's deadline keeps short of what is left of the lease, to
/// cover a coarse clock's lag.
const DEADLINE_MARGIN_MS: u64 = 2;

/// Where a holder is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Phase {
    /// Waiting (`Action::Sleep`) before starting above `floor`, or, with `None`, re-reading.
    Waiting { floor: Option<u64> },
    /// Re-reading the node's records after the unrecorded wait.
    Rereading,
    /// Moving the clock forward to a trusted reservation.
    Advancing { to_ms: u64 },
    /// The first renewal, above `floor`.
    Confirming { floor: u64 },
    /// The first reservation, `until_ms`, above `floor_tick`, confirmed at `at`.
    Reserving {
        floor_tick: u64,
        at: Now,
        until_ms: u64,
    },
    /// The generator is being built.
    Building,
    /// Between rounds.
    Idle,
    /// A round retrying a write-back (`then`: a renewal follows, or not: lost).
    Retrying,
    /// A round's renewal.
    Renewing,
    /// A round's extension to `until_ms`, after a renewal at `at`.
    Extending { at: Now, until_ms: u64 },
    /// A round publishing its fence.
    Publishing,
    /// Losing the claim: sealing, then writing back, then saying so.
    Sealing { why: Loss },
    /// Writing back after sealing.
    WritingBack { why: Loss },
    /// Saying the claim is lost; the round ends.
    Reporting,
    /// Stopping: retrying a write-back first.
    StopRetry,
    /// Stopping: sealing.
    StopSealing,
    /// Stopping: the final reservation `until_ms` under the claim.
    StopExtending { until_ms: u64 },
    /// Stopping: the final extension found the claim gone; writing back.
    StopWritingBack,
    /// Nothing follows.
    Ended,
}

/// Whether a lost claim's write-back has been written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum WriteBack {
    /// Nothing is due (not lost).
    NotDue,
    /// Due and not yet acknowledged: `until_ms` is retried each round and at the release.
    Pending { until_ms: u64 },
    /// Written: never again.
    Written,
}

/// A leased generator's life with its node, as a pure state machine. See the module's
/// documentation and docs/design.md, "The hand-over".
///
/// ```
/// use monoflake::Layout;
/// use monoflake::handover::{Action, ClaimRead, Event, Holder, Limits, Now, Terms};
/// let layout = Layout::twitter();
/// let limits = Limits { max_lead_ms: 100, tolerance_ms: 5_100, unrecorded_wait_ms: 250, trust: false };
/// let terms = Terms { layout: &layout, limits, window_ms: 5_000, check_us: 100_000 };
/// let now = 1_700_000_000_000;
/// // A node released moments ago: its record is the end of its last tick.
/// let read = ClaimRead { reserved_ms: Some(now - 3), recorded: true, store_clock: None };
/// let (mut holder, action) = Holder::claim(&terms, read, now);
/// assert_eq!(action, Action::Renew);
/// let at = Now { ms: now, mono_us: 0 };
/// let action = holder.step(&terms, Event::Renewed { at, result: Ok(None), last_tick: 0, store: None });
/// assert_eq!(action, Action::Extend { until_ms: now + 5_000 });
/// let Action::Build { limit, .. } = holder.step(&terms, Event::Extended(Ok(()))) else { panic!() };
/// assert_eq!(limit, layout.tick_at(now + 5_000) - 1);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Holder {
    phase: Phase,
    /// The reservation the claim read (a release never writes below it).
    read: Option<u64>,
    /// The clock at the claim, Unix ms.
    claimed_ms: u64,
    /// The store's clock at the claim and the lead it allows, for a store with a clock.
    store_clock: Option<(u64, u64)>,
    /// The reservation the store acknowledged, Unix ms.
    reserved_ms: u64,
    /// The reservation window, ms.
    window_ms: u64,
    /// The keeper's period, µs.
    interval_us: u64,
    /// The lease's deadline on the monotonic clock, µs: `u64::MAX` for a claim that lasts as
    /// long as the process, 0 once lost.
    lease_deadline_us: u64,
    /// The start of the last check that found the claim standing plus the confirm bound, µs.
    confirmed_until_us: u64,
    /// The generator's clock at the start of that check, Unix ms.
    confirmed_clock_ms: u64,
    /// The highest tick issued in, once sealed.
    sealed: Option<u64>,
    write_back: WriteBack,
    /// Whether a round's check or write failed (the fence's refusal then says so).
    failing: bool,
    /// The generator clock's ceiling, from the store's clock at the renewals that confirmed
    /// the claim: Unix ms at a monotonic µs, and its slack in ms (see [`clock_ceiling`]).
    ceiling: Option<(u64, u64, u64)>,
    /// The action due once the shell has set the ceiling ([`Action::Ceiling`]).
    after_ceiling: Option<Action>,
}

impl Holder {
    /// A claimant that has just claimed a node and read `read`, its clock at `now_ms`: the
    /// protocol's first decision ([`after_claim`]) and the action that carries it out.
    pub fn claim(terms: &Terms<'_>, read: ClaimRead, now_ms: u64) -> (Holder, Action) {
        let mut holder = Holder {
            phase: Phase::Ended,
            read: read.reserved_ms,
            claimed_ms: now_ms,
            store_clock: read.store_clock,
            reserved_ms: 0,
            window_ms: terms.window_ms,
            interval_us: (terms.window_ms.saturating_mul(1_000) / 4).min(terms.check_us),
            lease_deadline_us: u64::MAX,
            confirmed_until_us: 0,
            confirmed_clock_ms: 0,
            sealed: None,
            write_back: WriteBack::NotDue,
            failing: false,
            ceiling: None,
            after_ceiling: None,
        };
        let step = after_claim(read.reserved_ms, read.recorded, now_ms, &terms.limits);
        let action = holder.follow(terms, step);
        (holder, action)
    }

    /// Whether the holder's life has ended.
    pub const fn ended(&self) -> bool {
        matches!(self.phase, Phase::Ended)
    }

    /// The lease's deadline on the monotonic clock, µs (`u64::MAX`: none; 0: lost): what a
    /// refusal compares with to tell a lease not renewed in time.
    pub const fn lease_deadline_us(&self) -> u64 {
        self.lease_deadline_us
    }

    /// The reservation the store acknowledged, Unix ms (0 before the first).
    pub const fn reserved_ms(&self) -> u64 {
        self.reserved_ms
    }

    /// Whether the last round's check or write failed.
    pub const fn failing(&self) -> bool {
        self.failing
    }

    /// Carries out a protocol step: start, wait, jump, refuse.
    fn follow(&mut self, terms: &Terms<'_>, step: Step) -> Action {
        match step {
            Step::Start { floor_ms } => {
                self.phase = Phase::Confirming { floor: floor_ms };
                Action::Renew
            }
            Step::Jump { to_ms } => {
                self.phase = Phase::Advancing { to_ms };
                Action::AdvanceClock { to_ms }
            }
            Step::Refuse { ahead_ms } => self.give_up(Outcome::Refused { ahead_ms }),
            Step::WaitThenStart { ms, floor_ms } => {
                self.phase = Phase::Waiting {
                    floor: Some(floor_ms),
                };
                Action::Sleep {
                    ms,
                    renew_every_ms: Some(terms.check_ms().max(1)),
                }
            }
            Step::WaitThenReread { ms } => {
                self.phase = Phase::Waiting { floor: None };
                // Renewing too: a claim that expires (three checks on etcd and PostgreSQL at
                // the shortest) must outlive this wait and a wait for a reservation after it.
                Action::Sleep {
                    ms,
                    renew_every_ms: Some(terms.check_ms().max(1)),
                }
            }
        }
    }

    /// The build ends without a generator: the node is given back as it was found.
    fn give_up(&mut self, outcome: Outcome) -> Action {
        self.phase = Phase::Ended;
        Action::End {
            let_go: LetGo::Abandon,
            outcome,
        }
    }

    /// The generator clock's ceiling now, Unix ms at a monotonic µs, and its slack in ms, once
    /// a renewal read the store's clock (see [`Action::Ceiling`]).
    pub const fn ceiling(&self) -> Option<(u64, u64, u64)> {
        self.ceiling
    }

    /// Feeds what happened; returns what to do next. An event the phase does not expect ends
    /// nothing and asks for nothing new: it is answered with the action that is still due.
    ///
    /// A renewal that confirmed the claim and read the store's clock raises the clock's
    /// ceiling first ([`Action::Ceiling`], answered by [`Event::Done`]); the action it leads
    /// to follows.
    pub fn step(&mut self, terms: &Terms<'_>, event: Event) -> Action {
        if let Some(next) = self.after_ceiling {
            if event == Event::Done {
                self.after_ceiling = None;
                return next;
            }
            return self.due(terms);
        }
        let before = self.ceiling;
        let action = self.react(terms, event);
        match self.ceiling {
            Some((ms, at_mono_us, slack_ms))
                if self.ceiling != before && !matches!(action, Action::End { .. }) =>
            {
                self.after_ceiling = Some(action);
                Action::Ceiling {
                    ms,
                    at_mono_us,
                    slack_ms,
                }
            }
            _ => action,
        }
    }

    fn react(&mut self, terms: &Terms<'_>, event: Event) -> Action {
        match (self.phase, event) {
            // The build.
            (Phase::Waiting { .. }, Event::Waited(Err(f))) => self.give_up(Outcome::Failed(f)),
            (Phase::Waiting { floor: Some(floor) }, Event::Waited(Ok(()))) => {
                self.follow(terms, Step::Start { floor_ms: floor })
            }
            (Phase::Waiting { floor: None }, Event::Waited(Ok(()))) => {
                self.phase = Phase::Rereading;
                Action::Reread
            }
            (Phase::Rereading, Event::Reread { result, now_ms }) => match result {
                Err(f) => self.give_up(Outcome::Failed(f)),
                Ok(again) => {
                    let step = self.after_reread(terms, again, now_ms);
                    self.follow(terms, step)
                }
            },
            (Phase::Advancing { to_ms }, Event::ClockMoved(moved)) => {
                if moved {
                    self.phase = Phase::Confirming { floor: to_ms };
                    Action::Renew
                } else {
                    self.give_up(Outcome::Unmovable)
                }
            }
            (
                Phase::Confirming { floor },
                Event::Renewed {
                    at, result, store, ..
                },
            ) => {
                let valid = match result {
                    Ok(valid) => valid,
                    Err(f) => return self.give_up(Outcome::Failed(f)),
                };
                self.renewed(terms, at, valid, store);
                let layout = terms.layout;
                let floor_tick = first_tick_from(layout, floor);
                let start_ms = at.ms.max(layout.unix_ms_of_tick(floor_tick));
                // A clock past the layout's end (or a trusted reservation there): nothing can
                // be issued, so nothing is written; the node's record stays as it was.
                if start_ms >= layout.expires_at_ms() {
                    return self.give_up(Outcome::Exhausted);
                }
                let until_ms = start_ms.saturating_add(terms.window_ms);
                self.phase = Phase::Reserving {
                    floor_tick,
                    at,
                    until_ms,
                };
                Action::Extend { until_ms }
            }
            (Phase::Reserving { .. }, Event::Extended(Err(f))) => self.give_up(Outcome::Failed(f)),
            (
                Phase::Reserving {
                    floor_tick,
                    at,
                    until_ms,
                },
                Event::Extended(Ok(())),
            ) => {
                let layout = terms.layout;
                self.reserved_ms = until_ms;
                self.phase = Phase::Building;
                Action::Build {
                    resume_after: floor_tick.checked_sub(1),
                    limit: last_tick_before(layout, self.reserved_ms),
                    deadline: deadline_tick(layout, self.fence_deadline_ms(terms, at)),
                }
            }
            (Phase::Building, Event::Done) => self.idle(),

            // The keeper's rounds.
            (Phase::Idle, Event::Round) => match self.write_back {
                WriteBack::Pending { until_ms } => {
                    self.phase = Phase::Retrying;
                    Action::WriteBack { until_ms }
                }
                // Lost and written back: nothing is left to do but wait for the release.
                WriteBack::Written => self.idle(),
                WriteBack::NotDue => {
                    self.phase = Phase::Renewing;
                    Action::Renew
                }
            },
            (Phase::Retrying, Event::WrittenBack(result)) => {
                if result.is_ok() {
                    self.write_back = WriteBack::Written;
                }
                self.idle()
            }
            (
                Phase::Renewing,
                Event::Renewed {
                    at,
                    result,
                    last_tick,
                    store,
                },
            ) => self.round_renewed(terms, at, result, last_tick, store),
            (Phase::Extending { at, until_ms }, Event::Extended(result)) => match result {
                Ok(()) => {
                    // Adopted only now, acknowledged: the fence never runs ahead of the store.
                    self.reserved_ms = until_ms;
                    self.failing = false;
                    self.publish(terms, at)
                }
                Err(Failure::Lost) => self.lose(Loss::Extension),
                Err(Failure::Failed) => {
                    self.failing = true;
                    self.publish(terms, at)
                }
            },
            (Phase::Publishing, Event::Done) => self.idle(),
            (Phase::Sealing { why }, Event::Sealed { last_tick }) => {
                self.sealed = Some(last_tick);
                let until_ms = final_reservation(end_of_tick(terms.layout, last_tick), self.read);
                self.phase = Phase::WritingBack { why };
                Action::WriteBack { until_ms }
            }
            (Phase::WritingBack { why }, Event::WrittenBack(result)) => {
                let until_ms = self.final_reservation_ms(terms);
                self.write_back = match result {
                    Ok(()) => WriteBack::Written,
                    Err(_) => WriteBack::Pending { until_ms },
                };
                self.lease_deadline_us = 0;
                self.phase = Phase::Reporting;
                Action::Lost {
                    why,
                    unwritten: result.is_err(),
                }
            }
            (Phase::Reporting, Event::Done) => self.idle(),

            // The end.
            (Phase::Idle, Event::Stop) => match self.write_back {
                WriteBack::Pending { until_ms } => {
                    self.phase = Phase::StopRetry;
                    Action::WriteBack { until_ms }
                }
                _ => self.stop_seal(),
            },
            (Phase::StopRetry, Event::WrittenBack(Ok(()))) => {
                self.write_back = WriteBack::Written;
                self.stop_seal()
            }
            (Phase::StopRetry, Event::WrittenBack(Err(_))) => {
                self.end(LetGo::Keep, Outcome::Unwritten)
            }
            (Phase::StopSealing, Event::Sealed { last_tick }) => {
                self.sealed = Some(last_tick);
                let until_ms = self.final_reservation_ms(terms);
                self.phase = Phase::StopExtending { until_ms };
                Action::Extend { until_ms }
            }
            (Phase::StopExtending { .. }, Event::Extended(Err(Failure::Lost))) => {
                // The claim is gone (its records deleted since the last round): what was used
                // is written back, as a round that found the claim lost does.
                self.phase = Phase::StopWritingBack;
                Action::WriteBack {
                    until_ms: self.final_reservation_ms(terms),
                }
            }
            (Phase::StopExtending { until_ms }, Event::Extended(_)) => {
                self.end(LetGo::Release { until_ms }, Outcome::Released)
            }
            (Phase::StopWritingBack, Event::WrittenBack(Ok(()))) => {
                self.write_back = WriteBack::Written;
                self.end(LetGo::Abandon, Outcome::Lost)
            }
            (Phase::StopWritingBack, Event::WrittenBack(Err(_))) => {
                self.end(LetGo::Keep, Outcome::Unwritten)
            }
            (_, _) => self.due(terms),
        }
    }

    /// The action still due in this phase (an unexpected event changes nothing).
    fn due(&self, terms: &Terms<'_>) -> Action {
        if let (Some(_), Some((ms, at_mono_us, slack_ms))) = (self.after_ceiling, self.ceiling) {
            return Action::Ceiling {
                ms,
                at_mono_us,
                slack_ms,
            };
        }
        match self.phase {
            Phase::Waiting { .. } | Phase::Idle | Phase::Building | Phase::Publishing => {
                Action::Idle {
                    us: self.interval_us,
                }
            }
            Phase::Rereading => Action::Reread,
            Phase::Advancing { to_ms } => Action::AdvanceClock { to_ms },
            Phase::Confirming { .. } | Phase::Renewing => Action::Renew,
            Phase::Reserving { until_ms, .. }
            | Phase::Extending { until_ms, .. }
            | Phase::StopExtending { until_ms } => Action::Extend { until_ms },
            Phase::Sealing { .. } | Phase::StopSealing => Action::Seal { releasing: false },
            Phase::Retrying
            | Phase::StopRetry
            | Phase::WritingBack { .. }
            | Phase::StopWritingBack => Action::WriteBack {
                until_ms: self.final_reservation_ms(terms),
            },
            Phase::Reporting => Action::Idle {
                us: self.interval_us,
            },
            Phase::Ended => Action::End {
                let_go: LetGo::Abandon,
                outcome: Outcome::Lost,
            },
        }
    }

    /// What a re-read after the unrecorded wait decides ([`after_wait`]): above what the
    /// records read now and, on a store with a clock of its own, above what any holder it
    /// confirmed can have issued before the claim ([`store_floor_ms`]).
    fn after_reread(&self, terms: &Terms<'_>, again: Option<u64>, now_ms: u64) -> Step {
        let by_store = self.store_clock.and_then(|(store_ms, lead)| {
            store_floor_ms(store_ms, terms.check_ms(), lead, terms.limits.max_lead_ms)
        });
        // That floor lies ahead of the store's clock by its own margin (the check bound, the
        // lead, `max_lead`): judged against the tolerance as a record is, it is this
        // claimant's clock behind the store's that must stay within it, not the margin too.
        let margin_ms = self
            .store_clock
            .zip(by_store)
            .map_or(0, |((store_ms, _), floor)| floor.saturating_sub(store_ms));
        let judged = Limits {
            tolerance_ms: terms.limits.tolerance_ms.saturating_add(margin_ms),
            ..terms.limits
        };
        let again = reservation_of([again, by_store]);
        after_wait(again, self.claimed_ms, now_ms, &judged)
    }

    /// A renewal that started at `at` succeeded, valid for `valid_us` (`None`: as long as
    /// the process lives): the lease's deadline and the confirm bound count from `at`. A
    /// store with a clock read it (`store`): the clock's ceiling is raised from it.
    fn renewed(
        &mut self,
        terms: &Terms<'_>,
        at: Now,
        valid_us: Option<u64>,
        store: Option<StoreReading>,
    ) {
        if let Some(reading) = store {
            let before = self.ceiling.map(|(ms, mono, _)| (ms, mono));
            let (ms, mono) = clock_ceiling(reading, before);
            self.ceiling = Some((ms, mono, reading.slack_ms));
        }
        self.lease_deadline_us = valid_us.map_or(u64::MAX, |v| at.mono_us.saturating_add(v));
        self.confirmed_until_us = self
            .confirmed_until_us
            .max(at.mono_us.saturating_add(terms.bound_us()));
        self.confirmed_clock_ms = self.confirmed_clock_ms.max(at.ms);
        if let Some(valid) = valid_us {
            // The reservation runs at least two validity periods ahead, so a store that goes
            // away shows up as a lost lease at the deadline, not as a reservation gap.
            self.window_ms = self.window_ms.max(valid.saturating_mul(2) / 1_000);
            self.interval_us = self.interval_us.min(valid / 3);
        }
    }

    /// A round's renewal came back.
    fn round_renewed(
        &mut self,
        terms: &Terms<'_>,
        at: Now,
        result: Result<Option<u64>, Failure>,
        last_tick: u64,
        store: Option<StoreReading>,
    ) -> Action {
        let was_lost = at.mono_us >= self.lease_deadline_us;
        match result {
            Ok(valid) if !was_lost => self.renewed(terms, at, valid, store),
            Ok(_) => {}
            Err(Failure::Lost) => return self.lose(Loss::Renewal),
            Err(Failure::Failed) => {}
        }
        // Once the deadline has passed the lease is lost for good: the node may already be
        // someone else's.
        if at.mono_us >= self.lease_deadline_us {
            return self.lose(Loss::Validity);
        }
        if result.is_err() {
            self.failing = true;
            return self.publish(terms, at);
        }
        let issued_end = end_of_tick(terms.layout, last_tick);
        match extension(self.reserved_ms, at.ms, issued_end, self.window_ms) {
            Some(until_ms) => {
                self.phase = Phase::Extending { at, until_ms };
                Action::Extend { until_ms }
            }
            None => {
                self.failing = false;
                self.publish(terms, at)
            }
        }
    }

    /// The fence words for a round whose check started at `at`: issue no tick past the
    /// last one before the reservation, none at or past the deadline.
    fn publish(&mut self, terms: &Terms<'_>, at: Now) -> Action {
        self.phase = Phase::Publishing;
        Action::Fence {
            limit: last_tick_before(terms.layout, self.reserved_ms),
            deadline: deadline_tick(terms.layout, self.fence_deadline_ms(terms, at)),
        }
    }

    /// The claim is lost (`why`): seal, then write back, then say so. Once: a holder already
    /// sealed only ends its round.
    fn lose(&mut self, why: Loss) -> Action {
        if self.sealed.is_some() {
            self.lease_deadline_us = 0;
            return self.idle();
        }
        self.phase = Phase::Sealing { why };
        Action::Seal { releasing: false }
    }

    /// Stopping: seal (unless sealed by a loss), then the final reservation — or, lost and
    /// written back, let go writing nothing: a second write-back after the node's host-wide
    /// claim is let go could lower what a successor raised since.
    fn stop_seal(&mut self) -> Action {
        if self.sealed.is_some() {
            return self.end(LetGo::Abandon, Outcome::Lost);
        }
        self.phase = Phase::StopSealing;
        Action::Seal { releasing: true }
    }

    fn end(&mut self, let_go: LetGo, outcome: Outcome) -> Action {
        self.phase = Phase::Ended;
        Action::End { let_go, outcome }
    }

    fn idle(&mut self) -> Action {
        self.phase = Phase::Idle;
        Action::Idle {
            us: self.interval_us,
        }
    }

    /// What a release or a write-back covers: the end of the last tick issued (once sealed),
    /// never below what the claim read, Unix ms.
    pub fn final_reservation_ms(&self, terms: &Terms<'_>) -> u64 {
        let last = self.sealed.unwrap_or(0);
        final_reservation(end_of_tick(terms.layout, last), self.read)
    }

    /// The fence's deadline in the generator's clock, Unix ms, for a check that started at
    /// `at`: `u64::MAX` for none, 0 when lost or never confirmed. What is left of the lease
    /// and of the confirm bound on the monotonic clock, added to the clock's reading, less a
    /// margin for a coarse clock's lag and for the clock running slower than real time while
    /// it slews (0.1 %) or drifts — and never past the clock at the last confirming check
    /// plus the bound, whatever the clock reads now (a clock stepped forward after the check,
    /// in a round whose check fails, must not carry issuing past what a successor's floor
    /// assumes: docs/design.md, "Holder and successor").
    fn fence_deadline_ms(&self, terms: &Terms<'_>, at: Now) -> u64 {
        let lease = self.lease_deadline_us;
        if lease == 0 {
            return 0;
        }
        match lease.min(self.confirmed_until_us) {
            u64::MAX => u64::MAX,
            0 => 0,
            deadline => {
                let left_ms = deadline.saturating_sub(at.mono_us) / 1_000;
                let margin = DEADLINE_MARGIN_MS + left_ms / 500;
                let by_now = at.ms.saturating_add(left_ms).saturating_sub(margin);
                by_now.min(
                    self.confirmed_clock_ms
                        .saturating_add(confirm_bound_ms(terms.check_ms())),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests;
