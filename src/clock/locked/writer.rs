//! The writer lock that survives a fork: it serialises the writers of the line (a comparison
//! with the wall clock, a forward move, a straightening) and holds its holder's process id, so
//! that a forked child takes over a lock a thread of its parent held.
//!
//! Touches only its own atomics (through `crate::sync`), a condition variable to sleep on, and
//! the process id; knows nothing of the line it guards. The fields are `pub(super)` for the
//! unit tests (`tests.rs`), which hand the lock to another process; the clock uses the methods.

use std::time::Duration;

use crate::sync::{AtomicU64, Ordering};

/// The lock that serialises the writers of the line (`Line`, in `publication.rs`): the id of
/// the process whose thread holds it, plus one (0: free).
///
/// A forked child has a copy of its parent's memory but only the thread that forked: a lock
/// another thread of the parent held at the fork is held by no thread of the child and would
/// never be given back there (a `Mutex` would make [`LockedClock::reanchor`] and
/// [`LockedClock::advance_to`] wait for ever, and readers stop comparing). The holder's process
/// id tells such a lock from one a thread of this process holds, and the child takes it over.
/// What the parent's writer left half-done, the child's next publication redoes whole: it
/// closes the straight part again, fills the slot after the published one, and opens it
/// (`Line::publish` in `publication.rs`).
///
/// A thread that waits for the lock ([`WriterLock::lock`]: a comparison asked for, a forward
/// move) says so, and readers then leave the lock to it (its comparison reads the line again);
/// it sleeps until the holder gives the lock back and wakes it.
///
/// [`LockedClock::reanchor`]: crate::LockedClock::reanchor
/// [`LockedClock::advance_to`]: crate::LockedClock::advance_to
pub(super) struct WriterLock {
    // Ordering: Acquire when taken, Release when given back: writers' work is ordered, as
    // under a mutex.
    pub(super) holder: AtomicU64,
    /// How many threads wait in [`WriterLock::lock`].
    // Ordering: Relaxed; a hint (a wake-up it misses is made up for by the sleep's timeout).
    pub(super) waiting: AtomicU64,
    /// Where waiting threads sleep. Only tried, never waited for: a forked child may inherit it
    /// taken too.
    park: std::sync::Mutex<()>,
    wake: std::sync::Condvar,
}

/// A taken [`WriterLock`], given back when dropped (also on a panic: the line is consistent
/// between publications).
pub(super) struct WriterGuard<'a>(&'a WriterLock);

impl Drop for WriterGuard<'_> {
    fn drop(&mut self) {
        self.0.holder.store(0, Ordering::Release);
        if self.0.waiting.load(Ordering::Relaxed) != 0 {
            self.0.wake.notify_all();
        }
    }
}

impl WriterLock {
    pub(super) fn new() -> Self {
        WriterLock {
            holder: AtomicU64::new(0),
            waiting: AtomicU64::new(0),
            park: std::sync::Mutex::new(()),
            wake: std::sync::Condvar::new(),
        }
    }

    /// Takes the lock if it is free and nobody waits for it or, with `take_over`, also if held
    /// in another process (inherited across a fork); otherwise `None`. Asks the process id (a
    /// system call) only to take it: a reader that finds it taken, without `take_over`, pays
    /// two loads.
    pub(super) fn try_lock(&self, take_over: bool) -> Option<WriterGuard<'_>> {
        let held = self.holder.load(Ordering::Relaxed);
        if !take_over && (held != 0 || self.waiting.load(Ordering::Relaxed) != 0) {
            return None;
        }
        self.take(held, u64::from(std::process::id()) + 1)
    }

    /// Takes the lock from `held` (free, or held in another process) for the process `me`.
    fn take(&self, held: u64, me: u64) -> Option<WriterGuard<'_>> {
        if held == me {
            return None;
        }
        self.holder
            .compare_exchange(held, me, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| WriterGuard(self))
    }

    /// Takes the lock, waiting for a thread of this process that holds it.
    pub(super) fn lock(&self) -> WriterGuard<'_> {
        let me = u64::from(std::process::id()) + 1;
        self.waiting.fetch_add(1, Ordering::Relaxed);
        let mut step = 0;
        let guard = loop {
            if let Some(guard) = self.take(self.holder.load(Ordering::Relaxed), me) {
                break guard;
            }
            if crate::sync::backoff(step) {
                step += 1;
            } else if let Ok(park) = self.park.try_lock() {
                // Woken when the holder gives the lock back; the timeout bounds a wake-up
                // given between the check above and the wait.
                drop(self.wake.wait_timeout(park, Duration::from_micros(200)));
            } else {
                crate::sync::sleep(Duration::from_micros(50));
            }
        };
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        guard
    }
}
