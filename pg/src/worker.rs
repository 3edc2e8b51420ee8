//! The claim worker: a background worker, registered when `monoflake.node` is not set, that
//! claims a node from the claim database, holds it, and publishes it to the backends.
//!
//! It reuses the library whole: a [`PgStore`] (the rows, fencing and reservations
//! `monoflake gen --backend postgres` uses) and [`GeneratorBuilder::build_state_lease`]
//! (the claim, the hand-over's waits, the keeper's renewals and extensions, the write-back of
//! a lost lease, the release), for the state word in shared memory ([`Word`]). Its own part
//! is a loop, every 10 ms on its latch:
//!
//! * copy the keeper's fence into shared memory (`claimed.rs`), and pass a backend's request
//!   for an extension on to the keeper;
//! * publish why nothing can be issued, when the keeper says so ([`StateLease::check`]);
//! * a lost lease: the keeper has already sealed the state (exactly: a swap) and written back
//!   the end of the last tick issued; the worker says so to the backends, lets the lease go
//!   and claims again after a second;
//! * SIGTERM (the server stops): seal, write the final reservation, release the node, exit 0.
//!
//! The keeper (a thread the library starts) and the store's runtime never call into
//! PostgreSQL: they touch only atomics in shared memory and their own sockets. They start with
//! every signal blocked, so that PostgreSQL's handlers run on the worker's own thread only.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use monoflake::{
    Ceiling, Error, Generator, NodeRequest, OutsideState, PgOptions, PgStore, StateLease,
    StateStep, TimeSource,
};
use pgrx::bgworkers::{
    BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime, SignalWakeFlags,
};
use pgrx::prelude::*;

use crate::claimed::{CLAIM_DATABASE_IS_THIS, HELD, LOST, SEALED, STOPPED};
use crate::clock::Line;
use crate::shared::{SHARED, Shared};
use crate::{claimdb, identity, settings};

/// How often the worker copies the fence and looks at the lease.
const POLL: Duration = Duration::from_millis(10);
/// How long the worker waits before it claims again after a failure or a loss.
const RETRY: Duration = Duration::from_secs(1);

/// Registers the worker (in `_PG_init`, while the postmaster loads the library).
pub(crate) fn register() {
    BackgroundWorkerBuilder::new("monoflake claim worker")
        .set_type("monoflake claim")
        .set_library("monoflake")
        .set_function("monoflake_claim_main")
        .enable_shmem_access(None)
        // After recovery: a standby issues nothing, and the default claim database is this
        // server, which must accept connections.
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        // Restarted a second after it exits with an error (a crash restarts the server's
        // shared memory, and the worker with it).
        .set_restart_time(Some(RETRY))
        .load();
}

/// The server's line, as the library's clock: the lease's deadlines are ticks of the clock
/// every backend reads.
#[derive(Clone, Copy)]
struct LineClock(&'static Line);

impl TimeSource for LineClock {
    fn now_ms(&self) -> u64 {
        self.0.now_ns() / 1_000_000
    }
    fn now_ns(&self) -> u64 {
        self.0.now_ns()
    }
    fn advance_to_ms(&self, unix_ms: u64) -> bool {
        // A trusted reservation ahead of the clock (monoflake.trust_reservation): the line
        // is raised for every backend, never lowered.
        self.0.raise_to(unix_ms.saturating_mul(1_000_000));
        true
    }
    fn set_ceiling(&self, ceiling: Option<Ceiling>) -> bool {
        // What the claim database's clock confirms: the line follows the wall clock forward
        // no further (a line never slews, so the slack plays no part). Kept when a lease
        // ends (`None`): the line is the server's for its life and never goes back, so one
        // raised to a wall clock past the real time between two claims would have every
        // later claim refused until the real time caught up; the last ceiling, moving on
        // with the monotonic clock, still bounds the claim database's clock.
        if let Some(c) = ceiling {
            self.0.set_ceiling(Some(c.unix_ns));
        }
        true
    }
}

/// The state word in shared memory, as the library's keeper sees it.
struct Word {
    shared: &'static Shared,
    sequence_bits: u32,
}

impl OutsideState for Word {
    fn start(&self, step: &StateStep) {
        let claimed = &self.shared.claimed;
        // Ordering: the fence is shut and the node stored before the generation's Release
        // raise, and the state stored (Release) after it: a backend that reads the new state
        // or generation (Acquire) reads this node and no fence of an earlier claim.
        claimed.limit.store(0, Ordering::Relaxed);
        claimed.deadline.store(0, Ordering::Relaxed);
        claimed.node.store(step.node(), Ordering::Relaxed);
        claimed
            .sealed_tick
            .store(step.tick_of(step.start()), Ordering::Relaxed);
        claimed.generation.fetch_add(1, Ordering::Release);
        self.shared.state.store(step.start(), Ordering::Release);
    }

    fn last_tick(&self) -> u64 {
        // Ordering: Relaxed; the state publishes no other memory.
        match self.shared.state.load(Ordering::Relaxed) {
            SEALED => self.shared.claimed.sealed_tick.load(Ordering::Relaxed),
            state => state >> self.sequence_bits,
        }
    }

    fn seal(&self) -> u64 {
        let claimed = &self.shared.claimed;
        // Ordering: Relaxed; the swap's place in the state's modification order is what
        // matters: every compare-exchange after it fails, and it returns the last value one
        // committed.
        let tick = match self.shared.state.swap(SEALED, Ordering::Relaxed) {
            SEALED => claimed.sealed_tick.load(Ordering::Relaxed),
            state => state >> self.sequence_bits,
        };
        claimed.sealed_tick.store(tick, Ordering::Relaxed);
        claimed.limit.store(0, Ordering::Relaxed);
        claimed.deadline.store(0, Ordering::Relaxed);
        tick
    }
}

/// The worker's entry point (`bgw_function_name`).
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn monoflake_claim_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    let shared = SHARED.get();
    let claimed = &shared.claimed;
    let layout = match settings::layout() {
        Ok(layout) => layout,
        Err(message) => {
            // The backends already refuse (the start failed): wait for the stop.
            pgrx::warning!("monoflake claim worker: {message}");
            while BackgroundWorker::wait_latch(None) {}
            return;
        }
    };
    let Some(url) = settings::claim_url() else {
        // Not registered without one (`_PG_init`): the backends refuse, saying why.
        while BackgroundWorker::wait_latch(None) {}
        return;
    };
    let word: Arc<dyn OutsideState> = Arc::new(Word {
        shared,
        sequence_bits: layout.sequence_bits(),
    });
    let mut failures = 0u64;
    let mut said_this_machine = false;
    loop {
        let built = match claimdb::look(&url) {
            Err(e) => Err(format!(
                "the claim database cannot be asked for its system identifier: {e}"
            )),
            Ok(seen) if seen.system_identifier == identity::system_identifier() => {
                let text = format!(
                    "the claim database (monoflake.claim_url) has this server's system \
                     identifier, {}: it is this server, a copy of it, or the server this one \
                     was copied from",
                    seen.system_identifier
                );
                pgrx::warning!("monoflake claim worker: {text}; no node is claimed");
                claimed.set_message(&text);
                // Ordering: Release, after the message: a backend that reads this status
                // (Acquire) reads the message.
                claimed
                    .status
                    .store(CLAIM_DATABASE_IS_THIS, Ordering::Release);
                // The setting changes only with a restart.
                while BackgroundWorker::wait_latch(None) {}
                return;
            }
            Ok(seen) => {
                if seen.on_this_machine && !said_this_machine {
                    pgrx::warning!(
                        "monoflake claim worker: the claim database is on this machine: a \
                         copy of the whole machine (a VM snapshot, a disk image) would take it \
                         along with this server, and the copy would issue this server's IDs; \
                         keep it on another machine unless this one is never copied"
                    );
                    said_this_machine = true;
                }
                with_signals_blocked(|| {
                    let store = PgStore::connect_with(&url, &PgOptions::new())?;
                    Generator::builder(layout.clone())
                        .clock(LineClock(&shared.line))
                        .future_reservation_tolerance(
                            Duration::from_nanos(settings::tolerance_ns()),
                        )
                        .trust_future_reservation(settings::TRUST_RESERVATION.get())
                        .build_state_lease(Arc::new(store), NodeRequest::Any, Arc::clone(&word))
                })
                .map_err(|e| format!("the claim from the claim database failed: {e}"))
            }
        };
        let lease = match built {
            Ok(lease) => lease,
            Err(text) => {
                if failures.is_multiple_of(60) {
                    pgrx::warning!("monoflake claim worker: {text}");
                }
                failures += 1;
                claimed.set_message(&text);
                if !wait(RETRY) {
                    return;
                }
                continue;
            }
        };
        failures = 0;
        pgrx::log!(
            "monoflake claim worker: node {} claimed ({})",
            lease.node(),
            layout.name()
        );
        match hold(shared, &lease) {
            Held::Stop => {
                claimed.status.store(STOPPED, Ordering::Relaxed);
                let node = lease.node();
                match lease.release() {
                    Ok(()) => pgrx::log!("monoflake claim worker: node {node} released"),
                    Err(e) => pgrx::warning!("monoflake claim worker: node {node}: {e}"),
                }
                return;
            }
            Held::Lost(reason) => {
                pgrx::warning!(
                    "monoflake claim worker: the lease on node {} was lost: {reason}; \
                     claiming again",
                    lease.node()
                );
                // Already sealed and written back by the keeper: letting go ends its thread.
                drop(lease);
                if !wait(RETRY) {
                    return;
                }
            }
        }
    }
}

/// How holding ended.
enum Held {
    Stop,
    Lost(String),
}

/// Publishes the lease's fence every [`POLL`] until the server stops or the lease is lost.
fn hold(shared: &'static Shared, lease: &StateLease<LineClock>) -> Held {
    let claimed = &shared.claimed;
    let mut said = String::new();
    loop {
        let (limit, deadline) = lease.fence();
        // Ordering: Relaxed; see `Claimed::refuses`.
        claimed.limit.store(limit, Ordering::Relaxed);
        claimed.deadline.store(deadline, Ordering::Relaxed);
        match lease.check() {
            Ok(()) => {
                if claimed.status.load(Ordering::Relaxed) != HELD {
                    claimed.set_message("");
                    claimed.status.store(HELD, Ordering::Relaxed);
                }
                said.clear();
            }
            Err(Error::LeaseLost { reason, .. }) => {
                claimed.set_message(&reason);
                claimed.status.store(LOST, Ordering::Relaxed);
                return Held::Lost(reason);
            }
            // Sealed by the keeper, which is writing back what was issued: the reason comes
            // with the next check; the backends meanwhile say the lease is lost.
            Err(_) if shared.state.load(Ordering::Relaxed) == SEALED => {}
            Err(e) => {
                let text = e.to_string();
                if text != said {
                    claimed.set_message(&text);
                    said = text;
                }
            }
        }
        if claimed.wake.swap(false, Ordering::Relaxed) {
            lease.wake();
        }
        if !wait(POLL) {
            return Held::Stop;
        }
    }
}

/// Waits on the worker's latch up to `timeout`; false when the server stops (SIGTERM). A
/// SIGHUP reloads the configuration first: `monoflake.tolerance_ms` and
/// `monoflake.trust_reservation` apply to the next claim as they do to the backends.
fn wait(timeout: Duration) -> bool {
    let go_on = BackgroundWorker::wait_latch(Some(timeout));
    if go_on && BackgroundWorker::sighup_received() {
        // SAFETY: on the worker's main thread, between calls into PostgreSQL, as
        // PostgreSQL's own background workers reload (the keeper thread never reads a
        // setting: the clock's test offset is an atomic, `clock.rs`).
        unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
    }
    go_on
}

/// Runs `f` with every signal blocked on this thread, so that the threads it starts (the
/// keeper, the store's runtime) inherit a full mask and never run PostgreSQL's handlers;
/// a signal that comes meanwhile is delivered when the mask is restored.
fn with_signals_blocked<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: sigfillset and pthread_sigmask on valid, initialised sigset_t values owned by
    // this frame; the old mask is restored before returning (f does not unwind across
    // PostgreSQL: it returns a Result).
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
        let out = f();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        out
    }
}
