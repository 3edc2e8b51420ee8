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
//! Rows: for 1..=N threads one shared generator, a per-core one (from 2 threads) and a
//! per-thread one (each thread takes a slot of its own on its first call and gives it back when
//! it exits), the slotted ones up to the slots the layout's sequence allows; without
//! `--threads`, up to what fits the duration. Before
//! them, one burst from a fresh generator (within its lead, so no cap binds) gives the cost of
//! the hot path itself. The rows running at the layout's cap are the sustained-cap case.
//!
//! * `plan.rs`: which rows a run measures, and how long each measurement is;
//! * `window.rs`: one measurement (threads from one gate through the phases) and the burst;
//! * `report.rs`: the table and the JSON object;
//! * `store.rs`: with `--backend`, the node store's claims, renewals and reservation writes,
//!   timed (a fifth of the run);
//! * this file: the run, from the plan through the measurements to the report.
//!
//! This file uses all three; `window.rs` and `report.rs` read the plan's warm-up, and
//! `report.rs` the rows `window.rs` gives. Nothing imports this file back.

mod plan;
mod report;
mod store;
mod window;

use std::io::Write;
use std::time::Duration;

use monoflake::{CoarseClock, DEFAULT_TICKER_INTERVAL, Generator, Layout, LockedClock, TimeSource};

use self::plan::{MIN_MEASURED, Plan, WARM_UP, per_core_max_slots};
use self::report::{Report, clock_name, threads_text};
use self::store::StoreCosts;
use self::window::{Kind, WAIT_SLICE, burst, stride, timer_overhead, window};
use crate::args::{BenchArgs, ClockArg};
use crate::failure::Failure;
use crate::store::open_named_store;

pub fn run(args: &BenchArgs) -> Result<(), Failure> {
    let layout = args.layout.clone();
    // A store named with --backend takes a fifth of the run, measured first.
    let store = open_named_store(&args.store)?;
    let duration = match store {
        Some(_) => args.duration.mul_f64(0.8),
        None => args.duration,
    };
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
        plan.fit_to(duration);
    }
    let rows = plan.windows();
    let threads = plan.threads;
    let slice = duration / rows as u32;
    let Some(measured) = slice.checked_sub(WARM_UP).filter(|m| *m >= MIN_MEASURED) else {
        let least = match store {
            // The rows get four fifths of the run.
            Some(_) => plan.least().mul_f64(1.25),
            None => plan.least(),
        };
        return Err(Failure {
            code: 2,
            message: format!(
                "--duration {:?} is too short for {rows} measurement{} ({}) of {:?} each \
                 ({WARM_UP:?} warm-up, {MIN_MEASURED:?} measured){}: give at least {least:?}{}",
                args.duration,
                if rows == 1 { "" } else { "s" },
                plan.describe(),
                WARM_UP + MIN_MEASURED,
                if store.is_some() {
                    ", after the fifth the node store takes"
                } else {
                    ""
                },
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
    let costs = match &store {
        Some(store) => {
            progress(format_args!(
                "measuring the node store {}",
                store.describe()
            ));
            Some(store::measure(&**store, args.duration - duration)?)
        }
        None => None,
    };
    let costs = costs.as_ref();
    match args.clock {
        ClockArg::Locked => measure(args, &layout, &plan, measured, costs, LockedClock::new),
        ClockArg::Coarse => {
            let (clock, _ticker) = CoarseClock::start(DEFAULT_TICKER_INTERVAL)?;
            measure(args, &layout, &plan, measured, costs, || clock.clone())
        }
    }
}

fn measure<C: TimeSource + Clone + 'static>(
    args: &BenchArgs,
    layout: &Layout,
    plan: &Plan,
    measured: Duration,
    store: Option<&StoreCosts>,
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
        if n <= plan.per_core_up_to() {
            let per_thread = builder().build_per_thread(n)?;
            let slots = per_thread.slots();
            progress(format_args!(
                "{}, per-thread ({slots} slot{})",
                threads_text(n),
                if slots == 1 { "" } else { "s" }
            ));
            let mut row = window(&per_thread, n, measured, &timer, stride)?;
            row.kind = Kind::PerThread;
            row.slots = Some(slots);
            // Each thread takes a slot of its own, with `1 / slots` of the sequence.
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
        store,
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

/// A line of progress on standard error; one that cannot be written (`2>&1 | head -1`) is
/// dropped, not a panic.
fn progress(what: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr(), "monoflake bench: {what}");
}
