//! The room routes: create/update, list, read, delete and the live controls (state, rate,
//! flush, schedule, eject, purge). Bodies are validated at the engine, atomically with the room
//! they change (qm-core owns the rules); this module only checks what the route itself names.
//!
//! Each handler is the same four steps: let the caller in and read the room id
//! ([`RoomTarget`]), read the body ([`ObjectBody`]), make one engine call, and answer its reply
//! — a change answers `{ok: true, ..., room}` through [`changed`].

use axum::extract::State;
use axum::{Extension, Json};
use qm_core::{ApiError, ErrorCode};
use qm_proto::{
    EjectRequest, FlushRequest, ListRoomsRequest, PutRoomRequest, RoomRef, ScheduleRequest,
    SetRateRequest, SetStateRequest,
};
use serde_json::{Map, Value, json};

use crate::AdminState;
use crate::audit::AuditNote;
use crate::auth::Authenticated;
use crate::extract::{ObjectBody, RoomTarget};
use crate::principal::Role;
use qm_http::AppError;

type Answer = Result<Json<Value>, AppError>;

/// A room as the engine sent it (its JSON text).
pub(crate) fn parse_room(room_json: &str) -> Result<Value, ApiError> {
    serde_json::from_str(room_json)
        .map_err(|error| ApiError::internal(format!("engine sent an unreadable room: {error}")))
}

/// The rooms of a listing, in the engine's order.
pub(crate) fn parse_rooms(rooms_json: &[String]) -> Result<Vec<Value>, ApiError> {
    rooms_json.iter().map(|room| parse_room(room)).collect()
}

/// The answer to a change: `{ok: true}`, then `fields` in order, then the room as it stands
/// after the change.
fn changed<const N: usize>(room_json: &str, fields: [(&str, Value); N]) -> Answer {
    let mut answer = Map::new();
    answer.insert("ok".to_owned(), Value::Bool(true));
    for (name, value) in fields {
        answer.insert(name.to_owned(), value);
    }
    answer.insert("room".to_owned(), parse_room(room_json)?);
    Ok(Json(Value::Object(answer)))
}

/// What a room read through a monitor credential hides: the internal address, the origin
/// allowlists and the URL rules, blanked, and `redacted: true` so posting the body back is
/// refused (`redacted_shape`) instead of wiping them.
pub(crate) fn redact_room(room: &mut Value) {
    let Some(fields) = room.as_object_mut() else {
        return;
    };
    fields.insert("proxyOrigin".to_owned(), Value::Null);
    for list in ["returnOrigins", "tagOrigins", "urlPatterns"] {
        fields.insert(list.to_owned(), json!([]));
    }
    fields.insert("redacted".to_owned(), Value::Bool(true));
}

/// A room as `caller` may read it.
fn room_for(caller: &Authenticated, room_json: &str) -> Result<Value, ApiError> {
    let mut room = parse_room(room_json)?;
    if caller.principal.role == Role::Monitor {
        redact_room(&mut room);
    }
    Ok(room)
}

/// GET /rooms.
pub(crate) async fn list_rooms(caller: Authenticated, State(state): State<AdminState>) -> Answer {
    let reply = state.engine.clone().list_rooms(ListRoomsRequest {}).await?;
    let rooms = reply
        .into_inner()
        .room_json
        .iter()
        .map(|room| room_for(&caller, room))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Json(json!({ "rooms": rooms })))
}

/// POST /rooms: creates the room or updates it.
pub(crate) async fn put_room(
    _: Authenticated,
    State(state): State<AdminState>,
    ObjectBody(body): ObjectBody,
) -> Result<(Extension<AuditNote>, Json<Value>), AppError> {
    let body_json = body.to_string();
    let request = PutRoomRequest { body_json };
    let reply = state.engine.clone().put_room(request).await?.into_inner();
    let action = if reply.created {
        "room.create"
    } else {
        "room.update"
    };
    let answer = changed(&reply.room_json, [("created", json!(reply.created))])?;
    Ok((Extension(AuditNote::action(action)), answer))
}

/// GET /rooms/:id.
pub(crate) async fn get_room(caller: Authenticated, mut room: RoomTarget) -> Answer {
    let request = RoomRef { room_id: room.id };
    let reply = room.engine.get_room(request).await?.into_inner();
    Ok(Json(
        json!({ "room": room_for(&caller, &reply.room_json)? }),
    ))
}

/// DELETE /rooms/:id.
pub(crate) async fn delete_room(mut room: RoomTarget) -> Answer {
    let request = RoomRef { room_id: room.id };
    let reply = room.engine.delete_room(request).await?.into_inner();
    Ok(Json(json!({ "ok": true, "deleted": reply.deleted })))
}

/// POST /rooms/:id/state `{state}`; the engine checks the value.
pub(crate) async fn set_state(mut room: RoomTarget, ObjectBody(body): ObjectBody) -> Answer {
    let Some(state) = body.get("state").and_then(Value::as_str) else {
        return Err(ApiError::new(
            ErrorCode::InvalidState,
            "state must be one of active, paused, bypass",
        )
        .into());
    };
    let request = SetStateRequest {
        room_id: room.id,
        state: state.to_owned(),
    };
    let reply = room.engine.set_state(request).await?.into_inner();
    changed(&reply.room_json, [])
}

/// POST /rooms/:id/rate `{ratePerMinute}` (or `{rate}`).
pub(crate) async fn set_rate(mut room: RoomTarget, ObjectBody(body): ObjectBody) -> Answer {
    let rate_per_minute = qm_core::room::parse_rate_body(&body)?;
    let request = SetRateRequest {
        room_id: room.id,
        rate_per_minute,
    };
    let reply = room.engine.set_rate(request).await?.into_inner();
    changed(&reply.room_json, [])
}

/// POST /rooms/:id/flush `{count}`.
pub(crate) async fn flush(mut room: RoomTarget, ObjectBody(body): ObjectBody) -> Answer {
    let count = qm_core::room::parse_flush_body(&body)?;
    let request = FlushRequest {
        room_id: room.id,
        count,
    };
    let reply = room.engine.flush(request).await?.into_inner();
    changed(&reply.room_json, [("promoted", json!(reply.promoted))])
}

/// POST /rooms/:id/schedule `{opensAt?, preQueueMaxPerIp?}`; the engine applies it.
pub(crate) async fn schedule(mut room: RoomTarget, ObjectBody(body): ObjectBody) -> Answer {
    let body_json = body.to_string();
    let request = ScheduleRequest {
        room_id: room.id,
        body_json,
    };
    let reply = room.engine.schedule(request).await?.into_inner();
    changed(&reply.room_json, [])
}

/// POST /rooms/:id/eject `{ticket}`.
pub(crate) async fn eject(mut room: RoomTarget, ObjectBody(body): ObjectBody) -> Answer {
    let ticket = qm_core::room::parse_eject_body(&body)?;
    let request = EjectRequest {
        room_id: room.id,
        ticket,
    };
    let reply = room.engine.eject(request).await?.into_inner();
    let fields = [("ticket", json!(ticket)), ("was", json!(reply.was))];
    changed(&reply.room_json, fields)
}

/// POST /rooms/:id/purge: no body.
pub(crate) async fn purge(mut room: RoomTarget) -> Answer {
    let request = RoomRef { room_id: room.id };
    let reply = room.engine.purge(request).await?.into_inner();
    let stats = parse_room(&reply.room_json)?;
    Ok(Json(
        json!({ "purged": reply.purged, "preQueue": reply.pre_queue, "stats": stats }),
    ))
}
