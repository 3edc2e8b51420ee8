//! Snowflake-style 64-bit IDs that are never issued twice, whatever the clock does.
//!
//! * **Unique and strictly increasing** across threads: one `AtomicU64` advanced by
//!   compare-exchange, lock-free, no syscall and no allocation per ID.
//! * **Immune to clock steps**: time is locked at start and advanced by a monotonic counter
//!   ([`LockedClock`]); it steps forward to the wall clock and slews back to it, never back.
//! * **No millisecond stalls**: a full sequence borrows future ticks, bounded by `max_lead`;
//!   past it [`Generator::try_next_id`] says [`Error::WouldBlock`] instead of spinning.
//! * **Layouts** for Twitter, Discord, Sonyflake, Baidu, JavaScript-safe and game-server IDs,
//!   or your own, checked when built; every ID decodes back into its parts.
//!
//! # Example
//!
//! ```
//! use monoflake::{Generator, Id, Layout};
//!
//! let generator = Generator::new(Layout::twitter(), 42)?;
//! let id: Id = generator.next_id()?;
//! let parts = id.parts(generator.layout())?;
//! assert_eq!(parts.node(), 42);
//! assert_eq!(id.to_string().parse::<Id>()?, id);
//! # Ok::<(), monoflake::Error>(())
//! ```
#![deny(missing_docs, missing_debug_implementations)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![doc(test(attr(deny(warnings))))]

mod clock;
mod encoding;
mod error;
mod fork;
mod generator;
#[cfg(unix)]
mod global;
mod id;
mod layout;
mod lease;
mod opaque;
#[cfg(feature = "serde")]
mod serde_impl;
mod stats;
mod sync;

pub use crate::clock::{
    ClockReport, CoarseClock, DEFAULT_REANCHOR_INTERVAL, DEFAULT_REANCHOR_TOLERANCE,
    DEFAULT_TICKER_INTERVAL, LockedClock, ManualClock, SLEW_PPM, Ticker, TimeSource,
};
pub use crate::encoding::{Encoded, Encoding};
pub use crate::error::Error;
pub use crate::generator::{
    DEFAULT_MAX_LEAD, DEFAULT_MAX_WAIT, Generator, GeneratorBuilder, IdGenerator, Ids, LocalSlot,
    MAX_LEAD_LIMIT, PerCore, PerThread,
};
#[cfg(unix)]
pub use crate::global::{configure_default, default_generator, next_id};
pub use crate::id::{Id, Parts, rfc3339};
pub use crate::layout::{Layout, LayoutBuilder, NodeField, PRESETS};
pub use crate::lease::{
    Claim, DEFAULT_CHECK_INTERVAL, DEFAULT_RESERVATION_WINDOW, Leased, MAX_RESERVATION_WINDOW,
    MIN_RESERVATION_WINDOW, NodeRequest, NodeStore,
};
#[cfg(feature = "etcd")]
pub use crate::lease::{DEFAULT_LEASE_TTL, EtcdOptions, EtcdStore};
#[cfg(unix)]
pub use crate::lease::{DEFAULT_STATE_DIR, FileStore};
pub use crate::opaque::{Opaque, OpaqueKey};
#[cfg(feature = "serde")]
pub use crate::serde_impl::as_u64;
pub use crate::stats::Stats;

#[doc = include_str!("../README.md")]
#[cfg(doctest)]
struct ReadmeDoctests;

#[doc = include_str!("../docs/layouts.md")]
#[cfg(doctest)]
struct LayoutsDoctests;
