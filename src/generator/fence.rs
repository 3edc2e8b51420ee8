//! The fence: the words that stop the hot path (the reservation limit, the lease deadline, the
//! fork guard), written by whoever owns the generator's node, and how a refusal is explained.
//!
//! The generator knows only these words. The lease keeper (`crate::lease`) writes them and
//! implements [`Refusal`] to put its own words into the error; the generator never imports the
//! lease.

use std::fmt;

use crate::Error;
use crate::fork::ForkWatch;
use crate::sync::{AtomicU64, Ordering};

/// Explains a refusal of the fence: implemented by the owner of the fence words.
pub(crate) trait Refusal: Send + Sync + fmt::Debug {
    /// The error for a call the fence refused: `deadline_passed` when the clock reached the
    /// deadline, otherwise the tick was beyond the limit (or the fence was closed).
    fn refusal(&self, node: u64, deadline_passed: bool) -> Error;
}

/// The fence words. They live next to the generator's state, on its cache line, so the checks
/// on the hot path touch no other line.
#[derive(Debug)]
pub(crate) struct Fence {
    /// The highest tick that may be issued: the reservation acknowledged by the node store;
    /// `u64::MAX` without a lease, 0 once closed.
    // Ordering: Relaxed, as `deadline`: lone values written by the lease keeper. A stale read
    // is an older, lower bound (a needless refusal) or, right after a close, a higher one —
    // which the close's swap of the state makes harmless (see `Generator::seal`).
    limit: AtomicU64,
    /// The first clock tick at which nothing may be issued: the lease deadline; `u64::MAX`
    /// without one, 0 once closed.
    deadline: AtomicU64,
    /// `min(limit + 1, deadline)`: the first tick the common case may not issue in, when the
    /// clock's tick is the state's (one load and one comparison instead of two).
    // Ordering: Relaxed, as `limit` and `deadline`, of which it is a function: a stale read is
    // an older bound, as there.
    open_below: AtomicU64,
    /// `open_below` in the ID space of the generator's layout: `open_below << id_shift`, or
    /// `u64::MAX` where that does not fit (a tick past the time field's end, which no ID
    /// reaches). The time field is an ID's top field, so an ID is below this word exactly
    /// when its tick is below `open_below`: the per-thread common case compares the last ID it
    /// issued with it, with no tick of its own to load.
    // Ordering: Relaxed, as `open_below`, of which it is a function.
    open_below_id: AtomicU64,
    /// Where the time field starts in an ID (0 for a fence that answers in ticks only).
    id_shift: u32,
    /// The process generation the generator was built in (see `crate::fork`).
    fork: ForkWatch,
    /// The process that built the generator: where forks are counted by `pthread_atfork`
    /// (not Linux), a fork that skips it leaves the count alone, but not the pid.
    pid: u32,
}

impl Fence {
    /// A fence with these first words.
    ///
    /// # Errors
    ///
    /// [`Error::ForkDetection`] when `pthread_atfork` cannot be set up.
    pub(crate) fn new(limit: u64, deadline: u64) -> Result<Self, Error> {
        Ok(Fence {
            limit: AtomicU64::new(limit),
            deadline: AtomicU64::new(deadline),
            open_below: AtomicU64::new(open_below(limit, deadline)),
            open_below_id: AtomicU64::new(open_below(limit, deadline)),
            id_shift: 0,
            fork: ForkWatch::new()?,
            pid: std::process::id(),
        })
    }

    /// This fence for IDs whose time field starts at bit `shift` (the layout's time shift),
    /// for [`Fence::refuses_id`].
    pub(crate) fn in_ids_shifted_by(mut self, shift: u32) -> Self {
        self.id_shift = shift;
        let (limit, deadline) = self.words();
        self.open_below_id = AtomicU64::new(in_ids(open_below(limit, deadline), shift));
        self
    }

    /// Whether this is a forked child of the process that built the generator: one load,
    /// checked on every call. On Linux it catches every fork (`MADV_WIPEONFORK`); elsewhere
    /// those that run `pthread_atfork` handlers.
    #[inline]
    pub(crate) fn forked(&self) -> bool {
        self.fork.forked()
    }

    /// The fork watch [`Fence::forked`] asks, for a caller that keeps a copy of it.
    pub(crate) fn fork_watch(&self) -> &ForkWatch {
        &self.fork
    }

    /// Whether this is another process than the one that built the generator, however it was
    /// forked: a system call (`getpid`), so checked only off the common path — when a call
    /// moves to a new tick, borrows one, is refused, or takes a batch. On Linux
    /// [`Fence::forked`] already says so; elsewhere this catches the forks that skip
    /// `pthread_atfork` (a raw `syscall(SYS_fork)`).
    #[cold]
    #[inline(never)]
    pub(crate) fn another_process(&self) -> bool {
        std::process::id() != self.pid
    }

    /// Whether issuing up to `last_tick` at clock tick `now` is refused: the deadline has
    /// come, or the tick is beyond the limit. Evaluated without short-circuits: one branch.
    #[inline]
    pub(crate) fn refuses(&self, now: u64, last_tick: u64) -> bool {
        // Ordering: Relaxed; see the field comments.
        fence_refuses(
            self.limit.load(Ordering::Relaxed),
            self.deadline.load(Ordering::Relaxed),
            now,
            last_tick,
        )
    }

    /// Whether issuing in `tick`, when it is also the clock's tick, is refused: the same answer
    /// as [`Fence::refuses`]`(tick, tick)`, from one word.
    #[inline]
    pub(crate) fn refuses_in(&self, tick: u64) -> bool {
        // Ordering: Relaxed; see the field comments.
        tick >= self.open_below.load(Ordering::Relaxed)
    }

    /// Whether issuing after `id` in its tick, when that is also the clock's tick, is refused:
    /// [`Fence::refuses_in`] of `id`'s tick, from one word and the ID itself — for an `id` of
    /// this fence's layout (its time field at the shift given to
    /// [`Fence::in_ids_shifted_by`]), other than `u64::MAX` (which has no next ID, and is
    /// refused where the limit is past the time field).
    #[inline(always)]
    pub(crate) fn refuses_id(&self, id: u64) -> bool {
        // Ordering: Relaxed; see the field comments.
        id >= self.open_below_id.load(Ordering::Relaxed)
    }

    /// Whether the clock tick `now` has reached the deadline.
    pub(crate) fn late(&self, now: u64) -> bool {
        now >= self.deadline.load(Ordering::Relaxed)
    }

    /// Whether the fence was closed for good.
    pub(crate) fn is_closed(&self) -> bool {
        self.limit.load(Ordering::Relaxed) == 0
    }

    /// Publishes a new limit and deadline (the keeper is their only writer until close).
    pub(crate) fn set(&self, limit: u64, deadline: u64) {
        // Ordering: Relaxed; see the field comments.
        self.limit.store(limit, Ordering::Relaxed);
        self.deadline.store(deadline, Ordering::Relaxed);
        let open = open_below(limit, deadline);
        self.open_below.store(open, Ordering::Relaxed);
        self.open_below_id
            .store(in_ids(open, self.id_shift), Ordering::Relaxed);
    }

    /// The limit and deadline, for `Debug`.
    pub(crate) fn words(&self) -> (u64, u64) {
        (
            self.limit.load(Ordering::Relaxed),
            self.deadline.load(Ordering::Relaxed),
        )
    }

    /// Closes the fence for good: every later check refuses.
    pub(crate) fn close(&self) {
        self.set(0, 0);
    }
}

/// Whether fence words `limit` and `deadline` refuse issuing up to the tick `last_tick` at
/// clock tick `now`: the deadline has come, or the tick is beyond the limit. The one rule every
/// flavour's fence applies (and the model checker, `handover-check`, issues by); evaluated
/// without short-circuits, one branch.
///
/// ```
/// use monoflake::handover::fence_refuses;
/// assert!(!fence_refuses(10, 20, 19, 10));
/// assert!(fence_refuses(10, 20, 20, 10)); // the deadline has come
/// assert!(fence_refuses(10, 20, 5, 11)); // past the limit
/// ```
#[inline]
pub const fn fence_refuses(limit: u64, deadline: u64, now: u64, last_tick: u64) -> bool {
    let late = now >= deadline;
    let unreserved = last_tick > limit;
    late | unreserved
}

/// The first tick that `limit` and `deadline` together refuse (for `Fence::refuses_in`).
const fn open_below(limit: u64, deadline: u64) -> u64 {
    let past_limit = limit.saturating_add(1);
    if past_limit < deadline {
        past_limit
    } else {
        deadline
    }
}

/// Tick `tick` as the smallest ID in it, for IDs whose time field starts at bit `shift`:
/// `u64::MAX` where it does not fit — a tick past the end of the time field, which no ID has
/// (the time field is the top field, so the largest tick an ID holds, shifted, fits).
const fn in_ids(tick: u64, shift: u32) -> u64 {
    if tick > u64::MAX >> shift {
        u64::MAX
    } else {
        tick << shift
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Every word answers as its definition says, on a grid around the limit and the deadline
    /// (with both ends of the range): `refuses` is "late or unreserved", `refuses_in(t)` is
    /// `refuses(t, t)` from its one word, `late` is the deadline alone, `words` are the words
    /// set, and a closed fence refuses everything.
    #[test]
    fn each_check_answers_its_definition() {
        let points = [0, 1, 2, 9, 10, 11, 19, 20, 21, u64::MAX - 1, u64::MAX];
        for limit in points {
            for deadline in points {
                let fence = Fence::new(limit, deadline).unwrap();
                assert_eq!(fence.words(), (limit, deadline));
                assert_eq!(fence.is_closed(), limit == 0);
                assert_eq!(
                    open_below(limit, deadline),
                    limit.saturating_add(1).min(deadline)
                );
                for now in points {
                    assert_eq!(fence.late(now), now >= deadline, "{limit} {deadline} {now}");
                    assert_eq!(
                        fence.refuses_in(now),
                        fence.refuses(now, now),
                        "refuses_in({now}) against refuses({now}, {now}) under limit {limit} \
                         deadline {deadline}"
                    );
                    for last in points {
                        assert_eq!(
                            fence.refuses(now, last),
                            now >= deadline || last > limit,
                            "limit {limit} deadline {deadline} now {now} last {last}"
                        );
                    }
                }
                fence.set(deadline, limit);
                assert_eq!(fence.words(), (deadline, limit));
                assert_eq!(
                    fence.refuses_in(5),
                    5 >= limit || 5 > deadline,
                    "set({deadline}, {limit})"
                );
                fence.close();
                assert!(fence.is_closed());
                assert!(points.iter().all(|&t| fence.refuses_in(t) && fence.late(t)));
            }
        }
    }

    /// In ID space, a fence answers as in ticks for every ID of the tick: its first and last
    /// values, at every time shift (0 and a whole 64-bit field included), for fresh words,
    /// words set later and a closed fence; past the time field's end nothing is refused.
    #[test]
    fn in_ids_a_fence_answers_as_in_ticks() {
        let points = [0, 1, 2, 9, 10, 11, u64::MAX >> 22, u64::MAX - 1, u64::MAX];
        for shift in [0, 1, 22, 63] {
            let agrees = |fence: &Fence, what: &str| {
                for tick in points
                    .iter()
                    .map(|&t| t >> shift)
                    .chain([u64::MAX >> shift])
                {
                    let low = (1u64 << shift) - 1;
                    for id in [tick << shift, tick << shift | low] {
                        if id == u64::MAX {
                            continue;
                        }
                        assert_eq!(
                            fence.refuses_id(id),
                            fence.refuses_in(tick),
                            "{what}: shift {shift} tick {tick} id {id}"
                        );
                    }
                }
            };
            for limit in points {
                for deadline in points {
                    let fence = Fence::new(limit, deadline)
                        .unwrap()
                        .in_ids_shifted_by(shift);
                    agrees(&fence, "new");
                    fence.set(deadline, limit);
                    agrees(&fence, "set");
                    fence.close();
                    agrees(&fence, "closed");
                    assert!(fence.refuses_id(0));
                }
            }
            let open = Fence::new(u64::MAX, u64::MAX)
                .unwrap()
                .in_ids_shifted_by(shift);
            assert!(!open.refuses_id(u64::MAX - 1));
        }
    }

    /// In the process that built it, a fence reports no fork.
    #[test]
    fn the_building_process_is_not_a_fork() {
        let fence = Fence::new(u64::MAX, u64::MAX).unwrap();
        assert!(!fence.forked());
        assert!(!fence.another_process());
    }
}
