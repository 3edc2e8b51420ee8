//! One connection's life: its TLS handshake, hyper serving it, and the watch that closes it
//! when its deadline passes (`exchange.rs` says when), when the listener sheds it, or when a
//! stop drains it.

use std::sync::Arc;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};
use tokio_rustls::TlsAcceptor;

use super::exchange::{Conn, Late};
use super::http::App;
use super::metrics::{Closed, Metrics};
use super::tracked::Tracked;

/// What every connection of a listener shares.
pub struct Shared {
    pub router: Router,
    /// The app, when `router` is the HTTP API's (`tracked.rs` answers `GET /v1/id` itself).
    pub direct: Option<Arc<App>>,
    pub builder: Builder<TokioExecutor>,
    pub tls: Option<TlsAcceptor>,
    pub metrics: Arc<Metrics>,
}

/// Serves `stream` until it ends, and says why it did.
pub async fn serve(
    stream: TcpStream,
    conn: Arc<Conn>,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) -> Closed {
    let Some(acceptor) = &shared.tls else {
        return drive(stream, conn, &shared, stop).await;
    };
    let (deadline, _) = conn.deadline();
    let tls = tokio::select! {
        biased;
        handshake = acceptor.accept(stream) => match handshake {
            Ok(tls) => tls,
            Err(_) => return Closed::Tls,
        },
        () = sleep_until(deadline) => return Closed::Handshake,
        () = conn.shed_asked() => return Closed::Shed,
        () = stopped(&mut stop) => return Closed::Drained,
    };
    drive(tls, conn, &shared, stop).await
}

/// hyper on `io`, watched.
async fn drive<I>(
    io: I,
    conn: Arc<Conn>,
    shared: &Shared,
    mut stop: watch::Receiver<bool>,
) -> Closed
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = Tracked::new(
        shared.router.clone(),
        shared.direct.clone(),
        Arc::clone(&conn),
        Arc::clone(&shared.metrics),
    );
    let served = shared.builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(served);
    let mut draining = false;
    loop {
        let (deadline, _) = conn.deadline();
        tokio::select! {
            biased;
            result = served.as_mut() => {
                return match result {
                    _ if draining => Closed::Drained,
                    Ok(()) => Closed::Done,
                    Err(e) if is_malformed(e.as_ref()) => Closed::Malformed,
                    Err(_) => Closed::Done,
                };
            }
            // The deadline only ever moves later: look again when it seems to pass.
            () = sleep_until(deadline) => {
                // Why it passed is asked now: a request may have arrived meanwhile (a late
                // wake-up can find that one overdue too).
                let (deadline, late) = conn.deadline();
                if deadline <= Instant::now() {
                    return match late {
                        Late::Handshake => Closed::Handshake,
                        Late::Idle => Closed::Idle,
                        Late::Overdue => Closed::Overdue,
                    };
                }
            }
            () = conn.shed_asked() => {
                if conn.is_idle() {
                    return Closed::Shed;
                }
                // A request arrived since the listener chose this one: serve it.
                conn.keep();
            }
            () = stopped(&mut stop), if !draining => {
                // HTTP/1 closes after the request in flight, HTTP/2 sends GOAWAY.
                draining = true;
                served.as_mut().graceful_shutdown();
            }
        }
    }
}

/// Returns once `stop` turns true (or its sender is gone).
pub async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Whether a connection failed because what came was not HTTP, or HTTP hyper refuses (it
/// answers 400 or 431 itself, with an empty body, and closes).
fn is_malformed(e: &(dyn std::error::Error + Send + Sync + 'static)) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(h) = err.downcast_ref::<hyper::Error>() {
            return h.is_parse() || h.is_parse_too_large() || h.is_parse_status();
        }
        source = err.source();
    }
    false
}
