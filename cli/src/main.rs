//! `monoflake`: a thin command line over the library's public API.
//!
//! Exit codes: 0 success, 1 a runtime failure (e.g. the layout's time ran out) or a run
//! interrupted by SIGINT or SIGTERM, 2 bad usage or input (an unparsable ID, an unknown
//! preset, a node out of range).

mod args;
mod bench;
mod commands;
mod decode;
mod keys;
#[cfg(feature = "server")]
mod serve;
mod shell;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = match args::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match commands::run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            // Standard error may be a closed pipe (`2>&1 | head -1`): not a panic.
            let _ = writeln!(std::io::stderr(), "monoflake: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}
