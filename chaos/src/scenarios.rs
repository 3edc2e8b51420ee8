//! The scripted scenarios: every way a duplicate has been found so far, replayed on purpose
//! before the random soak, each into its own table with a `BIGINT PRIMARY KEY`. A scenario
//! passes when its table took every ID (no primary-key conflict), every generator's IDs
//! increased and were stamped within the time bound, no process hung, and whatever the
//! scenario asserts besides held.
//!
//! | scenario | what happens |
//! |---|---|
//! | `deleted-dir` | a holder issues; its state directory is deleted; a second holder claims |
//! | `cleared-prefix` | the same on etcd: `etcdctl del --prefix` under a live holder |
//! | `paused-etcd` | `serve` on etcd (TTL 3 s) under load is stopped (SIGSTOP), the prefix cleared, a second `serve` claims its node, the first resumes 1.2–1.5 s after the stop |
//! | `paused-file` | the same with holders on the file store (the directory deleted) |
//! | `other-user` | root holders on the host-wide default directory; `nobody` (via `setpriv`) renames the holder's lock away and plants a reservation with a valid checksum; a second root holder starts. Passes only if `nobody` was refused |
//! | `raw-fork` | a holder forks with libc `fork` (5 times), raw `SYS_fork` and `_Fork` (10 times each); child and parent issue single IDs at once |
//! | `clock-back-file` | a holder issues on the file store; the wall clock steps back 1 s (the holder's locked clock does not follow: it slews); the state directory is deleted; a holder started after the step claims |
//! | `clock-back-etcd` | the same on etcd with a 2 s step, the prefix cleared |
//! | `ahead-paused-file` | a holder's wall clock steps 1 s forward (its locked clock follows), it is stopped (SIGSTOP), its state directory deleted, and a successor on an honest clock asks for its node (seed 4404's 158 duplicates). Passes only if the successor was refused while the holder was stopped, naming it, and took its node after |
//! | `ahead-paused-etcd` | the same on etcd (issue 34, case 4: 38,936 duplicates), the prefix cleared, the successor's clock 2 s behind. etcd's clock is the common one: passes only if the holder lost its claim for its lead over etcd's clock and the successor took its node |

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::procs::signal;
use crate::slots::{Pace, Proc, Spec, StoreArgs, start_holder, start_serve};
use crate::world::{RENAMED_SPEC, World};

/// Every scenario, in the order they run.
pub const ALL: [&str; 10] = [
    "deleted-dir",
    "cleared-prefix",
    "paused-etcd",
    "paused-file",
    "other-user",
    "raw-fork",
    "clock-back-file",
    "clock-back-etcd",
    "ahead-paused-file",
    "ahead-paused-etcd",
];

/// The table a scenario's IDs go to.
pub fn table_of(name: &str) -> String {
    format!("s_{}", name.replace('-', "_"))
}

/// How a scenario went.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub name: &'static str,
    pub passed: bool,
    pub ids: u64,
    pub conflicts: u64,
    /// What happened, for the report.
    pub notes: Vec<String>,
}

/// A scenario's own verdict besides the table's.
struct Ran {
    notes: Vec<String>,
    /// Anything the scenario asserts besides "no conflict" (`other-user`: nobody refused).
    failed: Vec<String>,
}

pub async fn run(world: &Arc<World>, name: &'static str) -> Outcome {
    let table = world.checker.table(&table_of(name));
    world.log.say(&format!("scenario {name}: start"));
    let ran = match name {
        "deleted-dir" => deleted(world, table, false).await,
        "cleared-prefix" => deleted(world, table, true).await,
        "paused-etcd" => paused(world, table, true).await,
        "paused-file" => paused(world, table, false).await,
        "other-user" => other_user(world, table).await,
        "raw-fork" => raw_fork(world, table).await,
        "clock-back-file" => clock_back(world, table, false).await,
        "clock-back-etcd" => clock_back(world, table, true).await,
        "ahead-paused-file" => ahead_paused(world, table, false).await,
        "ahead-paused-etcd" => ahead_paused(world, table, true).await,
        _ => Err(format!("no scenario {name}")),
    };
    let ran = ran.unwrap_or_else(|e| Ran {
        notes: vec![],
        failed: vec![format!("could not run: {e}")],
    });
    world.sync_db().await;
    world.checker.check_tenures(table);
    let phase = world.checker.phases()[table].clone();
    let conflicts = world
        .pg_results
        .lock()
        .expect("results")
        .conflict_counts
        .get(&table_of(name))
        .copied()
        .unwrap_or(0);
    let mut failed = ran.failed;
    if conflicts > 0 {
        failed.push(format!("{conflicts} primary-key conflicts"));
    }
    for (what, v) in [
        ("not increasing", &phase.order),
        ("stamped past the bound", &phase.time),
        ("overlapping tenures of a node", &phase.overlap),
        ("other", &phase.other),
    ] {
        if v.count > 0 {
            failed.push(format!("{} {what}: {}", v.count, v.samples.join("; ")));
        }
    }
    if phase.ids == 0 {
        failed.push("no ID was issued".into());
    }
    let passed = failed.is_empty();
    let mut notes = ran.notes;
    notes.extend(failed.iter().map(|f| format!("FAILED: {f}")));
    world.log.say(&format!(
        "scenario {name}: {} ({} IDs, {conflicts} conflicts){}",
        if passed { "PASS" } else { "FAIL" },
        phase.ids,
        notes
            .iter()
            .map(|n| format!("\n    {n}"))
            .collect::<String>()
    ));
    Outcome {
        name,
        passed,
        ids: phase.ids,
        conflicts,
        notes,
    }
}

fn spec(name: &str, table: usize, store: StoreArgs, node: &str) -> Spec {
    Spec {
        name: name.to_owned(),
        table,
        slot: None,
        clock: None,
        store,
        layout: "orders".into(),
        node: node.into(),
        env: Vec::new(),
    }
}

/// Waits (at most 60 s) until `p` has issued; its node.
async fn issuing(p: &Proc) -> Result<u64, String> {
    for _ in 0..1200 {
        if let Some(n) = p.node() {
            return Ok(n);
        }
        if p.is_finished() {
            return Err(format!("{} exited before issuing", p.name));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(format!("{} did not issue within 60 s", p.name))
}

fn events(world: &World, name: &str) -> String {
    std::fs::read_to_string(world.procs_dir.join(format!("{name}.events"))).unwrap_or_default()
}

/// The first event line containing `what` (e.g. a lost lease), if any.
fn event_with(world: &World, name: &str, what: &str) -> Option<String> {
    events(world, name)
        .lines()
        .find(|l| l.contains(what))
        .map(str::to_owned)
}

/// A store of the scenario's own: an etcd prefix, or a fresh state directory (0700).
fn own_store(world: &World, etcd: bool, name: &str) -> Result<StoreArgs, String> {
    if etcd {
        return Ok(StoreArgs::Etcd(format!("/chaos-{name}")));
    }
    world
        .disk
        .state_dir(&format!("scenario-{name}"))
        .map(StoreArgs::File)
        .map_err(|e| e.to_string())
}

/// Deletes a store's records under its holders: `rm -rf` of the directory (made again,
/// 0700), or `etcdctl del --prefix`.
async fn delete_records(world: &World, store: &StoreArgs) -> Result<(), String> {
    match store {
        StoreArgs::File(dir) => world.disk.delete(dir, true).map_err(|e| e.to_string()),
        StoreArgs::Etcd(prefix) => world
            .etcd
            .del_prefix(prefix, Duration::from_secs(10))
            .await
            .map(|_| ()),
        StoreArgs::DefaultFile => Err("the default directory is not the scenario's".into()),
        StoreArgs::Pg(_) => Err("no scenario deletes PostgreSQL records".into()),
    }
}

/// The failure of a scenario whose successor did not take the holder's node: it tested
/// nothing (issue 35: 5 of 22 clock-back runs passed so).
fn successor_on(node_a: u64, node_b: &Result<u64, String>) -> Vec<String> {
    match node_b {
        Ok(b) if *b == node_a => vec![],
        Ok(b) => vec![format!(
            "vacuous: the successor took node {b}, not the holder's node {node_a}"
        )],
        Err(e) => vec![format!(
            "vacuous: the successor never issued on the holder's node {node_a}: {e}"
        )],
    }
}

/// `deleted-dir` / `cleared-prefix`: records deleted under a live holder, a second claims its
/// node. Fails unless the successor issued on the holder's node.
async fn deleted(world: &Arc<World>, table: usize, etcd: bool) -> Result<Ran, String> {
    let tag = if etcd {
        "cleared-prefix"
    } else {
        "deleted-dir"
    };
    let store = own_store(world, etcd, "deleted")?;
    let a = start_holder(
        world,
        &spec(&format!("{tag}-a"), table, store.clone(), "auto"),
        Pace::Flat,
    )?;
    let node_a = issuing(&a).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    delete_records(world, &store).await?;
    let b = start_holder(
        world,
        &spec(&format!("{tag}-b"), table, store, &node_a.to_string()),
        Pace::Flat,
    )?;
    let node_b = issuing(&b).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (sa, sb) = (a.stop(world).await, b.stop(world).await);
    let lost = event_with(world, &format!("{tag}-a"), "e ");
    Ok(Ran {
        notes: vec![
            format!(
                "holder a: node {node_a}, then {}",
                lost.unwrap_or("no error".into())
            ),
            format!("holder b: node {node_b:?}"),
            format!("exits: a {sa}, b {sb}"),
        ],
        failed: successor_on(node_a, &node_b),
    })
}

/// `paused-etcd` / `paused-file`: a holder paused (SIGSTOP) for less than the TTL while its
/// records are deleted and a successor claims its node; then it resumes. Whether the two
/// issue in one tick after the resume depends on the scheduler, so this is done twice.
async fn paused(world: &Arc<World>, table: usize, etcd: bool) -> Result<Ran, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(world.seed ^ u64::from(etcd));
    let tag = if etcd { "paused-etcd" } else { "paused-file" };
    let store = own_store(world, etcd, "paused")?;
    let mut notes = Vec::new();
    for round in 0..2 {
        let pause = Duration::from_millis(rng.random_range(1200..=1500));
        let start = |name: &str| {
            let mut s = spec(&format!("{tag}-{round}{name}"), table, store.clone(), "0");
            if etcd {
                // The preset, and the same layout as a spec under other field names.
                s.layout = if name == "a" { "twitter" } else { RENAMED_SPEC }.into();
                // The service under load: eight HTTP and eight gRPC clients, back to back,
                // so that requests queue while it is stopped.
                start_serve(world, &s, Pace::Flat, 8)
            } else {
                start_holder(world, &s, Pace::Flat)
            }
        };
        let a = start("a")?;
        issuing(&a).await?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        if let Some(commands) = &a.commands {
            // Stop the holder while it issues without pause, as a pause lands in a busy
            // process: it goes on at once when it resumes, until a call is refused.
            let _ = commands.send("spin 20000000".into());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let stopped = tokio::time::Instant::now();
        signal(a.pid, Signal::SIGSTOP);
        delete_records(world, &store).await?;
        let b = start("b")?;
        tokio::time::sleep_until(stopped + pause).await;
        signal(a.pid, Signal::SIGCONT);
        let node_b = issuing(&b).await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let (sa, sb) = (a.stop(world).await, b.stop(world).await);
        notes.push(format!(
            "round {round}: a paused {} ms; b claimed node {node_b:?}; exits: a {sa}, b {sb}",
            pause.as_millis()
        ));
    }
    Ok(Ran {
        notes,
        failed: vec![],
    })
}

/// `other-user`: root holders on the host-wide default directory, `nobody` forges.
async fn other_user(world: &Arc<World>, table: usize) -> Result<Ran, String> {
    // A directory every user can reach, as /var/lib is; the state directory in it is made
    // by the holders themselves, with the library's default settings.
    let base = std::env::temp_dir().join(format!("monoflake-chaos-users-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir(&base).map_err(|e| format!("create {}: {e}", base.display()))?;
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| e.to_string())?;
    let forger = base.join("monoflake-chaos");
    std::fs::copy(&world.me, &forger).map_err(|e| format!("copy the forger: {e}"))?;
    std::fs::set_permissions(&forger, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| e.to_string())?;
    let state = base.join("state");
    let with_default = |name: &str| {
        let mut s = spec(name, table, StoreArgs::DefaultFile, "auto");
        s.env = vec![("MONOFLAKE_STATE_DIR".into(), state.display().to_string())];
        s
    };
    let result = async {
        let a = start_holder(world, &with_default("other-user-a"), Pace::Flat)?;
        let node_a = match issuing(&a).await {
            Ok(n) => n,
            Err(e) => {
                let status = a.stop(world).await;
                return Err(format!(
                    "{e} ({status}); {}",
                    events(world, "other-user-a").trim()
                ));
            }
        };
        let mode = std::fs::metadata(&state)
            .map(|m| format!("{:o}", m.permissions().mode() & 0o7777))
            .unwrap_or_else(|e| e.to_string());
        tokio::time::sleep(Duration::from_millis(300)).await;
        let forged = tokio::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&forger)
            .args(["forge", "--dir"])
            .arg(state.join("twitter"))
            .args(["--node", &node_a.to_string()])
            .output()
            .await
            .map_err(|e| format!("run setpriv: {e}"))?;
        let said = String::from_utf8_lossy(&forged.stdout)
            .trim()
            .replace('\n', "; ");
        let b = start_holder(world, &with_default("other-user-b"), Pace::Flat)?;
        let node_b = issuing(&b).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (sa, sb) = (a.stop(world).await, b.stop(world).await);
        let lost = event_with(world, "other-user-a", "e ");
        let mut failed = Vec::new();
        if forged.status.success() {
            failed.push(format!(
                "nobody wrote into root's state directory (mode {mode}): {said}"
            ));
        }
        if let Some(l) = &lost {
            failed.push(format!("nobody stopped root's holder: {l}"));
        }
        Ok(Ran {
            notes: vec![
                format!("state directory {} mode {mode}", state.display()),
                format!("nobody: {said}"),
                format!("root holder a: node {node_a}; b: node {node_b:?}"),
                format!("exits: a {sa}, b {sb}"),
            ],
            failed,
        })
    }
    .await;
    let _ = std::fs::remove_dir_all(&base);
    result
}

/// `raw-fork`: a holder forks three ways; child and parent issue at once.
async fn raw_fork(world: &Arc<World>, table: usize) -> Result<Ran, String> {
    let dir = world
        .disk
        .state_dir("scenario-fork")
        .map_err(|e| e.to_string())?;
    let h = start_holder(
        world,
        &spec("raw-fork", table, StoreArgs::File(dir), "auto"),
        Pace::Rate(world.rate),
    )?;
    issuing(&h).await?;
    let commands = h.commands.clone().ok_or("no commands")?;
    for (how, times) in [("libc", 5), ("raw", 10), ("_Fork", 10)] {
        for _ in 0..times {
            let _ = commands.send(format!("fork {how} 64"));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let status = h.stop(world).await;
    // Which children issued, by how they were made.
    let log = events(world, "raw-fork");
    let mut issued = std::collections::HashMap::new();
    for line in log.lines() {
        if let Some(rest) = line.split_once(" fork child ").map(|x| x.1)
            && let Some((pid, n)) = rest.split_once(": ")
        {
            let n: u64 = n.trim_end_matches(" IDs").parse().unwrap_or(0);
            issued.insert(pid.to_owned(), n);
        }
    }
    let mut by_how: std::collections::BTreeMap<String, (u32, u32, u64)> =
        std::collections::BTreeMap::new();
    for line in log.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        if let [_, "F", how, pid, ..] = words.as_slice() {
            let e = by_how.entry((*how).to_owned()).or_default();
            e.0 += 1;
            let n = issued.get(*pid).copied().unwrap_or(0);
            if n > 0 {
                e.1 += 1;
                e.2 += n;
            }
        }
    }
    let mut notes: Vec<String> = by_how
        .iter()
        .map(|(how, (forks, issuing, ids))| {
            format!("{how}: {forks} forks, {issuing} children issued IDs ({ids} in all)")
        })
        .collect();
    notes.push(format!("holder exit: {status}"));
    Ok(Ran {
        notes,
        failed: vec![],
    })
}

/// `clock-back-file` / `clock-back-etcd`: the wall clock steps back between the start of a
/// holder and the start of its successor, and the node's records are deleted in between. On
/// one host this is every process started before an NTP step back (its locked clock keeps
/// the old time and slews) beside every process started after it. The successor asks for the
/// holder's node; fails unless it issued on it.
async fn clock_back(world: &Arc<World>, table: usize, etcd: bool) -> Result<Ran, String> {
    if !world.clocks.available() {
        return Err("libfaketime is not installed".into());
    }
    let tag = if etcd {
        "clock-back-etcd"
    } else {
        "clock-back-file"
    };
    // Beyond the no-record wait (2.5 check intervals + max_lead): 350 ms on the file store,
    // 1.35 s on etcd with a 3 s TTL.
    let step_s = if etcd { -2 } else { -1 };
    let clock = if etcd { 101 } else { 100 };
    let store = own_store(world, etcd, "clock-back")?;
    let with_clock = |name: &str, node: &str| {
        let mut s = spec(&format!("{tag}-{name}"), table, store.clone(), node);
        s.clock = Some(clock);
        s
    };
    let a = start_holder(world, &with_clock("a", "auto"), Pace::Flat)?;
    let node_a = issuing(&a).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    world
        .clocks
        .step(clock, step_s)
        .map_err(|e| format!("step the clock: {e}"))?;
    // Long enough for the holder to compare with the wall clock (every second) and begin to
    // slew, and for a new process to read the stepped clock.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    delete_records(world, &store).await?;
    let b = start_holder(world, &with_clock("b", &node_a.to_string()), Pace::Flat)?;
    let node_b = issuing(&b).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (sa, sb) = (a.stop(world).await, b.stop(world).await);
    let failed = successor_on(node_a, &node_b);
    Ok(Ran {
        notes: vec![
            format!(
                "a: node {node_a}; the wall clock stepped {step_s:+} s; records deleted; b \
                 (started after the step) claimed node {node_b:?}"
            ),
            format!("exits: a {sa}, b {sb}"),
        ],
        failed,
    })
}

/// `ahead-paused-file` / `ahead-paused-etcd`: the sequence of seed 4404 (issue 39), and
/// issue 34's case 4 on etcd (a holder 5 s ahead, stopped, `etcdctl del --prefix`, a
/// successor: 38,936 IDs issued again before etcd's clock was read). A holder's wall clock
/// steps a second forward and its locked clock follows, so its IDs run ahead of every honest
/// clock; it is stopped (SIGSTOP), its records deleted, and a successor asks for its node; the
/// holder resumes 1.3 s later and is stopped.
///
/// * **File store.** No floor the successor could compute from its own (honest) clock is above
///   the holder's last IDs: on one host the node's host-wide claim refuses the successor while
///   the holder exists (it retries every 500 ms); resumed, the holder finds its claim lost,
///   writes back what it used and lets go; the successor then takes the node above it. Fails
///   unless the successor was refused naming the holder while it was stopped.
/// * **etcd.** No host-wide claim stands between them: etcd's clock (the `Date` of its
///   gateway) does — a holder is confirmed only within 250 ms of it, and a claimant that finds
///   no record starts above it. The successor's clock is 2 s behind, so that only that floor
///   lifts it above the holder. Fails unless the holder lost its claim for its lead over
///   etcd's clock (the step reached it).
///
/// Both fail unless the successor took the holder's node.
async fn ahead_paused(world: &Arc<World>, table: usize, etcd: bool) -> Result<Ran, String> {
    if !world.clocks.available() {
        return Err("libfaketime is not installed".into());
    }
    let tag = if etcd {
        "ahead-paused-etcd"
    } else {
        "ahead-paused-file"
    };
    let clock = if etcd { 103 } else { 102 };
    let store = own_store(world, etcd, "ahead-paused")?;
    let mut holder = spec(&format!("{tag}-a"), table, store.clone(), "auto");
    holder.clock = Some(clock);
    let a = start_holder(world, &holder, Pace::Flat)?;
    let node = issuing(&a).await?;
    world
        .clocks
        .step(clock, 1)
        .map_err(|e| format!("step the clock: {e}"))?;
    // The holder compares with the wall clock every second and steps forward with it (on
    // etcd it loses its claim at a check soon after, so it is stopped sooner).
    let settle_ms = if etcd { 1100 } else { 1500 };
    tokio::time::sleep(Duration::from_millis(settle_ms)).await;
    signal(a.pid, Signal::SIGSTOP);
    delete_records(world, &store).await?;
    let mut successor = spec(&format!("{tag}-b"), table, store.clone(), &node.to_string());
    if etcd {
        let behind = 104;
        world
            .clocks
            .step(behind, -2)
            .map_err(|e| format!("step the clock: {e}"))?;
        successor.clock = Some(behind);
    }
    let b = start_holder(world, &successor, Pace::Flat)?;
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let while_stopped = events(world, &successor.name);
    let holder_pid = a.pid;
    signal(a.pid, Signal::SIGCONT);
    tokio::time::sleep(Duration::from_millis(700)).await;
    let sa = a.stop(world).await;
    let node_b = issuing(&b).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let sb = b.stop(world).await;
    let mut failed = successor_on(node, &node_b);
    let first_events = |name: &str| {
        events(world, name)
            .lines()
            .take(3)
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let what = if etcd {
        let loss = event_with(world, &holder.name, "ahead of etcd's");
        if loss.is_none() {
            failed.push(format!(
                "vacuous: the holder never lost its claim for its lead over etcd's clock ({:?})",
                first_events(&holder.name)
            ));
        }
        format!(
            "prefix cleared; b, 2 s behind, claimed node {node_b:?}; a's loss: {}",
            loss.as_deref().unwrap_or("none")
        )
    } else {
        let refusal = format!("node {node} is held by process {holder_pid} of user");
        let refused = while_stopped.contains(&refusal);
        if !refused {
            failed.push(format!(
                "the successor was not refused while the holder was stopped ({:?})",
                first_events(&successor.name)
            ));
        }
        format!(
            "records deleted; b on an honest clock refused while a was stopped: {refused}; b \
             then claimed node {node_b:?}"
        )
    };
    Ok(Ran {
        notes: vec![
            format!("a: node {node}, its wall clock stepped +1 s, stopped; {what}"),
            format!("exits: a {sa}, b {sb}"),
        ],
        failed,
    })
}
