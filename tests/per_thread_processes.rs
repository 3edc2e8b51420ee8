//! Processes, each with a leased per-thread generator on one file store and several threads
//! issuing at once, in two generations (the second takes over the nodes the first released):
//! no two IDs equal across every thread of every process, and each node's second holder
//! starts above everything its first issued.
//!
//! Its own test binary: it forks, and a forking test wants no other test's threads about.
//! `fork()` has no safe wrapper, so this file allows `unsafe`.
#![allow(unsafe_code)]

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use monoflake::{Error, FileStore, Generator, Id, Layout, NodeRequest};

use common::workers::{read_ids, wait};

const PROCESSES: usize = 4;
const THREADS: usize = 3;
const PER_THREAD: usize = 100_000;

/// A child's work: a leased per-thread generator on the store in `dir`, `THREADS` threads
/// taking `PER_THREAD` IDs each, checked increasing per thread, written to `file`; then the
/// node is released. The exit code says what failed: 4 the build, 5 the file, 6 an ID out of
/// order, 7 the release, 8 an issue.
fn child(dir: &Path, file: &Path) -> i32 {
    let built = FileStore::open(dir).and_then(|store| {
        Generator::builder(Layout::twitter()).build_leased_per_thread(
            Arc::new(store),
            NodeRequest::Any,
            THREADS,
        )
    });
    let g = match built {
        Ok(g) => g,
        Err(e) => {
            eprintln!("child {}: {e}", std::process::id());
            return 4;
        }
    };
    let runs: Vec<Result<Vec<Id>, Error>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|_| s.spawn(|| (0..PER_THREAD).map(|_| g.next_id()).collect()))
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let mut bytes = Vec::with_capacity(THREADS * PER_THREAD * 8);
    for run in runs {
        let run = match run {
            Ok(run) => run,
            Err(e) => {
                eprintln!("child {}: {e}", std::process::id());
                return 8;
            }
        };
        if !run.windows(2).all(|w| w[0] < w[1]) {
            return 6;
        }
        for id in run {
            bytes.extend_from_slice(&id.as_u64().to_le_bytes());
        }
    }
    if g.release().is_err() {
        return 7;
    }
    if std::fs::write(file, bytes).is_err() {
        return 5;
    }
    0
}

#[test]
fn processes_with_per_thread_generators_share_no_id() {
    let state = common::TempDir::new("per-thread-processes-state");
    let out = common::TempDir::new("per-thread-processes-out");
    let layout = Layout::twitter();
    let node_of = |id: u64| Id::from_u64(id).parts(&layout).unwrap().node();
    // node → (the highest ID of the first generation, the lowest of the second).
    let mut by_node: HashMap<u64, (u64, u64)> = HashMap::new();
    let mut all = Vec::new();
    for generation in 0..2 {
        let pids: Vec<_> = (0..PROCESSES)
            .map(|i| {
                let (dir, file) = (
                    state.path().to_owned(),
                    out.path().join(format!("{generation}-{i}")),
                );
                // SAFETY: the parent is quiet while it forks (its only other thread is the
                // test harness's, waiting), so the child may allocate; the child builds its
                // own generator and threads.
                unsafe { common::workers::spawn("fork", move || child(&dir, &file)) }
            })
            .collect();
        for (i, pid) in pids.into_iter().enumerate() {
            assert_eq!(wait(pid), 0, "child {i} of generation {generation} failed");
        }
        for i in 0..PROCESSES {
            let ids = read_ids(&out.path().join(format!("{generation}-{i}")));
            assert_eq!(ids.len(), THREADS * PER_THREAD);
            let node = node_of(ids[0]);
            assert!(
                ids.iter().all(|&id| node_of(id) == node),
                "one node a child"
            );
            let entry = by_node.entry(node).or_insert((0, u64::MAX));
            if generation == 0 {
                entry.0 = entry.0.max(*ids.iter().max().unwrap());
            } else {
                entry.1 = entry.1.min(*ids.iter().min().unwrap());
            }
            all.extend(ids);
        }
    }
    let n = all.len();
    assert_eq!(n, 2 * PROCESSES * THREADS * PER_THREAD);
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "duplicate IDs across processes");
    for (node, (first_high, second_low)) in by_node {
        if first_high > 0 && second_low < u64::MAX {
            assert!(
                second_low > first_high,
                "node {node}: the second holder overlapped"
            );
        }
    }
}
