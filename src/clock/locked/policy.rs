//! The policy that compares with the wall clock: what a comparison makes of the line. The wall
//! clock ahead by more than the tolerance: step forward to it. Behind, or within the tolerance:
//! slew the difference back (or stop slewing), continuing the old piece through the grace so
//! that no reading goes back. Never a step back.
//!
//! Pure: it reads no clock, takes no lock and publishes nothing. `LockedClock::compare`
//! (`mod.rs`) reads the wall clock and the counter under the writer lock, asks
//! [`Policy::decide`], counts the skew and publishes the piece decided.

use std::time::Duration;

use super::counter::Counter;
use super::segment::{SLEW_DIVISOR, SLEW_GRACE_NS, Segment};

/// How often a [`LockedClock`] compares itself with the wall clock, by default.
///
/// [`LockedClock`]: crate::LockedClock
pub const DEFAULT_REANCHOR_INTERVAL: Duration = Duration::from_secs(1);
/// By how much the wall clock must be ahead before a [`LockedClock`] steps forward, by default.
///
/// [`LockedClock`]: crate::LockedClock
pub const DEFAULT_REANCHOR_TOLERANCE: Duration = Duration::from_millis(1);

/// When the clock compares with the wall clock, and how far behind the wall clock it may fall
/// before it steps forward.
pub(super) struct Policy {
    /// The comparison interval in counter units.
    pub(super) interval: u64,
    /// How far ahead the wall clock must be before the clock steps forward, in nanoseconds.
    pub(super) tolerance_ns: u64,
}

/// What a comparison found, and the piece of the line that follows from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Decision {
    /// Wall minus clock, in nanoseconds (negative: the clock is ahead, and slews back).
    pub(super) skew: i64,
    /// Whether the clock steps forward to the wall clock, by `skew`.
    pub(super) forward: bool,
    /// The next piece of the line, to publish.
    pub(super) next: Segment,
}

impl Policy {
    /// The comparison at the counter reading `raw`, where the clock reads `now` (at least what
    /// `current`, the piece published, reads there) and the wall clock `wall`.
    pub(super) fn decide(
        &self,
        current: Segment,
        raw: u64,
        now: u64,
        wall: u64,
        counter: &Counter,
    ) -> Decision {
        let skew = i128::from(wall) - i128::from(now);
        let skew = i64::try_from(skew).unwrap_or(if skew < 0 { i64::MIN } else { i64::MAX });
        let check_at = raw.saturating_add(self.interval);
        if skew > 0 && skew.unsigned_abs() > self.tolerance_ns {
            // The wall clock is ahead: step forward.
            return Decision {
                skew,
                forward: true,
                next: Segment {
                    start: raw,
                    at: wall,
                    slew_for: 0,
                    slew_from: 0,
                    check_at,
                },
            };
        }
        // Ahead of the wall clock (slew the whole difference back) or within the
        // tolerance behind it (stop slewing). The new piece must never read below the old
        // one within `SLEW_GRACE` of counter time from here, for readers that use the old
        // piece while a writer held up after its counter reading publishes the new one:
        // it may run slow there only where the old one does.
        let ahead = if skew < 0 { skew.unsigned_abs() } else { 0 };
        let slew_for = ahead.saturating_mul(SLEW_DIVISOR);
        let d = counter.ns(raw.saturating_sub(current.start));
        let grace_end = d.saturating_add(SLEW_GRACE_NS);
        // The old piece's line is the clock's reading here (no caller read more): a new
        // plan that leaves the line as it is up to here keeps the piece's start, so that
        // nothing is rounded and comparisons as frequent as reads add nothing to the
        // reading.
        let on_line = raw >= current.start && now == current.read_at(raw, counter);
        // The old piece's slow part, begun or still to begin, lasts at least the grace
        // from here: a new slow part may begin where it began.
        let slow_holds =
            current.slew_for > 0 && current.slew_from.saturating_add(current.slew_for) >= grace_end;
        let next = if on_line && ahead == 0 {
            // Straight from here (what has been slowed stays slowed).
            Segment {
                slew_for: current.slowed(d),
                check_at,
                ..current
            }
        } else if on_line && slow_holds {
            // Slow from where the old slow part begins until `ahead` more is given back.
            Segment {
                slew_for: current.slowed(d).saturating_add(slew_for),
                check_at,
                ..current
            }
        } else if on_line && current.slew_for == 0 {
            // A slew on a straight piece: its slow part begins a grace later.
            Segment {
                slew_for,
                slew_from: grace_end,
                check_at,
                ..current
            }
        } else {
            // A new piece, which starts where the old one is (one above where the
            // conversion rounds: see `Counter::slack`): its slow part begins at once if
            // the old one's runs through the grace, otherwise a grace later.
            Segment {
                start: raw,
                at: now.saturating_add(counter.slack()),
                slew_for,
                slew_from: if current.slewing(d) && slow_holds {
                    0
                } else {
                    SLEW_GRACE_NS
                },
                check_at,
            }
        };
        Decision {
            skew,
            forward: false,
            next,
        }
    }
}
