//! The PostgreSQL node store: one row per node of each layout, claimed under row locks, its
//! lease judged by the database's clock, its reservation guarded by the claim's identity.
//!
//! * `mod.rs`: [`PgStore`], its claims and the [`NodeStore`] implementation.
//! * `session.rs`: the connection, its session settings, and every request bounded.
//! * `sql.rs`: the table's definition and the statements.
//! * `random.rs`: the claimant token.

mod durable;
mod node_store;
mod random;
mod session;
mod sql;

use std::fmt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Row, Statement};

use self::durable::{Standby, refusal};
use self::random::claimant_token;
use self::session::{CONNECT_TIMEOUT, Failed, Link, Session};
use self::sql::{REPLICATION, Sql, Table, schema};
use super::postgres_options::{self, PgFailover, PgOptions, Tls};
use super::shape;
use super::store::Claim;
use crate::{Error, Layout};

/// How often a PostgreSQL holder checks its claim: see [`NodeStore::check_interval`].
const PG_CHECK_INTERVAL: Duration = Duration::from_millis(500);

/// The longest any one request may take.
const MAX_TIMEOUT: Duration = Duration::from_secs(2);

/// A node store in a PostgreSQL table, for services that already run PostgreSQL (feature
/// `postgres`).
///
/// One row per node of each bit shape ([`Layout::shape_key`], in the `layout` column: every
/// layout whose IDs can equal another's shares its claims and reservations): the claimant (a
/// random 128-bit token per claim), a fencing counter raised by every claim, the lease's
/// expiry (`clock_timestamp()` plus the TTL, on the **database's** clock) and the reservation
/// as an ID value (Unix ms of the preset's clock for a preset's shape, else the time-field
/// value), so that `greatest()` compares what layouts with different epochs or ticks used. A
/// layout's row of before (`layout` = its [`Layout::state_name`], Unix ms of that layout) is
/// read at a claim as a floor, and a live claim on it makes the node held. The table is
/// created when missing ([`PgStore::schema_sql`] prints it).
///
/// * **Claim**: one statement. A claim of any node locks the lowest free row with
///   `FOR UPDATE SKIP LOCKED` (free: released, or its lease expired) or inserts the lowest
///   node that has no row (`INSERT … ON CONFLICT DO NOTHING`), whichever is lower, and reads
///   the reservation in the same step; claimants racing for one node never get it both (the
///   loser looks again, so a claim fails only when no node is free). A claim of one node is
///   an `INSERT … ON CONFLICT DO UPDATE … WHERE` free.
/// * **Reservation**: an `UPDATE` guarded by the claimant token and the fencing counter, and
///   by the lease not having expired: a holder whose row was taken over, released or deleted
///   gets [`Error::LeaseLost`], never a write.
/// * **Renewal**: the same guard; it moves the expiry to the database's `clock_timestamp()`
///   plus the TTL (and writes again the last reservation this holder had acknowledged, so a
///   failover that lost it restores it), and returns the time left as the database counts
///   it, less 1 % and 10 ms. Measured from the start of the call on the holder's monotonic
///   clock, that deadline falls before the database's. A row deleted, taken over or expired,
///   or a dropped table, is [`Error::LeaseLost`]; so is a holder whose clock is more than
///   [`PgOptions::max_clock_lead`] ahead of the database's `clock_timestamp()` (the reason
///   names the lead): it seals and writes back what it used.
/// * **A node with no row** (deleted, or the table dropped): its claimant starts above the
///   database's clock at the claim plus that lead, two check intervals and `max_lead`
///   ([`Claim::store_clock`]), so above everything any holder issued, whatever the holders'
///   clocks did, as long as the database's clock does not go back.
/// * **Release**: the final reservation and the end of the claim, under the same guard.
/// * **Restore**: a holder that finds its claim lost (its row deleted, the table dropped)
///   raises the node's reservation to the end of the last tick it issued, whoever holds the
///   row now — an upsert that changes nothing else, making a free row (and, when the store
///   may create it, the table) if gone; a claimant that found no row reads its row again
///   after its wait, before it issues ([`NodeStore::reservation`](crate::NodeStore::reservation)).
/// * A node with a negative reservation (possible only if the table's checks were dropped)
///   is unusable: refused by number ([`Error::DamagedReservation`]), skipped by any node.
/// * Every request is bounded (two seconds, or the TTL when shorter, also as the session's
///   `statement_timeout` and `lock_timeout`; a new connection, seven seconds); a connection
///   that failed or timed out is dropped and made again at the next request.
/// * **Durable acknowledgements**: every session runs with `synchronous_commit` `on` or
///   `remote_apply` (`off`, `local` and `remote_write`, wherever set, are raised to `on` and
///   read back; a server that keeps a lower level is refused), so a reservation is
///   acknowledged only once it is durable on the primary and every synchronous standby.
/// * **Failover**: each claim is refused on a standby (`pg_is_in_recovery()`), and on a
///   primary streaming to any standby that is not synchronous (`pg_stat_replication`),
///   unless [`PgOptions::failover`] says failover is manual.
/// * **One table**: its schema is resolved once at connect (the one
///   [`PgOptions::table`] names, else the table the session's `search_path` finds, else the
///   current schema; refused when another schema holds a table of the same name), and every
///   statement names `"schema"."table"`; the store's session runs with an empty `search_path`.
/// * The connection string is never shown: not in [`fmt::Debug`], not in errors, not in
///   [`NodeStore::describe`](crate::NodeStore::describe) (which names host, port, database, schema and table).
///
/// # Example
///
/// ```no_run
/// use std::sync::Arc;
/// use monoflake::{Generator, Layout, NodeRequest, PgStore};
///
/// let url = std::env::var("MONOFLAKE_PG_URL").unwrap();
/// let store = PgStore::connect(&url)?;
/// let leased = Generator::builder(Layout::twitter()).build_leased(Arc::new(store), NodeRequest::Any)?;
/// println!("node {} issued {}", leased.node(), leased.next_id()?);
/// # Ok::<(), monoflake::Error>(())
/// ```
pub struct PgStore {
    link: Link,
    table: String,
    target: String,
    ttl: Duration,
    /// Whether the table may be made when missing (`PgOptions::create_table`): also by a
    /// holder restoring what it used into a table dropped under it.
    create_table: bool,
    /// How the server's standbys are promoted (`PgOptions::failover`).
    failover: PgFailover,
    /// How far a holder's clock may lead the database's at a renewal that confirms its claim
    /// (`PgOptions::max_clock_lead`).
    max_clock_lead: Duration,
}

impl fmt::Debug for PgStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgStore")
            .field("target", &self.target)
            .field("table", &self.table)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

/// The PostgreSQL store's claim token: the row and the claim's identity in it.
struct PgClaim {
    layout: String,
    /// The layout claimed for: the row holds ID values of its shape (`shape.rs`).
    shape_of: Layout,
    node: i64,
    claimant: String,
    fence: i64,
    /// The last reservation the database acknowledged for this claim (-1: none yet).
    // Ordering: Relaxed; read and written only by the claim's own keeper.
    acknowledged: AtomicI64,
    /// The table's object ID when the claim was made: another one later means the table was
    /// dropped under the claim.
    table_oid: i64,
}

impl PgStore {
    /// Connects with the default [`PgOptions`]. `url` is a connection string: a URL
    /// (`postgres://user:password@host:port/db?sslmode=verify-full&sslrootcert=ca.pem`) or
    /// libpq's `key=value` form; see [`PgStore::connect_with`].
    ///
    /// # Errors
    ///
    /// As [`PgStore::connect_with`].
    ///
    /// ```no_run
    /// let store = monoflake::PgStore::connect("postgres://monoflake@127.0.0.1/ids")?;
    /// println!("{store:?}");
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn connect(url: &str) -> Result<Self, Error> {
        Self::connect_with(url, &PgOptions::new())
    }

    /// Connects, and creates the table when it is missing (unless
    /// [`PgOptions::create_table`] is off).
    ///
    /// TLS and authentication come from the connection string, as libpq reads them:
    ///
    /// * `sslmode=verify-full`: TLS (rustls), the server's certificate checked against
    ///   `sslrootcert=FILE` (PEM), or the system's CA certificates when it is absent or
    ///   `system`, and its name against the host connected to. `sslcert=FILE` and
    ///   `sslkey=FILE` (PEM) present a client certificate (`cert` authentication).
    /// * `sslmode=disable`: plain text; the default only when every host is this machine (a
    ///   loopback address, `localhost`, a Unix socket). Elsewhere a missing `sslmode` is an
    ///   error, and so are `prefer`, `require`, `allow` and `verify-ca`, which do not check
    ///   that the server is the one named.
    /// * Passwords (SCRAM or MD5) in the string's user part or `password=`.
    /// * Several hosts (`host=a,b`): the first that accepts writes.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when the string cannot be read, a TLS file cannot be read, no
    /// server answers within a few seconds, TLS or authentication fails, or the table is
    /// missing and may not (or cannot) be created, or its schema cannot be told (the search
    /// path names no schema, or another schema holds a table of the same name: name the
    /// schema), or the server keeps `synchronous_commit` below `on`. The message never
    /// repeats the string.
    ///
    /// ```no_run
    /// let options = monoflake::PgOptions::new().table("ids.monoflake_nodes")?;
    /// let store = monoflake::PgStore::connect_with(
    ///     "postgres://ids@db.internal/app?sslmode=verify-full&sslrootcert=/etc/ssl/db-ca.pem",
    ///     &options,
    /// )?;
    /// println!("{store:?}");
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn connect_with(url: &str, options: &PgOptions) -> Result<Self, Error> {
        let timeout = MAX_TIMEOUT.min(options.ttl);
        let connection = postgres_options::parse(url, CONNECT_TIMEOUT)
            .map_err(|reason| Error::store("postgres", reason))?;
        let target = postgres_options::describe_target(&connection.config);
        let describe = format!("postgres {target} table {}", options.table);
        let fail = |reason: String| Error::store(describe.clone(), reason);
        let tls = match &connection.tls {
            Tls::Disable => None,
            Tls::VerifyFull { roots, identity } => {
                Some(postgres_options::rustls_connector(roots, identity.as_ref()).map_err(fail)?)
            }
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| fail(format!("cannot start the I/O runtime: {e}")))?;
        let given = Table::given(&options.table);
        let mut link = Link {
            runtime,
            connection,
            tls,
            session: Mutex::new(None),
            sql: Sql::new(&given.quoted()),
            table: given,
            table_oid: AtomicI64::new(0),
            describe,
            timeout,
        };
        // The table's schema, resolved once: every statement names it from now on.
        let table = link.prepare_table(options.create_table)?;
        link.describe = format!("postgres {target} table {table}");
        link.sql = Sql::new(&table.quoted());
        link.table = table;
        let store = PgStore {
            table: link.table.to_string(),
            link,
            target,
            ttl: options.ttl,
            create_table: options.create_table,
            failover: options.failover,
            max_clock_lead: options.max_clock_lead,
        };
        // Proves the table has the columns the statements need.
        store
            .link
            .session()
            .map_err(|e| store.link.failed("connect", e))?;
        Ok(store)
    }

    /// The SQL that creates the store's table (what [`PgStore::connect_with`] runs when the
    /// table is missing): for operators who create it by hand or in a migration, and grant
    /// monoflake's role `SELECT, INSERT, UPDATE` on it.
    ///
    /// ```
    /// let sql = monoflake::PgStore::schema_sql(&monoflake::PgOptions::new());
    /// assert!(sql.starts_with("CREATE TABLE IF NOT EXISTS monoflake_nodes ("));
    /// ```
    pub fn schema_sql(options: &PgOptions) -> String {
        schema(&options.table)
    }

    /// A setting of the store's own session, as the server reports it
    /// (`current_setting(name)`): to check what the store runs with, such as
    /// `synchronous_commit` (always `on` or `remote_apply`) or `search_path` (empty: every
    /// statement names its table's schema).
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when the server cannot be reached or knows no such setting.
    ///
    /// ```no_run
    /// let store = monoflake::PgStore::connect("postgres://monoflake@127.0.0.1/ids")?;
    /// assert_eq!(store.session_setting("synchronous_commit")?, "on");
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn session_setting(&self, name: &str) -> Result<String, Error> {
        let name = name.to_owned();
        let row = self
            .link
            .run(|s| {
                let name = name.clone();
                async move {
                    s.client
                        .query_one("SELECT pg_catalog.current_setting($1::text)", &[&name])
                        .await
                }
            })
            .map_err(|e| self.link.failed("read a session setting", e))?;
        Ok(row.get(0))
    }

    /// Refuses a server a claim must not be made on: a standby, or a primary streaming to a
    /// standby that is not synchronous unless failover is manual (see `durable::refusal`).
    fn check_replication(&self) -> Result<(), Error> {
        let rows = self
            .link
            .run(|s| async move { s.client.query(REPLICATION, &[]).await })
            .map_err(|e| self.link.failed("look at the server's standbys", e))?;
        let in_recovery = rows.first().is_some_and(|r| r.get::<_, bool>(0));
        let standbys: Vec<Standby> = rows
            .iter()
            .filter(|r| r.get::<_, bool>(1))
            .map(|r| Standby {
                name: r.get(2),
                sync_state: r.get(3),
            })
            .collect();
        match refusal(in_recovery, &standbys, self.failover) {
            None => Ok(()),
            Some(reason) => Err(Error::store(
                self.describe_store(),
                format!("claim refused: {reason}"),
            )),
        }
    }

    fn describe_store(&self) -> String {
        format!("postgres {} table {}", self.target, self.table)
    }

    /// As `Link::failed`, except that a table gone is the claim gone.
    fn failed_for(&self, claim: &Claim, what: &str, failed: Failed) -> Error {
        if let Failed::Pg(e) = &failed
            && e.code() == Some(&SqlState::UNDEFINED_TABLE)
        {
            return Error::LeaseLost {
                node: claim.node(),
                reason: format!("the table {} was dropped", self.table),
            };
        }
        self.link.failed(what, failed)
    }

    fn token<'a>(&self, claim: &'a Claim) -> Result<&'a PgClaim, Error> {
        claim.token::<PgClaim>().ok_or_else(|| Error::LeaseLost {
            node: claim.node(),
            reason: "the claim was not made by a PostgreSQL store".into(),
        })
    }

    /// Why a guarded statement matched no row: the row deleted, taken over, released or
    /// expired.
    fn lost(&self, claim: &Claim, token: &PgClaim) -> Error {
        let quoted = self.link.table.quoted();
        let oid = self.link.run(|s| {
            let quoted = quoted.clone();
            async move {
                s.client
                    .query_one(
                        "SELECT pg_catalog.to_regclass($1::text)::oid::int8",
                        &[&quoted],
                    )
                    .await
            }
        });
        if let Ok(row) = oid
            && row.get::<_, Option<i64>>(0) != Some(token.table_oid)
        {
            return Error::LeaseLost {
                node: claim.node(),
                reason: format!(
                    "the table {} was dropped (and made again since, if it is there)",
                    self.table
                ),
            };
        }
        let row = self.link.run(|s| async move {
            s.client
                .query_opt(&s.why_lost, &[&token.layout, &token.node])
                .await
        });
        let reason = match row {
            Ok(None) => format!("its row in {} was deleted", self.table),
            Ok(Some(row)) => {
                let claimant: Option<String> = row.get(0);
                let fence: i64 = row.get(1);
                let expired: Option<bool> = row.get(2);
                if claimant.as_deref() == Some(token.claimant.as_str()) && fence == token.fence {
                    if expired == Some(true) {
                        "its lease expired in the database (no renewal within the TTL)".into()
                    } else {
                        "its claim no longer matched".into()
                    }
                } else if claimant.is_none() {
                    format!("its row in {} was released", self.table)
                } else if fence <= token.fence {
                    // A take-over raises the counter past ours: a row at or below it was
                    // made anew, after ours was deleted.
                    format!(
                        "its row in {} was deleted, and the node claimed again since (fencing \
                         counter {fence}, ours {})",
                        self.table, token.fence
                    )
                } else {
                    format!(
                        "its row in {} was taken over (fencing counter {fence}, ours {})",
                        self.table, token.fence
                    )
                }
            }
            Err(_) => format!("its row in {} no longer holds this claim", self.table),
        };
        Error::LeaseLost {
            node: claim.node(),
            reason,
        }
    }

    fn ttl_ms(&self) -> i64 {
        i64::try_from(self.ttl.as_millis()).unwrap_or(i64::MAX)
    }

    fn claim_any(&self, layout: &Layout, state: &str) -> Result<Claim, Error> {
        let max = i64::try_from(layout.max_node()).unwrap_or(i64::MAX);
        let pid = i64::from(std::process::id());
        let ttl = self.ttl_ms();
        // Each pass that claims nothing while a node looked free lost a race for it to
        // another claimant, which got it: progress, so a bounded time suffices.
        let give_up = Instant::now() + self.link.timeout.saturating_mul(10);
        loop {
            let claimant = claimant_token();
            let row = self
                .link
                .run(|s| {
                    let claimant = claimant.clone();
                    async move {
                        s.client
                            .query_one(&s.claim_any, &[&state, &max, &claimant, &ttl, &pid])
                            .await
                    }
                })
                .map_err(|e| self.link.failed("claim a node", e))?;
            let (existing, missing): (Option<i64>, Option<i64>) = (row.get(0), row.get(1));
            let node: Option<i64> = row.get(2);
            let unusable: i64 = row.get(5);
            if let Some(node) = node {
                let fence: i64 = row.get(3);
                let reserved: Option<i64> = row.get(4);
                return Ok(self
                    .new_claim(layout, state, node, claimant, (fence, reserved, row.get(7)))
                    .with_unusable(u64::try_from(unusable).unwrap_or(0)));
            }
            if existing.is_none() && missing.is_none() {
                let named: Vec<i64> = row.get(6);
                return Err(Error::AllNodesHeld {
                    count: layout.max_node().saturating_add(1),
                    ahead: 0,
                    unusable: u64::try_from(unusable).unwrap_or(0),
                    unusable_reasons: named
                        .iter()
                        .map(|n| format!("node {n}: its reservation is negative"))
                        .collect(),
                });
            }
            if Instant::now() >= give_up {
                return Err(Error::store(
                    self.describe_store(),
                    "claim a node: lost every race for a free node for too long",
                ));
            }
        }
    }

    fn claim_exact(&self, layout: &Layout, state: &str, node: u64) -> Result<Claim, Error> {
        let node = layout.check_node(node)?;
        let n = i64::try_from(node).unwrap_or(i64::MAX);
        let pid = i64::from(std::process::id());
        let ttl = self.ttl_ms();
        let claimant = claimant_token();
        let row = self
            .link
            .run(|s| {
                let claimant = claimant.clone();
                async move {
                    s.client
                        .query_opt(&s.claim_exact, &[&state, &n, &claimant, &ttl, &pid])
                        .await
                }
            })
            .map_err(|e| self.link.failed("claim the node", e))?;
        let Some(row) = row else {
            return Err(Error::NodeHeld { node, holder: None });
        };
        let (fence, reserved): (i64, Option<i64>) = (row.get(0), row.get(1));
        let claim = self.new_claim(layout, state, n, claimant, (fence, reserved, row.get(2)));
        if let Some(bad) = reserved.filter(|r| *r < 0) {
            let _ = self.release_with(claim, None);
            return Err(Error::DamagedReservation {
                path: format!("{} layout={state} node={node}", self.table).into(),
                reason: format!(
                    "its reservation {bad} is negative (the table's checks were dropped)"
                ),
            });
        }
        Ok(claim)
    }

    /// The claim on `node`, from what the claim read: the fencing counter, the reservation
    /// and the database's clock (Unix ms).
    fn new_claim(
        &self,
        layout: &Layout,
        state: &str,
        node: i64,
        claimant: String,
        (fence, reserved, db_ms): (i64, Option<i64>, i64),
    ) -> Claim {
        let read = reserved
            .and_then(|r| u64::try_from(r).ok())
            .map(|r| shape::from_stored(layout, r));
        let claim = Claim::new(
            u64::try_from(node).unwrap_or(0),
            read,
            PgClaim {
                layout: state.to_owned(),
                shape_of: layout.clone(),
                node,
                claimant,
                fence,
                acknowledged: AtomicI64::new(-1),
                // Ordering: Relaxed; written at connect or when the table is made again.
                table_oid: self.link.table_oid.load(Ordering::Relaxed),
            },
        )
        // The database's clock at the claim: a claimant that finds no row starts above what
        // any holder the database confirmed can have issued (`handover::store_floor_ms`).
        .with_store_clock(u64::try_from(db_ms).unwrap_or(0), self.max_clock_lead);
        // A row some claim held before has a fencing counter of at least 1, so this claim's
        // is at least 2. A row a lost holder's write-back made again after it was deleted
        // starts at 0: its reservation is evidence only (`Claim::evidence_only`), and this
        // claimant waits and reads again as for a node with no record.
        if fence >= 2 {
            claim
        } else {
            claim.evidence_only()
        }
    }

    /// What `layout`'s row of before for `node` says (`shape::legacy_key`: its state name,
    /// where it was kept before rows were kept by bit shape), as a floor in its Unix ms;
    /// [`Error::NodeHeld`] while a holder of an earlier version claims that row.
    fn legacy_floor(&self, layout: &Layout, node: u64) -> Result<Option<u64>, Error> {
        let Some(old) = shape::legacy_key(layout) else {
            return Ok(None);
        };
        let n = i64::try_from(node).unwrap_or(i64::MAX);
        let sql = format!(
            "SELECT reserved_until_ms, claimant IS NOT NULL AND lease_expires_at > clock_timestamp()
            FROM {} WHERE layout = $1::text AND node = $2::int8",
            self.link.table.quoted()
        );
        let row = self
            .link
            .run(|s| {
                let (sql, old) = (sql.clone(), old.to_string());
                async move {
                    let params: [&(dyn ToSql + Sync); 2] = [&old, &n];
                    s.client.query_opt(&sql, &params).await
                }
            })
            .map_err(|e| self.link.failed("read the layout's row of before", e))?;
        let Some(row) = row else { return Ok(None) };
        if row.get::<_, Option<bool>>(1) == Some(true) {
            return Err(Error::NodeHeld {
                node,
                holder: Some(format!(
                    "a holder of an earlier monoflake version ({} layout={old})",
                    self.table
                )),
            });
        }
        Ok(row
            .get::<_, Option<i64>>(0)
            .and_then(|r| u64::try_from(r).ok()))
    }

    /// Ends the claim, writing `until` as the reservation (`None`: the reservation stays).
    ///
    /// A claim that gives back, unused, a row whose reservation was evidence only (made again
    /// by a lost holder's write-back: fencing counter 0 before the claim) puts the counter
    /// back, so the next claimant sees evidence only as well and waits as this one would
    /// have (`Claim::evidence_only`). The claimant tokens, random, keep the claims apart.
    fn release_with(&self, claim: Claim, until: Option<i64>) -> Result<(), Error> {
        let back: i64 = i64::from(until.is_none() && !claim.recorded());
        self.guarded(&claim, "release", |s| &s.release, &[&until, &back])
            .map(drop)
    }

    /// Runs one of the statements guarded by the claim's identity (`$1`..`$4`: layout, node,
    /// claimant, fencing counter; `more` after them). The row it returned, or `LeaseLost`
    /// (saying why) when no row holds the claim any more.
    fn guarded(
        &self,
        claim: &Claim,
        what: &str,
        statement: fn(&Session) -> &Statement,
        more: &[&(dyn ToSql + Sync)],
    ) -> Result<Row, Error> {
        let token = self.token(claim)?;
        let answer = self
            .link
            .run(|s| async move {
                let mut params: Vec<&(dyn ToSql + Sync)> =
                    vec![&token.layout, &token.node, &token.claimant, &token.fence];
                params.extend_from_slice(more);
                s.client.query_opt(statement(&s), &params).await
            })
            .map_err(|e| self.failed_for(claim, what, e))?;
        answer.ok_or_else(|| self.lost(claim, token))
    }
}

/// Whether a store error says the table does not exist (SQLSTATE 42P01).
/// How long a renewal lets the holder issue, from what the database has left of the lease
/// (`left_ms`): less 1 % (its clock may run faster than ours) and 10 ms. Counted from the
/// start of the renewal, which came before the database set the expiry, the holder's deadline
/// falls before the database's.
fn confirmed_ms(left_ms: u64) -> u64 {
    left_ms.saturating_sub(left_ms / 100 + 10)
}

fn table_gone(e: &Error) -> bool {
    matches!(
        e,
        Error::Store { source: Some(source), .. }
            if source
                .downcast_ref::<tokio_postgres::Error>()
                .and_then(tokio_postgres::Error::code)
                == Some(&SqlState::UNDEFINED_TABLE)
    )
}

#[cfg(test)]
mod tests;
