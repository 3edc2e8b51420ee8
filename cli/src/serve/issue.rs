//! Issuing for a request: the leased generator behind an async retry, and what a refusal
//! means for a caller.
//!
//! Requests never block a runtime thread: they call the generator's non-waiting methods and,
//! at the lead limit ([`Error::WouldBlock`]), sleep asynchronously for the `retry_after` it
//! gives, within the service's `max_wait`. Whatever cannot be issued in that time is refused
//! with the generator's own error and a `Retry-After`; nothing is ever issued past a lost
//! lease or an unacknowledged reservation, because the generator itself refuses.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use monoflake::{Error, Generator, Id, Ids, Layout, Leased, NodeRequest, NodeStore, Stats};
use tokio::time::Instant;

/// The shortest asynchronous nap at the lead limit (tokio's timer has millisecond grain).
const MIN_NAP: Duration = Duration::from_millis(1);

/// What the issuer reports as it goes, to whoever counts (the service's metrics implement
/// it): the issuer names no counter itself.
pub trait Observer: Send + Sync {
    /// A request napped at the lead limit before it was tried again.
    fn waited(&self);
    /// A request got no IDs: the generator could not issue within `max_wait`.
    fn refused(&self);
    /// A node was claimed again after a lost lease.
    fn reclaimed(&self);
}

/// Where leases come from: the store, the layout and the node asked for.
pub struct Source {
    pub store: Arc<dyn NodeStore>,
    pub layout: Layout,
    pub request: NodeRequest,
    /// `--trust-reservation`: trust a reservation ahead of this clock.
    pub trust_reservation: bool,
}

impl Source {
    /// Claims a node and builds a generator holding it.
    pub fn claim(&self) -> Result<Leased, Error> {
        let leased = Generator::builder(self.layout.clone())
            .trust_future_reservation(self.trust_reservation)
            .build_leased(Arc::clone(&self.store), self.request)?;
        crate::store::say_if_behind(&leased);
        Ok(leased)
    }
}

/// The leased generator, shared by every connection and both listeners. After a lost lease
/// a new one is claimed ([`Issuer::reclaim`]) and swapped in; requests in flight finish on
/// the old one, which refuses to issue.
pub struct Issuer {
    current: ArcSwap<Leased>,
    /// The counters of the generators replaced after lost leases, so totals never go back.
    retired: std::sync::Mutex<Stats>,
    source: Source,
    max_count: u64,
    max_wait: Duration,
    observer: Arc<dyn Observer>,
}

impl std::fmt::Debug for Issuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issuer")
            .field("leased", &self.current.load())
            .field("max_count", &self.max_count)
            .finish_non_exhaustive()
    }
}

/// Why a request got no IDs.
#[derive(Debug)]
pub enum Refusal {
    /// The caller's input: a count or an ID that is not valid (HTTP 400).
    BadInput(String),
    /// The generator cannot issue now (HTTP 503): at its lead limit past `max_wait`, its
    /// reservation not acknowledged, its lease lost.
    Unavailable {
        message: String,
        retry_after: Duration,
    },
}

impl Refusal {
    fn from_generator(e: &Error) -> Refusal {
        Refusal::Unavailable {
            message: e.to_string(),
            // The generator's own estimate at the lead limit; a second for a store that has
            // not answered yet, or a lease that is gone (a caller should try another server).
            retry_after: e.retry_after().unwrap_or(Duration::from_secs(1)),
        }
    }

    /// `Retry-After` in whole seconds, at least 1 (the header has no finer unit).
    pub fn retry_after_secs(retry_after: Duration) -> u64 {
        (retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0)).max(1)
    }
}

impl Issuer {
    /// Claims the first lease.
    pub fn new(
        source: Source,
        max_count: u64,
        max_wait: Duration,
        observer: Arc<dyn Observer>,
    ) -> Result<Self, Error> {
        let leased = source.claim()?;
        Ok(Issuer {
            current: ArcSwap::from_pointee(leased),
            retired: std::sync::Mutex::new(Stats::default()),
            source,
            max_count,
            max_wait,
            observer,
        })
    }

    pub fn layout(&self) -> &Layout {
        &self.source.layout
    }

    /// The node held now.
    pub fn node(&self) -> u64 {
        self.current.load().node()
    }

    /// The counters of every generator this process had, the current one included.
    pub fn stats(&self) -> Stats {
        let retired = *self.retired.lock().unwrap_or_else(|e| e.into_inner());
        add(retired, self.current.load().stats())
    }

    /// Claims a node again after the lease was lost (blocking: store I/O) and swaps the new
    /// generator in. The new one starts after everything the old one could have issued (the
    /// store's reservation, or past the clock when the record is gone).
    pub fn reclaim(&self) -> Result<u64, Error> {
        let fresh = self.source.claim()?;
        let node = fresh.node();
        let old = self.current.swap(Arc::new(fresh));
        {
            let mut retired = self.retired.lock().unwrap_or_else(|e| e.into_inner());
            *retired = add(*retired, old.stats());
        }
        drop(old); // released here, or by the last request holding it
        self.observer.reclaimed();
        Ok(node)
    }

    /// Gives the generator up: the final reservation is written and the node freed. `None`
    /// when something still holds it (it is then released when that lets go).
    pub fn release(self) -> Option<Result<(), Error>> {
        Arc::into_inner(self.current.into_inner()).map(Leased::release)
    }

    /// Checks a count given by a caller (`raw` as it was written).
    pub fn parse_count(&self, raw: Option<&str>) -> Result<u64, Refusal> {
        let Some(raw) = raw else {
            return Err(Refusal::BadInput(format!(
                "count is missing: give ?count=N with N from 1 to {}",
                self.max_count
            )));
        };
        // Digits only: `u64::from_str` would also take a sign (`+5`).
        let n: u64 = raw
            .bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| raw.parse().ok())
            .flatten()
            .ok_or_else(|| {
                Refusal::BadInput(format!(
                    "count {:?} is not a whole number: give N from 1 to {}",
                    echo(raw),
                    self.max_count
                ))
            })?;
        self.check_count(n)
    }

    pub fn check_count(&self, n: u64) -> Result<u64, Refusal> {
        if (1..=self.max_count).contains(&n) {
            Ok(n)
        } else {
            Err(Refusal::BadInput(format!(
                "count {n} is out of range: from 1 to {} (--max-count)",
                self.max_count
            )))
        }
    }

    /// One ID now, or the generator's error: [`Issuer::wait_id`] then waits on it. `GET
    /// /v1/id` answers at once this way when the generator can issue (nearly always),
    /// without a future to allocate.
    pub fn try_id(&self) -> Result<Id, Error> {
        self.current.load().try_next_id()
    }

    /// One ID after [`Issuer::try_id`] gave `e`: slept for at the lead limit within
    /// `max_wait`, or refused.
    pub async fn wait_id(&self, e: Error) -> Result<Id, Refusal> {
        self.wait(e, || self.current.load().try_next_id()).await
    }

    /// `n` strictly increasing IDs from one reservation (`n` already checked).
    pub async fn ids(&self, n: u64) -> Result<Ids, Refusal> {
        let first = self.current.load().try_next_ids(n);
        match first {
            Ok(ids) => Ok(ids),
            Err(e) => self.wait(e, || self.current.load().try_next_ids(n)).await,
        }
    }

    /// The slow path: sleeps at the lead limit while the wait fits in `max_wait`.
    #[cold]
    async fn wait<T>(
        &self,
        mut e: Error,
        mut attempt: impl FnMut() -> Result<T, Error>,
    ) -> Result<T, Refusal> {
        let deadline = Instant::now() + self.max_wait;
        loop {
            let Some(after) = e.retry_after() else {
                self.observer.refused();
                return Err(Refusal::from_generator(&e));
            };
            let nap = after.max(MIN_NAP);
            if Instant::now() + nap > deadline {
                self.observer.refused();
                return Err(Refusal::from_generator(&e));
            }
            self.observer.waited();
            tokio::time::sleep(nap).await;
            match attempt() {
                Ok(v) => return Ok(v),
                Err(next) => e = next,
            }
        }
    }

    /// Whether the node is held and issuing works, without issuing ([`Leased::check`]: a
    /// generator at its lead limit is busy, not broken). Probes take no ID.
    pub fn ready(&self) -> Result<(), Error> {
        self.current.load().check()
    }
}

/// At most this many characters of a caller's input are written back in an error.
pub const ECHO: usize = 64;

/// `raw` for an error message, cut after [`ECHO`] characters (a 16 KiB path must not come
/// back as a 16 KiB answer).
pub fn echo(raw: &str) -> Cow<'_, str> {
    match raw.char_indices().nth(ECHO) {
        None => Cow::Borrowed(raw),
        Some((cut, _)) => Cow::Owned(format!("{}…", &raw[..cut])),
    }
}

/// Counters summed, maxima kept.
fn add(a: Stats, b: Stats) -> Stats {
    let mut sum = a;
    sum.issued += b.issued;
    sum.borrowed_ticks += b.borrowed_ticks;
    sum.max_lead_ticks = a.max_lead_ticks.max(b.max_lead_ticks);
    sum.would_block_returned += b.would_block_returned;
    sum.wait_sleeps += b.wait_sleeps;
    sum.reanchors += b.reanchors;
    sum.max_skew_ns = a.max_skew_ns.max(b.max_skew_ns);
    // The current generator's: a gauge of now, not a total.
    sum.clock_held_back_ns = b.clock_held_back_ns;
    sum.reservation_writes += b.reservation_writes;
    sum.reservation_failures += b.reservation_failures;
    sum.lease_renewals += b.lease_renewals;
    sum.lease_losses += b.lease_losses;
    sum
}
