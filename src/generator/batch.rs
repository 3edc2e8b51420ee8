//! A run of IDs reserved with one compare-exchange, iterated without allocating.

use super::Output;
use crate::Id;

/// A run of consecutive IDs reserved by [`Generator::next_ids`](crate::Generator::next_ids); iterating allocates nothing.
///
/// ```
/// let generator = monoflake::Generator::new(monoflake::Layout::twitter(), 1)?;
/// let run = generator.next_ids(3)?;
/// assert_eq!(run.len(), 3);
/// # Ok::<(), monoflake::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Ids {
    next: u64,
    last: u64,
    /// The ID of `next - 1`, valid when `next` is not the first value of a tick.
    prev: u64,
    out: Output,
}

impl Ids {
    /// The run `first..=last` of state values.
    pub(crate) const fn new(first: u64, last: u64, out: Output) -> Self {
        Ids {
            next: first,
            last,
            prev: u64::MAX,
            out,
        }
    }

    /// A run of no values.
    pub(crate) const fn empty(out: Output) -> Self {
        Ids {
            next: 1,
            last: 0,
            prev: u64::MAX,
            out,
        }
    }
}

impl Iterator for Ids {
    type Item = Id;

    #[inline]
    fn next(&mut self) -> Option<Id> {
        if self.next > self.last {
            return None;
        }
        // Within a tick consecutive values differ by one step of the sequence field; only the
        // first value of a run or of a tick needs the full formula.
        let id = if self.next & self.out.sequence_mask != 0 && self.prev != u64::MAX {
            self.prev + (1 << self.out.sequence_shift)
        } else {
            self.out.id(self.next).as_u64()
        };
        self.prev = id;
        // At the very end of the state space `last` is u64::MAX: stop by making the run empty.
        match self.next.checked_add(1) {
            Some(n) => self.next = n,
            None => self.last = 0,
        }
        Some(Id::from_u64(id))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        // `last` may be u64::MAX (the very end of a layout that fills 64 bits): no `last + 1`.
        let left = self
            .last
            .checked_sub(self.next)
            .map_or(0, |d| d.saturating_add(1));
        let n = usize::try_from(left).unwrap_or(usize::MAX);
        (n, Some(n))
    }
}

impl ExactSizeIterator for Ids {}
