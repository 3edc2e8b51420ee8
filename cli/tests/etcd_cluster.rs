//! Processes sharing one etcd (Debian's etcd-server, started on 127.0.0.1 by each test):
//! distinct nodes, a store that goes away, a holder paused past its TTL.
#![cfg(feature = "etcd")]

#[path = "../../tests/common/mod.rs"]
mod common;

use common::{Reader, stderr_of};

use std::collections::HashSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use monoflake::{Id, Layout};

fn generate(etcd: &str, state: &std::path::Path, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_monoflake"));
    c.args([
        "gen",
        "--backend",
        "etcd",
        "--etcd-endpoints",
        etcd,
        "--layout",
        "sonyflake",
    ])
    .arg("--state-dir")
    .arg(state)
    .args(extra)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    c
}

fn node_of(id: u64) -> u64 {
    Id::from_u64(id).parts(&Layout::sonyflake()).unwrap().node()
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[test]
fn two_processes_with_separate_state_dirs_get_distinct_nodes() {
    let etcd = common::Etcd::start(); // a private server: the node numbers must start at 0
    let (d1, d2) = (
        common::TempDir::new("etcd-a"),
        common::TempDir::new("etcd-b"),
    );
    let mut a = generate(&etcd.endpoint, d1.path(), &["-n", "100000000000"])
        .spawn()
        .unwrap();
    let ra = Reader::spawn(&mut a);
    ra.wait_for(100);
    let b = generate(&etcd.endpoint, d2.path(), &["-n", "1000"])
        .output()
        .unwrap();
    assert!(b.status.success(), "{}", String::from_utf8_lossy(&b.stderr));
    let b_ids: Vec<u64> = String::from_utf8_lossy(&b.stdout)
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    // Ctrl-C: A stops, releases its node (deleting its key at once) and says so.
    common::signal(a.id(), "INT");
    let (code, err) = stderr_of(a);
    let a_ids = ra.finish();
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("interrupted; the node was released"), "{err}");
    let a_node = node_of(a_ids[0]);
    assert_ne!(a_node, node_of(b_ids[0]));
    // The released node is free at once, not after the TTL.
    let c = generate(
        &etcd.endpoint,
        d1.path(),
        &["-n", "10", "--node", &a_node.to_string()],
    )
    .output()
    .unwrap();
    assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
    let c_ids: Vec<u64> = String::from_utf8_lossy(&c.stdout)
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    let max_a = a_ids.iter().max().unwrap();
    assert!(
        c_ids.iter().all(|id| id > max_a),
        "the next holder went below the released one"
    );
}

/// A holder that cannot confirm its claim stops issuing two check intervals (here 2 × 500 ms)
/// after the last check that did, long before its TTL: from where it stands, an etcd it cannot
/// reach and an etcd whose keys someone deleted look the same, and in the second case a
/// successor may already be issuing on its node.
#[test]
fn stopping_etcd_stops_a_running_generator_within_its_confirm_bound() {
    let mut etcd = common::Etcd::start();
    let state = common::TempDir::new("etcd-stop");
    let ttl_s = 2;
    let mut g = generate(
        &etcd.endpoint,
        state.path(),
        &["-n", "100000000000", "--lease-ttl", &ttl_s.to_string()],
    )
    .spawn()
    .unwrap();
    let reader = Reader::spawn(&mut g);
    reader.wait_for(1000);
    etcd.stop();
    let stopped_at = now_ms();
    let (code, err) = stderr_of(g);
    let exited_at = now_ms();
    let ids = reader.finish();
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("issuing is paused") && err.contains("has not been confirmed for 1000 ms"),
        "{err}"
    );
    // Every ID was issued before the confirm bound: two check intervals (1 s) after the last
    // successful check, itself before etcd stopped; an ID's time runs at most `max_lead`
    // (100 ms by default) ahead of its issue.
    let bound_ms = 1000;
    let lead_ms = monoflake::DEFAULT_MAX_LEAD.as_millis() as u64;
    let last_ms = ids
        .iter()
        .map(|&id| {
            Id::from_u64(id)
                .parts(&Layout::sonyflake())
                .unwrap()
                .unix_ms()
        })
        .max()
        .unwrap();
    assert!(
        last_ms < stopped_at + bound_ms + lead_ms,
        "issued at {last_ms}, etcd stopped at {stopped_at}"
    );
    eprintln!(
        "etcd stopped at {stopped_at}; last ID at {last_ms}; exit after {} ms",
        exited_at - stopped_at
    );
}

#[test]
fn a_holder_paused_past_its_ttl_never_collides_with_the_next_holder() {
    let etcd = common::Etcd::start();
    let (d1, d2) = (
        common::TempDir::new("stop-a"),
        common::TempDir::new("stop-b"),
    );
    let mut a = generate(
        &etcd.endpoint,
        d1.path(),
        &["-n", "100000000000", "--node", "3", "--lease-ttl", "2"],
    )
    .spawn()
    .unwrap();
    let ra = Reader::spawn(&mut a);
    ra.wait_for(1000);
    common::signal(a.id(), "STOP");
    // Wait for A's lease to expire, then take its node over.
    let start = Instant::now();
    let b = loop {
        let b = generate(
            &etcd.endpoint,
            d2.path(),
            &["-n", "20000", "--node", "3", "--lease-ttl", "2"],
        )
        .output()
        .unwrap();
        if b.status.success() {
            break b;
        }
        let err = String::from_utf8_lossy(&b.stderr);
        assert!(err.contains("node 3 is held"), "{err}");
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "A's lease never expired"
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    let b_ids: Vec<u64> = String::from_utf8_lossy(&b.stdout)
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(b_ids.len(), 20_000);
    common::signal(a.id(), "CONT");
    let (code, err) = stderr_of(a);
    let a_ids = ra.finish();
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("lease was lost"), "{err}");
    assert!(b_ids.iter().all(|&id| node_of(id) == 3) && a_ids.iter().all(|&id| node_of(id) == 3));
    let a_set: HashSet<u64> = a_ids.iter().copied().collect();
    assert_eq!(a_set.len(), a_ids.len());
    assert!(
        b_ids.iter().all(|id| !a_set.contains(id)),
        "A and B issued the same ID"
    );
    assert!(
        b_ids.iter().min() > a_ids.iter().max(),
        "B must start after everything A could issue"
    );
}

/// A holder of node 3 on a private etcd, stopped (SIGSTOP) once it has printed 10,000 IDs,
/// every key deleted (`etcdctl del --prefix`), and a successor on node 3 started, `successor`
/// setting up its command. The etcd and the state directories live as long as the caller
/// keeps them.
fn paused_with_keys_deleted(
    tag: &str,
    successor: impl FnOnce(&mut Command),
) -> (
    common::Etcd,
    (common::TempDir, common::TempDir),
    std::process::Child,
    Reader,
    std::process::Child,
) {
    let etcd = common::Etcd::start();
    let dirs = (
        common::TempDir::new(&format!("{tag}-a")),
        common::TempDir::new(&format!("{tag}-b")),
    );
    let args = ["-n", "100000000000", "--node", "3", "--lease-ttl", "3"];
    let mut a = generate(&etcd.endpoint, dirs.0.path(), &args)
        .spawn()
        .unwrap();
    let ra = Reader::spawn(&mut a);
    ra.wait_for(10_000);
    common::signal(a.id(), "STOP");
    let (deleted, out) = etcd.ctl(None, &["del", "--prefix", "/monoflake"]);
    assert!(deleted, "{out}");
    let mut command = generate(&etcd.endpoint, dirs.1.path(), &args);
    successor(&mut command);
    let b = command.spawn().unwrap();
    (etcd, dirs, a, ra, b)
}

/// The review's 21,002 duplicates: a holder paused (SIGSTOP) while its records are deleted
/// (`etcdctl del --prefix`) and a successor takes its node, then resumed (SIGCONT) while the
/// successor issues. The successor, finding no record, waits `2.5 x` the check interval and
/// starts past it; the holder issues nothing later than `2 x` the check interval after its last
/// check that found the claim standing, which came before the deletion. So every ID the holder
/// printed lies below the successor's first, and it stops.
#[test]
fn a_holder_paused_while_its_records_are_deleted_never_collides_with_the_successor() {
    let (_etcd, _dirs, a, ra, b) = paused_with_keys_deleted("deleted", |_| {});
    // The successor goes on after the old holder stopped: both ran at once in between.
    let (code, err, a_ids, b_ids) = common::successor_then_resume(a, ra, b);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("lease was lost") || err.contains("has not been confirmed"),
        "{err}"
    );
    common::assert_successor_above(&a_ids, &b_ids);
}

/// Issue 34, case 4 on etcd: as above, with a successor whose wall clock runs 3 s behind
/// (libfaketime: a host whose clock was stepped back, or the holder's locked clock kept after
/// a step back under it). Its own clock would start it below the holder's last IDs (its wait
/// is 1.25 s, the clocks 3 s apart: 38,936 duplicates in the review's run with 5 s); it starts
/// above etcd's clock (the `Date` of its HTTP gateway) at its claim plus the most a confirmed
/// holder may lead, so above everything the holder issued. The holder, resumed, issues
/// nothing more and reports its loss.
#[test]
fn a_holder_paused_with_its_keys_deleted_is_not_overlapped_by_a_successor_behind() {
    let (_etcd, _dirs, a, ra, b) = paused_with_keys_deleted("behind", |b| {
        common::with_wall_clock(b, "-3s");
    });
    let (code, err, a_ids, b_ids) = common::successor_then_resume(a, ra, b);
    assert_eq!(code, Some(1), "{err}");
    common::assert_successor_above(&a_ids, &b_ids);
}

/// An endpoint without a scheme and a CA: etcd-client speaks TLS to it (it does whenever it
/// has TLS options), and so must the reading of etcd's clock — it spoke plain HTTP there,
/// got TLS's refusal back ("not an HTTP answer"), and no generator started on a setup that
/// worked before etcd's clock was read.
#[test]
fn an_endpoint_without_a_scheme_and_a_ca_reads_etcds_clock_over_tls() {
    let dir = common::TempDir::new("etcd-bare-tls");
    let (etcd, cert) = common::Etcd::start_self_signed(dir.path());
    let bare = etcd.endpoint.trim_start_matches("https://");
    let out = generate(
        bare,
        &dir.path().join("state"),
        &["--etcd-ca", cert.to_str().unwrap(), "-n", "3"],
    )
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 3);
}
