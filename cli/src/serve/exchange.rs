//! One connection's requests in flight, its progress and its deadline; one request's bytes.
//!
//! Progress is a request *completed* (its answer produced to the end), never a byte received:
//! a client trickling a TLS hello, an HTTP/2 preface, SETTINGS and PINGs or a request head
//! makes none. A connection's deadline is
//!
//! * before its first request arrives: its opening plus the handshake timeout (TLS, HTTP
//!   version sniffing, the HTTP/2 preface and SETTINGS, the first head);
//! * with requests in flight: the arrival of the oldest plus the idle timeout, so an answer
//!   its client does not take (a reader that stopped, an HTTP/2 window that never opens)
//!   closes the connection, whatever its other streams do;
//! * otherwise: its last completed request (or its opening) plus the idle timeout.
//!
//! A request is in flight from the moment hyper hands it to the service until the last byte
//! of its answer has left the server (see `budget.rs`), so a finished handler whose answer
//! sits unsent in a buffer still counts.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::budget::{Budget, OverBudget};

/// The timeouts a connection lives by.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// From the connection's opening to its first request's arrival.
    pub handshake: Duration,
    /// Without a completed request, or with an answer not taken.
    pub idle: Duration,
}

/// How much of the server's budget an answer may reserve from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Share {
    /// The share of large answers (three quarters).
    Large,
    /// All of it.
    Whole,
}

/// Why a connection's deadline passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Late {
    /// No request arrived within the handshake timeout.
    Handshake,
    /// No request completed within the idle timeout.
    Idle,
    /// An answer was not taken within the idle timeout.
    Overdue,
}

#[derive(Debug)]
struct Progress {
    /// The arrival of each request in flight, by token.
    in_flight: Vec<(u64, Instant)>,
    /// When the last request completed (the opening until one did).
    last_done: Instant,
    arrived: u64,
    completed: u64,
}

/// A connection, as its requests and the listener see it.
#[derive(Debug)]
pub struct Conn {
    opened: Instant,
    timeouts: Timeouts,
    progress: Mutex<Progress>,
    next_token: AtomicU64,
    /// The bytes this connection's answers hold, and the server's.
    bytes: Budget,
    server: Arc<Budget>,
    shed: Notify,
    shed_asked: AtomicBool,
    /// The server's stop began (`App::draining`, shared by every connection).
    draining: Arc<AtomicBool>,
    /// A request came over HTTP/2: a stop can send this connection `GOAWAY` at once.
    http2: AtomicBool,
    /// A request arrived after the stop began (`drain.rs`: the connection's task decides
    /// whether to shut it down now).
    arrival: Notify,
}

impl Conn {
    pub fn new(
        timeouts: Timeouts,
        per_connection: usize,
        server: Arc<Budget>,
        draining: Arc<AtomicBool>,
    ) -> Conn {
        let opened = Instant::now();
        Conn {
            opened,
            timeouts,
            progress: Mutex::new(Progress {
                in_flight: Vec::new(),
                last_done: opened,
                arrived: 0,
                completed: 0,
            }),
            next_token: AtomicU64::new(0),
            bytes: Budget::new(per_connection),
            server,
            shed: Notify::new(),
            shed_asked: AtomicBool::new(false),
            draining,
            http2: AtomicBool::new(false),
            arrival: Notify::new(),
        }
    }

    fn progress(&self) -> MutexGuard<'_, Progress> {
        // A panic elsewhere cannot leave the counts half-written: every update is one step.
        self.progress.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// When this connection is to be closed unless it makes progress, and why.
    pub fn deadline(&self) -> (Instant, Late) {
        let p = self.progress();
        if let Some(oldest) = p.in_flight.iter().map(|&(_, at)| at).min() {
            (oldest + self.timeouts.idle, Late::Overdue)
        } else if p.arrived == 0 {
            (self.opened + self.timeouts.handshake, Late::Handshake)
        } else {
            (p.last_done + self.timeouts.idle, Late::Idle)
        }
    }

    /// Whether no request is in flight: the connection may be closed without cutting one.
    pub fn is_idle(&self) -> bool {
        self.progress().in_flight.is_empty()
    }

    /// How the listener ranks connections to shed when all slots are taken, `None` while a
    /// request is in flight: connections that never completed a request before those that
    /// did, and among each the longest without a completed request first.
    pub fn shed_rank(&self) -> Option<(bool, Instant)> {
        if self.shed_asked.load(Ordering::Relaxed) {
            return None;
        }
        let p = self.progress();
        p.in_flight
            .is_empty()
            .then_some((p.completed > 0, p.last_done))
    }

    /// Asks the connection's task to close it (it does when no request is in flight).
    pub fn ask_to_shed(&self) {
        // Ordering: Relaxed; only keeps the listener from asking twice.
        self.shed_asked.store(true, Ordering::Relaxed);
        self.shed.notify_one();
    }

    /// Resolves once the listener asked to shed this connection.
    pub async fn shed_asked(&self) {
        self.shed.notified().await;
    }

    /// The listener's request was turned down because a request arrived meanwhile.
    pub fn keep(&self) {
        self.shed_asked.store(false, Ordering::Relaxed);
    }

    /// Whether the server's stop began: HTTP/1 answers then carry `Connection: close`.
    pub fn draining(&self) -> bool {
        // Ordering: Relaxed; a flag that only ever turns on, read on its own.
        self.draining.load(Ordering::Relaxed)
    }

    /// A request arrived (over HTTP/2 when `http2`); wakes the connection's task when a stop
    /// is under way. Called after [`Exchange::begin_at`] counted it.
    #[inline]
    pub fn arrived(&self, http2: bool) {
        // Ordering: Relaxed for both; flags read on their own, after the task is woken.
        if http2 && !self.http2.load(Ordering::Relaxed) {
            self.http2.store(true, Ordering::Relaxed);
        }
        if self.draining() {
            self.arrival.notify_one();
        }
    }

    /// Whether a request came over HTTP/2.
    pub fn is_http2(&self) -> bool {
        self.http2.load(Ordering::Relaxed)
    }

    /// Whether a request arrived on this connection yet.
    pub fn had_request(&self) -> bool {
        self.progress().arrived > 0
    }

    /// Resolves once a request arrives during a stop (at once when one did since the last
    /// call).
    pub async fn arrival(&self) {
        self.arrival.notified().await;
    }

    /// A connection with a 10 s handshake, a 30 s idle timeout, 1 MiB of its own budget and a
    /// server budget of 4 MiB.
    #[cfg(test)]
    pub fn for_tests() -> Arc<Conn> {
        Arc::new(Conn::new(
            Timeouts {
                handshake: Duration::from_secs(10),
                idle: Duration::from_secs(30),
            },
            1 << 20,
            Arc::new(Budget::striped(4 << 20)),
            Arc::new(AtomicBool::new(false)),
        ))
    }

    /// The bytes this connection's answers hold now.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.bytes.held()
    }
}

/// One request in flight and the bytes its answer holds. It ends when the last reference
/// drops: the response body's and those of its chunks.
#[derive(Debug)]
pub struct Exchange {
    conn: Arc<Conn>,
    token: u64,
    /// Bytes taken from the connection's and the server's budget.
    charged: AtomicUsize,
    /// The handler reserved what its answer holds: its chunks are not counted again.
    reserved: AtomicBool,
    /// The answer was produced to its end.
    finished: AtomicBool,
}

impl Exchange {
    /// A request arrived on `conn`.
    #[cfg(test)]
    pub fn begin(conn: &Arc<Conn>) -> Exchange {
        Exchange::begin_at(conn, Instant::now())
    }

    /// A request arrived on `conn` at `arrival` (a clock read the caller also uses).
    pub fn begin_at(conn: &Arc<Conn>, arrival: Instant) -> Exchange {
        // Ordering: Relaxed; a unique number.
        let token = conn.next_token.fetch_add(1, Ordering::Relaxed);
        let mut p = conn.progress();
        p.in_flight.push((token, arrival));
        p.arrived += 1;
        drop(p);
        Exchange {
            conn: Arc::clone(conn),
            token,
            charged: AtomicUsize::new(0),
            reserved: AtomicBool::new(false),
            finished: AtomicBool::new(false),
        }
    }

    /// The connection the request came on.
    pub fn conn(&self) -> &Conn {
        &self.conn
    }

    /// Reserves what an answer larger than `budget::SMALL` will hold at most, from the
    /// connection's budget and the server's: its share for large answers (batches), or all
    /// of it (`/metrics`, which must answer while batches are refused); nothing is taken
    /// when either would pass its limit.
    pub fn reserve(&self, n: usize, share: Share) -> Result<(), OverBudget> {
        let conn = &self.conn;
        conn.bytes
            .try_take(n, conn.bytes.limit(), "this connection")?;
        let cap = match share {
            Share::Large => conn.server.batch_share(),
            Share::Whole => conn.server.limit(),
        };
        if let Err(e) = conn.server.try_take(n, cap, "the server") {
            conn.bytes.give_back(n);
            return Err(e);
        }
        self.charged.fetch_add(n, Ordering::Relaxed);
        self.reserved.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Counts `n` bytes of an answer produced without a reservation: a small one, at most
    /// `budget::SMALL` (an answer a handler did not size, an error from axum or tonic, is
    /// counted all the same: it cannot be refused once it exists).
    pub fn count(&self, n: usize) {
        if self.reserved.load(Ordering::Relaxed) {
            return;
        }
        self.conn.bytes.take(n);
        self.conn.server.take(n);
        self.charged.fetch_add(n, Ordering::Relaxed);
    }

    /// The answer has been produced to its end.
    pub fn finish(&self) {
        self.finished.store(true, Ordering::Relaxed);
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        let charged = *self.charged.get_mut();
        if *self.reserved.get_mut() {
            self.conn.bytes.give_back(charged);
            self.conn.server.give_back(charged);
        } else {
            self.conn.bytes.give_back_small(charged);
            self.conn.server.give_back_small(charged);
        }
        let mut p = self.conn.progress();
        if let Some(i) = p.in_flight.iter().position(|&(t, _)| t == self.token) {
            p.in_flight.swap_remove(i);
        }
        if *self.finished.get_mut() {
            p.completed += 1;
            p.last_done = Instant::now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> Arc<Conn> {
        Conn::for_tests()
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_moves_with_completed_requests_only() {
        let c = conn();
        let opened = Instant::now();
        assert_eq!(
            c.deadline(),
            (opened + Duration::from_secs(10), Late::Handshake)
        );
        tokio::time::advance(Duration::from_secs(5)).await;
        let first = Exchange::begin(&c);
        let arrived = Instant::now();
        assert_eq!(
            c.deadline(),
            (arrived + Duration::from_secs(30), Late::Overdue)
        );
        assert_eq!(c.shed_rank(), None, "a request in flight is never shed");
        tokio::time::advance(Duration::from_secs(20)).await;
        // A second request does not extend the first one's deadline.
        let second = Exchange::begin(&c);
        assert_eq!(c.deadline().0, arrived + Duration::from_secs(30));
        // One that ends without finishing (a reset stream) is no progress.
        drop(first);
        let (at, late) = c.deadline();
        assert_eq!(late, Late::Overdue);
        assert_eq!(at, Instant::now() + Duration::from_secs(30));
        drop(second);
        assert_eq!(c.deadline(), (opened + Duration::from_secs(30), Late::Idle));
        assert_eq!(c.shed_rank(), Some((false, opened)));
        let done = Exchange::begin(&c);
        done.finish();
        drop(done);
        let now = Instant::now();
        assert_eq!(c.deadline(), (now + Duration::from_secs(30), Late::Idle));
        assert_eq!(c.shed_rank(), Some((true, now)));
    }

    #[tokio::test]
    async fn an_exchange_gives_back_what_it_held() {
        let c = conn();
        let e = Exchange::begin(&c);
        e.count(100);
        assert_eq!((c.held(), c.server.held()), (100, 100));
        // A reservation the server's share cannot hold takes nothing.
        let big = Exchange::begin(&c);
        let err = big.reserve(1 << 20, Share::Large).unwrap_err();
        assert_eq!(err.whose, "this connection");
        assert_eq!(c.held(), 100);
        big.reserve(4096, Share::Large).unwrap();
        big.count(4096);
        assert_eq!(c.held(), 4196);
        drop((e, big));
        assert_eq!((c.held(), c.server.held()), (0, 0));
    }
}
