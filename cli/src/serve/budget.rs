//! The memory answers hold: a byte budget for the whole server and one per connection.
//!
//! An answer's bytes are held from the moment its handler reserves them (or, for an answer too
//! small to reserve, from the moment it is produced) until the last of them has been handed to
//! the kernel or thrown away with a reset stream: every chunk of an answer carries a share of
//! its request (`tracked::Chunk`), and the bytes are given back when the last share drops.
//! A client that stops reading therefore holds what it was sent, never more, and a handler
//! that cannot reserve answers 503 instead of building the answer.
//!
//! * Answers up to [`SMALL`] bytes (one ID, a decoded ID, an error) are counted but never
//!   refused: they are bounded by the connections and streams, and an attack that stalls
//!   them cannot fill the budget. Larger ones reserve first; they may take at most
//!   [`Budget::batch_share`] of the server's budget, so small answers always find room.
//! * Batches are streamed in [`CHUNK`]s, at most [`WINDOW`] bytes unsent at once per answer.
//! * One connection may hold at most [`per_connection`] bytes, so one client cannot take the
//!   server's whole budget.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::stripe::{self, Padded, STRIPES};

/// Answers up to this size are never refused for memory.
pub const SMALL: usize = 1024;
/// A streamed batch is sent in pieces of at most this size (one HTTP/2 DATA frame).
pub const CHUNK: usize = 16 * 1024;
/// The most bytes of one streamed batch produced and not yet taken by the kernel.
pub const WINDOW: usize = 2 * CHUNK;

/// The most an HTTP answer for a batch of `n` holds at once.
pub fn batch_hold(n: u64) -> usize {
    // `"…",` per ID: at most 20 digits, two quotes and a comma; the braces around.
    usize::try_from(n)
        .unwrap_or(usize::MAX)
        .saturating_mul(23)
        .saturating_add(16)
        .min(WINDOW)
}

/// What a gRPC `Next` of `n` IDs holds at its peak: the message's `repeated fixed64` and its
/// encoding, built whole (a unary answer cannot be streamed), plus framing.
pub fn grpc_hold(n: u64) -> usize {
    usize::try_from(n)
        .unwrap_or(usize::MAX)
        .saturating_mul(16)
        .saturating_add(256)
}

/// The most one connection may hold: a megabyte, or the largest single answer `--max-count`
/// allows if that is more.
pub fn per_connection(max_count: u64) -> usize {
    grpc_hold(max_count).max(1 << 20)
}

/// A count of bytes held against a limit.
#[derive(Debug)]
pub struct Budget {
    /// Bytes reserved ([`Budget::try_take`]), and small answers' bytes when not striped.
    held: AtomicUsize,
    /// Small answers' bytes ([`Budget::take`]) on a budget every connection shares: one
    /// stripe per thread (`stripe.rs`), so the requests of two cores do not contend for one
    /// cache line. Bytes taken on one thread may be given back on another: a stripe may
    /// wrap below zero, their wrapping sum is exact.
    small: Box<[Padded<AtomicUsize>]>,
    limit: usize,
}
/// Why bytes could not be reserved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverBudget {
    /// `"the server"` or `"this connection"`.
    pub whose: &'static str,
    pub held: usize,
    pub wanted: usize,
    pub cap: usize,
}

impl std::fmt::Display for OverBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} holds {} KiB of answers its clients have not taken yet; {} KiB more would pass \
             its limit of {} KiB for large answers: retry later",
            self.whose,
            self.held / 1024,
            self.wanted.div_ceil(1024),
            self.cap / 1024
        )
    }
}

impl Budget {
    /// A budget for one connection's answers.
    pub fn new(limit: usize) -> Budget {
        Budget {
            held: AtomicUsize::new(0),
            small: Box::default(),
            limit,
        }
    }

    /// A budget that many threads count small answers in at once: the server's.
    pub fn striped(limit: usize) -> Budget {
        Budget {
            small: (0..STRIPES).map(|_| Padded::default()).collect(),
            ..Budget::new(limit)
        }
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Small answers' bytes in the stripes. The stripes are read one after another: bytes
    /// taken on one stripe and given back on another in between can make the sum seem below
    /// zero for that moment, which counts as none (never as a wrapped, huge count that would
    /// refuse every reservation).
    fn small_held(&self) -> usize {
        // Ordering: Relaxed; a gauge.
        let sum = self
            .small
            .iter()
            .map(|s| s.0.load(Ordering::Relaxed))
            .fold(0, usize::wrapping_add);
        if isize::try_from(sum).is_ok() { sum } else { 0 }
    }

    pub fn held(&self) -> usize {
        // Ordering: Relaxed; a gauge.
        self.held
            .load(Ordering::Relaxed)
            .wrapping_add(self.small_held())
    }

    /// What large answers may hold together: three quarters of the limit; the last quarter
    /// is kept for small answers.
    pub fn batch_share(&self) -> usize {
        self.limit - self.limit / 4
    }

    /// Takes `n` bytes if the total stays within `cap`. Reservations are exact against each
    /// other (one compare-and-swap); small answers' bytes, never refused, are read as they
    /// are at the time.
    pub fn try_take(&self, n: usize, cap: usize, whose: &'static str) -> Result<(), OverBudget> {
        let small = self.small_held();
        // Ordering: Relaxed; the count publishes no other memory.
        let mut reserved = self.held.load(Ordering::Relaxed);
        loop {
            let held = reserved.wrapping_add(small);
            let after = held.saturating_add(n);
            if after > cap {
                return Err(OverBudget {
                    whose,
                    held,
                    wanted: n,
                    cap,
                });
            }
            match self.held.compare_exchange_weak(
                reserved,
                reserved.wrapping_add(n),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(()),
                Err(now) => reserved = now,
            }
        }
    }

    /// Gives back `n` bytes [`Budget::try_take`] took.
    pub fn give_back(&self, n: usize) {
        self.held.fetch_sub(n, Ordering::Relaxed);
    }

    /// Counts `n` bytes that exist already (an answer too small to refuse).
    pub fn take(&self, n: usize) {
        match self.stripe() {
            Some(s) => s.fetch_add(n, Ordering::Relaxed),
            None => self.held.fetch_add(n, Ordering::Relaxed),
        };
    }

    /// Gives back `n` bytes [`Budget::take`] counted.
    pub fn give_back_small(&self, n: usize) {
        match self.stripe() {
            Some(s) => s.fetch_sub(n, Ordering::Relaxed),
            None => self.held.fetch_sub(n, Ordering::Relaxed),
        };
    }

    /// The calling thread's stripe, on a striped budget.
    #[inline]
    fn stripe(&self) -> Option<&AtomicUsize> {
        if self.small.is_empty() {
            return None;
        }
        self.small
            .get(stripe::index() % self.small.len())
            .map(|s| &s.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_within_the_cap_and_gives_back() {
        let b = Budget::new(4096);
        assert_eq!(b.batch_share(), 3072);
        b.try_take(3000, b.batch_share(), "the server").unwrap();
        let e = b.try_take(100, b.batch_share(), "the server").unwrap_err();
        assert_eq!((e.held, e.wanted, e.cap), (3000, 100, 3072));
        // Small answers may use the last quarter.
        b.try_take(1000, b.limit(), "the server").unwrap();
        b.give_back(4000);
        assert_eq!(b.held(), 0);
    }

    #[test]
    fn small_answers_in_stripes_count_against_reservations() {
        let b = Budget::striped(4096);
        b.take(1000);
        assert_eq!(b.held(), 1000);
        let e = b.try_take(2500, b.batch_share(), "the server").unwrap_err();
        assert_eq!((e.held, e.wanted, e.cap), (1000, 2500, 3072));
        b.try_take(2000, b.batch_share(), "the server").unwrap();
        assert_eq!(b.held(), 3000);
        // Given back on another thread (another stripe): the sum is still exact.
        std::thread::scope(|s| {
            s.spawn(|| b.give_back_small(1000));
        });
        assert_eq!(b.held(), 2000);
        b.give_back(2000);
        assert_eq!(b.held(), 0);
        // Read between a give-back on one stripe and the take on another it matches: none,
        // not a wrapped count that would refuse every reservation.
        std::thread::scope(|s| {
            s.spawn(|| b.give_back_small(100));
        });
        assert_eq!(b.held(), 0);
        b.try_take(3000, b.batch_share(), "the server").unwrap();
        b.give_back(3000);
        b.take(100);
        assert_eq!(b.held(), 0);
    }

    #[test]
    fn holds_are_bounded() {
        assert_eq!(batch_hold(1), 39);
        assert_eq!(batch_hold(100_000), WINDOW);
        assert_eq!(per_connection(10_000), 1 << 20);
        assert_eq!(per_connection(100_000), 1_600_256);
        assert_eq!(per_connection(1_000_000), 16_000_256);
    }
}
