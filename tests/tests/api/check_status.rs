//! GET /api/check?answer=status: the door check's status form for a proxy's `auth_request`
//! (nginx without njs): 204 serves, 401 redirects to `X-QM-Location`; the page's own
//! `qm_token` is found by the server; a malformed key is dropped, never a way in; a refusal is
//! never 401 or 403. The JSON form is unchanged beside it.

use qm_tests::{Reply, TestApp, room_body, spawn_app};
use serde_json::json;

const PAGE: &str = "https://shop.example/cart?size=m&colour=red";

/// A status-form check at `prefix` (`/api` or `/api/v1`) naming the page by `Referer`, as the
/// plain nginx config does, with an optional door-session key.
async fn status_check(app: &TestApp, prefix: &str, referer: &str, key: Option<&str>) -> Reply {
    let mut request = app
        .http
        .get(format!("{}{prefix}/check", app.gateway))
        .query(&[("roomId", "door"), ("answer", "status")])
        .header("referer", referer);
    if let Some(key) = key {
        request = request.header("x-qm-session", key);
    }
    app.send(request).await
}

#[tokio::test]
async fn the_status_form_carries_a_visitor_from_the_line_through_a_door_session() {
    let app = spawn_app().await;
    for prefix in ["/api", "/api/v1"] {
        let unknown = status_check(&app, prefix, PAGE, None).await;
        assert_eq!(unknown.status, 204, "{prefix}: an unknown room is served");
        assert_eq!(unknown.header("x-qm-action"), Some("pass"));
        assert_eq!(unknown.header("x-qm-reason"), Some("no_room"));
        assert_eq!(unknown.header("cache-control"), Some("no-store"));
    }
    app.create_room(room_body("door", 0, json!({}))).await;

    for prefix in ["/api", "/api/v1"] {
        let queued = status_check(&app, prefix, PAGE, None).await;
        assert_eq!(queued.status, 401, "{prefix}: {}", queued.text);
        assert_eq!(queued.header("x-qm-action"), Some("queue"));
        let waiting = queued
            .header("x-qm-waiting-room")
            .expect("X-QM-Waiting-Room");
        assert!(waiting.ends_with("/w/door"), "{waiting}");
        assert_eq!(
            queued.header("x-qm-location"),
            Some(
                format!(
                    "{waiting}?qm_return=https%3A%2F%2Fshop.example%2Fcart%3Fsize%3Dm%26colour%3Dred"
                )
                .as_str()
            ),
            "the waiting page, asked to send the visitor back to the page, encoded"
        );
        assert_eq!(queued.header("x-qm-set-cookie"), None);
        assert_eq!(queued.header("cache-control"), Some("no-store"));
        assert_eq!(
            queued.body["action"], "queue",
            "the JSON answer rides along"
        );
    }

    // The waiting page sends the visitor back with qm_token in the page; the proxy only
    // forwards the page.
    let (joined, _) = app.join_as_new_visitor("door").await;
    let token = joined.body["token"].as_str().expect("token").to_owned();
    app.admin_post("/rooms/door/flush", json!({ "count": 1 }))
        .await;
    let returned = format!("https://shop.example/cart?size=m&qm_token={token}&colour=red");
    let opened = status_check(&app, "/api/v1", &returned, None).await;
    assert_eq!(opened.status, 401, "{}", opened.text);
    assert_eq!(opened.header("x-qm-action"), Some("pass"));
    assert_eq!(opened.header("x-qm-reason"), Some("passed"));
    assert_eq!(
        opened.header("x-qm-location"),
        Some("https://shop.example/cart?size=m&colour=red"),
        "back to the page without the pass"
    );
    let key = opened
        .header("x-qm-session")
        .expect("X-QM-Session")
        .to_owned();
    assert_eq!(
        opened.header("x-qm-set-cookie"),
        Some(format!("qm_dk_door={key}; Path=/; HttpOnly; SameSite=Lax; Secure").as_str()),
        "the cookie line, Secure for an https page"
    );

    // The key carries the visitor on.
    let session = status_check(&app, "/api/v1", PAGE, Some(&key)).await;
    assert_eq!(session.status, 204, "{}", session.text);
    assert_eq!(session.header("x-qm-reason"), Some("session"));
    assert_eq!(session.header("x-qm-set-cookie"), None);

    // The spent pass replayed without the key: the waiting room, and the stored key dropped.
    let replayed = status_check(&app, "/api/v1", &returned, None).await;
    assert_eq!(replayed.status, 401, "{}", replayed.text);
    assert_eq!(replayed.header("x-qm-reason"), Some("pass_spent"));
    assert_eq!(replayed.header("x-qm-clear-token"), Some("1"));
    let expiry = replayed.header("x-qm-set-cookie").unwrap_or("");
    assert!(
        expiry.starts_with("qm_dk_door=;") && expiry.contains("Max-Age=0"),
        "{expiry}"
    );
    let location = replayed.header("x-qm-location").unwrap_or("");
    assert!(
        location.contains("qm_return=https%3A%2F%2Fshop.example%2Fcart%3Fsize%3Dm%26colour%3Dred")
            && !location.contains("qm_token"),
        "the return is the page without the pass: {location}"
    );
}

#[tokio::test]
async fn a_malformed_key_is_dropped_and_refusals_never_read_as_a_verdict() {
    let app = spawn_app().await;
    app.create_room(room_body("door", 0, json!({}))).await;

    // The JSON form refuses the made-up key, as before; the status form checks without it
    // and expires it, so a made-up cookie is never a way past the line.
    let json_form = app
        .send(
            app.http
                .get(format!("{}/api/v1/check", app.gateway))
                .query(&[("roomId", "door")])
                .header("x-qm-session", "not a key"),
        )
        .await;
    assert_eq!(json_form.status, 400);
    assert_eq!(json_form.code(), "invalid_session");
    let status_form = status_check(&app, "/api/v1", PAGE, Some("not a key")).await;
    assert_eq!(status_form.status, 401, "{}", status_form.text);
    assert_eq!(status_form.header("x-qm-action"), Some("queue"));
    assert_eq!(status_form.header("x-qm-clear-token"), Some("1"));
    assert!(
        status_form
            .header("x-qm-set-cookie")
            .is_some_and(|line| line.contains("Max-Age=0")),
        "{:?}",
        status_form.header("x-qm-set-cookie")
    );

    // Vouching without the Bearer key: 401 in the JSON form, 400 here (a proxy reads 401 as
    // "queue"), the code unchanged and in X-QM-Error too.
    let refused = app
        .send(
            app.http
                .get(format!("{}/api/v1/check", app.gateway))
                .query(&[
                    ("roomId", "door"),
                    ("answer", "status"),
                    ("ip", "203.0.113.9"),
                ]),
        )
        .await;
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert_eq!(refused.code(), "unauthorized");
    assert_eq!(refused.header("x-qm-error"), Some("unauthorized"));
    let missing_room = app
        .send(
            app.http
                .get(format!("{}/api/check", app.gateway))
                .query(&[("answer", "status")]),
        )
        .await;
    assert_eq!(missing_room.status, 400);
    assert_eq!(missing_room.header("x-qm-error"), Some("invalid_room_id"));
}
