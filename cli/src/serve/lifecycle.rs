//! Starting and stopping: the runtime, the listeners, the signals, the drain, the release.
//!
//! SIGTERM or SIGINT: `/readyz` turns 503 and the stop drains for `--drain-grace` (the
//! listeners still accept; every HTTP/1 answer closes its connection, HTTP/2 connections get
//! GOAWAY), then the listeners close, requests in flight finish (for at most the drain
//! timeout), then the lease is released — the final reservation written and the node freed,
//! so a new `serve` on the same store gets it at once — and the process exits 0. A second
//! signal during the grace ends it at once. `drain.rs` says why each step loses nothing a
//! client sent.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use axum::Router;
use monoflake::Error;
use tokio::net::TcpListener;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tonic_health::ServingStatus;

use super::drain::Phase;
use super::grpc::SERVICE_NAME;
use super::http::App;
use super::listener::{self, Limits};

/// A bound listener and what it serves.
pub struct Endpoint {
    pub listener: TcpListener,
    pub router: Router,
    /// The app, when `router` is the HTTP API's: `GET /v1/id` is then answered directly.
    pub direct: Option<Arc<App>>,
}

/// Binds `addr`, or says why not.
pub async fn bind(addr: SocketAddr, what: &str) -> Result<TcpListener, String> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen for {what} on {addr}: {e}"))
}

/// SIGTERM and SIGINT, caught from before the node is claimed: a stop that arrives while the
/// claim is under way is kept, and served (drain, release) as soon as serving starts.
pub struct Signals {
    terminate: Signal,
    interrupt: Signal,
}

impl Signals {
    /// Must run inside the runtime.
    pub fn watch() -> Result<Signals, String> {
        Ok(Signals {
            terminate: signal(SignalKind::terminate())
                .map_err(|e| format!("cannot watch for SIGTERM: {e}"))?,
            interrupt: signal(SignalKind::interrupt())
                .map_err(|e| format!("cannot watch for SIGINT: {e}"))?,
        })
    }
}

/// Serves every endpoint until SIGTERM or SIGINT, then drains them.
pub async fn run(
    app: Arc<App>,
    endpoints: Vec<Endpoint>,
    tls: Option<TlsAcceptor>,
    limits: Limits,
    times: Times,
    signals: Signals,
) -> Result<(), String> {
    let (phase_tx, phase_rx) = watch::channel(Phase::Serving);
    let Signals {
        mut terminate,
        mut interrupt,
    } = signals;
    // The health statuses are set before any listener serves: a health check that reaches a
    // listener as soon as it runs (its socket was bound, and accepting into its backlog, before
    // `run`) must find them, not "service not registered".
    report_health(&app, app.issuer.ready().is_ok()).await;
    let mut tasks = tokio::task::JoinSet::new();
    for e in endpoints {
        tasks.spawn(listener::serve(
            e.listener,
            e.router,
            e.direct,
            tls.clone(),
            limits.clone(),
            Arc::clone(&app.metrics),
            Arc::clone(&app.budget),
            Arc::clone(&app.draining),
            phase_rx.clone(),
        ));
    }
    let supervisor = tokio::spawn(supervise(Arc::clone(&app), times.reclaim_after));
    let signal = tokio::select! {
        _ = terminate.recv() => "SIGTERM",
        _ = interrupt.recv() => "SIGINT",
    };
    eprintln!(
        "monoflake: {signal}: draining, then releasing node {}",
        app.issuer.node()
    );
    // Ordering: Relaxed; each connection reads the flag on its own (answers after this carry
    // `Connection: close`), and the phase sent below wakes every connection's task.
    app.draining.store(true, Ordering::Relaxed);
    supervisor.abort();
    report_health(&app, false).await;
    let _ = phase_tx.send(Phase::Draining);
    tokio::select! {
        () = tokio::time::sleep(times.grace) => {}
        _ = terminate.recv() => eprintln!("monoflake: SIGTERM again: closing now"),
        _ = interrupt.recv() => eprintln!("monoflake: SIGINT again: closing now"),
    }
    let _ = phase_tx.send(Phase::Closing);
    while tasks.join_next().await.is_some() {}
    Ok(())
}

/// The service's own timings.
#[derive(Clone, Copy, Debug)]
pub struct Times {
    /// After a lost lease, how long before a node is claimed again.
    pub reclaim_after: Duration,
    /// How long a stop drains before the listeners close (`--drain-grace`).
    pub grace: Duration,
}

/// Sets the gRPC health statuses (the server's, `""`, and `monoflake.v1.Ids`).
async fn report_health(app: &App, serving: bool) {
    let status = if serving {
        ServingStatus::Serving
    } else {
        ServingStatus::NotServing
    };
    for name in ["", SERVICE_NAME] {
        app.health.set_service_status(name, status).await;
    }
}

/// Every quarter second (at most): checks that issuing works, keeps the gRPC health status in
/// step with `/readyz`, and after a lost lease waits `after`, then claims a node again (off
/// the runtime's threads: claiming is store I/O), and so on while claiming fails.
async fn supervise(app: Arc<App>, after: Duration) {
    let check = Duration::from_millis(250).min(after);
    let mut lost_since: Option<Instant> = None;
    let mut serving = true;
    loop {
        tokio::time::sleep(check).await;
        let ready = app.issuer.ready();
        if ready.is_ok() != serving {
            serving = ready.is_ok();
            report_health(&app, serving).await;
        }
        if !matches!(ready, Err(Error::LeaseLost { .. })) {
            lost_since = None;
            continue;
        }
        let since = *lost_since.get_or_insert_with(Instant::now);
        if since.elapsed() < after {
            continue;
        }
        let issuer = Arc::clone(&app.issuer);
        match tokio::task::spawn_blocking(move || issuer.reclaim()).await {
            Ok(Ok(node)) => {
                eprintln!("monoflake: the lease was lost; serving again from node {node}");
                lost_since = None;
            }
            Ok(Err(e)) => {
                eprintln!("monoflake: the lease was lost and no node can be claimed yet: {e}");
                lost_since = Some(Instant::now());
            }
            Err(_) => {}
        }
    }
}
