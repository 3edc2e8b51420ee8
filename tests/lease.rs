//! The reservation fence and the lease deadline, driven by a manual clock and a store that
//! fails on demand; file-store failure modes.

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use monoflake::{
    BlockedOn, Claim, Error, FileStore, Generator, Id, Layout, ManualClock, NodeRequest, NodeStore,
    TimeSource,
};

const T0: u64 = 1_700_000_000_000;

#[test]
fn a_reservation_that_cannot_be_extended_stops_issuing() {
    let (dir, store, clock, leased) = manual_holder("fence");
    let layout = Layout::twitter();
    let first = leased.try_next_id().unwrap();
    store.fail_extend.store(true, Ordering::SeqCst);
    // Still inside the reserved 200 ms: fine.
    clock.advance_ms(150);
    let inside = leased.try_next_id().unwrap();
    assert!(inside > first);
    leased.check().unwrap();
    // Past the reservation: the first refusals may only wake the keeper (WouldBlock); once
    // its write has failed, the refusal names the failure. Never an ID past the reservation.
    clock.advance_ms(100);
    let (err, on_the_way) = refused_past(&leased);
    match err {
        Error::ReservationUnavailable {
            node: 0, reason, ..
        } => assert!(reason.contains("disk full"), "{reason}"),
        other => panic!("{other:?}"),
    }
    // A readiness check says so too.
    assert!(matches!(
        leased.check(),
        Err(Error::ReservationUnavailable { node: 0, .. })
    ));
    // Nothing issued beyond the reservation on disk.
    let on_disk = std::fs::read_to_string(dir.path().join("twitter/node-0.reservation")).unwrap();
    let until: u64 = on_disk
        .lines()
        .nth(1)
        .unwrap()
        .strip_prefix("until_ms=")
        .unwrap()
        .parse()
        .unwrap();
    assert!(inside.parts(&layout).unwrap().unix_ms() < until);
    for id in on_the_way {
        assert!(
            id.parts(&layout).unwrap().unix_ms() < until,
            "{id:?} past {until}"
        );
    }
    // The store recovers: issuing resumes once the keeper extends again.
    store.fail_extend.store(false, Ordering::SeqCst);
    let mut resumed = None;
    for _ in 0..200 {
        if let Ok(id) = leased.try_next_id() {
            resumed = Some(id);
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(resumed.expect("issuing resumed") > inside);
}

#[test]
fn a_lease_not_renewed_by_its_deadline_is_lost() {
    let dir = common::TempDir::new("deadline");
    let store = common::Flaky::new(dir.path(), Some(Duration::from_millis(300)));
    let clock = Arc::new(ManualClock::new(T0));
    let leased = Generator::builder(Layout::twitter())
        .clock(Arc::clone(&clock))
        .reservation_window(Duration::from_secs(60))
        .build_leased(store.clone(), NodeRequest::Any)
        .unwrap();
    let before = leased.try_next_id().unwrap();
    store.fail_renew.store(1, Ordering::SeqCst);
    // The deadline runs on the monotonic clock (real time), not on the generator's clock: the
    // lease is lost 300 ms of real time after the last renewal, whatever the clock says.
    // Before that, 200 ms (twice the check interval) after the last check that confirmed the
    // claim, issuing stops as unconfirmed: a retryable refusal that names the store's error.
    clock.advance_ms(1);
    assert!(leased.try_next_id().unwrap() > before);
    let (mut err, _) = refused_past(&leased);
    if let Error::ReservationUnavailable { reason, .. } = &err {
        assert!(
            reason.contains("has not been confirmed for 200 ms"),
            "{reason}"
        );
        let give_up = std::time::Instant::now() + Duration::from_secs(120);
        while let Err(Error::ReservationUnavailable { .. } | Error::WouldBlock { .. }) =
            leased.try_next_id()
        {
            assert!(std::time::Instant::now() < give_up, "never lost");
            std::thread::sleep(Duration::from_millis(2));
        }
        err = leased.try_next_id().unwrap_err();
    }
    match err {
        Error::LeaseLost {
            node: 0, reason, ..
        } => assert!(reason.contains("validity"), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(leased.next_id(), Err(Error::LeaseLost { .. })),
        "next_id must not wait it out"
    );
    // A readiness check says so too, and takes no ID.
    let issued = leased.stats().issued;
    assert!(matches!(
        leased.check(),
        Err(Error::LeaseLost { node: 0, .. })
    ));
    assert_eq!(leased.stats().issued, issued);
}

/// Calls `try_next_id` until it reports something other than an ID or `WouldBlock` (a
/// liveness bound of two minutes only), moving nothing but real time; then 1,000 calls more,
/// none of which may issue. Returns the refusal and every ID issued before it, which the
/// generator's own count must match: nothing is issued that the test did not see.
fn refused_past<C: monoflake::TimeSource + 'static>(
    leased: &monoflake::Leased<C>,
) -> (Error, Vec<Id>) {
    refused_then_nothing(leased, Duration::from_secs(120), Duration::from_millis(2))
}

/// [`refused_past`] with its liveness bound and pause between calls.
fn refused_then_nothing<C: monoflake::TimeSource + 'static>(
    leased: &monoflake::Leased<C>,
    bound: Duration,
    pause: Duration,
) -> (Error, Vec<Id>) {
    let issued_before = leased.stats().issued;
    let give_up = std::time::Instant::now() + bound;
    let mut ids = Vec::new();
    let refused = loop {
        match leased.try_next_id() {
            Ok(id) => ids.push(id),
            Err(Error::WouldBlock { .. }) => {}
            Err(e) => break e,
        }
        assert!(std::time::Instant::now() < give_up, "never refused");
        std::thread::sleep(pause);
    };
    for call in 0..1_000 {
        if let Ok(id) = leased.try_next_id() {
            panic!("{id:?} issued {call} calls after the refusal {refused:?}");
        }
    }
    assert_eq!(
        leased.stats().issued - issued_before,
        ids.len() as u64,
        "the generator counts IDs the test never saw"
    );
    (refused, ids)
}

/// A forward step of the generator's clock far past the reservation (NTP fixing a wrong boot
/// clock, a VM resumed): with a healthy store it is a short wait for the keeper, never an
/// error; the IDs follow the clock; nothing is issued past what the store acknowledged.
#[test]
fn a_forward_clock_step_is_ridden_through() {
    let dir = common::TempDir::new("forward");
    // A lease with a deadline too (valid 30 s), so the step also passes the fence's deadline
    // as the generator's clock sees it.
    let store = common::Flaky::new(dir.path(), Some(Duration::from_secs(30)));
    let clock = Arc::new(ManualClock::new(T0));
    let layout = Layout::twitter();
    let leased = Generator::builder(layout.clone())
        .clock(Arc::clone(&clock))
        .reservation_window(Duration::from_secs(5))
        .build_leased(store.clone(), NodeRequest::Any)
        .unwrap();
    let before = leased.next_id().unwrap();
    for step_ms in [3_600_000, 7_200_000, 60_000] {
        clock.advance_ms(step_ms);
        let stepped = clock.now_ms();
        // Every call either issues an ID the store has acknowledged or asks to wait.
        match leased.try_next_id() {
            Ok(id) => assert!(id > before),
            Err(Error::WouldBlock { retry_after, .. }) => {
                assert!(retry_after < Duration::from_secs(1), "{retry_after:?}")
            }
            Err(e) => panic!("a forward step is not an error: {e}"),
        }
        let after = leased.next_id().unwrap();
        assert!(after > before);
        let t = after.parts(&layout).unwrap().unix_ms();
        assert!(t >= stepped, "the IDs follow the clock: {t} < {stepped}");
        // The reservation on disk covers what was issued.
        let until = reservation_until(&dir.path().join("twitter/node-0.reservation"));
        assert!(t < until, "issued {t} beyond the reservation {until}");
    }
    let stats = leased.stats();
    // Asked to wait at least once: returned by `try_next_id`, or waited out by `next_id`.
    assert!(
        stats.would_block_returned + stats.waiting_calls >= 1,
        "{stats:?}"
    );
    assert_eq!(stats.lease_losses, 0);
    assert_eq!(stats.reservation_failures, 0);
}

fn reservation_until(path: &std::path::Path) -> u64 {
    let on_disk = std::fs::read_to_string(path).unwrap();
    on_disk
        .lines()
        .find_map(|l| l.strip_prefix("until_ms="))
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn a_restart_never_reissues_a_reserved_tick() {
    let dir = common::TempDir::new("restart");
    let layout = Layout::twitter();
    let store: Arc<dyn NodeStore> = Arc::new(FileStore::open(dir.path()).unwrap());
    let clock = Arc::new(ManualClock::new(T0));
    let a = Generator::builder(layout.clone())
        .clock(Arc::clone(&clock))
        .build_leased(Arc::clone(&store), NodeRequest::Exact(9))
        .unwrap();
    let mut last = a.try_next_id().unwrap();
    for _ in 0..1000 {
        last = a.try_next_id().unwrap();
    }
    // A crash leaves the last extension on disk, ahead of what was issued.
    let crash_state =
        std::fs::read_to_string(dir.path().join("twitter/node-9.reservation")).unwrap();
    let until_on_disk = {
        crash_state
            .lines()
            .nth(1)
            .unwrap()
            .strip_prefix("until_ms=")
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    assert!(until_on_disk >= T0 + 5000);
    // Release (which writes the end of the last tick), then put the crash state back.
    drop(a);
    std::fs::write(dir.path().join("twitter/node-9.reservation"), &crash_state).unwrap();
    // Restart with the clock set back an hour: the node's reservation is an hour ahead of
    // this clock, far past the tolerance (window + lead + a check): refused, with the numbers.
    let back = T0 - 3_600_000;
    match Generator::builder(layout.clone())
        .clock(ManualClock::new(back))
        .build_leased(Arc::clone(&store), NodeRequest::Exact(9))
    {
        Err(Error::ReservationAhead {
            node: 9,
            reserved_until_ms,
            ahead,
            tolerance,
            ..
        }) => {
            assert_eq!(reserved_until_ms, until_on_disk);
            assert_eq!(ahead, Duration::from_millis(until_on_disk - back));
            assert_eq!(tolerance, Duration::from_millis(5_200));
        }
        other => panic!("{other:?}"),
    }
    // The refusal left the record alone.
    let after_refusal =
        std::fs::read_to_string(dir.path().join("twitter/node-9.reservation")).unwrap();
    assert_eq!(after_refusal, crash_state);
    // Any node passes it over (and says so), taking a settled one with honest time.
    let any = Generator::builder(layout.clone())
        .clock(ManualClock::new(back))
        .build_leased(Arc::clone(&store), NodeRequest::Any)
        .unwrap();
    assert_eq!(any.node(), 0);
    assert_eq!(
        any.stats().nodes_skipped_ahead,
        0,
        "node 9 is not below node 0"
    );
    drop(any);
    // Trusting the reservation: the clock moves to it, and the IDs stay above the old ones.
    let b = Generator::builder(layout.clone())
        .clock(ManualClock::new(back))
        .trust_future_reservation(true)
        .build_leased(store, NodeRequest::Exact(9))
        .unwrap();
    let first = b.try_next_id().unwrap();
    assert!(first > last);
    assert_eq!(first.parts(&layout).unwrap().unix_ms(), until_on_disk);
}

/// A claim of any node prefers a settled node over one a crashed holder left slightly ahead,
/// skips (and counts) nodes reserved absurdly far ahead, and says what it found when nothing
/// is usable.
#[test]
fn any_node_prefers_settled_nodes_and_skips_absurd_reservations() {
    let dir = common::TempDir::new("prefer");
    // Two node IDs only, so "nothing usable" is reachable.
    let layout = small_layout("two", 1);
    let store: Arc<dyn NodeStore> = Arc::new(FileStore::open(dir.path()).unwrap());
    let set = |node: u64, until: u64| leave_record(&*store, &layout, node, until);
    let build = |request| {
        Generator::builder(layout.clone())
            .clock(ManualClock::new(T0))
            .build_leased(Arc::clone(&store), request)
    };
    // Node 0 just crashed (reservation 3 s ahead), node 1 is settled: node 1, no wait.
    set(0, T0 + 3_000);
    set(1, T0 - 1_000);
    let g = build(NodeRequest::Any).unwrap();
    assert_eq!(g.node(), 1);
    assert_eq!(g.next_id().unwrap().parts(&layout).unwrap().unix_ms(), T0);
    assert_eq!(
        (g.stats().nodes_skipped_ahead, g.stats().claim_wait_ms),
        (0, 0)
    );
    drop(g);
    // Node 0 is years ahead (the 2100s), node 1 settled: node 1, one node skipped.
    let year_2100 = 4_102_444_800_000;
    set(0, year_2100);
    set(1, T0 - 1_000);
    let g = build(NodeRequest::Any).unwrap();
    assert_eq!(g.node(), 1);
    assert_eq!(g.stats().nodes_skipped_ahead, 1);
    // Node 1 is now held: nothing usable is left, and the error says why.
    match build(NodeRequest::Any) {
        Err(Error::AllNodesHeld {
            count: 2, ahead: 1, ..
        }) => {}
        other => panic!("{other:?}"),
    }
    // Asked for by number, the 2100 node is refused as ahead, not reported as exhausted.
    match build(NodeRequest::Exact(0)) {
        Err(e @ Error::ReservationAhead { node: 0, .. }) => {
            let text = e.to_string();
            assert!(text.contains("2100-01-01T00:00:00.000Z"), "{text}");
            assert!(text.contains("years ahead"), "{text}");
            // The library's way to act on it, not a command line's flag.
            assert!(text.contains("trust_future_reservation"), "{text}");
            assert!(!text.contains("--"), "{text}");
        }
        other => panic!("{other:?}"),
    }
    drop(g);
}

/// A generator dropped and built again on the same store takes its node back at once: the
/// released node's record is at most a tick ahead of the clock, which costs no wait, where a
/// never-used node would cost two and a half check intervals and start `max_lead` ahead.
#[test]
fn a_dropped_generator_s_node_comes_back_at_once() {
    let dir = common::TempDir::new("comes-back");
    let store: Arc<dyn NodeStore> = Arc::new(FileStore::open(dir.path()).unwrap());
    let layout = Layout::twitter();
    let max_lead_ms = monoflake::DEFAULT_MAX_LEAD.as_millis() as u64;
    let wall_ms = || monoflake::LockedClock::new().now_ms();
    let build = || {
        Generator::builder(layout.clone())
            .build_leased(Arc::clone(&store), NodeRequest::Any)
            .unwrap()
    };
    // A store's first build: node 0 has no record, the build waits 250 ms and its IDs start
    // up to max_lead ahead; released at once, its record is at most one tick beyond that.
    let fresh = build();
    assert_eq!((fresh.node(), fresh.stats().claim_wait_ms), (0, 250));
    let mut last = fresh.next_ids(1000).unwrap().last().unwrap();
    drop(fresh);
    // A release writes the end of the last tick issued; a tick is issued at most `max_lead`
    // ahead of the holder's clock, so the node comes back with no more wait than that tick and
    // the two clocks' disagreement — a few milliseconds, never the 250 ms a never-used node
    // costs (the wait is a difference of clock readings, not a sleep the machine can stretch).
    let settled_wait_ms = 249;
    let again = build();
    assert_eq!(again.node(), 0, "the released node, not a never-used one");
    assert!(
        again.stats().claim_wait_ms <= settled_wait_ms,
        "{:?}",
        again.stats()
    );
    assert!(again.next_id().unwrap() > last);
    drop(again);
    // From then on, round after round: the same node, not the never-used wait, IDs within
    // max_lead of the clock and above everything issued before.
    for round in 0..5 {
        let leased = build();
        let stats = leased.stats();
        assert_eq!(
            (leased.node(), stats.nodes_skipped_ahead),
            (0, 0),
            "round {round}"
        );
        assert!(
            stats.claim_wait_ms <= settled_wait_ms,
            "round {round}: {stats:?}"
        );
        let first = leased.next_id().unwrap();
        let after = wall_ms();
        assert!(first > last, "round {round}");
        assert!(
            first.parts(&layout).unwrap().unix_ms() <= after + max_lead_ms,
            "round {round}: {} ahead of the clock",
            first
                .parts(&layout)
                .unwrap()
                .unix_ms()
                .saturating_sub(after)
        );
        // A burst that borrows ticks ahead (within the lead) before the drop.
        last = leased.next_ids(40_000).unwrap().last().unwrap();
        drop(leased);
    }
    // Nodes 1 and up were never claimed: nothing was written for them.
    assert!(!dir.path().join("twitter/node-1.reservation").exists());
}

/// On a real clock, a node reserved ahead of it by more than the lead is waited for in the
/// build: the generator it returns issues at once, at or past the reservation and within its
/// lead of the clock. (A build that skipped the wait would hand back a
/// generator whose first tick lies ahead of the clock by the whole reservation: it issues
/// there, far past `max_lead`.)
#[test]
fn a_node_reserved_ahead_of_a_real_clock_is_waited_for_in_the_build() {
    let dir = common::TempDir::new("wait-real");
    let layout = small_layout("waitreal", 2);
    let store: Arc<dyn NodeStore> = Arc::new(FileStore::open(dir.path()).unwrap());
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64
    };
    // Far enough ahead that a loaded machine still finds a wait left at the claim.
    let reserved = now() + 3_000;
    leave_record(&*store, &layout, 0, reserved);
    let g = Generator::builder(layout.clone())
        .max_lead(Duration::from_millis(100))
        .build_leased(Arc::clone(&store), NodeRequest::Exact(0))
        .unwrap();
    assert!(g.stats().claim_wait_ms > 0, "{:?}", g.stats());
    // Issued at once: the clock is within the lead of the reservation.
    let id = g.try_next_id().unwrap();
    let ms = id.parts(&layout).unwrap().unix_ms();
    assert!(ms >= reserved, "{ms} below the reservation {reserved}");
    // And not ahead of the clock by more than the lead (200 ms allowed for the library's clock
    // against the system's; a build that did not wait issues about 2.9 s ahead).
    let later = now();
    assert!(ms <= later + 100 + 200, "{ms} is {} ms ahead", ms - later);
    // The accessors say what was built.
    assert_eq!((g.node(), g.layout().name()), (0, "waitreal"));
    assert_eq!(g.last_tick(), id.parts(&layout).unwrap().tick());
    assert!(g.max_wait() >= monoflake::DEFAULT_RESERVATION_WINDOW + layout.tick());
    assert_eq!(
        format!("{g:?}"),
        "Leased { node: 0, layout: \"waitreal\", .. }"
    );
    drop(g);
    // A leased PerCore's debug output names its holding: the node and the store.
    let per_core = Generator::builder(layout.clone())
        .clock(Arc::new(ManualClock::new(T0)))
        .build_leased_per_core(Arc::clone(&store), NodeRequest::Exact(1), 2)
        .unwrap();
    assert_eq!(
        format!("{per_core:?}"),
        format!(
            "PerCore {{ slots: 2, owner: Some(Holding {{ node: 1, store: {:?}, .. }}), .. }}",
            store.describe()
        )
    );
}

/// A file store whose every node is held (by the test) until a given number of searches for
/// any node have found none; the next search finds one free. It counts the searches.
#[derive(Debug)]
struct Crowded {
    inner: FileStore,
    held: std::sync::Mutex<Vec<Claim>>,
    searches: std::sync::atomic::AtomicU32,
    free_after: u32,
}

impl NodeStore for Crowded {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn check_interval(&self) -> Duration {
        self.inner.check_interval()
    }
    fn claim(&self, layout: &Layout, request: NodeRequest) -> Result<Claim, Error> {
        if request == NodeRequest::Any
            && self.searches.fetch_add(1, Ordering::SeqCst) == self.free_after
        {
            let freed = self.held.lock().unwrap().pop().unwrap();
            self.inner.abandon(freed).unwrap();
        }
        self.inner.claim(layout, request)
    }
    fn extend(&self, claim: &Claim, until_ms: u64) -> Result<(), Error> {
        self.inner.extend(claim, until_ms)
    }
    fn renew(&self, claim: &Claim) -> Result<Option<Duration>, Error> {
        self.inner.renew(claim)
    }
    fn reservation(&self, claim: &Claim) -> Result<Option<u64>, Error> {
        self.inner.reservation(claim)
    }
    fn restore(&self, claim: &Claim, until_ms: u64) -> Result<(), Error> {
        self.inner.restore(claim, until_ms)
    }
    fn abandon(&self, claim: Claim) -> Result<(), Error> {
        self.inner.abandon(claim)
    }
    fn release(&self, claim: Claim, until_ms: u64) -> Result<(), Error> {
        self.inner.release(claim, until_ms)
    }
}

/// A claim of any node that finds every node held searches again, eight times more, after a
/// growing randomized wait (another claimant's search may hold free nodes for a moment):
/// a node freed before the ninth search is taken, and the wait is counted; one freed only
/// after it is not, and the claim reports every node held after exactly nine searches.
#[test]
fn a_claim_of_any_node_searches_nine_times_when_every_node_is_held() {
    let dir = common::TempDir::new("crowded");
    let layout = small_layout("crowded", 1);
    let crowded = |free_after| {
        let inner = FileStore::open(dir.path()).unwrap();
        // Records in the past: the node freed costs no wait of its own.
        for node in 0..2 {
            leave_record(&inner, &layout, node, T0 - 1_000);
        }
        let held = (0..2)
            .map(|n| inner.claim(&layout, NodeRequest::Exact(n)).unwrap())
            .collect();
        Arc::new(Crowded {
            inner,
            held: std::sync::Mutex::new(held),
            searches: Default::default(),
            free_after,
        })
    };
    let build = |store: &Arc<Crowded>| {
        Generator::builder(layout.clone())
            .clock(ManualClock::new(T0))
            .build_leased(Arc::clone(store) as Arc<dyn NodeStore>, NodeRequest::Any)
    };
    // Freed after eight searches: the ninth takes it.
    let store = crowded(8);
    let g = build(&store).unwrap();
    assert_eq!(g.node(), 1);
    assert_eq!(store.searches.load(Ordering::SeqCst), 9);
    // Eight waits, each at least half of 1, 2, 4 ... 128 times a search's length (1 ms at
    // least): 127 ms at the very least.
    assert!(g.stats().claim_wait_ms >= 127, "{:?}", g.stats());
    drop(g);
    drop(store);
    // Freed only after nine: never searched for again.
    let store = crowded(9);
    match build(&store) {
        Err(Error::AllNodesHeld {
            count: 2,
            ahead: 0,
            unusable: 0,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(store.searches.load(Ordering::SeqCst), 9);
}

/// What a claim says of itself, for a store's author: its accessors and its debug output.
#[test]
fn a_claim_says_what_it_holds() {
    let claim = Claim::new(3, Some(T0), ());
    assert_eq!(
        (claim.node(), claim.reserved_until_ms(), claim.store_clock()),
        (3, Some(T0), None)
    );
    let claim = claim
        .with_unusable(2)
        .with_store_clock(T0 + 5, Duration::from_millis(7));
    assert_eq!(claim.store_clock(), Some((T0 + 5, 7)));
    assert_eq!(
        format!("{claim:?}"),
        format!(
            "Claim {{ node: 3, reserved_until_ms: Some({T0}), recorded: true, unusable: 2, \
             store_clock: Some(({}, 7)), .. }}",
            T0 + 5
        )
    );
}

/// A node reserved further ahead than this generator's lead costs the time until it is
/// `max_lead` ahead: it is taken over a never-used node when that is the shorter wait, and the
/// never-used node that ended the search is given back untouched — no record — so that its
/// next claimant waits and reads its record again, as for any node with no record. (A
/// give-back that wrote the floor its claimant would have started at let the next claimant
/// skip both, and start below a holder whose records had been deleted under it while its
/// clock ran ahead: 7.9–9.4 M duplicates in the hand-over issue.)
#[test]
fn any_node_takes_the_least_wait() {
    let dir = common::TempDir::new("least-wait");
    let layout = small_layout("least", 2);
    let store: Arc<dyn NodeStore> = Arc::new(FileStore::open(dir.path()).unwrap());
    let build = || {
        Generator::builder(layout.clone())
            .clock(ManualClock::new(T0))
            .build_leased(Arc::clone(&store), NodeRequest::Any)
            .unwrap()
    };
    let record = |node| {
        let claim = store.claim(&layout, NodeRequest::Exact(node)).unwrap();
        claim.reserved_until_ms() // dropped: the lock goes, the record stays as it was
    };
    // With the default 100 ms lead: node 0 (140 ms ahead) costs 40 ms, node 1 (2 s ahead)
    // 1.9 s, node 2 (never used) 250 ms.
    leave_record(&*store, &layout, 0, T0 + 140);
    leave_record(&*store, &layout, 1, T0 + 2_000);
    let g = build();
    assert_eq!((g.node(), g.stats().claim_wait_ms), (0, 40));
    assert_eq!(
        g.next_id().unwrap().parts(&layout).unwrap().unix_ms(),
        T0 + 140
    );
    assert_eq!(record(1), Some(T0 + 2_000), "passed over, unchanged");
    assert_eq!(record(2), None, "given back untouched");
    assert_eq!(record(3), None, "the search stopped at node 2");
    drop(g);
    // Node 0 reserved 400 ms ahead costs 300 ms; node 2 costs 250, as node 3 (never used)
    // does: the lower of the two.
    leave_record(&*store, &layout, 0, T0 + 400);
    let g = build();
    assert_eq!((g.node(), g.stats().claim_wait_ms), (2, 250));
    assert_eq!(
        g.next_id().unwrap().parts(&layout).unwrap().unix_ms(),
        T0 + 350
    );
    drop(g);
}

#[test]
fn a_deleted_lock_file_is_a_lost_lease() {
    let dir = common::TempDir::new("deleted");
    let store = FileStore::open(dir.path()).unwrap();
    let claim = store.claim(&Layout::twitter(), NodeRequest::Any).unwrap();
    std::fs::remove_file(dir.path().join("twitter/node-0.lock")).unwrap();
    assert!(matches!(
        store.renew(&claim),
        Err(Error::LeaseLost { node: 0, .. })
    ));
    assert!(matches!(
        store.extend(&claim, T0),
        Err(Error::LeaseLost { node: 0, .. })
    ));
}

/// A state directory whose absolute path the system cannot resolve (longer than PATH_MAX) is
/// refused when opened. Before, it was created and claimed component by component, and the
/// holder's first check — by path — failed with ENAMETOOLONG, read as the directory removed:
/// "lease lost" at once (issue 34).
#[test]
fn a_state_directory_path_longer_than_path_max_is_refused_at_open() {
    let dir = common::TempDir::new("long-path");
    let mut long = dir.path().to_path_buf();
    while long.as_os_str().len() <= 4095 {
        long.push("d".repeat(200));
    }
    let len = long.as_os_str().len();
    match FileStore::open(&long) {
        Err(Error::StateDir {
            action: "resolve",
            path,
            source,
            ..
        }) => {
            assert_eq!(path, long);
            assert_eq!(source.kind(), std::io::ErrorKind::InvalidInput);
            assert_eq!(
                source.to_string(),
                format!(
                    "the absolute path is {len} bytes; a state directory's may be at most \
                     4095 (the system's PATH_MAX, 4096, with its terminating NUL)"
                )
            );
        }
        other => panic!("{other:?}"),
    }
    // Nothing was created.
    assert!(!dir.path().join("d".repeat(200)).exists());
    // Exactly 4,095 bytes is the longest the system resolves: taken, and used.
    let mut longest = dir.path().to_path_buf();
    while longest.as_os_str().len() + 201 <= 4095 {
        longest.push("d".repeat(200));
    }
    let last = 4095 - longest.as_os_str().len() - 1;
    longest.push("e".repeat(last));
    assert_eq!(longest.as_os_str().len(), 4095);
    let store = FileStore::open(&longest).unwrap();
    drop(
        store
            .claim(&Layout::twitter(), NodeRequest::Exact(0))
            .unwrap(),
    );
    assert!(longest.is_dir());
}

/// A component the system cannot name (longer than NAME_MAX, 255 bytes) is refused with the
/// system's own error, ENAMETOOLONG: not reported as permission denied, which would send a
/// user to set up group access that cannot help (and, for the default directory, to a
/// directory of their own).
#[test]
fn a_state_directory_component_longer_than_name_max_is_the_systems_error() {
    let dir = common::TempDir::new("long-name");
    for (path, action) in [
        // Looked up, as a directory on the way and as the state directory itself.
        (dir.path().join("n".repeat(256)).join("state"), "look up"),
        (dir.path().join("n".repeat(256)), "look up"),
    ] {
        match FileStore::open(&path) {
            Err(Error::StateDir {
                action: got,
                source,
                ..
            }) => {
                assert_eq!(got, action);
                assert_eq!(source.raw_os_error(), Some(36), "{source}"); // ENAMETOOLONG
                assert_ne!(source.kind(), std::io::ErrorKind::PermissionDenied);
            }
            other => panic!("{other:?}"),
        }
    }
    // Exactly 255 bytes is a name: taken.
    let longest = dir.path().join("n".repeat(255));
    drop(
        FileStore::open(&longest)
            .unwrap()
            .claim(&Layout::twitter(), NodeRequest::Exact(0))
            .unwrap(),
    );
    assert!(longest.join("twitter").is_dir());
}

/// A state directory's path is resolved a component at a time, as the system would: `..`
/// goes up (and stays at the root there), and symbolic links this user or root owns are
/// followed, forty at most, as the kernel's own limit.
#[test]
fn a_state_directory_path_resolves_dot_dot_and_links_as_the_system_does() {
    let dir = common::TempDir::new("resolve");
    std::fs::create_dir(dir.path().join("a")).unwrap();
    let claim_in = |path: &std::path::Path| {
        let store = FileStore::open(path).unwrap();
        drop(
            store
                .claim(&Layout::twitter(), NodeRequest::Exact(0))
                .unwrap(),
        );
    };
    // Up from `a`, and up past the root (which is the root).
    claim_in(&dir.path().join("a/../state"));
    assert!(dir.path().join("state/twitter").is_dir());
    assert!(!dir.path().join("a/state").exists());
    let from_root = std::path::Path::new("/../..").join(dir.path().strip_prefix("/").unwrap());
    claim_in(&from_root.join("state2"));
    assert!(dir.path().join("state2/twitter").is_dir());
    // A chain of forty links is followed; of forty-one, refused as a loop would be.
    let chain = |n: usize, tag: &str| {
        let target = dir.path().join(format!("{tag}-target"));
        std::fs::create_dir(&target).unwrap();
        let mut next = target;
        for i in 0..n {
            let link = dir.path().join(format!("{tag}-{i}"));
            std::os::unix::fs::symlink(&next, &link).unwrap();
            next = link;
        }
        next
    };
    claim_in(&chain(40, "forty"));
    assert!(dir.path().join("forty-target/twitter").is_dir());
    let too_long = chain(41, "forty-one");
    match FileStore::open(&too_long) {
        Err(Error::StateDir {
            action: "resolve",
            source,
            ..
        }) => assert_eq!(source.raw_os_error(), Some(40), "ELOOP: {source}"),
        other => panic!("{other:?}"),
    }
    // Two links that point at each other: the same refusal, not a hang.
    std::os::unix::fs::symlink(dir.path().join("loop-b"), dir.path().join("loop-a")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("loop-a"), dir.path().join("loop-b")).unwrap();
    assert!(matches!(
        FileStore::open(dir.path().join("loop-a")),
        Err(Error::StateDir {
            action: "resolve",
            ..
        })
    ));
}

#[test]
fn state_directory_errors_are_typed() {
    let dir = common::TempDir::new("baddir");
    // A file where the directory should be.
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    match FileStore::open(&file) {
        Err(e @ Error::StateDir { action: "open", .. }) => {
            assert!(e.to_string().contains("Not a directory"), "{e}");
            assert!(matches!(e, Error::StateDir { path, .. } if path == file));
        }
        other => panic!("{other:?}"),
    }
    // A corrupt reservation is refused, not guessed.
    let store = FileStore::open(dir.path().join("s")).unwrap();
    std::fs::create_dir_all(dir.path().join("s/twitter")).unwrap();
    std::fs::write(dir.path().join("s/twitter/node-0.reservation"), "garbage").unwrap();
    match store.claim(&Layout::twitter(), NodeRequest::Exact(0)) {
        Err(e @ Error::DamagedReservation { .. }) => assert!(e.to_string().contains("garbage")),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        FileStore::default_dir_from(None),
        std::path::Path::new("/var/lib/monoflake")
    );
    assert_eq!(
        FileStore::default_dir_from(Some("".into())),
        std::path::Path::new("/var/lib/monoflake")
    );
}

/// The state directory is deleted under a live holder (`rm -rf`, a tmp cleaner) and a new
/// claimant on the same host asks for the same node in the fresh directory: refused while
/// the old holder holds the node's host-wide claim, which it lets go only once it has
/// stopped (at its next check) and written back what it used; the newcomer then starts past
/// everything the old one issued.
#[test]
fn a_state_directory_deleted_under_a_holder_gives_no_duplicates() {
    let base = common::TempDir::new("deleted");
    let dir = base.path().join("state");
    let old = Generator::builder(Layout::twitter())
        .build_leased(
            Arc::new(FileStore::open(&dir).unwrap()),
            NodeRequest::Exact(0),
        )
        .unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (old_ids, old_err, new_ids) = std::thread::scope(|s| {
        let issuer = s.spawn(|| {
            let mut ids = Vec::new();
            loop {
                match old.next_id() {
                    Ok(id) => ids.push(id),
                    Err(e) => return (ids, e),
                }
                if ids.len() % 64 == 0 {
                    // Stay below the layout's cap: the old holder issues at the real time.
                    std::thread::sleep(Duration::from_micros(50));
                }
                assert!(
                    !stop.load(std::sync::atomic::Ordering::Relaxed),
                    "never fenced"
                );
            }
        });
        std::thread::sleep(Duration::from_millis(50));
        common::delete_under_holders(&dir);
        let store = Arc::new(FileStore::open(&dir).unwrap());
        drop(common::claim_when_let_go(&*store, &Layout::twitter(), 0));
        let new = Generator::builder(Layout::twitter())
            .build_leased(store, NodeRequest::Exact(0))
            .unwrap();
        let new_ids: Vec<Id> = (0..20_000).map(|_| new.next_id().unwrap()).collect();
        // Liveness bound only: the old holder must stop long before this.
        let give_up = std::time::Instant::now() + Duration::from_secs(60);
        while !issuer.is_finished() && std::time::Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(10));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let (old_ids, err) = issuer.join().unwrap();
        (old_ids, err, new_ids)
    });
    assert!(
        matches!(old_err, Error::LeaseLost { node: 0, .. }),
        "{old_err:?}"
    );
    let mut all: Vec<Id> = old_ids.iter().chain(&new_ids).copied().collect();
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(
        all.len(),
        n,
        "the old and the new holder of node 0 shared an ID"
    );
    assert!(new_ids[0] > *old_ids.last().unwrap());
}

/// Damaged reservation files are refused with the file's name, never read as a smaller time
/// (a value that lost its last digits would restart the node years in the past).
#[test]
fn damaged_reservations_are_refused_not_read_as_smaller_times() {
    let dir = common::TempDir::new("damaged");
    let store = FileStore::open(dir.path()).unwrap();
    let layout = Layout::twitter();
    let g = Generator::builder(layout.clone())
        .build_leased(Arc::new(store.clone()), NodeRequest::Exact(1))
        .unwrap();
    g.next_id().unwrap();
    g.release().unwrap();
    let path = dir.path().join("twitter/node-1.reservation");
    let good = std::fs::read_to_string(&path).unwrap();
    let mut lines = good.lines();
    assert_eq!(lines.next(), Some("monoflake-reservation v2"));
    let value = lines.next().unwrap().to_owned();
    let sum = lines.next().unwrap().to_owned();
    assert!(sum.starts_with("sum=") && sum.len() == 4 + 16, "{sum}");
    let truncated = &value[..value.len() - 3];
    let mut flipped = value.clone().into_bytes();
    let last = flipped.len() - 1;
    flipped[last] = if flipped[last] == b'9' {
        b'8'
    } else {
        flipped[last] + 1
    };
    let flipped = String::from_utf8(flipped).unwrap();
    let cases = [
        (
            "truncated digits",
            format!("monoflake-reservation v2\n{truncated}\n{sum}\n"),
            "checksum does not match",
        ),
        (
            "a changed digit",
            format!("monoflake-reservation v2\n{flipped}\n{sum}\n"),
            "checksum does not match",
        ),
        (
            "a missing checksum",
            format!("monoflake-reservation v2\n{value}\n"),
            "no sum=<hex> line",
        ),
        ("an empty file", String::new(), "no until_ms=<digits> line"),
        (
            "garbage",
            "\u{0}\u{1}garbage".to_owned(),
            "no until_ms=<digits> line",
        ),
        (
            "an unknown version",
            format!("monoflake-reservation v9\n{value}\n{sum}\n"),
            "unknown header",
        ),
    ];
    for (what, text, expect) in cases {
        std::fs::write(&path, text).unwrap();
        match store.claim(&layout, NodeRequest::Exact(1)) {
            Err(e @ Error::DamagedReservation { .. }) => {
                let msg = e.to_string();
                assert!(msg.contains(expect), "{what}: {msg}");
                assert!(msg.contains("node-1.reservation"), "{what}: {msg}");
            }
            other => panic!("{what}: {other:?}"),
        }
    }
    // A well-formed v1 file (no checksum: a damaged value cannot be told from a good one) is
    // refused until an operator migrates it; then it is read as it was.
    std::fs::write(&path, format!("monoflake-reservation v1\n{value}\n")).unwrap();
    match store.claim(&layout, NodeRequest::Exact(1)) {
        Err(e @ Error::LegacyReservation { .. }) => {
            assert!(e.to_string().contains("written by monoflake 0.1"), "{e}");
            assert!(e.to_string().contains("FileStore::migrate_v1"), "{e}");
            assert!(matches!(e, Error::LegacyReservation { path: p, .. } if p == path));
        }
        other => panic!("v1: {other:?}"),
    }
    assert_eq!(store.migrate_v1().unwrap(), vec![path.clone()]);
    assert!(
        std::fs::read_to_string(&path)
            .unwrap()
            .starts_with("monoflake-reservation v2")
    );
    let claim = store.claim(&layout, NodeRequest::Exact(1)).unwrap();
    let until: u64 = value.strip_prefix("until_ms=").unwrap().parse().unwrap();
    assert_eq!(claim.reserved_until_ms(), Some(until));
    drop(claim);
    // And the good v2 file again.
    std::fs::write(&path, &good).unwrap();
    assert_eq!(
        store
            .claim(&layout, NodeRequest::Exact(1))
            .unwrap()
            .reserved_until_ms(),
        Some(until)
    );
}

/// Two claimants of any node starting together, when some nodes are reserved slightly ahead:
/// while one holds the nodes it passed over (looking for a settled one), the other must not
/// report every node held. Four nodes, three slightly ahead and one settled, so both always
/// get a node; 200 rounds, each from the same records. The nodes given back keep their
/// reservations.
#[test]
fn racing_claims_of_any_node_both_succeed_when_nodes_are_free() {
    let dir = common::TempDir::new("race-any");
    let layout = small_layout("four", 2);
    let store: Arc<dyn NodeStore> = Arc::new(FileStore::open(dir.path()).unwrap());
    let set = |node: u64, until: u64| leave_record(&*store, &layout, node, until);
    let barrier = std::sync::Barrier::new(2);
    for round in 0..200 {
        // Nodes 0..=2 slightly ahead (within the lead, so no wait), node 3 settled.
        for node in 0..3 {
            set(node, T0 + 1 + node);
        }
        set(3, T0 - 1_000);
        let claim = || {
            barrier.wait();
            Generator::builder(layout.clone())
                .clock(ManualClock::new(T0))
                .build_leased(Arc::clone(&store), NodeRequest::Any)
        };
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(claim);
            let b = s.spawn(claim);
            (a.join().unwrap(), b.join().unwrap())
        });
        let (a, b) = match (a, b) {
            (Ok(a), Ok(b)) => (a, b),
            (a, b) => panic!("round {round}: {:?} / {:?}", a.err(), b.err()),
        };
        assert_ne!(a.node(), b.node(), "round {round}");
        assert!(a.next_id().unwrap() != b.next_id().unwrap());
        // The nodes passed over and given back kept their reservations untouched, and are free.
        for node in (0..4).filter(|&n| n != a.node() && n != b.node()) {
            let claim = store.claim(&layout, NodeRequest::Exact(node)).unwrap();
            let set_to = if node == 3 { T0 - 1_000 } else { T0 + 1 + node };
            assert_eq!(claim.reserved_until_ms(), Some(set_to), "round {round}");
        }
    }
}

/// A layout with `node_bits` node bits (few nodes, so "every node held" is reachable).
fn small_layout(name: &'static str, node_bits: u32) -> Layout {
    Layout::builder()
        .epoch_ms(Layout::twitter().epoch_ms())
        .name(name)
        .node_field("n", node_bits)
        .build()
        .unwrap()
}

/// Leaves the record a previous holder of `node` would: claimed, then released with its
/// reservation at `until_ms`.
fn leave_record(store: &dyn NodeStore, layout: &Layout, node: u64, until_ms: u64) {
    let claim = store.claim(layout, NodeRequest::Exact(node)).unwrap();
    store.release(claim, until_ms).unwrap();
}

/// A clock stepped 3 s forward after the last check that found the claim standing, while the
/// checks fail (the store unreachable; its reservation writes still go through, so the limit
/// follows the clock): the holder issues in no tick at or past that check's clock reading plus
/// the confirm bound, the bound a successor that finds no record starts above. Before, each
/// failed round set the fence's deadline from the clock's newest reading, and the holder
/// issued on the stepped clock until the bound ran out in real time.
#[test]
fn a_clock_stepped_forward_while_checks_fail_issues_nothing_past_the_confirm_bound() {
    let dir = common::TempDir::new("stepped-unconfirmed");
    let store = common::Flaky::new(dir.path(), None);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let clock = Arc::new(ManualClock::new(now));
    let layout = Layout::twitter();
    let leased = Generator::builder(layout.clone())
        .clock(Arc::clone(&clock))
        .max_wait(Duration::ZERO)
        .build_leased(store.clone(), NodeRequest::Exact(0))
        .unwrap();
    leased.next_id().unwrap();
    store.fail_renew.store(1, Ordering::SeqCst);
    clock.advance_ms(3_000);
    let bound =
        now + monoflake::handover::confirm_bound_ms(store.check_interval().as_millis() as u64);
    // Watch the keeper's failing rounds for a second (how long only: the assertion is on the
    // IDs' times), taking every ID the fence lets through.
    let watch = std::time::Instant::now();
    let mut issued = Vec::new();
    while watch.elapsed() < Duration::from_secs(1) {
        if let Ok(id) = leased.try_next_id() {
            issued.push(id.parts(&layout).unwrap().unix_ms());
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let past: Vec<u64> = issued.iter().copied().filter(|&ms| ms >= bound).collect();
    assert!(
        past.is_empty(),
        "{} IDs at or past {bound} (the last check's clock {now} plus the confirm bound), up to {:?}",
        past.len(),
        past.iter().max()
    );
}

/// A Twitter-layout generator holding node 0 of a fresh `Flaky` store (in the directory
/// returned, removed when it drops).
fn flaky_holder(
    name: &str,
) -> (
    common::TempDir,
    Arc<common::Flaky>,
    monoflake::Leased<monoflake::LockedClock>,
) {
    flaky_holder_of(name, Layout::twitter())
}

/// As [`flaky_holder`], of `layout`.
fn flaky_holder_of(
    name: &str,
    layout: Layout,
) -> (
    common::TempDir,
    Arc<common::Flaky>,
    monoflake::Leased<monoflake::LockedClock>,
) {
    let dir = common::TempDir::new(name);
    let store = common::Flaky::new(dir.path(), None);
    let leased = Generator::builder(layout)
        .build_leased(store.clone(), NodeRequest::Exact(0))
        .unwrap();
    (dir, store, leased)
}

/// A holder of node 0 of Twitter's layout on a [`common::Flaky`] file store and a manual clock
/// at `T0`, reserving 200 ms ahead. The node has a record at `T0` (a node without one starts
/// past what a vanished holder could have issued: see the deleted-directory test).
fn manual_holder(
    name: &str,
) -> (
    common::TempDir,
    Arc<common::Flaky>,
    Arc<ManualClock>,
    monoflake::Leased<Arc<ManualClock>>,
) {
    let dir = common::TempDir::new(name);
    let store = common::Flaky::new(dir.path(), None);
    let claim = store
        .claim(&Layout::twitter(), NodeRequest::Exact(0))
        .unwrap();
    store.release(claim, T0).unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let leased = Generator::builder(Layout::twitter())
        .clock(Arc::clone(&clock))
        .reservation_window(Duration::from_millis(200))
        .build_leased(store.clone(), NodeRequest::Exact(0))
        .unwrap();
    (dir, store, clock, leased)
}

/// A claim the store says is gone (taken over, deleted) stops issuing with `LeaseLost` giving
/// the store's reason as it is — not wrapped in "not renewed within its validity", which is
/// the deadline's reason, nor in another `LeaseLost`, nor as `ReservationUnavailable`.
#[test]
fn a_claim_the_store_says_is_lost_is_refused_with_the_stores_reason() {
    let (_dir, store, leased) = flaky_holder("lost-reason");
    leased.next_id().unwrap();
    store.fail_renew.store(2, Ordering::SeqCst);
    // Issue until refused for good (a liveness bound only): every refusal is the same.
    let refused = refused_for_good(&leased);
    for e in [refused, leased.try_next_id().unwrap_err()] {
        match &e {
            Error::LeaseLost {
                node: 0, reason, ..
            } => assert_eq!(reason, "taken over"),
            other => panic!("{other:?}"),
        }
        assert_eq!(e.to_string().matches("lease was lost").count(), 1, "{e}");
    }
}

/// Issues from `leased` until it refuses for good; returns that refusal (the 60 s bound is a
/// liveness bound only).
fn refused_for_good<C: TimeSource + 'static>(leased: &monoflake::Leased<C>) -> Error {
    refused_then_nothing(leased, Duration::from_secs(60), Duration::ZERO).0
}

/// A lost holder whose write-back cannot be written (issue 34, case 2: a directory it may no
/// longer write) is never silent: every refusal says what could not be written back, its
/// release fails saying so, and the node stays held on this host until the process exits —
/// a successor here is refused, not started unaware of what the holder issued.
#[test]
fn a_write_back_that_fails_is_reported_and_the_node_stays_held() {
    let (dir, store, leased) = flaky_holder("write-back-fails");
    leased.next_id().unwrap();
    store.fail_restore.store(true, Ordering::SeqCst);
    store.fail_renew.store(2, Ordering::SeqCst);
    match refused_for_good(&leased) {
        Error::LeaseLost {
            node: 0, reason, ..
        } => {
            assert!(
                reason.starts_with("taken over; what it issued (up to "),
                "{reason}"
            );
            assert!(
                reason.ends_with(
                    "could not be written back to flaky: node store flaky: permission denied"
                ),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_held_until_exit(leased.release());
    assert!(store.restored.lock().unwrap().is_empty());
    let successor = FileStore::open(dir.path()).unwrap();
    match successor.claim(&Layout::twitter(), NodeRequest::Exact(0)) {
        Err(Error::NodeHeld { node: 0, .. }) => {}
        other => panic!("{other:?}"),
    }
}

/// A release of node 0 whose write-back failed: lost, and the node kept on this host (its
/// host-wide claim) until the process exits.
fn assert_held_until_exit(released: Result<(), Error>) {
    match released {
        Err(Error::LeaseLost {
            node: 0, reason, ..
        }) => assert!(
            reason.ends_with("the node stays held on this host until this process exits"),
            "{reason}"
        ),
        other => panic!("{other:?}"),
    }
}

/// A release that finds its claim gone (its records deleted since the keeper's last round)
/// says the lease was lost and writes back, beside the records as they are now, the end of
/// the last tick it issued: a successor that found no record reads it after its wait.
#[test]
fn a_release_that_finds_its_claim_gone_writes_back_what_it_issued() {
    let (dir, store, leased) = flaky_holder("release-finds-gone");
    let layout = Layout::twitter();
    let mut last = leased.next_id().unwrap();
    for _ in 1..10_000 {
        last = leased.next_id().unwrap();
    }
    let last_ms = last.parts(&layout).unwrap().unix_ms();
    store.lost_extend.store(true, Ordering::SeqCst);
    match leased.release() {
        Err(Error::LeaseLost {
            node: 0, reason, ..
        }) => assert_eq!(reason, "records deleted"),
        other => panic!("{other:?}"),
    }
    let restored = store.restored.lock().unwrap().clone();
    let written = *restored.last().expect("nothing written back");
    assert!(
        written > last_ms,
        "wrote back {written}, issued up to {last_ms}"
    );
    // The written-back record is what a successor reads: it starts above the holder's IDs.
    let successor = Generator::builder(layout)
        .build_leased(
            Arc::new(FileStore::open(dir.path()).unwrap()),
            NodeRequest::Exact(0),
        )
        .unwrap();
    assert!(successor.next_id().unwrap() > last);
}

/// A lease the store says is lost stops the generator at once: the write-back made when the
/// keeper learns of it covers every ID issued before or after — none is issued above it.
#[test]
fn a_lost_lease_seals_and_its_write_back_covers_every_id() {
    // Twitter's layout (the default one), and Sonyflake's: 10 ms ticks from another epoch, so
    // a write-back that reads ticks in any layout but the generator's own is far off.
    for (name, layout) in [
        ("lost-seals", Layout::twitter()),
        ("lost-seals-sonyflake", Layout::sonyflake()),
    ] {
        let (_dir, store, leased) = flaky_holder_of(name, layout.clone());
        let mut last = leased.next_id().unwrap();
        store.fail_renew.store(2, Ordering::SeqCst);
        let start = std::time::Instant::now();
        loop {
            match leased.try_next_id() {
                Ok(id) => last = last.max(id),
                Err(Error::WouldBlock { .. }) => {}
                Err(Error::LeaseLost { node: 0, .. }) => break,
                Err(other) => panic!("{name}: {other:?}"),
            }
            assert!(start.elapsed() < Duration::from_secs(60), "never refused");
        }
        let written = *store
            .restored
            .lock()
            .unwrap()
            .first()
            .expect("no write-back");
        // Past the last ID's tick, and no further than the reservation window past it.
        let parts = last.parts(&layout).unwrap();
        let end_ms = parts.unix_ms() + layout.tick_ms();
        assert!(
            (end_ms..end_ms + 10_000).contains(&written),
            "{name}: wrote back {written}, issued up to {end_ms}"
        );
        // The loss is counted once, however many rounds the keeper runs after it (one every
        // 250 ms, the file store's check interval).
        std::thread::sleep(Duration::from_secs(1));
        assert_eq!(leased.stats().lease_losses, 1, "{name}");
    }
}

/// A leased generator whose clock passes its reservation while the store is healthy but slow
/// waits for its keeper: the refusal says so (`BlockedOn::LeaseKeeper`, "lease keeper" in the
/// message), not that the generator is at its time lead limit; a waiting call that runs out of
/// time says the same; and once the store answers, the waiting call issues at the new clock.
#[test]
fn a_refusal_while_the_keeper_extends_names_the_keeper() {
    let (_dir, store, clock, leased) = manual_holder("keeper-wait");
    let first = leased.next_id().unwrap();
    store.hold_extend.store(true, Ordering::SeqCst);
    clock.advance_ms(10_000);
    match leased.try_next_id() {
        Err(
            e @ Error::WouldBlock {
                blocked_on: BlockedOn::LeaseKeeper,
                ..
            },
        ) => assert!(e.to_string().contains("lease keeper"), "{e}"),
        other => panic!("{other:?}"),
    }
    match leased.next_id() {
        Err(
            e @ Error::TimedOut {
                blocked_on: BlockedOn::LeaseKeeper,
                ..
            },
        ) => assert!(e.to_string().contains("lease keeper"), "{e}"),
        other => panic!("{other:?}"),
    }
    store.hold_extend.store(false, Ordering::SeqCst);
    let after = leased.next_id().unwrap();
    assert!(after > first);
    assert!(after.parts(&Layout::twitter()).unwrap().unix_ms() >= T0 + 10_000);
}

/// A burst that runs ahead of a stopped clock, as far as the lead allows (16 IDs a tick, a
/// lead of 1 s, a reservation window of 200 ms), is reserved from the last tick it issued, not
/// from the clock: the keeper extends the reservation past the burst, round after round, and
/// the generator stops at its lead limit — never for good at its keeper. A generator, a
/// PerThread and a PerCore, each on a node of its own.
#[test]
fn a_burst_ahead_of_the_clock_is_reserved_from_its_last_tick() {
    let layout = Layout::builder()
        .epoch_ms(Layout::twitter().epoch_ms())
        .node_field("worker", 10)
        .sequence_bits(4)
        .build()
        .unwrap();
    let dir = common::TempDir::new("burst-ahead");
    let store = common::Flaky::new(dir.path(), None);
    for node in 0..3 {
        let claim = store.claim(&layout, NodeRequest::Exact(node)).unwrap();
        store.release(claim, T0).unwrap();
    }
    let builder = || {
        Generator::builder(layout.clone())
            .clock(Arc::new(ManualClock::new(T0)))
            .reservation_window(Duration::from_millis(200))
            .max_lead(Duration::from_secs(1))
    };
    let leased = builder()
        .build_leased(store.clone(), NodeRequest::Exact(0))
        .unwrap();
    let per_thread = builder()
        .build_leased_per_thread(store.clone(), NodeRequest::Exact(1), 2)
        .unwrap();
    let per_core = builder()
        .build_leased_per_core(store.clone(), NodeRequest::Exact(2), 2)
        .unwrap();
    type Next<'a> = &'a dyn Fn() -> Result<monoflake::Id, Error>;
    let bursts: [(&str, Next); 3] = [
        ("generator", &|| leased.try_next_id()),
        ("per-thread", &|| per_thread.try_next_id()),
        ("per-core", &|| per_core.try_next_id()),
    ];
    for (name, next) in bursts {
        let mut last = next().unwrap();
        // A liveness bound only: the keeper extends every 50 ms (a quarter of the window).
        let give_up = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            match next() {
                Ok(id) => {
                    assert!(id > last, "{name}");
                    last = id;
                }
                Err(Error::WouldBlock {
                    blocked_on: BlockedOn::LeadLimit,
                    ..
                }) => break,
                Err(Error::WouldBlock {
                    blocked_on: BlockedOn::LeaseKeeper,
                    ..
                }) => std::thread::sleep(Duration::from_millis(1)),
                Err(other) => panic!("{name}: {other:?}"),
            }
            let at = last.parts(&layout).unwrap().unix_ms();
            assert!(
                std::time::Instant::now() < give_up,
                "{name}: the reservation never passed the burst: its last ID is at T0 + {} ms",
                at - T0
            );
        }
        // The lead's end: a second past the stopped clock, five windows.
        let at = last.parts(&layout).unwrap().unix_ms();
        assert!(
            (T0 + 999..=T0 + 1_000).contains(&at),
            "{name}: T0 + {} ms",
            at - T0
        );
    }
    for stats in [leased.stats(), per_thread.stats(), per_core.stats()] {
        assert!(stats.reservation_writes >= 5, "{stats:?}");
    }
}

/// The same for a host's own state word (`build_state_lease`): the keeper extends from the
/// word's last tick, so a burst ahead of a stopped clock is reserved, and the fence raised,
/// up to the lead's end; the release seals the word and reserves past the burst, so the next
/// holder on the same stopped clock starts above it.
#[test]
fn a_state_lease_burst_ahead_of_the_clock_is_reserved_from_its_last_tick() {
    use monoflake::{OutsideState, StateStep};
    use std::sync::atomic::AtomicU64;
    const SEALED: u64 = u64::MAX;
    const SEQUENCE_BITS: u32 = 4;
    /// The word, and the tick it was sealed at.
    struct Word(AtomicU64, AtomicU64);
    impl OutsideState for Word {
        fn start(&self, step: &StateStep) {
            self.1.store(step.tick_of(step.start()), Ordering::Relaxed);
            self.0.store(step.start(), Ordering::Release);
        }
        fn last_tick(&self) -> u64 {
            match self.0.load(Ordering::Relaxed) {
                SEALED => self.1.load(Ordering::Relaxed),
                s => s >> SEQUENCE_BITS,
            }
        }
        fn seal(&self) -> u64 {
            let tick = self.last_tick();
            match self.0.swap(SEALED, Ordering::Relaxed) {
                SEALED => tick,
                s => s >> SEQUENCE_BITS,
            }
        }
    }
    let layout = Layout::builder()
        .epoch_ms(Layout::discord().epoch_ms()) // not the default layout's
        .name("stateburst")
        .node_field("worker", 10)
        .sequence_bits(SEQUENCE_BITS)
        .build()
        .unwrap();
    let dir = common::TempDir::new("state-burst");
    let store: Arc<dyn NodeStore> = Arc::new(FileStore::open(dir.path()).unwrap());
    leave_record(&*store, &layout, 1, T0);
    let builder = || {
        Generator::builder(layout.clone())
            .clock(Arc::new(ManualClock::new(T0)))
            .reservation_window(Duration::from_millis(200))
            .max_lead(Duration::from_secs(1))
    };
    let word = Arc::new(Word(AtomicU64::new(SEALED), AtomicU64::new(0)));
    let lease = builder()
        .build_state_lease(Arc::clone(&store), NodeRequest::Exact(1), word.clone())
        .unwrap();
    assert_eq!((lease.node(), lease.layout().name()), (1, "stateburst"));
    // Its debug output: the node, the layout and the fence's words (which the keeper moves).
    let debug = format!("{lease:?}");
    let fence = "StateLease { node: 1, layout: \"stateburst\", fence: (";
    assert!(
        debug.starts_with(fence) && debug.ends_with("), .. }"),
        "{debug}"
    );
    let mut last: Option<Id> = None;
    // A liveness bound only: the keeper extends every 50 ms (a quarter of the window).
    let give_up = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        // The host's issue: load, step, fence, compare-exchange.
        let now_ns = lease.clock().precise_now_ns();
        let cur = word.0.load(Ordering::Acquire);
        match lease.step().next(cur, now_ns, 1) {
            Ok((first, _)) => {
                let (limit, deadline) = lease.fence();
                let now_tick = lease.layout().tick_at(now_ns / 1_000_000);
                if lease.step().tick_of(first) <= limit && now_tick < deadline {
                    word.0
                        .compare_exchange(cur, first, Ordering::Relaxed, Ordering::Relaxed)
                        .unwrap();
                    let id = lease.step().id(first);
                    assert!(last < Some(id));
                    last = Some(id);
                } else {
                    std::thread::sleep(Duration::from_millis(1)); // the keeper raises it
                }
            }
            Err(Error::WouldBlock {
                blocked_on: BlockedOn::LeadLimit,
                ..
            }) => break,
            Err(other) => panic!("{other:?}"),
        }
        let at = last.map_or(T0, |id| id.parts(&layout).unwrap().unix_ms());
        assert!(
            std::time::Instant::now() < give_up,
            "the reservation never passed the burst: its last ID is at T0 + {} ms",
            at - T0
        );
    }
    let last = last.unwrap();
    let at = last.parts(&layout).unwrap().unix_ms();
    assert!((T0 + 999..=T0 + 1_000).contains(&at), "T0 + {} ms", at - T0);
    assert!(lease.stats().reservation_writes >= 5, "{:?}", lease.stats());
    lease.release().unwrap();
    assert_eq!(word.0.load(Ordering::Relaxed), SEALED);
    let next = builder()
        .build_leased(Arc::clone(&store), NodeRequest::Exact(1))
        .unwrap();
    assert!(next.next_id().unwrap() > last);
}

/// A StateLease's `check` says whether its host may issue, and why not, as `Leased::check`
/// does: `Ok` while held; past the fence's deadline with the store unreachable, the claim not
/// confirmed; once the store says it is gone, lost with the store's reason.
#[test]
fn a_state_lease_check_says_why_its_host_may_not_issue() {
    let dir = common::TempDir::new("state-check");
    let store = common::Flaky::new(dir.path(), None);
    leave_record(&*store, &Layout::twitter(), 0, T0);
    let clock = Arc::new(ManualClock::new(T0));
    let lease = Generator::builder(Layout::twitter())
        .clock(Arc::clone(&clock))
        .reservation_window(Duration::from_millis(200))
        .build_state_lease(
            store.clone(),
            NodeRequest::Exact(0),
            Arc::new(common::StartTick::default()),
        )
        .unwrap();
    lease.check().unwrap();
    // Unreachable, and the clock a minute past the deadline: not confirmed. (The first
    // answers may be the keeper's to give, until its round has failed.)
    store.fail_renew.store(1, Ordering::SeqCst);
    clock.advance_ms(60_000);
    let give_up = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        match lease.check() {
            Err(Error::ReservationUnavailable {
                node: 0, reason, ..
            }) if reason.contains("has not been confirmed") => {
                break;
            }
            Err(Error::WouldBlock {
                blocked_on: BlockedOn::LeaseKeeper,
                ..
            }) => {}
            other => panic!("{other:?}"),
        }
        assert!(std::time::Instant::now() < give_up, "never refused");
        std::thread::sleep(Duration::from_millis(5));
    }
    // Taken over: lost, with the store's reason, and the fence closed. (Its write-back
    // fails, so the release has an error to report.)
    store.fail_restore.store(true, Ordering::SeqCst);
    store.fail_renew.store(2, Ordering::SeqCst);
    loop {
        match lease.check() {
            Err(Error::LeaseLost {
                node: 0, reason, ..
            }) if reason.starts_with("taken over") => break,
            Err(Error::ReservationUnavailable { node: 0, .. }) => {}
            other => panic!("{other:?}"),
        }
        assert!(std::time::Instant::now() < give_up, "never lost");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(lease.fence(), (0, 0));
    // Its release reports the keeper's failure.
    assert_held_until_exit(lease.release());
}

/// While renewals fail (the store cannot be reached), the keeper writes no reservation, though
/// one is due: it has not confirmed that the node is still its own, and a write then could
/// land on a record someone else holds by now. Issuing runs on the reservation it has.
#[test]
fn no_reservation_is_written_while_renewals_fail() {
    let (_dir, store, clock, leased) = manual_holder("unconfirmed-no-write");
    leased.next_id().unwrap();
    store.fail_renew.store(1, Ordering::SeqCst);
    let writes = leased.stats().reservation_writes;
    // Past half the 200 ms window: a healthy round would extend now.
    clock.advance_ms(150);
    // Four rounds or more (one every 50 ms, a quarter of the window).
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(leased.stats().reservation_writes, writes);
    // Once the store answers again, the next round writes it.
    store.fail_renew.store(0, Ordering::SeqCst);
    let give_up = std::time::Instant::now() + Duration::from_secs(60);
    while leased.stats().reservation_writes == writes {
        assert!(std::time::Instant::now() < give_up, "never extended");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A process the holder starts (a hook, a shell-out) inherits none of its claim's descriptors:
/// once the holder lets go, the node is free again though that process still runs. The lock
/// files are opened `O_CLOEXEC`; a copy inherited across `exec` would keep their `flock` for as
/// long as the child lives.
#[test]
fn a_process_started_by_the_holder_does_not_keep_its_node() {
    let dir = common::TempDir::new("inherit");
    let layout = Layout::twitter();
    let store: Arc<dyn NodeStore> = Arc::new(FileStore::open(dir.path()).unwrap());
    let holder = Generator::builder(layout.clone())
        .build_leased(Arc::clone(&store), NodeRequest::Exact(5))
        .unwrap();
    holder.try_next_id().unwrap();
    let mut child = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    drop(holder);
    let next = Generator::builder(layout).build_leased(store, NodeRequest::Exact(5));
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(next.unwrap().node(), 5);
}

/// A file store names its directory, and refuses a claim it did not make (a custom store's,
/// handed to it by mistake) at every call that takes one, saying so: it never drops, renews or
/// writes for a claim it cannot check.
#[test]
fn a_file_store_names_its_directory_and_refuses_claims_it_did_not_make() {
    let dir = common::TempDir::new("foreign");
    let store = FileStore::open(dir.path()).unwrap();
    assert_eq!(store.describe(), format!("file {}", dir.path().display()));
    let foreign = || Claim::new(7, None, "another store's token");
    let results = [
        ("renew", store.renew(&foreign()).map(|_| ())),
        ("extend", store.extend(&foreign(), 1_700_000_000_000)),
        ("release", store.release(foreign(), 1_700_000_000_000)),
        ("abandon", store.abandon(foreign())),
    ];
    for (call, result) in results {
        match result {
            Err(Error::LeaseLost {
                node: 7, reason, ..
            }) => {
                assert_eq!(reason, "the claim was not made by a file store", "{call}");
            }
            other => panic!("{call}: {other:?}"),
        }
    }
}

/// An extension is written to the node's record and to the host's anchor, or it fails: a
/// holder whose anchor cannot be written is not told its reservation moved (its records
/// deleted under it, a successor on this host would have the anchor alone, below what the
/// holder issued), and the same holds for a lost holder's write-back.
#[test]
fn a_reservation_whose_anchor_cannot_be_written_fails() {
    let base = common::TempDir::new("anchor-fails");
    let state = base.path().join("state");
    let store = FileStore::open(&state).unwrap();
    let layout = Layout::twitter();
    let claim = store.claim(&layout, NodeRequest::Exact(2)).unwrap();
    store.extend(&claim, 1_800_000_000_000).unwrap();
    // The tests' host scope keeps this host's anchors beside the state directory: the one
    // the extension wrote is made a directory, which the next anchor's rename cannot replace.
    let anchors = base.path().join(".state.host-anchors");
    let written: Vec<_> = std::fs::read_dir(&anchors)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(written.len(), 1, "{written:?}");
    std::fs::remove_file(&written[0]).unwrap();
    std::fs::create_dir(&written[0]).unwrap();
    match store.extend(&claim, 1_800_000_001_000) {
        Err(Error::StateDir { action, .. }) => {
            assert_eq!(action, "write the host's anchor of the node in");
        }
        other => panic!("the extension: {other:?}"),
    }
    match store.restore(&claim, 1_800_000_001_000) {
        Err(Error::StateDir { action, .. }) => {
            assert_eq!(action, "write the host's anchor of the node in");
        }
        other => panic!("the write-back: {other:?}"),
    }
}

/// The re-read a claimant makes after its wait (`NodeStore::reservation`) reads the node's own
/// record, in the claim's layout's milliseconds, not only the host's anchor: with the anchor
/// gone (`/var/tmp` cleaned, or a host without one), the record alone gives the exact value.
#[test]
fn a_reread_finds_the_nodes_record_without_its_anchor() {
    let base = common::TempDir::new("reread");
    let state = base.path().join("state");
    let store = FileStore::open(&state).unwrap();
    // An epoch a second after Twitter's: records hold ID values, read back as this layout's ms.
    let layout = Layout::builder()
        .node_field("n", 3)
        .epoch_ms(1_288_834_975_657)
        .build()
        .unwrap();
    let claim = store.claim(&layout, NodeRequest::Exact(2)).unwrap();
    store.extend(&claim, 1_800_000_000_123).unwrap();
    // The tests' host scope keeps this host's anchors beside the state directory.
    let anchors = base.path().join(".state.host-anchors");
    let mut removed = 0;
    for entry in std::fs::read_dir(&anchors).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
        removed += 1;
    }
    assert_eq!(removed, 1, "the extension wrote one anchor");
    assert_eq!(store.reservation(&claim).unwrap(), Some(1_800_000_000_123));
}

/// A holder whose layout's directory was moved away (an operator's `mv`), and then made
/// again, has lost its claim, and says which: a successor would claim in the new directory,
/// blind to the holder's lock and records in the old one.
#[test]
fn a_layout_directory_moved_away_or_replaced_ends_the_claim_in_it() {
    let dir = common::TempDir::new("layout-moved");
    let store = FileStore::open(dir.path()).unwrap();
    let layout = Layout::twitter();
    let claim = store.claim(&layout, NodeRequest::Exact(4)).unwrap();
    store.renew(&claim).unwrap();
    let layout_dir = dir.path().join(&*layout.shape_key());
    std::fs::rename(&layout_dir, dir.path().join("moved")).unwrap();
    let lost = |how: &str| match store.renew(&claim) {
        Err(Error::LeaseLost {
            node: 4, reason, ..
        }) => assert_eq!(reason, format!("{} was {how}", layout_dir.display())),
        other => panic!("{how}: {other:?}"),
    };
    lost("removed");
    std::fs::create_dir(&layout_dir).unwrap();
    std::fs::set_permissions(
        &layout_dir,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    lost("replaced");
}

/// Restored records (lost holders' write-backs) are files of their own, one per write-back,
/// so a lower one never replaces a higher one; each stays until the node's reservation covers
/// it, and is removed then.
#[test]
fn restored_records_never_replace_each_other_and_go_once_covered() {
    let dir = common::TempDir::new("restored");
    let store = FileStore::open(dir.path()).unwrap();
    let layout = Layout::twitter();
    let restored = || {
        std::fs::read_dir(dir.path().join("twitter"))
            .unwrap()
            .filter(|e| {
                let name = e.as_ref().unwrap().file_name();
                name.to_string_lossy().starts_with("node-6.restored.")
            })
            .count()
    };
    let claim = store.claim(&layout, NodeRequest::Exact(6)).unwrap();
    store.restore(&claim, 1_700_000_010_000).unwrap();
    store.restore(&claim, 1_700_000_005_000).unwrap();
    assert_eq!(restored(), 2);
    assert_eq!(store.reservation(&claim).unwrap(), Some(1_700_000_010_000));
    store.extend(&claim, 1_700_000_007_000).unwrap();
    assert_eq!(restored(), 1, "the lower one is covered");
    store.extend(&claim, 1_700_000_010_000).unwrap();
    assert_eq!(restored(), 0);
    assert_eq!(store.reservation(&claim).unwrap(), Some(1_700_000_010_000));
}

/// Issue 54, case 1, in `monoflake serve`'s reclaim order: a holder whose records are deleted
/// writes back once and lets go of the host-wide claim; its successor (the same user, the
/// same node) raises the node's anchor; then the lost holder is dropped. The drop writes
/// nothing — not a second write-back that put the anchor back under the successor's
/// reservation, where a claimant of another state directory with its clock set back
/// reissued every one of the successor's IDs (3.2–3.5 M in a review).
#[test]
fn a_lost_holder_dropped_after_its_successor_writes_back_once() {
    let dir = common::TempDir::new("write-back-once");
    let store = common::Flaky::new(dir.path(), None);
    let layout = Layout::twitter();
    let lost = Generator::builder(layout.clone())
        .build_leased(store.clone(), NodeRequest::Any)
        .unwrap();
    assert_eq!(lost.node(), 0);
    let before = lost.next_id().unwrap();
    std::fs::remove_dir_all(dir.path()).unwrap();
    let give_up = std::time::Instant::now() + Duration::from_secs(60);
    while !matches!(lost.try_next_id(), Err(Error::LeaseLost { .. })) {
        assert!(
            std::time::Instant::now() < give_up,
            "the loss was never found"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(store.restored.lock().unwrap().len(), 1, "written back once");
    // The successor takes the node, above what the lost holder wrote back.
    let successor = Generator::builder(layout.clone())
        .build_leased(store.clone(), NodeRequest::Any)
        .unwrap();
    assert_eq!(successor.node(), 0);
    let first = successor.next_id().unwrap();
    assert!(first > before, "{first} after {before}");
    let reserved = *store.extended.lock().unwrap().last().unwrap();
    drop(lost);
    assert_eq!(
        store.restored.lock().unwrap().len(),
        1,
        "the drop of a holder lost and written back writes nothing"
    );
    // The node's anchor (the tests' host scope keeps it beside the state directory) still
    // holds at least the successor's reservation.
    let mut scoped = std::ffi::OsString::from(".");
    scoped.push(dir.path().file_name().unwrap());
    scoped.push(".host-anchors");
    let anchors = dir.path().parent().unwrap().join(scoped);
    let uid = format!(".node-0.uid-{}", unsafe_free_euid());
    let anchor = std::fs::read_dir(&anchors)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().ends_with(&uid))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .expect("the node's anchor");
    let value: u64 = anchor
        .trim()
        .strip_prefix("until_ms=")
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        value >= reserved,
        "the anchor reads {value}, under the successor's reservation {reserved}"
    );
    drop(successor);
}

/// This process's effective user, from `/proc/self/status` (no `unsafe`).
fn unsafe_free_euid() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    line.split_whitespace().nth(2).unwrap().parse().unwrap()
}

/// A renewal that does not come back (a partition, a store that stopped answering) holds the
/// keeper; the hot path stops on its own at the confirm bound — two checks after the start
/// of the last one that found the claim standing — whatever the reservation still allows,
/// telling callers to wait for the keeper, and goes on once the store answers again. No ID
/// of the whole run carries a time past that bound: a successor of a node whose records were
/// deleted starts above it.
#[test]
fn a_renewal_that_hangs_stops_issuing_at_the_confirm_bound() {
    /// Lets the store answer again however the test ends (a keeper held in a renewal would
    /// hold the drop up for ever).
    struct Answer(Arc<common::Flaky>);
    impl Drop for Answer {
        fn drop(&mut self) {
            self.0.hold_renew.store(false, Ordering::SeqCst);
        }
    }
    let dir = common::TempDir::new("renew-hangs");
    let store = common::Flaky::new(dir.path(), None);
    let layout = Layout::twitter();
    let leased = Generator::builder(layout.clone())
        .build_leased(store.clone(), NodeRequest::Any)
        .unwrap();
    let answer = Answer(Arc::clone(&store));
    leased.next_id().unwrap();
    // A round has just started its check when the count moves; the next one hangs.
    let renewals = leased.stats().lease_renewals;
    let give_up = std::time::Instant::now() + Duration::from_secs(60);
    while leased.stats().lease_renewals == renewals {
        assert!(std::time::Instant::now() < give_up, "no round");
        std::thread::sleep(Duration::from_millis(1));
    }
    store.hold_renew.store(true, Ordering::SeqCst);
    // The bound counts from the start of the last check that found the claim standing, which
    // began before the renewal that hangs: a loaded machine may let one more round through
    // between the count moving and the hold, so the bound is taken from the hang itself.
    let mut issued = Vec::new();
    // Issue until the clock is past the bound and a call is refused there.
    let (refused, bound) = loop {
        let held = *store.held_since.lock().unwrap();
        let now = common::system_ms();
        match leased.try_next_id() {
            Ok(id) => issued.push(id.parts(&layout).unwrap().unix_ms()),
            Err(e) => match held {
                Some(since) if now > since + 205 => break (e, since + 200),
                _ => {}
            },
        }
        assert!(std::time::Instant::now() < give_up, "never refused");
    };
    let past: Vec<u64> = issued.iter().copied().filter(|&ms| ms > bound).collect();
    assert!(
        past.is_empty(),
        "{} of {} IDs past the confirm bound {bound}: first {:?}",
        past.len(),
        issued.len(),
        past.first()
    );
    assert!(
        matches!(
            refused,
            Error::WouldBlock {
                blocked_on: monoflake::BlockedOn::LeaseKeeper,
                ..
            }
        ),
        "{refused:?}"
    );
    drop(answer);
    while leased.try_next_id().is_err() {
        assert!(std::time::Instant::now() < give_up, "never resumed");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Issue 60, on the file store (no clock of its own): a wall clock stepped 2 s, a minute and
/// an hour ahead under load is followed, as README promises — the keeper extends the
/// reservation and callers wait one store write, never a refusal — and stays followed after
/// the wall clock is set back (the clock slews). Its successor, trusting the reservation an
/// hour ahead, issues above every ID.
#[test]
fn on_the_file_store_a_wall_clock_stepped_forward_is_followed() {
    let dir = common::TempDir::new("ride");
    let store = Arc::new(FileStore::open(dir.path()).unwrap());
    let layout = Layout::twitter();
    let ride = common::ride::ride(store, &layout, 3, Duration::from_secs(3), true);
    for (k, p) in ride.phases.iter().enumerate() {
        assert!(p.refusals.is_empty(), "phase {k}: {p:?}");
        assert!(p.issued > 0, "phase {k}: {p:?}");
        assert_eq!(p.held_back_ms, 0, "phase {k}: {p:?}");
    }
    // Followed: the hour ahead is in the IDs, and stays there after the wall clock is back.
    assert!(ride.phases[3].ahead_ms >= 3_599_000, "{:?}", ride.phases[3]);
    assert!(ride.phases[4].ahead_ms >= 3_599_000, "{:?}", ride.phases[4]);
    eprintln!(
        "longest gaps, ms: {:?}",
        ride.phases
            .iter()
            .map(|p| p.longest_gap_ms)
            .collect::<Vec<_>>()
    );
}
