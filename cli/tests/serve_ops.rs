//! `monoflake serve` as operators run it: settings from `MONOFLAKE_*` environment variables
//! (the flag winning, secrets never printed), and `/metrics`' build and process metrics.

#[path = "../../tests/common/mod.rs"]
mod common;
mod server;

use std::process::{Command, Output};
use std::time::{SystemTime, UNIX_EPOCH};

use server::{Server, agent, get, ids_of};

fn state_dir(dir: &common::TempDir) -> String {
    dir.path().display().to_string()
}

/// `monoflake ARGS…` with these environment variables, and none of the caller's
/// `MONOFLAKE_*` settings.
fn monoflake_with_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_monoflake"));
    for (name, _) in std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v))) {
        if name.starts_with("MONOFLAKE_") {
            c.env_remove(name);
        }
    }
    c.args(args).envs(env.iter().copied()).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn settings_come_from_the_environment_and_the_flag_wins() {
    let dir = common::TempDir::new("serve-env");
    let state = state_dir(&dir);
    let env = [
        ("MONOFLAKE_NODE", "7"),
        ("MONOFLAKE_LAYOUT", "discord"),
        ("MONOFLAKE_MAX_COUNT", "5"),
        // `Server::start` gives --listen 127.0.0.1:0: the flag wins over this port.
        ("MONOFLAKE_LISTEN", "127.0.0.1:1"),
    ];
    let s = Server::try_start_with_env(&["--state-dir", &state], &env).unwrap();
    assert_eq!(s.node, 7, "{}", s.log());
    assert_ne!(
        s.http, "127.0.0.1:1",
        "--listen wins over $MONOFLAKE_LISTEN"
    );
    let a = agent();
    let ready = get(&a, &s.url("/readyz"), &[]);
    assert_eq!(ready.json()["layout"], "discord");
    assert_eq!(ids_of(&get(&a, &s.url("/v1/ids?count=5"), &[])).len(), 5);
    let over = get(&a, &s.url("/v1/ids?count=6"), &[]);
    assert_eq!(
        (over.status, over.error()),
        (
            400,
            "count 6 is out of range: from 1 to 5 (--max-count)".to_owned()
        )
    );
    let (status, log) = s.stop();
    assert!(status.success(), "{log}");

    // The flag wins over the variable.
    let s = Server::try_start_with_env(
        &["--state-dir", &state, "--node", "9", "--max-count", "6"],
        &env,
    )
    .unwrap();
    assert_eq!(s.node, 9);
    assert_eq!(
        ids_of(&get(&agent(), &s.url("/v1/ids?count=6"), &[])).len(),
        6
    );
    drop(s);

    // A bad value from the environment is bad usage, named by its flag and variable.
    let out = monoflake_with_env(
        &["serve", "--state-dir", &state],
        &[("MONOFLAKE_MAX_COUNT", "many")],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("invalid value 'many' for '--max-count <N>'"),
        "{}",
        text(&out.stderr)
    );

    // `gen` shares the node flags but not their variables: on a fresh directory its node is
    // still `auto`'s lowest free one.
    let fresh = common::TempDir::new("serve-env-gen");
    let out = monoflake_with_env(
        &["gen", "--state-dir", &state_dir(&fresh)],
        &[("MONOFLAKE_NODE", "7")],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let id: u64 = text(&out.stdout).trim().parse().unwrap();
    assert_eq!(
        (id >> 12) & 0x3FF,
        0,
        "gen took the lowest free node, not 7"
    );
}

/// Every variable `serve` reads, as `--help` must name it.
const VARIABLES: [&str; 29] = [
    "MONOFLAKE_LAYOUT",
    "MONOFLAKE_NODE",
    "MONOFLAKE_TRUST_RESERVATION",
    "MONOFLAKE_BACKEND",
    "MONOFLAKE_ETCD_ENDPOINTS",
    "MONOFLAKE_ETCD_PREFIX",
    "MONOFLAKE_ETCD_CA",
    "MONOFLAKE_ETCD_CERT",
    "MONOFLAKE_ETCD_KEY",
    "MONOFLAKE_ETCD_USER",
    "MONOFLAKE_ETCD_PASSWORD_FILE",
    "MONOFLAKE_PG_URL_FILE",
    "MONOFLAKE_PG_TABLE",
    "MONOFLAKE_LEASE_TTL",
    "MONOFLAKE_LISTEN",
    "MONOFLAKE_GRPC_LISTEN",
    "MONOFLAKE_MAX_COUNT",
    "MONOFLAKE_TOKEN_FILE",
    "MONOFLAKE_TLS_CERT",
    "MONOFLAKE_TLS_KEY",
    "MONOFLAKE_MAX_CONNECTIONS",
    "MONOFLAKE_IDLE_TIMEOUT",
    "MONOFLAKE_HANDSHAKE_TIMEOUT",
    "MONOFLAKE_MAX_STREAMS",
    "MONOFLAKE_RESPONSE_BUDGET",
    "MONOFLAKE_MAX_WAIT",
    "MONOFLAKE_RECLAIM_AFTER",
    "MONOFLAKE_THREADS",
    "MONOFLAKE_DRAIN_TIMEOUT",
];

#[test]
fn help_names_every_variable_and_shows_no_secret() {
    let secrets = [
        ("MONOFLAKE_TOKEN_FILE", "/run/secrets/token-7f3a"),
        ("MONOFLAKE_TLS_KEY", "/run/secrets/key-7f3a.pem"),
        ("MONOFLAKE_ETCD_KEY", "/run/secrets/etcd-key-7f3a.pem"),
        ("MONOFLAKE_ETCD_PASSWORD_FILE", "/run/secrets/etcd-7f3a"),
        ("MONOFLAKE_PG_URL_FILE", "/run/secrets/pg-7f3a"),
        ("MONOFLAKE_TOKEN", "token-value-7f3a-0123456789"),
        ("MONOFLAKE_PG_URL", "postgres://u:hunter2-7f3a@db/x"),
        ("MONOFLAKE_ETCD_PASSWORD", "etcd-pass-7f3a"),
    ];
    let mut env = secrets.to_vec();
    env.push(("MONOFLAKE_LISTEN", "127.0.0.1:9999"));
    let out = monoflake_with_env(&["serve", "--help"], &env);
    assert!(out.status.success());
    let help = text(&out.stdout);
    for name in VARIABLES {
        assert!(help.contains(&format!("[env: {name}")), "{name} in\n{help}");
    }
    // Read by `serve` outside clap: named in the flags' help.
    for name in [
        "$MONOFLAKE_TOKEN",
        "$MONOFLAKE_PG_URL",
        "$MONOFLAKE_ETCD_PASSWORD",
        "$MONOFLAKE_STATE_DIR",
    ] {
        assert!(help.contains(name), "{name} in\n{help}");
    }
    // A setting's value is shown; where a secret lives, or the secret, never.
    assert!(
        help.contains("[env: MONOFLAKE_LISTEN=127.0.0.1:9999]"),
        "{help}"
    );
    assert!(help.contains("[env: MONOFLAKE_TOKEN_FILE]"), "{help}");
    assert!(!help.contains("7f3a"), "{help}");
    // `gen --help` names none: the variables are `serve`'s.
    let gen_help = text(&monoflake_with_env(&["gen", "--help"], &[]).stdout);
    assert!(!gen_help.contains("[env: "), "{gen_help}");
}

#[test]
fn the_token_from_the_environment_is_required_and_never_printed() {
    let dir = common::TempDir::new("serve-env-token");
    let state = state_dir(&dir);
    let token = "env-token-0123456789abcdef";
    let s = Server::try_start_with_env(&["--state-dir", &state], &[("MONOFLAKE_TOKEN", token)])
        .unwrap();
    let a = agent();
    let refused = get(&a, &s.url("/v1/id"), &[]);
    // A refusal of an ID route is never stored by a cache either.
    assert_eq!(
        (refused.status, refused.cache_control.as_deref()),
        (401, Some("no-store"))
    );
    let bearer = format!("Bearer {token}");
    let ok = get(&a, &s.url("/v1/id"), &[("Authorization", &bearer)]);
    assert_eq!(ids_of(&ok).len(), 1);
    let (status, log) = s.stop();
    assert!(status.success(), "{log}");
    assert!(!log.contains(token), "{log}");

    // A token file and $MONOFLAKE_TOKEN at once: refused, neither value shown.
    let file = dir.path().join("token");
    std::fs::write(&file, "file-token-0123456789abcdef\n").unwrap();
    let out = monoflake_with_env(
        &[
            "serve",
            "--state-dir",
            &state,
            "--token-file",
            file.to_str().unwrap(),
        ],
        &[("MONOFLAKE_TOKEN", token)],
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr).trim_end(),
        "monoflake: the token is given twice: --token-file (or $MONOFLAKE_TOKEN_FILE) and \
         $MONOFLAKE_TOKEN; give one"
    );
    // The same through $MONOFLAKE_TOKEN_FILE.
    let out = monoflake_with_env(
        &["serve", "--state-dir", &state],
        &[
            ("MONOFLAKE_TOKEN", token),
            ("MONOFLAKE_TOKEN_FILE", file.to_str().unwrap()),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    // Too short a token: its length is told, not its value.
    let out = monoflake_with_env(
        &["serve", "--state-dir", &state],
        &[("MONOFLAKE_TOKEN", "short-7f3a")],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("$MONOFLAKE_TOKEN has 10 bytes; at least 16 are needed"),
        "{err}"
    );
    assert!(!err.contains("7f3a"), "{err}");
}

/// The value of the sample `name` (no labels) in an exposition.
fn value(exposition: &str, name: &str) -> f64 {
    exposition
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("{name} missing from\n{exposition}"))
        .parse()
        .unwrap()
}

/// `VmRSS` of process `pid`, in bytes, as the kernel tells anyone who asks.
fn rss_of(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .unwrap()
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap();
    kib * 1024.0
}

#[test]
fn build_info_and_process_metrics_are_scraped() {
    if !cfg!(target_os = "linux") {
        return;
    }
    let dir = common::TempDir::new("serve-process");
    let before = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    // Connections that send nothing are kept long enough for the count below.
    let s = Server::start(&[
        "--state-dir",
        &state_dir(&dir),
        "--layout",
        "discord",
        "--idle-timeout",
        "600",
        "--handshake-timeout",
        "600",
    ]);
    let a = agent();
    let first = get(&a, &s.url("/metrics"), &[]).body;
    let build = format!(
        "monoflake_build_info{{version=\"{}\",layout=\"discord\"}} 1\n",
        env!("CARGO_PKG_VERSION")
    );
    assert!(first.contains(&build), "{build:?} missing from\n{first}");
    for (name, kind) in [
        ("monoflake_build_info", "gauge"),
        ("process_cpu_seconds", "counter"),
        ("process_resident_memory_bytes", "gauge"),
        ("process_virtual_memory_bytes", "gauge"),
        ("process_open_fds", "gauge"),
        ("process_max_fds", "gauge"),
        ("process_start_time_seconds", "gauge"),
    ] {
        assert!(
            first.contains(&format!("# TYPE {name} {kind}\n")),
            "{name} {kind} in\n{first}"
        );
    }
    let rss = value(&first, "process_resident_memory_bytes");
    // The server's own reading and the kernel's, read by this test, agree in size (RSS
    // moves a little between the two reads: a factor of two is far beyond that).
    let seen = rss_of(s.pid());
    assert!(
        rss > 0.0 && rss < 2.0 * seen && seen < 2.0 * rss,
        "{rss} vs {seen}"
    );
    assert!(value(&first, "process_virtual_memory_bytes") >= rss);
    let fds = value(&first, "process_open_fds");
    // At least standard input, output and error, the listener and this scrape's connection.
    assert!(fds >= 5.0, "{fds}");
    assert!(fds <= value(&first, "process_max_fds"));
    let cpu = value(&first, "process_cpu_seconds_total");
    assert!(cpu >= 0.0, "{cpu}");
    // Started between this test's clock reading and now; the kernel counts from boot in
    // 10 ms ticks, so allow for a clock stepped since boot, not for a wrong unit (×100).
    let started = value(&first, "process_start_time_seconds");
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    assert!(
        started > before.as_secs_f64() - 300.0 && started < now.as_secs_f64() + 300.0,
        "{started} not within {before:?}..{now:?}"
    );

    // Five more connections, once the server holds them, are five more descriptors.
    let held: Vec<std::net::TcpStream> = (0..5)
        .map(|_| std::net::TcpStream::connect(&s.http).unwrap())
        .collect();
    let open_before = value(&first, "monoflake_connections_open");
    let start = std::time::Instant::now();
    let second = loop {
        let m = get(&a, &s.url("/metrics"), &[]).body;
        if value(&m, "monoflake_connections_open") >= open_before + 5.0 {
            break m;
        }
        assert!(start.elapsed() < server::GUARD, "never held the five:\n{m}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(value(&second, "process_open_fds") >= fds + 5.0, "{second}");
    assert!(value(&second, "process_cpu_seconds_total") >= cpu);
    assert_eq!(value(&second, "process_start_time_seconds"), started);
    drop(held);
}
