//! A per-core generator holding its node through a store
//! ([`GeneratorBuilder::build_leased_per_core`](monoflake::GeneratorBuilder::build_leased_per_core)):
//! one keeper, every slot fenced, every slot sealed when the node goes.

mod common;

use std::sync::Arc;
use std::time::Duration;

use monoflake::{Error, Generator, Id, Layout, ManualClock, NodeRequest, NodeStore};

fn assert_distinct(ids: &[Id]) {
    let mut all = ids.to_vec();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), ids.len(), "duplicate IDs");
}

/// Four threads take 250,000 IDs each from a leased per-core generator with a short window (so
/// the keeper extends many times, for the highest tick any slot issued in): every ID distinct,
/// on the node held, each thread's increasing; once released, the node's next holder starts
/// after every ID any slot issued.
#[test]
fn a_leased_per_core_generator_hands_its_node_on_after_every_id() {
    const PER_THREAD: usize = 250_000;
    let dir = common::TempDir::new("per-core-lease");
    let store = Arc::new(monoflake::FileStore::open(dir.path()).unwrap());
    let layout = Layout::twitter();
    let g = Generator::builder(layout.clone())
        .reservation_window(Duration::from_millis(40))
        .max_wait(Duration::from_secs(30))
        .build_leased_per_core(store.clone(), NodeRequest::Exact(7), 4)
        .unwrap();
    assert_eq!((g.node(), g.slots()), (7, 4));
    let runs: Vec<Vec<Id>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let g = &g;
                s.spawn(move || (0..PER_THREAD).map(|_| g.next_id().unwrap()).collect())
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    for run in &runs {
        assert!(run.windows(2).all(|w| w[0] < w[1]));
    }
    let all = runs.concat();
    assert_eq!(all.len(), 4 * PER_THREAD);
    assert_distinct(&all);
    assert!(all.iter().all(|id| id.parts(&layout).unwrap().node() == 7));
    let stats = g.stats();
    assert_eq!(stats.issued, all.len() as u64);
    assert!(stats.reservation_writes >= 3, "{stats}");
    let highest = *all.iter().max().unwrap();
    g.release().unwrap();
    let next = Generator::builder(layout)
        .build_leased(store, NodeRequest::Exact(7))
        .unwrap();
    assert!(next.next_id().unwrap() > highest);
}

/// A leased per-core holder whose clock runs two seconds ahead has its records deleted while
/// three threads issue on three slots. Finding its claim gone it seals every slot and writes
/// back the end of the highest tick any slot issued in, before it lets the node go: the
/// claimant that takes the node then reads it, above every ID, and so does the node's next
/// generator. Every slot refuses with `LeaseLost` from then on.
#[test]
fn a_per_core_holder_whose_claim_is_lost_seals_every_slot_and_writes_back() {
    let dir = common::TempDir::new("per-core-lost");
    let state = dir.path().join("state");
    let store: Arc<dyn NodeStore> = Arc::new(monoflake::FileStore::open(&state).unwrap());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let ahead = Arc::new(ManualClock::new(now + 2_000));
    // Sonyflake's layout: 10 ms ticks from its own epoch, so a write-back that read the
    // slots' ticks in any other layout (Twitter's, the default) would be far off.
    let layout = Layout::sonyflake();
    let holder = Generator::builder(layout.clone())
        .clock(Arc::clone(&ahead))
        // Room for each thread's first thousand IDs on the stopped clock (256 a tick).
        .max_lead(Duration::from_secs(1))
        .build_leased_per_core(Arc::clone(&store), NodeRequest::Exact(1), 4)
        .unwrap();
    let cleared = std::sync::atomic::AtomicBool::new(false);
    let (runs, claim): (Vec<Vec<Id>>, _) = std::thread::scope(|s| {
        let workers: Vec<_> = (0..3)
            .map(|_| {
                let (holder, ahead, cleared) = (&holder, &ahead, &cleared);
                s.spawn(move || {
                    let mut run: Vec<Id> =
                        (0..1000).map(|_| holder.try_next_id().unwrap()).collect();
                    // Liveness bounds only: a failure elsewhere fails the test, not hangs it.
                    let waiting = std::time::Instant::now() + Duration::from_secs(120);
                    while !cleared.load(std::sync::atomic::Ordering::Acquire) {
                        assert!(std::time::Instant::now() < waiting, "never cleared");
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    let give_up = std::time::Instant::now() + Duration::from_secs(120);
                    loop {
                        match holder.try_next_id() {
                            Ok(id) => run.push(id),
                            Err(Error::LeaseLost { node: 1, .. }) => break,
                            Err(_) => ahead.advance_ms(1),
                        }
                        assert!(std::time::Instant::now() < give_up, "never lost");
                    }
                    run
                })
            })
            .collect();
        let claim = common::delete_and_claim_when_let_go(&state, &*store, &layout, 1, &cleared);
        let runs = workers.into_iter().map(|w| w.join().unwrap()).collect();
        (runs, claim)
    });
    for run in &runs {
        assert!(run.windows(2).all(|w| w[0] < w[1]));
    }
    let all = runs.concat();
    assert_distinct(&all);
    // Sealed, the slots still count what they issued.
    assert_eq!(holder.stats().issued, all.len() as u64);
    // A thread on another slot finds it sealed too, and its check says so.
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                assert!(matches!(
                    holder.try_next_id(),
                    Err(Error::LeaseLost { node: 1, .. })
                ));
                assert!(matches!(
                    holder.check(),
                    Err(Error::LeaseLost { node: 1, .. })
                ));
            });
        }
    });
    let last_ms = all
        .iter()
        .map(|id| id.parts(&layout).unwrap().unix_ms())
        .max()
        .unwrap();
    let again = store.reservation(&claim).unwrap();
    assert!(
        again.is_some_and(|until| until > last_ms),
        "the claimant read {again:?}; the holder's slots issued up to {last_ms}"
    );
    store.release(claim, 0).unwrap();
    match holder.release() {
        Err(Error::LeaseLost { node: 1, .. }) => {}
        other => panic!("{other:?}"),
    }
    let next = Generator::builder(layout)
        .build_leased(store, NodeRequest::Exact(1))
        .unwrap();
    let first = next.next_id().unwrap();
    assert!(all.iter().all(|&id| id < first));
}
