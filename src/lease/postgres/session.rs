//! How the PostgreSQL store talks to its server: one connection at a time with its session
//! settings and prepared statements, every request bounded, a broken connection made again.

use std::future::Future;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio_postgres::{Client, NoTls, Statement};

use super::super::postgres_options;
use super::durable::{RAISED_LEVELS, durable_commit};
use super::sql::{LOOK_UP_TABLE, Sql, Table, resolve, schema};
use crate::Error;

/// The longest a new connection may take, with its TLS handshake, authentication (SCRAM is
/// slow on purpose) and prepared statements: off the hot path, and a holder stops within its
/// confirm bound meanwhile.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// One connection and its prepared statements.
pub(super) struct Session {
    pub(super) client: Client,
    pub(super) claim_any: Statement,
    pub(super) claim_exact: Statement,
    pub(super) extend: Statement,
    pub(super) renew: Statement,
    pub(super) release: Statement,
    pub(super) why_lost: Statement,
    pub(super) reservation: Statement,
    pub(super) restore: Statement,
}

/// Why a request got no good answer.
pub(super) enum Failed {
    Pg(tokio_postgres::Error),
    Timeout(Duration),
    /// The server answered, and what it said rules it out (the reason).
    Refused(String),
}

/// The store's way to its server: the connection's settings, the current session (made when
/// missing) and the bound on every request.
pub(super) struct Link {
    pub(super) runtime: tokio::runtime::Runtime,
    pub(super) connection: postgres_options::Connection,
    pub(super) tls: Option<tokio_postgres_rustls::MakeRustlsConnect>,
    pub(super) session: Mutex<Option<Arc<Session>>>,
    pub(super) sql: Sql,
    /// The table: as the options name it until [`Link::prepare_table`] resolved its schema.
    pub(super) table: Table,
    /// The table's object ID, as last found by [`Link::prepare_table`].
    // Ordering: Relaxed; a plain value, no other memory published with it.
    pub(super) table_oid: AtomicI64,
    /// What the store calls itself in errors: host, port, database and table.
    pub(super) describe: String,
    /// The bound on every request.
    pub(super) timeout: Duration,
}

impl Link {
    /// Finds the table, and creates it when it is missing (and `create`), under an advisory
    /// lock so that claimants starting together do not race to create it: its schema
    /// resolved once ([`resolve`]), the answer the table every statement names. On a
    /// connection of its own: the session's statements need the table.
    pub(super) fn prepare_table(&self, create: bool) -> Result<Table, Error> {
        let what = "connect and look for the table";
        let answer = self.runtime.block_on(async {
            let limit = CONNECT_TIMEOUT + self.timeout;
            let work = async {
                let mut client = self.open_client().await?;
                let tx = client.transaction().await.map_err(Failed::Pg)?;
                tx.batch_execute("SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('monoflake schema'))")
                    .await
                    .map_err(Failed::Pg)?;
                let row = tx
                    .query_one(LOOK_UP_TABLE, &[&self.table.name])
                    .await
                    .map_err(Failed::Pg)?;
                let on_path: Option<String> = row.try_get(0).map_err(Failed::Pg)?;
                let current: Option<String> = row.try_get(1).map_err(Failed::Pg)?;
                let everywhere: Vec<String> = row.try_get(2).map_err(Failed::Pg)?;
                let (table, exists) = resolve(
                    &self.table,
                    on_path.as_deref(),
                    current.as_deref(),
                    &everywhere,
                )
                .map_err(Failed::Refused)?;
                if !exists && create {
                    tx.batch_execute(&schema(&table.quoted()))
                        .await
                        .map_err(Failed::Pg)?;
                }
                let oid: Option<i64> = tx
                    .query_one(
                        "SELECT pg_catalog.to_regclass($1::text)::oid::int8",
                        &[&table.quoted()],
                    )
                    .await
                    .and_then(|row| row.try_get(0))
                    .map_err(Failed::Pg)?;
                // Ordering: Relaxed; see the field.
                self.table_oid.store(oid.unwrap_or(0), Ordering::Relaxed);
                tx.commit().await.map_err(Failed::Pg)?;
                Ok((table, exists || create))
            };
            match tokio::time::timeout(limit, work).await {
                Ok(result) => result,
                Err(_) => Err(Failed::Timeout(limit)),
            }
        });
        match answer {
            Ok((table, true)) => Ok(table),
            Ok((table, false)) => Err(Error::store(
                self.describe.clone(),
                format!(
                    "the table {table} does not exist: create it with the SQL of \
                     PgStore::schema_sql (see docs/operations.md), or let monoflake create it"
                ),
            )),
            Err(e) => Err(self.failed(what, e)),
        }
    }

    /// The current session, connecting when there is none (or it was closed).
    pub(super) fn session(&self) -> Result<Arc<Session>, Failed> {
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
    pub(super) async fn open_client(&self) -> Result<Client, Failed> {
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
        // whatever the server, the database or the role says (`local` and `remote_write`
        // acknowledge a commit a promoted synchronous standby does not have).
        client
            .batch_execute(&format!(
                "SET statement_timeout = {ms}; SET lock_timeout = {ms}; \
                 SELECT pg_catalog.set_config('synchronous_commit', 'on', false) \
                 WHERE pg_catalog.current_setting('synchronous_commit') IN ({RAISED_LEVELS});"
            ))
            .await
            .map_err(Failed::Pg)?;
        // Read back: a server that kept a level below `on` is refused, never used.
        let level: String = client
            .query_one(
                "SELECT pg_catalog.current_setting('synchronous_commit')",
                &[],
            )
            .await
            .and_then(|row| row.try_get(0))
            .map_err(Failed::Pg)?;
        if !durable_commit(&level) {
            return Err(Failed::Refused(format!(
                "the session's synchronous_commit is {level:?} after raising it to \"on\": a \
                 commit would be acknowledged before it is durable, so a crash or a failover \
                 could lose reservations; the server refused to raise it"
            )));
        }
        Ok(client)
    }

    /// A new session: a connection and its prepared statements. Its `search_path` is
    /// empty: every statement names its table's schema, and a name it forgot to would fail
    /// rather than find another table.
    async fn open(&self) -> Result<Session, Failed> {
        let client = self.open_client().await?;
        client
            .batch_execute("SET search_path = ''")
            .await
            .map_err(Failed::Pg)?;
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
    pub(super) fn run<'a, T, F>(&'a self, f: impl Fn(Arc<Session>) -> F) -> Result<T, Failed>
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
    pub(super) fn failed(&self, what: &str, failed: Failed) -> Error {
        let store = self.describe.clone();
        match failed {
            Failed::Pg(e) => {
                let reason = format!("{what}: {}", pg_text(&e));
                Error::store_caused_by(store, reason, e)
            }
            Failed::Timeout(limit) => Error::store(
                store,
                format!("{what}: no answer within {} ms", limit.as_millis()),
            ),
            Failed::Refused(reason) => Error::store(store, format!("{what}: {reason}")),
        }
    }
}

/// The driver's error with the server's message and SQLSTATE, when there is one.
pub(super) fn pg_text(e: &tokio_postgres::Error) -> String {
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
