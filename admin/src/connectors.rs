//! GET /api/admin/rooms/:id/connectors: the connectors that ran an install check
//! (`GET /api/verify` or `/api/verify.gif` with `connector=`) on the room, each with its
//! version, the origin it checked, when it was first and last seen and how often, most recent
//! first. Kept by the engine this process talks to, in memory (OPERATIONS.md, Connectors that
//! checked in); the console shows it in the room's detail.
//!
//! Grants: any console credential may read it.

use axum::Json;
use qm_proto::RoomRef;
use serde_json::{Value, json};

use crate::extract::RoomTarget;
use qm_http::AppError;

/// GET /api/admin/rooms/:id/connectors.
pub(crate) async fn connectors(mut room: RoomTarget) -> Result<Json<Value>, AppError> {
    let reply = room
        .engine
        .check_ins(RoomRef { room_id: room.id })
        .await?
        .into_inner();
    let connectors: Vec<Value> = reply
        .check_ins
        .iter()
        .map(|entry| {
            json!({
                "connector": entry.connector,
                "version": entry.version,
                "origin": entry.origin,
                "firstSeen": entry.first_seen_ms,
                "lastSeen": entry.last_seen_ms,
                "count": entry.count,
            })
        })
        .collect();
    Ok(Json(
        json!({"roomId": reply.room_id, "connectors": connectors}),
    ))
}
