//! `monoflake gen` and `serve` on `--backend postgres`, against real servers of Debian's
//! `postgresql` started on 127.0.0.1 by each test: eight claimants at once, a holder paused
//! past its TTL, a row deleted under a paused holder, the server restarted under load, and the
//! incident that started it all replayed (four services, 200 callers, one `orders` table).
//!
//! Needs PostgreSQL installed (`bash .ci/run` installs it); outside CI (`$CI` unset) the tests
//! say so and pass when it is not.
#![cfg(feature = "postgres")]

#[path = "../../tests/common/mod.rs"]
mod common;
mod server;

use std::collections::{HashMap, HashSet};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{Pg, Reader, stderr_of};
use monoflake::{Id, Layout};
use server::{Server, agent, get, ids_of, wait_for_status};

/// Eight node IDs: as many as the claimants of the first test.
const EIGHT: &str = "time=41,n=3,sequence=19,epoch=2020-01-01T00:00:00Z";

fn pg_wanted() -> bool {
    let installed = std::path::Path::new("/usr/lib/postgresql").exists()
        || std::env::var("MONOFLAKE_PG_BIN").is_ok();
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty());
    if !installed && !ci {
        eprintln!(
            "skipped: PostgreSQL is not installed (apt-get install postgresql; .ci/run does)"
        );
    }
    installed || ci
}

/// A file holding the connection string, as `--pg-url-file` reads it.
fn url_file(pg: &Pg, dir: &common::TempDir) -> String {
    let path = dir.path().join("pg-url");
    std::fs::write(&path, format!("{}\n", pg.url)).unwrap();
    path.to_str().unwrap().to_owned()
}

fn generate(url_file: &str, layout: &str, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_monoflake"));
    c.args(["gen", "--backend", "postgres", "--pg-url-file", url_file])
        .args(["--layout", layout])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn unix_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

fn ids_of_output(out: &std::process::Output) -> Vec<u64> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.parse().unwrap())
        .collect()
}

#[test]
fn eight_processes_claiming_auto_at_once_get_eight_nodes_and_a_ninth_is_refused() {
    if !pg_wanted() {
        return;
    }
    let pg = Pg::start();
    let dir = common::TempDir::new("pg-eight");
    let file = url_file(&pg, &dir);
    let layout: Layout = EIGHT.parse().unwrap();
    let mut children: Vec<_> = (0..8)
        .map(|_| {
            let mut child = generate(&file, EIGHT, &["-n", "100000000000"])
                .spawn()
                .unwrap();
            let reader = Reader::spawn(&mut child);
            (child, reader)
        })
        .collect();
    for (_, reader) in &children {
        reader.wait_for(1000);
    }
    // All eight hold a node now: a ninth finds none.
    let ninth = generate(&file, EIGHT, &["-n", "1"]).output().unwrap();
    assert_eq!(ninth.status.code(), Some(1));
    let err = String::from_utf8_lossy(&ninth.stderr);
    assert!(
        err.contains("all 8 node IDs of the layout are held"),
        "{err}"
    );
    let mut nodes = HashSet::new();
    let mut all = Vec::new();
    for (child, reader) in children.drain(..) {
        common::signal(child.id(), "INT");
        let (code, err) = stderr_of(child);
        assert_eq!(code, Some(1), "{err}");
        let ids = reader.finish();
        let node = Id::from(ids[0]).parts(&layout).unwrap().node();
        assert!(
            ids.iter()
                .all(|&id| Id::from(id).parts(&layout).unwrap().node() == node)
        );
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        assert!(nodes.insert(node), "node {node} handed out twice");
        all.extend(ids);
    }
    assert_eq!(nodes.len(), 8);
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "duplicate IDs");
    // Released: the nodes are free again at once.
    let again = generate(&file, EIGHT, &["-n", "10"]).output().unwrap();
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
}

#[test]
fn a_holder_paused_past_its_ttl_never_collides_with_the_next_holder() {
    if !pg_wanted() {
        return;
    }
    let pg = Pg::start();
    let dir = common::TempDir::new("pg-paused");
    let file = url_file(&pg, &dir);
    let layout = Layout::sonyflake();
    let args = ["--node", "3", "--lease-ttl", "2"];
    let mut a = generate(&file, "sonyflake", &args)
        .args(["-n", "100000000000"])
        .spawn()
        .unwrap();
    let ra = Reader::spawn(&mut a);
    ra.wait_for(1000);
    common::signal(a.id(), "STOP");
    // Take the node once the database sees A's lease expire.
    let start = Instant::now();
    let b = loop {
        let b = generate(&file, "sonyflake", &args)
            .args(["-n", "20000"])
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
    let b_ids = ids_of_output(&b);
    assert_eq!(b_ids.len(), 20_000);
    common::signal(a.id(), "CONT");
    let (code, err) = stderr_of(a);
    let a_ids = ra.finish();
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("lease was lost") || err.contains("taken over"),
        "{err}"
    );
    let node = |id: u64| Id::from(id).parts(&layout).unwrap().node();
    assert!(a_ids.iter().chain(&b_ids).all(|&id| node(id) == 3));
    common::assert_successor_above(&a_ids, &b_ids);
}

/// A holder paused (SIGSTOP) while its row is deleted and a successor takes its node, then
/// resumed while the successor issues: the successor, finding no row, waits 2.5 check
/// intervals and starts past them; the holder issues nothing later than 2 check intervals
/// after its last confirmed renewal, which came before the deletion.
#[test]
fn a_holder_paused_while_its_row_is_deleted_never_collides_with_the_successor() {
    if !pg_wanted() {
        return;
    }
    let pg = Pg::start();
    let dir = common::TempDir::new("pg-deleted");
    let file = url_file(&pg, &dir);
    let args = ["-n", "100000000000", "--node", "3", "--lease-ttl", "3"];
    let mut a = generate(&file, "sonyflake", &args).spawn().unwrap();
    let ra = Reader::spawn(&mut a);
    ra.wait_for(10_000);
    common::signal(a.id(), "STOP");
    assert_eq!(pg.psql("DELETE FROM monoflake_nodes RETURNING node"), "3");
    let b = generate(&file, "sonyflake", &args).spawn().unwrap();
    let (code, err, a_ids, b_ids) = common::successor_then_resume(a, ra, b);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("lease was lost") || err.contains("has not been confirmed"),
        "{err}"
    );
    common::assert_successor_above(&a_ids, &b_ids);
}

/// Issue 34, case 4, across hosts: a holder paused (SIGSTOP) while its row is deleted, and a
/// successor whose wall clock runs 3 s behind (libfaketime: a host whose clock was stepped
/// back, or the holder's locked clock kept after a step back under it). The successor's own
/// clock would start it below the holder's last IDs (its wait is 1.25 s, the clocks 3 s
/// apart: millions of duplicates before); it starts above the database's clock at its claim
/// plus the confirm bound and the most a confirmed holder may lead, so above everything the
/// holder issued. The holder, resumed, issues nothing more and reports its loss.
#[test]
fn a_holder_paused_with_its_row_deleted_is_not_overlapped_by_a_successor_behind() {
    if !pg_wanted() {
        return;
    }
    let pg = Pg::shared();
    let dir = common::TempDir::new("pg-behind");
    let file = url_file(&pg, &dir);
    let table = format!("behind_{}_{}", std::process::id(), unix_ms() % 1_000_000);
    let args = [
        "-n",
        "100000000000",
        "--node",
        "3",
        "--lease-ttl",
        "3",
        "--pg-table",
        &table,
    ];
    let mut a = generate(&file, "sonyflake", &args).spawn().unwrap();
    let ra = Reader::spawn(&mut a);
    ra.wait_for(10_000);
    common::signal(a.id(), "STOP");
    assert_eq!(pg.psql(&format!("DELETE FROM {table} RETURNING node")), "3");
    let b = common::with_wall_clock(&mut generate(&file, "sonyflake", &args), "-3s")
        .spawn()
        .unwrap();
    let (code, err, a_ids, b_ids) = common::successor_then_resume(a, ra, b);
    assert_eq!(code, Some(1), "{err}");
    common::assert_successor_above(&a_ids, &b_ids);
}

/// Two services under load; the database is stopped for a few seconds (less than the TTL)
/// and started again. Each stops issuing within its confirm bound (2 x 500 ms after its last
/// confirmed renewal, plus the lead), answers 503 meanwhile, and goes on from the same node
/// once the database is back; no ID is issued twice.
#[test]
fn the_database_restarted_under_load_stops_holders_within_their_bound_and_they_resume() {
    if !pg_wanted() {
        return;
    }
    let mut pg = Pg::start();
    let dir = common::TempDir::new("pg-restart");
    let file = url_file(&pg, &dir);
    let servers: Vec<Server> = (0..2)
        .map(|_| {
            Server::start(&[
                "--backend",
                "postgres",
                "--pg-url-file",
                &file,
                "--lease-ttl",
                "10",
            ])
        })
        .collect();
    assert_ne!(servers[0].node, servers[1].node);
    let stop = AtomicBool::new(false);
    let served = Mutex::new(Vec::<u64>::new());
    let (stopped_at, resumed_at, before_resume) = std::thread::scope(|scope| {
        for s in &servers {
            for _ in 0..2 {
                let (stop, served) = (&stop, &served);
                let url = s.url("/v1/ids?count=100");
                scope.spawn(move || {
                    let a = agent();
                    while !stop.load(Ordering::Relaxed) {
                        let answer = get(&a, &url, &[]);
                        match answer.status {
                            200 => served.lock().unwrap().extend(ids_of(&answer)),
                            503 => std::thread::sleep(Duration::from_millis(20)),
                            other => panic!("status {other}: {answer:?}"),
                        }
                    }
                });
            }
        }
        while served.lock().unwrap().len() < 20_000 {
            std::thread::sleep(Duration::from_millis(10));
        }
        let stopped_at = unix_ms();
        pg.stop();
        for s in &servers {
            wait_for_status(&agent(), &s.url("/readyz"), 503);
        }
        std::thread::sleep(Duration::from_secs(2));
        let before_resume = served.lock().unwrap().len();
        let resumed_at = unix_ms();
        pg.resume();
        for s in &servers {
            wait_for_status(&agent(), &s.url("/readyz"), 200);
        }
        let target = served.lock().unwrap().len() + 20_000;
        let start = Instant::now();
        while served.lock().unwrap().len() < target {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "no IDs after the restart"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        stop.store(true, Ordering::Relaxed);
        (stopped_at, resumed_at, before_resume)
    });
    let ids = served.into_inner().unwrap();
    let layout = Layout::twitter();
    let ms = |id: &u64| Id::from(*id).parts(&layout).unwrap().unix_ms();
    // Nothing stamped between the confirm bound after the stop and the restart: the last
    // confirmed renewal came before the stop, 2 x 500 ms, plus the lead and a few ms between
    // the processes' clocks.
    let bound = stopped_at + 1_000 + monoflake::DEFAULT_MAX_LEAD.as_millis() as u64 + 20;
    let late: Vec<u64> = ids[..before_resume]
        .iter()
        .map(ms)
        .filter(|&t| t > bound)
        .collect();
    assert!(late.is_empty(), "{} IDs stamped past the bound", late.len());
    // Both resumed, on their own nodes.
    let after: HashSet<u64> = ids
        .iter()
        .filter(|id| ms(id) >= resumed_at)
        .map(|id| Id::from(*id).parts(&layout).unwrap().node())
        .collect();
    assert_eq!(after.len(), 2, "both services resumed");
    let mut unique = ids.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "duplicate IDs");
    for s in servers {
        let m = get(&agent(), &s.url("/metrics"), &[]);
        assert!(m.body.contains("monoflake_lease_held 1\n"), "{}", m.body);
        let (status, log) = s.stop();
        assert!(status.success(), "{log}");
    }
}

/// The incident: four services handing out IDs, 200 callers each writing orders into one
/// table whose primary key is the ID. Every insert must succeed: zero conflicts. The callers
/// load the same PostgreSQL that holds the leases, so a service may pause while a renewal
/// waits for it (a 503 with its wait): a caller asks again, as clients do.
#[test]
fn the_incident_replayed_four_services_two_hundred_callers_zero_conflicts() {
    if !pg_wanted() {
        return;
    }
    let pg = Pg::start_with(&["max_connections=300"], |_| {});
    let dir = common::TempDir::new("pg-incident");
    let file = url_file(&pg, &dir);
    pg.psql(
        "CREATE TABLE orders (id BIGINT PRIMARY KEY, service int NOT NULL, \
         caller int NOT NULL, placed_at timestamptz NOT NULL DEFAULT now())",
    );
    let services: Vec<Server> = (0..4)
        .map(|_| Server::start(&["--backend", "postgres", "--pg-url-file", &file]))
        .collect();
    let nodes: HashSet<u64> = services.iter().map(|s| s.node).collect();
    assert_eq!(nodes.len(), 4, "four services, four nodes");
    const CALLERS: usize = 200;
    const ORDERS: usize = 50;
    let conflicts = AtomicU64::new(0);
    let refused = AtomicU64::new(0);
    // A gate, not a Barrier: a caller that cannot connect must not leave the others waiting.
    let (ready, go) = (AtomicU64::new(0), AtomicBool::new(false));
    std::thread::scope(|scope| {
        for caller in 0..CALLERS {
            let service = caller % services.len();
            let url = services[service].url("/v1/id");
            let (conflicts, refused, ready, go, pg_url) =
                (&conflicts, &refused, &ready, &go, &pg.url);
            scope.spawn(move || {
                let mut db = postgres::Client::connect(pg_url, postgres::NoTls).unwrap();
                let insert = db
                    .prepare("INSERT INTO orders (id, service, caller) VALUES ($1, $2, $3)")
                    .unwrap();
                let a = agent();
                ready.fetch_add(1, Ordering::SeqCst);
                while !go.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                for _ in 0..ORDERS {
                    let (id, asked_again) = server::id_retrying(&a, &url);
                    refused.fetch_add(u64::from(asked_again), Ordering::Relaxed);
                    let id = i64::try_from(id).unwrap();
                    match db.execute(&insert, &[&id, &(service as i32), &(caller as i32)]) {
                        Ok(1) => {}
                        Err(e)
                            if e.code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION) =>
                        {
                            conflicts.fetch_add(1, Ordering::Relaxed);
                        }
                        other => panic!("insert: {other:?}"),
                    }
                }
            });
        }
        // All connected, then all let go together (a failed caller fails the test at the
        // end of the scope; the wait is only a guard).
        let start = Instant::now();
        while ready.load(Ordering::SeqCst) < CALLERS as u64 && start.elapsed() < server::GUARD {
            std::thread::sleep(Duration::from_millis(10));
        }
        go.store(true, Ordering::SeqCst);
    });
    assert_eq!(
        conflicts.load(Ordering::Relaxed),
        0,
        "primary-key conflicts"
    );
    eprintln!(
        "503s asked again: {} of {} orders",
        refused.load(Ordering::Relaxed),
        CALLERS * ORDERS
    );
    let counts = pg.psql("SELECT count(*), count(DISTINCT service) FROM orders");
    assert_eq!(counts, format!("{}|4", CALLERS * ORDERS));
    // Every order's ID came from its service's node.
    let per_service: HashMap<u64, u64> = services
        .iter()
        .enumerate()
        .map(|(i, s)| (i as u64, s.node))
        .collect();
    let rows = pg.psql("SELECT id, service FROM orders");
    let layout = Layout::twitter();
    for line in rows.lines() {
        let (id, service) = line.split_once('|').unwrap();
        let node = Id::from(id.parse::<u64>().unwrap())
            .parts(&layout)
            .unwrap()
            .node();
        assert_eq!(node, per_service[&service.parse::<u64>().unwrap()]);
    }
    for s in services {
        let (status, log) = s.stop();
        assert!(status.success(), "{log}");
    }
}

/// The connection string comes from `--pg-url`, `--pg-url-file` or `$MONOFLAKE_PG_URL` and
/// is never printed, not even when the server refuses it.
#[test]
fn the_connection_string_comes_from_a_flag_a_file_or_the_environment_and_is_never_printed() {
    if !pg_wanted() {
        return;
    }
    let pg = Pg::start();
    let dir = common::TempDir::new("pg-url");
    let file = url_file(&pg, &dir);
    let run = |args: &[&str], env: Option<&str>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_monoflake"));
        c.args(["gen", "-n", "3", "--backend", "postgres"])
            .args(args);
        c.env_remove("MONOFLAKE_PG_URL");
        if let Some(url) = env {
            c.env("MONOFLAKE_PG_URL", url);
        }
        c.output().unwrap()
    };
    for out in [
        run(&["--pg-url-file", &file], None),
        run(&["--pg-url", &pg.url], None),
        run(&[], Some(&pg.url)),
    ] {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(ids_of_output(&out).len(), 3);
    }
    let wrong = pg.url.replacen("monoflake-test-secret", "hunter2-wrong", 1);
    for out in [run(&["--pg-url", &wrong], None), run(&[], Some(&wrong))] {
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("authentication failed") && !err.contains("hunter2"),
            "{err}"
        );
    }
    let none = run(&[], None);
    assert_eq!(none.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&none.stderr).contains("needs a connection string"));
    let state = dir.path().join("state");
    let misplaced = Command::new(env!("CARGO_BIN_EXE_monoflake"))
        .args([
            "gen",
            "--backend",
            "file",
            "--state-dir",
            state.to_str().unwrap(),
        ])
        .args(["--pg-url-file", &file])
        .output()
        .unwrap();
    assert_eq!(misplaced.status.code(), Some(2));
    let err = String::from_utf8_lossy(&misplaced.stderr);
    assert!(err.contains("need --backend postgres"), "{err}");
}

/// `bench --backend postgres` times the store's claims, renewals and reservation writes.
#[test]
fn bench_measures_the_store_it_is_given() {
    if !pg_wanted() {
        return;
    }
    let pg = Pg::start();
    let dir = common::TempDir::new("pg-bench");
    let file = url_file(&pg, &dir);
    let out = Command::new(env!("CARGO_BIN_EXE_monoflake"))
        .args(["bench", "--threads", "1", "--duration", "2s", "--json"])
        .args(["--backend", "postgres", "--pg-url-file", &file])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let store = &json["store"];
    assert!(
        store["name"]
            .as_str()
            .unwrap()
            .starts_with("postgres 127.0.0.1:")
    );
    let ops = store["operations"].as_array().unwrap();
    let names: Vec<&str> = ops
        .iter()
        .map(|o| o["operation"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["claim + release", "renewal", "reservation write"]);
    for op in ops {
        assert!(op["calls"].as_u64().unwrap() >= 1 && op["p50_us"].as_u64().unwrap() >= 1);
    }
    // The bench's own layout, of a bit shape of its own (rows are kept per shape): no row of
    // a real layout was touched.
    assert_eq!(
        pg.psql("SELECT count(*) FROM monoflake_nodes WHERE layout <> 't41-n3-s9-node-high'"),
        "0"
    );
}
