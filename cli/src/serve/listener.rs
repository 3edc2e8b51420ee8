//! Serving one listener: the accept loop, the connection slots, the protocol limits, optional
//! TLS, and a graceful stop.
//!
//! * At most `max_connections` connections are served at once. When all slots are taken, a
//!   new connection takes the place of an idle one (`slots.rs`), so slow clients cannot lock
//!   new ones out; when every connection has a request in flight, new ones wait in the
//!   kernel's backlog.
//! * Every connection lives on a deadline (`exchange.rs`): its first request within the
//!   handshake timeout, then a completed request within the idle timeout; bytes trickled in
//!   are no progress.
//! * HTTP/1.1 and HTTP/2 (h2c by prior knowledge, or h2 by ALPN under TLS) on every
//!   listener: gRPC needs HTTP/2, `curl` and `wrk` speak HTTP/1.1. HTTP/2 serves at most
//!   `max_streams` streams per connection, with small receive windows (requests are tiny).
//! * A stop (`drain.rs`): while it drains, the loop still accepts; when it closes, the
//!   listener stops taking new connections without resetting those the kernel queued, and
//!   open connections finish the request in flight (HTTP/1 closes after it, HTTP/2 has had
//!   GOAWAY) and are cut after the drain timeout.

use std::io;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio_rustls::TlsAcceptor;

use super::budget::Budget;
use super::connection::{self, Shared};
use super::drain::{self, Phase, reached};
use super::exchange::{Conn, Timeouts};
use super::http::App;
use super::metrics::Metrics;
use super::slots::Slots;

/// The largest HTTP/1 request head (request line and headers); hyper answers 431 beyond.
pub const MAX_HEAD: usize = 16 * 1024;
/// What an HTTP/2 client may send before the server reads it: per stream, and per
/// connection (the protocol's smallest initial window).
const STREAM_WINDOW: u32 = 16 * 1024;
const CONNECTION_WINDOW: u32 = 65_535;

/// How one listener treats its connections.
#[derive(Clone, Debug)]
pub struct Limits {
    pub max_connections: usize,
    pub max_streams: u32,
    pub timeouts: Timeouts,
    pub drain: Duration,
    /// The most bytes one connection's answers may hold.
    pub per_connection: usize,
}

/// hyper's connection builder, with the limits.
fn builder(limits: &Limits) -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.timeouts.idle)
        .max_buf_size(MAX_HEAD)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.max_streams)
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW);
    builder
}

/// Serves `router` on `listener` until the stop closes it (`drain.rs`), then waits for its
/// connections to end, at most `limits.drain`.
#[allow(clippy::too_many_arguments)]
pub async fn serve(
    listener: TcpListener,
    router: Router,
    direct: Option<Arc<App>>,
    tls: Option<TlsAcceptor>,
    limits: Limits,
    metrics: Arc<Metrics>,
    budget: Arc<Budget>,
    draining: Arc<AtomicBool>,
    mut phase: watch::Receiver<Phase>,
) {
    let shared = Arc::new(Shared {
        router,
        direct,
        builder: builder(&limits),
        tls,
        metrics: Arc::clone(&metrics),
    });
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let slots = Arc::new(Slots::default());
    // Every connection's task holds a clone; `recv` ends once all are dropped.
    let (alive, mut ended) = mpsc::channel::<()>(1);
    let watched = phase.clone();
    let open = |stream: TcpStream, permit: Option<OwnedSemaphorePermit>| {
        let _ = stream.set_nodelay(true);
        let conn = Arc::new(Conn::new(
            limits.timeouts,
            limits.per_connection,
            Arc::clone(&budget),
            Arc::clone(&draining),
        ));
        let place = slots.enter(Arc::clone(&conn));
        let shared = Arc::clone(&shared);
        let metrics = Arc::clone(&metrics);
        let phase = watched.clone();
        let alive = alive.clone();
        tokio::spawn(async move {
            metrics.connection_opened();
            let why = connection::serve(stream, conn, shared, phase).await;
            metrics.connection_closed(why);
            drop(place);
            drop(permit);
            drop(alive);
        });
    };
    loop {
        let stream = tokio::select! {
            biased;
            () = reached(&mut phase, Phase::Closing) => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors, a connection reset before accept: pause,
                    // never spin, never stop serving.
                    eprintln!("monoflake: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let permit = match Arc::clone(&permits).try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                // Full: an idle connection makes room (its task closes it at once), or, when
                // every one is busy, the first to end does.
                slots.shed_one();
                tokio::select! {
                    biased;
                    // Served without a slot: the stop closes every connection soon.
                    () = reached(&mut phase, Phase::Closing) => {
                        open(stream, None);
                        break;
                    }
                    permit = Arc::clone(&permits).acquire_owned() => match permit {
                        Ok(permit) => permit,
                        Err(_) => break,
                    },
                }
            }
        };
        open(stream, Some(permit));
    }
    close(listener, |stream| open(stream, None)).await;
    drop(alive);
    // Then let the connections finish what is in flight, for at most the drain timeout.
    let _ = tokio::time::timeout(limits.drain, ended.recv()).await;
}

/// Closes `listener` without resetting a connection the kernel accepted for it: new attempts
/// are ignored first ([`drain::refuse_new`]), then every connection already queued, or whose
/// handshake completes within [`drain::SETTLE`], goes to `serve`.
async fn close(listener: TcpListener, mut serve: impl FnMut(TcpStream)) {
    let addr = listener
        .local_addr()
        .map_or_else(|e| e.to_string(), |a| a.to_string());
    if let Err(e) = drain::refuse_new(&listener) {
        eprintln!(
            "monoflake: cannot hold back new connections on {addr} ({e}): the ones the \
             kernel has queued are reset"
        );
    } else {
        loop {
            match tokio::time::timeout(drain::SETTLE, listener.accept()).await {
                Ok(Ok((stream, _))) => serve(stream),
                // A connection reset before it was accepted: look for the next.
                Ok(Err(e))
                    if matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
                    ) => {}
                // Out of file descriptors: what is left in the queue cannot be taken.
                Ok(Err(e)) => {
                    eprintln!("monoflake: accept failed while closing {addr}: {e}");
                    break;
                }
                Err(_) => break,
            }
        }
    }
    drop(listener);
    eprintln!("monoflake: no longer accepting on {addr}");
}
