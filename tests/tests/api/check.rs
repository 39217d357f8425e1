//! GET /api/check: pass, queue and the fail-open answer; vouching; CORS for the room's tag origins.

use qm_tests::{TestApp, room_body, spawn_app, spawn_app_with};
use serde_json::json;

#[tokio::test]
async fn check_passes_unknown_rooms_and_queues_visitors_without_a_pass() {
    let app = spawn_app().await;
    let unknown = app
        .get(&format!(
            "{}/api/check?roomId=ghost&url=https://shop.example/",
            app.gateway
        ))
        .await;
    assert_eq!(unknown.status, 200, "{}", unknown.text);
    assert_eq!(unknown.body["action"], "pass");
    assert_eq!(unknown.body["reason"], "no_room");
    let health = app.admin_call(reqwest::Method::GET, "/health", None).await;
    assert!(
        health.body["noRoomChecks"].as_u64().unwrap_or(0) >= 1,
        "fail-open is counted: {}",
        health.text
    );

    app.create_room(room_body("door", 0, json!({}))).await;
    let queued = app
        .get(&format!("{}/api/check?roomId=door", app.gateway))
        .await;
    assert_eq!(queued.body["action"], "queue", "{}", queued.text);
    let waiting_room = queued.body["waitingRoomUrl"]
        .as_str()
        .expect("waitingRoomUrl");
    assert!(waiting_room.ends_with("/w/door"), "{waiting_room}");

    let (reply, _) = app.join_as_new_visitor("door").await;
    let token = reply.body["token"].as_str().unwrap().to_owned();
    let waiting = app
        .send(
            app.http
                .get(format!("{}/api/check", app.gateway))
                .query(&[("roomId", "door"), ("token", &token)]),
        )
        .await;
    assert_eq!(waiting.body["action"], "queue");
    app.admin_post("/rooms/door/flush", json!({ "count": 1 }))
        .await;
    let passed = app
        .send(
            app.http
                .get(format!("{}/api/check", app.gateway))
                .query(&[("roomId", "door"), ("token", &token)]),
        )
        .await;
    assert_eq!(passed.body["action"], "pass", "{}", passed.text);
}

#[tokio::test]
async fn a_bypass_room_passes_every_check() {
    let app = spawn_app().await;
    app.create_room(room_body("free", 60, json!({ "state": "bypass" })))
        .await;
    let reply = app
        .get(&format!("{}/api/check?roomId=free", app.gateway))
        .await;
    assert_eq!(reply.body["action"], "pass", "{}", reply.text);
}

#[tokio::test]
async fn vouching_for_a_client_needs_the_bearer_key_never_a_query_key() {
    let app = spawn_app().await;
    app.create_room(room_body("edge", 0, json!({}))).await;
    let url = format!(
        "{}/api/check?roomId=edge&ip=203.0.113.9&agent=test",
        app.gateway
    );
    let anonymous = app.get(&url).await;
    assert_eq!((anonymous.status, anonymous.code()), (401, "unauthorized"));
    let in_query = app.get(&format!("{url}&key=public-api-key-0123")).await;
    assert_eq!(
        (in_query.status, in_query.code()),
        (401, "credential_in_query")
    );
    let vouched = app
        .send(app.http.get(&url).bearer_auth("public-api-key-0123"))
        .await;
    assert_eq!(vouched.status, 200, "{}", vouched.text);
    assert_eq!(vouched.body["action"], "queue");
    let admin_key = app
        .send(app.http.get(&url).bearer_auth(qm_tests::TEST_ADMIN_KEY))
        .await;
    assert_eq!(admin_key.status, 200);
}

#[tokio::test]
async fn check_cors_answers_only_the_rooms_tag_origins_and_preflight_agrees() {
    let app = spawn_app().await;
    app.create_room(room_body(
        "cors",
        0,
        json!({ "tagOrigins": ["https://tags.example"] }),
    ))
    .await;
    let url = format!("{}/api/check?roomId=cors", app.gateway);
    for (origin, allowed) in [
        ("https://tags.example", true),
        ("https://shop.example", true), // the targetUrl origin is always allowed
        ("https://evil.example", false),
    ] {
        let actual = app.send(app.http.get(&url).header("origin", origin)).await;
        let preflight = app
            .send(
                app.http
                    .request(reqwest::Method::OPTIONS, &url)
                    .header("origin", origin)
                    .header("access-control-request-method", "GET")
                    .header("access-control-request-headers", "x-qm-session"),
            )
            .await;
        let actual_acao = actual
            .header("access-control-allow-origin")
            .map(str::to_owned);
        let preflight_acao = preflight
            .header("access-control-allow-origin")
            .map(str::to_owned);
        assert_eq!(
            actual_acao, preflight_acao,
            "{origin}: preflight and actual agree"
        );
        assert_eq!(
            actual_acao.as_deref() == Some(origin),
            allowed,
            "{origin}: {actual_acao:?}"
        );
        assert_ne!(actual_acao.as_deref(), Some("*"));
        // The browser snippet sends its door-session key as X-QM-Session: the preflight must
        // allow that request header, or the browser never sends the check.
        let allowed_headers = preflight
            .header("access-control-allow-headers")
            .map(str::to_ascii_lowercase);
        assert_eq!(
            allowed_headers
                .as_deref()
                .is_some_and(|list| list.split(',').any(|name| name.trim() == "x-qm-session")),
            allowed,
            "{origin}: Access-Control-Allow-Headers {allowed_headers:?}"
        );
    }
}

/// One door check as an edge connector vouching for `ip` sends it (or an unvouched one).
async fn check_for(app: &TestApp, ip: Option<&str>) -> qm_tests::Reply {
    let mut request = app
        .http
        .get(format!("{}/api/check", app.gateway))
        .query(&[("roomId", "limited")]);
    if let Some(ip) = ip {
        request = request
            .query(&[("ip", ip), ("agent", "test-agent")])
            .bearer_auth("public-api-key-0123");
    }
    app.send(request).await
}

#[tokio::test]
async fn a_vouched_check_is_limited_per_vouched_address_not_per_caller() {
    let app = spawn_app_with(&[("CHECK_LIMIT_PER_MIN", "2")]).await;
    app.create_room(room_body("limited", 0, json!({}))).await;
    for _ in 0..2 {
        let allowed = check_for(&app, Some("203.0.113.9")).await;
        assert_eq!(allowed.status, 200, "{}", allowed.text);
    }
    let refused = check_for(&app, Some("203.0.113.9")).await;
    assert_eq!(refused.status, 429, "{}", refused.text);
    assert_eq!(refused.code(), "rate_limited");
    let retry_after: u64 = refused
        .header("retry-after")
        .and_then(|value| value.parse().ok())
        .expect("Retry-After on the refusal");
    assert!((1..=30).contains(&retry_after), "{retry_after}");

    // Another visitor behind the same connector has a budget of their own ...
    for _ in 0..2 {
        assert_eq!(check_for(&app, Some("198.51.100.7")).await.status, 200);
    }
    assert_eq!(check_for(&app, Some("198.51.100.7")).await.status, 429);
    // ... and so does the connector's own address, for checks it makes unvouched.
    for _ in 0..2 {
        assert_eq!(check_for(&app, None).await.status, 200);
    }
    assert_eq!(check_for(&app, None).await.status, 429);
    // A vouched value that is not an address spends the caller's budget, not a fresh one.
    assert_eq!(check_for(&app, Some("not-an-address")).await.status, 429);
}
