//! A `monoflake serve` process for the service's tests: started on a free loopback port (port
//! 0, read back from what it prints), stopped with SIGTERM, killed if a test fails first.
#![allow(dead_code)]

pub mod hostile;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Long enough for a debug build on a loaded machine; only a guard against hangs.
pub const GUARD: Duration = Duration::from_secs(60);

pub struct Server {
    child: Option<Child>,
    /// `127.0.0.1:PORT` of the HTTP listener.
    pub http: String,
    /// `127.0.0.1:PORT` of the gRPC listener, when there is one.
    pub grpc: Option<String>,
    /// The node the server holds.
    pub node: u64,
    log: Arc<Mutex<String>>,
    lines: Receiver<String>,
}

/// The address in a line like `… serving HTTP on http://127.0.0.1:PORT`.
fn address(line: &str) -> String {
    let url = line.rsplit(' ').next().unwrap();
    url.split("://").nth(1).unwrap().to_owned()
}

impl Server {
    /// `monoflake serve --listen 127.0.0.1:0 ARGS…`, once it is serving.
    pub fn start(args: &[&str]) -> Server {
        Self::try_start(args).unwrap_or_else(|(code, log)| {
            panic!("serve exited with {code:?} before serving:\n{log}")
        })
    }

    /// As [`Server::start`], or the exit code and output of a server that did not start.
    pub fn try_start(args: &[&str]) -> Result<Server, (Option<i32>, String)> {
        Self::try_start_with_env(args, &[])
    }

    /// As [`Server::try_start`], with these environment variables set for the server.
    pub fn try_start_with_env(
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Result<Server, (Option<i32>, String)> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_monoflake"))
            .arg("serve")
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run monoflake serve");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, lines) = channel();
        let sink = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push_str(&format!("{line}\n"));
                if tx.send(line).is_err() {
                    // Nobody listens any more; keep draining so the server never blocks.
                }
            }
        });
        let mut http = None;
        let mut grpc = None;
        let mut node = None;
        let grpc_wanted = args.contains(&"--grpc-listen");
        let start = Instant::now();
        while http.is_none() || (grpc_wanted && grpc.is_none()) {
            assert!(start.elapsed() < GUARD, "serve did not start in time");
            match lines.recv_timeout(Duration::from_millis(200)) {
                Ok(line) if line.contains("serving HTTP on") => {
                    node = line
                        .split("node ")
                        .nth(1)
                        .and_then(|s| s.split(' ').next())
                        .and_then(|n| n.parse().ok());
                    http = Some(address(&line));
                }
                Ok(line) if line.contains("serving gRPC") => grpc = Some(address(&line)),
                Ok(_) => {}
                Err(_) => {
                    if let Some(status) = child.try_wait().unwrap() {
                        // Let the reader finish collecting what it printed.
                        std::thread::sleep(Duration::from_millis(100));
                        return Err((status.code(), log.lock().unwrap().clone()));
                    }
                }
            }
        }
        Ok(Server {
            child: Some(child),
            http: http.unwrap(),
            grpc,
            node: node.expect("the node in the start line"),
            log,
            lines,
        })
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.http)
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Everything printed to stderr so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Sends SIGTERM and waits for the exit (killed after [`GUARD`]).
    pub fn stop(self) -> (ExitStatus, String) {
        let ok = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
        self.wait_exit()
    }

    /// Waits for the server to exit (killed after [`GUARD`]).
    pub fn wait_exit(mut self) -> (ExitStatus, String) {
        let mut child = self.child.take().unwrap();
        let start = Instant::now();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                std::thread::sleep(Duration::from_millis(50));
                return (status, self.log());
            }
            if start.elapsed() > GUARD {
                let _ = child.kill();
                panic!("serve did not stop after SIGTERM:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A small tokio runtime for the async clients (tonic, h2).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A client that reports every status as a value, not an error.
pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(GUARD))
        .build()
        .into()
}

/// A response's status, headers of interest and body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub content_type: String,
    pub retry_after: Option<String>,
    /// The `Cache-Control` header, when there is one.
    pub cache_control: Option<String>,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }

    /// The `error` of a JSON error body.
    pub fn error(&self) -> String {
        self.json()["error"]
            .as_str()
            .expect("an error message")
            .to_owned()
    }
}

pub fn answer(mut response: ureq::http::Response<ureq::Body>) -> Answer {
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let content_type = header("content-type").unwrap_or_default();
    let retry_after = header("retry-after");
    let cache_control = header("cache-control");
    Answer {
        status: response.status().as_u16(),
        content_type,
        retry_after,
        cache_control,
        body: response
            .body_mut()
            .with_config()
            .limit(64 * 1024 * 1024)
            .read_to_string()
            .unwrap(),
    }
}

/// `GET url` with optional headers.
pub fn get(agent: &ureq::Agent, url: &str, headers: &[(&str, &str)]) -> Answer {
    let mut request = agent.get(url);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    answer(request.call().unwrap_or_else(|e| panic!("GET {url}: {e}")))
}

/// One ID from `GET url`, as a client does it: a 503 (the service paused, its node store slow
/// to confirm, or at its lead limit) is asked again after its `retry_after_ms` (at most 1 s
/// a time), for at most [`GUARD`]. Returns the ID and how many 503s came first.
pub fn id_retrying(agent: &ureq::Agent, url: &str) -> (u64, u32) {
    let start = std::time::Instant::now();
    let mut refused = 0;
    loop {
        let answer = get(agent, url, &[]);
        if answer.status != 503 || start.elapsed() > GUARD {
            return (ids_of(&answer)[0], refused);
        }
        refused += 1;
        let wait = answer.json()["retry_after_ms"].as_u64().unwrap_or(100);
        std::thread::sleep(Duration::from_millis(wait.clamp(1, 1_000)));
    }
}

/// The IDs of a `{"ids":[…]}` or `{"id":…}` body.
pub fn ids_of(a: &Answer) -> Vec<u64> {
    assert_eq!(a.status, 200, "{a:?}");
    let json = a.json();
    match (&json["ids"], &json["id"]) {
        (serde_json::Value::Array(ids), _) => ids
            .iter()
            .map(|v| v.as_str().expect("IDs as strings").parse().unwrap())
            .collect(),
        (_, serde_json::Value::String(id)) => vec![id.parse().unwrap()],
        _ => panic!("no IDs in {json}"),
    }
}

/// Polls `url` until it answers `status` (a guard, not a timing assertion).
pub fn wait_for_status(agent: &ureq::Agent, url: &str, status: u16) -> Answer {
    let start = Instant::now();
    loop {
        let a = get(agent, url, &[]);
        if a.status == status {
            return a;
        }
        assert!(
            start.elapsed() < GUARD,
            "{url} never answered {status}: {a:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
