//! The claimed node, in shared memory: what the background worker (`worker.rs`) publishes
//! for the backends — the node, the fence the store acknowledged, why nothing can be issued —
//! and how a backend reads it.
//!
//! Used when `monoflake.node` is not set. The worker holds the node through the library's
//! [`monoflake::StateLease`] (the keeper of a leased generator, for a state word kept here)
//! and copies its fence every 10 ms: `limit`, the highest tick the store acknowledged, and
//! `deadline`, the first tick of the server's line (`clock.rs`: `CLOCK_MONOTONIC` plus an
//! offset only ever raised, one clock for every process of the host) at which nothing may be
//! issued. A backend issues a value of tick `t` at line tick `now` only when `t <= limit` and
//! `now < deadline`; a stale copy is an older, lower bound (a needless wait). The state word
//! holds [`SEALED`] whenever no node is held (before the first claim, after a loss or the
//! release): the seal is a swap of the state itself, so a compare-exchange racing it fails,
//! and the value it swapped out is exactly the last one issued.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};

use pgrx::PgSqlErrorCode;

use crate::failure::Failure;

/// The state word while no node is held: every backend refuses it.
pub(crate) const SEALED: u64 = u64::MAX;

/// No node claimed yet (since the server started).
pub(crate) const WAITING: u32 = 0;
/// A node is held.
pub(crate) const HELD: u32 = 1;
/// The lease was lost; the worker claims again.
pub(crate) const LOST: u32 = 2;
/// The node was released: the server is stopping.
pub(crate) const STOPPED: u32 = 3;
/// Neither `monoflake.node` nor `monoflake.claim_url` is set: no worker, nothing issued
/// (set by the postmaster).
pub(crate) const NO_CLAIM_DATABASE: u32 = 4;
/// The claim database is this server or a copy of it (the same system identifier): the
/// worker claims nothing; the message says which identifier.
pub(crate) const CLAIM_DATABASE_IS_THIS: u32 = 5;

/// Why a server cannot claim its node from itself, for the refusals that say so.
const NOT_FROM_ITSELF: &str = "A server cannot claim its node from a database in its own \
    data directory: a copy of the directory (pg_basebackup, a standby promoted, a restored \
    backup, a VM snapshot) takes the claims along, the two sets of claims diverge, and the \
    copy issues this server's IDs again.";
/// The fix, for the same refusals.
const CLAIM_ELSEWHERE: &str = "set monoflake.claim_url in postgresql.conf to a database on \
    another server, the one every server issuing IDs claims from (a copy of this server does \
    not take it along), or monoflake.node to a number no other server uses; then restart \
    the server";

/// The room for the worker's last message.
const MESSAGE_BYTES: usize = 480;

/// The claimed node's words.
#[repr(C)]
pub(crate) struct Claimed {
    /// Raised (Release) by the worker before it stores a new claim's first state: a backend
    /// whose compare-exchange succeeded under another generation than it read discards the
    /// value (the new claim's state may have come back to the value it read).
    pub(crate) generation: AtomicU64,
    /// The node held (valid while the state is not [`SEALED`]).
    pub(crate) node: AtomicU64,
    /// The highest tick the store acknowledged; 0 while closed.
    pub(crate) limit: AtomicU64,
    /// The first line tick at which nothing may be issued; 0 while closed.
    pub(crate) deadline: AtomicU64,
    /// [`WAITING`], [`HELD`], [`LOST`], [`STOPPED`], [`NO_CLAIM_DATABASE`] or
    /// [`CLAIM_DATABASE_IS_THIS`]; written by the worker only (the fourth by the postmaster,
    /// before any backend exists).
    pub(crate) status: AtomicU32,
    /// Set by a backend that found its tick past the limit: the worker asks the keeper for a
    /// round at once.
    pub(crate) wake: AtomicBool,
    /// The tick of the last state sealed: what a second seal returns.
    pub(crate) sealed_tick: AtomicU64,
    /// A sequence lock over `message`: odd while the worker writes it.
    message_seq: AtomicU64,
    /// The worker's last word (a claim's error, the reason a lease was lost), UTF-8, padded
    /// with zeros. Bytes as atomics: backends read while the worker may write.
    message: [AtomicU8; MESSAGE_BYTES],
}

impl Claimed {
    /// Nothing claimed, nothing said.
    pub(crate) fn new() -> Claimed {
        Claimed {
            generation: AtomicU64::new(0),
            node: AtomicU64::new(0),
            limit: AtomicU64::new(0),
            deadline: AtomicU64::new(0),
            status: AtomicU32::new(WAITING),
            wake: AtomicBool::new(false),
            sealed_tick: AtomicU64::new(0),
            message_seq: AtomicU64::new(0),
            message: [const { AtomicU8::new(0) }; MESSAGE_BYTES],
        }
    }

    /// Whether issuing up to tick `last_tick` at line tick `now` is outside the fence: the
    /// library's own rule (`handover::fence_refuses`), on the words the worker copies here.
    #[inline]
    pub(crate) fn refuses(&self, now: u64, last_tick: u64) -> bool {
        // Ordering: Relaxed; lone bounds copied by the worker. A stale value is an older,
        // lower bound; a value of an earlier claim cannot be read once this claim's
        // generation was (the worker zeroes both before it raises the generation).
        monoflake::handover::fence_refuses(
            self.limit.load(Ordering::Relaxed),
            self.deadline.load(Ordering::Relaxed),
            now,
            last_tick,
        )
    }

    /// Writes the worker's message (the worker is its only writer).
    pub(crate) fn set_message(&self, text: &str) {
        // Ordering: the odd count is published before the bytes change (Release fence after
        // it), the even count after them (Release store): a reader that sees the same even
        // count before and after its copy read no byte being written.
        let seq = self.message_seq.load(Ordering::Relaxed);
        self.message_seq.store(seq + 1, Ordering::Relaxed);
        std::sync::atomic::fence(Ordering::Release);
        let bytes = truncate(text, MESSAGE_BYTES).as_bytes();
        for (i, cell) in self.message.iter().enumerate() {
            cell.store(bytes.get(i).copied().unwrap_or(0), Ordering::Relaxed);
        }
        self.message_seq.store(seq + 2, Ordering::Release);
    }

    /// The worker's last message ("" when none, or when it kept changing while read).
    pub(crate) fn message(&self) -> String {
        for _ in 0..100 {
            // Ordering: Acquire pairs with the writer's Release store of the even count; the
            // fence before the second load orders the byte loads before it.
            let before = self.message_seq.load(Ordering::Acquire);
            if before % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let bytes: Vec<u8> = self
                .message
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .take_while(|&b| b != 0)
                .collect();
            std::sync::atomic::fence(Ordering::Acquire);
            if self.message_seq.load(Ordering::Relaxed) == before {
                return String::from_utf8_lossy(&bytes).into_owned();
            }
        }
        String::new()
    }

    /// Why nothing can be issued, the state being [`SEALED`] (SQLSTATE 55000).
    pub(crate) fn refusal(&self) -> Failure {
        // Ordering: Acquire pairs with the worker's Release store of a status whose message
        // it wrote first.
        let status = self.status.load(Ordering::Acquire);
        // Held but sealed: the keeper found the lease lost and writes back what was issued;
        // the worker publishes the reason (and [`LOST`]) at its next look, within 10 ms of it.
        let message = match status {
            HELD => String::new(),
            _ => self.message(),
        };
        let failure = match status {
            NO_CLAIM_DATABASE => {
                return Failure::new(
                    PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                    "monoflake: no claim database: neither monoflake.node nor \
                     monoflake.claim_url is set",
                )
                .detail(NOT_FROM_ITSELF.to_owned())
                .hint(CLAIM_ELSEWHERE);
            }
            CLAIM_DATABASE_IS_THIS => {
                return Failure::new(
                    PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                    format!("monoflake: {message}"),
                )
                .detail(NOT_FROM_ITSELF.to_owned())
                .hint(CLAIM_ELSEWHERE);
            }
            WAITING => Failure::new(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                "monoflake: no node claimed yet",
            )
            .hint(
                "the monoflake claim worker claims a node from the claim database \
                 (monoflake.claim_url); the server log says why it has not (yet)",
            ),
            STOPPED => Failure::new(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                "monoflake: the node was released: the server is shutting down",
            ),
            _ => Failure::new(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                if message.is_empty() {
                    "monoflake: lease lost".to_owned()
                } else {
                    format!("monoflake: lease lost: {message}")
                },
            )
            .hint("the claim worker claims a node again; retry"),
        };
        match status {
            WAITING if !message.is_empty() => failure.detail(message),
            _ => failure,
        }
    }

    /// The fence stayed shut for as long as a call waits (SQLSTATE 55000).
    pub(crate) fn unconfirmed(&self, node: u64, tick: u64, waited_ms: u128) -> Failure {
        let message = self.message();
        let why = if message.is_empty() {
            format!("the reservation was not extended to tick {tick}")
        } else {
            message
        };
        Failure::new(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!(
                "monoflake: the lease on node {node} is not confirmed within {waited_ms} ms: {why}"
            ),
        )
        .hint("the claim database (monoflake.claim_url) must be reachable; retry")
    }
}

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}
