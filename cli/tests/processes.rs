//! Many processes, restarts, crashes and a clock set back, through the `monoflake` CLI on the
//! file backend (the embedded default).

#[path = "../../tests/common/mod.rs"]
mod common;

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use monoflake::{FileStore, Id, Layout, NodeRequest, NodeStore};

fn monoflake(state: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_monoflake"));
    c.env("MONOFLAKE_STATE_DIR", state);
    c
}

fn ids(out: &Output) -> Vec<u64> {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.parse().unwrap())
        .collect()
}

#[test]
fn eight_processes_at_once_on_one_state_dir() {
    let state = common::TempDir::new("eight");
    let children: Vec<_> = (0..8)
        .map(|_| {
            monoflake(state.path())
                .args(["gen", "-n", "200000"])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut all = HashSet::new();
    // Per node, the (first, last) ID of each process that held it.
    let mut runs: std::collections::BTreeMap<u64, Vec<(u64, u64)>> = Default::default();
    let layout = Layout::twitter();
    for child in children {
        let out = child.wait_with_output().unwrap();
        let ids = ids(&out);
        assert_eq!(ids.len(), 200_000);
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "a process went back");
        let node = Id::from_u64(ids[0]).parts(&layout).unwrap().node();
        assert!(
            ids.iter()
                .all(|&id| Id::from_u64(id).parts(&layout).unwrap().node() == node)
        );
        runs.entry(node)
            .or_default()
            .push((ids[0], ids[ids.len() - 1]));
        all.extend(ids);
    }
    assert_eq!(all.len(), 1_600_000, "duplicates across processes");
    // A node may be handed on by a process that finished before another started (the
    // processes need not overlap), but only in turn: the later holder's IDs lie above the
    // earlier one's.
    for (node, mut held) in runs {
        held.sort_unstable();
        for pair in held.windows(2) {
            assert!(
                pair[0].1 < pair[1].0,
                "node {node} was held by two processes at once: {held:?}"
            );
        }
    }
}

#[test]
fn restart_with_the_clock_set_back_an_hour() {
    let state = common::TempDir::new("faketime");
    let before = ids(&monoflake(state.path())
        .args(["gen", "-n", "1000"])
        .output()
        .unwrap());
    let mut set_back = Command::new("faketime");
    set_back
        .args([
            "-f",
            "-1h",
            env!("CARGO_BIN_EXE_monoflake"),
            "gen",
            "-n",
            "1000",
        ])
        .env("MONOFLAKE_STATE_DIR", state.path());
    let out = set_back
        .output()
        .expect("faketime is not installed: apt-get install -y faketime (bash .ci/run does)");
    let after = ids(&out);
    let max_before = *before.iter().max().unwrap();
    assert!(
        after.iter().all(|&id| id > max_before),
        "an ID after the restart is not above the earlier ones"
    );
    // The faked clock really was an hour back: `date` under the same faketime says so.
    let faked = Command::new("faketime")
        .args(["-f", "-1h", "date", "+%s"])
        .output()
        .unwrap();
    let faked: u64 = String::from_utf8_lossy(&faked.stdout)
        .trim()
        .parse()
        .unwrap();
    let real = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(real - faked > 3500, "faketime did not set the clock back");
}

#[test]
fn kill_9_then_restart() {
    let state = common::TempDir::new("kill9");
    let mut child = monoflake(state.path())
        .args(["gen", "-n", "100000000000", "--layout", "sonyflake"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Read a good number of IDs, then kill it mid-stream.
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut written = Vec::new();
    let mut line = String::new();
    while written.len() < 50_000 {
        line.clear();
        reader.read_line(&mut line).unwrap();
        written.push(line.trim().parse::<u64>().unwrap());
    }
    common::signal(child.id(), "KILL");
    // Whatever it had written out before dying counts too.
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut reader, &mut rest).unwrap();
    written.extend(rest.lines().filter_map(|l| l.parse::<u64>().ok()));
    let _ = child.wait();
    let max_written = *written.iter().max().unwrap();
    let after = ids(&monoflake(state.path())
        .args(["gen", "-n", "1000", "--layout", "sonyflake"])
        .output()
        .unwrap());
    assert_eq!(
        Id::from_u64(after[0])
            .parts(&Layout::sonyflake())
            .unwrap()
            .node(),
        0,
        "the killed node is free again"
    );
    assert!(after.iter().all(|&id| id > max_written));
}

#[test]
fn more_claimants_than_node_ids_is_a_clear_error() {
    let state = common::TempDir::new("full");
    // Hold every node ID of the js-safe layout (64) in this process.
    let store = FileStore::open(state.path()).unwrap();
    let held: Vec<_> = (0..64)
        .map(|_| store.claim(&Layout::js_safe(), NodeRequest::Any).unwrap())
        .collect();
    let out = monoflake(state.path())
        .args(["gen", "--layout", "js-safe"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("all 64 node IDs of the layout are held"),
        "{err}"
    );
    // An exact node that is held.
    let out = monoflake(state.path())
        .args(["gen", "--layout", "js-safe", "--node", "5"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("node 5 is held by another live claimant")
    );
    drop(held);
    // Free again.
    let out = monoflake(state.path())
        .args(["gen", "--layout", "js-safe", "--node", "5"])
        .output()
        .unwrap();
    assert!(out.status.success());
}

#[test]
fn an_unwritable_state_dir_is_a_clear_error() {
    let state = common::TempDir::new("unwritable");
    let file = state.path().join("file");
    std::fs::write(&file, "").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_monoflake"))
        .args(["gen", "--state-dir"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("state directory: cannot create") && err.contains("file"),
        "{err}"
    );
}

#[test]
fn the_etcd_backend_without_the_feature_or_server_is_a_clear_error() {
    let state = common::TempDir::new("noetcd");
    let port = common::free_port();
    let out = monoflake(state.path())
        .args([
            "gen",
            "--backend",
            "etcd",
            "--etcd-endpoints",
            &format!("http://127.0.0.1:{port}"),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if cfg!(feature = "etcd") {
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains(&format!("node store etcd http://127.0.0.1:{port}")),
            "{err}"
        );
    } else {
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("without the `etcd` feature"), "{err}");
    }
}
