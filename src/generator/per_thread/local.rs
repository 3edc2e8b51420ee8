//! [`LocalSlot`]: a handle holding one slot of a [`PerThread`](super::PerThread) generator and its
//! numbers inline, for the hottest loops.

use std::fmt;

use super::Shared;
use super::run::Run;
use crate::clock::TimeSource;
use crate::generator::{IdGenerator, Ids};
use crate::{Error, Id, Layout, Stats};

/// One slot of a [`PerThread`](super::PerThread) generator, held until the handle drops: the
/// fastest way to issue IDs, for a loop that issues many.
///
/// * **Plain numbers, inline.** The slot's state and what the common case needs of its tick
///   live in the handle: an ID is a clock read, two loads (the fence's word and the process
///   generation) and arithmetic, with no thread-local lookup and no read-modify-write.
/// * **One user at a time.** The handle is not `Sync` (its numbers are plain cells); it may be
///   moved to another thread (`Send`), and its slot goes with it.
/// * **Given back on drop**, with its last state: the slot's next holder goes on from there.
/// * **As the generator**: the lead, pacing, the clock safety of the step, the fork check on
///   every call, and a leased generator's fence.
///
/// ```
/// use monoflake::{Generator, Layout};
///
/// let ids = Generator::builder(Layout::twitter()).node(1).build_per_thread(4)?;
/// std::thread::scope(|s| {
///     for _ in 0..4 {
///         s.spawn(|| {
///             let local = ids.local().unwrap();
///             let run: Vec<_> = (0..10_000).map(|_| local.next_id().unwrap()).collect();
///             assert!(run.windows(2).all(|w| w[0] < w[1]));
///         });
///     }
/// });
/// # Ok::<(), monoflake::Error>(())
/// ```
pub struct LocalSlot<'g, C: TimeSource + 'static> {
    pub(super) shared: &'g Shared<C>,
    pub(super) run: Run,
}

impl<C: TimeSource + 'static> fmt::Debug for LocalSlot<'_, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalSlot")
            .field("slot", &self.run.slot.get())
            .field("state", &self.run.state())
            .finish_non_exhaustive()
    }
}

impl<'g, C: TimeSource + 'static> LocalSlot<'g, C> {
    /// Takes a free slot of `shared`.
    pub(super) fn claim(shared: &'g Shared<C>) -> Result<Self, Error> {
        let (slot, state) = shared.claim().ok_or(Error::NoFreeSlot {
            slots: shared.slots.len() as u64,
        })?;
        let run = Run::empty();
        run.start(shared, slot, state);
        Ok(LocalSlot { shared, run })
    }

    /// The slot this handle holds.
    ///
    /// ```
    /// let ids = monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_thread(2)?;
    /// let (a, b) = (ids.local()?, ids.local()?);
    /// assert_ne!(a.slot(), b.slot());
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn slot(&self) -> usize {
        self.run.slot.get()
    }

    /// Issues one ID without waiting.
    ///
    /// # Errors
    ///
    /// As [`Generator::try_next_id`](crate::Generator::try_next_id): [`Error::WouldBlock`] at
    /// the lead limit, [`Error::Exhausted`], [`Error::Forked`], and for a leased generator
    /// [`Error::LeaseLost`] and [`Error::ReservationUnavailable`].
    ///
    /// ```
    /// let ids = monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_thread(2)?;
    /// let local = ids.local()?;
    /// assert!(local.try_next_id()? < local.try_next_id()?);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    #[inline]
    pub fn try_next_id(&self) -> Result<Id, Error> {
        match self.run.common(self.shared) {
            Some(id) => Ok(Id::from_u64(id)),
            None => self.try_next_id_beyond(),
        }
    }

    /// [`LocalSlot::try_next_id`] beyond the common case: a `WouldBlock` is counted as
    /// returned.
    #[inline(never)]
    fn try_next_id_beyond(&self) -> Result<Id, Error> {
        self.shared.returned(self.attempt_beyond())
    }

    /// One attempt at one ID, as a waiting call retries it (nothing counted as returned).
    fn attempt(&self) -> Result<Id, Error> {
        match self.run.common(self.shared) {
            Some(id) => Ok(Id::from_u64(id)),
            None => self.attempt_beyond(),
        }
    }

    /// The general step on the handle's numbers.
    fn attempt_beyond(&self) -> Result<Id, Error> {
        let (first, _) = self.run.general(self.shared, 1)?;
        Ok(Id::from_u64(self.run.id_of(self.shared, first)))
    }

    /// Issues one ID, waiting at the lead limit for at most `max_wait`.
    ///
    /// # Errors
    ///
    /// As [`Generator::next_id`](crate::Generator::next_id).
    ///
    /// ```
    /// let ids = monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_thread(2)?;
    /// let local = ids.local()?;
    /// let run: Vec<_> = (0..10_000).map(|_| local.next_id()).collect::<Result<_, _>>()?;
    /// assert!(run.windows(2).all(|w| w[0] < w[1]));
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    #[inline]
    pub fn next_id(&self) -> Result<Id, Error> {
        match self.run.common(self.shared) {
            Some(id) => Ok(Id::from_u64(id)),
            None => self.next_id_beyond(),
        }
    }

    /// [`LocalSlot::next_id`] beyond the common case (also an iterator's way beyond it).
    #[inline(never)]
    pub(super) fn next_id_beyond(&self) -> Result<Id, Error> {
        match self.attempt_beyond() {
            Err(Error::WouldBlock {
                retry_after,
                blocked_on,
            }) => self
                .shared
                .base
                .waiting((retry_after, blocked_on), || self.attempt()),
            done => done,
        }
    }

    /// Reserves `n` consecutive IDs without waiting; `n = 0` gives an empty run.
    ///
    /// # Errors
    ///
    /// As [`LocalSlot::try_next_id`].
    ///
    /// ```
    /// let ids = monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_thread(2)?;
    /// let local = ids.local()?;
    /// assert_eq!(local.try_next_ids(64)?.len(), 64);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn try_next_ids(&self, n: u64) -> Result<Ids, Error> {
        self.shared.returned(self.shared.ids(&self.run, n))
    }

    /// Reserves `n` consecutive IDs, waiting at the lead limit for at most `max_wait`.
    ///
    /// # Errors
    ///
    /// As [`LocalSlot::next_id`].
    ///
    /// ```
    /// let ids = monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_thread(2)?;
    /// let local = ids.local()?;
    /// assert_eq!(local.next_ids(5000)?.len(), 5000);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn next_ids(&self, n: u64) -> Result<Ids, Error> {
        match self.shared.ids(&self.run, n) {
            Err(Error::WouldBlock {
                retry_after,
                blocked_on,
            }) => self
                .shared
                .base
                .waiting((retry_after, blocked_on), || self.shared.ids(&self.run, n)),
            done => done,
        }
    }

    /// The generator's statistics, this handle's IDs counted.
    ///
    /// ```
    /// let ids = monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_thread(2)?;
    /// let local = ids.local()?;
    /// local.next_id()?;
    /// assert_eq!(local.stats().issued, 1);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn stats(&self) -> Stats {
        self.run.flush(self.shared);
        self.shared.stats()
    }

    /// The layout IDs are issued under.
    ///
    /// ```
    /// let ids = monoflake::Generator::builder(monoflake::Layout::discord()).build_per_thread(2)?;
    /// assert_eq!(ids.local()?.layout().name(), "discord");
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn layout(&self) -> &Layout {
        self.shared.base.layout()
    }

    /// The node value every ID carries.
    ///
    /// ```
    /// let ids = monoflake::Generator::builder(monoflake::Layout::twitter()).node(6).build_per_thread(2)?;
    /// assert_eq!(ids.local()?.node(), 6);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn node(&self) -> u64 {
        self.shared.base.node()
    }
}

impl<C: TimeSource + 'static> Drop for LocalSlot<'_, C> {
    fn drop(&mut self) {
        let (slot, state, counted) = self.run.parts();
        self.shared.release(slot, state, counted);
    }
}

impl<C: TimeSource + 'static> IdGenerator for LocalSlot<'_, C> {
    #[inline]
    fn try_next_id(&self) -> Result<Id, Error> {
        LocalSlot::try_next_id(self)
    }
    #[inline]
    fn next_id(&self) -> Result<Id, Error> {
        LocalSlot::next_id(self)
    }
    fn try_next_ids(&self, n: u64) -> Result<Ids, Error> {
        LocalSlot::try_next_ids(self, n)
    }
    fn next_ids(&self, n: u64) -> Result<Ids, Error> {
        LocalSlot::next_ids(self, n)
    }
    fn stats(&self) -> Stats {
        LocalSlot::stats(self)
    }
    fn layout(&self) -> &Layout {
        LocalSlot::layout(self)
    }
    fn node(&self) -> u64 {
        LocalSlot::node(self)
    }
}
