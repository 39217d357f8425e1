//! The room document's validator, as `POST /api/admin/rooms` and the live-control routes use it
//! (`RoomConfig::apply_patch`, `apply_schedule`, the rate, flush and eject bodies), on any JSON.
//!
//! Properties: a refusal's message is bounded (it crosses gRPC in a header); a room that is
//! accepted holds no control character in any string (tab and line breaks only in the two
//! paragraph texts), and reading it back and posting it unchanged is a fixed point.

#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use qm_core::ApiError;
use qm_core::error::MAX_STATUS_MESSAGE_BYTES;
use qm_core::room::{
    RoomConfig, RoomState, apply_schedule, parse_eject_body, parse_flush_body, parse_rate_body,
};
use qm_core::text::{TextKind, first_control_character};
use serde_json::{Value, json};

const NOW: i64 = 1_700_000_000_000;

/// A room with every optional part set, for updates to land on.
static FULL_ROOM: LazyLock<RoomConfig> = LazyLock::new(|| {
    let body = json!({
        "id": "fuzz", "name": "Fuzz room", "targetUrl": "https://shop.example.com/drop",
        "ratePerMinute": 60, "proxyOrigin": "http://10.0.0.5:8080", "maxConcurrent": 100,
        "sessionTtlSec": 600, "sessionMaxSec": 3600,
        "branding": {"title": "Drop", "message": "Soon", "primaryColor": "#123456"},
        "returnOrigins": ["https://a.example"], "tagOrigins": ["https://b.example"],
        "autotune": {"enabled": true, "minRate": 1, "maxRate": 10, "healthUrl": "http://10.0.0.5:8080/health", "coolDownSec": 30},
        "protection": {"mode": "monitor"}, "autoActivate": {"enabled": false, "threshold": 5},
        "urlPatterns": ["/checkout/*", "!/checkout/help"], "opensAt": NOW + 60_000,
        "preQueueMaxPerIp": 3, "queueMaxPerIp": 4, "presenceSec": 30, "state": "paused",
        "onBackendDown": "open"
    });
    RoomConfig::apply_patch(None, &body, NOW).expect("the fuzz base room is valid")
});

fn check_refusal(error: &ApiError) {
    assert!(
        error.message.len() <= MAX_STATUS_MESSAGE_BYTES,
        "{:?}: a {}-byte message",
        error.code,
        error.message.len()
    );
}

fn line(text: &str) {
    assert_eq!(
        first_control_character(text, TextKind::Line),
        None,
        "{text:?}"
    );
}

fn paragraph(text: &str) {
    assert_eq!(
        first_control_character(text, TextKind::Paragraph),
        None,
        "{text:?}"
    );
}

/// Every string an accepted room stores is free of refused control characters.
fn check_stored_text(room: &RoomConfig) {
    line(&room.id);
    line(&room.name);
    line(&room.target_url);
    room.proxy_origin.iter().for_each(|origin| line(origin));
    for list in [&room.return_origins, &room.tag_origins]
        .into_iter()
        .flatten()
    {
        list.iter().for_each(|origin| line(origin));
    }
    room.url_patterns.iter().for_each(|rule| line(rule));
    if let Some(branding) = &room.branding {
        for text in [
            &branding.title,
            &branding.logo_url,
            &branding.primary_color,
            &branding.accent_color,
            &branding.background_color,
            &branding.text_color,
        ] {
            text.iter().for_each(|text| line(text));
        }
        branding.message.iter().for_each(|text| paragraph(text));
        branding
            .support_text
            .iter()
            .for_each(|text| paragraph(text));
    }
}

fn check_accepted(room: &RoomConfig) {
    check_stored_text(room);
    // What GET answers, posted straight back, changes nothing.
    let read = serde_json::to_value(room).expect("a room serialises");
    assert_eq!(
        RoomConfig::apply_patch(Some(room), &read, NOW).as_ref(),
        Ok(room),
        "{read}"
    );
    let _ = room.effective_tag_origins();
    let _ = room.effective_return_origins();
    let _ = room.effective_state(NOW);
}

fn check<T>(answer: Result<T, ApiError>) -> Option<T> {
    match answer {
        Ok(value) => Some(value),
        Err(error) => {
            check_refusal(&error);
            None
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(body) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    if let Some(room) = check(RoomConfig::apply_patch(None, &body, NOW)) {
        check_accepted(&room);
    }
    if let Some(room) = check(RoomConfig::apply_patch(Some(&FULL_ROOM), &body, NOW)) {
        check_accepted(&room);
    }
    if let Some(room) = check(apply_schedule(&FULL_ROOM, &body)) {
        check_accepted(&room);
    }
    check(parse_rate_body(&body));
    check(parse_flush_body(&body));
    check(parse_eject_body(&body));
    if let Some(text) = body.get("state").and_then(Value::as_str) {
        check(RoomState::parse(text));
    }
});
