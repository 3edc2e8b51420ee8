//! `monoflake serve` as operators run it: settings from `MONOFLAKE_*` environment variables
//! (the flag winning, secrets never printed).

#[path = "../../tests/common/mod.rs"]
mod common;
mod server;

use std::process::{Command, Output};

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
    assert_eq!(get(&a, &s.url("/v1/id"), &[]).status, 401);
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
