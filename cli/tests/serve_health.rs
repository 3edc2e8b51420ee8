//! `monoflake health`: the probe an image's HEALTHCHECK and exec probes run, against a real
//! `monoflake serve`.

#[path = "../../tests/common/mod.rs"]
mod common;
mod server;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use server::{GUARD, Server};

/// `monoflake health ARGS…` with only these `MONOFLAKE_*` variables set.
fn health(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_monoflake"));
    command.arg("health").args(args);
    for (name, _) in std::env::vars() {
        if name.starts_with("MONOFLAKE_") {
            command.env_remove(name);
        }
    }
    command.envs(env.iter().copied()).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The port of `127.0.0.1:PORT`.
fn port(addr: &str) -> &str {
    addr.rsplit(':').next().unwrap()
}

#[test]
fn the_probe_follows_readiness_and_liveness() {
    let dir = common::TempDir::new("health");
    let s = Server::start(&[
        "--state-dir",
        dir.path().to_str().unwrap(),
        "--drain-grace",
        "30",
    ]);
    // As an image runs it: no flag, the container's own $MONOFLAKE_LISTEN, every interface.
    let everywhere = format!("0.0.0.0:{}", port(&s.http));
    let env = [("MONOFLAKE_LISTEN", everywhere.as_str())];
    let ready = health(&[], &env);
    assert_eq!(ready.status.code(), Some(0), "{}", text(&ready.stderr));
    assert_eq!(
        text(&ready.stdout),
        format!(
            "{{\"status\":\"ready\",\"node\":{},\"layout\":\"twitter\"}}\n",
            s.node
        )
    );
    let live = health(&["--live"], &env);
    assert_eq!(live.status.code(), Some(0), "{}", text(&live.stderr));
    assert_eq!(text(&live.stdout), "{\"status\":\"ok\"}\n");
    // A stop under way: not ready (the grace keeps the listener open meanwhile), still live.
    common::signal(s.pid(), "TERM");
    let start = Instant::now();
    let stopping = loop {
        let out = health(&["--listen", &s.http], &[]);
        if out.status.code() == Some(1) {
            break out;
        }
        assert!(start.elapsed() < GUARD, "{}", text(&out.stdout));
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        text(&stopping.stderr),
        format!(
            "monoflake: http://{}/readyz: 503 {{\"error\":\"stopping: the node is being \
             released\"}}\n",
            s.http
        )
    );
    assert!(stopping.stdout.is_empty());
    assert_eq!(health(&["--live"], &env).status.code(), Some(0));
    // A second signal ends the grace.
    common::signal(s.pid(), "TERM");
    let (status, log) = s.wait_exit();
    assert_eq!(status.code(), Some(0), "{log}");
    assert!(log.contains("SIGTERM again: closing now"), "{log}");
}

#[test]
fn after_a_lost_lease_the_probe_says_why_and_liveness_holds() {
    let dir = common::TempDir::new("health-lost");
    let s = Server::start(&[
        "--state-dir",
        dir.path().to_str().unwrap(),
        "--reclaim-after",
        "3600",
    ]);
    common::delete_under_holders(dir.path());
    let start = Instant::now();
    let lost = loop {
        let out = health(&["--listen", &s.http], &[]);
        if out.status.code() == Some(1) && text(&out.stderr).contains("lease was lost") {
            break out;
        }
        assert!(start.elapsed() < GUARD, "{}", text(&out.stderr));
        std::thread::sleep(Duration::from_millis(50));
    };
    let said = text(&lost.stderr);
    assert!(
        said.starts_with(&format!(
            "monoflake: http://{}/readyz: 503 {{\"error\":",
            s.http
        )),
        "{said}"
    );
    let live = health(&["--listen", &s.http, "--live"], &[]);
    assert_eq!(live.status.code(), Some(0), "{}", text(&live.stderr));
}

#[test]
fn nothing_listening_or_no_answer_fails_within_the_timeout() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = free.local_addr().unwrap().to_string();
    drop(free);
    let refused = health(&["--listen", &addr], &[]);
    assert_eq!(refused.status.code(), Some(1));
    assert_eq!(
        text(&refused.stderr),
        format!("monoflake: http://{addr}/readyz: Connection refused (os error 111)\n")
    );
    // A listener that takes the connection and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap().to_string();
    let start = Instant::now();
    let out = health(&["--listen", &addr, "--timeout", "0.3"], &[]);
    assert!(start.elapsed() < GUARD);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!("monoflake: http://{addr}/readyz: no answer within 0.3 s\n")
    );
    drop(silent);
    // Bad usage is 2, as for every subcommand.
    let bad = health(&["--timeout", "0"], &[]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn over_tls_the_probe_accepts_only_the_servers_own_certificate() {
    let dir = common::TempDir::new("health-tls");
    let write = |name: &str| {
        let certified =
            rcgen::generate_simple_self_signed(vec!["ids.internal".to_owned()]).unwrap();
        let cert = dir.path().join(format!("{name}.crt"));
        let key = dir.path().join(format!("{name}.key"));
        std::fs::write(&cert, certified.cert.pem()).unwrap();
        std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
        (
            cert.to_str().unwrap().to_owned(),
            key.to_str().unwrap().to_owned(),
        )
    };
    let (cert, key) = write("served");
    let (other, _) = write("other");
    let state = dir.path().join("state");
    let s = Server::start(&[
        "--state-dir",
        state.to_str().unwrap(),
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
    ]);
    // The settings serve was given, from the environment: HTTPS, the certificate pinned (its
    // name, ids.internal, is not the address the probe dials).
    let ok = health(
        &[],
        &[("MONOFLAKE_LISTEN", &s.http), ("MONOFLAKE_TLS_CERT", &cert)],
    );
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok.stderr));
    assert!(text(&ok.stdout).starts_with("{\"status\":\"ready\""));
    let wrong = health(&["--listen", &s.http, "--tls-cert", &other], &[]);
    assert_eq!(wrong.status.code(), Some(1));
    let said = text(&wrong.stderr);
    assert!(
        said.contains(&format!(
            "the server's certificate is not the first one in {other}"
        )),
        "{said}"
    );
    // Plain HTTP to the TLS listener is no answer either.
    let plain = health(&["--listen", &s.http, "--timeout", "1"], &[]);
    assert_eq!(plain.status.code(), Some(1), "{}", text(&plain.stdout));
    let (status, log) = s.stop();
    assert!(status.success(), "{log}");
}
