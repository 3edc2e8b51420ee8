//! The waiting calls' loop, in Python's terms: a wait at the lead limit retries the
//! library's non-waiting call with the GIL released, and comes back to the GIL at least every
//! [`SLICE`] to run signal handlers (`KeyboardInterrupt`) and to see whether the generator was
//! closed meanwhile.
//!
//! The library's own waiting calls (`next_id`, `next_ids`) wait up to `max_wait` in one go, and
//! a leased generator's `max_wait` is raised to the reservation window (seconds): a Python
//! thread cannot spend that long out of reach of Ctrl-C, so the wait is sliced here. Each
//! retry is one `try_next_id` (counted by the library as a `WouldBlock` returned).

use std::time::{Duration, Instant};

use monoflake::{BlockedOn, Error};
use pyo3::prelude::*;

/// The longest a waiting call stays away from the GIL: signals are looked at this often.
pub(crate) const SLICE: Duration = Duration::from_millis(20);

/// A slot that opens sooner than this is waited for by yielding: a sleep would oversleep it.
const SPIN_WAIT: Duration = Duration::from_micros(20);

/// How a wait ended.
pub(crate) enum Waited<T> {
    /// The library's answer: the IDs, or an error other than `WouldBlock`, or `TimedOut`.
    Done(Result<T, Error>),
    /// `stopped` said so (the generator is being closed).
    Stopped,
}

/// After a first attempt said `WouldBlock { retry_after }`: retries `attempt` for at most
/// `max_wait`, the GIL released, sleeping as `retry_after` says; every [`SLICE`] takes the
/// GIL back to check signals (raising what a handler raises) and asks `stopped`.
pub(crate) fn wait<T: Send>(
    py: Python<'_>,
    max_wait: Duration,
    mut retry_after: Duration,
    stopped: &(dyn Fn() -> bool + Sync),
    attempt: &(dyn Fn() -> Result<T, Error> + Sync),
) -> PyResult<Waited<T>> {
    let start = Instant::now();
    let deadline = start.checked_add(max_wait);
    // What the last retry waited for (the lead limit until one says otherwise).
    let mut blocked_on = BlockedOn::LeadLimit;
    loop {
        let slice = py.detach(|| {
            let slice_end = Instant::now() + SLICE;
            loop {
                if stopped() {
                    return Some(Waited::Stopped);
                }
                let now = Instant::now();
                if deadline.is_some_and(|d| now >= d) {
                    let waited = now.duration_since(start);
                    return Some(Waited::Done(Err(Error::timed_out_on(
                        waited,
                        retry_after,
                        blocked_on,
                    ))));
                }
                if now >= slice_end {
                    return None;
                }
                if retry_after <= SPIN_WAIT {
                    std::thread::yield_now();
                } else {
                    let mut nap = retry_after.min(slice_end - now);
                    if let Some(d) = deadline {
                        nap = nap.min(d.saturating_duration_since(now));
                    }
                    std::thread::sleep(nap);
                }
                match attempt() {
                    Err(Error::WouldBlock {
                        retry_after: next,
                        blocked_on: on,
                        ..
                    }) => (retry_after, blocked_on) = (next, on),
                    done => return Some(Waited::Done(done)),
                }
            }
        });
        match slice {
            Some(end) => return Ok(end),
            None => py.check_signals()?,
        }
    }
}
