//! The baseline `scripts/load.sh` measures `monoflake serve` against: a bare handler on the
//! same stack — axum's router served by hyper-util's HTTP/1 + HTTP/2 connection builder, with
//! the service's protocol settings, on a multi-threaded tokio runtime — that answers
//! `GET /` with a counter in the shape of `/v1/id`'s answer. No generator, no deadlines, no
//! budget, no metrics: what the service adds over the stack is the difference.
//!
//! Not a criterion benchmark: a server. `cargo bench -p monoflake-cli --bench bare_http --
//! 127.0.0.1:0` prints `bare handler on http://ADDR` and serves until killed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::routing::get;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;

static N: AtomicU64 = AtomicU64::new(2_124_759_231_864_242_176);

fn main() {
    // `cargo bench` adds `--bench`; the address is the first other argument.
    let addr = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .unwrap_or_else(|| "127.0.0.1:0".to_owned());
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(serve(&addr));
}

async fn serve(addr: &str) {
    let router = Router::new().route(
        "/",
        get(|| async {
            // Ordering: Relaxed; a counter.
            let id = N.fetch_add(1, Ordering::Relaxed);
            (
                [("content-type", "application/json")],
                format!("{{\"id\":\"{id}\"}}"),
            )
        }),
    );
    let listener = tokio::net::TcpListener::bind(addr).await.expect("bind");
    eprintln!(
        "bare handler on http://{}",
        listener.local_addr().expect("an address")
    );
    // The service's settings (cli/src/serve/listener.rs), without its limits.
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .max_buf_size(16 * 1024)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(32)
        .initial_stream_window_size(16 * 1024)
        .initial_connection_window_size(65_535);
    let builder = Arc::new(builder);
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let builder = Arc::clone(&builder);
        let service = TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            let _ = builder
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
