//! `monoflake`: a thin command line over the library's public API.
//!
//! Exit codes: 0 success, 1 a runtime failure (e.g. the layout's time ran out) or a run
//! interrupted by SIGINT or SIGTERM, 2 bad usage or input (an unparsable ID, an unknown
//! preset, a node out of range).
//!
//! The arrows run one way: `main` parses with `args` (every clap type) and hands each
//! subcommand its arguments; a subcommand's module (`generate`, `decode`, `layouts`, `keys`,
//! `shell`, `state`, `bench/`, `serve/`, `health`) imports no other one, only `args`, the shared pieces below it
//! (`store`, `key_file`, `parts`), `failure` and the library.

mod args;
mod bench;
mod decode;
mod failure;
mod generate;
#[cfg(feature = "server")]
mod health;
mod key_file;
mod keys;
mod layouts;
mod parts;
#[cfg(feature = "server")]
mod serve;
mod shell;
mod state;
mod store;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

use crate::args::Command;
use crate::failure::Failure;

fn main() -> ExitCode {
    let cli = match args::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            // Standard error may be a closed pipe (`2>&1 | head -1`): not a panic.
            let _ = writeln!(std::io::stderr(), "monoflake: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}

/// Runs one subcommand; a failure of code 0 (the reader of standard output went away) is a
/// quiet success.
fn run(command: Command) -> Result<(), Failure> {
    let result = match command {
        Command::Gen(args) => generate::run(&args),
        Command::Decode(args) => decode::run(&args),
        Command::Layouts(args) => layouts::run(&args),
        Command::Keygen(args) => keys::run(&args),
        Command::Completions(args) => shell::completions(&args),
        Command::Manpage(args) => shell::manpage(&args),
        #[cfg(feature = "server")]
        Command::Serve(args) => serve::run(&args),
        #[cfg(feature = "server")]
        Command::Health(args) => health::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::State(command) => state::run(&command),
    };
    match result {
        Err(Failure { code: 0, .. }) => Ok(()),
        other => other,
    }
}
