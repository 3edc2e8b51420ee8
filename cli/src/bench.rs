//! `monoflake bench`: how fast this machine issues IDs for one layout and clock.
//!
//! Every measurement runs its threads from one barrier for a fixed wall-clock window, so all of
//! them work the whole time:
//!
//! * a **warm-up** past the generator's lead (`DEFAULT_MAX_LEAD` + 50 ms), so a capped layout
//!   is measured in its steady state, not while it borrows ahead;
//! * a **counted** part, calls untimed: IDs per second over all threads and each thread's
//!   share;
//! * a **timed** part, every call timed with two quanta `raw()` reads into an HdrHistogram:
//!   p50 … max per call (the timer's own cost is measured and printed; it is included).
//!
//! Rows: one thread, then for 2..=N threads one shared generator and a per-core one. Before
//! them, one burst from a fresh generator (within its lead, so no cap binds) gives the cost of
//! the hot path itself. The rows running at the layout's cap are the sustained-cap case.

use std::hint::black_box;
use std::io::Write;
use std::sync::Barrier;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use monoflake::{
    CoarseClock, DEFAULT_MAX_LEAD, DEFAULT_TICKER_INTERVAL, Error, Generator, IdGenerator, Layout,
    LockedClock, TimeSource,
};
use serde_json::{Value, json};

use crate::args::{LAYOUT_HELP, LAYOUT_VALUE, parse_layout};
use crate::commands::Failure;

/// Measures how fast this machine issues IDs: per ID and per second for 1..N threads (one
/// shared generator, and per-core), per-call latency percentiles, and the layout's cap.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// The layout to measure: a preset name or a spec.
    #[arg(long, default_value = "twitter", value_name = LAYOUT_VALUE, value_parser = parse_layout, long_help = LAYOUT_HELP)]
    pub layout: Layout,
    /// The clock: `locked` reads the CPU counter on every call (the default); `coarse` reads a
    /// time a background thread refreshes every 200 µs.
    #[arg(long, value_enum, default_value_t = ClockArg::Locked)]
    pub clock: ClockArg,
    /// Measure 1 up to this many threads [default: the number of CPUs].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub threads: Option<u32>,
    /// The whole run's length, shared out between the measurements: e.g. `10s`, `2.5s`,
    /// `500ms`, `1m`.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ClockArg {
    /// The CPU's counter, read on every call (no background thread).
    Locked,
    /// A time refreshed by a background thread every 200 µs (cheapest per call).
    Coarse,
}

/// The shortest whole run and the longest.
const MIN_DURATION: Duration = Duration::from_millis(100);
const MAX_DURATION: Duration = Duration::from_secs(3600);
/// Each measurement's counted and timed parts together are at least this long.
const MIN_MEASURED: Duration = Duration::from_millis(100);
/// Past the generator's lead before anything is counted.
const WARM_UP: Duration = DEFAULT_MAX_LEAD.saturating_add(Duration::from_millis(50));
/// At most this many calls between two looks at the phase…
const MAX_STRIDE: u64 = 64;
/// … and at most this long at the layout's cap: a call at the cap waits for its slot, so on a
/// layout with a small cap 64 calls could take seconds (32 s at 2 IDs per second), overrunning
/// the phase and counting IDs by the stride.
const STRIDE_AT_CAP: Duration = Duration::from_micros(50);
/// The largest burst from a fresh generator.
const MAX_BURST: u64 = 2_000_000;

/// Reads `10s`, `2.5s`, `500ms`, `1m` (a number and a unit).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("expected a number and a unit (10s, 500ms, 1m), got {s:?}"))?;
    let seconds = match unit {
        "ms" => value / 1e3,
        "s" => value,
        "m" => value * 60.0,
        _ => {
            return Err(format!(
                "unknown unit {unit:?} in {s:?}: use ms, s or m (10s, 500ms, 1m)"
            ));
        }
    };
    let d = Duration::try_from_secs_f64(seconds).map_err(|_| format!("{s:?} is out of range"))?;
    if d < MIN_DURATION || d > MAX_DURATION {
        return Err(format!(
            "{s:?} is out of range: between {MIN_DURATION:?} and {MAX_DURATION:?}"
        ));
    }
    Ok(d)
}

/// Calls between two looks at the phase, for a layout allowing `cap_per_s` IDs per second:
/// 64, or what the cap issues in [`STRIDE_AT_CAP`], at least 1.
fn stride(cap_per_s: f64) -> u64 {
    ((cap_per_s * STRIDE_AT_CAP.as_secs_f64()) as u64).clamp(1, MAX_STRIDE)
}

/// Which generator a row measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Shared,
    PerCore,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Shared => "shared",
            Kind::PerCore => "per-core",
        }
    }
}

/// One measured row.
struct Row {
    threads: usize,
    kind: Kind,
    ids_per_s: f64,
    /// How long the counted part ran.
    counted_for: Duration,
    shares: Vec<f64>,
    latency: Histogram<u64>,
}

/// The phases a measurement's threads go through, in order.
const WARM: u8 = 0;
const COUNT: u8 = 1;
const TIMED: u8 = 2;
const STOP: u8 = 3;

pub fn run(args: &BenchArgs) -> Result<(), Failure> {
    let layout = args.layout.clone();
    let threads = match args.threads {
        Some(n) => n as usize,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let rows = 2 * threads - 1;
    let slice = args.duration / rows as u32;
    let Some(measured) = slice.checked_sub(WARM_UP).filter(|m| *m >= MIN_MEASURED) else {
        let least = (WARM_UP + MIN_MEASURED) * rows as u32;
        return Err(Failure {
            code: 2,
            message: format!(
                "--duration {:?} is too short for {rows} measurements (1 to {threads} threads, \
                 shared and per-core) of {:?} each ({WARM_UP:?} warm-up, {MIN_MEASURED:?} \
                 measured): give at least {least:?}, or fewer --threads",
                args.duration,
                WARM_UP + MIN_MEASURED
            ),
        });
    };
    match args.clock {
        ClockArg::Locked => measure(args, &layout, threads, measured, LockedClock::new),
        ClockArg::Coarse => {
            let (clock, _ticker) = CoarseClock::start(DEFAULT_TICKER_INTERVAL)?;
            measure(args, &layout, threads, measured, || clock.clone())
        }
    }
}

fn measure<C: TimeSource + Clone + 'static>(
    args: &BenchArgs,
    layout: &Layout,
    threads: usize,
    measured: Duration,
    clock: impl Fn() -> C,
) -> Result<(), Failure> {
    let timer = quanta::Clock::new();
    let overhead = timer_overhead(&timer);
    let cap_per_s = (layout.max_sequence() + 1) as f64 * 1000.0 / layout.tick_ms() as f64;
    let stride = stride(cap_per_s);
    let windows = 2 * threads - 1;
    progress(format_args!(
        "measuring layout {} with the {} clock: a burst, then {windows} window{} of {} ms \
         ({} ms warm-up, then {} ms counted and {} ms timed)",
        layout.name(),
        clock_name(args.clock),
        if windows == 1 { "" } else { "s" },
        (WARM_UP + measured).as_millis(),
        WARM_UP.as_millis(),
        (measured / 2).as_millis(),
        (measured / 2).as_millis()
    ));
    let fresh = Generator::builder(layout.clone()).clock(clock()).build()?;
    let burst = burst(&fresh, cap_per_s)?;
    let shared = Generator::builder(layout.clone()).clock(clock()).build()?;
    let mut rows = Vec::new();
    for n in 1..=threads {
        progress(format_args!("{}, one shared generator", threads_text(n)));
        rows.push(window(&shared, n, Kind::Shared, measured, &timer, stride)?);
        if n > 1 {
            progress(format_args!("{n} threads, per-core ({n} slots)"));
            let per_core = Generator::builder(layout.clone())
                .clock(clock())
                .build_per_core(n)?;
            rows.push(window(
                &per_core,
                n,
                Kind::PerCore,
                measured,
                &timer,
                stride,
            )?);
        }
    }
    let report = Report {
        args,
        layout,
        threads,
        cap_per_s,
        stride,
        counted_part: measured / 2,
        overhead,
        burst,
        rows: &rows,
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", report.json())?;
    } else {
        write!(out, "{}", report.table())?;
    }
    out.flush()?;
    Ok(())
}

fn threads_text(n: usize) -> String {
    if n == 1 {
        "1 thread".into()
    } else {
        format!("{n} threads")
    }
}

fn clock_name(c: ClockArg) -> &'static str {
    match c {
        ClockArg::Locked => "locked",
        ClockArg::Coarse => "coarse",
    }
}

fn progress(what: std::fmt::Arguments<'_>) {
    eprintln!("monoflake bench: {what}");
}

fn histogram() -> Histogram<u64> {
    // 1 ns to 100 s, 3 significant digits; the bounds are valid, so this cannot fail.
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid histogram bounds")
}

/// The timer's own cost: two `raw()` reads, p50.
fn timer_overhead(timer: &quanta::Clock) -> u64 {
    let mut h = histogram();
    for _ in 0..100_000 {
        let start = timer.raw();
        let _ = h.record(timer.delta_as_nanos(start, timer.raw()).max(1));
    }
    h.value_at_quantile(0.5)
}

/// The hot path alone: IDs from a fresh generator, back to back, half of what its lead allows
/// (so no cap binds). Returns (IDs, ns per ID).
fn burst(generator: &impl IdGenerator, cap_per_s: f64) -> Result<(u64, f64), Error> {
    let allowed = cap_per_s * DEFAULT_MAX_LEAD.as_secs_f64() / 2.0;
    let n = (allowed as u64).clamp(1, MAX_BURST);
    let start = Instant::now();
    for _ in 0..n {
        black_box(generator.try_next_id()?);
    }
    Ok((n, start.elapsed().as_nanos() as f64 / n as f64))
}

/// One measurement: `n` threads on `generator` from one barrier, through the phases.
fn window(
    generator: &(impl IdGenerator + Sync),
    n: usize,
    kind: Kind,
    measured: Duration,
    timer: &quanta::Clock,
    stride: u64,
) -> Result<Row, Failure> {
    let phase = AtomicU8::new(WARM);
    let barrier = Barrier::new(n + 1);
    let (results, counted_for) = std::thread::scope(|s| {
        let workers: Vec<_> = (0..n)
            .map(|_| {
                let (phase, barrier) = (&phase, &barrier);
                let timer = timer.clone();
                s.spawn(move || {
                    barrier.wait();
                    let result = calls(generator, phase, &timer, stride);
                    if result.is_err() {
                        phase.store(STOP, Ordering::Relaxed);
                    }
                    result
                })
            })
            .collect();
        barrier.wait();
        let advance = |to: u8, after: Duration| {
            std::thread::sleep(after);
            // A thread that failed has stopped everyone already.
            let _ = phase.compare_exchange(to - 1, to, Ordering::Relaxed, Ordering::Relaxed);
        };
        advance(COUNT, WARM_UP);
        let counting = Instant::now();
        advance(TIMED, measured / 2);
        let counted_for = counting.elapsed();
        advance(STOP, measured / 2);
        let results: Vec<_> = workers
            .into_iter()
            .map(|w| w.join().expect("a bench thread panicked"))
            .collect();
        (results, counted_for)
    });
    let mut counts = Vec::with_capacity(n);
    let mut latency = histogram();
    for result in results {
        let (count, h) = result?;
        counts.push(count);
        // Same bounds on both sides: adding cannot fail.
        let _ = latency.add(h);
    }
    let total: u64 = counts.iter().sum();
    Ok(Row {
        threads: n,
        kind,
        ids_per_s: total as f64 / counted_for.as_secs_f64(),
        counted_for,
        shares: counts
            .iter()
            .map(|&c| c as f64 / total.max(1) as f64)
            .collect(),
        latency,
    })
}

/// One thread's calls: untimed while counting, timed after. Returns (IDs counted, latencies).
fn calls(
    generator: &impl IdGenerator,
    phase: &AtomicU8,
    timer: &quanta::Clock,
    stride: u64,
) -> Result<(u64, Histogram<u64>), Error> {
    let mut counted = 0;
    let mut h = histogram();
    loop {
        match phase.load(Ordering::Relaxed) {
            WARM => {
                for _ in 0..stride {
                    black_box(generator.next_id()?);
                }
            }
            COUNT => {
                for _ in 0..stride {
                    black_box(generator.next_id()?);
                }
                counted += stride;
            }
            TIMED => {
                for _ in 0..stride {
                    let start = timer.raw();
                    black_box(generator.next_id()?);
                    let _ = h.record(timer.delta_as_nanos(start, timer.raw()).max(1));
                }
            }
            _ => return Ok((counted, h)),
        }
    }
}

/// Everything measured, for the table or JSON.
struct Report<'a> {
    args: &'a BenchArgs,
    layout: &'a Layout,
    threads: usize,
    cap_per_s: f64,
    /// Calls between two looks at the phase.
    stride: u64,
    /// How long each measurement's counted part was to run.
    counted_part: Duration,
    overhead: u64,
    burst: (u64, f64),
    rows: &'a [Row],
}

/// Fewer ticks than this in a counted part, on a layout whose ticks are longer than the lead, and
/// the cap is not judged: IDs at the cap come a tick's worth at a time.
const MIN_COUNTED_TICKS: u32 = 20;

/// A row at 90% of the cap or more is running at the cap.
const AT_CAP: f64 = 0.9;

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
    } else {
        format!("{per_s:.1}/s")
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
    fn table(&self) -> String {
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
            "hot path: {ns:.1} ns per ID ({n} IDs back to back from a fresh generator, 1 thread, \
             within its lead)\n\n"
        );
        t += &format!(
            "{:>7}  {:<8}  {:>10}  {:>8}  {:>7}  {:<15}  {:>6}  {:>6}  {:>7}  {:>7}  {:>8}\n",
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
            t += &format!(
                "{:>7}  {:<8}  {:>10}  {:>8}  {:>6.1}%  {:<15}  {p50:>6}  {p99:>6}  {p999:>7}  \
                 {p9999:>7}  {max:>8}\n",
                r.threads,
                r.kind.name(),
                rate(r.ids_per_s),
                ns_per_id(r.ids_per_s).map_or_else(|| "-".to_owned(), |ns| format!("{ns:.1}")),
                r.ids_per_s / self.cap_per_s * 100.0,
                shares,
            );
        }
        t += &format!(
            "\nns/ID is wall time per ID over all threads; p50 … max are ns per call, each timed \
             with two clock reads (their own cost: {} ns at p50, included).\n",
            self.overhead
        );
        if !self.cap_measurable() {
            // Ticks longer than the lead are not paced: IDs at the cap come a tick's worth at a
            // time, and over a part shorter than a few ticks the count says when the ticks
            // began, not the rate.
            t += &format!(
                "at the cap: not measured; the layout's {} ms ticks are longer than the {} ms \
                 lead, so IDs at the cap come a tick's worth at a time, and a counted part ({} ms) \
                 spans {:.1} ticks (at least {MIN_COUNTED_TICKS} needed): give --duration {} s or \
                 more\n",
                self.layout.tick_ms(),
                DEFAULT_MAX_LEAD.as_millis(),
                self.counted_part.as_millis(),
                self.counted_ticks(),
                self.duration_for_ticks().as_secs(),
            );
            return t;
        }
        let at_cap: Vec<&Row> = self
            .rows
            .iter()
            .filter(|r| r.ids_per_s >= AT_CAP * self.cap_per_s)
            .collect();
        if at_cap.is_empty() {
            let best = self.rows.iter().map(|r| r.ids_per_s).fold(0.0, f64::max);
            t += &format!(
                "at the cap: not reached; the layout allows {} per node and the best row gave {}, \
                 so no row waited for the cap\n",
                rate(self.cap_per_s),
                rate(best)
            );
        } else {
            t += &format!(
                "at the cap ({}, demand above it, past the lead):\n",
                rate(self.cap_per_s)
            );
            for r in at_cap {
                let latency = if r.latency.is_empty() {
                    "no call ended in the timed part".to_owned()
                } else {
                    let [_, _, _, p9999, max] = percentiles(&r.latency);
                    format!("p99.99 {p9999} ns, max {max} ns")
                };
                t += &format!(
                    "  {}, {}: {:.2}% of the cap, {latency}\n",
                    threads_text(r.threads),
                    r.kind.name(),
                    r.ids_per_s / self.cap_per_s * 100.0
                );
            }
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

    /// How many of the layout's ticks one counted part spans.
    fn counted_ticks(&self) -> f64 {
        self.counted_part.as_secs_f64() / self.layout.tick().as_secs_f64()
    }

    /// The `--duration`, in whole seconds, that gives every counted part
    /// [`MIN_COUNTED_TICKS`] ticks.
    fn duration_for_ticks(&self) -> Duration {
        let windows = 2 * self.threads as u32 - 1;
        let part = self.layout.tick() * MIN_COUNTED_TICKS;
        let least = (WARM_UP + part * 2) * windows;
        Duration::from_secs(least.as_secs() + u64::from(least.subsec_nanos() > 0))
    }

    fn json(&self) -> Value {
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
                    "of_cap": r.ids_per_s / self.cap_per_s,
                    // Unknown (null) when a counted part is too short for the layout's ticks.
                    "at_cap": self
                        .cap_measurable()
                        .then(|| r.ids_per_s >= AT_CAP * self.cap_per_s),
                    "shares": r.shares,
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
            "duration_s": self.args.duration.as_secs_f64(),
            "warm_up_s": WARM_UP.as_secs_f64(),
            "stride": self.stride,
            "counted_part_s": self.counted_part.as_secs_f64(),
            "counted_part_ticks": self.counted_ticks(),
            "machine": machine(),
            "timer_overhead_ns": self.overhead,
            "hot_path": { "ids": self.burst.0, "ns_per_id": self.burst.1 },
            "rows": rows,
        })
    }
}
