//! Helpers shared by the integration tests: temporary directories and a private etcd.
#![allow(dead_code, unused_imports)]

pub mod workers;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
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
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
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

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
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
    valid_for: Option<std::time::Duration>,
}

impl Flaky {
    pub fn new(dir: &Path, valid_for: Option<std::time::Duration>) -> std::sync::Arc<Flaky> {
        std::sync::Arc::new(Flaky {
            inner: monoflake::FileStore::open(dir).unwrap(),
            fail_extend: Default::default(),
            fail_renew: Default::default(),
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
        if self.fail_extend.load(Ordering::SeqCst) {
            return Err(monoflake::Error::store("flaky", "disk full"));
        }
        self.inner.extend(claim, until_ms)
    }
    fn renew(
        &self,
        claim: &monoflake::Claim,
    ) -> Result<Option<std::time::Duration>, monoflake::Error> {
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
