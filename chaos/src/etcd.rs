//! A 3-member etcd cluster on 127.0.0.1 (Debian's `etcd-server`), each member started,
//! killed and restarted by its pid; `etcdctl` for the leader and for clearing a prefix.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::process::{Child, Command};
use tokio::sync::Mutex;

use crate::procs::{Log, Pids, free_port, signal, wait_gone};

pub const MEMBERS: usize = 3;

#[derive(Debug)]
struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    child: Option<Child>,
    pid: i32,
}

#[derive(Debug)]
pub struct Cluster {
    members: Vec<Mutex<Member>>,
    dir: PathBuf,
    initial: String,
    /// `http://127.0.0.1:A,http://127.0.0.1:B,http://127.0.0.1:C`.
    pub endpoints: String,
}

impl Cluster {
    /// Starts the three members in `dir` and waits until the cluster answers.
    pub async fn start(dir: PathBuf, log: &Log, pids: &Pids) -> Result<Cluster, String> {
        std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
        let mut members = Vec::new();
        for i in 0..MEMBERS {
            let port = || free_port().map_err(|e| format!("no free port: {e}"));
            members.push(Member {
                name: format!("m{i}"),
                client_port: port()?,
                peer_port: port()?,
                child: None,
                pid: 0,
            });
        }
        let initial = members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect::<Vec<_>>()
            .join(",");
        let endpoints = members
            .iter()
            .map(|m| format!("http://127.0.0.1:{}", m.client_port))
            .collect::<Vec<_>>()
            .join(",");
        let cluster = Cluster {
            members: members.into_iter().map(Mutex::new).collect(),
            dir,
            initial,
            endpoints,
        };
        for i in 0..MEMBERS {
            cluster.start_member(i, log, pids).await?;
        }
        cluster.wait_healthy(Duration::from_secs(60)).await?;
        log.note(&format!("etcd cluster up at {}", cluster.endpoints));
        Ok(cluster)
    }

    /// Starts member `i` (again: an existing data directory keeps its identity).
    pub async fn start_member(&self, i: usize, log: &Log, pids: &Pids) -> Result<(), String> {
        let mut m = self.members[i].lock().await;
        if m.child.is_some() {
            return Ok(());
        }
        let logfile = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{}.log", m.name)))
            .map_err(|e| format!("etcd log: {e}"))?;
        let child = Command::new("etcd")
            .args(["--name", &m.name])
            .arg("--data-dir")
            .arg(self.dir.join(&m.name))
            .arg("--listen-client-urls")
            .arg(format!("http://127.0.0.1:{}", m.client_port))
            .arg("--advertise-client-urls")
            .arg(format!("http://127.0.0.1:{}", m.client_port))
            .arg("--listen-peer-urls")
            .arg(format!("http://127.0.0.1:{}", m.peer_port))
            .arg("--initial-advertise-peer-urls")
            .arg(format!("http://127.0.0.1:{}", m.peer_port))
            .args(["--initial-cluster", &self.initial])
            .args(["--initial-cluster-state", "new"])
            .args(["--initial-cluster-token", "monoflake-chaos"])
            .stdout(Stdio::null())
            .stderr(logfile)
            .spawn()
            .map_err(|e| format!("start etcd (apt-get install etcd-server): {e}"))?;
        m.pid = child.id().map_or(0, |p| p as i32);
        pids.add(m.pid, &format!("etcd {}", m.name));
        log.note(&format!("etcd {} started, pid {}", m.name, m.pid));
        m.child = Some(child);
        Ok(())
    }

    /// `kill -9` of member `i`; false when it was not running.
    pub async fn kill_member(&self, i: usize, pids: &Pids) -> bool {
        let mut m = self.members[i].lock().await;
        let Some(mut child) = m.child.take() else {
            return false;
        };
        signal(m.pid, Signal::SIGKILL);
        let _ = wait_gone(&mut child, Duration::from_secs(10)).await;
        pids.remove(m.pid);
        true
    }

    pub async fn member_name(&self, i: usize) -> String {
        self.members[i].lock().await.name.clone()
    }

    /// Every member not running is started.
    pub async fn start_all(&self, log: &Log, pids: &Pids) -> Result<(), String> {
        for i in 0..MEMBERS {
            self.start_member(i, log, pids).await?;
        }
        Ok(())
    }

    pub async fn etcdctl(&self, args: &[&str]) -> Result<String, String> {
        let out = self.run_etcdctl(args).await?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() {
            Ok(text)
        } else {
            Err(format!(
                "etcdctl {}: {}{}",
                args.join(" "),
                text,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    async fn run_etcdctl(&self, args: &[&str]) -> Result<std::process::Output, String> {
        Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", self.endpoints))
            .args(["--dial-timeout=2s", "--command-timeout=3s"])
            .args(args)
            .output()
            .await
            .map_err(|e| format!("run etcdctl (apt-get install etcd-client): {e}"))
    }

    /// The index of the member that leads now, from `endpoint status` (each member reports
    /// the leader's id and its own).
    pub async fn leader(&self) -> Option<usize> {
        // With a member down etcdctl fails, but still prints the others' status.
        let out = self
            .run_etcdctl(&["endpoint", "status", "-w", "json"])
            .await
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let status: serde_json::Value = serde_json::from_str(&text).ok()?;
        for entry in status.as_array()? {
            let s = &entry["Status"];
            if s["leader"].as_u64().is_some() && s["leader"] == s["header"]["member_id"] {
                let endpoint = entry["Endpoint"].as_str()?;
                for (i, m) in self.members.iter().enumerate() {
                    let port = m.lock().await.client_port;
                    if endpoint.ends_with(&format!(":{port}")) {
                        return Some(i);
                    }
                }
            }
        }
        None
    }

    /// `etcdctl del --prefix` (retried for up to `bound` while the cluster has no quorum).
    pub async fn del_prefix(&self, prefix: &str, bound: Duration) -> Result<String, String> {
        let start = tokio::time::Instant::now();
        loop {
            match self.etcdctl(&["del", "--prefix", prefix]).await {
                Ok(n) => return Ok(n.trim().to_owned()),
                Err(e) if start.elapsed() > bound => return Err(e),
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    pub async fn wait_healthy(&self, bound: Duration) -> Result<(), String> {
        let start = tokio::time::Instant::now();
        loop {
            match self.etcdctl(&["put", "/monoflake-chaos-probe", "ok"]).await {
                Ok(_) => return Ok(()),
                Err(e) if start.elapsed() > bound => {
                    return Err(format!("the etcd cluster did not answer: {e}"));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    /// Stops every member by its pid.
    pub async fn stop(&self, pids: &Pids) {
        for i in 0..MEMBERS {
            let mut m = self.members[i].lock().await;
            if let Some(mut child) = m.child.take() {
                signal(m.pid, Signal::SIGTERM);
                if wait_gone(&mut child, Duration::from_secs(10))
                    .await
                    .is_none()
                {
                    signal(m.pid, Signal::SIGKILL);
                    let _ = wait_gone(&mut child, Duration::from_secs(5)).await;
                }
                pids.remove(m.pid);
            }
        }
    }
}
