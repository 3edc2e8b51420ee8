//! Prefork servers (gunicorn, celery, uWSGI): a parent that already issued from the
//! process-wide default forks workers, and every worker's `monoflake::next_id()` re-claims a
//! node of its own — however the worker was forked — so no two processes share an ID.
//!
//! Its own test binary: the process-wide default is one per process. `fork()` has no safe
//! wrapper, so this file allows `unsafe`; the library has one block (src/fork.rs).
#![allow(unsafe_code)]

mod common;

use std::collections::HashSet;
use std::sync::Arc;

use monoflake::{FileStore, Generator, Id, Layout, NodeRequest};

use common::workers::{read_ids, wait, work};

/// IDs each worker takes.
const PER_WORKER: usize = 250_000;

/// Forks the way `how` names; the child runs `child` and `_exit`s with its code.
fn spawn(how: &str, child: impl FnOnce() -> i32) -> libc::pid_t {
    // SAFETY: the parent is quiet while it forks (its only other threads are the default
    // generator's keeper, asleep, and the test harness's, waiting), so the child may allocate.
    unsafe { common::workers::spawn(how, child) }
}

#[test]
fn prefork_workers_each_claim_their_own_node_and_share_no_id() {
    let state = common::TempDir::new("prefork-state");
    let out = common::TempDir::new("prefork-out");
    let dir = state.path().to_owned();
    monoflake::configure_default(move || {
        Generator::builder(Layout::twitter())
            .build_leased(Arc::new(FileStore::open(&dir)?), NodeRequest::Any)
    })
    .unwrap();
    // The parent issues before it forks, as a server that warmed up would.
    let parent_before: Vec<u64> = (0..10_000)
        .map(|_| monoflake::next_id().unwrap().as_u64())
        .collect();
    let parent_node = monoflake::default_generator().unwrap().node();

    // Eight workers, forked every way there is; the first forks a worker of its own.
    let kinds = [
        "fork", "fork", "fork", "fork", "fork", "SYS_fork", "_Fork", "SYS_fork",
    ];
    let mut pids = Vec::new();
    for (i, how) in kinds.iter().enumerate() {
        let file = out.path().join(format!("worker-{i}"));
        let grandchild = out.path().join("grandchild");
        pids.push(spawn(how, move || {
            if i == 0 {
                // A worker that forks a worker of its own after it has issued.
                let code = work(1_000, &file.with_extension("early"));
                if code != 0 {
                    return code;
                }
                let pid = spawn("fork", || work(PER_WORKER / 5, &grandchild));
                let code = work(PER_WORKER, &file);
                return if wait(pid) == 0 { code } else { 6 };
            }
            work(PER_WORKER, &file)
        }));
    }
    // The parent goes on issuing while its workers do.
    let parent_after: Vec<u64> = (0..PER_WORKER)
        .map(|_| monoflake::next_id().unwrap().as_u64())
        .collect();
    for (i, pid) in pids.into_iter().enumerate() {
        assert_eq!(wait(pid), 0, "worker {i} ({}) failed", kinds[i]);
    }

    let layout = Layout::twitter();
    let node_of = |id: u64| Id::from_u64(id).parts(&layout).unwrap().node();
    let mut runs = vec![("parent".to_owned(), [parent_before, parent_after].concat())];
    for i in 0..kinds.len() {
        runs.push((
            format!("worker {i}"),
            read_ids(&out.path().join(format!("worker-{i}"))),
        ));
    }
    runs[1].1 = [
        read_ids(&out.path().join("worker-0.early")),
        runs[1].1.clone(),
    ]
    .concat();
    runs.push((
        "grandchild".into(),
        read_ids(&out.path().join("grandchild")),
    ));

    let mut nodes = HashSet::new();
    let mut all = HashSet::new();
    let mut total = 0;
    for (who, ids) in &runs {
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "{who}: IDs not increasing"
        );
        let node = node_of(ids[0]);
        assert!(
            ids.iter().all(|&id| node_of(id) == node),
            "{who} changed node"
        );
        assert!(
            nodes.insert(node),
            "{who} issued under a node another process held"
        );
        total += ids.len();
        all.extend(ids.iter().copied());
    }
    assert_eq!(node_of(runs[0].1[0]), parent_node);
    assert_eq!(total, 10_000 + 9 * PER_WORKER + 1_000 + PER_WORKER / 5);
    assert_eq!(
        all.len(),
        total,
        "{} IDs were issued twice",
        total - all.len()
    );
}
