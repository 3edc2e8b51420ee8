//! One suite written against the `NodeStore` trait, run for every store: the file store
//! always, etcd with the `etcd` feature, PostgreSQL with the `postgres` feature (bash .ci/run
//! builds with all features and installs etcd-server and postgresql).

mod common;

use std::sync::Arc;

use monoflake::{Error, FileStore, Generator, Layout, NodeRequest, NodeStore, TimeSource};

/// Four node IDs: small enough to run out of.
fn tiny() -> Layout {
    Layout::builder()
        .epoch_ms(Layout::twitter().epoch_ms())
        .name("tiny")
        .node_field("n", 2)
        .build()
        .unwrap()
}

fn claims_are_exclusive(store: &dyn NodeStore) {
    let layout = tiny();
    let claims: Vec<_> = (0..4)
        .map(|_| store.claim(&layout, NodeRequest::Any).unwrap())
        .collect();
    let mut nodes: Vec<u64> = claims.iter().map(|c| c.node()).collect();
    nodes.sort_unstable();
    assert_eq!(nodes, [0, 1, 2, 3]);
    assert!(matches!(
        store.claim(&layout, NodeRequest::Any),
        Err(Error::AllNodesHeld { count: 4, .. })
    ));
    assert!(matches!(
        store.claim(&layout, NodeRequest::Exact(2)),
        Err(Error::NodeHeld { node: 2, .. })
    ));
    assert!(matches!(
        store.claim(&layout, NodeRequest::Exact(4)),
        Err(Error::OutOfRange {
            value: 4,
            max: 3,
            ..
        })
    ));
    // Releasing one frees exactly that one.
    let mut claims = claims;
    let freed = claims.remove(1);
    let freed_node = freed.node();
    store.release(freed, 0).unwrap();
    let again = store.claim(&layout, NodeRequest::Any).unwrap();
    assert_eq!(again.node(), freed_node);
    // And the highest node, released, is found again by a claim of any node.
    let top = claims.iter().position(|c| c.node() == 3).unwrap();
    store.release(claims.remove(top), 0).unwrap();
    assert_eq!(store.claim(&layout, NodeRequest::Any).unwrap().node(), 3);
    drop(again);
}

fn reservation_survives_release_and_is_read_at_claim(store: &dyn NodeStore) {
    let layout = tiny();
    let claim = store.claim(&layout, NodeRequest::Exact(3)).unwrap();
    assert_eq!(claim.reserved_until_ms(), None);
    store.extend(&claim, 1_800_000_000_000).unwrap();
    store.extend(&claim, 1_800_000_005_000).unwrap();
    assert_eq!(store.renew(&claim).map(|_| ()).unwrap(), ());
    store.release(claim, 1_800_000_001_234).unwrap();
    let again = store.claim(&layout, NodeRequest::Exact(3)).unwrap();
    assert_eq!(again.reserved_until_ms(), Some(1_800_000_001_234));
    store.release(again, 1_800_000_001_234).unwrap();
}

fn layouts_do_not_share_claims(store: &dyn NodeStore) {
    let a = store
        .claim(&Layout::twitter(), NodeRequest::Exact(1))
        .unwrap();
    let b = store
        .claim(&Layout::discord(), NodeRequest::Exact(1))
        .unwrap();
    store.release(a, 0).unwrap();
    store.release(b, 0).unwrap();
}

/// Layouts of one bit shape with epochs 1 s apart (issue 34, case 3) are one node space:
/// a node held under one is held under the other, and a reservation written under one reads,
/// under the other, as the same ID value — 1 s later for the later epoch, 1 s earlier for the
/// earlier one.
fn layouts_of_one_shape_share_claims_and_compare_id_values(store: &dyn NodeStore) {
    let early = tiny();
    let late = Layout::builder()
        .epoch_ms(early.epoch_ms() + 1_000)
        .name("tiny-later")
        .node_field("n", 2)
        .build()
        .unwrap();
    let held = store.claim(&early, NodeRequest::Exact(2)).unwrap();
    assert!(matches!(
        store.claim(&late, NodeRequest::Exact(2)),
        Err(Error::NodeHeld { node: 2, .. })
    ));
    store.release(held, 1_800_000_000_000).unwrap();
    let again = store.claim(&late, NodeRequest::Exact(2)).unwrap();
    assert_eq!(again.reserved_until_ms(), Some(1_800_000_001_000));
    store.release(again, 1_800_000_004_000).unwrap();
    let back = store.claim(&early, NodeRequest::Exact(2)).unwrap();
    assert_eq!(back.reserved_until_ms(), Some(1_800_000_003_000));
    store.release(back, 0).unwrap();
}

/// Records of before the upgrade, kept under the layout's state name in its own Unix ms, are
/// honoured: a reservation there is a floor of the claim, and a live claim there (a holder of
/// an earlier version) holds the node. `plant(name, node, until_ms, live)` writes such a
/// record the way an earlier version did.
fn records_of_before_are_floors_and_their_claims_hold(
    store: &dyn NodeStore,
    plant: impl Fn(&str, u64, u64, bool),
) {
    let layout = tiny();
    let old = layout.state_name();
    assert_ne!(old, layout.shape_key());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    plant(&old, 1, now + 2_000, false);
    let claim = store.claim(&layout, NodeRequest::Exact(1)).unwrap();
    assert_eq!(claim.reserved_until_ms(), Some(now + 2_000));
    assert!(!claim.recorded(), "{claim:?}");
    store.abandon(claim).unwrap();
    plant(&old, 2, now, true);
    assert!(matches!(
        store.claim(&layout, NodeRequest::Exact(2)),
        Err(Error::NodeHeld { node: 2, .. })
    ));
}

fn leased_generators_never_share_a_node_or_an_id(store: Arc<dyn NodeStore>) {
    let layout = tiny();
    let leased: Vec<_> = (0..4)
        .map(|_| {
            Generator::builder(layout.clone())
                .build_leased(Arc::clone(&store), NodeRequest::Any)
                .unwrap()
        })
        .collect();
    let mut ids = Vec::new();
    for g in &leased {
        for _ in 0..10_000 {
            ids.push(g.next_id().unwrap());
        }
    }
    let n = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), n);
    let last = *ids.last().unwrap();
    drop(leased);
    // Restarted holders start after everything issued, node by node.
    for _ in 0..4 {
        let g = Generator::builder(layout.clone())
            .build_leased(Arc::clone(&store), NodeRequest::Any)
            .unwrap();
        let first = g.next_id().unwrap();
        let prev_of_node = ids
            .iter()
            .filter(|id| id.parts(&layout).unwrap().node() == g.node())
            .max()
            .unwrap();
        assert!(
            first > *prev_of_node,
            "node {} restarted below its last ID",
            g.node()
        );
        g.release().unwrap();
    }
    assert!(last > ids[0]);
}

/// The store's records are removed under a live holder (the state directory deleted, the etcd
/// prefix cleared): the holder's next keeper round finds its claim gone and stops issuing for
/// good — never at the end of the reservation it had already written.
fn a_store_cleared_under_its_holder_fences_it(store: Arc<dyn NodeStore>, clear: impl Fn()) {
    let g = Generator::builder(tiny())
        .reservation_window(std::time::Duration::from_secs(3600))
        .build_leased(store, NodeRequest::Any)
        .unwrap();
    let before = g.next_id().unwrap();
    clear();
    // A liveness bound only (the keeper runs every few seconds at most).
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let mut last = before;
    let err = loop {
        match g.next_id() {
            Ok(id) => {
                assert!(id > last);
                last = id;
            }
            Err(e) => break e,
        }
        assert!(
            std::time::Instant::now() < give_up,
            "the holder kept issuing after its store was cleared"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    assert!(matches!(err, Error::LeaseLost { .. }), "{err:?}");
    // Stopped for good, for single IDs and batches.
    assert!(matches!(g.try_next_id(), Err(Error::LeaseLost { .. })));
    assert!(matches!(g.next_ids(3), Err(Error::LeaseLost { .. })));
    assert!(g.stats().lease_losses >= 1);
}

/// The store's records are removed under a holder whose clock runs 2 s ahead of the next
/// claimant's (a wall clock stepped back under it: its clock slews instead of going back),
/// and the claimant finds no record before the holder notices. The holder, finding its claim
/// gone, writes back the time it used (`NodeStore::restore`); the claimant, which reads its
/// node's record again after its wait (`NodeStore::reservation`), and every later claimant,
/// start above everything the holder issued. Without that, the claimant's floor (its clock
/// plus its wait and lead) lies below the holder's last IDs.
fn a_holder_ahead_whose_records_are_cleared_is_not_overlapped(
    store: Arc<dyn NodeStore>,
    clear: impl Fn(),
) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let ahead = Arc::new(monoflake::ManualClock::new(now + 2_000));
    let layout = tiny();
    let holder = Generator::builder(layout.clone())
        .clock(Arc::clone(&ahead))
        .build_leased(Arc::clone(&store), NodeRequest::Exact(1))
        .unwrap();
    let mut issued: Vec<u64> = (0..3000)
        .map(|_| holder.next_id().unwrap().as_u64())
        .collect();
    clear();
    // A claimant takes the node: before the holder has noticed (another host: it finds no
    // record), or after (the holder wrote back what it used, which the claim reads). Which
    // comes first is the scheduler's; no assertion depends on it. On one host (the file
    // store) the node's host-wide claim refuses the claimant, naming this process, until the
    // holder has stopped and written back.
    let claim = match store.claim(&layout, NodeRequest::Exact(1)) {
        Ok(claim) => claim,
        Err(Error::NodeHeld {
            holder: Some(_), ..
        }) => common::claim_when_let_go(&*store, &layout, 1),
        Err(e) => panic!("{e:?}"),
    };
    // The holder notices at its next check, stops, and restores (a liveness bound only).
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        match holder.try_next_id() {
            Ok(id) => issued.push(id.as_u64()),
            Err(Error::LeaseLost { .. }) => break,
            Err(_) => {}
        }
        assert!(
            std::time::Instant::now() < give_up,
            "the holder never stopped"
        );
    }
    let last_ms = issued
        .iter()
        .map(|&id| {
            monoflake::Id::from_u64(id)
                .parts(&layout)
                .unwrap()
                .unix_ms()
        })
        .max()
        .unwrap();
    let again = store.reservation(&claim).unwrap();
    assert!(
        again.is_some_and(|until| until > last_ms),
        "the claimant read {again:?} again; the holder issued up to {last_ms}"
    );
    store.release(claim, 0).unwrap();
    // A generator built on the node now starts above every ID the holder issued.
    let next = Generator::builder(layout)
        .build_leased(store, NodeRequest::Exact(1))
        .unwrap();
    let first = next.next_id().unwrap().as_u64();
    assert!(issued.iter().all(|&id| id < first));
}

/// A holder pauses (a SIGSTOP, a long GC, a frozen VM) and stops renewing: once its lease
/// expires another claimant takes the node and reads the reservation the paused holder had
/// acknowledged. When the paused holder resumes, every renewal, reservation write and release
/// of its old claim is `LeaseLost`, and none of them touches the successor's record. (Stores
/// whose claims expire: etcd, PostgreSQL.)
fn a_paused_holder_is_taken_over_and_fenced(paused: &dyn NodeStore, successor: &dyn NodeStore) {
    let layout = tiny();
    let held = paused.claim(&layout, NodeRequest::Exact(2)).unwrap();
    paused.extend(&held, 1_800_000_000_000).unwrap();
    // A liveness bound only: the lease expires within its TTL (seconds).
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let taken = loop {
        match successor.claim(&layout, NodeRequest::Exact(2)) {
            Ok(claim) => break claim,
            Err(Error::NodeHeld { node: 2, .. }) => {
                assert!(
                    std::time::Instant::now() < give_up,
                    "the paused holder's lease never expired"
                );
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            Err(e) => panic!("{e:?}"),
        }
    };
    assert_eq!(taken.reserved_until_ms(), Some(1_800_000_000_000));
    successor.extend(&taken, 1_800_000_009_000).unwrap();
    // The paused holder resumes.
    assert!(matches!(
        paused.renew(&held),
        Err(Error::LeaseLost { node: 2, .. })
    ));
    assert!(matches!(
        paused.extend(&held, 1_800_000_099_000),
        Err(Error::LeaseLost { node: 2, .. })
    ));
    assert!(matches!(
        paused.release(held, 1_800_000_000_001),
        Err(Error::LeaseLost { node: 2, .. })
    ));
    successor.renew(&taken).unwrap();
    successor.release(taken, 1_800_000_009_000).unwrap();
    let again = successor.claim(&layout, NodeRequest::Exact(2)).unwrap();
    assert_eq!(again.reserved_until_ms(), Some(1_800_000_009_000));
    successor.release(again, 1_800_000_009_000).unwrap();
}

/// The generator's clock steps forward an hour, twice, past the reservation and the lease's
/// deadline as that clock sees them: a short wait for the keeper, never an error. The clock
/// starts `behind_ms` behind the real time: a store with a clock of its own (PostgreSQL, etcd)
/// refuses to confirm a holder whose clock runs ahead of its own (`tests/postgres.rs`,
/// `tests/etcd_clock.rs`), never one behind, so there it starts two hours behind and ends at the real time, on a node given
/// a record at that clock (a node without one would start above the store's clock).
fn a_forward_clock_step_is_ridden_through(store: Arc<dyn NodeStore>, behind_ms: u64) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
        - behind_ms;
    let clock = Arc::new(monoflake::ManualClock::new(now));
    let layout = tiny();
    if behind_ms > 0 {
        let seeded = store.claim(&layout, NodeRequest::Exact(0)).unwrap();
        store.release(seeded, now).unwrap();
    }
    let g = Generator::builder(layout.clone())
        .clock(Arc::clone(&clock))
        .build_leased(store, NodeRequest::Any)
        .unwrap();
    let mut last = g.next_id().unwrap();
    for _ in 0..2 {
        clock.advance_ms(3_600_000);
        let stepped = clock.now_ms();
        let id = g.next_id().unwrap();
        assert!(id > last);
        assert!(id.parts(&layout).unwrap().unix_ms() >= stepped);
        last = id;
    }
    assert_eq!(g.stats().lease_losses, 0);
}

/// A holder's records are deleted, and then its write-back arrives (a stale holder, or one
/// that noticed late): the node has evidence of what was used but no record of its own. The
/// next claim reads the evidence but says it is evidence only (`Claim::recorded`), and a
/// build on it waits the unrecorded wait and reads again — it must not start at once, as if a
/// record were there: another holder may have held the node since and still be issuing,
/// its own records deleted too. (The hand-over's model checker found that case.)
fn evidence_alone_is_waited_out(store: Arc<dyn NodeStore>, clear: impl Fn()) {
    let layout = tiny();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let stale = store.claim(&layout, NodeRequest::Exact(1)).unwrap();
    store.extend(&stale, now + 1_000).unwrap();
    assert!(store.claim(&layout, NodeRequest::Exact(1)).is_err());
    clear();
    store.restore(&stale, now).unwrap();
    let _ = store.abandon(stale);
    let claim = store.claim(&layout, NodeRequest::Exact(1)).unwrap();
    // The file store also keeps the host's anchor of the reservation: evidence too.
    assert!(claim.reserved_until_ms().is_some_and(|r| r >= now));
    assert!(!claim.recorded(), "{claim:?}");
    store.abandon(claim).unwrap();
    let wait_ms = monoflake::handover::unrecorded_wait_ms(
        u64::try_from(store.check_interval().as_millis()).unwrap(),
    );
    let g = Generator::builder(layout.clone())
        .build_leased(Arc::clone(&store), NodeRequest::Exact(1))
        .unwrap();
    assert!(g.stats().claim_wait_ms >= wait_ms, "{:?}", g.stats());
    assert!(g.next_id().unwrap().parts(&layout).unwrap().unix_ms() >= now);
    drop(g);
    // Released: a record of its own now, taken without a wait.
    let again = store.claim(&layout, NodeRequest::Exact(1)).unwrap();
    assert!(again.recorded());
}

/// Every store's suite; `behind_ms`: how far behind the real time the forward-step test's
/// clock starts (see there).
fn run_suite(behind_ms: u64, mut make: impl FnMut() -> Arc<dyn NodeStore>) {
    a_forward_clock_step_is_ridden_through(make(), behind_ms);
    claims_are_exclusive(&*make());
    reservation_survives_release_and_is_read_at_claim(&*make());
    layouts_do_not_share_claims(&*make());
    layouts_of_one_shape_share_claims_and_compare_id_values(&*make());
    leased_generators_never_share_a_node_or_an_id(make());
}

#[test]
fn file_store_conformance() {
    let dir = common::TempDir::new("conformance");
    let mut n = 0;
    run_suite(0, || {
        n += 1;
        Arc::new(FileStore::open(dir.path().join(format!("s{n}"))).unwrap())
    });
    let doomed = dir.path().join("doomed");
    a_store_cleared_under_its_holder_fences_it(Arc::new(FileStore::open(&doomed).unwrap()), || {
        std::fs::remove_dir_all(&doomed).unwrap()
    });
    let ahead = dir.path().join("ahead");
    a_holder_ahead_whose_records_are_cleared_is_not_overlapped(
        Arc::new(FileStore::open(&ahead).unwrap()),
        || std::fs::remove_dir_all(&ahead).unwrap(),
    );
    let evidence = dir.path().join("evidence");
    evidence_alone_is_waited_out(Arc::new(FileStore::open(&evidence).unwrap()), || {
        std::fs::remove_dir_all(&evidence).unwrap()
    });
}

#[cfg(feature = "etcd")]
#[test]
fn etcd_store_conformance() {
    let etcd = common::Etcd::shared();
    // A prefix of this run's own, so a shared server's earlier keys do not interfere.
    let run = format!(
        "/conformance-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let mut n = 0;
    // etcd's clock, as PostgreSQL's, confirms no holder ahead of it (see the suite).
    run_suite(7_200_000, || {
        n += 1;
        Arc::new(
            monoflake::EtcdStore::connect(
                &[&etcd.endpoint],
                &format!("{run}/t{n}"),
                std::time::Duration::from_secs(5),
            )
            .unwrap(),
        )
    });
    let paused_prefix = format!("{run}/paused");
    let short = |prefix: &str| {
        monoflake::EtcdStore::connect(&[&etcd.endpoint], prefix, std::time::Duration::from_secs(2))
            .unwrap()
    };
    a_paused_holder_is_taken_over_and_fenced(&short(&paused_prefix), &short(&paused_prefix));
    // The store cleared under its holder, by a prefix deletion as an operator would.
    let cleared = |name: &str| {
        let prefix = format!("{run}/{name}");
        let store = monoflake::EtcdStore::connect(
            &[&etcd.endpoint],
            &prefix,
            std::time::Duration::from_secs(3),
        )
        .unwrap();
        let endpoint = etcd.endpoint.clone();
        let clear = move || {
            let out = std::process::Command::new("etcdctl")
                .env("ETCDCTL_API", "3")
                .args(["--endpoints", &endpoint, "del", "--prefix", &prefix])
                .output()
                .expect("etcdctl is not installed: apt-get install -y etcd-client");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        (Arc::new(store) as Arc<dyn NodeStore>, clear)
    };
    let (store, clear) = cleared("cleared");
    a_store_cleared_under_its_holder_fences_it(store, clear);
    let (store, clear) = cleared("ahead");
    a_holder_ahead_whose_records_are_cleared_is_not_overlapped(store, clear);
    let (store, clear) = cleared("evidence");
    evidence_alone_is_waited_out(store, clear);
    let legacy = format!("{run}/legacy");
    records_of_before_are_floors_and_their_claims_hold(
        &monoflake::EtcdStore::connect(
            &[&etcd.endpoint],
            &legacy,
            std::time::Duration::from_secs(3),
        )
        .unwrap(),
        |name, node, until, live| {
            let put = |key: String, value: String| {
                let (ok, out) = etcd.ctl(None, &["put", &key, &value]);
                assert!(ok, "{out}");
            };
            put(
                format!("{legacy}/{name}/reservation/{node}"),
                until.to_string(),
            );
            if live {
                put(
                    format!("{legacy}/{name}/node/{node}"),
                    "pid 1 lease 0".into(),
                );
            }
        },
    );
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_store_conformance() {
    use monoflake::{PgOptions, PgStore};
    let pg = common::Pg::shared();
    // Tables of this run's own, so a shared server's earlier rows do not interfere.
    let run = format!(
        "conformance_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
            % 1_000_000
    );
    let store = |table: &str, ttl_s: u64| {
        PgStore::connect_with(
            &pg.url,
            &PgOptions::new()
                .table(table)
                .unwrap()
                .lease_ttl(std::time::Duration::from_secs(ttl_s)),
        )
        .unwrap()
    };
    let mut n = 0;
    run_suite(7_200_000, || {
        n += 1;
        Arc::new(store(&format!("{run}_t{n}"), 5))
    });
    let paused = format!("{run}_paused");
    a_paused_holder_is_taken_over_and_fenced(&store(&paused, 2), &store(&paused, 2));
    // The rows deleted under the holder, and the whole table dropped.
    let deleted = format!("{run}_deleted");
    a_store_cleared_under_its_holder_fences_it(Arc::new(store(&deleted, 3)), || {
        pg.psql(&format!("DELETE FROM {deleted}"));
    });
    let dropped = format!("{run}_dropped");
    a_store_cleared_under_its_holder_fences_it(Arc::new(store(&dropped, 3)), || {
        pg.psql(&format!("DROP TABLE {dropped}"));
    });
    // A holder whose clock runs ahead, its rows deleted before it notices: it restores the
    // time it used, and the claimant that found no row reads it again before issuing. (A
    // holder 2 s ahead of the database is refused by default, `PgOptions::max_clock_lead`:
    // these stores allow 3 s.)
    let leading = |table: &str| {
        PgStore::connect_with(
            &pg.url,
            &PgOptions::new()
                .table(table)
                .unwrap()
                .lease_ttl(std::time::Duration::from_secs(3))
                .max_clock_lead(std::time::Duration::from_secs(3)),
        )
        .unwrap()
    };
    let ahead = format!("{run}_ahead");
    a_holder_ahead_whose_records_are_cleared_is_not_overlapped(Arc::new(leading(&ahead)), || {
        pg.psql(&format!("DELETE FROM {ahead}"));
    });
    let ahead_dropped = format!("{run}_ahead_dropped");
    a_holder_ahead_whose_records_are_cleared_is_not_overlapped(
        Arc::new(leading(&ahead_dropped)),
        || {
            pg.psql(&format!("DROP TABLE {ahead_dropped}"));
        },
    );
    let evidence = format!("{run}_evidence");
    evidence_alone_is_waited_out(Arc::new(store(&evidence, 3)), || {
        pg.psql(&format!("DELETE FROM {evidence}"));
    });
    let legacy = format!("{run}_legacy");
    records_of_before_are_floors_and_their_claims_hold(
        &store(&legacy, 3),
        |name, node, until, live| {
            let (claimant, expires) = if live {
                ("'old'", "clock_timestamp() + interval '1 hour'")
            } else {
                ("NULL", "NULL")
            };
            pg.psql(&format!(
            "INSERT INTO {legacy} (layout, node, claimant, fence, lease_expires_at, reserved_until_ms)
             VALUES ('{name}', {node}, {claimant}, 1, {expires}, {until})"
        ));
        },
    );
}
