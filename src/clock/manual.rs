//! A clock moved by hand, for tests and models.

use super::TimeSource;
use crate::sync::{AtomicU64, Ordering};

/// A clock moved only by hand, for tests and models: it stands still until told to move,
/// and it can move forward or back.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use monoflake::{Generator, Layout, ManualClock};
///
/// let clock = Arc::new(ManualClock::new(1_700_000_000_000));
/// let generator = Generator::builder(Layout::twitter()).clock(Arc::clone(&clock)).build()?;
/// let a = generator.try_next_id()?;
/// clock.rewind_ms(3_600_000); // an hour back
/// let b = generator.try_next_id()?;
/// assert!(b > a);
/// # Ok::<(), monoflake::Error>(())
/// ```
#[derive(Debug)]
pub struct ManualClock {
    // Ordering: Relaxed; a lone value that tests move from any thread.
    now_ms: AtomicU64,
}

impl ManualClock {
    /// A clock standing at `unix_ms`.
    ///
    /// ```
    /// use monoflake::TimeSource;
    /// assert_eq!(monoflake::ManualClock::new(5).now_ms(), 5);
    /// ```
    pub fn new(unix_ms: u64) -> Self {
        ManualClock {
            now_ms: AtomicU64::new(unix_ms),
        }
    }

    /// Sets the time.
    ///
    /// ```
    /// use monoflake::TimeSource;
    /// let c = monoflake::ManualClock::new(5);
    /// c.set_ms(2);
    /// assert_eq!(c.now_ms(), 2);
    /// ```
    pub fn set_ms(&self, unix_ms: u64) {
        self.now_ms.store(unix_ms, Ordering::Relaxed);
    }

    /// Moves the time forward by `ms`.
    ///
    /// ```
    /// use monoflake::TimeSource;
    /// let c = monoflake::ManualClock::new(5);
    /// c.advance_ms(3);
    /// assert_eq!(c.now_ms(), 8);
    /// ```
    pub fn advance_ms(&self, ms: u64) {
        self.now_ms.fetch_add(ms, Ordering::Relaxed);
    }

    /// Moves the time back by `ms` (not below 0).
    ///
    /// ```
    /// use monoflake::TimeSource;
    /// let c = monoflake::ManualClock::new(5);
    /// c.rewind_ms(3);
    /// assert_eq!(c.now_ms(), 2);
    /// ```
    pub fn rewind_ms(&self, ms: u64) {
        let now = self.now_ms.load(Ordering::Relaxed);
        self.now_ms.store(now.saturating_sub(ms), Ordering::Relaxed);
    }
}

impl TimeSource for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now_ms.load(Ordering::Relaxed)
    }

    /// Moves the time forward to `unix_ms` if it is behind it.
    fn advance_to_ms(&self, unix_ms: u64) -> bool {
        self.now_ms.fetch_max(unix_ms, Ordering::Relaxed);
        true
    }
}
