//! `GET /api/admin/security[?roomId=]`: bot protection's account per room — the room's
//! `protection.mode`, how the joins scored, what `enforce` refused and what `monitor` let in
//! that `enforce` would have refused, the top reasons and the latest examples, each client
//! address shown only as a keyed one-way digest. The account is the engine's this process talks
//! to (`qm_engine` `security.rs`; OPERATIONS.md, Bot protection, says how it adds up across
//! engines). Grants: any read credential, the monitor token included.

use axum::Json;
use axum::extract::{Query, State};
use qm_core::{ApiError, ErrorCode};
use qm_proto::SecurityRequest;
use serde::Deserialize;
use serde_json::Value;

use crate::AdminState;
use crate::auth::Authenticated;
use qm_http::AppError;

#[derive(Debug, Deserialize)]
pub(crate) struct SecurityQuery {
    #[serde(rename = "roomId")]
    room_id: Option<String>,
}

/// GET /api/admin/security.
pub(crate) async fn security(
    _: Authenticated,
    State(state): State<AdminState>,
    Query(query): Query<SecurityQuery>,
) -> Result<Json<Value>, AppError> {
    let room_id = match query.room_id {
        None => String::new(),
        Some(id) if qm_core::ids::is_valid_room_id(&id) => id,
        Some(_) => {
            return Err(ApiError::new(
                ErrorCode::InvalidRoomId,
                "roomId must be 1-64 characters of A-Z a-z 0-9 _ -",
            )
            .into());
        }
    };
    let reply = state
        .engine
        .clone()
        .security(SecurityRequest { room_id })
        .await?
        .into_inner();
    let report: Value = serde_json::from_str(&reply.report_json)
        .map_err(|error| ApiError::internal(format!("the engine's security report: {error}")))?;
    Ok(Json(report))
}
