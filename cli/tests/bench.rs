//! `monoflake bench`: the table's and the JSON's shape, and values that must hold on any
//! machine (no timing in the assertions: a loaded machine gives slower figures, never wrong
//! ones).

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn monoflake(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_monoflake"))
        .args(args)
        .output()
        .expect("run monoflake")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

#[test]
fn bench_json_has_every_row_with_consistent_figures() {
    let out = monoflake(&[
        "bench",
        "--layout",
        "twitter",
        "--threads",
        "2",
        "--duration",
        "1.5s",
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // Progress goes to stderr; stdout holds one JSON object only.
    assert!(text(&out.stderr).contains("monoflake bench: "));
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["layout"]["name"], "twitter");
    assert_eq!(v["layout"]["sequence_bits"], 12);
    assert_eq!(v["layout"]["cap_per_s"], 4_096_000.0);
    assert_eq!(v["clock"], "locked");
    assert_eq!(v["threads"], 2);
    assert_eq!(v["duration_s"], 1.5);
    // The burst is half of what the 100 ms lead allows: 4096 per ms × 50 ms.
    assert_eq!(v["hot_path"]["ids"], 204_800);
    assert!(v["hot_path"]["ns_per_id"].as_f64().unwrap() > 0.0);
    let rows = v["rows"].as_array().unwrap();
    let kinds: Vec<(u64, &str)> = rows
        .iter()
        .map(|r| (r["threads"].as_u64().unwrap(), r["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(kinds, [(1, "shared"), (2, "shared"), (2, "per-core")]);
    let cap = 4_096_000.0;
    for r in rows {
        let rate = r["ids_per_s"].as_f64().unwrap();
        let counted = r["counted_s"].as_f64().unwrap();
        assert!(rate > 0.0 && counted > 0.0, "{r}");
        assert!(
            (r["ns_per_id"].as_f64().unwrap() * rate - 1e9).abs() < 1.0,
            "{r}"
        );
        assert!(
            (r["of_cap"].as_f64().unwrap() - rate / cap).abs() < 1e-9,
            "{r}"
        );
        // Honest time: past the warm-up, no more than the cap allows over the window plus
        // the 100 ms lead (and one stride of 64 calls per thread counted late).
        let threads = r["threads"].as_u64().unwrap() as f64;
        assert!(
            rate * counted <= cap * (counted + 0.1) + 64.0 * threads,
            "more IDs than the cap and the lead allow: {r}"
        );
        let shares: Vec<f64> = r["shares"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_f64().unwrap())
            .collect();
        assert_eq!(shares.len() as u64, r["threads"].as_u64().unwrap());
        assert!((shares.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{r}");
        let l = &r["latency_ns"];
        assert!(l["calls"].as_u64().unwrap() > 0, "{r}");
        let p: Vec<u64> = ["p50", "p99", "p999", "p9999", "max"]
            .iter()
            .map(|k| l[k].as_u64().unwrap())
            .collect();
        assert!(p[0] >= 1 && p.windows(2).all(|w| w[0] <= w[1]), "{r}");
    }
}

#[test]
fn bench_table_has_its_header_rows_and_cap_line() {
    let out = monoflake(&[
        "bench",
        "--layout",
        "discord",
        "--clock",
        "coarse",
        "--threads",
        "1",
        "--duration",
        "400ms",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    assert!(
        table.starts_with(
            "monoflake bench: layout discord (42 time, 10 node, 12 sequence bits; \
             cap 4.10 M/s per node), coarse clock, 1 thread, 400 ms in all\n"
        ),
        "{table}"
    );
    assert!(table.contains("\nhot path: "), "{table}");
    let header = table.lines().find(|l| l.contains("threads  kind")).unwrap();
    for column in [
        "IDs/s",
        "ns/ID",
        "of cap",
        "thread shares",
        "p50",
        "p99.99",
        "max",
    ] {
        assert!(header.contains(column), "{header}");
    }
    let rows: Vec<&str> = table
        .lines()
        .filter(|l| {
            let mut words = l.split_whitespace();
            words.next().is_some_and(|w| w.parse::<u32>().is_ok())
                && words
                    .next()
                    .is_some_and(|w| w == "shared" || w == "per-core")
        })
        .collect();
    assert_eq!(rows.len(), 1, "{table}");
    assert!(rows[0].trim_start().starts_with("1  shared"), "{table}");
    assert!(
        rows[0].contains("100%"),
        "one thread has all the IDs: {table}"
    );
    assert!(table.contains("\nat the cap"), "{table}");
}

#[test]
fn bench_refuses_bad_input_with_exit_2() {
    for (args, message) in [
        (
            &["bench", "--threads", "2", "--duration", "500ms"][..],
            "--duration 500ms is too short for 3 measurements",
        ),
        (&["bench", "--duration", "10x"][..], "unknown unit \"x\""),
        (&["bench", "--duration", "50ms"][..], "is out of range"),
        (
            &["bench", "--layout", "flickr"][..],
            "unknown layout preset",
        ),
        (&["bench", "--threads", "0"][..], "--threads"),
    ] {
        let out = monoflake(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            text(&out.stderr).contains(message),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn bench_takes_a_layout_spec_and_reports_an_unreached_cap() {
    let out = monoflake(&[
        "bench",
        "--layout",
        "time=41,n=1,sequence=21,epoch=2010-11-04T01:42:54.657Z",
        "--threads",
        "1",
        "--duration",
        "300ms",
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["layout"]["sequence_bits"], 21);
    assert_eq!(v["layout"]["node_bits"], 1);
    // 2^21 IDs per ms: no single thread issues one ID per half nanosecond.
    assert_eq!(v["layout"]["cap_per_s"], 2_097_152_000.0);
    assert_eq!(v["rows"][0]["at_cap"], false);
    // The burst is capped at 2,000,000 IDs.
    assert_eq!(v["hot_path"]["ids"], 2_000_000);
}

/// Runs `monoflake` and gives it `limit` to finish, far longer than it asks for: a run past that
/// has stalled (killed, and the test fails), not merely run slowly.
fn monoflake_within(args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_monoflake"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run monoflake");
    let start = Instant::now();
    while child.try_wait().expect("wait for monoflake").is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().expect("collect monoflake");
            panic!(
                "monoflake {args:?} was still running after {limit:?}: {}",
                text(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("collect monoflake")
}

#[test]
fn bench_on_a_layout_issuing_two_ids_a_second_ends_when_asked_and_says_the_cap_was_not_measured() {
    // Two IDs per one-second tick. With a fixed 64 calls between looks at the phase, each
    // look came 32 s apart: a run asked for 1 s took over 30 s, and its count came in 64s.
    let out = monoflake_within(
        &[
            "bench",
            "--layout",
            "time=40,sequence=1,epoch=0,tick=1s",
            "--threads",
            "1",
            "--duration",
            "1s",
            "--json",
        ],
        Duration::from_secs(20),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["layout"]["cap_per_s"], 2.0);
    // One call between looks at the phase: the cap issues an ID every 500 ms.
    assert_eq!(v["stride"], 1);
    // One window: 1 s less 150 ms of warm-up, halved.
    assert_eq!(v["counted_part_s"], 0.425);
    assert_eq!(v["counted_part_ticks"], 0.425);
    let row = &v["rows"][0];
    // Ticks longer than the lead come a tick's worth at a time: over 425 ms the count cannot
    // tell the rate, and the JSON does not pretend to.
    assert_eq!(row["at_cap"], Value::Null, "{row}");
    // Nothing or a tick's worth counted: no more than both IDs of each tick the part touched.
    let ids = (row["ids_per_s"].as_f64().unwrap() * row["counted_s"].as_f64().unwrap()).round();
    assert!(ids <= 4.0, "{row}");
    match row["ns_per_id"].as_f64() {
        Some(ns) => assert!(
            ids > 0.0 && (ns * row["ids_per_s"].as_f64().unwrap() - 1e9).abs() < 1.0,
            "{row}"
        ),
        None => assert_eq!(ids, 0.0, "{row}"),
    }
    // No call may have ended in the timed part; then no percentile is made up.
    let l = &row["latency_ns"];
    if l["calls"] == 0 {
        for k in ["p50", "p99", "p999", "p9999", "max"] {
            assert_eq!(l[k], Value::Null, "{row}");
        }
    }
}

#[test]
fn bench_table_says_when_ticks_longer_than_the_lead_leave_the_cap_unmeasured() {
    let out = monoflake_within(
        &[
            "bench",
            "--layout",
            "game-server",
            "--threads",
            "1",
            "--duration",
            "400ms",
        ],
        Duration::from_secs(20),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    assert!(
        table.contains(
            "\nat the cap: not measured; the layout's 1000 ms ticks are longer than the 100 ms \
             lead, so IDs at the cap come a tick's worth at a time, and a counted part (125 ms) \
             spans 0.1 ticks (at least 20 needed): give --duration 41 s or more\n"
        ),
        "{table}"
    );
    assert!(!table.contains("not reached"), "{table}");
}

#[test]
fn bench_on_a_paced_layout_looks_at_the_phase_every_call_and_judges_the_cap() {
    // 256 IDs per 10 ms tick: 25.6 k/s, about one ID per 50 µs stride; ticks within the lead
    // are paced one slot at a time, so a short part can tell the rate.
    let out = monoflake_within(
        &[
            "bench",
            "--layout",
            "sonyflake",
            "--threads",
            "1",
            "--duration",
            "400ms",
            "--json",
        ],
        Duration::from_secs(20),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["stride"], 1);
    assert!(v["rows"][0]["at_cap"].is_boolean(), "{v}");
    // And the Twitter layout keeps 64 calls between looks (4096 IDs per ms: 204 per 50 µs).
    let out = monoflake(&["bench", "--threads", "1", "--duration", "400ms", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["stride"], 64);
}
