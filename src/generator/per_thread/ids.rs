//! [`LocalIds`]: a [`LocalSlot`]'s IDs as an iterator, its common-case numbers in registers,
//! and [`LocalSlot::ids`], which makes one. Uses the handle (`local.rs`); the handle does not
//! know it.

use std::fmt;

use super::Shared;
use super::local::LocalSlot;
use super::run::Hot;
use crate::clock::TimeSource;
use crate::fork::ForkWatch;
use crate::{Error, Id};

/// The IDs of a [`LocalSlot`], one per [`next`](Iterator::next), from
/// [`LocalSlot::ids`]: the fastest way to issue IDs one at a time, for a loop that issues many.
///
/// Each item is what [`LocalSlot::next_id`] would return at that moment — the same clock read,
/// the same fence and fork checks, the same step, waiting at the lead limit for at most
/// `max_wait` — but the numbers the common case reads and advances (the last ID, the bounds of
/// its tick) are copied into the iterator, where the compiler keeps them in registers when the
/// iterator is a local of the loop. Per ID that leaves a clock read (one load on the coarse
/// clock), two loads (the fence's word and the process generation), comparisons and an add:
/// no store to memory.
///
/// * **Exclusive.** The iterator borrows its handle mutably: nothing else issues from the slot
///   while it lives.
/// * **Written back** when the iterator drops, and before every call beyond the common case:
///   the handle goes on from the last ID the iterator issued.
/// * **Forgotten** (`mem::forget`): the handle goes on from the end of the tick the iterator
///   was in — the rest of that tick is skipped, never issued twice (and counted in
///   [`Stats::issued`](crate::Stats::issued), as if issued). While the iterator lives, the
///   handle holds that tick's last value in place of the one reached.
/// * **Never ends**: an error is an item (`Some(Err(_))`), and a refusal that lasts (the fence
///   closed, the node lost, a fork) is the item every later call gives too — stop at the first
///   error (`?`, or `map_while(Result::ok)`).
///
/// ```
/// use monoflake::{Generator, Layout};
///
/// let ids = Generator::builder(Layout::twitter()).node(1).build_per_thread(2)?;
/// let mut local = ids.local()?;
/// let run: Vec<_> = local.ids().take(10_000).collect::<Result<_, _>>()?;
/// assert!(run.windows(2).all(|w| w[0] < w[1]));
/// // The handle goes on after the iterator's last ID.
/// assert!(local.next_id()? > run[9_999]);
/// # Ok::<(), monoflake::Error>(())
/// ```
pub struct LocalIds<'a, 'g, C: TimeSource + 'static> {
    local: &'a LocalSlot<'g, C>,
    /// Copied out of the handle, so that the loop reads them from registers.
    shared: &'g Shared<C>,
    fork: ForkWatch,
    /// The common case's numbers, lent by the handle's run.
    hot: Hot,
}

impl<'a, 'g, C: TimeSource + 'static> LocalIds<'a, 'g, C> {
    /// Borrows `local` and the common case's numbers of its run.
    pub(super) fn new(local: &'a mut LocalSlot<'g, C>, shared: &'g Shared<C>) -> Self {
        let local = &*local;
        LocalIds {
            local,
            shared,
            fork: shared.base.core.fence.fork_watch().clone(),
            hot: local.run.lend(),
        }
    }
}

impl<'g, C: TimeSource + 'static> LocalSlot<'g, C> {
    /// Issues IDs one at a time as an iterator: each item is what [`LocalSlot::next_id`] would
    /// give, with the common case's numbers kept in registers for the iterator's life — the
    /// fastest way to issue many IDs one by one. See [`LocalIds`].
    ///
    /// ```
    /// let ids = monoflake::Generator::builder(monoflake::Layout::twitter()).node(5).build_per_thread(2)?;
    /// let mut local = ids.local()?;
    /// for id in local.ids().take(1000) {
    ///     assert_eq!(id?.parts(ids.layout())?.node(), 5);
    /// }
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn ids(&mut self) -> LocalIds<'_, 'g, C> {
        let shared = self.shared;
        LocalIds::new(self, shared)
    }

    /// [`LocalSlot::next_id`] beyond the common case for a [`LocalIds`] that reached `id`:
    /// takes the lent numbers back, issues, and lends them again. By value both ways, so that
    /// the iterator's memory never escapes its loop.
    #[inline(never)]
    fn beyond_lent(&self, id: u64) -> (Hot, Result<Id, Error>) {
        self.run.settle(id);
        let answer = self.next_id_beyond();
        (self.run.lend(), answer)
    }
}

impl<C: TimeSource + 'static> Iterator for LocalIds<'_, '_, C> {
    type Item = Result<Id, Error>;

    /// The next ID, as [`LocalSlot::next_id`] gives it.
    ///
    /// ```
    /// let ids = monoflake::Generator::builder(monoflake::Layout::twitter()).build_per_thread(1)?;
    /// let mut local = ids.local()?;
    /// let mut it = local.ids();
    /// let (a, b) = (it.next().unwrap()?, it.next().unwrap()?);
    /// assert!(a < b);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let now_ns = self.shared.base.clock.now_ns();
        let fence = &self.shared.base.core.fence;
        match self
            .hot
            .advance(now_ns, fence, !self.fork.forked_on_common_path())
        {
            Some(id) => Some(Ok(Id::from_u64(id))),
            None => {
                // The numbers go out and come back by value: the iterator's own memory never
                // escapes the loop, so its numbers can stay in registers.
                let (hot, answer) = self.local.beyond_lent(self.hot.id);
                self.hot = hot;
                Some(answer)
            }
        }
    }

    /// Endless: `(usize::MAX, None)`.
    fn size_hint(&self) -> (usize, Option<usize>) {
        (usize::MAX, None)
    }
}

impl<C: TimeSource + 'static> std::iter::FusedIterator for LocalIds<'_, '_, C> {}

impl<C: TimeSource + 'static> Drop for LocalIds<'_, '_, C> {
    fn drop(&mut self) {
        self.local.run.settle(self.hot.id);
    }
}

impl<C: TimeSource + 'static> fmt::Debug for LocalIds<'_, '_, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalIds")
            .field("slot", &self.local.slot())
            .field("last", &Id::from_u64(self.hot.id))
            .finish_non_exhaustive()
    }
}
