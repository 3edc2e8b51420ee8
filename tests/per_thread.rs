//! The per-thread generator: slots taken and given back, the hand-over of a slot's state,
//! more threads than slots, pools that replace their threads, several generators on one
//! thread, and calls from a thread-local's destructor.

mod common;

use std::sync::mpsc;
use std::sync::{Arc, Barrier, OnceLock};
use std::time::Duration;

use monoflake::{Error, Generator, Id, Layout, ManualClock, PerThread};

const T0: u64 = 1_700_000_000_000;

/// Two sequence bits (four values per tick), no node bits.
fn two_bits() -> Layout {
    Layout::builder()
        .epoch_ms(Layout::twitter().epoch_ms())
        .sequence_bits(2)
        .build()
        .unwrap()
}

/// A per-thread generator with `slots` slots on `layout` at a clock frozen at `T0`, a lead of
/// `lead_ms`, and a short wait.
fn frozen(
    layout: Layout,
    slots: usize,
    lead_ms: u64,
) -> (PerThread<Arc<ManualClock>>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(T0));
    let g = Generator::builder(layout)
        .clock(Arc::clone(&clock))
        .max_lead(Duration::from_millis(lead_ms))
        .max_wait(Duration::from_millis(50))
        .build_per_thread(slots)
        .unwrap();
    (g, clock)
}

/// (ms after `T0`, slot, sequence within the slot) of an ID on the two-bit layout with two
/// slots (one slot bit on top of one sequence bit).
fn decoded(id: Id, layout: &Layout) -> (u64, u64, u64) {
    let p = id.parts(layout).unwrap();
    (p.unix_ms() - T0, p.sequence() >> 1, p.sequence() & 1)
}

fn assert_distinct(ids: &[Id]) {
    let mut all = ids.to_vec();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), ids.len(), "duplicate IDs");
}

/// A handle given back in the middle of a tick: the slot's next holder goes on after the last
/// value issued, in the same tick, never from the tick's start.
#[test]
fn a_slot_given_back_mid_tick_goes_on_after_its_last_value() {
    let layout = two_bits();
    let (g, _clock) = frozen(layout.clone(), 1, 0);
    let first = g.local().unwrap();
    let a = first.next_id().unwrap();
    assert_eq!(a.parts(&layout).unwrap().sequence(), 0);
    let b = first.next_id().unwrap();
    drop(first);
    let second = g.local().unwrap();
    let c = second.next_id().unwrap();
    assert_eq!(c.parts(&layout).unwrap().unix_ms(), T0);
    assert_eq!(c.parts(&layout).unwrap().sequence(), 2);
    assert!(c > b);
    // One slot: a second handle waits for it.
    assert!(matches!(g.local(), Err(Error::NoFreeSlot { slots: 1, .. })));
}

/// An iterator issues what the handle would, crossing into borrowed ticks with its numbers in
/// registers, and gives the last one back when it drops: the handle, then the slot's next
/// holder, go on right after it.
#[test]
fn an_iterator_hands_its_last_value_back_to_the_handle() {
    let layout = two_bits();
    let (g, _clock) = frozen(layout.clone(), 2, 5);
    let mut local = g.local().unwrap();
    let slot = local.slot() as u64;
    let a = local.next_id().unwrap();
    assert_eq!(decoded(a, &layout), (0, slot, 0));
    let run: Vec<Id> = local.ids().take(3).map(Result::unwrap).collect();
    assert_eq!(
        run.iter()
            .map(|&id| decoded(id, &layout))
            .collect::<Vec<_>>(),
        [(0, slot, 1), (1, slot, 0), (1, slot, 1)]
    );
    assert_eq!(decoded(local.next_id().unwrap(), &layout), (2, slot, 0));
    drop(local);
    // Slots are taken lowest first: the one given back.
    let again = g.local().unwrap();
    assert_eq!(again.slot() as u64, slot);
    assert_eq!(decoded(again.next_id().unwrap(), &layout), (2, slot, 1));
}

/// An iterator that is never dropped (`mem::forget`) cannot write back how far it went: the
/// handle goes on from the end of the tick the iterator was last in — the rest of that tick
/// is skipped, never a value issued twice — and so does the slot's next holder.
#[test]
fn a_forgotten_iterator_skips_the_rest_of_its_tick() {
    let layout = two_bits();
    // One slot: (ms after T0, sequence) of an ID.
    let at = |id: Id| {
        let p = id.parts(&layout).unwrap();
        (p.unix_ms() - T0, p.sequence())
    };
    let (g, _clock) = frozen(layout.clone(), 1, 10);
    let mut local = g.local().unwrap();
    let mut ids = local.ids();
    assert_eq!(at(ids.next().unwrap().unwrap()), (0, 0));
    std::mem::forget(ids);
    // Tick 0 had three values left; the handle takes none of them.
    assert_eq!(at(local.next_id().unwrap()), (1, 0));
    // Forgotten after moving into a later tick: the handle follows it past that tick.
    let mut ids = local.ids();
    let issued: Vec<Id> = (&mut ids).take(5).map(Result::unwrap).collect();
    assert_eq!(
        issued.iter().map(|&id| at(id)).collect::<Vec<_>>(),
        [(1, 1), (1, 2), (1, 3), (2, 0), (2, 1)]
    );
    std::mem::forget(ids);
    drop(local);
    let next = g.local().unwrap();
    assert_eq!(at(next.next_id().unwrap()), (3, 0));
}

/// A thread that exits holding a tick borrowed ahead of the clock: its slot's state is ahead of
/// the clock, and the next holder continues from it (the rest of the borrowed tick), not from
/// the clock's tick.
#[test]
fn a_thread_exiting_with_a_borrowed_tick_hands_it_on() {
    let layout = two_bits();
    let (g, _clock) = frozen(layout.clone(), 2, 5);
    // Two slots: each has two values per tick. Three IDs fill tick 0 and borrow tick 1.
    let exited: Vec<Id> = std::thread::scope(|s| {
        s.spawn(|| (0..3).map(|_| g.next_id().unwrap()).collect())
            .join()
            .unwrap()
    });
    let slot = decoded(exited[0], &layout).1;
    assert_eq!(
        exited
            .iter()
            .map(|&id| decoded(id, &layout))
            .collect::<Vec<_>>(),
        [(0, slot, 0), (0, slot, 1), (1, slot, 0)]
    );
    // The slot came back with the thread's exit. Take both slots (in order): the one that
    // was used goes on in the borrowed tick.
    let (x, y) = (g.local().unwrap(), g.local().unwrap());
    let reused = if x.slot() as u64 == slot { &x } else { &y };
    assert_eq!(decoded(reused.next_id().unwrap(), &layout), (1, slot, 1));
    // Tick 1 is full now and the lead (5 ticks) allows tick 2.
    assert_eq!(decoded(reused.next_id().unwrap(), &layout), (2, slot, 0));
    let fresh = if x.slot() as u64 == slot { &y } else { &x };
    assert_eq!(decoded(fresh.next_id().unwrap(), &layout).0, 0);
}

/// More threads than slots: the non-waiting calls say `NoFreeSlot`, the waiting ones wait for
/// a slot (for at most `max_wait`), and a slot given back meanwhile is taken.
#[test]
fn more_threads_than_slots_get_a_typed_error_or_wait() {
    let (g, _clock) = frozen(Layout::twitter(), 2, 100);
    let held = [g.local().unwrap(), g.local().unwrap()];
    for h in &held {
        h.next_id().unwrap();
    }
    std::thread::scope(|s| {
        s.spawn(|| {
            assert!(matches!(
                g.try_next_id(),
                Err(Error::NoFreeSlot { slots: 2, .. })
            ));
            assert!(matches!(g.try_next_ids(3), Err(Error::NoFreeSlot { .. })));
            assert!(matches!(g.local(), Err(Error::NoFreeSlot { .. })));
            // Waits its 50 ms, then says so; counted as a waiting call, with its retries.
            let e = g.next_id().unwrap_err();
            assert!(matches!(e, Error::NoFreeSlot { .. }), "{e:?}");
            assert!(e.is_retryable());
            let stats = g.stats();
            assert_eq!(stats.waiting_calls, 1, "{stats:?}");
            // Six spins, ten yields, then naps from 50 us doubling to 5 ms, the last cut to
            // what is left of the 50 ms: 50 + 100 + ... + 3,200 us (7), 5 ms eight times, and
            // 3.65 ms. Counted by the time asked for, not the time slept.
            assert_eq!(
                (stats.wait_spins, stats.wait_yields, stats.wait_sleeps),
                (6, 10, 16),
                "{stats:?}"
            );
            assert_eq!(
                stats.wait_retries,
                stats.wait_spins + stats.wait_yields + stats.wait_sleeps
            );
        })
        .join()
        .unwrap();
    });
    drop(held);
    // A slot given back while a thread waits for one (a wait of up to 30 s, so a loaded
    // machine does not make it run out).
    let g = Generator::builder(Layout::twitter())
        .max_wait(Duration::from_secs(30))
        .build_per_thread(1)
        .unwrap();
    let held = g.local().unwrap();
    let before = held.next_id().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            tx.send(()).unwrap();
            g.next_id()
        });
        rx.recv().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        drop(held);
        assert!(waiter.join().unwrap().unwrap() > before);
    });
}

/// A pool that replaces its threads: 200 threads over time on two slots, at most four alive at
/// once, each taking IDs and exiting. Every ID is distinct, each thread's increase, and every
/// one is counted once the threads are gone.
#[test]
fn a_pool_churning_threads_reuses_the_slots() {
    let g = Generator::builder(Layout::twitter())
        .node(2)
        .max_wait(Duration::from_secs(30))
        .build_per_thread(2)
        .unwrap();
    let mut all = Vec::new();
    for _ in 0..50 {
        let runs: Vec<Vec<Id>> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..4)
                .map(|_| s.spawn(|| (0..500).map(|_| g.next_id().unwrap()).collect::<Vec<_>>()))
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        for run in &runs {
            assert!(run.windows(2).all(|w| w[0] < w[1]));
        }
        all.extend(runs.into_iter().flatten());
    }
    assert_eq!(all.len(), 50 * 4 * 500);
    assert_distinct(&all);
    assert_eq!(g.stats().issued, all.len() as u64);
}

/// Two slots, two threads at a frozen clock with a lead: each thread's IDs fill its half of
/// every tick, the two never meet, and every ID is counted.
#[test]
fn two_threads_on_two_slots_at_a_frozen_clock() {
    let layout = Layout::builder()
        .epoch_ms(Layout::twitter().epoch_ms())
        .sequence_bits(4)
        .build()
        .unwrap();
    let (g, _clock) = frozen(layout.clone(), 2, 50);
    let (start, end) = (Barrier::new(2), Barrier::new(2));
    let runs: Vec<Vec<Id>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    start.wait();
                    // 8 values per tick per slot, 50 ticks of lead: ticks 0 to 49 whole, and
                    // of tick 50, the last the lead allows (paced), the one slot a clock
                    // without a nanosecond reading opens; then WouldBlock.
                    let mut run = Vec::new();
                    loop {
                        match g.try_next_id() {
                            Ok(id) => run.push(id),
                            Err(Error::WouldBlock { .. }) => break,
                            Err(e) => panic!("{e}"),
                        }
                    }
                    // Both hold their slots to the end (a thread that exits gives its slot,
                    // at the lead limit, to the next one to ask).
                    end.wait();
                    run
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    for run in &runs {
        assert_eq!(run.len(), 8 * 50 + 1);
        assert!(run.windows(2).all(|w| w[0] < w[1]));
        let slot = run[0].parts(&layout).unwrap().sequence() >> 3;
        assert!(
            run.iter()
                .all(|id| id.parts(&layout).unwrap().sequence() >> 3 == slot)
        );
    }
    let all: Vec<Id> = runs.concat();
    assert_distinct(&all);
    assert_eq!(g.stats().issued, all.len() as u64);
    assert!(g.stats().would_block_returned >= 2);
}

/// Several generators on one thread: calls alternate between them, each generator's IDs
/// increase, and a generator's slot comes back when the thread exits.
#[test]
fn several_generators_on_one_thread() {
    let layout = two_bits();
    let (a, _ca) = frozen(layout.clone(), 1, 100);
    let (b, _cb) = frozen(layout.clone(), 1, 100);
    let (ids_a, ids_b): (Vec<Id>, Vec<Id>) = std::thread::scope(|s| {
        s.spawn(|| {
            (0..40)
                .map(|_| (a.next_id().unwrap(), b.next_id().unwrap()))
                .unzip()
        })
        .join()
        .unwrap()
    });
    for run in [&ids_a, &ids_b] {
        assert!(run.windows(2).all(|w| w[0] < w[1]));
    }
    // The thread exited: both slots are free, and go on after what it issued.
    assert!(a.next_id().unwrap() > *ids_a.last().unwrap());
    assert!(b.next_id().unwrap() > *ids_b.last().unwrap());
    // This thread holds both single slots now.
    std::thread::scope(|s| {
        s.spawn(|| assert!(matches!(a.try_next_id(), Err(Error::NoFreeSlot { .. }))));
    });
}

/// A generator dropped while a thread still holds one of its slots in its registry: the thread
/// lets it go the next time it brings another generator's numbers in, and goes on.
#[test]
fn a_dropped_generator_is_let_go_by_the_threads_that_used_it() {
    let a = Generator::builder(Layout::twitter())
        .build_per_thread(1)
        .unwrap();
    a.next_id().unwrap();
    drop(a);
    let b = Generator::builder(Layout::twitter())
        .build_per_thread(1)
        .unwrap();
    let x = b.next_id().unwrap();
    assert!(b.next_id().unwrap() > x);
}

/// A call from a thread-local's destructor while the thread exits — perhaps after the
/// generator's own registry is gone — still issues an ID (on a slot taken for the call), and
/// the slot is given back.
#[test]
fn a_call_from_a_thread_local_destructor_issues() {
    static G: OnceLock<PerThread> = OnceLock::new();
    let g = G.get_or_init(|| {
        Generator::builder(Layout::twitter())
            .build_per_thread(1)
            .unwrap()
    });
    struct CallsOnExit(mpsc::Sender<Result<Id, Error>>);
    impl Drop for CallsOnExit {
        fn drop(&mut self) {
            let g = G.get().unwrap();
            let _ = self.0.send(g.next_id());
            let _ = self.0.send(g.next_id());
        }
    }
    thread_local! {
        static ON_EXIT: std::cell::RefCell<Option<CallsOnExit>> = const { std::cell::RefCell::new(None) };
    }
    let (tx, rx) = mpsc::channel();
    let before = std::thread::spawn(move || {
        // The registry first, then the guard: and the other way round in the next thread.
        let id = g.next_id().unwrap();
        ON_EXIT.with(|e| *e.borrow_mut() = Some(CallsOnExit(tx)));
        id
    })
    .join()
    .unwrap();
    let on_exit: Vec<Id> = rx.iter().map(|r| r.unwrap()).collect();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        ON_EXIT.with(|e| *e.borrow_mut() = Some(CallsOnExit(tx)));
        g.next_id().unwrap();
    })
    .join()
    .unwrap();
    let later: Vec<Id> = rx.iter().map(|r| r.unwrap()).collect();
    assert_eq!((on_exit.len(), later.len()), (2, 2));
    let all = [vec![before], on_exit, later].concat();
    assert!(all.windows(2).all(|w| w[0] < w[1]), "{all:?}");
    // Every slot came back: this thread can take the only one.
    assert!(g.local().is_ok());
}

/// The largest batch is not refused as too large: a batch of exactly the limit a refusal
/// names fits once the lead's last tick has opened whole (here at the clock tick's last
/// nanosecond), from the clock's tick to the lead's last, in this thread's slot.
#[test]
fn the_largest_batch_fits_at_the_end_of_a_tick() {
    struct AtNs(u64);
    impl monoflake::TimeSource for AtNs {
        fn now_ms(&self) -> u64 {
            self.0 / 1_000_000
        }

        fn now_ns(&self) -> u64 {
            self.0
        }
    }
    let layout = two_bits();
    let g = Generator::builder(layout.clone())
        .clock(AtNs(T0 * 1_000_000 + 999_999))
        .max_lead(Duration::from_millis(3))
        .build_per_thread(2)
        .unwrap();
    let limit = match g.try_next_ids(u64::MAX) {
        Err(Error::BatchTooLarge { limit, .. }) => limit,
        other => panic!("{other:?}"),
    };
    // Four ticks (the clock's and the lead's three), two values each in one slot.
    assert_eq!(limit, 8);
    let ids: Vec<Id> = g.try_next_ids(limit).unwrap().collect();
    assert_eq!(ids.len(), 8);
    assert_distinct(&ids);
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    let (first, last) = (decoded(ids[0], &layout), decoded(ids[7], &layout));
    assert_eq!(
        (first.0, first.2, last.0, last.1, last.2),
        (0, 0, 3, first.1, 1)
    );
}

/// A per-thread generator on a layout whose time field ran out fails loudly, and keeps failing.
#[test]
fn an_exhausted_layout_fails_loudly() {
    let g = Generator::builder(Layout::baidu())
        .build_per_thread(2)
        .unwrap();
    assert!(matches!(g.try_next_id(), Err(Error::Exhausted { .. })));
    assert!(matches!(g.next_id(), Err(Error::Exhausted { .. })));
    let local = g.local().unwrap();
    assert!(matches!(local.try_next_id(), Err(Error::Exhausted { .. })));
    assert!(matches!(
        local.try_next_ids(4),
        Err(Error::Exhausted { .. })
    ));
}

/// Slots take sequence bits: the layout's cap is the limit, refused with the numbers.
#[test]
fn slots_are_limited_by_the_sequence_bits() {
    let e = Generator::builder(two_bits())
        .build_per_thread(3)
        .unwrap_err();
    assert!(matches!(
        e,
        Error::OutOfRange { ref field, value: 3, max: 2, .. } if field == "slots"
    ));
    let g = Generator::builder(two_bits()).build_per_thread(2).unwrap();
    assert_eq!(g.slots(), 2);
    let g = Generator::builder(two_bits()).build_per_thread(0).unwrap();
    assert_eq!(g.slots(), 1);
}

/// The node and the slot are in every ID: per-thread IDs of node 5 decode to node 5.
#[test]
fn ids_carry_the_node() {
    let g = Generator::builder(Layout::discord())
        .node(5)
        .build_per_thread(4)
        .unwrap();
    let local = g.local().unwrap();
    for id in [g.next_id().unwrap(), local.next_id().unwrap()] {
        assert_eq!(id.parts(g.layout()).unwrap().node(), 5);
    }
    let run: Vec<Id> = local.next_ids(100).unwrap().collect();
    assert!(
        run.iter()
            .all(|id| id.parts(g.layout()).unwrap().node() == 5)
    );
}

/// A leased per-thread generator: the keeper extends the reservation ahead of what the slots
/// move into (a short window, so it extends many times while three threads issue), and once
/// released, the node's next holder starts after every ID any thread issued.
#[test]
fn a_leased_per_thread_generator_hands_its_node_on_after_every_id() {
    let dir = common::TempDir::new("per-thread-lease");
    let store = Arc::new(monoflake::FileStore::open(dir.path()).unwrap());
    let g = Generator::builder(Layout::twitter())
        .reservation_window(Duration::from_millis(40))
        .build_leased_per_thread(store.clone(), monoflake::NodeRequest::Exact(3), 4)
        .unwrap();
    assert_eq!(g.node(), 3);
    let until = std::time::Instant::now() + Duration::from_millis(300);
    let runs: Vec<Vec<Id>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..3)
            .map(|k| {
                let g = &g;
                s.spawn(move || {
                    let local = (k == 0).then(|| g.local().unwrap());
                    let mut run = Vec::new();
                    while std::time::Instant::now() < until {
                        for _ in 0..256 {
                            let id = match &local {
                                Some(l) => l.next_id(),
                                None => g.next_id(),
                            };
                            run.push(id.unwrap());
                        }
                    }
                    run
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    for run in &runs {
        assert!(run.windows(2).all(|w| w[0] < w[1]));
    }
    let all: Vec<Id> = runs.concat();
    assert_distinct(&all);
    let stats = g.stats();
    assert_eq!(stats.issued, all.len() as u64);
    assert!(stats.reservation_writes >= 3, "{stats}");
    let highest = *all.iter().max().unwrap();
    g.release().unwrap();
    let next = Generator::builder(Layout::twitter())
        .build_leased(store, monoflake::NodeRequest::Exact(3))
        .unwrap();
    assert!(next.next_id().unwrap() > highest);
}

/// Millions of IDs across threads on the coarse clock, at the layout's cap: six threads (two
/// by `next_id`, two by a handle's calls, two by a handle's iterator, each new iterator after
/// 1000 IDs) take a million IDs each from six slots of Twitter's layout (eight slots, three
/// bits), each slot paced at its eighth of the cap. Every ID is distinct, each thread's increase,
/// and every one is counted.
#[test]
fn millions_of_ids_across_threads_are_unique() {
    const PER_THREAD: usize = 1_000_000;
    let (clock, _ticker) =
        monoflake::CoarseClock::start(monoflake::DEFAULT_TICKER_INTERVAL).unwrap();
    let g = Generator::builder(Layout::twitter())
        .node(9)
        .clock(clock)
        .max_wait(Duration::from_secs(30))
        .build_per_thread(8)
        .unwrap();
    let runs: Vec<Vec<Id>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..6)
            .map(|k| {
                let g = &g;
                s.spawn(move || match k % 3 {
                    0 => (0..PER_THREAD).map(|_| g.next_id().unwrap()).collect(),
                    1 => {
                        let local = g.local().unwrap();
                        (0..PER_THREAD).map(|_| local.next_id().unwrap()).collect()
                    }
                    _ => {
                        let mut local = g.local().unwrap();
                        let mut run = Vec::with_capacity(PER_THREAD);
                        while run.len() < PER_THREAD {
                            run.extend(local.ids().take(1000).map(Result::unwrap));
                        }
                        run
                    }
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    for run in &runs {
        assert!(run.windows(2).all(|w| w[0] < w[1]));
    }
    let all = runs.concat();
    assert_eq!(all.len(), 6 * PER_THREAD);
    assert_distinct(&all);
    assert_eq!(g.stats().issued, all.len() as u64);
}

/// A leased per-thread holder whose clock runs two seconds ahead has its records deleted, and
/// another claimant takes the node finding no record. The holder, finding its claim gone,
/// seals every slot — threads still issuing on three of them — and writes back the end of the
/// highest tick any slot moved into before it says the lease is lost: the claimant reads it
/// again, above every ID any thread issued, and so does the node's next generator.
#[test]
fn a_per_thread_holder_whose_claim_is_lost_seals_and_writes_back_its_last_tick() {
    let dir = common::TempDir::new("per-thread-lost");
    let state = dir.path().join("state");
    let store: Arc<dyn monoflake::NodeStore> =
        Arc::new(monoflake::FileStore::open(&state).unwrap());
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
        .build_leased_per_thread(Arc::clone(&store), monoflake::NodeRequest::Exact(1), 4)
        .unwrap();
    // Set once the records are gone and a claimant holds the node; a worker waits for it
    // (a liveness bound, so that a failure in the main thread fails the test, not hangs it).
    let cleared = std::sync::atomic::AtomicBool::new(false);
    let (runs, claim): (Vec<Vec<Id>>, _) = std::thread::scope(|s| {
        let workers: Vec<_> = (0..3)
            .map(|k| {
                let (holder, ahead, cleared) = (&holder, &ahead, &cleared);
                s.spawn(move || {
                    let local = (k == 0).then(|| holder.local().unwrap());
                    let next = || match &local {
                        Some(l) => l.try_next_id(),
                        None => holder.try_next_id(),
                    };
                    let mut run: Vec<Id> = (0..1000).map(|_| next().unwrap()).collect();
                    let waiting = std::time::Instant::now() + Duration::from_secs(120);
                    while !cleared.load(std::sync::atomic::Ordering::Acquire) {
                        assert!(std::time::Instant::now() < waiting, "never cleared");
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    // Issue until refused for good, moving the clock on (a liveness bound).
                    let give_up = std::time::Instant::now() + Duration::from_secs(120);
                    loop {
                        match next() {
                            Ok(id) => run.push(id),
                            Err(Error::LeaseLost { node: 1, .. }) => break,
                            Err(_) => ahead.advance_ms(1),
                        }
                        assert!(std::time::Instant::now() < give_up, "never lost");
                    }
                    // Refused for good, whichever way in.
                    assert!(matches!(next(), Err(Error::LeaseLost { .. })));
                    run
                })
            })
            .collect();
        // Every thread has issued; the records go, and a claimant on this host takes the
        // node once the holder has let go: it has sealed every slot and written back what
        // they used by then, which the claim reads.
        let claim = common::delete_and_claim_when_let_go(&state, &*store, &layout, 1, &cleared);
        let runs = workers.into_iter().map(|w| w.join().unwrap()).collect();
        (runs, claim)
    });
    for run in &runs {
        assert!(run.windows(2).all(|w| w[0] < w[1]));
    }
    let all = runs.concat();
    assert_distinct(&all);
    // A thread that takes a slot now finds it sealed, and so does a handle, also after an
    // iterator over it was forgotten (a sealed slot has no room to lend).
    std::thread::scope(|s| {
        s.spawn(|| {
            assert!(matches!(holder.try_next_id(), Err(Error::LeaseLost { .. })));
            let mut late = holder.local().unwrap();
            std::mem::forget(late.ids());
            assert!(matches!(late.try_next_id(), Err(Error::LeaseLost { .. })));
        });
    });
    let last_ms = all
        .iter()
        .map(|id| id.parts(&layout).unwrap().unix_ms())
        .max()
        .unwrap();
    let again = store.reservation(&claim).unwrap();
    assert!(
        again.is_some_and(|until| until > last_ms),
        "the claimant read {again:?} again; the holder's threads issued up to {last_ms}"
    );
    store.release(claim, 0).unwrap();
    drop(holder);
    let next = Generator::builder(layout)
        .build_leased(store, monoflake::NodeRequest::Exact(1))
        .unwrap();
    let first = next.next_id().unwrap();
    assert!(all.iter().all(|&id| id < first));
}

/// A clock that issues an ID from the generator it serves from inside its own read, once per
/// arming (`TimeSource` is user code): by the thread-local way in or by a handle.
mod calling_back {
    use std::cell::{Cell, OnceCell};
    use std::sync::OnceLock;
    use std::time::Duration;

    use monoflake::{Generator, Id, LocalSlot, PerThread, TimeSource};

    use super::{T0, two_bits};

    pub struct CallingBack;

    pub static GENERATOR: OnceLock<PerThread<CallingBack>> = OnceLock::new();

    thread_local! {
        /// Whether the next read calls back, and how: by a handle or by `next_id`.
        pub static ARMED: Cell<Option<bool>> = const { Cell::new(None) };
        /// What the call from inside the read issued.
        pub static INNER: Cell<Option<Id>> = const { Cell::new(None) };
        pub static HANDLE: OnceCell<LocalSlot<'static, CallingBack>> = const { OnceCell::new() };
    }

    impl TimeSource for CallingBack {
        fn now_ms(&self) -> u64 {
            if let Some(by_handle) = ARMED.take() {
                let g = GENERATOR.get().expect("built");
                let id = if by_handle {
                    HANDLE.with(|h| h.get_or_init(|| g.local().unwrap()).next_id())
                } else {
                    g.next_id()
                };
                INNER.set(Some(id.expect("the call from inside the clock")));
            }
            T0
        }
    }

    pub fn generator() -> &'static PerThread<CallingBack> {
        GENERATOR.get_or_init(|| {
            Generator::builder(two_bits())
                .clock(CallingBack)
                .max_lead(Duration::from_millis(100))
                .build_per_thread(2)
                .unwrap()
        })
    }
}

/// A clock that issues from the slot it serves, from inside the read of every call (the first
/// call, the common case inside a tick, and moves into borrowed ticks, on a layout of two
/// values per tick per slot): the outer call goes on after what the inner one issued, by the
/// thread-local way in and by a handle — never the same ID twice.
#[test]
fn a_clock_that_issues_from_its_own_generator_never_repeats_an_id() {
    use calling_back::{ARMED, HANDLE, INNER, generator};
    let g = generator();
    for by_handle in [false, true] {
        let mut run = Vec::new();
        for _ in 0..20 {
            ARMED.set(Some(by_handle));
            let outer = if by_handle {
                HANDLE.with(|h| h.get_or_init(|| g.local().unwrap()).next_id())
            } else {
                g.next_id()
            }
            .unwrap();
            let inner = INNER.take().expect("the clock called back");
            assert!(inner < outer, "{inner} then {outer}");
            run.extend([inner, outer]);
        }
        assert!(run.windows(2).all(|w| w[0] < w[1]), "{run:?}");
        assert_distinct(&run);
    }
}

/// On a layout whose time and sequence fields fill all 64 bits, one slot's last state would be
/// `u64::MAX`, the sealed marker: such a generator has two slots at least, so that the last
/// value of the time field is issued, counted and handed on like any other; with a single
/// sequence bit there is no room for a slot bit, which is refused.
#[test]
fn a_layout_that_fills_64_bits_keeps_a_slot_bit() {
    let full = |sequence_bits: u32| {
        Layout::builder()
            .epoch_ms(1_000)
            .time_bits(64 - sequence_bits)
            .sequence_bits(sequence_bits)
            .allow_sign_bit(true)
            .build()
            .unwrap()
    };
    // 44 bits of ms end within the clock's range (u64 nanoseconds); 20 sequence bits.
    let layout = full(20);
    let last_ms = 1_000 + layout.max_tick();
    let clock = Arc::new(ManualClock::new(last_ms));
    let g = Generator::builder(layout.clone())
        .clock(Arc::clone(&clock))
        .max_wait(Duration::ZERO)
        .build_per_thread(1)
        .unwrap();
    assert_eq!(g.slots(), 2);
    let mut local = g.local().unwrap();
    // Every value of the slot's half of the last tick, the very last one included.
    let per_slot = 1usize << 19;
    let run: Vec<Id> = local.ids().take(per_slot).map(Result::unwrap).collect();
    let last = run[per_slot - 1].parts(&layout).unwrap();
    assert_eq!(
        (last.tick(), last.sequence()),
        (layout.max_tick(), (1 << 19) - 1)
    );
    assert!(matches!(local.next_id(), Err(Error::Exhausted { .. })));
    drop(local);
    assert_eq!(g.stats().issued, per_slot as u64);
    // The slot's next holder goes on after its last value: nothing is left, and it says so.
    assert!(matches!(
        g.local().unwrap().next_id(),
        Err(Error::Exhausted { .. })
    ));
    assert!(matches!(
        Generator::builder(full(1)).build_per_thread(1),
        Err(Error::InvalidConfig {
            setting: "slots",
            ..
        })
    ));
    // Two sequence bits are enough: one for the slot, one for the sequence.
    let g = Generator::builder(full(2))
        .clock(ManualClock::new(T0))
        .build_per_thread(1)
        .unwrap();
    assert_eq!(g.slots(), 2);
    let ids: Vec<Id> = (0..4).map(|_| g.try_next_id().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
}

/// Two generators whose clock (`TimeSource` is user code, and so is a `tracing` subscriber on
/// the locked clock's re-anchor) issues from the other generator on the same thread, from
/// inside its read: issue 34, case 10.
mod calling_another {
    use std::cell::Cell;
    use std::sync::OnceLock;
    use std::time::Duration;

    use monoflake::{Generator, Id, Layout, PerThread, TimeSource};

    use super::T0;

    /// Reads `T0 + offset`; while armed, first issues one ID from generator `other`.
    pub struct Calling {
        pub other: usize,
    }

    pub static GENERATORS: [OnceLock<PerThread<Calling>>; 2] = [OnceLock::new(), OnceLock::new()];

    thread_local! {
        /// Whether reads call the other generator.
        pub static ARMED: Cell<bool> = const { Cell::new(false) };
        /// The clock's reading, in ms after `T0`.
        pub static OFFSET: Cell<u64> = const { Cell::new(0) };
        /// What the calls from inside reads issued, by generator.
        pub static INNER: std::cell::RefCell<[Vec<Id>; 2]> =
            const { std::cell::RefCell::new([Vec::new(), Vec::new()]) };
    }

    impl TimeSource for Calling {
        fn now_ms(&self) -> u64 {
            if ARMED.replace(false) {
                let g = generator(self.other);
                let id = g.next_id().expect("the call from inside the clock");
                INNER.with(|inner| inner.borrow_mut()[self.other].push(id));
                ARMED.set(true);
            }
            T0 + OFFSET.get()
        }
    }

    /// One node bit (generator `i` is node `i`), two sequence bits: with two slots, two
    /// values per tick per slot.
    pub fn layout() -> Layout {
        Layout::builder()
            .epoch_ms(Layout::twitter().epoch_ms())
            .node_field("worker", 1)
            .sequence_bits(2)
            .build()
            .unwrap()
    }

    pub fn generator(i: usize) -> &'static PerThread<Calling> {
        GENERATORS[i].get_or_init(|| {
            Generator::builder(layout())
                .node(i as u64)
                .clock(Calling { other: 1 - i })
                .max_lead(Duration::from_secs(10))
                .build_per_thread(2)
                .unwrap()
        })
    }
}

/// A clock that issues from another per-thread generator on the same thread inside every read
/// (the common case, and moves into later ticks, at a frozen and at a moving clock): each
/// generator's IDs carry its own node, increase along the thread, and none repeats.
#[test]
fn a_clock_that_issues_from_another_generator_never_repeats_an_id() {
    use calling_another::{ARMED, INNER, OFFSET, generator, layout};
    let layout = layout();
    let mut outer: [Vec<Id>; 2] = [Vec::new(), Vec::new()];
    for round in 0..200u64 {
        let i = (round % 3 == 0) as usize;
        OFFSET.set(round / 7);
        ARMED.set(true);
        let id = generator(i).next_id().unwrap();
        ARMED.set(false);
        outer[i].push(id);
    }
    let inner = INNER.take();
    for i in 0..2 {
        let all: Vec<Id> = outer[i].iter().chain(&inner[i]).copied().collect();
        assert!(all.len() > 100, "generator {i}: {} IDs", all.len());
        for id in &all {
            assert_eq!(
                id.parts(&layout).unwrap().node(),
                i as u64,
                "{id} of generator {i} carries another generator's node"
            );
        }
        assert_distinct(&all);
        assert!(outer[i].windows(2).all(|w| w[0] < w[1]), "{:?}", outer[i]);
        assert!(inner[i].windows(2).all(|w| w[0] < w[1]), "{:?}", inner[i]);
    }
}

/// What a per-thread generator, a held slot and its iterator show in `Debug`: the layout,
/// node, slot count and lease; the slot and its state; the slot and the last ID issued.
#[test]
fn a_per_thread_generator_its_slot_and_its_iterator_show_where_they_are() {
    let (g, _clock) = frozen(two_bits(), 2, 0);
    assert_eq!(
        format!("{g:?}"),
        "PerThread { layout: \"custom\", node: 0, slots: 2, leased: false, .. }"
    );
    let mut local = g.local().unwrap();
    let first = local.next_id().unwrap();
    // The slot's state: the last value's tick (T0) and sequence (0) in the slot's one bit.
    let state = (T0 - Layout::twitter().epoch_ms()) << 1;
    assert_eq!(decoded(first, &two_bits()), (0, 0, 0));
    assert_eq!(
        format!("{local:?}"),
        format!("LocalSlot {{ slot: 0, state: {state}, .. }}")
    );
    let mut ids = local.ids();
    assert_eq!(ids.size_hint(), (usize::MAX, None)); // endless
    let second = ids.next().unwrap().unwrap();
    assert_eq!(second.as_u64(), first.as_u64() + 1);
    assert_eq!(
        format!("{ids:?}"),
        format!("LocalIds {{ slot: 0, last: {second:?}, .. }}")
    );
}

/// A held slot answers as its generator does, called directly and through [`IdGenerator`]:
/// the layout and node, IDs one at a time and in batches (each on the node, each above the
/// last), and statistics that count every one of them.
#[test]
fn a_local_slot_answers_directly_and_through_the_trait() {
    use monoflake::IdGenerator;
    let g = Generator::builder(Layout::discord())
        .node(6)
        .clock(Arc::new(ManualClock::new(T0)))
        .build_per_thread(2)
        .unwrap();
    let local = g.local().unwrap();
    assert_eq!((local.layout().name(), local.node()), ("discord", 6));
    // Slots are taken lowest free first: a second handle holds slot 1, and its slot is free
    // again once it drops.
    let second = g.local().unwrap();
    assert_eq!((local.slot(), second.slot()), (0, 1));
    drop(second);
    assert_eq!(g.local().unwrap().slot(), 1);
    fn issue(g: &impl IdGenerator) -> Vec<Id> {
        assert_eq!((g.layout().name(), g.node()), ("discord", 6));
        let mut ids = vec![g.try_next_id().unwrap(), g.next_id().unwrap()];
        ids.extend(g.try_next_ids(3).unwrap());
        ids.extend(g.next_ids(2).unwrap());
        assert_eq!(g.stats().issued, 7);
        ids
    }
    let ids = issue(&local);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    let discord = Layout::discord();
    for id in &ids {
        let parts = id.parts(&discord).unwrap();
        assert_eq!((parts.unix_ms(), parts.node()), (T0, 6));
    }
    assert_eq!(local.stats().issued, 7);
    // The highest tick a slot moved into, as a keeper reads it to extend ahead of need.
    assert_eq!(g.last_tick(), T0 - Layout::discord().epoch_ms());
    drop(local);
    assert_eq!(g.stats().issued, 7);
}

/// A clock at `T0` that says when it is dropped: with its generator's last reference.
struct Witness(Arc<std::sync::atomic::AtomicBool>);

impl monoflake::TimeSource for Witness {
    fn now_ms(&self) -> u64 {
        T0
    }
}

impl Drop for Witness {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A thread that used two generators through `next_id` holds a slot of the second until it
/// exits (the call brought its numbers in, not a slot for one call), and a generator it
/// dropped is let go at its next switch of generators (its slot given back, its clock
/// dropped), not at its exit.
#[test]
fn a_thread_keeps_its_slots_and_lets_a_dropped_generator_go_at_its_next_switch() {
    let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let a = Generator::builder(Layout::twitter())
        .clock(Witness(Arc::clone(&dropped)))
        .build_per_thread(1)
        .unwrap();
    let (b, _clock) = frozen(Layout::twitter(), 1, 0);
    let (c, _clock) = frozen(Layout::twitter(), 1, 0);
    let (go, wait) = mpsc::channel::<()>();
    let (done, used) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        // Moved in, so that a failed assertion here drops it and the worker ends too.
        let go = go;
        let (b, c) = (&b, &c);
        let worker = s.spawn(move || {
            a.next_id().unwrap();
            b.next_id().unwrap();
            b.next_id().unwrap();
            done.send(()).unwrap();
            wait.recv().unwrap();
            drop(a);
            c.next_id().unwrap(); // a switch: from `b` to `c`
            done.send(()).unwrap();
            wait.recv().unwrap();
        });
        used.recv().unwrap();
        assert!(matches!(b.local(), Err(Error::NoFreeSlot { slots: 1, .. })));
        go.send(()).unwrap();
        used.recv().unwrap();
        assert!(
            dropped.load(std::sync::atomic::Ordering::SeqCst),
            "a dropped generator is still held by a live thread"
        );
        go.send(()).unwrap();
        worker.join().unwrap();
    });
    // The worker gave every slot back as it exited.
    assert!(b.local().is_ok() && c.local().is_ok());
}

/// A thread exiting gives each slot back with that slot's own last state: the parked
/// generator's (ahead of the other's clock) as well as the one in use. Its next holder goes
/// on after the last value issued, never from the tick's start.
#[test]
fn an_exiting_thread_gives_each_generator_its_own_last_state() {
    let (ahead, clock) = frozen(two_bits(), 1, 0);
    clock.set_ms(T0 + 1_000);
    let (behind, _clock) = frozen(two_bits(), 1, 0);
    let layout = two_bits();
    let first: Vec<Id> = std::thread::scope(|s| {
        s.spawn(|| {
            // Four values in the tick (two sequence bits, one slot): one published by the
            // step that moved into the tick, three past it.
            let ids: Vec<Id> = (0..4).map(|_| ahead.next_id().unwrap()).collect();
            behind.next_id().unwrap(); // `ahead`'s numbers parked
            ids
        })
        .join()
        .unwrap()
    });
    assert_eq!(
        first
            .iter()
            .map(|&id| decoded_one(id, &layout))
            .collect::<Vec<_>>(),
        [(1_000, 0), (1_000, 1), (1_000, 2), (1_000, 3)]
    );
    let next = std::thread::scope(|s| s.spawn(|| ahead.try_next_id()).join().unwrap());
    // The tick is used up: the next value comes from the next tick, or not at all.
    match next {
        Ok(id) => assert!(
            id > first[3],
            "{:?} after {:?}",
            decoded_one(id, &layout),
            first
        ),
        Err(e) => assert!(matches!(e, Error::WouldBlock { .. }), "{e:?}"),
    }
}

/// (ms after `T0`, sequence) of an ID on the two-bit layout with one slot.
fn decoded_one(id: Id, layout: &Layout) -> (u64, u64) {
    let p = id.parts(layout).unwrap();
    (p.unix_ms() - T0, p.sequence())
}

/// The statistics a thread asks for count every ID it issued through `next_id`, none of
/// another generator's, whichever generator's numbers are in use.
#[test]
fn a_threads_own_ids_are_counted_when_it_asks() {
    let (g, _clock) = frozen(Layout::twitter(), 2, 0);
    let (h, _clock) = frozen(Layout::twitter(), 2, 0);
    std::thread::scope(|s| {
        s.spawn(|| {
            for _ in 0..5 {
                g.next_id().unwrap();
            }
            assert_eq!((g.stats().issued, h.stats().issued), (5, 0));
            for _ in 0..3 {
                h.next_id().unwrap();
            }
            assert_eq!((g.stats().issued, h.stats().issued), (5, 3));
        })
        .join()
        .unwrap();
    });
}

/// In the common case an ID costs one clock reading and no trip through the general step
/// (which reads the clock again, the precise reading on a coarse clock): 1,000 IDs in one
/// tick, asked for implicitly, from a held slot and from its iterator, take 1,000 readings and
/// at most a few more, and on a coarse clock at most a few precise ones.
#[test]
fn the_common_case_reads_the_clock_once_an_id() {
    let readings = |coarse: bool, issue: &dyn Fn(&PerThread<Arc<common::Counting>>)| {
        let clock = Arc::new(common::Counting::new(T0, coarse));
        let g = Generator::builder(Layout::twitter())
            .clock(Arc::clone(&clock))
            .build_per_thread(2)
            .unwrap();
        // The first ID finds no numbers and takes the general step.
        g.local().unwrap().next_id().unwrap();
        g.next_id().unwrap();
        let before = clock.reads();
        issue(&g);
        let after = clock.reads();
        (after.0 - before.0, after.1 - before.1)
    };
    let implicit = |g: &PerThread<Arc<common::Counting>>| {
        for _ in 0..1000 {
            g.next_id().unwrap();
        }
    };
    let held = |g: &PerThread<Arc<common::Counting>>| {
        let local = g.local().unwrap();
        for _ in 0..1000 {
            local.next_id().unwrap();
        }
    };
    let iterated = |g: &PerThread<Arc<common::Counting>>| {
        let mut local = g.local().unwrap();
        assert_eq!(local.ids().take(1000).filter(Result::is_ok).count(), 1000);
    };
    type Issue<'a> = &'a dyn Fn(&PerThread<Arc<common::Counting>>);
    let ways: [(&str, Issue); 3] = [
        ("implicit", &implicit),
        ("held", &held),
        ("iterated", &iterated),
    ];
    for (how, issue) in ways {
        let (cheap, precise) = readings(false, issue);
        assert!(
            (1000..=1003).contains(&(cheap + precise)),
            "{how}: {cheap} + {precise} readings"
        );
        let (cheap, precise) = readings(true, issue);
        assert!(
            (1000..=1003).contains(&cheap),
            "{how}, coarse: {cheap} readings"
        );
        assert!(
            precise <= 3,
            "{how}, coarse: {precise} precise readings for 1,000 IDs"
        );
    }
}

/// A thread's IDs reach the statistics when it moves to a later tick, gives its slot back or
/// asks, not one by one (the common case writes nothing shared): seen from another thread, the
/// 1,000 IDs a thread issued in one tick implicitly and 1,000 from a slot it holds are not
/// counted until that thread asks and gives the slot back.
#[test]
fn a_threads_ids_in_one_tick_are_counted_when_it_asks_not_one_by_one() {
    let (g, _clock) = frozen(Layout::twitter(), 2, 0);
    let (asked, counted) = mpsc::channel::<()>();
    let (go, ask) = mpsc::channel::<()>();
    let g = &g;
    std::thread::scope(|s| {
        s.spawn(move || {
            let local = g.local().unwrap();
            for _ in 0..1000 {
                g.next_id().unwrap();
                local.next_id().unwrap();
            }
            asked.send(()).unwrap();
            ask.recv().unwrap();
            assert_eq!(g.stats().issued, 1000);
            drop(local);
            asked.send(()).unwrap();
            ask.recv().unwrap();
        });
        counted.recv().unwrap();
        let before = g.stats().issued;
        go.send(()).unwrap();
        counted.recv().unwrap();
        let after = g.stats().issued;
        go.send(()).unwrap();
        assert_eq!((before, after), (0, 2000));
    });
}

/// A coarse source that lags: its cheap reading stays at `T0`, its precise one says `T0 + 1`.
struct Lagging;

impl monoflake::TimeSource for Lagging {
    fn now_ms(&self) -> u64 {
        T0
    }

    fn precise_now_ms(&self) -> u64 {
        T0 + 1
    }

    fn is_coarse(&self) -> bool {
        true
    }
}

/// On a coarse clock the cheap reading serves while it suffices (IDs in its tick), and the
/// precise one is read before a decision depends on the time (moving to a later tick, the
/// lead limit): four values in the cheap reading's tick, four in the precise one's, then the
/// lead's refusal — implicitly and from a held slot alike.
#[test]
fn a_coarse_reading_serves_until_a_decision_needs_the_precise_one() {
    let layout = two_bits();
    let at = |id: Id| {
        let p = id.parts(&layout).unwrap();
        (p.unix_ms() - T0, p.sequence())
    };
    let expected: Vec<(u64, u64)> = (0..2).flat_map(|ms| (0..4).map(move |s| (ms, s))).collect();
    let build = || {
        Generator::builder(layout.clone())
            .clock(Lagging)
            .max_lead(Duration::ZERO)
            .build_per_thread(1)
            .unwrap()
    };
    let g = build();
    let implicit: Vec<_> = (0..8).map(|_| at(g.try_next_id().unwrap())).collect();
    assert_eq!(implicit, expected);
    assert!(matches!(g.try_next_id(), Err(Error::WouldBlock { .. })));
    let g = build();
    let local = g.local().unwrap();
    let held: Vec<_> = (0..8).map(|_| at(local.try_next_id().unwrap())).collect();
    assert_eq!(held, expected);
    assert!(matches!(local.try_next_id(), Err(Error::WouldBlock { .. })));
}

/// Past the layout's last tick a per-thread generator is refused for good: the state is
/// pinned at the layout's last value, so a clock stepped back afterwards issues nothing —
/// implicitly and from a held slot alike.
#[test]
fn past_the_layouts_end_a_per_thread_generator_stays_refused_when_the_clock_goes_back() {
    let layout = Layout::twitter();
    let end = layout.expires_at_ms();
    let exhausted = |answer: Result<Id, Error>| match answer {
        Err(Error::Exhausted { expired_at_ms, .. }) => assert_eq!(expired_at_ms, end),
        other => panic!("expected the layout's end, got {other:?}"),
    };
    let (g, clock) = frozen(layout.clone(), 2, 0);
    let local = g.local().unwrap();
    g.try_next_id().unwrap();
    local.try_next_id().unwrap();
    clock.set_ms(end + 1);
    exhausted(g.try_next_id());
    exhausted(local.try_next_id());
    clock.set_ms(T0 + 1);
    exhausted(g.try_next_id());
    exhausted(local.try_next_id());
}

/// A per-thread generator whose lease goes unconfirmed (its store unreachable) refuses a batch
/// in the very tick it is issuing in, as it refuses one ID, implicitly and from a held slot:
/// the fence's refusal decides for a batch too, not only the batch's own check.
#[test]
fn an_unconfirmed_lease_refuses_a_batch_in_the_current_tick() {
    let dir = common::TempDir::new("per-thread-unconfirmed");
    let store = common::Flaky::new(dir.path(), Some(Duration::from_millis(300)));
    let clock = Arc::new(ManualClock::new(T0));
    let g = Generator::builder(Layout::twitter())
        .clock(Arc::clone(&clock))
        .reservation_window(Duration::from_secs(60))
        .build_leased_per_thread(store.clone(), monoflake::NodeRequest::Any, 2)
        .unwrap();
    let local = g.local().unwrap();
    // Every ID issued over the whole run, whichever way in.
    let mut issued = vec![g.try_next_id().unwrap(), local.try_next_id().unwrap()];
    store
        .fail_renew
        .store(1, std::sync::atomic::Ordering::SeqCst);
    // The clock stands still: every ID below is in the tick of `T0`. Real time passes until
    // the fence refuses (a liveness bound of two minutes only).
    let give_up = std::time::Instant::now() + Duration::from_secs(120);
    let refused = loop {
        match g.try_next_id() {
            Ok(id) => issued.push(id),
            Err(Error::WouldBlock { .. }) => {}
            Err(e) => break e,
        }
        assert!(
            std::time::Instant::now() < give_up,
            "never refused: {} IDs issued in two minutes",
            issued.len()
        );
        std::thread::sleep(Duration::from_millis(2));
    };
    assert!(
        matches!(
            refused,
            Error::ReservationUnavailable { .. } | Error::LeaseLost { .. }
        ),
        "{refused:?}"
    );
    // Refused for good: nothing at all is issued after the first refusal, by either way in
    // (the store stays unreachable, so no check can confirm the lease again).
    for call in 0..500 {
        for (how, next) in [("implicit", g.try_next_id()), ("held", local.try_next_id())] {
            if let Ok(id) = next {
                panic!(
                    "{how} call {call} after the refusal ({refused}) issued {id}; {} IDs \
                     before it",
                    issued.len()
                );
            }
        }
    }
    assert_distinct(&issued);
    for (how, batch) in [
        ("implicit", g.try_next_ids(2)),
        ("held", local.try_next_ids(2)),
    ] {
        assert!(
            matches!(
                batch,
                Err(Error::ReservationUnavailable { .. } | Error::LeaseLost { .. })
            ),
            "{how}: {batch:?}"
        );
    }
    // And the generator counts exactly the IDs the test saw (a held slot's count is added
    // when it is given back): none escaped the checks above.
    drop(local);
    assert_eq!(
        g.stats().issued,
        issued.len() as u64,
        "the generator counts other IDs than the {} the test saw",
        issued.len()
    );
}
