//! Issue 34, case 4, on etcd: a holder whose clock runs ahead, its keys deleted while it is
//! stopped, and a successor on an honest clock. etcd's clock — the `Date` of its HTTP gateway
//! — is the common clock: holders too far ahead of it are not confirmed, and a claimant that
//! finds no record starts above it (docs/design.md, "one inequality", the third case).
#![cfg(feature = "etcd")]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use monoflake::{Error, EtcdStore, Generator, Layout, NodeRequest, NodeStore};

fn layout() -> Layout {
    Layout::builder()
        .name("etcdclock")
        .epoch("2024-01-01")
        .node_field("n", 2)
        .build()
        .unwrap()
}

/// A prefix of this test's own on a shared etcd.
fn prefix(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("/etcd-clock-{tag}-{}-{nanos}", std::process::id())
}

fn store(etcd: &common::Etcd, prefix: &str) -> Arc<EtcdStore> {
    Arc::new(EtcdStore::connect(&[&etcd.endpoint], prefix, Duration::from_secs(3)).unwrap())
}

fn named(reason: &str) -> bool {
    reason.contains("ahead of etcd's") && reason.contains("EtcdOptions::max_clock_lead")
}

/// The holder's side: one 3 s ahead of etcd's clock at its build loses the claim at its first
/// check, before its first ID, the lead named. One whose clock steps 3 s ahead while it runs
/// is refused at once and loses the claim at its next check: sealed, what it used written
/// back, so the node's next holder starts above it. Back in step changes nothing.
#[test]
fn a_holder_further_ahead_of_etcd_than_allowed_issues_nothing_there() {
    let etcd = common::Etcd::shared();
    let prefix = prefix("lead");
    let store = store(&etcd, &prefix);
    let layout = layout();
    common::a_holder_ahead_of_the_store_clock_issues_nothing(store, &layout, named);
}

/// The successor's side: a claimant 3 s behind etcd's clock, on a node whose keys were all
/// deleted (`etcdctl del --prefix`) under a holder that had reserved ahead, starts above etcd's
/// clock at its claim plus the allowance (250 ms, a second twice for `Date`'s resolution, a
/// second for the members' skew), two check intervals: above anything that holder issued.
#[test]
fn a_claimant_behind_etcd_that_finds_no_record_starts_above_its_clock() {
    let etcd = common::Etcd::shared();
    let prefix = prefix("behind");
    let store = store(&etcd, &prefix);
    let layout = layout();
    let held = store.claim(&layout, NodeRequest::Exact(1)).unwrap();
    store.extend(&held, common::system_ms() + 500).unwrap();
    let (ok, out) = etcd.ctl(None, &["del", "--prefix", &prefix]);
    assert!(ok, "{out}");
    // etcd's Date is whole seconds, at or above this.
    let before_claim = common::system_ms() / 1_000 * 1_000;
    let first = common::first_ms_of_a_successor_behind(Arc::clone(&store) as _, &layout);
    let check_ms = u64::try_from(store.check_interval().as_millis()).unwrap();
    let lead = monoflake::handover::DEFAULT_MAX_CLOCK_LEAD_MS
        + 2_000
        + u64::try_from(monoflake::DEFAULT_MAX_MEMBER_SKEW.as_millis()).unwrap();
    let floor = monoflake::handover::store_floor_ms(before_claim, check_ms, lead, 0);
    assert!(
        floor.is_some_and(|floor| first >= floor),
        "first ID at {first} ms, etcd's floor {floor:?}"
    );
    let _ = store.abandon(held);
}

/// A claimant with a short reservation window (1 s, less than the floor's margin over etcd's
/// clock) on a node never used still starts: the margin is not held against the tolerance,
/// only a clock behind etcd's would be.
#[test]
fn a_fresh_node_with_a_short_window_starts() {
    let etcd = common::Etcd::shared();
    let prefix = prefix("short");
    let store = store(&etcd, &prefix);
    let g = Generator::builder(layout())
        .reservation_window(Duration::from_secs(1))
        .build_leased(store as Arc<dyn NodeStore>, NodeRequest::Any)
        .unwrap();
    let a = g.next_id().unwrap();
    assert!(g.next_id().unwrap() > a);
}

/// A claimant whose clock is far behind etcd's (more than the tolerance) is refused with the
/// numbers, before any ID, rather than waiting or starting below a deleted holder.
#[test]
fn a_claimant_far_behind_etcd_is_refused_with_the_numbers() {
    let etcd = common::Etcd::shared();
    let prefix = prefix("far");
    let store = store(&etcd, &prefix);
    match Generator::builder(layout())
        .clock(common::Skewed::by(-60_000))
        .build_leased(store as Arc<dyn NodeStore>, NodeRequest::Exact(0))
    {
        Err(Error::ReservationAhead { node: 0, .. }) => {}
        other => panic!("{other:?}"),
    }
}

/// The documented limit, from the side it must let through: a holder up to
/// `EtcdOptions::max_clock_lead` (250 ms) ahead of etcd is confirmed at every check, whatever
/// fraction of a second etcd's `Date` is read in (it is truncated to the second, so a lead
/// past 250 ms is refused at some checks: a holder 600 ms ahead lost its claim within seconds
/// in the review, and the docs say so). Here 200 ms ahead, for about twelve checks.
#[test]
fn a_holder_200_ms_ahead_keeps_its_claim() {
    let etcd = common::Etcd::shared();
    let prefix = prefix("sub-second");
    let store = store(&etcd, &prefix);
    let clock = common::Skewed::by(0);
    let g = Generator::builder(layout())
        .clock(Arc::clone(&clock))
        .build_leased(store as Arc<dyn NodeStore>, NodeRequest::Exact(1))
        .unwrap();
    clock.set(200);
    let mut issued = 0u64;
    let until = Instant::now() + Duration::from_secs(6);
    while Instant::now() < until {
        match g.try_next_id() {
            Ok(_) => issued += 1,
            Err(Error::WouldBlock { .. }) => {}
            Err(e) => panic!("a holder 200 ms ahead of etcd lost its claim: {e}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(issued > 0);
    assert_eq!(g.stats().lease_losses, 0);
}

/// The same for a claimant of a node with no record, whose first check falls at a fixed
/// fraction of etcd's second (it waits until its clock reaches a floor built on a whole
/// second): 200 ms ahead, it starts, on two fresh nodes. (400 ms ahead it is refused every
/// time, as on PostgreSQL where the limit is exact.)
#[test]
fn a_claimant_200_ms_ahead_starts_a_fresh_node() {
    let etcd = common::Etcd::shared();
    let prefix = prefix("phase");
    let store = store(&etcd, &prefix);
    for node in 0..2 {
        let g = Generator::builder(layout())
            .clock(common::Skewed::by(200))
            .build_leased(
                Arc::clone(&store) as Arc<dyn NodeStore>,
                NodeRequest::Exact(node),
            )
            .unwrap_or_else(|e| panic!("node {node}: 200 ms ahead of etcd, not started: {e}"));
        g.next_id().unwrap();
    }
}

/// A claimant refused at its first check (its clock too far ahead of etcd's) has issued
/// nothing, so it must leave the node as it found it. It wrote its first reservation before
/// that check — on a node with no record, etcd's clock plus the floor's margin plus a window,
/// about 10 s ahead — so the next claimant on an honest clock was refused (`ReservationAhead`,
/// more than the 5.1 s tolerance); and one that trusts future reservations jumps to such a
/// record, is refused at its first check in turn and writes it a window further ahead, each
/// attempt (the CLI with --trust-reservation and a clock 8 s behind: 5.9, 6.9, 7.8, 8.8 s
/// ahead after three attempts 4 s apart).
#[test]
fn a_claimant_refused_at_its_first_check_leaves_the_node_as_it_was() {
    let etcd = common::Etcd::shared();
    let prefix = prefix("first-check");
    let store = store(&etcd, &prefix);
    match Generator::builder(layout())
        .clock(common::Skewed::by(3_000))
        .build_leased(
            Arc::clone(&store) as Arc<dyn NodeStore>,
            NodeRequest::Exact(0),
        ) {
        Err(Error::LeaseLost { reason, .. }) if named(&reason) => {}
        other => panic!("{other:?}"),
    }
    let honest = Generator::builder(layout())
        .build_leased(store as Arc<dyn NodeStore>, NodeRequest::Exact(0))
        .map(|g| g.next_id());
    assert!(
        matches!(honest, Ok(Ok(_))),
        "the next claimant on an honest clock: {honest:?}"
    );
}
