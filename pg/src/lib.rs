//! monoflake inside PostgreSQL: Snowflake-style 64-bit IDs from SQL, one generator per server.
//!
//! `CREATE EXTENSION monoflake;` (with `shared_preload_libraries = 'monoflake'`) gives
//!
//! * `monoflake.next_id() → bigint`, usable as a column default;
//! * `monoflake.next_ids(n int) → setof bigint`, `n` consecutive IDs with one reservation;
//! * `monoflake.decode(bigint) → (time timestamptz, node bigint, sequence bigint, fields jsonb)`;
//! * `monoflake.layout() → text`, the layout in force as the spec text `monoflake decode` reads.
//!
//! The generator's state is one `AtomicU64` in the server's shared memory, advanced by
//! compare-exchange from every backend with the library's own step ([`monoflake::StateStep`]):
//! IDs from all connections are unique and increase in one order. The clock's line (the
//! monotonic clock's offset to the wall clock, only ever raised) lives there too, and a
//! reservation file in the data directory, written ahead of use, puts a restarted server above
//! every ID it issued before; a clock far behind it is refused (SQLSTATE 55000) unless
//! `monoflake.trust_reservation` is on.
//!
//! With `monoflake.node` unset, the node is claimed, not configured: a background worker
//! (`worker.rs`) claims one from the claim database (`monoflake.claim_url`: a database on
//! another server, `claimdb.rs`) through the library's `PgStore` and `StateLease`, holds it,
//! and publishes the node and the store's fence in shared memory (`claimed.rs`); backends
//! issue only inside that fence, and refuse (SQLSTATE 55000) while no node is held. A copy of
//! a server is never its original (`identity.rs`): no claim database set, or one that is this
//! server or a copy of it, is refused; so is issuing in recovery, and a configured node in a
//! data directory promoted or restored since it used it. `docs/postgres-extension.md` is the
//! operator's guide.

mod api;
mod claimdb;
mod claimed;
mod clock;
mod failure;
mod identity;
mod reservation;
mod settings;
mod shared;
mod worker;

use pgrx::prelude::*;

::pgrx::pg_module_magic!(name, version);

/// Loads the extension: the settings, and (when preloaded) the shared state.
#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    // Shared memory (and a setting read only at start) is only there for a library loaded by
    // the postmaster; loaded later (CREATE EXTENSION without the preload), defining them would
    // be FATAL, so every call refuses with the reason instead.
    // SAFETY: a plain `bool` global of the server, set by the postmaster before it loads the
    // preloaded libraries; `_PG_init` runs in the loading process, on its one thread, so
    // nothing writes it while it is read.
    if unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        settings::define();
        shared::preload();
        // Without a claim database there is nothing to claim from: the backends refuse.
        if settings::node().is_none() && settings::claim_url().is_some() {
            worker::register();
        }
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    #[pg_test]
    fn ids_increase_and_decode() {
        let a = Spi::get_one::<i64>("SELECT monoflake.next_id()")
            .unwrap()
            .unwrap();
        let b = Spi::get_one::<i64>("SELECT monoflake.next_id()")
            .unwrap()
            .unwrap();
        assert!(b > a);
        let node = Spi::get_one::<i64>(&format!("SELECT node FROM monoflake.decode({b})"))
            .unwrap()
            .unwrap();
        assert_eq!(node, 1);
    }

    #[pg_test]
    fn a_batch_is_consecutive_and_bounded() {
        let n = Spi::get_one::<i64>("SELECT count(DISTINCT x) FROM monoflake.next_ids(1000) x")
            .unwrap()
            .unwrap();
        assert_eq!(n, 1000);
    }

    #[pg_test(error = "monoflake.next_ids: n = 0 is out of range 1..=100000")]
    fn a_batch_of_none_is_refused() {
        Spi::run("SELECT monoflake.next_ids(0)").unwrap();
    }
}

/// Required by `cargo pgrx test`: the server the tests run in preloads the extension and
/// sets a node.
#[cfg(test)]
pub mod pg_test {
    /// One-off set-up (none).
    pub fn setup(_options: Vec<&str>) {}

    /// The settings the test server needs.
    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec![
            "shared_preload_libraries = 'monoflake'",
            "monoflake.node = 1",
        ]
    }
}
