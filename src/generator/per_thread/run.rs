//! A slot's run: the plain numbers one thread advances (the state and what the common case
//! needs of its tick), the common case on them, and the general step — the same pure
//! `next_state` every flavour uses, with no compare-exchange: the state belongs to one thread.

use std::cell::Cell;

use super::super::fence::Fence;
use super::super::step::{InTick, Step, next_state};
use super::{SEALED, Shared};
use crate::Error;
use crate::clock::TimeSource;
use crate::sync::{AtomicU64, Ordering};

/// The numbers of one slot held by one thread. Plain cells: only the owning thread reads or
/// writes them (the type is not `Sync`).
///
/// The common case advances the last ID issued by one step of the sequence field; the state
/// (`tick << sequence_bits | sequence`, the sequence without the slot bits) is worked out from
/// it off the common path: inside one tick, consecutive states give IDs one step apart.
#[derive(Debug)]
pub(crate) struct Run {
    /// The ID of the last state value issued (or of the one the slot was claimed at).
    id: Cell<u64>,
    /// The ID of the tick's last value in this slot: the common case needs `id` below it.
    end_id: Cell<u64>,
    /// One step of the sequence field in an ID.
    step: Cell<u64>,
    /// The common case's window of time for the state's tick (Unix ns): the clock must read
    /// in `[from_ns, from_ns + width_ns)` (`InTick`).
    from_ns: Cell<u64>,
    width_ns: Cell<u64>,
    /// The state the run entered its tick at, and its ID: the state of `id` is
    /// `base_state + (id - base_id) / step`.
    base_state: Cell<u64>,
    base_id: Cell<u64>,
    /// The state before the first value issued since the last count was handed to the slot
    /// (the slot's `issued` counter): `state - counted` values are not counted yet.
    counted: Cell<u64>,
    /// Which slot.
    pub(super) slot: Cell<usize>,
    /// The slot's number, in place in an ID.
    fixed: Cell<u64>,
}

impl Run {
    /// A run that matches nothing (the state is sealed: every call goes to the general step).
    pub(super) const fn empty() -> Run {
        Run {
            id: Cell::new(0),
            end_id: Cell::new(0),
            step: Cell::new(1),
            from_ns: Cell::new(0),
            width_ns: Cell::new(0),
            base_state: Cell::new(SEALED),
            base_id: Cell::new(0),
            counted: Cell::new(SEALED),
            slot: Cell::new(0),
            fixed: Cell::new(0),
        }
    }

    /// Takes over `slot`, claimed at state `state`.
    pub(super) fn start<C: TimeSource>(&self, shared: &Shared<C>, slot: usize, state: u64) {
        self.slot.set(slot);
        self.fixed.set(shared.fixed(slot));
        self.step.set(1 << shared.base.out.sequence_shift);
        self.counted.set(state);
        self.enter(shared, state);
    }

    /// The last state value issued.
    pub(super) fn state(&self) -> u64 {
        let ahead = (self.id.get() - self.base_id.get()) / self.step.get();
        self.base_state.get().wrapping_add(ahead)
    }

    /// The numbers this run hands back with its slot: (slot, state, the state counted up to).
    pub(super) fn parts(&self) -> (usize, u64, u64) {
        (self.slot.get(), self.state(), self.counted.get())
    }

    /// Copies another run's numbers (parking a run in the thread's registry and back).
    pub(super) fn copy_from(&self, other: &Run) {
        self.id.set(other.id.get());
        self.end_id.set(other.end_id.get());
        self.step.set(other.step.get());
        self.from_ns.set(other.from_ns.get());
        self.width_ns.set(other.width_ns.get());
        self.base_state.set(other.base_state.get());
        self.base_id.set(other.base_id.get());
        self.counted.set(other.counted.get());
        self.slot.set(other.slot.get());
        self.fixed.set(other.fixed.get());
    }

    /// Moves the state to `state` and works out its tick's numbers.
    fn enter<C: TimeSource>(&self, shared: &Shared<C>, state: u64) {
        let g = &shared.base;
        let p = &g.params;
        let tick = state >> p.sequence_bits;
        // A coarse reading may lag: the common case then takes only the clock's own tick, as
        // the general step re-reads the precise clock before it issues in a borrowed one.
        let behind_ns = if g.clock.is_coarse() { 0 } else { p.behind_ns };
        // The window of the tick as a whole: with the state at its first value, the next one
        // always has room (sequence_bits >= 1), so the width is the tick's, or 0 where the
        // layout's ticks do not fit in a u64.
        let window = InTick::of(tick.wrapping_shl(p.sequence_bits), behind_ns, p);
        let id = self.id_of(shared, state);
        self.base_state.set(state);
        self.base_id.set(id);
        self.id.set(id);
        self.from_ns.set(window.from_ns);
        self.width_ns.set(window.width_ns);
        // The tick's last value, where the state is in its tick (not sealed, nor pinned at
        // the end of the time field): otherwise no room, and the common case never applies.
        let end = tick.wrapping_shl(p.sequence_bits) | p.sequence_mask;
        self.end_id.set(if state <= end && tick <= p.max_tick {
            self.id_of(shared, end)
        } else {
            0
        });
    }

    /// The common case: the clock in the state's tick (or, on the locked clock, in a tick
    /// borrowed less than the lead ahead of it), room in the tick's sequence, the fence open
    /// for the tick, and no fork. Then the next state is `state + 1` — what `next_state`
    /// issues there (`InTick`) — and this returns its ID; otherwise `None`, and nothing moved.
    /// Three loads beyond the run's numbers (the clock, the fence's word, the process
    /// generation) and no read-modify-write.
    #[inline(always)]
    pub(super) fn common<C: TimeSource>(&self, shared: &Shared<C>) -> Option<u64> {
        // The clock first, then the numbers: a clock that itself issues from this run (a
        // `TimeSource` calling back into the generator) has moved them by the time they are
        // read, and this call goes on after what it issued.
        let now_ns = shared.base.clock.now_ns();
        let fork = shared.base.core.fence.fork_watch();
        self.common_at(shared, now_ns, !fork.forked_on_common_path())
    }

    /// [`Run::common`] at the clock's reading `now_ns`, taken before these numbers are read,
    /// `unforked` the caller's answer to the fork check (the thread-local registry folds it
    /// into its key).
    #[inline(always)]
    pub(super) fn common_at<C: TimeSource>(
        &self,
        shared: &Shared<C>,
        now_ns: u64,
        unforked: bool,
    ) -> Option<u64> {
        let mut hot = self.hot();
        let id = hot.advance(now_ns, &shared.base.core.fence, unforked)?;
        self.id.set(id);
        Some(id)
    }

    /// What the common case reads of this run, copied out.
    #[inline(always)]
    pub(super) fn hot(&self) -> Hot {
        Hot {
            id: self.id.get(),
            end_id: self.end_id.get(),
            step: self.step.get(),
            from_ns: self.from_ns.get(),
            width_ns: self.width_ns.get(),
        }
    }

    /// Lends the common case's numbers to a [`LocalIds`](super::LocalIds), which advances
    /// them in registers: the run itself moves to the tick's last value, as if every value
    /// left in the tick were issued, until [`Run::settle`] writes back the one reached. A
    /// borrower that is never dropped (`mem::forget`) so costs the rest of a tick, never a
    /// value issued twice.
    pub(super) fn lend(&self) -> Hot {
        let hot = self.hot();
        // Where the tick has room (`end_id` is 0 otherwise, and the common case never applies).
        // (A deliberately broken build, for the loom model that must catch it, does not.)
        if hot.end_id > hot.id && cfg!(not(monoflake_broken_lend)) {
            self.id.set(hot.end_id);
        }
        hot
    }

    /// Takes back lent numbers: `id` is the last ID the borrower issued (or the one it was
    /// lent at), in the tick this run is in.
    pub(super) fn settle(&self, id: u64) {
        self.id.set(id);
    }

    /// The general step for `n >= 1` values: the clock (the precise one before anything
    /// depends on a coarse reading), `next_state`, the fence, and — when the values enter a
    /// later tick — the tick published in the slot before anything is issued in it (what a
    /// seal finds). Returns the first and last state values issued.
    #[inline(never)]
    pub(super) fn general<C: TimeSource>(
        &self,
        shared: &Shared<C>,
        n: u64,
    ) -> Result<(u64, u64), Error> {
        let g = &shared.base;
        let p = &g.params;
        let forked = g.core.fence.forked();
        let mut precise = !g.clock.is_coarse();
        let mut clock = g.now_of(g.clock.now_ns());
        // The state after every clock read, as in `Run::common`: a clock that issues from this
        // run has moved it by then.
        let mut cur = self.state();
        let (first, last) = loop {
            let step = next_state(cur, clock, n, p);
            if !precise && step.wants_precise_time(clock.tick, p.sequence_bits) {
                clock = g.now_of(g.clock.precise_now_ns());
                precise = true;
                cur = self.state();
                continue;
            }
            match step {
                Step::Issue { first, last } => break (first, last),
                // A sealed slot (claimed after the seal, or sealed while its holder moved on)
                // says why its fence closed, whether or not this thread has seen the fence's
                // words yet — unless the layout's own last value is the same number.
                Step::Exhausted { .. }
                    if cur == SEALED
                        && p.max_tick << p.sequence_bits | p.sequence_mask != SEALED =>
                {
                    return Err(g.fence_error(false, clock.tick));
                }
                Step::Exhausted { for_good: true } if !g.core.fence.is_closed() => {
                    // Pin the state at its largest value: every later call fails too,
                    // whatever a clock does afterwards.
                    self.pin(shared, p.max_tick << p.sequence_bits | p.sequence_mask);
                    return Err(g.refuse(step));
                }
                _ => return Err(g.refuse(step)),
            }
        };
        let now = clock.tick;
        let last_tick = last >> p.sequence_bits;
        let later_tick = last_tick > cur >> p.sequence_bits;
        // Fence: as the shared generator's general path (the pid, too, when moving into a
        // later tick or taking a batch).
        if forked | later_tick | (n > 1) | g.core.fence.refuses(now, last_tick) {
            g.check_slow(forked, now, last_tick)?;
        }
        if later_tick {
            // Published before anything is issued in it: a seal (one read-modify-write of
            // this word) either comes after this and finds the tick, or before it and this
            // finds the seal. Issuing inside a tick found here needs no more: the final
            // reservation covers the whole tick.
            let before = publish(&shared.slot(self.slot.get()).state, last);
            if before == SEALED {
                self.pin(shared, SEALED);
                return Err(g.fence_error(false, now));
            }
            g.count_jump_or_borrow(cur, first, last, now);
        }
        // Hand the values issued since the last count to the slot's counter, off the common
        // path; the run counts again from here.
        shared.count(self.slot.get(), cur.wrapping_sub(self.counted.get()));
        self.counted.set(first - 1);
        if later_tick {
            self.enter(shared, last);
        } else {
            // The same tick: `last` is `cur` plus a whole number of steps.
            self.id.set(self.id.get() + (last - cur) * self.step.get());
        }
        Ok((first, last))
    }

    /// Moves the state to `state` for good (the end of the time field, or sealed), counting
    /// what was issued before.
    fn pin<C: TimeSource>(&self, shared: &Shared<C>, state: u64) {
        self.flush(shared);
        self.enter(shared, state);
        self.counted.set(state);
    }

    /// The ID of state value `state` in this run's slot.
    pub(super) fn id_of<C: TimeSource>(&self, shared: &Shared<C>, state: u64) -> u64 {
        shared.base.out.id(state).as_u64() | self.fixed.get()
    }

    /// Hands the values issued since the last count to the slot's counter.
    pub(super) fn flush<C: TimeSource>(&self, shared: &Shared<C>) {
        let state = self.state();
        if state != SEALED {
            shared.count(self.slot.get(), state.wrapping_sub(self.counted.get()));
            self.counted.set(state);
        }
    }
}

/// What the common case reads of a [`Run`]: the last ID issued and the bounds of its tick.
/// A [`Run`] keeps these in cells; a [`LocalIds`](super::LocalIds) keeps a copy in registers.
#[derive(Clone, Copy, Debug)]
pub(super) struct Hot {
    /// The ID of the last state value issued.
    pub(super) id: u64,
    /// The ID of the tick's last value in this slot (0 where the tick has no room).
    end_id: u64,
    /// One step of the sequence field in an ID.
    step: u64,
    /// The window of time for the state's tick (Unix ns): `[from_ns, from_ns + width_ns)`.
    from_ns: u64,
    width_ns: u64,
}

impl Hot {
    /// The common case, the one step every way into a slot shares: the clock in the state's
    /// tick, room in the tick's sequence, the fence open for the tick, and no fork (`unforked`,
    /// the caller's answer). Then the next state is `state + 1` — what `next_state` issues
    /// there (`InTick`) — and this advances `id` and returns it; otherwise `None`, and nothing
    /// moved.
    ///
    /// `now_ns` is the clock's reading, taken before these numbers were read (see
    /// [`Run::common`]). The fence is asked in ID space (`Fence::refuses_id`): the last ID
    /// issued is in the state's tick, so it tells the tick without a number of its own.
    #[inline(always)]
    pub(super) fn advance(&mut self, now_ns: u64, fence: &Fence, unforked: bool) -> Option<u64> {
        let cur = self.id;
        // Evaluated without short-circuits.
        let ok = (now_ns.wrapping_sub(self.from_ns) < self.width_ns)
            & (cur < self.end_id)
            & !fence.refuses_id(cur)
            & unforked;
        if ok {
            self.id = cur + self.step;
            Some(self.id)
        } else {
            None
        }
    }
}

/// Publishes `state`, in a later tick than the word holds, in a slot's word, and returns what
/// the word held: [`SEALED`] if the slot was sealed (the word stays sealed).
#[cfg(not(monoflake_broken_slots))]
fn publish(word: &AtomicU64, state: u64) -> u64 {
    // Ordering: Relaxed; the seal's swap and this fetch_max are read-modify-writes of one
    // atomic, whose modification order decides which came first.
    word.fetch_max(state, Ordering::Relaxed)
}

/// A deliberately broken publication (a load, then a plain store that may overwrite a seal
/// in between), compiled only to check that the loom models catch it.
#[cfg(monoflake_broken_slots)]
fn publish(word: &AtomicU64, state: u64) -> u64 {
    let before = word.load(Ordering::Relaxed);
    word.store(state, Ordering::Relaxed);
    before
}
