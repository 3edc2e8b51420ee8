//! gRPC: the `monoflake.v1.Ids` service of `proto/monoflake/v1/ids.proto`, on the same
//! issuer, token and metrics as HTTP; the standard health service; and server reflection
//! (`grpc.reflection.v1` and `v1alpha`), so that grpcurl and other tools list and call the
//! services without the `.proto` in hand.
//!
//! Status codes: `INVALID_ARGUMENT` for a bad count or an ID the layout cannot hold,
//! `UNAVAILABLE` with a `retry-after-ms` trailer when the generator cannot issue,
//! `UNAUTHENTICATED` for a missing or wrong token.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use tonic::metadata::MetadataValue;
use tonic::service::interceptor::InterceptedService;
use tonic::{Request, Response, Status};

use super::budget;
use super::exchange::{Exchange, Share};
use super::http::{App, error};
use super::issue::{Refusal, echo};
use super::metrics::Endpoint;

/// The code generated from the `.proto` file by `build.rs`.
#[allow(clippy::all, clippy::pedantic, dead_code, missing_docs)]
mod pb {
    include!(concat!(env!("OUT_DIR"), "/monoflake.v1.rs"));
}

use pb::ids_server::{Ids, IdsServer};
use pb::{DecodeRequest, DecodeResponse, NextRequest, NextResponse, NodeField};

/// The largest request message read (tonic's default is 4 MiB; a `NextRequest` or a
/// health check is a few bytes, a service name at most a few hundred).
const MAX_REQUEST: usize = 4096;

/// The name health checks ask about (`grpc.health.v1.HealthCheckRequest.service`).
pub const SERVICE_NAME: &str = "monoflake.v1.Ids";

/// The encoded descriptors of `proto/monoflake/v1/ids.proto`, written by `build.rs`, for
/// reflection.
const DESCRIPTORS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/monoflake_v1.fds"));

/// A reflection service's builder, knowing every service this listener serves: both
/// reflection versions list the same four (`monoflake.v1.Ids`, `grpc.health.v1.Health`,
/// `grpc.reflection.v1.ServerReflection`, `grpc.reflection.v1alpha.ServerReflection`).
fn reflection() -> tonic_reflection::server::Builder<'static> {
    tonic_reflection::server::Builder::configure()
        .include_reflection_service(false)
        .register_encoded_file_descriptor_set(DESCRIPTORS)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET)
}

/// The gRPC routes, to be served by the listener like any router: `monoflake.v1.Ids` (behind
/// the token) and the standard `grpc.health.v1.Health` (open, like `/readyz`), which reports
/// `SERVING` for `monoflake.v1.Ids` and for the server as a whole (`""`) exactly while
/// `/readyz` answers 200; and reflection (behind the token too, like the API it describes:
/// grpcurl's `-H` sends the token with its reflection requests).
///
/// Reflection is a stream per caller, bounded like any request: each request message at most
/// [`MAX_REQUEST`], one answer at a time (its sender waits until the client takes the last),
/// and the stream is an answer in flight on the connection's deadline (`--idle-timeout`).
pub fn router(app: Arc<App>) -> Result<Router, String> {
    let guard = Arc::clone(&app);
    let app_of_fallback = Arc::clone(&app);
    let health = tonic_health::pb::health_server::HealthServer::new(
        tonic_health::server::HealthService::from_health_reporter(app.health.clone()),
    )
    .max_decoding_message_size(MAX_REQUEST);
    let broken = |e: tonic_reflection::server::Error| format!("gRPC reflection: {e}");
    let reflection_v1 = reflection()
        .build_v1()
        .map_err(broken)?
        .max_decoding_message_size(MAX_REQUEST);
    let reflection_v1alpha = reflection()
        .build_v1alpha()
        .map_err(broken)?
        .max_decoding_message_size(MAX_REQUEST);
    let ids = IdsServer::new(Service { app }).max_decoding_message_size(MAX_REQUEST);
    let authorized = move |request: Request<()>| authorize(&guard, request);
    let routes = tonic::service::Routes::new(InterceptedService::new(ids, authorized.clone()))
        .add_service(health)
        .add_service(InterceptedService::new(reflection_v1, authorized.clone()))
        .add_service(InterceptedService::new(reflection_v1alpha, authorized))
        .into_axum_router();
    Ok(routes.fallback(move |request: axum::extract::Request| {
        unknown(Arc::clone(&app_of_fallback), request)
    }))
}

/// Anything the gRPC services do not route: a gRPC call gets `UNIMPLEMENTED` (tonic's own
/// answer, with a reason), anything else a JSON 404 like the HTTP listener's.
async fn unknown(app: Arc<App>, request: axum::extract::Request) -> axum::response::Response {
    let start = Instant::now();
    let path = echo(request.uri().path()).into_owned();
    let grpc = request
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
    let response = if grpc {
        let (parts, ()) = Status::unimplemented(format!(
            "no such method: {path}; this listener serves {SERVICE_NAME} (Next, Decode), \
             grpc.health.v1.Health and server reflection (grpc.reflection.v1, v1alpha)"
        ))
        .into_http::<()>()
        .into_parts();
        axum::response::Response::from_parts(parts, axum::body::Body::empty())
    } else {
        error(
            axum::http::StatusCode::NOT_FOUND,
            &format!(
                "no such path: {path}; this is the gRPC listener ({SERVICE_NAME}): use a gRPC \
                 client, or the HTTP listener for the JSON API"
            ),
        )
    };
    app.metrics.observe(Endpoint::Other, start.elapsed());
    response
}

fn authorize(app: &App, request: Request<()>) -> Result<Request<()>, Status> {
    let Some(token) = &app.token else {
        return Ok(request);
    };
    let header = request
        .metadata()
        .get("authorization")
        .map(MetadataValue::as_bytes);
    if token.admits(header) {
        Ok(request)
    } else {
        app.metrics.unauthorized();
        Err(Status::unauthenticated(
            "a bearer token is required: metadata authorization: Bearer <token>",
        ))
    }
}

struct Service {
    app: Arc<App>,
}

fn status_of(refusal: Refusal) -> Status {
    match refusal {
        Refusal::BadInput(message) => Status::invalid_argument(message),
        Refusal::Unavailable {
            message,
            retry_after,
        } => {
            let mut status = Status::unavailable(message);
            let ms = u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX);
            status
                .metadata_mut()
                .insert("retry-after-ms", MetadataValue::from(ms));
            status
        }
    }
}

impl Service {
    fn finish<T>(
        &self,
        endpoint: Endpoint,
        start: Instant,
        result: Result<T, Status>,
    ) -> Result<Response<T>, Status> {
        self.app.metrics.observe(endpoint, start.elapsed());
        result.map(Response::new)
    }
}

#[tonic::async_trait]
impl Ids for Service {
    async fn next(&self, request: Request<NextRequest>) -> Result<Response<NextResponse>, Status> {
        let start = Instant::now();
        let issuer = &self.app.issuer;
        let exchange = request.extensions().get::<Arc<Exchange>>().cloned();
        let count = request.into_inner().count.max(1);
        // Small answers reserve nothing: they are counted as they are sent.
        let reserved = |n| match &exchange {
            Some(e) if budget::grpc_hold(n) > budget::SMALL => e
                .reserve(budget::grpc_hold(n), Share::Large)
                .map(|()| n)
                .map_err(|over| {
                    self.app.metrics.over_budget();
                    Refusal::Unavailable {
                        message: over.to_string(),
                        retry_after: Duration::from_secs(1),
                    }
                }),
            _ => Ok(n),
        };
        let result = match issuer.check_count(count).and_then(reserved) {
            Err(r) => Err(status_of(r)),
            Ok(n) => match issuer.ids(n).await {
                Ok(run) => {
                    self.app.metrics.served(n);
                    Ok(NextResponse {
                        ids: run.map(u64::from).collect(),
                    })
                }
                Err(r) => Err(status_of(r)),
            },
        };
        self.finish(Endpoint::GrpcNext, start, result)
    }

    async fn decode(
        &self,
        request: Request<DecodeRequest>,
    ) -> Result<Response<DecodeResponse>, Status> {
        let start = Instant::now();
        let layout = self.app.issuer.layout();
        let id = monoflake::Id::from(request.into_inner().id);
        let result = match id.parts(layout) {
            Ok(parts) => Ok(DecodeResponse {
                id: u64::from(id),
                layout: layout.name().to_owned(),
                unix_ms: parts.unix_ms(),
                time: parts.rfc3339().to_string(),
                node: parts.node(),
                sequence: parts.sequence(),
                fields: parts
                    .fields()
                    .map(|(name, value)| NodeField {
                        name: name.to_owned(),
                        value,
                    })
                    .collect(),
            }),
            Err(e) => Err(Status::invalid_argument(format!(
                "cannot decode {id} under the {} layout: {e}",
                layout.name()
            ))),
        };
        self.finish(Endpoint::GrpcDecode, start, result)
    }
}
