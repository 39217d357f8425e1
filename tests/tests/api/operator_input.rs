//! Hostile operator input through the real admin process and engine: a 100 KB value is refused
//! with its field's code (not a 503 from an echo that outgrew gRPC metadata) while concurrent
//! reads carry on, and control characters never reach a stored room.

use qm_tests::{room_body, spawn_app};
use reqwest::Method;
use serde_json::json;

const HUNDRED_KB: usize = 100 * 1024;

#[tokio::test]
async fn a_100_kb_value_is_refused_with_its_code_and_reads_carry_on() {
    let app = spawn_app().await;
    app.create_room(room_body("big", 60, json!({}))).await;
    let huge = "x".repeat(HUNDRED_KB);
    let refusals = [
        (
            "/rooms",
            json!({"id": "big", "ratePerMinute": huge}),
            "invalid_rate",
        ),
        (
            "/rooms",
            json!({"id": "big", "proxyOrigin": huge}),
            "invalid_proxy_origin",
        ),
        (
            "/rooms",
            json!({"id": "big", "urlPatterns": [huge]}),
            "invalid_url_pattern",
        ),
        (
            "/rooms",
            json!({"id": "big", "state": huge}),
            "invalid_state",
        ),
        (
            "/rooms",
            json!({"id": "big", huge.clone(): 1}),
            "unknown_field",
        ),
        ("/rooms/big/state", json!({"state": huge}), "invalid_state"),
        (
            "/rooms/big/schedule",
            json!({"opensAt": huge}),
            "invalid_opens_at",
        ),
    ];
    // Each refusal runs beside a handful of reads over the same admin-to-engine channel: before
    // the bound, the oversized status broke the shared connection and failed reads with it.
    for (path, body, code) in refusals {
        let refused = app.admin_post(path, body);
        let reads =
            futures::future::join_all((0..8).map(|_| app.admin_call(Method::GET, "/rooms", None)));
        let (refused, reads) = tokio::join!(refused, reads);
        assert_eq!(
            (refused.status, refused.code()),
            (400, code),
            "{path}: {}",
            &refused.text[..refused.text.len().min(300)]
        );
        assert!(
            refused.text.len() < 2_000,
            "{path}: the refusal quotes a bounded echo, got {} bytes",
            refused.text.len()
        );
        for read in reads {
            assert_eq!(read.status, 200, "a concurrent read failed: {}", read.text);
        }
    }
    // Nothing was changed by any of them.
    assert_eq!(app.room("big").await["ratePerMinute"], 60);
    app.stop().await;
}

#[tokio::test]
async fn control_characters_never_reach_a_stored_room() {
    let app = spawn_app().await;
    let created = app
        .create_room(room_body("clean", 60, json!({ "name": "Clean" })))
        .await;
    assert_eq!(created["name"], "Clean");
    let refusals = [
        (
            json!({"id": "clean", "name": "Big\u{0}drop"}),
            "invalid_name",
        ),
        (
            json!({"id": "clean", "name": "Big\u{1b}[2Jdrop"}),
            "invalid_name",
        ),
        (
            json!({"id": "clean", "name": "Big\u{7f}drop"}),
            "invalid_name",
        ),
        (
            json!({"id": "clean", "targetUrl": "https://shop.example.com/\u{0}x"}),
            "invalid_target_url",
        ),
        (
            json!({"id": "clean", "proxyOrigin": "http://in\u{0}ternal:8080"}),
            "invalid_proxy_origin",
        ),
        (
            json!({"id": "clean", "branding": {"title": "Drop\u{0}"}}),
            "invalid_branding",
        ),
        (
            json!({"id": "clean", "branding": {"message": "Soon\u{0}"}}),
            "invalid_branding",
        ),
        (
            json!({"id": "clean", "urlPatterns": ["/drop\u{0}"]}),
            "invalid_url_pattern",
        ),
    ];
    for (body, code) in refusals {
        let reply = app.admin_post("/rooms", body.clone()).await;
        assert_eq!((reply.status, reply.code()), (400, code), "{body}");
        assert!(!reply.text.contains('\u{0}'), "no raw NUL is echoed");
    }
    // A room cannot be created with one either.
    let reply = app
        .admin_post("/rooms", room_body("nul", 60, json!({ "name": "a\u{0}b" })))
        .await;
    assert_eq!((reply.status, reply.code()), (400, "invalid_name"));
    let schedule = app
        .admin_post(
            "/rooms/clean/schedule",
            json!({"opensAt": "2030-01-01T00:00:00Z\u{0}"}),
        )
        .await;
    assert_eq!(
        (schedule.status, schedule.code()),
        (400, "invalid_opens_at")
    );
    let room = app.room("clean").await;
    assert_eq!(room["name"], "Clean");
    assert!(!room.to_string().contains("\\u0000"), "{room}");
    // Line breaks stay allowed where a paragraph is shown.
    let ok = app
        .admin_post(
            "/rooms",
            json!({"id": "clean", "branding": {"message": "Doors at six.\nBring your ticket."}}),
        )
        .await;
    assert_eq!(ok.status, 200, "{}", ok.text);
    app.stop().await;
}
