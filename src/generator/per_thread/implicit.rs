//! The thread-local registry behind [`PerThread::next_id`](super::PerThread::next_id): which
//! slots the calling thread holds, of which generators, and the numbers of the one it used
//! last.
//!
//! * `HOT`: the numbers of the generator the thread used last, with its key (which also says
//!   the process has not forked since: see `Shared::key`). A constant thread-local without a
//!   destructor: it can be read while the thread's other thread-locals are being destroyed.
//! * `HELD`: every slot the thread holds, with the numbers of the generators it is not using
//!   right now. Its destructor, when the thread exits, gives every slot back with its last
//!   state (taken from `HOT` for the one in use).
//!
//! A call whose generator is not the one in `HOT` parks `HOT`'s numbers in `HELD` and brings
//! its own there (taking a free slot on a generator's first call). A call made while `HELD` is
//! being destroyed (from another thread-local's destructor) takes a slot for that one call.
//!
//! **Through a pointer.** The common case reads `HOT` through the reference a function out of
//! line hands back (`bring_for_common`, called when the key is not the caller's), so the
//! compiler addresses the numbers through a register. Reached directly, a constant
//! thread-local is an offset from the thread pointer in every instruction (`%fs:` on x86-64),
//! which the processor does not rename in memory: each call's load of the last ID then waits
//! for the previous call's store to be forwarded — 2.1 ns a call on the machine of issue 59,
//! where the same checks through a pointer take 1.4 ns (ferroid's thread-local generator,
//! reached through a pointer as well, 1.5).

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use super::Shared;
use super::run::Run;
use crate::Error;
use crate::clock::TimeSource;
use crate::sync::Ordering;

/// The numbers of the generator the thread used last.
struct Hot {
    /// Its key; 0: none.
    key: Cell<u64>,
    /// Set while a general step runs on `run`: a call for another generator made from inside
    /// it (by a clock or a `tracing` subscriber, which are user code) must not swap `run` out
    /// from under it, and works on its own numbers where they are parked instead.
    busy: Cell<bool>,
    run: Run,
}

/// Clears [`Hot::busy`] when the step it marks ends, a panic included.
struct Busy<'a>(&'a Cell<bool>);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

/// The slots the thread holds.
struct Held {
    slots: RefCell<Vec<Entry>>,
}

/// One slot the thread holds: whose, and its numbers while another generator is in `HOT`.
struct Entry {
    key: u64,
    run: Run,
    table: Arc<dyn Table>,
}

/// A generator's slots, seen from a thread's registry (which holds generators of any clock).
trait Table: Send + Sync {
    /// Gives `slot` back at `state`, `state - counted` values not counted yet.
    fn give_back(&self, slot: usize, state: u64, counted: u64);
    /// Whether the generator was dropped.
    fn retired(&self) -> bool;
}

impl<C: TimeSource + 'static> Table for Shared<C> {
    fn give_back(&self, slot: usize, state: u64, counted: u64) {
        self.release(slot, state, counted);
    }

    fn retired(&self) -> bool {
        // Ordering: Relaxed; see the field.
        self.retired.load(Ordering::Relaxed)
    }
}

#[cfg(not(loom))]
thread_local! {
    static HOT: Hot = const {
        Hot {
            key: Cell::new(0),
            busy: Cell::new(false),
            run: Run::empty(),
        }
    };
    static HELD: Held = const {
        Held {
            slots: RefCell::new(Vec::new()),
        }
    };
}

/// Runs `f` on the thread's `HOT`.
#[cfg(not(loom))]
#[inline(always)]
fn with_hot<R>(f: impl FnOnce(&Hot) -> R) -> R {
    HOT.with(f)
}

/// Runs `f` on the thread's `HELD`, unless it is being (or has been) destroyed.
#[cfg(not(loom))]
fn try_with_held<R>(f: impl FnOnce(&Held) -> R) -> Option<R> {
    HELD.try_with(f).ok()
}

#[cfg(not(loom))]
impl Drop for Held {
    /// The thread is exiting: every slot goes back with its last state.
    fn drop(&mut self) {
        // HOT has no destructor: it is still there.
        with_hot(|hot| self.give_all_back(hot));
    }
}

/// Under loom, whose thread-locals are all taken before any is dropped (so that `HOT` is
/// gone when `HELD`'s destructor runs), both live in one thread-local, given back by its
/// destructor: the models explore the same give-back.
#[cfg(loom)]
struct Registry {
    hot: Hot,
    held: Held,
}

#[cfg(loom)]
loom::thread_local! {
    static REGISTRY: Registry = Registry {
        hot: Hot {
            key: Cell::new(0),
            busy: Cell::new(false),
            run: Run::empty(),
        },
        held: Held {
            slots: RefCell::new(Vec::new()),
        },
    };
}

#[cfg(loom)]
fn with_hot<R>(f: impl FnOnce(&Hot) -> R) -> R {
    REGISTRY.with(|r| f(&r.hot))
}

#[cfg(loom)]
fn try_with_held<R>(f: impl FnOnce(&Held) -> R) -> Option<R> {
    REGISTRY.try_with(|r| f(&r.held)).ok()
}

#[cfg(loom)]
impl Drop for Registry {
    fn drop(&mut self) {
        self.held.give_all_back(&self.hot);
    }
}

impl Held {
    /// The thread is exiting: every slot goes back with its last state (taken from `hot` for
    /// the one in use).
    fn give_all_back(&mut self, hot: &Hot) {
        let entries = std::mem::take(self.slots.get_mut());
        let hot_key = hot.key.replace(0);
        for entry in entries {
            let (slot, state, counted) = if entry.key == hot_key && !stale_at_exit() {
                hot.run.parts()
            } else {
                entry.run.parts()
            };
            entry.table.give_back(slot, state, counted);
        }
    }
}

/// Whether a thread exiting gives back the numbers parked when it last switched generators
/// rather than the ones in use: a deliberately broken build for `scripts/mutants.sh`.
const fn stale_at_exit() -> bool {
    cfg!(monoflake_mutant_exit_stale)
}

/// The common case on the calling thread's numbers for `shared`, if they are the ones in use
/// (or can be brought in) and this is the process that built `shared` (one comparison of the
/// thread's key, see `Shared::key`).
#[inline(always)]
pub(super) fn common<C: TimeSource + 'static>(shared: &Arc<Shared<C>>) -> Option<u64> {
    with_hot(|hot| {
        if trusted_across_the_clock() && !shared.is_key_now(hot.key.get()) {
            return None;
        }
        let now_ns = shared.base.clock.now_ns();
        // The key after the clock's read: the clock is user code, and a call it made for
        // another generator on this thread may have brought that generator's numbers in
        // (issue 34, case 10). Then these are brought back, and read after the clock.
        let hot = if trusted_across_the_clock() || shared.is_key_now(hot.key.get()) {
            hot
        } else {
            bring_for_common(hot, shared)?
        };
        hot.run.common_at(shared, now_ns, true)
    })
}

/// Brings `shared`'s numbers into `hot` for the common case, when the registry can (no
/// general step for another generator under way on this thread, `HELD` not in use or being
/// destroyed, a slot to be had): `hot` itself then, if this is the process that built
/// `shared`; `None` otherwise, and the general path deals with it (and says why).
///
/// Out of line, and handing back the reference it was given: see the module's docs.
#[inline(never)]
fn bring_for_common<'h, C: TimeSource + 'static>(
    hot: &'h Hot,
    shared: &Arc<Shared<C>>,
) -> Option<&'h Hot> {
    if hot.key.get() != shared.key() {
        if hot.busy.get() {
            return None;
        }
        let brought = try_with_held(|held| held.bring(hot, shared));
        if !matches!(brought, Some(Ok(true))) {
            return None;
        }
    }
    shared.is_key_now(hot.key.get()).then_some(hot)
}

/// Whether the common path looks at the key before the clock's read only, trusting the
/// numbers across it: a deliberately broken build, compiled only for `scripts/mutants.sh`.
const fn trusted_across_the_clock() -> bool {
    cfg!(monoflake_mutant_per_thread_reentry)
}

/// Runs `f` on the calling thread's numbers for `shared`: brings them into use (taking a free
/// slot on the thread's first call), or, while the thread's registry is being destroyed, on a
/// slot taken for this call alone.
///
/// # Errors
///
/// [`Error::NoFreeSlot`] when the thread needs a slot and every slot is held; `f`'s errors.
pub(super) fn with_run<C: TimeSource + 'static, R>(
    shared: &Arc<Shared<C>>,
    f: impl FnOnce(&Run) -> Result<R, Error>,
) -> Result<R, Error> {
    let mut f = Some(f);
    let in_use = with_hot(|hot| {
        if hot.key.get() == shared.key() {
            return Ok(true);
        }
        if cfg!(not(monoflake_mutant_per_thread_reentry)) && hot.busy.get() {
            // A general step for another generator is under way on this thread (this call
            // comes from its clock): its numbers stay in `HOT`; this one works on its own.
            return Ok(false);
        }
        try_with_held(|held| held.bring(hot, shared)).unwrap_or(Ok(false))
    })?;
    if in_use {
        let f = f.take().expect("not called yet");
        return with_hot(|hot| {
            let _busy = (!hot.busy.replace(true)).then_some(Busy(&hot.busy));
            f(&hot.run)
        });
    }
    // Its numbers parked in the registry, if they are and the registry is not busy.
    let parked = try_with_held(|held| held.with_parked(shared, &mut f)).flatten();
    if let Some(result) = parked {
        return result;
    }
    let f = f.take().expect("not called yet");
    // The registry is gone (a call from another thread-local's destructor) or busy: a slot
    // for this call.
    let (slot, state) = shared.claim().ok_or(no_free_slot(shared))?;
    let run = Run::empty();
    run.start(shared, slot, state);
    let result = f(&run);
    let (slot, state, counted) = run.parts();
    shared.release(slot, state, counted);
    result
}

/// Hands the count of the calling thread's numbers for `shared`, if in use, to its slot.
pub(super) fn flush<C: TimeSource>(shared: &Shared<C>) {
    with_hot(|hot| {
        if hot.key.get() == shared.key() {
            hot.run.flush(shared);
        }
    });
}

fn no_free_slot<C: TimeSource>(shared: &Shared<C>) -> Error {
    Error::NoFreeSlot {
        slots: shared.slots.len() as u64,
    }
}

impl Held {
    /// Runs `f` on the numbers for `shared` where they are parked here, if they are (and the
    /// registry is not in use): `None` otherwise, with `f` left in place.
    fn with_parked<C: TimeSource + 'static, R>(
        &self,
        shared: &Arc<Shared<C>>,
        f: &mut Option<impl FnOnce(&Run) -> Result<R, Error>>,
    ) -> Option<Result<R, Error>> {
        let entries = self.slots.try_borrow().ok()?;
        let key = shared.key();
        let entry = entries.iter().find(|e| e.key == key)?;
        Some(f.take()?(&entry.run))
    }

    /// Brings the numbers for `shared` into `hot`: parks the ones there, drops those of
    /// generators that were dropped, and finds this generator's or takes a free slot for it.
    /// `false` when the registry is busy (a call from inside it cannot happen; a destructor
    /// running during it could), so the caller takes a slot for the one call.
    fn bring<C: TimeSource + 'static>(
        &self,
        hot: &Hot,
        shared: &Arc<Shared<C>>,
    ) -> Result<bool, Error> {
        let Ok(mut entries) = self.slots.try_borrow_mut() else {
            return Ok(false);
        };
        let parked = hot.key.replace(0);
        if let Some(e) = entries.iter().find(|e| parked != 0 && e.key == parked) {
            // A deliberately broken build, for the loom model that must catch it, parks
            // nothing: the numbers brought back later are the ones from before.
            #[cfg(not(monoflake_broken_park))]
            e.run.copy_from(&hot.run);
            #[cfg(monoflake_broken_park)]
            let _ = e;
        }
        // Generators dropped since: their slots go back (nobody issues from them any more).
        entries.retain(|e| {
            let keep = !e.table.retired();
            if !keep {
                let (slot, state, counted) = e.run.parts();
                e.table.give_back(slot, state, counted);
            }
            keep
        });
        let key = shared.key();
        let entry = match entries.iter().position(|e| e.key == key) {
            Some(i) => &entries[i],
            None => {
                let (slot, state) = shared.claim().ok_or(no_free_slot(shared))?;
                let run = Run::empty();
                run.start(shared, slot, state);
                let table: Arc<dyn Table> = shared.clone();
                entries.push(Entry { key, run, table });
                &entries[entries.len() - 1]
            }
        };
        hot.run.copy_from(&entry.run);
        hot.key.set(key);
        Ok(true)
    }
}
