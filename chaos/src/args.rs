//! The command line: `run` (the soak), `holder` and `forge` (its helpers).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "monoflake-chaos",
    version,
    about = "A chaos soak for monoflake"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The soak: the scripted scenarios, then `--seconds` of random faults (scripts/chaos.sh
    /// builds what it needs and runs this).
    Run(RunArgs),
    /// A library holder: claims a node through the public API and issues IDs on request
    /// (commands on stdin, IDs on stdout; used by `run`).
    Holder(HolderArgs),
    /// What another local user can do to a state directory it can write: rename a node's lock
    /// away and plant a reservation with a valid checksum (used by `run` as `nobody`).
    Forge(ForgeArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// How long the random soak runs (the scenarios run before it, about a minute).
    #[arg(long)]
    pub seconds: u64,
    /// The seed of the fault schedule and of every random choice (a fresh one when absent).
    #[arg(long)]
    pub seed: Option<u64>,
    /// The `monoflake` binary (built with the `etcd` feature).
    #[arg(long, default_value = "target/debug/monoflake")]
    pub monoflake: PathBuf,
    /// Where the run's folder is made (`<out>/seed-<S>`): kept when the run fails.
    #[arg(long, default_value = "target/chaos")]
    pub out: PathBuf,
    /// IDs per second each generator is asked for (gen is read at this pace, the service's
    /// clients and the holder's driver ask at it).
    #[arg(long, default_value_t = 2000)]
    pub rate: u64,
    /// A generator that issues nothing for this long is in an outage.
    #[arg(long, default_value_t = 1000)]
    pub outage_ms: u64,
    /// How long after a fault ends an outage it caused may last.
    #[arg(long, default_value_t = 15_000)]
    pub recovery_ms: u64,
    /// Mean time between two faults of the random schedule.
    #[arg(long, default_value_t = 3000)]
    pub fault_every_ms: u64,
    /// The etcd lease TTL of every etcd generator, in seconds.
    #[arg(long, default_value_t = 3)]
    pub ttl: u64,
    /// Only these scenarios (comma-separated names), or `none`; all by default.
    #[arg(long)]
    pub scenarios: Option<String>,
    /// Keep the run's folder also when every invariant held.
    #[arg(long)]
    pub keep: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Store {
    File,
    Etcd,
    Postgres,
}

/// Which generator the holder issues from, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Flavour {
    /// `Leased`: the shared generator.
    Plain,
    /// `PerThread`, by its implicit path (`next_id`, the thread-local registry).
    PerThread,
    /// `PerThread`, by a `LocalSlot` handle taken for each command.
    Handle,
    /// `PerThread`, by a handle's iterator (`LocalSlot::ids`) for each command.
    Iter,
    /// A leased `PerCore`.
    PerCore,
}

/// The holder takes the store flags of `monoflake gen`, so one set of flags starts either.
#[derive(Debug, Args)]
pub struct HolderArgs {
    #[arg(long, value_enum, default_value = "file")]
    pub backend: Store,
    /// The file store's directory; the host-wide default (`FileStore::open_default`, which
    /// reads `$MONOFLAKE_STATE_DIR`) when absent.
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    #[arg(long, default_value = "http://127.0.0.1:2379")]
    pub etcd_endpoints: String,
    #[arg(long, default_value = "/monoflake")]
    pub etcd_prefix: String,
    #[arg(long, default_value_t = 3)]
    pub lease_ttl: u64,
    /// The PostgreSQL store's connection string (with `--backend postgres`).
    #[arg(long, default_value = "")]
    pub pg_url: String,
    /// The PostgreSQL store's table of node rows.
    #[arg(long, default_value = "monoflake_nodes")]
    pub pg_table: String,
    /// The generator issued from; `MONOFLAKE_CHAOS_FLAVOUR` (a flavour's name) when absent,
    /// else `plain`.
    #[arg(long, value_enum)]
    pub flavour: Option<Flavour>,
    /// A layout spec or preset name; `orders` builds the Twitter layout with the builder under
    /// another name and other field names.
    #[arg(long, default_value = "orders")]
    pub layout: String,
    /// `auto` or a node number.
    #[arg(long, default_value = "auto")]
    pub node: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ForgeVersion {
    /// `monoflake-reservation v1`: no checksum (monoflake 0.1).
    V1,
    /// `monoflake-reservation v2`: the checksum with the key from the source.
    V2,
}

#[derive(Debug, Args)]
pub struct ForgeArgs {
    /// The layout's directory in the state directory (`<state>/twitter`).
    #[arg(long)]
    pub dir: PathBuf,
    #[arg(long, default_value_t = 0)]
    pub node: u64,
    /// The reservation to plant (Unix ms); the current time when absent.
    #[arg(long)]
    pub until_ms: Option<u64>,
    #[arg(long, value_enum, default_value = "v2")]
    pub version: ForgeVersion,
}
