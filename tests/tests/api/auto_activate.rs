//! Threshold activation (`autoActivate`): a room in bypass turns active once its arrivals
//! reach the threshold a minute, stays active while people wait, and returns to bypass after
//! `calmSec` of calm — each change in the audit trail with its reason; a room an operator made
//! active is never returned to bypass.

use std::time::Duration;

use qm_tests::{TestApp, room_body, spawn_app};
use serde_json::{Value, json};

/// Waits up to `limit` for the room's state to be `want`.
async fn wait_state(app: &TestApp, room_id: &str, want: &str, limit: Duration) -> Value {
    let until = tokio::time::Instant::now() + limit;
    loop {
        let room = app.room(room_id).await;
        if room["state"] == want {
            return room;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "{room_id} did not become {want} within {limit:?}: {room}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn door_check(app: &TestApp, room_id: &str) {
    let reply = app
        .get(&format!("{}/api/check?roomId={room_id}", app.gateway))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
}

/// The controller's audit entries for `room_id`, oldest first.
#[tokio::test]
async fn a_surge_activates_a_bypass_room_and_calm_returns_it_once_nobody_waits() {
    let app = spawn_app().await;
    app.create_room(room_body(
        "drop",
        0,
        json!({
            "state": "bypass",
            "autoActivate": { "enabled": true, "threshold": 5, "calmSec": 2 }
        }),
    ))
    .await;
    // The controller watches the room from its next pass (once a second).
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    for _ in 0..4 {
        door_check(&app, "drop").await;
    }
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    assert_eq!(
        app.room("drop").await["state"],
        "bypass",
        "4/min is under 5/min"
    );
    door_check(&app, "drop").await;
    wait_state(&app, "drop", "active", Duration::from_secs(4)).await;
    let entries = crate::audit::entries_oldest_first(&app, "drop", "room.auto_state").await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0]["actor"]["kind"], "system");
    assert_eq!(entries[0]["summary"]["state"], "active");
    let reason = entries[0]["summary"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("threshold of 5/min"), "{reason}");

    // Somebody waits: however calm, the room stays active.
    let (joined, _) = app.join_as_new_visitor("drop").await;
    assert_eq!(joined.status, 200, "{}", joined.text);
    assert_eq!(joined.body["position"], 1, "{}", joined.text);
    // Arrivals fall out of the minute only after it; until then the room is not calm either.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(app.room("drop").await["state"], "active");

    // The line empties; a minute after the surge, and calmSec later, the room is back in bypass.
    let flushed = app
        .admin_post("/rooms/drop/flush", json!({ "count": 1 }))
        .await;
    assert_eq!(flushed.status, 200, "{}", flushed.text);
    wait_state(&app, "drop", "bypass", Duration::from_secs(70)).await;
    let entries = crate::audit::entries_oldest_first(&app, "drop", "room.auto_state").await;
    assert_eq!(entries.len(), 2, "each change once: {entries:?}");
    assert_eq!(entries[1]["summary"]["state"], "bypass");
    let reason = entries[1]["summary"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("calm for 2 s"), "{reason}");
}

#[tokio::test]
async fn a_room_an_operator_made_active_is_never_returned_to_bypass() {
    let app = spawn_app().await;
    app.create_room(room_body(
        "held",
        0,
        json!({
            "state": "active",
            "autoActivate": { "enabled": true, "threshold": 5, "calmSec": 1 }
        }),
    ))
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(app.room("held").await["state"], "active");
    assert!(
        crate::audit::entries_oldest_first(&app, "held", "room.auto_state")
            .await
            .is_empty()
    );
}
