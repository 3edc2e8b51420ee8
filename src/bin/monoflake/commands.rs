//! The work behind each subcommand, done through the library's public API.

use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use monoflake::{
    Error, FileStore, Generator, Id, Layout, NodeRequest, NodeStore, PRESETS, rfc3339,
};

use crate::args::{Backend, Command, DecodeArgs, Format, GenArgs, NodeArg};

/// A failed command: what to print and the exit code.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        let code = match e {
            Error::LayoutTooWide { .. }
            | Error::ZeroBits { .. }
            | Error::InvalidFieldName { .. }
            | Error::ZeroTick
            | Error::EpochInFuture { .. }
            | Error::UnknownPreset { .. }
            | Error::OutOfRange { .. }
            | Error::InvalidId { .. }
            | Error::IdTooWide { .. } => 2,
            _ => 1,
        };
        Failure {
            code,
            message: e.to_string(),
        }
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        Failure {
            code: 1,
            message: format!("cannot write output: {e}"),
        }
    }
}

pub fn run(command: Command) -> Result<(), Failure> {
    let result = match command {
        Command::Gen(args) => generate(&args),
        Command::Decode(args) => decode(&args),
        Command::Layouts => layouts(),
    };
    match result {
        // `monoflake gen | head` closes the pipe early: that is not a failure.
        Err(Failure { code: 1, message }) if message.contains("Broken pipe") => Ok(()),
        other => other,
    }
}

/// Output buffered per thread and written to stdout in large chunks.
const CHUNK: usize = 64 * 1024;
/// IDs reserved with one compare-exchange by each thread.
const BATCH: u64 = 256;

/// Set by Ctrl-C: writers stop, the claim is released, the command fails.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

fn open_store(args: &GenArgs) -> Result<Arc<dyn NodeStore>, Failure> {
    match args.backend {
        Backend::File => Ok(Arc::new(match &args.state_dir {
            Some(dir) => FileStore::open(dir)?,
            None => FileStore::open_default()?,
        })),
        #[cfg(feature = "etcd")]
        Backend::Etcd => {
            let endpoints: Vec<&str> = args.etcd_endpoints.iter().map(String::as_str).collect();
            let ttl = std::time::Duration::from_secs(args.lease_ttl);
            Ok(Arc::new(monoflake::EtcdStore::connect(
                &endpoints,
                &args.etcd_prefix,
                ttl,
            )?))
        }
        #[cfg(not(feature = "etcd"))]
        Backend::Etcd => Err(Failure {
            code: 2,
            message: "this monoflake was built without the `etcd` feature \
                      (cargo build --features etcd)"
                .into(),
        }),
    }
}

fn generate(args: &GenArgs) -> Result<(), Failure> {
    let layout = Layout::preset(&args.layout)?;
    let request = match args.node {
        NodeArg::Auto => NodeRequest::Any,
        NodeArg::Exact(n) => NodeRequest::Exact(layout.check_node(n)?),
    };
    let store = open_store(args)?;
    let leased = Generator::builder(layout).build_leased(store, request)?;
    // Ctrl-C stops the writers; the lease is then released as on a normal exit.
    let _ = ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::Relaxed));
    let threads = u64::from(args.threads);
    let written = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|i| {
                let share = args.count / threads + u64::from(i < args.count % threads);
                let generator = &*leased;
                s.spawn(move || write_ids(generator, share, args.format))
            })
            .collect();
        workers
            .into_iter()
            .try_for_each(|w| w.join().expect("an ID writer panicked"))
    });
    let released = leased.release();
    written?;
    if INTERRUPTED.load(Ordering::Relaxed) {
        return Err(Failure {
            code: 1,
            message: "interrupted; the node was released".into(),
        });
    }
    released.map_err(Failure::from)
}

fn write_ids(generator: &Generator, count: u64, format: Format) -> Result<(), Failure> {
    let mut buf = Vec::with_capacity(CHUNK + 64);
    let mut left = count;
    while left > 0 && !INTERRUPTED.load(Ordering::Relaxed) {
        let n = left.min(BATCH);
        for id in generator.next_ids(n)? {
            match format {
                Format::Decimal => writeln!(buf, "{id}")?,
                Format::Hex => writeln!(buf, "0x{id:016x}")?,
            }
        }
        left -= n;
        if buf.len() >= CHUNK {
            io::stdout().lock().write_all(&buf)?;
            buf.clear();
        }
    }
    let mut out = io::stdout().lock();
    out.write_all(&buf)?;
    out.flush()?;
    Ok(())
}

fn parse_id(s: &str) -> Result<Id, Error> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16)
            .map(Id::from_u64)
            .map_err(|_| Error::InvalidId {
                input: s.to_owned(),
                reason: "not a hex number of at most 16 digits",
                position: hex.find(|c: char| !c.is_ascii_hexdigit()).map(|p| p + 2),
            }),
        None => s.parse(),
    }
}

fn decode(args: &DecodeArgs) -> Result<(), Failure> {
    let layout = Layout::preset(&args.layout)?;
    let mut out = io::BufWriter::new(io::stdout().lock());
    let mut first_failure = None;
    for input in &args.ids {
        match parse_id(input).and_then(|id| Ok((id, id.parts(&layout)?))) {
            Ok((id, parts)) if args.json => {
                write!(
                    out,
                    "{{\"id\":\"{id}\",\"unix_ms\":{},\"time\":\"{}\",\"node\":{},\"sequence\":{}",
                    parts.unix_ms(),
                    parts.rfc3339(),
                    parts.node(),
                    parts.sequence()
                )?;
                for (name, value) in parts.fields() {
                    write!(out, ",\"{name}\":{value}")?;
                }
                writeln!(out, "}}")?;
            }
            Ok((id, parts)) => writeln!(out, "{id} {parts}")?,
            Err(e) => {
                let failure = Failure::from(e);
                eprintln!("monoflake: {}", failure.message);
                first_failure.get_or_insert(failure);
            }
        }
    }
    out.flush()?;
    match first_failure {
        Some(f) => Err(Failure {
            code: f.code,
            message: "some IDs could not be decoded".into(),
        }),
        None => Ok(()),
    }
}

fn layouts() -> Result<(), Failure> {
    let mut out = io::BufWriter::new(io::stdout().lock());
    writeln!(
        out,
        "{:<12} {:>4} {:<24} {:>3} {:<9} {:>7}  {:<24}  {:<10} {:>13}",
        "preset",
        "time",
        "node fields",
        "seq",
        "node at",
        "tick",
        "epoch",
        "runs out",
        "IDs/s/node"
    )?;
    for name in PRESETS {
        let l = Layout::preset(name)?;
        let fields: Vec<String> = l
            .node_fields()
            .iter()
            .map(|f| format!("{}:{}", f.name(), f.bits()))
            .collect();
        let per_second = (l.max_sequence() + 1) * 1000 / l.tick_ms();
        writeln!(
            out,
            "{:<12} {:>4} {:<24} {:>3} {:<9} {:>5}ms  {:<24}  {:<10} {:>13}",
            l.name(),
            l.time_bits(),
            fields.join(","),
            l.sequence_bits(),
            if l.node_below_sequence() {
                "low"
            } else {
                "middle"
            },
            l.tick_ms(),
            rfc3339(l.epoch_ms()),
            &rfc3339(l.expires_at_ms())[..10],
            per_second
        )?;
    }
    out.flush()?;
    Ok(())
}
