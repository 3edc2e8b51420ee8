//! The peers, set up the same way for every bench: each at its own defaults, the Snowflake-style
//! ones at Twitter's layout (41 bits of ms, 10 node bits, 12 sequence bits), and the ones that
//! take a custom layout (ferroid, idgenerator) also on monoflake's wide layout.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use ferroid::define_snowflake_id;
use ferroid::generator::AtomicSnowflakeGenerator;
use ferroid::id::SnowflakeTwitterId;
use ferroid::time::{MonotonicClock, TWITTER_EPOCH};
use monoflake::Layout;

define_snowflake_id!(
    /// ferroid's ID on monoflake's wide layout: 41 bits of ms, 1 node bit, 21 sequence bits.
    WideId, u64,
    reserved: 1,
    timestamp: 41,
    machine_id: 1,
    sequence: 21
);

/// The wide layout monoflake runs on where no cap should bind: 41 bits of ms since Twitter's
/// epoch, one node bit, 21 sequence bits (2,097,152 IDs per ms per node).
#[allow(dead_code)] // each bench uses part of this module
pub fn wide() -> Layout {
    Layout::builder()
        .epoch_ms(Layout::twitter().epoch_ms())
        .name("wide")
        .node_field("n", 1)
        .sequence_bits(21)
        .build()
        .expect("wide layout")
}

/// One ID from one peer, as a closure usable from any thread.
#[allow(dead_code)]
pub struct Peer {
    pub name: &'static str,
    /// Capped by a Snowflake sequence (4096 per ms, or Sonyflake's 256 per 10 ms).
    pub capped: bool,
    /// On the wide layout (41/1/21) rather than the peer's own or Twitter's.
    pub wide: bool,
    pub next: Box<dyn Fn() -> u64 + Send + Sync>,
}

/// ferroid's lock-free generator with its monotonic clock, yielding on `Pending` as its
/// documentation shows.
fn ferroid_twitter() -> Peer {
    let g: AtomicSnowflakeGenerator<SnowflakeTwitterId, _> =
        AtomicSnowflakeGenerator::new(1, MonotonicClock::<1>::with_epoch(TWITTER_EPOCH));
    Peer {
        name: "ferroid (atomic)",
        capped: true,
        wide: false,
        next: Box::new(move || g.next_id(|_| std::thread::yield_now()).to_raw()),
    }
}

fn ferroid_wide() -> Peer {
    let g: AtomicSnowflakeGenerator<WideId, _> =
        AtomicSnowflakeGenerator::new(1, MonotonicClock::<1>::with_epoch(TWITTER_EPOCH));
    Peer {
        name: "ferroid (atomic) wide",
        capped: false,
        wide: true,
        next: Box::new(move || g.next_id(|_| std::thread::yield_now()).to_raw()),
    }
}

/// ferroid's thread-local monotonic ULID (`generator::thread_local::Ulid::new_ulid_mono`):
/// a generator per thread, on a shared ticker clock, yielding on `Pending` as its
/// documentation shows. 128 bits, folded to 64 here: the per-thread peer of the per-thread
/// rows.
#[allow(dead_code)]
pub fn ferroid_thread_local() -> Peer {
    Peer {
        name: "ferroid thread-local ULID (monotonic)",
        capped: false,
        wide: false,
        next: Box::new(|| {
            let raw =
                ferroid::generator::thread_local::Ulid::new_ulid_mono(|_| std::thread::yield_now())
                    .to_raw();
            (raw >> 64) as u64 ^ raw as u64
        }),
    }
}

/// idgenerator's core generator behind a mutex (its `IdInstance` is the same behind a global
/// `parking_lot` mutex; the core lets two layouts run in one process).
fn idgenerator(name: &'static str, worker_bits: u8, seq_bits: u8, wide: bool) -> Peer {
    let mut core = idgenerator::CoreIdGenerator::default();
    core.init(
        idgenerator::IdGeneratorOptions::new()
            .worker_id(1)
            .worker_id_bit_len(worker_bits)
            .seq_bit_len(seq_bits),
    )
    .expect("idgenerator");
    let core = Mutex::new(core);
    Peer {
        name,
        capped: !wide,
        wide,
        next: Box::new(move || core.lock().unwrap().next_id() as u64),
    }
}

/// Every peer at its own or Twitter's layout, then the wide-layout ones.
#[allow(dead_code)]
pub fn peers() -> Vec<Peer> {
    let mut all = twitter_peers();
    all.extend(wide_peers());
    all
}

/// The peers on the wide layout (41/1/21; idgenerator's widest is 1 worker bit and 20 sequence
/// bits: it requires worker + sequence bits < 22).
#[allow(dead_code)]
pub fn wide_peers() -> Vec<Peer> {
    vec![ferroid_wide(), idgenerator("idgenerator wide", 1, 20, true)]
}

/// Every peer at its own defaults, the Snowflake-style ones at Twitter's layout.
#[allow(dead_code)]
pub fn twitter_peers() -> Vec<Peer> {
    let snowflaked = snowflaked::sync::Generator::new(1);
    let rs_snowflake = Mutex::new(snowflake::SnowflakeIdGenerator::new(1, 1));
    let snowflake_me = snowflake_me::Snowflake::builder()
        .machine_id(&|| Ok(1))
        .data_center_id(&|| Ok(1))
        .finalize()
        .expect("snowflake_me");
    let sonyflake = sonyflake::Sonyflake::builder()
        .machine_id(&|| Ok(1))
        .finalize()
        .expect("sonyflake");
    let ulid = Mutex::new(ulid::Generator::new());
    vec![
        ferroid_twitter(),
        Peer {
            name: "snowflaked (sync)",
            capped: true,
            wide: false,
            next: Box::new(move || snowflaked.generate::<u64>()),
        },
        Peer {
            name: "rs-snowflake",
            capped: true,
            wide: false,
            next: Box::new(move || rs_snowflake.lock().unwrap().real_time_generate() as u64),
        },
        Peer {
            name: "snowflake_me",
            capped: true,
            wide: false,
            next: Box::new(move || snowflake_me.next_id().expect("snowflake_me").as_u64()),
        },
        idgenerator("idgenerator", 10, 12, false),
        Peer {
            name: "sonyflake",
            capped: true,
            wide: false,
            next: Box::new(move || sonyflake.next_id().expect("sonyflake").to_u64()),
        },
        Peer {
            name: "ulid (monotonic)",
            capped: false,
            wide: false,
            next: Box::new(move || {
                let mut g = ulid.lock().unwrap();
                g.generate()
                    .map(|u| (u.0 >> 64) as u64 ^ u.0 as u64)
                    .unwrap_or(0)
            }),
        },
        Peer {
            name: "scru128",
            capped: false,
            wide: false,
            next: Box::new(|| (scru128::new().to_u128() >> 64) as u64),
        },
        Peer {
            name: "uuid v7",
            capped: false,
            wide: false,
            next: Box::new(|| uuid::Uuid::now_v7().as_u64_pair().0),
        },
    ]
}

/// How long the sustained measurements run.
#[allow(dead_code)]
pub const SUSTAINED: Duration = Duration::from_secs(5);

/// The reference point that is no generator: one quanta `raw()` read plus one compare-exchange
/// on an `AtomicU64` (one try), the least a lock-free generator that reads a clock on every
/// call can do.
#[allow(dead_code)]
pub fn raw_and_compare_exchange() -> impl Fn() -> u64 + Send + Sync {
    let clock = quanta::Clock::new();
    let cell = AtomicU64::new(0);
    move || {
        let now = clock.raw();
        let current = cell.load(Ordering::Relaxed);
        black_box(cell.compare_exchange(
            current,
            now.max(current + 1),
            Ordering::AcqRel,
            Ordering::Relaxed,
        ))
        .unwrap_or(current)
    }
}

/// The least any generator with one shared state can do per ID: one load and one
/// compare-exchange of an `AtomicU64` (one try), no clock at all. Its one-thread rate bounds
/// what one shared state issues on any number of threads (they take turns on its cache line).
#[allow(dead_code)]
pub fn compare_exchange_alone() -> impl Fn() -> u64 + Send + Sync {
    let cell = AtomicU64::new(0);
    move || {
        let current = cell.load(Ordering::Relaxed);
        black_box(cell.compare_exchange(current, current + 1, Ordering::AcqRel, Ordering::Relaxed))
            .unwrap_or(current)
    }
}

/// As [`window`], but each thread calls a `next` of its own, made by `make` on the thread (a
/// per-thread generator's handle, which stays on its thread).
#[allow(dead_code)]
pub fn window_each<'a>(
    threads: usize,
    length: Duration,
    make: &(dyn Fn() -> Box<dyn Fn() -> u64 + 'a> + Sync),
) -> (Vec<u64>, Duration) {
    window_of(threads, length, make)
}

/// `threads` threads start on a barrier and call `next` back to back for `length` (looking at
/// the stop flag every 64 calls): the IDs each took, and the window's real length.
#[allow(dead_code)]
pub fn window(
    threads: usize,
    length: Duration,
    next: &(dyn Fn() -> u64 + Sync),
) -> (Vec<u64>, Duration) {
    window_of(threads, length, &|| next)
}

/// The window both run: each thread makes its `next` with `make`, then calls it from the
/// barrier until the stop flag (looked at every 64 calls).
#[allow(dead_code)]
fn window_of<F: Fn() -> u64>(
    threads: usize,
    length: Duration,
    make: &(impl Fn() -> F + Sync + ?Sized),
) -> (Vec<u64>, Duration) {
    window_run(threads, length, &|start: &dyn Fn(), stop: &AtomicBool| {
        let next = make();
        start();
        calls_until(stop, next)
    })
}

/// `next` called back to back until `stop` (looked at every 64 calls): how many calls.
#[allow(dead_code)]
pub fn calls_until(stop: &AtomicBool, mut next: impl FnMut() -> u64) -> u64 {
    const STRIDE: u64 = 64;
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..STRIDE {
            black_box(next());
        }
        n += STRIDE;
    }
    n
}

/// `threads` threads each run `body`, which sets up what it calls, calls `start` (a barrier
/// all threads pass together when the window opens), then calls until the stop flag
/// ([`calls_until`]) and returns how many calls it made: the calls each made, and the
/// window's real length. For a thread whose calls borrow what it set up (a per-thread
/// generator's handle and its iterator), which a closure made by `make` cannot own.
#[allow(dead_code)]
pub fn window_run(
    threads: usize,
    length: Duration,
    body: &(dyn Fn(&dyn Fn(), &AtomicBool) -> u64 + Sync),
) -> (Vec<u64>, Duration) {
    let barrier = Barrier::new(threads + 1);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    body(
                        &|| {
                            barrier.wait();
                        },
                        &stop,
                    )
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        std::thread::sleep(length);
        stop.store(true, Ordering::Relaxed);
        let elapsed = start.elapsed();
        let counts = workers.into_iter().map(|w| w.join().unwrap()).collect();
        (counts, elapsed)
    })
}
