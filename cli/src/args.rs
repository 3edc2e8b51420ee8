//! The command line, parsed; no work happens here.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use monoflake::Layout;

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
    /// Print the parts of IDs given as arguments, or read from standard input.
    Decode(DecodeArgs),
    /// List the layout presets with their widths, epoch, tick and lifetime, or print one as a
    /// spec.
    Layouts(LayoutsArgs),
    /// Write a new 128-bit key for opaque IDs (`--format opaque`), from the operating system's
    /// random source.
    Keygen(KeygenArgs),
    /// Print a shell completion script.
    Completions(CompletionsArgs),
    /// Print the manual page (roff), or write one page per subcommand to a directory.
    Manpage(ManpageArgs),
}

/// What `--layout` takes, in `--help`.
pub const LAYOUT_HELP: &str = "The layout: a preset name (twitter, discord, sonyflake, baidu, \
js-safe, game-server; `monoflake layouts` lists them) or a spec: NAME=VALUE parts separated by \
commas, the bit fields from the most significant bit down — time first, then the node fields \
by name and the sequence (node fields may instead follow the sequence, as in sonyflake) — and \
the settings epoch= (RFC 3339 or Unix ms, required), tick= (1ms by default, e.g. 10ms, 1s) \
and sign_bit=yes (IDs may use all 64 bits). For example \
time=41,datacenter=5,worker=5,sequence=12,epoch=2010-11-04T01:42:54.657Z,tick=1ms \
(`monoflake layouts --spec twitter` prints it).";

/// Reads `--layout`: a preset name or a spec, through the library's `Layout::from_str`.
/// Every subcommand that takes a layout uses this parser, with
/// `#[arg(long, default_value = "twitter", value_name = LAYOUT_VALUE, value_parser = parse_layout, long_help = LAYOUT_HELP)]`.
pub fn parse_layout(s: &str) -> Result<Layout, String> {
    s.parse::<Layout>().map_err(|e| e.to_string())
}

/// The value name `--layout` shows in `--help`.
pub const LAYOUT_VALUE: &str = "PRESET|SPEC";

/// What a key file holds, in `--help`.
const KEY_FILE_HELP: &str = "A file holding a 128-bit key: 16 raw bytes, or 32 hex digits \
(a trailing newline is fine), as `monoflake keygen -o FILE` writes.";

#[derive(Debug, clap::Args)]
pub struct LayoutsArgs {
    /// Print this layout (a preset name, or a spec to check and normalise) as a spec, the text
    /// `--layout` takes.
    #[arg(long, value_name = LAYOUT_VALUE, value_parser = parse_layout, conflicts_with = "layouts")]
    pub spec: Option<Layout>,
    /// The layouts to list, presets or specs (e.g. to see when your own runs out) [default:
    /// every preset].
    #[arg(value_name = LAYOUT_VALUE, value_parser = parse_layout)]
    pub layouts: Vec<Layout>,
}

#[derive(Debug, clap::Args)]
pub struct KeygenArgs {
    /// Write the key to this new file (mode 0600; an existing file is never overwritten)
    /// instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, clap::Args)]
pub struct ManpageArgs {
    /// Write monoflake.1 and one page per subcommand (monoflake-gen.1, …) to this directory
    /// instead of printing monoflake.1.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct GenArgs {
    /// How many IDs to print in total.
    #[arg(short = 'n', long = "count", default_value_t = 1)]
    pub count: u64,
    /// The layout: a preset name or a spec (see `monoflake layouts`).
    #[arg(long, default_value = "twitter", value_name = LAYOUT_VALUE, value_parser = parse_layout, long_help = LAYOUT_HELP)]
    pub layout: Layout,
    /// The node ID to claim: `auto` for the lowest free one, or a number (an error if held).
    #[arg(long, default_value = "auto", value_parser = parse_node)]
    pub node: NodeArg,
    /// Where the file backend keeps lock and reservation files, private to the users who can
    /// write it [default: the host-wide $MONOFLAKE_STATE_DIR, else /var/lib/monoflake, shared
    /// by every user on the host so that no two services take the same node].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
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
    /// The key for `--format opaque`: a file of 16 raw bytes or 32 hex digits
    /// (`monoflake keygen -o FILE`).
    #[arg(long, value_name = "FILE", long_help = KEY_FILE_HELP)]
    pub key_file: Option<PathBuf>,
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
    /// The layout the IDs were made under: a preset name or a spec (see `monoflake layouts`).
    #[arg(long, default_value = "twitter", value_name = LAYOUT_VALUE, value_parser = parse_layout, long_help = LAYOUT_HELP)]
    pub layout: Layout,
    /// One JSON object per line instead of text.
    #[arg(long)]
    pub json: bool,
    /// How the IDs are written.
    #[arg(long, value_enum, default_value_t = InputFormat::Auto)]
    pub format: InputFormat,
    /// The IDs are opaque (`gen --format opaque`): map them back with the key in this file
    /// (16 raw bytes or 32 hex digits).
    #[arg(long, value_name = "FILE", long_help = KEY_FILE_HELP)]
    pub key_file: Option<PathBuf>,
    /// The IDs. Without any (or with `-`), IDs are read from standard input, one per line or
    /// separated by whitespace; a bad one is reported on stderr with its line number, the rest
    /// are still decoded, and the exit code is 2.
    #[arg(value_name = "ID")]
    pub ids: Vec<String>,
}
