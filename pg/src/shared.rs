//! One generator per server: the state word, the clock's line and the reservation, in shared
//! memory, advanced by every backend.
//!
//! The postmaster sets it up when it loads the library (`shared_preload_libraries`): it reads
//! the data directory's reservation `R`, starts the state as the last value of tick `R` and
//! the line at the wall clock, keeps the time of tick `R + 1` as the floor, and writes the
//! first reservation ahead of use before any backend exists. A call that finds the line below
//! the floor waits for it when it is within `monoflake.tolerance_ms` (as the library's build
//! waits out a reservation within its tolerance), raises the line to it when it is further
//! ahead and `monoflake.trust_reservation` is on, and otherwise refuses (SQLSTATE 55000) until
//! the clock catches up: never an ID below the reservation, never silently one stamped far
//! ahead of the clock. From then on each backend issues by load → [`StateStep::next`] (the
//! library's pure step, the one every generator flavour uses) → compare-exchange, and before
//! it commits a value of a tick beyond what is on disk, the reservation is extended first
//! (one backend writes; the rest wait for it, bounded). Ahead of need — once issuing reaches
//! the second half of the window — the backend that sees it extends it without anyone waiting.
//!
//! A backend killed mid-call leaves the state consistent: the state moves only by one
//! compare-exchange of a value the reservation already covers, and the reservation writer
//! holds nothing a signal can leave behind (a backend that dies uncleanly makes the postmaster
//! reinitialise shared memory, and with it this state, from the file).

use std::cell::Cell;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use monoflake::{DEFAULT_RESERVATION_WINDOW, Generator, Layout, ManualClock, StateStep};
use pgrx::prelude::*;
use pgrx::{PGRXSharedMemory, PgAtomic, PgSqlErrorCode};

use crate::claimed::{Claimed, NO_CLAIM_DATABASE, SEALED};
use crate::clock::{Line, wall_ns};
use crate::failure::Failure;
use crate::identity::{self, Identity, IdentityCell};
use crate::{reservation, settings};

/// How long a call waits for another backend's reservation write before it fails.
const RESERVATION_WAIT: Duration = Duration::from_secs(5);
/// The library's lead, in ns: how far ahead of the line a tick may be borrowed.
const LEAD_NS: u64 = monoflake::DEFAULT_MAX_LEAD.as_nanos() as u64;
/// The room for the startup failure's message.
const MESSAGE_BYTES: usize = 512;

/// The server's generator, in shared memory.
#[repr(C)]
pub(crate) struct Shared {
    /// The state: `tick << sequence_bits | sequence`, the last value issued; [`SEALED`]
    /// while a claimed node is not held.
    pub(crate) state: AtomicU64,
    /// The locked clock's line.
    pub(crate) line: Line,
    /// Whether the node is claimed by the worker (`monoflake.node` unset) rather than
    /// configured; written once, by the postmaster, before any backend exists.
    pub(crate) claimed_mode: bool,
    /// The claimed node, its fence and its news (`claimed.rs`); unused when configured.
    pub(crate) claimed: Claimed,
    /// The highest tick the reservation file on disk allows.
    reserved_tick: AtomicU64,
    /// The identity line the reservation file carries (a configured node's history,
    /// `identity.rs`), and whether it was checked against this server since the start.
    identity: IdentityCell,
    /// The Unix ns of the tick after the reservation found at start (0: none): no ID is
    /// issued before the line reaches it.
    floor_ns: AtomicU64,
    /// 1 while a backend writes the reservation.
    writer: AtomicU32,
    /// Whether the set-up succeeded; if not, `message` says why.
    ready: AtomicBool,
    message: [u8; MESSAGE_BYTES],
}

// SAFETY: plain atomics, a bool and bytes, no pointers: the same in every process mapping it.
unsafe impl PGRXSharedMemory for Shared {}

// SAFETY: `PgAtomic::new` is unsafe because the name must be unique among the server's
// shared-memory segments and the value initialised once, by the postmaster, before any
// backend reads it: the name is this extension's own, and `pg_shmem_init!` (in `preload`,
// called only while the postmaster loads preloaded libraries) is its one initialisation.
pub(crate) static SHARED: PgAtomic<Shared> = unsafe { PgAtomic::new(c"monoflake_generator") };

/// Whether the postmaster loaded the library (and so set up `SHARED`); inherited by every
/// backend it forks.
static PRELOADED: AtomicBool = AtomicBool::new(false);

/// What a backend needs besides the shared state, from the settings (fixed for the server's
/// life): worked out once per process.
struct Engine {
    /// The step of the configured node (`monoflake.node`); `None` when the node is claimed
    /// (each node's step is then built when first met: `claimed_step`).
    step: Option<StateStep>,
    layout: Layout,
    state_name: String,
    window_ticks: u64,
}

static ENGINE: OnceLock<Result<Engine, Failure>> = OnceLock::new();

/// Asks for the shared memory and sets it up when the postmaster creates it (also after a
/// crash restart: then from the reservation file again).
pub(crate) fn preload() {
    PRELOADED.store(true, Ordering::Relaxed);
    pgrx::pg_shmem_init!(SHARED = startup());
}

/// The layout in force (decode and layout() need no node).
pub(crate) fn layout() -> Result<Layout, Failure> {
    if !PRELOADED.load(Ordering::Relaxed) {
        // Without the preload the setting is not read: the default would be a guess.
        return Err(Failure::not_preloaded());
    }
    settings::layout().map_err(|m| Failure::new(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, m))
}

fn engine() -> Result<&'static Engine, Failure> {
    ENGINE
        .get_or_init(|| {
            let layout = layout()?;
            let step = match settings::node() {
                Some(node) => Some(
                    builder(layout.clone())
                        .node(node)
                        .build_step()
                        .map_err(|e| Failure::from_error(&e))?,
                ),
                None => None,
            };
            Ok(Engine {
                step,
                layout: layout.clone(),
                state_name: layout.state_name().into_owned(),
                window_ticks: window_ticks(&layout),
            })
        })
        .as_ref()
        .map_err(Clone::clone)
}

thread_local! {
    /// This backend's step for the claimed node last met (a backend is one thread).
    static CLAIMED_STEP: Cell<Option<(u64, &'static StateStep)>> = const { Cell::new(None) };
}

/// The step for the claimed node `node`: built when the node is first met in this backend
/// and kept for its life (one small allocation per node met, of which a server holds one at
/// a time: a node changes only when a lease is lost and another node claimed).
fn claimed_step(engine: &Engine, node: u64) -> Result<&'static StateStep, Failure> {
    if let Some((held, step)) = CLAIMED_STEP.get()
        && held == node
    {
        return Ok(step);
    }
    let step = builder(engine.layout.clone())
        .node(node)
        .build_step()
        .map_err(|e| Failure::from_error(&e))?;
    let step: &'static StateStep = Box::leak(Box::new(step));
    CLAIMED_STEP.set(Some((node, step)));
    Ok(step)
}

/// A builder that reads no clock of its own: the step is given the line's time.
fn builder(layout: Layout) -> monoflake::GeneratorBuilder<ManualClock> {
    Generator::builder(layout).clock(ManualClock::new(wall_ns() / 1_000_000))
}

/// The reservation window in ticks (at least one).
fn window_ticks(layout: &Layout) -> u64 {
    (DEFAULT_RESERVATION_WINDOW.as_millis() as u64 / layout.tick_ms()).max(1)
}

/// A set-up that failed: said once in the server's log, and kept (cut at `MESSAGE_BYTES`) for
/// every call to report.
fn start_failed(shared: &mut Shared, message: &str) {
    pgrx::warning!("monoflake: cannot start the generator: {message}");
    let bytes = message.as_bytes();
    let n = bytes.len().min(MESSAGE_BYTES);
    shared.message[..n].copy_from_slice(&bytes[..n]);
}

/// The set-up, in the postmaster: never fails the server's start; a failure is kept for
/// every call to report.
fn startup() -> Shared {
    let mut shared = Shared {
        state: AtomicU64::new(0),
        line: Line::new(0),
        claimed_mode: false,
        claimed: Claimed::new(),
        reserved_tick: AtomicU64::new(0),
        identity: IdentityCell::new(""),
        floor_ns: AtomicU64::new(0),
        writer: AtomicU32::new(0),
        ready: AtomicBool::new(false),
        message: [0; MESSAGE_BYTES],
    };
    if settings::node().is_none() {
        // The worker claims the node: no reservation file (the store keeps the
        // reservation), nothing issued until it publishes a claim. Without a claim database
        // there is no worker: every call says why (`Claimed::refusal`).
        match settings::layout() {
            Ok(_) => {
                shared.state = AtomicU64::new(SEALED);
                shared.reserved_tick = AtomicU64::new(u64::MAX);
                shared.claimed_mode = true;
                shared.ready = AtomicBool::new(true);
                if settings::claim_url().is_none() {
                    pgrx::warning!(
                        "monoflake: neither monoflake.node nor monoflake.claim_url is set: no \
                         ID is issued. A server cannot claim its node from itself (a copy of \
                         its data directory would take the claims along): set \
                         monoflake.claim_url to a database on another server, or \
                         monoflake.node, and restart"
                    );
                    shared.claimed.status = AtomicU32::new(NO_CLAIM_DATABASE);
                }
            }
            Err(message) => start_failed(&mut shared, &message),
        }
        return shared;
    }
    match set_up() {
        Ok(SetUp {
            state,
            line,
            reserved_tick,
            floor_ns,
            identity,
        }) => {
            shared.state = AtomicU64::new(state);
            shared.line = line;
            shared.reserved_tick = AtomicU64::new(reserved_tick);
            shared.identity = IdentityCell::new(&identity);
            shared.floor_ns = AtomicU64::new(floor_ns);
            shared.ready = AtomicBool::new(true);
        }
        Err(message) => start_failed(&mut shared, &message),
    }
    shared
}

/// What the set-up found and wrote.
struct SetUp {
    state: u64,
    line: Line,
    reserved_tick: u64,
    floor_ns: u64,
    /// The identity line found, carried forward unchecked (the timeline is known only once
    /// recovery is over: the first call checks it, `admit`).
    identity: String,
}

/// Reads the reservation, places the state above it, writes the first one ahead.
fn set_up() -> Result<SetUp, String> {
    let layout = settings::layout()?;
    let name = layout.state_name();
    let stored = reservation::read(&name)?;
    let floor = stored.as_ref().map(|s| s.tick);
    let identity = stored.map(|s| s.identity).unwrap_or_default();
    let mut b = builder(layout.clone());
    if let Some(r) = floor {
        b = b.resume_after(r);
    }
    let step = b.build_step().map_err(|e| e.to_string())?;
    // The line starts at the wall clock; the first call raises it to the tick after the
    // reservation, or refuses while that is too far ahead (`catch_up`).
    let floor_ns = floor.map_or(0, |r| {
        layout
            .unix_ms_of_tick(r.saturating_add(1).min(layout.max_tick()))
            .saturating_mul(1_000_000)
    });
    let line = Line::new(0);
    let now_ns = line.now_ns();
    let ahead_ns = floor_ns.saturating_sub(now_ns);
    if ahead_ns > settings::tolerance_ns() && !settings::TRUST_RESERVATION.get() {
        pgrx::warning!(
            "monoflake: the reservation runs to {}, {} ahead of the server's clock ({}), \
             more than monoflake.tolerance_ms: calls are refused until the clock catches up, \
             unless monoflake.trust_reservation is on",
            monoflake::rfc3339(floor_ns / 1_000_000),
            seconds(ahead_ns),
            monoflake::rfc3339(now_ns / 1_000_000)
        );
    }
    // Never below what is on disk (a later start must still find every tick issued before),
    // and no further ahead than the clock needs: a start that issues nothing (or refuses)
    // does not push it on; the first call above it extends it.
    let reserved = tick_at(&layout, now_ns)
        .saturating_add(window_ticks(&layout))
        .max(floor.unwrap_or(0));
    reservation::write(&name, reserved, &identity)?;
    Ok(SetUp {
        state: step.start(),
        line,
        reserved_tick: reserved,
        floor_ns,
        identity,
    })
}

/// `3600.1 s`.
fn seconds(ns: u64) -> String {
    format!("{:.1} s", ns as f64 / 1e9)
}

/// The line below the floor (`floor_ns`, the time after the reservation found at start).
/// Within the tolerance: waits until the floor is at most the lead ahead (the step borrows
/// the rest), so IDs carry honest time. Beyond it: refuses, or, trusted, raises the line to
/// the floor. Returns the line's time.
fn catch_up(shared: &Shared, floor_ns: u64) -> Result<u64, Failure> {
    let lead_ns = LEAD_NS;
    let now_ns = shared.line.latest_ns();
    if floor_ns <= now_ns.saturating_add(lead_ns) {
        return Ok(now_ns);
    }
    let ahead_ns = floor_ns - now_ns;
    let tolerance_ns = settings::tolerance_ns();
    if ahead_ns <= tolerance_ns {
        loop {
            let now_ns = shared.line.now_ns();
            let Some(left) = floor_ns.checked_sub(now_ns.saturating_add(lead_ns)) else {
                return Ok(now_ns);
            };
            std::thread::sleep(Duration::from_nanos(left).min(Duration::from_millis(10)));
            pgrx::check_for_interrupts!();
        }
    }
    if !settings::TRUST_RESERVATION.get() {
        return Err(Failure::reservation_ahead(format!(
            "monoflake: this server's reservation (monoflake.reservation in the data \
                 directory) runs to {}, {} ahead of the server's clock ({}), more than \
                 monoflake.tolerance_ms ({} ms): the clock was set back, or is behind, since \
                 IDs were last issued. No ID is issued until the clock is within the tolerance \
                 of the reservation (in {}), unless monoflake.trust_reservation is on",
            monoflake::rfc3339(floor_ns / 1_000_000),
            seconds(ahead_ns),
            monoflake::rfc3339(now_ns / 1_000_000),
            tolerance_ns / 1_000_000,
            seconds(ahead_ns - tolerance_ns),
        )));
    }
    let (now_ns, raised) = shared.line.raise_to(floor_ns);
    if raised {
        pgrx::warning!(
            "monoflake: the reservation is {} ahead of the server's clock, more than \
             monoflake.tolerance_ms; trusted (monoflake.trust_reservation): issuing from {} on, \
             above every ID issued before, with times that far ahead of this clock",
            seconds(ahead_ns),
            monoflake::rfc3339(floor_ns / 1_000_000)
        );
    }
    Ok(now_ns)
}

fn tick_at(layout: &Layout, unix_ns: u64) -> u64 {
    layout.tick_at(unix_ns / 1_000_000)
}

fn shared() -> Result<&'static Shared, Failure> {
    if !PRELOADED.load(Ordering::Relaxed) {
        return Err(Failure::not_preloaded());
    }
    let shared = SHARED.get();
    if !shared.ready.load(Ordering::Relaxed) {
        let end = shared
            .message
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(MESSAGE_BYTES);
        let why = String::from_utf8_lossy(&shared.message[..end]);
        return Err(Failure::new(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("monoflake did not start: {why}"),
        )
        .hint("fix the cause (see the server log) and restart the server"));
    }
    Ok(shared)
}

/// The largest batch the layout can issue at once: it must end within the lead.
pub(crate) fn max_batch() -> Result<u64, Failure> {
    let layout = &engine()?.layout;
    let lead_ticks = monoflake::DEFAULT_MAX_LEAD.as_millis() as u64 / layout.tick_ms();
    Ok((lead_ticks + 1).saturating_mul(layout.max_sequence() + 1))
}

/// Whether this process found the server out of recovery and, with a configured node, its
/// identity checked (`admit`): once true, true for the process's life (a server does not
/// go back into recovery without restarting every process).
static ADMITTED: AtomicBool = AtomicBool::new(false);

/// Refuses while the server is in recovery, and, with a configured node, when this data
/// directory is a copy of the one that used it (`identity.rs`); the first call after a start
/// records this server's identity with the reservation.
#[cold]
fn admit(shared: &Shared, engine: &Engine) -> Result<(), Failure> {
    if identity::in_recovery() {
        return Err(Failure::in_recovery());
    }
    if let Some(node) = settings::node() {
        // Ordering: Acquire pairs with the Release store of a check that passed.
        if shared.identity.checked.load(Ordering::Acquire) == 0 {
            with_writer(shared, || check_identity(shared, engine, node))?;
        }
    }
    // Ordering: Relaxed; a process-local flag, read and written by this backend's one thread.
    ADMITTED.store(true, Ordering::Relaxed);
    Ok(())
}

/// Compares the identity the reservation file recorded with this server's (under the
/// writer's flag); records this server's when it is not a copy.
fn check_identity(shared: &Shared, engine: &Engine, node: u64) -> Result<(), Failure> {
    // Ordering: Relaxed; under the writer's flag, which the last check's writer released.
    if shared.identity.checked.load(Ordering::Relaxed) != 0 {
        return Ok(());
    }
    let now = Identity::current(node)
        .map_err(|m| Failure::new(PgSqlErrorCode::ERRCODE_IO_ERROR, format!("monoflake: {m}")))?;
    if let Some(then) = Identity::parse(&shared.identity.get())
        && let Some(reason) = identity::copied(&then, &now)
    {
        return Err(Failure::copied(node, reason));
    }
    let line = now.line();
    // Ordering: Acquire; under the flag, the latest reservation written.
    let reserved = shared.reserved_tick.load(Ordering::Acquire);
    reservation::write(&engine.state_name, reserved, &line)
        .map_err(|m| Failure::new(PgSqlErrorCode::ERRCODE_IO_ERROR, format!("monoflake: {m}")))?;
    shared.identity.set(&line);
    // Ordering: Release, after the line: a backend that reads 1 (Acquire) skips the check.
    shared.identity.checked.store(1, Ordering::Release);
    Ok(())
}

/// Runs `f` holding the reservation writer's flag, waiting for it up to
/// [`RESERVATION_WAIT`].
fn with_writer<T>(shared: &Shared, f: impl FnOnce() -> Result<T, Failure>) -> Result<T, Failure> {
    let mut waited = Duration::ZERO;
    // Ordering: Acquire/Release on the flag, as `extend`.
    while shared
        .writer
        .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        if waited >= RESERVATION_WAIT {
            return Err(Failure::new(
                PgSqlErrorCode::ERRCODE_IO_ERROR,
                format!(
                    "monoflake: the reservation file stayed busy for {} ms",
                    RESERVATION_WAIT.as_millis()
                ),
            ));
        }
        std::thread::sleep(Duration::from_micros(50));
        waited += Duration::from_micros(50);
        pgrx::check_for_interrupts!();
    }
    let out = f();
    shared.writer.store(0, Ordering::Release);
    out
}

/// Reserves `n >= 1` consecutive state values: the step, the first and the last.
fn reserve(n: u64) -> Result<(&'static StateStep, u64, u64), Failure> {
    let shared = shared()?;
    let engine = engine()?;
    // Ordering: Relaxed; process-local (see `ADMITTED`).
    if !ADMITTED.load(Ordering::Relaxed) {
        admit(shared, engine)?;
    }
    let claimed = shared.claimed_mode;
    let max_wait = Duration::from_millis(settings::MAX_WAIT_MS.get().max(0) as u64);
    let mut waited = Duration::ZERO;
    let mut fence_waited = Duration::ZERO;
    loop {
        // Ordering: Acquire, both: the generation pairs with the worker's Release raise, the
        // state with its Release store of a new claim's first state (after the node and the
        // zeroed fence). Constant when the node is configured.
        let generation = shared.claimed.generation.load(Ordering::Acquire);
        let cur = shared.state.load(Ordering::Acquire);
        let step = match &engine.step {
            Some(step) => step,
            None if cur == SEALED => return Err(shared.claimed.refusal()),
            // Ordering: Relaxed; stored before the generation's Release raise read above.
            None => claimed_step(engine, shared.claimed.node.load(Ordering::Relaxed))?,
        };
        let mut now_ns = shared.line.now_ns();
        // Ordering: Relaxed; written once, before any backend exists.
        let floor_ns = shared.floor_ns.load(Ordering::Relaxed);
        if floor_ns > now_ns.saturating_add(LEAD_NS) {
            now_ns = catch_up(shared, floor_ns)?;
        }
        match step.next(cur, now_ns, n) {
            Ok((first, last)) => {
                let tick = step.tick_of(last);
                if claimed {
                    let now_tick = step.layout().tick_at(now_ns / 1_000_000);
                    if shared.claimed.refuses(now_tick, tick) {
                        wait_for_fence(shared, step.node(), tick, &mut fence_waited)?;
                        continue;
                    }
                }
                // Ordering: Acquire pairs with the writer's Release; the tick is on disk.
                // (`u64::MAX` when the node is claimed: the store's fence above applies.)
                let reserved = shared.reserved_tick.load(Ordering::Acquire);
                if tick > reserved {
                    extend(shared, engine, tick, now_ns, true)?;
                    continue;
                }
                if tick.saturating_add(engine.window_ticks / 2) > reserved {
                    // Ahead of need: whoever finds the writer free extends; nobody waits.
                    extend(shared, engine, tick, now_ns, false)?;
                }
                // Ordering: Acquire on success, so that a state stored by a new claim (Release,
                // after its generation's raise) makes that generation visible below; the
                // state publishes no other memory.
                match shared.state.compare_exchange_weak(
                    cur,
                    last,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    // A new claim came between the loads and the compare-exchange, and its
                    // state came back to the value read: what was computed from the old
                    // node's step and fence is not issued (the value is skipped).
                    Ok(_) if shared.claimed.generation.load(Ordering::Relaxed) != generation => {}
                    Ok(_) => return Ok((step, first, last)),
                    Err(_) => std::hint::spin_loop(),
                }
            }
            Err(monoflake::Error::WouldBlock { retry_after, .. }) => {
                if waited >= max_wait {
                    return Err(Failure::new(
                        PgSqlErrorCode::ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
                        format!(
                            "monoflake: IDs asked for faster than the layout issues them: waited \
                             {} ms (monoflake.max_wait_ms), the next slot opens in {} us",
                            waited.as_millis(),
                            retry_after.as_micros()
                        ),
                    )
                    .hint("retry later, or ask for fewer IDs at once"));
                }
                waited += wait_for_slot(retry_after);
                pgrx::check_for_interrupts!();
            }
            Err(e) => return Err(Failure::from_error(&e)),
        }
    }
}

/// What a sleep may overshoot by (the timer's slack and the wake-up): a nap ends this much
/// short of the slot it waits for, and the rest is spun.
const OVERSLEEP: Duration = Duration::from_micros(200);

/// Waits, up to a millisecond, for a slot that opens in `retry_after`; returns the time
/// waited. The largest batch fits only while the clock is in its tick's last slot (39 µs on
/// sonyflake's 10 ms ticks of 256 values), which a sleep to the slot's opening overshoots
/// nearly every time — each retry then needs the next tick's last slot, until
/// `monoflake.max_wait_ms` — so a nap ends [`OVERSLEEP`] short and the rest is spun, as the
/// library's own wait does.
fn wait_for_slot(retry_after: Duration) -> Duration {
    let wait = retry_after.clamp(Duration::from_micros(1), Duration::from_millis(1));
    let until = std::time::Instant::now() + wait;
    if wait > OVERSLEEP {
        std::thread::sleep(wait - OVERSLEEP);
    }
    while std::time::Instant::now() < until {
        std::hint::spin_loop();
    }
    wait
}

/// The claimed node's fence shuts out `tick` (the store has not acknowledged it yet, or the
/// lease was not confirmed in time): asks the worker for a keeper round and waits a
/// millisecond, up to [`RESERVATION_WAIT`] in all, then refuses.
fn wait_for_fence(
    shared: &Shared,
    node: u64,
    tick: u64,
    waited: &mut Duration,
) -> Result<(), Failure> {
    if *waited >= RESERVATION_WAIT {
        return Err(shared.claimed.unconfirmed(node, tick, waited.as_millis()));
    }
    // Ordering: Relaxed; a hint the worker polls.
    shared.claimed.wake.store(true, Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(1));
    *waited += Duration::from_millis(1);
    pgrx::check_for_interrupts!();
    Ok(())
}

/// Extends the reservation to cover `tick` and a window beyond the line's tick. `wait`:
/// whether to wait for another backend's write (the tick is not covered yet) or to leave it
/// to that backend (it is, and this was ahead of need).
fn extend(
    shared: &Shared,
    engine: &Engine,
    tick: u64,
    now_ns: u64,
    wait: bool,
) -> Result<(), Failure> {
    let mut waited = Duration::ZERO;
    loop {
        // Ordering: Acquire/Release on the writer flag, so the next writer sees the last
        // writer's reservation.
        if shared
            .writer
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            let reserved = shared.reserved_tick.load(Ordering::Acquire);
            let want = tick
                .max(tick_at(&engine.layout, now_ns))
                .saturating_add(engine.window_ticks);
            let result = if reserved.saturating_sub(engine.window_ticks / 2) >= tick {
                Ok(())
            } else {
                reservation::write(&engine.state_name, want, &shared.identity.get()).map(|()| {
                    shared.reserved_tick.fetch_max(want, Ordering::Release);
                })
            };
            shared.writer.store(0, Ordering::Release);
            return result.map_err(|m| {
                Failure::new(PgSqlErrorCode::ERRCODE_IO_ERROR, format!("monoflake: {m}")).hint(
                    "IDs are issued only under a reservation on disk: check the data directory",
                )
            });
        }
        if !wait {
            return Ok(());
        }
        if shared.reserved_tick.load(Ordering::Acquire) >= tick {
            return Ok(());
        }
        if waited >= RESERVATION_WAIT {
            return Err(Failure::new(
                PgSqlErrorCode::ERRCODE_IO_ERROR,
                format!(
                    "monoflake: the reservation was not extended to tick {tick} within {} ms",
                    RESERVATION_WAIT.as_millis()
                ),
            ));
        }
        std::thread::sleep(Duration::from_micros(50));
        waited += Duration::from_micros(50);
    }
}

fn to_i64(step: &StateStep, state: u64) -> Result<i64, Failure> {
    step.id(state).to_i64().map_err(|e| Failure::from_error(&e))
}

/// One ID.
pub(crate) fn next_id() -> Result<i64, Failure> {
    let (step, first, _) = reserve(1)?;
    to_i64(step, first)
}

/// `n >= 1` consecutive IDs, in order, with one compare-exchange.
pub(crate) fn next_ids(n: u64) -> Result<Vec<i64>, Failure> {
    let (step, first, last) = reserve(n)?;
    (first..=last).map(|s| to_i64(step, s)).collect()
}
