//! Latency percentiles per call (criterion reports means only): monoflake and its peers, at
//! the Twitter cap and below it, timed call by call with quanta and recorded in HdrHistogram.
//!
//! `cargo bench --bench latency` prints the tables and writes `target/latency.json`.
//!
//! * **At the cap**: 5 bursts of 400,000 back-to-back calls (about 1.6× what the 4096-per-ms
//!   cap allows in the 100 ms a burst takes), 200 ms apart. monoflake borrows ahead (its
//!   `max_lead` of 100 ms covers a burst); the peers wait at each millisecond boundary.
//! * **Below the cap**: 1,000,000 calls paced 1 µs apart (a quarter of the cap).
//! * The timer's own cost (two `raw()` reads) is measured the same way and reported; it is
//!   included in every figure.

mod peers;

use std::hint::black_box;
use std::io::Write;
use std::time::Duration;

use hdrhistogram::Histogram;
use monoflake::{CoarseClock, DEFAULT_TICKER_INTERVAL, Generator, Layout};

const BURSTS: usize = 5;
const BURST: usize = 400_000;
const PACED: usize = 1_000_000;
const PACE_NS: u64 = 1_000;

struct Entrant {
    name: &'static str,
    next: Box<dyn Fn() -> u64>,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 10_000_000_000, 3).expect("histogram bounds")
}

fn at_cap(clock: &quanta::Clock, next: &dyn Fn() -> u64) -> Histogram<u64> {
    let mut h = histogram();
    for _ in 0..BURSTS {
        for _ in 0..BURST {
            let start = clock.raw();
            black_box(next());
            let _ = h.record(clock.delta_as_nanos(start, clock.raw()).max(1));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    h
}

fn paced(clock: &quanta::Clock, next: &dyn Fn() -> u64) -> Histogram<u64> {
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
    h
}

fn row(name: &str, h: &Histogram<u64>) -> (String, String) {
    let q = |p: f64| h.value_at_quantile(p);
    let text = format!(
        "| {name} | {} | {} | {} | {} | {} |",
        q(0.5),
        q(0.99),
        q(0.999),
        q(0.9999),
        h.max()
    );
    let json = format!(
        "{{\"name\":\"{name}\",\"p50\":{},\"p99\":{},\"p999\":{},\"p9999\":{},\"max\":{}}}",
        q(0.5),
        q(0.99),
        q(0.999),
        q(0.9999),
        h.max()
    );
    (text, json)
}

fn main() {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return; // `cargo test --benches` asks; nothing to list
    }
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
        .clock(coarse_clock)
        .build()
        .expect("generator");
    let mut entrants = vec![
        Entrant {
            name: "monoflake locked",
            next: Box::new(move || locked.next_id().expect("id").as_u64()),
        },
        Entrant {
            name: "monoflake coarse",
            next: Box::new(move || coarse.next_id().expect("id").as_u64()),
        },
    ];
    for p in peers::peers().into_iter().filter(|p| p.name != "sonyflake") {
        entrants.push(Entrant {
            name: p.name,
            next: p.next,
        });
    }
    let mut json = Vec::new();
    let mut out = String::new();
    let (text, j) = row("timer (2 × raw())", &overhead);
    json.push(format!("{{\"regime\":\"timer\",\"rows\":[{j}]}}"));
    out += &format!(
        "\ntimer overhead, ns:\n| what | p50 | p99 | p99.9 | p99.99 | max |\n|---|---|---|---|---|---|\n{text}\n"
    );
    for (regime, run) in [
        (
            "at the cap",
            at_cap as fn(&quanta::Clock, &dyn Fn() -> u64) -> Histogram<u64>,
        ),
        ("below the cap", paced),
    ] {
        let mut rows = Vec::new();
        let mut table = format!(
            "\n{regime}, ns per call:\n| generator | p50 | p99 | p99.9 | p99.99 | max |\n|---|---|---|---|---|---|\n"
        );
        for e in &entrants {
            let h = run(&clock, &*e.next);
            let (text, j) = row(e.name, &h);
            eprintln!("{regime}: {text}");
            table += &text;
            table += "\n";
            rows.push(j);
        }
        out += &table;
        json.push(format!(
            "{{\"regime\":\"{regime}\",\"rows\":[{}]}}",
            rows.join(",")
        ));
    }
    println!("{out}");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/latency.json");
    if let Ok(mut f) = std::fs::File::create(&path) {
        let _ = writeln!(f, "[{}]", json.join(","));
        eprintln!("wrote {}", path.display());
    }
}
