//! The run's log, the real clock, and every process the run started, by pid.
//!
//! Every server and generator the run starts is recorded here (and in `<run>/pids`, which
//! `scripts/chaos.sh` reads if the run itself dies), and stopped by its pid at the end; no
//! process is ever looked up or stopped by name.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The real wall clock (this process is never under libfaketime), in Unix ms.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The run's log: `run.log` in the run's folder, and the lines that matter on stderr too.
#[derive(Debug)]
pub struct Log {
    start: Instant,
    file: Mutex<File>,
}

impl Log {
    pub fn create(path: &Path) -> std::io::Result<Log> {
        Ok(Log {
            start: Instant::now(),
            file: Mutex::new(File::create(path)?),
        })
    }

    fn stamp(&self) -> String {
        format!("+{:.3}s", self.start.elapsed().as_secs_f64())
    }

    /// To stderr and the log.
    pub fn say(&self, message: &str) {
        let line = format!("[{}] {message}", self.stamp());
        eprintln!("{line}");
        self.write(&line);
    }

    /// To the log only.
    pub fn note(&self, message: &str) {
        let line = format!("[{}] {message}", self.stamp());
        self.write(&line);
    }

    fn write(&self, line: &str) {
        if let Ok(mut f) = self.file.lock() {
            let _ = writeln!(f, "{line}");
        }
    }
}

/// Sends `signal` to `pid`; false when there is no such process.
pub fn signal(pid: i32, signal: Signal) -> bool {
    pid > 0 && kill(Pid::from_raw(pid), signal).is_ok()
}

/// Every live process the run started: pid and what it is.
#[derive(Debug)]
pub struct Pids {
    live: Mutex<BTreeMap<i32, String>>,
    file: PathBuf,
}

impl Pids {
    pub fn new(file: PathBuf) -> Pids {
        Pids {
            live: Mutex::new(BTreeMap::new()),
            file,
        }
    }

    pub fn add(&self, pid: i32, what: &str) {
        let mut live = self.live.lock().expect("pids");
        live.insert(pid, what.to_owned());
        self.save(&live);
    }

    pub fn remove(&self, pid: i32) {
        let mut live = self.live.lock().expect("pids");
        live.remove(&pid);
        self.save(&live);
    }

    fn save(&self, live: &BTreeMap<i32, String>) {
        let text: String = live
            .iter()
            .map(|(pid, what)| format!("{pid} {what}\n"))
            .collect();
        let _ = std::fs::write(&self.file, text);
    }

    /// Kills every process still recorded (SIGCONT first, so a stopped one dies at once),
    /// and names them.
    pub fn kill_all(&self) -> Vec<String> {
        let mut live = self.live.lock().expect("pids");
        let mut killed = Vec::new();
        for (pid, what) in live.iter() {
            signal(*pid, Signal::SIGCONT);
            if signal(*pid, Signal::SIGKILL) {
                killed.push(format!("{what} (pid {pid})"));
            }
        }
        live.clear();
        self.save(&live);
        killed
    }
}

/// A free TCP port on 127.0.0.1 for a server to take: bound, released, from 20000–31999.
///
/// Below the kernel's ephemeral range (32768–60999 by default) on purpose: a port from a bind
/// to port 0 comes from that range, and between its release and the server's bind any
/// outgoing connection on the host may take it as its local port (a CI run's server failed
/// with "Address already in use" so). Below it only an explicit bind takes a port. The first
/// port tried depends on the pid and a counter, so the calls of one run, or of runs side by
/// side, try different ports.
pub fn free_port() -> std::io::Result<u16> {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_000;
    let mut last = None;
    for _ in 0..SPAN {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let port = (LOW + std::process::id().wrapping_mul(7_919).wrapping_add(n) % SPAN) as u16;
        match std::net::TcpListener::bind(("127.0.0.1", port)) {
            Ok(_) => return Ok(port),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no port tried")))
}

/// Waits for `pid` to be gone (after a signal), for at most `bound`.
pub async fn wait_gone(child: &mut tokio::process::Child, bound: Duration) -> Option<String> {
    match tokio::time::timeout(bound, child.wait()).await {
        Ok(Ok(status)) => Some(status.to_string()),
        Ok(Err(e)) => Some(format!("wait failed: {e}")),
        Err(_) => None,
    }
}
