//! `monoflake gen`: new IDs from a leased node, written to standard output by one or more
//! threads sharing one generator.

use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use monoflake::{Encoding, Error, Generator, IdGenerator, Ids, NodeRequest, Opaque};

use crate::args::{Format, GenArgs, NodeArg};
use crate::failure::Failure;
use crate::key_file::read_key;
use crate::store::{open_store, say_if_behind};

/// Output buffered per thread and written to stdout in large chunks.
const CHUNK: usize = 64 * 1024;
/// IDs reserved with one compare-exchange by each thread.
const BATCH: u64 = 256;

/// The longest sleep at the lead limit between two looks at [`INTERRUPTED`].
const WAIT_SLICE: Duration = Duration::from_millis(50);
/// A wait at the lead limit this short is spent yielding, not sleeping (a sleep would
/// oversleep it).
const SPIN_WAIT: Duration = Duration::from_micros(20);
/// Before a wait at the lead limit this long, the IDs buffered so far are written out.
const FLUSH_BEFORE_WAIT: Duration = Duration::from_millis(10);

/// Set by Ctrl-C or SIGTERM: writers stop (also in the middle of a wait at the lead limit),
/// every ID issued is written, the claim is released, the command fails (exit code 1).
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Fails when standard output was closed when the command started (`monoflake gen >&-`):
/// the IDs would be issued and lost without a word. Rust's runtime reopens a closed standard
/// output on `/dev/null`, read-write; a shell's `> /dev/null` opens it write-only. On Linux
/// that difference tells the two apart (`/proc/self/fd/1` and its `fdinfo` flags); elsewhere
/// nothing is checked.
fn check_stdout_open() -> Result<(), Failure> {
    let target = std::fs::read_link("/proc/self/fd/1").ok();
    let flags = std::fs::read_to_string("/proc/self/fdinfo/1")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("flags:"))
                .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
        });
    const O_ACCMODE: u32 = 0o3;
    const O_RDWR: u32 = 0o2;
    match (target, flags) {
        (Some(t), Some(f)) if t == Path::new("/dev/null") && f & O_ACCMODE == O_RDWR => {
            Err(Failure {
                code: 1,
                message: "standard output is closed: the IDs would be lost, so none were \
                          issued (redirect to /dev/null to discard them on purpose)"
                    .into(),
            })
        }
        _ => Ok(()),
    }
}

pub fn run(args: &GenArgs) -> Result<(), Failure> {
    check_stdout_open()?;
    let layout = args.node_args.layout.clone();
    let request = match args.node_args.node {
        NodeArg::Auto => NodeRequest::Any,
        NodeArg::Exact(n) => NodeRequest::Exact(layout.check_node(n)?),
    };
    let opaque = match (args.format, &args.key_file) {
        (Format::Opaque, Some(path)) => Some(Opaque::new(&layout, read_key(path)?)),
        (Format::Opaque, None) => return Err(Failure::usage("--format opaque needs --key-file F")),
        _ => None,
    };
    let store = open_store(&args.node_args)?;
    let leased = Generator::builder(layout)
        .trust_future_reservation(args.node_args.trust_reservation)
        .build_leased(store, request)?;
    say_if_behind(&leased);
    let progress = progress_bar(args.count);
    // Ctrl-C stops the writers; the lease is then released as on a normal exit.
    let _ = ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::Relaxed));
    let threads = u64::from(args.threads);
    let max_wait = leased.max_wait();
    let written = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|i| {
                let share = args.count / threads + u64::from(i < args.count % threads);
                let (generator, opaque, progress) = (&leased, opaque.as_ref(), &progress);
                s.spawn(move || {
                    write_ids(generator, share, max_wait, args.format, opaque, progress)
                })
            })
            .collect();
        workers
            .into_iter()
            .try_for_each(|w| w.join().expect("an ID writer panicked"))
    });
    if let Some(bar) = &progress {
        bar.finish_and_clear();
    }
    if args.stats {
        eprintln!("monoflake: node {}: {}", leased.node(), leased.stats());
    }
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

/// A progress bar on stderr for long runs, only when stderr is a terminal.
fn progress_bar(count: u64) -> Option<ProgressBar> {
    use std::io::IsTerminal;
    if count < 1_000_000 || !io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::new(count);
    if let Ok(style) =
        ProgressStyle::with_template("{bar:40} {human_pos}/{human_len} IDs, {per_sec}, eta {eta}")
    {
        bar.set_style(style);
    }
    Some(bar)
}

/// Writes `count` IDs to stdout, in runs of at most one tick's sequence (a longer run could
/// never fit under a layout with long ticks and few sequence bits).
///
/// Every ID issued is written, also when issuing then fails (`Exhausted`, `LeaseLost`…): the
/// buffered IDs go out first, then the error is returned. Ctrl-C or SIGTERM is seen between
/// runs and while waiting at the lead limit ([`issue`]), within [`WAIT_SLICE`].
fn write_ids(
    generator: &impl IdGenerator,
    count: u64,
    max_wait: Duration,
    format: Format,
    opaque: Option<&Opaque>,
    progress: &Option<ProgressBar>,
) -> Result<(), Failure> {
    let mut buf = Vec::with_capacity(CHUNK + 64);
    let batch = BATCH.min(generator.layout().max_sequence().saturating_add(1));
    let filled = fill(
        generator, count, batch, max_wait, format, opaque, progress, &mut buf,
    );
    // What was issued is written whatever happened after it.
    let mut out = io::stdout().lock();
    let written = out.write_all(&buf).and_then(|()| out.flush());
    filled?;
    Ok(written?)
}

/// The loop of [`write_ids`]: issues and formats into `buf`, writing it out when it is full
/// and before a long wait (so a slow layout's IDs appear as they are issued).
#[allow(clippy::too_many_arguments)]
fn fill(
    generator: &impl IdGenerator,
    count: u64,
    batch: u64,
    max_wait: Duration,
    format: Format,
    opaque: Option<&Opaque>,
    progress: &Option<ProgressBar>,
    buf: &mut Vec<u8>,
) -> Result<(), Failure> {
    let mut left = count;
    while left > 0 && !INTERRUPTED.load(Ordering::Relaxed) {
        let n = left.min(batch);
        let Some(ids) = issue(generator, n, max_wait, buf)? else {
            break; // interrupted while waiting
        };
        let n = ids.len() as u64;
        for id in ids {
            match (format, opaque) {
                (Format::Decimal, _) => writeln!(buf, "{id}")?,
                (Format::Hex, _) => writeln!(buf, "0x{id:016x}")?,
                (Format::Base32, _) => writeln!(buf, "{}", id.encode(Encoding::Base32))?,
                (Format::Base62, _) => writeln!(buf, "{}", id.encode(Encoding::Base62))?,
                (Format::Opaque, Some(o)) => writeln!(buf, "{}", o.encrypt(id)?)?,
                (Format::Opaque, None) => {
                    return Err(Failure::usage("--format opaque needs --key-file F"));
                }
            }
        }
        if let Some(bar) = progress {
            bar.inc(n);
        }
        left -= n;
        if buf.len() >= CHUNK {
            io::stdout().lock().write_all(buf)?;
            buf.clear();
        }
    }
    Ok(())
}

/// Up to `n` IDs (at least one), waiting at the lead limit as the library's `next_ids` would
/// (for at most `max_wait`, then [`Error::TimedOut`]), but in slices of at most
/// [`WAIT_SLICE`] that look at [`INTERRUPTED`]: `None` when a signal came while waiting.
/// A run that does not fit now (the rest of a tick already begun, or of the time field) is
/// halved until one does, and only a single ID is waited for or reported `Exhausted`. Before a wait of [`FLUSH_BEFORE_WAIT`] or more, `buf`
/// is written out.
fn issue(
    generator: &impl IdGenerator,
    n: u64,
    max_wait: Duration,
    buf: &mut Vec<u8>,
) -> Result<Option<Ids>, Failure> {
    let started = Instant::now();
    let mut n = n;
    loop {
        let retry_after = match generator.try_next_ids(n) {
            // Too long for what is left of the tick, or of the time field: a shorter run may
            // still fit (the last IDs a layout can issue are issued too).
            Err(Error::WouldBlock { .. } | Error::Exhausted { .. }) if n > 1 => {
                n /= 2;
                continue;
            }
            Err(Error::WouldBlock { retry_after, .. }) => retry_after,
            other => return Ok(Some(other?)),
        };
        let waited = started.elapsed();
        if waited >= max_wait {
            return Err(Error::timed_out(waited, retry_after).into());
        }
        if INTERRUPTED.load(Ordering::Relaxed) {
            return Ok(None);
        }
        if retry_after <= SPIN_WAIT {
            std::thread::yield_now();
            continue;
        }
        if retry_after >= FLUSH_BEFORE_WAIT && !buf.is_empty() {
            let mut out = io::stdout().lock();
            out.write_all(buf)?;
            out.flush()?;
            buf.clear();
        }
        std::thread::sleep(retry_after.min(WAIT_SLICE).min(max_wait - waited));
    }
}
