//! A forked child inherits the generator's state and node; it must refuse to issue.
//!
//! `fork()` has no safe wrapper, so this one test file allows `unsafe`; the library has none.
#![allow(unsafe_code)]

use std::sync::Arc;

use monoflake::{Error, FileStore, Generator, Layout, NodeRequest, NodeStore};

/// Forks with libc's `fork` (which runs the `pthread_atfork` handlers); the child runs
/// `child` and exits with its code (without unwinding or running destructors); the parent gets
/// the child's exit code.
fn in_forked_child(child: impl FnOnce() -> i32) -> i32 {
    // SAFETY: the child only runs `child` (atomic loads in the generator) and `_exit`s.
    in_child(|| unsafe { libc::fork() }, child)
}

/// Forks with the raw system call, which skips `pthread_atfork` (as `syscall(SYS_fork)` and
/// glibc's `_Fork` do); otherwise as [`in_forked_child`].
fn in_raw_forked_child(child: impl FnOnce() -> i32) -> i32 {
    // SAFETY: as in `in_forked_child`; the raw fork runs no atfork handlers.
    in_child(
        || unsafe { libc::syscall(libc::SYS_fork) } as libc::pid_t,
        child,
    )
}

// glibc's `_Fork` (2.34 and later): a fork that runs no `pthread_atfork` handlers.
unsafe extern "C" {
    fn _Fork() -> libc::pid_t;
}

/// The ways a process can be forked: libc's `fork` (atfork handlers run), the raw system call,
/// glibc's `_Fork`, and `clone` without `CLONE_VM` (none of the last three run them).
const FORKS: [&str; 4] = ["fork", "SYS_fork", "_Fork", "clone"];

/// Forks the way `how` names (one of [`FORKS`]); otherwise as [`in_forked_child`].
fn in_child_forked_by(how: &str, child: impl FnOnce() -> i32) -> i32 {
    let fork = || -> libc::pid_t {
        // SAFETY: each makes a child that only runs `child` (atomic loads and compare-exchanges
        // in the generator, no allocation) and `_exit`s. `clone` with only SIGCHLD and no new
        // stack is a fork: the child runs on its copy of the parent's stack.
        unsafe {
            match how {
                "fork" => libc::fork(),
                "SYS_fork" => libc::syscall(libc::SYS_fork) as libc::pid_t,
                "_Fork" => _Fork(),
                "clone" => libc::syscall(
                    libc::SYS_clone,
                    libc::c_long::from(libc::SIGCHLD),
                    0 as libc::c_long,
                    0 as libc::c_long,
                    0 as libc::c_long,
                    0 as libc::c_long,
                ) as libc::pid_t,
                other => panic!("no fork called {other}"),
            }
        }
    };
    in_child(fork, child)
}

fn in_child(fork: impl FnOnce() -> libc::pid_t, child: impl FnOnce() -> i32) -> i32 {
    let pid = fork();
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = child();
        // SAFETY: leaves the child at once, running no destructors or atexit handlers.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status));
    libc::WEXITSTATUS(status)
}

#[test]
fn a_forked_child_refuses_to_issue_under_the_parents_node() {
    let plain = Generator::new(Layout::twitter(), 5).unwrap();
    let dir = std::env::temp_dir().join(format!("monoflake-test-fork-{}", std::process::id()));
    let store = Arc::new(FileStore::open(&dir).unwrap());
    let leased = Generator::builder(Layout::twitter())
        .build_leased(store, NodeRequest::Any)
        .unwrap();
    let before = (plain.next_id().unwrap(), leased.next_id().unwrap());

    let code = in_forked_child(|| {
        let plain_refused = matches!(plain.try_next_id(), Err(Error::Forked { node: 5, .. }));
        let leased_refused = matches!(leased.try_next_id(), Err(Error::Forked { node: 0, .. }));
        let batch_refused = matches!(plain.try_next_ids(8), Err(Error::Forked { .. }));
        if plain_refused && leased_refused && batch_refused {
            0
        } else {
            1
        }
    });
    assert_eq!(code, 0, "the child issued an ID under the parent's node");

    // The parent goes on as before.
    assert!(plain.next_id().unwrap() > before.0);
    assert!(leased.next_id().unwrap() > before.1);
    drop(leased);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every kind of fork is refused on the common path, in the very tick the parent was issuing
/// in: the child of a frozen clock, with room left in the tick, gets `Forked` from every
/// single-ID call (a plain and a leased generator), and issues nothing the parent could also
/// issue. (Before `MADV_WIPEONFORK`, a raw fork's child issued the parent's next IDs here.)
#[test]
fn every_kind_of_fork_is_refused_on_the_common_path_in_the_parents_tick() {
    let clock = Arc::new(monoflake::ManualClock::new(1_700_000_000_000));
    let plain = Generator::builder(Layout::twitter())
        .node(7)
        .clock(Arc::clone(&clock))
        .build()
        .unwrap();
    let dir =
        std::env::temp_dir().join(format!("monoflake-test-fork-kinds-{}", std::process::id()));
    let store = Arc::new(FileStore::open(&dir).unwrap());
    let leased = Generator::builder(Layout::twitter())
        .build_leased(store, NodeRequest::Any)
        .unwrap();
    for how in FORKS {
        let before = (plain.next_id().unwrap(), leased.next_id().unwrap());
        let code = in_child_forked_by(how, || {
            let mut issued = 0;
            for _ in 0..1000 {
                match (plain.try_next_id(), leased.try_next_id()) {
                    (Err(Error::Forked { node: 7, .. }), Err(Error::Forked { .. })) => {}
                    (a, b) => issued += i32::from(a.is_ok()) + i32::from(b.is_ok()) + 100,
                }
            }
            issued.min(250)
        });
        assert_eq!(
            code, 0,
            "a child made by {how} issued or was not refused as forked"
        );
        // The parent's tick still has room, and the parent goes on in it.
        let after = (plain.next_id().unwrap(), leased.next_id().unwrap());
        assert_eq!(after.0.as_u64(), before.0.as_u64() + 1, "{how}");
        assert!(after.1 > before.1);
    }
    drop(leased);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A per-thread generator, by its thread-local way in and by a handle, is refused on the
/// common path by every kind of fork, in the very tick the parent was issuing in (the child's
/// copy of the thread's numbers would go on where the parent's do), and in the next tick; the
/// parent goes on.
#[test]
fn every_kind_of_fork_is_refused_on_a_per_thread_generators_common_path() {
    let clock = Arc::new(monoflake::ManualClock::new(1_700_000_000_000));
    let g = Generator::builder(Layout::twitter())
        .node(8)
        .clock(Arc::clone(&clock))
        .build_per_thread(4)
        .unwrap();
    let local = g.local().unwrap();
    for how in FORKS {
        let before = (g.next_id().unwrap(), local.next_id().unwrap());
        let code = in_child_forked_by(how, || {
            let mut issued = 0;
            for _ in 0..1000 {
                match (g.try_next_id(), local.try_next_id()) {
                    (Err(Error::Forked { node: 8, .. }), Err(Error::Forked { node: 8, .. })) => {}
                    (a, b) => issued += i32::from(a.is_ok()) + i32::from(b.is_ok()) + 100,
                }
            }
            if !matches!(local.try_next_ids(3), Err(Error::Forked { .. })) {
                issued += 1;
            }
            // And in a later tick, where the general step publishes the tick first.
            clock.advance_ms(1);
            if !matches!(
                (g.try_next_id(), local.try_next_id()),
                (Err(Error::Forked { .. }), Err(Error::Forked { .. }))
            ) {
                issued += 10;
            }
            issued.min(250)
        });
        assert_eq!(
            code, 0,
            "a child made by {how} issued or was not refused as forked"
        );
        let after = (g.next_id().unwrap(), local.next_id().unwrap());
        assert_eq!(after.0.as_u64(), before.0.as_u64() + 1, "{how}");
        assert_eq!(after.1.as_u64(), before.1.as_u64() + 1, "{how}");
    }
}

/// A handle's iterator, its numbers copied into registers in the parent, is refused on its
/// common path in a child made by every kind of fork — in the very tick the parent is issuing
/// in — and the parent's iterator goes on right after its last ID.
#[test]
fn every_kind_of_fork_is_refused_on_a_handle_iterators_common_path() {
    let clock = Arc::new(monoflake::ManualClock::new(1_700_000_000_000));
    let g = Generator::builder(Layout::twitter())
        .node(8)
        .clock(Arc::clone(&clock))
        .build_per_thread(4)
        .unwrap();
    let mut local = g.local().unwrap();
    let mut ids = local.ids();
    for how in FORKS {
        let before = ids.next().unwrap().unwrap();
        let code = in_child_forked_by(how, || {
            let mut issued = 0;
            for _ in 0..1000 {
                match ids.next() {
                    Some(Err(Error::Forked { node: 8, .. })) => {}
                    Some(answer) => issued += i32::from(answer.is_ok()) + 100,
                    None => issued += 1000,
                }
            }
            issued.min(250)
        });
        assert_eq!(
            code, 0,
            "a child made by {how} issued from an iterator or was not refused as forked"
        );
        let after = ids.next().unwrap().unwrap();
        assert_eq!(after.as_u64(), before.as_u64() + 1, "{how}");
    }
}

#[test]
fn a_raw_fork_is_caught_at_the_next_tick_and_at_every_batch() {
    let clock = Arc::new(monoflake::ManualClock::new(1_700_000_000_000));
    let g = Generator::builder(Layout::twitter())
        .node(6)
        .clock(Arc::clone(&clock))
        .build()
        .unwrap();
    let parent_last = g.next_id().unwrap();
    let code = in_raw_forked_child(|| {
        // A batch always asks the pid.
        if !matches!(g.try_next_ids(2), Err(Error::Forked { node: 6, .. })) {
            return 1;
        }
        // The next tick asks the pid too.
        clock.advance_ms(1);
        if !matches!(g.try_next_id(), Err(Error::Forked { node: 6, .. })) {
            return 2;
        }
        0
    });
    assert_eq!(code, 0, "the raw-forked child issued (step {code})");
    assert!(g.next_id().unwrap() > parent_last);
}

#[test]
fn dropping_inherited_handles_in_a_child_neither_panics_nor_releases() {
    let dir = std::env::temp_dir().join(format!("monoflake-test-fork-drop-{}", std::process::id()));
    let store = Arc::new(FileStore::open(&dir).unwrap());
    let leased = Generator::builder(Layout::twitter())
        .build_leased(store.clone(), NodeRequest::Exact(3))
        .unwrap();
    let (clock, ticker) =
        monoflake::CoarseClock::start(monoflake::DEFAULT_TICKER_INTERVAL).unwrap();
    let before = leased.next_id().unwrap();
    for raw in [false, true] {
        let run = || {
            // A batch asks the pid, so a raw fork is caught whatever the tick.
            let refused = matches!(leased.try_next_ids(2), Err(Error::Forked { .. }));
            let released = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                // The child's copy of the parent's memory holds these handles; it takes
                // ownership of its copies and drops them. That must not join threads the
                // child does not have, write a reservation or give the parent's node up.
                // SAFETY: the parent's values are not used again in this child, which exits
                // right after; the copies are dropped once.
                let leased = unsafe { std::ptr::read(&leased) };
                // SAFETY: as above.
                let ticker = unsafe { std::ptr::read(&ticker) };
                drop(ticker);
                leased.release()
            }));
            match released {
                Ok(Ok(())) if refused => 0,
                Ok(_) => 3,
                Err(_) => 4,
            }
        };
        let code = if raw {
            in_raw_forked_child(run)
        } else {
            in_forked_child(run)
        };
        assert_eq!(code, 0, "child (raw fork: {raw}) failed with {code}");
    }
    // The parent still holds node 3: the children released nothing.
    assert!(matches!(
        store.claim(&Layout::twitter(), NodeRequest::Exact(3)),
        Err(Error::NodeHeld { node: 3, .. })
    ));
    assert!(leased.next_id().unwrap() > before);
    let _ = monoflake::TimeSource::now_ms(&clock);
    drop(ticker);
    leased.release().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The fork check after the common case's compare-exchange moves the child's copy of the
/// state by one; the general step then starts from there. Where that value is the last of its
/// tick and the lead allows no borrow, the step is a refusal at the lead limit — which must
/// still say `Forked`, not `WouldBlock` (the child would otherwise wait and retry, and the
/// error would not say why it can never issue).
#[test]
fn a_forked_child_is_refused_as_forked_where_its_tick_fills() {
    let clock = Arc::new(monoflake::ManualClock::new(1_700_000_000_000));
    // One sequence bit, no lead: the second value of a tick is its last.
    let layout = Layout::builder()
        .epoch_ms(Layout::twitter().epoch_ms())
        .sequence_bits(1)
        .node_field("n", 2)
        .build()
        .unwrap();
    let g = Generator::builder(layout)
        .node(2)
        .clock(Arc::clone(&clock))
        .max_lead(std::time::Duration::ZERO)
        .build()
        .unwrap();
    // Clock at a new tick, state at its first value: the common case has room for one more.
    clock.advance_ms(1);
    let parent_last = g.next_id().unwrap();
    let code = in_forked_child(|| {
        // The clock stays in the tick: every call in the child must say why it is refused.
        for call in 0..4 {
            match g.try_next_id() {
                Err(Error::Forked { node: 2, .. }) => {}
                Err(Error::WouldBlock { .. }) => return 10 + call,
                Err(_) => return 20 + call,
                Ok(_) => return 30 + call,
            }
        }
        0
    });
    assert_eq!(code, 0, "the child was not refused as forked (code {code})");
    assert!(g.try_next_id().unwrap() > parent_last);
}

/// A forked child whose parent was comparing its `LockedClock` with the wall clock when it
/// forked (a thread inside `reanchor`, the clock's writer lock held during the wall-clock
/// read): the child inherits the lock held by a thread it does not have. With a `Mutex`,
/// `reanchor` (and `advance_to`, which a leased build calls with `trust_future_reservation`)
/// waited for it for ever ("never blocks forever", DESIGN.md); the lock now names its
/// holder's process, and the child takes it over.
#[test]
fn a_forked_child_of_a_parent_comparing_its_locked_clock_does_not_wait_for_ever() {
    use std::sync::Barrier;
    use std::time::Duration;

    let gate = Arc::new(Barrier::new(2));
    let holding = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (g, h) = (Arc::clone(&gate), Arc::clone(&holding));
    let clock = monoflake::LockedClock::with_wall_clock(
        move || {
            if h.swap(false, std::sync::atomic::Ordering::Relaxed) {
                g.wait(); // inside the comparison, the writer lock held
                g.wait(); // until the parent has forked
            }
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        },
        Duration::from_secs(1),
        Duration::from_millis(1),
    );
    holding.store(true, std::sync::atomic::Ordering::Relaxed);
    let comparing = {
        let clock = clock.clone();
        std::thread::spawn(move || clock.reanchor())
    };
    gate.wait();
    // SAFETY: the child only reads the clock and tries to compare, under an alarm, then
    // `_exit`s.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: async-signal-safe; kills the child if it is still waiting in 10 s.
        unsafe { libc::alarm(10) };
        let before = clock.now_ns();
        clock.reanchor();
        let after = clock.advance_to(before);
        let code = if after >= before { 0 } else { 1 };
        // SAFETY: leaves the child at once.
        unsafe { libc::_exit(code) };
    }
    gate.wait();
    comparing.join().unwrap();
    let mut status = 0;
    // SAFETY: waits for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status),
        "the child was killed by signal {} (SIGALRM: still waiting for the lock after 10 s)",
        libc::WTERMSIG(status)
    );
    assert_eq!(libc::WEXITSTATUS(status), 0);
}
