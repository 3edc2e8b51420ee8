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

/// `monoflake bench --layout LAYOUT --threads THREADS --duration DURATION [--json]`.
fn bench<'a>(layout: &'a str, threads: &'a str, duration: &'a str, json: bool) -> Vec<&'a str> {
    let mut args = vec![
        "bench",
        "--layout",
        layout,
        "--threads",
        threads,
        "--duration",
        duration,
    ];
    if json {
        args.push("--json");
    }
    args
}

#[test]
fn bench_json_has_every_row_with_consistent_figures() {
    let out = monoflake(&bench("twitter", "2", "1.5s", true));
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
    assert_eq!(
        kinds,
        [
            (1, "shared"),
            (1, "per-thread"),
            (2, "shared"),
            (2, "per-core"),
            (2, "per-thread")
        ]
    );
    let cap = 4_096_000.0;
    for r in rows {
        // A per-thread row's threads each take a slot of their own: as many slots as threads.
        if r["kind"] == "per-thread" {
            assert_eq!(r["slots"], r["threads"], "{r}");
        }
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
        // Whether the warm-up used up the lead (the "past the lead" of the rows at the cap).
        assert!(r["past_lead"].is_boolean(), "{r}");
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
        "600ms",
    ]);
    let table = table_of(&out);
    assert!(
        table.starts_with(
            "monoflake bench: layout discord (42 time, 10 node, 12 sequence bits; \
             cap 4.10 M/s per node), coarse clock, 1 thread, 600 ms in all\n"
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
                    .is_some_and(|w| w == "shared" || w == "per-core" || w == "per-thread")
        })
        .collect();
    assert_eq!(rows.len(), 2, "{table}");
    assert!(rows[0].trim_start().starts_with("1  shared"), "{table}");
    assert!(rows[1].trim_start().starts_with("1  per-thread"), "{table}");
    for row in &rows {
        assert!(row.contains("100%"), "one thread has all the IDs: {table}");
    }
    assert!(table.contains("\nat the cap"), "{table}");
}

#[test]
fn bench_refuses_bad_input_with_exit_2() {
    for (args, message) in [
        (
            &["bench", "--threads", "2", "--duration", "500ms"][..],
            "--duration 500ms is too short for 5 measurements",
        ),
        (&["bench", "--duration", "10x"][..], "unknown unit \"x\""),
        (&["bench", "--duration", "50ms"][..], "is out of range"),
        (
            &["bench", "--layout", "flickr"][..],
            "unknown layout preset",
        ),
        (&["bench", "--threads", "0"][..], "--threads"),
        // Too large for a duration at all: the message still gives the bounds.
        (
            &["bench", "--duration", "100000000000000000000000000000s"][..],
            "is out of range: between 100ms and 3600s",
        ),
        // Per-core and per-thread rows stop at the slots the sequence allows (2 of 2 bits):
        // six measurements.
        (
            &bench("time=50,sequence=2,epoch=0", "3", "900ms", false)[..],
            "--duration 900ms is too short for 6 measurements (1 to 3 threads shared, 2 \
             per-core, 1 to 2 per-thread) of 250ms each (150ms warm-up, 100ms measured): give at \
             least 1.5s, or fewer --threads",
        ),
        (
            &["bench", "--threads", "1", "--duration", "0.45s"][..],
            "--duration 450ms is too short for 2 measurements (1 thread, shared and per-thread) \
             of 250ms",
        ),
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
    let out = monoflake(&bench(
        "time=41,n=1,sequence=21,epoch=2010-11-04T01:42:54.657Z",
        "1",
        "600ms",
        true,
    ));
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
        &bench("time=40,sequence=1,epoch=0,tick=1s", "1", "2s", true),
        Duration::from_secs(20),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["layout"]["cap_per_s"], 2.0);
    // One tick's worth is two IDs: the burst is one of them.
    assert_eq!(v["hot_path"]["ids"], 1);
    // One call between looks at the phase: the cap issues an ID every 500 ms.
    assert_eq!(v["stride"], 1);
    // Two windows (shared and per-thread) of 1 s: less 150 ms of warm-up, halved.
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
        &bench("game-server", "1", "800ms", false),
        Duration::from_secs(20),
    );
    let table = table_of(&out);
    assert!(
        table.contains(
            "\nat the cap: not measured; the layout's 1000 ms ticks are longer than the 100 ms \
             lead, so IDs at the cap come a tick's worth at a time, and a counted part (125 ms) \
             spans 0.1 ticks (at least 20 needed): give --duration 81 s or more\n"
        ),
        "{table}"
    );
    assert!(!table.contains("not reached"), "{table}");
    // The row's "of cap" is not a figure either (it was 3.5e13% for a layout of 2^40 IDs per
    // tick of 5.8e8 years).
    let row = table
        .lines()
        .find(|l| l.trim_start().starts_with("1  shared"))
        .unwrap_or_else(|| panic!("{table}"));
    // Read by words, not by column: a wide figure (ns per ID in the tens of millions) pushes
    // the later columns right. Threads, kind, the rate ("24.0/s", or "1.2 k/s" in two
    // words), ns per ID, then "of cap".
    let words: Vec<&str> = row.split_whitespace().collect();
    let rate_words = if words[2].ends_with("/s") { 1 } else { 2 };
    assert_eq!(words[2 + rate_words + 1], "-", "{table}");
}

#[test]
fn bench_on_a_paced_layout_looks_at_the_phase_every_call_and_judges_the_cap() {
    // 256 IDs per 10 ms tick: 25.6 k/s, about one ID per 50 µs stride; ticks within the lead
    // are paced one slot at a time, so a short part can tell the rate.
    let out = monoflake_within(
        &bench("sonyflake", "1", "800ms", true),
        Duration::from_secs(20),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["stride"], 1);
    assert!(v["rows"][0]["at_cap"].is_boolean(), "{v}");
    // And the Twitter layout keeps 64 calls between looks (4096 IDs per ms: 204 per 50 µs).
    let out = monoflake(&["bench", "--threads", "1", "--duration", "800ms", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["stride"], 64);
}

/// The table a successful run printed.
fn table_of(out: &Output) -> String {
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

fn json_of(out: &Output) -> Value {
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

#[test]
fn bench_on_ticks_longer_than_a_waiting_call_measures_instead_of_timing_out() {
    // Two IDs per 5 s tick: a call at the cap waits up to 5 s for the next tick, longer than
    // `next_id` waits (1 s). The run failed with exit 1 ("stayed at its time lead limit for
    // the whole wait"); a waiting thread also slept past the end of its window.
    let out = monoflake_within(
        &bench("time=40,sequence=2,epoch=0,tick=5s", "2", "1.5s", true),
        Duration::from_secs(20),
    );
    let v = json_of(&out);
    assert_eq!(v["layout"]["cap_per_s"], 0.8);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 5, "{v}");
    for row in rows {
        assert_eq!(row["at_cap"], Value::Null, "{row}");
        // Nor a fraction of it: over less than a tick the rate can be any multiple of the cap.
        assert_eq!(row["of_cap"], Value::Null, "{row}");
        // At most the four IDs of each of two ticks a part can touch.
        let ids = (row["ids_per_s"].as_f64().unwrap() * row["counted_s"].as_f64().unwrap()).round();
        assert!(ids <= 8.0, "{row}");
    }
}

#[test]
fn bench_on_a_tick_of_an_hour_says_no_duration_measures_the_cap() {
    // The advice was "give --duration 144001 s or more", past the longest --duration (3600 s).
    let out = monoflake_within(
        &bench(
            "time=30,sequence=12,epoch=0,tick=3600s",
            "1",
            "600ms",
            false,
        ),
        Duration::from_secs(20),
    );
    let table = table_of(&out);
    let line = table
        .lines()
        .find(|l| l.starts_with("at the cap: not measured"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(
        line.ends_with("(at least 20 needed), more than the longest --duration (3600 s) gives"),
        "{table}"
    );
}

#[test]
fn bench_with_nothing_counted_has_no_shares_in_the_json() {
    // Two IDs per tick of 114 years: both go in the warm-up, and nothing is counted or timed
    // afterwards. The table printed '-' for the shares, the JSON zeros that summed to 0.
    let out = monoflake_within(
        &bench(
            "time=20,sequence=1,epoch=0,tick=3600000000s",
            "1",
            "600ms",
            true,
        ),
        Duration::from_secs(20),
    );
    let v = json_of(&out);
    let row = &v["rows"][0];
    assert_eq!(row["ids_per_s"], 0.0, "{row}");
    assert_eq!(row["ns_per_id"], Value::Null, "{row}");
    assert_eq!(row["shares"], Value::Null, "{row}");
    assert_eq!(row["latency_ns"]["calls"], 0, "{row}");
    assert_eq!(row["latency_ns"]["max"], Value::Null, "{row}");
}

#[test]
fn bench_measures_per_core_only_up_to_the_slots_the_sequence_allows() {
    // Two sequence bits allow two per-core slots. `--threads 3` ran the shared rows, then
    // failed with exit 2 and "slots 3 is out of range" (not naming --threads), measuring
    // nothing more; with one sequence bit, already at 2 threads.
    let out = monoflake_within(
        &bench("time=50,sequence=2,epoch=0,tick=1ms", "3", "1.5s", true),
        Duration::from_secs(30),
    );
    let v = json_of(&out);
    let kinds: Vec<(u64, &str)> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["threads"].as_u64().unwrap(), r["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [
            (1, "shared"),
            (1, "per-thread"),
            (2, "shared"),
            (2, "per-core"),
            (2, "per-thread"),
            (3, "shared")
        ]
    );
    assert_eq!(v["per_core_max_slots"], 2, "{v}");
    // Six windows share the 1.5 s.
    assert_eq!(v["counted_part_s"], 0.05, "{v}");
    let out = monoflake_within(
        &bench("time=50,sequence=1,epoch=0,tick=1ms", "2", "750ms", false),
        Duration::from_secs(30),
    );
    let table = table_of(&out);
    assert!(
        table.contains(
            "\nper-core: not measured, per-thread: 1 thread; the layout's 1 sequence bit gives at \
             most 1 slot\n"
        ),
        "{table}"
    );
}

#[test]
fn bench_judges_a_per_core_row_against_the_slots_its_threads_use() {
    // Three threads get four slots (a power of two), each with a quarter of the cap: together
    // at most three quarters of it. The row showed 75% "of cap" and was left out of the rows
    // at the cap, while every thread waited for its slot.
    let out = monoflake_within(
        &bench("sonyflake", "3", "2s", true),
        Duration::from_secs(30),
    );
    let v = json_of(&out);
    let node_cap = 25_600.0;
    for r in v["rows"].as_array().unwrap() {
        let (threads, kind) = (r["threads"].as_u64().unwrap(), r["kind"].as_str().unwrap());
        let (slots, cap) = match (threads, kind) {
            (3, "per-core" | "per-thread") => (Value::from(4), node_cap * 3.0 / 4.0),
            (2, "per-core" | "per-thread") => (Value::from(2), node_cap),
            (1, "per-thread") => (Value::from(1), node_cap),
            _ => (Value::Null, node_cap),
        };
        assert_eq!(r["slots"], slots, "{r}");
        assert_eq!(r["cap_per_s"], cap, "{r}");
        let rate = r["ids_per_s"].as_f64().unwrap();
        assert!(
            (r["of_cap"].as_f64().unwrap() - rate / cap).abs() < 1e-9,
            "{r}"
        );
        assert_eq!(r["at_cap"], Value::from(rate >= 0.9 * cap), "{r}");
    }
    // The table says so under the rows.
    let out = monoflake_within(
        &bench("sonyflake", "3", "2s", false),
        Duration::from_secs(30),
    );
    let table = table_of(&out);
    assert!(
        table.contains(
            "\nper-core and per-thread rows with fewer threads than slots have less than the \
             layout's cap (slots are a power of two, each with its slice of the sequence), and \
             \"of cap\" is of theirs: 3 threads per-core of 4 slots, 19.2 k/s; 3 threads \
             per-thread of 4 slots, 19.2 k/s\n"
        ),
        "{table}"
    );
}

#[test]
fn bench_stops_when_the_layout_runs_out_mid_run() {
    // A layout whose time field ends two seconds from now, asked to run for a minute: a thread
    // fails with Exhausted and stops the others, and the run reports it then (exit 1), not
    // after sleeping out the rest of its window.
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let epoch = now_ms + 2_000 - (1 << 20);
    let layout = format!("time=20,sequence=12,epoch={epoch},tick=1ms");
    let out = monoflake_within(&bench(&layout, "1", "60s", false), Duration::from_secs(40));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("time field ran out"),
        "{}",
        text(&out.stderr)
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn bench_with_standard_error_closed_still_prints_its_table() {
    // `monoflake bench 2>&1 | head -1`: once the reader is gone, a progress line panicked
    // ("failed printing to stderr", exit 101).
    let mut child = Command::new(env!("CARGO_BIN_EXE_monoflake"))
        .args(["bench", "--threads", "1", "--duration", "600ms"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run monoflake");
    drop(child.stderr.take());
    let out = child.wait_with_output().expect("collect monoflake");
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).starts_with("monoflake bench: layout twitter"));
}

#[test]
fn bench_hot_path_on_a_long_tick_takes_half_the_tick_not_half_the_lead() {
    // 2^40 IDs per tick of ~584 years (the longest tick a layout accepts): the burst was one
    // cold call (half a lead's worth of the per-second average), printed as the hot path's
    // cost, and the cap as "0.0/s".
    let out = monoflake_within(
        &bench(
            "time=10,sequence=40,epoch=0,tick=18446744073709ms",
            "1",
            "600ms",
            false,
        ),
        Duration::from_secs(20),
    );
    let table = table_of(&out);
    assert!(table.contains("cap 59.6/s per node"), "{table}");
    assert!(
        table.contains("(2000000 IDs back to back from a fresh generator"),
        "{table}"
    );
}

#[test]
fn bench_without_threads_measures_what_fits_the_duration() {
    // The default is every CPU: past 20 CPUs the default ten seconds were refused (exit 2,
    // "too short for 41 measurements"). Here 600 ms fits one thread, whatever the CPUs.
    let out = monoflake_within(
        &["bench", "--duration", "600ms", "--json"],
        Duration::from_secs(20),
    );
    let v = json_of(&out);
    assert_eq!(v["threads"], 1, "{v}");
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus > 1 {
        assert!(
            text(&out.stderr).contains(&format!(
                "{cpus} CPUs, but --duration 600ms measures 1 thread, shared and per-thread: give \
                 --threads {cpus}"
            )),
            "{}",
            text(&out.stderr)
        );
        let out = monoflake_within(&["bench", "--duration", "600ms"], Duration::from_secs(20));
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(
            text(&out.stdout).contains(&format!(
                "\nthreads: 1 of {cpus} CPUs, what --duration 600ms measures; give --threads \
                 {cpus} and a longer --duration for all\n"
            )),
            "{}",
            text(&out.stdout)
        );
    }
}

#[test]
fn bench_that_cannot_start_a_thread_fails_with_exit_1_instead_of_hanging() {
    // Thread stacks of ~2.8 GiB under an address-space limit of ~3.8 GiB: the second thread
    // cannot start. The scope panicked ("failed to spawn thread"), then waited forever for the
    // started thread, which waited at the barrier for the missing one.
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 4000000 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_monoflake"))
        .args(["bench", "--threads", "2", "--duration", "2s"])
        .env("RUST_MIN_STACK", "3000000000")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run monoflake under sh");
    let start = Instant::now();
    while child.try_wait().expect("wait for monoflake").is_none() {
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let out = child.wait_with_output().expect("collect monoflake");
            panic!("still running after 30 s: {}", text(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("collect monoflake");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("monoflake: cannot start thread ")
            && stderr.contains("give fewer --threads"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}
