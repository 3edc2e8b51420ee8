//! The loom seam: every atomic and every wait in the crate comes from here.
//!
//! Under `--cfg loom` the atomics and the yield come from [`loom`], so the loom models in
//! `loom-tests/` explore the very code that ships; otherwise they come from `core`/`std`.

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};

/// How long a caller that lost a compare-exchange to another thread waits (spinning) before it
/// starts over: long enough for the winner to run a streak of IDs on its own cache line, short
/// enough to stay below the per-call tail of peers that yield the thread instead. See
/// `Generator::after_a_lost_round`.
pub(crate) const CONTENDED_WAIT: core::time::Duration = core::time::Duration::from_nanos(2_000);

/// How many times a waiting caller spins (with a CPU hint) before it starts yielding its thread.
pub(crate) const SPIN_LIMIT: u32 = 6;
/// How many times a waiting caller yields its thread before it starts sleeping.
pub(crate) const YIELD_LIMIT: u32 = 10;

/// One step of a bounded backoff: spin (exponentially) up to [`SPIN_LIMIT`], then yield up to
/// [`YIELD_LIMIT`]. Returns `false` once both are used up: the caller should sleep instead.
///
/// Under loom every step is a `loom::thread::yield_now`, which lets the model checker run the
/// other threads instead of exploring a spin.
pub(crate) fn backoff(step: u32) -> bool {
    #[cfg(loom)]
    {
        loom::thread::yield_now();
        step < SPIN_LIMIT + YIELD_LIMIT
    }
    #[cfg(not(loom))]
    {
        if step < SPIN_LIMIT {
            for _ in 0..(1u32 << step) {
                core::hint::spin_loop();
            }
            true
        } else if step < SPIN_LIMIT + YIELD_LIMIT {
            std::thread::yield_now();
            true
        } else {
            false
        }
    }
}

/// Sleeps for `d` (under loom: yields, since loom has no time).
pub(crate) fn sleep(d: core::time::Duration) {
    #[cfg(loom)]
    {
        let _ = d;
        loom::thread::yield_now();
    }
    #[cfg(not(loom))]
    std::thread::sleep(d);
}

/// Busy-waits for `d` (a slot that opens within microseconds); under loom, yields.
pub(crate) fn spin_for(d: core::time::Duration) {
    #[cfg(loom)]
    {
        let _ = d;
        loom::thread::yield_now();
    }
    #[cfg(not(loom))]
    {
        let until = std::time::Instant::now() + d;
        while std::time::Instant::now() < until {
            core::hint::spin_loop();
        }
    }
}
