//! A listener's connection slots, and which connection gives its slot up when a new one
//! comes and all are taken.
//!
//! Shedding, not queueing: a full server that only waited for a slot to free would let
//! `--max-connections` slow clients (a trickled TLS hello, an HTTP/2 preface and PINGs, a
//! head a byte a second) lock every new client out until their deadlines pass. Instead the
//! new connection takes the place of one with no request in flight: first those that never
//! completed a request (oldest first), then the keep-alive ones that have gone longest without
//! one. A connection with a request in flight is never shed; when every one has, the new
//! connection waits in the kernel's backlog until one ends (each within its deadline).
//!
//! The cost of a flood: N new connections a second give each new client about
//! `--max-connections / N` seconds to send its first request before it is shed in turn.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::exchange::Conn;

/// The connections of one listener.
#[derive(Debug, Default)]
pub struct Slots {
    open: Mutex<HashMap<u64, Arc<Conn>>>,
    next: AtomicU64,
}

/// A connection's place in [`Slots`]; leaves it when dropped.
#[derive(Debug)]
pub struct Place {
    slots: Arc<Slots>,
    key: u64,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.slots.open().remove(&self.key);
    }
}

impl Slots {
    fn open(&self) -> MutexGuard<'_, HashMap<u64, Arc<Conn>>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers `conn` until the returned place is dropped.
    pub fn enter(self: &Arc<Self>, conn: Arc<Conn>) -> Place {
        // Ordering: Relaxed; a unique key.
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        self.open().insert(key, conn);
        Place {
            slots: Arc::clone(self),
            key,
        }
    }

    /// Asks the connection that ranks first to be shed ([`Conn::shed_rank`]) to close;
    /// `false` when every connection has a request in flight.
    pub fn shed_one(&self) -> bool {
        let victim = self
            .open()
            .values()
            .filter_map(|c| c.shed_rank().map(|rank| (rank, Arc::clone(c))))
            .min_by_key(|(rank, _)| *rank)
            .map(|(_, c)| c);
        match victim {
            Some(c) => {
                c.ask_to_shed();
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::serve::exchange::Exchange;

    fn conn() -> Arc<Conn> {
        Conn::for_tests()
    }

    #[tokio::test(start_paused = true)]
    async fn sheds_the_never_served_first_then_the_longest_idle_never_the_busy() {
        let slots = Arc::new(Slots::default());
        let served_long_ago = conn();
        let done = Exchange::begin(&served_long_ago);
        done.finish();
        drop(done);
        tokio::time::advance(Duration::from_secs(1)).await;
        let served_lately = conn();
        let done = Exchange::begin(&served_lately);
        done.finish();
        drop(done);
        let busy = conn();
        let _in_flight = Exchange::begin(&busy);
        let fresh = conn();
        tokio::time::advance(Duration::from_secs(1)).await;
        let fresher = conn();
        let _places: Vec<Place> = [&served_long_ago, &served_lately, &busy, &fresh, &fresher]
            .into_iter()
            .map(|c| slots.enter(Arc::clone(c)))
            .collect();
        let order = [&fresh, &fresher, &served_long_ago, &served_lately];
        for expected in order {
            assert!(slots.shed_one());
            assert!(expected.shed_rank().is_none(), "asked in turn");
        }
        assert!(!slots.shed_one(), "the busy one is never shed");
        assert!(busy.shed_rank().is_none());
    }
}
