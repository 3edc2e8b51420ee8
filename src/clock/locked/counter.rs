//! The counter the locked clock advances by, and its calibration: quanta's counter, read raw
//! in its own units, and turned into nanoseconds by one fixed-point multiplication whose
//! factor is taken once from quanta's calibration (in unit tests, a simulated counter that
//! counts nanoseconds).
//!
//! Holds [`Counter`]. Touches nothing else of the clock: the line's arithmetic, the publication
//! and the clock read the counter and convert through it.

/// The counter the clock advances by: quanta's, or (in unit tests) a simulated one that
/// counts nanoseconds.
pub(super) enum Counter {
    Quanta {
        clock: quanta::Clock,
        /// Nanoseconds per counter unit, times 2^32, from quanta's calibration: one
        /// multiplication by a constant turns a counter difference into nanoseconds.
        ns_per_unit: u64,
    },
    #[cfg(test)]
    Simulated(std::sync::Arc<std::sync::atomic::AtomicU64>),
}

impl Counter {
    pub(super) fn quanta() -> Self {
        let clock = quanta::Clock::new();
        // quanta scales a counter difference by its calibration; scaling 2^32 units gives the
        // factor with 32 fractional bits (within 1 ns per 2^32 units: below one part per
        // billion at any counter rate above 1 GHz). Without a calibrated counter quanta's raw
        // reading is in nanoseconds already, and the factor is exactly 2^32.
        let ns_per_unit = clock.delta_as_nanos(0, 1 << 32).max(1);
        Counter::Quanta { clock, ns_per_unit }
    }

    /// The counter's reading, in its own units.
    #[inline]
    pub(super) fn raw(&self) -> u64 {
        match self {
            Counter::Quanta { clock, .. } => clock.raw(),
            #[cfg(test)]
            Counter::Simulated(ns) => ns.load(std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// A difference of counter units in nanoseconds.
    #[inline]
    pub(super) fn ns(&self, units: u64) -> u64 {
        match self {
            Counter::Quanta { ns_per_unit, .. } => {
                let ns = (u128::from(units) * u128::from(*ns_per_unit)) >> 32;
                u64::try_from(ns).unwrap_or(u64::MAX)
            }
            #[cfg(test)]
            Counter::Simulated(_) => units,
        }
    }

    /// How much a piece of the line that continues another at a counter reading `c` starts
    /// above the old piece's reading there, so that it never reads below it later: `ns(c - s) +
    /// ns(d - c)` can be 1 below `ns(d - s)` when the conversion rounds, and 0 when it is exact
    /// (a counter in nanoseconds).
    pub(super) fn slack(&self) -> u64 {
        match self {
            Counter::Quanta { ns_per_unit, .. } => u64::from(*ns_per_unit & 0xffff_ffff != 0),
            #[cfg(test)]
            Counter::Simulated(_) => 0,
        }
    }

    /// A number of nanoseconds in counter units (the inverse of [`Counter::ns`]).
    pub(super) fn units(&self, ns: u64) -> u64 {
        match self {
            Counter::Quanta { ns_per_unit, .. } => {
                let units = (u128::from(ns) << 32) / u128::from(*ns_per_unit);
                u64::try_from(units).unwrap_or(u64::MAX)
            }
            #[cfg(test)]
            Counter::Simulated(_) => ns,
        }
    }

    /// How many counter units [`Counter::ns_within`] converts: below it, the product of a
    /// difference and the scale fits in 64 bits, so the result is below 2^32 ns (4.3 s).
    pub(super) fn straight_limit(&self) -> u64 {
        match self {
            Counter::Quanta { ns_per_unit, .. } => u64::MAX / *ns_per_unit,
            #[cfg(test)]
            Counter::Simulated(_) => 1 << 32,
        }
    }

    /// [`Counter::ns`] in 64-bit arithmetic, for `units` below [`Counter::straight_limit`]:
    /// the same value, one multiplication and one shift.
    #[inline]
    pub(super) fn ns_within(&self, units: u64) -> u64 {
        match self {
            Counter::Quanta { ns_per_unit, .. } => units.wrapping_mul(*ns_per_unit) >> 32,
            #[cfg(test)]
            Counter::Simulated(_) => units,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counter_scales_as_quanta_does_within_a_part_per_billion() {
        let counter = Counter::quanta();
        let Counter::Quanta { clock, .. } = &counter else {
            unreachable!("Counter::quanta is quanta's counter")
        };
        for units in [
            1u64,
            1_000,
            1 << 20,
            1 << 32,
            1 << 40,
            3 << 44,
            u64::MAX >> 8,
        ] {
            let ours = counter.ns(units);
            let theirs = clock.delta_as_nanos(0, units);
            assert!(
                ours.abs_diff(theirs) <= 1 + theirs / 1_000_000_000,
                "{units} units: {ours} ns here, {theirs} ns by quanta"
            );
            // Back to units, within the units of one nanosecond (the reading's resolution).
            let back = counter.units(ours);
            assert!(
                back.abs_diff(units) <= 2 + counter.units(1) + units / 1_000_000_000,
                "{units} units -> {ours} ns -> {back} units"
            );
        }
        assert_eq!(counter.ns(0), 0);
    }
}
