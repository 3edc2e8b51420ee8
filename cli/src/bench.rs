//! `monoflake bench`: how fast this machine issues IDs for one layout and clock.
//!
//! Every measurement runs its threads from one gate (all started, then let go together) for a
//! fixed wall-clock window, so all of them work the whole time:
//!
//! * a **warm-up** past the generator's lead (`DEFAULT_MAX_LEAD` + 50 ms), so a capped layout
//!   is measured in its steady state, not while it borrows ahead;
//! * a **counted** part, calls untimed: IDs per second over all threads and each thread's
//!   share;
//! * a **timed** part, every call timed with two quanta `raw()` reads into an HdrHistogram:
//!   p50 … max per call (the timer's own cost is measured and printed; it is included).
//!
//! Rows: one thread, then for 2..=N threads one shared generator and a per-core one (up to the
//! slots the layout's sequence allows; without `--threads`, up to what fits the duration). Before
//! them, one burst from a fresh generator (within its lead, so no cap binds) gives the cost of
//! the hot path itself. The rows running at the layout's cap are the sustained-cap case.

use std::hint::black_box;
use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use monoflake::{
    CoarseClock, DEFAULT_MAX_LEAD, DEFAULT_TICKER_INTERVAL, Error, Generator, IdGenerator, Layout,
    LockedClock, TimeSource,
};
use serde_json::{Value, json};

use crate::args::{BenchArgs, ClockArg, MAX_DURATION};
use crate::failure::Failure;

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
/// How long one `next_id` waits at the cap before the thread looks at the phase again: a
/// layout's tick can be longer than the generators' default wait (1 s), which failed the run
/// with `TimedOut`, and a thread waiting out a long tick overran its window.
const WAIT_SLICE: Duration = Duration::from_millis(50);

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
    /// A per-core generator's slots (a power of two): its threads use `threads` of them.
    slots: Option<usize>,
    /// What this row's generator allows its threads: the layout's cap, or for a per-core
    /// generator with more slots than threads, the share of the slots they use (each slot has
    /// its own slice of the sequence).
    cap_per_s: f64,
    /// Whether the generator refused a call at its lead limit during the warm-up: it had used
    /// up its lead before the count began. Demand only a little above the cap borrows slowly,
    /// and a count still borrowing reads above the cap (112% at 1.12× the cap).
    past_lead: bool,
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
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = args.threads.map_or(cpus, |n| n as usize);
    let mut plan = Plan {
        threads,
        per_core_max_slots: per_core_max_slots(&layout, threads)?,
        cpus_left_out: None,
    };
    let per_core_for_all = plan.per_core_max_slots;
    if args.threads.is_none() {
        // The default, every CPU, does not fit the default ten seconds past 20 CPUs: measure
        // the thread counts that fit, and say so (it was refused with exit 2).
        plan.fit_to(args.duration);
    }
    let rows = plan.windows();
    let threads = plan.threads;
    let slice = args.duration / rows as u32;
    let Some(measured) = slice.checked_sub(WARM_UP).filter(|m| *m >= MIN_MEASURED) else {
        let least = plan.least();
        return Err(Failure {
            code: 2,
            message: format!(
                "--duration {:?} is too short for {rows} measurement{} ({}) of {:?} each \
                 ({WARM_UP:?} warm-up, {MIN_MEASURED:?} measured): give at least {least:?}{}",
                args.duration,
                if rows == 1 { "" } else { "s" },
                plan.describe(),
                WARM_UP + MIN_MEASURED,
                if threads == 1 {
                    ""
                } else {
                    ", or fewer --threads"
                },
            ),
        });
    };
    if let Some(cpus) = plan.cpus_left_out {
        progress(format_args!(
            "{cpus} CPUs, but --duration {:?} measures {}: give --threads {cpus} and \
             --duration {:?} or more for all",
            args.duration,
            plan.describe(),
            Plan::whole(cpus, per_core_for_all).least(),
        ));
    }
    match args.clock {
        ClockArg::Locked => measure(args, &layout, &plan, measured, LockedClock::new),
        ClockArg::Coarse => {
            let (clock, _ticker) = CoarseClock::start(DEFAULT_TICKER_INTERVAL)?;
            measure(args, &layout, &plan, measured, || clock.clone())
        }
    }
}

/// Which rows a run measures.
struct Plan {
    /// Shared rows for 1..=threads.
    threads: usize,
    /// The most per-core slots the layout allows, when fewer than `threads`: per-core rows
    /// stop there (each slot takes a slice of the sequence bits, and one must be left).
    per_core_max_slots: Option<usize>,
    /// The CPUs, when `--threads` was not given and fewer threads than CPUs fit the duration.
    cpus_left_out: Option<usize>,
}

impl Plan {
    /// Every thread count up to `threads`, per-core up to `per_core_max_slots`.
    fn whole(threads: usize, per_core_max_slots: Option<usize>) -> Self {
        Plan {
            threads,
            per_core_max_slots,
            cpus_left_out: None,
        }
    }

    /// The shortest `--duration` that measures every row.
    fn least(&self) -> Duration {
        (WARM_UP + MIN_MEASURED).saturating_mul(u32::try_from(self.windows()).unwrap_or(u32::MAX))
    }

    /// Fewer threads, down to one, until the rows fit in `duration`.
    fn fit_to(&mut self, duration: Duration) {
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

    /// Per-core rows for 2..=this many threads.
    fn per_core_up_to(&self) -> usize {
        self.per_core_max_slots
            .map_or(self.threads, |max| max.min(self.threads))
    }

    fn windows(&self) -> usize {
        self.threads + self.per_core_up_to().saturating_sub(1)
    }

    fn describe(&self) -> String {
        match (self.threads, self.per_core_up_to()) {
            (1, _) => "1 thread".to_owned(),
            (n, 1) => format!("1 to {n} threads, shared only"),
            (n, m) if m == n => format!("1 to {n} threads, shared and per-core"),
            (n, 2) => format!("1 to {n} threads shared, 2 per-core"),
            (n, m) => format!("1 to {n} threads shared, 2 to {m} per-core"),
        }
    }
}

/// `Some(max)` when a per-core generator for `threads` threads cannot be built because the
/// layout's sequence allows only `max` slots.
fn per_core_max_slots(layout: &Layout, threads: usize) -> Result<Option<usize>, Failure> {
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

fn measure<C: TimeSource + Clone + 'static>(
    args: &BenchArgs,
    layout: &Layout,
    plan: &Plan,
    measured: Duration,
    clock: impl Fn() -> C,
) -> Result<(), Failure> {
    let timer = quanta::Clock::new();
    let overhead = timer_overhead(&timer);
    let cap_per_s = (layout.max_sequence() + 1) as f64 * 1000.0 / layout.tick_ms() as f64;
    let stride = stride(cap_per_s);
    let threads = plan.threads;
    let windows = plan.windows();
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
    let builder = || {
        Generator::builder(layout.clone())
            .clock(clock())
            .max_wait(WAIT_SLICE)
    };
    let shared = builder().build()?;
    let mut rows = Vec::new();
    for n in 1..=threads {
        progress(format_args!("{}, one shared generator", threads_text(n)));
        let mut row = window(&shared, n, measured, &timer, stride)?;
        row.cap_per_s = cap_per_s;
        rows.push(row);
        if n > 1 && n <= plan.per_core_up_to() {
            let per_core = builder().build_per_core(n)?;
            let slots = per_core.slots();
            progress(format_args!("{n} threads, per-core ({slots} slots)"));
            let mut row = window(&per_core, n, measured, &timer, stride)?;
            row.kind = Kind::PerCore;
            row.slots = Some(slots);
            // Each thread has a slot of its own (threads take consecutive numbers, and use
            // slot `number % slots`), with `1 / slots` of the sequence.
            row.cap_per_s = cap_per_s * n as f64 / slots as f64;
            rows.push(row);
        }
    }
    let report = Report {
        args,
        layout,
        threads,
        per_core_max_slots: plan.per_core_max_slots,
        plan_cpus_left_out: plan.cpus_left_out,
        windows,
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

/// A line of progress on standard error; one that cannot be written (`2>&1 | head -1`) is
/// dropped, not a panic.
fn progress(what: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr(), "monoflake bench: {what}");
}

/// The longest call a histogram holds: twice the longest run, so no call is ever dropped (a
/// call at the cap of a layout with long ticks waits up to a tick).
const LONGEST_CALL: Duration = MAX_DURATION.saturating_mul(2);

fn histogram() -> Histogram<u64> {
    // 1 ns to two hours, 3 significant digits; the bounds are valid, so this cannot fail.
    Histogram::new_with_bounds(1, LONGEST_CALL.as_nanos() as u64, 3)
        .expect("valid histogram bounds")
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

/// The hot path alone: IDs from a fresh generator, back to back, half of what it issues without
/// waiting (so no cap binds): its lead, or on ticks longer than the lead its first tick (one
/// lead's worth of a tick of hours was one cold call). Returns (IDs, ns per ID).
fn burst(generator: &impl IdGenerator, cap_per_s: f64) -> Result<(u64, f64), Error> {
    let tick = (generator.layout().max_sequence() as f64 + 1.0) / 2.0;
    let allowed = (cap_per_s * DEFAULT_MAX_LEAD.as_secs_f64() / 2.0).max(tick);
    let n = (allowed as u64).clamp(1, MAX_BURST);
    let start = Instant::now();
    for _ in 0..n {
        black_box(generator.try_next_id()?);
    }
    Ok((n, start.elapsed().as_nanos() as f64 / n as f64))
}

/// One measurement: `n` threads on `generator` from one gate, through the phases.
fn window(
    generator: &(impl IdGenerator + Sync),
    n: usize,
    measured: Duration,
    timer: &quanta::Clock,
    stride: u64,
) -> Result<Row, Failure> {
    let phase = AtomicU8::new(WARM);
    let gate = Gate::default();
    let coordinator = std::thread::current();
    let (results, counted_for, past_lead, spawn_error) = std::thread::scope(|s| {
        let mut workers = Vec::with_capacity(n);
        let mut spawn_error = None;
        for _ in 0..n {
            let (phase, gate) = (&phase, &gate);
            let timer = timer.clone();
            let coordinator = coordinator.clone();
            let spawned = std::thread::Builder::new().spawn_scoped(s, move || {
                gate.arrive_and_wait();
                let result = calls(generator, phase, &timer, stride);
                if result.is_err() {
                    phase.store(STOP, Ordering::Relaxed);
                    coordinator.unpark();
                }
                result
            });
            match spawned {
                Ok(worker) => workers.push(worker),
                Err(e) => {
                    // The threads started wait at the gate: let them through to STOP (with a
                    // barrier they waited for the missing ones forever, after a panic).
                    spawn_error = Some(e);
                    phase.store(STOP, Ordering::Relaxed);
                    break;
                }
            }
        }
        if spawn_error.is_none() {
            gate.wait_for(n);
        }
        let refused = generator.stats().would_block;
        gate.open();
        let advance = |to: u8, after: Duration| {
            // Until `after` has passed, or a thread that failed has stopped everyone.
            let until = Instant::now() + after;
            loop {
                if phase.load(Ordering::Relaxed) == STOP {
                    return;
                }
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                std::thread::park_timeout(left);
            }
            let _ = phase.compare_exchange(to - 1, to, Ordering::Relaxed, Ordering::Relaxed);
        };
        advance(COUNT, WARM_UP);
        let past_lead = generator.stats().would_block > refused;
        let counting = Instant::now();
        advance(TIMED, measured / 2);
        let counted_for = counting.elapsed();
        advance(STOP, measured / 2);
        let results: Vec<_> = workers
            .into_iter()
            .map(|w| w.join().expect("a bench thread panicked"))
            .collect();
        (results, counted_for, past_lead, spawn_error)
    });
    if let Some(e) = spawn_error {
        return Err(Failure {
            code: 1,
            message: format!(
                "cannot start thread {} of {n} for the {n}-thread measurement: {e}; give fewer \
                 --threads",
                results.len() + 1
            ),
        });
    }
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
        kind: Kind::Shared,
        slots: None,
        cap_per_s: 0.0,
        past_lead,
        ids_per_s: total as f64 / counted_for.as_secs_f64(),
        counted_for,
        shares: counts
            .iter()
            .map(|&c| c as f64 / total.max(1) as f64)
            .collect(),
        latency,
    })
}

/// Where a measurement's threads wait until all of them have started (or one could not be).
#[derive(Default)]
struct Gate {
    /// (threads arrived, open).
    state: Mutex<(usize, bool)>,
    changed: Condvar,
}

impl Gate {
    fn lock(&self) -> std::sync::MutexGuard<'_, (usize, bool)> {
        // Nothing panics while holding the lock: a poisoned one holds valid counts.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A thread has started; it waits until the gate opens.
    fn arrive_and_wait(&self) {
        let mut state = self.lock();
        state.0 += 1;
        self.changed.notify_all();
        while !state.1 {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    /// Until `n` threads have arrived.
    fn wait_for(&self, n: usize) {
        let mut state = self.lock();
        while state.0 < n {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    fn open(&self) {
        self.lock().1 = true;
        self.changed.notify_all();
    }
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
                    if !one(generator, phase, WARM)? {
                        break;
                    }
                }
            }
            COUNT => {
                for _ in 0..stride {
                    if !one(generator, phase, COUNT)? {
                        break;
                    }
                    counted += 1;
                }
            }
            TIMED => {
                for _ in 0..stride {
                    let start = timer.raw();
                    if !one(generator, phase, TIMED)? {
                        break;
                    }
                    let _ = h.record(timer.delta_as_nanos(start, timer.raw()).max(1));
                }
            }
            _ => return Ok((counted, h)),
        }
    }
}

/// One ID by `next_id`, which waits at the cap for at most [`WAIT_SLICE`]; past that, while
/// the phase is still `from`, it is asked again. `false` when the phase moved on during a wait
/// (nothing was issued). The common case is the call alone: anything else is out of line.
#[inline(always)]
fn one(generator: &impl IdGenerator, phase: &AtomicU8, from: u8) -> Result<bool, Error> {
    match generator.next_id() {
        Ok(id) => {
            black_box(id);
            Ok(true)
        }
        Err(e) => after_an_error(generator, phase, from, e),
    }
}

/// [`one`] after `next_id` returned `e`: asked again while it is a `TimedOut` and the phase
/// is still `from`.
#[cold]
#[inline(never)]
fn after_an_error(
    generator: &impl IdGenerator,
    phase: &AtomicU8,
    from: u8,
    mut e: Error,
) -> Result<bool, Error> {
    loop {
        match e {
            Error::TimedOut { .. } if phase.load(Ordering::Relaxed) == from => {}
            Error::TimedOut { .. } => return Ok(false),
            e => return Err(e),
        }
        match generator.next_id() {
            Ok(id) => {
                black_box(id);
                return Ok(true);
            }
            Err(next) => e = next,
        }
    }
}

/// Everything measured, for the table or JSON.
struct Report<'a> {
    args: &'a BenchArgs,
    layout: &'a Layout,
    threads: usize,
    /// Per-core rows stop at this many threads, when fewer than `threads`.
    per_core_max_slots: Option<usize>,
    /// The CPUs, when fewer threads than CPUs fit the duration (no `--threads`).
    plan_cpus_left_out: Option<usize>,
    /// How many measurements ran.
    windows: usize,
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
            "hot path: {ns:.1} ns per ID ({n} ID{} back to back from a fresh generator, 1 thread, \
             within its lead)\n\n",
            if n == 1 { "" } else { "s" }
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
            // Not judged where the cap is not measured: over less than a few ticks of a layout
            // whose ticks are longer than the lead, a rate can be any multiple of it.
            let of_cap = self
                .of_cap(r)
                .map_or_else(|| "-".to_owned(), |f| format!("{:.1}%", f * 100.0));
            t += &format!(
                "{:>7}  {:<8}  {:>10}  {:>8}  {:>7}  {:<15}  {p50:>6}  {p99:>6}  {p999:>7}  \
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
                t += &format!("per-core: not measured; the layout's {bits} at most {slots}\n");
            } else {
                t += &format!(
                    "per-core: measured up to {max} threads; the layout's {bits} at most {slots}\n"
                );
            }
        }
        // One line for every per-core row with more slots than threads (up to 256 threads).
        let fewer: Vec<String> = self
            .rows
            .iter()
            .filter_map(|r| {
                let slots = r.slots.filter(|&s| s > r.threads)?;
                Some(format!(
                    "{} threads of {slots} slots, {}",
                    r.threads,
                    rate(r.cap_per_s)
                ))
            })
            .collect();
        if !fewer.is_empty() {
            t += &format!(
                "per-core rows with fewer threads than slots have less than the layout's cap \
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
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_call_as_long_as_a_whole_run_is_recorded() {
        // A call at the cap of a layout with long ticks waits up to a tick; the histogram's
        // old bound (100 s) dropped such a call, and the max understated it.
        let mut h = histogram();
        let longest = MAX_DURATION.as_nanos() as u64;
        h.record(longest).expect("within the histogram's bounds");
        assert!(h.max() >= longest);
    }

    #[test]
    fn the_default_threads_fit_the_duration() {
        // 64 CPUs: 127 rows of 250 ms do not fit ten seconds (refused with exit 2); 20 threads,
        // 39 rows, do.
        let mut plan = Plan::whole(64, None);
        assert_eq!(plan.least(), Duration::from_millis(31_750));
        plan.fit_to(Duration::from_secs(10));
        assert_eq!((plan.threads, plan.windows()), (20, 39));
        assert_eq!(plan.cpus_left_out, Some(64));
        assert!(plan.least() <= Duration::from_secs(10));
        // Per-core rows stopping at 2 slots: 1 + 2·1 + … shared rows only past 2 threads.
        let mut plan = Plan::whole(64, Some(2));
        plan.fit_to(Duration::from_secs(10));
        assert_eq!((plan.threads, plan.windows()), (39, 40));
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

    fn row(threads: usize, kind: Kind, of_cap: f64, past_lead: bool) -> Row {
        let cap = 4_096_000.0;
        let mut latency = histogram();
        latency.record(300).unwrap();
        Row {
            threads,
            kind,
            slots: (kind == Kind::PerCore).then_some(threads),
            cap_per_s: cap,
            past_lead,
            ids_per_s: cap * of_cap,
            counted_for: Duration::from_millis(425),
            shares: vec![1.0 / threads as f64; threads],
            latency,
        }
    }

    fn table_of(rows: &[Row]) -> String {
        let args = BenchArgs {
            layout: Layout::twitter(),
            clock: ClockArg::Locked,
            threads: Some(2),
            duration: Duration::from_secs(1),
            json: false,
        };
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
