//! The service every connection runs: the router, with each request tracked as an
//! [`Exchange`] from its arrival until its answer's last byte has left, and each answer
//! counted by status, whatever layer answered (a handler, axum's own rejections, tonic).
//! `GET /v1/id`, the hot route, is answered without the router (`Tracked::direct`).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, Request, Response, Version};
use axum::routing::future::RouteFuture;
use bytes::{Buf, Bytes};
use http_body::{Frame, SizeHint};
use tower::Service;

use super::exchange::{Conn, Exchange};
use super::http::{self, App};
use super::metrics::Metrics;

/// The router, for one connection.
#[derive(Clone, Debug)]
pub struct Tracked {
    router: Router,
    /// The app, on the listener whose router serves `GET /v1/id`: that route is answered
    /// directly, through the same code as the router's handler (`http::id_now`), without
    /// the router's per-request work (its boxed service clone, the handler's boxed future,
    /// the request extension carrying the exchange).
    direct: Option<Arc<App>>,
    conn: Arc<Conn>,
    metrics: Arc<Metrics>,
}

impl Tracked {
    pub fn new(
        router: Router,
        direct: Option<Arc<App>>,
        conn: Arc<Conn>,
        metrics: Arc<Metrics>,
    ) -> Tracked {
        Tracked {
            router,
            direct,
            conn,
            metrics,
        }
    }
}

impl<B> hyper::service::Service<Request<B>> for Tracked
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response<TrackedBody>;
    type Error = Infallible;
    type Future = TrackedFuture;

    fn call(&self, mut request: Request<B>) -> TrackedFuture {
        // One clock read for both the connection's deadline and the latency histogram.
        let arrival = std::time::Instant::now();
        let exchange = Arc::new(Exchange::begin_at(
            &self.conn,
            tokio::time::Instant::from_std(arrival),
        ));
        let http1 = request.version() < Version::HTTP_2;
        self.conn.arrived(!http1);
        let answer = match &self.direct {
            // What the router would route to `http::id`: `GET /v1/id` (a `HEAD` goes through
            // the router, which strips the body). The request's body is never read, as there.
            Some(app) if request.method() == Method::GET && request.uri().path() == "/v1/id" => {
                match http::id_now(
                    app,
                    request.method(),
                    request.uri(),
                    request.headers(),
                    arrival,
                ) {
                    Ok(response) => Answer::Ready(Some(response)),
                    Err(wait) => Answer::Waiting(Box::pin(http::id_later(Arc::clone(app), wait))),
                }
            }
            _ => {
                request.extensions_mut().insert(Arc::clone(&exchange));
                // The router is always ready (axum's `poll_ready` returns `Ready`).
                Answer::Routed(self.router.clone().call(request))
            }
        };
        TrackedFuture {
            answer,
            exchange: Some(exchange),
            metrics: Arc::clone(&self.metrics),
            http1,
        }
    }
}

const CLOSE: HeaderValue = HeaderValue::from_static("close");

/// Where an answer comes from.
enum Answer {
    /// The router.
    Routed(RouteFuture<Infallible>),
    /// `GET /v1/id`, answered at once.
    Ready(Option<Response<Body>>),
    /// `GET /v1/id`, waiting for the generator.
    Waiting(Pin<Box<dyn Future<Output = Response<Body>> + Send>>),
}

/// The answer to come, and the request it answers.
pub struct TrackedFuture {
    answer: Answer,
    exchange: Option<Arc<Exchange>>,
    metrics: Arc<Metrics>,
    /// The request came over HTTP/1.x: during a stop, its answer closes the connection.
    http1: bool,
}

impl Future for TrackedFuture {
    type Output = Result<Response<TrackedBody>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // `RouteFuture` is `Unpin` (it boxes what it runs), so the whole future is.
        let this = self.get_mut();
        let mut response = match &mut this.answer {
            Answer::Routed(inner) => {
                let Ok(response) = ready!(Pin::new(inner).poll(cx));
                response
            }
            Answer::Ready(response) => response
                .take()
                .expect("a TrackedFuture is polled to its answer once"),
            Answer::Waiting(inner) => ready!(inner.as_mut().poll(cx)),
        };
        this.metrics
            .answered(code_of(response.status().as_u16(), response.headers()));
        let exchange = this
            .exchange
            .take()
            .expect("a TrackedFuture is polled to its answer once");
        if this.http1 && exchange.conn().draining() {
            // A stop began: the client is told, with this answer, to send its next request on
            // a new connection (hyper closes this one once the answer is written). Without the
            // header the client could send again on a connection the stop is about to close.
            response
                .headers_mut()
                .insert(axum::http::header::CONNECTION, CLOSE);
        }
        Poll::Ready(Ok(response.map(|inner| {
            let body = TrackedBody { inner, exchange };
            // An empty answer (a HEAD, a 204, a trailers-only gRPC error) is complete as it
            // is: hyper may never poll it.
            if http_body::Body::is_end_stream(&body.inner) {
                body.exchange.finish();
            }
            body
        })))
    }
}

/// The status an answer is counted under: its HTTP status, or for a gRPC answer whose status
/// is in its headers (an error: tonic sends those trailers-only), the HTTP status of the same
/// meaning. A gRPC answer whose status comes in its trailers counts as 200.
fn code_of(status: u16, headers: &HeaderMap) -> u16 {
    let grpc = headers
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
    if !grpc || status != 200 {
        return status;
    }
    match headers
        .get("grpc-status")
        .map(axum::http::HeaderValue::as_bytes)
    {
        None | Some(b"0") => 200,
        // INVALID_ARGUMENT, OUT_OF_RANGE
        Some(b"3" | b"11") => 400,
        Some(b"16") => 401,
        Some(b"12") => 404,
        Some(b"8" | b"14") => 503,
        Some(_) => 500,
    }
}

/// An answer's body whose chunks keep their request in flight until they are dropped.
pub struct TrackedBody {
    inner: Body,
    exchange: Arc<Exchange>,
}

/// A piece of an answer, as hyper takes it: the bytes, and their request, kept in flight
/// (and its bytes held in the budget) until hyper has written them to the socket — or copied
/// them into its own buffer to write next — and dropped the piece. The same as wrapping the
/// bytes with `Bytes::from_owner`, without that allocation per piece.
pub struct Chunk {
    bytes: Bytes,
    _exchange: Arc<Exchange>,
}

impl Buf for Chunk {
    fn remaining(&self) -> usize {
        self.bytes.remaining()
    }

    fn chunk(&self) -> &[u8] {
        self.bytes.chunk()
    }

    fn advance(&mut self, n: usize) {
        self.bytes.advance(n);
    }
}

impl http_body::Body for TrackedBody {
    type Data = Chunk;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Chunk>, axum::Error>>> {
        let this = self.get_mut();
        let frame = match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
            None => {
                this.exchange.finish();
                return Poll::Ready(None);
            }
            Some(Err(e)) => return Poll::Ready(Some(Err(e))),
            Some(Ok(frame)) => frame.map_data(|bytes| {
                this.exchange.count(bytes.len());
                Chunk {
                    bytes,
                    _exchange: Arc::clone(&this.exchange),
                }
            }),
        };
        if this.inner.is_end_stream() {
            this.exchange.finish();
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::exchange::Conn;

    #[tokio::test]
    async fn a_chunk_keeps_its_request_in_flight_and_its_bytes_held_until_dropped() {
        let conn = Conn::for_tests();
        let mut body = TrackedBody {
            inner: Body::from("{\"id\":\"1\"}\n"),
            exchange: Arc::new(Exchange::begin(&conn)),
        };
        let frame = std::future::poll_fn(|cx| http_body::Body::poll_frame(Pin::new(&mut body), cx))
            .await
            .expect("a frame")
            .expect("no error");
        let mut chunk = frame.into_data().ok().expect("data");
        drop(body);
        assert!(!conn.is_idle(), "the piece is not written yet");
        assert_eq!(conn.held(), 11);
        assert_eq!(chunk.chunk(), b"{\"id\":\"1\"}\n");
        chunk.advance(5);
        assert_eq!((chunk.remaining(), chunk.chunk()), (6, &b":\"1\"}\n"[..]));
        drop(chunk);
        assert!(conn.is_idle());
        assert_eq!(conn.held(), 0);
    }

    #[test]
    fn grpc_errors_count_under_their_http_meaning() {
        let mut h = HeaderMap::new();
        assert_eq!(code_of(404, &h), 404);
        h.insert("content-type", "application/grpc".parse().unwrap());
        assert_eq!(code_of(200, &h), 200);
        for (grpc, http) in [
            ("0", 200),
            ("3", 400),
            ("16", 401),
            ("12", 404),
            ("14", 503),
        ] {
            h.insert("grpc-status", grpc.parse().unwrap());
            assert_eq!(code_of(200, &h), http, "grpc-status {grpc}");
        }
    }
}
