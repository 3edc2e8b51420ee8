//! The PostgreSQL node store: one row per node of each layout, claimed under row locks, its
//! lease judged by the database's clock, its reservation guarded by the claim's identity.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, NoTls, Row, Statement};

use super::postgres_options::{self, PgOptions, Tls};
use super::shape;
use super::store::{Claim, NodeRequest, NodeStore};
use crate::{Error, Layout};

/// How often a PostgreSQL holder checks its claim: see [`NodeStore::check_interval`].
const PG_CHECK_INTERVAL: Duration = Duration::from_millis(500);

/// The longest any one request may take.
const MAX_TIMEOUT: Duration = Duration::from_secs(2);

/// The longest a new connection may take, with its TLS handshake, authentication (SCRAM is
/// slow on purpose) and prepared statements: off the hot path, and a holder stops within its
/// confirm bound meanwhile.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How many unusable nodes an [`Error::AllNodesHeld`] names.
const UNUSABLE_NAMED: i64 = 3;

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
///   or a dropped table, is [`Error::LeaseLost`].
/// * **Release**: the final reservation and the end of the claim, under the same guard.
/// * **Restore**: a holder that finds its claim lost (its row deleted, the table dropped)
///   raises the node's reservation to the end of the last tick it issued, whoever holds the
///   row now — an upsert that changes nothing else, making a free row (and, when the store
///   may create it, the table) if gone; a claimant that found no row reads its row again
///   after its wait, before it issues ([`NodeStore::reservation`]).
/// * A node with a negative reservation (possible only if the table's checks were dropped)
///   is unusable: refused by number ([`Error::DamagedReservation`]), skipped by any node.
/// * Every request is bounded (two seconds, or the TTL when shorter, also as the session's
///   `statement_timeout` and `lock_timeout`; a new connection, seven seconds); a connection
///   that failed or timed out is dropped and made again at the next request. Sessions run with `synchronous_commit` at
///   least `on`: a reservation is acknowledged only once it is durable.
/// * The connection string is never shown: not in [`fmt::Debug`], not in errors, not in
///   [`NodeStore::describe`] (which names host, port, database and table).
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
    runtime: tokio::runtime::Runtime,
    connection: postgres_options::Connection,
    tls: Option<tokio_postgres_rustls::MakeRustlsConnect>,
    session: Mutex<Option<Arc<Session>>>,
    sql: Sql,
    table: String,
    target: String,
    ttl: Duration,
    timeout: Duration,
    /// Whether the table may be made when missing (`PgOptions::create_table`): also by a
    /// holder restoring what it used into a table dropped under it.
    create_table: bool,
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

/// One connection and its prepared statements.
struct Session {
    client: Client,
    claim_any: Statement,
    claim_exact: Statement,
    extend: Statement,
    renew: Statement,
    release: Statement,
    why_lost: Statement,
    reservation: Statement,
    restore: Statement,
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
}

/// Why a request got no good answer.
enum Failed {
    Pg(tokio_postgres::Error),
    Timeout(Duration),
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
    /// missing and may not (or cannot) be created. The message never repeats the string.
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
        let store = PgStore {
            runtime,
            connection,
            tls,
            session: Mutex::new(None),
            sql: Sql::new(&options.table),
            table: options.table.clone(),
            target,
            ttl: options.ttl,
            timeout,
            create_table: options.create_table,
        };
        store.prepare_table(options.create_table)?;
        // Proves the table has the columns the statements need.
        store.session().map_err(|e| store.failed("connect", e))?;
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

    fn describe_store(&self) -> String {
        format!("postgres {} table {}", self.target, self.table)
    }

    /// Creates the table when it is missing, under an advisory lock so that claimants
    /// starting together do not race to create it. On a connection of its own: the
    /// session's statements need the table.
    fn prepare_table(&self, create: bool) -> Result<(), Error> {
        let what = "connect and look for the table";
        let answer = self.runtime.block_on(async {
            let limit = CONNECT_TIMEOUT + self.timeout;
            let work = async {
                let client = self.open_client().await?;
                let row = client
                    .query_one("SELECT to_regclass($1::text) IS NOT NULL", &[&self.table])
                    .await
                    .map_err(Failed::Pg)?;
                let exists: bool = row.try_get(0).map_err(Failed::Pg)?;
                if exists || !create {
                    return Ok(exists);
                }
                let text = format!(
                    "BEGIN; SELECT pg_advisory_xact_lock(hashtext('monoflake schema')); {} COMMIT;",
                    schema(&self.table)
                );
                client.batch_execute(&text).await.map_err(Failed::Pg)?;
                Ok(true)
            };
            match tokio::time::timeout(limit, work).await {
                Ok(result) => result,
                Err(_) => Err(Failed::Timeout(limit)),
            }
        });
        match answer {
            Ok(true) => Ok(()),
            Ok(false) => Err(Error::store(
                self.describe_store(),
                "the table does not exist: create it with the SQL of PgStore::schema_sql (see \
                 docs/operations.md), or let monoflake create it",
            )),
            Err(e) => Err(self.failed(what, e)),
        }
    }

    /// The current session, connecting when there is none (or it was closed).
    fn session(&self) -> Result<Arc<Session>, Failed> {
        let mut slot = self.session.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(s) = slot.as_ref().filter(|s| !s.client.is_closed()) {
            return Ok(Arc::clone(s));
        }
        *slot = None;
        let limit = CONNECT_TIMEOUT + self.timeout;
        let fresh = Arc::new(self.runtime.block_on(async {
            match tokio::time::timeout(limit, self.open()).await {
                Ok(result) => result,
                Err(_) => Err(Failed::Timeout(limit)),
            }
        })?);
        *slot = Some(Arc::clone(&fresh));
        Ok(fresh)
    }

    /// A new connection, its session settings made.
    async fn open_client(&self) -> Result<Client, Failed> {
        let config = &self.connection.config;
        let client = match &self.tls {
            None => {
                let (client, connection) = config.connect(NoTls).await.map_err(Failed::Pg)?;
                self.runtime.spawn(async move {
                    let _ = connection.await;
                });
                client
            }
            Some(tls) => {
                let (client, connection) = config.connect(tls.clone()).await.map_err(Failed::Pg)?;
                self.runtime.spawn(async move {
                    let _ = connection.await;
                });
                client
            }
        };
        let ms = self.timeout.as_millis();
        // Bounded on the server too; and a reservation is acknowledged only once durable,
        // whatever the database's default says.
        client
            .batch_execute(&format!(
                "SET statement_timeout = {ms}; SET lock_timeout = {ms}; \
                 SELECT set_config('synchronous_commit', 'on', false) \
                 WHERE current_setting('synchronous_commit') = 'off';"
            ))
            .await
            .map_err(Failed::Pg)?;
        Ok(client)
    }

    /// A new session: a connection and its prepared statements.
    async fn open(&self) -> Result<Session, Failed> {
        let client = self.open_client().await?;
        let sql = &self.sql;
        Ok(Session {
            claim_any: client.prepare(&sql.claim_any).await.map_err(Failed::Pg)?,
            claim_exact: client.prepare(&sql.claim_exact).await.map_err(Failed::Pg)?,
            extend: client.prepare(&sql.extend).await.map_err(Failed::Pg)?,
            renew: client.prepare(&sql.renew).await.map_err(Failed::Pg)?,
            release: client.prepare(&sql.release).await.map_err(Failed::Pg)?,
            why_lost: client.prepare(&sql.why_lost).await.map_err(Failed::Pg)?,
            reservation: client.prepare(&sql.reservation).await.map_err(Failed::Pg)?,
            restore: client.prepare(&sql.restore).await.map_err(Failed::Pg)?,
            client,
        })
    }

    /// Runs one request on the session, bounded by the timeout. A connection that failed
    /// or timed out is dropped; a request that found its (reused) connection closed is
    /// tried once more on a new one.
    fn run<'a, T, F>(&'a self, f: impl Fn(Arc<Session>) -> F) -> Result<T, Failed>
    where
        F: Future<Output = Result<T, tokio_postgres::Error>> + 'a,
    {
        let mut retried = false;
        loop {
            let session = self.session()?;
            let request = f(Arc::clone(&session));
            // The timer is made inside the runtime, which it needs.
            let answer = self
                .runtime
                .block_on(async { tokio::time::timeout(self.timeout, request).await });
            match answer {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(e)) => {
                    let broken = e.is_closed() || session.client.is_closed();
                    if broken || e.as_db_error().is_none() {
                        self.drop_session(&session);
                    }
                    if broken && !retried {
                        retried = true;
                        continue;
                    }
                    return Err(Failed::Pg(e));
                }
                Err(_) => {
                    self.drop_session(&session);
                    return Err(Failed::Timeout(self.timeout));
                }
            }
        }
    }

    fn drop_session(&self, session: &Arc<Session>) {
        let mut slot = self.session.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.as_ref().is_some_and(|s| Arc::ptr_eq(s, session)) {
            *slot = None;
        }
    }

    /// The store error for `what` failing.
    fn failed(&self, what: &str, failed: Failed) -> Error {
        let store = self.describe_store();
        match failed {
            Failed::Pg(e) => {
                let reason = format!("{what}: {}", pg_text(&e));
                Error::store_caused_by(store, reason, e)
            }
            Failed::Timeout(limit) => Error::store(
                store,
                format!("{what}: no answer within {} ms", limit.as_millis()),
            ),
        }
    }

    /// As [`PgStore::failed`], except that a table gone is the claim gone.
    fn failed_for(&self, claim: &Claim, what: &str, failed: Failed) -> Error {
        if let Failed::Pg(e) = &failed
            && e.code() == Some(&SqlState::UNDEFINED_TABLE)
        {
            return Error::LeaseLost {
                node: claim.node(),
                reason: format!("the table {} was dropped", self.table),
            };
        }
        self.failed(what, failed)
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
        let row = self.run(|s| async move {
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
        let give_up = Instant::now() + self.timeout.saturating_mul(10);
        loop {
            let claimant = claimant_token();
            let row = self
                .run(|s| {
                    let claimant = claimant.clone();
                    async move {
                        s.client
                            .query_one(&s.claim_any, &[&state, &max, &claimant, &ttl, &pid])
                            .await
                    }
                })
                .map_err(|e| self.failed("claim a node", e))?;
            let (existing, missing): (Option<i64>, Option<i64>) = (row.get(0), row.get(1));
            let node: Option<i64> = row.get(2);
            let unusable: i64 = row.get(5);
            if let Some(node) = node {
                let fence: i64 = row.get(3);
                let reserved: Option<i64> = row.get(4);
                return Ok(self
                    .new_claim(layout, state, node, claimant, fence, reserved)
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
            .run(|s| {
                let claimant = claimant.clone();
                async move {
                    s.client
                        .query_opt(&s.claim_exact, &[&state, &n, &claimant, &ttl, &pid])
                        .await
                }
            })
            .map_err(|e| self.failed("claim the node", e))?;
        let Some(row) = row else {
            return Err(Error::NodeHeld { node, holder: None });
        };
        let fence: i64 = row.get(0);
        let reserved: Option<i64> = row.get(1);
        let claim = self.new_claim(layout, state, n, claimant, fence, reserved);
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

    fn new_claim(
        &self,
        layout: &Layout,
        state: &str,
        node: i64,
        claimant: String,
        fence: i64,
        reserved: Option<i64>,
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
            },
        );
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
            self.table
        );
        let row = self
            .run(|s| {
                let (sql, old) = (sql.clone(), old.clone());
                async move { s.client.query_opt(&sql, &[&old.as_ref(), &n]).await }
            })
            .map_err(|e| self.failed("read the layout's row of before", e))?;
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

impl NodeStore for PgStore {
    fn describe(&self) -> String {
        self.describe_store()
    }

    /// Half a second, or a third of the TTL when shorter: each check is one guarded
    /// `UPDATE`.
    fn check_interval(&self) -> Duration {
        PG_CHECK_INTERVAL.min(self.ttl / 3)
    }

    /// A table dropped since the store connected is made again first when the store may
    /// create it (a server that re-claims after its table was dropped under it).
    fn claim(&self, layout: &Layout, request: NodeRequest) -> Result<Claim, Error> {
        let state = shape::key(layout);
        let attempt = || match request {
            NodeRequest::Any => self.claim_any(layout, &state),
            NodeRequest::Exact(node) => self.claim_exact(layout, &state, node),
        };
        let claim = match attempt() {
            Err(e) if self.create_table && table_gone(&e) => {
                self.prepare_table(true)?;
                attempt()
            }
            other => other,
        }?;
        match self.legacy_floor(layout, claim.node()) {
            Ok(floor) => Ok(claim.with_floor(floor)),
            Err(e) => {
                let _ = self.release_with(claim, None);
                Err(e)
            }
        }
    }

    fn extend(&self, claim: &Claim, until_ms: u64) -> Result<(), Error> {
        let token = self.token(claim)?;
        let stored = shape::to_stored(&token.shape_of, until_ms);
        let until = i64::try_from(stored).unwrap_or(i64::MAX);
        self.guarded(claim, "write the reservation", |s| &s.extend, &[&until])?;
        token.acknowledged.fetch_max(until, Ordering::Relaxed);
        Ok(())
    }

    fn renew(&self, claim: &Claim) -> Result<Option<Duration>, Error> {
        let token = self.token(claim)?;
        let ttl = self.ttl_ms();
        let acknowledged = Some(token.acknowledged.load(Ordering::Relaxed)).filter(|v| *v >= 0);
        let row = self.guarded(
            claim,
            "renew the lease",
            |s| &s.renew,
            &[&ttl, &acknowledged],
        )?;
        // What the database has left of the lease, less 1 % (its clock may run faster than
        // ours) and 10 ms: counted from the start of this call, which came before the
        // database set the expiry, the holder's deadline falls before the database's.
        let left_ms = u64::try_from(row.get::<_, i64>(0)).unwrap_or(0);
        let valid = left_ms.saturating_sub(left_ms / 100 + 10);
        Ok(Some(Duration::from_millis(valid)))
    }

    /// The row's reservation, read again under the claim's guard: it includes whatever a
    /// holder that lost the node restored into it since the claim.
    fn reservation(&self, claim: &Claim) -> Result<Option<u64>, Error> {
        let token = self.token(claim)?;
        let row = self.guarded(claim, "read the reservation", |s| &s.reservation, &[])?;
        let reserved: Option<i64> = row.get(0);
        let now = match reserved {
            None => None,
            Some(r) => Some(u64::try_from(r).map_err(|_| Error::DamagedReservation {
                path: format!("{} node={}", self.table, claim.node()).into(),
                reason: format!(
                    "its reservation {r} is negative (the table's checks were dropped)"
                ),
            })?),
        };
        let before = self.legacy_floor(&token.shape_of, claim.node())?;
        Ok(super::handover::reservation_of([
            now.map(|v| shape::from_stored(&token.shape_of, v)),
            before,
        ]))
    }

    /// Raises the node's reservation to `until_ms` whoever holds the row now, and makes the
    /// row (free, with only the reservation) when it was deleted. A table dropped under the
    /// holder is made again first when the store may create it.
    fn restore(&self, claim: &Claim, until_ms: u64) -> Result<(), Error> {
        let token = self.token(claim)?;
        let stored = shape::to_stored(&token.shape_of, until_ms);
        let until = i64::try_from(stored).unwrap_or(i64::MAX);
        let write = || {
            self.run(|s| async move {
                s.client
                    .query_one(&s.restore, &[&token.layout, &token.node, &until])
                    .await
            })
        };
        match write() {
            Ok(_) => Ok(()),
            Err(_) if self.create_table => {
                self.prepare_table(true)?;
                write()
                    .map(drop)
                    .map_err(|e| self.failed("restore the reservation", e))
            }
            Err(e) => Err(self.failed("restore the reservation", e)),
        }
    }

    /// Ends the claim and leaves the row's reservation as it is.
    fn abandon(&self, claim: Claim) -> Result<(), Error> {
        self.release_with(claim, None)
    }

    fn release(&self, claim: Claim, until_ms: u64) -> Result<(), Error> {
        // A node that never had a reservation and is given back untouched (until 0) keeps
        // having none: its next claimant must then wait as for a node with no record.
        let stored = shape::to_stored(&self.token(&claim)?.shape_of, until_ms);
        let until = match (claim.reserved_until_ms(), until_ms) {
            (None, 0) => None,
            _ => Some(i64::try_from(stored).unwrap_or(i64::MAX)),
        };
        self.release_with(claim, until)
    }
}

/// Whether a store error says the table does not exist (SQLSTATE 42P01).
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

/// The driver's error with the server's message and SQLSTATE, when there is one.
fn pg_text(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{} (SQLSTATE {})", db.message(), db.code().code());
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// A fresh claimant token: 128 bits from the operating system's random source (hex).
fn claimant_token() -> String {
    let mut bytes = [0u8; 16];
    fill_random(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(unix)]
fn fill_random(bytes: &mut [u8]) {
    let mut filled = 0;
    while filled < bytes.len() {
        match rustix::rand::getrandom(&mut bytes[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => break,
        }
    }
    if filled < bytes.len() {
        fill_hashed(bytes);
    }
}

#[cfg(not(unix))]
fn fill_random(bytes: &mut [u8]) {
    fill_hashed(bytes);
}

/// Randomness from `RandomState` (randomly keyed per process), the time and a counter.
fn fill_hashed(bytes: &mut [u8]) {
    use std::hash::{BuildHasher, RandomState};
    use std::sync::atomic::AtomicU64;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        // Ordering: Relaxed; only distinctness matters.
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let h = RandomState::new().hash_one((i, n, now, std::process::id()));
        chunk.copy_from_slice(&h.to_le_bytes()[..chunk.len()]);
    }
}

/// The table's definition.
fn schema(table: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (
    layout            text        NOT NULL,
    node              bigint      NOT NULL CHECK (node >= 0),
    claimant          text,
    holder            text,
    fence             bigint      NOT NULL DEFAULT 0,
    lease_expires_at  timestamptz,
    reserved_until_ms bigint      CHECK (reserved_until_ms >= 0),
    claimed_at        timestamptz,
    updated_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (layout, node),
    CHECK ((claimant IS NULL) = (lease_expires_at IS NULL))
);"
    )
}

/// The statements, for one table.
struct Sql {
    claim_any: String,
    claim_exact: String,
    extend: String,
    renew: String,
    release: String,
    why_lost: String,
    reservation: String,
    restore: String,
}

impl Sql {
    fn new(t: &str) -> Sql {
        // A row is free when released or when its lease expired, on the database's clock.
        let free = "(claimant IS NULL OR lease_expires_at <= clock_timestamp())";
        let holder = "coalesce(host(inet_client_addr()), 'local') || ' pid ' || $5::int8";
        let lease = "clock_timestamp() + $4::int8 * interval '1 millisecond'";
        // $1 layout, $2 highest node, $3 claimant, $4 TTL (ms), $5 pid.
        let claim_any = format!(
            "WITH free AS (
                SELECT node FROM {t}
                WHERE layout = $1::text AND node <= $2::int8 AND {free}
                  AND (reserved_until_ms IS NULL OR reserved_until_ms >= 0)
                ORDER BY node LIMIT 1
                FOR UPDATE SKIP LOCKED
            ), gap AS (
                SELECT CASE
                    WHEN NOT EXISTS (SELECT 1 FROM {t} WHERE layout = $1 AND node = 0) THEN 0::int8
                    ELSE (SELECT min(a.node) + 1 FROM {t} a
                          WHERE a.layout = $1 AND a.node < $2
                            AND NOT EXISTS (SELECT 1 FROM {t} b
                                            WHERE b.layout = $1 AND b.node = a.node + 1))
                END AS node
            ), pick AS (
                SELECT free.node AS existing, gap.node AS missing FROM gap LEFT JOIN free ON true
            ), upd AS (
                UPDATE {t} AS r SET claimant = $3::text, holder = {holder}, fence = r.fence + 1,
                    lease_expires_at = {lease}, claimed_at = clock_timestamp(),
                    updated_at = clock_timestamp()
                FROM pick
                WHERE r.layout = $1 AND r.node = pick.existing
                  AND (pick.missing IS NULL OR pick.existing < pick.missing)
                  AND (r.claimant IS NULL OR r.lease_expires_at <= clock_timestamp())
                RETURNING r.node, r.fence, r.reserved_until_ms
            ), ins AS (
                INSERT INTO {t} (layout, node, claimant, holder, fence, lease_expires_at,
                                 claimed_at, updated_at)
                SELECT $1, pick.missing, $3, {holder}, 1, {lease}, clock_timestamp(),
                       clock_timestamp()
                FROM pick
                WHERE pick.missing IS NOT NULL
                  AND (pick.existing IS NULL OR pick.missing < pick.existing)
                ON CONFLICT (layout, node) DO NOTHING
                RETURNING node, fence, reserved_until_ms
            ), bad AS (
                SELECT node FROM {t}
                WHERE layout = $1 AND node <= $2 AND {free} AND reserved_until_ms < 0
            )
            SELECT pick.existing, pick.missing, got.node, got.fence, got.reserved_until_ms,
                   (SELECT count(*) FROM bad),
                   coalesce((SELECT array_agg(node ORDER BY node)
                             FROM (SELECT node FROM bad ORDER BY node LIMIT {UNUSABLE_NAMED}) n),
                            '{{}}'::int8[])
            FROM pick
            LEFT JOIN (SELECT * FROM upd UNION ALL SELECT * FROM ins) got ON true"
        );
        let claim_exact = format!(
            "INSERT INTO {t} AS r (layout, node, claimant, holder, fence, lease_expires_at,
                                   claimed_at, updated_at)
            VALUES ($1::text, $2::int8, $3::text, {holder}, 1, {lease}, clock_timestamp(),
                    clock_timestamp())
            ON CONFLICT (layout, node) DO UPDATE
                SET claimant = EXCLUDED.claimant, holder = EXCLUDED.holder,
                    fence = r.fence + 1, lease_expires_at = EXCLUDED.lease_expires_at,
                    claimed_at = EXCLUDED.claimed_at, updated_at = EXCLUDED.updated_at
                WHERE r.claimant IS NULL OR r.lease_expires_at <= clock_timestamp()
            RETURNING r.fence, r.reserved_until_ms"
        );
        // The claim's identity: $1 layout, $2 node, $3 claimant, $4 fencing counter.
        let guard = "layout = $1::text AND node = $2::int8 AND claimant = $3::text \
                     AND fence = $4::int8";
        let extend = format!(
            "UPDATE {t} SET reserved_until_ms = greatest(reserved_until_ms, $5::int8),
                updated_at = clock_timestamp()
            WHERE {guard} AND lease_expires_at > clock_timestamp()
            RETURNING 1"
        );
        let renew = format!(
            "UPDATE {t} SET lease_expires_at = clock_timestamp() + $5::int8 * interval '1 millisecond',
                reserved_until_ms = greatest(reserved_until_ms, $6::int8),
                updated_at = clock_timestamp()
            WHERE {guard} AND lease_expires_at > clock_timestamp()
            RETURNING floor(extract(epoch FROM lease_expires_at - clock_timestamp()) * 1000)::int8"
        );
        let release = format!(
            "UPDATE {t} SET reserved_until_ms = coalesce($5::int8, reserved_until_ms),
                fence = fence - $6::int8,
                claimant = NULL, holder = NULL, lease_expires_at = NULL,
                updated_at = clock_timestamp()
            WHERE {guard}
            RETURNING 1"
        );
        let why_lost = format!(
            "SELECT claimant, fence, lease_expires_at <= clock_timestamp() FROM {t}
            WHERE layout = $1::text AND node = $2::int8"
        );
        // The node's reservation as it is now, for the claim that holds it.
        let reservation = format!(
            "SELECT reserved_until_ms FROM {t}
            WHERE {guard} AND lease_expires_at > clock_timestamp()"
        );
        // A holder that lost its claim records the time it used ($3), raising the node's
        // reservation and nothing else: a row held by a successor keeps its claimant, lease
        // and fencing counter; a deleted row comes back free, with only the reservation.
        let restore = format!(
            "INSERT INTO {t} AS r (layout, node, reserved_until_ms, updated_at)
            VALUES ($1::text, $2::int8, $3::int8, clock_timestamp())
            ON CONFLICT (layout, node) DO UPDATE
                SET reserved_until_ms = greatest(r.reserved_until_ms, EXCLUDED.reserved_until_ms),
                    updated_at = clock_timestamp()
            RETURNING 1"
        );
        Sql {
            claim_any,
            claim_exact,
            extend,
            renew,
            release,
            why_lost,
            reservation,
            restore,
        }
    }
}
