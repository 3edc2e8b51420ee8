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
    /// Serve IDs over HTTP (and gRPC with --grpc-listen) from one leased node.
    #[cfg(feature = "server")]
    Serve(ServeArgs),
}

#[derive(Debug, clap::Args)]
pub struct GenArgs {
    /// How many IDs to print in total.
    #[arg(short = 'n', long = "count", default_value_t = 1)]
    pub count: u64,
    #[command(flatten)]
    pub node_args: NodeArgs,
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

/// Where the node comes from: the flags `gen` and `serve` share.
#[derive(Debug, clap::Args)]
pub struct NodeArgs {
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
    /// A PEM file of the CA certificates that sign etcd's server certificate; turns TLS on
    /// (with `https://` endpoints).
    #[arg(long, value_name = "FILE")]
    pub etcd_ca: Option<std::path::PathBuf>,
    /// A PEM client certificate for etcd's mutual TLS (with --etcd-key).
    #[arg(long, value_name = "FILE", requires = "etcd_key")]
    pub etcd_cert: Option<std::path::PathBuf>,
    /// The PEM private key of --etcd-cert.
    #[arg(long, value_name = "FILE", requires = "etcd_cert")]
    pub etcd_key: Option<std::path::PathBuf>,
    /// etcd user name for its user/password auth; the password is read from
    /// --etcd-password-file, else from $MONOFLAKE_ETCD_PASSWORD.
    #[arg(long, value_name = "NAME")]
    pub etcd_user: Option<String>,
    /// A file holding the etcd password (its first line).
    #[arg(long, value_name = "FILE", requires = "etcd_user")]
    pub etcd_password_file: Option<std::path::PathBuf>,
    /// Lease TTL in whole seconds (with `--backend etcd`).
    #[arg(long, value_name = "SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub lease_ttl: u64,
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

/// `monoflake serve`: the ID service.
#[cfg(feature = "server")]
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub node_args: NodeArgs,
    /// The HTTP listener (loopback by default: put a proxy or --tls-cert and --token-file in
    /// front before listening elsewhere). Port 0 picks a free port, printed at start.
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:8080")]
    pub listen: std::net::SocketAddr,
    /// The gRPC listener (`monoflake.v1.Ids`); none unless given.
    #[arg(long, value_name = "ADDR:PORT")]
    pub grpc_listen: Option<std::net::SocketAddr>,
    /// The most IDs one request may take (`/v1/ids?count=N`, gRPC `Next`).
    #[arg(long, value_name = "N", default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub max_count: u64,
    /// A file holding the bearer token callers must send (`Authorization: Bearer <token>`)
    /// to get or decode IDs; its first line, at least 16 bytes. /healthz, /readyz and /metrics
    /// stay open.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<std::path::PathBuf>,
    /// A PEM certificate chain: serve HTTPS (and gRPC over TLS) with it (needs --tls-key).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Open connections served at once, per listener; more wait in the kernel's backlog.
    #[arg(long, value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections: u32,
    /// A connection that moves no byte for this long is closed (also the limit for a TLS
    /// handshake and for a request's head to arrive).
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0, value_parser = parse_seconds)]
    pub idle_timeout: f64,
    /// How long a request may wait for the generator (its lead used up, a reservation being
    /// written) before it is answered 503 with Retry-After.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0, value_parser = parse_seconds)]
    pub max_wait: f64,
    /// After a lost lease (`/readyz` 503), wait this long, then claim a node again and serve
    /// from it; retried as often while the store refuses.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0, value_parser = parse_seconds)]
    pub reclaim_after: f64,
    /// How long a stop (SIGTERM, SIGINT) waits for requests in flight before it closes their
    /// connections and releases the node.
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0, value_parser = parse_seconds)]
    pub drain_timeout: f64,
}

/// Seconds, fractions allowed: from 0.001 to a day.
#[cfg(feature = "server")]
fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.001..=86_400.0).contains(&v) => Ok(v),
        Ok(v) => Err(format!("{v} is outside 0.001..=86400 seconds")),
        Err(_) => Err(format!("expected seconds, e.g. 2.5, got {s:?}")),
    }
}
