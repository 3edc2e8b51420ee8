//! The line's arithmetic, pure: one piece of the clock's line ([`Segment`]), which reads
//! straight and then, while it slews, [`SLEW_PPM`] slower than the counter; the slew's rate and
//! grace; and the part of a piece that reads straight from its start ([`Straight`]), all the
//! hot path reads.
//!
//! Touches no atomic, no clock and no lock: a reading is worked out from a piece and a counter
//! difference, converted through the [`Counter`] and nothing else.

use std::time::Duration;

use super::counter::Counter;

/// How much slower than its counter a [`LockedClock`] runs while it is ahead of the wall clock:
/// 1000 parts per million, i.e. it gives back 1 ms of lead per second.
///
/// Why this rate:
/// * it is more than ten times the worst drift of a calibrated counter seen in practice (a few
///   ppm here, up to ~80 ppm reported), so a counter that runs fast is always caught up;
/// * it is twice the largest slew NTP (and `adjtime`) applies to the wall clock, so the clock
///   still converges while NTP slews the wall clock the other way;
/// * it is small enough that durations measured from IDs stay within 0.1 % of real ones.
///
/// A deliberate step back of the wall clock (an operator undoing a mistake) is closed by the
/// same slew: one hour back takes about 42 days to absorb, during which IDs keep increasing
/// and their time runs 0.1 % slow. That is harmless; stepping back would not be.
///
/// [`LockedClock`]: crate::LockedClock
pub const SLEW_PPM: u64 = 1000;

/// How long after the comparison that finds the clock ahead of the wall clock its slew begins
/// (when it was not slewing already): until then the new piece of the line continues the old
/// one exactly, so a reading taken from the old piece while the new one is being published —
/// by a writer delayed up to this long between its counter reading and the publication — is
/// never above a later reading from the new piece.
pub(super) const SLEW_GRACE: Duration = Duration::from_millis(100);

/// [`SLEW_GRACE`] in nanoseconds.
pub(super) const SLEW_GRACE_NS: u64 = SLEW_GRACE.as_nanos() as u64;

/// `1_000_000 / SLEW_PPM`: the clock gives back one nanosecond per this many counter ones.
pub(super) const SLEW_DIVISOR: u64 = 1_000_000 / SLEW_PPM;

/// One piece of the clock's line: from the counter reading `start` on, the clock reads
/// `at + d - clamp(d - slew_from, 0, slew_for) / SLEW_DIVISOR` where `d` is the counter time
/// since `start` in nanoseconds: straight, then (while slewing) slower. The bounds are kept in counter units, so a reading takes one
/// subtraction and one multiplication from the counter to the clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Segment {
    /// The counter reading (its own units) where the piece begins.
    pub(super) start: u64,
    /// The clock's reading (Unix ns) at `start`.
    pub(super) at: u64,
    /// For how many nanoseconds of counter time the clock runs slow (0: not slewing).
    pub(super) slew_for: u64,
    /// How many nanoseconds of counter time after `start` the slow part begins: a slew that
    /// begins where the line ran straight begins [`SLEW_GRACE`] later, so the new piece and
    /// the old one agree for that long — a reader that used the old piece while the new one
    /// was being published never reads more than a reader of the new one, later.
    pub(super) slew_from: u64,
    /// The counter reading (its own units) at which the next comparison with the wall clock
    /// is due.
    pub(super) check_at: u64,
}

impl Segment {
    /// The reading `d` nanoseconds of counter time after `start`.
    #[inline]
    pub(super) fn read(&self, d: u64) -> u64 {
        if self.slew_for == 0 {
            return self.at.saturating_add(d);
        }
        self.at.saturating_add(d - self.slowed(d) / SLEW_DIVISOR)
    }

    /// The reading at the counter reading `raw` (one before `start` reads as `start`).
    #[inline]
    pub(super) fn read_at(&self, raw: u64, counter: &Counter) -> u64 {
        self.read(counter.ns(raw.saturating_sub(self.start)))
    }

    /// How much of the slow part has run `d` ns of counter time after `start`.
    pub(super) fn slowed(&self, d: u64) -> u64 {
        d.saturating_sub(self.slew_from).min(self.slew_for)
    }

    /// How much of the slew is still to be given back `d` ns of counter time after `start`.
    pub(super) fn slew_left(&self, d: u64) -> u64 {
        (self.slew_for - self.slowed(d)) / SLEW_DIVISOR
    }

    /// Whether the line runs straight from `d` ns of counter time after `start` on, up to the
    /// next comparison: no slew, or its slow part over.
    pub(super) fn slew_done(&self, d: u64) -> bool {
        self.slew_for == 0 || d >= self.slew_from.saturating_add(self.slew_for)
    }

    /// Whether the line runs slow `d` ns of counter time after `start`.
    pub(super) fn slewing(&self, d: u64) -> bool {
        d >= self.slew_from && self.slowed(d) < self.slew_for
    }
}

/// Where a [`Segment`] reads straight from its start, worked out when it is published so that
/// a reading there takes one subtraction, one 64-bit multiplication and one addition (no
/// 128-bit product, no saturation, no branch on the slew): what [`LockedClock::now_ns`] does
/// first. Below `width` counter units after `start` the segment reads `at + ns(d)`: all of it
/// up to the next comparison when it does not slew, the grace before its slow part when it
/// does, and never further than 64-bit arithmetic reaches ([`Counter::straight_limit`]).
///
/// There it gives exactly what [`Segment::read`] gives (tested). Past a slow part the line is
/// straight again, and the first reader there publishes a segment that starts straight
/// (`LockedClock::straighten`), so the straight part is always at the start of a segment.
///
/// [`LockedClock::now_ns`]: crate::LockedClock::now_ns
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Straight {
    pub(super) start: u64,
    pub(super) at: u64,
    pub(super) width: u64,
}

impl Straight {
    /// The straight part at the start of `s`, on `counter`.
    pub(super) fn of(s: &Segment, counter: &Counter) -> Straight {
        // No comparison due, and within 64-bit arithmetic (a result below 2^32 ns).
        let end = s
            .check_at
            .saturating_sub(s.start)
            .min(counter.straight_limit());
        // A sum with a result below 2^32 ns that cannot saturate.
        let fits = s.at <= u64::MAX - (1 << 32);
        let width = if !fits {
            0
        } else if s.slew_for == 0 {
            end
        } else {
            // Before the slow part: `ns(d) < slew_from` for every `d` below `units(slew_from)`.
            counter.units(s.slew_from).min(end)
        };
        Straight {
            start: s.start,
            at: s.at,
            width,
        }
    }

    /// The reading at counter difference `d` (wrapping: a reading before `start` is far
    /// outside), if `d` is in the straight part.
    #[inline]
    pub(super) fn read(&self, d: u64, counter: &Counter) -> Option<u64> {
        (d < self.width).then(|| self.at + counter.ns_within(d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const START: u64 = 1_700_000_000_000_000_000;
    const MS: u64 = 1_000_000;

    #[test]
    fn a_segment_reads_continuously_across_its_slew() {
        let s = Segment {
            start: 100,
            at: 1_000_000,
            slew_for: 5_000,
            slew_from: 0,
            check_at: u64::MAX,
        };
        assert_eq!(s.read(0), 1_000_000);
        assert_eq!(s.read(1_000), 1_000_000 + 1_000 - 1);
        assert_eq!(s.read(5_000), 1_000_000 + 5_000 - 5);
        assert_eq!(s.read(6_000), 1_000_000 + 6_000 - 5);
        assert_eq!(s.slew_left(0), 5);
        assert_eq!(s.slew_left(9_900), 0);
    }

    /// A quanta counter scaled by `ns_per_unit` (nanoseconds per unit, times 2^32).
    fn scaled(ns_per_unit: u64) -> Counter {
        Counter::Quanta {
            clock: quanta::Clock::new(),
            ns_per_unit,
        }
    }

    /// Wherever the straight part answers, it answers exactly what the segment reads; it
    /// answers nowhere at or past `check_at`; and it answers everywhere strictly inside the
    /// segment's straight start, up to a few units at its end.
    fn check_straight(segment: Segment, counter: &Counter, ds: impl IntoIterator<Item = u64>) {
        let straight = Straight::of(&segment, counter);
        for d in ds {
            let exact = segment.read(counter.ns(d));
            match straight.read(d, counter) {
                Some(fast) => {
                    assert_eq!(fast, exact, "d {d} on {segment:?}, {straight:?}");
                    assert!(segment.start.saturating_add(d) < segment.check_at);
                }
                None => {
                    let ns = counter.ns(d);
                    let before_slow = segment.slew_for == 0 || ns < segment.slew_from;
                    let due = segment.start.saturating_add(d.saturating_add(2)) >= segment.check_at;
                    let too_far = d.saturating_add(2) >= counter.straight_limit();
                    let near_slow = segment.slew_for > 0
                        && counter.ns(d.saturating_add(2)) >= segment.slew_from;
                    let too_high = segment.at > u64::MAX - (1 << 32);
                    assert!(
                        !before_slow || due || too_far || near_slow || too_high,
                        "d {d} ({ns} ns) is straight on {segment:?} but not in {straight:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_straight_part_reads_as_the_segment_at_its_end() {
        // Counters from 10 GHz to 24 MHz (0.1 to 41.7 ns per unit).
        for k in [
            429_496_730u64,
            1_431_655_765,
            1 << 32,
            5 << 32,
            179_000_000_000,
        ] {
            let counter = scaled(k);
            for (slew_for, slew_from) in [(0, 0), (5_000_000, 100 * MS), (7_000, 0), (3 << 40, 5)] {
                let segment = Segment {
                    start: 1_000_000,
                    at: START,
                    slew_for,
                    slew_from,
                    check_at: 1_000_000 + counter.units(900 * MS),
                };
                let end = Straight::of(&segment, &counter).width;
                let ds = end.saturating_sub(4)..end.saturating_add(4);
                check_straight(segment, &counter, ds.chain([0, 1, u64::MAX, u64::MAX - 3]));
            }
        }
        // A reading near the end of u64 is left to the exact path.
        let counter = scaled(1 << 32);
        let far = Segment {
            at: u64::MAX - 10,
            check_at: u64::MAX,
            ..Segment::default()
        };
        assert_eq!(Straight::of(&far, &counter).read(5, &counter), None);
    }

    /// A piece of the line that continues another at a counter reading `c` (a comparison that
    /// slews, or a straightening) starts `Counter::slack` above the old piece's reading there,
    /// so it never reads below it afterwards, though the conversion rounds: without the slack
    /// it does, by 1 ns.
    #[test]
    fn a_continuing_piece_never_reads_below_the_old_one_where_the_conversion_rounds() {
        let counter = scaled(1_431_655_765); // 3 GHz
        assert_eq!(counter.slack(), 1);
        assert_eq!(scaled(5 << 32).slack(), 0);
        let old = Segment {
            start: 1_000,
            at: START,
            ..Segment::default()
        };
        let mut below_without = 0;
        for c in (1_000..4_000).step_by(7) {
            let at_c = old.read(counter.ns(c - old.start));
            for x in c..c + 40 {
                let continued = |slack: u64| Segment {
                    start: c,
                    at: at_c + slack,
                    ..Segment::default()
                };
                let was = old.read(counter.ns(x - old.start));
                let with = continued(counter.slack()).read(counter.ns(x - c));
                assert!(with >= was, "c {c}, x {x}: {with} after {was}");
                assert!(with <= was + 1, "c {c}, x {x}: {with} is ahead of {was}");
                below_without += u32::from(continued(0).read(counter.ns(x - c)) < was);
            }
        }
        assert!(
            below_without > 0,
            "the slack made no difference: the test cannot fail"
        );
    }

    proptest::proptest! {
        #[test]
        fn the_straight_part_reads_as_the_segment(
            k in 1u64..(1 << 40),
            start in 0u64..(1 << 62),
            at in 0u64..u64::MAX,
            slew_for in proptest::prop_oneof![proptest::strategy::Just(0u64), 0u64..(1 << 42)],
            slew_from in 0u64..(1 << 33),
            interval in 0u64..(1 << 34),
            ds in proptest::collection::vec(0u64..(1 << 34), 16),
        ) {
            let counter = scaled(k);
            let segment = Segment {
                start,
                at,
                slew_for,
                slew_from,
                check_at: start.saturating_add(interval),
            };
            let end = Straight::of(&segment, &counter).width;
            let near = end.saturating_sub(2)..end.saturating_add(2);
            check_straight(segment, &counter, ds.into_iter().chain(near));
        }
    }
}
