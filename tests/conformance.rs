//! One conformance suite for the `IdGenerator` contract, run against every flavour: the plain
//! generator on the locked and the coarse clock, the per-core generator, the per-thread
//! generator (and its handle), and the leased generator on the file store.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{TempDir, hammer};
use monoflake::{
    CoarseClock, DEFAULT_TICKER_INTERVAL, Error, FileStore, Generator, IdGenerator, Layout,
    ManualClock, NodeRequest,
};

const T0: u64 = 1_700_000_000_000;

/// Unique across threads, increasing per thread, every ID carrying the generator's node, and
/// every one counted.
fn unique_increasing_and_counted(g: &(impl IdGenerator + Sync)) {
    let all = hammer(g, 2, 200_000);
    assert_eq!(all.len(), 400_000);
    let layout = g.layout();
    assert!(
        all.iter()
            .all(|id| id.parts(layout).unwrap().node() == g.node())
    );
    assert_eq!(g.stats().issued, 400_000);
}

/// A batch is `n` increasing IDs, all above the ID before it and below the ID after it.
fn batches_are_runs_between_single_ids(g: &impl IdGenerator) {
    for n in [1, 7, 4096, 10_000] {
        let before = g.next_id().unwrap();
        let run: Vec<_> = g.next_ids(n).unwrap().collect();
        let after = g.next_id().unwrap();
        assert_eq!(run.len() as u64, n);
        assert!(run.windows(2).all(|w| w[0] < w[1]));
        assert!(before < run[0] && *run.last().unwrap() < after);
        let empty = g.try_next_ids(0).unwrap();
        assert_eq!(empty.len(), 0);
    }
}

/// Time is honest: every ID's time lies between the clock before the call (less one tick
/// for the clock's own rounding) and the clock after it plus `max_lead`.
fn time_is_honest(g: &impl IdGenerator, now_ms: impl Fn() -> u64, max_lead_ms: u64) {
    for _ in 0..100_000 {
        let before = now_ms();
        let id = g.next_id().unwrap();
        let after = now_ms();
        let t = id.parts(g.layout()).unwrap().unix_ms();
        assert!(t + 1 >= before, "ID time {t} behind the clock {before}");
        assert!(
            t <= after + max_lead_ms,
            "ID time {t} more than {max_lead_ms} ms ahead of {after}"
        );
    }
}

/// With the clock standing still and no lead, the sequence runs out: the non-waiting call
/// says `WouldBlock` (with a retry hint), the waiting one `TimedOut`, nothing repeats.
fn a_frozen_clock_fails_loudly(g: &impl IdGenerator) {
    let mut ids = Vec::new();
    let err = loop {
        match g.try_next_id() {
            Ok(id) => ids.push(id),
            Err(e) => break e,
        }
        assert!(ids.len() <= 1 << 12, "more IDs than one tick holds");
    };
    assert!(matches!(err, Error::WouldBlock { .. }), "{err:?}");
    assert!(err.is_retryable() && err.retry_after().is_some());
    assert!(matches!(g.next_id(), Err(Error::TimedOut { .. })));
    assert!(matches!(g.try_next_ids(1), Err(Error::WouldBlock { .. })));
    let n = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), n);
    // Two `WouldBlock`s returned; the waiting call retried inside and gave up.
    let stats = g.stats();
    assert_eq!(
        (
            stats.would_block_returned,
            stats.waiting_calls,
            stats.timed_out
        ),
        (2, 1, 1),
        "{stats:?}"
    );
    assert!(stats.wait_retries >= 1, "{stats:?}");
    assert_eq!(
        stats.wait_retries,
        stats.wait_spins + stats.wait_yields + stats.wait_sleeps
    );
}

fn frozen() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(T0))
}

fn frozen_builder(clock: &Arc<ManualClock>) -> monoflake::GeneratorBuilder<Arc<ManualClock>> {
    Generator::builder(Layout::twitter())
        .node(9)
        .clock(Arc::clone(clock))
        .max_lead(Duration::ZERO)
        .max_wait(Duration::from_millis(5))
}

#[test]
fn plain_generator_on_the_locked_clock() {
    let g = Generator::new(Layout::twitter(), 3).unwrap();
    unique_increasing_and_counted(&g);
    batches_are_runs_between_single_ids(&g);
    let clock = g.clock().clone();
    time_is_honest(&g, || monoflake::TimeSource::now_ms(&clock), 100);
    a_frozen_clock_fails_loudly(&frozen_builder(&frozen()).build().unwrap());
}

#[test]
fn plain_generator_on_the_coarse_clock() {
    let (clock, _ticker) = CoarseClock::start(DEFAULT_TICKER_INTERVAL).unwrap();
    let g = Generator::builder(Layout::twitter())
        .node(4)
        .clock(clock.clone())
        .build()
        .unwrap();
    unique_increasing_and_counted(&g);
    batches_are_runs_between_single_ids(&g);
    time_is_honest(&g, || monoflake::TimeSource::precise_now_ms(&clock), 100);
}

#[test]
fn per_core_generator() {
    let clock = monoflake::LockedClock::new();
    let g = Generator::builder(Layout::twitter())
        .node(5)
        .clock(clock.clone())
        .build_per_core(2)
        .unwrap();
    unique_increasing_and_counted(&g);
    batches_are_runs_between_single_ids(&g);
    time_is_honest(&g, || monoflake::TimeSource::now_ms(&clock), 100);
    a_frozen_clock_fails_loudly(&frozen_builder(&frozen()).build_per_core(2).unwrap());
}

#[test]
fn per_thread_generator() {
    let (clock, _ticker) = CoarseClock::start(DEFAULT_TICKER_INTERVAL).unwrap();
    let g = Generator::builder(Layout::twitter())
        .node(6)
        .clock(clock.clone())
        .build_per_thread(4)
        .unwrap();
    unique_increasing_and_counted(&g);
    batches_are_runs_between_single_ids(&g);
    time_is_honest(&g, || monoflake::TimeSource::precise_now_ms(&clock), 100);
    a_frozen_clock_fails_loudly(&frozen_builder(&frozen()).build_per_thread(1).unwrap());
    // The explicit handle keeps the same contract (it is one thread's: no cross-thread part).
    let locked = monoflake::LockedClock::new();
    let g = Generator::builder(Layout::twitter())
        .node(6)
        .clock(locked.clone())
        .build_per_thread(2)
        .unwrap();
    let local = g.local().unwrap();
    batches_are_runs_between_single_ids(&local);
    time_is_honest(&local, || monoflake::TimeSource::now_ms(&locked), 100);
    let frozen_g = frozen_builder(&frozen()).build_per_thread(1).unwrap();
    a_frozen_clock_fails_loudly(&frozen_g.local().unwrap());
}

#[test]
fn leased_generator_on_the_file_store() {
    let dir = TempDir::new("conformance");
    let store = Arc::new(FileStore::open(dir.path()).unwrap());
    let g = Generator::builder(Layout::twitter())
        .build_leased(store, NodeRequest::Any)
        .unwrap();
    unique_increasing_and_counted(&g);
    batches_are_runs_between_single_ids(&g);
    let clock = g.clock().clone();
    time_is_honest(&g, || monoflake::TimeSource::now_ms(&clock), 100);
    drop(g);
    let other = TempDir::new("conformance-frozen");
    let leased = frozen_builder(&frozen())
        .build_leased(
            Arc::new(FileStore::open(other.path()).unwrap()),
            NodeRequest::Any,
        )
        .unwrap();
    a_frozen_clock_fails_loudly(&leased);
}
