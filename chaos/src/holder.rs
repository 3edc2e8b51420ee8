//! `monoflake-chaos holder`: a process that holds a leased generator through the library's
//! public API, as an application embedding monoflake does, and issues on request.
//!
//! Commands, one a line on standard input:
//! * `ids K`: K single IDs (`next_id`, which waits at the lead limit within `max_wait`),
//!   answered `i <id>…` (the IDs issued, possibly none) and, when a call failed, `e <error>`;
//! * `spin K`: the same, answered 1,000 IDs a line as it goes: a process that is issuing
//!   without pause for as long as K IDs take, or until a call fails;
//! * `fork HOW K`: forks (`libc`, `raw`, `_Fork`; see `fork.rs`) right after issuing a few
//!   IDs; child and parent each issue up to K single IDs at once. Answers: the child's
//!   `c <pid> <id>…` (and `x <pid> <error>`), then the parent's `i …` and
//!   `F <how> <pid> <status>`.
//!
//! The generator is a `Leased` (`--flavour plain`) or a leased `PerThread` issuing by its
//! implicit path on a new thread for each command, which gives its slot back when it exits
//! (`per-thread`), by a `LocalSlot` handle taken for each command (`handle`) or
//! by that handle's iterator (`iter`); a fork's child and parent issue by a handle taken for
//! the fork (a plain holder: by its `Leased`). One slot at a time: a holder's IDs increase. The store is the file store, etcd or PostgreSQL (`--backend`).
//!
//! * `burst MS K`: waits until the generator's clock reads MS Unix ms (the plain and
//!   per-thread holders read the generator's own clock, a per-core one its wall clock; at
//!   most 10 s), then issues up to K IDs without waiting (`try_next_id`), as fast as it can —
//!   into the ticks ahead of its clock, as far as its lead and its fence let it — and answers
//!   them, 1,000 a line, then the first refusal (`e …`): a holder at its reservation's end
//!   issues every ID its fence lets it, whatever the pipe to the soak;
//! * `stats`: answered `s …` (below) at once.
//!
//! Every command's answer ends with a line `.`. After a lost lease the holder drops the
//! generator and claims again (every 500 ms until a claim succeeds), printing `r <node>`; it
//! starts with `ready <node>`. End of input releases the node and exits 0.
//!
//! Whenever the store's counters of the generator held change (looked at every 100 ms, by a
//! thread of its own, so also while a command waits), it prints
//! `s reservation_writes=W reservation_failures=F lease_losses=L issued=N`: what the soak reads
//! to show that a fault reached the store (a full disk: reservation writes that failed), even
//! of a holder killed in the middle of a command.

use std::collections::VecDeque;
use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use monoflake::{
    Error, FileStore, Generator, Id, Layout, Leased, NodeRequest, NodeStore, PerCore, PerThread,
    Stats,
};

use crate::args::{Flavour, HolderArgs, Store};
use crate::fork::{self, How};

/// The Twitter layout's bits and epoch, epoch as Unix ms.
pub const TWITTER_EPOCH_MS: u64 = 1_288_834_974_657;

/// `orders`: the Twitter layout built with the builder under another name and other field
/// names. It makes the same IDs, so it must share Twitter's node claims.
pub fn layout_of(text: &str) -> Result<Layout, Error> {
    match text {
        "orders" => Layout::builder()
            .name("orders")
            .time_bits(41)
            .node_field("shard", 10)
            .sequence_bits(12)
            .epoch_ms(TWITTER_EPOCH_MS)
            .build(),
        other => other.parse(),
    }
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(line.as_bytes());
    let _ = out.write_all(b"\n");
    let _ = out.flush();
}

fn ids_line(ids: &[u64]) -> String {
    let mut line = String::with_capacity(2 + ids.len() * 20);
    line.push('i');
    for id in ids {
        line.push(' ');
        line.push_str(&id.to_string());
    }
    line
}

/// How many slots a per-thread holder has: the implicit path's, a handle's, a fork's child's.
const SLOTS: usize = 4;

/// The generator a holder issues from.
enum Gen {
    Plain(Leased),
    PerThread(PerThread, Flavour),
    /// Issued from the holder's one command thread, so on one slot: its IDs increase, as the
    /// checker asks of a stream; the keeper still fences and seals every slot.
    PerCore(PerCore),
}

impl Gen {
    fn build(
        flavour: Flavour,
        layout: &Layout,
        store: Arc<dyn NodeStore>,
        request: NodeRequest,
    ) -> Result<Gen, Error> {
        let builder = Generator::builder(layout.clone());
        Ok(match flavour {
            Flavour::Plain => Gen::Plain(builder.build_leased(store, request)?),
            Flavour::PerCore => Gen::PerCore(builder.build_leased_per_core(store, request, SLOTS)?),
            other => Gen::PerThread(
                builder.build_leased_per_thread(store, request, SLOTS)?,
                other,
            ),
        })
    }

    fn node(&self) -> u64 {
        match self {
            Gen::Plain(l) => l.node(),
            Gen::PerThread(p, _) => p.node(),
            Gen::PerCore(p) => p.node(),
        }
    }

    /// Runs `f` with a way to issue one ID without waiting, for a fork: the `Leased`, or a
    /// handle taken for the fork and given back after it. (Not the implicit path: the main
    /// thread would hold a slot of its own from then on, and the holder's IDs, increasing per
    /// slot only, would interleave two slots in one stream.)
    fn with_one<R>(&self, f: impl FnOnce(&dyn Fn() -> Result<Id, Error>) -> R) -> Result<R, Error> {
        Ok(match self {
            Gen::Plain(l) => f(&|| l.try_next_id()),
            Gen::PerCore(p) => f(&|| p.try_next_id()),
            Gen::PerThread(p, _) => {
                let local = p.local()?;
                f(&|| local.try_next_id())
            }
        })
    }

    /// Up to `k` IDs by waiting calls, each handed to `out` as it is issued: the first error.
    fn issue(&self, k: u64, out: &mut (dyn FnMut(u64) + Send)) -> Option<Error> {
        let mut each = |next: &mut dyn FnMut() -> Option<Result<Id, Error>>| {
            for _ in 0..k {
                match next() {
                    Some(Ok(id)) => out(id.as_u64()),
                    Some(Err(e)) => return Some(e),
                    None => return None,
                }
            }
            None
        };
        match self {
            Gen::Plain(l) => each(&mut || Some(l.next_id())),
            Gen::PerCore(p) => each(&mut || Some(p.next_id())),
            Gen::PerThread(p, Flavour::Handle) => match p.local() {
                Ok(local) => each(&mut || Some(local.next_id())),
                Err(e) => Some(e),
            },
            Gen::PerThread(p, Flavour::Iter) => match p.local() {
                Ok(mut local) => {
                    let mut ids = local.ids();
                    each(&mut || ids.next())
                }
                Err(e) => Some(e),
            },
            // On a thread of its own for each command: the thread takes a slot by its first
            // call and gives it back with its last state when it exits, and the next
            // command's thread takes it over from there — the give-back at thread exit, in
            // every command.
            Gen::PerThread(p, _) => std::thread::scope(|s| {
                s.spawn(|| each(&mut || Some(p.next_id())))
                    .join()
                    .expect("the issuing thread panicked")
            }),
        }
    }

    /// The clock's reading its IDs are stamped by, in Unix ms (a per-core holder's wall
    /// clock, which its locked clock follows).
    fn clock_ms(&self) -> u64 {
        use monoflake::TimeSource;
        match self {
            Gen::Plain(l) => l.clock().precise_now_ms(),
            Gen::PerThread(p, _) => p.clock().precise_now_ms(),
            Gen::PerCore(_) => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
        }
    }

    fn stats(&self) -> Stats {
        match self {
            Gen::Plain(l) => l.stats(),
            Gen::PerThread(p, _) => p.stats(),
            Gen::PerCore(p) => p.stats(),
        }
    }

    fn release(self) -> Result<(), Error> {
        match self {
            Gen::Plain(l) => l.release(),
            Gen::PerThread(p, _) => p.release(),
            Gen::PerCore(p) => p.release(),
        }
    }
}

/// The `s` line of a generator's counters.
fn stats_line(s: &Stats) -> String {
    format!(
        "s reservation_writes={} reservation_failures={} lease_losses={} issued={}",
        s.reservation_writes, s.reservation_failures, s.lease_losses, s.issued
    )
}

/// The generator held now, shared with the thread that reports its counters.
type Held = Arc<Mutex<Option<Arc<Gen>>>>;

/// Prints the held generator's [`stats_line`] whenever its store counters change, looking
/// every 100 ms. The generator is only looked at under the lock, so that whoever takes it out
/// of `held` owns it alone.
fn report_stats(held: Held) {
    let mut last = None;
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let now = held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(|g| g.stats());
        let Some(s) = now else {
            last = None;
            continue;
        };
        let key = (s.reservation_writes, s.reservation_failures, s.lease_losses);
        if last != Some(key) {
            last = Some(key);
            say(&stats_line(&s));
        }
    }
}

/// Takes the generator out of `held` and `leased`: its only owner from then on.
fn take(held: &Held, leased: &mut Option<Arc<Gen>>) -> Option<Gen> {
    held.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    leased.take().and_then(Arc::into_inner)
}

/// The flavour asked for: `--flavour`, else `MONOFLAKE_CHAOS_FLAVOUR`, else `plain`.
fn flavour_of(args: &HolderArgs) -> Result<Flavour, String> {
    use clap::ValueEnum;
    match (args.flavour, std::env::var("MONOFLAKE_CHAOS_FLAVOUR")) {
        (Some(f), _) => Ok(f),
        (None, Ok(name)) => Flavour::from_str(&name, false),
        (None, Err(_)) => Ok(Flavour::Plain),
    }
}

pub fn main(args: &HolderArgs) -> ExitCode {
    let flavour = match flavour_of(args) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("holder: bad flavour: {e}");
            return ExitCode::from(2);
        }
    };
    let layout = match layout_of(&args.layout) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("holder: bad layout {:?}: {e}", args.layout);
            return ExitCode::from(2);
        }
    };
    let request = match args.node.as_str() {
        "auto" => NodeRequest::Any,
        n => match n.parse() {
            Ok(n) => NodeRequest::Exact(n),
            Err(_) => {
                eprintln!("holder: bad node {n:?}");
                return ExitCode::from(2);
            }
        },
    };
    let open = || -> Result<Arc<dyn NodeStore>, Error> {
        Ok(match (args.backend, &args.state_dir) {
            (Store::File, None) => Arc::new(FileStore::open_default()?),
            (Store::File, Some(dir)) => Arc::new(FileStore::open(dir)?),
            (Store::Postgres, _) => Arc::new(monoflake::PgStore::connect_with(
                &args.pg_url,
                &monoflake::PgOptions::new()
                    .table(&args.pg_table)?
                    .lease_ttl(Duration::from_secs(args.lease_ttl)),
            )?),
            (Store::Etcd, _) => {
                let endpoints: Vec<&str> = args.etcd_endpoints.split(',').collect();
                Arc::new(monoflake::EtcdStore::connect(
                    &endpoints,
                    &args.etcd_prefix,
                    Duration::from_secs(args.lease_ttl),
                )?)
            }
        })
    };
    let (tx, commands) = channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut store: Option<Arc<dyn NodeStore>> = None;
    let mut leased: Option<Arc<Gen>> = None;
    let held: Held = Arc::new(Mutex::new(None));
    {
        let held = Arc::clone(&held);
        std::thread::spawn(move || report_stats(held));
    }
    let mut claimed_before = false;
    // Claims are tried at most every 500 ms: a caller that keeps asking while there is no
    // node waits for the next try, it does not cause a storm of claims.
    let mut next_claim = Instant::now();
    // Fork commands that came while no node was held, with when they came: each waits for
    // the next claim, for up to FORK_PATIENCE, since a fork fault that found its holder
    // between claims (its lease lost to a full disk or a paused store) would test nothing.
    let mut deferred: VecDeque<(String, Instant)> = VecDeque::new();
    loop {
        if leased.is_none() {
            while let Some((_, since)) = deferred.front()
                && since.elapsed() >= FORK_PATIENCE
            {
                deferred.pop_front();
                say("e not claimed");
                say(".");
            }
            std::thread::sleep(next_claim.saturating_duration_since(Instant::now()));
            next_claim = Instant::now() + Duration::from_millis(500);
            let claimed = match &store {
                Some(s) => Ok(Arc::clone(s)),
                None => open(),
            }
            .and_then(|s| {
                store = Some(Arc::clone(&s));
                Gen::build(flavour, &layout, s, request)
            });
            match claimed {
                Ok(l) => {
                    say(&format!(
                        "{} {}",
                        if claimed_before { "r" } else { "ready" },
                        l.node()
                    ));
                    claimed_before = true;
                    let l = Arc::new(l);
                    *held
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::clone(&l));
                    leased = Some(l);
                }
                Err(e) => {
                    say(&format!("e claim: {e}"));
                    if matches!(e, Error::StateDir { .. }) {
                        // A directory deleted or replaced: open it again next time.
                        store = None;
                    }
                }
            }
        }
        let command = match &leased {
            Some(_) => match deferred.pop_front() {
                Some((c, _)) => Ok(c),
                None => commands.recv().map_err(|_| RecvTimeoutError::Disconnected),
            },
            None => commands.recv_timeout(next_claim.saturating_duration_since(Instant::now())),
        };
        let command = match command {
            Ok(c) => c,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let Some(l) = &leased else {
            if command.starts_with("fork ") {
                deferred.push_back((command, Instant::now()));
                continue;
            }
            // Answered at the next claim's time, whatever it gives.
            std::thread::sleep(next_claim.saturating_duration_since(Instant::now()));
            say("e not claimed");
            say(".");
            continue;
        };
        let words: Vec<&str> = command.split_whitespace().collect();
        let lost = match words.as_slice() {
            ["ids", k] => issue(l, k.parse().unwrap_or(1)),
            ["spin", k] => spin(l, k.parse().unwrap_or(1)),
            ["burst", at, k] => burst(l, at.parse().unwrap_or(0), k.parse().unwrap_or(1)),
            ["stats"] => {
                say(&stats_line(&l.stats()));
                false
            }
            ["fork", how, k] => match How::parse(how) {
                Some(how) => fork_command(l, how, k.parse().unwrap_or(16)),
                None => {
                    say(&format!("e unknown fork {how:?}"));
                    false
                }
            },
            _ => {
                say(&format!("e unknown command {command:?}"));
                false
            }
        };
        say(".");
        if lost {
            drop(take(&held, &mut leased));
            next_claim = Instant::now() + Duration::from_millis(500);
        }
    }
    if let Some(l) = take(&held, &mut leased)
        && let Err(e) = l.release()
    {
        eprintln!("holder: release: {e}");
    }
    ExitCode::SUCCESS
}

/// How long a fork command waits for its holder to hold a node again.
const FORK_PATIENCE: Duration = Duration::from_secs(10);

/// Writes `id` out at once, as a line `i ID` of its own: an ID is on the pipe before the next
/// is issued, so a `kill -9` loses none that was issued (a batch of a thousand per line lost up
/// to 999 to the checker).
fn say_id(id: u64) {
    say(&ids_line(&[id]));
}

/// `ids K`; true when the lease was lost.
fn issue(leased: &Gen, k: usize) -> bool {
    let failed = leased.issue(k as u64, &mut say_id);
    match failed {
        Some(e) => {
            say(&format!("e {e}"));
            matches!(e, Error::LeaseLost { .. } | Error::Forked { .. })
        }
        None => false,
    }
}

/// `spin K`; true when the lease was lost.
fn spin(leased: &Gen, k: u64) -> bool {
    let failed = leased.issue(k, &mut say_id);
    match failed {
        Some(e) => {
            say(&format!("e {e}"));
            matches!(e, Error::LeaseLost { .. } | Error::Forked { .. })
        }
        None => false,
    }
}

/// `burst MS K`; true when the lease was lost.
fn burst(leased: &Gen, at_ms: u64, k: usize) -> bool {
    let give_up = Instant::now() + Duration::from_secs(10);
    while leased.clock_ms() < at_ms && Instant::now() < give_up {
        std::thread::sleep(Duration::from_micros(200));
    }
    let mut ids: Vec<u64> = Vec::with_capacity(k.min(1 << 20));
    let failed = leased
        .with_one(|one| {
            for _ in 0..k {
                match one() {
                    Ok(id) => ids.push(id.as_u64()),
                    Err(e) => return Some(e),
                }
            }
            None
        })
        .unwrap_or_else(Some);
    for chunk in ids.chunks(1000) {
        say(&ids_line(chunk));
    }
    match failed {
        Some(e) => {
            say(&format!("e {e}"));
            matches!(e, Error::LeaseLost { .. } | Error::Forked { .. })
        }
        None => false,
    }
}

/// `fork HOW K`; true when the lease was lost.
fn fork_command(leased: &Gen, how: How, k: usize) -> bool {
    // A few IDs first, so the state holds the current tick when the child is made.
    if issue(leased, 8) {
        return true;
    }
    let _ = std::io::stdout().flush();
    let forked = leased
        .with_one(|one| fork::fork_and_issue(one, how, k))
        .unwrap_or_else(|e| Err(std::io::Error::other(format!("no slot to fork with: {e}"))));
    match forked {
        Ok((ids, error, forked)) => {
            say(&ids_line(&ids));
            if let Some(e) = &error {
                say(&format!("e {e}"));
            }
            say(&format!(
                "F {} {} {}",
                how.name(),
                forked.child,
                forked.status
            ));
            matches!(error, Some(Error::LeaseLost { .. }))
        }
        Err(e) => {
            say(&format!("e fork {}: {e}", how.name()));
            false
        }
    }
}
