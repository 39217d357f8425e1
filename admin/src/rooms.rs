//! The room routes: create/update, list, read, delete and the live controls (state, rate,
//! flush, schedule, eject, purge). Bodies are validated at the engine, atomically with the room
//! they change (qm-core owns the rules); this module only checks what the route itself names.

use axum::Json;
use axum::extract::{Path, State};
use qm_core::{ApiError, ErrorCode};
use qm_proto::{
    EjectRequest, FlushRequest, ListRoomsRequest, PutRoomRequest, RoomRef, ScheduleRequest,
    SetRateRequest, SetStateRequest,
};
use serde_json::{Value, json};

use crate::AdminState;
use crate::auth::Authenticated;
use qm_http::AppError;

/// Largest flush an operator can ask for in one call.
const MAX_FLUSH: u64 = 1_000_000;

type JsonBody = Result<Json<Value>, axum::extract::rejection::JsonRejection>;
type Answer = Result<Json<Value>, AppError>;

fn room_id(id: String) -> Result<String, AppError> {
    if qm_core::ids::is_valid_room_id(&id) {
        Ok(id)
    } else {
        Err(ApiError::new(
            ErrorCode::InvalidRoomId,
            "room ids are 1-64 characters of A-Z a-z 0-9 _ -",
        )
        .into())
    }
}

fn object(body: JsonBody) -> Result<Value, AppError> {
    let Json(value) = body?;
    if value.is_object() {
        Ok(value)
    } else {
        Err(ApiError::new(ErrorCode::InvalidJson, "the body must be a JSON object").into())
    }
}

fn parse_room(room_json: &str) -> Result<Value, AppError> {
    serde_json::from_str(room_json).map_err(|error| {
        ApiError::internal(format!("engine sent an unreadable room: {error}")).into()
    })
}

pub(crate) async fn list_rooms(_: Authenticated, State(state): State<AdminState>) -> Answer {
    let reply = state
        .engine
        .clone()
        .list_rooms(ListRoomsRequest {})
        .await?
        .into_inner();
    let rooms = reply
        .room_json
        .iter()
        .map(|room| parse_room(room))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Json(json!({ "rooms": rooms })))
}

pub(crate) async fn put_room(
    _: Authenticated,
    State(state): State<AdminState>,
    body: JsonBody,
) -> Answer {
    let body = object(body)?;
    let reply = state
        .engine
        .clone()
        .put_room(PutRoomRequest {
            body_json: body.to_string(),
        })
        .await?
        .into_inner();
    Ok(Json(
        json!({ "ok": true, "created": reply.created, "room": parse_room(&reply.room_json)? }),
    ))
}

pub(crate) async fn get_room(
    _: Authenticated,
    State(state): State<AdminState>,
    Path(id): Path<String>,
) -> Answer {
    let reply = state
        .engine
        .clone()
        .get_room(RoomRef {
            room_id: room_id(id)?,
        })
        .await?
        .into_inner();
    Ok(Json(json!({ "room": parse_room(&reply.room_json)? })))
}

pub(crate) async fn delete_room(
    _: Authenticated,
    State(state): State<AdminState>,
    Path(id): Path<String>,
) -> Answer {
    let reply = state
        .engine
        .clone()
        .delete_room(RoomRef {
            room_id: room_id(id)?,
        })
        .await?
        .into_inner();
    Ok(Json(json!({ "ok": true, "deleted": reply.deleted })))
}

pub(crate) async fn set_state(
    _: Authenticated,
    State(state): State<AdminState>,
    Path(id): Path<String>,
    body: JsonBody,
) -> Answer {
    let room_id = room_id(id)?;
    let body = object(body)?;
    let Some(new_state) = body.get("state").and_then(Value::as_str) else {
        return Err(ApiError::new(
            ErrorCode::InvalidState,
            "state must be one of active, paused, bypass",
        )
        .into());
    };
    let request = SetStateRequest {
        room_id,
        state: new_state.to_owned(),
    };
    let reply = state.engine.clone().set_state(request).await?.into_inner();
    Ok(Json(
        json!({ "ok": true, "room": parse_room(&reply.room_json)? }),
    ))
}

pub(crate) async fn set_rate(
    _: Authenticated,
    State(state): State<AdminState>,
    Path(id): Path<String>,
    body: JsonBody,
) -> Answer {
    let room_id = room_id(id)?;
    let rate_per_minute = qm_core::room::parse_rate_body(&object(body)?)?;
    let reply = state
        .engine
        .clone()
        .set_rate(SetRateRequest {
            room_id,
            rate_per_minute,
        })
        .await?
        .into_inner();
    Ok(Json(
        json!({ "ok": true, "room": parse_room(&reply.room_json)? }),
    ))
}

pub(crate) async fn flush(
    _: Authenticated,
    State(state): State<AdminState>,
    Path(id): Path<String>,
    body: JsonBody,
) -> Answer {
    let room_id = room_id(id)?;
    let body = object(body)?;
    let count = match body.get("count").and_then(Value::as_u64) {
        Some(count) if (1..=MAX_FLUSH).contains(&count) => count,
        _ => {
            return Err(ApiError::new(
                ErrorCode::InvalidCount,
                format!("count must be a whole number from 1 to {MAX_FLUSH}"),
            )
            .into());
        }
    };
    let reply = state
        .engine
        .clone()
        .flush(FlushRequest { room_id, count })
        .await?
        .into_inner();
    Ok(Json(
        json!({ "ok": true, "promoted": reply.promoted, "room": parse_room(&reply.room_json)? }),
    ))
}

pub(crate) async fn schedule(
    _: Authenticated,
    State(state): State<AdminState>,
    Path(id): Path<String>,
    body: JsonBody,
) -> Answer {
    let room_id = room_id(id)?;
    let body_json = object(body)?.to_string();
    let reply = state
        .engine
        .clone()
        .schedule(ScheduleRequest { room_id, body_json })
        .await?
        .into_inner();
    Ok(Json(
        json!({ "ok": true, "room": parse_room(&reply.room_json)? }),
    ))
}

pub(crate) async fn eject(
    _: Authenticated,
    State(state): State<AdminState>,
    Path(id): Path<String>,
    body: JsonBody,
) -> Answer {
    let room_id = room_id(id)?;
    let body = object(body)?;
    let ticket = match body.get("ticket").and_then(Value::as_u64) {
        Some(ticket) if ticket >= 1 => ticket,
        _ => {
            return Err(ApiError::new(
                ErrorCode::InvalidTicket,
                "ticket must be a ticket number (a whole number from 1)",
            )
            .into());
        }
    };
    let reply = state
        .engine
        .clone()
        .eject(EjectRequest { room_id, ticket })
        .await?
        .into_inner();
    Ok(Json(
        json!({ "ok": true, "ticket": ticket, "was": reply.was, "room": parse_room(&reply.room_json)? }),
    ))
}

pub(crate) async fn purge(
    _: Authenticated,
    State(state): State<AdminState>,
    Path(id): Path<String>,
) -> Answer {
    let reply = state
        .engine
        .clone()
        .purge(RoomRef {
            room_id: room_id(id)?,
        })
        .await?
        .into_inner();
    let stats = parse_room(&reply.room_json)?;
    Ok(Json(
        json!({ "purged": reply.purged, "preQueue": reply.pre_queue, "stats": stats }),
    ))
}
