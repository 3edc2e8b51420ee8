//! Node-store latencies: claim (+ release), renewal and reservation write, for the file store;
//! when `MONOFLAKE_BENCH_ETCD` names an endpoint (and the `etcd` feature is on), etcd; when
//! `MONOFLAKE_BENCH_PG` holds a connection string (and the `postgres` feature is on),
//! PostgreSQL.
//!
//! `cargo bench --bench stores`
//! `MONOFLAKE_BENCH_ETCD=http://127.0.0.1:2379 cargo bench --features etcd --bench stores`
//! `MONOFLAKE_BENCH_PG=postgres://… cargo bench --features postgres --bench stores`

use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use monoflake::{FileStore, Layout, NodeRequest, NodeStore};

fn bench_store(c: &mut Criterion, name: &str, store: Arc<dyn NodeStore>) {
    let mut g = c.benchmark_group(format!("store/{name}"));
    g.sample_size(20)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500));
    let layout = Layout::twitter();
    g.bench_function("claim + release", |b| {
        b.iter(|| {
            let claim = store.claim(&layout, NodeRequest::Any).unwrap();
            store.release(claim, 1).unwrap();
        })
    });
    let claim = store.claim(&layout, NodeRequest::Any).unwrap();
    g.bench_function("renew", |b| b.iter(|| store.renew(&claim).unwrap()));
    let mut until = 1_900_000_000_000u64;
    g.bench_function("reservation write", |b| {
        b.iter(|| {
            until += 1;
            store.extend(&claim, until).unwrap()
        })
    });
    store.release(claim, until).unwrap();
    g.finish();
}

fn stores(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("monoflake-bench-stores-{}", std::process::id()));
    bench_store(c, "file", Arc::new(FileStore::open(&dir).unwrap()));
    let _ = std::fs::remove_dir_all(&dir);
    #[cfg(feature = "etcd")]
    if let Ok(endpoint) = std::env::var("MONOFLAKE_BENCH_ETCD") {
        let prefix = format!("/bench-{}", std::process::id());
        let store =
            monoflake::EtcdStore::connect(&[&endpoint], &prefix, Duration::from_secs(10)).unwrap();
        bench_store(c, "etcd", Arc::new(store));
    }
    #[cfg(feature = "postgres")]
    if let Ok(url) = std::env::var("MONOFLAKE_BENCH_PG") {
        let options = monoflake::PgOptions::new()
            .table(&format!("bench_{}", std::process::id()))
            .unwrap();
        let store = monoflake::PgStore::connect_with(&url, &options).unwrap();
        bench_store(c, "postgres", Arc::new(store));
    }
}

criterion_group!(benches, stores);
criterion_main!(benches);
