//! monoflake against its peers, one thread at a time, with three reference points measured in
//! the same run: one `AtomicU64::fetch_add`, one quanta `raw()` read, and one `raw()` read plus
//! one compare-exchange (the least a clock-reading lock-free generator can do).
//!
//! `cargo bench --bench compare` (then `python3 benches/report.py` for the tables and plots);
//! one group: `cargo bench --bench compare -- hot_path`. Two threads: `benches/threads.rs`.

mod peers;

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use monoflake::{CoarseClock, DEFAULT_TICKER_INTERVAL, Generator, Layout};
use peers::wide;

/// One entrant of the hot-path group: every one, monoflake, the peers and the references
/// alike, is called through the same boxed closure, so none is inlined into the loop where the
/// others pay an indirect call.
type Next = Box<dyn Fn() -> u64>;

fn hot_path(c: &mut Criterion) {
    let mut g = c.benchmark_group("hot_path");
    g.throughput(Throughput::Elements(1))
        .measurement_time(Duration::from_secs(3));
    let mut entrants: Vec<(&str, Next)> = Vec::new();
    let counter = AtomicU64::new(0);
    entrants.push((
        "AtomicU64::fetch_add",
        Box::new(move || counter.fetch_add(1, Ordering::Relaxed)),
    ));
    let clock = quanta::Clock::new();
    entrants.push(("quanta raw()", Box::new(move || clock.raw())));
    entrants.push((
        "quanta raw() + compare_exchange",
        Box::new(peers::raw_and_compare_exchange()),
    ));
    let locked = Generator::new(wide(), 1).unwrap();
    entrants.push((
        "monoflake locked wide",
        Box::new(move || locked.try_next_id().unwrap().as_u64()),
    ));
    let (coarse_clock, _ticker) = CoarseClock::start(DEFAULT_TICKER_INTERVAL).unwrap();
    let coarse_wide = || {
        Generator::builder(wide())
            .node(1)
            .clock(coarse_clock.clone())
            .build()
            .unwrap()
    };
    let coarse = coarse_wide();
    entrants.push((
        "monoflake coarse wide",
        Box::new(move || coarse.try_next_id().unwrap().as_u64()),
    ));
    // The waiting call, as most programs call it (and as ferroid is called: its `next_id`
    // with a closure for `Pending`); each on a generator of its own.
    let locked_waiting = Generator::new(wide(), 1).unwrap();
    entrants.push((
        "monoflake locked wide, next_id",
        Box::new(move || locked_waiting.next_id().unwrap().as_u64()),
    ));
    let coarse_waiting = coarse_wide();
    entrants.push((
        "monoflake coarse wide, next_id",
        Box::new(move || coarse_waiting.next_id().unwrap().as_u64()),
    ));
    // The per-thread generator on the coarse clock, through a handle (its slot held by this
    // thread for the whole group) and through `next_id`; beside it ferroid's thread-local
    // ULID. Each generator lives as long as the process: a handle borrows its generator.
    let per_thread = || {
        &*Box::leak(Box::new(
            Generator::builder(wide())
                .node(1)
                .clock(coarse_clock.clone())
                .build_per_thread(2)
                .unwrap(),
        ))
    };
    let handle = per_thread().local().unwrap();
    entrants.push((
        "monoflake per-thread coarse wide, LocalSlot",
        Box::new(move || handle.next_id().unwrap().as_u64()),
    ));
    let implicit = per_thread();
    entrants.push((
        "monoflake per-thread coarse wide, next_id",
        Box::new(move || implicit.next_id().unwrap().as_u64()),
    ));
    let ferroid_tl = peers::ferroid_thread_local();
    entrants.push((ferroid_tl.name, ferroid_tl.next));
    for (name, next) in &entrants {
        g.bench_function(*name, |b| b.iter(|| black_box(next())));
    }
    for peer in peers::peers() {
        g.bench_function(peer.name, |b| b.iter(|| black_box((peer.next)())));
    }
    g.finish();
}

fn twitter_cap(c: &mut Criterion) {
    let mut g = c.benchmark_group("twitter_cap");
    g.throughput(Throughput::Elements(1))
        .measurement_time(peers::SUSTAINED);
    let generator = Generator::new(Layout::twitter(), 1).unwrap();
    g.bench_function("monoflake locked", |b| {
        b.iter(|| black_box(generator.next_id().unwrap()))
    });
    for peer in peers::twitter_peers()
        .into_iter()
        .filter(|p| p.capped && p.name != "sonyflake")
    {
        g.bench_function(peer.name, |b| b.iter(|| black_box((peer.next)())));
    }
    g.finish();
}

fn batch(c: &mut Criterion) {
    let mut g = c.benchmark_group("batch");
    g.measurement_time(Duration::from_secs(3));
    let generator = Generator::new(wide(), 1).unwrap();
    let snowflake_me = snowflake_me::Snowflake::builder()
        .machine_id(&|| Ok(1))
        .data_center_id(&|| Ok(1))
        .finalize()
        .unwrap();
    let peers = peers::peers();
    for n in [64u64, 4096] {
        g.throughput(Throughput::Elements(n));
        g.bench_function(format!("monoflake next_ids({n})"), |b| {
            b.iter(|| {
                generator
                    .next_ids(n)
                    .unwrap()
                    .map(|id| id.as_u64())
                    .fold(0, u64::wrapping_add)
            })
        });
        g.bench_function(format!("snowflake_me next_ids({n})"), |b| {
            b.iter(|| black_box(snowflake_me.next_ids(n as usize).unwrap()))
        });
        for peer in peers.iter().filter(|p| !p.capped) {
            g.bench_function(format!("{} x{n}", peer.name), |b| {
                b.iter(|| (0..n).map(|_| (peer.next)()).fold(0, u64::wrapping_add))
            });
        }
    }
    g.finish();
}

criterion_group!(benches, hot_path, twitter_cap, batch);
criterion_main!(benches);
