//! This gateway's own Prometheus metrics, served as text exposition (format 0.0.4) on
//! GATEWAY_METRICS_ADDR — an address that stays private (loopback or the cluster network), so it
//! asks no credential; each instance is scraped on its own address (OPERATIONS.md, Metrics).
//!
//! Requests are counted by route template (axum's matched path, so the label stays bounded: a
//! request no route matched is `unmatched`) and status code, with their latency to the response
//! head (an event stream counts its opening, not its life). Open event streams per room, the
//! rate limiters' refusals and the fail-open door checks are read or counted where they happen.

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::header::CONTENT_TYPE;
use prometheus::core::Collector;
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

use crate::GatewayState;

const CONTENT_TYPE_0_0_4: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What this gateway counts as it serves.
pub(crate) struct GatewayMetrics {
    registry: Registry,
    requests: IntCounterVec,
    latency: HistogramVec,
    fail_open: IntCounter,
}

fn registered<C: Collector + Clone + 'static>(registry: &Registry, collector: C) -> C {
    if let Err(error) = registry.register(Box::new(collector.clone())) {
        tracing::error!(%error, "a metric could not be registered");
    }
    collector
}

impl GatewayMetrics {
    pub(crate) fn new() -> Arc<GatewayMetrics> {
        let registry = Registry::new();
        let requests = registered(
            &registry,
            IntCounterVec::new(
                Opts::new(
                    "qm_gateway_http_requests_total",
                    "HTTP requests answered, by route template and status code.",
                ),
                &["route", "code"],
            )
            .expect("valid labels"),
        );
        let latency = registered(
            &registry,
            HistogramVec::new(
                HistogramOpts::new(
                    "qm_gateway_http_request_duration_seconds",
                    "Time from a request's arrival to its response head, by route template.",
                )
                .buckets(vec![
                    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                ]),
                &["route"],
            )
            .expect("valid labels"),
        );
        let fail_open = registered(
            &registry,
            IntCounter::new(
                "qm_gateway_fail_open_checks_total",
                "Door checks for a room that does not exist, answered pass (reason no_room).",
            )
            .expect("a valid name"),
        );
        Arc::new(GatewayMetrics {
            registry,
            requests,
            latency,
            fail_open,
        })
    }

    /// A door check answered pass because its room does not exist.
    pub(crate) fn failed_open(&self) {
        self.fail_open.inc();
    }

    fn answered(&self, route: &str, code: http::StatusCode, seconds: f64) {
        self.requests
            .with_label_values(&[route, code.as_str()])
            .inc();
        self.latency.with_label_values(&[route]).observe(seconds);
    }
}

/// Counts every request of the router it wraps (`Router::layer`, so the matched path is known).
pub(crate) async fn track(
    State(metrics): State<Arc<GatewayMetrics>>,
    request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    // A matched path is shared, not copied: cloning it costs a reference count.
    let route = request.extensions().get::<MatchedPath>().cloned();
    let response = next.run(request).await;
    metrics.answered(
        route.as_ref().map_or("unmatched", MatchedPath::as_str),
        response.status(),
        started.elapsed().as_secs_f64(),
    );
    response
}

/// The private listener's router: `GET /metrics` and nothing else.
pub(crate) fn router(state: GatewayState) -> Router {
    Router::new()
        .route("/metrics", get(exposition))
        .with_state(state)
}

async fn exposition(State(state): State<GatewayState>) -> Response {
    ([(CONTENT_TYPE, CONTENT_TYPE_0_0_4)], render(&state)).into_response()
}

/// The whole exposition: what was counted, then what is read now.
pub(crate) fn render(state: &GatewayState) -> String {
    let mut families = state.metrics.registry.gather();
    let streams = IntGaugeVec::new(
        Opts::new(
            "qm_gateway_event_streams",
            "Event streams open on this gateway, by room.",
        ),
        &["room"],
    )
    .expect("valid labels");
    for (room_id, listeners) in state.hubs.listeners() {
        streams
            .with_label_values(&[room_id.as_str()])
            .set(i64::try_from(listeners).unwrap_or(i64::MAX));
    }
    let refused = IntCounterVec::new(
        Opts::new(
            "qm_gateway_rate_limited_total",
            "Requests refused 429 rate_limited, by the limit that refused them.",
        ),
        &["limit"],
    )
    .expect("valid labels");
    for (limit, limiter) in [
        ("join", &state.join_limiter),
        ("status", &state.status_limiter),
        ("check", &state.check_limiter),
        ("page", &state.page_limiter),
        ("stream", &state.stream_open_limiter),
    ] {
        refused
            .with_label_values(&[limit])
            .inc_by(limiter.refused());
    }
    // A family with no series (no stream open) cannot be encoded: it is left out.
    families.extend(
        streams
            .collect()
            .into_iter()
            .chain(refused.collect())
            .filter(|family| !family.get_metric().is_empty()),
    );
    let mut text = Vec::new();
    if let Err(error) = TextEncoder::new().encode(&families, &mut text) {
        tracing::error!(%error, "the gateway's metrics could not be encoded");
    }
    String::from_utf8(text).unwrap_or_default()
}
