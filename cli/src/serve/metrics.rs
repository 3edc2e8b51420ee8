//! `/metrics`: the generator's and the lease's counters, the service's own, and request
//! latency per endpoint, in Prometheus text through `prometheus-client`. Every help text here
//! is also in docs/service.md's metric table, word for word (`serve_ops.rs` holds them
//! together).
//!
//! The hot path touches only relaxed atomics, on its thread's own stripe (`stripe.rs`): a
//! request adds to its endpoint's latency bucket and sum (prometheus-client's own histogram takes a lock per observation,
//! which two cores serving 100,000 requests a second would fight over). Everything else —
//! the generator's [`Stats`](monoflake::Stats), the lease state, the process's resources
//! (`process.rs`) — is read when scraped. `monoflake_build_info` names the version and the
//! layout served.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use super::budget::Budget;
use super::issue::{Issuer, Observer};
use super::process;
use super::stripe::{self, Padded, STRIPES};

/// The endpoints whose latency is measured, in the order of [`ENDPOINTS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Id,
    Ids,
    Decode,
    Healthz,
    Readyz,
    Metrics,
    OpenApi,
    GrpcNext,
    GrpcDecode,
    Other,
}

/// Label values, indexed by `Endpoint as usize`.
const ENDPOINTS: [&str; 10] = [
    "/v1/id",
    "/v1/ids",
    "/v1/decode",
    "/healthz",
    "/readyz",
    "/metrics",
    "/openapi.json",
    "grpc Next",
    "grpc Decode",
    "other",
];

/// Upper bounds of the latency buckets, in seconds (the last, +Inf, is implicit).
const BOUNDS: [f64; 14] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0,
];
/// The same bounds in nanoseconds, for the hot path.
const BOUNDS_NS: [u64; 14] = [
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
];

/// The status codes counted one by one; anything else counts as `other`.
const CODES: [u16; 8] = [200, 400, 401, 404, 405, 431, 503, 0];
const CODE_LABELS: [&str; 8] = ["200", "400", "401", "404", "405", "431", "503", "other"];

/// Why a connection ended, in the order of [`CLOSED_LABELS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Closed {
    /// The client closed it, or it ended after its last request.
    Done,
    /// No request arrived within `--handshake-timeout` (TLS, preface, first head).
    Handshake,
    /// No request completed within `--idle-timeout`.
    Idle,
    /// An answer was not taken within `--idle-timeout`.
    Overdue,
    /// Closed, idle, to make room for a new connection.
    Shed,
    /// The TLS handshake failed.
    Tls,
    /// Not HTTP, or HTTP that hyper refused (it answers 400 or 431 itself, then closes).
    Malformed,
    /// Closed by the drain at a stop.
    Drained,
}

const CLOSED_LABELS: [&str; 8] = [
    "done",
    "handshake",
    "idle",
    "overdue",
    "shed",
    "tls",
    "malformed",
    "drained",
];

/// One endpoint's latency histogram: per-bucket counts (not cumulative) and the sum; the
/// count is the buckets' sum.
// Ordering: Relaxed for all; each is a lone statistic.
#[derive(Debug, Default)]
struct Latency {
    buckets: [AtomicU64; 15],
    sum_ns: AtomicU64,
}

/// What every request adds to, one set per stripe (`stripe.rs`): summed when scraped.
#[derive(Debug, Default)]
struct Hot {
    latency: [Latency; ENDPOINTS.len()],
    codes: [AtomicU64; 8],
    ids_served: AtomicU64,
}

/// The service's own counters.
#[derive(Debug, Default)]
pub struct Metrics {
    hot: [Padded<Hot>; STRIPES],
    closed: [AtomicU64; 8],
    over_budget: AtomicU64,
    refused: AtomicU64,
    waited: AtomicU64,
    unauthorized: AtomicU64,
    connections_open: AtomicU64,
    connections_total: AtomicU64,
    reclaims: AtomicU64,
    /// The `notAfter` (Unix seconds) of the TLS chain's first-expiring certificate.
    tls_not_after: std::sync::OnceLock<i64>,
}

impl Metrics {
    /// The calling thread's stripe of the per-request counters.
    #[inline]
    fn hot(&self) -> &Hot {
        &self.hot[stripe::index()].0
    }

    /// `what` of every stripe, summed.
    fn sum(&self, what: impl Fn(&Hot) -> &AtomicU64) -> u64 {
        self.hot
            .iter()
            .map(|h| what(&h.0).load(Ordering::Relaxed))
            .fold(0, u64::wrapping_add)
    }

    /// Records one handler's time.
    #[inline]
    pub fn observe(&self, endpoint: Endpoint, elapsed: Duration) {
        let ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        let l = &self.hot().latency[endpoint as usize];
        let bucket = BOUNDS_NS.iter().position(|&b| ns <= b).unwrap_or(14);
        // Ordering: Relaxed (statistics).
        l.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        l.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// Records one answer by its status, whichever layer gave it.
    #[inline]
    pub fn answered(&self, code: u16) {
        let slot = CODES
            .iter()
            .position(|&c| c == code)
            .unwrap_or(CODES.len() - 1);
        self.hot().codes[slot].fetch_add(1, Ordering::Relaxed);
    }

    /// A request refused (503) because answers already held too many bytes.
    pub fn over_budget(&self) {
        self.over_budget.fetch_add(1, Ordering::Relaxed);
    }

    /// IDs put in answers to callers (the generator's own `issued` counts them on its side;
    /// readiness probes and scrapes take none).
    #[inline]
    pub fn served(&self, n: u64) {
        self.hot().ids_served.fetch_add(n, Ordering::Relaxed);
    }

    pub fn unauthorized(&self) {
        self.unauthorized.fetch_add(1, Ordering::Relaxed);
    }

    pub fn connection_opened(&self) {
        self.connections_open.fetch_add(1, Ordering::Relaxed);
        self.connections_total.fetch_add(1, Ordering::Relaxed);
    }

    pub fn connection_closed(&self, why: Closed) {
        self.connections_open.fetch_sub(1, Ordering::Relaxed);
        self.closed[why as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The TLS chain's first expiry (Unix seconds), exported from the start.
    pub fn tls_expires_at(&self, not_after: i64) {
        let _ = self.tls_not_after.set(not_after);
    }
}

/// The issuer's own events, counted.
impl Observer for Metrics {
    fn waited(&self) {
        self.waited.fetch_add(1, Ordering::Relaxed);
    }

    fn refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    fn reclaimed(&self) {
        self.reclaims.fetch_add(1, Ordering::Relaxed);
    }
}

/// Encodes everything at scrape time.
#[derive(Debug)]
struct Scrape {
    issuer: Arc<Issuer>,
    metrics: Arc<Metrics>,
    budget: Arc<Budget>,
}

fn counter(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: u64,
) -> Result<(), std::fmt::Error> {
    ConstCounter::new(value).encode(encoder.encode_descriptor(
        name,
        help,
        None,
        MetricType::Counter,
    )?)
}

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: i64,
) -> Result<(), std::fmt::Error> {
    ConstGauge::new(value).encode(encoder.encode_descriptor(name, help, None, MetricType::Gauge)?)
}

impl Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let issuer = &self.issuer;
        let e = &mut encoder;
        let stats = issuer.stats();
        let m = &self.metrics;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        counter(
            e,
            "monoflake_ids_issued",
            "IDs issued by the generator (readiness probes and scrapes take none).",
            stats.issued,
        )?;
        counter(
            e,
            "monoflake_ids_served",
            "IDs sent to callers.",
            m.sum(|h| &h.ids_served),
        )?;
        counter(
            e,
            "monoflake_borrowed_ticks",
            "Ticks entered ahead of the clock because the sequence was full.",
            stats.borrowed_ticks,
        )?;
        gauge(
            e,
            "monoflake_max_lead_ticks",
            "The furthest the time field ran ahead of the clock, in ticks.",
            i64::try_from(stats.max_lead_ticks).unwrap_or(i64::MAX),
        )?;
        counter(
            e,
            "monoflake_would_block",
            "Generator calls refused at the lead limit (WouldBlock).",
            stats.would_block_returned,
        )?;
        counter(
            e,
            "monoflake_request_waits",
            "Naps requests took at the lead limit before they were answered.",
            load(&m.waited),
        )?;
        counter(
            e,
            "monoflake_requests_refused",
            "Requests answered 503 because the generator could not issue.",
            load(&m.refused),
        )?;
        counter(
            e,
            "monoflake_clock_reanchors",
            "Times the clock moved forward to the wall clock.",
            stats.reanchors,
        )?;
        ConstGauge::new(Duration::from_nanos(stats.max_skew_ns).as_secs_f64()).encode(
            e.encode_descriptor(
                "monoflake_clock_max_skew_seconds",
                "The largest difference seen between the clock and the wall clock.",
                None,
                MetricType::Gauge,
            )?,
        )?;
        ConstGauge::new(Duration::from_nanos(stats.clock_held_back_ns).as_secs_f64()).encode(
            e.encode_descriptor(
                "monoflake_clock_held_back_seconds",
                "How far the wall clock was ahead of the generator's clock at its last \
                 comparison and not followed: beyond what the node store's clock confirms.",
                None,
                MetricType::Gauge,
            )?,
        )?;
        counter(
            e,
            "monoflake_reservation_writes",
            "Time reservations written to the node store.",
            stats.reservation_writes,
        )?;
        counter(
            e,
            "monoflake_reservation_failures",
            "Time reservation writes that failed.",
            stats.reservation_failures,
        )?;
        counter(
            e,
            "monoflake_lease_renewals",
            "Successful lease renewals.",
            stats.lease_renewals,
        )?;
        counter(
            e,
            "monoflake_lease_losses",
            "Leases lost.",
            stats.lease_losses,
        )?;
        counter(
            e,
            "monoflake_lease_reclaims",
            "Nodes claimed again after a lost lease.",
            load(&m.reclaims),
        )?;
        let held = i64::from(issuer.ready().is_ok());
        gauge(
            e,
            "monoflake_lease_held",
            "1 while the node lease is held and issuing works, else 0.",
            held,
        )?;
        gauge(
            e,
            "monoflake_node",
            "The node ID held.",
            i64::try_from(issuer.node()).unwrap_or(-1),
        )?;
        counter(
            e,
            "monoflake_unauthorized",
            "Requests refused for a missing or wrong token.",
            load(&m.unauthorized),
        )?;
        gauge(
            e,
            "monoflake_connections_open",
            "Connections open now.",
            i64::try_from(load(&m.connections_open)).unwrap_or(0),
        )?;
        counter(
            e,
            "monoflake_connections",
            "Connections accepted.",
            load(&m.connections_total),
        )?;
        let closed = |why: Closed| load(&m.closed[why as usize]);
        counter(
            e,
            "monoflake_connections_timed_out",
            "Connections closed by a deadline: no first request within --handshake-timeout, \
             no completed request or an answer not taken within --idle-timeout.",
            closed(Closed::Handshake) + closed(Closed::Idle) + closed(Closed::Overdue),
        )?;
        {
            let mut family = e.encode_descriptor(
                "monoflake_connections_closed",
                "Connections ended, by reason.",
                None,
                MetricType::Counter,
            )?;
            for (label, value) in CLOSED_LABELS.iter().zip(&m.closed) {
                ConstCounter::new(load(value))
                    .encode(family.encode_family(&[("reason", *label)])?)?;
            }
        }
        counter(
            e,
            "monoflake_requests_over_budget",
            "Requests answered 503 because answers not yet taken held too many bytes.",
            load(&m.over_budget),
        )?;
        gauge(
            e,
            "monoflake_response_bytes_held",
            "Bytes of answers produced and not yet taken by the kernel.",
            i64::try_from(self.budget.held()).unwrap_or(i64::MAX),
        )?;
        gauge(
            e,
            "monoflake_response_bytes_limit",
            "The most bytes answers may hold at once (--response-budget).",
            i64::try_from(self.budget.limit()).unwrap_or(i64::MAX),
        )?;
        if let Some(&not_after) = m.tls_not_after.get() {
            gauge(
                e,
                "monoflake_tls_cert_expiry_timestamp_seconds",
                "When the first certificate of the --tls-cert chain expires (Unix seconds).",
                not_after,
            )?;
        }
        {
            let mut family = e.encode_descriptor(
                "monoflake_responses",
                "Responses by status code.",
                None,
                MetricType::Counter,
            )?;
            for (i, label) in CODE_LABELS.iter().enumerate() {
                ConstCounter::new(m.sum(|h| &h.codes[i]))
                    .encode(family.encode_family(&[("code", *label)])?)?;
            }
        }
        {
            let layout = escape_label(self.issuer.layout().name());
            let mut family = e.encode_descriptor(
                "monoflake_build_info",
                "Always 1: the monoflake version and the layout this server issues under.",
                None,
                MetricType::Gauge,
            )?;
            ConstGauge::new(1_i64).encode(family.encode_family(&[
                ("version", env!("CARGO_PKG_VERSION")),
                ("layout", layout.as_str()),
            ])?)?;
        }
        if let Some(p) = process::sample() {
            encode_process(e, &p)?;
        }
        let mut family = e.encode_descriptor(
            "monoflake_request_duration_seconds",
            "Time from a request's arrival to its answer, per endpoint.",
            None,
            MetricType::Histogram,
        )?;
        for (e, label) in ENDPOINTS.iter().enumerate() {
            let mut buckets = [(0.0, 0); 15];
            for (i, slot) in buckets.iter_mut().enumerate() {
                *slot = (
                    BOUNDS.get(i).copied().unwrap_or(f64::MAX),
                    m.sum(|h| &h.latency[e].buckets[i]),
                );
            }
            let count = buckets.iter().map(|b| b.1).sum();
            let sum = Duration::from_nanos(m.sum(|h| &h.latency[e].sum_ns)).as_secs_f64();
            family
                .encode_family(&[("endpoint", *label)])?
                .encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                sum, count, &buckets, None,
            )?;
        }
        Ok(())
    }
}

/// A label value as the text format wants it: `\`, `"` and a newline escaped
/// (prometheus-client writes label values as given).
fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The process's resources under the names every Prometheus client library uses, so that
/// dashboards and alerts written for them work unchanged.
fn encode_process(e: &mut DescriptorEncoder, p: &process::Sample) -> Result<(), std::fmt::Error> {
    ConstCounter::new(p.cpu_seconds).encode(e.encode_descriptor(
        "process_cpu_seconds",
        "Total user and system CPU time spent in seconds.",
        None,
        MetricType::Counter,
    )?)?;
    let bytes = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    gauge(
        e,
        "process_resident_memory_bytes",
        "Resident memory size in bytes.",
        bytes(p.resident_bytes),
    )?;
    gauge(
        e,
        "process_virtual_memory_bytes",
        "Virtual memory size in bytes.",
        bytes(p.virtual_bytes),
    )?;
    gauge(
        e,
        "process_open_fds",
        "Number of open file descriptors.",
        bytes(p.open_fds),
    )?;
    if let Some(max) = p.max_fds {
        gauge(
            e,
            "process_max_fds",
            "Maximum number of open file descriptors.",
            bytes(max),
        )?;
    }
    ConstGauge::new(p.start_time_seconds).encode(e.encode_descriptor(
        "process_start_time_seconds",
        "Start time of the process since unix epoch in seconds.",
        None,
        MetricType::Gauge,
    )?)
}

/// The registry behind `/metrics`.
#[derive(Debug)]
pub struct Exposition {
    registry: Registry,
}

impl Exposition {
    pub fn new(issuer: Arc<Issuer>, metrics: Arc<Metrics>, budget: Arc<Budget>) -> Self {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Scrape {
            issuer,
            metrics,
            budget,
        }));
        Exposition { registry }
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(8 * 1024);
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
