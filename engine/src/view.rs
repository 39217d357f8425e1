//! What the engine tells the edge about a room outside a visitor's own place: the line view
//! pushed to watchers (enough for a gateway to answer every waiting listener's position without
//! a call each) and the room facts a gateway serves pages and CORS decisions from.

use qm_proto::{RoomInfoReply, RoomView};

use crate::domain::Room;

/// The room's line as of `now_ms`. Cheap: the only vector is `holes` (ejected waiting
/// tickets), which stays small; the line itself is two numbers.
pub(crate) fn room_view(room: &Room, now_ms: i64) -> RoomView {
    let config = room.config();
    RoomView {
        room_id: config.id.clone(),
        exists: true,
        generation: room.generation(),
        seq: room.seq(),
        at_ms: now_ms,
        state: config.state.as_str().to_owned(),
        effective_state: room.effective_state(now_ms).as_str().to_owned(),
        rate_per_minute: config.rate_per_minute,
        head: room.head(),
        next_ticket: room.next_ticket(),
        holes: room.holes().to_vec(),
        opens_at_ms: config.opens_at,
        pre_count: room.pre_count(),
        target_url: config.target_url.clone(),
        branding_json: room.branding_json().to_owned(),
        promoted_total: room.passed_total(),
    }
}

/// The view of a room id that has no room (never created, or deleted). `seq` is the last one
/// the id used, so a watcher's seq never goes backwards.
pub(crate) fn missing_view(room_id: &str, seq: u64, now_ms: i64) -> RoomView {
    RoomView {
        room_id: room_id.to_owned(),
        exists: false,
        seq,
        at_ms: now_ms,
        branding_json: "{}".to_owned(),
        ..RoomView::default()
    }
}

pub(crate) fn room_info(room: &Room, now_ms: i64) -> RoomInfoReply {
    let config = room.config();
    RoomInfoReply {
        found: true,
        room_id: config.id.clone(),
        name: config.name.clone(),
        target_url: config.target_url.clone(),
        tag_origins: config.effective_tag_origins(),
        return_origins: config.effective_return_origins(),
        branding_json: room.branding_json().to_owned(),
        state: config.state.as_str().to_owned(),
        effective_state: room.effective_state(now_ms).as_str().to_owned(),
        generation: room.generation(),
        opens_at_ms: config.opens_at,
        proxy_origin: config.proxy_origin.clone().unwrap_or_default(),
        on_backend_down: config.on_backend_down.as_str().to_owned(),
    }
}
