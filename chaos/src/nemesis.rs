//! The nemesis: a schedule of faults drawn from the seed before the soak starts (so one seed
//! always gives the same faults at the same offsets, on the same targets, with the same
//! parameters), then applied at those offsets. Every fault is written to `faults.log` when it
//! starts and when it ends, with the real time.
//!
//! The schedule begins with one fault of every kind, in an order drawn from the seed, so that
//! even a short run covers every kind; the rest are drawn by weight.

use std::collections::HashSet;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::Signal;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::etcd::MEMBERS;
use crate::procs::{now_ms, signal};
use crate::slots::{Kind, Pace, Slot, Spec, StoreArgs, start_holder};
use crate::world::World;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultKind {
    /// `kill -9` of a generator; its supervisor restarts it.
    Kill9,
    /// SIGSTOP for longer than the lease TTL, then SIGCONT.
    Pause,
    /// SIGSTOP; its records deleted (etcd prefix or state directory); a successor claims its
    /// node; SIGCONT 1–2 s after the stop (less than the TTL).
    PauseTakeover,
    /// A running holder's wall clock stepped 1 s ahead (its locked clock follows); its records
    /// deleted; a successor on an honest clock claims its node while it still issues. The
    /// combination behind the hand-over's duplicates (issue 34, case 4; issue 39): a holder
    /// ahead, its records gone, a successor that finds none. Weighted up for that.
    AheadTakeover,
    /// `kill -9` of one etcd member, restarted later.
    EtcdMember,
    /// The same, of the member that leads.
    EtcdLeader,
    /// Two members down at once: no quorum.
    EtcdQuorum,
    /// `etcdctl del --prefix` of the generators' prefix.
    EtcdPrefix,
    /// `rm -rf` of the state directory.
    StateDirDelete,
    /// The state directory replaced by an empty one or a copy.
    StateDirReplace,
    /// A generator's wall clock stepped by ±1 s or ±1 h (libfaketime).
    ClockStep,
    /// The state directory's filesystem (a tmpfs) filled, then freed.
    DiskFull,
    /// A holder forked (libc `fork`, raw `SYS_fork`, `_Fork`); the child issues at once.
    Fork,
}

impl FaultKind {
    pub const ALL: [FaultKind; 13] = [
        FaultKind::Kill9,
        FaultKind::Pause,
        FaultKind::PauseTakeover,
        FaultKind::AheadTakeover,
        FaultKind::EtcdMember,
        FaultKind::EtcdLeader,
        FaultKind::EtcdQuorum,
        FaultKind::EtcdPrefix,
        FaultKind::StateDirDelete,
        FaultKind::StateDirReplace,
        FaultKind::ClockStep,
        FaultKind::DiskFull,
        FaultKind::Fork,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Kill9 => "kill-9",
            FaultKind::Pause => "pause",
            FaultKind::PauseTakeover => "pause-takeover",
            FaultKind::AheadTakeover => "ahead-takeover",
            FaultKind::EtcdMember => "etcd-member",
            FaultKind::EtcdLeader => "etcd-leader",
            FaultKind::EtcdQuorum => "etcd-quorum",
            FaultKind::EtcdPrefix => "etcd-prefix",
            FaultKind::StateDirDelete => "state-delete",
            FaultKind::StateDirReplace => "state-replace",
            FaultKind::ClockStep => "clock-step",
            FaultKind::DiskFull => "disk-full",
            FaultKind::Fork => "fork",
        }
    }

    fn weight(self) -> u32 {
        match self {
            // The take-over of a running holder ahead found the issue-39 duplicates and is what
            // a missing seal or a missing re-read shows in; it goes to either store (below).
            FaultKind::AheadTakeover => 4,
            FaultKind::Kill9 => 3,
            FaultKind::Pause | FaultKind::ClockStep | FaultKind::PauseTakeover => 2,
            _ => 1,
        }
    }
}

/// One fault of the schedule, everything about it drawn from the seed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// From the soak's start.
    pub at: Duration,
    pub kind: FaultKind,
    pub slot: usize,
    /// Etcd members (one for `EtcdMember`, two for `EtcdQuorum`).
    pub members: Vec<usize>,
    /// How long the fault holds (pause, member down, disk full).
    pub hold: Duration,
    /// `ClockStep`: seconds.
    pub delta_s: i64,
    /// `StateDirDelete`: recreate it; `StateDirReplace`: by a copy.
    pub flag: bool,
    /// `Fork`: how.
    pub how: &'static str,
}

/// What a slot is, for the schedule.
#[derive(Debug, Clone, Copy)]
pub struct SlotKind {
    pub kind: Kind,
    /// Which store its generators use: what a take-over can be done on, and where.
    pub store: StoreKind,
}

/// The store a slot's generators use, as the schedule needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// The file store: one host, where the host-wide claim refuses a successor while the
    /// holder's process lives.
    File,
    /// etcd: across hosts. Its clock (the `Date` of its HTTP gateway) bounds a holder's (more
    /// than `EtcdOptions::max_clock_lead` plus a second ahead loses the claim), so its clocks
    /// step back only, and a holder stepped ahead is not taken over here (`tests/etcd_clock.rs`
    /// and `cli/tests/etcd_cluster.rs` cover both).
    Etcd,
    /// PostgreSQL: no take-over here; and its clock_timestamp() bounds a holder's clock (more
    /// than `PgOptions::max_clock_lead` ahead loses the claim), so its clocks step back only.
    Postgres,
}

/// The schedule for `seconds` of soak with a fault every `every` on average; kinds in
/// `skip` are left out. The same arguments always give the same schedule.
pub fn plan(
    seed: u64,
    seconds: u64,
    every: Duration,
    ttl_s: u64,
    slots: &[SlotKind],
    skip: &[FaultKind],
) -> Vec<Planned> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let kinds: Vec<FaultKind> = FaultKind::ALL
        .into_iter()
        .filter(|k| !skip.contains(k))
        .filter(|k| *k != FaultKind::Fork || slots.iter().any(|s| s.kind == Kind::Holder))
        .collect();
    let mut first = kinds.clone();
    first.shuffle(&mut rng);
    let total: u32 = kinds.iter().map(|k| k.weight()).sum();
    let holders: Vec<usize> = (0..slots.len())
        .filter(|&i| slots[i].kind == Kind::Holder)
        .collect();
    // Not `gen`: it prints as fast as its pipe is read, so what the checker receives lags
    // what it issued, and it issues little after a loss while the pipe is full (at seed 12 both
    // ahead-takeovers fell on `gen-etcd` and left the no_seal mutant alive). A holder or the
    // service issues on request.
    // The file store only, where the successor, refused while the holder lives, must read the
    // holder's write-back. On etcd and PostgreSQL a holder 1 s ahead of the store's clock
    // loses its claim at its next check, and a successor that finds no record starts above
    // the store's clock, whatever the holder's (issue 34, case 4).
    let remote: Vec<usize> = (0..slots.len())
        .filter(|&i| slots[i].kind != Kind::Gen && slots[i].store == StoreKind::File)
        .collect();
    let takeable: Vec<usize> = (0..slots.len())
        .filter(|&i| slots[i].store != StoreKind::Postgres)
        .collect();
    let end = Duration::from_secs(seconds).saturating_sub(Duration::from_secs(3));
    let mut at = Duration::from_secs(2);
    let mut planned = Vec::new();
    while at < end && !kinds.is_empty() {
        let kind = if planned.len() < first.len() {
            first[planned.len()]
        } else {
            let mut pick = rng.random_range(0..total);
            *kinds
                .iter()
                .find(|k| {
                    let w = k.weight();
                    if pick < w {
                        true
                    } else {
                        pick -= w;
                        false
                    }
                })
                .expect("a kind")
        };
        let ms = |rng: &mut ChaCha8Rng, lo: u64, hi: u64| {
            Duration::from_millis(rng.random_range(lo..=hi))
        };
        let slot = match kind {
            FaultKind::Fork => holders[rng.random_range(0..holders.len())],
            // A running holder ahead, taken over (see `remote`).
            FaultKind::AheadTakeover if !remote.is_empty() => {
                remote[rng.random_range(0..remote.len())]
            }
            FaultKind::PauseTakeover if !takeable.is_empty() => {
                takeable[rng.random_range(0..takeable.len())]
            }
            _ => rng.random_range(0..slots.len()),
        };
        let mut members: Vec<usize> = (0..MEMBERS).collect();
        members.shuffle(&mut rng);
        let (members, hold) = match kind {
            FaultKind::Pause => (
                vec![],
                ms(&mut rng, ttl_s * 1000 + 500, ttl_s * 1000 + 2000),
            ),
            FaultKind::PauseTakeover | FaultKind::AheadTakeover => {
                (vec![], ms(&mut rng, 1000, 2000))
            }
            FaultKind::EtcdMember => (members[..1].to_vec(), ms(&mut rng, 500, 4000)),
            FaultKind::EtcdLeader => (vec![], ms(&mut rng, 500, 4000)),
            FaultKind::EtcdQuorum => (members[..2].to_vec(), ms(&mut rng, 1000, 6000)),
            FaultKind::DiskFull => (vec![], ms(&mut rng, 1000, 4000)),
            _ => (vec![], Duration::ZERO),
        };
        let delta_s: i64 = [1, -1, 3600, -3600][rng.random_range(0..4)];
        // A PostgreSQL generator whose clock runs ahead of the database's loses its claim and
        // is refused until the database's clock catches up (docs/design.md, "Holder and
        // successor"): stepped forward for good, as here, it would stay out for the rest of
        // the soak. Its steps go back only; tests/postgres.rs covers the refusal. The same on
        // etcd, whose clock is the Date of its HTTP gateway (tests/etcd_clock.rs).
        // And stepped back for good, its next process is refused for the rest of the soak
        // (every node's record, or a fresh node's floor from the store's clock, is ahead of
        // it by more than the tolerance: the refusal issue 34 asks for). So there a step back
        // holds for 3 s (no draw: the schedule of every other fault stays as it was) and is
        // then undone, as NTP would, and the outage it causes ends within the recovery bound.
        let (delta_s, hold) =
            if kind == FaultKind::ClockStep && slots[slot].store != StoreKind::File {
                (-delta_s.abs(), Duration::from_secs(3))
            } else {
                (delta_s, hold)
            };
        let flag = rng.random_bool(0.5);
        let how = ["libc", "raw", "_Fork"][rng.random_range(0..3)];
        planned.push(Planned {
            at,
            kind,
            slot,
            members,
            hold,
            delta_s,
            flag,
            how,
        });
        let step = every.as_millis() as u64;
        at += Duration::from_millis(rng.random_range(step * 2 / 5..=step * 8 / 5));
    }
    planned
}

/// A fault as it happened.
#[derive(Debug, Clone)]
pub struct Record {
    pub kind: FaultKind,
    pub start_ms: i64,
    pub end_ms: i64,
    /// The slots it could put in an outage.
    pub affects: Vec<usize>,
}

/// Applies faults; shared by their tasks.
#[derive(Debug)]
pub struct Nemesis {
    pub world: Arc<World>,
    pub slots: Vec<Arc<Slot>>,
    pub state_dir: std::path::PathBuf,
    pub prefix: String,
    /// The soak's tables: the file store's, etcd's.
    pub tables: [usize; 3],
    records: Mutex<Vec<Record>>,
    skipped: Mutex<Vec<String>>,
    log: Mutex<std::fs::File>,
    paused: Mutex<HashSet<usize>>,
    /// One etcd member fault at a time, one disk fault at a time.
    etcd_busy: tokio::sync::Mutex<()>,
    disk_busy: tokio::sync::Mutex<()>,
    successors: std::sync::atomic::AtomicU64,
}

impl Nemesis {
    pub fn new(
        world: Arc<World>,
        slots: Vec<Arc<Slot>>,
        state_dir: std::path::PathBuf,
        prefix: String,
        tables: [usize; 3],
    ) -> std::io::Result<Nemesis> {
        let log = std::fs::File::create(world.run_dir.join("faults.log"))?;
        Ok(Nemesis {
            world,
            slots,
            state_dir,
            prefix,
            tables,
            records: Mutex::new(Vec::new()),
            skipped: Mutex::new(Vec::new()),
            log: Mutex::new(log),
            paused: Mutex::new(HashSet::new()),
            etcd_busy: tokio::sync::Mutex::new(()),
            disk_busy: tokio::sync::Mutex::new(()),
            successors: std::sync::atomic::AtomicU64::new(0),
        })
    }

    pub fn records(&self) -> Vec<Record> {
        self.records.lock().expect("records").clone()
    }

    pub fn skipped(&self) -> Vec<String> {
        self.skipped.lock().expect("skipped").clone()
    }

    fn write(&self, line: &str) {
        if let Ok(mut f) = self.log.lock() {
            let _ = writeln!(f, "{line}");
        }
        self.world.log.note(line);
    }

    fn skip(&self, p: &Planned, why: &str) {
        let line = format!("{} SKIP {} slot {}: {why}", now_ms(), p.kind.name(), p.slot);
        self.write(&line);
        self.skipped.lock().expect("skipped").push(line);
    }

    fn slots_on(&self, etcd: bool) -> Vec<usize> {
        self.slots
            .iter()
            .filter(|s| s.store.space() == usize::from(etcd))
            .map(|s| s.idx)
            .collect()
    }

    /// Applies one planned fault (returns when it is over).
    pub async fn apply(&self, p: Planned) {
        let start = now_ms();
        let slot = &self.slots[p.slot];
        let begin = |detail: &str| {
            self.write(&format!("{start} START {} {detail}", p.kind.name()));
        };
        let (affects, detail) = match p.kind {
            FaultKind::Kill9 => {
                let Some(live) = slot.live() else {
                    return self.skip(&p, "not running");
                };
                let detail = format!("{} pid {}", slot.name, live.pid);
                begin(&detail);
                signal(live.pid, Signal::SIGKILL);
                (vec![p.slot], detail)
            }
            FaultKind::Pause => {
                let Some(live) = slot.live() else {
                    return self.skip(&p, "not running");
                };
                if !self.paused.lock().expect("paused").insert(p.slot) {
                    return self.skip(&p, "already paused");
                }
                let detail = format!(
                    "{} pid {} for {} ms",
                    slot.name,
                    live.pid,
                    p.hold.as_millis()
                );
                begin(&detail);
                signal(live.pid, Signal::SIGSTOP);
                tokio::time::sleep(p.hold).await;
                signal(live.pid, Signal::SIGCONT);
                self.paused.lock().expect("paused").remove(&p.slot);
                (vec![p.slot], detail)
            }
            FaultKind::PauseTakeover | FaultKind::AheadTakeover => {
                match self.pause_takeover(&p, slot, &begin).await {
                    Ok(r) => r,
                    Err(why) => return self.skip(&p, &why),
                }
            }
            FaultKind::EtcdMember | FaultKind::EtcdLeader | FaultKind::EtcdQuorum => {
                let _busy = self.etcd_busy.lock().await;
                let members = if p.kind == FaultKind::EtcdLeader {
                    match self.world.etcd.leader().await {
                        Some(l) => vec![l],
                        None => return self.skip(&p, "no leader found"),
                    }
                } else {
                    p.members.clone()
                };
                let mut names = Vec::new();
                for &m in &members {
                    names.push(self.world.etcd.member_name(m).await);
                }
                let detail = format!("{} down for {} ms", names.join("+"), p.hold.as_millis());
                begin(&detail);
                for &m in &members {
                    self.world.etcd.kill_member(m, &self.world.pids).await;
                }
                tokio::time::sleep(p.hold).await;
                for &m in &members {
                    if let Err(e) = self
                        .world
                        .etcd
                        .start_member(m, &self.world.log, &self.world.pids)
                        .await
                    {
                        self.world
                            .log
                            .say(&format!("etcd: cannot restart a member: {e}"));
                    }
                }
                (self.slots_on(true), detail)
            }
            FaultKind::EtcdPrefix => {
                begin(&format!("del --prefix {}", self.prefix));
                let result = self
                    .world
                    .etcd
                    .del_prefix(&self.prefix, Duration::from_secs(10))
                    .await;
                let detail = match result {
                    Ok(n) => format!("del --prefix {}: {n} keys", self.prefix),
                    Err(e) => format!("del --prefix {} failed: {e}", self.prefix),
                };
                (self.slots_on(true), detail)
            }
            FaultKind::StateDirDelete => {
                let detail = format!(
                    "rm -rf {} (recreated: {})",
                    self.state_dir.display(),
                    p.flag
                );
                begin(&detail);
                let r = self.world.disk.delete(&self.state_dir, p.flag);
                (self.slots_on(false), format!("{detail}: {r:?}"))
            }
            FaultKind::StateDirReplace => {
                let detail = format!(
                    "{} replaced by {}",
                    self.state_dir.display(),
                    if p.flag {
                        "a copy"
                    } else {
                        "an empty directory"
                    }
                );
                begin(&detail);
                let r = self.world.disk.replace(&self.state_dir, p.flag);
                (self.slots_on(false), format!("{detail}: {r:?}"))
            }
            FaultKind::ClockStep => {
                let step = self.world.clocks.step(p.slot, p.delta_s);
                let mut detail = format!("{} by {:+} s: offset now {step:?}", slot.name, p.delta_s);
                begin(&detail);
                if !p.hold.is_zero() {
                    // A step back on a store with a clock, undone after its hold.
                    tokio::time::sleep(p.hold).await;
                    let undo = self.world.clocks.step(p.slot, -p.delta_s);
                    detail += &format!(
                        "; undone after {} ms: offset now {undo:?}",
                        p.hold.as_millis()
                    );
                }
                (vec![p.slot], detail)
            }
            FaultKind::DiskFull => {
                let _busy = self.disk_busy.lock().await;
                begin(&format!(
                    "fill {} for {} ms",
                    self.world.disk.root.display(),
                    p.hold.as_millis()
                ));
                let filled = self.world.disk.fill();
                tokio::time::sleep(p.hold).await;
                let detail = match filled {
                    Ok((path, bytes)) => {
                        let _ = self.world.disk.unfill(&path);
                        format!("filled with {bytes} bytes for {} ms", p.hold.as_millis())
                    }
                    Err(e) => format!("fill failed: {e}"),
                };
                (self.slots_on(false), detail)
            }
            FaultKind::Fork => {
                let Some(commands) = slot.live().and_then(|l| l.commands) else {
                    return self.skip(&p, "no holder running");
                };
                let detail = format!("{}: fork {} ×{FORKS}", slot.name, p.how);
                begin(&detail);
                for _ in 0..FORKS {
                    let _ = commands.send(format!("fork {} 64", p.how));
                }
                (vec![p.slot], detail)
            }
        };
        let end = now_ms();
        self.write(&format!("{end} END {} {detail}", p.kind.name()));
        self.records.lock().expect("records").push(Record {
            kind: p.kind,
            start_ms: start,
            end_ms: end,
            affects,
        });
    }

    /// The paused holder whose node is taken (issue 21, case 8), on either store; or, for
    /// `AheadTakeover`, a running holder stepped 1 s ahead first, not paused.
    async fn pause_takeover(
        &self,
        p: &Planned,
        slot: &Slot,
        begin: &impl Fn(&str),
    ) -> Result<(Vec<usize>, String), String> {
        if matches!(slot.store, StoreArgs::Pg(_)) {
            return Err("no take-over on the PostgreSQL store here".into());
        }
        let etcd = slot.store.is_etcd();
        // No etcd member fault meanwhile: a holder the store cannot confirm stops issuing on
        // its own (its fence's deadline), and a take-over of a holder that is not issuing
        // tests nothing (a 60 s soak at seed 11 lost its only etcd `ahead-takeover` to an
        // overlapping `etcd-leader` this way).
        let _busy = if etcd {
            Some(self.etcd_busy.lock().await)
        } else {
            None
        };
        let live = slot.live().ok_or("not running")?;
        let node = live.node().ok_or("no node seen yet")?;
        if !self.paused.lock().expect("paused").insert(p.slot) {
            return Err("already paused".into());
        }
        let pause = p.kind == FaultKind::PauseTakeover;
        let detail = if pause {
            format!(
                "{} pid {} (node {node}) paused {} ms; records deleted; a successor claims node {node}",
                slot.name,
                live.pid,
                p.hold.as_millis()
            )
        } else {
            // The step first, and time for the holder to issue ahead: its IDs then run 1 s
            // ahead of the successor's clock when the records go.
            let step = self.world.clocks.step(p.slot, 1);
            // The precondition: the holder issues, and its IDs run ahead, when its records
            // go. Its clock follows the step only once libfaketime reads the offset again (at
            // most a second) and its locked clock re-anchors (each second): up to 2 s, which
            // a fixed 400 ms wait mostly missed — at seed 11 the holder's IDs were on time.
            let give_up = tokio::time::Instant::now() + AHEAD_WITHIN;
            loop {
                tokio::time::sleep(Duration::from_millis(50)).await;
                let lead = self.world.checker.lead(p.slot);
                if lead.is_some_and(|(at, ahead)| now_ms() - at <= ISSUING_MS && ahead >= AHEAD_MS)
                {
                    break;
                }
                if tokio::time::Instant::now() >= give_up {
                    self.paused.lock().expect("paused").remove(&p.slot);
                    return Err(format!(
                        "the holder was not issuing {AHEAD_MS} ms ahead within {} ms of the \
                         step (last ID at real ms, ahead ms: {lead:?})",
                        AHEAD_WITHIN.as_millis()
                    ));
                }
            }
            format!(
                "{} pid {} (node {node}) running, clock stepped +1 s (offset now {step:?}); \
                 records deleted; a successor claims node {node}",
                slot.name, live.pid
            )
        };
        begin(&detail);
        let stopped = tokio::time::Instant::now();
        if pause {
            signal(live.pid, Signal::SIGSTOP);
        }
        let deleted = if etcd {
            self.world
                .etcd
                .del_prefix(&self.prefix, Duration::from_secs(5))
                .await
                .map(|_| ())
        } else {
            self.world
                .disk
                .delete(&self.state_dir, true)
                .map_err(|e| e.to_string())
        };
        let k = self
            .successors
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let spec = Spec {
            name: format!("successor-{k}"),
            table: self.tables[usize::from(etcd)],
            slot: None,
            clock: None,
            store: if etcd {
                StoreArgs::Etcd(self.prefix.clone())
            } else {
                StoreArgs::File(self.state_dir.clone())
            },
            layout: "orders".into(),
            node: node.to_string(),
            env: Vec::new(),
        };
        let successor = start_holder(&self.world, &spec, Pace::Rate(self.world.rate));
        tokio::time::sleep_until(stopped + p.hold).await;
        if pause {
            signal(live.pid, Signal::SIGCONT);
        }
        self.paused.lock().expect("paused").remove(&p.slot);
        let outcome = match successor {
            Ok(s) => {
                tokio::time::sleep(Duration::from_secs(3)).await;
                let status = s.stop(&self.world).await;
                format!("successor {}: {status}", spec.name)
            }
            Err(e) => format!("successor did not start: {e}"),
        };
        Ok((
            self.slots_on(etcd),
            format!("{detail} (delete: {deleted:?}; {outcome})"),
        ))
    }
}

/// How recently a holder must have issued for an `ahead-takeover` to go ahead, in ms.
const ISSUING_MS: i64 = 250;
/// How far ahead of the real time its newest ID must be: most of the 1 s step.
const AHEAD_MS: i64 = 800;
/// How long after the step the holder has to get there.
const AHEAD_WITHIN: Duration = Duration::from_secs(4);
/// How many times a `fork` fault forks its holder. A child's first call takes the common
/// path (where a missing fork check shows) only when it comes in the tick of the parent's
/// last ID, and a fork often outlasts the rest of a 1 ms tick: about one child in three did
/// at seed 12, and three forks let a broken check through one soak in three there.
const FORKS: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    fn slots() -> Vec<SlotKind> {
        [Kind::Gen, Kind::Serve, Kind::Holder]
            .into_iter()
            .flat_map(|kind| {
                [StoreKind::File, StoreKind::Etcd, StoreKind::Postgres]
                    .map(|store| SlotKind { kind, store })
            })
            .collect()
    }

    #[test]
    fn one_seed_gives_one_schedule_and_another_seed_another() {
        let every = Duration::from_secs(3);
        let a = plan(7, 120, every, 3, &slots(), &[]);
        assert_eq!(a, plan(7, 120, every, 3, &slots(), &[]));
        assert_ne!(a, plan(8, 120, every, 3, &slots(), &[]));
    }

    #[test]
    fn a_short_schedule_has_every_kind_and_none_skipped() {
        let p = plan(
            1,
            60,
            Duration::from_secs(2),
            3,
            &slots(),
            &[FaultKind::DiskFull],
        );
        let kinds: HashSet<FaultKind> = p.iter().map(|p| p.kind).collect();
        assert_eq!(kinds.len(), FaultKind::ALL.len() - 1, "{kinds:?}");
        assert!(!kinds.contains(&FaultKind::DiskFull));
        // Forks only on holders, quorum loss takes two distinct members.
        for f in &p {
            if f.kind == FaultKind::Fork {
                assert_eq!(slots()[f.slot].kind, Kind::Holder);
            }
            if f.kind == FaultKind::EtcdQuorum {
                assert!(f.members.len() == 2 && f.members[0] != f.members[1]);
            }
            if f.kind == FaultKind::AheadTakeover {
                assert_eq!(slots()[f.slot].store, StoreKind::File);
                assert_ne!(slots()[f.slot].kind, Kind::Gen);
            }
            if f.kind == FaultKind::ClockStep {
                if slots()[f.slot].store == StoreKind::File {
                    assert_eq!(f.hold, Duration::ZERO, "{f:?}");
                } else {
                    assert!(f.delta_s < 0 && f.hold == Duration::from_secs(3), "{f:?}");
                }
            }
            if f.kind == FaultKind::PauseTakeover {
                assert_ne!(slots()[f.slot].store, StoreKind::Postgres);
            }
            if f.kind == FaultKind::Pause {
                assert!(f.hold > Duration::from_secs(3), "a pause outlasts the TTL");
            }
        }
        assert!(p.windows(2).all(|w| w[0].at < w[1].at));
        assert!(p.last().unwrap().at < Duration::from_secs(57));
    }
}
