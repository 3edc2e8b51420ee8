//! gRPC: the `monoflake.v1.Ids` service of `proto/monoflake/v1/ids.proto`.

use std::sync::Arc;

use axum::Router;

use super::http::App;

pub fn router(_app: Arc<App>) -> Router {
    Router::new()
}
