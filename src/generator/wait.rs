//! The waiting calls: at the lead limit, spin for a slot that opens within microseconds (the
//! paced case at the cap), otherwise spin, then yield, then sleep until the clock has caught
//! up; for at most `max_wait`.

use std::time::Duration;

use super::hot::Miss;
use super::{Generator, Ids};
use crate::clock::TimeSource;
use crate::stats::Counters;
use crate::sync;
use crate::{BlockedOn, Error, Id};

/// The shortest sleep a waiting call takes once spinning and yielding are used up.
const MIN_NAP: Duration = Duration::from_micros(50);
/// A slot that opens sooner than this is waited for by spinning: a sleep would oversleep it
/// by tens of microseconds.
const SPIN_WAIT: Duration = Duration::from_micros(20);
/// How much a sleep may overshoot on a loaded machine. A longer wait sleeps this much less
/// than it needs and spins the rest: a batch of [`Generator::max_batch`] IDs fits only while
/// the clock is in the last slot of a tick (244 ns at 4,096 IDs a millisecond), which a sleep
/// to the slot's opening overshoots into the next tick, where the batch starts a tick later
/// and needs that tick's last slot — every time, until `max_wait` is up.
const OVERSLEEP: Duration = Duration::from_micros(200);
/// About what a retry costs before it reads the clock (more in a debug build): a spin ends
/// this much before the slot it waits for, and the retries that follow read the clock into it.
const RETRY_COST: Duration = Duration::from_micros(1);

impl<C: TimeSource> Generator<C> {
    /// Issues one ID, waiting when the generator is at its lead limit: a few spins, then
    /// yields, then sleeps until the clock has caught up, for at most `max_wait`
    /// ([`GeneratorBuilder::max_wait`](crate::GeneratorBuilder::max_wait)).
    ///
    /// # Errors
    ///
    /// * [`Error::TimedOut`]: still at the lead limit after waiting `max_wait` (a clock that
    ///   stands still); nothing was issued.
    /// * Every error of [`Generator::try_next_id`] other than [`Error::WouldBlock`].
    ///
    /// ```
    /// let generator = monoflake::Generator::new(monoflake::Layout::twitter(), 1)?;
    /// let ids: Vec<_> = (0..10_000).map(|_| generator.next_id()).collect::<Result<_, _>>()?;
    /// assert!(ids.windows(2).all(|w| w[0] < w[1]));
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    #[inline]
    pub fn next_id(&self) -> Result<Id, Error> {
        // The common case is `try_next_id`'s, to the instruction; everything else, the wait
        // included, is out of line. (With the waiting loop around a call of `try_next_id`,
        // `next_id` took 7.0 ns where `try_next_id` took 3.6 on the coarse clock; with a
        // match on `try_next_id`'s answer, 4.8 ns.)
        match self.reserve_common() {
            Ok(first) => Ok(self.out.id(first)),
            Err(miss) => self.next_id_beyond(miss),
        }
    }

    /// [`Generator::next_id`] beyond the common case: [`Generator::try_next_id`]'s general
    /// path, then the wait if that reports `WouldBlock`.
    #[inline(never)]
    fn next_id_beyond(&self, miss: Miss) -> Result<Id, Error> {
        match self.try_next_id_beyond::<false>(miss) {
            Err(Error::WouldBlock {
                retry_after,
                blocked_on,
            }) => self.waiting((retry_after, blocked_on), || match self.reserve_common() {
                Ok(first) => Ok(self.out.id(first)),
                Err(miss) => self.try_next_id_beyond::<false>(miss),
            }),
            done => done,
        }
    }

    /// [`Generator::try_next_ids`], waiting like [`Generator::next_id`] when at the lead limit.
    ///
    /// # Errors
    ///
    /// As [`Generator::next_id`]; a batch larger than [`Generator::max_batch`] is refused at
    /// once with [`Error::BatchTooLarge`], without waiting.
    ///
    /// ```
    /// let generator = monoflake::Generator::new(monoflake::Layout::twitter(), 1)?;
    /// let first_run: Vec<_> = generator.next_ids(4096)?.collect();
    /// let next = generator.next_id()?;
    /// assert!(next > *first_run.last().unwrap());
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn next_ids(&self, n: u64) -> Result<Ids, Error> {
        match self.reserve_ids(n) {
            Err(Error::WouldBlock {
                retry_after,
                blocked_on,
            }) => self.waiting((retry_after, blocked_on), || self.reserve_ids(n)),
            done => done,
        }
    }

    /// After a first attempt reported `WouldBlock { retry_after }`: waits as it asks, then
    /// retries `attempt` while it reports `WouldBlock`, backing off, for at most `max_wait`.
    /// Counts the call in [`Stats`](crate::Stats) as it begins, and each spin, yield and sleep
    /// (each followed by one retry) and a time-out once, when it returns.
    #[cold]
    #[inline(never)]
    pub(super) fn waiting<T>(
        &self,
        first: (Duration, BlockedOn),
        attempt: impl FnMut() -> Result<T, Error>,
    ) -> Result<T, Error> {
        let c = &self.counters;
        Counters::add(&c.waiting_calls, 1);
        let mut counts = Waited::default();
        let answer = self.wait_and_retry(first, attempt, &mut counts);
        for (counter, n) in [
            (&c.wait_spins, counts.spins),
            (&c.wait_yields, counts.yields),
            (&c.wait_sleeps, counts.sleeps),
            (
                &c.timed_out,
                u64::from(matches!(answer, Err(Error::TimedOut { .. }))),
            ),
        ] {
            if n > 0 {
                Counters::add(counter, n);
            }
        }
        answer
    }

    /// [`Generator::waiting`]'s loop, counting in `counts`.
    fn wait_and_retry<T>(
        &self,
        (mut retry_after, mut blocked_on): (Duration, BlockedOn),
        mut attempt: impl FnMut() -> Result<T, Error>,
        counts: &mut Waited,
    ) -> Result<T, Error> {
        let mut step = 0;
        let mut slept = Duration::ZERO;
        loop {
            if retry_after <= SPIN_WAIT {
                if slept >= self.max_wait {
                    return Err(Error::TimedOut {
                        waited: slept,
                        retry_after,
                        blocked_on,
                    });
                }
                // Short of the slot by a retry's own cost, so that the retry's clock reading,
                // not the spin's, lands in it (the largest batch's slot is open 244 ns).
                sync::spin_for(retry_after.saturating_sub(RETRY_COST));
                counts.spins += 1;
                slept += retry_after;
            } else {
                if sync::backoff(step) {
                    if step < sync::SPIN_LIMIT {
                        counts.spins += 1;
                    } else {
                        counts.yields += 1;
                    }
                } else {
                    if slept >= self.max_wait {
                        return Err(Error::TimedOut {
                            waited: slept,
                            retry_after,
                            blocked_on,
                        });
                    }
                    let left = self.max_wait - slept;
                    if retry_after <= OVERSLEEP + MIN_NAP {
                        let spin = retry_after.min(left);
                        sync::spin_for(spin.saturating_sub(RETRY_COST));
                        counts.spins += 1;
                        slept += spin;
                    } else {
                        let nap = (retry_after - OVERSLEEP).min(left);
                        sync::sleep(nap);
                        counts.sleeps += 1;
                        slept += nap;
                    }
                }
                step = step.saturating_add(1);
            }
            match attempt() {
                Err(Error::WouldBlock {
                    retry_after: next,
                    blocked_on: on,
                }) => (retry_after, blocked_on) = (next, on),
                done => return done,
            }
        }
    }
}

/// What one waiting call did before each retry.
#[derive(Default)]
struct Waited {
    spins: u64,
    yields: u64,
    sleeps: u64,
}
