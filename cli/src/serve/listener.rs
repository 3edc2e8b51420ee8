//! Serving one listener: the accept loop, the connection limit, idle and handshake timeouts,
//! optional TLS, and a graceful stop.
//!
//! * At most `max_connections` connections are served at once; the next ones wait in the
//!   kernel's backlog until one closes, so a flood cannot exhaust file descriptors or memory.
//! * A connection that moves no byte for `idle` (before its TLS handshake, between requests,
//!   or while a reader stalls) is closed, so idle or slow clients give their slot back.
//! * HTTP/1.1 and HTTP/2 (h2c by prior knowledge, or h2 by ALPN under TLS) on every
//!   listener: gRPC needs HTTP/2, `curl` and `wrk` speak HTTP/1.1.
//! * On stop the loop stops accepting; open connections finish the request in flight (HTTP/1
//!   closes after it, HTTP/2 sends GOAWAY) and are cut after the drain timeout.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::time::{Instant, Sleep};
use tokio_rustls::TlsAcceptor;

use super::metrics::Metrics;

/// How one listener treats its connections.
#[derive(Clone, Debug)]
pub struct Limits {
    pub max_connections: usize,
    pub idle: Duration,
    pub drain: Duration,
}

/// Serves `router` on `listener` until `stop` turns true, then drains.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    tls: Option<TlsAcceptor>,
    limits: Limits,
    metrics: Arc<Metrics>,
    mut stop: watch::Receiver<bool>,
) {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.idle)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(256);
    let builder = Arc::new(builder);
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    loop {
        let permit = tokio::select! {
            biased;
            () = stopped(&mut stop) => break,
            p = Arc::clone(&permits).acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let (stream, _) = tokio::select! {
            biased;
            () = stopped(&mut stop) => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors, a connection reset before accept: pause,
                    // never spin, never stop serving.
                    eprintln!("monoflake: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let watcher = graceful.watcher();
        let builder = Arc::clone(&builder);
        let service = TowerToHyperService::new(router.clone());
        let tls = tls.clone();
        let metrics = Arc::clone(&metrics);
        let idle = limits.idle;
        tokio::spawn(async move {
            metrics.connection_opened();
            let io = Idle::new(stream, idle);
            let timed_out = match tls {
                None => {
                    let conn = builder.serve_connection(TokioIo::new(io), service);
                    is_timeout(watcher.watch(conn.into_owned()).await)
                }
                Some(acceptor) => match acceptor.accept(io).await {
                    Ok(io) => {
                        let conn = builder.serve_connection(TokioIo::new(io), service);
                        is_timeout(watcher.watch(conn.into_owned()).await)
                    }
                    Err(e) => e.kind() == io::ErrorKind::TimedOut,
                },
            };
            if timed_out {
                metrics.connection_timed_out();
            }
            metrics.connection_closed();
            drop(permit);
        });
    }
    drop(listener);
    // Stop accepting first (above), then let the connections finish what is in flight.
    let _ = tokio::time::timeout(limits.drain, graceful.shutdown()).await;
}

/// Returns once `stop` turns true (or its sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Whether a connection ended because it stayed idle.
fn is_timeout(result: Result<(), Box<dyn std::error::Error + Send + Sync>>) -> bool {
    let Err(e) = result else { return false };
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e.as_ref());
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<io::Error>() {
            return io.kind() == io::ErrorKind::TimedOut;
        }
        if let Some(h) = err.downcast_ref::<hyper::Error>()
            && h.is_timeout()
        {
            return true;
        }
        source = err.source();
    }
    false
}

/// A stream that fails with `TimedOut` once no byte has moved either way for `idle`.
///
/// The timer is only looked at when a read or write would wait, and re-armed lazily (when it
/// fires) from the time of the last byte, so a busy connection pays one clock read per read or
/// write and no timer update.
struct Idle {
    stream: TcpStream,
    idle: Duration,
    last: Instant,
    timer: Pin<Box<Sleep>>,
}

impl Idle {
    fn new(stream: TcpStream, idle: Duration) -> Self {
        let now = Instant::now();
        Idle {
            stream,
            idle,
            last: now,
            timer: Box::pin(tokio::time::sleep_until(now + idle)),
        }
    }

    /// Called when the stream would wait: `Ready(Err)` once the connection has been idle too
    /// long, otherwise arms the timer to wake this task then.
    fn poll_idle(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        loop {
            ready!(self.timer.as_mut().poll(cx));
            // The timer was set from an earlier byte: re-arm it from the last one.
            let due = self.last + self.idle;
            if Instant::now() >= due {
                return Poll::Ready(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no byte moved for {} ms", self.idle.as_millis()),
                ));
            }
            self.timer.as_mut().reset(due);
        }
    }

    fn moved(&mut self) {
        self.last = Instant::now();
    }
}

impl AsyncRead for Idle {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.stream).poll_read(cx, buf) {
            Poll::Pending => this.poll_idle(cx).map(Err),
            ready => {
                this.moved();
                ready
            }
        }
    }
}

impl AsyncWrite for Idle {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.stream).poll_write(cx, buf) {
            Poll::Pending => this.poll_idle(cx).map(Err),
            ready => {
                this.moved();
                ready
            }
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.stream).poll_write_vectored(cx, bufs) {
            Poll::Pending => this.poll_idle(cx).map(Err),
            ready => {
                this.moved();
                ready
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}
