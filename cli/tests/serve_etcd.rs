//! `monoflake serve --backend etcd`: TLS and user/password auth to etcd, and a lease lost
//! under load (etcd killed): 503 on readiness and IDs, and no ID stamped after the deadline.
//!
//! Needs the `etcd` feature and an etcd to run (`MONOFLAKE_TEST_ETCD` set, as `.ci/run` does);
//! each test starts its own private etcd (it stops it or changes its users), and skips with a
//! message when `MONOFLAKE_TEST_ETCD` is unset.
#![cfg(feature = "etcd")]

#[path = "../../tests/common/mod.rs"]
mod common;
mod server;

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use server::{Server, agent, get, ids_of, wait_for_status};

fn etcd_wanted() -> bool {
    let set = std::env::var("MONOFLAKE_TEST_ETCD").is_ok_and(|v| !v.is_empty());
    if !set {
        eprintln!("skipped: MONOFLAKE_TEST_ETCD is unset (bash .ci/run sets it)");
    }
    set
}

use common::Etcd;

#[test]
fn serve_reaches_etcd_over_tls_with_a_user_and_password() {
    if !etcd_wanted() {
        return;
    }
    let dir = common::TempDir::new("serve-etcd-tls");
    let (etcd, cert) = Etcd::start_self_signed(dir.path());
    for args in [
        &["user", "add", "root:root-pass-1"][..],
        &["user", "add", "ids:ids-pass-22"],
        &["role", "add", "ids-role"],
        &[
            "role",
            "grant-permission",
            "ids-role",
            "--prefix=true",
            "readwrite",
            "/monoflake/",
        ],
        &["role", "grant-permission", "ids-role", "readwrite", "/"],
        &["user", "grant-role", "ids", "ids-role"],
        &["user", "grant-role", "root", "root"],
        &["auth", "enable"],
    ] {
        let (ok, out) = etcd.ctl(Some(&cert), args);
        assert!(ok || out.contains("already"), "etcdctl {args:?}: {out}");
    }
    let password = dir.path().join("password");
    std::fs::write(&password, "ids-pass-22\n").unwrap();
    let state = dir.path().join("state");
    let base = [
        "--backend",
        "etcd",
        "--etcd-endpoints",
        &etcd.endpoint,
        "--state-dir",
        state.to_str().unwrap(),
    ];
    let secure = [
        "--etcd-ca",
        cert.to_str().unwrap(),
        "--etcd-user",
        "ids",
        "--etcd-password-file",
        password.to_str().unwrap(),
    ];
    let args: Vec<&str> = base.iter().chain(&secure).copied().collect();
    let s = Server::start(&args);
    let a = agent();
    assert_eq!(ids_of(&get(&a, &s.url("/v1/ids?count=10"), &[])).len(), 10);
    assert_eq!(get(&a, &s.url("/readyz"), &[]).status, 200);
    let (status, log) = s.stop();
    assert!(status.success(), "{log}");
    // A wrong password, or no CA for etcd's certificate: no start, exit 1, the reason said.
    std::fs::write(&password, "wrong-password\n").unwrap();
    let (code, log) = Server::try_start(&args).err().unwrap();
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("etcd https://127.0.0.1:"), "{log}");
    let no_ca: Vec<&str> = base.iter().chain(&secure[2..]).copied().collect();
    let (code, log) = Server::try_start(&no_ca).err().unwrap();
    assert_eq!(code, Some(1), "{log}");
    // The flags need the etcd backend.
    let (code, log) = Server::try_start(&["--etcd-user", "ids"]).err().unwrap();
    assert_eq!(code, Some(2), "{log}");
    assert!(log.contains("need --backend etcd"), "{log}");
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

#[test]
fn a_lease_lost_under_load_turns_to_503_and_nothing_is_stamped_after_the_deadline() {
    if !etcd_wanted() {
        return;
    }
    let dir = common::TempDir::new("serve-etcd-loss");
    let mut etcd = Etcd::start();
    let s = Server::start(&[
        "--backend",
        "etcd",
        "--etcd-endpoints",
        &etcd.endpoint,
        "--lease-ttl",
        "2",
        "--state-dir",
        dir.path().to_str().unwrap(),
    ]);
    let url = s.url("/v1/ids?count=100");
    let stop = AtomicBool::new(false);
    let killed = AtomicBool::new(false);
    let lost_seen = AtomicBool::new(false);
    let served = Mutex::new(Vec::<u64>::new());
    let refused_then_served = AtomicBool::new(false);
    let killed_at = std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                let a = agent();
                let mut refused = false;
                while !stop.load(Ordering::Relaxed) {
                    let answer = get(&a, &url, &[]);
                    match answer.status {
                        200 => {
                            if refused {
                                refused_then_served.store(true, Ordering::Relaxed);
                            }
                            served.lock().unwrap().extend(ids_of(&answer));
                        }
                        503 => {
                            // A pause (a renewal answered but not yet taken in by a keeper
                            // slowed on a busy machine, or the lead limit) may end; once the
                            // service says the lease is lost, nothing may follow but 503s.
                            if killed.load(Ordering::SeqCst)
                                && answer.body.contains("the lease was lost")
                            {
                                assert_eq!(answer.retry_after.as_deref(), Some("1"));
                                refused = true;
                                lost_seen.store(true, Ordering::SeqCst);
                            }
                        }
                        other => panic!("status {other}: {answer:?}"),
                    }
                }
            });
        }
        // Under load, etcd goes away: renewals fail, the deadline passes, issuing stops.
        while served.lock().unwrap().len() < 10_000 {
            std::thread::sleep(Duration::from_millis(10));
        }
        let killed_at = unix_ms();
        etcd.stop();
        killed.store(true, Ordering::SeqCst);
        let ready = wait_for_status(&agent(), &s.url("/readyz"), 503);
        assert!(ready.error().contains("node 0"), "{}", ready.error());
        // First a pause (no renewal confirmed), then, past the lease's validity, the loss
        // itself: keep the load on until a caller is told the lease was lost, and a little
        // after.
        let lost_by = std::time::Instant::now() + server::GUARD;
        while !lost_seen.load(Ordering::SeqCst) && std::time::Instant::now() < lost_by {
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(500));
        stop.store(true, Ordering::Relaxed);
        killed_at
    });
    assert!(
        lost_seen.load(Ordering::SeqCst),
        "no caller was told the lease was lost"
    );
    assert!(
        !refused_then_served.load(Ordering::Relaxed),
        "IDs issued again after the lease was lost"
    );
    let ids = served.into_inner().unwrap();
    let layout = monoflake::Layout::twitter();
    let latest = ids
        .iter()
        .map(|id| monoflake::Id::from(*id).parts(&layout).unwrap().unix_ms())
        .max()
        .unwrap();
    // The lease was last renewed before etcd was killed and is valid for its TTL (2 s):
    // nothing is issued once the clock reaches that deadline, and an ID's time runs ahead of
    // the clock by at most the lead (100 ms), plus a few ms between the two processes' clocks.
    let bound = killed_at + 2_000 + monoflake::DEFAULT_MAX_LEAD.as_millis() as u64 + 20;
    assert!(
        latest <= bound,
        "an ID stamped {} ms after etcd was killed",
        latest - killed_at
    );
    let mut unique = ids.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "duplicate IDs");
    let m = get(&agent(), &s.url("/metrics"), &[]);
    assert!(m.body.contains("monoflake_lease_held 0\n"), "{}", m.body);
    drop(s);
}
