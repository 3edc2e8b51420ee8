//! The per-core flavour: several states on their own cache lines, each owning a slice of the
//! sequence bits.

use std::fmt;
use std::sync::Arc;

use super::{Generator, Ids, Owner};
use crate::clock::{LockedClock, TimeSource};
use crate::{Error, Id, Layout, Stats};

/// Several generator states for one node, each on its own cache line and owning a slice of the
/// sequence bits (its slot number in their top bits), for many-core hosts.
///
/// * Threads are mapped to slots without locks: each thread takes a number once (one atomic
///   increment, on its first call) and uses slot `number % slots` from then on.
/// * IDs are unique — different slots differ in their slot bits, and each slot is a
///   [`Generator`] — and increasing per thread; across threads they are k-sorted (ordered by
///   time, not strictly).
/// * Each slot has `2^(sequence_bits - slot_bits)` IDs per tick: borrowing starts sooner when
///   one thread does all the work.
///
/// # Example
///
/// ```
/// use monoflake::{Generator, Layout};
///
/// let per_core = Generator::builder(Layout::twitter()).node(3).build_per_core(2)?;
/// let ids: Vec<_> = std::thread::scope(|s| {
///     let a = s.spawn(|| (0..1000).map(|_| per_core.next_id().unwrap()).collect::<Vec<_>>());
///     let b = s.spawn(|| (0..1000).map(|_| per_core.next_id().unwrap()).collect::<Vec<_>>());
///     [a.join().unwrap(), b.join().unwrap()].concat()
/// });
/// let mut unique = ids.clone();
/// unique.sort();
/// unique.dedup();
/// assert_eq!(unique.len(), 2000);
/// # Ok::<(), monoflake::Error>(())
/// ```
///
/// A per-core generator can hold its node through a [`NodeStore`](crate::NodeStore)
/// ([`GeneratorBuilder::build_leased_per_core`](crate::GeneratorBuilder::build_leased_per_core)):
/// one keeper for all slots, one fence, and a release that seals every slot.
pub struct PerCore<C: TimeSource = LockedClock> {
    generators: Arc<Slots<C>>,
    mask: usize,
    /// Who holds the node, when it is leased: stopped and released on drop.
    owner: Option<Box<dyn Owner>>,
}

/// A per-core generator's slots, shared with the keeper of its node when it is leased.
pub(crate) struct Slots<C: TimeSource>(pub(crate) Box<[Generator<C>]>);

impl<C: TimeSource> std::ops::Deref for Slots<C> {
    type Target = [Generator<C>];
    fn deref(&self) -> &[Generator<C>] {
        &self.0
    }
}

impl<C: TimeSource + fmt::Debug> fmt::Debug for PerCore<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PerCore")
            .field("slots", &self.generators.len())
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}

/// The calling thread's number, taken on its first call: under loom, from loom's own
/// thread-local and atomic (the models' threads share one OS thread, and each execution starts
/// counting afresh).
#[cfg(loom)]
fn thread_number() -> usize {
    use loom::sync::atomic::{AtomicUsize, Ordering};
    use std::cell::Cell;
    loom::lazy_static! {
        static ref NEXT: AtomicUsize = AtomicUsize::new(0);
    }
    loom::thread_local! {
        static NUMBER: Cell<usize> = Cell::new(usize::MAX);
    }
    NUMBER.with(|n| {
        if n.get() == usize::MAX {
            // Ordering: Relaxed; only distinctness matters.
            n.set(NEXT.fetch_add(1, Ordering::Relaxed));
        }
        n.get()
    })
}

/// The calling thread's number, taken on its first call.
#[cfg(not(loom))]
fn thread_number() -> usize {
    use std::cell::Cell;
    use std::sync::atomic::AtomicUsize;
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static NUMBER: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    NUMBER.with(|n| {
        if n.get() == usize::MAX {
            // Ordering: Relaxed; only distinctness matters.
            n.set(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        }
        n.get()
    })
}

impl<C: TimeSource> PerCore<C> {
    /// Several slots; their number is a power of two.
    pub(crate) fn from_slots(generators: Vec<Generator<C>>) -> Self {
        debug_assert!(generators.len().is_power_of_two());
        PerCore {
            mask: generators.len() - 1,
            generators: Arc::new(Slots(generators.into_boxed_slice())),
            owner: None,
        }
    }

    /// The slots, for the keeper of a leased per-core generator.
    pub(crate) fn shared(&self) -> &Arc<Slots<C>> {
        &self.generators
    }

    /// Held by `owner` (a lease), released when dropped.
    pub(crate) fn owned_by(mut self, owner: Box<dyn Owner>) -> Self {
        self.owner = Some(owner);
        self
    }

    /// Stops issuing for good and lets the node go. For a leased generator every slot is
    /// sealed, the final reservation (the end of the highest tick any slot issued in) is
    /// written, and the node is released; without a lease, nothing to do. Dropping does the
    /// same, without the error.
    ///
    /// # Errors
    ///
    /// The store's error if the final write fails ([`Error::LeaseLost`] when the claim was
    /// lost, with what could not be written back).
    ///
    /// ```
    /// let g = monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_core(2)?;
    /// g.release()?;
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn release(mut self) -> Result<(), Error> {
        self.stop()
    }

    fn stop(&mut self) -> Result<(), Error> {
        match self.owner.take() {
            Some(mut owner) => owner.release(),
            None => Ok(()),
        }
    }

    /// The layout IDs are issued under.
    ///
    /// ```
    /// let g = monoflake::Generator::builder(monoflake::Layout::discord()).build_per_core(2)?;
    /// assert_eq!(g.layout().name(), "discord");
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn layout(&self) -> &Layout {
        self.generators[0].layout()
    }

    /// The node value every ID carries.
    ///
    /// ```
    /// let g = monoflake::Generator::builder(monoflake::Layout::twitter()).node(4).build_per_core(2)?;
    /// assert_eq!(g.node(), 4);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn node(&self) -> u64 {
        self.generators[0].node()
    }

    /// The number of slots.
    ///
    /// ```
    /// let g = monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_core(3)?;
    /// assert_eq!(g.slots(), 4); // rounded up to a power of two
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn slots(&self) -> usize {
        self.generators.len()
    }

    /// The calling thread's slot.
    #[inline]
    fn mine(&self) -> &Generator<C> {
        &self.generators[thread_number() & self.mask]
    }

    /// As [`Generator::try_next_id`], on the calling thread's slot.
    ///
    /// # Errors
    ///
    /// As [`Generator::try_next_id`].
    ///
    /// ```
    /// let g = monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_core(2)?;
    /// assert!(g.try_next_id().is_ok());
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    #[inline]
    pub fn try_next_id(&self) -> Result<Id, Error> {
        self.mine().try_next_id()
    }

    /// As [`Generator::check`], on the calling thread's slot: whether a call could issue now,
    /// without issuing.
    ///
    /// # Errors
    ///
    /// As [`Generator::check`].
    ///
    /// ```
    /// let g = monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_core(2)?;
    /// g.check()?;
    /// assert_eq!(g.stats().issued, 0);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn check(&self) -> Result<(), Error> {
        self.mine().check()
    }

    /// As [`Generator::next_id`], on the calling thread's slot.
    ///
    /// # Errors
    ///
    /// As [`Generator::next_id`].
    ///
    /// ```
    /// let g = monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_core(2)?;
    /// assert!(g.next_id()? < g.next_id()?);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    #[inline]
    pub fn next_id(&self) -> Result<Id, Error> {
        self.mine().next_id()
    }

    /// As [`Generator::try_next_ids`], on the calling thread's slot.
    ///
    /// # Errors
    ///
    /// As [`Generator::try_next_ids`].
    ///
    /// ```
    /// let g = monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_core(2)?;
    /// assert_eq!(g.try_next_ids(10)?.len(), 10);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn try_next_ids(&self, n: u64) -> Result<Ids, Error> {
        self.mine().try_next_ids(n)
    }

    /// As [`Generator::next_ids`], on the calling thread's slot.
    ///
    /// # Errors
    ///
    /// As [`Generator::next_ids`].
    ///
    /// ```
    /// let g = monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_core(2)?;
    /// assert_eq!(g.next_ids(100)?.len(), 100);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn next_ids(&self, n: u64) -> Result<Ids, Error> {
        self.mine().next_ids(n)
    }

    /// The counters of all slots added up.
    ///
    /// ```
    /// let g = monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_core(2)?;
    /// g.next_id()?;
    /// assert_eq!(g.stats().issued, 1);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn stats(&self) -> Stats {
        let mut stats =
            self.generators
                .iter()
                .map(Generator::stats)
                .fold(Stats::default(), |a, b| Stats {
                    issued: a.issued + b.issued,
                    borrowed_ticks: a.borrowed_ticks + b.borrowed_ticks,
                    max_lead_ticks: a.max_lead_ticks.max(b.max_lead_ticks),
                    would_block_returned: a.would_block_returned + b.would_block_returned,
                    waiting_calls: a.waiting_calls + b.waiting_calls,
                    wait_retries: a.wait_retries + b.wait_retries,
                    wait_spins: a.wait_spins + b.wait_spins,
                    wait_yields: a.wait_yields + b.wait_yields,
                    wait_sleeps: a.wait_sleeps + b.wait_sleeps,
                    timed_out: a.timed_out + b.timed_out,
                    reanchors: b.reanchors,
                    max_skew_ns: b.max_skew_ns,
                    skew_ns: b.skew_ns,
                    slew_left_ns: b.slew_left_ns,
                    clock_held_back_ns: b.clock_held_back_ns,
                    ..Stats::default()
                });
        if let Some(owner) = &self.owner {
            owner.fill(&mut stats);
        }
        stats
    }
}

impl<C: TimeSource> Drop for PerCore<C> {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}
