//! Two threads sharing one generator, measured over sustained windows: both threads start on a
//! barrier and call `next` back to back for a fixed wall-clock window; each counts its own IDs.
//! The figure is the total per second over the window and each thread's share of it, so a
//! generator that lets one thread starve the other shows it. Then, for the generators on the
//! wide layout, one window with every call timed (p50 … max per call under contention).
//! Before measuring, each 64-bit generator is checked: 2 × 200,000 IDs under contention, all
//! distinct.
//!
//! `cargo bench --bench threads` prints the tables and writes `target/threads.json`
//! (`report.py` reads it). About a minute: 3 windows of 1 s per entrant.

mod peers;

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use hdrhistogram::Histogram;
use monoflake::{CoarseClock, DEFAULT_TICKER_INTERVAL, Generator, Layout};
use peers::wide;
use serde_json::json;

const THREADS: usize = 2;
const WINDOW: Duration = Duration::from_secs(1);
const WINDOWS: usize = 3;
/// Calls between two looks at the stop flag.
const STRIDE: u64 = 64;

type Next = Box<dyn Fn() -> u64 + Send + Sync>;

struct Entrant {
    name: String,
    /// On the wide layout: also timed call by call.
    wide: bool,
    next: Next,
}

/// One window: (IDs per thread, elapsed).
fn window(next: &(dyn Fn() -> u64 + Sync)) -> (Vec<u64>, Duration) {
    peers::window(THREADS, WINDOW, next)
}

/// One window with every call timed (two quanta `raw()` reads), all threads' calls merged.
fn timed_window(next: &(dyn Fn() -> u64 + Sync)) -> Histogram<u64> {
    let clock = quanta::Clock::new();
    let barrier = Barrier::new(THREADS + 1);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                let clock = clock.clone();
                let (barrier, stop) = (&barrier, &stop);
                s.spawn(move || {
                    let mut h = histogram();
                    barrier.wait();
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..STRIDE {
                            let start = clock.raw();
                            black_box(next());
                            let _ = h.record(clock.delta_as_nanos(start, clock.raw()).max(1));
                        }
                    }
                    h
                })
            })
            .collect();
        barrier.wait();
        std::thread::sleep(WINDOW);
        stop.store(true, Ordering::Relaxed);
        let mut all = histogram();
        for w in workers {
            all.add(w.join().unwrap()).unwrap();
        }
        all
    })
}

/// Two threads take `PER_THREAD` IDs each from `next`; every ID must be distinct (a
/// generator that issues duplicates under contention is not compared).
fn distinct_under_contention(next: &(dyn Fn() -> u64 + Sync)) -> bool {
    const PER_THREAD: usize = 200_000;
    let mut all: Vec<u64> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|_| s.spawn(|| (0..PER_THREAD).map(|_| next()).collect::<Vec<_>>()))
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    all.sort_unstable();
    all.dedup();
    all.len() == THREADS * PER_THREAD
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 10_000_000_000, 3).expect("histogram bounds")
}

fn entrants() -> Vec<Entrant> {
    let mut all = Vec::new();
    let mut push = |name: &str, wide: bool, next: Next| {
        all.push(Entrant {
            name: name.to_owned(),
            wide,
            next,
        })
    };
    let counter = Arc::new(AtomicU64::new(0));
    push(
        "AtomicU64::fetch_add",
        false,
        Box::new(move || counter.fetch_add(1, Ordering::Relaxed)),
    );
    push(
        "quanta raw() + compare_exchange (one try)",
        false,
        Box::new(peers::raw_and_compare_exchange()),
    );
    let locked = Generator::new(wide(), 1).expect("generator");
    push(
        "monoflake locked wide",
        true,
        Box::new(move || locked.try_next_id().expect("id").as_u64()),
    );
    let (coarse_clock, ticker) = CoarseClock::start(DEFAULT_TICKER_INTERVAL).expect("ticker");
    // The ticker lives as long as the process.
    std::mem::forget(ticker);
    let coarse = Generator::builder(wide())
        .node(1)
        .clock(coarse_clock.clone())
        .build()
        .expect("generator");
    push(
        "monoflake coarse wide",
        true,
        Box::new(move || coarse.try_next_id().expect("id").as_u64()),
    );
    let per_core = Generator::builder(wide())
        .node(1)
        .build_per_core(THREADS)
        .expect("per-core");
    push(
        "monoflake locked wide, per-core",
        false,
        Box::new(move || per_core.try_next_id().expect("id").as_u64()),
    );
    let per_core = Generator::builder(wide())
        .node(1)
        .clock(coarse_clock)
        .build_per_core(THREADS)
        .expect("per-core");
    push(
        "monoflake coarse wide, per-core",
        false,
        Box::new(move || per_core.try_next_id().expect("id").as_u64()),
    );
    for p in peers::wide_peers() {
        push(p.name, true, p.next);
    }
    let twitter = Generator::new(Layout::twitter(), 1).expect("generator");
    push(
        "monoflake locked twitter",
        false,
        Box::new(move || twitter.next_id().expect("id").as_u64()),
    );
    for p in peers::twitter_peers()
        .into_iter()
        .filter(|p| p.name != "sonyflake")
    {
        push(p.name, false, p.next);
    }
    all
}

fn main() {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return; // `cargo test --benches` asks; nothing to list
    }
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let mut rows = Vec::new();
    println!(
        "\ntwo threads, one shared generator, {WINDOWS} windows of {WINDOW:?} (median window):\n\
         | generator | M IDs/s | ns per ID | thread shares | windows (M/s) |\n|---|---:|---:|---|---|"
    );
    for e in entrants() {
        if filter
            .as_ref()
            .is_some_and(|f| !e.name.contains(f.as_str()))
        {
            continue;
        }
        // 64-bit generators only: the 128-bit ones are folded to 64 bits here, and the
        // references are not generators.
        let generator = e.name.starts_with("monoflake")
            || [
                "ferroid",
                "idgenerator",
                "snowflaked",
                "rs-snowflake",
                "snowflake_me",
            ]
            .iter()
            .any(|p| e.name.starts_with(p));
        if generator {
            assert!(
                distinct_under_contention(&*e.next),
                "{} issued a duplicate under two threads",
                e.name
            );
        }
        let mut windows: Vec<(f64, Vec<f64>)> = (0..WINDOWS)
            .map(|_| {
                let (counts, elapsed) = window(&*e.next);
                let total: u64 = counts.iter().sum();
                let rate = total as f64 / elapsed.as_secs_f64();
                let shares = counts.iter().map(|&c| c as f64 / total as f64).collect();
                (rate, shares)
            })
            .collect();
        let all_rates: Vec<f64> = windows.iter().map(|w| w.0 / 1e6).collect();
        windows.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (rate, shares) = windows[WINDOWS / 2].clone();
        let min_share = windows
            .iter()
            .flat_map(|w| w.1.iter().copied())
            .fold(1.0f64, f64::min);
        let latency = e.wide.then(|| {
            let h = timed_window(&*e.next);
            let q = |p: f64| h.value_at_quantile(p);
            json!({"p50": q(0.5), "p99": q(0.99), "p999": q(0.999), "p9999": q(0.9999), "max": h.max()})
        });
        let share_text: Vec<String> = shares
            .iter()
            .map(|s| format!("{:.1}%", s * 100.0))
            .collect();
        let window_text: Vec<String> = all_rates.iter().map(|r| format!("{r:.1}")).collect();
        println!(
            "| {} | {:.1} | {:.2} | {} | {} |",
            e.name,
            rate / 1e6,
            1e9 / rate,
            share_text.join(" / "),
            window_text.join(", ")
        );
        rows.push(json!({
            "name": e.name,
            "ids_per_s": rate,
            "ns_per_id": 1e9 / rate,
            "shares": shares,
            "min_share": min_share,
            "windows_m_per_s": all_rates,
            "latency": latency,
        }));
    }
    println!("\nper call under contention (two threads, ns, timer included):");
    println!("| generator | p50 | p99 | p99.9 | p99.99 | max |\n|---|---:|---:|---:|---:|---:|");
    for r in &rows {
        if let Some(l) = r["latency"].as_object() {
            println!(
                "| {} | {} | {} | {} | {} | {} |",
                r["name"].as_str().unwrap_or(""),
                l["p50"],
                l["p99"],
                l["p999"],
                l["p9999"],
                l["max"]
            );
        }
    }
    let out = json!({"threads": THREADS, "window_s": WINDOW.as_secs_f64(), "rows": rows});
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/threads.json");
    match std::fs::write(&path, out.to_string()) {
        Ok(()) => eprintln!("wrote {}", path.display()),
        Err(e) => eprintln!("cannot write {}: {e}", path.display()),
    }
}
