//! Issue 60: `monoflake serve` whose host's wall clock is stepped 2 s, a minute and an hour
//! past the real time while it serves, then back — libfaketime moves the running process's
//! clock (`FAKETIME_TIMESTAMP_FILE`, re-read at every reading); PostgreSQL and etcd run on the
//! real clock. Its generator's clock follows the wall clock only as far as the store's clock
//! confirms, so it keeps its lease: no 503, no ID twice, none ahead of the real time by more
//! than the lead and `max_lead`, and a successor on the same node starts above them all. And
//! a lease lost while the wall clock is an hour ahead: each reclaim is refused, naming both
//! clocks, until the wall clock is right; then it serves again within the reclaim period.
#![cfg(feature = "server")]

#[path = "../../tests/common/mod.rs"]
mod common;
mod server;

use std::collections::HashSet;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use server::{Server, agent, get, ids_of};

/// The wall clock's offsets, one phase each, as libfaketime reads them.
const STEPS: [(&str, i64); 5] = [
    ("+0", 0),
    ("+2", 2_000),
    ("+60", 60_000),
    ("+3600", 3_600_000),
    ("+0", 0),
];

fn wanted(var: &str) -> bool {
    let set = std::env::var(var).is_ok_and(|v| !v.is_empty());
    if !set {
        eprintln!("skipped: {var} is unset (bash .ci/run sets it)");
    }
    set
}

/// libfaketime for a server whose wall clock follows the offset in `file`.
fn faked(file: &Path) -> Vec<(String, String)> {
    vec![
        (
            "LD_PRELOAD".into(),
            common::libfaketime().to_str().unwrap().into(),
        ),
        (
            "FAKETIME_TIMESTAMP_FILE".into(),
            file.to_str().unwrap().into(),
        ),
        ("FAKETIME_NO_CACHE".into(), "1".into()),
        ("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into()),
    ]
}

fn start_faked(args: &[&str], env: &[(String, String)]) -> Server {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    Server::try_start_with_env(args, &env)
        .unwrap_or_else(|(code, log)| panic!("serve exited with {code:?}:\n{log}"))
}

/// What a run of requests saw in one phase.
#[derive(Debug, Default)]
struct Phase {
    /// The wall clock's offset, ms.
    offset_ms: i64,
    /// `monoflake_clock_held_back_seconds` at the phase's end, ms.
    held_back_ms: u64,
    served: usize,
    refused: Vec<String>,
    longest_gap_ms: u128,
    ahead_ms: i64,
}

/// Steps `clock` (a libfaketime file) through [`STEPS`], `phase` each, while one client asks
/// `s` for 100 IDs at a time; returns every ID and what each phase saw.
fn ride(
    s: &Server,
    clock: &Path,
    layout: &monoflake::Layout,
    phase: Duration,
) -> (Vec<u64>, Vec<Phase>) {
    let stop = AtomicBool::new(false);
    let current = Mutex::new(Phase::default());
    let ids = Mutex::new(Vec::new());
    let mut phases = Vec::new();
    let url = s.url("/v1/ids?count=100");
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let a = agent();
            let mut last_ok = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                let answer = get(&a, &url, &[]);
                let mut p = current.lock().unwrap();
                match answer.status {
                    200 => {
                        let got = ids_of(&answer);
                        let newest = *got.iter().max().unwrap();
                        let ms = monoflake::Id::from(newest).parts(layout).unwrap().unix_ms();
                        p.ahead_ms = p.ahead_ms.max(ms as i64 - common::system_ms() as i64);
                        p.served += got.len();
                        p.longest_gap_ms = p.longest_gap_ms.max(last_ok.elapsed().as_millis());
                        last_ok = Instant::now();
                        ids.lock().unwrap().extend(got);
                    }
                    _ => {
                        p.refused
                            .push(format!("{}: {}", answer.status, answer.body));
                        drop(p);
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
            }
        });
        for (offset, offset_ms) in STEPS {
            std::fs::write(clock, format!("{offset}\n")).unwrap();
            std::thread::sleep(phase);
            let metrics = get(&agent(), &s.url("/metrics"), &[]).body;
            let held_back = metrics
                .lines()
                .find_map(|l| l.strip_prefix("monoflake_clock_held_back_seconds "))
                .and_then(|v| v.parse::<f64>().ok())
                .expect("the held-back gauge");
            let mut p = std::mem::take(&mut *current.lock().unwrap());
            p.offset_ms = offset_ms;
            p.held_back_ms = (held_back * 1_000.0) as u64;
            eprintln!("wall clock {offset} s: {p:?}");
            phases.push(p);
        }
        stop.store(true, Ordering::Relaxed);
    });
    (ids.into_inner().unwrap(), phases)
}

/// The run's IDs unique, the successor's (node `node`, an honest clock) above them all.
fn successor_above(args: &[&str], ids: &[u64]) {
    let unique: HashSet<u64> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "an ID served twice");
    let s = Server::start(args);
    let a = agent();
    let next = ids_of(&get(&a, &s.url("/v1/ids?count=1000"), &[]));
    let highest = *ids.iter().max().unwrap();
    assert!(
        next.iter().all(|&id| id > highest),
        "the successor's {next:?} not above {highest}"
    );
    let (status, _) = s.stop();
    assert!(status.success());
}

fn judge(phases: &[Phase]) {
    for (k, p) in phases.iter().enumerate() {
        assert!(p.refused.is_empty(), "phase {k}: {p:?}");
        assert!(p.served > 0, "phase {k}: {p:?}");
        // The lead (250 ms) and max_lead (100 ms).
        assert!(
            p.ahead_ms <= 351,
            "phase {k}: IDs {} ms ahead: {p:?}",
            p.ahead_ms
        );
        // The step reached the process (libfaketime), and its clock did not follow it.
        if p.offset_ms >= 2_000 {
            assert!(
                p.held_back_ms + 1_000 >= p.offset_ms as u64,
                "phase {k}: {p:?}"
            );
        }
    }
    eprintln!(
        "longest gaps between answers, ms: {:?}",
        phases.iter().map(|p| p.longest_gap_ms).collect::<Vec<_>>()
    );
}

fn twitter() -> monoflake::Layout {
    monoflake::Layout::twitter()
}

#[cfg(feature = "postgres")]
#[test]
fn serve_on_postgres_rides_through_wall_clock_steps_forward() {
    if !wanted("MONOFLAKE_TEST_PG") {
        return;
    }
    let pg = common::Pg::shared();
    let dir = common::TempDir::new("serve-clock-pg");
    let url = dir.path().join("url");
    std::fs::write(&url, format!("{}\n", pg.url)).unwrap();
    let table = format!("serve_clock_{}", std::process::id());
    let clock = dir.path().join("faketime");
    std::fs::write(&clock, "+0\n").unwrap();
    let args = [
        "--backend",
        "postgres",
        "--pg-url-file",
        url.to_str().unwrap(),
        "--pg-table",
        &table,
        "--node",
        "2",
    ];
    let s = start_faked(&args, &faked(&clock));
    let (ids, phases) = ride(&s, &clock, &twitter(), Duration::from_secs(3));
    let (status, log) = s.stop();
    assert!(status.success(), "{log}");
    judge(&phases);
    successor_above(&args, &ids);
}

#[cfg(feature = "etcd")]
#[test]
fn serve_on_etcd_rides_through_wall_clock_steps_forward() {
    if !wanted("MONOFLAKE_TEST_ETCD") {
        return;
    }
    let etcd = common::Etcd::shared();
    let dir = common::TempDir::new("serve-clock-etcd");
    let prefix = format!("/serve-clock-{}", std::process::id());
    let clock = dir.path().join("faketime");
    std::fs::write(&clock, "+0\n").unwrap();
    let args = [
        "--backend",
        "etcd",
        "--etcd-endpoints",
        &etcd.endpoint,
        "--etcd-prefix",
        &prefix,
        "--node",
        "2",
    ];
    let s = start_faked(&args, &faked(&clock));
    let (ids, phases) = ride(&s, &clock, &twitter(), Duration::from_secs(3));
    let (status, log) = s.stop();
    assert!(status.success(), "{log}");
    judge(&phases);
    successor_above(&args, &ids);
}

/// A lease lost while the wall clock is an hour ahead (the node's row deleted): every reclaim
/// is refused, the refusal naming both clocks, until the wall clock is right; then `serve`
/// serves again within its reclaim period and a claim's wait. IDs unique throughout.
#[cfg(feature = "postgres")]
#[test]
fn serve_on_postgres_reclaims_once_the_wall_clock_is_right() {
    if !wanted("MONOFLAKE_TEST_PG") {
        return;
    }
    let pg = common::Pg::shared();
    let dir = common::TempDir::new("serve-reclaim-pg");
    let url = dir.path().join("url");
    std::fs::write(&url, format!("{}\n", pg.url)).unwrap();
    let table = format!("serve_reclaim_{}", std::process::id());
    let clock = dir.path().join("faketime");
    std::fs::write(&clock, "+0\n").unwrap();
    let args = [
        "--backend",
        "postgres",
        "--pg-url-file",
        url.to_str().unwrap(),
        "--pg-table",
        &table,
    ];
    let s = start_faked(&args, &faked(&clock));
    let a = agent();
    let mut ids: Vec<u64> = ids_of(&get(&a, &s.url("/v1/ids?count=100"), &[]));
    std::fs::write(&clock, "+3600\n").unwrap();
    // Let the clock's next comparison (within a second) meet the hour ahead, then take the
    // node away: the lease is lost at the next renewal.
    std::thread::sleep(Duration::from_millis(1_500));
    ids.extend(ids_of(&get(&a, &s.url("/v1/ids?count=100"), &[])));
    pg.psql(&format!("DELETE FROM {table}"));
    let refused = Instant::now();
    while !s.log().contains("no node can be claimed yet") {
        assert!(refused.elapsed() < server::GUARD, "{}", s.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = s.log();
    let line = log
        .lines()
        .find(|l| l.contains("no node can be claimed yet"))
        .unwrap();
    assert!(
        line.contains("this clock read ") && line.contains("the database's 20"),
        "{line}"
    );
    assert_eq!(get(&a, &s.url("/readyz"), &[]).status, 503);
    std::fs::write(&clock, "+0\n").unwrap();
    let corrected = Instant::now();
    loop {
        let answer = get(&a, &s.url("/v1/ids?count=100"), &[]);
        if answer.status == 200 {
            ids.extend(ids_of(&answer));
            break;
        }
        assert!(corrected.elapsed() < server::GUARD, "{}", s.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!(
        "serving again {} ms after the wall clock was set right",
        corrected.elapsed().as_millis()
    );
    for _ in 0..10 {
        ids.extend(ids_of(&get(&a, &s.url("/v1/ids?count=100"), &[])));
    }
    let unique: HashSet<u64> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "an ID served twice");
    let (status, log) = s.stop();
    assert!(status.success(), "{log}");
}
