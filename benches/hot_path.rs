//! The hot path: one ID, single thread, next to the cost of its parts (one quanta `raw()` read,
//! one `AtomicU64::fetch_add`) measured in the same run.
//!
//! `cargo bench --bench hot_path`

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use monoflake::{CoarseClock, DEFAULT_TICKER_INTERVAL, Generator, Layout};

/// 21 sequence bits: 2 M IDs per ms, so the cap never binds in a single thread.
fn wide() -> Layout {
    Layout::builder()
        .name("wide")
        .time_bits(41)
        .node_field("n", 1)
        .sequence_bits(21)
        .build()
        .unwrap()
}

fn reference(c: &mut Criterion) {
    let mut g = c.benchmark_group("reference");
    g.throughput(Throughput::Elements(1));
    let counter = AtomicU64::new(0);
    g.bench_function("AtomicU64::fetch_add", |b| {
        b.iter(|| counter.fetch_add(1, Ordering::Relaxed))
    });
    let clock = quanta::Clock::new();
    g.bench_function("quanta::Clock::raw", |b| b.iter(|| clock.raw()));
    g.finish();
}

fn hot_path(c: &mut Criterion) {
    let mut g = c.benchmark_group("hot_path");
    g.throughput(Throughput::Elements(1));
    let locked = Generator::new(wide(), 1).unwrap();
    g.bench_function("monoflake locked clock", |b| {
        b.iter(|| black_box(locked.try_next_id().unwrap()))
    });
    let (clock, _ticker) = CoarseClock::start(DEFAULT_TICKER_INTERVAL).unwrap();
    let coarse = Generator::builder(wide())
        .node(1)
        .clock(clock)
        .build()
        .unwrap();
    g.bench_function("monoflake coarse clock", |b| {
        b.iter(|| black_box(coarse.try_next_id().unwrap()))
    });
    g.finish();
}

fn at_cap(c: &mut Criterion) {
    let mut g = c.benchmark_group("twitter_at_cap");
    g.throughput(Throughput::Elements(1));
    g.measurement_time(Duration::from_secs(5));
    let generator = Generator::new(Layout::twitter(), 1).unwrap();
    g.bench_function("monoflake next_id", |b| {
        b.iter(|| black_box(generator.next_id().unwrap()))
    });
    g.finish();
}

fn batch(c: &mut Criterion) {
    let mut g = c.benchmark_group("batch");
    for n in [64u64, 4096] {
        g.throughput(Throughput::Elements(n));
        let generator = Generator::new(wide(), 1).unwrap();
        g.bench_function(format!("monoflake next_ids({n})"), |b| {
            b.iter(|| {
                generator
                    .next_ids(n)
                    .unwrap()
                    .map(|id| id.as_u64())
                    .fold(0, u64::wrapping_add)
            })
        });
    }
    g.finish();
}

criterion_group!(benches, reference, hot_path, at_cap, batch);
criterion_main!(benches);
