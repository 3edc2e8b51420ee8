//! PostgreSQL: Debian's server, `initdb` in a temporary directory as an unprivileged user
//! (PostgreSQL refuses root), listening on 127.0.0.1 only and stopped by its pid; and the
//! writer that puts every ID into its phase's table:
//!
//! ```sql
//! CREATE TABLE soak (id BIGINT PRIMARY KEY, src INT NOT NULL, n BIGINT NOT NULL)
//! ```
//!
//! Rows go in batches, `INSERT … ON CONFLICT (id) DO NOTHING`: a row the primary key turned
//! away is a conflict, found again by a join with the row already there and kept (both
//! sources, both row numbers) in `conflicts` and in memory. The database is the checker's
//! scratch space, so it runs without fsync.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::process::{Child, Command};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_postgres::{Client, NoTls};

use crate::procs::{Log, Pids, free_port, signal, wait_gone};

/// Rows sent in one statement.
const BATCH: usize = 20_000;
/// The longest a row waits before it is written.
const FLUSH_EVERY: Duration = Duration::from_millis(250);

/// What the checker sends.
#[derive(Debug)]
pub enum Message {
    Rows {
        table: usize,
        ids: Vec<i64>,
        srcs: Vec<i32>,
        ns: Vec<i64>,
    },
    Source {
        src: i32,
        name: String,
        pid: i32,
        started_ms: i64,
    },
    /// Answered once every row sent before it is written.
    Sync(tokio::sync::oneshot::Sender<()>),
}

/// Two rows with one ID.
#[derive(Debug, Clone)]
pub struct Conflict {
    pub table: String,
    pub id: i64,
    /// The row turned away: its source and row number.
    pub src: i32,
    pub n: i64,
    /// The row that was there.
    pub other_src: i32,
    pub other_n: i64,
}

/// Conflicts kept in memory (all are counted, and all are in the `conflicts` table).
const KEPT: usize = 10_000;

/// What the writer did, per table.
#[derive(Debug, Default, Clone)]
pub struct Results {
    pub inserted: BTreeMap<String, u64>,
    pub conflict_counts: BTreeMap<String, u64>,
    /// The first [`KEPT`] conflicts.
    pub conflicts: Vec<Conflict>,
    pub errors: Vec<String>,
}

/// The server.
#[derive(Debug)]
pub struct Server {
    child: Child,
    pid: i32,
    dir: PathBuf,
    pub port: u16,
}

/// The newest `bin` directory of Debian's PostgreSQL packages (or `$CHAOS_PG_BIN`).
fn bin_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("CHAOS_PG_BIN") {
        return Some(PathBuf::from(dir));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("postgres").exists().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, b)| b)
}

/// `postgres` (Debian's system user) if it exists, else `nobody`.
fn server_user() -> Result<nix::unistd::User, String> {
    for name in ["postgres", "nobody"] {
        if let Ok(Some(u)) = nix::unistd::User::from_name(name) {
            return Ok(u);
        }
    }
    Err("neither a postgres nor a nobody user to run PostgreSQL as".into())
}

/// `setpriv` to `user`: PostgreSQL will not run as root.
fn as_user(user: &nix::unistd::User, program: &Path) -> Command {
    let mut c = Command::new("setpriv");
    c.arg(format!("--reuid={}", user.uid))
        .arg(format!("--regid={}", user.gid))
        .arg("--clear-groups")
        .arg(program);
    c
}

impl Server {
    /// `initdb` in a fresh directory under the system's temporary directory (owned by the
    /// server's user), then the server on 127.0.0.1 on a free port.
    pub async fn start(log: &Log, pids: &Pids) -> Result<Server, String> {
        let bin = bin_dir().ok_or(
            "PostgreSQL is not installed (apt-get install postgresql; scripts/chaos.sh does)",
        )?;
        let user = server_user()?;
        let dir = std::env::temp_dir().join(format!("monoflake-chaos-pg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
        nix::unistd::chown(&dir, Some(user.uid), Some(user.gid))
            .map_err(|e| format!("chown {}: {e}", dir.display()))?;
        let data = dir.join("data");
        let out = as_user(&user, &bin.join("initdb"))
            .arg("-D")
            .arg(&data)
            .args(["-U", "chaos", "--auth=trust", "-E", "UTF8", "--no-sync"])
            .current_dir(&dir)
            .output()
            .await
            .map_err(|e| format!("run initdb: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "initdb failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let port = free_port().map_err(|e| format!("no free port: {e}"))?;
        let logfile = std::fs::File::create(dir.join("server.log"))
            .map_err(|e| format!("create the server log: {e}"))?;
        nix::unistd::chown(&dir.join("server.log"), Some(user.uid), Some(user.gid)).ok();
        let child = as_user(&user, &bin.join("postgres"))
            .arg("-D")
            .arg(&data)
            .args(["-c", "listen_addresses=127.0.0.1"])
            .args(["-p", &port.to_string()])
            .args(["-c", "unix_socket_directories="])
            .args(["-c", "fsync=off", "-c", "synchronous_commit=off"])
            .args(["-c", "full_page_writes=off", "-c", "shared_buffers=128MB"])
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(logfile)
            .spawn()
            .map_err(|e| format!("start postgres: {e}"))?;
        let pid = child.id().map_or(0, |p| p as i32);
        pids.add(pid, "postgres");
        log.note(&format!(
            "postgres pid {pid} on 127.0.0.1:{port}, data in {}",
            dir.display()
        ));
        Ok(Server {
            child,
            pid,
            dir,
            port,
        })
    }

    /// Connects, retrying while the server starts (for at most 30 s).
    pub async fn connect(&self) -> Result<Client, String> {
        let conf = format!(
            "host=127.0.0.1 port={} user=chaos dbname=postgres connect_timeout=5",
            self.port
        );
        let mut last = String::new();
        for _ in 0..300 {
            match tokio_postgres::connect(&conf, NoTls).await {
                Ok((client, connection)) => {
                    tokio::spawn(async move {
                        let _ = connection.await;
                    });
                    return Ok(client);
                }
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(format!(
            "cannot connect to PostgreSQL on port {}: {last}",
            self.port
        ))
    }

    /// Fast shutdown (SIGINT) by pid, then SIGKILL after 10 s; copies its log to `keep` and
    /// removes its directory.
    pub async fn stop(mut self, pids: &Pids, keep: &Path) {
        signal(self.pid, Signal::SIGINT);
        if wait_gone(&mut self.child, Duration::from_secs(10))
            .await
            .is_none()
        {
            signal(self.pid, Signal::SIGKILL);
            let _ = wait_gone(&mut self.child, Duration::from_secs(5)).await;
        }
        pids.remove(self.pid);
        let _ = std::fs::copy(self.dir.join("server.log"), keep);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Creates one table per phase, and `sources` and `conflicts`.
pub async fn create_tables(client: &Client, tables: &[String]) -> Result<(), String> {
    let mut sql = String::from(
        "CREATE TABLE sources (src INT PRIMARY KEY, name TEXT NOT NULL, pid INT NOT NULL, \
         started_ms BIGINT NOT NULL);\n\
         CREATE TABLE conflicts (tbl TEXT NOT NULL, id BIGINT NOT NULL, src INT NOT NULL, \
         n BIGINT NOT NULL, other_src INT NOT NULL, other_n BIGINT NOT NULL);\n",
    );
    for t in tables {
        sql.push_str(&format!(
            "CREATE TABLE {t} (id BIGINT PRIMARY KEY, src INT NOT NULL, n BIGINT NOT NULL);\n"
        ));
    }
    client
        .batch_execute(&sql)
        .await
        .map_err(|e| format!("create tables: {e}"))
}

/// Writes what the checker sends until every sender is gone.
pub async fn writer(
    client: Client,
    tables: Vec<String>,
    mut rx: UnboundedReceiver<Message>,
    results: Arc<Mutex<Results>>,
) {
    let mut pending: Vec<(Vec<i64>, Vec<i32>, Vec<i64>)> =
        vec![(Vec::new(), Vec::new(), Vec::new()); tables.len()];
    let mut open = true;
    let mut synced = Vec::new();
    while open {
        let deadline = tokio::time::Instant::now() + FLUSH_EVERY;
        loop {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(Message::Rows {
                    table,
                    ids,
                    srcs,
                    ns,
                })) => {
                    let p = &mut pending[table];
                    p.0.extend(ids);
                    p.1.extend(srcs);
                    p.2.extend(ns);
                    if p.0.len() >= BATCH {
                        break;
                    }
                }
                Ok(Some(Message::Source {
                    src,
                    name,
                    pid,
                    started_ms,
                })) => {
                    if let Err(e) = client
                        .execute(
                            "INSERT INTO sources VALUES ($1, $2, $3, $4)",
                            &[&src, &name, &pid, &started_ms],
                        )
                        .await
                    {
                        results.lock().expect("results").errors.push(e.to_string());
                    }
                }
                Ok(Some(Message::Sync(answer))) => {
                    synced.push(answer);
                    break;
                }
                Ok(None) => {
                    open = false;
                    break;
                }
                Err(_) => break,
            }
        }
        for (t, p) in pending.iter_mut().enumerate() {
            if p.0.is_empty() {
                continue;
            }
            let batch = std::mem::take(p);
            if let Err(e) = insert(&client, &tables[t], &batch, &results).await {
                results.lock().expect("results").errors.push(e);
            }
        }
        for answer in synced.drain(..) {
            let _ = answer.send(());
        }
    }
}

async fn insert(
    client: &Client,
    table: &str,
    (ids, srcs, ns): &(Vec<i64>, Vec<i32>, Vec<i64>),
    results: &Mutex<Results>,
) -> Result<(), String> {
    let row = client
        .query_one(
            &format!(
                "WITH ins AS (INSERT INTO {table} (id, src, n) \
                 SELECT * FROM unnest($1::bigint[], $2::int[], $3::bigint[]) \
                 ON CONFLICT (id) DO NOTHING RETURNING 1) SELECT count(*) FROM ins"
            ),
            &[ids, srcs, ns],
        )
        .await
        .map_err(|e| format!("insert into {table}: {e}"))?;
    let inserted: i64 = row.get(0);
    {
        let mut r = results.lock().expect("results");
        *r.inserted.entry(table.to_owned()).or_default() += inserted as u64;
    }
    if inserted as usize == ids.len() {
        return Ok(());
    }
    // Some rows were turned away by the primary key: which, and whose ID they repeat.
    let rows = client
        .query(
            &format!(
                "SELECT u.id, u.src, u.n, t.src, t.n \
                 FROM unnest($1::bigint[], $2::int[], $3::bigint[]) AS u(id, src, n) \
                 JOIN {table} t ON t.id = u.id WHERE t.n <> u.n"
            ),
            &[ids, srcs, ns],
        )
        .await
        .map_err(|e| format!("find the conflicts in {table}: {e}"))?;
    let conflicts: Vec<Conflict> = rows
        .iter()
        .map(|r| Conflict {
            table: table.to_owned(),
            id: r.get(0),
            src: r.get(1),
            n: r.get(2),
            other_src: r.get(3),
            other_n: r.get(4),
        })
        .collect();
    let column = |f: fn(&Conflict) -> i64| conflicts.iter().map(f).collect::<Vec<i64>>();
    let (cid, cn, con) = (column(|c| c.id), column(|c| c.n), column(|c| c.other_n));
    let csrc: Vec<i32> = conflicts.iter().map(|c| c.src).collect();
    let cother: Vec<i32> = conflicts.iter().map(|c| c.other_src).collect();
    client
        .execute(
            "INSERT INTO conflicts SELECT $1::text, * FROM \
             unnest($2::bigint[], $3::int[], $4::bigint[], $5::int[], $6::bigint[])",
            &[&table, &cid, &csrc, &cn, &cother, &con],
        )
        .await
        .map_err(|e| format!("record the conflicts: {e}"))?;
    let mut r = results.lock().expect("results");
    *r.conflict_counts.entry(table.to_owned()).or_default() += conflicts.len() as u64;
    let room = KEPT.saturating_sub(r.conflicts.len());
    r.conflicts.extend(conflicts.into_iter().take(room));
    Ok(())
}
