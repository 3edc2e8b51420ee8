//! Snowflake-style 64-bit IDs that are never issued twice, whatever the clock does.
//!
//! An ID is a time, a node and a sequence packed into a `u64` that sorts by time. A
//! [`Generator`] issues them lock-free (one compare-exchange, no syscall, no allocation per
//! ID), from a clock that a wall-clock step cannot move back, for one node ID; a [`Leased`]
//! generator claims its node ID from a store (a directory on one host, etcd in a cluster) so
//! that no two processes share one, and reserves its time there so that a restart never
//! reissues an ID. Every ID decodes back into its parts.
//!
//! ```toml
//! [dependencies]
//! monoflake = "0.1"
//! # or, to serialize IDs with serde:
//! # monoflake = { version = "0.1", features = ["serde"] }
//! ```
//!
//! Features (none by default; without them the crate depends on `quanta`, `crossbeam-utils`,
//! `siphasher`, `getrandom` and, on Unix, `rustix`):
//!
//! * `serde`: [`Id`] and [`OpaqueId`] serialize as decimal strings (JavaScript numbers lose
//!   precision above 2^53) and as `u64` in binary formats; `as_u64` for plain numbers.
//! * `etcd`: `EtcdStore`, node IDs and reservations in etcd for a cluster (building it needs
//!   `protoc`).
//! * `postgres`: `PgStore`, node IDs and reservations in a PostgreSQL table, leases judged by
//!   the database's clock (`postgres` with rustls for TLS).
//! * `tracing`: forward clock steps, reservation failures and lost leases as `tracing` events.
//!
//! # One generator, shared by every thread
//!
//! A generator is `Send + Sync`: build it once and share it, in a `static` (a web handler's
//! case) or an [`Arc`](std::sync::Arc). Here node 5 is set by hand (each process needs its
//! own: see the next example for claiming one).
//!
//! ```
//! use std::sync::LazyLock;
//! use monoflake::{Generator, Id, Layout};
//!
//! // Built on first use. `new` fails only for a node the layout does not have (Twitter's
//! // holds 0..=1023), a system clock set before the layout's epoch (2010 for Twitter's), or
//! // where fork detection cannot be set up.
//! static IDS: LazyLock<Generator> =
//!     LazyLock::new(|| Generator::new(Layout::twitter(), 5).expect("node 5 fits the layout"));
//!
//! fn new_order_id() -> Result<Id, monoflake::Error> {
//!     IDS.next_id() // waits (bounded) if ever at its lead limit; try_next_id never waits
//! }
//!
//! fn main() -> Result<(), monoflake::Error> {
//!     let a = new_order_id()?;
//!     let b = std::thread::spawn(new_order_id).join().expect("the thread ran")?;
//!     assert!(b > a);
//!     Ok(())
//! }
//! ```
//!
//! # A node ID claimed from a directory
//!
//! [`GeneratorBuilder::build_leased`] claims a free node ID from a [`NodeStore`] and keeps
//! it while the [`Leased`] generator lives (a background thread renews the claim and writes
//! the time reservation ahead of need); dropping it gives the node back. Several processes
//! sharing the directory get distinct nodes. Building it can fail (every node held, a
//! directory it may not use), so build it where errors are handled and share it in an `Arc`.
//!
//! ```
//! use std::sync::Arc;
//! use monoflake::{FileStore, Generator, Layout, NodeRequest};
//!
//! fn main() -> Result<(), monoflake::Error> {
//!     // A service keeps one directory for good, e.g. /var/lib/orders/ids (created 0700).
//!     let dir = std::env::temp_dir().join(format!("monoflake-front-{}", std::process::id()));
//!     let store = Arc::new(FileStore::open(&dir)?);
//!     let ids = Arc::new(Generator::builder(Layout::twitter()).build_leased(store, NodeRequest::Any)?);
//!
//!     let handler = {
//!         let ids = Arc::clone(&ids);
//!         std::thread::spawn(move || ids.next_id())
//!     };
//!     let id = handler.join().expect("the thread ran")?;
//!     assert_eq!(id.parts(ids.layout())?.node(), ids.node());
//!     drop(ids); // the node is free again; its next holder starts after every ID issued
//!     # std::fs::remove_dir_all(&dir).ok();
//!     Ok(())
//! }
//! ```
//!
//! The first build of a node that has no record yet waits 250 ms on this store; a node
//! released moments ago is taken back at once ("What a build waits for" under
//! [`GeneratorBuilder::build_leased`]). [`guide::operations`] covers stores, clusters and
//! failure modes.
//!
//! # Reading an ID
//!
//! ```
//! use monoflake::{Id, Layout};
//!
//! fn main() -> Result<(), monoflake::Error> {
//!     // Discord's documented example: worker 1, process 0, increment 7.
//!     let id: Id = "175928847299117063".parse()?;
//!     let discord = Layout::discord();
//!     let parts = id.parts(&discord)?;
//!     assert_eq!(parts.rfc3339(), "2016-04-30T11:18:25.796Z");
//!     assert_eq!((parts.field("worker"), parts.field("process")), (Some(1), Some(0)));
//!     assert_eq!(parts.sequence(), 7);
//!     assert_eq!(parts.to_string(), "2016-04-30T11:18:25.796Z worker=1 process=0 sequence=7");
//!     Ok(())
//! }
//! ```
//!
//! [`Layout`] has the presets (`twitter`, `discord`, `sonyflake`, `baidu`, `js_safe`,
//! `game_server`) and [`Layout::builder`] your own, checked when built; [`Encoding`] writes
//! fixed-width strings in ID order; [`Opaque`] makes public IDs ([`OpaqueId`]) that reveal
//! neither time, node nor order without the key. See [`guide::layouts`].
//!
//! # The process-wide default
//!
//! [`next_id`] issues from a default generator built on its first call: the Twitter layout,
//! a node claimed from the file store in `$MONOFLAKE_STATE_DIR`, else `/var/lib/monoflake`.
//! That first call creates the directory if missing — private to the user who runs it
//! (`0700`), unless an operator shares it with a group (`2770`, [`FileStore::open_default`])
//! so that several services' users take distinct nodes — writes a reservation and starts a
//! background thread; later calls are the plain hot path. A failure is an error on that call,
//! never a panic. In a forked child (gunicorn and celery workers, `multiprocessing`) the
//! first call claims a node of the child's own.
//!
//! To choose the directory or the layout in code (rather than setting the environment
//! variable, which Rust 2024 marks `unsafe` in a running program), call [`configure_default`]
//! before the first [`next_id`]; its builder runs again in each forked child:
//!
//! ```
//! use std::sync::Arc;
//! use monoflake::{FileStore, Generator, Layout, NodeRequest};
//!
//! fn main() -> Result<(), monoflake::Error> {
//!     let dir = std::env::temp_dir().join(format!("monoflake-default-{}", std::process::id()));
//!     monoflake::configure_default(move || {
//!         let store = Arc::new(FileStore::open(&dir)?);
//!         Generator::builder(Layout::discord()).build_leased(store, NodeRequest::Any)
//!     })?;
//!     let a = monoflake::next_id()?;
//!     let b = monoflake::next_id()?;
//!     assert!(b > a);
//!     println!("{}", monoflake::default_generator()?.stats());
//!     Ok(())
//! }
//! ```
//!
//! # The hottest loops: a slot per thread
//!
//! Where many threads each issue many IDs and one order across threads is not needed,
//! [`PerThread`] gives each thread a slot of the sequence and plain numbers of its own: no
//! read-modify-write per ID. A [`LocalSlot`] handle holds a slot; its iterator
//! ([`LocalSlot::ids`]) keeps the numbers in registers — the fastest way to issue IDs one by
//! one, each with its own clock read, fence and fork check.
//!
//! ```
//! use monoflake::{Generator, Layout};
//!
//! let ids = Generator::builder(Layout::twitter()).node(7).build_per_thread(4)?;
//! std::thread::scope(|s| {
//!     for _ in 0..4 {
//!         s.spawn(|| {
//!             let mut local = ids.local().expect("four slots for four threads");
//!             let mut last = None;
//!             for id in local.ids().take(10_000) {
//!                 let id = id.expect("an ID");
//!                 assert!(Some(id) > last); // increasing per slot
//!                 last = Some(id);
//!             }
//!         });
//!     }
//! });
//! # Ok::<(), monoflake::Error>(())
//! ```
//!
//! # What it promises
//!
//! * **Unique and strictly increasing** across threads ([`IdGenerator`] states the contract
//!   every flavour keeps; [`PerThread`] and [`PerCore`] increase per slot); a forked child is refused ([`Error::Forked`]) rather than issue
//!   under its parent's node.
//! * **Immune to clock steps**: time is read once and advanced by a monotonic counter
//!   ([`LockedClock`]); it steps forward to the wall clock and slews back to it, never back.
//! * **No millisecond stalls**: a full sequence borrows future ticks, bounded by `max_lead`;
//!   past it [`Generator::try_next_id`] says [`Error::WouldBlock`] instead of spinning.
//! * **Fails loudly**: a layout whose time ran out ([`Error::Exhausted`]), a lost lease
//!   ([`Error::LeaseLost`]) — a typed error, never a duplicate.
//!
//! # Guides
//!
//! The repository's guides, published here: [`guide::layouts`] (the presets, their
//! lifetimes, building your own, strings and opaque IDs), [`guide::operations`] (node stores,
//! reservations, Kubernetes, failure modes, the threat model), [`guide::design`] (the
//! invariants and how the code keeps them), [`guide::service`] (`monoflake serve`, the ID
//! service for other languages) and [`guide::benchmarks`].
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
    Ceiling, ClockReport, CoarseClock, DEFAULT_REANCHOR_INTERVAL, DEFAULT_REANCHOR_TOLERANCE,
    DEFAULT_TICKER_INTERVAL, LockedClock, ManualClock, SLEW_PPM, Ticker, TimeSource,
};
pub use crate::encoding::{Encoded, Encoding};
pub use crate::error::{BlockedOn, Error};
pub use crate::generator::{
    DEFAULT_MAX_LEAD, DEFAULT_MAX_WAIT, Generator, GeneratorBuilder, IdGenerator, Ids, LocalIds,
    LocalSlot, MAX_LEAD_LIMIT, PerCore, PerThread, StateStep,
};
#[cfg(unix)]
pub use crate::global::{configure_default, default_generator, next_id};
pub use crate::id::{Id, Parts, rfc3339};
pub use crate::layout::{Layout, LayoutBuilder, NodeField, PRESETS};
pub use crate::lease::Caveat;
pub use crate::lease::handover;
pub use crate::lease::{
    Claim, DEFAULT_CHECK_INTERVAL, DEFAULT_RESERVATION_WINDOW, Leased, MAX_RESERVATION_WINDOW,
    MIN_RESERVATION_WINDOW, NodeRequest, NodeStore, OutsideState, StateLease,
};
#[cfg(feature = "etcd")]
pub use crate::lease::{DEFAULT_LEASE_TTL, DEFAULT_MAX_MEMBER_SKEW, EtcdOptions, EtcdStore};
#[cfg(feature = "postgres")]
pub use crate::lease::{DEFAULT_PG_LEASE_TTL, DEFAULT_PG_TABLE, PgFailover, PgOptions, PgStore};
#[cfg(unix)]
pub use crate::lease::{DEFAULT_STATE_DIR, FileStore};
pub use crate::opaque::{Opaque, OpaqueId, OpaqueKey};
#[cfg(feature = "serde")]
pub use crate::serde_impl::as_u64;
pub use crate::stats::Stats;

#[doc = include_str!("../README.md")]
#[cfg(doctest)]
struct ReadmeDoctests;

pub mod guide {
    //! The guides from the repository's `docs/` directory, published with the API reference.
    //! Their Rust examples run as doctests.

    #[doc = include_str!("../docs/layouts.md")]
    pub mod layouts {}

    // Links that lead elsewhere on GitHub are defined first here, so rustdoc follows these.
    #[doc = "[layouts-state]: crate::guide::layouts#where-a-custom-layout-keeps-its-state"]
    #[doc = include_str!("../docs/operations.md")]
    pub mod operations {}

    #[doc = include_str!("../docs/design.md")]
    pub mod design {}

    #[doc = "[ids-proto]: https://github.com/monoflake/monoflake/blob/main/cli/proto/monoflake/v1/ids.proto"]
    #[doc = include_str!("../docs/service.md")]
    pub mod service {}

    #[doc = "[chart-ns]: https://github.com/monoflake/monoflake/raw/main/docs/bench-ns-per-id.svg"]
    #[doc = "[chart-latency]: https://github.com/monoflake/monoflake/raw/main/docs/bench-latency.svg"]
    #[doc = include_str!("../docs/benchmarks.md")]
    pub mod benchmarks {}
}
