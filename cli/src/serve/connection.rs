//! One connection's life: its TLS handshake, hyper serving it, and the watch that closes it
//! when its deadline passes (`exchange.rs` says when), when the listener sheds it, or when a
//! stop drains it (`drain.rs` says how).

use std::sync::Arc;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};
use tokio_rustls::TlsAcceptor;

use super::drain::Phase;
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
    phase: watch::Receiver<Phase>,
) -> Closed {
    let Some(acceptor) = &shared.tls else {
        return drive(stream, conn, &shared, phase).await;
    };
    let (deadline, _) = conn.deadline();
    // A stop does not cut a handshake: the connection was accepted, and its client may have
    // written its request already (the drain timeout still bounds it).
    let tls = tokio::select! {
        biased;
        handshake = acceptor.accept(stream) => match handshake {
            Ok(tls) => tls,
            Err(_) => return Closed::Tls,
        },
        () = sleep_until(deadline) => return Closed::Handshake,
        () = conn.shed_asked() => return Closed::Shed,
    };
    drive(tls, conn, &shared, phase).await
}

/// What woke a connection's watch.
enum Wake {
    Ended(Closed),
    Deadline,
    Shed,
    /// The stop moved on, or a request arrived during it.
    Stop,
}

/// hyper on `io`, watched.
async fn drive<I>(
    io: I,
    conn: Arc<Conn>,
    shared: &Shared,
    mut phase: watch::Receiver<Phase>,
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
    // Whether hyper was asked to shut the connection down gracefully.
    let mut shut = false;
    // Accepted before the stop began: its client must be told to move on while the stop
    // drains. One accepted during the drain was sent here by a balancer that still routes
    // here; a GOAWAY now would only send it back, so it is served until the listeners close.
    let before = *phase.borrow() == Phase::Serving;
    // Whether the stop's phases can still change.
    let mut watching = true;
    loop {
        let (deadline, _) = conn.deadline();
        let stopping = *phase.borrow() > Phase::Serving;
        let wake = tokio::select! {
            biased;
            result = served.as_mut() => Wake::Ended(match result {
                _ if *phase.borrow() > Phase::Serving => Closed::Drained,
                Ok(()) => Closed::Done,
                Err(e) if is_malformed(e.as_ref()) => Closed::Malformed,
                Err(_) => Closed::Done,
            }),
            // The deadline only ever moves later: look again when it seems to pass.
            () = sleep_until(deadline) => Wake::Deadline,
            () = conn.shed_asked() => Wake::Shed,
            changed = phase.changed(), if watching && !shut => {
                // The sender gone: no phase will come after this one.
                watching = changed.is_ok();
                Wake::Stop
            }
            () = conn.arrival(), if stopping && !shut => Wake::Stop,
        };
        match wake {
            Wake::Ended(why) => return why,
            Wake::Deadline => {
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
            Wake::Shed => {
                if conn.is_idle() {
                    return Closed::Shed;
                }
                // A request arrived since the listener chose this one: serve it.
                conn.keep();
            }
            Wake::Stop => {
                if !shut && shuts_down(*phase.borrow(), before, &conn) {
                    // HTTP/2: GOAWAY (every stream below its last ID served); HTTP/1: closed
                    // now when idle, else after the answer in flight.
                    shut = true;
                    served.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// Whether a connection is shut down now, in `phase` of a stop (`drain.rs`): an HTTP/2 one
/// accepted `before` the stop as soon as the stop begins (GOAWAY loses no stream), any other
/// once the listeners close and it has had a request. A connection that has had none may be
/// one whose client has written its first request, unread yet: closing it would lose that
/// request, so it is left until the request arrives (its answer then closes it) or the drain
/// timeout. (HTTP/1 connections need no shutdown while draining: each answer closes its
/// own.)
fn shuts_down(phase: Phase, before: bool, conn: &Conn) -> bool {
    match phase {
        Phase::Serving => false,
        Phase::Draining => before && conn.is_http2(),
        Phase::Closing => conn.had_request(),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::exchange::Exchange;

    #[tokio::test]
    async fn a_stop_shuts_down_http2_at_once_and_the_rest_after_a_request() {
        let fresh = Conn::for_tests();
        for before in [true, false] {
            assert!(!shuts_down(Phase::Serving, before, &fresh));
            assert!(!shuts_down(Phase::Draining, before, &fresh));
            // No request yet: one may be written and unread, closing would lose it.
            assert!(!shuts_down(Phase::Closing, before, &fresh));
        }
        let http1 = Conn::for_tests();
        drop(Exchange::begin(&http1));
        http1.arrived(false);
        // HTTP/1 needs no shutdown while draining: its answers say Connection: close.
        assert!(!shuts_down(Phase::Draining, true, &http1));
        assert!(shuts_down(Phase::Closing, false, &http1));
        let http2 = Conn::for_tests();
        drop(Exchange::begin(&http2));
        http2.arrived(true);
        assert!(shuts_down(Phase::Draining, true, &http2));
        // Accepted during the drain: served until the listeners close.
        assert!(!shuts_down(Phase::Draining, false, &http2));
        assert!(shuts_down(Phase::Closing, false, &http2));
    }
}
