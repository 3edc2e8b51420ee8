//! The one pure state step every generator flavour shares.
//!
//! A generator's state is one `u64`: `tick << sequence_bits | sequence`, the last value it
//! issued. Issuing `n` values is
//!
//! ```text
//! first = if now > tick(state) { now << sequence_bits | start_offset(now) } else { state + 1 }
//! last  = first + n - 1            // the new state
//! ```
//!
//! * `now` ahead of the state: jump to the new tick (the sequence restarts at its offset; a
//!   tick entered by a borrow keeps counting from where the borrow left it).
//! * same tick: `state + 1`; a full sequence carries into the next tick — borrowing future
//!   time, allowed up to `max_lead` ticks ahead of `now`.
//! * at the lead limit, **paced**: in the last tick the lead allows, slot `s` of the sequence
//!   opens only once the clock is `s / 2^sequence_bits` of the way through its own tick. The
//!   state is a time in sequence units, so each ID's slot opens at its own time (every 244 ns
//!   at 4096 per ms) instead of a whole tick's worth at once: sustained overload costs each
//!   caller its own slot, never a tick-long stall.
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
    /// `mask(sequence_bits)`, precomputed.
    pub sequence_mask: u64,
    /// The largest time-field value.
    pub max_tick: u64,
    /// How many ticks ahead of `now` the state may run.
    pub max_lead: u64,
    /// Mask of the per-tick start offset (0: the sequence starts at 0).
    pub offset_mask: u64,
    /// The clock is read as at least this tick: the first tick after a time reservation that
    /// a restarted node may not reissue (0 when there is none).
    pub floor_tick: u64,
    /// The length of a tick in nanoseconds.
    pub tick_ns: u64,
    /// The layout's epoch in Unix nanoseconds.
    pub epoch_ns: u64,
    /// `sequence_mask` where the common case ([`next_in_tick`]) applies, 0 where it does
    /// not: it applies where the end of the last tick, `epoch_ns + (max_tick + 1) *
    /// tick_ns`, fits in a u64 (every layout of millisecond ticks among others). One test
    /// then asks both that and whether the tick has room.
    pub common_mask: u64,
    /// How far the clock may be behind the start of the state's tick for the common case:
    /// `(max_lead - 1) * tick_ns` (0 without a lead), or 0 where that and a tick do not fit
    /// in a u64 together.
    pub behind_ns: u64,
}

impl StepParams {
    /// `behind_ns` for these numbers.
    pub(crate) const fn behind_ns(max_lead: u64, tick_ns: u64) -> u64 {
        match max_lead.saturating_sub(1).checked_mul(tick_ns) {
            Some(behind) if behind.checked_add(tick_ns).is_some() => behind,
            _ => 0,
        }
    }

    /// `common_mask` for these numbers: `sequence_mask` if `epoch_ns + (max_tick + 1) *
    /// tick_ns` fits in a u64, otherwise 0.
    pub(crate) const fn common_mask(
        sequence_mask: u64,
        max_tick: u64,
        tick_ns: u64,
        epoch_ns: u64,
    ) -> u64 {
        let fits = match max_tick.checked_add(1) {
            Some(ticks) => match ticks.checked_mul(tick_ns) {
                Some(span) => span.checked_add(epoch_ns).is_some(),
                None => false,
            },
            None => false,
        };
        if fits { sequence_mask } else { 0 }
    }
}

/// The clock's reading for the step: the tick, and how far into it (nanoseconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Now {
    pub tick: u64,
    pub rem_ns: u64,
}

impl Now {
    /// The start of `tick`.
    #[cfg(test)]
    pub(crate) const fn at(tick: u64) -> Now {
        Now { tick, rem_ns: 0 }
    }
}

/// What the step decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Issue the values `first..=last`; `last` becomes the state.
    Issue { first: u64, last: u64 },
    /// Issuing would run beyond `now + max_lead`; the slot opens in `wait_ns`.
    Lead { wait_ns: u64 },
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

/// Reserves `n >= 1` values after state `cur` at clock reading `now`.
#[inline]
pub(crate) const fn next_state(cur: u64, now: Now, n: u64, p: &StepParams) -> Step {
    let now = if now.tick >= p.floor_tick {
        now
    } else {
        Now {
            tick: p.floor_tick,
            rem_ns: 0,
        }
    };
    if now.tick > p.max_tick {
        return Step::Exhausted { for_good: true };
    }
    // A later tick than the state's starts at its offset (above every value of the state's
    // tick); within the state's tick (or behind it), the next value.
    let first = if now.tick > cur >> p.sequence_bits {
        now.tick << p.sequence_bits | start_offset(now.tick, p.offset_mask)
    } else {
        match cur.checked_add(1) {
            Some(next) => next,
            None => return Step::Exhausted { for_good: false },
        }
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
    let allowed = now.tick.saturating_add(p.max_lead);
    if last_tick > cur >> p.sequence_bits && last_tick > allowed {
        let ticks = (last_tick - allowed) as u128;
        let wait = ticks * p.tick_ns as u128 - now.rem_ns as u128;
        return Step::Lead {
            wait_ns: saturate(wait),
        };
    }
    // Pacing in the last tick the lead allows (not with a zero lead: the current tick is
    // then always whole, as without borrowing).
    if p.max_lead > 0 && last_tick == allowed {
        let slot = (last & crate::layout::mask(p.sequence_bits)) as u128;
        let open = ((now.rem_ns as u128) << p.sequence_bits) / p.tick_ns as u128;
        if slot > open {
            let wait = ((slot - open) * p.tick_ns as u128) >> p.sequence_bits;
            return Step::Lead {
                wait_ns: saturate(wait + 1),
            };
        }
    }
    Step::Issue { first, last }
}

/// The common case, decided without dividing the clock's reading: the tick the state `cur`
/// holds is the clock's (`now_ns`, Unix nanoseconds), or one borrowed ahead of it by less than
/// the lead — at most `behind_ns` ahead, a whole number of ticks below `max_lead` — and the
/// tick's sequence has room after `cur`. Returns the next state, exactly what
/// [`next_state`]`(cur, now, 1, p)` issues then; `None` leaves the decision to [`next_state`].
///
/// `cur` must be a state a generator can hold: its tick at most `max_tick`, and below
/// `floor_tick` only as the last value before it (a generator's first state after a
/// reservation). Such states need no check of either bound here: a full sequence has no room.
///
/// The hot path asks the same through [`InTick`]; the tests ask this.
#[cfg(test)]
pub(crate) const fn next_in_tick(
    cur: u64,
    now_ns: u64,
    behind_ns: u64,
    p: &StepParams,
) -> Option<u64> {
    let window = InTick::of(cur, behind_ns, p);
    if now_ns.wrapping_sub(window.from_ns) < window.width_ns {
        Some(window.next)
    } else {
        None
    }
}

/// The common case as a window of time, worked out from the state alone: if the clock reads
/// inside `[from_ns, from_ns + width_ns)` (Unix nanoseconds), the next state is `next`
/// ([`next_in_tick`]). Everything here depends on the state, not on the clock: a processor
/// works it out while the clock is being read, and the clock's reading is then one
/// subtraction and one comparison away from the compare-exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct InTick {
    /// The state after `cur`.
    pub next: u64,
    /// Where the window begins: `behind_ns` before the start of the state's tick.
    pub from_ns: u64,
    /// How long it is: `behind_ns` plus a tick, or 0 (no common case) when the tick has no
    /// room after `cur`, or its bounds do not fit in a u64.
    pub width_ns: u64,
}

impl InTick {
    /// The window for state `cur`, `behind_ns` and the layout's numbers (see [`next_in_tick`]).
    #[inline]
    pub(crate) const fn of(cur: u64, behind_ns: u64, p: &StepParams) -> InTick {
        let tick = cur >> p.sequence_bits;
        let next = cur.wrapping_add(1);
        // The start of the state's tick in Unix ns. (For a state whose tick is beyond
        // `max_tick`, only ever a full one, or a layout whose ticks do not fit, this may
        // wrap: there is no room then.)
        let start = (tick.wrapping_mul(p.tick_ns)).wrapping_add(p.epoch_ns);
        // The clock in the state's tick or at most `behind_ns` before its start: no jump to
        // a later tick, and no pacing (the state's tick is not the last one the lead allows).
        // One comparison: with `start + tick_ns` in range, a clock outside the window wraps
        // to a difference of at least its width.
        let from_ns = start.wrapping_sub(behind_ns);
        // Room: no carry into the next tick (a borrow). (The start offset plays no part: it
        // applies only where the step jumps to a later tick.) And a window that begins at or
        // after the Unix epoch.
        let room = (next & p.common_mask != 0) & (start >= behind_ns);
        InTick {
            next,
            from_ns,
            width_ns: if room { behind_ns + p.tick_ns } else { 0 },
        }
    }
}

/// A u128 as a u64, at most `u64::MAX`.
const fn saturate(x: u128) -> u64 {
    if x > u64::MAX as u128 {
        u64::MAX
    } else {
        x as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: StepParams = StepParams {
        sequence_bits: 2,
        sequence_mask: 3,
        max_tick: 15,
        max_lead: 1,
        offset_mask: 0,
        floor_tick: 0,
        tick_ns: MS,
        epoch_ns: 0,
        common_mask: 3,
        behind_ns: 0,
    };
    const MS: u64 = 1_000_000;

    /// The numbers the common case is enabled by, exactly: `behind_ns` is `(max_lead - 1)`
    /// ticks while that plus a tick fits in a u64, else 0; `common_mask` is the sequence mask
    /// while the end of the time field fits in Unix nanoseconds, else 0.
    #[test]
    fn the_common_case_numbers_are_exact() {
        assert_eq!(StepParams::behind_ns(5, 1_000_000), 4_000_000);
        assert_eq!(StepParams::behind_ns(1, 1_000_000), 0);
        assert_eq!(StepParams::behind_ns(0, 1_000_000), 0);
        // (max_lead - 1) * tick fits, one more tick does not: 0.
        let tick = u64::MAX / 4 + 1;
        assert_eq!(StepParams::behind_ns(4, tick), 0);
        assert_eq!(StepParams::behind_ns(3, tick), 2 * tick);
        assert_eq!(StepParams::behind_ns(u64::MAX, 2), 0);
        assert_eq!(
            StepParams::common_mask(0xfff, (1 << 41) - 1, 1_000_000, 0),
            0xfff
        );
        assert_eq!(StepParams::common_mask(0xfff, u64::MAX, 1, 0), 0);
        assert_eq!(StepParams::common_mask(0xfff, u64::MAX / 2, 2, 0), 0);
        assert_eq!(StepParams::common_mask(0xfff, 9, 10, u64::MAX - 100), 0xfff);
        assert_eq!(StepParams::common_mask(0xfff, 9, 10, u64::MAX - 99), 0);
    }

    /// A step wants a precise clock exactly when it borrows a tick past the clock's, or
    /// refuses: issuing in the clock's own tick (or an earlier one) does not.
    #[test]
    fn only_borrowing_or_refusing_wants_a_precise_clock() {
        let bits = 12;
        let issue_in = |tick: u64| Step::Issue {
            first: tick << bits,
            last: tick << bits | 7,
        };
        assert!(!issue_in(99).wants_precise_time(100, bits));
        assert!(!issue_in(100).wants_precise_time(100, bits));
        assert!(issue_in(101).wants_precise_time(100, bits));
        assert!(Step::Lead { wait_ns: 1 }.wants_precise_time(100, bits));
        assert!(Step::Exhausted { for_good: false }.wants_precise_time(100, bits));
    }

    #[test]
    fn jumps_to_a_later_tick() {
        assert_eq!(
            next_state(5 << 2 | 3, Now::at(9), 1, &P),
            Step::Issue {
                first: 9 << 2,
                last: 9 << 2
            }
        );
    }

    #[test]
    fn same_tick_increments() {
        assert_eq!(
            next_state(9 << 2, Now::at(9), 1, &P),
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
            next_state(9 << 2 | 3, Now::at(9), 1, &P),
            Step::Issue {
                first: 10 << 2,
                last: 10 << 2
            }
        );
        // Tick 10 full: tick 11 is 2 ahead of now = 9.
        assert_eq!(
            next_state(10 << 2 | 3, Now::at(9), 1, &P),
            Step::Lead { wait_ns: MS }
        );
    }

    /// A tick past the lead waits until that tick is within the lead: from a quarter into tick
    /// 9, tick 11 (two ahead, one past the lead) opens three quarters of a tick later.
    #[test]
    fn a_tick_past_the_lead_waits_for_the_rest_of_the_clocks_tick() {
        assert_eq!(
            next_state(
                10 << 2 | 3,
                Now {
                    tick: 9,
                    rem_ns: MS / 4
                },
                1,
                &P
            ),
            Step::Lead {
                wait_ns: MS - MS / 4
            }
        );
    }

    /// In the last tick the lead allows, slot `s` of `2^bits` opens `s/2^bits` of a tick after
    /// the tick's start: the wait is exactly the time until then, plus 1 ns.
    #[test]
    fn the_last_allowed_tick_opens_slot_by_slot() {
        // Tick 10 (one ahead of the clock's 9): its third value (slot 2) opens half-way.
        assert_eq!(
            next_state(10 << 2 | 1, Now::at(9), 1, &P),
            Step::Lead {
                wait_ns: MS / 2 + 1
            }
        );
        // A quarter through tick 9, slot 1 is open, slot 2 a quarter of a tick away.
        assert_eq!(
            next_state(
                10 << 2 | 1,
                Now {
                    tick: 9,
                    rem_ns: MS / 4
                },
                1,
                &P
            ),
            Step::Lead {
                wait_ns: MS / 4 + 1
            }
        );
        assert_eq!(
            next_state(
                10 << 2,
                Now {
                    tick: 9,
                    rem_ns: MS / 4
                },
                1,
                &P
            ),
            Step::Issue {
                first: 10 << 2 | 1,
                last: 10 << 2 | 1
            }
        );
    }

    #[test]
    fn clock_behind_the_state_keeps_counting() {
        assert_eq!(
            next_state(9 << 2 | 1, Now::at(3), 1, &P),
            Step::Issue {
                first: 9 << 2 | 2,
                last: 9 << 2 | 2
            }
        );
        // ...and may finish the tick it holds, but not open a new one 6 ticks ahead of now.
        assert_eq!(
            next_state(9 << 2 | 3, Now::at(3), 1, &P),
            Step::Lead { wait_ns: 6 * MS }
        );
    }

    #[test]
    fn batches_span_ticks() {
        // (Half-way through tick 9, so the second slot of tick 10 is open.)
        assert_eq!(
            next_state(
                9 << 2 | 2,
                Now {
                    tick: 9,
                    rem_ns: MS / 2
                },
                3,
                &P
            ),
            Step::Issue {
                first: 9 << 2 | 3,
                last: 10 << 2 | 1
            }
        );
        assert_eq!(
            next_state(9 << 2 | 2, Now::at(9), 8, &P),
            Step::Lead { wait_ns: MS }
        );
    }

    #[test]
    fn end_of_the_time_field() {
        assert_eq!(
            next_state(15 << 2 | 3, Now::at(15), 1, &P),
            Step::Exhausted { for_good: false }
        );
        assert_eq!(
            next_state(15 << 2, Now::at(16), 1, &P),
            Step::Exhausted { for_good: true }
        );
        assert_eq!(
            next_state(u64::MAX, Now::at(3), 1, &P),
            Step::Exhausted { for_good: false }
        );
        let wide = StepParams {
            sequence_bits: 1,
            sequence_mask: 1,
            max_tick: u64::MAX >> 1,
            max_lead: 0,
            offset_mask: 0,
            floor_tick: 0,
            tick_ns: MS,
            epoch_ns: 0,
            common_mask: 0,
            behind_ns: 0,
        };
        assert_eq!(
            next_state(u64::MAX - 1, Now::at(0), 2, &wide),
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
            next_state(12 << 2 | 3, Now::at(3), 1, &p),
            Step::Issue {
                first: 13 << 2,
                last: 13 << 2
            }
        );
        assert_eq!(
            next_state(13 << 2 | 3, Now::at(3), 1, &p),
            Step::Lead { wait_ns: MS }
        );
        assert_eq!(
            next_state(13 << 2 | 3, Now::at(14), 1, &p),
            Step::Issue {
                first: 14 << 2,
                last: 14 << 2
            }
        );
    }

    #[test]
    fn at_the_lead_limit_each_slot_opens_at_its_own_time() {
        // Lead 1: tick 10 is the last the lead allows at now = 9; its 4 slots open every
        // quarter of tick 9.
        let full = 9 << 2 | 3;
        let at = |rem_ns| Now { tick: 9, rem_ns };
        assert_eq!(
            next_state(full, at(0), 1, &P),
            Step::Issue {
                first: 10 << 2,
                last: 10 << 2
            }
        );
        assert_eq!(
            next_state(10 << 2, at(0), 1, &P),
            Step::Lead {
                wait_ns: MS / 4 + 1
            }
        );
        assert_eq!(
            next_state(10 << 2, at(MS / 4), 1, &P),
            Step::Issue {
                first: 10 << 2 | 1,
                last: 10 << 2 | 1
            }
        );
        assert_eq!(
            next_state(10 << 2 | 1, at(MS / 4), 1, &P),
            Step::Lead {
                wait_ns: MS / 4 + 1
            }
        );
        assert_eq!(
            next_state(10 << 2 | 2, at(MS - 1), 1, &P),
            Step::Issue {
                first: 10 << 2 | 3,
                last: 10 << 2 | 3
            }
        );
        // A zero lead does not pace: the current tick is whole.
        let zero = StepParams { max_lead: 0, ..P };
        assert_eq!(
            next_state(9 << 2 | 2, at(0), 1, &zero),
            Step::Issue {
                first: 9 << 2 | 3,
                last: 9 << 2 | 3
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

    /// The clock reading as the generator gives it to the step.
    fn now_of(now_ns: u64, p: &StepParams) -> Now {
        let since = now_ns.saturating_sub(p.epoch_ns);
        Now {
            tick: since / p.tick_ns,
            rem_ns: since % p.tick_ns,
        }
    }

    #[test]
    fn the_common_case_is_taken_inside_the_held_tick_and_only_there() {
        let p = StepParams {
            sequence_bits: 12,
            sequence_mask: 0xfff,
            max_tick: (1 << 41) - 1,
            max_lead: 100,
            offset_mask: 0,
            floor_tick: 0,
            tick_ns: MS,
            epoch_ns: 1_288_834_974_657 * MS,
            common_mask: 0xfff,
            behind_ns: 99 * MS,
        };
        let tick = 1_000_000_000;
        let start = p.epoch_ns + tick * MS;
        let cur = tick << 12 | 5;
        let next = |cur, now_ns| next_in_tick(cur, now_ns, p.behind_ns, &p);
        assert_eq!(next(cur, start), Some(cur + 1));
        assert_eq!(next(cur, start + MS - 1), Some(cur + 1));
        // The clock in the next tick: a jump.
        assert_eq!(next(cur, start + MS), None);
        // A tick borrowed ahead of the clock, up to 99 ticks; 100 ahead is the last tick the
        // lead allows, where slots are paced.
        assert_eq!(next(cur, start - 1), Some(cur + 1));
        assert_eq!(next(cur, start - 99 * MS), Some(cur + 1));
        assert_eq!(next(cur, start - 99 * MS - 1), None);
        // Without a window behind (a coarse clock): only the clock's own tick.
        assert_eq!(next_in_tick(cur, start - 1, 0, &p), None);
        // A full sequence (a borrow), a sealed state.
        assert_eq!(next(tick << 12 | 0xfff, start), None);
        assert_eq!(next(u64::MAX, start), None);
        // A tick entered by a borrow, below its start offset, keeps counting from there once
        // the clock reaches it, in the common case and in the step alike.
        let offset = StepParams {
            offset_mask: 7,
            ..p
        };
        let tick = (tick..).find(|&t| start_offset(t, 7) >= 2).unwrap();
        let start = p.epoch_ns + tick * MS;
        let borrowed = tick << 12;
        assert_eq!(
            next_in_tick(borrowed, start, 0, &offset),
            Some(borrowed + 1)
        );
        assert_eq!(
            next_state(borrowed, Now::at(tick), 1, &offset),
            Step::Issue {
                first: borrowed + 1,
                last: borrowed + 1
            }
        );
        // A tick the step jumps to starts at its offset.
        assert_eq!(
            next_state(borrowed - 1, Now::at(tick), 1, &offset),
            Step::Issue {
                first: borrowed | start_offset(tick, 7),
                last: borrowed | start_offset(tick, 7)
            }
        );
        // Ticks whose end does not fit in a u64 are left to the general step.
        let huge = StepParams {
            common_mask: 0,
            ..p
        };
        assert_eq!(next_in_tick(cur, start, 0, &huge), None);
    }

    /// Every state of small layouts, at the clock readings around its tick's bounds: the
    /// common case issues exactly what the general step issues, and is taken whenever the
    /// step simply adds one inside the clock's tick.
    #[test]
    fn the_common_case_agrees_with_the_step_on_every_small_state() {
        let mut taken = 0;
        for sequence_bits in 1..=3u32 {
            for offset_bits in 0..sequence_bits {
                for floor_tick in [0, 5] {
                    for max_lead in 0..4 {
                        let p = StepParams {
                            sequence_bits,
                            sequence_mask: crate::layout::mask(sequence_bits),
                            max_tick: 15,
                            max_lead,
                            offset_mask: crate::layout::mask(offset_bits),
                            floor_tick,
                            tick_ns: 10,
                            epoch_ns: 1_000,
                            common_mask: crate::layout::mask(sequence_bits),
                            behind_ns: StepParams::behind_ns(max_lead, 10),
                        };
                        for cur in 0..16u64 << sequence_bits {
                            for now_ns in 990..1_000 + 17 * 10 {
                                let now = now_of(now_ns, &p);
                                let step = next_state(cur, now, 1, &p);
                                let fast = next_in_tick(cur, now_ns, p.behind_ns, &p);
                                let in_tick_only = next_in_tick(cur, now_ns, 0, &p);
                                let reachable = cur >> sequence_bits >= floor_tick
                                    || cur + 1 == floor_tick << sequence_bits;
                                if let (Some(next), true) = (in_tick_only, reachable) {
                                    assert_eq!(fast, Some(next));
                                }
                                if let (Some(next), true) = (fast, reachable) {
                                    assert_eq!(
                                        step,
                                        Step::Issue {
                                            first: next,
                                            last: next
                                        }
                                    );
                                    taken += 1;
                                }
                                let simple = matches!(step, Step::Issue { first, .. }
                                    if first == cur + 1
                                        && first >> sequence_bits == now.tick
                                        && cur >> sequence_bits == now.tick);
                                let after_epoch = now_ns >= p.epoch_ns;
                                if simple && reachable && after_epoch && now.tick >= floor_tick {
                                    assert_eq!(in_tick_only, Some(cur + 1), "{p:?} {cur} {now_ns}");
                                }
                                // ...and whenever it adds one inside a tick borrowed less than
                                // the lead ahead (without a start offset).
                                let held = cur >> sequence_bits;
                                let borrowed = matches!(step, Step::Issue { first, .. }
                                    if first == cur + 1 && first >> sequence_bits == held)
                                    && held > now.tick
                                    && held < now.tick + max_lead;
                                if borrowed && reachable && after_epoch && offset_bits == 0 {
                                    assert_eq!(fast, Some(cur + 1), "{p:?} {cur} {now_ns}");
                                }
                            }
                        }
                    }
                }
            }
        }
        assert!(taken > 1_000, "{taken}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]

        /// Whenever the common case issues, it issues exactly what the general step issues.
        #[test]
        fn the_common_case_agrees_with_the_step(
            sequence_bits in 1u32..=22,
            time_bits in 1u32..=41,
            tick_ns in proptest::sample::select(vec![1u64, 1_000, MS, 10 * MS, 1_000 * MS]),
            epoch_ns in 0u64..2_000_000_000_000_000_000,
            offset_bits in 0u32..4,
            max_lead in 0u64..4,
            floor in proptest::option::of(0u64..1 << 41),
            tick in 0u64..1 << 41,
            // Low sequences (at or below a start offset) as often as any.
            sequence in proptest::prop_oneof![0u64..16, proptest::num::u64::ANY],
            now_from_start in -3i64 * MS as i64..3 * MS as i64,
        ) {
            let max_tick = (1u64 << time_bits) - 1;
            let tick = tick & max_tick;
            let mask = crate::layout::mask(sequence_bits);
            let floor_tick = floor.map_or(0, |f| f & max_tick);
            // A state a generator can hold: below the floor only as the value just before it.
            let cur = if tick < floor_tick {
                (floor_tick << sequence_bits) - 1
            } else {
                tick << sequence_bits | (sequence & mask)
            };
            let p = StepParams {
                sequence_bits,
                sequence_mask: mask,
                max_tick,
                max_lead,
                offset_mask: crate::layout::mask(offset_bits.min(sequence_bits - 1)),
                floor_tick,
                tick_ns,
                epoch_ns,
                common_mask: StepParams::common_mask(mask, max_tick, tick_ns, epoch_ns),
                behind_ns: StepParams::behind_ns(max_lead, tick_ns),
            };
            let start = (cur >> sequence_bits).saturating_mul(tick_ns).saturating_add(epoch_ns);
            let now_ns = start.saturating_add_signed(now_from_start);
            if let Some(next) = next_in_tick(cur, now_ns, p.behind_ns, &p) {
                proptest::prop_assert_eq!(
                    next_state(cur, now_of(now_ns, &p), 1, &p),
                    Step::Issue { first: next, last: next }
                );
            }
        }
    }
}
