//! A node store's costs (`bench --backend …`): a claim and its release, a renewal, a
//! reservation write, each timed one after another, on a layout of the bench's own so that no
//! real node is claimed or pushed ahead.
//!
//! Imports the failure type and the library; `report.rs` writes what it measured.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;
use monoflake::{Layout, NodeRequest, NodeStore};
use serde_json::{Value, json};

use crate::failure::Failure;

/// At most this many of each operation.
const MAX_CALLS: u64 = 2_000;

/// The layout the store is measured on: named `bench`, three node bits and nine sequence bits
/// (a bit shape of its own, `t41-n3-s9-node-high`, shared with no preset).
pub fn bench_layout() -> Layout {
    Layout::builder()
        .name("bench")
        .epoch_ms(Layout::twitter().epoch_ms())
        .node_field("bench", 3)
        .sequence_bits(9)
        .build()
        .expect("a valid layout")
}

/// One operation's latencies, in microseconds.
pub struct Timed {
    pub name: &'static str,
    pub micros: Histogram<u64>,
}

/// What a store costs.
pub struct StoreCosts {
    pub store: String,
    pub ops: Vec<Timed>,
}

fn histogram() -> Histogram<u64> {
    // 1 µs to an hour, 3 significant digits; the bounds are valid, so this cannot fail.
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

fn record(h: &mut Histogram<u64>, start: Instant) {
    let us = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
    let _ = h.record(us.max(1));
}

/// Times each operation for a third of `budget` (at most [`MAX_CALLS`] each).
pub fn measure(store: &dyn NodeStore, budget: Duration) -> Result<StoreCosts, Failure> {
    let layout = bench_layout();
    let share = budget / 3;
    let mut claims = histogram();
    let started = Instant::now();
    while claims.len() < MAX_CALLS && (started.elapsed() < share || claims.is_empty()) {
        let start = Instant::now();
        let claim = store.claim(&layout, NodeRequest::Any)?;
        let until = claim.reserved_until_ms().unwrap_or(0);
        store.release(claim, until)?;
        record(&mut claims, start);
    }
    let claim = store.claim(&layout, NodeRequest::Any)?;
    let mut renewals = histogram();
    let started = Instant::now();
    while renewals.len() < MAX_CALLS && (started.elapsed() < share || renewals.is_empty()) {
        let start = Instant::now();
        store.renew(&claim)?;
        record(&mut renewals, start);
    }
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let mut until = claim.reserved_until_ms().unwrap_or(0).max(now_ms);
    let mut writes = histogram();
    let started = Instant::now();
    while writes.len() < MAX_CALLS && (started.elapsed() < share || writes.is_empty()) {
        until += 1;
        let start = Instant::now();
        store.extend(&claim, until)?;
        record(&mut writes, start);
    }
    store.release(claim, until)?;
    Ok(StoreCosts {
        store: store.describe(),
        ops: vec![
            Timed {
                name: "claim + release",
                micros: claims,
            },
            Timed {
                name: "renewal",
                micros: renewals,
            },
            Timed {
                name: "reservation write",
                micros: writes,
            },
        ],
    })
}

impl StoreCosts {
    /// The table's lines.
    pub fn table(&self) -> String {
        let mut t = format!(
            "\nnode store {} (layout `bench`; off the hot path):\n{:<18}  {:>6}  {:>9}  {:>9}  {:>9}\n",
            self.store, "operation", "calls", "p50 µs", "p99 µs", "max µs"
        );
        for op in &self.ops {
            t += &format!(
                "{:<18}  {:>6}  {:>9}  {:>9}  {:>9}\n",
                op.name,
                op.micros.len(),
                op.micros.value_at_quantile(0.5),
                op.micros.value_at_quantile(0.99),
                op.micros.max(),
            );
        }
        t
    }

    pub fn json(&self) -> Value {
        let ops: Vec<Value> = self
            .ops
            .iter()
            .map(|op| {
                json!({
                    "operation": op.name,
                    "calls": op.micros.len(),
                    "p50_us": op.micros.value_at_quantile(0.5),
                    "p99_us": op.micros.value_at_quantile(0.99),
                    "max_us": op.micros.max(),
                })
            })
            .collect();
        json!({ "name": self.store, "operations": ops })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bench_layout_shares_no_preset_s_node_space() {
        // A shape of no preset: its records are its own (layouts of one shape share them).
        assert_eq!(bench_layout().shape_key(), "t41-n3-s9-node-high");
    }

    #[test]
    fn a_file_store_is_measured_and_written_out() {
        let dir =
            std::env::temp_dir().join(format!("monoflake-bench-store-{}", std::process::id()));
        let store = monoflake::FileStore::open(&dir).unwrap();
        let costs = measure(&store, Duration::from_millis(30)).unwrap();
        assert!(costs.ops.iter().all(|op| !op.micros.is_empty()));
        assert!(costs.table().contains("reservation write"));
        assert_eq!(costs.json()["operations"].as_array().unwrap().len(), 3);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
