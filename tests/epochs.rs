//! Layouts of one bit shape with different epochs or ticks are one node space (issue 34,
//! case 3): a layout restarted with its epoch moved issued 2,729,664 of 3,000,000 IDs again,
//! silently, because its records were kept under a name that includes the epoch and held
//! Unix ms. Now records are kept by bit shape and compared as ID values: a moved epoch starts
//! above every ID value its node issued, waits for it, or is refused with the numbers.

mod common;

use std::sync::Arc;
use std::time::Duration;

use monoflake::{Error, FileStore, Generator, Layout, NodeRequest, NodeStore};

/// A custom layout of Twitter's bit shape with its epoch at `epoch_ms`, ticks of `tick_ms`.
fn twitter_shaped(epoch_ms: u64, tick_ms: u64) -> Layout {
    Layout::builder()
        .node_field("worker", 10)
        .epoch_ms(epoch_ms)
        .tick_ms(tick_ms)
        .build()
        .unwrap()
}

/// 2024-01-01T00:00:00Z.
const EPOCH: u64 = 1_704_067_200_000;

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// `n` IDs from a leased generator of `layout` on node 0, as raw values, sorted.
fn issue(store: &Arc<dyn NodeStore>, layout: &Layout, n: usize) -> Vec<u64> {
    let g = Generator::builder(layout.clone())
        .build_leased(Arc::clone(store), NodeRequest::Exact(0))
        .unwrap();
    let mut ids: Vec<u64> = (0..n).map(|_| g.next_id().unwrap().as_u64()).collect();
    drop(g);
    ids.sort_unstable();
    ids
}

/// The case as seen: 3,000,000 IDs, then a restart with the epoch 1 s later on the same
/// state directory. Before, 2,729,664 of them came again; now none: the restart waits the
/// second its moved epoch puts the node's reservation ahead, then starts above it.
#[test]
fn a_restart_with_the_epoch_one_second_later_issues_no_id_again() {
    let dir = common::TempDir::new("epoch-restart");
    let store: Arc<dyn NodeStore> = Arc::new(FileStore::open(dir.path()).unwrap());
    let first = issue(&store, &twitter_shaped(EPOCH, 1), 3_000_000);
    let second = issue(&store, &twitter_shaped(EPOCH + 1_000, 1), 3_000_000);
    let again = second
        .iter()
        .filter(|id| first.binary_search(id).is_ok())
        .count();
    assert_eq!(again, 0, "IDs issued again after the epoch moved");
    assert!(second[0] > *first.last().unwrap());
}

/// Twitter's own layout and the same spec with the epoch's milliseconds dropped (657 ms
/// earlier), in turn, both ways: the same node space, no ID twice.
#[test]
fn twitter_and_twitter_with_its_epoch_s_milliseconds_dropped_share_a_node() {
    let dir = common::TempDir::new("epoch-twitter");
    let store: Arc<dyn NodeStore> = Arc::new(FileStore::open(dir.path()).unwrap());
    let twitter = Layout::twitter();
    let dropped: Layout = "time=41,datacenter=5,worker=5,sequence=12,epoch=1288834974000"
        .parse()
        .unwrap();
    assert_ne!(dropped.state_name(), twitter.state_name());
    assert_eq!(dropped.shape_key(), twitter.shape_key());
    // Held under one, held under the other.
    let held = store.claim(&twitter, NodeRequest::Exact(0)).unwrap();
    assert!(matches!(
        store.claim(&dropped, NodeRequest::Exact(0)),
        Err(Error::NodeHeld { node: 0, .. })
    ));
    store.abandon(held).unwrap();
    let mut all = issue(&store, &dropped, 300_000);
    all.extend(issue(&store, &twitter, 300_000));
    all.extend(issue(&store, &dropped, 300_000));
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "IDs issued twice");
}

/// An epoch moved a minute later puts the node's reservation a minute ahead, beyond the
/// tolerance: the exact node is refused with the numbers (never started underneath), any
/// node passes it over.
#[test]
fn an_epoch_moved_beyond_the_tolerance_is_refused() {
    let dir = common::TempDir::new("epoch-refused");
    let store: Arc<dyn NodeStore> = Arc::new(FileStore::open(dir.path()).unwrap());
    let before = twitter_shaped(EPOCH, 1);
    let g = Generator::builder(before.clone())
        .build_leased(Arc::clone(&store), NodeRequest::Exact(0))
        .unwrap();
    let last = g.next_id().unwrap();
    drop(g);
    let last_ms = last.parts(&before).unwrap().unix_ms();
    let moved = twitter_shaped(EPOCH + 60_000, 1);
    match Generator::builder(moved.clone()).build_leased(Arc::clone(&store), NodeRequest::Exact(0))
    {
        Err(Error::ReservationAhead {
            node: 0,
            reserved_until_ms,
            ahead,
            tolerance,
            ..
        }) => {
            // At least the last tick issued, a minute later in the moved epoch's time.
            assert!(reserved_until_ms > last_ms + 60_000, "{reserved_until_ms}");
            assert!(ahead > Duration::from_secs(55), "{ahead:?}");
            assert_eq!(tolerance, Duration::from_millis(5_200));
        }
        other => panic!("{other:?}"),
    }
    let any = Generator::builder(moved)
        .build_leased(Arc::clone(&store), NodeRequest::Any)
        .unwrap();
    assert_ne!(any.node(), 0);
}

/// The same shape with 10 ms ticks instead of 1 ms: its time field counts tens of ms, so
/// the 1 ms layout's time fields lie years ahead of it. Refused, not started underneath.
#[test]
fn another_tick_of_one_shape_is_compared_by_time_field() {
    let dir = common::TempDir::new("epoch-tick");
    let store: Arc<dyn NodeStore> = Arc::new(FileStore::open(dir.path()).unwrap());
    drop(issue(&store, &twitter_shaped(EPOCH, 1), 10));
    let slow = twitter_shaped(EPOCH, 10);
    assert!(matches!(
        Generator::builder(slow).build_leased(Arc::clone(&store), NodeRequest::Exact(0)),
        Err(Error::ReservationAhead { node: 0, .. })
    ));
}

/// A record written before records were kept by shape (under the layout's state name, in its
/// Unix ms) is honoured after the upgrade: a floor, read at the claim.
#[test]
fn a_record_of_before_the_upgrade_is_honoured() {
    let dir = common::TempDir::new("epoch-legacy");
    let layout = twitter_shaped(EPOCH + 1_000, 1);
    let old = dir.path().join(&*layout.state_name());
    std::fs::create_dir_all(&old).unwrap();
    let until = now_ms() + 3_000;
    // What monoflake wrote before (a version-2 record with its checksum): written by this
    // very build through a store of before would need the old code, so the text is made
    // by a claim of a preset (whose records never moved) and copied.
    let store = FileStore::open(dir.path()).unwrap();
    let twitter = Layout::twitter();
    let c = store.claim(&twitter, NodeRequest::Exact(5)).unwrap();
    store.release(c, until).unwrap();
    std::fs::copy(
        dir.path().join("twitter/node-5.reservation"),
        old.join("node-0.reservation"),
    )
    .unwrap();
    let claim = store.claim(&layout, NodeRequest::Exact(0)).unwrap();
    assert_eq!(claim.reserved_until_ms(), Some(until));
    // Only a floor: the node's own record is not there, so it waits and reads again.
    assert!(!claim.recorded());
    store.abandon(claim).unwrap();
}
