//! The one pure state step every generator flavour shares.
//!
//! A generator's state is one `u64`: `tick << sequence_bits | sequence`, the last value it
//! issued. Issuing `n` values is
//!
//! ```text
//! first = max(state + 1, now << sequence_bits | start_offset(now))
//! last  = first + n - 1            // the new state
//! ```
//!
//! * `now` ahead of the state: jump to the new tick (the sequence restarts at its offset).
//! * same tick: `state + 1`; a full sequence carries into the next tick — borrowing future
//!   time, allowed up to `max_lead` ticks ahead of `now`.
//! * `now` behind the state (a clock read that went back): `state + 1` again; nothing goes back.
//! * the time field past its width: exhausted, never wrapped.
//! * a restart inside a time reservation `R`: the clock is read as at least `R + 1`.
//!
//! The lock-free part (load, this step, compare-exchange) lives in `hot.rs`.

/// The numbers of a layout and a generator's policy that the step needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StepParams {
    /// Width of the sequence field.
    pub sequence_bits: u32,
    /// The largest time-field value.
    pub max_tick: u64,
    /// How many ticks ahead of `now` the state may run.
    pub max_lead: u64,
    /// Mask of the per-tick start offset (0: the sequence starts at 0).
    pub offset_mask: u64,
    /// The clock is read as at least this tick: the first tick after a time reservation that
    /// a restarted node may not reissue (0 when there is none).
    pub floor_tick: u64,
}

/// What the step decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Issue the values `first..=last`; `last` becomes the state.
    Issue { first: u64, last: u64 },
    /// Issuing would run `ticks` beyond `now + max_lead`.
    Lead { ticks: u64 },
    /// The time field cannot hold the request. `for_good` when `now` itself is past the end,
    /// so nothing can ever be issued again.
    Exhausted { for_good: bool },
}

impl Step {
    /// Whether this decision depends on the clock being current: borrowing a future tick,
    /// refusing at the lead limit, or giving up at the end of the time field. A coarse clock
    /// reading that may lag is replaced by a precise one before any of these is acted on.
    #[inline]
    pub(crate) const fn wants_precise_time(&self, now: u64, sequence_bits: u32) -> bool {
        match *self {
            Step::Issue { last, .. } => last >> sequence_bits > now,
            Step::Lead { .. } | Step::Exhausted { .. } => true,
        }
    }
}

/// The per-tick start of the sequence: a few pseudo-random low bits derived from the tick, so
/// that low traffic does not always end in the same sequence value (Leaf's fix for IDs that
/// are always even), while staying a pure function of the tick.
#[inline]
pub(crate) const fn start_offset(tick: u64, mask: u64) -> u64 {
    (tick.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) & mask
}

/// Reserves `n >= 1` values after state `cur` at time-field value `now`.
#[inline]
pub(crate) const fn next_state(cur: u64, now: u64, n: u64, p: &StepParams) -> Step {
    let now = if now > p.floor_tick {
        now
    } else {
        p.floor_tick
    };
    if now > p.max_tick {
        return Step::Exhausted { for_good: true };
    }
    let fresh = now << p.sequence_bits | start_offset(now, p.offset_mask);
    let first = match cur.checked_add(1) {
        Some(next) if next > fresh => next,
        Some(_) => fresh,
        None => return Step::Exhausted { for_good: false },
    };
    let last = match first.checked_add(n - 1) {
        Some(last) => last,
        None => return Step::Exhausted { for_good: false },
    };
    let last_tick = last >> p.sequence_bits;
    if last_tick > p.max_tick {
        return Step::Exhausted { for_good: false };
    }
    // Staying inside the tick the state already holds is always allowed (that time was
    // already issued); moving to a later tick must stay within now + max_lead.
    // (Tested in this order: within the tick already held, the common case at high rates,
    // the lead is not even computed.)
    if last_tick > cur >> p.sequence_bits {
        let allowed = now.saturating_add(p.max_lead);
        if last_tick > allowed {
            return Step::Lead {
                ticks: last_tick - allowed,
            };
        }
    }
    Step::Issue { first, last }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: StepParams = StepParams {
        sequence_bits: 2,
        max_tick: 15,
        max_lead: 1,
        offset_mask: 0,
        floor_tick: 0,
    };

    #[test]
    fn jumps_to_a_later_tick() {
        assert_eq!(
            next_state(5 << 2 | 3, 9, 1, &P),
            Step::Issue {
                first: 9 << 2,
                last: 9 << 2
            }
        );
    }

    #[test]
    fn same_tick_increments() {
        assert_eq!(
            next_state(9 << 2, 9, 1, &P),
            Step::Issue {
                first: 9 << 2 | 1,
                last: 9 << 2 | 1
            }
        );
    }

    #[test]
    fn full_sequence_borrows_then_hits_the_lead() {
        // Tick 9 full: carry into tick 10 (lead 1 allowed).
        assert_eq!(
            next_state(9 << 2 | 3, 9, 1, &P),
            Step::Issue {
                first: 10 << 2,
                last: 10 << 2
            }
        );
        // Tick 10 full: tick 11 is 2 ahead of now = 9.
        assert_eq!(next_state(10 << 2 | 3, 9, 1, &P), Step::Lead { ticks: 1 });
    }

    #[test]
    fn clock_behind_the_state_keeps_counting() {
        assert_eq!(
            next_state(9 << 2 | 1, 3, 1, &P),
            Step::Issue {
                first: 9 << 2 | 2,
                last: 9 << 2 | 2
            }
        );
        // ...and may finish the tick it holds, but not open a new one 6 ticks ahead of now.
        assert_eq!(next_state(9 << 2 | 3, 3, 1, &P), Step::Lead { ticks: 6 });
    }

    #[test]
    fn batches_span_ticks() {
        assert_eq!(
            next_state(9 << 2 | 2, 9, 3, &P),
            Step::Issue {
                first: 9 << 2 | 3,
                last: 10 << 2 | 1
            }
        );
        assert_eq!(next_state(9 << 2 | 2, 9, 8, &P), Step::Lead { ticks: 1 });
    }

    #[test]
    fn end_of_the_time_field() {
        assert_eq!(
            next_state(15 << 2 | 3, 15, 1, &P),
            Step::Exhausted { for_good: false }
        );
        assert_eq!(
            next_state(15 << 2, 16, 1, &P),
            Step::Exhausted { for_good: true }
        );
        assert_eq!(
            next_state(u64::MAX, 3, 1, &P),
            Step::Exhausted { for_good: false }
        );
        let wide = StepParams {
            sequence_bits: 1,
            max_tick: u64::MAX >> 1,
            max_lead: 0,
            offset_mask: 0,
            floor_tick: 0,
        };
        assert_eq!(
            next_state(u64::MAX - 1, 0, 2, &wide),
            Step::Exhausted { for_good: false }
        );
    }

    #[test]
    fn the_floor_acts_as_the_earliest_now() {
        let p = StepParams {
            floor_tick: 12,
            ..P
        };
        assert_eq!(
            next_state(12 << 2 | 3, 3, 1, &p),
            Step::Issue {
                first: 13 << 2,
                last: 13 << 2
            }
        );
        assert_eq!(next_state(13 << 2 | 3, 3, 1, &p), Step::Lead { ticks: 1 });
        assert_eq!(
            next_state(13 << 2 | 3, 14, 1, &p),
            Step::Issue {
                first: 14 << 2,
                last: 14 << 2
            }
        );
    }

    #[test]
    fn start_offset_stays_in_the_mask_and_varies() {
        let p = StepParams {
            offset_mask: 7,
            ..P
        };
        let starts: std::collections::BTreeSet<u64> =
            (0..64).map(|t| start_offset(t, p.offset_mask)).collect();
        assert!(starts.iter().all(|&s| s <= 7));
        assert!(starts.len() > 4, "offsets should vary: {starts:?}");
        let odd = (0..1000).filter(|&t| start_offset(t, 1) == 1).count();
        assert!((300..700).contains(&odd), "{odd} odd starts out of 1000");
    }
}
