//! The node store that the node flags (`NodeArgs`: `--backend`, `--state-dir`, `--etcd-*`)
//! name, opened: `gen` and `serve` claim their node from it.
//!
//! Imports the flags and the failure type; no subcommand.

use std::path::Path;
use std::sync::Arc;

use monoflake::{Error, FileStore, NodeStore};

use crate::args::{Backend, NodeArgs};
use crate::failure::Failure;

/// Opens the store `--backend` names: the file store in `--state-dir` (or the host-wide
/// default), or etcd at `--etcd-endpoints` with the TLS and credentials the `--etcd-*` flags
/// give.
pub fn open_store(args: &NodeArgs) -> Result<Arc<dyn NodeStore>, Failure> {
    let etcd_security =
        args.etcd_ca.is_some() || args.etcd_cert.is_some() || args.etcd_user.is_some();
    if etcd_security && args.backend != Backend::Etcd {
        return Err(Failure::usage(
            "--etcd-ca, --etcd-cert, --etcd-key and --etcd-user need --backend etcd",
        ));
    }
    match args.backend {
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
        Backend::Etcd => Err(Failure {
            code: 2,
            message: "this monoflake was built without the `etcd` feature \
                      (cargo build --features etcd)"
                .into(),
        }),
    }
}

/// Opens the file store in `dir` (`--state-dir`), or the host-wide default. A directory that
/// cannot be used is a failure that also names the command line's way to choose another.
pub fn open_file_store(dir: Option<&Path>) -> Result<FileStore, Failure> {
    let opened = match dir {
        Some(dir) => FileStore::open(dir),
        None => FileStore::open_default(),
    };
    opened.map_err(|e| {
        let hint = matches!(e, Error::StateDir { .. } | Error::UntrustedState { .. });
        let mut failure = Failure::from(e);
        if hint {
            failure
                .message
                .push_str(" (with monoflake: --state-dir DIR chooses the directory)");
        }
        failure
    })
}

/// TLS and credentials for etcd from the `--etcd-*` flags (files read here).
#[cfg(feature = "etcd")]
fn etcd_options(args: &NodeArgs) -> Result<monoflake::EtcdOptions, Failure> {
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
