//! `monoflake serve`: one leased generator behind HTTP (and gRPC), a thin layer over the
//! library's public API.
//!
//! * `issue.rs`: the generator behind an async retry; refusals and what they mean. It reports
//!   its own events through its `Observer` trait, which `metrics.rs` implements: the issuer
//!   does not import the metrics.
//! * `http.rs`: the HTTP routes (one table) and bodies; `openapi.rs`: their description,
//!   `GET /openapi.json`; `grpc.rs`: the `monoflake.v1.Ids` service and reflection.
//! * `metrics.rs`: `/metrics`; `process.rs`: the process's resources for it, from
//!   `/proc/self`; `auth.rs`: the bearer token; `tls.rs`: rustls.
//! * `listener.rs`: accept loop, protocol limits, graceful stop; `slots.rs`: which connection
//!   makes room for a new one; `connection.rs`: one connection's life and deadline watch.
//! * `exchange.rs`: a connection's requests in flight, its progress and deadline;
//!   `tracked.rs`: the service wrapper that tracks each request and counts each answer.
//! * `budget.rs`: the bytes answers hold; `batch.rs`: a batch streamed in pieces.
//! * `stripe.rs`: per-thread stripes for the counters every request adds to.
//! * `lifecycle.rs`: signals, drain, release; `drain.rs`: a stop's phases, and closing a
//!   listener without resetting what the kernel queued.

mod auth;
mod batch;
mod budget;
mod connection;
mod drain;
mod exchange;
mod grpc;
mod http;
mod issue;
mod lifecycle;
mod listener;
mod metrics;
mod openapi;
mod process;
mod slots;
mod stripe;
mod tls;
mod tracked;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use monoflake::{DEFAULT_MAX_LEAD, Layout, NodeRequest};

use crate::args::{NodeArg, ServeArgs};
use crate::failure::Failure;
use crate::store::open_store;

fn runtime_failure(message: String) -> Failure {
    Failure { code: 1, message }
}

fn usage(message: String) -> Failure {
    Failure { code: 2, message }
}

/// The most IDs one batch can take under `layout`: the sequence space of the ticks within the
/// generator's lead (a batch that large waits at most the lead for its first tick to open).
fn batch_capacity(layout: &Layout) -> u64 {
    let lead_ticks =
        u64::try_from(DEFAULT_MAX_LEAD.as_millis()).unwrap_or(u64::MAX) / layout.tick_ms();
    lead_ticks.max(1).saturating_mul(layout.max_sequence() + 1)
}

/// Says so on stderr when a listener beyond loopback has no token or no TLS.
fn warn_if_exposed(addr: std::net::SocketAddr, token: bool, tls: bool) {
    if addr.ip().is_loopback() {
        return;
    }
    if !token {
        eprintln!(
            "monoflake: warning: {addr} is not loopback and there is no --token-file: \
             anyone who can reach it gets IDs"
        );
    }
    if !tls {
        eprintln!(
            "monoflake: warning: {addr} is not loopback and there is no --tls-cert: \
             tokens and IDs cross the network in clear text"
        );
    }
}

/// The bearer token from `--token-file` (or `$MONOFLAKE_TOKEN_FILE`), or from
/// `$MONOFLAKE_TOKEN`; none without either. Both at once are refused: two sources of one
/// secret leave the operator unsure which one callers must hold.
fn token(args: &ServeArgs) -> Result<Option<auth::Token>, Failure> {
    match (&args.token_file, std::env::var_os(TOKEN_ENV)) {
        (Some(_), Some(_)) => Err(usage(
            "the token is given twice: --token-file (or $MONOFLAKE_TOKEN_FILE) and \
             $MONOFLAKE_TOKEN; give one"
                .to_owned(),
        )),
        (Some(path), None) => auth::Token::read(path).map(Some),
        (None, Some(value)) => auth::Token::from_env(&value).map(Some),
        (None, None) => Ok(None),
    }
}

/// The environment variable that may hold the bearer token itself.
const TOKEN_ENV: &str = "MONOFLAKE_TOKEN";

pub fn run(args: &ServeArgs) -> Result<(), Failure> {
    let layout = args.node_args.layout.clone();
    let request = match args.node_args.node {
        NodeArg::Auto => NodeRequest::Any,
        NodeArg::Exact(n) => NodeRequest::Exact(layout.check_node(n)?),
    };
    let max_wait = Duration::from_secs_f64(args.max_wait);
    let idle = Duration::from_secs_f64(args.idle_timeout);
    if max_wait >= idle {
        return Err(usage(format!(
            "--max-wait ({} s) must be shorter than --idle-timeout ({} s)",
            args.max_wait, args.idle_timeout
        )));
    }
    let capacity = batch_capacity(&layout);
    if args.max_count > capacity {
        return Err(usage(format!(
            "--max-count {} is more than the {} layout can issue in one batch ({capacity}: \
             {} IDs per {} ms tick within a lead of {} ms)",
            args.max_count,
            layout.name(),
            layout.max_sequence() + 1,
            layout.tick_ms(),
            DEFAULT_MAX_LEAD.as_millis()
        )));
    }
    let per_connection = budget::per_connection(args.max_count);
    let budget = Arc::new(budget::Budget::striped(
        usize::try_from(args.response_budget).unwrap_or(usize::MAX) << 20,
    ));
    if budget.batch_share() < per_connection {
        return Err(usage(format!(
            "--response-budget {} MiB is too small for --max-count {}: its share for large \
             answers ({} KiB) must hold the largest one ({} KiB)",
            args.response_budget,
            args.max_count,
            budget.batch_share() / 1024,
            per_connection.div_ceil(1024)
        )));
    }
    let token = token(args)?;
    let (tls, expiry) = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => {
            let (acceptor, expiry) = tls::acceptor(cert, key)?;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
            if let Some(warning) = expiry.as_ref().and_then(|e| e.warning(cert, now)) {
                eprintln!("monoflake: warning: {warning}");
            }
            (Some(acceptor), expiry)
        }
        _ => (None, None),
    };
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = args.threads {
        runtime.worker_threads(usize::from(n));
    }
    let runtime = runtime
        .enable_all()
        .thread_name("monoflake-serve")
        .build()
        .map_err(|e| runtime_failure(format!("cannot start the I/O runtime: {e}")))?;
    let signals = {
        let _inside = runtime.enter();
        lifecycle::Signals::watch().map_err(runtime_failure)?
    };
    // Listen first: a port in use fails before any node is claimed.
    let http_listener = runtime
        .block_on(lifecycle::bind(args.listen, "HTTP"))
        .map_err(runtime_failure)?;
    let grpc_listener = match args.grpc_listen {
        Some(addr) => Some(
            runtime
                .block_on(lifecycle::bind(addr, "gRPC"))
                .map_err(runtime_failure)?,
        ),
        None => None,
    };
    let source = issue::Source {
        store: open_store(&args.node_args)?,
        layout,
        request,
        trust_reservation: args.node_args.trust_reservation,
    };
    let metrics = Arc::new(metrics::Metrics::default());
    if let Some(e) = &expiry {
        metrics.tls_expires_at(e.not_after);
    }
    let issuer = Arc::new(issue::Issuer::new(
        source,
        args.max_count,
        max_wait,
        Arc::clone(&metrics) as Arc<dyn issue::Observer>,
    )?);
    let app = Arc::new(http::App {
        issuer: Arc::clone(&issuer),
        exposition: metrics::Exposition::new(
            Arc::clone(&issuer),
            Arc::clone(&metrics),
            Arc::clone(&budget),
        ),
        metrics,
        budget,
        token,
        draining: Arc::new(AtomicBool::new(false)),
        health: tonic_health::server::HealthReporter::new(),
    });
    let scheme = if tls.is_some() { "https" } else { "http" };
    for addr in std::iter::once(args.listen).chain(args.grpc_listen) {
        warn_if_exposed(addr, app.token.is_some(), tls.is_some());
    }
    let mut endpoints = Vec::new();
    let local = |l: &tokio::net::TcpListener| {
        l.local_addr()
            .map_or_else(|e| e.to_string(), |a| a.to_string())
    };
    eprintln!(
        "monoflake: node {} ({} layout) serving HTTP on {scheme}://{}",
        issuer.node(),
        issuer.layout().name(),
        local(&http_listener)
    );
    endpoints.push(lifecycle::Endpoint {
        listener: http_listener,
        router: http::router(Arc::clone(&app)),
        direct: Some(Arc::clone(&app)),
    });
    if let Some(listener) = grpc_listener {
        eprintln!(
            "monoflake: node {} serving gRPC monoflake.v1.Ids on {}://{}",
            issuer.node(),
            scheme,
            local(&listener)
        );
        endpoints.push(lifecycle::Endpoint {
            listener,
            router: grpc::router(Arc::clone(&app)).map_err(runtime_failure)?,
            direct: None,
        });
    }
    let limits = listener::Limits {
        max_connections: usize::try_from(args.max_connections).unwrap_or(usize::MAX),
        max_streams: args.max_streams,
        timeouts: exchange::Timeouts {
            // A connection that never completes a request is idle from its start.
            handshake: Duration::from_secs_f64(args.handshake_timeout).min(idle),
            idle,
        },
        drain: Duration::from_secs_f64(args.drain_timeout),
        per_connection,
    };
    let times = lifecycle::Times {
        reclaim_after: Duration::from_secs_f64(args.reclaim_after),
        grace: Duration::from_secs_f64(args.drain_grace),
    };
    let served = runtime.block_on(lifecycle::run(
        Arc::clone(&app),
        endpoints,
        tls,
        limits,
        times,
        signals,
    ));
    // Connections still open after the drain are cut here; nothing then holds the generator.
    runtime.shutdown_timeout(Duration::from_millis(100));
    drop(app);
    let node = issuer.node();
    let released = Arc::into_inner(issuer).and_then(issue::Issuer::release);
    served.map_err(runtime_failure)?;
    match released {
        Some(result) => {
            result?;
            eprintln!("monoflake: node {node} released");
        }
        // A claim still under way on a blocking thread: its handle releases on drop.
        None => eprintln!("monoflake: node {node} is released when its last user ends"),
    }
    Ok(())
}
