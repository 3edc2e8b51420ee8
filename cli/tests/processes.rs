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

/// Runs `monoflake` as user `nobody` (uid/gid 65534) with `setpriv`, or `None` when this test
/// process cannot change users (not root, or no setpriv).
fn as_nobody(state: &Path) -> Option<Command> {
    let uid = Command::new("id").arg("-u").output().ok();
    let root = uid.is_some_and(|o| o.stdout.trim_ascii() == b"0");
    let setpriv = Command::new("setpriv").arg("--version").output();
    if !root || setpriv.map_or(true, |o| !o.status.success()) {
        eprintln!("skipped: needs root and setpriv to run a second user");
        return None;
    }
    let mut c = Command::new("setpriv");
    c.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        env!("CARGO_BIN_EXE_monoflake"),
    ]);
    c.env("MONOFLAKE_STATE_DIR", state);
    Some(c)
}

#[test]
fn two_users_on_one_host_share_the_default_node_space() {
    let base = common::TempDir::new("users");
    let shared = base.path().join("shared");
    let Some(mut nobody) = as_nobody(&shared) else {
        return;
    };
    // root holds node 0 of the host-wide directory (as the default, it is created shared).
    let store = std::sync::Arc::new(FileStore::open_shared(&shared).unwrap());
    let root_holder = monoflake::Generator::builder(Layout::twitter())
        .build_leased(store.clone(), NodeRequest::Any)
        .unwrap();
    assert_eq!(root_holder.node(), 0);
    let root_ids: Vec<Id> = (0..1000).map(|_| root_holder.next_id().unwrap()).collect();
    // Another user's `gen` with the default settings takes another node, never root's.
    let out = nobody.args(["gen", "-n", "1000"]).output().unwrap();
    let theirs = ids(&out);
    let layout = Layout::twitter();
    let node = Id::from_u64(theirs[0]).parts(&layout).unwrap().node();
    assert_ne!(node, 0, "the second user took the first user's node");
    let mut all: HashSet<u64> = root_ids.iter().map(|id| id.as_u64()).collect();
    all.extend(&theirs);
    assert_eq!(all.len(), 2000);
    // The other user's node can be taken over by root afterwards, reservation included.
    let claim = store.claim(&layout, NodeRequest::Exact(node)).unwrap();
    let until = claim.reserved_until_ms().unwrap();
    assert!(
        until
            > Id::from_u64(*theirs.last().unwrap())
                .parts(&layout)
                .unwrap()
                .unix_ms()
    );
    store.extend(&claim, until + 1).unwrap();
    store.release(claim, until + 1).unwrap();
    root_holder.release().unwrap();
}

#[test]
fn a_host_wide_directory_another_user_cannot_write_is_an_error_not_a_private_fallback() {
    let base = common::TempDir::new("users-denied");
    let locked = base.path().join("root-only");
    std::fs::create_dir(&locked).unwrap();
    let Some(mut nobody) = as_nobody(&locked) else {
        return;
    };
    let out = nobody.args(["gen", "-n", "1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("must be writable by every user that runs monoflake"),
        "{err}"
    );
    assert!(
        err.contains(&format!("sudo install -d -m 0777 {}", locked.display())),
        "{err}"
    );
}

#[test]
fn gen_with_standard_output_closed_fails_instead_of_losing_ids() {
    let state = common::TempDir::new("closed-stdout");
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "exec {} gen -n 5 >&-",
            env!("CARGO_BIN_EXE_monoflake")
        ))
        .env("MONOFLAKE_STATE_DIR", state.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("standard output is closed"), "{err}");
    // Sent to /dev/null on purpose, the IDs are discarded and the run succeeds.
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "exec {} gen -n 5 >/dev/null",
            env!("CARGO_BIN_EXE_monoflake")
        ))
        .env("MONOFLAKE_STATE_DIR", state.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn sigterm_releases_the_node_like_ctrl_c() {
    let state = common::TempDir::new("sigterm");
    let mut child = monoflake(state.path())
        .args(["gen", "-n", "2000000000", "--node", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first: u64 = lines.next().unwrap().unwrap().parse().unwrap();
    common::signal(child.id(), "TERM");
    // Drain what it printed before it stopped.
    let mut last = first;
    for line in lines {
        last = line.unwrap().parse().unwrap();
    }
    let status = child.wait().unwrap();
    assert!(
        !status.success(),
        "an interrupted run must not report success"
    );
    assert_eq!(
        status.code(),
        Some(1),
        "released and exited, not killed by the signal"
    );
    // The node is free at once, and its next holder starts above everything printed.
    let next = ids(&monoflake(state.path())
        .args(["gen", "-n", "1", "--node", "0"])
        .output()
        .unwrap());
    assert!(next[0] > last);
}
