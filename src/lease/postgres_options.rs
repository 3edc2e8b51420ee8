//! How a [`PgStore`](super::PgStore) reaches PostgreSQL: its settings ([`PgOptions`]), the
//! connection string read (secrets never repeated), and TLS (`sslmode=verify-full`, rustls).

use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_postgres::config::{Host, SslMode, TargetSessionAttrs};

/// The table a [`PgStore`](super::PgStore) keeps its rows in, by default.
pub const DEFAULT_PG_TABLE: &str = "monoflake_nodes";

/// The default lease TTL of a [`PgStore`](super::PgStore).
pub const DEFAULT_PG_LEASE_TTL: Duration = Duration::from_secs(10);

/// The shortest lease TTL a [`PgStore`](super::PgStore) accepts.
const MIN_TTL: Duration = Duration::from_secs(1);

/// Settings of a [`PgStore`](super::PgStore) beyond its connection string (feature
/// `postgres`): the table, the lease TTL, and whether the table is created when missing.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// let options = monoflake::PgOptions::new()
///     .table("ids.monoflake_nodes")?
///     .lease_ttl(Duration::from_secs(5))
///     .create_table(false);
/// assert_eq!(options.table_name(), "ids.monoflake_nodes");
/// # Ok::<(), monoflake::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct PgOptions {
    pub(super) table: String,
    pub(super) ttl: Duration,
    pub(super) create_table: bool,
    pub(super) failover: PgFailover,
    pub(super) max_clock_lead: Duration,
}

/// How the PostgreSQL server's standbys are promoted, as the operator declares it
/// ([`PgOptions::failover`]): what decides whether a primary with standbys that are not
/// synchronous may hand out claims.
///
/// A standby that is not synchronous (`async` or `potential` in `pg_stat_replication`) may
/// lack the last leases and reservations the primary acknowledged. Promoted while a holder
/// still issues, it lets a successor claim the holder's node and issue the holder's IDs again.
///
/// ```
/// use monoflake::PgFailover;
/// assert_eq!("manual".parse::<PgFailover>()?, PgFailover::Manual);
/// assert_eq!(PgFailover::default(), PgFailover::Automatic);
/// assert_eq!(PgFailover::Manual.to_string(), "manual");
/// assert!("sometimes".parse::<PgFailover>().is_err());
/// # Ok::<(), monoflake::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PgFailover {
    /// Standbys may be promoted at any time (by a failover manager such as Patroni, or by
    /// hand in a hurry): a claim is refused while the server streams to any standby that is
    /// not synchronous, or whose state the role cannot see (the default).
    #[default]
    Automatic,
    /// Standbys are promoted only by hand, and only once the old primary is fenced (stopped,
    /// or cut off from every client) and every holder has stopped: asynchronous standbys are
    /// accepted.
    Manual,
}

impl fmt::Display for PgFailover {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PgFailover::Automatic => "automatic",
            PgFailover::Manual => "manual",
        })
    }
}

impl FromStr for PgFailover {
    type Err = crate::Error;

    /// `automatic` (or `auto`) or `manual`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "automatic" | "auto" => Ok(PgFailover::Automatic),
            "manual" => Ok(PgFailover::Manual),
            _ => Err(crate::Error::InvalidConfig {
                setting: "failover",
                value: format!("{s:?}"),
                allowed: "automatic or manual".into(),
            }),
        }
    }
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            table: DEFAULT_PG_TABLE.to_owned(),
            ttl: DEFAULT_PG_LEASE_TTL,
            create_table: true,
            failover: PgFailover::Automatic,
            max_clock_lead: Duration::from_millis(crate::handover::DEFAULT_MAX_CLOCK_LEAD_MS),
        }
    }
}

impl PgOptions {
    /// The defaults: table [`DEFAULT_PG_TABLE`] (created when missing), lease TTL
    /// [`DEFAULT_PG_LEASE_TTL`].
    ///
    /// ```
    /// assert_eq!(monoflake::PgOptions::new().table_name(), monoflake::DEFAULT_PG_TABLE);
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Keeps the rows in this table: a name, or `schema.name`, of lower-case ASCII letters,
    /// digits and underscores (not starting with a digit), at most 63 bytes each.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`](crate::Error::InvalidConfig) for any other name (it is
    /// written into SQL, so nothing that would need quoting is accepted).
    ///
    /// ```
    /// assert!(monoflake::PgOptions::new().table("ids.nodes").is_ok());
    /// assert!(monoflake::PgOptions::new().table("nodes; drop table x").is_err());
    /// ```
    pub fn table(mut self, name: &str) -> Result<Self, crate::Error> {
        let parts: Vec<&str> = name.split('.').collect();
        let good = |p: &str| {
            !p.is_empty()
                && p.len() <= 63
                && p.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
                && !p.as_bytes()[0].is_ascii_digit()
        };
        if parts.len() > 2 || !parts.iter().all(|p| good(p)) {
            return Err(crate::Error::InvalidConfig {
                setting: "table",
                value: format!("{name:?}"),
                allowed: "a name or schema.name of lower-case letters, digits and underscores, \
                          not starting with a digit, each at most 63 bytes"
                    .into(),
            });
        }
        self.table = name.to_owned();
        Ok(self)
    }

    /// The lease TTL of every claim (default [`DEFAULT_PG_LEASE_TTL`]; at least one second):
    /// how long after its last renewal the database treats a claim as expired, judged by the
    /// database's clock.
    ///
    /// ```
    /// let options = monoflake::PgOptions::new().lease_ttl(std::time::Duration::from_secs(3));
    /// # let _ = options;
    /// ```
    pub fn lease_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl.max(MIN_TTL);
        self
    }

    /// Whether to create the table when it is missing (default `true`). Turn it off when the
    /// role monoflake connects as may not create tables: an operator then runs
    /// [`PgStore::schema_sql`](super::PgStore::schema_sql) once.
    ///
    /// ```
    /// let options = monoflake::PgOptions::new().create_table(false);
    /// # let _ = options;
    /// ```
    pub fn create_table(mut self, create: bool) -> Self {
        self.create_table = create;
        self
    }

    /// How the server's standbys are promoted (default [`PgFailover::Automatic`]): with
    /// `Automatic`, a claim is refused while the server streams to a standby that is not
    /// synchronous; say [`PgFailover::Manual`] only if standbys are promoted by hand, once the
    /// old primary is fenced. A server in recovery (a standby) is refused either way.
    ///
    /// ```
    /// use monoflake::{PgFailover, PgOptions};
    /// let options = PgOptions::new().failover(PgFailover::Manual);
    /// assert_eq!(options.failover_mode(), PgFailover::Manual);
    /// ```
    pub fn failover(mut self, failover: PgFailover) -> Self {
        self.failover = failover;
        self
    }

    /// How the server's standbys are promoted, as declared ([`PgOptions::failover`]).
    ///
    /// ```
    /// assert_eq!(monoflake::PgOptions::new().failover_mode(), monoflake::PgFailover::Automatic);
    /// ```
    pub fn failover_mode(&self) -> PgFailover {
        self.failover
    }

    /// How far a holder's clock may run ahead of the database's `clock_timestamp()` and have
    /// its claim confirmed (default
    /// [`DEFAULT_MAX_CLOCK_LEAD_MS`](crate::handover::DEFAULT_MAX_CLOCK_LEAD_MS), 250 ms).
    ///
    /// Each renewal compares the holder's clock, read before it is sent, with the database's
    /// clock in it ([`handover::clock_lead_refused`](crate::handover::clock_lead_refused)): a
    /// holder further ahead (a clock set or stepped ahead of the real time, a locked clock
    /// slewing back from a fast wall clock stepped back, a clock moved to a trusted
    /// reservation) loses its claim at that renewal — it seals, writes back what it used, and
    /// reports [`Error::LeaseLost`](crate::Error::LeaseLost) naming the lead; a build with
    /// such a clock fails the same way before its first ID. In exchange a claimant that finds
    /// no row for its node (the row deleted, the table dropped) starts above the database's
    /// clock at its claim plus this, two check intervals and the lead
    /// ([`handover::store_floor_ms`](crate::handover::store_floor_ms)): above everything any
    /// earlier holder issued, with no assumption about the holders' clocks. Every process
    /// sharing a table should use the same value (a claimant's must be at least every
    /// holder's); more than half a check interval makes a claim of a node with no row wait
    /// that much longer.
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = monoflake::PgOptions::new().max_clock_lead(Duration::from_secs(1));
    /// assert_eq!(options.clock_lead(), Duration::from_secs(1));
    /// ```
    pub fn max_clock_lead(mut self, lead: Duration) -> Self {
        self.max_clock_lead = lead;
        self
    }

    /// How far a holder's clock may lead the database's ([`PgOptions::max_clock_lead`]).
    ///
    /// ```
    /// assert_eq!(monoflake::PgOptions::new().clock_lead().as_millis(), 250);
    /// ```
    pub fn clock_lead(&self) -> Duration {
        self.max_clock_lead
    }

    /// The table's name, as given.
    ///
    /// ```
    /// assert_eq!(monoflake::PgOptions::new().table_name(), "monoflake_nodes");
    /// ```
    pub fn table_name(&self) -> &str {
        &self.table
    }
}

/// Where the server's certificate is checked against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Roots {
    /// `sslrootcert=FILE`: the CA certificates in this PEM file.
    File(PathBuf),
    /// `sslrootcert=system`, or none given: the operating system's roots.
    System,
}

/// How the connection is protected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Tls {
    /// `sslmode=disable` (or no `sslmode` on a loopback or Unix-socket host): plain text.
    Disable,
    /// `sslmode=verify-full`: TLS, the certificate chain checked against `roots` and the
    /// host name against the certificate; a client certificate when given.
    VerifyFull {
        roots: Roots,
        identity: Option<(PathBuf, PathBuf)>,
    },
}

/// A connection string, read: the driver's settings and the TLS wanted. Its `Debug` shows
/// neither the password nor the string.
pub(super) struct Connection {
    pub(super) config: tokio_postgres::Config,
    pub(super) tls: Tls,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("where", &describe_target(&self.config))
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}

/// The settings handled here rather than by the driver, which knows only `disable`,
/// `prefer` and `require` and verifies nothing itself.
const TLS_KEYS: [&str; 4] = ["sslmode", "sslrootcert", "sslcert", "sslkey"];

/// Reads a connection string: a URL (`postgres://user:password@host:port/db?sslmode=…`) or
/// libpq's `key=value` form. The error never repeats the string or a part of its values.
pub(super) fn parse(text: &str, timeout: Duration) -> Result<Connection, String> {
    let text = text.trim();
    let (rest, tls_settings) =
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            split_url(text)?
        } else {
            split_key_values(text)?
        };
    let mut config = tokio_postgres::Config::from_str(&rest).map_err(|e| {
        let detail = std::error::Error::source(&e)
            .map(ToString::to_string)
            .filter(|s| {
                s.starts_with("invalid value for option") || s.starts_with("unknown option")
            })
            .unwrap_or_else(|| "check its syntax".into());
        format!("the connection string cannot be read ({detail}; it is not shown here)")
    })?;
    let get = |key: &str| {
        tls_settings
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    let tls = match get("sslmode") {
        Some("disable") => Tls::Disable,
        Some("verify-full") => {
            let roots = match get("sslrootcert") {
                None | Some("system") => Roots::System,
                Some(path) => Roots::File(PathBuf::from(path)),
            };
            let identity = match (get("sslcert"), get("sslkey")) {
                (Some(cert), Some(key)) => Some((PathBuf::from(cert), PathBuf::from(key))),
                (None, None) => None,
                _ => {
                    return Err(
                        "sslcert and sslkey go together (a client certificate and its key)".into(),
                    );
                }
            };
            Tls::VerifyFull { roots, identity }
        }
        Some(mode @ ("allow" | "prefer" | "require" | "verify-ca")) => {
            return Err(format!(
                "sslmode={mode} is refused: it does not check that the server is the one named, \
                 so whoever sits on the path could answer for it and hand out claims. Use \
                 sslmode=verify-full (with sslrootcert=FILE, or the system's roots), or \
                 sslmode=disable on a network you trust"
            ));
        }
        Some(_) => {
            return Err(
                "unknown sslmode: use sslmode=verify-full, or sslmode=disable on a network you trust"
                    .into(),
            );
        }
        None if all_local(&config) => Tls::Disable,
        None => {
            return Err(
                "the connection string names a host that is not on this machine but no \
                 sslmode: say sslmode=verify-full (with sslrootcert=FILE, or the system's \
                 roots), or sslmode=disable on a network you trust"
                    .into(),
            );
        }
    };
    if tls == Tls::Disable && (get("sslcert").is_some() || get("sslrootcert").is_some()) {
        return Err("sslrootcert, sslcert and sslkey need sslmode=verify-full".into());
    }
    config.ssl_mode(match tls {
        Tls::Disable => SslMode::Disable,
        Tls::VerifyFull { .. } => SslMode::Require,
    });
    // Every claim and renewal writes: a standby is of no use, so with several hosts the
    // primary is the one taken.
    config.target_session_attrs(TargetSessionAttrs::ReadWrite);
    if config.get_application_name().is_none() {
        config.application_name("monoflake");
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(timeout);
    }
    Ok(Connection { config, tls })
}

/// A URL's TLS settings taken out of its query; the rest, as written.
fn split_url(text: &str) -> Result<(String, Vec<(String, String)>), String> {
    let Some((base, query)) = text.split_once('?') else {
        return Ok((text.to_owned(), Vec::new()));
    };
    let mut kept = Vec::new();
    let mut tls = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = decode(key)?;
        if TLS_KEYS.contains(&key.as_str()) {
            tls.push((key, decode(value)?));
        } else {
            kept.push(pair);
        }
    }
    let rest = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((rest, tls))
}

/// Percent-decoding of a URL query part.
fn decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or("the connection string has a bad %-escape (it is not shown here)")?;
                out.push(hex);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| {
        "the connection string is not UTF-8 once decoded (it is not shown here)".into()
    })
}

/// The `key=value` form's TLS settings taken out; the rest, written back (each value
/// quoted) for the driver.
fn split_key_values(text: &str) -> Result<(String, Vec<(String, String)>), String> {
    let bad = || {
        "the connection string cannot be read: expected key=value pairs or a \
                  postgres:// URL (it is not shown here)"
            .to_owned()
    };
    let mut chars = text.chars().peekable();
    let mut kept = Vec::new();
    let mut tls = Vec::new();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            break;
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c.is_whitespace() {
                break;
            }
            key.push(c);
            chars.next();
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.next() != Some('=') || key.is_empty() {
            return Err(bad());
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut value = String::new();
        if chars.peek() == Some(&'\'') {
            chars.next();
            loop {
                match chars.next() {
                    Some('\'') => break,
                    Some('\\') => value.push(chars.next().ok_or_else(bad)?),
                    Some(c) => value.push(c),
                    None => return Err(bad()),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                chars.next();
                if c == '\\' {
                    value.push(chars.next().ok_or_else(bad)?);
                } else {
                    value.push(c);
                }
            }
        }
        if TLS_KEYS.contains(&key.as_str()) {
            tls.push((key, value));
        } else {
            let quoted = value.replace('\\', "\\\\").replace('\'', "\\'");
            kept.push(format!("{key}='{quoted}'"));
        }
    }
    Ok((kept.join(" "), tls))
}

/// Whether every host named is this machine (a loopback address, `localhost`, a Unix
/// socket), where plain text is the default.
fn all_local(config: &tokio_postgres::Config) -> bool {
    let hosts_local = config.get_hosts().iter().all(|h| match h {
        Host::Tcp(name) => {
            name == "localhost" || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
        }
        #[cfg(unix)]
        Host::Unix(_) => true,
    });
    let addrs_local = config.get_hostaddrs().iter().all(IpAddr::is_loopback);
    hosts_local && addrs_local
}

/// `host:port/db`, for messages: no user, no password.
pub(super) fn describe_target(config: &tokio_postgres::Config) -> String {
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let port = config
                .get_ports()
                .get(i)
                .or(config.get_ports().first())
                .copied()
                .unwrap_or(5432);
            match h {
                Host::Tcp(name) if name.contains(':') => format!("[{name}]:{port}"),
                Host::Tcp(name) => format!("{name}:{port}"),
                #[cfg(unix)]
                Host::Unix(path) => format!("{}:{port}", path.display()),
            }
        })
        .collect();
    let hosts = if hosts.is_empty() {
        "localhost:5432".to_owned()
    } else {
        hosts.join(",")
    };
    let db = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    format!("{hosts}/{db}")
}

/// The rustls connector for `verify-full`: the roots and the client identity read from their
/// files.
pub(super) fn rustls_connector(
    roots: &Roots,
    identity: Option<&(PathBuf, PathBuf)>,
) -> Result<tokio_postgres_rustls::MakeRustlsConnect, String> {
    let mut store = rustls::RootCertStore::empty();
    match roots {
        Roots::File(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .map_err(|e| format!("cannot read sslrootcert {}: {e}", path.display()))?;
            let (added, _) = store.add_parsable_certificates(certs);
            if added == 0 {
                return Err(format!(
                    "sslrootcert {} holds no usable CA certificate",
                    path.display()
                ));
            }
        }
        Roots::System => {
            let found = rustls_native_certs::load_native_certs();
            store.add_parsable_certificates(found.certs);
            if store.is_empty() {
                return Err(
                    "sslmode=verify-full without sslrootcert uses the system's CA \
                            certificates, and none were found: give sslrootcert=FILE"
                        .into(),
                );
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(store);
    let config = match identity {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .map_err(|e| format!("cannot read sslcert {}: {e}", cert.display()))?;
            let key_der = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| format!("cannot read sslkey {}: {e}", key.display()))?;
            builder
                .with_client_auth_cert(chain, key_der)
                .map_err(|e| format!("sslcert and sslkey do not make a client identity: {e}"))?
        }
    };
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

#[cfg(test)]
mod tests;
