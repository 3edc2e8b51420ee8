//! Which rows a run measures ([`Plan`]): 1..N threads sharing one generator, per-core and
//! per-thread rows up to the slots the layout allows, and, without `--threads`, as many threads
//! as fit the duration; with the length of each measurement's warm-up and its least measured
//! part.
//!
//! Imports only the library and the failure type.

use std::time::Duration;

use monoflake::{DEFAULT_MAX_LEAD, Error, Generator, Layout};

use crate::failure::Failure;

/// Each measurement's counted and timed parts together are at least this long.
pub const MIN_MEASURED: Duration = Duration::from_millis(100);
/// Past the generator's lead before anything is counted.
pub const WARM_UP: Duration = DEFAULT_MAX_LEAD.saturating_add(Duration::from_millis(50));

/// Which rows a run measures.
pub struct Plan {
    /// Shared rows for 1..=threads.
    pub threads: usize,
    /// The most slots the layout allows, when fewer than `threads`: per-core and per-thread
    /// rows stop there (each slot takes a slice of the sequence bits, and one must be left).
    pub per_core_max_slots: Option<usize>,
    /// The CPUs, when `--threads` was not given and fewer threads than CPUs fit the duration.
    pub cpus_left_out: Option<usize>,
}

impl Plan {
    /// Every thread count up to `threads`, per-core and per-thread up to `per_core_max_slots`.
    pub fn whole(threads: usize, per_core_max_slots: Option<usize>) -> Self {
        Plan {
            threads,
            per_core_max_slots,
            cpus_left_out: None,
        }
    }

    /// The shortest `--duration` that measures every row.
    pub fn least(&self) -> Duration {
        (WARM_UP + MIN_MEASURED).saturating_mul(u32::try_from(self.windows()).unwrap_or(u32::MAX))
    }

    /// Fewer threads, down to one, until the rows fit in `duration`.
    pub fn fit_to(&mut self, duration: Duration) {
        let cpus = self.threads;
        while self.threads > 1 && self.least() > duration {
            self.threads -= 1;
        }
        if self.threads < cpus {
            self.cpus_left_out = Some(cpus);
            // The per-core limit is said only where it cuts the rows short.
            self.per_core_max_slots = self.per_core_max_slots.filter(|&max| max < self.threads);
        }
    }

    /// Per-core rows for 2..=this many threads, per-thread rows for 1..=this many.
    pub fn per_core_up_to(&self) -> usize {
        self.per_core_max_slots
            .map_or(self.threads, |max| max.min(self.threads))
    }

    /// Shared rows, per-core rows (from 2 threads) and per-thread rows (from 1).
    pub fn windows(&self) -> usize {
        let slotted = self.per_core_up_to();
        self.threads + slotted.saturating_sub(1) + slotted
    }

    pub fn describe(&self) -> String {
        match (self.threads, self.per_core_up_to()) {
            (1, _) => "1 thread, shared and per-thread".to_owned(),
            (n, 1) => format!("1 to {n} threads shared, 1 per-thread"),
            (n, m) if m == n => format!("1 to {n} threads, shared, per-core and per-thread"),
            (n, 2) => format!("1 to {n} threads shared, 2 per-core, 1 to 2 per-thread"),
            (n, m) => format!("1 to {n} threads shared, 2 to {m} per-core, 1 to {m} per-thread"),
        }
    }
}

/// `Some(max)` when a per-core generator for `threads` threads cannot be built because the
/// layout's sequence allows only `max` slots.
pub fn per_core_max_slots(layout: &Layout, threads: usize) -> Result<Option<usize>, Failure> {
    if threads < 2 {
        return Ok(None);
    }
    match Generator::builder(layout.clone()).build_per_core(threads) {
        Ok(_) => Ok(None),
        Err(Error::OutOfRange { field, max, .. }) if field == "slots" => {
            Ok(Some(usize::try_from(max).unwrap_or(usize::MAX)))
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_threads_fit_the_duration() {
        // 64 CPUs: 191 rows of 250 ms (64 shared, 63 per-core, 64 per-thread) do not fit ten
        // seconds (refused with exit 2); 13 threads, 38 rows, do.
        let mut plan = Plan::whole(64, None);
        assert_eq!(plan.least(), Duration::from_millis(47_750));
        plan.fit_to(Duration::from_secs(10));
        assert_eq!((plan.threads, plan.windows()), (13, 38));
        assert_eq!(plan.cpus_left_out, Some(64));
        assert!(plan.least() <= Duration::from_secs(10));
        // Slotted rows stopping at 2 slots: one per-core and two per-thread rows, shared rows
        // only past 2 threads.
        let mut plan = Plan::whole(64, Some(2));
        plan.fit_to(Duration::from_secs(10));
        assert_eq!((plan.threads, plan.windows()), (37, 40));
        assert_eq!(plan.per_core_max_slots, Some(2));
        // A slot limit above the threads that fit is not a limit any more.
        let mut plan = Plan::whole(64, Some(32));
        plan.fit_to(Duration::from_secs(10));
        assert_eq!(plan.per_core_max_slots, None);
        // What fits is left alone; one thread is the least.
        let mut plan = Plan::whole(2, None);
        plan.fit_to(Duration::from_secs(10));
        assert_eq!((plan.threads, plan.cpus_left_out), (2, None));
        let mut plan = Plan::whole(8, None);
        plan.fit_to(Duration::from_millis(100));
        assert_eq!((plan.threads, plan.cpus_left_out), (1, Some(8)));
    }
}
