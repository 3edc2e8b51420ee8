//! Issuing for a request: the leased generator behind an async retry, and what a refusal
//! means for a caller.
//!
//! Requests never block a runtime thread: they call the generator's non-waiting methods and,
//! at the lead limit ([`Error::WouldBlock`]), sleep asynchronously for the `retry_after` it
//! gives, within the service's `max_wait`. Whatever cannot be issued in that time is refused
//! with the generator's own error and a `Retry-After`; nothing is ever issued past a lost
//! lease or an unacknowledged reservation, because the generator itself refuses.

use std::time::Duration;

use monoflake::{Error, Id, Ids, Layout, Leased};
use tokio::time::Instant;

use super::metrics::Metrics;

/// The shortest asynchronous nap at the lead limit (tokio's timer has millisecond grain).
const MIN_NAP: Duration = Duration::from_millis(1);

/// The leased generator, shared by every connection and both listeners.
#[derive(Debug)]
pub struct Issuer {
    leased: Leased,
    max_count: u64,
    max_wait: Duration,
    pub metrics: Metrics,
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
    pub fn new(leased: Leased, max_count: u64, max_wait: Duration, metrics: Metrics) -> Self {
        Issuer {
            leased,
            max_count,
            max_wait,
            metrics,
        }
    }

    pub fn layout(&self) -> &Layout {
        self.leased.layout()
    }

    pub fn node(&self) -> u64 {
        self.leased.node()
    }

    pub fn leased(&self) -> &Leased {
        &self.leased
    }

    /// Gives the generator up: the final reservation is written and the node freed.
    pub fn release(self) -> Result<(), Error> {
        self.leased.release()
    }

    /// Checks a count given by a caller (`raw` as it was written).
    pub fn parse_count(&self, raw: Option<&str>) -> Result<u64, Refusal> {
        let Some(raw) = raw else {
            return Err(Refusal::BadInput(format!(
                "count is missing: give ?count=N with N from 1 to {}",
                self.max_count
            )));
        };
        let n: u64 = raw.parse().map_err(|_| {
            Refusal::BadInput(format!(
                "count {raw:?} is not a whole number: give N from 1 to {}",
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

    /// One ID.
    pub async fn id(&self) -> Result<Id, Refusal> {
        match self.leased.try_next_id() {
            Ok(id) => Ok(id),
            Err(e) => self.wait(e, || self.leased.try_next_id()).await,
        }
    }

    /// `n` strictly increasing IDs from one reservation (`n` already checked).
    pub async fn ids(&self, n: u64) -> Result<Ids, Refusal> {
        match self.leased.try_next_ids(n) {
            Ok(ids) => Ok(ids),
            Err(e) => self.wait(e, || self.leased.try_next_ids(n)).await,
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
                self.metrics.refused();
                return Err(Refusal::from_generator(&e));
            };
            let nap = after.max(MIN_NAP);
            if Instant::now() + nap > deadline {
                self.metrics.refused();
                return Err(Refusal::from_generator(&e));
            }
            self.metrics.waited();
            tokio::time::sleep(nap).await;
            match attempt() {
                Ok(v) => return Ok(v),
                Err(next) => e = next,
            }
        }
    }

    /// Whether the node is held and issuing works: one ID is taken and dropped (an ID at the
    /// lead limit counts as working: the generator is busy, not broken).
    pub fn ready(&self) -> Result<(), Error> {
        match self.leased.try_next_id() {
            Ok(_) | Err(Error::WouldBlock { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }
}
