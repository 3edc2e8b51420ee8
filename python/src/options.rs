//! The keyword arguments of `Generator(...)` and `configure_default(...)`, converted once into
//! plain Rust values, and the leased generator they build.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use monoflake::{Error, FileStore, Generator, GeneratorBuilder, Layout, Leased, NodeRequest};
use monoflake::{LockedClock, NodeStore};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::convert::{index, uint};
use crate::errors::{Attr, Kind, raise, warn};
use crate::layout::LayoutArg;

/// A `node=` argument: `"auto"` or a node value, read once the layout is known.
pub(crate) struct NodeArg(Py<PyAny>);

impl<'a, 'py> FromPyObject<'a, 'py> for NodeArg {
    type Error = PyErr;

    fn extract(node: Borrowed<'a, 'py, PyAny>) -> Result<Self, Self::Error> {
        Ok(NodeArg(node.to_owned().unbind()))
    }
}

impl NodeArg {
    /// `"auto"`, or a node that fits `layout`: any other int, however large or negative, is
    /// `OutOfRange` (as the library says for one too large in 64 bits); any other string
    /// `InvalidConfig`; anything else a `TypeError`.
    pub(crate) fn request(self, py: Python<'_>, layout: &Layout) -> PyResult<NodeRequest> {
        let node = self.0.bind(py);
        if node.cast::<PyString>().is_ok() {
            let text: String = node.extract()?;
            return match text.as_str() {
                "auto" => Ok(NodeRequest::Any),
                other => Err(invalid(py, "node", other, "\"auto\" or an int")),
            };
        }
        uint(node, "node", layout.max_node()).map(NodeRequest::Exact)
    }
}

/// Where node IDs are claimed.
#[derive(Clone, Debug)]
enum Store {
    /// The file store: `dir`, else the host-wide default (`$MONOFLAKE_STATE_DIR`, else
    /// `/var/lib/monoflake`).
    File { dir: Option<PathBuf> },
    /// etcd, with what `EtcdStore::connect_with` needs (files already read).
    #[cfg(feature = "etcd")]
    Etcd(Box<Etcd>),
    /// PostgreSQL, with what `PgStore::connect_with` needs.
    #[cfg(feature = "postgres")]
    Postgres(Box<Pg>),
}

#[cfg(feature = "etcd")]
#[derive(Clone, Debug)]
struct Etcd {
    endpoints: Vec<String>,
    prefix: String,
    ttl: Duration,
    ca: Option<Vec<u8>>,
    identity: Option<(Vec<u8>, Vec<u8>)>,
    user: Option<(String, String)>,
}

/// A PostgreSQL store: the connection string (a secret: never shown) and the table and TTL.
#[cfg(feature = "postgres")]
#[derive(Clone)]
struct Pg {
    url: String,
    options: monoflake::PgOptions,
}

#[cfg(feature = "postgres")]
impl std::fmt::Debug for Pg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pg")
            .field("url", &"<hidden>")
            .field("options", &self.options)
            .finish()
    }
}

/// Everything a leased generator is built from.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    layout: Layout,
    node: NodeRequest,
    store: Store,
    tuning: Tuning,
    reservation_window: Option<Duration>,
    future_reservation_tolerance: Option<Duration>,
    trust_future_reservation: bool,
}

/// The settings a plain (unleased) generator takes too.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Tuning {
    max_lead: Option<Duration>,
    max_wait: Option<Duration>,
    start_offset_bits: u32,
}

impl Tuning {
    /// `start_offset_bits` is an int (`None` for 0) in `0..=sequence_bits - 1`: the library
    /// caps it there, and a larger value is refused here rather than silently used as less.
    /// Any other int, however large or negative, is `InvalidConfig` too.
    pub(crate) fn new(
        py: Python<'_>,
        layout: &Layout,
        max_lead: Option<f64>,
        max_wait: Option<f64>,
        start_offset_bits: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let most = layout.sequence_bits().saturating_sub(1);
        let start_offset_bits = match start_offset_bits {
            None => 0,
            Some(bits) => match bits.extract::<u32>() {
                Ok(bits) if bits <= most => bits,
                _ => {
                    return Err(invalid(
                        py,
                        "start_offset_bits",
                        &index(bits)?.to_string(),
                        &format!(
                            "0..={most} (below the layout's {} sequence bits)",
                            layout.sequence_bits()
                        ),
                    ));
                }
            },
        };
        Ok(Tuning {
            max_lead: seconds(py, "max_lead", max_lead)?,
            max_wait: seconds(py, "max_wait", max_wait)?,
            start_offset_bits,
        })
    }

    pub(crate) fn apply(
        self,
        mut builder: GeneratorBuilder<LockedClock>,
    ) -> GeneratorBuilder<LockedClock> {
        if let Some(lead) = self.max_lead {
            builder = builder.max_lead(lead);
        }
        if let Some(wait) = self.max_wait {
            builder = builder.max_wait(wait);
        }
        builder.start_offset_bits(self.start_offset_bits)
    }
}

/// The arguments as Python gives them, checked for type.
pub(crate) struct Args {
    layout: Layout,
    node: Option<NodeArg>,
    backend: String,
    state_dir: Option<PathBuf>,
    etcd_endpoints: Vec<String>,
    etcd_prefix: String,
    lease_ttl: f64,
    lease_ttl_set: bool,
    etcd_ca: Option<PathBuf>,
    etcd_cert: Option<PathBuf>,
    etcd_key: Option<PathBuf>,
    etcd_user: Option<String>,
    etcd_password: Option<String>,
    pg_url: Option<String>,
    pg_table: String,
    /// The keyword settings given, other than `None`, with their values.
    given: Vec<(String, Py<PyAny>)>,
    max_lead: Option<f64>,
    max_wait: Option<f64>,
    start_offset_bits: Option<Py<PyAny>>,
    reservation_window: Option<f64>,
    future_reservation_tolerance: Option<f64>,
    trust_future_reservation: bool,
}

impl Args {
    /// `layout`, `node` and the keyword-only settings of `Generator(...)` and
    /// `configure_default(...)` (one list for both, so they cannot drift apart).
    pub(crate) fn new(
        py: Python<'_>,
        what: &str,
        layout: Option<LayoutArg>,
        node: Option<NodeArg>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Args> {
        let mut args = Args {
            layout: match layout {
                Some(l) => l.into_layout(py)?,
                None => Layout::twitter(),
            },
            node,
            backend: "file".into(),
            state_dir: None,
            etcd_endpoints: vec!["http://127.0.0.1:2379".into()],
            etcd_prefix: "/monoflake".into(),
            lease_ttl: 10.0,
            lease_ttl_set: false,
            etcd_ca: None,
            etcd_cert: None,
            etcd_key: None,
            etcd_user: None,
            etcd_password: None,
            pg_url: None,
            pg_table: "monoflake_nodes".into(),
            given: Vec::new(),
            max_lead: None,
            max_wait: None,
            start_offset_bits: None,
            reservation_window: None,
            future_reservation_tolerance: None,
            trust_future_reservation: false,
        };
        let Some(kwargs) = kwargs else {
            return Ok(args);
        };
        for (key, value) in kwargs {
            let key: String = key.extract()?;
            let given = !value.is_none();
            match key.as_str() {
                "backend" => args.backend = value.extract()?,
                "state_dir" => args.state_dir = value.extract()?,
                "etcd_endpoints" => {
                    args.etcd_endpoints = match value.extract::<String>() {
                        Ok(one) => one.split(',').map(str::to_owned).collect(),
                        Err(_) => value.extract()?,
                    }
                }
                "etcd_prefix" => args.etcd_prefix = value.extract()?,
                "lease_ttl" => {
                    args.lease_ttl = value.extract()?;
                    args.lease_ttl_set = true;
                }
                "etcd_ca" => args.etcd_ca = value.extract()?,
                "etcd_cert" => args.etcd_cert = value.extract()?,
                "etcd_key" => args.etcd_key = value.extract()?,
                "etcd_user" => args.etcd_user = value.extract()?,
                "etcd_password" => args.etcd_password = value.extract()?,
                "pg_url" => args.pg_url = value.extract()?,
                "pg_table" => args.pg_table = value.extract()?,
                "max_lead" => args.max_lead = value.extract()?,
                "max_wait" => args.max_wait = value.extract()?,
                "start_offset_bits" => args.start_offset_bits = Some(value.clone().unbind()),
                "reservation_window" => args.reservation_window = value.extract()?,
                "future_reservation_tolerance" => {
                    args.future_reservation_tolerance = value.extract()?
                }
                "trust_future_reservation" => args.trust_future_reservation = value.extract()?,
                _ => {
                    return Err(PyTypeError::new_err(format!(
                        "{what}() got an unexpected keyword argument '{key}'"
                    )));
                }
            }
            if given {
                args.given.push((key, value.unbind()));
            }
        }
        Ok(args)
    }
}

impl Options {
    /// Checks and converts the arguments; reads the etcd certificate files. A setting of
    /// another backend than the one chosen is refused, not ignored.
    pub(crate) fn new(py: Python<'_>, args: Args) -> PyResult<Options> {
        const BACKENDS: [&str; 3] = ["file", "etcd", "postgres"];
        if !BACKENDS.contains(&args.backend.as_str()) {
            return Err(invalid(
                py,
                "backend",
                &args.backend,
                "\"file\", \"etcd\" or \"postgres\"",
            ));
        }
        for (setting, value) in &args.given {
            let backends: &[&str] = match setting.as_str() {
                "state_dir" => &["file"],
                // The file backend's lease is a lock file: it has no TTL.
                "lease_ttl" => &["etcd", "postgres"],
                s if s.starts_with("etcd_") => &["etcd"],
                s if s.starts_with("pg_") => &["postgres"],
                _ => continue,
            };
            if !backends.contains(&args.backend.as_str()) {
                return Err(other_backend(
                    value.bind(py),
                    setting,
                    backends,
                    &args.backend,
                ));
            }
        }
        let store = match args.backend.as_str() {
            "etcd" => etcd(py, &args)?,
            "postgres" => postgres(py, &args)?,
            _ => Store::File {
                dir: args.state_dir,
            },
        };
        let tuning = Tuning::new(
            py,
            &args.layout,
            args.max_lead,
            args.max_wait,
            args.start_offset_bits.as_ref().map(|bits| bits.bind(py)),
        )?;
        let node = match args.node {
            Some(node) => node.request(py, &args.layout)?,
            None => NodeRequest::Any,
        };
        Ok(Options {
            layout: args.layout,
            node,
            store,
            tuning,
            reservation_window: seconds(py, "reservation_window", args.reservation_window)?,
            future_reservation_tolerance: seconds(
                py,
                "future_reservation_tolerance",
                args.future_reservation_tolerance,
            )?,
            trust_future_reservation: args.trust_future_reservation,
        })
    }

    /// The layout IDs are issued under.
    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The largest batch a generator of these settings can ever issue: the library's
    /// `Generator::max_batch`, asked of a plain generator with the same layout and lead (a
    /// lease does not change either; `Leased` does not say it itself).
    pub(crate) fn max_batch(&self) -> u64 {
        let builder = Generator::builder(self.layout.clone()).node(0);
        self.tuning
            .apply(builder)
            .build()
            .map_or(u64::MAX, |g| g.max_batch())
    }

    /// Opens the store, claims a node and starts the keeper: file I/O, a network round trip,
    /// possibly a wait for a reservation slightly ahead. Called with the GIL released.
    pub(crate) fn build(&self) -> Result<Built, Error> {
        let mut note = None;
        let store: Arc<dyn NodeStore> = match &self.store {
            Store::File { dir: Some(dir) } => Arc::new(FileStore::open(dir)?),
            Store::File { dir: None } => {
                let store = FileStore::open_default()?;
                note = store.default_note().map(str::to_owned);
                Arc::new(store)
            }
            #[cfg(feature = "etcd")]
            Store::Etcd(e) => {
                let mut options = monoflake::EtcdOptions::new();
                if let Some(ca) = &e.ca {
                    options = options.ca_pem(ca.clone());
                }
                if let Some((cert, key)) = &e.identity {
                    options = options.client_identity_pem(cert.clone(), key.clone());
                }
                if let Some((user, password)) = &e.user {
                    options = options.user(user.clone(), password.clone());
                }
                let endpoints: Vec<&str> = e.endpoints.iter().map(String::as_str).collect();
                Arc::new(monoflake::EtcdStore::connect_with(
                    &endpoints, &e.prefix, e.ttl, &options,
                )?)
            }
            #[cfg(feature = "postgres")]
            Store::Postgres(pg) => {
                Arc::new(monoflake::PgStore::connect_with(&pg.url, &pg.options)?)
            }
        };
        let caveats = store.caveats().iter().map(ToString::to_string).collect();
        let mut builder = self.tuning.apply(Generator::builder(self.layout.clone()));
        if let Some(window) = self.reservation_window {
            builder = builder.reservation_window(window);
        }
        if let Some(tolerance) = self.future_reservation_tolerance {
            builder = builder.future_reservation_tolerance(tolerance);
        }
        let leased = builder
            .trust_future_reservation(self.trust_future_reservation)
            .build_leased(store, self.node)?;
        Ok(Built {
            leased,
            note,
            caveats,
        })
    }
}

/// Whether this process has said that the default state directory is the user's own.
// Ordering: Relaxed. It publishes nothing; at worst two threads both say it.
static FALLBACK_SAID: AtomicBool = AtomicBool::new(false);

/// A leased generator just built, and why it uses this user's own state directory, if it
/// does (`FileStore::default_note`).
pub(crate) struct Built {
    pub(crate) leased: Leased,
    pub(crate) note: Option<String>,
    /// What the store cannot promise here (`NodeStore::caveats`), as text.
    pub(crate) caveats: Vec<String>,
}

/// Whether this process has said the store's caveats.
// Ordering: Relaxed, as `FALLBACK_SAID`.
static CAVEATS_SAID: AtomicBool = AtomicBool::new(false);

/// Says each of the store's `caveats` (no anchors, another network namespace), once per
/// process, as the CLI says them once on standard error: a `monoflake.LeaseWarning` each.
/// Raises when warnings are errors (`-W error`).
pub(crate) fn warn_caveats(py: Python<'_>, caveats: &[String]) -> PyResult<()> {
    if caveats.is_empty() || CAVEATS_SAID.swap(true, Ordering::Relaxed) {
        return Ok(());
    }
    for caveat in caveats {
        warn(py, &format!("monoflake: {caveat}"))?;
    }
    Ok(())
}

/// Says `note`, the fallback to this user's own state directory, once per process, as the
/// CLI says it once on standard error: a `monoflake.LeaseWarning`. Raises when warnings are
/// errors (`-W error`).
pub(crate) fn warn_fallback(py: Python<'_>, note: Option<&str>) -> PyResult<()> {
    match note {
        Some(note) if !FALLBACK_SAID.swap(true, Ordering::Relaxed) => {
            warn(py, &format!("monoflake: {note}"))
        }
        _ => Ok(()),
    }
}

/// `InvalidConfig` for `setting=value`, a setting of `backends` only, given with `backend`:
/// named with the value as it was given (a secret hidden), never ignored.
#[cold]
fn other_backend(
    value: &Bound<'_, PyAny>,
    setting: &str,
    backends: &[&str],
    backend: &str,
) -> PyErr {
    let (repr, text) = match setting {
        "etcd_password" | "pg_url" => ("<hidden>".to_owned(), "<hidden>".to_owned()),
        _ => (
            value.repr().map_or_else(|_| "?".into(), |r| r.to_string()),
            value.str().map_or_else(|_| "?".into(), |s| s.to_string()),
        ),
    };
    let quoted: Vec<String> = backends.iter().map(|b| format!("'{b}'")).collect();
    let backends = quoted.join(" or ");
    raise(
        value.py(),
        Kind::InvalidConfig,
        "InvalidConfig",
        format!(
            "{setting}={repr} is a setting of backend={backends} only, not of backend='{backend}'"
        ),
        vec![
            ("setting", Attr::Str(setting.to_owned())),
            ("value", Attr::Str(text)),
            (
                "allowed",
                Attr::Str(format!("only with backend={backends}")),
            ),
        ],
    )
}

/// `lease_ttl` of etcd and PostgreSQL: whole seconds, as the CLI's `--lease-ttl`.
#[cfg(any(feature = "etcd", feature = "postgres"))]
fn lease_ttl(py: Python<'_>, args: &Args) -> PyResult<Duration> {
    if !(1.0..=3600.0).contains(&args.lease_ttl) || args.lease_ttl.fract() != 0.0 {
        return Err(invalid(
            py,
            "lease_ttl",
            &args.lease_ttl.to_string(),
            "whole seconds from 1 to 3600",
        ));
    }
    Ok(Duration::from_secs_f64(args.lease_ttl))
}

#[cfg(feature = "etcd")]
fn etcd(py: Python<'_>, args: &Args) -> PyResult<Store> {
    let ttl = lease_ttl(py, args)?;
    let read = |path: &Option<PathBuf>| -> PyResult<Option<Vec<u8>>> {
        Ok(match path {
            Some(p) => Some(std::fs::read(p)?),
            None => None,
        })
    };
    let identity = match (read(&args.etcd_cert)?, read(&args.etcd_key)?) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (None, None) => None,
        _ => {
            return Err(invalid(
                py,
                "etcd_cert",
                "one of etcd_cert and etcd_key",
                "both or neither",
            ));
        }
    };
    let user = match (&args.etcd_user, &args.etcd_password) {
        (Some(user), Some(password)) => Some((user.clone(), password.clone())),
        (None, None) => None,
        _ => {
            return Err(invalid(
                py,
                "etcd_user",
                "one of etcd_user and etcd_password",
                "both or neither",
            ));
        }
    };
    Ok(Store::Etcd(Box::new(Etcd {
        endpoints: args.etcd_endpoints.clone(),
        prefix: args.etcd_prefix.clone(),
        ttl,
        ca: read(&args.etcd_ca)?,
        identity,
        user,
    })))
}

#[cfg(not(feature = "etcd"))]
fn etcd(py: Python<'_>, _: &Args) -> PyResult<Store> {
    Err(invalid(
        py,
        "backend",
        "etcd",
        "\"file\": this build has no etcd support (build it with `maturin build --release \
         --features etcd`, which needs protoc)",
    ))
}

/// PostgreSQL at `pg_url`, else `$MONOFLAKE_PG_URL` (as the CLI reads it), never shown in an
/// error; `pg_table` and `lease_ttl` checked as the library and the CLI check them.
#[cfg(feature = "postgres")]
fn postgres(py: Python<'_>, args: &Args) -> PyResult<Store> {
    let ttl = lease_ttl(py, args)?;
    let url = match &args.pg_url {
        Some(url) => url.clone(),
        None => match std::env::var("MONOFLAKE_PG_URL") {
            Ok(url) if !url.trim().is_empty() => url.trim().to_owned(),
            _ => {
                return Err(invalid(
                    py,
                    "pg_url",
                    "missing",
                    "a connection string: pg_url=\"postgres://...\" or $MONOFLAKE_PG_URL",
                ));
            }
        },
    };
    // The library names the setting `table`; here it is `pg_table`.
    let options = monoflake::PgOptions::new()
        .table(&args.pg_table)
        .map_err(|e| match e {
            Error::InvalidConfig { value, allowed, .. } => {
                invalid(py, "pg_table", &value, &allowed)
            }
            other => crate::errors::to_py(py, other),
        })?
        .lease_ttl(ttl);
    Ok(Store::Postgres(Box::new(Pg { url, options })))
}

#[cfg(not(feature = "postgres"))]
fn postgres(py: Python<'_>, _: &Args) -> PyResult<Store> {
    Err(invalid(
        py,
        "backend",
        "postgres",
        "\"file\" or \"etcd\": this build has no PostgreSQL support (build it with `maturin \
         build --release --features postgres`)",
    ))
}

/// A duration argument in seconds, `None` for the library's default.
fn seconds(
    py: Python<'_>,
    setting: &'static str,
    value: Option<f64>,
) -> PyResult<Option<Duration>> {
    value
        .map(|s| {
            Duration::try_from_secs_f64(s).map_err(|_| {
                invalid(
                    py,
                    setting,
                    &s.to_string(),
                    "a number of seconds, 0 or more",
                )
            })
        })
        .transpose()
}

/// `InvalidConfig` for an argument checked here.
pub(crate) fn invalid(py: Python<'_>, setting: &str, value: &str, allowed: &str) -> PyErr {
    raise(
        py,
        Kind::InvalidConfig,
        "InvalidConfig",
        format!("invalid {setting} {value:?}: allowed is {allowed}"),
        vec![
            ("setting", Attr::Str(setting.to_owned())),
            ("value", Attr::Str(value.to_owned())),
            ("allowed", Attr::Str(allowed.to_owned())),
        ],
    )
}
