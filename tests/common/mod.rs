//! Helpers shared by the integration tests: temporary directories and a private etcd.
#![allow(dead_code, unused_imports)]

pub mod ride;
pub mod workers;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::process::Command;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "monoflake-test-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    /// Removes the directory, and the anchors the tests' host scope keeps beside it when it
    /// is itself a state directory (`.<name>.host-anchors`, src/lease/file/anchor.rs).
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        if let (Some(parent), Some(name)) = (self.0.parent(), self.0.file_name()) {
            let mut anchors = std::ffi::OsString::from(".");
            anchors.push(name);
            anchors.push(".host-anchors");
            let _ = std::fs::remove_dir_all(parent.join(anchors));
        }
    }
}

/// Runs `threads` threads taking `per_thread` IDs each from one generator; checks that each
/// thread's IDs increase strictly and that all are distinct. Returns every ID, sorted.
pub fn hammer<G: monoflake::IdGenerator + Sync>(
    generator: &G,
    threads: usize,
    per_thread: usize,
) -> Vec<monoflake::Id> {
    let runs: Vec<Vec<monoflake::Id>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    (0..per_thread)
                        .map(|_| generator.next_id().unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for run in &runs {
        assert!(
            run.windows(2).all(|w| w[0] < w[1]),
            "a thread's IDs went back or repeated"
        );
    }
    let mut all: Vec<monoflake::Id> = runs.into_iter().flatten().collect();
    all.sort_unstable();
    let before = all.len();
    all.dedup();
    assert_eq!(all.len(), before, "duplicate IDs across threads");
    all
}

/// A free TCP port on 127.0.0.1 for a server to take: bound, released, from 20000–31999.
///
/// Below the kernel's ephemeral range (32768–60999 by default): a port from a bind to port 0
/// comes from that range, and between its release and the server's bind any outgoing
/// connection on the host may take it as its local port. Below it only an explicit bind takes
/// a port. The pid and a counter pick the first port tried, so tests side by side differ.
pub fn free_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_000;
    (0..SPAN)
        .map(|_| {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            (LOW + std::process::id().wrapping_mul(7_919).wrapping_add(n) % SPAN) as u16
        })
        .find(|&port| TcpListener::bind(("127.0.0.1", port)).is_ok())
        .expect("a free port in 20000-31999 on 127.0.0.1")
}

#[cfg(feature = "etcd")]
pub use etcd::Etcd;

#[cfg(feature = "etcd")]
mod etcd {
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    use super::{TempDir, free_port};

    /// An etcd server of Debian's `etcd-server` package on 127.0.0.1, on free ports, with its own
    /// data directory; killed by its pid on drop (or by `stop`).
    pub struct Etcd {
        child: Option<Child>,
        pub endpoint: String,
        _data: TempDir,
    }

    impl Etcd {
        /// The etcd the test command started (`MONOFLAKE_TEST_ETCD`, set by `.ci/run`), or a
        /// private one when there is none. Tests that stop or pause the server use `start`.
        pub fn shared() -> Etcd {
            match std::env::var("MONOFLAKE_TEST_ETCD") {
                Ok(endpoint) if !endpoint.is_empty() => Etcd {
                    child: None,
                    endpoint,
                    _data: TempDir::new("etcd-shared"),
                },
                _ => Etcd::start(),
            }
        }

        pub fn start() -> Etcd {
            Self::start_with_tls(None)
        }

        /// A private etcd; with `tls`, it serves https with that certificate and key (and is
        /// waited for with `etcdctl endpoint health`, trusting that certificate).
        pub fn start_with_tls(tls: Option<(&std::path::Path, &std::path::Path)>) -> Etcd {
            let data = TempDir::new("etcd");
            let (client, peer) = (free_port(), free_port());
            let scheme = if tls.is_some() { "https" } else { "http" };
            let endpoint = format!("{scheme}://127.0.0.1:{client}");
            let peer_url = format!("http://127.0.0.1:{peer}");
            let mut command = Command::new("etcd");
            command
                .args(["--name", "monoflake-test", "--data-dir"])
                .arg(data.path().join("data"))
                .args([
                    "--listen-client-urls",
                    &endpoint,
                    "--advertise-client-urls",
                    &endpoint,
                ])
                .args([
                    "--listen-peer-urls",
                    &peer_url,
                    "--initial-advertise-peer-urls",
                    &peer_url,
                ])
                .args(["--initial-cluster", &format!("monoflake-test={peer_url}")])
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            if let Some((cert, key)) = tls {
                command
                    .arg("--cert-file")
                    .arg(cert)
                    .arg("--key-file")
                    .arg(key);
            }
            let child = command.spawn().expect(
                "etcd is not installed: apt-get install -y etcd-server (bash .ci/run does)",
            );
            let etcd = Etcd {
                child: Some(child),
                endpoint,
                _data: data,
            };
            let start = Instant::now();
            let ready = || match tls {
                Some((cert, _)) => etcd.ctl(Some(cert), &["endpoint", "health"]).0,
                None => monoflake::EtcdStore::connect(
                    &[&etcd.endpoint],
                    "/probe",
                    Duration::from_secs(5),
                )
                .is_ok(),
            };
            while !ready() {
                assert!(
                    start.elapsed() < Duration::from_secs(20),
                    "etcd did not start"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
            etcd
        }

        /// A private etcd serving https with a self-signed certificate for 127.0.0.1 and
        /// localhost, written into `dir` (`etcd.pem`, `etcd-key.pem`); and that certificate's
        /// file, to trust.
        pub fn start_self_signed(dir: &std::path::Path) -> (Etcd, std::path::PathBuf) {
            let certified = rcgen::generate_simple_self_signed(vec![
                "127.0.0.1".to_owned(),
                "localhost".to_owned(),
            ])
            .unwrap();
            let (cert, key) = (dir.join("etcd.pem"), dir.join("etcd-key.pem"));
            std::fs::write(&cert, certified.cert.pem()).unwrap();
            std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
            (Etcd::start_with_tls(Some((&cert, &key))), cert)
        }

        /// Runs etcdctl against this etcd (trusting `ca` for https): success and output.
        pub fn ctl(&self, ca: Option<&std::path::Path>, args: &[&str]) -> (bool, String) {
            let mut c = Command::new("etcdctl");
            c.env("ETCDCTL_API", "3")
                .args(["--endpoints", &self.endpoint]);
            if let Some(ca) = ca {
                c.arg("--cacert").arg(ca);
            }
            let out = c.args(args).output().expect("etcdctl");
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            (out.status.success(), text)
        }

        /// Kills the server by its pid and waits for it.
        pub fn stop(&mut self) {
            if let Some(mut child) = self.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }

    impl Drop for Etcd {
        fn drop(&mut self) {
            self.stop();
        }
    }
}

#[cfg(feature = "postgres")]
pub use pg::Pg;

#[cfg(feature = "postgres")]
mod pg {
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::process::CommandExt;
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    use super::{TempDir, free_port};

    /// The password of the test servers' `monoflake` role.
    const PASSWORD: &str = "monoflake-test-secret";

    /// The unprivileged user a server runs as when the tests run as root (PostgreSQL refuses
    /// to run as root): `nobody`.
    const NOBODY: u32 = 65534;

    /// A PostgreSQL server of Debian's `postgresql` package on 127.0.0.1, on a free port,
    /// initialised in a temporary directory (as `nobody` when the tests run as root), with a
    /// `monoflake` role that logs in by password (SCRAM); stopped by its pid on drop.
    pub struct Pg {
        child: Option<Child>,
        /// `postgres://monoflake:…@127.0.0.1:PORT/postgres` (plain text, loopback).
        pub url: String,
        pub port: u16,
        bin: PathBuf,
        data: PathBuf,
        extra: Vec<String>,
        _dir: Option<TempDir>,
    }

    /// Where Debian's `postgresql` puts initdb and postgres: the newest version's `bin`.
    fn bin_dir() -> PathBuf {
        if let Ok(dir) = std::env::var("MONOFLAKE_PG_BIN") {
            return dir.into();
        }
        let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .map(|d| d.filter_map(|e| Some(e.ok()?.path().join("bin"))).collect())
            .unwrap_or_default();
        found.retain(|p| p.join("initdb").exists());
        found.sort_by_key(|p| {
            p.parent()
                .and_then(|v| v.file_name()?.to_str()?.parse::<u32>().ok())
                .unwrap_or(0)
        });
        found.pop().expect(
            "PostgreSQL is not installed: apt-get install -y postgresql (bash .ci/run does)",
        )
    }

    fn as_server_user(command: &mut Command, dir: &Path) {
        if std::fs::metadata(dir).unwrap().uid() == 0 {
            command.uid(NOBODY).gid(NOBODY);
        }
    }

    fn give_to_server_user(path: &Path) {
        if std::fs::metadata(path).unwrap().uid() == 0 {
            std::os::unix::fs::chown(path, Some(NOBODY), Some(NOBODY)).unwrap();
        }
    }

    impl Pg {
        /// The server the test command started (`MONOFLAKE_TEST_PG`, set by `.ci/run`), or a
        /// private one. Tests that stop or restart the server use `start`.
        pub fn shared() -> Pg {
            match std::env::var("MONOFLAKE_TEST_PG") {
                Ok(url) if !url.is_empty() => Pg {
                    child: None,
                    url,
                    port: 0,
                    bin: PathBuf::new(),
                    data: PathBuf::new(),
                    extra: Vec::new(),
                    _dir: None,
                },
                _ => Pg::start(),
            }
        }

        pub fn start() -> Pg {
            Self::start_with(&[], |_| {})
        }

        /// A private server started with these `-c name=value` settings, after `prepare`
        /// has had the data directory (to add certificates, rewrite pg_hba.conf).
        pub fn start_with(settings: &[&str], prepare: impl FnOnce(&Path)) -> Pg {
            let dir = TempDir::new("pg");
            std::fs::set_permissions(
                dir.path(),
                std::os::unix::fs::PermissionsExt::from_mode(0o755),
            )
            .unwrap();
            let data = dir.path().join("data");
            std::fs::create_dir(&data).unwrap();
            give_to_server_user(&data);
            let pwfile = dir.path().join("pw");
            std::fs::write(&pwfile, PASSWORD).unwrap();
            give_to_server_user(&pwfile);
            let bin = bin_dir();
            let mut initdb = Command::new(bin.join("initdb"));
            initdb
                .arg("-D")
                .arg(&data)
                .args([
                    "-U",
                    "monoflake",
                    "--auth-local=trust",
                    "--auth-host=scram-sha-256",
                ])
                .arg(format!("--pwfile={}", pwfile.display()))
                .args(["-E", "UTF8", "--locale=C"])
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
            as_server_user(&mut initdb, dir.path());
            let out = initdb.output().expect("initdb");
            assert!(
                out.status.success(),
                "initdb: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            prepare(&data);
            let port = free_port();
            let mut pg = Pg {
                child: None,
                url: format!("postgres://monoflake:{PASSWORD}@127.0.0.1:{port}/postgres"),
                port,
                bin,
                data,
                extra: settings.iter().map(|s| (*s).to_owned()).collect(),
                _dir: Some(dir),
            };
            pg.resume();
            pg
        }

        /// Starts the server again (after `stop`), on the same port and data.
        pub fn resume(&mut self) {
            assert!(self.child.is_none(), "already running");
            let mut command = Command::new(self.bin.join("postgres"));
            command
                .arg("-D")
                .arg(&self.data)
                .args(["-p", &self.port.to_string()])
                .args([
                    "-c",
                    "listen_addresses=127.0.0.1",
                    "-c",
                    "unix_socket_directories=",
                ]);
            for s in &self.extra {
                command.args(["-c", s]);
            }
            command.stdout(Stdio::null()).stderr(Stdio::null());
            as_server_user(&mut command, self.data.parent().unwrap());
            self.child = Some(command.spawn().expect("postgres"));
            let start = Instant::now();
            while !self.psql_ok("SELECT 1") {
                assert!(
                    start.elapsed() < Duration::from_secs(30),
                    "PostgreSQL did not start"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }

        fn psql_command(&self, sql: &str) -> Command {
            let mut c = Command::new("psql");
            c.arg(&self.url)
                .args(["-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-c", sql])
                .env("PGCONNECT_TIMEOUT", "5");
            c
        }

        fn psql_ok(&self, sql: &str) -> bool {
            self.psql_command(sql)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        }

        /// Runs SQL with psql and returns its output (unaligned, tuples only).
        pub fn psql(&self, sql: &str) -> String {
            let out = self.psql_command(sql).output().expect("psql");
            assert!(
                out.status.success(),
                "psql {sql}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).trim().to_owned()
        }

        /// Stops the server by its pid (a fast shutdown: SIGINT) and waits for it.
        pub fn stop(&mut self) {
            if let Some(mut child) = self.child.take() {
                super::signal(child.id(), "INT");
                let _ = child.wait();
            }
        }

        /// The data directory (for certificates and pg_hba.conf).
        pub fn data(&self) -> &Path {
            &self.data
        }
    }

    impl Drop for Pg {
        fn drop(&mut self) {
            if let Some(mut child) = self.child.take() {
                super::signal(child.id(), "INT");
                let start = Instant::now();
                while start.elapsed() < Duration::from_secs(10) {
                    if let Ok(Some(_)) = child.try_wait() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }

    /// Makes a file the server's (certificates and keys it reads), mode 0600.
    pub fn server_file(path: &Path) {
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        give_to_server_user(path);
    }
}

#[cfg(feature = "postgres")]
pub use pg::server_file as pg_server_file;

/// Sends a signal by name to a process with the `kill` command.
pub fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(ok.success(), "kill -{sig} {pid}");
}

/// A file store that fails on demand: reservation writes, and renewals (as an unreachable
/// store or as a lost lease); its renewals report a finite validity when given one.
#[derive(Debug)]
pub struct Flaky {
    inner: monoflake::FileStore,
    pub fail_extend: std::sync::atomic::AtomicBool,
    /// 0: renewals work; 1: the store is unreachable; 2: the lease was taken over.
    pub fail_renew: std::sync::atomic::AtomicU8,
    /// Reservation writes say the claim is gone (`LeaseLost`), as when its records were
    /// deleted; the release then finds it gone.
    pub lost_extend: std::sync::atomic::AtomicBool,
    /// Write-backs ([`monoflake::NodeStore::restore`]) fail, as on a directory the holder
    /// may no longer write.
    pub fail_restore: std::sync::atomic::AtomicBool,
    /// Every write-back that succeeded, in order.
    pub restored: std::sync::Mutex<Vec<u64>>,
    /// Reservation writes wait while this is set, as on a store that is slow to answer.
    pub hold_extend: std::sync::atomic::AtomicBool,
    /// Every reservation write that succeeded, in order.
    pub extended: std::sync::Mutex<Vec<u64>>,
    /// Renewals wait while this is set, as on a store that does not answer (a partition).
    pub hold_renew: std::sync::atomic::AtomicBool,
    /// The system clock (ms) when the first renewal held by `hold_renew` began waiting.
    pub held_since: std::sync::Mutex<Option<u64>>,
    valid_for: Option<std::time::Duration>,
}

impl Flaky {
    pub fn new(dir: &Path, valid_for: Option<std::time::Duration>) -> std::sync::Arc<Flaky> {
        std::sync::Arc::new(Flaky {
            inner: monoflake::FileStore::open(dir).unwrap(),
            fail_extend: Default::default(),
            fail_renew: Default::default(),
            lost_extend: Default::default(),
            fail_restore: Default::default(),
            restored: Default::default(),
            hold_extend: Default::default(),
            extended: Default::default(),
            hold_renew: Default::default(),
            held_since: Default::default(),
            valid_for,
        })
    }
}

impl monoflake::NodeStore for Flaky {
    fn describe(&self) -> String {
        "flaky".into()
    }
    fn claim(
        &self,
        layout: &monoflake::Layout,
        request: monoflake::NodeRequest,
    ) -> Result<monoflake::Claim, monoflake::Error> {
        self.inner.claim(layout, request)
    }
    fn extend(&self, claim: &monoflake::Claim, until_ms: u64) -> Result<(), monoflake::Error> {
        while self.hold_extend.load(Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        if self.fail_extend.load(Ordering::SeqCst) {
            return Err(monoflake::Error::store("flaky", "disk full"));
        }
        if self.lost_extend.load(Ordering::SeqCst) {
            return Err(monoflake::Error::lease_lost(
                claim.node(),
                "records deleted",
            ));
        }
        self.inner.extend(claim, until_ms)?;
        self.extended.lock().unwrap().push(until_ms);
        Ok(())
    }
    fn reservation(&self, claim: &monoflake::Claim) -> Result<Option<u64>, monoflake::Error> {
        self.inner.reservation(claim)
    }
    fn restore(&self, claim: &monoflake::Claim, until_ms: u64) -> Result<(), monoflake::Error> {
        if self.fail_restore.load(Ordering::SeqCst) {
            return Err(monoflake::Error::store("flaky", "permission denied"));
        }
        self.inner.restore(claim, until_ms)?;
        self.restored.lock().unwrap().push(until_ms);
        Ok(())
    }
    fn abandon(&self, claim: monoflake::Claim) -> Result<(), monoflake::Error> {
        self.inner.abandon(claim)
    }
    fn renew(
        &self,
        claim: &monoflake::Claim,
    ) -> Result<Option<std::time::Duration>, monoflake::Error> {
        while self.hold_renew.load(Ordering::SeqCst) {
            self.held_since
                .lock()
                .unwrap()
                .get_or_insert_with(system_ms);
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        match self.fail_renew.load(Ordering::SeqCst) {
            1 => Err(monoflake::Error::store("flaky", "unreachable")),
            2 => Err(monoflake::Error::lease_lost(claim.node(), "taken over")),
            _ => self.inner.renew(claim).map(|_| self.valid_for),
        }
    }
    fn release(&self, claim: monoflake::Claim, until_ms: u64) -> Result<(), monoflake::Error> {
        self.inner.release(claim, until_ms)
    }
}

/// Collects a child's stdout IDs on a thread, so a paused or slow reader never stalls it.
pub struct Reader {
    ids: Arc<Mutex<Vec<u64>>>,
    thread: Option<JoinHandle<()>>,
}

impl Reader {
    pub fn spawn(child: &mut Child) -> Reader {
        let ids = Arc::new(Mutex::new(Vec::new()));
        let out = BufReader::new(child.stdout.take().unwrap());
        let sink = Arc::clone(&ids);
        let thread = std::thread::spawn(move || {
            for line in out.lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push(line.parse().unwrap());
            }
        });
        Reader {
            ids,
            thread: Some(thread),
        }
    }

    pub fn count(&self) -> usize {
        self.ids.lock().unwrap().len()
    }

    pub fn wait_for(&self, n: usize) {
        let start = Instant::now();
        while self.count() < n {
            assert!(start.elapsed() < Duration::from_secs(30), "no output");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn finish(mut self) -> Vec<u64> {
        self.thread.take().unwrap().join().unwrap();
        std::mem::take(&mut *self.ids.lock().unwrap())
    }
}

/// Waits for a child and returns its exit code and standard error.
pub fn stderr_of(child: std::process::Child) -> (Option<i32>, String) {
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The hand-over check: no ID issued by both `old` and `new`, and every ID of the new holder
/// above every ID of the old one.
pub fn assert_successor_above(old: &[u64], new: &[u64]) {
    let old_set: std::collections::HashSet<u64> = old.iter().copied().collect();
    let shared = new.iter().filter(|id| old_set.contains(id)).count();
    assert_eq!(shared, 0, "{shared} IDs issued by both");
    assert!(
        new.iter().min() > old.iter().max(),
        "the old holder issued at or above the successor's first ID"
    );
}

/// Claims `node` of `layout` from a file store on this host once its last holder — a
/// generator of this process whose records were deleted under it — has let go: until it has
/// sealed and written back what it used, the node's host-wide claim refuses every claimant
/// on the host (naming this process, or — when the holder lets go while the refusal looks
/// for it — "another process"). Panics on any other error (a liveness bound of 60 s).
pub fn claim_when_let_go(
    store: &dyn monoflake::NodeStore,
    layout: &monoflake::Layout,
    node: u64,
) -> monoflake::Claim {
    let give_up = Instant::now() + Duration::from_secs(60);
    let us = format!("process {} of user", std::process::id());
    let mut refused = 0;
    loop {
        match store.claim(layout, monoflake::NodeRequest::Exact(node)) {
            Ok(claim) => return claim,
            Err(monoflake::Error::NodeHeld {
                holder: Some(h), ..
            }) if h.starts_with(&us) || h.starts_with("another process on this host") => {
                refused += 1;
                assert!(
                    Instant::now() < give_up,
                    "never let go ({refused} refusals)"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => panic!("{e:?}"),
        }
    }
}

/// The records of node `node` deleted under its running holder (`state`, the state directory),
/// and the node claimed from `store` once that holder has let go (it has sealed and written
/// back what it used, which the claim reads): the claim, having read a reservation. Then
/// `cleared` is set, for the holder's threads that wait for it.
pub fn delete_and_claim_when_let_go(
    state: &Path,
    store: &dyn monoflake::NodeStore,
    layout: &monoflake::Layout,
    node: u64,
    cleared: &std::sync::atomic::AtomicBool,
) -> monoflake::Claim {
    delete_under_holders(state);
    let claim = claim_when_let_go(store, layout, node);
    assert!(claim.reserved_until_ms().is_some());
    cleared.store(true, Ordering::Release);
    claim
}

/// Deletes a state directory under its running holders as `rm -rf` would, without racing
/// them: renamed away first (atomically, so a holder's next check finds it gone), then
/// removed. A holder that finds its claim lost writes back what it used into the directory
/// then at the path — which a plain `remove_dir_all` could meet half-way and fail on.
pub fn delete_under_holders(dir: &Path) {
    static N: AtomicU64 = AtomicU64::new(0);
    let mut name = dir.file_name().unwrap().to_owned();
    name.push(format!(".deleted-{}", N.fetch_add(1, Ordering::Relaxed)));
    let gone = dir.with_file_name(name);
    std::fs::rename(dir, &gone).unwrap();
    std::fs::remove_dir_all(&gone).unwrap();
}

/// A clock this many ms off the system's (which, on this host, is also the database's and
/// etcd's), and movable: a host whose clock runs ahead of the store's or behind it.
pub struct Skewed(std::sync::atomic::AtomicI64);

impl Skewed {
    pub fn by(ms: i64) -> Arc<Skewed> {
        Arc::new(Skewed(std::sync::atomic::AtomicI64::new(ms)))
    }

    pub fn set(&self, ms: i64) {
        // Ordering: Relaxed; the offset publishes nothing else.
        self.0.store(ms, std::sync::atomic::Ordering::Relaxed);
    }
}

impl monoflake::TimeSource for Skewed {
    fn now_ms(&self) -> u64 {
        // Ordering: Relaxed, as in `set`.
        let offset = self.0.load(std::sync::atomic::Ordering::Relaxed);
        system_ms().saturating_add_signed(offset)
    }
}

/// The system's clock, in Unix ms.
pub fn system_ms() -> u64 {
    u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// Issue 34, case 4, the holder's side, on a store with a clock of its own (PostgreSQL's
/// `clock_timestamp()`, etcd's `Date`): a holder 3 s ahead of it at its build loses the claim
/// at its first check, before its first ID, `named` accepting the reason. One whose clock
/// steps 3 s ahead while it runs is refused at once (its clock is past the deadline of its
/// last confirmed check) and loses the claim at its next check: sealed, what it used written
/// back, so the node's next holder starts above it. Back in step changes nothing. Nodes 1
/// and 2 of `layout`.
pub fn a_holder_ahead_of_the_store_clock_issues_nothing(
    store: Arc<dyn monoflake::NodeStore>,
    layout: &monoflake::Layout,
    named: impl Fn(&str) -> bool,
) {
    use monoflake::{Error, Generator, NodeRequest};
    match Generator::builder(layout.clone())
        .clock(Skewed::by(3_000))
        .build_leased(Arc::clone(&store), NodeRequest::Exact(1))
    {
        Err(Error::LeaseLost {
            node: 1, reason, ..
        }) if named(&reason) => {}
        other => panic!("{other:?}"),
    }
    let clock = Skewed::by(0);
    let holder = Generator::builder(layout.clone())
        .clock(Arc::clone(&clock))
        .build_leased(Arc::clone(&store), NodeRequest::Exact(2))
        .unwrap();
    let last = holder.next_id().unwrap();
    clock.set(3_000);
    // A liveness bound only: the refused call wakes the keeper.
    let give_up = Instant::now() + Duration::from_secs(60);
    loop {
        match holder.try_next_id() {
            Ok(id) => panic!("{id} issued with the clock 3 s ahead of the store's"),
            Err(Error::LeaseLost {
                node: 2, reason, ..
            }) if named(&reason) => break,
            Err(Error::ReservationUnavailable { .. } | Error::WouldBlock { .. }) => {}
            Err(e) => panic!("{e:?}"),
        }
        assert!(Instant::now() < give_up, "never lost, the lead named");
    }
    // For good, and back in step changes nothing.
    clock.set(0);
    assert!(matches!(
        holder.try_next_id(),
        Err(Error::LeaseLost { node: 2, .. })
    ));
    drop(holder);
    let again = store.claim(layout, NodeRequest::Exact(2)).unwrap();
    let used = last.parts(layout).unwrap().unix_ms();
    assert!(
        again.reserved_until_ms().is_some_and(|r| r > used),
        "{again:?}, the holder's last ID at {used} ms"
    );
    store.release(again, 0).unwrap();
}

/// The hand-over the take-over tests of the CLI watch: once the successor `b` has issued 10,000 IDs,
/// the stopped holder `a` is continued and runs until it exits; `b` issues 10,000 more and is
/// stopped. Returns `a`'s exit code and standard error, and both processes' IDs.
pub fn successor_then_resume(
    a: std::process::Child,
    ra: Reader,
    mut b: std::process::Child,
) -> (Option<i32>, String, Vec<u64>, Vec<u64>) {
    let rb = Reader::spawn(&mut b);
    rb.wait_for(10_000);
    signal(a.id(), "CONT");
    let (code, err) = stderr_of(a);
    rb.wait_for(rb.count() + 10_000);
    signal(b.id(), "TERM");
    let _ = stderr_of(b);
    (code, err, ra.finish(), rb.finish())
}

/// libfaketime, to preload into a process itself. Not the `faketime` command: that wrapper
/// keeps a semaphore and a shared-memory segment per run in /dev/shm, named by its pid, which a
/// killed run leaves behind (a later run whose pid matches one fails with "sem_open: File
/// exists"), and it runs the program as its child, which a signal to the wrapper does not stop.
pub fn libfaketime() -> PathBuf {
    std::fs::read_dir("/usr/lib")
        .unwrap()
        .flatten()
        .map(|e| e.path().join("faketime/libfaketime.so.1"))
        .find(|p| p.exists())
        .expect("libfaketime is not installed: apt-get install -y faketime (bash .ci/run does)")
}

/// `command` with its wall clock offset by `offset` (e.g. `-3s`, `+1h`) by libfaketime; its
/// monotonic clock is the real one.
pub fn with_wall_clock<'a>(command: &'a mut Command, offset: &str) -> &'a mut Command {
    command
        .env("LD_PRELOAD", libfaketime())
        .env("FAKETIME", offset)
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
}

/// Issue 34, case 4, the successor's side: the Unix ms of the first ID of a leased generator
/// on node 1 of `layout`, whose clock runs 3 s behind the system's (and so the store's).
pub fn first_ms_of_a_successor_behind(
    store: Arc<dyn monoflake::NodeStore>,
    layout: &monoflake::Layout,
) -> u64 {
    let successor = monoflake::Generator::builder(layout.clone())
        .clock(Skewed::by(-3_000))
        .build_leased(store, monoflake::NodeRequest::Exact(1))
        .unwrap();
    successor
        .next_id()
        .unwrap()
        .parts(layout)
        .unwrap()
        .unix_ms()
}

/// A host's state word (`build_state_lease`) that never issues: its last tick is the start's.
#[derive(Debug, Default)]
pub struct StartTick(AtomicU64);

impl monoflake::OutsideState for StartTick {
    fn start(&self, step: &monoflake::StateStep) {
        self.0.store(step.tick_of(step.start()), Ordering::Relaxed);
    }
    fn last_tick(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
    fn seal(&self) -> u64 {
        self.last_tick()
    }
}

/// A clock frozen at `ms` that counts the readings, cheap and precise, that the thread which
/// made it takes (not a lease keeper's), and may say it is coarse (generators then take the
/// precise reading before a general step).
pub struct Counting {
    ms: u64,
    coarse: bool,
    owner: std::thread::ThreadId,
    cheap: AtomicU64,
    precise: AtomicU64,
}

impl Counting {
    pub fn new(ms: u64, coarse: bool) -> Counting {
        Counting {
            ms,
            coarse,
            owner: std::thread::current().id(),
            cheap: AtomicU64::new(0),
            precise: AtomicU64::new(0),
        }
    }

    /// The owner's readings so far: (cheap, precise).
    pub fn reads(&self) -> (u64, u64) {
        (
            self.cheap.load(Ordering::Relaxed),
            self.precise.load(Ordering::Relaxed),
        )
    }

    fn count(&self, readings: &AtomicU64) -> u64 {
        if std::thread::current().id() == self.owner {
            readings.fetch_add(1, Ordering::Relaxed);
        }
        self.ms
    }
}

impl monoflake::TimeSource for Counting {
    fn now_ms(&self) -> u64 {
        self.count(&self.cheap)
    }

    fn precise_now_ms(&self) -> u64 {
        self.count(&self.precise)
    }

    fn is_coarse(&self) -> bool {
        self.coarse
    }
}
