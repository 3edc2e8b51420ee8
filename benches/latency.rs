//! Latency percentiles per call (criterion reports means only): monoflake and its peers on
//! Twitter's layout, timed call by call with quanta and recorded in HdrHistogram.
//!
//! `cargo bench --bench latency` prints the tables and writes `target/latency.json`;
//! one regime: `cargo bench --bench latency -- sustained` (or `burst`, `paced`).
//!
//! * **burst**: 5 bursts of 400,000 back-to-back calls (about 1.6× what the 4096-per-ms cap
//!   allows in the 100 ms a burst takes), 200 ms apart. monoflake borrows ahead (its
//!   `max_lead` of 100 ms covers a burst); the peers wait at each millisecond boundary.
//! * **sustained**: 1 thread, then 2 threads, calling back to back for 300 ms of warm-up (past
//!   monoflake's 100 ms lead) and then 0.5 s measured, five times per entrant, the entrants
//!   taking turns (interleaved, so that the machine's slow phases fall on all of them): every
//!   call waits for its slot under the cap. Percentiles are over the five windows merged;
//!   throughput is the IDs issued in them against the cap (4,096 per ms).
//!   Beside them, a reference that is no generator: each call takes the next 1/4096 ms slot from
//!   a counter and spins until it opens, the machine's own noise at this pace.
//!   And the per-thread generator (coarse clock) with one slot per thread: each thread paces
//!   its own slot, at the cap's share.
//! * **paced**: 1,000,000 calls paced 1 µs apart (a quarter of the cap).
//! * The timer's own cost (two `raw()` reads) is measured the same way and reported; it is
//!   included in every figure.

mod peers;

use std::hint::black_box;
use std::sync::Barrier;
use std::time::Duration;

use hdrhistogram::Histogram;
use monoflake::{CoarseClock, DEFAULT_TICKER_INTERVAL, Generator, Layout};
use serde_json::{Value, json};

const BURSTS: usize = 5;
const BURST: usize = 400_000;
const PACED: usize = 1_000_000;
const PACE_NS: u64 = 1_000;
const WARM_UP: Duration = Duration::from_millis(300);
/// One measured window of the sustained regime; each entrant has [`SLICES`] of them.
const MEASURED: Duration = Duration::from_millis(500);
/// Windows per entrant in the sustained regime, the entrants taking turns.
const SLICES: usize = 5;
/// Twitter's cap: IDs per millisecond.
const CAP_PER_MS: f64 = 4096.0;

struct Entrant {
    name: &'static str,
    /// Capped by Twitter's 12-bit sequence (the sustained regime runs only these).
    capped: bool,
    /// Only in the sustained regime on this many threads (a per-thread generator with one slot
    /// per thread, whose slots are taken by the threads the regime starts).
    threads: Option<usize>,
    next: Box<dyn Fn() -> u64 + Send + Sync>,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 10_000_000_000, 3).expect("histogram bounds")
}

fn burst(clock: &quanta::Clock, next: &(dyn Fn() -> u64 + Sync)) -> (Histogram<u64>, Value) {
    let mut h = histogram();
    for _ in 0..BURSTS {
        for _ in 0..BURST {
            let start = clock.raw();
            black_box(next());
            let _ = h.record(clock.delta_as_nanos(start, clock.raw()).max(1));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    (h, Value::Null)
}

fn paced(clock: &quanta::Clock, next: &(dyn Fn() -> u64 + Sync)) -> (Histogram<u64>, Value) {
    let mut h = histogram();
    let origin = clock.raw();
    for i in 0..PACED as u64 {
        while clock.delta_as_nanos(origin, clock.raw()) < i * PACE_NS {
            std::hint::spin_loop();
        }
        let start = clock.raw();
        black_box(next());
        let _ = h.record(clock.delta_as_nanos(start, clock.raw()).max(1));
    }
    (h, Value::Null)
}

/// `threads` threads back to back: warm-up, then the measured window, every call timed.
/// Returns the merged histogram and the throughput against the cap.
fn sustained(
    clock: &quanta::Clock,
    next: &(dyn Fn() -> u64 + Sync),
    threads: usize,
) -> (Histogram<u64>, Value) {
    let barrier = Barrier::new(threads);
    let warm = WARM_UP.as_nanos() as u64;
    let end = (WARM_UP + MEASURED).as_nanos() as u64;
    let results: Vec<(Histogram<u64>, u64)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let (clock, barrier) = (clock.clone(), &barrier);
                s.spawn(move || {
                    let mut h = histogram();
                    let mut issued = 0u64;
                    barrier.wait();
                    let origin = clock.raw();
                    loop {
                        let start = clock.raw();
                        black_box(next());
                        let done = clock.raw();
                        let at = clock.delta_as_nanos(origin, done);
                        if at >= end {
                            break;
                        }
                        if clock.delta_as_nanos(origin, start) >= warm {
                            issued += 1;
                            let _ = h.record(clock.delta_as_nanos(start, done).max(1));
                        }
                    }
                    (h, issued)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let mut all = histogram();
    let mut issued = 0;
    for (h, n) in results {
        all.add(h).unwrap();
        issued += n;
    }
    let extra = json!({
        "threads": threads,
        "issued": issued,
        "measured_s": MEASURED.as_secs_f64(),
    });
    (all, extra)
}

/// Several windows' results as one: histograms merged; for the sustained regime the IDs
/// issued over the time measured, as a rate and against the cap.
fn merged(windows: Vec<(Histogram<u64>, Value)>) -> (Histogram<u64>, Value) {
    let mut all = histogram();
    let (mut issued, mut seconds, mut threads) = (0u64, 0f64, Value::Null);
    for (h, extra) in windows {
        all.add(h).unwrap();
        issued += extra["issued"].as_u64().unwrap_or(0);
        seconds += extra["measured_s"].as_f64().unwrap_or(0.0);
        threads = extra["threads"].clone();
    }
    if seconds == 0.0 {
        return (all, Value::Null);
    }
    let extra = json!({
        "threads": threads,
        "ids_per_s": issued as f64 / seconds,
        "of_cap": issued as f64 / (CAP_PER_MS * seconds * 1e3),
    });
    (all, extra)
}

fn row(name: &str, h: &Histogram<u64>, extra: &Value) -> (String, Value) {
    let q = |p: f64| h.value_at_quantile(p);
    let of_cap = extra["of_cap"]
        .as_f64()
        .map(|f| format!(" {:.2}% |", f * 100.0))
        .unwrap_or_default();
    let text = format!(
        "| {name} | {} | {} | {} | {} | {} |{of_cap}",
        q(0.5),
        q(0.99),
        q(0.999),
        q(0.9999),
        h.max()
    );
    let mut json = json!({
        "name": name, "p50": q(0.5), "p99": q(0.99), "p999": q(0.999),
        "p9999": q(0.9999), "max": h.max(),
    });
    if let (Some(o), Some(e)) = (json.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    (text, json)
}

type Run = Box<dyn Fn(&quanta::Clock, &(dyn Fn() -> u64 + Sync)) -> (Histogram<u64>, Value)>;

/// One regime of the bench.
struct Regime {
    /// What a filter on the command line matches.
    key: &'static str,
    title: &'static str,
    /// Only the entrants capped by Twitter's sequence.
    capped_only: bool,
    /// The regime's threads, where it starts its own.
    threads: Option<usize>,
    /// Windows per entrant, the entrants taking turns.
    windows: usize,
    run: Run,
}

fn main() {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return; // `cargo test --benches` asks; nothing to list
    }
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let clock = quanta::Clock::new();
    // The timer's own cost.
    let mut overhead = histogram();
    for _ in 0..1_000_000 {
        let start = clock.raw();
        let _ = overhead.record(clock.delta_as_nanos(start, clock.raw()).max(1));
    }
    let locked = Generator::new(Layout::twitter(), 1).expect("generator");
    let (coarse_clock, _ticker) = CoarseClock::start(DEFAULT_TICKER_INTERVAL).expect("ticker");
    let coarse = Generator::builder(Layout::twitter())
        .node(2)
        .clock(coarse_clock.clone())
        .build()
        .expect("generator");
    // The per-thread generator on the coarse clock with one slot per thread of the regime:
    // each thread paces its own slot at the cap's share (all of it on one thread, half on two).
    let per_thread = |slots: usize| {
        Generator::builder(Layout::twitter())
            .node(3)
            .clock(coarse_clock.clone())
            .build_per_thread(slots)
            .expect("per-thread")
    };
    let (per_thread_1, per_thread_2) = (per_thread(1), per_thread(2));
    let mut entrants = vec![
        Entrant {
            name: "monoflake locked",
            capped: true,
            threads: None,
            next: Box::new(move || locked.next_id().expect("id").as_u64()),
        },
        Entrant {
            name: "monoflake coarse",
            capped: true,
            threads: None,
            next: Box::new(move || coarse.next_id().expect("id").as_u64()),
        },
        Entrant {
            name: "monoflake per-thread coarse (a slot per thread)",
            capped: true,
            threads: Some(1),
            next: Box::new(move || per_thread_1.next_id().expect("id").as_u64()),
        },
        Entrant {
            name: "monoflake per-thread coarse (a slot per thread)",
            capped: true,
            threads: Some(2),
            next: Box::new(move || per_thread_2.next_id().expect("id").as_u64()),
        },
    ];
    // A reference for the machine's own noise at this pace: no generator, each call takes the
    // next 1/4096 ms slot and spins until it opens (what an ideal paced generator would do).
    let pacer_clock = quanta::Clock::new();
    let origin = pacer_clock.raw();
    let last = std::sync::atomic::AtomicU64::new(0);
    entrants.push(Entrant {
        name: "reference: spin to the next slot",
        capped: true,
        threads: None,
        next: Box::new(move || {
            use std::sync::atomic::Ordering::Relaxed;
            // Slots of 1/4096 ms since `origin`; the next one is the later of the last + 1
            // and now (no lead: an idle pacer starts at the present).
            let slot_now =
                || pacer_clock.delta_as_nanos(origin, pacer_clock.raw()) * 4096 / 1_000_000;
            let mut cur = last.load(Relaxed);
            let slot = loop {
                let next = (cur + 1).max(slot_now());
                match last.compare_exchange_weak(cur, next, Relaxed, Relaxed) {
                    Ok(_) => break next,
                    Err(actual) => cur = actual,
                }
            };
            while slot_now() < slot {
                std::hint::spin_loop();
            }
            slot
        }),
    });
    for p in peers::twitter_peers()
        .into_iter()
        .filter(|p| p.name != "sonyflake")
    {
        entrants.push(Entrant {
            name: p.name,
            capped: p.capped,
            threads: None,
            next: p.next,
        });
    }
    let mut json = Vec::new();
    let mut out = String::new();
    let (text, j) = row("timer (2 × raw())", &overhead, &Value::Null);
    json.push(json!({"regime": "timer", "rows": [j]}));
    out += &format!(
        "\ntimer overhead, ns:\n| what | p50 | p99 | p99.9 | p99.99 | max |\n|---|---|---|---|---|---|\n{text}\n"
    );
    let regimes = vec![
        Regime {
            key: "burst",
            title: "bursts at the cap",
            capped_only: false,
            threads: None,
            windows: 1,
            run: Box::new(burst),
        },
        Regime {
            key: "sustained",
            title: "sustained at the cap, 1 thread",
            capped_only: true,
            threads: Some(1),
            windows: SLICES,
            run: Box::new(|c: &quanta::Clock, n: &(dyn Fn() -> u64 + Sync)| sustained(c, n, 1)),
        },
        Regime {
            key: "sustained",
            title: "sustained at the cap, 2 threads",
            capped_only: true,
            threads: Some(2),
            windows: SLICES,
            run: Box::new(|c: &quanta::Clock, n: &(dyn Fn() -> u64 + Sync)| sustained(c, n, 2)),
        },
        Regime {
            key: "paced",
            title: "below the cap",
            capped_only: false,
            threads: None,
            windows: 1,
            run: Box::new(paced),
        },
    ];
    for Regime {
        key,
        title: regime,
        capped_only,
        threads,
        windows: slices,
        run,
    } in regimes
    {
        if filter.as_ref().is_some_and(|f| !key.contains(f.as_str())) {
            continue;
        }
        let mut rows = Vec::new();
        let extra_head = if capped_only { " of cap |" } else { "" };
        let extra_rule = if capped_only { "---:|" } else { "" };
        let mut table = format!(
            "\n{regime}, ns per call:\n| generator | p50 | p99 | p99.9 | p99.99 | max |{extra_head}\n|---|---|---|---|---|---|{extra_rule}\n"
        );
        let chosen: Vec<&Entrant> = entrants
            .iter()
            .filter(|e| e.capped || !capped_only)
            .filter(|e| capped_only || !e.name.starts_with("reference"))
            .filter(|e| e.threads.is_none() || e.threads == threads)
            .collect();
        let mut windows: Vec<Vec<(Histogram<u64>, Value)>> = vec![Vec::new(); chosen.len()];
        for _ in 0..slices {
            for (i, e) in chosen.iter().enumerate() {
                windows[i].push(run(&clock, &*e.next));
            }
        }
        for (e, windows) in chosen.iter().zip(windows) {
            let (h, extra) = if slices == 1 {
                windows.into_iter().next().expect("one window")
            } else {
                merged(windows)
            };
            let (text, j) = row(e.name, &h, &extra);
            eprintln!("{regime}: {text}");
            table += &text;
            table += "\n";
            rows.push(j);
        }
        out += &table;
        json.push(json!({"regime": regime, "rows": rows}));
    }
    println!("{out}");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/latency.json");
    match std::fs::write(&path, Value::Array(json).to_string()) {
        Ok(()) => eprintln!("wrote {}", path.display()),
        Err(e) => eprintln!("cannot write {}: {e}", path.display()),
    }
}
