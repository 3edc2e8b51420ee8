//! Counters the hot path adds to, striped over threads: each thread adds to its own stripe
//! (a cache line of its own), and a reader sums the stripes. Two cores adding to one counter
//! pass its cache line back and forth on every request; to their own stripes, they never do.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Stripes per counter; threads beyond this many share them (round robin).
pub const STRIPES: usize = 8;

/// A value on cache lines of its own (128 bytes: two lines, for adjacent-line prefetch).
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct Padded<T>(pub T);

/// The calling thread's stripe, below [`STRIPES`].
#[inline]
pub fn index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        // Ordering: Relaxed; only spreads threads over the stripes.
        static INDEX: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
    }
    INDEX.with(|i| *i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_keeps_its_stripe_and_threads_spread() {
        let here = index();
        assert_eq!(index(), here);
        let others: Vec<usize> = (0..STRIPES)
            .map(|_| std::thread::spawn(index).join().unwrap())
            .collect();
        assert!(others.iter().all(|&i| i < STRIPES));
        let mut seen = others.clone();
        seen.sort_unstable();
        seen.dedup();
        assert!(seen.len() > 1, "{others:?}");
    }
}
