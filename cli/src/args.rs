//! The command line, parsed; no work happens here.

use std::path::PathBuf;
use std::time::Duration;

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
    #[command(after_help = GEN_AFTER_HELP)]
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
    /// Serve IDs over HTTP (and gRPC with --grpc-listen) from one leased node.
    #[cfg(feature = "server")]
    Serve(ServeArgs),
    /// Ask a running `monoflake serve` whether it is ready (GET /readyz), for a container's
    /// HEALTHCHECK or an exec probe without curl: exit 0 on a 200, 1 otherwise.
    #[cfg(feature = "server")]
    #[command(after_help = HEALTH_AFTER_HELP)]
    Health(HealthArgs),
    /// Measure how fast this machine issues IDs for a layout and clock (about ten seconds).
    Bench(BenchArgs),
    /// Look after the file backend's state directory (`state migrate`).
    #[command(subcommand)]
    State(StateCommand),
}

/// What `monoflake state` does.
#[derive(Debug, clap::Subcommand)]
pub enum StateCommand {
    /// Rewrite reservations written by monoflake 0.1 (no checksum) as version 2, after you
    /// have checked the directory: they are refused until then. Prints each file rewritten;
    /// nodes held by a running process are left alone.
    Migrate(StateArgs),
}

/// The state directory `monoflake state` works on.
#[derive(Debug, clap::Args)]
pub struct StateArgs {
    /// The state directory [default: $MONOFLAKE_STATE_DIR, else /var/lib/monoflake].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
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
const GEN_AFTER_HELP: &str = "Exit codes: 0 done (or the reader closed the pipe), 1 a \
runtime failure or an interrupted run, 2 bad usage. Ctrl-C or SIGTERM stops at once, also \
while waiting for the next tick of a slow layout: every ID already issued is printed, the node \
is released, exit 1. When issuing fails mid-run (the layout's time runs out, the lease is \
lost), the IDs issued before it are printed, then the error.";

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
    #[command(flatten)]
    pub node_args: NodeArgs,
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

/// Where the node comes from: the flags `gen` and `serve` share.
#[derive(Debug, clap::Args)]
pub struct NodeArgs {
    /// The layout: a preset name or a spec (see `monoflake layouts`).
    #[arg(long, default_value = "twitter", value_name = LAYOUT_VALUE, value_parser = parse_layout, long_help = LAYOUT_HELP)]
    pub layout: Layout,
    /// The node ID to claim: `auto` for the lowest free one, or a number (an error if held).
    #[arg(long, default_value = "auto", value_parser = parse_node)]
    pub node: NodeArg,
    #[command(flatten)]
    pub store: StoreArgs,
    /// Trust the node's time reservation however far ahead of this clock it is: the clock
    /// moves forward to it (then slews back at 0.1 %). Only when this clock is wrong now and
    /// was right when the reservation was written; by default such a node is refused (--node N)
    /// or skipped (--node auto).
    #[arg(long)]
    pub trust_reservation: bool,
}

/// Which node store, and how to reach it: the flags `gen`, `serve` and `bench` share.
#[derive(Debug, clap::Args)]
pub struct StoreArgs {
    /// Where the file backend keeps lock and reservation files; refused if users it does not
    /// trust can write it [default: the host-wide $MONOFLAKE_STATE_DIR, else
    /// /var/lib/monoflake, made private to its first user; share it with a group (mode 2770)
    /// so that every service on the host takes a node of its own].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Where node IDs are claimed and time reservations kept [default: file; `bench`
    /// measures a store only when given one].
    #[arg(long, value_enum)]
    pub backend: Option<Backend>,
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
    pub etcd_ca: Option<PathBuf>,
    /// A PEM client certificate for etcd's mutual TLS (with --etcd-key).
    #[arg(long, value_name = "FILE", requires = "etcd_key")]
    pub etcd_cert: Option<PathBuf>,
    /// The PEM private key of --etcd-cert.
    #[arg(long, value_name = "FILE", requires = "etcd_cert")]
    pub etcd_key: Option<PathBuf>,
    /// etcd user name for its user/password auth; the password is read from
    /// --etcd-password-file, else from $MONOFLAKE_ETCD_PASSWORD.
    #[arg(long, value_name = "NAME")]
    pub etcd_user: Option<String>,
    /// A file holding the etcd password (its first line).
    #[arg(long, value_name = "FILE", requires = "etcd_user")]
    pub etcd_password_file: Option<PathBuf>,
    /// The PostgreSQL connection string (with `--backend postgres`): a URL,
    /// postgres://USER:PASSWORD@HOST:PORT/DB?sslmode=verify-full&sslrootcert=CA.pem, or
    /// libpq's key=value form. Other users on this host can read a command line: prefer
    /// --pg-url-file or $MONOFLAKE_PG_URL. Never printed.
    #[arg(long, value_name = "URL", conflicts_with = "pg_url_file", value_parser = parse_secret)]
    pub pg_url: Option<Secret>,
    /// A file holding the PostgreSQL connection string (its first line), instead of
    /// --pg-url or $MONOFLAKE_PG_URL.
    #[arg(long, value_name = "FILE")]
    pub pg_url_file: Option<PathBuf>,
    /// The PostgreSQL table of node rows (`NAME` or `SCHEMA.NAME`), created when missing.
    #[arg(long, value_name = "TABLE", default_value = "monoflake_nodes")]
    pub pg_table: String,
    /// How the PostgreSQL server's standbys are promoted: `automatic` (a claim is refused
    /// while the server streams to a standby that is not synchronous) or `manual` (standbys
    /// are promoted only by hand, once the old primary is fenced).
    #[arg(long, value_name = "MODE", default_value = "automatic")]
    pub pg_failover: String,
    /// Lease TTL in whole seconds (with `--backend etcd` or `postgres`).
    #[arg(long, value_name = "SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub lease_ttl: u64,
}

/// A value never shown: its `Debug` is `Secret(<hidden>)`.
#[derive(Clone)]
pub struct Secret(#[cfg_attr(not(feature = "postgres"), allow(dead_code))] String);

impl Secret {
    /// The value, for the one place that uses it.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<hidden>)")
    }
}

fn parse_secret(s: &str) -> Result<Secret, String> {
    Ok(Secret(s.to_owned()))
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
    /// Rows in a PostgreSQL table, for services that already run PostgreSQL (the `postgres`
    /// feature, in the default build).
    Postgres,
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

/// The environment variables `serve` reads for the node and store flags it shares with `gen`
/// and `bench`: only `serve` reads them (a container's settings), so `gen` and `bench` in a
/// shell where they are set behave as before. The flag wins over the variable. Not here:
/// `--state-dir` (the library already reads `$MONOFLAKE_STATE_DIR` for the host-wide default,
/// for every subcommand) and `--pg-url` (`$MONOFLAKE_PG_URL` is read by the store, after
/// `--pg-url-file` and `--pg-url`, for every subcommand).
#[cfg(feature = "server")]
const SERVE_SHARED_ENV: [(&str, &str); 15] = [
    ("layout", "MONOFLAKE_LAYOUT"),
    ("node", "MONOFLAKE_NODE"),
    ("trust_reservation", "MONOFLAKE_TRUST_RESERVATION"),
    ("backend", "MONOFLAKE_BACKEND"),
    ("etcd_endpoints", "MONOFLAKE_ETCD_ENDPOINTS"),
    ("etcd_prefix", "MONOFLAKE_ETCD_PREFIX"),
    ("etcd_ca", "MONOFLAKE_ETCD_CA"),
    ("etcd_cert", "MONOFLAKE_ETCD_CERT"),
    ("etcd_key", "MONOFLAKE_ETCD_KEY"),
    ("etcd_user", "MONOFLAKE_ETCD_USER"),
    ("etcd_password_file", "MONOFLAKE_ETCD_PASSWORD_FILE"),
    ("pg_url_file", "MONOFLAKE_PG_URL_FILE"),
    ("pg_table", "MONOFLAKE_PG_TABLE"),
    ("pg_failover", "MONOFLAKE_PG_FAILOVER"),
    ("lease_ttl", "MONOFLAKE_LEASE_TTL"),
];

/// Gives a shared node or store flag of `serve` its environment variable
/// ([`SERVE_SHARED_ENV`]). Values of variables that name where a secret lives are never shown
/// by `--help`.
#[cfg(feature = "server")]
fn serve_env(arg: clap::Arg) -> clap::Arg {
    let id = arg.get_id().as_str();
    let Some(&(_, name)) = SERVE_SHARED_ENV.iter().find(|(flag, _)| *flag == id) else {
        return arg;
    };
    let secret = matches!(id, "etcd_password_file" | "pg_url_file" | "etcd_key");
    arg.env(name).hide_env_values(secret)
}

/// `monoflake serve`: the ID service. Every setting can also come from a `MONOFLAKE_*`
/// environment variable (`--help` names each); the flag wins over the variable.
#[cfg(feature = "server")]
#[derive(Debug, clap::Args)]
#[command(mut_args(serve_env))]
pub struct ServeArgs {
    #[command(flatten)]
    pub node_args: NodeArgs,
    /// The HTTP listener (loopback by default: put a proxy or --tls-cert and --token-file in
    /// front before listening elsewhere). Port 0 picks a free port, printed at start.
    #[arg(
        long,
        env = "MONOFLAKE_LISTEN",
        value_name = "ADDR:PORT",
        default_value = "127.0.0.1:8080"
    )]
    pub listen: std::net::SocketAddr,
    /// The gRPC listener (`monoflake.v1.Ids`); none unless given.
    #[arg(long, env = "MONOFLAKE_GRPC_LISTEN", value_name = "ADDR:PORT")]
    pub grpc_listen: Option<std::net::SocketAddr>,
    /// The most IDs one request may take (`/v1/ids?count=N`, gRPC `Next`).
    #[arg(long, env = "MONOFLAKE_MAX_COUNT", value_name = "N", default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub max_count: u64,
    /// A file holding the bearer token callers must send (`Authorization: Bearer <token>`)
    /// to get or decode IDs; its first line, at least 16 bytes. /healthz, /readyz and /metrics
    /// stay open. Or the token itself in $MONOFLAKE_TOKEN (never printed); giving both is
    /// refused.
    #[arg(
        long,
        env = "MONOFLAKE_TOKEN_FILE",
        hide_env_values = true,
        value_name = "FILE"
    )]
    pub token_file: Option<PathBuf>,
    /// A PEM certificate chain: serve HTTPS (and gRPC over TLS) with it (needs --tls-key).
    #[arg(
        long,
        env = "MONOFLAKE_TLS_CERT",
        value_name = "FILE",
        requires = "tls_key"
    )]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(
        long,
        env = "MONOFLAKE_TLS_KEY",
        hide_env_values = true,
        value_name = "FILE",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,
    /// Open connections served at once, per listener. When all are taken, a new connection
    /// takes the place of an idle one (one that never completed a request first, then the
    /// longest idle); one with a request in flight is never closed for it.
    #[arg(long, env = "MONOFLAKE_MAX_CONNECTIONS", value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections: u32,
    /// A connection that completes no request for this long is closed, and so is one whose
    /// client does not take an answer within it. Bytes trickled in are not progress.
    #[arg(long, env = "MONOFLAKE_IDLE_TIMEOUT", value_name = "SECONDS", default_value_t = 30.0, value_parser = parse_seconds)]
    pub idle_timeout: f64,
    /// A new connection must finish its TLS handshake and send its first request's head
    /// (HTTP/2: the preface and SETTINGS first) within this long.
    #[arg(long, env = "MONOFLAKE_HANDSHAKE_TIMEOUT", value_name = "SECONDS", default_value_t = 10.0, value_parser = parse_seconds)]
    pub handshake_timeout: f64,
    /// HTTP/2 streams (requests) served at once on one connection.
    #[arg(long, env = "MONOFLAKE_MAX_STREAMS", value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub max_streams: u32,
    /// The most memory answers not yet taken by their clients may hold, in MiB, for the whole
    /// server. Past three quarters of it, large answers are refused with 503; one connection
    /// holds at most 1 MiB (or the largest answer --max-count allows).
    #[arg(long, env = "MONOFLAKE_RESPONSE_BUDGET", value_name = "MIB", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub response_budget: u32,
    /// How long a request may wait for the generator (its lead used up, a reservation being
    /// written) before it is answered 503 with Retry-After.
    #[arg(long, env = "MONOFLAKE_MAX_WAIT", value_name = "SECONDS", default_value_t = 1.0, value_parser = parse_seconds)]
    pub max_wait: f64,
    /// After a lost lease (`/readyz` 503), wait this long, then claim a node again and serve
    /// from it; retried as often while the store refuses.
    #[arg(long, env = "MONOFLAKE_RECLAIM_AFTER", value_name = "SECONDS", default_value_t = 1.0, value_parser = parse_seconds)]
    pub reclaim_after: f64,
    /// Threads serving requests [default: one per CPU].
    #[arg(long, env = "MONOFLAKE_THREADS", value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub threads: Option<u16>,
    /// After SIGTERM (or SIGINT), how long the service drains before its listeners close:
    /// /readyz answers 503, new connections are still served, every HTTP/1 answer carries
    /// `Connection: close` and HTTP/2 connections get GOAWAY, so that clients and load
    /// balancers move away without a failed request. 0 closes at once; a second signal ends
    /// the grace.
    #[arg(long, env = "MONOFLAKE_DRAIN_GRACE", value_name = "SECONDS", default_value_t = 1.0, value_parser = parse_grace)]
    pub drain_grace: f64,
    /// Once the listeners closed, how long requests in flight may take before their
    /// connections are cut and the node is released.
    #[arg(long, env = "MONOFLAKE_DRAIN_TIMEOUT", value_name = "SECONDS", default_value_t = 5.0, value_parser = parse_seconds)]
    pub drain_timeout: f64,
}

/// What `health --help` adds.
#[cfg(feature = "server")]
const HEALTH_AFTER_HELP: &str = "Reads the settings serve reads for the same things, so \
that an image's HEALTHCHECK needs none: $MONOFLAKE_LISTEN (0.0.0.0 or :: is reached on \
loopback) and $MONOFLAKE_TLS_CERT (HTTPS, trusting exactly that certificate). Exit codes: 0 \
ready (the answer is printed), 1 not ready, unreachable or too slow (the reason is printed), \
2 bad usage.";

/// `monoflake health`: one probe of a running server.
#[cfg(feature = "server")]
#[derive(Debug, clap::Args)]
pub struct HealthArgs {
    /// The server's HTTP listener, as `serve --listen` was given it.
    #[arg(
        long,
        env = "MONOFLAKE_LISTEN",
        value_name = "ADDR:PORT",
        default_value = "127.0.0.1:8080"
    )]
    pub listen: std::net::SocketAddr,
    /// The server's --tls-cert: probe over HTTPS, accepting only the first certificate of
    /// this file.
    #[arg(long, env = "MONOFLAKE_TLS_CERT", value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// Probe /healthz (the process serves) instead of /readyz (it holds its lease and issues).
    #[arg(long)]
    pub live: bool,
    /// Give up after this long: connecting, TLS, the request and the answer together.
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0, value_parser = parse_seconds)]
    pub timeout: f64,
}

/// Measures how fast this machine issues IDs: per ID and per second for 1..N threads (one
/// shared generator, and per-core), per-call latency percentiles, and the layout's cap.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// The layout to measure: a preset name or a spec.
    #[arg(long, default_value = "twitter", value_name = LAYOUT_VALUE, value_parser = parse_layout, long_help = LAYOUT_HELP)]
    pub layout: Layout,
    /// The clock: `locked` reads the CPU counter on every call (the default); `coarse` reads a
    /// time a background thread refreshes every 200 µs.
    #[arg(long, value_enum, default_value_t = ClockArg::Locked)]
    pub clock: ClockArg,
    /// Measure 1 up to this many threads [default: the number of CPUs].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub threads: Option<u32>,
    /// The whole run's length, shared out between the measurements: e.g. `10s`, `2.5s`,
    /// `500ms`, `1m`.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// With --backend: also measure that node store's claims, renewals and reservation
    /// writes (a share of --duration, on a layout of its own named `bench`).
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ClockArg {
    /// The CPU's counter, read on every call (no background thread).
    Locked,
    /// A time refreshed by a background thread every 200 µs (cheapest per call).
    Coarse,
}

/// The shortest whole run and the longest (`bench` also sizes its histograms by the longest).
const MIN_DURATION: Duration = Duration::from_millis(100);
pub const MAX_DURATION: Duration = Duration::from_secs(3600);

/// Reads `10s`, `2.5s`, `500ms`, `1m` (a number and a unit).
fn parse_duration(s: &str) -> Result<Duration, String> {
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("expected a number and a unit (10s, 500ms, 1m), got {s:?}"))?;
    let out_of_range =
        || format!("{s:?} is out of range: between {MIN_DURATION:?} and {MAX_DURATION:?}");
    let seconds = match unit {
        "ms" => value / 1e3,
        "s" => value,
        "m" => value * 60.0,
        _ => {
            return Err(format!(
                "unknown unit {unit:?} in {s:?}: use ms, s or m (10s, 500ms, 1m)"
            ));
        }
    };
    let d = Duration::try_from_secs_f64(seconds).map_err(|_| out_of_range())?;
    if d < MIN_DURATION || d > MAX_DURATION {
        return Err(out_of_range());
    }
    Ok(d)
}

/// `--drain-grace`: seconds, 0 (no grace) to a day.
#[cfg(feature = "server")]
fn parse_grace(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=86_400.0).contains(&v) => Ok(v),
        Ok(v) => Err(format!("{v} is outside 0..=86400 seconds")),
        Err(_) => Err(format!("expected seconds, e.g. 2.5, got {s:?}")),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_duration_names_the_bounds_for_any_number_out_of_range() {
        for s in ["100000000000000000000000000000s", "3601s", "99ms", "0s"] {
            let e = parse_duration(s).unwrap_err();
            assert!(
                e.ends_with("is out of range: between 100ms and 3600s"),
                "{s}: {e}"
            );
        }
        assert_eq!(parse_duration(".5s"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("5.s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("60m"), Ok(MAX_DURATION));
    }

    #[test]
    fn a_connection_string_given_as_a_flag_is_never_shown_by_debug() {
        let cli = Cli::try_parse_from([
            "monoflake",
            "gen",
            "--backend",
            "postgres",
            "--pg-url",
            "postgres://u:hunter2@db/x",
        ])
        .unwrap();
        let shown = format!("{cli:?}");
        assert!(
            !shown.contains("hunter2") && shown.contains("<hidden>"),
            "{shown}"
        );
    }
}
