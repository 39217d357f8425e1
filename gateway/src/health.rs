//! Readiness: `/healthz` and `/api/health` answer 200 when the engine's gRPC health service says
//! SERVING and the engine accepts this process's credential, and 503 naming what is missing otherwise; `/api/version` is the same payload, always
//! 200 (it says which build answers, ready or not).

use axum::Json;
use axum::extract::State;
use http::StatusCode;
use serde_json::{Value, json};

use crate::GatewayState;

async fn readiness(state: &GatewayState) -> (bool, Value) {
    let engine = qm_proto::client::engine_accepts(state.engine_health.clone(), &state.engine).await;
    let ready = engine.is_ok();
    let body = json!({
        "ready": ready,
        "process": "gateway",
        "version": env!("CARGO_PKG_VERSION"),
        "checks": { "engine": engine.err().unwrap_or_else(|| "ok".to_owned()) },
        "streams": {
            "open": state.stream_limits.open_total(),
            "roomsFollowed": state.hubs.rooms_followed(),
        },
    });
    (ready, body)
}

/// GET /healthz, GET /api/health.
pub(crate) async fn health(State(state): State<GatewayState>) -> (StatusCode, Json<Value>) {
    let (ready, body) = readiness(&state).await;
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body))
}

/// GET /api/version.
pub(crate) async fn version(State(state): State<GatewayState>) -> Json<Value> {
    Json(readiness(&state).await.1)
}
