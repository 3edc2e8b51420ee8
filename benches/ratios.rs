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
//! * The per-thread generator on one thread, on the coarse clock: through a `LocalSlot`
//!   handle and through `next_id` (the thread-local registry), against ferroid's thread-local
//!   monotonic ULID (its per-thread generator). Ratios: each / ferroid's thread-local ULID.
//!   And the harness's own floor: a call that only bumps a plain counter; and the handle, its
//!   iterator (`LocalSlot::ids`, a new one per slice) and ferroid's thread-local ULID with the
//!   call inlined into the measuring loop.
//! * Two threads sharing one generator: IDs per second over a 100 ms window in which both
//!   threads call back to back, and the smaller thread's share. Ratios: monoflake / ferroid.
//!   In the same rounds, one thread alone on each of monoflake's generators: two threads taking
//!   turns on one state issue no faster than one thread with the state to itself, so one
//!   thread alone over ferroid's two is the most the two-thread ratio could show, and two
//!   threads over one alone is what taking turns keeps of it.
//! * In the same rounds, the per-thread generator (coarse clock) on two threads and on one,
//!   by handle, by the handle's iterator (its call inlined into the window's loop) and by
//!   `next_id`: two threads over one is how it scales (nothing is shared but
//!   the clock's word and the fence's, which are only read). Beside them a reference that
//!   shares nothing at all (each thread advances a private number): its two threads over one
//!   is the machine's own ceiling in those rounds, and each way's scaling is also given over it.
//!
//! Every entrant is called through the same `&dyn Fn() -> u64`. `cargo bench --bench ratios`
//! prints the tables and writes `target/ratios.json` (`report.py` reads it). About 40 s.

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
const TWO_THREAD_ROUNDS: usize = 21;
const WINDOW: Duration = Duration::from_millis(100);

type Next<'a> = &'a (dyn Fn() -> u64 + Sync);
/// A one-thread entrant: called on the main thread only.
type One<'a> = &'a dyn Fn() -> u64;
/// A one-thread entrant as a slice of `calls` calls: ns per call.
type Runner<'a> = Box<dyn Fn(u64) -> f64 + 'a>;

/// ns per call of `next`, over about `SLICE`.
fn slice(next: One, calls: u64) -> f64 {
    slice_inlined(next, calls)
}

/// As [`slice`], with `next` known to the compiler: a closure passed here is inlined into the
/// loop (where [`slice`] calls it through `&dyn Fn`).
#[inline(always)]
fn slice_inlined(mut next: impl FnMut() -> u64, calls: u64) -> f64 {
    let start = Instant::now();
    for _ in 0..calls {
        black_box(next());
    }
    start.elapsed().as_nanos() as f64 / calls as f64
}

/// Two threads call `next` for `WINDOW`: (IDs per second, the smaller share).
fn window(next: Next) -> (f64, Option<f64>) {
    let (counts, elapsed) = peers::window(2, WINDOW, next);
    let total: u64 = counts.iter().sum();
    let low = *counts.iter().min().unwrap() as f64 / total as f64;
    (total as f64 / elapsed.as_secs_f64(), Some(low))
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
        .clock(coarse_clock.clone())
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
    let ferroid_tl = peers::ferroid_thread_local();
    // The per-thread generator on the coarse clock: a handle (its slot held by this thread
    // for the whole run) and the thread-local way in, each on a generator of its own.
    let per_thread = Generator::builder(wide())
        .node(1)
        .clock(coarse_clock.clone())
        .build_per_thread(2)
        .expect("per-thread");
    let handle = per_thread.local().expect("a slot");
    // A handle for the iterator (`LocalSlot::ids`), a new iterator per slice.
    let per_thread_ids = Generator::builder(wide())
        .node(1)
        .clock(coarse_clock.clone())
        .build_per_thread(2)
        .expect("per-thread");
    let ids_handle = std::cell::RefCell::new(per_thread_ids.local().expect("a slot"));
    let per_thread_implicit = Generator::builder(wide())
        .node(1)
        .clock(coarse_clock.clone())
        .build_per_thread(2)
        .expect("per-thread");
    // The floor of this harness: a call through `&dyn Fn` that only bumps a plain counter.
    let plain = std::cell::Cell::new(0u64);
    let entrants: [(&str, One); 10] = [
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
        (ferroid_tl.name, &*ferroid_tl.next),
        ("monoflake per-thread coarse wide, LocalSlot", &|| {
            handle.next_id().unwrap().as_u64()
        }),
        ("monoflake per-thread coarse wide, next_id", &|| {
            per_thread_implicit.next_id().unwrap().as_u64()
        }),
        ("a plain counter (the call alone)", &|| {
            plain.set(plain.get() + 1);
            plain.get()
        }),
    ];

    // Each entrant as a slice of calls, and two more whose loop inlines the call: the
    // per-thread handle and ferroid's thread-local ULID without the harness's indirect call.
    let mut runners: Vec<(&str, Runner)> = entrants
        .iter()
        .map(|&(name, next)| {
            let run: Runner = Box::new(move |calls| slice(next, calls));
            (name, run)
        })
        .collect();
    runners.push((
        "ferroid thread-local ULID (monotonic), inlined loop",
        Box::new(|calls| {
            slice_inlined(
                || {
                    let raw = ferroid::generator::thread_local::Ulid::new_ulid_mono(|_| {
                        std::thread::yield_now()
                    })
                    .to_raw();
                    (raw >> 64) as u64 ^ raw as u64
                },
                calls,
            )
        }),
    ));
    runners.push((
        "monoflake per-thread coarse wide, LocalSlot, inlined loop",
        Box::new(|calls| slice_inlined(|| handle.next_id().unwrap().as_u64(), calls)),
    ));
    runners.push((
        "monoflake per-thread coarse wide, LocalSlot::ids, inlined loop",
        Box::new(|calls| {
            let mut local = ids_handle.borrow_mut();
            let mut ids = local.ids();
            slice_inlined(|| ids.next().unwrap().unwrap().as_u64(), calls)
        }),
    ));
    // One thread: calls per slice from a first measurement of each.
    let calls: Vec<u64> = runners
        .iter()
        .map(|(_, run)| {
            run(100_000);
            let ns = run(1_000_000);
            (SLICE.as_nanos() as f64 / ns) as u64
        })
        .collect();
    let mut ns: Vec<Vec<f64>> = vec![Vec::new(); runners.len()];
    let (mut coarse_ratio, mut locked_ratio, mut slewing_ratio) =
        (Vec::new(), Vec::new(), Vec::new());
    let (mut handle_ratio, mut implicit_ratio, mut inlined_ratio, mut ids_ratio) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let mut this = [0.0; 13];
        for k in 0..runners.len() {
            let i = (round + k) % runners.len();
            this[i] = (runners[i].1)(calls[i]);
            ns[i].push(this[i]);
        }
        coarse_ratio.push(this[1] / this[0]);
        locked_ratio.push(this[2] / this[3]);
        slewing_ratio.push(this[4] / this[3]);
        handle_ratio.push(this[7] / this[6]);
        implicit_ratio.push(this[8] / this[6]);
        inlined_ratio.push(this[11] / this[10]);
        ids_ratio.push(this[12] / this[10]);
    }
    println!("\none thread, {ROUNDS} interleaved rounds of {SLICE:?} per entrant:");
    println!("| entrant | ns per ID (median) | quartiles |\n|---|---:|---|");
    let mut one = Vec::new();
    for (i, (name, _)) in runners.iter().enumerate() {
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
    let (h, h1, h3) = quartiles(handle_ratio);
    let (m, m1, m3) = quartiles(implicit_ratio);
    let (n, n1, n3) = quartiles(inlined_ratio);
    let (it, it1, it3) = quartiles(ids_ratio);
    println!(
        "per-thread coarse, LocalSlot / ferroid thread-local ULID: {h:.2}× (quartiles {h1:.2} – \
         {h3:.2}); next_id: {m:.2}× (quartiles {m1:.2} – {m3:.2})"
    );
    println!(
        "per-thread coarse, LocalSlot / ferroid thread-local ULID, both inlined into the loop: \
         {n:.2}× (quartiles {n1:.2} – {n3:.2}); LocalSlot::ids: {it:.2}× (quartiles {it1:.2} – \
         {it3:.2})"
    );
    drop(runners);
    drop(handle);
    drop(ids_handle);

    // Two threads, one shared generator each; and, in the same rounds, one thread alone on
    // monoflake's generators: two threads taking turns on one state cannot issue faster than
    // one thread that has the state to itself, so that is the ceiling for the row. Then the
    // per-thread generator on two threads and on one, by handle and by `next_id`.
    let per_thread2 = Generator::builder(wide())
        .node(1)
        .clock(coarse_clock.clone())
        .build_per_thread(2)
        .expect("per-thread");
    let make_handle = || -> Box<dyn Fn() -> u64 + '_> {
        let local = per_thread2.local().expect("a slot");
        Box::new(move || local.next_id().unwrap().as_u64())
    };
    let make_implicit =
        || -> Box<dyn Fn() -> u64 + '_> { Box::new(|| per_thread2.next_id().unwrap().as_u64()) };
    // The machine's own scaling: each thread advances a private number (a multiply and an
    // add), sharing nothing — what two threads over one can be here at best, in the same
    // rounds (two cores' clocks, the host's other guests).
    let private_body = |start: &dyn Fn(), stop: &std::sync::atomic::AtomicBool| {
        let mut x = 1u64;
        start();
        peers::calls_until(stop, || {
            x = x.wrapping_mul(3).wrapping_add(1);
            x
        })
    };
    // A handle's iterator on each thread, its call inlined into the window's loop.
    let ids_body = |start: &dyn Fn(), stop: &std::sync::atomic::AtomicBool| {
        let mut local = per_thread2.local().expect("a slot");
        let mut ids = local.ids();
        start();
        peers::calls_until(stop, || ids.next().unwrap().unwrap().as_u64())
    };
    let shared_next: [Next; 3] = [
        &*ferroid.next,
        &|| coarse.try_next_id().unwrap().as_u64(),
        &|| locked.try_next_id().unwrap().as_u64(),
    ];
    /// One turn of a round: (IDs per second, the lower share when two threads ran).
    type Turn<'a> = Box<dyn Fn() -> (f64, Option<f64>) + 'a>;
    let rate = |counts: &[u64], elapsed: Duration| {
        let total: u64 = counts.iter().sum();
        let low =
            (counts.len() > 1).then(|| *counts.iter().min().unwrap() as f64 / total.max(1) as f64);
        (total as f64 / elapsed.as_secs_f64(), low)
    };
    let turns: Vec<(&str, Turn)> = vec![
        ("ferroid (atomic) wide", Box::new(|| window(shared_next[0]))),
        ("monoflake coarse wide", Box::new(|| window(shared_next[1]))),
        ("monoflake locked wide", Box::new(|| window(shared_next[2]))),
        (
            "monoflake coarse wide, one thread alone",
            Box::new(|| {
                let (c, e) = peers::window(1, WINDOW, shared_next[1]);
                rate(&c, e)
            }),
        ),
        (
            "monoflake locked wide, one thread alone",
            Box::new(|| {
                let (c, e) = peers::window(1, WINDOW, shared_next[2]);
                rate(&c, e)
            }),
        ),
        (
            "monoflake per-thread coarse wide, LocalSlot, 2 threads",
            Box::new(|| {
                let (c, e) = peers::window_each(2, WINDOW, &make_handle);
                rate(&c, e)
            }),
        ),
        (
            "monoflake per-thread coarse wide, LocalSlot, 1 thread",
            Box::new(|| {
                let (c, e) = peers::window_each(1, WINDOW, &make_handle);
                rate(&c, e)
            }),
        ),
        (
            "monoflake per-thread coarse wide, LocalSlot::ids, 2 threads",
            Box::new(|| {
                let (c, e) = peers::window_run(2, WINDOW, &ids_body);
                rate(&c, e)
            }),
        ),
        (
            "monoflake per-thread coarse wide, LocalSlot::ids, 1 thread",
            Box::new(|| {
                let (c, e) = peers::window_run(1, WINDOW, &ids_body);
                rate(&c, e)
            }),
        ),
        (
            "monoflake per-thread coarse wide, next_id, 2 threads",
            Box::new(|| {
                let (c, e) = peers::window_each(2, WINDOW, &make_implicit);
                rate(&c, e)
            }),
        ),
        (
            "monoflake per-thread coarse wide, next_id, 1 thread",
            Box::new(|| {
                let (c, e) = peers::window_each(1, WINDOW, &make_implicit);
                rate(&c, e)
            }),
        ),
        (
            "reference: a private number per thread (nothing shared), 2 threads",
            Box::new(|| {
                let (c, e) = peers::window_run(2, WINDOW, &private_body);
                rate(&c, e)
            }),
        ),
        (
            "reference: a private number per thread (nothing shared), 1 thread",
            Box::new(|| {
                let (c, e) = peers::window_run(1, WINDOW, &private_body);
                rate(&c, e)
            }),
        ),
    ];
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); turns.len()];
    let mut lows: Vec<Vec<f64>> = vec![Vec::new(); turns.len()];
    let (mut coarse2, mut locked2) = (Vec::new(), Vec::new());
    // Per round: one thread alone over ferroid's two (the most the row could show), and two
    // threads over one alone (what taking turns keeps of it); coarse, then locked.
    let mut ceiling: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let mut kept: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    // Per round: the per-thread generator's two threads over one, by handle, by its iterator
    // and by next_id; then the reference's (the machine's own).
    let mut scaling: [Vec<f64>; 4] = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
    // Per round: each way's scaling over the reference's.
    let mut against: [Vec<f64>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    for round in 0..TWO_THREAD_ROUNDS {
        let mut this = [0.0; 13];
        for k in 0..turns.len() {
            let i = (round + k) % turns.len();
            let (r, low) = (turns[i].1)();
            if let Some(low) = low {
                lows[i].push(low);
            }
            this[i] = r;
            rates[i].push(r);
        }
        coarse2.push(this[1] / this[0]);
        locked2.push(this[2] / this[0]);
        for c in 0..2 {
            ceiling[c].push(this[3 + c] / this[0]);
            kept[c].push(this[1 + c] / this[3 + c]);
        }
        for (c, scale) in scaling.iter_mut().enumerate() {
            scale.push(this[5 + 2 * c] / this[6 + 2 * c]);
        }
        let machine = this[11] / this[12];
        for (c, over) in against.iter_mut().enumerate() {
            over.push(this[5 + 2 * c] / this[6 + 2 * c] / machine);
        }
    }
    println!(
        "\ntwo threads, {TWO_THREAD_ROUNDS} interleaved rounds of {WINDOW:?} (one shared \
         generator; one thread alone on it; the per-thread generator on two threads and on one):"
    );
    println!("| entrant | M IDs/s (median) | quartiles | lowest share |\n|---|---:|---|---:|");
    let mut two = Vec::new();
    for (i, (name, _)) in turns.iter().enumerate() {
        let (m, q1, q3) = quartiles(rates[i].clone());
        let low = lows[i].iter().copied().fold(1.0, f64::min);
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
    let [scale_h, scale_i, scale_m, scale_r] = scaling.map(quartiles);
    let [over_h, over_i, over_m] = against.map(quartiles);
    println!(
        "per-thread coarse, two threads / one: LocalSlot {:.2}× (quartiles {:.2} – {:.2}), \
         LocalSlot::ids {:.2}× (quartiles {:.2} – {:.2}), next_id {:.2}× (quartiles {:.2} – \
         {:.2})",
        scale_h.0,
        scale_h.1,
        scale_h.2,
        scale_i.0,
        scale_i.1,
        scale_i.2,
        scale_m.0,
        scale_m.1,
        scale_m.2
    );
    println!(
        "the machine's own scaling, a private number per thread, two threads / one: {:.2}× \
         (quartiles {:.2} – {:.2}); per-thread coarse against it, per round: LocalSlot {:.2} \
         (quartiles {:.2} – {:.2}), LocalSlot::ids {:.2} (quartiles {:.2} – {:.2}), next_id \
         {:.2} (quartiles {:.2} – {:.2})",
        scale_r.0,
        scale_r.1,
        scale_r.2,
        over_h.0,
        over_h.1,
        over_h.2,
        over_i.0,
        over_i.1,
        over_i.2,
        over_m.0,
        over_m.1,
        over_m.2
    );
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
        "per_thread_handle_over_ferroid_tl": [h, h1, h3],
        "per_thread_next_id_over_ferroid_tl": [m, m1, m3],
        "per_thread_handle_inlined_over_ferroid_tl_inlined": [n, n1, n3],
        "per_thread_ids_inlined_over_ferroid_tl_inlined": [it, it1, it3],
        "per_thread_handle_two_over_one": [scale_h.0, scale_h.1, scale_h.2],
        "per_thread_ids_two_over_one": [scale_i.0, scale_i.1, scale_i.2],
        "per_thread_next_id_two_over_one": [scale_m.0, scale_m.1, scale_m.2],
        "private_two_over_one": [scale_r.0, scale_r.1, scale_r.2],
        "per_thread_handle_scaling_over_private": [over_h.0, over_h.1, over_h.2],
        "per_thread_ids_scaling_over_private": [over_i.0, over_i.1, over_i.2],
        "per_thread_next_id_scaling_over_private": [over_m.0, over_m.1, over_m.2],
    });
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ratios.json");
    match std::fs::write(&path, out.to_string()) {
        Ok(()) => eprintln!("wrote {}", path.display()),
        Err(e) => eprintln!("cannot write {}: {e}", path.display()),
    }
}
