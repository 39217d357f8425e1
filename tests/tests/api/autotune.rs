//! The rate controller (`autotune`) against a simulated origin whose health page the test
//! slows down and speeds up: the rate falls by steps to `minRate` while the origin is slow and
//! climbs back to `maxRate` once it is fast, never past either bound, never turning back within
//! a phase; each change in the audit trail with its reason.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use qm_tests::{TestApp, room_body, spawn_app_with};
use serde_json::json;

/// An origin whose `/health` answers after `delay` milliseconds.
async fn slow_origin(delay: Arc<AtomicU64>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let addr = listener.local_addr().expect("address");
    let app = Router::new().route(
        "/health",
        get(move || {
            let delay = delay.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(delay.load(Ordering::Relaxed))).await;
                "ok"
            }
        }),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}/health")
}

/// Reads the room's rate every 100 ms until it is `want` (and stays there for 2 s), returning
/// every rate seen on the way.
async fn rates_until(app: &TestApp, want: u64, limit: Duration) -> Vec<u64> {
    let until = tokio::time::Instant::now() + limit;
    let mut seen: Vec<u64> = Vec::new();
    let mut settled_at = None;
    loop {
        let rate = app.room("tuned").await["ratePerMinute"]
            .as_u64()
            .unwrap_or(0);
        if seen.last() != Some(&rate) {
            seen.push(rate);
        }
        match (rate == want, settled_at) {
            (true, None) => settled_at = Some(tokio::time::Instant::now()),
            (true, Some(at)) if at.elapsed() >= Duration::from_secs(2) => return seen,
            (false, _) => settled_at = None,
            _ => {}
        }
        assert!(
            tokio::time::Instant::now() < until,
            "the rate did not settle at {want} within {limit:?}: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_rate_follows_the_origins_health_within_its_bounds_and_recovers() {
    let app = spawn_app_with(&[("AUTOTUNE_PROBE_MS", "100")]).await;
    let delay = Arc::new(AtomicU64::new(250));
    let health_url = slow_origin(delay.clone()).await;
    app.create_room(room_body(
        "tuned",
        100,
        json!({ "autotune": {
            "enabled": true, "minRate": 80, "maxRate": 110, "targetP95Ms": 150,
            "healthUrl": health_url, "coolDownSec": 1
        } }),
    ))
    .await;

    // Slow: 250 ms against a 150 ms target. Down by a tenth a step to the floor, and no further.
    let down = rates_until(&app, 80, Duration::from_secs(40)).await;
    assert_eq!(down, [100, 90, 81, 80], "one way, by a tenth, to minRate");

    // Fast again: up by a twentieth a step to the ceiling, and no further.
    delay.store(0, Ordering::Relaxed);
    let up = rates_until(&app, 110, Duration::from_secs(60)).await;
    assert_eq!(
        up,
        [80, 84, 88, 92, 96, 100, 105, 110],
        "one way, by a twentieth, to maxRate"
    );

    let entries = crate::audit::entries_oldest_first(&app, "tuned", "room.autotune").await;
    assert_eq!(entries.len(), 10, "one entry per change: {entries:?}");
    assert_eq!(entries[0]["actor"]["name"], "autotune");
    let first = entries[0]["summary"]["reason"].as_str().unwrap_or_default();
    assert!(
        first.starts_with("rate lowered to 90/min: origin p95 "),
        "{first}"
    );
    assert!(first.ends_with(" ms over the 150 ms target"), "{first}");
    let last = entries[9]["summary"]["reason"].as_str().unwrap_or_default();
    assert!(
        last.starts_with("rate raised to 110/min: origin p95 "),
        "{last}"
    );
    assert_eq!(entries[9]["summary"]["previous"], 105);
}
