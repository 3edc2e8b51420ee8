//! The per-thread flavour: each thread owns a slot of the sequence space and advances plain
//! numbers of its own with the pure step — no read-modify-write per ID.
//!
//! * `mod.rs`: [`PerThread`], its slots (claim, hand-over, seal) and the implicit calls.
//! * `run.rs`: a slot's numbers, the common case on them and the general step.
//! * `local.rs`: [`LocalSlot`], the explicit handle for the hottest loops.
//! * `ids.rs`: [`LocalIds`], a handle's IDs as an iterator, its numbers in registers.
//! * `implicit.rs`: the thread-local registry behind [`PerThread::next_id`].

mod ids;
mod implicit;
mod local;
mod run;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_utils::CachePadded;

pub use self::ids::LocalIds;
pub use self::local::LocalSlot;
use self::run::Run;
use super::{Generator, Ids};
use crate::clock::{LockedClock, TimeSource};
use crate::stats::Counters;
use crate::sync::{AtomicBool, AtomicU64, Ordering};
use crate::{Error, Id, Layout, Stats};

/// The state a sealed slot holds: above every state a layout can issue, so the step reads it
/// as the end of the time field (and the generator then says why its fence closed).
pub(crate) const SEALED: u64 = u64::MAX;

/// The shortest sleep of a call waiting for a free slot, once spinning and yielding are used
/// up; it doubles up to [`MAX_SLOT_NAP`].
const MIN_SLOT_NAP: Duration = Duration::from_micros(50);
/// The longest sleep of a call waiting for a free slot.
const MAX_SLOT_NAP: Duration = Duration::from_millis(5);

/// Issues IDs for one node from a slot of the sequence space per thread: each thread advances
/// plain numbers of its own, with no atomic read-modify-write per ID, for the hottest paths.
///
/// * **Slots.** The top bits of the sequence carry a slot number, as in [`PerCore`](crate::PerCore);
///   a thread takes a free slot on its first call and gives it back when it exits (or, for a
///   [`LocalSlot`] handle, when the handle drops). A slot given back keeps its last state, and the
///   next thread to take it goes on from there: never a value issued twice, even when the
///   thread that left had borrowed ticks ahead of the clock.
/// * **Per ID**: a clock read, two loads (the fence's word and the process generation) and
///   plain arithmetic on the thread's own numbers. Only moving to a later tick touches the
///   slot's shared word (one read-modify-write per tick, not per ID).
/// * **Three ways in.** [`PerThread::next_id`] finds the calling thread's numbers for this
///   generator in a thread-local (several generators may live in one process; a thread using
///   several switches between them off the common path). [`PerThread::local`] hands out a
///   [`LocalSlot`]: a handle holding a slot and its numbers inline, for a loop that issues many
///   IDs. And [`LocalSlot::ids`] turns a handle into an iterator ([`LocalIds`]) whose numbers
///   stay in registers — the fastest way in, about two thirds of a call's cost per ID.
/// * **Unique, and increasing per slot**: along a thread's [`PerThread::next_id`] calls, and
///   along each [`LocalSlot`]'s (a thread that uses both has two slots, whose IDs interleave).
///   Across slots IDs are ordered by their time field only: two slots' IDs in one tick differ
///   in their slot bits, not in the order they were issued. Pick [`Generator`] when every ID must be greater than every one before it, across
///   threads.
/// * **More threads than slots**: a thread that finds every slot held gets
///   [`Error::NoFreeSlot`] from the non-waiting calls; the waiting calls wait for a slot to be
///   given back (a pool replacing its threads) for at most `max_wait`, then report the same.
///   Never a panic, never two threads on one slot.
/// * **As every flavour**: borrowing ahead within `max_lead`, pacing at the limit, the clock
///   safety of the step, the fork check on every call ([`Error::Forked`] in a child), and, for
///   a leased one ([`GeneratorBuilder::build_leased_per_thread`](crate::GeneratorBuilder::build_leased_per_thread)),
///   the fence of the node's reservation and lease.
/// * **A thread is a thread with thread-locals of its own.** A task made by a raw
///   `clone(CLONE_VM)` without a thread pointer of its own (no `CLONE_SETTLS`, not through
///   `pthread_create` or `std::thread`) shares the thread-locals of the thread that made it —
///   libc's `errno`, Rust's every `thread_local!`, and this generator's slot numbers — and runs
///   at the same time as it: no Rust code that keeps state in a thread-local is sound there,
///   and two such tasks issuing from one slot issue the same IDs (3,158 to 12,786 in a review,
///   issue 34). Nothing on the common path can tell the two apart without a system call. Use a
///   [`Generator`] or [`PerCore`](crate::PerCore) (one compare-exchange per ID) in such a
///   program. (`vfork`, and `clone` with `CLONE_VFORK`, suspend the parent until the child
///   execs or exits: safe, as long as the child does not issue.)
/// * **Costs sequence space**: each slot has `2^(sequence_bits - slot_bits)` IDs per tick, so
///   one busy thread borrows sooner than on a [`Generator`]. Twitter's 12 sequence bits with
///   8 slots leave 512 IDs per millisecond per thread.
/// * **When to pick it**: many threads, each issuing often, on a layout whose sequence has room
///   for a slot per thread (a wide sequence, or demand below each slot's share of the cap), and
///   no need for one order across threads. The shared [`Generator`] is the default: one order
///   for every ID, the whole sequence for whoever asks; [`PerCore`](crate::PerCore) shares a
///   few states among any number of threads, with no slots to run out of.
///
/// # Example
///
/// ```
/// use monoflake::{Generator, Layout};
///
/// let ids = Generator::builder(Layout::twitter()).node(3).build_per_thread(4)?;
/// let all: Vec<_> = std::thread::scope(|s| {
///     let a = s.spawn(|| (0..1000).map(|_| ids.next_id().unwrap()).collect::<Vec<_>>());
///     let b = s.spawn(|| {
///         // A hot loop: a handle holds its slot and its numbers inline.
///         let local = ids.local().unwrap();
///         (0..1000).map(|_| local.next_id().unwrap()).collect::<Vec<_>>()
///     });
///     [a.join().unwrap(), b.join().unwrap()].concat()
/// });
/// let mut unique = all.clone();
/// unique.sort();
/// unique.dedup();
/// assert_eq!(unique.len(), 2000);
/// # Ok::<(), monoflake::Error>(())
/// ```
pub struct PerThread<C: TimeSource + 'static = LockedClock> {
    shared: Arc<Shared<C>>,
    /// Who holds the node, when it is leased: stopped and released on drop.
    owner: Option<Box<dyn Owner>>,
}

/// The owner of a per-thread generator's node (the lease), seen from the generator: it adds
/// its counters and is released when the generator is dropped. The generator never names the
/// lease.
pub(crate) trait Owner: Send + Sync + fmt::Debug {
    /// Adds the owner's counters to the generator's.
    fn fill(&self, stats: &mut Stats);
    /// Stops issuing for good (sealing every slot) and gives the node up.
    fn release(&mut self) -> Result<(), Error>;
}

/// What the threads share: the slots, and a generator (its state unused) for everything else —
/// the layout's numbers, the fence, the counters, the clock, the explanation of a refusal.
///
/// Aligned to 64 bytes: its address, with the low six bits free, is the generator's key in a
/// thread's registry (see [`Shared::key`]).
#[repr(align(64))]
pub(crate) struct Shared<C: TimeSource> {
    pub(super) base: Generator<C>,
    slots: Box<[CachePadded<Slot>]>,
    /// Where a slot number goes in an ID.
    slot_shift: u32,
    /// Set when the [`PerThread`] is dropped: threads drop their numbers for it when they
    /// next look.
    // Ordering: Relaxed; a hint for tidying up, nothing is read after it.
    retired: AtomicBool,
}

/// One slot of the sequence space, on its own cache line.
#[derive(Debug)]
struct Slot {
    /// Whether a thread holds the slot.
    // Ordering: Acquire on claim, Release on give-back: the claimer then reads the state the
    // last holder left (see `Shared::release`).
    held: AtomicBool,
    /// The slot's state as its holders published it: the first value of each tick a holder
    /// moves into (before it issues there), the exact last value when it gives the slot back,
    /// and [`SEALED`] once sealed. Only ever raised.
    // Ordering: Relaxed, always a read-modify-write but for the claimer's load, which the
    // `held` flag orders after the last holder's give-back.
    state: AtomicU64,
    /// IDs issued from this slot, handed over off the common path (at every general step and
    /// at give-back).
    // Ordering: Relaxed; a statistic.
    issued: AtomicU64,
}

impl<C: TimeSource + 'static> fmt::Debug for PerThread<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PerThread")
            .field("layout", &self.shared.base.layout().name())
            .field("node", &self.shared.base.node())
            .field("slots", &self.shared.slots.len())
            .field("leased", &self.owner.is_some())
            .finish_non_exhaustive()
    }
}

/// The largest process generation [`Shared::key`] folds into a key; a generator built in a later
/// one (62 forks deep) gets a key the common path never matches, and issues by the general
/// step, which asks the fork watch itself.
const MAX_FOLDED_GENERATION: u64 = 62;
/// What a key holds in place of a generation it does not fold.
const UNFOLDED: u64 = 63;

/// The key of the shared parts at `addr` (64-aligned) built in process generation
/// `generation` (see [`Shared::key`]). The generation (or [`UNFOLDED`]) goes in the address's
/// six zero bits, where adding it is the same as setting them: one instruction with the
/// address (`lea`).
const fn key_of(addr: u64, generation: u64) -> u64 {
    addr + if generation <= MAX_FOLDED_GENERATION {
        generation
    } else {
        UNFOLDED
    }
}

/// Whether `key` is the key of the shared parts at `addr` in the process whose generation is
/// `now`: `key == key_of(a, g)` for `a == addr`, `g == now` and `g` folded — one comparison of
/// `now` with a constant and one of the key.
#[inline(always)]
const fn is_key_now(key: u64, addr: u64, now: u64) -> bool {
    (now <= MAX_FOLDED_GENERATION) & (key == addr.wrapping_add(now))
}

impl<C: TimeSource> Shared<C> {
    /// Tells this generator's numbers apart in a thread's registry, and the process it was built
    /// in from its forked children: the address of these shared parts with the process
    /// generation the generator was built in in its six low bits (which the address has zero).
    ///
    /// * **Unique among the keys a registry holds**: each entry holds an `Arc` of its
    ///   generator's shared parts, so no other generator lives at that address meanwhile, and
    ///   the generation stays in the low bits. 0 is no key (no address is 0).
    /// * **Checked in one comparison on the common path** ([`Shared::is_key_now`]): the key
    ///   there is worked out from the process's generation *now*, which is the one the
    ///   generator was built in only in that process — a forked child's copy of a thread's
    ///   numbers (its key included) never matches, whichever way it was forked. One load of the
    ///   thread's key answers both "are these this generator's numbers?" and "is this the
    ///   process that built it?".
    pub(super) fn key(&self) -> u64 {
        key_of(self.addr(), self.base.core.fence.fork_watch().generation())
    }

    /// Whether a thread's key `key` is this generator's, in the process that built it: the
    /// key worked out from this process's generation now (see [`Shared::key`]).
    #[inline(always)]
    pub(super) fn is_key_now(&self, key: u64) -> bool {
        let fork = self.base.core.fence.fork_watch();
        is_key_now(key, self.addr(), fork.generation_now_on_common_path())
    }

    /// The address of these shared parts: 64-aligned.
    #[inline(always)]
    fn addr(&self) -> u64 {
        (self as *const Self).addr() as u64
    }

    /// The slot's state word and counters.
    fn slot(&self, slot: usize) -> &Slot {
        &self.slots[slot]
    }

    /// The slot's number, in place in an ID.
    fn fixed(&self, slot: usize) -> u64 {
        (slot as u64) << self.slot_shift
    }

    /// Takes a free slot: its number and the state its last holder left.
    fn claim(&self) -> Option<(usize, u64)> {
        self.slots.iter().enumerate().find_map(|(i, slot)| {
            // Ordering: Relaxed for the look, which only saves a read-modify-write on a held
            // slot; Acquire on the claim (see `Shared::release`).
            if slot.held.load(Ordering::Relaxed) || !Self::take(&slot.held) {
                return None;
            }
            // Ordering: Relaxed; the claim's Acquire makes the last holder's give-back (and
            // everything before it) visible, so this reads the state it left or later.
            Some((i, slot.state.load(Ordering::Relaxed)))
        })
    }

    /// `held`: false → true.
    #[cfg(not(monoflake_broken_slots))]
    fn take(held: &AtomicBool) -> bool {
        held.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// A deliberately broken hand-over (Relaxed instead of Acquire), compiled only to check
    /// that the loom models catch it.
    #[cfg(monoflake_broken_slots)]
    fn take(held: &AtomicBool) -> bool {
        held.compare_exchange(false, true, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    /// Gives slot `slot` back at state `state`, `state - counted` values not counted yet.
    ///
    /// The state is published first, then the slot is marked free with Release; a claimer
    /// marks it held with Acquire and then loads the state, so it reads this state or a later
    /// one, never the first value of the tick this holder last moved into (from which it
    /// would issue values this holder already issued).
    fn release(&self, slot: usize, state: u64, counted: u64) {
        let s = self.slot(slot);
        if state != SEALED {
            self.count(slot, state.wrapping_sub(counted));
        }
        // Ordering: Relaxed; a read-modify-write of the one word a seal swaps: a sealed slot
        // stays sealed.
        #[cfg(not(any(monoflake_mutant_giveback_unpublished, monoflake_broken_seal_giveback)))]
        s.state.fetch_max(state, Ordering::Relaxed);
        // A deliberately broken give-back (a plain store, which may overwrite a seal), for the
        // loom model that must catch it.
        #[cfg(monoflake_broken_seal_giveback)]
        s.state.store(state, Ordering::Relaxed);
        Self::give(&s.held);
    }

    /// `held`: true → false.
    #[cfg(not(monoflake_broken_slots))]
    fn give(held: &AtomicBool) {
        held.store(false, Ordering::Release);
    }

    /// The broken hand-over's other half (Relaxed instead of Release).
    #[cfg(monoflake_broken_slots)]
    fn give(held: &AtomicBool) {
        held.store(false, Ordering::Relaxed);
    }

    /// Adds `n` values issued from `slot` to its counter.
    fn count(&self, slot: usize, n: u64) {
        if n > 0 {
            // Ordering: Relaxed; a statistic.
            self.slot(slot).issued.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Stops every slot for good and returns the highest state any of them published: the
    /// fence closes (the common case refuses), then each slot's word is swapped for
    /// [`SEALED`]. A holder moving into a later tick publishes it with a read-modify-write of
    /// the same word before it issues there, so it either did so before the swap (and the
    /// tick is in the returned state) or finds the seal and issues nothing there. A holder
    /// inside a tick it published may still issue in that tick until it sees the closed fence,
    /// never past it: the returned state's tick bounds every ID, before and after the seal.
    pub(crate) fn seal(&self) -> u64 {
        self.base.fence().close();
        self.slots
            .iter()
            // Ordering: Relaxed; see above: the modification order of each word decides.
            .map(|s| s.state.swap(SEALED, Ordering::Relaxed))
            .filter(|&state| state != SEALED)
            .max()
            .unwrap_or(SEALED)
    }

    /// The generator whose numbers, fence and counters the slots share.
    pub(crate) fn generator(&self) -> &Generator<C> {
        &self.base
    }

    /// The highest tick any slot published: for a keeper extending the reservation ahead of
    /// need. A stale read is lower (the words only rise): a later extension, and callers told
    /// to wait for it, never an ID past the fence.
    pub(crate) fn last_tick(&self) -> u64 {
        self.slots
            .iter()
            // Ordering: Relaxed; see above.
            .map(|s| s.state.load(Ordering::Relaxed))
            .filter(|&state| state != SEALED)
            .max()
            .map_or(0, |state| self.base.tick_of_state(state))
    }

    /// IDs issued, over every slot (what each thread handed over so far).
    fn issued(&self) -> u64 {
        self.slots
            .iter()
            .map(|s| s.issued.load(Ordering::Relaxed))
            .sum()
    }
}

impl<C: TimeSource + 'static> PerThread<C> {
    /// A per-thread generator over `base` (a generator built with `slot_bits` slot bits and
    /// slot 0, whose state is not used) with `2^slot_bits` slots.
    pub(crate) fn from_base(base: Generator<C>, slot_bits: u32) -> Self {
        let start = base.core.state.load(Ordering::Relaxed);
        let slot_shift = base.params.sequence_bits + base.layout().sequence_shift();
        let slots = (0..1usize << slot_bits)
            .map(|_| {
                CachePadded::new(Slot {
                    held: AtomicBool::new(false),
                    state: AtomicU64::new(start),
                    issued: AtomicU64::new(0),
                })
            })
            .collect();
        PerThread {
            shared: Arc::new(Shared {
                base,
                slots,
                slot_shift,
                retired: AtomicBool::new(false),
            }),
            owner: None,
        }
    }

    /// This generator held by `owner` (its lease).
    pub(crate) fn owned_by(mut self, owner: Box<dyn Owner>) -> Self {
        self.owner = Some(owner);
        self
    }

    /// What a lease keeper needs: the slots (to seal) and the fence.
    pub(crate) fn shared(&self) -> &Arc<Shared<C>> {
        &self.shared
    }

    /// Issues one ID from the calling thread's slot without waiting, taking a free slot on
    /// the thread's first call.
    ///
    /// # Errors
    ///
    /// * [`Error::NoFreeSlot`]: the thread has no slot yet and every slot is held.
    /// * As [`Generator::try_next_id`] otherwise: [`Error::WouldBlock`] at the lead limit,
    ///   [`Error::Exhausted`], [`Error::Forked`], and for a leased one [`Error::LeaseLost`]
    ///   and [`Error::ReservationUnavailable`].
    ///
    /// ```
    /// let ids = monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_thread(2)?;
    /// let a = ids.try_next_id()?;
    /// assert!(ids.try_next_id()? > a);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    #[inline]
    pub fn try_next_id(&self) -> Result<Id, Error> {
        match implicit::common(&self.shared) {
            Some(id) => Ok(Id::from_u64(id)),
            None => self.try_next_id_beyond(),
        }
    }

    /// [`PerThread::try_next_id`] beyond the common case: a `WouldBlock` is counted as
    /// returned.
    #[inline(never)]
    fn try_next_id_beyond(&self) -> Result<Id, Error> {
        self.shared.returned(self.attempt_beyond())
    }

    /// One attempt at one ID, as a waiting call retries it (nothing counted as returned).
    fn attempt(&self) -> Result<Id, Error> {
        match implicit::common(&self.shared) {
            Some(id) => Ok(Id::from_u64(id)),
            None => self.attempt_beyond(),
        }
    }

    /// The general step on the calling thread's numbers.
    fn attempt_beyond(&self) -> Result<Id, Error> {
        implicit::with_run(&self.shared, |run| {
            let (first, _) = run.general(&self.shared, 1)?;
            Ok(Id::from_u64(run.id_of(&self.shared, first)))
        })
    }

    /// Issues one ID from the calling thread's slot, waiting at the lead limit (as
    /// [`Generator::next_id`]) or, when every slot is held, for one to be given back — each
    /// for at most `max_wait`.
    ///
    /// # Errors
    ///
    /// * [`Error::TimedOut`]: still at the lead limit after `max_wait`.
    /// * [`Error::NoFreeSlot`]: still no free slot after `max_wait`.
    /// * As [`PerThread::try_next_id`] otherwise.
    ///
    /// ```
    /// let ids = monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_thread(2)?;
    /// let run: Vec<_> = (0..10_000).map(|_| ids.next_id()).collect::<Result<_, _>>()?;
    /// assert!(run.windows(2).all(|w| w[0] < w[1]));
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    #[inline]
    pub fn next_id(&self) -> Result<Id, Error> {
        match implicit::common(&self.shared) {
            Some(id) => Ok(Id::from_u64(id)),
            None => self.next_id_beyond(),
        }
    }

    /// [`PerThread::next_id`] beyond the common case.
    #[inline(never)]
    fn next_id_beyond(&self) -> Result<Id, Error> {
        self.waiting(|| self.attempt())
    }

    /// Reserves `n` consecutive IDs from the calling thread's slot, without waiting. `n = 0`
    /// gives an empty run.
    ///
    /// # Errors
    ///
    /// As [`PerThread::try_next_id`]; a batch larger than the slot's sequence space within
    /// `max_lead` can never succeed and reports [`Error::WouldBlock`].
    ///
    /// ```
    /// let ids = monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_thread(2)?;
    /// let run: Vec<_> = ids.try_next_ids(64)?.collect();
    /// assert!(run.windows(2).all(|w| w[0] < w[1]));
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn try_next_ids(&self, n: u64) -> Result<Ids, Error> {
        self.shared.returned(self.attempt_ids(n))
    }

    /// One attempt at `n` IDs, as a waiting call retries it (nothing counted as returned).
    fn attempt_ids(&self, n: u64) -> Result<Ids, Error> {
        implicit::with_run(&self.shared, |run| self.shared.ids(run, n))
    }

    /// [`PerThread::try_next_ids`], waiting like [`PerThread::next_id`].
    ///
    /// # Errors
    ///
    /// As [`PerThread::next_id`].
    ///
    /// ```
    /// let ids = monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_thread(2)?;
    /// assert_eq!(ids.next_ids(5000)?.len(), 5000);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn next_ids(&self, n: u64) -> Result<Ids, Error> {
        self.waiting(|| self.attempt_ids(n))
    }

    /// Takes a slot of its own for a handle that issues from it: the fastest way in, for a
    /// loop that issues many IDs. The slot is given back when the handle drops. (A thread that
    /// also calls [`PerThread::next_id`] holds a second slot for that.)
    ///
    /// # Errors
    ///
    /// [`Error::NoFreeSlot`] when every slot is held.
    ///
    /// ```
    /// let ids = monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_thread(2)?;
    /// let local = ids.local()?;
    /// let a = local.next_id()?;
    /// assert!(local.next_id()? > a);
    /// drop(local); // the slot is free again, and its next holder goes on after `a`
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn local(&self) -> Result<LocalSlot<'_, C>, Error> {
        LocalSlot::claim(&self.shared)
    }

    /// Retries `attempt` while it reports [`Error::WouldBlock`] (waiting as
    /// [`Generator::next_id`] does) or [`Error::NoFreeSlot`] (spinning, yielding, then sleeping
    /// until a slot is given back), for at most `max_wait` in all.
    ///
    /// A wait for a slot counts in [`Stats`] as a waiting call, with its spins, yields and
    /// sleeps (a call that then waits at the lead limit counts there too).
    fn waiting<T>(&self, attempt: impl Fn() -> Result<T, Error>) -> Result<T, Error> {
        let base = &self.shared.base;
        let mut step = 0;
        let mut slept = Duration::ZERO;
        let mut nap = MIN_SLOT_NAP;
        loop {
            match attempt() {
                Err(Error::WouldBlock {
                    retry_after,
                    blocked_on,
                }) => {
                    return base.waiting((retry_after, blocked_on), &attempt);
                }
                Err(Error::NoFreeSlot { slots }) => {
                    let counter = if crate::sync::backoff(step) {
                        if step < crate::sync::SPIN_LIMIT {
                            &base.counters.wait_spins
                        } else {
                            &base.counters.wait_yields
                        }
                    } else {
                        if slept >= base.max_wait() {
                            return Err(Error::NoFreeSlot { slots });
                        }
                        let this = nap.min(base.max_wait() - slept);
                        crate::sync::sleep(this);
                        slept += this;
                        nap = (nap * 2).min(MAX_SLOT_NAP);
                        &base.counters.wait_sleeps
                    };
                    if step == 0 {
                        Counters::add(&base.counters.waiting_calls, 1);
                    }
                    Counters::add(counter, 1);
                    step = step.saturating_add(1);
                }
                done => return done,
            }
        }
    }

    /// The layout IDs are issued under.
    ///
    /// ```
    /// let ids = monoflake::Generator::builder(monoflake::Layout::discord()).build_per_thread(2)?;
    /// assert_eq!(ids.layout().name(), "discord");
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn layout(&self) -> &Layout {
        self.shared.base.layout()
    }

    /// The node value every ID carries.
    ///
    /// ```
    /// let ids = monoflake::Generator::builder(monoflake::Layout::twitter()).node(4).build_per_thread(2)?;
    /// assert_eq!(ids.node(), 4);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn node(&self) -> u64 {
        self.shared.base.node()
    }

    /// The number of slots: at most this many threads (and handles) issue at once.
    ///
    /// ```
    /// let ids = monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_thread(3)?;
    /// assert_eq!(ids.slots(), 4); // rounded up to a power of two
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn slots(&self) -> usize {
        self.shared.slots.len()
    }

    /// The time source.
    ///
    /// ```
    /// use monoflake::TimeSource;
    /// let ids = monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_thread(2)?;
    /// assert!(ids.clock().now_ms() > 0);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn clock(&self) -> &C {
        self.shared.base.clock()
    }

    /// How long a waiting call waits at most (for the lead limit or for a free slot).
    ///
    /// ```
    /// let ids = monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_thread(2)?;
    /// assert_eq!(ids.max_wait(), monoflake::DEFAULT_MAX_WAIT);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn max_wait(&self) -> Duration {
        self.shared.base.max_wait()
    }

    /// The time-field value of the highest tick any slot has moved into (or of the start
    /// point): for monitoring how far the generator runs ahead of its clock.
    ///
    /// ```
    /// let ids = monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_thread(2)?;
    /// let id = ids.next_id()?;
    /// assert_eq!(ids.last_tick(), id.parts(ids.layout())?.tick());
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn last_tick(&self) -> u64 {
        self.shared.last_tick()
    }

    /// What the generator has been doing: see [`Stats`]. Each thread hands its count of IDs
    /// issued to its slot when it moves to a later tick, when it gives the slot back, and
    /// when it asks for the statistics itself: another thread's current tick may not be
    /// counted yet.
    ///
    /// ```
    /// let ids = monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_thread(2)?;
    /// for _ in 0..10 {
    ///     ids.next_id()?;
    /// }
    /// assert_eq!(ids.stats().issued, 10);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn stats(&self) -> Stats {
        implicit::flush(&self.shared);
        let mut stats = self.shared.stats();
        if let Some(owner) = &self.owner {
            owner.fill(&mut stats);
        }
        stats
    }

    /// Stops issuing and gives the node up: for a leased generator, every slot is sealed, the
    /// final reservation (the end of the highest tick any slot moved into) is written and the
    /// node is released; without a lease, nothing to do.
    ///
    /// # Errors
    ///
    /// The store's error if the final write fails (the node is given up all the same).
    ///
    /// ```
    /// let ids = monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_thread(2)?;
    /// ids.release()?;
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn release(mut self) -> Result<(), Error> {
        self.stop()
    }

    /// Seals every slot as a lease's release does (`Shared::seal`) and returns the tick of
    /// the highest state published, for the loom models (only in `--cfg loom` builds).
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_seal(&self) -> u64 {
        self.shared.base.tick_of_state(self.shared.seal())
    }

    fn stop(&mut self) -> Result<(), Error> {
        match self.owner.take() {
            Some(mut owner) => owner.release(),
            None => Ok(()),
        }
    }
}

impl<C: TimeSource> Shared<C> {
    /// `n` values from `run` as a run of IDs.
    fn ids(&self, run: &Run, n: u64) -> Result<Ids, Error> {
        if n == 0 {
            return Ok(Ids::empty(self.out(run)));
        }
        // A batch that cannot fit within the lead even from a whole state: refused at once.
        let limit = self.base.max_batch();
        if n > limit {
            return Err(Error::BatchTooLarge {
                requested: n,
                limit,
            });
        }
        let (first, last) = run.general(self, n)?;
        Ok(Ids::new(first, last, self.out(run)))
    }

    /// `answer`, a `WouldBlock` in it counted as returned to the caller (of a non-waiting
    /// call).
    fn returned<T>(&self, answer: Result<T, Error>) -> Result<T, Error> {
        if matches!(answer, Err(Error::WouldBlock { .. })) {
            self.base.returned_would_block();
        }
        answer
    }

    /// The generator's output with `run`'s slot in place.
    fn out(&self, run: &Run) -> super::Output {
        let mut out = self.base.out;
        out.fixed |= self.fixed(run.slot.get());
        out
    }

    /// The generator's statistics, with the IDs every slot has counted.
    fn stats(&self) -> Stats {
        Stats {
            issued: self.issued(),
            ..self.base.stats()
        }
    }
}

impl<C: TimeSource + 'static> Drop for PerThread<C> {
    fn drop(&mut self) {
        let _ = self.stop();
        // Ordering: Relaxed; see the field.
        self.shared.retired.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests;
