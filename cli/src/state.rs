//! `monoflake state`: looking after the file backend's state directory.
//!
//! Imports the flags, the store opener and the failure type; no other subcommand.

use std::io::Write;

use crate::args::{StateArgs, StateCommand};
use crate::failure::Failure;
use crate::store::open_file_store;

/// Runs `monoflake state ...`.
pub fn run(command: &StateCommand) -> Result<(), Failure> {
    match command {
        StateCommand::Migrate(args) => migrate(args),
    }
}

/// Rewrites version-1 reservations as version 2 and prints each file rewritten.
fn migrate(args: &StateArgs) -> Result<(), Failure> {
    let store = open_file_store(args.state_dir.as_deref())?;
    let migrated = store.migrate_v1()?;
    let mut out = std::io::stdout().lock();
    for path in &migrated {
        writeln!(out, "{}", path.display())?;
    }
    out.flush()?;
    if migrated.is_empty() {
        eprintln!(
            "monoflake: no version-1 reservation to migrate in {}",
            store.dir().display()
        );
    }
    Ok(())
}
