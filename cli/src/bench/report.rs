//! What a run measured, written out: the table, or one JSON object.
//!
//! Imports the rows of `window.rs`, the plan's warm-up, the flags and the library.

use std::time::Duration;

use hdrhistogram::Histogram;
use monoflake::{DEFAULT_MAX_LEAD, Layout};
use serde_json::{Value, json};

use super::plan::WARM_UP;
use super::store::StoreCosts;
use super::window::Row;
use crate::args::{BenchArgs, ClockArg, MAX_DURATION};

/// Everything measured, for the table or JSON.
pub struct Report<'a> {
    pub args: &'a BenchArgs,
    pub layout: &'a Layout,
    pub threads: usize,
    /// Per-core and per-thread rows stop at this many threads, when fewer than `threads`.
    pub per_core_max_slots: Option<usize>,
    /// The CPUs, when fewer threads than CPUs fit the duration (no `--threads`).
    pub plan_cpus_left_out: Option<usize>,
    /// How many measurements ran.
    pub windows: usize,
    pub cap_per_s: f64,
    /// Calls between two looks at the phase.
    pub stride: u64,
    /// How long each measurement's counted part was to run.
    pub counted_part: Duration,
    pub overhead: u64,
    pub burst: (u64, f64),
    pub rows: &'a [Row],
    /// The node store's costs, with `--backend`.
    pub store: Option<&'a StoreCosts>,
}

/// Fewer ticks than this in a counted part, on a layout whose ticks are longer than the lead, and
/// the cap is not judged: IDs at the cap come a tick's worth at a time.
const MIN_COUNTED_TICKS: u32 = 20;

/// A row at 90% of the cap or more is running at the cap.
const AT_CAP: f64 = 0.9;

impl Row {
    /// At 90% of what its generator allows its threads, or more.
    fn at_cap(&self) -> bool {
        self.ids_per_s >= AT_CAP * self.cap_per_s
    }
}

/// The `--duration`, in whole seconds, that gives every counted part of `windows`
/// measurements [`MIN_COUNTED_TICKS`] ticks of `tick`; `None` past [`MAX_DURATION`].
fn duration_for_ticks(tick: Duration, windows: usize) -> Option<Duration> {
    let part = tick.checked_mul(MIN_COUNTED_TICKS)?;
    let least = WARM_UP
        .checked_add(part.checked_mul(2)?)?
        .checked_mul(u32::try_from(windows).ok()?)?;
    let whole = Duration::from_secs(least.as_secs() + u64::from(least.subsec_nanos() > 0));
    (whole <= MAX_DURATION).then_some(whole)
}

fn percentiles(h: &Histogram<u64>) -> [u64; 5] {
    [
        h.value_at_quantile(0.5),
        h.value_at_quantile(0.99),
        h.value_at_quantile(0.999),
        h.value_at_quantile(0.9999),
        h.max(),
    ]
}

fn rate(per_s: f64) -> String {
    if per_s >= 1e9 {
        format!("{:.2} G/s", per_s / 1e9)
    } else if per_s >= 1e6 {
        format!("{:.2} M/s", per_s / 1e6)
    } else if per_s >= 1e3 {
        format!("{:.1} k/s", per_s / 1e3)
    } else if per_s >= 1.0 || per_s == 0.0 {
        format!("{per_s:.1}/s")
    } else {
        // Under one a second (ticks of hours): three significant digits, never "0.0/s".
        let digits = (2 - per_s.log10().floor() as i64).clamp(1, 30) as usize;
        format!("{per_s:.digits$}/s")
    }
}

/// Nanoseconds per ID at `per_s` IDs per second; `None` when nothing was counted.
fn ns_per_id(per_s: f64) -> Option<f64> {
    (per_s > 0.0).then(|| 1e9 / per_s)
}

fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    format!("{cpus} CPUs, {model}")
}

impl Report<'_> {
    pub fn table(&self) -> String {
        let l = self.layout;
        let mut t = format!(
            "monoflake bench: layout {} ({} time, {} node, {} sequence bits; cap {} per node), \
             {} clock, {}, {} ms in all\nmachine: {}\n\n",
            l.name(),
            l.time_bits(),
            l.node_bits(),
            l.sequence_bits(),
            rate(self.cap_per_s),
            clock_name(self.args.clock),
            if self.threads == 1 {
                "1 thread".to_owned()
            } else {
                format!("1 to {} threads", self.threads)
            },
            self.args.duration.as_millis(),
            machine(),
        );
        let (n, ns) = self.burst;
        t += &format!(
            "hot path: {ns:.1} ns per ID ({n} ID{} back to back from a fresh generator, 1 thread, \
             within its lead)\n\n",
            if n == 1 { "" } else { "s" }
        );
        t += &format!(
            "{:>7}  {:<10}  {:>10}  {:>8}  {:>7}  {:<15}  {:>6}  {:>6}  {:>7}  {:>7}  {:>8}\n",
            "threads",
            "kind",
            "IDs/s",
            "ns/ID",
            "of cap",
            "thread shares",
            "p50",
            "p99",
            "p99.9",
            "p99.99",
            "max"
        );
        for r in self.rows {
            // A call at a small cap can outlast the counted part: then nothing was counted.
            let shares = if r.ids_per_s > 0.0 {
                let shares: Vec<String> = r
                    .shares
                    .iter()
                    .map(|s| format!("{:.0}%", s * 100.0))
                    .collect();
                shares.join(" ")
            } else {
                "-".to_owned()
            };
            let [p50, p99, p999, p9999, max] = if r.latency.is_empty() {
                [
                    "-".to_owned(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                ]
            } else {
                percentiles(&r.latency).map(|p| p.to_string())
            };
            // Not judged where the cap is not measured: over less than a few ticks of a layout
            // whose ticks are longer than the lead, a rate can be any multiple of it.
            let of_cap = self
                .of_cap(r)
                .map_or_else(|| "-".to_owned(), |f| format!("{:.1}%", f * 100.0));
            t += &format!(
                "{:>7}  {:<10}  {:>10}  {:>8}  {:>7}  {:<15}  {p50:>6}  {p99:>6}  {p999:>7}  \
                 {p9999:>7}  {max:>8}\n",
                r.threads,
                r.kind.name(),
                rate(r.ids_per_s),
                ns_per_id(r.ids_per_s).map_or_else(|| "-".to_owned(), |ns| format!("{ns:.1}")),
                of_cap,
                shares,
            );
        }
        t += "\n";
        if let Some(cpus) = self.plan_cpus_left_out {
            t += &format!(
                "threads: {} of {cpus} CPUs, what --duration {:?} measures; give --threads \
                 {cpus} and a longer --duration for all\n",
                if self.threads == 1 {
                    "1".to_owned()
                } else {
                    format!("1 to {}", self.threads)
                },
                self.args.duration
            );
        }
        if let Some(max) = self.per_core_max_slots {
            let bits = self.layout.sequence_bits();
            let (bits, slots) = (
                if bits == 1 {
                    "1 sequence bit gives".to_owned()
                } else {
                    format!("{bits} sequence bits give")
                },
                if max == 1 {
                    "1 slot".to_owned()
                } else {
                    format!("{max} slots")
                },
            );
            if max < 2 {
                t += &format!(
                    "per-core: not measured, per-thread: 1 thread; the layout's {bits} at most \
                     {slots}\n"
                );
            } else {
                t += &format!(
                    "per-core and per-thread: measured up to {max} threads; the layout's {bits} \
                     at most {slots}\n"
                );
            }
        }
        // One line for every slotted row with more slots than threads (up to 256 threads).
        let fewer: Vec<String> = self
            .rows
            .iter()
            .filter_map(|r| {
                let slots = r.slots.filter(|&s| s > r.threads)?;
                Some(format!(
                    "{} {} of {slots} slots, {}",
                    threads_text(r.threads),
                    r.kind.name(),
                    rate(r.cap_per_s)
                ))
            })
            .collect();
        if !fewer.is_empty() {
            t += &format!(
                "per-core and per-thread rows with fewer threads than slots have less than the \
                 layout's cap \
                 (slots are a power of two, each with its slice of the sequence){}: {}\n",
                if self.cap_measurable() {
                    ", and \"of cap\" is of theirs"
                } else {
                    ""
                },
                fewer.join("; ")
            );
        }
        t += &format!(
            "ns/ID is wall time per ID over all threads; p50 … max are ns per call, each timed \
             with two clock reads (their own cost: {} ns at p50, included).\n",
            self.overhead
        );
        if !self.cap_measurable() {
            // Ticks longer than the lead are not paced: IDs at the cap come a tick's worth at a
            // time, and over a part shorter than a few ticks the count says when the ticks
            // began, not the rate.
            let advice = match (
                duration_for_ticks(self.layout.tick(), self.windows),
                duration_for_ticks(self.layout.tick(), 1),
            ) {
                (Some(d), _) => format!(": give --duration {} s or more", d.as_secs()),
                (None, Some(d)) => format!(
                    ", more than the longest --duration ({} s) gives for {} windows: give \
                     --threads 1 and --duration {} s or more",
                    MAX_DURATION.as_secs(),
                    self.windows,
                    d.as_secs()
                ),
                (None, None) => format!(
                    ", more than the longest --duration ({} s) gives",
                    MAX_DURATION.as_secs()
                ),
            };
            t += &format!(
                "at the cap: not measured; the layout's {} ms ticks are longer than the {} ms \
                 lead, so IDs at the cap come a tick's worth at a time, and a counted part ({} ms) \
                 spans {:.1} ticks (at least {MIN_COUNTED_TICKS} needed){advice}\n",
                self.layout.tick_ms(),
                DEFAULT_MAX_LEAD.as_millis(),
                self.counted_part.as_millis(),
                self.counted_ticks(),
            );
            return t;
        }
        let at_cap: Vec<&Row> = self.rows.iter().filter(|r| r.at_cap()).collect();
        if at_cap.is_empty() {
            let best = self.rows.iter().map(|r| r.ids_per_s).fold(0.0, f64::max);
            t += &format!(
                "at the cap: not reached; the layout allows {} per node and the best row gave {}, \
                 so no row waited for the cap\n",
                rate(self.cap_per_s),
                rate(best)
            );
        } else {
            let all_past = at_cap.iter().all(|r| r.past_lead);
            t += &format!(
                "at the cap ({}, demand above it{}):\n",
                rate(self.cap_per_s),
                if all_past { ", past the lead" } else { "" }
            );
            for r in at_cap {
                let latency = if r.latency.is_empty() {
                    "no call ended in the timed part".to_owned()
                } else {
                    let [_, _, _, p9999, max] = percentiles(&r.latency);
                    format!("p99.99 {p9999} ns, max {max} ns")
                };
                let of = if r.cap_per_s < self.cap_per_s {
                    format!("its cap ({})", rate(r.cap_per_s))
                } else {
                    "the cap".to_owned()
                };
                let lead = match (all_past, r.past_lead) {
                    (true, _) => "",
                    (false, true) => " (past the lead)",
                    (false, false) => {
                        " (within the lead: the warm-up did not use it up, so the count \
                         includes borrowed time)"
                    }
                };
                t += &format!(
                    "  {}, {}: {:.2}% of {of}, {latency}{lead}\n",
                    threads_text(r.threads),
                    r.kind.name(),
                    r.ids_per_s / r.cap_per_s * 100.0
                );
            }
        }
        if let Some(store) = self.store {
            t += &store.table();
        }
        t
    }

    /// Whether a rate at the cap can be told: the generator paces IDs one slot at a time (it
    /// does within its lead: a tick no longer than [`DEFAULT_MAX_LEAD`]), or a counted part
    /// spans enough ticks.
    fn cap_measurable(&self) -> bool {
        self.layout.tick() <= DEFAULT_MAX_LEAD
            || self.counted_ticks() >= f64::from(MIN_COUNTED_TICKS)
    }

    /// A row's rate as a fraction of its cap, where the cap is measurable.
    fn of_cap(&self, r: &Row) -> Option<f64> {
        self.cap_measurable().then(|| r.ids_per_s / r.cap_per_s)
    }

    /// How many of the layout's ticks one counted part spans.
    fn counted_ticks(&self) -> f64 {
        self.counted_part.as_secs_f64() / self.layout.tick().as_secs_f64()
    }

    pub fn json(&self) -> Value {
        let l = self.layout;
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|r| {
                let [p50, p99, p999, p9999, max] = if r.latency.is_empty() {
                    [
                        Value::Null,
                        Value::Null,
                        Value::Null,
                        Value::Null,
                        Value::Null,
                    ]
                } else {
                    percentiles(&r.latency).map(Value::from)
                };
                json!({
                    "threads": r.threads,
                    "kind": r.kind.name(),
                    "ids_per_s": r.ids_per_s,
                    "counted_s": r.counted_for.as_secs_f64(),
                    "ns_per_id": ns_per_id(r.ids_per_s),
                    "slots": r.slots,
                    "cap_per_s": r.cap_per_s,
                    // Unknown (null) where `at_cap` is.
                    "of_cap": self.of_cap(r),
                    // Unknown (null) when a counted part is too short for the layout's ticks.
                    "at_cap": self.cap_measurable().then(|| r.at_cap()),
                    // Whether the lead was used up before the count began.
                    "past_lead": r.past_lead,
                    // Nothing counted: no shares (as the table's '-').
                    "shares": (r.ids_per_s > 0.0).then_some(&r.shares),
                    "latency_ns": {
                        "calls": r.latency.len(),
                        "p50": p50, "p99": p99, "p999": p999, "p9999": p9999, "max": max,
                    },
                })
            })
            .collect();
        json!({
            "layout": {
                "name": l.name(),
                "time_bits": l.time_bits(),
                "node_bits": l.node_bits(),
                "sequence_bits": l.sequence_bits(),
                "tick_ms": l.tick_ms(),
                "cap_per_s": self.cap_per_s,
            },
            "clock": clock_name(self.args.clock),
            "threads": self.threads,
            "per_core_max_slots": self.per_core_max_slots,
            "duration_s": self.args.duration.as_secs_f64(),
            "warm_up_s": WARM_UP.as_secs_f64(),
            "stride": self.stride,
            "counted_part_s": self.counted_part.as_secs_f64(),
            "counted_part_ticks": self.counted_ticks(),
            "machine": machine(),
            "timer_overhead_ns": self.overhead,
            "hot_path": { "ids": self.burst.0, "ns_per_id": self.burst.1 },
            "rows": rows,
            "store": self.store.map(StoreCosts::json),
        })
    }
}

pub fn threads_text(n: usize) -> String {
    if n == 1 {
        "1 thread".into()
    } else {
        format!("{n} threads")
    }
}

pub fn clock_name(c: ClockArg) -> &'static str {
    match c {
        ClockArg::Locked => "locked",
        ClockArg::Coarse => "coarse",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::window::{Kind, histogram};

    #[test]
    fn duration_for_ticks_is_none_past_the_longest_run_and_never_overflows() {
        // One window of 20 one-second ticks counted and 20 timed, after the warm-up: 40.15 s.
        assert_eq!(
            duration_for_ticks(Duration::from_secs(1), 1),
            Some(Duration::from_secs(41))
        );
        assert_eq!(
            duration_for_ticks(Duration::from_secs(1), 3),
            Some(Duration::from_secs(121))
        );
        // 511 windows of a tick of a minute: far past an hour.
        assert_eq!(duration_for_ticks(Duration::from_secs(60), 511), None);
        assert_eq!(duration_for_ticks(Duration::from_secs(3600), 1), None);
        // The longest tick a spec takes (u64::MAX ms), times 40 and 511 windows: no panic.
        assert_eq!(
            duration_for_ticks(Duration::from_millis(u64::MAX), 511),
            None
        );
    }

    fn row(threads: usize, kind: Kind, of_cap: f64, past_lead: bool) -> Row {
        let cap = 4_096_000.0;
        let mut latency = histogram();
        latency.record(300).unwrap();
        Row {
            threads,
            kind,
            slots: matches!(kind, Kind::PerCore | Kind::PerThread).then_some(threads),
            cap_per_s: cap,
            past_lead,
            ids_per_s: cap * of_cap,
            counted_for: Duration::from_millis(425),
            shares: vec![1.0 / threads as f64; threads],
            latency,
        }
    }

    fn table_of(rows: &[Row]) -> String {
        use clap::Parser;
        let parsed = crate::args::Cli::try_parse_from([
            "monoflake",
            "bench",
            "--threads",
            "2",
            "--duration",
            "1s",
        ])
        .unwrap();
        let crate::args::Command::Bench(args) = parsed.command else {
            unreachable!("parsed as bench")
        };
        assert_eq!(
            (args.layout.name(), args.clock),
            ("twitter", ClockArg::Locked)
        );
        let report = Report {
            args: &args,
            layout: &args.layout,
            threads: 2,
            per_core_max_slots: None,
            plan_cpus_left_out: None,
            windows: 3,
            cap_per_s: 4_096_000.0,
            stride: 64,
            counted_part: Duration::from_millis(425),
            overhead: 10,
            burst: (204_800, 20.0),
            rows,
            store: None,
        };
        report.table()
    }

    #[test]
    fn a_row_at_the_cap_still_borrowing_is_not_said_to_be_past_the_lead() {
        // Demand 1.12× the cap borrows its 100 ms lead in about a second, past the 150 ms
        // warm-up: the count read 111.9% "of the cap (…, demand above it, past the lead)".
        let table = table_of(&[
            row(1, Kind::Shared, 1.119, false),
            row(2, Kind::Shared, 1.0, true),
            row(2, Kind::PerCore, 0.5, true),
        ]);
        assert!(
            table.contains(
                "\nat the cap (4.10 M/s, demand above it):\n  1 thread, shared: 111.90% of the \
                 cap, p99.99 300 ns, max 300 ns (within the lead: the warm-up did not use it up, \
                 so the count includes borrowed time)\n  2 threads, shared: 100.00% of the cap, \
                 p99.99 300 ns, max 300 ns (past the lead)\n"
            ),
            "{table}"
        );
        // Every row at the cap past the lead: said once, in the heading.
        let table = table_of(&[row(1, Kind::Shared, 1.0, true)]);
        assert!(
            table.contains(
                "\nat the cap (4.10 M/s, demand above it, past the lead):\n  1 thread, shared: \
                 100.00% of the cap, p99.99 300 ns, max 300 ns\n"
            ),
            "{table}"
        );
    }

    #[test]
    fn a_rate_under_one_a_second_keeps_three_significant_digits() {
        // Two IDs per hour printed as "0.0/s", a cap of nothing.
        assert_eq!(rate(2.0 / 3600.0), "0.000556/s");
        assert_eq!(rate(0.8), "0.800/s");
        assert_eq!(rate(2.0), "2.0/s");
        assert_eq!(rate(0.0), "0.0/s");
        assert_eq!(rate(4_096_000.0), "4.10 M/s");
        // 2^40 IDs per tick of u64::MAX ms: finite digits, no panic.
        assert_eq!(rate(2f64.powi(40) / (u64::MAX as f64 / 1e3)), "0.0000596/s");
    }
}
