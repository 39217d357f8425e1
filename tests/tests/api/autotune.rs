//! The rate controller (`autotune`) against a simulated origin the test slows down, breaks and
//! speeds up, read two ways: through its health page, and through the answers the inline gate
//! forwards to it for a room with a proxyOrigin and no health URL. The rate falls by steps to
//! `minRate` while the origin is slow and climbs back to `maxRate` once it is fast, never past
//! either bound, never turning back within a phase; each change in the audit trail with its
//! reason.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use qm_tests::{TestApp, room_body, spawn_app_with};
use reqwest::header::{COOKIE, HOST};
use serde_json::json;

/// How the simulated origin answers every path: after `delay` milliseconds, with `status`.
#[derive(Clone)]
struct OriginHealth {
    delay: Arc<AtomicU64>,
    status: Arc<AtomicU16>,
}

impl OriginHealth {
    fn new(delay_ms: u64) -> OriginHealth {
        OriginHealth {
            delay: Arc::new(AtomicU64::new(delay_ms)),
            status: Arc::new(AtomicU16::new(200)),
        }
    }

    fn set(&self, delay_ms: u64, status: u16) {
        self.delay.store(delay_ms, Ordering::Relaxed);
        self.status.store(status, Ordering::Relaxed);
    }
}

/// Starts the origin; its `http://127.0.0.1:<port>`.
async fn simulated_origin(health: OriginHealth) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let addr = listener.local_addr().expect("address");
    let app = Router::new().fallback(move || {
        let health = health.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(health.delay.load(Ordering::Relaxed))).await;
            let status = StatusCode::from_u16(health.status.load(Ordering::Relaxed))
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (status, "site page")
        }
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}")
}

fn rate_of(room: &serde_json::Value) -> u64 {
    room["ratePerMinute"].as_u64().unwrap_or(0)
}

/// Reads the room's rate every 100 ms until it is `want` (and stays there for 2 s), returning
/// every rate seen on the way.
async fn rates_until(app: &TestApp, room: &str, want: u64, limit: Duration) -> Vec<u64> {
    let until = tokio::time::Instant::now() + limit;
    let mut seen: Vec<u64> = Vec::new();
    let mut settled_at = None;
    loop {
        let rate = rate_of(&app.room(room).await);
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
    let origin = OriginHealth::new(250);
    let health_url = format!("{}/health", simulated_origin(origin.clone()).await);
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
    let down = rates_until(&app, "tuned", 80, Duration::from_secs(40)).await;
    assert_eq!(down, [100, 90, 81, 80], "one way, by a tenth, to minRate");

    // Fast again: up by a twentieth a step to the ceiling, and no further.
    origin.set(0, 200);
    let up = rates_until(&app, "tuned", 110, Duration::from_secs(60)).await;
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

/// Sends the site's pages on the inline host as an admitted browser would, four at a time, until
/// `stop`: the answers the gate forwards are all the controller reads.
fn browse(app: &TestApp, cookies: String, stop: Arc<AtomicBool>) {
    for _ in 0..4 {
        let (http, gateway, cookies, stop) = (
            app.http.clone(),
            app.gateway.clone(),
            cookies.clone(),
            stop.clone(),
        );
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let sent = http
                    .get(format!("{gateway}/products"))
                    .header(HOST, "shop.test")
                    .header(COOKIE, &cookies)
                    .send()
                    .await;
                if sent.is_err() {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        });
    }
}

#[tokio::test]
async fn an_inline_room_is_tuned_from_the_answers_the_gate_forwards() {
    let app = spawn_app_with(&[("INLINE_HOSTS", "shop.test=shop")]).await;
    let origin = OriginHealth::new(250);
    let proxy_origin = simulated_origin(origin.clone()).await;
    let created = app
        .admin_post(
            "/rooms",
            room_body(
                "shop",
                100,
                json!({ "proxyOrigin": proxy_origin, "autotune": {
                    "enabled": true, "minRate": 80, "maxRate": 110, "targetP95Ms": 150,
                    "coolDownSec": 1
                } }),
            ),
        )
        .await;
    assert_eq!(
        created.status, 200,
        "no healthUrl needed inline: {}",
        created.text
    );

    // One admitted visitor, its cookies as the browser holds them (the door session's too).
    let joined = app
        .send(
            app.http
                .post(format!("{}/__qm/api/join", app.gateway))
                .header(HOST, "shop.test")
                .json(&json!({ "roomId": "shop" })),
        )
        .await;
    assert_eq!(joined.status, 200, "{}", joined.text);
    let mut cookies = format!(
        "qm_shop={}; qms_shop={}",
        joined.cookie("qm_shop").expect("queue cookie"),
        joined.cookie("qms_shop").expect("ownership cookie")
    );
    let flushed = app
        .admin_post("/rooms/shop/flush", json!({ "count": 1 }))
        .await;
    assert_eq!(flushed.status, 200, "{}", flushed.text);
    let first = app
        .send(
            app.http
                .get(format!("{}/products", app.gateway))
                .header(HOST, "shop.test")
                .header(COOKIE, &cookies),
        )
        .await;
    assert_eq!(first.status, 200, "forwarded: {}", first.text);
    if let Some(door) = first.cookie("qm_dk_shop") {
        cookies.push_str(&format!("; qm_dk_shop={door}"));
    }
    let stop = Arc::new(AtomicBool::new(false));
    browse(&app, cookies, stop.clone());

    // Slow answers (250 ms against a 150 ms target): down by a tenth a step to the floor.
    let down = rates_until(&app, "shop", 80, Duration::from_secs(40)).await;
    assert_eq!(down, [100, 90, 81, 80], "one way, by a tenth, to minRate");

    // Fast answers: up by a twentieth a step to the ceiling.
    origin.set(0, 200);
    let up = rates_until(&app, "shop", 110, Duration::from_secs(60)).await;
    assert_eq!(
        up,
        [80, 84, 88, 92, 96, 100, 105, 110],
        "one way, by a twentieth, to maxRate"
    );

    // Fast but failing (503): failures alone lower it.
    origin.set(0, 503);
    let until = tokio::time::Instant::now() + Duration::from_secs(20);
    while rate_of(&app.room("shop").await) == 110 {
        assert!(
            tokio::time::Instant::now() < until,
            "failing answers never lowered the rate"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.store(true, Ordering::Relaxed);

    let entries = crate::audit::entries_oldest_first(&app, "shop", "room.autotune").await;
    assert!(entries.len() >= 11, "one entry per change: {entries:?}");
    let summary = &entries[0]["summary"];
    assert_eq!(summary["source"], "inline", "{summary}");
    let first = summary["reason"].as_str().unwrap_or_default();
    assert!(
        first.starts_with("rate lowered to 90/min: origin p95 "),
        "{first}"
    );
    assert!(first.ends_with(" ms over the 150 ms target"), "{first}");
    let failing = &entries[10]["summary"];
    assert_eq!(failing["rate"], 99, "{failing}");
    let reason = failing["reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("rate lowered to 99/min: ")
            && reason.ends_with(" origin answers failed (over 5 %)"),
        "{reason}"
    );
}
