//! The generator processes, and the supervisors that keep the soak's slots running.
//!
//! Three kinds, as users run them:
//! * `monoflake gen -n <huge>`: its standard output is read at the slot's pace through a
//!   pipe shrunk to 4 KiB, so a stalled `gen` shows as silence within ~200 IDs, not a 64 KiB
//!   pipe later (gen itself buffers up to 64 KiB of IDs it has already issued);
//! * `monoflake serve` with HTTP and gRPC clients (two of each, paced, 1–64 IDs a request);
//! * `monoflake-chaos holder`, driven with `ids K` commands at the slot's pace.
//!
//! A slot's supervisor restarts its process whenever it exits (after 200 ms, doubling to
//! 2 s while it keeps failing at once), each time with one of the slot's layouts, chosen by
//! the seed: a preset, a spec of the same bits and epoch under other field names, or the
//! builder under another name.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::Signal;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::checker::{Source, Src, node_of};
use crate::clients::{Grpc, Http, Refused};
use crate::procs::{now_ms, signal};
use crate::world::World;

/// How long a process may take to exit after SIGTERM (or, for the holder, the end of its
/// input) before it is reported as hung and killed: the service drains for 3 s at most,
/// then writes its final reservation.
pub const STOP_BOUND: Duration = Duration::from_secs(15);
/// The largest request a service client makes.
const MAX_COUNT: u64 = 64;

/// Where a process keeps its node claims.
#[derive(Debug, Clone)]
pub enum StoreArgs {
    /// `--state-dir DIR`.
    File(PathBuf),
    /// The host-wide default (`$MONOFLAKE_STATE_DIR` in `env`).
    DefaultFile,
    /// The run's etcd cluster, under this prefix.
    Etcd(String),
    /// The run's PostgreSQL server (the checker's), this table of node rows.
    Pg(String),
}

impl StoreArgs {
    pub fn is_etcd(&self) -> bool {
        matches!(self, StoreArgs::Etcd(_))
    }

    /// The node space (and soak table) of the store: 0 the file store's, 1 etcd's,
    /// 2 PostgreSQL's. Node IDs are coordinated only within one.
    pub fn space(&self) -> usize {
        match self {
            StoreArgs::File(_) | StoreArgs::DefaultFile => 0,
            StoreArgs::Etcd(_) => 1,
            StoreArgs::Pg(_) => 2,
        }
    }

    /// The flags `monoflake gen` and `serve` take, and `monoflake-chaos holder` too.
    fn cli_args(&self, world: &World) -> Vec<String> {
        let mut args: Vec<String> = vec!["--backend".into()];
        match self {
            StoreArgs::File(dir) => {
                args.extend([
                    "file".into(),
                    "--state-dir".into(),
                    dir.display().to_string(),
                ]);
            }
            StoreArgs::DefaultFile => args.push("file".into()),
            StoreArgs::Etcd(prefix) => args.extend([
                "etcd".into(),
                "--etcd-endpoints".into(),
                world.etcd.endpoints.clone(),
                "--etcd-prefix".into(),
                prefix.clone(),
                "--lease-ttl".into(),
                world.ttl.to_string(),
            ]),
            StoreArgs::Pg(table) => args.extend([
                "postgres".into(),
                "--pg-url".into(),
                world.pg_url.clone(),
                "--pg-table".into(),
                table.clone(),
                "--lease-ttl".into(),
                world.ttl.to_string(),
            ]),
        }
        args
    }
}

/// What to start.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Unique: names the process's logs and its source in the database.
    pub name: String,
    pub table: usize,
    /// The soak slot (outages are tracked per slot).
    pub slot: Option<usize>,
    /// Whose clock (libfaketime) it runs under.
    pub clock: Option<usize>,
    pub store: StoreArgs,
    pub layout: String,
    /// `auto` or a number.
    pub node: String,
    pub env: Vec<(String, String)>,
}

/// How fast a process is asked for IDs.
#[derive(Debug, Clone, Copy)]
pub enum Pace {
    /// About this many IDs a second.
    Rate(u64),
    /// As fast as the process answers (the scenarios' critical windows).
    Flat,
}

/// What a holder said of its generator's store counters (its last `s` line), and how many
/// forks it reported (`F` lines): a fault's proof that it reached the holder.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct HolderCounters {
    pub reservation_writes: u64,
    pub reservation_failures: u64,
    pub lease_losses: u64,
    /// `F` lines: forks made and reaped.
    pub forks: u64,
    /// The last `s` line's own values (writes, failures, losses): a holder that rebuilds its
    /// generator (its lease lost) reports from zero again, and the totals above go on.
    last: [u64; 3],
}

impl HolderCounters {
    /// Reads an `s` line's `name=value` words into these counters: each a total over the
    /// holder's life, across generators rebuilt (a fault's before/after readings may
    /// straddle a rebuild: a disk-full's failed writes were lost so, seed 117450690795921).
    fn read(&mut self, words: &str) {
        for word in words.split_whitespace() {
            let Some((name, value)) = word.split_once('=') else {
                continue;
            };
            let Ok(value) = value.parse() else { continue };
            let (total, last) = match name {
                "reservation_writes" => (&mut self.reservation_writes, &mut self.last[0]),
                "reservation_failures" => (&mut self.reservation_failures, &mut self.last[1]),
                "lease_losses" => (&mut self.lease_losses, &mut self.last[2]),
                _ => continue,
            };
            // Below the last value: a new generator's count, from zero.
            *total += if value >= *last { value - *last } else { value };
            *last = value;
        }
    }

    /// A generator (re)built (`ready` or `r`): its counts start from zero.
    fn rebuilt(&mut self) {
        self.last = [0; 3];
    }
}

#[cfg(test)]
mod counter_tests {
    use super::HolderCounters;

    /// A generator rebuilt mid-fault reports from zero: the totals keep what the first one
    /// counted.
    #[test]
    fn counters_go_on_across_a_rebuilt_generator() {
        let mut c = HolderCounters::default();
        c.read("reservation_writes=2 reservation_failures=0 lease_losses=0 issued=10");
        c.read("reservation_writes=2 reservation_failures=7 lease_losses=0 issued=20");
        c.read("reservation_writes=1 reservation_failures=0 lease_losses=0 issued=5");
        c.read("reservation_writes=3 reservation_failures=1 lease_losses=1 issued=9");
        assert_eq!(
            (c.reservation_writes, c.reservation_failures, c.lease_losses),
            (2 + 3, 7 + 1, 1)
        );
        // Said by an `r` line, a rebuild counts the new generator's first report whole.
        c.rebuilt();
        c.read("reservation_writes=4 reservation_failures=0 lease_losses=0 issued=1");
        assert_eq!((c.reservation_writes, c.reservation_failures), (5 + 4, 8));
    }
}

/// A started process.
#[derive(Debug)]
pub struct Proc {
    pub name: String,
    pub pid: i32,
    pub table: usize,
    /// The last node its IDs carried, plus one (0: none yet).
    pub node: Arc<AtomicU64>,
    /// Commands injected into a holder's input (fork…).
    pub commands: Option<mpsc::UnboundedSender<String>>,
    /// A holder's counters, as it last reported them.
    pub counters: Arc<Mutex<HolderCounters>>,
    /// A holder's first ID (0: none yet).
    pub first: Arc<AtomicU64>,
    /// Set to stop pacing (a stop drains at full speed) and to end clients.
    stopping: Arc<AtomicBool>,
    /// Ends when the process has exited and everything it wrote was read: its exit status.
    task: JoinHandle<String>,
}

impl Proc {
    pub fn node(&self) -> Option<u64> {
        self.node.load(Ordering::Relaxed).checked_sub(1)
    }

    /// A holder's first ID, once it has issued one.
    pub fn first_id(&self) -> Option<u64> {
        Some(self.first.load(Ordering::Relaxed)).filter(|&id| id != 0)
    }

    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Waits for the process to exit by itself.
    pub async fn wait(self) -> String {
        self.task
            .await
            .unwrap_or_else(|e| format!("reader failed: {e}"))
    }

    /// Stops it: SIGTERM (a holder: the end of its input), then waits [`STOP_BOUND`]; a
    /// process still there is reported in `table`'s phase as hung, and killed.
    pub async fn stop(self, world: &World) -> String {
        self.stopping.store(true, Ordering::Relaxed);
        signal(self.pid, Signal::SIGCONT);
        match &self.commands {
            Some(c) => {
                let _ = c.send(String::new());
            }
            None => {
                signal(self.pid, Signal::SIGTERM);
            }
        }
        let mut task = self.task;
        match tokio::time::timeout(STOP_BOUND, &mut task).await {
            Ok(status) => status.unwrap_or_else(|e| format!("reader failed: {e}")),
            Err(_) => {
                world.checker.violation(
                    self.table,
                    format!(
                        "{} (pid {}) did not exit within {} s of being stopped: hung",
                        self.name,
                        self.pid,
                        STOP_BOUND.as_secs()
                    ),
                );
                signal(self.pid, Signal::SIGKILL);
                let status = task.await.unwrap_or_else(|e| format!("reader failed: {e}"));
                format!("hung, killed: {status}")
            }
        }
    }
}

fn register(world: &World, spec: &Spec, pid: i32) -> Src {
    world.checker.source(
        Source {
            name: spec.name.clone(),
            slot: spec.slot,
            clock: spec.clock,
            started_ms: now_ms(),
            table: spec.table,
        },
        pid,
    )
}

/// Starts `cmd` with the spec's environment and clock; records its pid and its source.
fn spawn(world: &World, cmd: &mut Command, spec: &Spec) -> Result<(Child, i32, Src), String> {
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    if let Some(clock) = spec.clock {
        world
            .clocks
            .apply(cmd, clock)
            .map_err(|e| format!("clock file: {e}"))?;
    }
    let child = cmd
        .kill_on_drop(false)
        .spawn()
        .map_err(|e| format!("start {}: {e}", spec.name))?;
    let pid = child.id().map_or(0, |p| p as i32);
    world.pids.add(pid, &spec.name);
    Ok((child, pid, register(world, spec, pid)))
}

fn stderr_file(world: &World, name: &str) -> Result<std::fs::File, String> {
    std::fs::File::create(world.procs_dir.join(format!("{name}.stderr")))
        .map_err(|e| format!("stderr file: {e}"))
}

/// Waits for the child and says how it ended; forgets its pid.
async fn reap(world: &World, mut child: Child, pid: i32) -> String {
    let status = match child.wait().await {
        Ok(s) => s.to_string(),
        Err(e) => format!("wait failed: {e}"),
    };
    world.pids.remove(pid);
    status
}

/// `monoflake gen -n <huge>`, read at `pace`.
pub fn start_gen(world: &Arc<World>, spec: &Spec, pace: Pace) -> Result<Proc, String> {
    let mut cmd = Command::new(&world.monoflake);
    cmd.args(["gen", "-n", "1000000000000", "--layout", &spec.layout])
        .args(["--node", &spec.node])
        .args(spec.store.cli_args(world))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr_file(world, &spec.name)?);
    let (mut child, pid, src) = spawn(world, &mut cmd, spec)?;
    let mut stdout = child.stdout.take().ok_or("no stdout")?;
    // A small pipe: a stalled gen is seen within a few hundred IDs.
    let _ = nix::fcntl::fcntl(&stdout, nix::fcntl::FcntlArg::F_SETPIPE_SZ(4096));
    let node = Arc::new(AtomicU64::new(0));
    let stopping = Arc::new(AtomicBool::new(false));
    let stream = world.stream();
    let (table, name) = (spec.table, spec.name.clone());
    let task = {
        let (world, node, stopping) = (Arc::clone(world), Arc::clone(&node), Arc::clone(&stopping));
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            let mut partial = Vec::new();
            let mut due = tokio::time::Instant::now();
            loop {
                let n = match stdout.read(&mut buf).await {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) => {
                        // What the process wrote after this is never seen: a failure.
                        world
                            .checker
                            .violation(table, format!("{name}: reading its output failed: {e}"));
                        break;
                    }
                };
                let recv = now_ms();
                partial.extend_from_slice(&buf[..n]);
                let end = partial
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |p| p + 1);
                let mut ids: Vec<u64> = Vec::new();
                for line in partial[..end]
                    .split(|&b| b == b'\n')
                    .filter(|l| !l.is_empty())
                {
                    match std::str::from_utf8(line)
                        .ok()
                        .and_then(|l| l.trim().parse().ok())
                    {
                        Some(id) => ids.push(id),
                        None => world.checker.violation(
                            table,
                            format!(
                                "{name}: an unparsable line: {:?}",
                                String::from_utf8_lossy(line)
                            ),
                        ),
                    }
                }
                partial.drain(..end);
                if let Some(&last) = ids.last() {
                    node.store(node_of(last) + 1, Ordering::Relaxed);
                }
                world.checker.observe(src, stream, recv, &ids);
                if let Pace::Rate(rate) = pace
                    && !stopping.load(Ordering::Relaxed)
                {
                    let now = tokio::time::Instant::now();
                    // No catching up after a silence: the pace restarts from now.
                    if due + Duration::from_secs(1) < now {
                        due = now;
                    }
                    due += Duration::from_secs_f64(ids.len() as f64 / rate.max(1) as f64);
                    tokio::time::sleep_until(due).await;
                }
            }
            if !partial.is_empty() {
                // Cut by a kill: a number that may be truncated, so not checked; counted.
                world.checker.unchecked("unterminated last lines", 1);
            }
            reap(&world, child, pid).await
        })
    };
    Ok(Proc {
        name: spec.name.clone(),
        pid,
        table: spec.table,
        node,
        commands: None,
        counters: Arc::default(),
        first: Arc::default(),
        stopping,
        task,
    })
}

/// The IDs in `words`; a word that is not one is a failure of the process that wrote it.
fn parsed<'a>(world: &World, spec: &Spec, words: impl Iterator<Item = &'a str>) -> Vec<u64> {
    let mut ids = Vec::new();
    for w in words {
        match w.parse() {
            Ok(id) => ids.push(id),
            Err(_) => world.checker.violation(
                spec.table,
                format!("{}: not an ID in its output: {w:?}", spec.name),
            ),
        }
    }
    ids
}

/// `monoflake-chaos holder`, driven at `pace`.
pub fn start_holder(world: &Arc<World>, spec: &Spec, pace: Pace) -> Result<Proc, String> {
    let mut cmd = Command::new(&world.me);
    cmd.arg("holder")
        .args(spec.store.cli_args(world))
        .args(["--layout", &spec.layout, "--node", &spec.node])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr_file(world, &spec.name)?);
    let (mut child, pid, src) = spawn(world, &mut cmd, spec)?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let node = Arc::new(AtomicU64::new(0));
    let counters: Arc<Mutex<HolderCounters>> = Arc::default();
    let first: Arc<AtomicU64> = Arc::default();
    let stopping = Arc::new(AtomicBool::new(false));
    let (commands, mut injected) = mpsc::unbounded_channel::<String>();
    let (done_tx, mut done) = mpsc::unbounded_channel::<()>();
    let events = Arc::new(Mutex::new(
        std::fs::File::create(world.procs_dir.join(format!("{}.events", spec.name)))
            .map_err(|e| format!("events file: {e}"))?,
    ));
    let reader = {
        let (world, node, spec) = (Arc::clone(world), Arc::clone(&node), spec.clone());
        let events = Arc::clone(&events);
        let counters = Arc::clone(&counters);
        let first = Arc::clone(&first);
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout);
            let mut stream = world.stream();
            let mut children: std::collections::HashMap<String, (Src, u64)> =
                std::collections::HashMap::new();
            let mut raw = Vec::new();
            loop {
                raw.clear();
                match reader.read_until(b'\n', &mut raw).await {
                    Ok(0) => break,
                    Ok(_) if raw.last() != Some(&b'\n') => {
                        // Cut by a kill: its last word may be a truncated number.
                        world.checker.unchecked("unterminated last lines", 1);
                        break;
                    }
                    Ok(_) => {}
                    Err(e) => {
                        world.checker.violation(
                            spec.table,
                            format!("{}: reading its output failed: {e}", spec.name),
                        );
                        break;
                    }
                }
                let Ok(line) = std::str::from_utf8(&raw[..raw.len() - 1]) else {
                    world.checker.violation(
                        spec.table,
                        format!(
                            "{}: a line that is not UTF-8: {:?}",
                            spec.name,
                            String::from_utf8_lossy(&raw)
                        ),
                    );
                    continue;
                };
                let line = line.to_owned();
                let recv = now_ms();
                let (head, rest) = line.split_once(' ').unwrap_or((line.as_str(), ""));
                let event = |text: &str| {
                    use std::io::Write;
                    if let Ok(mut f) = events.lock() {
                        let _ = writeln!(f, "{recv} {text}");
                    }
                };
                match head {
                    "." => {
                        let _ = done_tx.send(());
                    }
                    "ready" | "r" => {
                        stream = world.stream();
                        counters.lock().expect("counters").rebuilt();
                        event(&line);
                    }
                    "i" => {
                        let ids = parsed(&world, &spec, rest.split(' ').filter(|w| !w.is_empty()));
                        if let Some(&last) = ids.last() {
                            node.store(node_of(last) + 1, Ordering::Relaxed);
                        }
                        if let Some(&id) = ids.first() {
                            let _ =
                                first.compare_exchange(0, id, Ordering::Relaxed, Ordering::Relaxed);
                        }
                        world.checker.observe(src, stream, recv, &ids);
                    }
                    "c" => {
                        let mut words = rest.split(' ');
                        let child = words.next().unwrap_or("?").to_owned();
                        let (csrc, cstream) = *children.entry(child.clone()).or_insert_with(|| {
                            let s = register(
                                &world,
                                &Spec {
                                    name: format!("{}-child-{child}", spec.name),
                                    slot: None,
                                    ..spec.clone()
                                },
                                child.parse().unwrap_or(0),
                            );
                            (s, world.stream())
                        });
                        let ids = parsed(&world, &spec, words.filter(|w| !w.is_empty()));
                        event(&format!("fork child {child}: {} IDs", ids.len()));
                        // A child must never issue under its parent's claim: it refuses
                        // (`Forked`) or claims a node of its own.
                        let parent = node.load(Ordering::Relaxed).checked_sub(1);
                        let shared = ids
                            .iter()
                            .filter(|&&id| Some(node_of(id)) == parent)
                            .count();
                        if shared > 0 {
                            world.checker.violation(
                                spec.table,
                                format!(
                                    "{}: forked child {child} issued {shared} IDs on its \
                                     parent's node {}",
                                    spec.name,
                                    parent.unwrap_or(0)
                                ),
                            );
                        }
                        world.checker.observe(csrc, cstream, recv, &ids);
                    }
                    "s" => {
                        counters.lock().expect("counters").read(rest);
                        event(&line);
                    }
                    "F" => {
                        counters.lock().expect("counters").forks += 1;
                        event(&line);
                        if rest.contains("hung") {
                            world.checker.violation(
                                spec.table,
                                format!("{}: a forked child hung: {line}", spec.name),
                            );
                        }
                    }
                    _ => event(&line),
                }
            }
        })
    };
    let driver_stopping = Arc::clone(&stopping);
    let task = {
        let world = Arc::clone(world);
        tokio::spawn(async move {
            let per_command: u64 = match pace {
                Pace::Rate(rate) => (rate / 100).clamp(1, 200),
                Pace::Flat => 20,
            };
            let every = match pace {
                Pace::Rate(rate) => {
                    Duration::from_secs_f64(per_command as f64 / rate.max(1) as f64)
                }
                Pace::Flat => Duration::ZERO,
            };
            let mut due = tokio::time::Instant::now();
            'drive: loop {
                // Injected commands first (an empty one ends the input).
                let command = match injected.try_recv() {
                    Ok(c) => c,
                    Err(_) => {
                        tokio::select! {
                            c = injected.recv() => c.unwrap_or_default(),
                            () = tokio::time::sleep_until(due) => format!("ids {per_command}"),
                        }
                    }
                };
                if command.is_empty() || driver_stopping.load(Ordering::Relaxed) {
                    break 'drive;
                }
                if stdin
                    .write_all(format!("{command}\n").as_bytes())
                    .await
                    .is_err()
                {
                    break;
                }
                // One command at a time: wait for its `.` (or for the holder to end).
                if done.recv().await.is_none() {
                    break;
                }
                let now = tokio::time::Instant::now();
                if due + Duration::from_secs(1) < now {
                    due = now;
                }
                due += every;
            }
            drop(stdin);
            let status = reap(&world, child, pid).await;
            let _ = reader.await;
            status
        })
    };
    Ok(Proc {
        name: spec.name.clone(),
        pid,
        table: spec.table,
        node,
        commands: Some(commands),
        counters,
        first,
        stopping,
        task,
    })
}

/// `monoflake serve` on port 0 (HTTP and gRPC), with `clients` HTTP and as many gRPC clients
/// at `pace` (shared among them), from when it says where it listens until it exits.
pub fn start_serve(
    world: &Arc<World>,
    spec: &Spec,
    pace: Pace,
    clients: usize,
) -> Result<Proc, String> {
    let mut cmd = Command::new(&world.monoflake);
    cmd.args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--grpc-listen",
        "127.0.0.1:0",
    ])
    .args(["--layout", &spec.layout, "--node", &spec.node])
    .args(spec.store.cli_args(world))
    .args([
        "--reclaim-after",
        "1",
        "--max-wait",
        "1",
        "--drain-timeout",
        "3",
    ])
    .args(["--threads", "2"])
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    let (mut child, pid, src) = spawn(world, &mut cmd, spec)?;
    let stderr = child.stderr.take().ok_or("no stderr")?;
    let mut log = stderr_file(world, &spec.name)?;
    let node = Arc::new(AtomicU64::new(0));
    let stopping = Arc::new(AtomicBool::new(false));
    let (addrs_tx, mut addrs) = watch::channel((None::<String>, None::<String>));
    let lines_task = tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            use std::io::Write;
            let _ = writeln!(log, "{} {line}", now_ms());
            let url = line.rsplit(' ').next().unwrap_or("");
            let addr = url.split("://").nth(1).map(str::to_owned);
            if line.contains("serving HTTP on") {
                addrs_tx.send_modify(|a| a.0 = addr);
            } else if line.contains("serving gRPC") {
                addrs_tx.send_modify(|a| a.1 = addr);
            }
        }
    });
    let task = {
        let (world, node, stopping, spec) = (
            Arc::clone(world),
            Arc::clone(&node),
            Arc::clone(&stopping),
            spec.clone(),
        );
        tokio::spawn(async move {
            let (alive_tx, alive) = watch::channel(true);
            let mut client_tasks = Vec::new();
            let exited = tokio::select! {
                status = child.wait() => Some(status),
                found = addrs.wait_for(|a| a.0.is_some() && a.1.is_some()) => {
                    if let Ok(a) = found {
                        let (http, grpc) = (a.0.clone().unwrap_or_default(), a.1.clone().unwrap_or_default());
                        for i in 0..2 * clients {
                            let addr = if i % 2 == 0 { http.clone() } else { grpc.clone() };
                            let client = Client {
                                world: Arc::clone(&world),
                                src,
                                addr,
                                grpc: i % 2 == 1,
                                pace: match pace {
                                    Pace::Rate(r) => Pace::Rate((r / (2 * clients as u64)).max(1)),
                                    Pace::Flat => Pace::Flat,
                                },
                                node: Arc::clone(&node),
                                alive: alive.clone(),
                                seed: world.seed ^ (u64::from(src as u32) << 8) ^ i as u64,
                                events: world.procs_dir.join(format!("{}.client-{i}", spec.name)),
                            };
                            client_tasks.push(tokio::spawn(client.run()));
                        }
                    }
                    None
                }
            };
            let status = match exited {
                Some(s) => s.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string()),
                None => match child.wait().await {
                    Ok(s) => s.to_string(),
                    Err(e) => format!("wait failed: {e}"),
                },
            };
            world.pids.remove(pid);
            let _ = alive_tx.send(false);
            stopping.store(true, Ordering::Relaxed);
            for t in client_tasks {
                let _ = t.await;
            }
            let _ = lines_task.await;
            status
        })
    };
    Ok(Proc {
        name: spec.name.clone(),
        pid,
        table: spec.table,
        node,
        commands: None,
        counters: Arc::default(),
        first: Arc::default(),
        stopping,
        task,
    })
}

/// One client of a service: requests at its pace until the service is gone.
struct Client {
    world: Arc<World>,
    src: Src,
    addr: String,
    grpc: bool,
    pace: Pace,
    node: Arc<AtomicU64>,
    alive: watch::Receiver<bool>,
    seed: u64,
    events: PathBuf,
}

enum Conn {
    Http(Http),
    Grpc(Grpc),
}

impl Client {
    async fn connect(&self) -> Result<Conn, String> {
        if self.grpc {
            Grpc::connect(&self.addr).await.map(Conn::Grpc)
        } else {
            Http::connect(&self.addr).await.map(Conn::Http)
        }
    }

    async fn run(mut self) {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let mut events = std::fs::File::create(&self.events).ok();
        let mut note = |text: String| {
            use std::io::Write;
            if let Some(f) = events.as_mut() {
                let _ = writeln!(f, "{} {text}", now_ms());
            }
        };
        let mut conn: Option<Conn> = None;
        let mut stream = self.world.stream();
        let mut due = tokio::time::Instant::now();
        let (mut refusals, mut last_node) = (0u64, None);
        while *self.alive.borrow() {
            if conn.is_none() {
                match self.connect().await {
                    Ok(c) => conn = Some(c),
                    Err(e) => {
                        note(format!("connect: {e}"));
                        self.nap(Duration::from_millis(100)).await;
                        continue;
                    }
                }
                stream = self.world.stream();
            }
            let count = match self.pace {
                Pace::Rate(_) => rng.random_range(1..=MAX_COUNT),
                // Many IDs a request: a paused server has many to answer when it resumes.
                Pace::Flat => 100,
            };
            let answer = match conn.as_mut() {
                Some(Conn::Http(h)) => h.ids(count).await,
                Some(Conn::Grpc(g)) => g.ids(count).await,
                None => continue,
            };
            match answer {
                Ok(ids) => {
                    if let Some(&last) = ids.last() {
                        let n = node_of(last);
                        if last_node.is_some_and(|l| l != n) {
                            // Another node: another generator (the service re-claimed).
                            stream = self.world.stream();
                            note(format!("node {n} after node {last_node:?}"));
                        }
                        last_node = Some(n);
                        self.node.store(n + 1, Ordering::Relaxed);
                    }
                    // The first ID of a stream that begins with this answer is checked
                    // against nothing before it; the stream is set before observing.
                    self.world.checker.observe(self.src, stream, now_ms(), &ids);
                }
                Err(Refused::Server(e)) => {
                    refusals += 1;
                    if refusals <= 20 || refusals.is_power_of_two() {
                        note(format!("refused ({refusals}): {e}"));
                    }
                    stream = self.world.stream();
                    self.nap(Duration::from_millis(50)).await;
                }
                Err(Refused::Connection(e)) => {
                    // The request may have been served: its IDs are never seen.
                    self.world
                        .checker
                        .unchecked("client requests with no answer (served or not)", 1);
                    note(format!("connection: {e}"));
                    conn = None;
                    self.nap(Duration::from_millis(100)).await;
                }
            }
            if let Pace::Rate(rate) = self.pace {
                let now = tokio::time::Instant::now();
                if due + Duration::from_secs(1) < now {
                    due = now;
                }
                due += Duration::from_secs_f64(count as f64 / rate as f64);
                self.nap_until(due).await;
            }
        }
    }

    async fn nap(&mut self, d: Duration) {
        self.nap_until(tokio::time::Instant::now() + d).await;
    }

    async fn nap_until(&mut self, t: tokio::time::Instant) {
        tokio::select! {
            () = tokio::time::sleep_until(t) => {}
            _ = self.alive.changed() => {}
        }
    }
}

/// The flavours a soak holder runs, one per instance in turn (`monoflake-chaos holder
/// --flavour`).
/// The soak's holders (slots 6, 7, 9) start on `per-thread`, `handle` and `per-core`; `iter`
/// and `plain` (which `gen` and `serve` run too) come with restarts.
pub const HOLDER_FLAVOURS: [&str; 5] = ["plain", "per-thread", "handle", "iter", "per-core"];

/// The kinds of generator a soak slot runs.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gen,
    Serve,
    Holder,
}

/// A soak slot: one generator process at a time, restarted when it exits.
#[derive(Debug)]
pub struct Slot {
    pub idx: usize,
    pub name: String,
    pub kind: Kind,
    pub store: StoreArgs,
    pub layouts: Vec<String>,
    /// The process running now: pid, node, holder commands.
    pub live: Mutex<Option<Live>>,
    /// Held by a fault that must keep the slot's next process from starting (its node left
    /// to a successor of the fault's own); the supervisor takes it before each start.
    pub restarts: tokio::sync::Mutex<()>,
    /// The last process that exited: its pid and how it ended (a `kill-9`'s proof).
    pub exited: Mutex<Option<(i32, String)>>,
}

#[derive(Debug, Clone)]
pub struct Live {
    pub pid: i32,
    pub node: Arc<AtomicU64>,
    pub commands: Option<mpsc::UnboundedSender<String>>,
    pub counters: Arc<Mutex<HolderCounters>>,
}

impl Live {
    /// A holder's counters as it last reported them.
    pub fn counters(&self) -> HolderCounters {
        *self.counters.lock().expect("counters")
    }
}

impl Live {
    pub fn node(&self) -> Option<u64> {
        self.node.load(Ordering::Relaxed).checked_sub(1)
    }
}

impl Slot {
    pub fn new(
        idx: usize,
        name: String,
        kind: Kind,
        store: StoreArgs,
        layouts: Vec<String>,
    ) -> Slot {
        Slot {
            idx,
            name,
            kind,
            store,
            layouts,
            live: Mutex::new(None),
            restarts: tokio::sync::Mutex::new(()),
            exited: Mutex::new(None),
        }
    }

    pub fn live(&self) -> Option<Live> {
        self.live.lock().expect("slot").clone()
    }

    /// How the process `pid` ended, once the supervisor has seen it exit.
    pub fn exit_of(&self, pid: i32) -> Option<String> {
        match &*self.exited.lock().expect("slot") {
            Some((p, status)) if *p == pid => Some(status.clone()),
            _ => None,
        }
    }
}

/// Keeps `slot` running until `stop` turns true; then stops its process (bounded).
pub async fn supervise(
    world: Arc<World>,
    slot: Arc<Slot>,
    table: usize,
    mut stop: watch::Receiver<bool>,
) {
    let mut rng = ChaCha8Rng::seed_from_u64(world.seed ^ (0x51_07 << 16) ^ slot.idx as u64);
    let mut backoff = Duration::from_millis(200);
    for instance in 0.. {
        if *stop.borrow() {
            break;
        }
        let layout = slot.layouts[rng.random_range(0..slot.layouts.len())].clone();
        // A holder runs each flavour in turn: the shared generator, PerThread's three ways in
        // (the implicit path, a handle, a handle's iterator) and a leased PerCore.
        let flavour = (slot.kind == Kind::Holder)
            .then(|| HOLDER_FLAVOURS[(instance + slot.idx) % HOLDER_FLAVOURS.len()]);
        let spec = Spec {
            name: format!("{}-{instance}", slot.name),
            table,
            slot: Some(slot.idx),
            clock: Some(slot.idx),
            store: slot.store.clone(),
            layout,
            node: "auto".into(),
            env: flavour
                .map(|f| ("MONOFLAKE_CHAOS_FLAVOUR".to_owned(), f.to_owned()))
                .into_iter()
                .collect(),
        };
        let pace = Pace::Rate(world.rate);
        // A fault that holds the slot's restarts (its node left to a successor) ends first.
        drop(slot.restarts.lock().await);
        if *stop.borrow() {
            break;
        }
        let started = match slot.kind {
            Kind::Gen => start_gen(&world, &spec, pace),
            Kind::Serve => start_serve(&world, &spec, pace, 2),
            Kind::Holder => start_holder(&world, &spec, pace),
        };
        let proc = match started {
            Ok(p) => p,
            Err(e) => {
                world.log.say(&format!("{}: cannot start: {e}", spec.name));
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        world.log.note(&format!(
            "{} started: pid {}, layout {}{}",
            spec.name,
            proc.pid,
            spec.layout,
            flavour.map_or(String::new(), |f| format!(", flavour {f}"))
        ));
        if let Some(f) = flavour {
            world.flavours.lock().expect("flavours").insert(f);
        }
        *slot.live.lock().expect("slot") = Some(Live {
            pid: proc.pid,
            node: Arc::clone(&proc.node),
            commands: proc.commands.clone(),
            counters: Arc::clone(&proc.counters),
        });
        let began = tokio::time::Instant::now();
        let proc_pid = proc.pid;
        let mut proc = Some(proc);
        let status = loop {
            tokio::select! {
                _ = stop.changed() => {
                    if *stop.borrow() {
                        let p = proc.take().expect("proc");
                        break p.stop(&world).await;
                    }
                }
                () = tokio::time::sleep(Duration::from_millis(100)) => {
                    if proc.as_ref().is_some_and(Proc::is_finished) {
                        break proc.take().expect("proc").wait().await;
                    }
                }
            }
        };
        *slot.live.lock().expect("slot") = None;
        *slot.exited.lock().expect("slot") = Some((proc_pid, status.clone()));
        world.log.note(&format!("{} exited: {status}", spec.name));
        if status == "exit status: 2" {
            // Bad usage: the run itself is wrong, and the slot would never issue.
            let said =
                std::fs::read_to_string(world.procs_dir.join(format!("{}.stderr", spec.name)))
                    .unwrap_or_default();
            world.checker.violation(
                table,
                format!(
                    "{} exited 2 (bad usage): {}",
                    spec.name,
                    said.lines().next().unwrap_or("")
                ),
            );
        }
        if *stop.borrow() {
            break;
        }
        backoff = if began.elapsed() > Duration::from_secs(5) {
            Duration::from_millis(200)
        } else {
            (backoff * 2).min(Duration::from_secs(2))
        };
        tokio::select! {
            () = tokio::time::sleep(backoff) => {}
            _ = stop.changed() => {}
        }
    }
}
