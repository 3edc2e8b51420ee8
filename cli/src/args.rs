//! The command line, parsed; no work happens here.

use clap::{Parser, Subcommand, ValueEnum};

/// Snowflake-style 64-bit IDs: generate them and take them apart.
#[derive(Debug, Parser)]
#[command(name = "monoflake", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print new IDs, one per line.
    Gen(GenArgs),
    /// Print the parts of IDs (decimal, or hex with a 0x prefix).
    Decode(DecodeArgs),
    /// List the layout presets with their widths, epoch, tick and lifetime.
    Layouts,
}

#[derive(Debug, clap::Args)]
pub struct GenArgs {
    /// How many IDs to print in total.
    #[arg(short = 'n', long = "count", default_value_t = 1)]
    pub count: u64,
    /// The layout preset.
    #[arg(long, default_value = "twitter")]
    pub layout: String,
    /// The node ID to claim: `auto` for the lowest free one, or a number (an error if held).
    #[arg(long, default_value = "auto", value_parser = parse_node)]
    pub node: NodeArg,
    /// Where the file backend keeps lock and reservation files, private to the users who can
    /// write it [default: the host-wide $MONOFLAKE_STATE_DIR, else /var/lib/monoflake, shared
    /// by every user on the host so that no two services take the same node].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<std::path::PathBuf>,
    /// Where node IDs are claimed and time reservations kept.
    #[arg(long, value_enum, default_value_t = Backend::File)]
    pub backend: Backend,
    /// etcd endpoints, comma-separated (with `--backend etcd`).
    #[arg(
        long,
        value_name = "URL[,URL]",
        default_value = "http://127.0.0.1:2379",
        value_delimiter = ','
    )]
    pub etcd_endpoints: Vec<String>,
    /// Key prefix in etcd (with `--backend etcd`).
    #[arg(long, value_name = "P", default_value = "/monoflake")]
    pub etcd_prefix: String,
    /// Lease TTL in whole seconds (with `--backend etcd`).
    #[arg(long, value_name = "SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub lease_ttl: u64,
    /// Trust the node's time reservation however far ahead of this clock it is: the clock
    /// moves forward to it (then slews back at 0.1 %). Only when this clock is wrong now and
    /// was right when the reservation was written; by default such a node is refused (--node N)
    /// or skipped (--node auto).
    #[arg(long)]
    pub trust_reservation: bool,
    /// Threads sharing one generator; COUNT is the total over all of them.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: u32,
    /// How IDs are printed (`opaque` needs --key-file).
    #[arg(long, value_enum, default_value_t = Format::Decimal)]
    pub format: Format,
    /// A file holding a 128-bit key as 32 hex digits, for `--format opaque`.
    #[arg(long, value_name = "F")]
    pub key_file: Option<std::path::PathBuf>,
    /// Print the generator's counters to stderr at the end.
    #[arg(long)]
    pub stats: bool,
}

/// `--node`: claim any free node, or exactly this one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeArg {
    Auto,
    Exact(u64),
}

fn parse_node(s: &str) -> Result<NodeArg, String> {
    match s {
        "auto" => Ok(NodeArg::Auto),
        _ => s
            .parse()
            .map(NodeArg::Exact)
            .map_err(|_| format!("expected `auto` or a node number, got {s:?}")),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// Lock files in a state directory: one host, no server (the default).
    File,
    /// etcd leases, for clusters (needs the `etcd` feature).
    Etcd,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Decimal, e.g. 175928847299117063.
    Decimal,
    /// Sixteen hex digits with a 0x prefix, e.g. 0x0271065ac1020007.
    Hex,
    /// 13 characters of Crockford base32, order-preserving, e.g. 04W86BB0G4007.
    Base32,
    /// 11 characters of 0-9A-Za-z, order-preserving, e.g. 0Czks0tP37X.
    Base62,
    /// The ID mapped through a keyed permutation (decimal): reveals neither time, node nor
    /// order without the key.
    Opaque,
}

/// How `decode` reads its IDs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum InputFormat {
    /// `0x…` is hex; digits only are decimal; 13 characters are base32; 11 are base62.
    Auto,
    /// Decimal.
    Decimal,
    /// Hex, with or without 0x.
    Hex,
    /// Crockford base32 (any case).
    Base32,
    /// Base62.
    Base62,
}

#[derive(Debug, clap::Args)]
pub struct DecodeArgs {
    /// The layout preset the IDs were made under.
    #[arg(long, default_value = "twitter")]
    pub layout: String,
    /// One JSON object per line instead of text.
    #[arg(long)]
    pub json: bool,
    /// How the IDs are written.
    #[arg(long, value_enum, default_value_t = InputFormat::Auto)]
    pub format: InputFormat,
    /// The IDs are opaque (`gen --format opaque`): map them back with the key in this file.
    #[arg(long, value_name = "F")]
    pub key_file: Option<std::path::PathBuf>,
    /// The IDs.
    #[arg(required = true)]
    pub ids: Vec<String>,
}
