//! `monoflake-chaos run`: set up, the scenarios, the soak, the verdict, clean up.
//!
//! The soak's generators (one process per slot, restarted when it exits):
//!
//! | slot | process | store |
//! |---|---|---|
//! | gen-file-0, gen-file-1 | `monoflake gen` | the file store, on a tmpfs |
//! | gen-etcd-0, gen-etcd-1 | `monoflake gen` | etcd (3 members, TTL 3 s) |
//! | serve-file, serve-etcd | `monoflake serve` + 2 HTTP and 2 gRPC clients | file, etcd |
//! | holder-file, holder-etcd | `monoflake-chaos holder` (the library; PerThread's three ways in and `Leased`, one per start) | file, etcd |
//! | gen-pg, holder-pg | `monoflake gen`, the holder | PostgreSQL (`PgStore`) |
//!
//! Each runs one of three names for the Twitter layout (the preset, its spec, a spec with
//! other field names; the holder also the builder's `orders`), all making the same IDs, so
//! every ID goes into one table.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::sync::{mpsc, watch};

use crate::args::RunArgs;
use crate::checker::{Checker, PhaseStats, node_of, unix_ms};
use crate::etcd::Cluster;
use crate::faketime::Clocks;
use crate::fsys::Disk;
use crate::nemesis::{self, FaultKind, Nemesis, Record, SlotKind, StoreKind};
use crate::pg::{self, Results};
use crate::procs::{Log, Pids, now_ms, signal};
use crate::report::{self, Judged, KindRow};
use crate::scenarios;
use crate::slots::{Kind, Slot, StoreArgs, supervise};
use crate::world::{RENAMED_SPEC, TWITTER_SPEC, World};

/// The soak's slots: name, kind, node space (0 the file store, 1 etcd, 2 PostgreSQL).
const SLOTS: [(&str, Kind, usize); 10] = [
    ("gen-file-0", Kind::Gen, 0),
    ("gen-file-1", Kind::Gen, 0),
    ("gen-etcd-0", Kind::Gen, 1),
    ("gen-etcd-1", Kind::Gen, 1),
    ("serve-file", Kind::Serve, 0),
    ("serve-etcd", Kind::Serve, 1),
    ("holder-file", Kind::Holder, 0),
    ("holder-etcd", Kind::Holder, 1),
    ("gen-pg", Kind::Gen, 2),
    ("holder-pg", Kind::Holder, 2),
];

/// The soak's tables: the file store's generators, etcd's, PostgreSQL's.
pub const SOAK_TABLES: [&str; 3] = ["soak_file", "soak_etcd", "soak_pg"];

/// The PostgreSQL node store's table of node rows (in the checker's database).
const PG_NODES: &str = "chaos_nodes";

pub fn main(args: RunArgs) -> ExitCode {
    let seed = args.seed.unwrap_or_else(rand::random);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("chaos: no runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(run(args, seed));
    runtime.shutdown_timeout(Duration::from_secs(2));
    code
}

async fn run(args: RunArgs, seed: u64) -> ExitCode {
    let run_dir = args.out.join(format!("seed-{seed}"));
    let _ = std::fs::remove_dir_all(&run_dir);
    if let Err(e) = std::fs::create_dir_all(run_dir.join("procs")) {
        eprintln!("chaos: cannot create {}: {e}", run_dir.display());
        return ExitCode::FAILURE;
    }
    let log = match Log::create(&run_dir.join("run.log")) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("chaos: cannot create the log: {e}");
            return ExitCode::FAILURE;
        }
    };
    log.say(&format!(
        "chaos: seed {seed}: the scenarios, then {} s of faults (reproduce: bash \
         scripts/chaos.sh --seconds {} --seed {seed}); logs in {}",
        args.seconds,
        args.seconds,
        run_dir.display()
    ));
    let pids = Arc::new(Pids::new(run_dir.join("pids")));
    let disk = match Disk::mount(run_dir.join("fs")) {
        Ok(d) => Arc::new(d),
        Err(e) => {
            log.say(&format!(
                "chaos: cannot make {}: {e}",
                run_dir.join("fs").display()
            ));
            return ExitCode::FAILURE;
        }
    };
    let deadline = Duration::from_secs(args.seconds + 600);
    let body = tokio::time::timeout(deadline, body(&args, seed, &run_dir, log, &pids, &disk));
    let outcome = tokio::select! {
        r = body => match r {
            Ok(r) => r,
            Err(_) => Err(format!("the run did not finish within {} s: hung", deadline.as_secs())),
        },
        s = interrupted() => Err(format!("interrupted by {s}")),
    };
    // Whatever happened: nothing the run started outlives it.
    let leftovers = pids.kill_all();
    disk.unmount();
    let _ = std::fs::remove_dir_all(
        std::env::temp_dir().join(format!("monoflake-chaos-pg-{}", std::process::id())),
    );
    let (mut report, passed) = match outcome {
        Ok((report, passed)) => (report, passed),
        Err(why) => (
            format!(
                "chaos: FAILED: {why}\nchaos: seed {seed}, 0 IDs, 0 faults (0 kinds), 0 \
                 conflicts, max outage 0 ms (the run did not finish)\n"
            ),
            false,
        ),
    };
    let passed = passed && leftovers.is_empty();
    if !leftovers.is_empty() {
        let _ = writeln!(
            report,
            "chaos: FAILED: processes still running at the end were killed: {}",
            leftovers.join(", ")
        );
    }
    let _ = std::fs::write(run_dir.join("report.txt"), &report);
    if passed && !args.keep {
        let _ = std::fs::remove_dir_all(&run_dir);
    } else {
        eprintln!("chaos: the run's logs are in {}", run_dir.display());
    }
    // The report ends with the one line that sums the run up.
    print!("{report}");
    if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

async fn interrupted() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
        _ = hup.recv() => "SIGHUP",
    }
}

/// The run proper: `(report, passed)`.
async fn body(
    args: &RunArgs,
    seed: u64,
    run_dir: &Path,
    log: Log,
    pids: &Arc<Pids>,
    disk: &Arc<Disk>,
) -> Result<(String, bool), String> {
    let procs_dir = run_dir.join("procs");
    let clocks_dir = run_dir.join("clocks");
    std::fs::create_dir_all(&clocks_dir).map_err(|e| e.to_string())?;
    let clocks = Arc::new(Clocks::new(&clocks_dir));
    let mut skip = Vec::new();
    if let Some(why) = &disk.skipped {
        log.say(&format!(
            "chaos: WARNING: {why}: the disk-full fault is SKIPPED in this run (it needs root \
             and a tmpfs); the file store lives in a plain directory"
        ));
        skip.push(FaultKind::DiskFull);
    }
    if !clocks.available() {
        log.say(
            "chaos: WARNING: libfaketime is not installed (apt-get install faketime): the \
             clock-step fault is SKIPPED in this run",
        );
        skip.push(FaultKind::ClockStep);
    }
    let selected: Vec<&'static str> = match args.scenarios.as_deref() {
        None => scenarios::ALL.to_vec(),
        Some("none") => Vec::new(),
        Some(list) => {
            let mut v = Vec::new();
            for name in list.split(',') {
                let known = scenarios::ALL
                    .iter()
                    .find(|s| **s == name)
                    .ok_or_else(|| format!("no scenario {name:?} ({:?})", scenarios::ALL))?;
                v.push(*known);
            }
            v
        }
    };
    let mut tables: Vec<String> = selected.iter().map(|s| scenarios::table_of(s)).collect();
    // Node IDs are coordinated only among processes sharing a store: the file store's and
    // etcd's generators are two node spaces, each with its own table.
    tables.extend(SOAK_TABLES.map(String::from));

    let server = pg::Server::start(&log, pids).await?;
    let client = server.connect().await?;
    pg::create_tables(&client, &tables).await?;
    let (tx, rx) = mpsc::unbounded_channel();
    let results = Arc::new(Mutex::new(Results::default()));
    let writer = tokio::spawn(pg::writer(client, tables.clone(), rx, Arc::clone(&results)));
    let etcd = Cluster::start(run_dir.join("etcd"), &log, pids).await?;
    let me = std::env::current_exe().map_err(|e| format!("which binary am I: {e}"))?;
    let monoflake = std::fs::canonicalize(&args.monoflake).map_err(|e| {
        format!(
            "{}: {e} (build it: cargo build -p monoflake-cli --features etcd)",
            args.monoflake.display()
        )
    })?;
    let world = Arc::new(World {
        run_dir: run_dir.to_owned(),
        procs_dir: procs_dir.clone(),
        monoflake,
        me,
        log,
        pids: Arc::clone(pids),
        checker: Checker::new(
            tx.clone(),
            Arc::clone(&clocks),
            procs_dir,
            args.outage_ms as i64,
            tables.clone(),
            SLOTS.len(),
        ),
        clocks,
        etcd,
        disk: Arc::clone(disk),
        rate: args.rate,
        ttl: args.ttl,
        seed,
        pg_results: Arc::clone(&results),
        pg_url: format!("postgres://chaos@127.0.0.1:{}/postgres", server.port),
        flavours: Mutex::new(BTreeSet::new()),
        pg: tx,
        streams: AtomicU64::new(0),
    });
    etcd_feature(&world).await?;

    let mut outcomes = Vec::new();
    for name in &selected {
        outcomes.push(scenarios::run(&world, name).await);
    }
    let soak = soak(&world, args, &skip).await;
    world.sync_db().await;
    for t in SOAK_TABLES {
        world.checker.check_tenures(world.checker.table(t));
    }
    world.checker.flush_logs();
    world.etcd.stop(pids).await;
    writer.abort();
    server.stop(pids, &run_dir.join("postgres.log")).await;
    let soak = soak?;
    let results = results.lock().expect("results").clone();
    Ok(verdict(&world, args, seed, &outcomes, &soak, &results))
}

/// The CLI must have the etcd backend: one ID from the run's cluster.
async fn etcd_feature(world: &World) -> Result<(), String> {
    let out = tokio::process::Command::new(&world.monoflake)
        .args([
            "gen",
            "-n",
            "1",
            "--backend",
            "etcd",
            "--etcd-prefix",
            "/chaos-probe",
        ])
        .args([
            "--etcd-endpoints",
            &world.etcd.endpoints,
            "--lease-ttl",
            "2",
        ])
        .output()
        .await
        .map_err(|e| format!("run {}: {e}", world.monoflake.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{} cannot issue from etcd ({}): build it with `--features etcd`",
            world.monoflake.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// What the soak saw.
#[derive(Debug)]
struct Soak {
    records: Vec<Record>,
    skipped: Vec<String>,
    judged: Vec<Judged>,
    rows: Vec<KindRow>,
    slot_names: Vec<String>,
    /// Slots that never issued before the faults began.
    not_started: Vec<String>,
    unfinished_faults: usize,
}

async fn soak(world: &Arc<World>, args: &RunArgs, skip: &[FaultKind]) -> Result<Soak, String> {
    let state_dir = world
        .disk
        .state_dir("state")
        .map_err(|e| format!("the state directory: {e}"))?;
    let prefix = "/chaos".to_owned();
    let tables = SOAK_TABLES.map(|t| world.checker.table(t));
    let slots: Vec<Arc<Slot>> = SLOTS
        .iter()
        .enumerate()
        .map(|(idx, &(name, kind, space))| {
            let mut layouts = vec![
                "twitter".to_owned(),
                TWITTER_SPEC.into(),
                RENAMED_SPEC.into(),
            ];
            if kind == Kind::Holder {
                layouts.push("orders".into());
            }
            Arc::new(Slot::new(
                idx,
                name.into(),
                kind,
                match space {
                    0 => StoreArgs::File(state_dir.clone()),
                    1 => StoreArgs::Etcd(prefix.clone()),
                    _ => StoreArgs::Pg(PG_NODES.into()),
                },
                layouts,
            ))
        })
        .collect();
    world
        .log
        .say(&format!("soak: starting {} generators", slots.len()));
    let (stop_tx, stop_rx) = watch::channel(false);
    let supervisors: Vec<_> = slots
        .iter()
        .map(|s| {
            tokio::spawn(supervise(
                Arc::clone(world),
                Arc::clone(s),
                tables[s.store.space()],
                stop_rx.clone(),
            ))
        })
        .collect();
    // Every slot issuing before the first fault (at most a minute).
    for _ in 0..600 {
        if slots
            .iter()
            .all(|s| s.live().is_some_and(|l| l.node().is_some()))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let not_started: Vec<String> = slots
        .iter()
        .filter(|s| s.live().is_none_or(|l| l.node().is_none()))
        .map(|s| s.name.clone())
        .collect();
    world.checker.track_outages();
    let soak_start = now_ms();
    let t0 = tokio::time::Instant::now();
    let kinds: Vec<SlotKind> = slots
        .iter()
        .map(|s| SlotKind {
            kind: s.kind,
            store: match s.store {
                StoreArgs::Etcd(_) => StoreKind::Etcd,
                StoreArgs::Pg(_) => StoreKind::Postgres,
                StoreArgs::File(_) | StoreArgs::DefaultFile => StoreKind::File,
            },
        })
        .collect();
    let plan = nemesis::plan(
        world.seed,
        args.seconds,
        Duration::from_millis(args.fault_every_ms),
        args.ttl,
        &kinds,
        skip,
    );
    let schedule: String = plan
        .iter()
        .map(|p| {
            format!(
                "+{:.3}s {} slot {} members {:?} hold {} ms delta {:+} s flag {} how {}\n",
                p.at.as_secs_f64(),
                p.kind.name(),
                slots[p.slot].name,
                p.members,
                p.hold.as_millis(),
                p.delta_s,
                p.flag,
                p.how
            )
        })
        .collect();
    let _ = std::fs::write(world.run_dir.join("schedule.txt"), schedule);
    world.log.say(&format!(
        "soak: every generator issuing; {} faults planned over {} s",
        plan.len(),
        args.seconds
    ));
    let nemesis = Arc::new(
        Nemesis::new(
            Arc::clone(world),
            slots.clone(),
            state_dir.clone(),
            prefix,
            tables,
        )
        .map_err(|e| format!("faults.log: {e}"))?,
    );
    let tasks: Vec<_> = plan
        .into_iter()
        .map(|p| {
            let n = Arc::clone(&nemesis);
            tokio::spawn(async move {
                tokio::time::sleep_until(t0 + p.at).await;
                n.apply(p).await;
            })
        })
        .collect();
    tokio::time::sleep_until(t0 + Duration::from_secs(args.seconds)).await;
    let mut unfinished_faults = 0;
    for t in tasks {
        let abort = t.abort_handle();
        if tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .is_err()
        {
            abort.abort();
            unfinished_faults += 1;
        }
    }
    // Heal whatever is still broken, then every generator must issue again.
    if let Err(e) = world.etcd.start_all(&world.log, &world.pids).await {
        world.log.say(&format!("soak: cannot restart etcd: {e}"));
    }
    for s in &slots {
        if let Some(l) = s.live() {
            signal(l.pid, Signal::SIGCONT);
        }
    }
    let healed = now_ms();
    let recover_by = tokio::time::Instant::now() + Duration::from_millis(args.recovery_ms);
    while tokio::time::Instant::now() < recover_by {
        let last = world.checker.last_ok();
        if last.iter().all(|l| l.is_some_and(|t| t > healed)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A second of normal issuing after the last recovery.
    tokio::time::sleep(Duration::from_millis(args.outage_ms)).await;
    let end = now_ms();
    let outages = world.checker.close_outages(soak_start, end);
    world
        .log
        .say("soak: faults over, every generator checked; stopping them");
    let _ = stop_tx.send(true);
    for s in supervisors {
        let _ = s.await;
    }
    let records = nemesis.records().await;
    let judged = report::judge(
        &outages,
        &records,
        args.outage_ms as i64,
        args.recovery_ms as i64,
        end,
    );
    let rows = report::per_kind(
        &records,
        &outages,
        args.outage_ms as i64,
        args.recovery_ms as i64,
        end,
    );
    Ok(Soak {
        records,
        skipped: nemesis.skipped(),
        judged,
        rows,
        slot_names: slots.iter().map(|s| s.name.clone()).collect(),
        not_started,
        unfinished_faults,
    })
}

/// The report, and whether every invariant held.
fn verdict(
    world: &World,
    args: &RunArgs,
    seed: u64,
    outcomes: &[scenarios::Outcome],
    soak: &Soak,
    results: &Results,
) -> (String, bool) {
    let mut r = String::new();
    let mut failures: Vec<String> = Vec::new();
    let phases = world.checker.phases();
    let names = world.checker.source_names();
    let name = |src: i32| {
        names
            .get(src as usize)
            .cloned()
            .unwrap_or_else(|| format!("src {src}"))
    };

    let _ = writeln!(r, "\n== scenarios (every duplicate found so far, replayed)");
    for o in outcomes {
        let _ = writeln!(
            r,
            "{:<15} {}  {:>9} IDs  {:>7} conflicts",
            o.name,
            if o.passed { "PASS" } else { "FAIL" },
            o.ids,
            o.conflicts
        );
        for n in &o.notes {
            let _ = writeln!(r, "                  {n}");
        }
        if !o.passed {
            failures.push(format!("scenario {} failed", o.name));
        }
    }

    let mut soak_phase = PhaseStats::default();
    let mut soak_conflicts = 0;
    for t in SOAK_TABLES {
        let p = &phases[world.checker.table(t)];
        soak_phase.ids += p.ids;
        for (all, one) in [
            (&mut soak_phase.order, &p.order),
            (&mut soak_phase.time, &p.time),
            (&mut soak_phase.overlap, &p.overlap),
            (&mut soak_phase.other, &p.other),
        ] {
            all.count += one.count;
            all.samples.extend(one.samples.iter().cloned());
        }
        soak_conflicts += results.conflict_counts.get(t).copied().unwrap_or(0);
    }
    let kinds: BTreeSet<FaultKind> = soak.records.iter().map(|r| r.kind).collect();
    let _ = writeln!(
        r,
        "\n== soak: {} s, {} generators",
        args.seconds,
        soak.slot_names.len()
    );
    let _ = writeln!(
        r,
        "{} IDs, {} primary-key conflicts, {} faults of {} kinds ({} planned faults skipped)",
        soak_phase.ids,
        soak_conflicts,
        soak.records.len(),
        kinds.len(),
        soak.skipped.len()
    );
    let missing: Vec<&str> = FaultKind::ALL
        .iter()
        .filter(|k| !kinds.contains(k))
        .map(|k| k.name())
        .collect();
    if !missing.is_empty() {
        let _ = writeln!(
            r,
            "fault kinds not applied in this run: {}",
            missing.join(", ")
        );
    }
    let _ = writeln!(r, "{}", combinations(&soak.records));
    let unchecked = world.checker.unchecked_counts();
    let _ = writeln!(
        r,
        "issued but not checkable (counted): {}",
        if unchecked.is_empty() {
            "none".to_owned()
        } else {
            unchecked
                .iter()
                .map(|(what, n)| format!("{n} {what}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    let flavours = world.flavours.lock().expect("flavours").clone();
    let _ = writeln!(
        r,
        "holder flavours run: {} (of {})",
        flavours.iter().copied().collect::<Vec<_>>().join(", "),
        crate::slots::HOLDER_FLAVOURS.join(", ")
    );
    if let Some(why) = &world.disk.skipped {
        let _ = writeln!(r, "SKIPPED: disk-full ({why})");
    }
    if !world.clocks.available() {
        let _ = writeln!(r, "SKIPPED: clock-step (libfaketime is not installed)");
    }
    let _ = writeln!(
        r,
        "\noutages per fault kind (each fault × each generator it could affect; an outage is \
         {} ms or more without an ID; 0 when none):",
        args.outage_ms
    );
    let _ = writeln!(
        r,
        "{:<15} {:>6} {:>7} {:>8} {:>8} {:>8} {:>8}",
        "fault", "faults", "pairs", "outages", "p50 ms", "p99 ms", "max ms"
    );
    for row in &soak.rows {
        let _ = writeln!(
            r,
            "{:<15} {:>6} {:>7} {:>8} {:>8} {:>8} {:>8}",
            row.kind.name(),
            row.faults,
            row.pairs,
            row.with_outage,
            row.p50,
            row.p99,
            row.max
        );
    }
    let _ = writeln!(r, "\n{}", effects(soak, args, &mut failures));
    let max_outage = soak.judged.iter().map(|j| j.duration_ms).max().unwrap_or(0);
    let bad: Vec<&Judged> = soak.judged.iter().filter(|j| !j.ok()).collect();
    let _ = writeln!(
        r,
        "{} outages in all, the longest {max_outage} ms; {} not explained by a fault, not \
         bounded, or still open at the end",
        soak.judged.len(),
        bad.len()
    );
    for j in &bad {
        let _ = writeln!(
            r,
            "  {} out from {} for {} ms: {}",
            soak.slot_names[j.outage.slot],
            j.outage.start_ms,
            j.duration_ms,
            match (j.outage.end_ms, j.explained, j.bounded) {
                (None, _, _) => "still out at the end: hung",
                (_, false, _) => "no fault explains it",
                _ => "it outlasted the faults that explain it by more than the recovery bound",
            }
        );
    }
    if !bad.is_empty() {
        failures.push(format!(
            "{} outages unexplained, unbounded or open",
            bad.len()
        ));
    }
    if !soak.not_started.is_empty() {
        failures.push(format!(
            "generators that never issued: {}",
            soak.not_started.join(", ")
        ));
    }
    if soak.unfinished_faults > 0 {
        failures.push(format!("{} faults did not finish", soak.unfinished_faults));
    }
    if soak_phase.ids == 0 {
        failures.push("the soak issued no ID".into());
    }
    for (what, v) in [
        ("IDs not increasing", &soak_phase.order),
        ("IDs stamped past the time bound", &soak_phase.time),
        (
            "overlapping tenures of a node (two holders at once)",
            &soak_phase.overlap,
        ),
        ("other violations", &soak_phase.other),
    ] {
        if v.count > 0 {
            let _ = writeln!(r, "\n{} {what}:", v.count);
            for s in &v.samples {
                let _ = writeln!(r, "  {s}");
            }
            failures.push(format!("soak: {} {what}", v.count));
        }
    }
    if soak_conflicts > 0 {
        failures.push(format!("soak: {soak_conflicts} primary-key conflicts"));
    }
    let total_conflicts: u64 = results.conflict_counts.values().sum();
    if !results.conflicts.is_empty() {
        let mut tsv = String::from("table\tid\tunix_ms\tnode\tsource\tn\tother_source\tother_n\n");
        for c in &results.conflicts {
            let _ = writeln!(
                tsv,
                "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
                c.table,
                c.id,
                unix_ms(c.id as u64),
                node_of(c.id as u64),
                name(c.src),
                c.n,
                name(c.other_src),
                c.other_n
            );
        }
        let _ = std::fs::write(world.run_dir.join("conflicts.tsv"), tsv);
        let mut pairs: std::collections::BTreeMap<(String, String, String), u64> =
            std::collections::BTreeMap::new();
        for c in &results.conflicts {
            *pairs
                .entry((c.table.clone(), name(c.other_src), name(c.src)))
                .or_default() += 1;
        }
        let _ = writeln!(r, "\nprimary-key conflicts per table:");
        for (t, n) in &results.conflict_counts {
            let _ = writeln!(r, "  {t}: {n}");
        }
        let _ = writeln!(
            r,
            "the first {} (in conflicts.tsv), by the source that had the ID and the one \
             turned away:",
            results.conflicts.len()
        );
        for ((t, a, b), n) in pairs {
            let _ = writeln!(r, "  {t}: {a} and {b}: {n}");
        }
    }
    if !results.errors.is_empty() {
        failures.push(format!("{} database errors", results.errors.len()));
        let _ = writeln!(r, "\ndatabase errors:");
        for e in results.errors.iter().take(10) {
            let _ = writeln!(r, "  {e}");
        }
    }
    let inserted: u64 = results.inserted.values().sum();
    let observed: u64 = phases.iter().map(|p| p.ids).sum();
    if inserted + total_conflicts != observed {
        failures.push(format!(
            "the database holds {inserted} IDs and {total_conflicts} conflicts, but {observed} \
             were observed"
        ));
    }
    let passed = failures.is_empty();
    if !passed {
        let _ = writeln!(r, "\nchaos: FAILED (seed {seed}):");
        for f in &failures {
            let _ = writeln!(r, "  {f}");
        }
        let _ = writeln!(
            r,
            "reproduce: bash scripts/chaos.sh --seconds {} --seed {seed}; logs: {}",
            args.seconds,
            world.run_dir.display()
        );
    }
    let _ = writeln!(
        r,
        "chaos: seed {seed}, {observed} IDs, {} faults ({} kinds), {total_conflicts} conflicts, \
         max outage {max_outage} ms",
        soak.records.len(),
        kinds.len()
    );
    (r, passed)
}

/// Each fault kind's proof that it bit, as its targets showed it (a kill's exit status, a
/// pause's silence, a full disk's failed reservation writes and the outage they caused…): a
/// line per kind, and a failure for a kind that took effect in none of its faults. A fault
/// that did nothing tests nothing (a disk-full of 1-4 s under a 5 s reservation window caused
/// no outage in any run before, and the failed-write path never ran).
fn effects(soak: &Soak, args: &RunArgs, failures: &mut Vec<String>) -> String {
    // A full disk proves itself twice: the holder's failed writes, and an outage of the
    // holder's slot that it explains (began in its window, as the outage judge has it).
    let (outage_ms, recovery_ms) = (args.outage_ms as i64, args.recovery_ms as i64);
    let shown = |rec: &Record| -> Result<String, String> {
        let proof = rec.effect.clone()?;
        if rec.kind != FaultKind::DiskFull {
            return Ok(proof);
        }
        let outage = soak
            .judged
            .iter()
            .map(|j| &j.outage)
            .filter(|o| {
                o.slot == rec.slot
                    && rec.start_ms <= o.start_ms + outage_ms
                    && rec.end_ms + recovery_ms >= o.start_ms
            })
            .map(|o| o.end_ms.unwrap_or(o.start_ms) - o.start_ms)
            .max();
        match outage {
            Some(ms) => Ok(format!(
                "{proof}; an outage of {} ({ms} ms) it explains",
                soak.slot_names[rec.slot]
            )),
            None => Err(format!(
                "{proof}, but no outage of {} that it explains",
                soak.slot_names[rec.slot]
            )),
        }
    };
    let mut out =
        String::from("fault effects (each fault's proof that it bit, as its target showed it):\n");
    for kind in FaultKind::ALL {
        let proofs: Vec<Result<String, String>> = soak
            .records
            .iter()
            .filter(|r| r.kind == kind)
            .map(shown)
            .collect();
        if proofs.is_empty() {
            continue;
        }
        let ok = proofs.iter().filter(|p| p.is_ok()).count();
        let sample = proofs
            .iter()
            .find_map(|p| p.as_ref().ok())
            .map_or_else(String::new, |p| format!(": {p}"));
        let _ = writeln!(out, "{:<15} {ok} of {}{sample}", kind.name(), proofs.len());
        for p in proofs.iter().filter_map(|p| p.as_ref().err()) {
            let _ = writeln!(out, "                  NOT SEEN: {p}");
        }
        if ok == 0 {
            failures.push(format!(
                "fault kind {} took effect in none of its {} faults",
                kind.name(),
                proofs.len()
            ));
        }
    }
    out
}

/// Which fault kinds were applied in one window (their spans overlapping in time), the
/// combinations that produce duplicates when a protocol has a gap: a line for the report.
fn combinations(records: &[Record]) -> String {
    let mut pairs: BTreeSet<(&str, &str)> = BTreeSet::new();
    let mut triples = 0;
    for (i, a) in records.iter().enumerate() {
        let mut with: BTreeSet<&str> = BTreeSet::new();
        for (j, b) in records.iter().enumerate() {
            if i != j && a.start_ms <= b.end_ms && b.start_ms <= a.end_ms && a.kind != b.kind {
                let (x, y) = (a.kind.name(), b.kind.name());
                pairs.insert(if x < y { (x, y) } else { (y, x) });
                with.insert(y);
            }
        }
        if with.len() >= 2 {
            triples += 1;
        }
    }
    let kinds = FaultKind::ALL.len();
    format!(
        "fault combinations covered (kinds overlapping in time): {} of {} pairs{}{}; {} faults \
         overlapped two or more other kinds",
        pairs.len(),
        kinds * (kinds - 1) / 2,
        if pairs.is_empty() { "" } else { ": " },
        pairs
            .iter()
            .map(|(a, b)| format!("{a}+{b}"))
            .collect::<Vec<_>>()
            .join(", "),
        triples
    )
}
