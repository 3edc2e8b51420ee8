//! The ratio targets, measured interleaved: on a shared machine whose speed drifts by
//! tens of percent over seconds, criterion's groups (each entrant for 3 s, one after the other)
//! can put two entrants in different weather. Here every round runs every entrant for a short
//! slice, in a rotating order, and each round gives one ratio per target; the figures are the
//! medians (and quartiles) over the rounds.
//!
//! * One thread: ns per ID for ferroid (wide layout), monoflake coarse and locked (wide
//!   layout), and one quanta `raw()` plus one compare-exchange. Ratios: coarse / ferroid,
//!   locked / (`raw()` + compare-exchange). Also the locked clock with a wall clock that runs
//!   100 ppm slower than its counter, so that every comparison begins a slew (a counter that
//!   runs fast), against the same reference. And one load and one compare-exchange alone (no
//!   clock): the most one shared state can issue, on any number of threads.
//! * Two threads sharing one generator: IDs per second over a 100 ms window in which both
//!   threads call back to back, and the smaller thread's share. Ratios: monoflake / ferroid.
//!   In the same rounds, one thread alone on each of monoflake's generators: two threads taking
//!   turns on one state issue no faster than one thread with the state to itself, so one
//!   thread alone over ferroid's two is the most the two-thread ratio could show, and two
//!   threads over one alone is what taking turns keeps of it.
//!
//! Every entrant is called through the same `&dyn Fn() -> u64`. `cargo bench --bench ratios`
//! prints the tables and writes `target/ratios.json` (`report.py` reads it). About 30 s.

mod peers;

use std::hint::black_box;
use std::time::{Duration, Instant};

use monoflake::{
    CoarseClock, DEFAULT_REANCHOR_INTERVAL, DEFAULT_REANCHOR_TOLERANCE, DEFAULT_TICKER_INTERVAL,
    Generator, LockedClock,
};
use peers::wide;
use serde_json::json;

const ROUNDS: usize = 41;
const SLICE: Duration = Duration::from_millis(20);
const TWO_THREAD_ROUNDS: usize = 15;
const WINDOW: Duration = Duration::from_millis(100);

type Next<'a> = &'a (dyn Fn() -> u64 + Sync);

/// ns per call of `next`, over about `SLICE`.
fn slice(next: Next, calls: u64) -> f64 {
    let start = Instant::now();
    for _ in 0..calls {
        black_box(next());
    }
    start.elapsed().as_nanos() as f64 / calls as f64
}

/// Two threads call `next` for `WINDOW`: (IDs per second, the smaller share).
fn window(next: Next) -> (f64, f64) {
    let (counts, elapsed) = peers::window(2, WINDOW, next);
    let total: u64 = counts.iter().sum();
    let low = *counts.iter().min().unwrap() as f64 / total as f64;
    (total as f64 / elapsed.as_secs_f64(), low)
}

/// The wall clock in Unix nanoseconds.
fn wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// (median, first quartile, third quartile).
fn quartiles(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.25), at(0.75))
}

fn main() {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return; // `cargo test --benches` asks; nothing to list
    }
    let ferroid = peers::wide_peers()
        .into_iter()
        .find(|p| p.name.starts_with("ferroid"))
        .expect("ferroid on the wide layout");
    let locked = Generator::new(wide(), 1).expect("generator");
    let (coarse_clock, _ticker) = CoarseClock::start(DEFAULT_TICKER_INTERVAL).expect("ticker");
    let coarse = Generator::builder(wide())
        .node(1)
        .clock(coarse_clock)
        .build()
        .expect("generator");
    // A locked clock whose wall clock runs 100 ppm slower than its counter, as with a counter
    // that runs fast: every comparison finds the clock ahead and begins a slew.
    let (t0, i0) = (wall_ns(), Instant::now());
    let slow_wall = move || t0 + (i0.elapsed().as_nanos() as u64) / 10_000 * 9_999;
    let slewing = Generator::builder(wide())
        .node(1)
        .clock(LockedClock::with_wall_clock(
            slow_wall,
            DEFAULT_REANCHOR_INTERVAL,
            DEFAULT_REANCHOR_TOLERANCE,
        ))
        .build()
        .expect("generator");
    let raw_cas = peers::raw_and_compare_exchange();
    let cas_alone = peers::compare_exchange_alone();
    let entrants: [(&str, Next); 6] = [
        ("ferroid (atomic) wide", &*ferroid.next),
        ("monoflake coarse wide", &|| {
            coarse.try_next_id().unwrap().as_u64()
        }),
        ("monoflake locked wide", &|| {
            locked.try_next_id().unwrap().as_u64()
        }),
        ("quanta raw() + compare_exchange", &raw_cas),
        ("monoflake locked wide, wall clock 100 ppm slow", &|| {
            slewing.try_next_id().unwrap().as_u64()
        }),
        ("compare_exchange alone (no clock)", &cas_alone),
    ];

    // One thread: calls per slice from a first measurement of each.
    let calls: Vec<u64> = entrants
        .iter()
        .map(|(_, next)| {
            slice(*next, 100_000);
            let ns = slice(*next, 1_000_000);
            (SLICE.as_nanos() as f64 / ns) as u64
        })
        .collect();
    let mut ns: Vec<Vec<f64>> = vec![Vec::new(); entrants.len()];
    let (mut coarse_ratio, mut locked_ratio, mut slewing_ratio) =
        (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let mut this = [0.0; 6];
        for k in 0..entrants.len() {
            let i = (round + k) % entrants.len();
            this[i] = slice(entrants[i].1, calls[i]);
            ns[i].push(this[i]);
        }
        coarse_ratio.push(this[1] / this[0]);
        locked_ratio.push(this[2] / this[3]);
        slewing_ratio.push(this[4] / this[3]);
    }
    println!("\none thread, {ROUNDS} interleaved rounds of {SLICE:?} per entrant:");
    println!("| entrant | ns per ID (median) | quartiles |\n|---|---:|---|");
    let mut one = Vec::new();
    for (i, (name, _)) in entrants.iter().enumerate() {
        let (m, q1, q3) = quartiles(ns[i].clone());
        println!("| {name} | {m:.2} | {q1:.2} – {q3:.2} |");
        one.push(json!({"name": name, "ns_median": m, "ns_q1": q1, "ns_q3": q3}));
    }
    let (c, c1, c3) = quartiles(coarse_ratio);
    let (l, l1, l3) = quartiles(locked_ratio);
    let (w, w1, w3) = quartiles(slewing_ratio);
    let skew = slewing.stats().skew_ns;
    println!("coarse / ferroid: {c:.2}× (quartiles {c1:.2} – {c3:.2})");
    println!("locked / (raw() + compare-exchange): {l:.2}× (quartiles {l1:.2} – {l3:.2})");
    println!(
        "locked, wall clock 100 ppm slow / (raw() + compare-exchange): {w:.2}× \
         (quartiles {w1:.2} – {w3:.2}; last skew {skew} ns)"
    );

    // Two threads, one shared generator each; and, in the same rounds, one thread alone on
    // monoflake's generators: two threads taking turns on one state cannot issue faster than
    // one thread that has the state to itself, so that is the ceiling for the row.
    let shared: [(&str, Next); 3] = [entrants[0], entrants[1], entrants[2]];
    let alone: [(&str, Next); 2] = [
        ("monoflake coarse wide, one thread alone", entrants[1].1),
        ("monoflake locked wide, one thread alone", entrants[2].1),
    ];
    let turns = shared.len() + alone.len();
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); turns];
    let mut lows: Vec<Vec<f64>> = vec![Vec::new(); shared.len()];
    let (mut coarse2, mut locked2) = (Vec::new(), Vec::new());
    // Per round: one thread alone over ferroid's two (the most the row could show), and two
    // threads over one alone (what taking turns keeps of it); coarse, then locked.
    let mut ceiling: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let mut kept: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for round in 0..TWO_THREAD_ROUNDS {
        let mut this = [0.0; 5];
        for k in 0..turns {
            let i = (round + k) % turns;
            if let Some((_, next)) = shared.get(i) {
                let (rate, low) = window(*next);
                lows[i].push(low);
                this[i] = rate;
            } else {
                let (counts, elapsed) = peers::window(1, WINDOW, alone[i - shared.len()].1);
                this[i] = counts[0] as f64 / elapsed.as_secs_f64();
            }
            rates[i].push(this[i]);
        }
        coarse2.push(this[1] / this[0]);
        locked2.push(this[2] / this[0]);
        for c in 0..2 {
            ceiling[c].push(this[3 + c] / this[0]);
            kept[c].push(this[1 + c] / this[3 + c]);
        }
    }
    println!(
        "\ntwo threads sharing one generator, {TWO_THREAD_ROUNDS} interleaved rounds of {WINDOW:?}:"
    );
    println!("| entrant | M IDs/s (median) | quartiles | lowest share |\n|---|---:|---|---:|");
    let mut two = Vec::new();
    for (i, (name, _)) in shared.iter().chain(alone.iter()).enumerate() {
        let (m, q1, q3) = quartiles(rates[i].clone());
        let low = lows
            .get(i)
            .map_or(1.0, |l| l.iter().copied().fold(1.0, f64::min));
        println!(
            "| {name} | {:.1} | {:.1} – {:.1} | {:.1}% |",
            m / 1e6,
            q1 / 1e6,
            q3 / 1e6,
            low * 100.0
        );
        two.push(
            json!({"name": name, "ids_per_s_median": m, "q1": q1, "q3": q3, "lowest_share": low}),
        );
    }
    let (c2, c21, c23) = quartiles(coarse2);
    let (l2, l21, l23) = quartiles(locked2);
    println!("coarse / ferroid: {c2:.2}× (quartiles {c21:.2} – {c23:.2})");
    println!("locked / ferroid: {l2:.2}× (quartiles {l21:.2} – {l23:.2})");
    let [ceiling_c, ceiling_l] = ceiling.map(quartiles);
    let [kept_c, kept_l] = kept.map(quartiles);
    for (clock, (m, q1, q3), (k, k1, k3)) in
        [("coarse", ceiling_c, kept_c), ("locked", ceiling_l, kept_l)]
    {
        println!(
            "{clock}: one thread alone / ferroid's two: {m:.2}× (quartiles {q1:.2} – {q3:.2}); \
             two threads / one alone: {k:.2} (quartiles {k1:.2} – {k3:.2})"
        );
    }
    // What one shared state can issue at all: its threads take turns on one cache line, so no
    // more than one thread doing nothing but the compare-exchange.
    let one_state = 1e9 / quartiles(ns[5].clone()).0;
    let ferroid2 = quartiles(rates[0].clone()).0;
    println!(
        "one shared state issues at most {:.1} M/s here (compare_exchange alone, one thread): \
         {:.2}× ferroid's two threads",
        one_state / 1e6,
        one_state / ferroid2
    );

    let out = json!({
        "rounds": ROUNDS,
        "slice_ms": SLICE.as_secs_f64() * 1e3,
        "one": one,
        "coarse_over_ferroid": [c, c1, c3],
        "locked_over_raw_cas": [l, l1, l3],
        "slewing_over_raw_cas": [w, w1, w3],
        "slewing_last_skew_ns": skew,
        "two_thread_rounds": TWO_THREAD_ROUNDS,
        "window_ms": WINDOW.as_secs_f64() * 1e3,
        "two": two,
        "two_coarse_over_ferroid": [c2, c21, c23],
        "two_locked_over_ferroid": [l2, l21, l23],
        "one_state_ids_per_s": one_state,
        "one_state_over_ferroid_two": one_state / ferroid2,
        "alone_coarse_over_ferroid_two": [ceiling_c.0, ceiling_c.1, ceiling_c.2],
        "two_coarse_over_alone": [kept_c.0, kept_c.1, kept_c.2],
        "alone_locked_over_ferroid_two": [ceiling_l.0, ceiling_l.1, ceiling_l.2],
        "two_locked_over_alone": [kept_l.0, kept_l.1, kept_l.2],
    });
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ratios.json");
    match std::fs::write(&path, out.to_string()) {
        Ok(()) => eprintln!("wrote {}", path.display()),
        Err(e) => eprintln!("cannot write {}: {e}", path.display()),
    }
}
