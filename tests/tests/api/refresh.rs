//! Token refresh (QM-391) and the refresh frame (QM-469). With TOKEN_MAX_AGE_SEC and
//! QUEUE_COOKIE_MAX_AGE_SEC at their minimum of 60, a token is due 30 s after its iat. Waiting
//! that long is too slow for a test, so each test signs the place it joined with an older iat,
//! exactly as the gateway would (the same SECRET through `Config::keyring`).

use std::time::Duration;

use base64::Engine as _;
use qm_core::clock::now_ms;
use qm_core::config::Config;
use qm_core::token::{Keyring, VisitorClaims, VisitorPlace};
use qm_tests::{Reply, SseStream, TestApp, room_body, spawn_app_with, test_env};
use serde_json::{Value, json};

/// TOKEN_REFRESH_AFTER_MS under [`SHORT_LIVES`].
const REFRESH_AFTER_MS: i64 = 30_000;
const SHORT_LIVES: [(&str, &str); 2] = [
    ("TOKEN_MAX_AGE_SEC", "60"),
    ("QUEUE_COOKIE_MAX_AGE_SEC", "60"),
];

async fn spawn_short_lived(extra: &[(&str, &str)]) -> TestApp {
    let mut overrides = SHORT_LIVES.to_vec();
    overrides.extend_from_slice(extra);
    spawn_app_with(&overrides).await
}

/// The payload of a token, read without verifying it.
fn payload(token: &str) -> Value {
    let encoded = token.split('.').next().unwrap_or_default();
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(encoded)
        .expect("token payload is base64url");
    serde_json::from_slice(&json).expect("token payload is JSON")
}

/// The place a token names (ticket or pre-queue handle), issued at `iat`.
fn claims_at(token: &str, iat: i64) -> VisitorClaims {
    let payload = payload(token);
    let place = match payload["n"].as_u64() {
        Some(ticket) => VisitorPlace::Ticket(ticket),
        None => VisitorPlace::Handle(payload["q"].as_u64().expect("n or q")),
    };
    VisitorClaims {
        room_id: payload["r"].as_str().expect("r").to_owned(),
        place,
        generation: payload["g"].as_u64().expect("g"),
        iat,
    }
}

/// The place of a joined visitor, signed by the app's keyring with `iat`.
fn signed_at(app: &TestApp, token: &str, iat: i64) -> String {
    app.config.keyring().sign_visitor(&claims_at(token, iat))
}

/// A joined visitor: the token from the join and the ownership cookie `qms_<room>=<id>`.
struct Visitor {
    token: String,
    session_id: String,
}

impl Visitor {
    async fn join(app: &TestApp, room_id: &str) -> Visitor {
        let (reply, _) = app.join_as_new_visitor(room_id).await;
        Visitor {
            token: reply.body["token"].as_str().expect("token").to_owned(),
            session_id: reply
                .cookie(&format!("qms_{room_id}"))
                .expect("qms_ cookie"),
        }
    }

    fn ownership_cookie(&self, room_id: &str) -> String {
        format!("qms_{room_id}={}", self.session_id)
    }
}

/// GET /api/status?token= with an optional Cookie header.
async fn status_with(app: &TestApp, token: &str, cookie: Option<&str>) -> Reply {
    let mut request = app
        .http
        .get(format!("{}/api/status", app.gateway))
        .query(&[("token", token)]);
    if let Some(cookie) = cookie {
        request = request.header(reqwest::header::COOKIE, cookie);
    }
    app.send(request).await
}

/// Opens the event stream at `path` with `?token=` and a Cookie header.
async fn events_with_cookie(
    app: &TestApp,
    path: &str,
    token: &str,
    cookie: &str,
) -> Result<SseStream, Reply> {
    let request = app
        .http
        .get(format!("{}{path}", app.gateway))
        .query(&[("token", token)])
        .header(reqwest::header::COOKIE, cookie);
    SseStream::open(request).await
}

/// Every Set-Cookie of an open stream's response.
fn stream_set_cookies(stream: &SseStream) -> Vec<String> {
    stream
        .headers
        .get_all(reqwest::header::SET_COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok().map(str::to_owned))
        .collect()
}

/// The value `set_cookies` gives cookie `name`.
fn cookie_value(set_cookies: &[String], name: &str) -> Option<String> {
    set_cookies.iter().find_map(|cookie| {
        let (pair, _) = cookie.split_once(';').unwrap_or((cookie, ""));
        let (key, value) = pair.split_once('=')?;
        (key.trim() == name).then(|| value.trim().to_owned())
    })
}

/// A refreshed token names the same place as `old`, is newer, and verifies.
fn assert_same_place_newer(app: &TestApp, fresh: &str, old: &str, issued_after: i64) {
    let (fresh_payload, old_payload) = (payload(fresh), payload(old));
    assert_eq!(fresh_payload["r"], old_payload["r"]);
    assert_eq!(fresh_payload["n"], old_payload["n"], "the same ticket");
    assert_eq!(
        fresh_payload["q"], old_payload["q"],
        "the same pre-queue handle"
    );
    assert_eq!(fresh_payload["g"], old_payload["g"], "the same generation");
    let fresh_iat = fresh_payload["iat"].as_i64().expect("iat");
    assert!(
        fresh_iat > old_payload["iat"].as_i64().expect("iat") && fresh_iat >= issued_after,
        "{fresh_payload} after {old_payload}"
    );
    let verified = app
        .config
        .keyring()
        .verify_visitor(fresh, now_ms(), app.config.token_max_age_sec)
        .expect("the fresh token verifies");
    assert_eq!(verified.iat, fresh_iat);
}

#[tokio::test]
async fn a_due_pre_queue_handle_is_re_signed_keeping_its_handle() {
    // A pre-queue for a drop days away is the wait that most outlasts a token.
    let app = spawn_short_lived(&[]).await;
    let opens_at = now_ms() + 86_400_000;
    app.create_room(room_body("later", 0, json!({ "opensAt": opens_at })))
        .await;
    let visitor = Visitor::join(&app, "later").await;
    assert!(payload(&visitor.token)["q"].is_u64(), "a handle");
    let before = now_ms();
    let due = signed_at(&app, &visitor.token, before - REFRESH_AFTER_MS - 1_000);
    let reply = status_with(&app, &due, Some(&visitor.ownership_cookie("later"))).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.body["preQueued"], true, "{}", reply.text);
    let fresh = reply.body["token"].as_str().expect("a fresh token");
    assert_same_place_newer(&app, fresh, &due, before);
    assert_eq!(
        reply.cookie("qms_later").as_deref(),
        Some(visitor.session_id.as_str())
    );
    // Without the ownership cookie the handle is not refreshed.
    let reply = status_with(&app, &due, None).await;
    assert!(reply.body.get("token").is_none(), "{}", reply.text);
}

#[tokio::test]
async fn status_re_signs_a_due_token_and_re_sets_both_cookies() {
    let app = spawn_short_lived(&[]).await;
    app.create_room(room_body("renew", 0, json!({}))).await;
    let visitor = Visitor::join(&app, "renew").await;
    let ownership = visitor.ownership_cookie("renew");

    // Not yet due: nothing is re-signed.
    let young = signed_at(&app, &visitor.token, now_ms() - REFRESH_AFTER_MS + 5_000);
    let reply = status_with(&app, &young, Some(&ownership)).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert!(reply.body.get("token").is_none(), "{}", reply.text);
    assert!(reply.set_cookies().is_empty());

    let before = now_ms();
    let due = signed_at(&app, &visitor.token, before - REFRESH_AFTER_MS - 1_000);
    let reply = status_with(&app, &due, Some(&ownership)).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.body["position"], 1, "{}", reply.text);
    let fresh = reply.body["token"].as_str().expect("a fresh token");
    assert_same_place_newer(&app, fresh, &due, before);
    assert_eq!(reply.cookie("qm_renew").as_deref(), Some(fresh));
    assert_eq!(
        reply.cookie("qms_renew").as_deref(),
        Some(visitor.session_id.as_str()),
        "the same session id"
    );
    let set_cookies = reply.set_cookies();
    assert!(set_cookies.iter().all(|cookie| cookie.contains("Path=/")
        && cookie.contains("Max-Age=60")
        && cookie.contains("SameSite=Lax")));
    assert!(
        set_cookies
            .iter()
            .any(|cookie| cookie.starts_with("qms_renew=") && cookie.contains("HttpOnly"))
    );
    assert_eq!(reply.header("cache-control"), Some("no-store"));

    // The token in the queue cookie (no ?token=) is refreshed alike.
    let request = app
        .http
        .get(format!("{}/api/v1/status", app.gateway))
        .query(&[("roomId", "renew")])
        .header(
            reqwest::header::COOKIE,
            format!("qm_renew={due}; {ownership}"),
        );
    let by_cookie = app.send(request).await;
    assert_eq!(by_cookie.status, 200, "{}", by_cookie.text);
    let fresh = by_cookie.body["token"].as_str().expect("a fresh token");
    assert_same_place_newer(&app, fresh, &due, before);
    assert_eq!(
        by_cookie.cookie("qms_renew").as_deref(),
        Some(visitor.session_id.as_str())
    );
}

#[tokio::test]
async fn without_its_ownership_cookie_a_due_token_is_not_refreshed() {
    let app = spawn_short_lived(&[]).await;
    app.create_room(room_body("bare", 0, json!({}))).await;
    let visitor = Visitor::join(&app, "bare").await;
    let other = Visitor::join(&app, "bare").await;
    let due = signed_at(&app, &visitor.token, now_ms() - REFRESH_AFTER_MS - 1_000);

    let reply = status_with(&app, &due, None).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.body["position"], 1, "the place still reads");
    assert!(reply.body.get("token").is_none(), "{}", reply.text);
    assert!(reply.set_cookies().is_empty());

    // Another browser's ownership cookie proves nothing about this place.
    let reply = status_with(&app, &due, Some(&other.ownership_cookie("bare"))).await;
    assert!(reply.body.get("token").is_none(), "{}", reply.text);
    assert!(reply.set_cookies().is_empty());
}

#[tokio::test]
async fn a_passed_ejected_or_reset_place_is_not_refreshed() {
    let app = spawn_short_lived(&[]).await;
    app.create_room(room_body("done", 0, json!({}))).await;
    let passed = Visitor::join(&app, "done").await;
    let ejected = Visitor::join(&app, "done").await;
    let waiting = Visitor::join(&app, "done").await;
    let flush = app
        .admin_post("/rooms/done/flush", json!({ "count": 1 }))
        .await;
    assert_eq!(flush.status, 200, "{}", flush.text);
    let eject = app
        .admin_post("/rooms/done/eject", json!({ "ticket": 2 }))
        .await;
    assert_eq!(eject.status, 200, "{}", eject.text);
    let iat = now_ms() - REFRESH_AFTER_MS - 1_000;

    let reply = status_with(
        &app,
        &signed_at(&app, &passed.token, iat),
        Some(&passed.ownership_cookie("done")),
    )
    .await;
    assert_eq!(reply.body["passed"], true, "{}", reply.text);
    assert!(reply.body.get("token").is_none(), "{}", reply.text);
    assert!(reply.set_cookies().is_empty());

    let reply = status_with(
        &app,
        &signed_at(&app, &ejected.token, iat),
        Some(&ejected.ownership_cookie("done")),
    )
    .await;
    assert_eq!(reply.body["expired"], true, "{}", reply.text);
    assert_eq!(reply.body["reason"], "ejected");
    assert!(reply.body.get("token").is_none(), "{}", reply.text);
    assert!(reply.set_cookies().is_empty());

    // A token of another generation of the room: the place is not this room's.
    let claims = claims_at(&waiting.token, iat);
    let other_generation = app.config.keyring().sign_visitor(&VisitorClaims {
        generation: claims.generation + 1,
        ..claims
    });
    let reply = status_with(
        &app,
        &other_generation,
        Some(&waiting.ownership_cookie("done")),
    )
    .await;
    assert_eq!(reply.body["expired"], true, "{}", reply.text);
    assert!(reply.body.get("token").is_none(), "{}", reply.text);
    assert!(reply.set_cookies().is_empty());
}

#[tokio::test]
async fn a_token_past_token_max_age_is_refused_not_refreshed() {
    let app = spawn_short_lived(&[]).await;
    app.create_room(room_body("old", 0, json!({}))).await;
    let visitor = Visitor::join(&app, "old").await;
    let ownership = visitor.ownership_cookie("old");
    let too_old = signed_at(&app, &visitor.token, now_ms() - 61_000);

    let reply = status_with(&app, &too_old, Some(&ownership)).await;
    assert_eq!(reply.status, 401, "{}", reply.text);
    assert_eq!(reply.code(), "invalid_token");
    assert!(reply.set_cookies().is_empty());

    let refused = events_with_cookie(&app, "/api/events", &too_old, &ownership)
        .await
        .err()
        .expect("the stream is refused");
    assert_eq!(refused.status, 401);
    assert_eq!(refused.code(), "invalid_token");
    assert!(refused.set_cookies().is_empty());
}

#[tokio::test]
async fn a_refresh_is_signed_by_the_keyring_in_force() {
    let app = spawn_short_lived(&[("TOKEN_SIGN_V2", "1")]).await;
    app.create_room(room_body("vtwo", 0, json!({}))).await;
    let visitor = Visitor::join(&app, "vtwo").await;
    // A legacy token (same SECRET, no kid), as issued before TOKEN_SIGN_V2 was turned on.
    let legacy_keyring: Keyring = Config::from_source(&test_env())
        .expect("test configuration is valid")
        .keyring();
    assert!(!legacy_keyring.signs_v2());
    let legacy_due =
        legacy_keyring.sign_visitor(&claims_at(&visitor.token, now_ms() - REFRESH_AFTER_MS - 1));
    assert!(payload(&legacy_due).get("kid").is_none());

    let reply = status_with(&app, &legacy_due, Some(&visitor.ownership_cookie("vtwo"))).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let fresh = reply.body["token"].as_str().expect("a fresh token");
    assert_eq!(
        payload(fresh)["kid"],
        app.config.keyring().kid(),
        "v2, current kid"
    );
    assert_same_place_newer(&app, fresh, &legacy_due, 0);
}

#[tokio::test]
async fn a_stream_opened_with_a_due_token_sets_the_cookies_and_carries_the_fresh_token() {
    let app = spawn_short_lived(&[]).await;
    app.create_room(room_body("open", 0, json!({}))).await;
    let _ahead = Visitor::join(&app, "open").await;
    let visitor = Visitor::join(&app, "open").await;
    let ownership = visitor.ownership_cookie("open");
    let before = now_ms();
    let due = signed_at(&app, &visitor.token, before - REFRESH_AFTER_MS - 1_000);

    for path in ["/events", "/api/events", "/api/v1/events"] {
        let mut stream = events_with_cookie(&app, path, &due, &ownership)
            .await
            .unwrap_or_else(|reply| panic!("{path}: {}", reply.text));
        let set_cookies = stream_set_cookies(&stream);
        let fresh = cookie_value(&set_cookies, "qm_open").expect("qm_ cookie on the response");
        assert_same_place_newer(&app, &fresh, &due, before);
        assert_eq!(
            cookie_value(&set_cookies, "qms_open").as_deref(),
            Some(visitor.session_id.as_str()),
            "{path}: the same session id"
        );
        let first = stream
            .next_frame(Duration::from_secs(3))
            .await
            .expect("a first frame");
        assert_eq!(first.event, "status", "{path}");
        assert_eq!(first.data["position"], 2, "{path}: {:?}", first.data);
        assert_eq!(first.data["token"], fresh.as_str(), "{path}");

        if path == "/api/v1/events" {
            // A later frame (the line moved) still carries it.
            app.admin_post("/rooms/open/flush", json!({ "count": 1 }))
                .await;
            let moved = stream
                .frame_where(Duration::from_secs(5), |frame| frame.data["position"] == 1)
                .await
                .expect("the stream follows the line");
            assert_eq!(moved.data["token"], fresh.as_str());
        }
    }

    // A token not yet due: no cookies, no token in the frames.
    let young = signed_at(&app, &visitor.token, now_ms() - 1_000);
    let mut stream = events_with_cookie(&app, "/events", &young, &ownership)
        .await
        .expect("opens");
    assert!(stream_set_cookies(&stream).is_empty());
    let first = stream
        .next_frame(Duration::from_secs(3))
        .await
        .expect("a first frame");
    assert!(first.data.get("token").is_none(), "{:?}", first.data);
}

#[tokio::test]
async fn an_open_stream_whose_token_falls_due_ends_with_a_refresh_frame_after_its_jitter() {
    let app = spawn_short_lived(&[]).await;
    app.create_room(room_body("due", 0, json!({}))).await;
    let visitor = Visitor::join(&app, "due").await;
    let ownership = visitor.ownership_cookie("due");
    // Falls due about a second after the stream opens.
    let iat = now_ms() - REFRESH_AFTER_MS + 1_000;
    let claims = claims_at(&visitor.token, iat);
    let token = app.config.keyring().sign_visitor(&claims);
    let jitter_ms = claims.refresh_jitter_ms(REFRESH_AFTER_MS as u64) as i64;
    assert!(jitter_ms <= REFRESH_AFTER_MS / 10);
    let expected_end = iat + REFRESH_AFTER_MS + jitter_ms;

    let mut stream = events_with_cookie(&app, "/events", &token, &ownership)
        .await
        .expect("opens");
    assert!(
        stream_set_cookies(&stream).is_empty(),
        "not due at open: nothing to set"
    );
    let wait = Duration::from_millis((expected_end + 3_000 - now_ms()).max(0) as u64);
    let mut statuses = 0;
    let refresh = loop {
        let frame = stream
            .next_frame(wait)
            .await
            .expect("a refresh frame before the stream ends");
        if frame.event != "status" {
            break frame;
        }
        assert!(frame.data.get("token").is_none(), "{:?}", frame.data);
        statuses += 1;
    };
    let ended_at = now_ms();
    assert_eq!(refresh.event, "refresh");
    assert_eq!(refresh.data, json!({}));
    assert!(statuses >= 1, "the status frames came first");
    assert!(
        (ended_at - expected_end).abs() <= 1_500,
        "refresh at {ended_at}, expected {expected_end} (jitter {jitter_ms} ms)"
    );
    assert!(
        stream.ends_within(Duration::from_secs(2)).await,
        "the stream ends after the refresh frame"
    );

    // The page reopens the stream once: its response re-signs the place.
    let mut reopened = events_with_cookie(&app, "/events", &token, &ownership)
        .await
        .expect("reopens");
    let set_cookies = stream_set_cookies(&reopened);
    let fresh = cookie_value(&set_cookies, "qm_due").expect("qm_ cookie on the reopened stream");
    assert_same_place_newer(&app, &fresh, &token, ended_at - 1_000);
    assert_eq!(
        cookie_value(&set_cookies, "qms_due").as_deref(),
        Some(visitor.session_id.as_str())
    );
    let first = reopened
        .next_frame(Duration::from_secs(3))
        .await
        .expect("a first frame");
    assert_eq!(first.data["token"], fresh.as_str());
}

#[tokio::test]
async fn a_stream_whose_due_refresh_would_not_be_granted_is_not_ended_for_it() {
    let app = spawn_short_lived(&[]).await;
    app.create_room(room_body("keep", 0, json!({}))).await;
    let passing = Visitor::join(&app, "keep").await;
    let unproven = Visitor::join(&app, "keep").await;
    let iat = now_ms() - REFRESH_AFTER_MS + 1_000;

    // No ownership cookie: the refresh is never granted.
    let mut without_cookie = app
        .events("/events", &signed_at(&app, &unproven.token, iat))
        .await
        .expect("opens");
    // Bound, but through the line before its token falls due: no longer waiting then.
    let mut passed_meanwhile = events_with_cookie(
        &app,
        "/api/events",
        &signed_at(&app, &passing.token, iat),
        &passing.ownership_cookie("keep"),
    )
    .await
    .expect("opens");
    let flush = app
        .admin_post("/rooms/keep/flush", json!({ "count": 1 }))
        .await;
    assert_eq!(flush.status, 200, "{}", flush.text);

    // Still open two seconds after the latest instant a refresh could have ended them.
    let latest_refresh = iat + REFRESH_AFTER_MS + REFRESH_AFTER_MS / 10;
    let wait = Duration::from_millis((latest_refresh + 2_000 - now_ms()).max(0) as u64);
    let (first_ended, second_ended) = tokio::join!(
        without_cookie.ends_within(wait),
        passed_meanwhile.ends_within(wait)
    );
    assert!(
        !first_ended,
        "a stream without its ownership cookie stays open"
    );
    assert!(!second_ended, "a stream of a passed place stays open");
    assert!(now_ms() >= latest_refresh + 2_000);
}
