//! The visitor event stream: /events, /api/events and /api/v1/events; frames on change and as a
//! 5 s heartbeat; per-address and total stream limits.

use std::time::Duration;

use qm_tests::{room_body, spawn_app, spawn_app_with};
use serde_json::json;

#[tokio::test]
async fn every_path_streams_status_frames_that_follow_the_line() {
    let app = spawn_app().await;
    app.create_room(room_body("sse", 0, json!({}))).await;
    app.join_as_new_visitor("sse").await;
    app.join_as_new_visitor("sse").await;
    let (reply, _) = app.join_as_new_visitor("sse").await;
    let token = reply.body["token"].as_str().unwrap().to_owned();

    for path in ["/events", "/api/events", "/api/v1/events"] {
        let mut stream = app
            .events(path, &token)
            .await
            .unwrap_or_else(|reply| panic!("{path}: {}", reply.text));
        let content_type = stream
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        assert!(
            content_type.starts_with("text/event-stream"),
            "{path}: {content_type}"
        );
        let first = stream
            .next_frame(Duration::from_secs(3))
            .await
            .expect("a first frame at once");
        assert_eq!(first.event, "status", "{path}");
        assert_eq!(first.data["position"], 3, "{path}: {:?}", first.data);
    }

    let mut stream = app.events("/events", &token).await.expect("stream opens");
    stream
        .next_frame(Duration::from_secs(3))
        .await
        .expect("first frame");
    app.admin_post("/rooms/sse/flush", json!({ "count": 1 }))
        .await;
    let moved = stream
        .frame_where(Duration::from_secs(5), |frame| frame.data["position"] == 2)
        .await;
    assert!(
        moved.is_some(),
        "the stream pushes the new position on change"
    );
    app.admin_post("/rooms/sse/flush", json!({ "count": 2 }))
        .await;
    let passed = stream
        .frame_where(Duration::from_secs(5), |frame| frame.data["passed"] == true)
        .await;
    let passed = passed.expect("the stream says when the visitor is through");
    assert_eq!(passed.data["redirectUrl"], "https://shop.example/checkout");
}

#[tokio::test]
async fn an_idle_stream_still_sends_a_status_heartbeat_every_five_seconds() {
    let app = spawn_app().await;
    app.create_room(room_body("beat", 0, json!({ "state": "paused" })))
        .await;
    let (reply, _) = app.join_as_new_visitor("beat").await;
    let mut stream = app
        .events("/events", reply.body["token"].as_str().unwrap())
        .await
        .expect("opens");
    stream
        .next_frame(Duration::from_secs(3))
        .await
        .expect("first frame");
    let started = tokio::time::Instant::now();
    let beat = stream
        .next_frame(Duration::from_secs(8))
        .await
        .expect("a heartbeat frame");
    assert_eq!(beat.event, "status");
    assert_eq!(beat.data["position"], 1);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(3) && waited <= Duration::from_millis(6500),
        "heartbeat after {waited:?}"
    );
}

#[tokio::test]
async fn a_stream_without_a_valid_token_is_refused_before_it_starts() {
    let app = spawn_app().await;
    let refused = app
        .events("/events", "garbage")
        .await
        .err()
        .expect("refused");
    assert_eq!(refused.status, 401);
    assert_eq!(refused.code(), "invalid_token");
}

#[tokio::test]
async fn stream_limits_answer_with_retry_after_five() {
    let app = spawn_app_with(&[("SSE_PER_IP", "2"), ("SSE_MAX_TOTAL", "50")]).await;
    app.create_room(room_body("lim", 0, json!({}))).await;
    let (reply, _) = app.join_as_new_visitor("lim").await;
    let token = reply.body["token"].as_str().unwrap().to_owned();
    let _first = app.events("/events", &token).await.expect("first");
    let _second = app.events("/events", &token).await.expect("second");
    let third = app
        .events("/events", &token)
        .await
        .err()
        .expect("third is refused");
    assert_eq!(third.status, 429);
    assert_eq!(third.code(), "sse_per_ip_limit");
    assert_eq!(third.header("retry-after"), Some("5"));

    let app = spawn_app_with(&[("SSE_PER_IP", "50"), ("SSE_MAX_TOTAL", "1")]).await;
    app.create_room(room_body("cap", 0, json!({}))).await;
    let (reply, _) = app.join_as_new_visitor("cap").await;
    let token = reply.body["token"].as_str().unwrap().to_owned();
    let first = app.events("/events", &token).await.expect("first");
    let second = app
        .events("/events", &token)
        .await
        .err()
        .expect("over capacity");
    assert_eq!(second.status, 503);
    assert_eq!(second.code(), "sse_capacity");
    assert_eq!(second.header("retry-after"), Some("5"));
    // Closing a stream frees its place.
    drop(first);
    let mut reopened = None;
    for _ in 0..40 {
        if let Ok(stream) = app.events("/events", &token).await {
            reopened = Some(stream);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        reopened.is_some(),
        "a closed stream gives its capacity back"
    );
}

#[tokio::test]
async fn a_stream_of_a_re_created_room_says_room_reset() {
    let app = spawn_app().await;
    app.create_room(room_body("reset", 0, json!({}))).await;
    let (reply, _) = app.join_as_new_visitor("reset").await;
    let token = reply.body["token"].as_str().unwrap().to_owned();
    let mut stream = app.events("/events", &token).await.expect("opens");
    stream
        .next_frame(Duration::from_secs(3))
        .await
        .expect("first frame");
    app.admin_call(reqwest::Method::DELETE, "/rooms/reset", None)
        .await;
    app.create_room(room_body("reset", 0, json!({}))).await;
    let frame = stream
        .frame_where(Duration::from_secs(7), |frame| {
            frame.data["expired"] == true
        })
        .await
        .expect("the open stream learns its place is gone");
    assert_eq!(frame.data["reason"], "room_reset");
}

#[tokio::test]
async fn open_streams_end_when_the_gateway_shuts_down() {
    let app = spawn_app().await;
    app.create_room(room_body("bye", 0, json!({}))).await;
    let (reply, _) = app.join_as_new_visitor("bye").await;
    let mut stream = app
        .events("/events", reply.body["token"].as_str().unwrap())
        .await
        .expect("opens");
    stream
        .next_frame(Duration::from_secs(3))
        .await
        .expect("first frame");
    let stopping = tokio::spawn(app.stop());
    assert!(
        stream.ends_within(Duration::from_secs(5)).await,
        "the stream closes on shutdown"
    );
    tokio::time::timeout(Duration::from_secs(10), stopping)
        .await
        .expect("components stop in bounded time")
        .ok();
}
