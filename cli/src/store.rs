//! The node store that the store flags (`StoreArgs`: `--backend`, `--state-dir`, `--etcd-*`,
//! `--pg-*`) name, opened: `gen` and `serve` claim their node from it, `bench` measures it.
//!
//! Imports the flags and the failure type; no subcommand.

use std::path::Path;
use std::sync::Arc;

use monoflake::{Error, FileStore, NodeStore};

use crate::args::{Backend, NodeArgs, StoreArgs};
use crate::failure::Failure;

/// Opens the store `--backend` names (the file store when none is named) for a node's
/// claim.
pub fn open_store(args: &NodeArgs) -> Result<Arc<dyn NodeStore>, Failure> {
    open(&args.store, args.store.backend.unwrap_or(Backend::File))
}

/// Opens the store `--backend` names, if it names one (`bench` measures no store
/// otherwise).
pub fn open_named_store(args: &StoreArgs) -> Result<Option<Arc<dyn NodeStore>>, Failure> {
    args.backend.map(|backend| open(args, backend)).transpose()
}

/// Opens `backend`: the file store in `--state-dir` (or the host-wide default), etcd at
/// `--etcd-endpoints` with the TLS and credentials the `--etcd-*` flags give, or PostgreSQL
/// at the connection string of `--pg-url-file`, `--pg-url` or `$MONOFLAKE_PG_URL`.
fn open(args: &StoreArgs, backend: Backend) -> Result<Arc<dyn NodeStore>, Failure> {
    let etcd_security =
        args.etcd_ca.is_some() || args.etcd_cert.is_some() || args.etcd_user.is_some();
    if etcd_security && backend != Backend::Etcd {
        return Err(Failure::usage(
            "--etcd-ca, --etcd-cert, --etcd-key and --etcd-user need --backend etcd",
        ));
    }
    if (args.pg_url.is_some() || args.pg_url_file.is_some()) && backend != Backend::Postgres {
        return Err(Failure::usage(
            "--pg-url and --pg-url-file need --backend postgres",
        ));
    }
    match backend {
        Backend::File => Ok(Arc::new(open_file_store(args.state_dir.as_deref())?)),
        #[cfg(feature = "etcd")]
        Backend::Etcd => {
            let endpoints: Vec<&str> = args.etcd_endpoints.iter().map(String::as_str).collect();
            let ttl = std::time::Duration::from_secs(args.lease_ttl);
            Ok(Arc::new(monoflake::EtcdStore::connect_with(
                &endpoints,
                &args.etcd_prefix,
                ttl,
                &etcd_options(args)?,
            )?))
        }
        #[cfg(not(feature = "etcd"))]
        Backend::Etcd => Err(not_built("etcd")),
        #[cfg(feature = "postgres")]
        Backend::Postgres => {
            let options = monoflake::PgOptions::new()
                .table(&args.pg_table)?
                .failover(args.pg_failover.parse()?)
                .lease_ttl(std::time::Duration::from_secs(args.lease_ttl));
            Ok(Arc::new(monoflake::PgStore::connect_with(
                &pg_url(args)?,
                &options,
            )?))
        }
        #[cfg(not(feature = "postgres"))]
        Backend::Postgres => Err(not_built("postgres")),
    }
}

/// The failure for a backend this build left out.
#[cfg(not(all(feature = "etcd", feature = "postgres")))]
fn not_built(feature: &str) -> Failure {
    Failure {
        code: 2,
        message: format!(
            "this monoflake was built without the `{feature}` feature \
             (cargo build --release -p monoflake-cli --features {feature})"
        ),
    }
}

/// The PostgreSQL connection string: the first line of `--pg-url-file`, else `--pg-url`,
/// else `$MONOFLAKE_PG_URL`. Never part of a message.
#[cfg(feature = "postgres")]
fn pg_url(args: &StoreArgs) -> Result<String, Failure> {
    if let Some(path) = &args.pg_url_file {
        let text = std::fs::read(path).map_err(|e| Failure {
            code: 2,
            message: format!("cannot read --pg-url-file {}: {e}", path.display()),
        })?;
        let text = String::from_utf8(text)
            .map_err(|_| Failure::usage("the --pg-url-file is not UTF-8 text"))?;
        let line = text.lines().next().unwrap_or("").trim().to_owned();
        if line.is_empty() {
            return Err(Failure::usage("the --pg-url-file is empty"));
        }
        return Ok(line);
    }
    if let Some(url) = &args.pg_url {
        return Ok(url.expose().to_owned());
    }
    match std::env::var("MONOFLAKE_PG_URL") {
        Ok(url) if !url.trim().is_empty() => Ok(url.trim().to_owned()),
        _ => Err(Failure::usage(
            "--backend postgres needs a connection string: --pg-url-file FILE, \
             $MONOFLAKE_PG_URL or --pg-url URL",
        )),
    }
}

/// Opens the file store in `dir` (`--state-dir`), or the host-wide default — for a user who
/// cannot use that, their own, said once on standard error, as is each of the store's
/// caveats (`NodeStore::caveats`). A directory that cannot be used is a failure that also
/// names the command line's way to choose another.
pub fn open_file_store(dir: Option<&Path>) -> Result<FileStore, Failure> {
    let opened = match dir {
        Some(dir) => FileStore::open(dir),
        None => FileStore::open_default().inspect(|store| {
            if let Some(note) = store.default_note() {
                eprintln!("monoflake: {note}");
            }
        }),
    };
    let store = opened.map_err(|e| {
        let hint = matches!(e, Error::StateDir { .. } | Error::UntrustedState { .. });
        let mut failure = Failure::from(e);
        if hint {
            failure
                .message
                .push_str(" (with monoflake: --state-dir DIR chooses the directory)");
        }
        failure
    })?;
    // What the store cannot promise here (no anchors, another network namespace): once.
    for caveat in monoflake::NodeStore::caveats(&store) {
        eprintln!("monoflake: warning: {caveat}");
    }
    Ok(store)
}

/// TLS and credentials for etcd from the `--etcd-*` flags (files read here).
#[cfg(feature = "etcd")]
fn etcd_options(args: &StoreArgs) -> Result<monoflake::EtcdOptions, Failure> {
    let read = |path: &std::path::Path, what: &str| {
        std::fs::read(path).map_err(|e| Failure {
            code: 2,
            message: format!("cannot read the etcd {what} {}: {e}", path.display()),
        })
    };
    let mut options = monoflake::EtcdOptions::new();
    if let Some(ca) = &args.etcd_ca {
        options = options.ca_pem(read(ca, "CA file")?);
    }
    if let (Some(cert), Some(key)) = (&args.etcd_cert, &args.etcd_key) {
        options = options.client_identity_pem(read(cert, "certificate")?, read(key, "key")?);
    }
    if let Some(user) = &args.etcd_user {
        let password = match &args.etcd_password_file {
            Some(path) => {
                let text = String::from_utf8(read(path, "password file")?)
                    .map_err(|_| Failure::usage("the etcd password file is not UTF-8 text"))?;
                text.lines().next().unwrap_or("").to_owned()
            }
            None => std::env::var("MONOFLAKE_ETCD_PASSWORD").map_err(|_| {
                Failure::usage(
                    "--etcd-user needs --etcd-password-file F or $MONOFLAKE_ETCD_PASSWORD",
                )
            })?,
        };
        options = options.user(user.clone(), password);
    }
    Ok(options)
}

/// Says on standard error, once per claim, when the node store saw IDs above where this
/// generator starts: the clock is behind what the store saw before (set back since, or an
/// earlier holder's clock was ahead), and the claim took another node rather than wait. The
/// IDs are unique; they sort below IDs issued up to that long ago.
pub fn say_if_behind(leased: &monoflake::Leased) {
    let below = leased.stats().sorts_below_ms;
    if below > 0 {
        eprintln!(
            "monoflake: warning: this clock is {} behind what the node store saw before (a \
             clock set back, or an earlier holder's ahead); node {} was taken instead of \
             waiting, and its IDs sort below IDs issued up to {} ago",
            human_ms(below),
            leased.node(),
            human_ms(below)
        );
    }
}

/// Milliseconds the way a person reads them: `850 ms`, `12.5 s`, `60.0 min`, `3.0 h`.
fn human_ms(ms: u64) -> String {
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..120_000 => format!("{:.1} s", ms as f64 / 1e3),
        120_000..7_200_000 => format!("{:.1} min", ms as f64 / 60e3),
        _ => format!("{:.1} h", ms as f64 / 3_600e3),
    }
}
