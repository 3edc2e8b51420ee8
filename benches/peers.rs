//! The peers, set up the same way for `compare` and `latency`: each at its own default layout,
//! and the Snowflake-style ones at Twitter's (41 bits of ms, 10 node bits, 12 sequence bits).

use std::sync::Mutex;
use std::time::Duration;

use ferroid::generator::AtomicSnowflakeGenerator;
use ferroid::id::SnowflakeTwitterId;
use ferroid::time::{MonotonicClock, TWITTER_EPOCH};

/// One ID from each peer, as a closure usable from any thread.
#[allow(dead_code)] // each bench uses part of it
pub struct Peer {
    pub name: &'static str,
    /// Capped by a Snowflake sequence (4096 per ms, or Sonyflake's 256 per 10 ms).
    pub capped: bool,
    pub next: Box<dyn Fn() -> u64 + Send + Sync>,
}

pub fn peers() -> Vec<Peer> {
    let ferroid: AtomicSnowflakeGenerator<SnowflakeTwitterId, _> =
        AtomicSnowflakeGenerator::new(1, MonotonicClock::<1>::with_epoch(TWITTER_EPOCH));
    let snowflaked = snowflaked::sync::Generator::new(1);
    let rs_snowflake = Mutex::new(snowflake::SnowflakeIdGenerator::new(1, 1));
    let snowflake_me = snowflake_me::Snowflake::builder()
        .machine_id(&|| Ok(1))
        .data_center_id(&|| Ok(1))
        .finalize()
        .expect("snowflake_me");
    idgenerator::IdInstance::init(
        idgenerator::IdGeneratorOptions::new()
            .worker_id(1)
            .worker_id_bit_len(10)
            .seq_bit_len(12),
    )
    .expect("idgenerator");
    let sonyflake = sonyflake::Sonyflake::builder()
        .machine_id(&|| Ok(1))
        .finalize()
        .expect("sonyflake");
    let ulid = Mutex::new(ulid::Generator::new());
    vec![
        Peer {
            name: "ferroid (atomic)",
            capped: true,
            next: Box::new(move || ferroid.next_id(|_| std::thread::yield_now()).to_raw()),
        },
        Peer {
            name: "snowflaked (sync)",
            capped: true,
            next: Box::new(move || snowflaked.generate::<u64>()),
        },
        Peer {
            name: "rs-snowflake",
            capped: true,
            next: Box::new(move || rs_snowflake.lock().unwrap().real_time_generate() as u64),
        },
        Peer {
            name: "snowflake_me",
            capped: true,
            next: Box::new(move || snowflake_me.next_id().expect("snowflake_me").as_u64()),
        },
        Peer {
            name: "idgenerator",
            capped: true,
            next: Box::new(|| idgenerator::IdInstance::next_id() as u64),
        },
        Peer {
            name: "sonyflake",
            capped: true,
            next: Box::new(move || sonyflake.next_id().expect("sonyflake").to_u64()),
        },
        Peer {
            name: "ulid (monotonic)",
            capped: false,
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
            next: Box::new(|| (scru128::new().to_u128() >> 64) as u64),
        },
        Peer {
            name: "uuid v7",
            capped: false,
            next: Box::new(|| uuid::Uuid::now_v7().as_u64_pair().0),
        },
    ]
}

/// How long the sustained measurements run.
#[allow(dead_code)]
pub const SUSTAINED: Duration = Duration::from_secs(5);
