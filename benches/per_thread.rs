//! The per-thread generator against the fastest per-thread peer, as an outside benchmark would
//! call them (issue 59): each entrant's call inlined into its measuring loop, the ID kept with
//! `black_box`, interleaved rounds in one run.
//!
//! * **Entrants.** ferroid's thread-local ULID, by name: `Ulid::new_ulid_mono` (monotonic per
//!   thread, yielding on `Pending` as its documentation shows) and `Ulid::new_ulid` (a fresh
//!   random part per ID); and monoflake's per-thread generator, one generator per entrant on
//!   the wide layout (41/1/21) and the coarse clock: `PerThread::next_id` (the thread-local
//!   way in), `LocalSlot::next_id` (a handle) and `LocalSlot::ids` (the handle's iterator,
//!   a new one per slice). Both clocks are of one kind: a word a background thread advances
//!   (ferroid's `MonotonicClock`, monoflake's `CoarseClock`), read with one load per ID.
//! * **One thread**: `ROUNDS` rounds, each running every entrant for a slice of about
//!   `SLICE`, in an order that rotates by one each round; ns per ID per slice, and per round
//!   each entrant's time over `new_ulid_mono`'s.
//! * **Two threads**: `TWO_ROUNDS` rounds of `WINDOW`-long windows per entrant, rotating
//!   likewise: both threads start on a barrier and call back to back (the stop flag looked at
//!   every 64 calls); IDs per second, and per round each entrant's over `new_ulid_mono`'s.
//!
//! `cargo bench --bench per_thread` prints the tables and writes `target/per_thread.json`.
//! About 10 s. `MONOFLAKE_BENCH_ROUNDS=n` and `MONOFLAKE_BENCH_TWO_ROUNDS=n` set the rounds
//! (0: that part is skipped), `MONOFLAKE_BENCH_SLICE_US=n` the one-thread slice.
//!
//! For a figure no load on the machine moves — instructions per ID under valgrind —
//! `per_thread --count ENTRANT N` runs one entrant's timed loop for 1000 calls, then N, and
//! nothing else, so that the instructions valgrind counts in that loop are the entrant's per
//! ID: e.g. `valgrind --tool=callgrind --cache-sim=yes
//! --toggle-collect='per_thread::OneThread::runners::*' target/release/deps/per_thread-HASH
//! --count next_id 2000000` (`Ir`: instructions, `Dr` and `Dw`: loads and stores, over
//! N + 1000). The entrants: `new_ulid_mono`, `new_ulid`, `next_id`,
//! `local_next_id`, `local_ids`.

mod peers;

use std::hint::black_box;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use ferroid::generator::thread_local::Ulid;
use monoflake::{CoarseClock, DEFAULT_TICKER_INTERVAL, Generator, PerThread};
use peers::wide;
use serde_json::json;

const ROUNDS: usize = 101;
const TWO_ROUNDS: usize = 41;
const SLICE: Duration = Duration::from_millis(5);
const WINDOW: Duration = Duration::from_millis(40);

/// The entrants, in table order. The first is the reference every ratio divides by.
const NAMES: [&str; 5] = [
    "ferroid thread_local::Ulid::new_ulid_mono",
    "ferroid thread_local::Ulid::new_ulid",
    "monoflake PerThread::next_id",
    "monoflake LocalSlot::next_id",
    "monoflake LocalSlot::ids",
];
/// `--count`'s names for them.
const SHORT: [&str; 5] = [
    "new_ulid_mono",
    "new_ulid",
    "next_id",
    "local_next_id",
    "local_ids",
];

/// ferroid's monotonic thread-local ULID, as its documentation calls it.
#[inline(always)]
fn ulid_mono() -> u128 {
    Ulid::new_ulid_mono(|_| std::thread::yield_now()).to_raw()
}

/// ferroid's non-monotonic thread-local ULID.
#[inline(always)]
fn ulid() -> u128 {
    Ulid::new_ulid().to_raw()
}

/// `next` called `calls` times, each ID kept from the optimizer: ns per call.
#[inline(always)]
fn slice<T>(mut next: impl FnMut() -> T, calls: u64) -> f64 {
    let start = Instant::now();
    for _ in 0..calls {
        black_box(next());
    }
    start.elapsed().as_nanos() as f64 / calls as f64
}

/// A per-thread generator of its own on the wide layout and the coarse clock.
fn per_thread(clock: &CoarseClock, slots: usize) -> PerThread<CoarseClock> {
    Generator::builder(wide())
        .node(1)
        .clock(clock.clone())
        .build_per_thread(slots)
        .expect("per-thread")
}

/// (median, min, max).
fn spread(v: &[f64]) -> (f64, f64, f64) {
    let [lo, _, m, _, hi] = quantiles(v);
    (m, lo, hi)
}

/// Min, first quartile, median, third quartile, max.
fn quantiles(v: &[f64]) -> [f64; 5] {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    [0.0, 0.25, 0.5, 0.75, 1.0].map(|q| v[((v.len() - 1) as f64 * q).round() as usize])
}

/// `next` called back to back until `stop` (looked at every 64 calls): how many calls.
#[inline(always)]
fn calls_until<T>(stop: &AtomicBool, mut next: impl FnMut() -> T) -> u64 {
    const STRIDE: u64 = 64;
    let mut n = 0u64;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        for _ in 0..STRIDE {
            black_box(next());
        }
        n += STRIDE;
    }
    n
}

/// One entrant on one thread: a slice of `calls` calls, ns per call.
type Runner<'a> = Box<dyn Fn(u64) -> f64 + 'a>;

/// The per-thread generators the one-thread entrants issue from, one each.
struct OneThread {
    implicit: PerThread<CoarseClock>,
    handle: PerThread<CoarseClock>,
    iterator: PerThread<CoarseClock>,
}

impl OneThread {
    fn new(clock: &CoarseClock) -> Self {
        OneThread {
            implicit: per_thread(clock, 2),
            handle: per_thread(clock, 2),
            iterator: per_thread(clock, 2),
        }
    }

    /// The entrants, in [`NAMES`]' order: the one-thread rounds time them, and `--count`
    /// runs one of them under valgrind — the same compiled loops.
    fn runners(&self) -> [Runner<'_>; 5] {
        let handle = self.handle.local().expect("a slot");
        let iterator = std::cell::RefCell::new(self.iterator.local().expect("a slot"));
        [
            Box::new(|calls| slice(ulid_mono, calls)),
            Box::new(|calls| slice(ulid, calls)),
            Box::new(|calls| slice(|| self.implicit.next_id().unwrap(), calls)),
            Box::new(move |calls| slice(|| handle.next_id().unwrap(), calls)),
            Box::new(move |calls| {
                let mut local = iterator.borrow_mut();
                let mut ids = local.ids();
                slice(|| ids.next().unwrap().unwrap(), calls)
            }),
        ]
    }
}

/// Runs entrant `name` for 1000 calls, then `calls`, and nothing else: for an instruction
/// count under valgrind, which counts the entrant's loop (`OneThread::runners`' closure) alone
/// with `--toggle-collect`.
fn count(clock: &CoarseClock, name: &str, calls: u64) {
    let entrants = OneThread::new(clock);
    let runners = entrants.runners();
    let i = SHORT
        .iter()
        .position(|s| *s == name)
        .unwrap_or_else(|| panic!("no entrant {name}: one of {SHORT:?}"));
    runners[i](1000);
    runners[i](calls);
}

/// One thread: ns per ID of every entrant per round, and the per-round ratios.
fn one_thread(clock: &CoarseClock, rounds: usize, slice_len: Duration) -> serde_json::Value {
    let entrants = OneThread::new(clock);
    let runners = entrants.runners();
    // Calls per slice, from a first measurement of each.
    let calls: Vec<u64> = runners
        .iter()
        .map(|run| {
            run(100_000);
            (slice_len.as_nanos() as f64 / run(1_000_000)) as u64
        })
        .collect();
    let mut ns = vec![Vec::new(); NAMES.len()];
    let mut over = vec![Vec::new(); NAMES.len()];
    for round in 0..rounds {
        let mut this = [0.0; NAMES.len()];
        for k in 0..NAMES.len() {
            let i = (round + k) % NAMES.len();
            this[i] = runners[i](calls[i]);
            ns[i].push(this[i]);
        }
        for i in 0..NAMES.len() {
            over[i].push(this[i] / this[0]);
        }
    }
    println!(
        "\none thread, {rounds} interleaved rounds of {slice_len:?} per entrant, each call inlined \
         into its loop:"
    );
    println!(
        "| entrant | ns per ID, median (min – max) | time / new_ulid_mono's, per round: median \
         (quartiles; min – max) |\n|---|---:|---:|"
    );
    let mut rows = Vec::new();
    for (i, name) in NAMES.iter().enumerate() {
        let (m, lo, hi) = spread(&ns[i]);
        let [rlo, r1, r, r3, rhi] = quantiles(&over[i]);
        println!(
            "| {name} | {m:.2} ({lo:.2} – {hi:.2}) | {r:.2}× ({r1:.2} – {r3:.2}; {rlo:.2} – \
             {rhi:.2}) |"
        );
        rows.push(json!({
            "name": name, "ns": [m, lo, hi],
            "over_new_ulid_mono": {"median": r, "q1": r1, "q3": r3, "min": rlo, "max": rhi},
        }));
    }
    json!({"rounds": rounds, "slice_ms": slice_len.as_secs_f64() * 1e3, "rows": rows})
}

/// Two threads: IDs per second of every entrant per round, and the per-round ratios.
fn two_threads(clock: &CoarseClock, rounds: usize) -> serde_json::Value {
    let implicit = per_thread(clock, 2);
    let handles = per_thread(clock, 2);
    let iterators = per_thread(clock, 2);
    type Body<'a> = Box<dyn Fn(&dyn Fn(), &AtomicBool) -> u64 + Sync + 'a>;
    let bodies: [Body; 5] = [
        Box::new(|start, stop| {
            start();
            calls_until(stop, ulid_mono)
        }),
        Box::new(|start, stop| {
            start();
            calls_until(stop, ulid)
        }),
        Box::new(|start, stop| {
            start();
            calls_until(stop, || implicit.next_id().unwrap())
        }),
        Box::new(|start, stop| {
            let local = handles.local().expect("a slot");
            start();
            calls_until(stop, || local.next_id().unwrap())
        }),
        Box::new(|start, stop| {
            let mut local = iterators.local().expect("a slot");
            let mut ids = local.ids();
            start();
            calls_until(stop, || ids.next().unwrap().unwrap())
        }),
    ];
    let mut rates = vec![Vec::new(); NAMES.len()];
    let mut lows = vec![Vec::new(); NAMES.len()];
    let mut over = vec![Vec::new(); NAMES.len()];
    for round in 0..rounds {
        let mut this = [0.0; NAMES.len()];
        for k in 0..NAMES.len() {
            let i = (round + k) % NAMES.len();
            let (counts, elapsed) = peers::window_run(2, WINDOW, &*bodies[i]);
            let total: u64 = counts.iter().sum();
            this[i] = total as f64 / elapsed.as_secs_f64();
            rates[i].push(this[i]);
            lows[i].push(*counts.iter().min().unwrap() as f64 / total.max(1) as f64);
        }
        for i in 0..NAMES.len() {
            over[i].push(this[i] / this[0]);
        }
    }
    println!(
        "\ntwo threads, {rounds} interleaved rounds of {WINDOW:?} windows per entrant, each call inlined into its loop:"
    );
    println!(
        "| entrant | M IDs/s, median (min – max) | IDs/s / new_ulid_mono's, per round: median \
         (quartiles; min – max) | lowest share |\n|---|---:|---:|---:|"
    );
    let mut rows = Vec::new();
    for (i, name) in NAMES.iter().enumerate() {
        let (m, lo, hi) = spread(&rates[i]);
        let [rlo, r1, r, r3, rhi] = quantiles(&over[i]);
        let low = lows[i].iter().copied().fold(1.0, f64::min);
        println!(
            "| {name} | {:.1} ({:.1} – {:.1}) | {r:.2}× ({r1:.2} – {r3:.2}; {rlo:.2} – {rhi:.2}) \
             | {:.1}% |",
            m / 1e6,
            lo / 1e6,
            hi / 1e6,
            low * 100.0
        );
        rows.push(json!({
            "name": name, "ids_per_s": [m, lo, hi],
            "over_new_ulid_mono": {"median": r, "q1": r1, "q3": r3, "min": rlo, "max": rhi},
            "lowest_share": low,
        }));
    }
    json!({"rounds": rounds, "window_ms": WINDOW.as_secs_f64() * 1e3, "rows": rows})
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list" || a == "--test") {
        return; // `cargo test --benches` asks; nothing to list
    }
    let (clock, _ticker) = CoarseClock::start(DEFAULT_TICKER_INTERVAL).expect("ticker");
    if let Some(i) = args.iter().position(|a| a == "--count") {
        let name = args.get(i + 1).expect("--count ENTRANT N");
        let calls = args.get(i + 2).and_then(|n| n.parse().ok()).expect("N");
        count(&clock, name, calls);
        return;
    }
    let rounds = |var: &str, default: usize| {
        std::env::var(var)
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(default)
    };
    let one = rounds("MONOFLAKE_BENCH_ROUNDS", ROUNDS);
    let two = rounds("MONOFLAKE_BENCH_TWO_ROUNDS", TWO_ROUNDS);
    let slice_len = Duration::from_micros(rounds(
        "MONOFLAKE_BENCH_SLICE_US",
        SLICE.as_micros() as usize,
    ) as u64);
    let one = (one > 0).then(|| one_thread(&clock, one, slice_len));
    let two = (two > 0).then(|| two_threads(&clock, two));
    let out = json!({"one_thread": one, "two_threads": two});
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/per_thread.json");
    match std::fs::write(&path, out.to_string()) {
        Ok(()) => eprintln!("wrote {}", path.display()),
        Err(e) => eprintln!("cannot write {}: {e}", path.display()),
    }
}
