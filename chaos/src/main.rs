//! `monoflake-chaos`: a soak that tries to make monoflake issue a duplicate.
//!
//! `run` starts, on 127.0.0.1 only, a 3-member etcd cluster, a PostgreSQL server and
//! generator processes of every kind users run (`monoflake gen` and `monoflake serve` on the
//! file store and on etcd, and a library holder: `monoflake-chaos holder`), then runs the
//! scripted scenarios of every duplicate found so far and a seeded random schedule of faults.
//! Every ID any process prints or serves goes into a table with a `BIGINT PRIMARY KEY`; the
//! run exits 0 only when every invariant held. See `docs/reliability.md`.
//!
//! `holder` and `forge` are the run's own helpers: a process holding a leased generator
//! through the public API, and what another local user can write into a state directory.

mod args;
mod checker;
mod clients;
mod etcd;
mod faketime;
mod forge;
mod fork;
mod fsys;
mod holder;
mod nemesis;
mod pg;
mod procs;
mod report;
mod run;
mod scenarios;
mod slots;
mod world;

use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Command};

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Run(args) => run::main(args),
        Command::Holder(args) => holder::main(&args),
        Command::Forge(args) => forge::main(&args),
    }
}
