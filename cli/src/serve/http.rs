//! The HTTP API: routes, handlers, JSON and text bodies, status codes.
//!
//! IDs travel as decimal strings in JSON (JavaScript loses precision above 2^53), or as bare
//! decimal lines with `Accept: text/plain`. Errors are `{"error":"…"}`: 400 for a bad count or
//! ID, 401 for a missing or wrong token, 404 for an unknown path, 405 for a method other than
//! GET, 503 with `Retry-After` when the generator cannot issue. Every JSON body ends with a
//! newline. Every answer of an ID-issuing route carries `Cache-Control: no-store`: a cache
//! between caller and service must never hand one ID to two callers. `GET /openapi.json`
//! describes all of it (OpenAPI 3.1, `openapi.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get};
use monoflake::Id;

use super::auth::Token;
use super::batch::{Batch, Format};
use super::budget::{self, Budget};
use super::exchange::{Exchange, Share};
use super::issue::{ECHO, Issuer, Refusal, echo};
use super::metrics::{Endpoint, Exposition, Metrics};
use crate::parts::json_object;

/// What every handler shares.
#[derive(Debug)]
pub struct App {
    pub issuer: Arc<Issuer>,
    /// The service's counters (the issuer reports its own events to them as an `Observer`).
    pub metrics: Arc<Metrics>,
    pub exposition: Exposition,
    /// The bytes answers hold, server-wide (each connection has its own share).
    pub budget: Arc<Budget>,
    pub token: Option<Token>,
    /// Set when a stop began: `/readyz` answers 503 so load balancers move away, and every
    /// HTTP/1 answer carries `Connection: close` (each connection holds a clone: `drain.rs`).
    pub draining: Arc<AtomicBool>,
    /// The gRPC health service's statuses (`grpc.health.v1.Health`), kept in step with
    /// `/readyz` by the supervisor (`lifecycle.rs`).
    pub health: tonic_health::server::HealthReporter,
}

type Shared = State<Arc<App>>;

/// One HTTP route. [`Route::ALL`] is the one table of what the router serves: the router is
/// built from it, the 404 answer lists it, and a test holds `openapi.json` to it (every route
/// there, nothing else).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    Id,
    Ids,
    Decode,
    Healthz,
    Readyz,
    Metrics,
    OpenApi,
}

impl Route {
    /// Every route the router serves, in the order the 404 answer lists them.
    pub const ALL: [Route; 7] = [
        Route::Id,
        Route::Ids,
        Route::Decode,
        Route::Healthz,
        Route::Readyz,
        Route::Metrics,
        Route::OpenApi,
    ];

    /// The path as axum and OpenAPI both write it (`{id}`: a path parameter).
    pub const fn path(self) -> &'static str {
        match self {
            Route::Id => "/v1/id",
            Route::Ids => "/v1/ids",
            Route::Decode => "/v1/decode/{id}",
            Route::Healthz => "/healthz",
            Route::Readyz => "/readyz",
            Route::Metrics => "/metrics",
            Route::OpenApi => "/openapi.json",
        }
    }

    /// How the 404 answer names the route.
    const fn usage(self) -> &'static str {
        match self {
            Route::Ids => "/v1/ids?count=N",
            other => other.path(),
        }
    }

    /// The handler, for `GET` and (axum's `get` serves it too) `HEAD`: the methods [`ALLOW`]
    /// names.
    fn handler(self) -> MethodRouter<Arc<App>> {
        match self {
            Route::Id => get(id),
            Route::Ids => get(ids),
            Route::Decode => get(decode),
            Route::Healthz => get(healthz),
            Route::Readyz => get(readyz),
            Route::Metrics => get(metrics),
            Route::OpenApi => get(openapi),
        }
    }
}

/// The methods every route serves, as the 405 answer's `Allow` header names them.
pub const ALLOW: &str = "GET, HEAD";

pub fn router(app: Arc<App>) -> Router {
    Route::ALL
        .into_iter()
        .fold(Router::new(), |router, route| {
            router.route(route.path(), route.handler())
        })
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(app)
}

const JSON: HeaderValue = HeaderValue::from_static("application/json");
const TEXT: HeaderValue = HeaderValue::from_static("text/plain; charset=utf-8");
const OPENMETRICS: HeaderValue =
    HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8");
const NO_STORE: HeaderValue = HeaderValue::from_static("no-store");

fn body(status: StatusCode, kind: HeaderValue, text: impl Into<Body>) -> Response {
    let mut response = Response::new(text.into());
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, kind);
    response
}

/// A JSON answer: `object` (one JSON value, no line end) and a newline, so that a shell
/// prompt or a line-reading client finds the body's end.
fn json(status: StatusCode, object: impl std::fmt::Display) -> Response {
    body(status, JSON, format!("{object}\n"))
}

/// `{"error":"…"}` with `status`.
pub fn error(status: StatusCode, message: &str) -> Response {
    json(status, serde_json::json!({ "error": message }))
}

/// Marks an answer of an ID-issuing route as never to be stored by a cache: a cache that
/// kept a `GET /v1/id` answer (Varnish keeps a 200 for 120 s by default) would hand one ID
/// to many callers. Set on every answer of those routes, refusals too, so that no cache
/// rule has to tell them apart.
fn no_store(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, NO_STORE);
    response
}

fn refused(refusal: Refusal) -> Response {
    match refusal {
        Refusal::BadInput(message) => error(StatusCode::BAD_REQUEST, &message),
        Refusal::Unavailable {
            message,
            retry_after,
        } => {
            let mut response = json(
                StatusCode::SERVICE_UNAVAILABLE,
                serde_json::json!({
                    "error": message,
                    "retry_after_ms": u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX),
                }),
            );
            response.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from(Refusal::retry_after_secs(retry_after)),
            );
            response
        }
    }
}

/// Records the handler's time in the metrics (the listener counts the answer by status).
fn finish(app: &App, endpoint: Endpoint, start: Instant, response: Response) -> Response {
    app.metrics.observe(endpoint, start.elapsed());
    response
}

/// Reserves `n` bytes for the answer to `request`, or answers 503 when the connection's or
/// the server's budget cannot hold them (`budget.rs`). Small answers reserve nothing: they
/// are counted as they are sent.
fn reserve(app: &App, request: &Request, n: usize, share: Share) -> Option<Response> {
    if n <= budget::SMALL {
        return None;
    }
    let exchange = request.extensions().get::<Arc<Exchange>>()?;
    let over = exchange.reserve(n, share).err()?;
    app.metrics.over_budget();
    Some(refused(Refusal::Unavailable {
        message: over.to_string(),
        retry_after: Duration::from_secs(1),
    }))
}

/// A 401 answer unless the request carries the token (when there is one).
fn unauthorized(app: &App, headers: &HeaderMap) -> Option<Response> {
    match &app.token {
        None => None,
        Some(token) if token.admits(headers.get(header::AUTHORIZATION).map(|v| v.as_bytes())) => {
            None
        }
        Some(_) => {
            app.metrics.unauthorized();
            let mut response = error(
                StatusCode::UNAUTHORIZED,
                "a bearer token is required: Authorization: Bearer <token>",
            );
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"monoflake\""),
            );
            Some(response)
        }
    }
}

/// Whether the caller asked for bare decimal lines.
fn wants_text(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/plain") && !v.contains("application/json"))
}

async fn id(State(app): Shared, request: Request) -> Response {
    let start = Instant::now();
    match id_now(
        &app,
        request.method(),
        request.uri(),
        request.headers(),
        start,
    ) {
        Ok(response) => response,
        Err(wait) => id_later(app, wait).await,
    }
}

/// A `GET /v1/id` whose generator is at its lead limit (or refuses): what
/// [`id_later`] waits on.
pub struct IdWait {
    error: monoflake::Error,
    text: bool,
    start: Instant,
}

/// `GET` or `HEAD /v1/id`, answered without waiting: a refusal, a `HEAD`'s answer, or the ID
/// when the generator issues at once; otherwise the wait [`id_later`] finishes. The router's
/// handler and the listener's direct path (`tracked.rs`) both answer through it, so the two
/// cannot differ. `start` is when the request arrived, for the latency histogram.
pub fn id_now(
    app: &App,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    start: Instant,
) -> Result<Response, IdWait> {
    let response = match unauthorized(app, headers) {
        Some(r) => r,
        None => match no_query(uri.query()) {
            Err(r) => refused(r),
            Ok(()) if method == Method::HEAD => head(app),
            Ok(()) => match app.issuer.try_id() {
                Ok(id) => issued(app, id, wants_text(headers)),
                Err(error) => {
                    return Err(IdWait {
                        error,
                        text: wants_text(headers),
                        start,
                    });
                }
            },
        },
    };
    Ok(finish(app, Endpoint::Id, start, no_store(response)))
}

/// The rest of a `GET /v1/id` that [`id_now`] could not answer at once.
pub async fn id_later(app: Arc<App>, wait: IdWait) -> Response {
    let response = match app.issuer.wait_id(wait.error).await {
        Ok(id) => issued(&app, id, wait.text),
        Err(r) => refused(r),
    };
    finish(&app, Endpoint::Id, wait.start, no_store(response))
}

/// The answer carrying `id`: `{"id":"…"}` and a newline, or the bare decimal line, written
/// into one buffer of the right size (no formatting machinery, no regrowth).
fn issued(app: &App, id: Id, text: bool) -> Response {
    app.metrics.served(1);
    let mut digits = [0u8; 20];
    let mut n = id.as_u64();
    let mut at = digits.len();
    loop {
        at -= 1;
        // `n % 10` is below 10: the cast cannot truncate.
        #[allow(clippy::cast_possible_truncation)]
        let digit = (n % 10) as u8;
        digits[at] = b'0' + digit;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let digits = &digits[at..];
    // Exactly as long as the line, so that it becomes the body's bytes as it is.
    let mut line = Vec::with_capacity(digits.len() + if text { 1 } else { 10 });
    if text {
        line.extend_from_slice(digits);
        line.push(b'\n');
        return body(StatusCode::OK, TEXT, line);
    }
    line.extend_from_slice(b"{\"id\":\"");
    line.extend_from_slice(digits);
    line.extend_from_slice(b"\"}\n");
    body(StatusCode::OK, JSON, line)
}

/// The name of a URL query's first parameter, percent-decoded; `None` for no query, an
/// empty one, or one of `&`s only.
fn first_param(query: Option<&str>) -> Option<String> {
    form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .next()
        .map(|(key, _)| key.into_owned())
}

/// Refuses any query parameter on `/v1/id`, which takes none: `/v1/id?count=5` must not
/// quietly answer one ID to a caller who asked for five.
fn no_query(query: Option<&str>) -> Result<(), Refusal> {
    match first_param(query) {
        None => Ok(()),
        Some(key) if key == "count" => Err(Refusal::BadInput(
            "/v1/id takes no query parameter, got \"count\": ask /v1/ids?count=N for more \
             than one ID"
                .to_owned(),
        )),
        Some(key) => Err(Refusal::BadInput(format!(
            "/v1/id takes no query parameter, got {:?}",
            echo(&key)
        ))),
    }
}

/// The value of `count` in a query string, read as a URL query (`application/x-www-form-
/// urlencoded`: percent-decoded, `+` a space); `None` when absent. A `count` given twice is
/// refused rather than one of them picked: a cache or proxy in front might pick the other.
/// Any other parameter is refused too: a misspelt `cout=5` must not be read as no count, and
/// a parameter the service does not know is one it would silently ignore.
fn count_param(query: Option<&str>) -> Result<Option<String>, Refusal> {
    let mut found = None;
    for (key, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        if key != "count" {
            return Err(Refusal::BadInput(format!(
                "unknown query parameter {:?}: /v1/ids takes only count",
                echo(&key)
            )));
        }
        if found.is_some() {
            return Err(Refusal::BadInput(
                "count is given more than once: give it once".to_owned(),
            ));
        }
        found = Some(value.into_owned());
    }
    Ok(found)
}

/// What a `HEAD` request on an ID endpoint gets: the status a `GET` would get were issuing to
/// work now, and no ID (a `HEAD` is safe: it must not use up the layout's IDs).
fn head(app: &App) -> Response {
    match app.issuer.ready() {
        Ok(()) => body(StatusCode::OK, JSON, String::new()),
        Err(e) => unavailable(&e.to_string()),
    }
}

async fn ids(State(app): Shared, request: Request) -> Response {
    let start = Instant::now();
    let headers = request.headers();
    let count =
        count_param(request.uri().query()).and_then(|raw| app.issuer.parse_count(raw.as_deref()));
    let response = match unauthorized(&app, headers) {
        Some(r) => r,
        None => match count {
            Err(r) => refused(r),
            Ok(_) if request.method() == Method::HEAD => head(&app),
            Ok(n) => {
                let hold = budget::batch_hold(n);
                match reserve(&app, &request, hold, Share::Large) {
                    Some(over) => over,
                    None => match app.issuer.ids(n).await {
                        Err(r) => refused(r),
                        Ok(run) => {
                            app.metrics.served(n);
                            let (format, kind) = if wants_text(headers) {
                                (Format::Text, TEXT)
                            } else {
                                (Format::Json, JSON)
                            };
                            let mut response =
                                Response::new(Body::new(Batch::new(run, format, hold)));
                            response.headers_mut().insert(header::CONTENT_TYPE, kind);
                            response
                        }
                    },
                }
            }
        },
    };
    finish(&app, Endpoint::Ids, start, no_store(response))
}

/// Reads an ID written in decimal, or in hex with a `0x` prefix.
fn parse_id(raw: &str) -> Result<Id, monoflake::Error> {
    match raw.strip_prefix("0x").or_else(|| raw.strip_prefix("0X")) {
        Some(_) => Id::from_hex(raw),
        None => raw.parse(),
    }
}

async fn decode(
    State(app): Shared,
    raw: Result<Path<String>, PathRejection>,
    request: Request,
) -> Response {
    let start = Instant::now();
    let headers = request.headers();
    let layout = app.issuer.layout();
    let response = match (unauthorized(&app, headers), raw) {
        (Some(r), _) => r,
        // Percent-decoding gave bytes that are not UTF-8 (`/v1/decode/%FF`): axum's own
        // answer would be a text/plain 400.
        (None, Err(rejection)) => error(
            StatusCode::BAD_REQUEST,
            &format!(
                "cannot decode the path {}: {}",
                echo(request.uri().path()),
                rejection.body_text()
            ),
        ),
        // `?layout=discord` would otherwise be ignored, and the ID decoded under another
        // layout than the caller meant.
        (None, Ok(_)) if first_param(request.uri().query()).is_some() => error(
            StatusCode::BAD_REQUEST,
            &format!(
                "/v1/decode takes no query parameter, got {:?}: it decodes under the layout \
                 the server runs ({})",
                echo(&first_param(request.uri().query()).unwrap_or_default()),
                layout.name()
            ),
        ),
        (None, Ok(Path(raw))) => match parse_id(&raw).and_then(|id| json_object(id, layout)) {
            Ok(object) => json(StatusCode::OK, object),
            Err(e) => error(
                StatusCode::BAD_REQUEST,
                &format!(
                    "cannot decode {:?} under the {} layout: {}",
                    echo(&raw),
                    layout.name(),
                    if raw.chars().count() > ECHO {
                        "not an ID".to_owned()
                    } else {
                        e.to_string()
                    }
                ),
            ),
        },
    };
    finish(&app, Endpoint::Decode, start, response)
}

async fn healthz(State(app): Shared) -> Response {
    let start = Instant::now();
    let response = json(StatusCode::OK, "{\"status\":\"ok\"}");
    finish(&app, Endpoint::Healthz, start, response)
}

async fn readyz(State(app): Shared) -> Response {
    let start = Instant::now();
    let issuer = &app.issuer;
    let response = if app.draining.load(Ordering::Relaxed) {
        unavailable("stopping: the node is being released")
    } else {
        match issuer.ready() {
            Ok(()) => json(
                StatusCode::OK,
                format_args!(
                    "{{\"status\":\"ready\",\"node\":{},\"layout\":\"{}\"}}",
                    issuer.node(),
                    issuer.layout().name()
                ),
            ),
            Err(e) => unavailable(&e.to_string()),
        }
    };
    finish(&app, Endpoint::Readyz, start, response)
}

fn unavailable(message: &str) -> Response {
    let mut response = error(StatusCode::SERVICE_UNAVAILABLE, message);
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

async fn metrics(State(app): Shared, request: Request) -> Response {
    let start = Instant::now();
    let text = app.exposition.render();
    let response = match reserve(&app, &request, text.len(), Share::Whole) {
        Some(over) => over,
        None => body(StatusCode::OK, OPENMETRICS, text),
    };
    finish(&app, Endpoint::Metrics, start, response)
}

/// The routes as the 404 answer lists them: `GET /v1/id, /v1/ids?count=N, …`.
pub fn api() -> String {
    let usages: Vec<&str> = Route::ALL.into_iter().map(Route::usage).collect();
    format!("GET {}", usages.join(", "))
}

/// The OpenAPI 3.1 description of the routes, statuses and bodies above (`openapi.json`,
/// held to [`Route::ALL`] by a test). Needs no token: it describes, it issues nothing.
async fn openapi(State(app): Shared) -> Response {
    let start = Instant::now();
    let mut response = Response::new(Body::from(super::openapi::DOCUMENT));
    response.headers_mut().insert(header::CONTENT_TYPE, JSON);
    finish(&app, Endpoint::OpenApi, start, response)
}

async fn not_found(State(app): Shared, uri: axum::http::Uri) -> Response {
    let start = Instant::now();
    let response = error(
        StatusCode::NOT_FOUND,
        &format!("no such path: {}; the API is {}", echo(uri.path()), api()),
    );
    finish(&app, Endpoint::Other, start, response)
}

async fn method_not_allowed(
    State(app): Shared,
    method: axum::http::Method,
    uri: axum::http::Uri,
) -> Response {
    let start = Instant::now();
    let mut response = error(
        StatusCode::METHOD_NOT_ALLOWED,
        &format!(
            "{} is not allowed on {}: use GET",
            echo(method.as_str()),
            echo(uri.path())
        ),
    );
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(ALLOW));
    finish(&app, Endpoint::Other, start, response.into_response())
}
