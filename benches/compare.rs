//! monoflake against its peers, group by group, with two reference points measured in the
//! same run: one `AtomicU64::fetch_add` and one quanta `raw()` read.
//!
//! `cargo bench --bench compare` (then `python3 benches/report.py` for the tables and plots)

mod peers;

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use monoflake::{CoarseClock, DEFAULT_TICKER_INTERVAL, Generator, Layout};

/// 21 sequence bits: 2 M IDs per ms per node, so no cap binds in these runs.
fn wide() -> Layout {
    Layout::builder()
        .name("wide")
        .node_field("n", 1)
        .sequence_bits(21)
        .build()
        .unwrap()
}

fn hot_path(c: &mut Criterion) {
    let mut g = c.benchmark_group("hot_path");
    g.throughput(Throughput::Elements(1))
        .measurement_time(Duration::from_secs(3));
    let counter = AtomicU64::new(0);
    g.bench_function("AtomicU64::fetch_add", |b| {
        b.iter(|| counter.fetch_add(1, Ordering::Relaxed))
    });
    let clock = quanta::Clock::new();
    g.bench_function("quanta raw()", |b| b.iter(|| clock.raw()));
    let locked = Generator::new(wide(), 1).unwrap();
    g.bench_function("monoflake locked", |b| {
        b.iter(|| black_box(locked.try_next_id().unwrap()))
    });
    let (coarse_clock, _ticker) = CoarseClock::start(DEFAULT_TICKER_INTERVAL).unwrap();
    let coarse = Generator::builder(wide())
        .node(1)
        .clock(coarse_clock)
        .build()
        .unwrap();
    g.bench_function("monoflake coarse", |b| {
        b.iter(|| black_box(coarse.try_next_id().unwrap()))
    });
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
    g.bench_function("monoflake", |b| {
        b.iter(|| black_box(generator.next_id().unwrap()))
    });
    for peer in peers::peers()
        .into_iter()
        .filter(|p| p.capped && p.name != "sonyflake")
    {
        g.bench_function(peer.name, |b| b.iter(|| black_box((peer.next)())));
    }
    g.finish();
}

/// Time for `iters` IDs taken by two threads at once (half each), started together.
fn two_threads(iters: u64, next: &(dyn Fn() -> u64 + Sync)) -> Duration {
    let barrier = Barrier::new(3);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                barrier.wait();
                for _ in 0..iters / 2 {
                    black_box(next());
                }
                barrier.wait();
            });
        }
        barrier.wait();
        let start = Instant::now();
        barrier.wait();
        start.elapsed()
    })
}

fn shared(c: &mut Criterion) {
    let mut g = c.benchmark_group("two_threads");
    g.throughput(Throughput::Elements(1))
        .measurement_time(Duration::from_secs(3));
    let one = Arc::new(Generator::new(wide(), 1).unwrap());
    g.bench_function("monoflake shared state", |b| {
        b.iter_custom(|iters| two_threads(iters, &|| one.try_next_id().unwrap().as_u64()))
    });
    let per_core = Generator::builder(wide())
        .node(1)
        .build_per_core(2)
        .unwrap();
    g.bench_function("monoflake per-core", |b| {
        b.iter_custom(|iters| two_threads(iters, &|| per_core.try_next_id().unwrap().as_u64()))
    });
    for peer in peers::peers().into_iter().filter(|p| p.name != "sonyflake") {
        g.bench_function(peer.name, |b| {
            b.iter_custom(|iters| two_threads(iters, &*peer.next))
        });
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

criterion_group!(benches, hot_path, twitter_cap, shared, batch);
criterion_main!(benches);
