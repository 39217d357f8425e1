//! The gateway process: the public contract over HTTP. Visitor routes (join, status, the event
//! stream), the door check, readiness, the waiting page and its assets, the connector registry
//! and the connectors' files. It holds no queue state: every decision is an engine call over
//! gRPC; the gateway verifies and signs visitor tokens, keeps per-process limits, and fans each
//! room's engine `Watch` stream out to its listeners.

mod artifacts;
mod body_fields;
mod check;
mod check_status;
mod connectors;
mod cookies;
mod door;
mod events;
#[doc(hidden)]
pub mod fuzzing;
mod health;
mod hub;
mod inline;
mod join_form;
mod metrics;
mod notify;
mod pages;
mod places;
mod presence;
mod protection;
mod rate_limit;
mod refresh;
mod request;
mod return_trip;
mod status_body;
mod status_read;
mod stream_clock;
mod targeting;
#[cfg(test)]
mod test_support;
mod verify;
mod verify_checks;
mod visitor;
mod visitor_calls;

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use http::{HeaderValue, StatusCode};
use qm_core::clock::now_ms;
use qm_core::config::Config;
use qm_core::token::Keyring;
use qm_proto::EngineClient;
use tokio::sync::watch;
use tonic::transport::Channel;

pub use qm_http::AppError;

use crate::hub::RoomHubs;
use crate::places::TokenCheck;
use crate::rate_limit::{JoinRateLimiter, StreamLimits};

/// What every handler shares, behind one reference count: axum hands each request (and each
/// layer that asks for it) its own copy of the state, so a copy must cost one atomic increment,
/// not one per handle inside.
#[derive(Clone)]
pub(crate) struct GatewayState(Arc<GatewayShared>);

impl std::ops::Deref for GatewayState {
    type Target = GatewayShared;

    fn deref(&self) -> &GatewayShared {
        &self.0
    }
}

/// The handles themselves.
pub(crate) struct GatewayShared {
    pub(crate) config: Arc<Config>,
    /// Built once: deriving the v2 keys costs HKDF work that no request should repeat.
    pub(crate) keyring: Arc<Keyring>,
    /// The support reference code's key, HKDF(SECRET, `qm:support-ref`), derived once.
    pub(crate) support_ref_key: [u8; 32],
    pub(crate) engine: EngineClient,
    /// Join, Status and Check, batched (`visitor_calls.rs`).
    pub(crate) visitor_calls: visitor_calls::VisitorCalls,
    /// Channel for the engine's gRPC health service, for readiness.
    pub(crate) engine_health: Channel,
    pub(crate) join_limiter: Arc<JoinRateLimiter>,
    /// CHECK_LIMIT_PER_MIN: door checks per client address (the vouched one when vouched).
    pub(crate) check_limiter: Arc<JoinRateLimiter>,
    /// STATUS_LIMIT_PER_MIN: `/api/status` reads per client address.
    pub(crate) status_limiter: Arc<JoinRateLimiter>,
    /// PAGE_LIMIT_PER_MIN: `/w/<room>` loads and form joins per client address.
    pub(crate) page_limiter: Arc<JoinRateLimiter>,
    /// STREAM_OPEN_LIMIT_PER_MIN: event streams opened per client address.
    pub(crate) stream_open_limiter: Arc<JoinRateLimiter>,
    pub(crate) stream_limits: Arc<StreamLimits>,
    pub(crate) hubs: Arc<RoomHubs>,
    /// What this gateway counts for its private `/metrics` (GATEWAY_METRICS_ADDR).
    pub(crate) metrics: Arc<metrics::GatewayMetrics>,
    /// Turns true when the process stops: open event streams end on it.
    pub(crate) shutdown: watch::Receiver<bool>,
}

impl GatewayShared {
    /// Spends one of `address`'s CHECK_LIMIT_PER_MIN: the budget every route a connector calls
    /// shares (the door check, the targeting read, the install checks).
    pub(crate) fn spend_check_budget(&self, address: std::net::IpAddr) -> Result<(), AppError> {
        self.check_limiter
            .try_acquire(address, std::time::Instant::now())
            .map_err(|retry_after_sec| AppError(JoinRateLimiter::check_refusal(retry_after_sec)))
    }

    /// Token verification at the current time.
    pub(crate) fn token_check(&self) -> TokenCheck<'_> {
        self.token_check_at(now_ms())
    }

    pub(crate) fn token_check_at(&self, now_ms: i64) -> TokenCheck<'_> {
        TokenCheck {
            keyring: &self.keyring,
            now_ms,
            max_age_sec: self.config.token_max_age_sec,
        }
    }
}

/// The gateway HTTP application, ready to serve on a listener.
pub struct GatewayApp {
    state: GatewayState,
    stopping: watch::Sender<bool>,
}

impl GatewayApp {
    pub fn new(config: Arc<Config>, engine: EngineClient, engine_health: Channel) -> GatewayApp {
        let (stopping, shutdown) = watch::channel(false);
        let keyring = config.keyring();
        // The keyring always holds SECRET first: the page shows the code under it.
        let support_ref_key = keyring
            .derived_keys(qm_core::support_ref::SUPPORT_REF_INFO)
            .first()
            .copied()
            .unwrap_or_default();
        let state = GatewayState(Arc::new(GatewayShared {
            keyring: Arc::new(keyring),
            support_ref_key,
            join_limiter: Arc::new(JoinRateLimiter::per_minute(config.join_limit_per_min)),
            check_limiter: Arc::new(JoinRateLimiter::per_minute(config.check_limit_per_min)),
            status_limiter: Arc::new(JoinRateLimiter::per_minute(config.status_limit_per_min)),
            page_limiter: Arc::new(JoinRateLimiter::per_minute(config.page_limit_per_min)),
            stream_open_limiter: Arc::new(JoinRateLimiter::per_minute(
                config.stream_open_limit_per_min,
            )),
            stream_limits: StreamLimits::new(config.sse_max_total, config.sse_per_ip),
            hubs: RoomHubs::new(engine.clone(), shutdown.clone()),
            metrics: metrics::GatewayMetrics::new(),
            config,
            visitor_calls: visitor_calls::VisitorCalls::start(engine.clone()),
            engine,
            engine_health,
            shutdown,
        }));
        GatewayApp { state, stopping }
    }

    /// Every route of the gateway, behind the inline front when INLINE_HOSTS names a host.
    pub fn router(&self) -> Router {
        let routes = self.routes();
        if self.state.config.inline_hosts.is_empty() {
            return routes;
        }
        inline::front(self.state.clone(), routes)
    }

    /// The gateway's own routes.
    fn routes(&self) -> Router {
        let contract = contract_routes();
        Router::new()
            .nest("/api/v1", contract.clone())
            .nest("/api", contract)
            // The bare alias every open waiting page holds an EventSource on (permanent).
            .route(
                "/events",
                get(events::events).merge(same_origin_preflight("GET, HEAD, OPTIONS")),
            )
            .route("/healthz", get(health::health))
            .route(
                "/w/{room_id}",
                get(pages::waiting_page).post(join_form::join_form),
            )
            .route("/assets/{name}", get(pages::asset))
            // The connectors' files and the browser snippet: public, cacheable, no budget.
            .route("/connectors/{name}/{file}", get(artifacts::connector_file))
            .route("/snippet/{file}", get(artifacts::snippet_file))
            .route("/__qm/assets/{name}", get(pages::asset))
            // The guides, as the admin process serves them: integrators see only this host.
            .merge(qm_docs::routes())
            .method_not_allowed_fallback(qm_http::method_not_allowed)
            .fallback(qm_http::not_found)
            .with_state(self.state.clone())
            .layer(axum::middleware::from_fn_with_state(
                self.state.metrics.clone(),
                metrics::track,
            ))
    }

    /// The private metrics listener's router (`GET /metrics`), for GATEWAY_METRICS_ADDR.
    pub fn metrics_router(&self) -> Router {
        metrics::router(self.state.clone())
    }

    /// Serves until `shutdown` resolves: then open event streams end, new connections are
    /// refused, and open requests drain for at most SHUTDOWN_DRAIN_SEC. `metrics`, when given,
    /// is GATEWAY_METRICS_ADDR's listener: it serves `/metrics` until the gateway stops.
    pub async fn run(
        self,
        listener: tokio::net::TcpListener,
        metrics: Option<tokio::net::TcpListener>,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let options = qm_http::ServeOptions::from_config(&self.state.config, HEALTH_PATHS);
        let router = self.router();
        let metrics = metrics.map(|listener| {
            let router = self.metrics_router();
            tokio::spawn(async move {
                if let Err(error) = axum::serve(listener, router).await {
                    tracing::error!(%error, "the gateway's metrics listener stopped");
                }
            })
        });
        let served = qm_http::serve(listener, router, shutdown, self.stopping, options).await;
        if let Some(metrics) = metrics {
            metrics.abort();
        }
        served
    }
}

/// Readiness and version: answered even on a connection shed past MAX_CONNECTIONS (the spec's
/// health exemption), so a load balancer does not take a busy instance for a dead one.
const HEALTH_PATHS: &[&str] = &[
    "/healthz",
    "/api/health",
    "/api/version",
    "/api/v1/health",
    "/api/v1/version",
];

/// The contract routes, served under both `/api/v1` and `/api`: the same handlers, so the two
/// answer byte for byte alike.
fn contract_routes() -> Router<GatewayState> {
    Router::new()
        .route(
            "/join",
            post(visitor::join).merge(same_origin_preflight("POST, OPTIONS")),
        )
        .route(
            "/status",
            get(visitor::status).merge(same_origin_preflight("GET, HEAD, OPTIONS")),
        )
        .route(
            "/events",
            get(events::events).merge(same_origin_preflight("GET, HEAD, OPTIONS")),
        )
        .route(
            "/notify",
            post(notify::notify).merge(same_origin_preflight("POST, OPTIONS")),
        )
        .route("/check", get(check::check).options(check::check_preflight))
        .route(
            "/targeting",
            get(targeting::targeting).merge(same_origin_preflight("GET, HEAD, OPTIONS")),
        )
        .route(
            "/verify",
            get(verify::verify).merge(same_origin_preflight("GET, HEAD, OPTIONS")),
        )
        .route(
            "/verify.gif",
            get(verify::verify_gif).merge(same_origin_preflight("GET, HEAD, OPTIONS")),
        )
        .route(
            "/connectors",
            get(connectors::list).merge(same_origin_preflight("GET, HEAD, OPTIONS")),
        )
        .route(
            "/connectors/wordpress/update",
            get(connectors::wordpress_update).merge(same_origin_preflight("GET, HEAD, OPTIONS")),
        )
        .route(
            "/health",
            get(health::health).merge(same_origin_preflight("GET, HEAD, OPTIONS")),
        )
        .route(
            "/version",
            get(health::version).merge(same_origin_preflight("GET, HEAD, OPTIONS")),
        )
        .method_not_allowed_fallback(qm_http::method_not_allowed)
}

/// OPTIONS on a same-origin route: the verbs it takes, and never an allowed origin, exactly as
/// the real method answers.
fn same_origin_preflight(allow: &'static str) -> MethodRouter<GatewayState> {
    axum::routing::options(move || async move {
        let mut response: Response = StatusCode::NO_CONTENT.into_response();
        response
            .headers_mut()
            .insert(http::header::ALLOW, HeaderValue::from_static(allow));
        response
    })
}
