//! The event stream: frames on change and as a heartbeat, one engine Watch per room, limits,
//! lapsed places, reconnecting hubs and shutdown.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;

use crate::fake_engine::TARGET_URL;
use crate::harness::spawn_gateway;

#[tokio::test]
async fn the_stream_follows_the_line_from_one_engine_watch_per_room() {
    let gateway = spawn_gateway(&[]).await;
    gateway.engine.create_room("sse", "active", 0);
    gateway.join_as_new_visitor("sse").await;
    let (second, _) = gateway.join_as_new_visitor("sse").await;
    let (third, _) = gateway.join_as_new_visitor("sse").await;
    let second_token = second.body["token"].as_str().unwrap().to_owned();
    let third_token = third.body["token"].as_str().unwrap().to_owned();

    let mut streams = Vec::new();
    for path in ["/events", "/api/events", "/api/v1/events"] {
        let mut frames = gateway
            .events(path, &third_token)
            .await
            .unwrap_or_else(|reply| panic!("{path}: {}", reply.text));
        let content_type = frames
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        assert!(
            content_type.starts_with("text/event-stream"),
            "{content_type}"
        );
        assert_eq!(
            frames
                .headers
                .get("cache-control")
                .and_then(|v| v.to_str().ok()),
            Some("no-cache")
        );
        assert_eq!(
            frames
                .headers
                .get("x-accel-buffering")
                .and_then(|v| v.to_str().ok()),
            Some("no")
        );
        let (event, data) = frames
            .next(Duration::from_secs(3))
            .await
            .expect("first frame at once");
        assert_eq!(event, "status");
        assert_eq!(data["position"], 3, "{path}");
        streams.push(frames);
    }
    let mut second_stream = gateway
        .events("/events", &second_token)
        .await
        .expect("opens");
    second_stream
        .next(Duration::from_secs(3))
        .await
        .expect("first frame");

    // Let the hub connect, then move the line.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let status_calls_before = gateway.engine.status_calls.load(Ordering::SeqCst);
    gateway.engine.flush("sse", 1);
    for frames in &mut streams {
        let moved = frames
            .next_where(Duration::from_secs(3), |data| data["position"] == 2)
            .await;
        assert!(moved.is_some(), "the new position is pushed");
    }
    assert_eq!(
        gateway.engine.status_calls.load(Ordering::SeqCst),
        status_calls_before,
        "waiting listeners are answered from the room's view, not one engine call each"
    );
    gateway.engine.flush("sse", 1);
    let passed = second_stream
        .next_where(Duration::from_secs(3), |data| data["passed"] == true)
        .await
        .expect("passed");
    assert_eq!(passed["redirectUrl"], TARGET_URL);
    assert_eq!(
        gateway.engine.watch_calls.load(Ordering::SeqCst),
        1,
        "one engine Watch for the room, whatever the listeners"
    );

    // The last listener leaving closes the room's engine stream.
    drop(streams);
    drop(second_stream);
    let mut closed = false;
    for _ in 0..60 {
        if gateway.engine.watch_open.load(Ordering::SeqCst) == 0 {
            closed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        closed,
        "the hub and its engine stream are dropped with the last listener"
    );
}

#[tokio::test]
async fn listeners_keep_their_stream_while_the_room_hub_reconnects() {
    let gateway = spawn_gateway(&[]).await;
    gateway.engine.create_room("flaky", "active", 0);
    gateway.join_as_new_visitor("flaky").await;
    let (reply, _) = gateway.join_as_new_visitor("flaky").await;
    let mut frames = gateway
        .events("/events", reply.body["token"].as_str().unwrap())
        .await
        .expect("opens");
    frames
        .next(Duration::from_secs(3))
        .await
        .expect("first frame");
    tokio::time::sleep(Duration::from_millis(200)).await;
    gateway.engine.break_watches();
    let mut reconnected = false;
    for _ in 0..60 {
        if gateway.engine.watch_calls.load(Ordering::SeqCst) >= 2
            && gateway.engine.watch_open.load(Ordering::SeqCst) == 1
        {
            reconnected = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(reconnected, "the hub opened a new engine Watch");
    gateway.engine.flush("flaky", 1);
    let moved = frames
        .next_where(Duration::from_secs(3), |data| data["position"] == 1)
        .await;
    assert!(
        moved.is_some(),
        "the same browser stream keeps following the line"
    );
}

#[tokio::test]
async fn an_idle_stream_sends_a_status_heartbeat_every_five_seconds() {
    let gateway = spawn_gateway(&[]).await;
    gateway.engine.create_room("beat", "paused", 0);
    let (reply, _) = gateway.join_as_new_visitor("beat").await;
    let mut frames = gateway
        .events("/events", reply.body["token"].as_str().unwrap())
        .await
        .expect("opens");
    frames.next(Duration::from_secs(3)).await.expect("first");
    let started = tokio::time::Instant::now();
    let (event, data) = frames
        .next(Duration::from_secs(8))
        .await
        .expect("heartbeat");
    let waited = started.elapsed();
    assert_eq!(event, "status");
    assert_eq!(data["position"], 1);
    assert_eq!(data["state"], "paused");
    assert!(
        waited >= Duration::from_secs(4) && waited <= Duration::from_millis(6500),
        "{waited:?}"
    );
}

#[tokio::test]
async fn streams_are_refused_before_they_start() {
    let gateway = spawn_gateway(&[("SSE_PER_IP", "2"), ("SSE_MAX_TOTAL", "3")]).await;
    gateway.engine.create_room("lim", "active", 0);
    let invalid = gateway
        .events("/events", "garbage")
        .await
        .expect_err("refused");
    assert_eq!(
        (invalid.status, invalid.body["code"].as_str()),
        (401, Some("invalid_token"))
    );
    let (reply, _) = gateway.join_as_new_visitor("lim").await;
    let token = reply.body["token"].as_str().unwrap().to_owned();
    let first = gateway.events("/events", &token).await.expect("first");
    let _second = gateway.events("/events", &token).await.expect("second");
    let third = gateway
        .events("/events", &token)
        .await
        .expect_err("over the per-address limit");
    assert_eq!(
        (third.status, third.body["code"].as_str()),
        (429, Some("sse_per_ip_limit"))
    );
    assert_eq!(third.header("retry-after"), Some("5"));
    drop(first);
    let mut reopened = false;
    for _ in 0..40 {
        if gateway.events("/events", &token).await.is_ok() {
            reopened = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(reopened, "a closed stream gives its place back");
}

#[tokio::test]
async fn a_stream_learns_of_a_reset_room_and_an_ejection() {
    let gateway = spawn_gateway(&[]).await;
    gateway.engine.create_room("reset", "active", 0);
    let (first, _) = gateway.join_as_new_visitor("reset").await;
    let (second, _) = gateway.join_as_new_visitor("reset").await;
    let mut first_stream = gateway
        .events("/events", first.body["token"].as_str().unwrap())
        .await
        .expect("opens");
    let mut second_stream = gateway
        .events("/events", second.body["token"].as_str().unwrap())
        .await
        .expect("opens");
    first_stream
        .next(Duration::from_secs(3))
        .await
        .expect("first frame");
    second_stream
        .next(Duration::from_secs(3))
        .await
        .expect("first frame");
    tokio::time::sleep(Duration::from_millis(200)).await;

    gateway.engine.eject("reset", 1);
    let ejected = first_stream
        .next_where(Duration::from_secs(3), |data| data["expired"] == true)
        .await
        .expect("ejected");
    assert_eq!(ejected, json!({ "expired": true, "reason": "ejected" }));
    let moved = second_stream
        .next_where(Duration::from_secs(3), |data| data["position"] == 1)
        .await;
    assert!(moved.is_some(), "the ejected place no longer counts ahead");

    gateway.engine.delete_room("reset");
    gateway.engine.create_room("reset", "active", 0);
    let reset = second_stream
        .next_where(Duration::from_secs(7), |data| data["expired"] == true)
        .await
        .expect("reset");
    assert_eq!(reset["reason"], "room_reset");
}

#[tokio::test]
async fn open_streams_end_when_the_gateway_stops() {
    let gateway = spawn_gateway(&[]).await;
    gateway.engine.create_room("bye", "active", 0);
    let (reply, _) = gateway.join_as_new_visitor("bye").await;
    let mut frames = gateway
        .events("/events", reply.body["token"].as_str().unwrap())
        .await
        .expect("opens");
    frames
        .next(Duration::from_secs(3))
        .await
        .expect("first frame");
    let started = tokio::time::Instant::now();
    let stopping = tokio::spawn(gateway.stop());
    assert!(
        frames.ends_within(Duration::from_secs(3)).await,
        "the stream ends on shutdown"
    );
    tokio::time::timeout(Duration::from_secs(5), stopping)
        .await
        .expect("the gateway stops")
        .ok();
    assert!(started.elapsed() < Duration::from_secs(4));
}
