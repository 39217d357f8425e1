//! Outflow as the engine runs it: per-second slices, rate changes on the next slice, paused
//! rooms admitting nobody, maxConcurrent. Passes are counted from the engine's own Watch stream
//! (`promoted_total` with the engine's clock), so the test measures the slices themselves.

use std::time::Duration;

use qm_proto::{RoomView, WatchRequest};
use qm_tests::{TestApp, room_body, spawn_app};
use serde_json::json;
use tokio_stream::StreamExt;

/// Records every view of `room_id` for `duration`.
async fn record_views(app: &TestApp, room_id: &str, duration: Duration) -> Vec<RoomView> {
    let mut engine = app.engine();
    let mut stream = engine
        .watch(WatchRequest {
            room_id: room_id.to_owned(),
        })
        .await
        .expect("watch opens")
        .into_inner();
    let mut views = Vec::new();
    let deadline = tokio::time::Instant::now() + duration;
    while let Ok(Some(Ok(view))) = tokio::time::timeout_at(deadline, stream.next()).await {
        views.push(view);
    }
    views
}

/// Passes granted in each whole calendar second strictly inside the recording.
fn passes_per_second(views: &[RoomView]) -> Vec<u64> {
    let first_second = views.first().map(|view| view.at_ms / 1000 + 1).unwrap_or(0);
    let last_second = views.last().map(|view| view.at_ms / 1000).unwrap_or(0);
    let total_before = |instant_ms: i64| {
        views
            .iter()
            .filter(|view| view.at_ms < instant_ms)
            .map(|view| view.promoted_total)
            .max()
            .unwrap_or(0)
    };
    (first_second..last_second)
        .map(|second| total_before((second + 1) * 1000) - total_before(second * 1000))
        .collect()
}

async fn fill(app: &TestApp, room_id: &str, count: usize) {
    let joins = (0..count).map(|_| app.join(room_id, None, None));
    for reply in futures::future::join_all(joins).await {
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
}

#[tokio::test]
async fn six_hundred_a_minute_admits_ten_each_second() {
    let app = spawn_app().await;
    app.create_room(room_body("smooth", 600, json!({ "state": "paused" })))
        .await;
    fill(&app, "smooth", 400).await;
    app.admin_post("/rooms/smooth/state", json!({ "state": "active" }))
        .await;
    let views = record_views(&app, "smooth", Duration::from_millis(6500)).await;
    let per_second = passes_per_second(&views);
    assert!(per_second.len() >= 4, "{per_second:?}");
    for passes in &per_second {
        assert!(
            (8..=12).contains(passes),
            "10 ± 2 passes in every second: {per_second:?}"
        );
    }
}

#[tokio::test]
async fn a_rate_change_mid_surge_takes_effect_on_the_next_slice() {
    let app = spawn_app().await;
    app.create_room(room_body("surge", 1200, json!({}))).await;
    fill(&app, "surge", 600).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let watcher = {
        let mut engine = app.engine();
        tokio::spawn(async move {
            let mut stream = engine
                .watch(WatchRequest {
                    room_id: "surge".into(),
                })
                .await
                .expect("watch")
                .into_inner();
            let mut views = Vec::new();
            let deadline = tokio::time::Instant::now() + Duration::from_millis(4500);
            while let Ok(Some(Ok(view))) = tokio::time::timeout_at(deadline, stream.next()).await {
                views.push(view);
            }
            views
        })
    };
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let changed = app
        .admin_post("/rooms/surge/rate", json!({ "ratePerMinute": 60 }))
        .await;
    assert_eq!(changed.status, 200, "{}", changed.text);
    let changed_at = qm_core::clock::now_ms();
    let views = watcher.await.expect("watcher");

    let before: Vec<&RoomView> = views
        .iter()
        .filter(|view| view.at_ms < changed_at - 50)
        .collect();
    let after: Vec<&RoomView> = views
        .iter()
        .filter(|view| view.at_ms > changed_at)
        .collect();
    let fast = passes_per_second(&before.into_iter().cloned().collect::<Vec<_>>());
    assert!(
        fast.iter().all(|passes| (18..=22).contains(passes)),
        "1200/min before the change: {fast:?}"
    );
    let total_at_change = views
        .iter()
        .filter(|view| view.at_ms <= changed_at)
        .map(|view| view.promoted_total)
        .max()
        .unwrap();
    let first_slice_after = after
        .iter()
        .map(|view| view.promoted_total)
        .find(|total| *total > total_at_change);
    let first_slice_after =
        first_slice_after.expect("outflow continues at the new rate") - total_at_change;
    assert!(
        first_slice_after <= 2,
        "the very next slice runs at 60/min, not 1200/min: {first_slice_after}"
    );
    let slow = passes_per_second(&after.into_iter().cloned().collect::<Vec<_>>());
    assert!(
        slow.iter().all(|passes| *passes <= 2),
        "60/min after the change: {slow:?}"
    );
}

#[tokio::test]
async fn a_paused_room_admits_nobody() {
    let app = spawn_app().await;
    app.create_room(room_body("hold", 6000, json!({ "state": "paused" })))
        .await;
    fill(&app, "hold", 50).await;
    let views = record_views(&app, "hold", Duration::from_millis(2500)).await;
    assert!(
        views.iter().all(|view| view.promoted_total == 0),
        "no pass while paused"
    );
    let room = app.room("hold").await;
    assert_eq!(room["waiting"], 50);
    assert_eq!(room["passedLastMin"], 0);
}

#[tokio::test]
async fn max_concurrent_caps_the_passes_that_hold_a_slot() {
    let app = spawn_app().await;
    app.create_room(room_body("cap", 6000, json!({ "maxConcurrent": 5 })))
        .await;
    fill(&app, "cap", 20).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let room = app.room("cap").await;
    assert_eq!(room["activePasses"], 5, "{room}");
    assert_eq!(room["waiting"], 15, "{room}");
    // Ejecting a pass frees its slot, and the next slice fills it.
    let ejected = app
        .admin_post("/rooms/cap/eject", json!({ "ticket": 1 }))
        .await;
    assert_eq!(ejected.body["was"], "passed", "{}", ejected.text);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let room = app.room("cap").await;
    assert_eq!(room["activePasses"], 5, "{room}");
    assert_eq!(room["waiting"], 14, "{room}");
}

#[tokio::test]
async fn a_pass_expires_after_passed_ttl_sec() {
    let app = spawn_app().await;
    app.create_room(room_body("ttl", 0, json!({ "passedTtlSec": 10 })))
        .await;
    let (reply, _) = app.join_as_new_visitor("ttl").await;
    let token = reply.body["token"].as_str().unwrap().to_owned();
    app.admin_post("/rooms/ttl/flush", json!({ "count": 1 }))
        .await;
    assert_eq!(app.status(&token).await.body["passed"], true);
    tokio::time::sleep(Duration::from_millis(10_500)).await;
    let lapsed = app.status(&token).await;
    assert_eq!(lapsed.body["expired"], true, "{}", lapsed.text);
    assert_eq!(lapsed.body["reason"], "expired");
    let check = app
        .send(
            app.http
                .get(format!("{}/api/check", app.gateway))
                .query(&[("roomId", "ttl"), ("token", &token)]),
        )
        .await;
    assert_eq!(
        check.body["action"], "queue",
        "an expired pass no longer opens the door"
    );
}
