//! The server's locked clock: the line every backend reads, kept in shared memory.
//!
//! The library's `LockedClock` keeps its line in one process's memory; a server's backends
//! are separate processes, so the line lives in shared memory instead, as one number: the
//! offset from `CLOCK_MONOTONIC` (one clock for the whole host, the same in every process) to
//! Unix time. `now = monotonic + offset`. The offset is only ever raised:
//!
//! * at start, to the wall clock;
//! * on the first call after a start whose reservation is ahead of the clock, to the tick after
//!   the reservation — when that is within `monoflake.tolerance_ms` of the line, or
//!   `monoflake.trust_reservation` is on (else the call is refused: see `shared.rs`);
//! * once a second (checked on a read, no thread), to the wall clock when the wall clock is
//!   ahead by more than 1 ms (the monotonic clock misses suspend time; NTP stepped forward) —
//!   but, while the claim worker holds a node, no further than the ceiling its renewals set
//!   from the claim database's clock (issue 60: a wall clock stepped past the real time is
//!   followed only as far as the claim database confirms, so the worker keeps its lease).
//!
//! A wall clock set back changes nothing: the line keeps the monotonic clock's pace. (Unlike
//! `LockedClock`, it does not slew back toward a wall clock that is behind; Linux's
//! `CLOCK_MONOTONIC` is disciplined by NTP's frequency correction, so the line runs at the
//! real rate, and a line ahead stays ahead by what it was ahead at start.)

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// How often a read compares the line with the wall clock.
const CHECK_EVERY_NS: u64 = 1_000_000_000;
/// How far the wall clock may be ahead of the line before the line steps to it.
const STEP_TOLERANCE_NS: u64 = 1_000_000;

/// `CLOCK_MONOTONIC` in nanoseconds: one clock for every process on the host.
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid pointer to a timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64
}

/// The wall clock in Unix nanoseconds (0 before 1970); in a test build, moved by
/// `monoflake.test_clock_offset_ms`.
pub(crate) fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .saturating_add_signed(test_offset_ns())
}

/// The test build's clock offset (ms), as `monoflake.test_clock_offset_ms`'s assign hook
/// last set it in this process: an atomic, because the claim worker's keeper thread reads the
/// clock while the worker's main thread reloads the configuration.
#[cfg(feature = "test-clock")]
static TEST_OFFSET_MS: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Sets the test build's clock offset (the setting's assign hook).
#[cfg(feature = "test-clock")]
pub(crate) fn set_test_offset_ms(ms: i32) {
    // Ordering: Relaxed; a lone value, read by the next clock reading.
    TEST_OFFSET_MS.store(ms, Ordering::Relaxed);
}

/// The test build's clock offset.
#[cfg(feature = "test-clock")]
fn test_offset_ns() -> i64 {
    // Ordering: Relaxed; see `set_test_offset_ms`.
    i64::from(TEST_OFFSET_MS.load(Ordering::Relaxed)) * 1_000_000
}

/// No offset outside a test build.
#[cfg(not(feature = "test-clock"))]
const fn test_offset_ns() -> i64 {
    0
}

/// The line, in shared memory.
#[repr(C)]
pub(crate) struct Line {
    /// Unix ns minus monotonic ns; only raised.
    offset_ns: AtomicU64,
    /// The monotonic time of the next comparison with the wall clock.
    next_check_ns: AtomicU64,
    /// The ceiling on raises to the wall clock, as an offset from the monotonic clock (Unix
    /// ns minus monotonic ns), or [`NO_CEILING`]: set by the claim worker's keeper after each
    /// renewal, read by the comparisons only.
    ceiling_offset_ns: AtomicU64,
}

/// `ceiling_offset_ns` when there is no ceiling.
const NO_CEILING: u64 = u64::MAX;

impl Line {
    /// A line at the wall clock, or at `at_least_ns` (Unix) if that is later.
    pub(crate) fn new(at_least_ns: u64) -> Line {
        let mono = monotonic_ns();
        let start = wall_ns().max(at_least_ns);
        Line {
            offset_ns: AtomicU64::new(start.saturating_sub(mono)),
            next_check_ns: AtomicU64::new(mono + CHECK_EVERY_NS),
            ceiling_offset_ns: AtomicU64::new(NO_CEILING),
        }
    }

    /// The line's time now, in Unix nanoseconds.
    #[inline]
    pub(crate) fn now_ns(&self) -> u64 {
        let mono = monotonic_ns();
        // Ordering: Relaxed throughout; the line publishes no other memory, and a stale offset
        // only reads an earlier (still honest) time, which the state's step never goes below.
        let mut offset = self.offset_ns.load(Ordering::Relaxed);
        let next = self.next_check_ns.load(Ordering::Relaxed);
        if mono >= next
            && self
                .next_check_ns
                .compare_exchange(
                    next,
                    mono + CHECK_EVERY_NS,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
        {
            // Ordering: Relaxed; a lone value, the latest a renewal set.
            let wall = match self.ceiling_offset_ns.load(Ordering::Relaxed) {
                NO_CEILING => wall_ns(),
                ceiling => wall_ns().min(mono.saturating_add(ceiling)),
            };
            if wall > (mono + offset).saturating_add(STEP_TOLERANCE_NS) {
                let raised = wall - mono;
                offset = self
                    .offset_ns
                    .fetch_max(raised, Ordering::Relaxed)
                    .max(raised);
            }
        }
        mono + offset
    }

    /// Caps the raises to the wall clock at `ceiling_ns` (Unix ns now, moving on with the
    /// monotonic clock), or lifts the cap (`None`; the worker never does); never moves the
    /// line. The claim worker's keeper
    /// sets it after each renewal that read the claim database's clock (at most
    /// `max_clock_lead` ahead of it, less a margin), so that the line never runs further
    /// ahead of that clock than the next renewal confirms; the line runs at the monotonic
    /// clock's pace, and Linux disciplines that to NTP's frequency, so the margin covers the
    /// half second between renewals.
    pub(crate) fn set_ceiling(&self, ceiling_ns: Option<u64>) {
        let offset = ceiling_ns.map_or(NO_CEILING, |c| {
            c.saturating_sub(monotonic_ns()).min(NO_CEILING - 1)
        });
        // Ordering: Relaxed; see `now_ns`.
        self.ceiling_offset_ns.store(offset, Ordering::Relaxed);
    }

    /// Raises the line to at least `at_ns` (Unix) now; never lowers it. Returns the line's
    /// time after, and whether this call raised it.
    pub(crate) fn raise_to(&self, at_ns: u64) -> (u64, bool) {
        let mono = monotonic_ns();
        let wanted = at_ns.saturating_sub(mono);
        // Ordering: Relaxed; a read-modify-write reads the latest offset.
        let before = self.offset_ns.fetch_max(wanted, Ordering::Relaxed);
        (mono + before.max(wanted), wanted > before)
    }

    /// The line's time from the latest offset (a read-modify-write, not a possibly stale load),
    /// for a decision that must not rest on an old value.
    pub(crate) fn latest_ns(&self) -> u64 {
        let mono = monotonic_ns();
        mono + self.offset_ns.fetch_max(0, Ordering::Relaxed)
    }
}
