//! A clock for the generators' property tests: nanosecond readings the test sets, backwards
//! too. Shared by `hot.rs`'s and `per_thread`'s tests.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

use crate::TimeSource;

/// A clock with nanosecond readings that the test sets, backwards too.
#[derive(Clone, Debug)]
pub(crate) struct NsClock(pub(crate) Arc<AtomicU64>);

impl TimeSource for NsClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Relaxed) / 1_000_000
    }
    fn now_ns(&self) -> u64 {
        self.0.load(Relaxed)
    }
}
