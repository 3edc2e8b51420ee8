//! A prefork server whose parent is still building its process-wide default when it forks a
//! worker (a thread of the parent issued first, and the build takes a while: a claim, a
//! reservation write, the wait of a node with no record): the worker builds its own and
//! issues under a node of its own.
//!
//! Its own test binary: the process-wide default is one per process. `fork()` has no safe
//! wrapper, so this file allows `unsafe`.
#![allow(unsafe_code)]

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use monoflake::{FileStore, Generator, Id, Layout, NodeRequest};

use common::workers::{read_ids, wait, work};

/// IDs each process takes.
const IDS: usize = 50_000;

/// Forks; the child runs `child` and `_exit`s with its code.
fn spawn(child: impl FnOnce() -> i32) -> libc::pid_t {
    // SAFETY: libc's `fork` leaves the allocator usable in the child whatever the parent's
    // other threads were doing; the child takes no lock those threads hold (the building
    // thread holds only its own generation's, which the child never takes).
    unsafe { common::workers::spawn("fork", child) }
}

/// Waits (a liveness bound only) until `path` exists.
fn wait_for(path: &Path) {
    let start = Instant::now();
    while !path.exists() {
        assert!(start.elapsed() < Duration::from_secs(60), "never built");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_worker_forked_while_the_parent_builds_its_default_builds_its_own() {
    let state = common::TempDir::new("prefork-building-state");
    let out = common::TempDir::new("prefork-building-out");
    // The embedded default (no configuration), in a child of its own: it reads
    // MONOFLAKE_STATE_DIR, set there only.
    let embedded = state.path().join("embedded");
    let worker_file = out.path().join("embedded-worker");
    let parent_file = out.path().join("embedded-parent");
    let (e, w, p) = (embedded.clone(), worker_file.clone(), parent_file.clone());
    let first = spawn(move || {
        // SAFETY: this child has one thread.
        unsafe { std::env::set_var("MONOFLAKE_STATE_DIR", &e) };
        // The building thread: a fresh node waits a quarter of a second after its claim.
        let builder = std::thread::spawn(move || work(IDS, &p));
        wait_for(&e.join("twitter/node-0.lock"));
        let pid = spawn(|| work(IDS, &w));
        let code = builder.join().unwrap();
        if code != 0 { code } else { wait(pid) }
    });
    assert_eq!(wait(first), 0, "the embedded default's worker failed");

    // A configured default whose builder is slow.
    let dir = state.path().join("configured");
    let built = out.path().join("built");
    let signal = built.clone();
    monoflake::configure_default(move || {
        let leased = Generator::builder(Layout::twitter())
            .build_leased(Arc::new(FileStore::open(&dir)?), NodeRequest::Any)?;
        std::fs::write(&signal, "").unwrap();
        std::thread::sleep(Duration::from_millis(500));
        Ok(leased)
    })
    .unwrap();
    let configured_file = out.path().join("configured-parent");
    let parent_out = configured_file.clone();
    let builder = std::thread::spawn(move || work(IDS, &parent_out));
    wait_for(&built);
    let worker_out = out.path().join("configured-worker");
    let wo = worker_out.clone();
    let pid = spawn(move || work(IDS, &wo));
    assert_eq!(builder.join().unwrap(), 0);
    assert_eq!(wait(pid), 0, "the configured default's worker failed");

    let layout = Layout::twitter();
    let node_of = |id: u64| Id::from_u64(id).parts(&layout).unwrap().node();
    for (parent, worker) in [(parent_file, worker_file), (configured_file, worker_out)] {
        let (parent, worker) = (read_ids(&parent), read_ids(&worker));
        assert_eq!((parent.len(), worker.len()), (IDS, IDS));
        assert_ne!(node_of(parent[0]), node_of(worker[0]));
        let mut all: Vec<u64> = parent.iter().chain(&worker).copied().collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 2 * IDS, "an ID was issued by both");
    }
}
