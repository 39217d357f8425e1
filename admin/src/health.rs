//! Readiness of the admin process (`/healthz`) and the operator's health view
//! (`/api/admin/health`): effective configuration, storage state and misconfiguration warnings.

use axum::Json;
use axum::extract::State;
use http::StatusCode;
use qm_proto::StatsRequest;
use serde_json::{Value, json};

use crate::AdminState;
use crate::auth::Authenticated;
use qm_http::AppError;

/// 200 when the engine answers its health check, 503 naming what is missing otherwise.
pub(crate) async fn healthz(State(state): State<AdminState>) -> (StatusCode, Json<Value>) {
    let engine = qm_proto::client::engine_accepts(state.engine_health.clone(), &state.engine).await;
    let ready = engine.is_ok();
    let body = json!({
        "ready": ready,
        "process": "admin",
        "version": env!("CARGO_PKG_VERSION"),
        "checks": { "engine": engine.err().unwrap_or_else(|| "ok".to_owned()) },
    });
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body))
}

/// GET /livez: 200 while this process answers HTTP, whatever the engine says — a liveness
/// probe, so an engine outage makes the admin process unready without restarting it.
pub(crate) async fn livez() -> Json<Value> {
    Json(json!({
        "live": true,
        "process": "admin",
        "version": env!("CARGO_PKG_VERSION"),
    }))
}

/// GET /api/admin/health.
pub(crate) async fn admin_health(
    _: Authenticated,
    State(state): State<AdminState>,
) -> Result<Json<Value>, AppError> {
    let engine = qm_proto::client::engine_accepts(state.engine_health.clone(), &state.engine).await;
    let stats = match &engine {
        Ok(()) => Some(
            state
                .engine
                .clone()
                .stats(StatsRequest {})
                .await?
                .into_inner(),
        ),
        Err(_) => None,
    };
    let mut warnings = state.config.warnings();
    if let Some(stats) = &stats
        && stats.no_room_checks > 0
    {
        warnings.push(format!(
            "{} door checks named a room that does not exist and were let through (fail-open): check the room id in your connectors",
            stats.no_room_checks
        ));
    }
    Ok(Json(json!({
        "ok": engine.is_ok(),
        "version": env!("CARGO_PKG_VERSION"),
        "config": state.config.public_json(),
        "engine": engine.err().unwrap_or_else(|| "ok".to_owned()),
        "storage": stats.as_ref().map(|stats| json!({
            "store": stats.store,
            "ready": stats.storage_ready,
        })),
        "rooms": stats.as_ref().map(|stats| stats.rooms),
        "noRoomChecks": stats.as_ref().map(|stats| stats.no_room_checks),
        "engineStartedAt": stats.as_ref().map(|stats| stats.started_at_ms),
        "warnings": warnings,
    })))
}
