//! Issue 60: a leased generator whose wall clock is stepped forward — 2 s, a minute, an hour
//! past the real time, then back — under load, on a store with a clock of its own (its
//! holder's ceiling keeps its clock within what the store's confirms) or on the file store
//! (the clock follows, and the keeper extends the reservation).

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use monoflake::{
    DEFAULT_REANCHOR_INTERVAL, DEFAULT_REANCHOR_TOLERANCE, Error, Generator, Layout, LockedClock,
    NodeRequest, NodeStore,
};

use super::system_ms;

/// The wall clock's offsets from the real time, ms, one phase each: +2 s, +1 min, +1 h, back.
pub const STEPS: [i64; 5] = [0, 2_000, 60_000, 3_600_000, 0];

/// A locked clock over the system's wall clock plus `offset` ms.
pub fn offset_clock(offset: &Arc<AtomicI64>) -> LockedClock {
    let offset = Arc::clone(offset);
    LockedClock::with_wall_clock(
        move || {
            // Ordering: Relaxed; the offset publishes nothing else.
            let ms = offset.load(Ordering::Relaxed);
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64;
            now.saturating_add_signed(ms.saturating_mul(1_000_000))
        },
        DEFAULT_REANCHOR_INTERVAL,
        DEFAULT_REANCHOR_TOLERANCE,
    )
}

/// What one phase saw.
#[derive(Debug, Default, Clone)]
pub struct Phase {
    /// The wall clock's offset, ms.
    pub offset_ms: i64,
    pub issued: u64,
    /// The longest time between two IDs (the load issues in bursts 1 ms apart), ms.
    pub longest_gap_ms: u64,
    /// Each refusal: its error's variant and message.
    pub refusals: Vec<String>,
    /// The most of the wall clock held back (`Stats::clock_held_back_ns`) seen, ms.
    pub held_back_ms: u64,
    /// The furthest an ID's time ran ahead of the real time, ms.
    pub ahead_ms: i64,
}

/// The run: each phase, then the successor.
#[derive(Debug)]
pub struct Ride {
    pub phases: Vec<Phase>,
    /// IDs the successor issued, all above the run's.
    pub successor_issued: u64,
    /// How long the successor's build took, ms.
    pub successor_build_ms: u64,
}

/// Builds a leased generator on `store`'s node `node` with a locked clock over a wall clock it
/// steps through [`STEPS`] (`phase` each), issuing under load from another thread; then
/// releases it and builds a successor on an honest clock (`trusting`: one that trusts a
/// reservation ahead — the file store's holder followed the wall clock an hour ahead, and
/// its record is there). Checks, over the run and the successor: IDs strictly increasing (so
/// unique), the successor's above the run's. Every refusal is recorded with its variant; the
/// caller judges them.
pub fn ride(
    store: Arc<dyn NodeStore>,
    layout: &Layout,
    node: u64,
    phase: Duration,
    trusting: bool,
) -> Ride {
    let offset = Arc::new(AtomicI64::new(0));
    let leased = Arc::new(
        Generator::builder(layout.clone())
            .clock(offset_clock(&offset))
            .build_leased(Arc::clone(&store), NodeRequest::Exact(node))
            .unwrap(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let current = Arc::new(Mutex::new(Phase::default()));
    let phases = Arc::new(Mutex::new(Vec::new()));
    let load = {
        let (leased, stop, current) =
            (Arc::clone(&leased), Arc::clone(&stop), Arc::clone(&current));
        let layout = layout.clone();
        std::thread::spawn(move || {
            let mut last = 0u64;
            let mut last_ok = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..200 {
                    match leased.next_id() {
                        Ok(id) => {
                            assert!(id.as_u64() > last, "{id} after {last}: not increasing");
                            last = id.as_u64();
                            let gap = last_ok.elapsed().as_millis() as u64;
                            last_ok = Instant::now();
                            let ahead =
                                id.parts(&layout).unwrap().unix_ms() as i64 - system_ms() as i64;
                            let mut p = current.lock().unwrap();
                            p.issued += 1;
                            p.longest_gap_ms = p.longest_gap_ms.max(gap);
                            p.ahead_ms = p.ahead_ms.max(ahead);
                        }
                        Err(e) => {
                            let what = match &e {
                                Error::LeaseLost { .. } => "LeaseLost",
                                Error::ReservationUnavailable { .. } => "ReservationUnavailable",
                                Error::TimedOut { .. } => "TimedOut",
                                Error::WouldBlock { .. } => "WouldBlock",
                                other => panic!("an untyped refusal: {other:?}"),
                            };
                            current
                                .lock()
                                .unwrap()
                                .refusals
                                .push(format!("{what}: {e}"));
                            std::thread::sleep(Duration::from_millis(10));
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            last
        })
    };
    for (k, &ms) in STEPS.iter().enumerate() {
        offset.store(ms, Ordering::Relaxed);
        let began = Instant::now();
        while began.elapsed() < phase {
            std::thread::sleep(Duration::from_millis(50));
            let held = leased.stats().clock_held_back_ns / 1_000_000;
            let mut p = current.lock().unwrap();
            p.held_back_ms = p.held_back_ms.max(held);
        }
        let mut p = current.lock().unwrap();
        p.offset_ms = ms;
        phases.lock().unwrap().push(std::mem::take(&mut *p));
        eprintln!("phase {k}: {:?}", phases.lock().unwrap()[k]);
    }
    stop.store(true, Ordering::Relaxed);
    let last = load.join().unwrap();
    eprintln!("{}", leased.stats());
    Arc::into_inner(leased).unwrap().release().unwrap();
    // A successor on an honest clock, after the release.
    let started = Instant::now();
    let successor = Generator::builder(layout.clone())
        .trust_future_reservation(trusting)
        .build_leased(Arc::clone(&store), NodeRequest::Exact(node))
        .unwrap();
    let successor_build_ms = started.elapsed().as_millis() as u64;
    let mut before = last;
    for _ in 0..10_000 {
        let id = successor.next_id().unwrap().as_u64();
        assert!(id > before, "the successor's {id} after {before}");
        before = id;
    }
    successor.release().unwrap();
    let phases = Arc::into_inner(phases).unwrap().into_inner().unwrap();
    Ride {
        phases,
        successor_issued: 10_000,
        successor_build_ms,
    }
}

/// A fresh claim while the wall clock is an hour ahead (a new generator, `monoflake serve`'s
/// reclaim, Python's default): its first renewal is refused, `named` accepting the reason
/// (both clocks' readings in it), and nothing is issued; the caller tries again with a fresh
/// clock; once the wall clock is right the next attempt starts. Returns the refusals and how
/// long after the correction the first ID came, ms.
pub fn fresh_claims_until_the_clock_is_right(
    store: Arc<dyn NodeStore>,
    layout: &Layout,
    node: u64,
    named: impl Fn(&str) -> bool,
) -> (usize, u64) {
    let offset = Arc::new(AtomicI64::new(3_600_000));
    let mut refused = 0;
    for _ in 0..3 {
        match Generator::builder(layout.clone())
            .clock(offset_clock(&offset))
            .build_leased(Arc::clone(&store), NodeRequest::Exact(node))
        {
            Err(Error::LeaseLost {
                node: n, reason, ..
            }) if n == node && named(&reason) => {
                refused += 1;
            }
            other => panic!("a claim an hour ahead of the store's clock: {other:?}"),
        }
    }
    offset.store(0, Ordering::Relaxed);
    let corrected = Instant::now();
    let leased = Generator::builder(layout.clone())
        .clock(offset_clock(&offset))
        .build_leased(Arc::clone(&store), NodeRequest::Exact(node))
        .unwrap();
    let id = leased.next_id().unwrap();
    let took = corrected.elapsed().as_millis() as u64;
    assert!(id.parts(layout).unwrap().unix_ms() <= system_ms() + 1_000);
    leased.release().unwrap();
    (refused, took)
}

/// What a holder under a ceiling must show: no refusal of any kind in any phase, IDs in every
/// phase, none further ahead of the real time than the lead (250 ms) and `max_lead` (100 ms);
/// the wall clock held back by nearly all of each step ahead.
pub fn judge_capped(ride: &Ride) {
    for (k, p) in ride.phases.iter().enumerate() {
        assert!(p.refusals.is_empty(), "phase {k}: {p:?}");
        assert!(p.issued > 0, "phase {k}: nothing issued: {p:?}");
        assert!(
            p.ahead_ms <= 351,
            "phase {k}: IDs {} ms ahead: {p:?}",
            p.ahead_ms
        );
        if p.offset_ms >= 2_000 {
            assert!(
                p.held_back_ms + 1_000 >= p.offset_ms as u64,
                "phase {k}: held back only {} ms: {p:?}",
                p.held_back_ms
            );
        }
    }
    eprintln!(
        "longest gaps, ms: {:?}; the successor built in {} ms",
        ride.phases
            .iter()
            .map(|p| p.longest_gap_ms)
            .collect::<Vec<_>>(),
        ride.successor_build_ms
    );
}
