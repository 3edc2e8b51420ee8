//! `monoflake decode` throughput through the real binary: decimal IDs on standard input, text
//! or JSON on standard output (discarded), 1 M lines per run.
//!
//! `cargo bench -p monoflake-cli --bench decode`. Two inputs: `gen`, IDs as `monoflake gen`
//! prints them (4096 per millisecond, so consecutive lines share their time), and `spread`,
//! one ID per millisecond (every line formats a new time: the worst case).

use std::fs::File;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use monoflake::Layout;

const LINES: u64 = 1_000_000;

fn input(name: &str, ms_per_id: u64) -> PathBuf {
    let layout = Layout::twitter();
    let start = layout.tick_at(1_700_000_000_000);
    let mut text = String::with_capacity(20 * LINES as usize);
    for i in 0..LINES {
        let (tick, sequence) = if ms_per_id == 0 {
            (start + i / 4096, i % 4096)
        } else {
            (start + i * ms_per_id, 0)
        };
        let id = layout.compose(tick, 37, sequence).expect("compose");
        text.push_str(&id.to_string());
        text.push('\n');
    }
    let path = std::env::temp_dir().join(format!(
        "monoflake-bench-decode-{name}-{}",
        std::process::id()
    ));
    std::fs::write(&path, text).expect("write the input");
    path
}

fn decode(input: &PathBuf, json: bool) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_monoflake"));
    command.arg("decode");
    if json {
        command.arg("--json");
    }
    let status = command
        .stdin(File::open(input).expect("open the input"))
        .stdout(Stdio::null())
        .status()
        .expect("run monoflake");
    assert!(status.success());
}

fn bench(c: &mut Criterion) {
    let inputs = [("gen", input("gen", 0)), ("spread", input("spread", 1))];
    let mut group = c.benchmark_group("decode_stdin");
    group.sample_size(10);
    group.throughput(Throughput::Elements(LINES));
    for (name, path) in &inputs {
        group.bench_function(format!("{name}/text"), |b| b.iter(|| decode(path, false)));
        group.bench_function(format!("{name}/json"), |b| b.iter(|| decode(path, true)));
    }
    group.finish();
    for (_, path) in inputs {
        let _ = std::fs::remove_file(path);
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
