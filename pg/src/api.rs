//! The SQL functions, in the schema `monoflake`. Each one reports a refusal as a SQL error
//! with a SQLSTATE ([`Failure`]).

use pgrx::prelude::*;
use pgrx::{JsonB, PgSqlErrorCode};

use crate::failure::Failure;
use crate::shared;

/// The largest `n` `monoflake.next_ids` takes (less where the layout cannot issue that many
/// within its lead).
const MAX_BATCH: u64 = 100_000;

/// Microseconds between the Unix epoch and PostgreSQL's (2000-01-01).
const PG_EPOCH_UNIX_MS: i64 = 946_684_800_000;

/// The next ID of this server's generator: unique across every connection, increasing in
/// one order (`DEFAULT monoflake.next_id()`).
#[pg_extern(volatile, parallel_unsafe)]
fn next_id() -> i64 {
    shared::next_id().unwrap_or_else(|f| f.raise())
}

/// `n` consecutive IDs, in increasing order, taken with one compare-exchange.
#[pg_extern(volatile, parallel_unsafe)]
fn next_ids(n: i32) -> SetOfIterator<'static, i64> {
    let bound = shared::max_batch()
        .unwrap_or_else(|f| f.raise())
        .min(MAX_BATCH);
    let Some(n) = u64::try_from(n).ok().filter(|n| (1..=bound).contains(n)) else {
        Failure::new(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("monoflake.next_ids: n = {n} is out of range 1..={bound}"),
        )
        .raise()
    };
    SetOfIterator::new(shared::next_ids(n).unwrap_or_else(|f| f.raise()))
}

/// An ID's parts under the layout in force: its time, node, sequence, and the node's named
/// fields as JSON (`{"datacenter": 1, "worker": 3}`).
#[pg_extern(stable, parallel_safe)]
fn decode(
    id: i64,
) -> TableIterator<
    'static,
    (
        name!(time, TimestampWithTimeZone),
        name!(node, i64),
        name!(sequence, i64),
        name!(fields, JsonB),
    ),
> {
    let layout = shared::layout().unwrap_or_else(|f| f.raise());
    let Ok(value) = u64::try_from(id) else {
        Failure::new(
            PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            format!("monoflake.decode: {id} is negative; no ID is"),
        )
        .raise()
    };
    let parts = monoflake::Id::from_u64(value)
        .parts(&layout)
        .unwrap_or_else(|e| Failure::from_error(&e).raise());
    let micros = (parts.unix_ms() as i64 - PG_EPOCH_UNIX_MS) * 1_000;
    let time = TimestampWithTimeZone::try_from(micros).unwrap_or_else(|_| {
        Failure::new(
            PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW,
            format!("monoflake.decode: the time of {id} is out of timestamptz's range"),
        )
        .raise()
    });
    let fields: serde_json::Map<String, serde_json::Value> = parts
        .fields()
        .map(|(name, v)| (name.to_owned(), v.into()))
        .collect();
    TableIterator::once((
        time,
        parts.node() as i64,
        parts.sequence() as i64,
        JsonB(fields.into()),
    ))
}

/// The layout in force, as the spec text `monoflake decode --layout` reads.
#[pg_extern(stable, parallel_safe)]
fn layout() -> String {
    shared::layout().unwrap_or_else(|f| f.raise()).to_string()
}
