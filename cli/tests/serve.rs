//! `monoflake serve` over HTTP: every endpoint, every error status, uniqueness under
//! concurrent clients, SIGTERM handover, lease loss, start-up errors.

#[path = "../../tests/common/mod.rs"]
mod common;
mod server;

use std::collections::HashSet;
use std::process::Command;

use server::{GUARD, Server, agent, get, ids_of, wait_for_status};

fn state_args(dir: &common::TempDir) -> Vec<String> {
    vec!["--state-dir".into(), dir.path().display().to_string()]
}

fn start(dir: &common::TempDir, extra: &[&str]) -> Server {
    let mut args: Vec<String> = state_args(dir);
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Server::start(&args)
}

#[test]
fn id_ids_and_text_plain() {
    let dir = common::TempDir::new("serve-ids");
    let s = start(&dir, &["--node", "5"]);
    let a = agent();
    let one = get(&a, &s.url("/v1/id"), &[]);
    assert_eq!(one.content_type, "application/json");
    let first = ids_of(&one)[0];
    assert_eq!((first >> 12) & 0x3FF, 5, "node 5 in the Twitter layout");
    let batch = get(&a, &s.url("/v1/ids?count=1000"), &[]);
    let batch = ids_of(&batch);
    assert_eq!(batch.len(), 1000);
    assert!(batch[0] > first);
    assert!(
        batch.windows(2).all(|w| w[0] < w[1]),
        "a batch strictly increases"
    );
    // The whole batch is one run: consecutive sequence values within each tick.
    // Bare decimal lines for shell users.
    let text = get(&a, &s.url("/v1/ids?count=3"), &[("Accept", "text/plain")]);
    assert_eq!(text.status, 200);
    assert!(text.content_type.starts_with("text/plain"), "{text:?}");
    let lines: Vec<u64> = text.body.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(lines.len(), 3);
    assert!(lines[0] > *batch.last().unwrap());
    let single = get(&a, &s.url("/v1/id"), &[("Accept", "text/plain")]);
    assert!(single.body.ends_with('\n'));
    assert!(single.body.trim().parse::<u64>().unwrap() > lines[2]);
    // The largest count allowed works.
    let max = get(&a, &s.url("/v1/ids?count=100000"), &[]);
    assert_eq!(ids_of(&max).len(), 100_000);
    let (status, log) = s.stop();
    assert!(status.success(), "{log}");
}

#[test]
fn decode_matches_the_decode_command() {
    let dir = common::TempDir::new("serve-decode");
    let s = start(&dir, &["--layout", "discord"]);
    let a = agent();
    for id in ["175928847299117063", "90339695967350784"] {
        let served = get(&a, &s.url(&format!("/v1/decode/{id}")), &[]);
        assert_eq!(served.status, 200, "{served:?}");
        let cli = Command::new(env!("CARGO_BIN_EXE_monoflake"))
            .args(["decode", "--layout", "discord", "--json", id])
            .output()
            .unwrap();
        assert!(cli.status.success());
        // Byte for byte, the line end included.
        assert_eq!(served.body, String::from_utf8(cli.stdout).unwrap());
    }
    // Hex with 0x is read too.
    let hex = get(&a, &s.url("/v1/decode/0x0271065ac1020007"), &[]);
    assert_eq!(hex.json()["id"], "175928847299117063");
}

#[test]
fn health_readiness_and_metrics() {
    let dir = common::TempDir::new("serve-health");
    let s = start(&dir, &[]);
    let a = agent();
    let health = get(&a, &s.url("/healthz"), &[]);
    assert_eq!(
        (health.status, health.json()["status"].as_str()),
        (200, Some("ok"))
    );
    let ready = get(&a, &s.url("/readyz"), &[]);
    assert_eq!(ready.status, 200);
    assert_eq!(ready.json()["node"], s.node);
    assert_eq!(ready.json()["layout"], "twitter");
    ids_of(&get(&a, &s.url("/v1/ids?count=10"), &[]));
    get(&a, &s.url("/v1/ids?count=0"), &[]);
    let m = get(&a, &s.url("/metrics"), &[]);
    assert_eq!(m.status, 200);
    assert!(
        m.content_type.starts_with("application/openmetrics-text"),
        "{}",
        m.content_type
    );
    for needle in [
        "monoflake_ids_served_total 10\n",
        "monoflake_lease_held 1\n",
        "monoflake_responses_total{code=\"400\"} 1\n",
        "monoflake_request_duration_seconds_count{endpoint=\"/v1/ids\"} 2\n",
        "monoflake_request_duration_seconds_bucket{le=\"+Inf\",endpoint=\"/v1/ids\"} 2\n",
        "monoflake_reservation_writes_total ",
        "monoflake_lease_renewals_total ",
        "monoflake_reservation_failures_total 0\n",
        "monoflake_would_block_total 0\n",
        "monoflake_request_waits_total 0\n",
        "monoflake_clock_max_skew_seconds ",
        "monoflake_clock_held_back_seconds 0.0\n",
        "monoflake_connections_open ",
        "# EOF",
    ] {
        assert!(
            m.body.contains(needle),
            "{needle:?} missing from\n{}",
            m.body
        );
    }
    let issued: u64 = m
        .body
        .lines()
        .find_map(|l| l.strip_prefix("monoflake_ids_issued_total "))
        .unwrap()
        .parse()
        .unwrap();
    // Readiness probes, metric scrapes and the supervisor take no ID: what was issued is
    // exactly what was served.
    assert_eq!(issued, 10, "issued counts what was served, nothing else");
    for _ in 0..20 {
        assert_eq!(get(&a, &s.url("/readyz"), &[]).status, 200);
    }
    let m = get(&a, &s.url("/metrics"), &[]);
    assert!(
        m.body.contains("monoflake_ids_issued_total 10\n"),
        "probes took IDs:\n{}",
        m.body
    );
}

#[test]
fn every_error_status_with_a_json_reason() {
    let dir = common::TempDir::new("serve-errors");
    let s = start(&dir, &["--max-count", "500"]);
    let a = agent();
    let cases: [(&str, u16, &str); 8] = [
        (
            "/v1/ids?count=0",
            400,
            "count 0 is out of range: from 1 to 500 (--max-count)",
        ),
        (
            "/v1/ids?count=501",
            400,
            "count 501 is out of range: from 1 to 500 (--max-count)",
        ),
        (
            "/v1/ids?count=-1",
            400,
            "count \"-1\" is not a whole number: give N from 1 to 500",
        ),
        (
            "/v1/ids?count=99999999999999999999",
            400,
            "count \"99999999999999999999\" is not a whole number: give N from 1 to 500",
        ),
        (
            "/v1/ids",
            400,
            "count is missing: give ?count=N with N from 1 to 500",
        ),
        (
            "/v1/decode/12x",
            400,
            "cannot decode \"12x\" under the twitter layout: invalid ID \"12x\": not a decimal digit 'x' at position 2",
        ),
        (
            "/v1/decode/18446744073709551615",
            400,
            "cannot decode \"18446744073709551615\" under the twitter layout: ",
        ),
        (
            "/v2/id",
            404,
            "no such path: /v2/id; the API is GET /v1/id, /v1/ids?count=N, /v1/decode/{id}, /healthz, /readyz, /metrics, /openapi.json",
        ),
    ];
    for (path, status, message) in cases {
        let answer = get(&a, &s.url(path), &[]);
        assert_eq!(answer.status, status, "{path}: {answer:?}");
        assert_eq!(answer.content_type, "application/json", "{path}");
        assert!(
            answer.error().starts_with(message),
            "{path}: {}",
            answer.error()
        );
    }
    let post = server::answer(a.post(&s.url("/v1/id")).send("").unwrap());
    assert_eq!(post.status, 405);
    assert_eq!(post.error(), "POST is not allowed on /v1/id: use GET");
}

#[test]
fn eight_clients_take_a_hundred_thousand_ids_each_all_unique() {
    let dir = common::TempDir::new("serve-unique");
    let s = start(&dir, &[]);
    let url_one = s.url("/v1/id");
    let url_batch = s.url("/v1/ids?count=999");
    let runs: Vec<Vec<u64>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..8)
            .map(|_| {
                scope.spawn(|| {
                    let a = agent();
                    let mut mine = Vec::with_capacity(100_000);
                    // 100 batches of 999 and 100 single IDs, interleaved: 100,000 in all.
                    for _ in 0..100 {
                        mine.extend(ids_of(&get(&a, &url_batch, &[])));
                        mine.extend(ids_of(&get(&a, &url_one, &[])));
                    }
                    mine
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let mut all = HashSet::new();
    for run in &runs {
        assert_eq!(run.len(), 100_000);
        assert!(
            run.windows(2).all(|w| w[0] < w[1]),
            "one client's IDs went back"
        );
        all.extend(run.iter().copied());
    }
    assert_eq!(all.len(), 800_000, "duplicate IDs across clients");
    assert!(all.iter().all(|id| (id >> 12) & 0x3FF == s.node));
    let (status, log) = s.stop();
    assert!(status.success(), "{log}");
}

#[test]
fn sigterm_releases_the_node_and_the_next_server_gets_it_at_once() {
    let dir = common::TempDir::new("serve-handover");
    let first = start(&dir, &["--node", "3"]);
    let a = agent();
    let before = ids_of(&get(&a, &first.url("/v1/ids?count=1000"), &[]));
    // While the first runs, node 3 is held: a second server asking for it fails to start.
    let (code, log) =
        match Server::try_start(&["--state-dir", dir.path().to_str().unwrap(), "--node", "3"]) {
            Ok(_) => panic!("two servers held node 3"),
            Err(e) => e,
        };
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("node 3 is held"), "{log}");
    let (status, log) = first.stop();
    assert_eq!(status.code(), Some(0), "{log}");
    assert!(
        log.contains("SIGTERM: draining, then releasing node 3"),
        "{log}"
    );
    assert!(log.contains("node 3 released"), "{log}");
    // The node is free at once, and its next holder starts after everything issued.
    let second = start(&dir, &["--node", "3"]);
    let after = ids_of(&get(&a, &second.url("/v1/id"), &[]));
    assert!(after[0] > *before.last().unwrap());
    let (status, _) = second.stop();
    assert!(status.success());
}

/// A restart right after a fresh start, or after a server that issued nothing, takes the
/// released node back (its reservation is at most the lead and a tick ahead), not a never-used
/// node with the fresh wait; and starts above everything the first server issued.
#[test]
fn a_restart_right_after_a_fresh_start_gets_the_node_back() {
    let dir = common::TempDir::new("serve-fresh-restart");
    let a = agent();
    // A server that issued nothing, stopped at once.
    let first = start(&dir, &[]);
    let node = first.node;
    let (status, log) = first.stop();
    assert_eq!(status.code(), Some(0), "{log}");
    let second = start(&dir, &[]);
    assert_eq!(second.node, node, "{}", second.log());
    let issued = ids_of(&get(&a, &second.url("/v1/ids?count=1000"), &[]));
    let (status, log) = second.stop();
    assert_eq!(status.code(), Some(0), "{log}");
    // And again right after a server that issued.
    let third = start(&dir, &[]);
    assert_eq!(third.node, node, "{}", third.log());
    let after = ids_of(&get(&a, &third.url("/v1/id"), &[]));
    assert!(after[0] > *issued.last().unwrap());
    let (status, _) = third.stop();
    assert!(status.success());
}

#[test]
fn requests_in_flight_finish_before_the_release() {
    let dir = common::TempDir::new("serve-drain");
    let s = start(&dir, &[]);
    let url = s.url("/v1/ids?count=100000");
    let pid = s.pid();
    // Clients keep asking while SIGTERM arrives: every answer they get is whole (200 with all
    // its IDs), or the connection is refused after the stop; never a cut or wrong body.
    let answers: Vec<Vec<u64>> = std::thread::scope(|scope| {
        let client = scope.spawn(|| {
            let a = agent();
            let mut got = Vec::new();
            for _ in 0..200 {
                match a.get(&url).call() {
                    Ok(r) => {
                        let answer = server::answer(r);
                        if answer.status == 503 {
                            continue;
                        }
                        got.push(ids_of(&answer));
                    }
                    Err(_) => break,
                }
            }
            got
        });
        std::thread::sleep(std::time::Duration::from_millis(200));
        common::signal(pid, "TERM");
        client.join().unwrap()
    });
    let mut all = HashSet::new();
    for batch in &answers {
        assert_eq!(batch.len(), 100_000);
        all.extend(batch.iter().copied());
    }
    assert_eq!(all.len(), answers.len() * 100_000);
    let (status, log) = s.wait_exit();
    assert_eq!(status.code(), Some(0), "{log}");
}

#[test]
fn a_lost_lease_turns_readiness_and_ids_to_503() {
    let dir = common::TempDir::new("serve-lost");
    let s = start(&dir, &["--reclaim-after", "3600"]);
    let a = agent();
    let before = ids_of(&get(&a, &s.url("/v1/id"), &[]))[0];
    // The store's records deleted under the live holder: its next check finds the claim
    // gone and the generator stops issuing for good.
    common::delete_under_holders(dir.path());
    // Readiness may also answer 503 for a moment before it names the loss (a generator sealed
    // while its keeper still writes back what it used refuses as if at its lead limit): wait
    // for the loss itself.
    let guard = std::time::Instant::now();
    let ready = loop {
        let ready = wait_for_status(&a, &s.url("/readyz"), 503);
        if ready.error().contains("lease was lost") {
            break ready;
        }
        assert!(guard.elapsed() < GUARD, "never lost: {}", ready.error());
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(ready.retry_after.as_deref(), Some("1"));
    assert!(ready.error().contains("node 0"), "{}", ready.error());
    for path in ["/v1/id", "/v1/ids?count=10"] {
        let refused = get(&a, &s.url(path), &[]);
        assert_eq!(refused.status, 503, "{path}: {refused:?}");
        assert_eq!(refused.retry_after.as_deref(), Some("1"), "{path}");
        assert!(refused.error().contains("node 0"), "{}", refused.error());
        assert!(refused.json()["retry_after_ms"].as_u64().is_some());
    }
    let m = get(&a, &s.url("/metrics"), &[]);
    assert!(m.body.contains("monoflake_lease_held 0\n"), "{}", m.body);
    assert!(
        m.body.contains("monoflake_requests_refused_total 2\n"),
        "{}",
        m.body
    );
    // Health stays 200: the process runs; only readiness says it cannot serve.
    assert_eq!(get(&a, &s.url("/healthz"), &[]).status, 200);
    let _ = before;
    let (status, log) = s.stop();
    // The release cannot write to a store that is gone: the stop says so and fails.
    assert_ne!(status.code(), None, "{log}");
}

#[test]
fn after_a_lost_lease_a_node_is_claimed_again_and_ids_keep_increasing() {
    let dir = common::TempDir::new("serve-reclaim");
    let s = start(&dir, &["--reclaim-after", "0.2"]);
    let a = agent();
    let before = ids_of(&get(&a, &s.url("/v1/ids?count=1000"), &[]));
    common::delete_under_holders(dir.path());
    // The lease is lost, then a node claimed again (the state directory made anew).
    let start = std::time::Instant::now();
    while !s
        .log()
        .contains("the lease was lost; serving again from node")
    {
        assert!(start.elapsed() < GUARD, "no new claim:\n{}", s.log());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    wait_for_status(&a, &s.url("/readyz"), 200);
    let after = ids_of(&get(&a, &s.url("/v1/ids?count=1000"), &[]));
    assert!(
        after[0] > *before.last().unwrap(),
        "the new lease starts after everything the lost one issued"
    );
    let m = get(&a, &s.url("/metrics"), &[]);
    assert!(
        m.body.contains("monoflake_lease_reclaims_total 1\n"),
        "{}",
        m.body
    );
    assert!(
        m.body.contains("monoflake_ids_served_total 2000\n"),
        "{}",
        m.body
    );
    let (status, log) = s.stop();
    assert!(status.success(), "{log}");
}

#[test]
fn the_lead_limit_is_a_503_with_retry_after_never_a_wrong_id() {
    // Sonyflake: 256 IDs per 10 ms tick; a lead of 100 ms holds 2560. Taking it all twice
    // in a row leaves the second request waiting about 100 ms, longer than --max-wait allows.
    let dir = common::TempDir::new("serve-lead");
    let s = start(
        &dir,
        &[
            "--layout",
            "sonyflake",
            "--max-count",
            "2560",
            "--max-wait",
            "0.001",
        ],
    );
    let a = agent();
    let url = s.url("/v1/ids?count=2560");
    let mut refused = None;
    let mut seen = HashSet::new();
    let start = std::time::Instant::now();
    while refused.is_none() {
        assert!(start.elapsed() < GUARD, "never refused at the lead limit");
        let answer = get(&a, &url, &[]);
        match answer.status {
            200 => {
                let ids = ids_of(&answer);
                assert_eq!(ids.len(), 2560);
                assert!(ids.iter().all(|id| seen.insert(*id)), "a duplicate ID");
            }
            503 => refused = Some(answer),
            other => panic!("status {other}: {answer:?}"),
        }
    }
    let refused = refused.unwrap();
    assert_eq!(refused.retry_after.as_deref(), Some("1"));
    // A refusal on an ID route is never stored either: a cached 503 outlives its delay.
    assert_eq!(refused.cache_control.as_deref(), Some("no-store"));
    assert!(
        refused
            .error()
            .starts_with("the generator is at its time lead limit; retry after "),
        "{}",
        refused.error()
    );
    let wait = refused.json()["retry_after_ms"].as_u64().unwrap();
    assert!(wait <= 100, "retry after {wait} ms");
}

#[test]
fn start_up_errors_exit_with_a_reason() {
    let dir = common::TempDir::new("serve-start");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().to_string();
    let state = dir.path().to_str().unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_monoflake"))
            .arg("serve")
            .args(["--state-dir", state])
            .args(args)
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8(out.stderr).unwrap())
    };
    let (code, err) = run(&["--listen", &port]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains(&format!("cannot listen for HTTP on {port}")),
        "{err}"
    );
    let (code, err) = run(&["--layout", "sonyflake"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains(
            "--max-count 100000 is more than the sonyflake layout can issue in one batch (2560"
        ),
        "{err}"
    );
    let (code, err) = run(&["--max-wait", "5", "--idle-timeout", "2"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("--max-wait (5 s) must be shorter than --idle-timeout (2 s)"),
        "{err}"
    );
    let (code, err) = run(&["--layout", "nope"]);
    assert_eq!(code, Some(2), "{err}");
    let (code, err) = run(&["--max-count", "0"]);
    assert_eq!(code, Some(2), "{err}");
}

#[test]
fn the_query_is_a_url_query_and_count_is_digits_given_once() {
    let dir = common::TempDir::new("serve-query");
    let s = start(&dir, &["--max-count", "500"]);
    let a = agent();
    // Percent-decoded; empty pairs are no parameter.
    assert_eq!(ids_of(&get(&a, &s.url("/v1/ids?count=%35"), &[])).len(), 5);
    assert_eq!(ids_of(&get(&a, &s.url("/v1/ids?&count=7&"), &[])).len(), 7);
    let refused: [(&str, &str); 5] = [
        // `+` is a space in a URL query, and a sign is not a digit either way.
        (
            "/v1/ids?count=+5",
            "count \" 5\" is not a whole number: give N from 1 to 500",
        ),
        (
            "/v1/ids?count=%2B5",
            "count \"+5\" is not a whole number: give N from 1 to 500",
        ),
        (
            "/v1/ids?count=-5",
            "count \"-5\" is not a whole number: give N from 1 to 500",
        ),
        (
            "/v1/ids?count=5&count=6",
            "count is given more than once: give it once",
        ),
        (
            "/v1/ids?count=5&count=5",
            "count is given more than once: give it once",
        ),
    ];
    for (path, message) in refused {
        let answer = get(&a, &s.url(path), &[]);
        assert_eq!(answer.status, 400, "{path}: {answer:?}");
        assert_eq!(answer.error(), message, "{path}");
    }
    // Input written back in an error is cut short.
    let long = format!("/v1/ids?count={}", "9".repeat(5000));
    let answer = get(&a, &s.url(&long), &[]);
    assert_eq!(answer.status, 400);
    assert!(answer.body.len() < 300, "{}", answer.body);
    let m = get(&a, &s.url("/metrics"), &[]);
    assert!(
        m.body.contains("monoflake_ids_served_total 12\n"),
        "{}",
        m.body
    );
}

#[test]
fn head_issues_nothing() {
    let dir = common::TempDir::new("serve-head");
    let s = start(&dir, &[]);
    let a = agent();
    for path in ["/v1/id", "/v1/ids?count=100000", "/v1/ids?count=3"] {
        let head = server::answer(a.head(&s.url(path)).call().unwrap());
        assert_eq!(head.status, 200, "{path}");
        assert_eq!(head.body, "");
    }
    // HEAD checks the count as GET does.
    let bad = server::answer(a.head(&s.url("/v1/ids?count=0")).call().unwrap());
    assert_eq!(bad.status, 400);
    let m = get(&a, &s.url("/metrics"), &[]);
    for needle in [
        "monoflake_ids_issued_total 0\n",
        "monoflake_ids_served_total 0\n",
    ] {
        assert!(
            m.body.contains(needle),
            "{needle:?} missing from\n{}",
            m.body
        );
    }
    // And a GET afterwards starts where nothing was taken.
    assert_eq!(ids_of(&get(&a, &s.url("/v1/ids?count=2"), &[])).len(), 2);
}

#[test]
fn a_path_that_is_not_utf8_is_a_json_400_and_counted() {
    let dir = common::TempDir::new("serve-path");
    let s = start(&dir, &[]);
    let a = agent();
    let answer = get(&a, &s.url("/v1/decode/%FF"), &[]);
    assert_eq!(answer.status, 400, "{answer:?}");
    assert_eq!(answer.content_type, "application/json");
    assert!(
        answer
            .error()
            .starts_with("cannot decode the path /v1/decode/%FF: "),
        "{}",
        answer.error()
    );
    let long = format!("/v1/decode/{}", "1".repeat(3000));
    let answer = get(&a, &s.url(&long), &[]);
    assert_eq!(answer.status, 400);
    assert!(answer.body.len() < 300, "{}", answer.body);
    let m = get(&a, &s.url("/metrics"), &[]);
    assert!(
        m.body
            .contains("monoflake_responses_total{code=\"400\"} 2\n"),
        "{}",
        m.body
    );
}

#[test]
fn id_answers_are_never_cached_and_json_ends_a_line() {
    let dir = common::TempDir::new("serve-no-store");
    let s = start(&dir, &["--max-count", "500"]);
    let a = agent();
    let no_store = Some("no-store".to_owned());
    // Every answer of an ID-issuing route, whatever its format or status.
    for (path, accept, status) in [
        ("/v1/id", "application/json", 200),
        ("/v1/id", "text/plain", 200),
        ("/v1/ids?count=3", "application/json", 200),
        ("/v1/ids?count=3", "text/plain", 200),
        ("/v1/ids?count=0", "application/json", 400),
        ("/v1/id?count=5", "application/json", 400),
    ] {
        let answer = get(&a, &s.url(path), &[("Accept", accept)]);
        assert_eq!(answer.status, status, "{path} {accept}: {answer:?}");
        assert_eq!(answer.cache_control, no_store, "{path} {accept}");
        assert!(answer.body.ends_with('\n'), "{path} {accept}: {answer:?}");
    }
    for path in ["/v1/id", "/v1/ids?count=3"] {
        let head = server::answer(a.head(&s.url(path)).call().unwrap());
        assert_eq!(
            (head.status, &head.cache_control),
            (200, &no_store),
            "HEAD {path}"
        );
    }
    // A decoded ID is the same answer every time: it may be cached.
    let decoded = get(&a, &s.url("/v1/decode/175928847299117063"), &[]);
    assert_eq!((decoded.status, decoded.cache_control), (200, None));
    // Every JSON body is one line: the object, then a newline.
    for path in [
        "/v1/id",
        "/v1/ids?count=2",
        "/v1/decode/175928847299117063",
        "/healthz",
        "/readyz",
        "/v1/ids?count=0",
        "/nowhere",
    ] {
        let answer = get(&a, &s.url(path), &[]);
        assert_eq!(answer.content_type, "application/json", "{path}");
        let (object, end) = answer.body.split_at(answer.body.len() - 1);
        assert_eq!(end, "\n", "{path}: {:?}", answer.body);
        assert!(!object.contains('\n'), "{path}: {:?}", answer.body);
        serde_json::from_str::<serde_json::Value>(object).unwrap();
    }
    let post = server::answer(a.post(&s.url("/v1/ids?count=1")).send("").unwrap());
    assert_eq!(post.status, 405);
    assert!(post.body.ends_with("}\n"), "{:?}", post.body);
}

#[test]
fn an_unknown_or_misplaced_query_parameter_is_refused_by_name() {
    let dir = common::TempDir::new("serve-params");
    let s = start(&dir, &["--max-count", "500"]);
    let a = agent();
    let cases: [(&str, &str); 7] = [
        (
            "/v1/id?count=5",
            "/v1/id takes no query parameter, got \"count\": ask /v1/ids?count=N for more than one ID",
        ),
        ("/v1/id?n=5", "/v1/id takes no query parameter, got \"n\""),
        // A cache-buster is no longer needed: the answers say no-store.
        ("/v1/id?_=1", "/v1/id takes no query parameter, got \"_\""),
        (
            "/v1/ids?cout=5",
            "unknown query parameter \"cout\": /v1/ids takes only count",
        ),
        (
            "/v1/ids?count=5&x",
            "unknown query parameter \"x\": /v1/ids takes only count",
        ),
        (
            "/v1/ids?%63ount=5&l%61yout=discord",
            "unknown query parameter \"layout\": /v1/ids takes only count",
        ),
        (
            "/v1/decode/175928847299117063?layout=discord",
            "/v1/decode takes no query parameter, got \"layout\": it decodes under the layout the server runs (twitter)",
        ),
    ];
    for (path, message) in cases {
        let answer = get(&a, &s.url(path), &[]);
        assert_eq!(answer.status, 400, "{path}: {answer:?}");
        assert_eq!(answer.content_type, "application/json", "{path}");
        assert_eq!(
            answer.body,
            format!("{}\n", serde_json::json!({ "error": message })),
            "{path}"
        );
    }
    // HEAD refuses the same, and nothing was issued for any of it.
    let head = server::answer(a.head(&s.url("/v1/ids?cout=5")).call().unwrap());
    assert_eq!(head.status, 400);
    let m = get(&a, &s.url("/metrics"), &[]);
    assert!(
        m.body.contains("monoflake_ids_issued_total 0\n"),
        "{}",
        m.body
    );
}
