//! The command line as people use it, through the real binary: pipes into `decode`, custom
//! layout specs, key files and `keygen`, completions and the manual page, and every error
//! path with its exit code and message.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::io::{Read, Write};
use std::process::{Child, Command, Output, Stdio};

use common::TempDir;
use monoflake::Layout;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_monoflake"))
}

fn monoflake(args: &[&str]) -> Output {
    bin().args(args).output().expect("run monoflake")
}

/// Runs monoflake with `input` on its standard input.
fn with_input(args: &[&str], input: &[u8]) -> Output {
    let mut child = bin()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run monoflake");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    out
}

/// `monoflake LEFT | monoflake RIGHT` through a real pipe; both outputs.
fn pipe(left: &[&str], right: &[&str]) -> (Output, Output) {
    let mut producer: Child = bin()
        .args(left)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the left side");
    let consumer = bin()
        .args(right)
        .stdin(Stdio::from(producer.stdout.take().unwrap()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the right side");
    let right_out = consumer.wait_with_output().unwrap();
    let left_out = producer.wait_with_output().unwrap();
    (left_out, right_out)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// Asserts the exit code and that stderr holds `message`, and no panic.
fn assert_fails(out: &Output, code: i32, message: &str, what: &str) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{what}: {err}");
    assert!(err.contains(message), "{what}: {err}");
    assert!(!err.contains("panicked"), "{what}: {err}");
}

#[test]
fn gen_piped_into_decode_decodes_every_id() {
    let state = TempDir::new("pipe");
    let dir = state.path().to_str().unwrap();
    let (gen_out, decode_out) = pipe(
        &["gen", "-n", "1000", "--node", "37", "--state-dir", dir],
        &["decode"],
    );
    assert!(gen_out.status.success(), "{}", text(&gen_out.stderr));
    assert!(decode_out.status.success(), "{}", text(&decode_out.stderr));
    let lines: Vec<String> = text(&decode_out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(lines.len(), 1000);
    let ids: Vec<u64> = lines
        .iter()
        .map(|l| l.split(' ').next().unwrap().parse().unwrap())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    // Node 37 on the Twitter layout is datacenter 1, worker 5.
    assert!(
        lines
            .iter()
            .all(|l| l.contains(" datacenter=1 worker=5 sequence=")),
        "{}",
        lines[0]
    );
}

#[test]
fn gen_base62_piped_into_decode_json() {
    let state = TempDir::new("pipe62");
    let dir = state.path().to_str().unwrap();
    let (gen_out, decode_out) = pipe(
        &[
            "gen",
            "-n",
            "200",
            "--format",
            "base62",
            "--node",
            "9",
            "--state-dir",
            dir,
        ],
        &["decode", "--json"],
    );
    assert!(gen_out.status.success(), "{}", text(&gen_out.stderr));
    assert!(decode_out.status.success(), "{}", text(&decode_out.stderr));
    let json: Vec<String> = text(&decode_out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(json.len(), 200);
    let twitter = Layout::twitter();
    let mut previous = 0;
    for line in &json {
        let id: monoflake::Id = line.split('"').nth(3).unwrap().parse().unwrap();
        assert!(id.as_u64() > previous, "{line}");
        previous = id.as_u64();
        let parts = id.parts(&twitter).unwrap();
        assert_eq!(
            line,
            &format!(
                "{{\"id\":\"{id}\",\"unix_ms\":{},\"time\":\"{}\",\"node\":9,\"sequence\":{},\
                 \"datacenter\":0,\"worker\":9}}",
                parts.unix_ms(),
                parts.rfc3339(),
                parts.sequence()
            )
        );
    }
}

#[test]
fn decode_stdin_reports_bad_lines_by_number_and_decodes_the_rest() {
    let input =
        b"1541815603606036480\n12x4 99\n\n\xff\n 0x0271065ac1020007\t175928847299117063\r\n";
    let out = with_input(&["decode"], input);
    assert_fails(
        &out,
        2,
        "monoflake: 2 of 6 IDs could not be decoded",
        "mixed input",
    );
    assert_eq!(
        text(&out.stdout),
        "1541815603606036480 2022-06-28T16:07:40.105Z datacenter=11 worker=26 sequence=0\n\
         99 2010-11-04T01:42:54.657Z datacenter=0 worker=0 sequence=99\n\
         175928847299117063 2012-03-03T13:01:20.453Z datacenter=1 worker=0 sequence=7\n\
         175928847299117063 2012-03-03T13:01:20.453Z datacenter=1 worker=0 sequence=7\n"
    );
    assert_eq!(
        text(&out.stderr),
        "monoflake: line 2: invalid ID \"12x4\": not a decimal digit 'x' at position 2\n\
         monoflake: line 4: invalid ID \"\u{fffd}\": not UTF-8\n\
         monoflake: 2 of 6 IDs could not be decoded\n"
    );
}

#[test]
fn decode_stdin_errors_of_every_kind_exit_2() {
    let cases: &[(&[&str], &str, &str)] = &[
        (
            &["decode", "--layout", "js-safe"],
            "9007199254740992\n",
            "line 1: ID 9007199254740992 uses 54 bits but the layout has only 53",
        ),
        (
            &["decode"],
            "1\n99999999999999999999\n",
            "line 2: invalid ID \"99999999999999999999\": larger than 18446744073709551615",
        ),
        (
            &["decode", "--format", "decimal"],
            "0x12\n",
            "line 1: invalid ID \"0x12\": not a decimal digit 'x' at position 1",
        ),
        (
            &["decode", "--format", "base32"],
            "\n\n0000000000U00\n",
            "line 3: invalid ID \"0000000000U00\": not a base32 character 'U' at position 10",
        ),
    ];
    for (args, input, message) in cases {
        let out = with_input(args, input.as_bytes());
        assert_fails(&out, 2, message, input);
        assert!(text(&out.stderr).contains("1 of "), "{}", text(&out.stderr));
    }
    // A token longer than any ID is refused without being kept whole.
    let mut long = b"1\n2\n".to_vec();
    long.extend(std::iter::repeat_n(b'x', 1 << 20));
    long.extend_from_slice(b"\n3\n");
    let out = with_input(&["decode"], &long);
    assert_fails(
        &out,
        2,
        "monoflake: line 3: invalid ID \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"…: 1048576 bytes, longer \
         than any ID\nmonoflake: 1 of 4 IDs could not be decoded\n",
        "long",
    );
    assert_eq!(text(&out.stdout).lines().count(), 3);
    // Standard input that cannot be read is a runtime failure (exit 1).
    let out = bin()
        .arg("decode")
        .stdin(std::fs::File::open("/").unwrap())
        .output()
        .unwrap();
    assert_fails(
        &out,
        1,
        "monoflake: cannot read standard input: Is a directory",
        "dir",
    );
}

#[test]
fn decode_empty_stdin_prints_nothing() {
    let out = with_input(&["decode", "--json"], b"");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty() && out.stderr.is_empty());
    let out = with_input(&["decode"], b"\n  \n\t\n");
    assert!(out.status.success() && out.stdout.is_empty());
    // `-` names standard input, as for most tools.
    let out = with_input(
        &["decode", "--layout", "discord", "-"],
        b"90339695967350784",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "90339695967350784 2015-09-07T06:57:41.949Z worker=0 process=3 sequence=0\n"
    );
}

#[test]
fn decode_answers_each_line_before_the_next_arrives() {
    // A slow producer (a person typing, `tail -f`): every line is decoded and written before
    // more input comes, not when the input ends.
    use std::io::{BufRead, BufReader};
    let mut child = bin()
        .args(["decode", "--layout", "discord"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (lines_tx, lines_rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if lines_tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    let guard = std::time::Duration::from_secs(60); // against a hang only
    for (input, expected) in [
        (
            "175928847299117063\n",
            "175928847299117063 2016-04-30T11:18:25.796Z worker=1 process=0 sequence=7",
        ),
        (
            "90339695967350784\n",
            "90339695967350784 2015-09-07T06:57:41.949Z worker=0 process=3 sequence=0",
        ),
    ] {
        stdin.write_all(input.as_bytes()).unwrap();
        stdin.flush().unwrap();
        let line = lines_rx
            .recv_timeout(guard)
            .expect("decode held a line back until more input came");
        assert_eq!(line, expected);
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
    reader.join().unwrap();
}

#[test]
fn decode_stops_quietly_when_the_reader_goes_away() {
    // `monoflake decode < many | head -1`: a closed output pipe ends decode with 0, no message.
    let mut child = bin()
        .args(["decode"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        for _ in 0..20_000 {
            if stdin
                .write_all(b"175928847299117063\n".repeat(50).as_slice())
                .is_err()
            {
                break;
            }
        }
    });
    let mut first = [0u8; 18];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // stdout dropped here: the next write of decode fails with a broken pipe.
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    writer.join().unwrap();
    assert_eq!(&first, b"175928847299117063");
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(err.is_empty(), "{err}");
}

#[test]
fn layouts_spec_prints_each_preset_as_the_text_layout_takes() {
    let out = monoflake(&["layouts", "--spec", "twitter"]);
    assert!(out.status.success());
    assert_eq!(
        text(&out.stdout),
        "time=41,datacenter=5,worker=5,sequence=12,epoch=2010-11-04T01:42:54.657Z,tick=1ms\n"
    );
    for name in monoflake::PRESETS {
        let out = monoflake(&["layouts", "--spec", name]);
        assert!(out.status.success(), "{name}");
        let spec = text(&out.stdout);
        let spec = spec.trim_end();
        assert_eq!(
            spec.parse::<Layout>().unwrap(),
            Layout::preset(name).unwrap()
        );
        // A spec given back is normalised to the same text.
        let again = monoflake(&["layouts", "--spec", spec]);
        assert_eq!(text(&again.stdout).trim_end(), spec);
    }
    let sony = monoflake(&["layouts", "--spec", "sonyflake"]);
    assert_eq!(
        text(&sony.stdout),
        "time=39,sequence=8,machine=16,epoch=2014-09-01T00:00:00.000Z,tick=10ms\n"
    );
    // Another way of writing the same layout prints its canonical form.
    let out = monoflake(&[
        "layouts",
        "--spec",
        "time=39,region=4,host=8,sequence=12,epoch=2024-01-01T08:00:00+08:00,tick=1s",
    ]);
    assert_eq!(
        text(&out.stdout),
        "time=39,region=4,host=8,sequence=12,epoch=2024-01-01T00:00:00.000Z,tick=1s\n"
    );
    // Spaces are not trimmed away: a layout is read exactly as written.
    for spaced in [
        "twitter ",
        " time=39,region=4,host=8,sequence=12,epoch=2024-01-01,tick=1s",
    ] {
        let out = monoflake(&["layouts", "--spec", spaced]);
        assert_eq!(out.status.code(), Some(2), "{spaced:?}");
        assert!(
            text(&out.stderr).contains("no spaces"),
            "{}",
            text(&out.stderr)
        );
    }
    // The table lists given layouts, a spec's lifetime included.
    let out = monoflake(&[
        "layouts",
        "discord",
        "time=41,region=5,host=5,sequence=12,epoch=2024-01-01,tick=10ms",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    let rows: Vec<&str> = table.lines().collect();
    assert_eq!(rows.len(), 3, "{table}");
    assert!(
        rows[0].starts_with("layout") && rows[1].starts_with("discord"),
        "{table}"
    );
    assert!(rows[2].starts_with("custom"), "{table}");
    for column in [
        "region:5,host:5",
        "10ms",
        "2024-01-01T00:00:00.000Z",
        "2720-11-04",
        "409600",
    ] {
        assert!(rows[2].contains(column), "{column}: {table}");
    }
    let out = monoflake(&["layouts", "--spec", "twitter", "discord"]);
    assert_fails(&out, 2, "cannot be used with", "--spec with a list");
}

#[test]
fn a_custom_layout_generates_and_decodes_under_its_shape_key() {
    // The seeds' layout with a company epoch and a 10 ms tick, node fields by name.
    let spec = "time=41,region=5,host=5,sequence=12,epoch=2024-01-01T00:00:00Z,tick=10ms";
    let layout: Layout = spec.parse().unwrap();
    let state = TempDir::new("custom");
    let dir = state.path().to_str().unwrap();
    let out = monoflake(&[
        "gen",
        "-n",
        "3",
        "--layout",
        spec,
        "--node",
        "70",
        "--state-dir",
        dir,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let ids = text(&out.stdout);
    // The claim and reservation live under the layout's bit shape — Twitter's, whatever the
    // epoch and tick: its IDs can equal Twitter's — not under "custom" or its state name.
    let entries: Vec<String> = std::fs::read_dir(state.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(entries, [layout.shape_key().into_owned()]);
    assert_eq!(entries[0], "twitter");
    let out = with_input(&["decode", "--json", "--layout", spec], ids.as_bytes());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<String> = text(&out.stdout).lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 3);
    for line in &lines {
        assert!(
            line.contains("\"node\":70,") && line.ends_with(",\"region\":2,\"host\":6}"),
            "{line}"
        );
    }
    // Ten-millisecond ticks: the time is a multiple of 10 ms after the epoch.
    let ms: u64 = lines[0]
        .split("\"unix_ms\":")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!((ms - 1_704_067_200_000) % 10, 0);
    // A spec shaped like a preset shares the preset's state (and so its node claims).
    let twitter_spec = text(&monoflake(&["layouts", "--spec", "twitter"]).stdout);
    let out = monoflake(&[
        "gen",
        "--layout",
        twitter_spec.trim_end(),
        "--node",
        "1",
        "--state-dir",
        dir,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(state.path().join("twitter").is_dir());
}

#[test]
fn bad_layout_specs_exit_2_naming_the_part_and_the_numbers() {
    let cases: &[(&str, &str)] = &[
        (
            "time=37,server=20,sequence=16,epoch=2024-01-01",
            "layout needs 73 bits (time 37 + node 20 + sequence 16) but an ID holds at most 63",
        ),
        (
            "time=41,worker=10,sequence=12,epoch=2024-01-01,tick=10",
            "invalid layout spec at \"tick=10\": a tick needs a unit: 10ms or 10s",
        ),
        (
            "time=41,worker=10,sequence=12",
            "invalid layout spec: no epoch (RFC 3339",
        ),
        (
            "worker=10,time=41,sequence=12,epoch=0",
            "invalid layout spec at \"worker=10\": the time field comes first",
        ),
        (
            "time=41,worker=10,sequence=12,epoch=2024-02-30",
            "day 30 is not 1..=29 in 2024-02",
        ),
        (
            "time=41,worker=ten,sequence=12,epoch=0",
            "the width of worker is a number of bits, got \"ten\"",
        ),
        (
            "time=41,a=5,sequence=12,b=5,epoch=0",
            "this spec has 1 above the sequence and 1 below it",
        ),
        (
            "time=41,epoch=5,sequence=12,epoch=0",
            "invalid layout spec at \"epoch=0\": epoch is given twice",
        ),
        (
            "time=41,worker=10,sequence=12,epoch=0,sign_bit=perhaps",
            "sign_bit is yes (IDs may use all 64 bits) or no",
        ),
        (
            "twiter",
            "unknown layout preset \"twiter\"; known presets: twitter",
        ),
    ];
    for (spec, message) in cases {
        for args in [
            &["gen", "--layout", spec][..],
            &["decode", "--layout", spec, "1"],
        ] {
            let out = monoflake(args);
            assert_fails(&out, 2, message, spec);
            assert!(text(&out.stderr).contains("--layout <PRESET|SPEC>"));
        }
    }
    let out = monoflake(&["layouts", "--spec", "flickr"]);
    assert_fails(
        &out,
        2,
        "unknown layout preset \"flickr\"",
        "layouts --spec",
    );
    // A node out of range of a custom layout's node fields.
    let out = monoflake(&[
        "gen",
        "--layout",
        "time=41,worker=4,sequence=12,epoch=2024-01-01",
        "--node",
        "16",
    ]);
    assert_fails(
        &out,
        2,
        "node 16 is out of range: the field holds 0..=15",
        "node",
    );
    // An epoch in the future is bad input; a custom layout whose time ran out (2^20 ms after
    // 2000-01-01) decodes, and refuses to generate with a runtime failure (exit 1).
    let out = monoflake(&[
        "decode",
        "--layout",
        "time=41,w=10,sequence=12,epoch=2999-01-01",
        "1",
    ]);
    assert_fails(&out, 2, "ms in the future", "future epoch");
    let spent = "time=20,worker=10,sequence=12,epoch=2000-01-01";
    let out = monoflake(&["decode", "--layout", spent, "4194304"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "4194304 2000-01-01T00:00:00.001Z worker=0 sequence=0\n"
    );
    let state = TempDir::new("spent");
    let out = monoflake(&[
        "gen",
        "--layout",
        spent,
        "--state-dir",
        state.path().to_str().unwrap(),
    ]);
    assert_fails(
        &out,
        1,
        "time field ran out at unix ms 946685848576 (2000-01-01T00:17:28.576Z)",
        "spent",
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn key_files_hold_16_raw_bytes_or_32_hex_digits() {
    let dir = TempDir::new("keys");
    let state = dir.path().join("state");
    let state = state.to_str().unwrap();
    let raw = dir.path().join("raw");
    std::fs::write(&raw, (0u8..16).map(|i| 0xa0 | i).collect::<Vec<u8>>()).unwrap();
    let hex = dir.path().join("hex");
    std::fs::write(&hex, "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf\n").unwrap();
    let (raw, hex) = (raw.to_str().unwrap(), hex.to_str().unwrap());
    let out = monoflake(&[
        "gen",
        "-n",
        "3",
        "--format",
        "opaque",
        "--key-file",
        raw,
        "--node",
        "12",
        "--state-dir",
        state,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The same key written as hex maps the IDs back.
    let decoded = with_input(&["decode", "--key-file", hex], &out.stdout);
    assert!(decoded.status.success(), "{}", text(&decoded.stderr));
    assert_eq!(text(&decoded.stdout).lines().count(), 3);
    assert!(
        text(&decoded.stdout)
            .lines()
            .all(|l| l.contains("datacenter=0 worker=12")),
        "{}",
        text(&decoded.stdout)
    );
    let what = "a key file holds 16 raw bytes or 32 hex digits (a trailing newline is fine)";
    let bad: &[(&str, &[u8], &str)] = &[
        (
            "urandom32",
            &[0x9c; 32],
            "this one holds 32 bytes, and byte 0 (0x9c) is not a hex digit",
        ),
        ("short", b"0011\n", "this one holds 4 hex digits (16 bits)"),
        ("empty", b"", "this one is empty"),
    ];
    for (name, contents, holds) in bad {
        let path = dir.path().join(name);
        std::fs::write(&path, contents).unwrap();
        let path = path.to_str().unwrap();
        for args in [
            &["gen", "--format", "opaque", "--key-file", path][..],
            &["decode", "--key-file", path, "1"][..],
        ] {
            let out = monoflake(args);
            assert_fails(
                &out,
                2,
                &format!("monoflake: key file {path}: invalid opaque-ID key: {what}; {holds}\n"),
                name,
            );
            assert!(out.stdout.is_empty());
        }
    }
    let missing = dir.path().join("missing");
    let out = monoflake(&["decode", "--key-file", missing.to_str().unwrap(), "1"]);
    assert_fails(&out, 2, "cannot read the key file", "missing");
    let out = monoflake(&["gen", "--format", "opaque"]);
    assert_fails(&out, 2, "--format opaque needs --key-file F", "no key");
    // --help says what a key file holds.
    let help = text(&monoflake(&["gen", "--help"]).stdout);
    assert!(help.contains("16 raw bytes, or 32 hex digits"), "{help}");
}

#[test]
fn keygen_writes_a_fresh_key_that_gen_and_decode_take() {
    let a = monoflake(&["keygen"]);
    let b = monoflake(&["keygen"]);
    assert!(a.status.success() && b.status.success());
    let (a, b) = (text(&a.stdout), text(&b.stdout));
    assert_eq!(a.len(), 33, "{a:?}");
    assert!(a.ends_with('\n') && a[..32].bytes().all(|c| c.is_ascii_hexdigit()));
    assert_ne!(a, b, "two keys from the random source are equal");

    let dir = TempDir::new("keygen");
    let key = dir.path().join("key");
    let key_str = key.to_str().unwrap();
    let out = monoflake(&["keygen", "-o", key_str]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty());
    let contents = std::fs::read_to_string(&key).unwrap();
    assert_eq!(contents.len(), 33);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }
    // An existing key is never overwritten.
    let out = monoflake(&["keygen", "-o", key_str]);
    assert_fails(
        &out,
        2,
        &format!("{key_str} exists; keygen never overwrites a key"),
        "overwrite",
    );
    assert_eq!(std::fs::read_to_string(&key).unwrap(), contents);
    let out = monoflake(&["keygen", "-o", "/nonexistent-dir/key"]);
    assert_fails(
        &out,
        1,
        "cannot write the key file /nonexistent-dir/key",
        "bad dir",
    );
    // The key works.
    let state = dir.path().join("state");
    let out = monoflake(&[
        "gen",
        "-n",
        "2",
        "--format",
        "opaque",
        "--key-file",
        key_str,
        "--node",
        "4",
        "--state-dir",
        state.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let decoded = with_input(&["decode", "--key-file", key_str], &out.stdout);
    assert!(decoded.status.success(), "{}", text(&decoded.stderr));
    assert!(
        text(&decoded.stdout)
            .lines()
            .all(|l| l.contains("datacenter=0 worker=4"))
    );
}

/// The subcommand names `monoflake --help` lists.
fn subcommands() -> Vec<String> {
    let help = text(&monoflake(&["--help"]).stdout);
    let names: Vec<String> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "help")
        .map(str::to_owned)
        .collect();
    for expected in [
        "gen",
        "decode",
        "layouts",
        "keygen",
        "completions",
        "manpage",
    ] {
        assert!(names.iter().any(|n| n == expected), "{names:?}");
    }
    names
}

#[test]
fn completions_name_every_subcommand_in_every_shell() {
    let names = subcommands();
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let out = monoflake(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {}", text(&out.stderr));
        let script = text(&out.stdout);
        assert!(script.len() > 1000, "{shell}: {script}");
        for name in &names {
            assert!(script.contains(name.as_str()), "{shell} lacks {name}");
        }
        assert!(script.contains("--layout"), "{shell}");
    }
    let out = monoflake(&["completions", "tcsh"]);
    assert_fails(&out, 2, "invalid value 'tcsh'", "tcsh");
}

#[test]
fn manpage_names_every_subcommand_and_writes_one_page_each() {
    let names = subcommands();
    let out = monoflake(&["manpage"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let page = text(&out.stdout);
    assert!(page.starts_with(".ie") || page.starts_with(".TH"), "{page}");
    assert!(page.contains(".TH monoflake 1"), "{page}");
    for name in &names {
        assert!(page.contains(&format!("monoflake\\-{name}(1)")), "{name}");
    }
    let dir = TempDir::new("man");
    let out = monoflake(&["manpage", "--dir", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(dir.path().join("monoflake.1").is_file());
    for name in &names {
        let sub = std::fs::read_to_string(dir.path().join(format!("monoflake-{name}.1")))
            .unwrap_or_else(|e| panic!("monoflake-{name}.1: {e}"));
        assert!(sub.contains(".TH monoflake-"), "{name}");
    }
    let decode = std::fs::read_to_string(dir.path().join("monoflake-decode.1")).unwrap();
    assert!(decode.contains("standard input"), "{decode}");
    let out = monoflake(&["manpage", "--dir", "/nonexistent-dir"]);
    assert_fails(
        &out,
        1,
        "cannot write manual pages to /nonexistent-dir",
        "dir",
    );
}
