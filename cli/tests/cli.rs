//! The `monoflake` command line: its contract, exit codes and messages.

use std::process::{Command, Output};

/// Runs `monoflake` with the default settings, but for a state directory of this test
/// binary's own (the host-wide default belongs to the host, not to a test run).
fn monoflake(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_monoflake"))
        .args(args)
        .env(
            "MONOFLAKE_STATE_DIR",
            std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-state"),
        )
        .output()
        .expect("run monoflake")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

#[test]
fn gen_ten_million_on_two_threads_all_distinct() {
    // Exactly the command of the contract, on the default (Twitter) layout.
    let out = monoflake(&["gen", "-n", "10000000", "--node", "1", "--threads", "2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut ids: Vec<u64> = stdout(&out).lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(ids.len(), 10_000_000);
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 10_000_000, "duplicates in the CLI's output");
    // Every ID carries node 1 (Twitter layout: node bits 12..22).
    assert!(ids.iter().all(|id| (id >> 12) & 0x3FF == 1));
}

#[test]
fn gen_prints_increasing_ids_then_decode_reads_them_back() {
    let out = monoflake(&["gen", "-n", "5", "--node", "33", "--layout", "discord"]);
    assert!(out.status.success());
    let ids: Vec<String> = stdout(&out).lines().map(str::to_owned).collect();
    assert_eq!(ids.len(), 5);
    let nums: Vec<u64> = ids.iter().map(|s| s.parse().unwrap()).collect();
    assert!(nums.windows(2).all(|w| w[0] < w[1]));
    let mut args = vec!["decode", "--layout", "discord", "--json"];
    args.extend(ids.iter().map(String::as_str));
    let out = monoflake(&args);
    assert!(out.status.success());
    for (line, id) in stdout(&out).lines().zip(&ids) {
        assert!(line.starts_with(&format!("{{\"id\":\"{id}\",")), "{line}");
        assert!(
            line.contains("\"node\":33,") && line.contains("\"worker\":1,\"process\":1}"),
            "{line}"
        );
    }
}

#[test]
fn gen_hex_round_trips_through_decode() {
    let out = monoflake(&[
        "gen", "-n", "2", "--format", "hex", "--node", "7", "--layout", "js-safe",
    ]);
    let hex: Vec<String> = stdout(&out).lines().map(str::to_owned).collect();
    assert!(
        hex.iter().all(|h| h.len() == 18 && h.starts_with("0x")),
        "{hex:?}"
    );
    let out = monoflake(&["decode", "--layout", "js-safe", "--json", &hex[0]]);
    assert!(out.status.success(), "{}", stderr(&out));
    let dec = u64::from_str_radix(&hex[0][2..], 16).unwrap();
    assert!(stdout(&out).starts_with(&format!("{{\"id\":\"{dec}\"")));
}

#[test]
fn decode_json_matches_discords_documentation_exactly() {
    let out = monoflake(&[
        "decode",
        "--layout",
        "discord",
        "--json",
        "175928847299117063",
        "90339695967350784",
    ]);
    assert!(out.status.success());
    assert_eq!(
        stdout(&out),
        "{\"id\":\"175928847299117063\",\"unix_ms\":1462015105796,\"time\":\"2016-04-30T11:18:25.796Z\",\
         \"node\":32,\"sequence\":7,\"worker\":1,\"process\":0}\n\
         {\"id\":\"90339695967350784\",\"unix_ms\":1441609061949,\"time\":\"2015-09-07T06:57:41.949Z\",\
         \"node\":3,\"sequence\":0,\"worker\":0,\"process\":3}\n"
    );
    let out = monoflake(&["decode", "1541815603606036480"]);
    assert_eq!(
        stdout(&out),
        "1541815603606036480 2022-06-28T16:07:40.105Z datacenter=11 worker=26 sequence=0\n"
    );
}

#[test]
fn layouts_lists_every_preset_with_its_lifetime() {
    let out = monoflake(&["layouts"]);
    assert!(out.status.success());
    let text = stdout(&out);
    for (name, end) in [
        ("twitter", "2080-07-10"),
        ("baidu", "2024-11-20"),
        ("js-safe", "2089-10-26"),
    ] {
        let line = text.lines().find(|l| l.starts_with(name)).unwrap();
        assert!(line.contains(end), "{line}");
    }
    assert_eq!(text.lines().count(), 7);
}

#[test]
fn bad_input_exits_2_with_a_message_and_runtime_failure_exits_1() {
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["decode", "12x4"],
            2,
            "invalid ID \"12x4\": not a decimal digit 'x' at position 2",
        ),
        (
            &["decode", "99999999999999999999"],
            2,
            "larger than 18446744073709551615",
        ),
        (
            &["decode", "--layout", "js-safe", "9007199254740992"],
            2,
            "uses 54 bits but the layout has only 53",
        ),
        (&["decode", "0xZZ"], 2, "not a hex digit 'Z' at position 2"),
        (
            &["gen", "--layout", "flickr"],
            2,
            "unknown layout preset \"flickr\"; known presets: twitter",
        ),
        (
            &["gen", "--node", "1024"],
            2,
            "node 1024 is out of range: the field holds 0..=1023",
        ),
        (&["gen", "-n", "x"], 2, "invalid value 'x'"),
        (&["gen", "--threads", "0"], 2, "invalid value '0'"),
        (&["gen", "--format", "octal"], 2, "invalid value 'octal'"),
        (&["frobnicate"], 2, "unrecognized subcommand"),
        (
            &["gen", "--layout", "baidu"],
            1,
            "time field ran out at unix ms 1732109056000 (2024-11-20T13:24:16.000Z)",
        ),
    ];
    for (args, code, message) in cases {
        let out = monoflake(args);
        assert_eq!(out.status.code(), Some(*code), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(message), "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"), "{args:?}");
    }
    assert_eq!(monoflake(&["--help"]).status.code(), Some(0));
}

#[test]
fn base32_and_base62_from_gen_decode_back_to_the_same_ids() {
    for format in ["base32", "base62"] {
        let out = monoflake(&["gen", "-n", "3", "--format", format, "--node", "9"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let encoded: Vec<String> = stdout(&out).lines().map(str::to_owned).collect();
        assert_eq!(encoded.len(), 3);
        let mut args = vec!["decode", "--json"];
        args.extend(encoded.iter().map(String::as_str));
        let decoded = monoflake(&args);
        assert!(decoded.status.success(), "{}", stderr(&decoded));
        let ids: Vec<u64> = stdout(&decoded)
            .lines()
            .map(|l| l.split('"').nth(3).unwrap().parse().unwrap())
            .collect();
        let encoding = format.parse().unwrap();
        let expected: Vec<u64> = encoded
            .iter()
            .map(|s| monoflake::Id::decode(s, encoding).unwrap().as_u64())
            .collect();
        assert_eq!(ids, expected);
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        assert!(stdout(&decoded).lines().all(|l| l.contains("\"node\":9,")));
    }
}

#[test]
fn opaque_ids_map_back_with_the_key_file() {
    let dir = std::env::temp_dir().join(format!("monoflake-test-key-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("key");
    std::fs::write(&key, "00112233445566778899aabbccddeeff\n").unwrap();
    let key = key.to_str().unwrap();
    let out = monoflake(&[
        "gen",
        "-n",
        "3",
        "--format",
        "opaque",
        "--key-file",
        key,
        "--node",
        "12",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let public: Vec<String> = stdout(&out).lines().map(str::to_owned).collect();
    let mut args = vec!["decode", "--key-file", key];
    args.extend(public.iter().map(String::as_str));
    let decoded = monoflake(&args);
    assert!(decoded.status.success(), "{}", stderr(&decoded));
    let lines: Vec<String> = stdout(&decoded).lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 3);
    assert!(
        lines.iter().all(|l| l.contains("datacenter=0 worker=12")),
        "{lines:?}"
    );
    // Without the key the same numbers decode to nonsense, not to node 12.
    let mut args = vec!["decode"];
    args.extend(public.iter().map(String::as_str));
    let raw = monoflake(&args);
    assert!(!stdout(&raw).lines().all(|l| l.contains("worker=12")));
    // Bad keys and a missing key file are usage errors.
    std::fs::write(dir.join("bad"), "xyz").unwrap();
    let bad = monoflake(&[
        "gen",
        "--format",
        "opaque",
        "--key-file",
        dir.join("bad").to_str().unwrap(),
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("invalid opaque-ID key"),
        "{}",
        stderr(&bad)
    );
    let none = monoflake(&["gen", "--format", "opaque"]);
    assert_eq!(none.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn gen_stats_go_to_stderr() {
    let out = monoflake(&["gen", "-n", "5000", "--stats"]);
    assert!(out.status.success());
    assert_eq!(stdout(&out).lines().count(), 5000);
    assert!(
        stderr(&out).contains("issued 5000, borrowed ticks"),
        "{}",
        stderr(&out)
    );
    // No progress bar when stderr is not a terminal.
    assert!(!stderr(&out).contains("eta"));
}
