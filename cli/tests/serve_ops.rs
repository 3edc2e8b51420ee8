//! `monoflake serve` as operators run it: settings from `MONOFLAKE_*` environment variables
//! (the flag winning, secrets never printed), `/metrics`' build and process metrics, and its
//! help texts against docs/service.md.

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
    // Every setting from the environment, but not the tests' host scope (.cargo/config.toml):
    // without it the process shares the host-wide claims of every other monoflake here, and
    // `gen`'s lowest free node below was 1 while another process held 0.
    for (name, _) in std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v))) {
        if name.starts_with("MONOFLAKE_") && name != "MONOFLAKE_TEST_HOST_SCOPE" {
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
const VARIABLES: [&str; 31] = [
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
    "MONOFLAKE_PG_FAILOVER",
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
    "MONOFLAKE_DRAIN_GRACE",
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

/// The document `GET /openapi.json` serves, as the tree holds it.
const OPENAPI: &str = include_str!("../src/serve/openapi.json");

/// What a request got, with every header (names in lower case).
struct Raw {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Raw {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

fn call(agent: &ureq::Agent, method: &str, url: &str, headers: &[(&str, &str)]) -> Raw {
    let mut request = ureq::http::Request::builder().method(method).uri(url);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let mut response = agent
        .run(request.body(()).unwrap())
        .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    Raw {
        status: response.status().as_u16(),
        headers: response
            .headers()
            .iter()
            .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap().to_owned()))
            .collect(),
        body: response.body_mut().read_to_string().unwrap_or_default(),
    }
}

/// Follows `$ref`s within the document.
fn resolve<'a>(doc: &'a serde_json::Value, v: &'a serde_json::Value) -> &'a serde_json::Value {
    match v["$ref"].as_str() {
        Some(r) => resolve(doc, doc.pointer(&r[1..]).expect(r)),
        None => v,
    }
}

/// Checks `value` against the JSON Schema subset the document uses (`type`, `const`,
/// `required`, `properties`, `additionalProperties`, `items`, `minItems`, `minimum`).
fn conforms(doc: &serde_json::Value, schema: &serde_json::Value, value: &serde_json::Value) {
    use serde_json::Value;
    let schema = resolve(doc, schema);
    let fail = || panic!("{value} does not conform to {schema}");
    if let Some(c) = schema.get("const") {
        assert_eq!(value, c);
    }
    match schema["type"].as_str() {
        None => {}
        Some("object") => {
            let Value::Object(map) = value else { fail() };
            for name in schema["required"].as_array().into_iter().flatten() {
                assert!(
                    map.contains_key(name.as_str().unwrap()),
                    "{name} in {value}"
                );
            }
            for (name, member) in map {
                match (&schema["properties"][name], &schema["additionalProperties"]) {
                    (Value::Null, Value::Bool(false)) => fail(),
                    (Value::Null, Value::Null | Value::Bool(true)) => {}
                    (Value::Null, extra) => conforms(doc, extra, member),
                    (property, _) => conforms(doc, property, member),
                }
            }
        }
        Some("array") => {
            let Value::Array(items) = value else { fail() };
            let min = schema["minItems"].as_u64().unwrap_or(0);
            assert!(items.len() as u64 >= min, "{value}: fewer than {min} items");
            items
                .iter()
                .for_each(|v| conforms(doc, &schema["items"], v));
        }
        Some("string") => assert!(value.is_string(), "{value} is a string"),
        Some("integer") => {
            let n = value.as_u64().unwrap_or_else(|| fail());
            assert!(n >= schema["minimum"].as_u64().unwrap_or(0));
        }
        Some(other) => panic!("the test knows no type {other}"),
    }
}

/// The document's path template that `path` (without its query) matches.
fn template<'a>(doc: &'a serde_json::Value, path: &str) -> Option<&'a str> {
    let segments: Vec<&str> = path.split('/').collect();
    doc["paths"].as_object().unwrap().keys().find_map(|t| {
        let parts: Vec<&str> = t.split('/').collect();
        let matches = parts.len() == segments.len()
            && parts
                .iter()
                .zip(&segments)
                .all(|(p, s)| p == s || (p.starts_with('{') && !s.is_empty()));
        matches.then_some(t.as_str())
    })
}

/// Checks one answer against the document: its status is one the operation lists (or, for
/// a path or method the document does not have, its 404 or 405), its body (or none, for a
/// `HEAD`) the media type and schema listed, and every header listed present.
fn described(doc: &serde_json::Value, method: &str, target: &str, raw: &Raw) -> String {
    let path = target.split('?').next().unwrap();
    let status = raw.status.to_string();
    let operation = template(doc, path).and_then(|t| doc["paths"][t].get(method.to_lowercase()));
    let response = match operation {
        Some(op) => op["responses"]
            .get(&status)
            .unwrap_or_else(|| panic!("{method} {target}: {status} is not described")),
        None if raw.status == 404 && template(doc, path).is_none() => {
            &doc["components"]["responses"]["NotFound"]
        }
        None if raw.status == 405 => &doc["components"]["responses"]["MethodNotAllowed"],
        None => panic!("{method} {target}: {status} and no operation"),
    };
    let response = resolve(doc, response);
    for (name, header) in response["headers"].as_object().into_iter().flatten() {
        let served = raw
            .header(&name.to_lowercase())
            .unwrap_or_else(|| panic!("{method} {target} {status}: no {name} header"));
        let schema = resolve(doc, header)["schema"].clone();
        if let Some(c) = schema.get("const") {
            assert_eq!(served, c.as_str().unwrap(), "{method} {target}: {name}");
        }
    }
    match response.get("content") {
        None => assert_eq!(raw.body, "", "{method} {target} {status}: a body"),
        Some(content) => {
            let kind = raw.header("content-type").unwrap_or_default();
            let media = content
                .get(kind)
                .unwrap_or_else(|| panic!("{method} {target} {status}: {kind} not described"));
            if kind == "application/json" {
                assert!(
                    raw.body.ends_with("}\n"),
                    "{method} {target}: {:?}",
                    raw.body
                );
                let value: serde_json::Value = serde_json::from_str(&raw.body).unwrap();
                conforms(doc, &media["schema"], &value);
            }
        }
    }
    format!(
        "{method} {} {status}",
        template(doc, path).unwrap_or("(unknown)")
    )
}

#[test]
fn every_answer_the_server_gives_is_described_by_openapi_json() {
    let doc: serde_json::Value = serde_json::from_str(OPENAPI).unwrap();
    let dir = common::TempDir::new("serve-openapi");
    let token = "an-openapi-test-token-0123";
    let s = Server::try_start_with_env(
        &["--state-dir", &state_dir(&dir), "--reclaim-after", "3600"],
        &[("MONOFLAKE_TOKEN", token)],
    )
    .unwrap();
    let a = agent();
    let bearer = format!("Bearer {token}");
    let auth = [("authorization", bearer.as_str())];
    let text = [("authorization", bearer.as_str()), ("accept", "text/plain")];
    let served = call(&a, "GET", &s.url("/openapi.json"), &[]);
    assert_eq!(served.status, 200);
    assert_eq!(served.header("content-type"), Some("application/json"));
    assert_eq!(served.body, OPENAPI, "the document served is the tree's");

    let mut seen = std::collections::BTreeSet::new();
    let mut check = |method: &str, target: &str, headers: &[(&str, &str)], status: u16| {
        let raw = call(&a, method, &s.url(target), headers);
        assert_eq!(raw.status, status, "{method} {target}: {}", raw.body);
        seen.insert(described(&doc, method, target, &raw));
    };
    for method in ["GET", "HEAD"] {
        check(method, "/v1/id", &auth, 200);
        check(method, "/v1/id?count=5", &auth, 400);
        check(method, "/v1/id", &[], 401);
        check(method, "/v1/ids?count=3", &auth, 200);
        check(method, "/v1/ids?count=0", &auth, 400);
        check(method, "/v1/ids?cout=3", &auth, 400);
        check(method, "/v1/ids?count=3", &[], 401);
        check(method, "/v1/decode/175928847299117063", &auth, 200);
        check(method, "/v1/decode/0x2710", &auth, 200);
        check(method, "/v1/decode/12x", &auth, 400);
        check(method, "/v1/decode/%FF", &auth, 400);
        check(method, "/v1/decode/1", &[], 401);
        for probe in ["/healthz", "/readyz", "/metrics", "/openapi.json"] {
            check(method, probe, &[], 200);
        }
    }
    check("GET", "/v1/id", &text, 200);
    check("GET", "/v1/ids?count=3", &text, 200);
    check("GET", "/v2/id", &[], 404);
    check("POST", "/v1/id", &auth, 405);
    check("DELETE", "/healthz", &[], 405);

    // The lease lost: the ID routes and readiness refuse.
    common::delete_under_holders(dir.path());
    server::wait_for_status(&a, &s.url("/readyz"), 503);
    for method in ["GET", "HEAD"] {
        check(method, "/v1/id", &auth, 503);
        check(method, "/v1/ids?count=3", &auth, 503);
        check(method, "/readyz", &[], 503);
    }
    // Every operation of the document was called, and every status it lists but one: 14
    // operations, 32 of their statuses, a 404 and two 405s. (`/metrics`' 503, over the
    // response budget, needs a flood: serve_abuse.rs makes one.)
    assert_eq!(seen.len(), 35, "{seen:#?}");
    drop(s);
}

/// The metric table of docs/service.md: each row's metric as queried (`_total` on counters,
/// labels dropped), its type and its help text.
fn documented_metrics() -> Vec<(String, String, String)> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/service.md"))
        .unwrap();
    let section = doc
        .split("\n## Metrics\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("docs/service.md has a Metrics section");
    section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|row| {
            let cells: Vec<&str> = row.trim_matches('|').split(" | ").map(str::trim).collect();
            assert_eq!(cells.len(), 4, "metric | type | help | notes: {row}");
            let name = cells[0].trim_matches('`');
            let name = name.split('{').next().unwrap();
            (name.to_owned(), cells[1].to_owned(), cells[2].to_owned())
        })
        .collect()
}

/// Every `# HELP` of a running server's `/metrics` — TLS on, so that the certificate's
/// metric is there too — is in docs/service.md's table with its type and the same words, and
/// every row of the table is a metric the server gives.
#[test]
fn help_texts_are_the_documented_ones() {
    let dir = common::TempDir::new("serve-help");
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let cert = dir.path().join("cert.pem");
    let key = dir.path().join("key.pem");
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    let s = Server::start(&[
        "--state-dir",
        dir.path().join("state").to_str().unwrap(),
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    let roots = ureq::tls::RootCerts::Specific(std::sync::Arc::new(vec![
        ureq::tls::Certificate::from_der(certified.cert.der()).to_owned(),
    ]));
    let trusting: ureq::Agent = ureq::Agent::config_builder()
        .tls_config(ureq::tls::TlsConfig::builder().root_certs(roots).build())
        .timeout_global(Some(server::GUARD))
        .build()
        .into();
    let port = s.http.rsplit(':').next().unwrap();
    let scraped = get(&trusting, &format!("https://localhost:{port}/metrics"), &[]);
    assert_eq!(scraped.status, 200);
    let mut served = std::collections::BTreeMap::new();
    let mut kinds = std::collections::BTreeMap::new();
    for line in scraped.body.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap();
            served.insert(name.to_owned(), help.to_owned());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            kinds.insert(name.to_owned(), kind.to_owned());
        }
    }
    // The names as queried: a counter's samples end in `_total`.
    let served: std::collections::BTreeMap<String, (String, String)> = served
        .into_iter()
        .map(|(family, help)| {
            let kind = kinds[&family].clone();
            let name = if kind == "counter" {
                format!("{family}_total")
            } else {
                family
            };
            (name, (kind, help))
        })
        .collect();
    let documented = documented_metrics();
    assert!(documented.len() >= 30, "{documented:?}");
    let mut names = std::collections::BTreeSet::new();
    for (name, kind, help) in &documented {
        assert!(names.insert(name.clone()), "{name} is in the table twice");
        // The soft limit on descriptors is left out when unlimited (docs/service.md says so).
        if name == "process_max_fds" && !served.contains_key(name) {
            let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
            assert!(limits.contains("unlimited            unlimited            files"));
            continue;
        }
        let Some((served_kind, served_help)) = served.get(name) else {
            panic!("docs/service.md names {name}, which /metrics does not give");
        };
        assert_eq!(served_kind, kind, "{name}'s type");
        assert_eq!(
            served_help, help,
            "{name}'s help: /metrics, then docs/service.md"
        );
    }
    for name in served.keys() {
        assert!(
            names.contains(name),
            "/metrics gives {name}, which docs/service.md's table does not name"
        );
    }
    let (status, log) = s.stop();
    assert!(status.success(), "{log}");
}
