//! The console: its page and assets as the admin process serves them, and its server side —
//! sign-in with the `qm_console` cookie, CSRF refusals, sign-out revocation, single-use SSE
//! tickets, and the admin event stream's full and delta frames.

use std::time::Duration;

use qm_tests::sse::Frame;
use qm_tests::{SseStream, TEST_ADMIN_KEY, TestApp, room_body, spawn_app};
use serde_json::{Value, json};

const CSRF: (&str, &str) = ("X-QM-CSRF", "1");

/// Signs a console in; answers the reply and the `Cookie` header the browser would then send.
async fn sign_in(app: &TestApp) -> (qm_tests::Reply, String) {
    let reply = app
        .send(
            app.http
                .post(format!("{}/api/admin/session", app.admin))
                .header(CSRF.0, CSRF.1)
                .json(&json!({ "key": TEST_ADMIN_KEY })),
        )
        .await;
    assert_eq!(reply.status, 200, "sign in: {}", reply.text);
    let value = reply.cookie("qm_console").expect("qm_console is set");
    (reply, format!("qm_console={value}"))
}

fn set_cookie_of<'a>(reply: &'a qm_tests::Reply, name: &str) -> &'a str {
    reply
        .headers
        .get_all(reqwest::header::SET_COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find(|value| value.starts_with(&format!("{name}=")))
        .unwrap_or("")
}

#[tokio::test]
async fn console_sign_in_sets_a_strict_http_only_cookie_that_never_holds_the_key() {
    let app = spawn_app().await;
    let (reply, cookie) = sign_in(&app).await;
    assert_eq!(
        reply.body,
        json!({ "ok": true, "name": "owner", "role": "owner", "expiresInSec": 43200 })
    );
    let header = set_cookie_of(&reply, "qm_console");
    for attribute in [
        "Path=/api/admin",
        "Max-Age=43200",
        "SameSite=Strict",
        "HttpOnly",
    ] {
        assert!(header.contains(attribute), "{attribute} in {header}");
    }
    assert!(!header.contains("Secure"), "plain http: no Secure");
    assert!(
        !cookie.contains(TEST_ADMIN_KEY),
        "the reference never holds the key"
    );
    assert_eq!(reply.header("cache-control"), Some("no-store"));

    // The cookie alone opens every admin read.
    let rooms = app
        .send(
            app.http
                .get(format!("{}/api/admin/rooms", app.admin))
                .header(reqwest::header::COOKIE, &cookie),
        )
        .await;
    assert_eq!(rooms.status, 200, "{}", rooms.text);
    let who = app
        .send(
            app.http
                .get(format!("{}/api/admin/session", app.admin))
                .header(reqwest::header::COOKIE, &cookie),
        )
        .await;
    assert_eq!(
        (who.status, who.body["role"].clone()),
        (200, json!("owner"))
    );

    // Behind an https proxy the cookie is Secure.
    let https = app
        .send(
            app.http
                .post(format!("{}/api/admin/session", app.admin))
                .header(CSRF.0, CSRF.1)
                .header("X-Forwarded-Proto", "https")
                .json(&json!({ "key": TEST_ADMIN_KEY })),
        )
        .await;
    assert_eq!(https.status, 200);
    assert!(set_cookie_of(&https, "qm_console").contains("; Secure"));
}

#[tokio::test]
async fn console_sign_in_refuses_a_wrong_key_and_a_missing_csrf_header() {
    let app = spawn_app().await;
    let url = format!("{}/api/admin/session", app.admin);
    let wrong = app
        .send(
            app.http
                .post(&url)
                .header(CSRF.0, CSRF.1)
                .json(&json!({ "key": "not-the-admin-key" })),
        )
        .await;
    assert_eq!((wrong.status, wrong.code()), (401, "unauthorized"));
    assert!(
        wrong.cookie("qm_console").is_none(),
        "no cookie on a refusal"
    );
    let no_key = app
        .send(app.http.post(&url).header(CSRF.0, CSRF.1).json(&json!({})))
        .await;
    assert_eq!((no_key.status, no_key.code()), (401, "unauthorized"));
    let no_csrf = app
        .send(app.http.post(&url).json(&json!({ "key": TEST_ADMIN_KEY })))
        .await;
    assert_eq!((no_csrf.status, no_csrf.code()), (403, "csrf_required"));
    assert!(no_csrf.cookie("qm_console").is_none());
    let in_query = app
        .send(
            app.http
                .post(format!("{url}?key={TEST_ADMIN_KEY}"))
                .header(CSRF.0, CSRF.1)
                .json(&json!({ "key": TEST_ADMIN_KEY })),
        )
        .await;
    assert_eq!(in_query.code(), "credential_in_query");
    // A cookie that was never issued is not a session.
    let forged = app
        .send(
            app.http
                .get(format!("{}/api/admin/rooms", app.admin))
                .header(reqwest::header::COOKIE, "qm_console=abc.def"),
        )
        .await;
    assert_eq!((forged.status, forged.code()), (401, "unauthorized"));
}

#[tokio::test]
async fn console_cookie_writes_need_csrf_and_bearer_is_judged_alone() {
    let app = spawn_app().await;
    let (_, cookie) = sign_in(&app).await;
    let url = format!("{}/api/admin/rooms", app.admin);
    let body = room_body("csrf", 60, json!({}));

    let refused = app
        .send(
            app.http
                .post(&url)
                .header(reqwest::header::COOKIE, &cookie)
                .json(&body),
        )
        .await;
    assert_eq!((refused.status, refused.code()), (403, "csrf_required"));
    let listed = app.admin_call(reqwest::Method::GET, "/rooms", None).await;
    assert_eq!(
        listed.body["rooms"],
        json!([]),
        "the refused write did nothing"
    );

    let accepted = app
        .send(
            app.http
                .post(&url)
                .header(reqwest::header::COOKIE, &cookie)
                .header(CSRF.0, CSRF.1)
                .json(&body),
        )
        .await;
    assert_eq!(accepted.status, 200, "{}", accepted.text);

    // A delete through the cookie without the header is refused too.
    let delete = app
        .send(
            app.http
                .delete(format!("{url}/csrf"))
                .header(reqwest::header::COOKIE, &cookie),
        )
        .await;
    assert_eq!(delete.code(), "csrf_required");

    // With Authorization the header decides alone: no CSRF needed, and a wrong key is not
    // rescued by a valid cookie beside it.
    let bearer = app
        .send(
            app.http
                .post(format!("{url}/csrf/rate"))
                .header(reqwest::header::COOKIE, &cookie)
                .bearer_auth(TEST_ADMIN_KEY)
                .json(&json!({ "ratePerMinute": 90 })),
        )
        .await;
    assert_eq!(bearer.status, 200, "{}", bearer.text);
    let wrong_bearer = app
        .send(
            app.http
                .get(&url)
                .header(reqwest::header::COOKIE, &cookie)
                .bearer_auth("wrong-key-entirely"),
        )
        .await;
    assert_eq!(
        (wrong_bearer.status, wrong_bearer.code()),
        (401, "unauthorized")
    );
}

#[tokio::test]
async fn console_sign_out_clears_the_cookie_and_revokes_the_session() {
    let app = spawn_app().await;
    let (_, cookie) = sign_in(&app).await;
    let url = format!("{}/api/admin/session", app.admin);
    let no_csrf = app
        .send(
            app.http
                .delete(&url)
                .header(reqwest::header::COOKIE, &cookie),
        )
        .await;
    assert_eq!((no_csrf.status, no_csrf.code()), (403, "csrf_required"));

    let out = app
        .send(
            app.http
                .delete(&url)
                .header(reqwest::header::COOKIE, &cookie)
                .header(CSRF.0, CSRF.1),
        )
        .await;
    assert_eq!(out.status, 200, "{}", out.text);
    assert_eq!(out.body["revoked"], json!(true));
    let cleared = set_cookie_of(&out, "qm_console");
    assert!(cleared.starts_with("qm_console=;"), "{cleared}");
    assert!(cleared.contains("Max-Age=0") && cleared.contains("Path=/api/admin"));

    // The old reference, replayed, is refused.
    let replay = app
        .send(
            app.http
                .get(format!("{}/api/admin/rooms", app.admin))
                .header(reqwest::header::COOKIE, &cookie),
        )
        .await;
    assert_eq!((replay.status, replay.code()), (401, "unauthorized"));
}

async fn mint_ticket(app: &TestApp, request: reqwest::RequestBuilder) -> String {
    let reply = app.send(request).await;
    assert_eq!(reply.status, 200, "sse-ticket: {}", reply.text);
    assert_eq!(reply.body["expiresInSec"], json!(30));
    reply.body["ticket"]
        .as_str()
        .expect("ticket is a string")
        .to_owned()
}

/// A ticket minted through the console cookie, as the console does it (a POST: CSRF applies).
async fn cookie_ticket(app: &TestApp, cookie: &str) -> String {
    mint_ticket(
        app,
        app.http
            .post(format!("{}/api/admin/sse-ticket", app.admin))
            .header(reqwest::header::COOKIE, cookie)
            .header(CSRF.0, CSRF.1),
    )
    .await
}

/// Signs the console session of `cookie` out.
async fn sign_out(app: &TestApp, cookie: &str) -> qm_tests::Reply {
    app.send(
        app.http
            .delete(format!("{}/api/admin/session", app.admin))
            .header(reqwest::header::COOKIE, cookie)
            .header(CSRF.0, CSRF.1),
    )
    .await
}

async fn open_events(app: &TestApp, ticket: &str) -> Result<SseStream, qm_tests::Reply> {
    SseStream::open(
        app.http
            .get(format!("{}/api/admin/events", app.admin))
            .query(&[("ticket", ticket)]),
    )
    .await
}

#[tokio::test]
async fn console_sse_tickets_are_single_use_and_scoped_to_their_session() {
    let app = spawn_app().await;
    let ticket_url = format!("{}/api/admin/sse-ticket", app.admin);
    let unauthenticated = app.send(app.http.post(&ticket_url)).await;
    assert_eq!(unauthenticated.status, 401);

    let ticket = mint_ticket(&app, app.http.post(&ticket_url).bearer_auth(TEST_ADMIN_KEY)).await;
    let stream = open_events(&app, &ticket).await.expect("first use opens");
    drop(stream);
    let again = open_events(&app, &ticket).await.err().expect("spent");
    assert_eq!((again.status, again.code()), (401, "unauthorized"));
    let unknown = open_events(&app, "never-minted")
        .await
        .err()
        .expect("refused");
    assert_eq!(unknown.status, 401);

    // Minted through the cookie (a POST: CSRF applies), it dies with the session.
    let (_, cookie) = sign_in(&app).await;
    let no_csrf = app
        .send(
            app.http
                .post(&ticket_url)
                .header(reqwest::header::COOKIE, &cookie),
        )
        .await;
    assert_eq!(no_csrf.code(), "csrf_required");
    let ticket = cookie_ticket(&app, &cookie).await;
    let out = sign_out(&app, &cookie).await;
    assert_eq!(out.status, 200);
    let orphan = open_events(&app, &ticket)
        .await
        .err()
        .expect("session gone");
    assert_eq!(orphan.status, 401);

    // The stream also takes Bearer directly, and never a key in the URL.
    let bearer = SseStream::open(
        app.http
            .get(format!("{}/api/admin/events", app.admin))
            .bearer_auth(TEST_ADMIN_KEY),
    )
    .await;
    assert!(bearer.is_ok());
    let in_url = SseStream::open(app.http.get(format!(
        "{}/api/admin/events?key={TEST_ADMIN_KEY}",
        app.admin
    )))
    .await
    .err()
    .expect("refused");
    assert_eq!(in_url.code(), "credential_in_query");
}

fn is_delta(frame: &Frame) -> bool {
    frame.data.get("delta") == Some(&json!(true))
}

fn room_in<'a>(frame: &'a Frame, id: &str) -> Option<&'a Value> {
    frame.data["rooms"]
        .as_array()?
        .iter()
        .find(|room| room["id"] == id)
}

#[tokio::test]
async fn console_events_send_full_frames_then_deltas_of_real_changes() {
    let app = spawn_app().await;
    app.create_room(room_body("ev-a", 0, json!({}))).await;
    app.create_room(room_body("ev-b", 0, json!({}))).await;
    let (_, cookie) = sign_in(&app).await;
    // A cookie-minted ticket, as the console does it.
    let ticket = cookie_ticket(&app, &cookie).await;
    let mut stream = open_events(&app, &ticket).await.expect("stream opens");
    let wait = Duration::from_secs(5);

    let first = stream.next_frame(wait).await.expect("first frame");
    assert_eq!(first.event, "stats");
    assert!(!is_delta(&first), "the first frame is full");
    let ids: Vec<&str> = first.data["rooms"]
        .as_array()
        .expect("rooms")
        .iter()
        .filter_map(|room| room["id"].as_str())
        .collect();
    assert_eq!(ids, vec!["ev-a", "ev-b"], "creation order");
    assert_eq!(first.data["totals"]["rooms"], json!(2));
    assert_eq!(first.data["totals"]["waiting"], json!(0));
    assert!(first.data["sparkline"]["waiting"].is_array());
    let second = stream.next_frame(wait).await.expect("second frame");
    assert!(!is_delta(&second), "the next tick is full again");
    let third = stream.next_frame(wait).await.expect("third frame");
    assert!(is_delta(&third), "then deltas: {}", third.data);
    assert_eq!(third.data["rooms"], json!([]), "nothing changed");
    assert_eq!(third.data["removed"], json!([]));
    assert!(third.data.get("totals").is_some());

    // Two visitors join ev-a: the next delta carries ev-a with the engine's number, not ev-b.
    app.join_as_new_visitor("ev-a").await;
    app.join_as_new_visitor("ev-a").await;
    let changed = stream
        .frame_where(Duration::from_secs(6), |frame| {
            is_delta(frame) && room_in(frame, "ev-a").is_some()
        })
        .await
        .expect("a delta with ev-a");
    assert_eq!(
        room_in(&changed, "ev-a").expect("ev-a")["waiting"],
        json!(2)
    );
    assert!(
        room_in(&changed, "ev-b").is_none(),
        "unchanged rooms stay out"
    );
    assert_eq!(changed.data["totals"]["waiting"], json!(2));

    // Deleting ev-b: the delta names it in removed.
    let deleted = app
        .admin_call(reqwest::Method::DELETE, "/rooms/ev-b", None)
        .await;
    assert_eq!(deleted.status, 200);
    let removed = stream
        .frame_where(Duration::from_secs(6), |frame| {
            is_delta(frame) && frame.data["removed"] == json!(["ev-b"])
        })
        .await
        .expect("a delta removing ev-b");
    assert_eq!(removed.data["totals"]["rooms"], json!(1));
}

#[tokio::test]
async fn console_metrics_chart_real_joins_passes_and_depth() {
    let app = spawn_app().await;
    app.create_room(room_body("mx", 0, json!({}))).await;
    for _ in 0..3 {
        app.join_as_new_visitor("mx").await;
    }
    let flushed = app
        .admin_post("/rooms/mx/flush", json!({ "count": 2 }))
        .await;
    assert_eq!(flushed.status, 200, "{}", flushed.text);

    let reply = app
        .admin_call(reqwest::Method::GET, "/metrics?roomId=mx&range=15m", None)
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.body["roomId"], json!("mx"));
    assert_eq!(reply.body["range"], json!("15m"));
    assert_eq!(reply.body["stepSec"], json!(10));
    let points = reply.body["points"].as_array().expect("points");
    // The room's creation (every counter zero) and the room now: nothing invented between.
    let first = points.first().expect("a first point");
    assert_eq!(
        (
            first["joinedTotal"].clone(),
            first["passedTotal"].clone(),
            first["waiting"].clone()
        ),
        (json!(0), json!(0), json!(0))
    );
    let last = points.last().expect("a live point");
    assert_eq!(last["joinedTotal"], json!(3));
    assert_eq!(last["passedTotal"], json!(2));
    assert_eq!(last["waiting"], json!(1));
    assert!(last["joinsPerMin"].as_f64().is_some_and(|rate| rate > 0.0));
    assert!(last["t"].as_i64() >= first["t"].as_i64());

    // Through the console cookie too (a GET: no CSRF header needed).
    let (_, cookie) = sign_in(&app).await;
    let by_cookie = app
        .send(
            app.http
                .get(format!("{}/api/admin/metrics?roomId=mx", app.admin))
                .header(reqwest::header::COOKIE, &cookie),
        )
        .await;
    assert_eq!(by_cookie.status, 200, "{}", by_cookie.text);

    for (query, status, code) in [
        ("roomId=mx&range=2d", 400, "invalid_range"),
        ("roomId=mx&range=", 400, "invalid_range"),
        ("range=1h", 400, "invalid_room_id"),
        ("roomId=nope&range=1h", 404, "room_not_found"),
    ] {
        let refused = app
            .admin_call(reqwest::Method::GET, &format!("/metrics?{query}"), None)
            .await;
        assert_eq!((refused.status, refused.code()), (status, code), "{query}");
    }
}

#[tokio::test]
async fn console_event_streams_end_when_the_admin_process_stops() {
    let app = spawn_app().await;
    let mut stream = SseStream::open(
        app.http
            .get(format!("{}/api/admin/events", app.admin))
            .bearer_auth(TEST_ADMIN_KEY),
    )
    .await
    .expect("stream opens");
    stream
        .next_frame(Duration::from_secs(5))
        .await
        .expect("first frame");
    let stopping = tokio::spawn(app.stop());
    // Sooner than the 2 s drain (SHUTDOWN_DRAIN_SEC in tests): the stream ends itself, it is
    // not cut by the drain timing out.
    assert!(
        stream.ends_within(Duration::from_millis(1500)).await,
        "the stream closes on shutdown"
    );
    tokio::time::timeout(Duration::from_secs(10), stopping)
        .await
        .expect("components stop in bounded time")
        .ok();
}

#[tokio::test]
async fn a_console_event_stream_ends_when_its_session_signs_out() {
    let app = spawn_app().await;
    let (_, cookie) = sign_in(&app).await;
    let ticket = cookie_ticket(&app, &cookie).await;
    let mut stream = open_events(&app, &ticket).await.expect("stream opens");
    stream
        .next_frame(Duration::from_secs(5))
        .await
        .expect("first frame");
    let out = sign_out(&app, &cookie).await;
    assert_eq!(out.status, 200);
    // One tick (2 s) at most, with room for a slow machine: no frame goes to a signed-out console.
    assert!(
        stream.ends_within(Duration::from_secs(6)).await,
        "the stream of a signed-out session ends"
    );
}

/// Every `/assets/…` path the page links, each checked for its shape: `console[-part]-<hash>.css|js`
/// with a 22-character base64url content hash.
fn linked_assets(page: &str) -> Vec<String> {
    let paths: Vec<String> = page
        .split('"')
        .filter(|piece| piece.starts_with("/assets/"))
        .map(str::to_owned)
        .collect();
    for path in &paths {
        let name = path.trim_start_matches("/assets/");
        let (stem, extension) = name.rsplit_once('.').unwrap_or((name, ""));
        assert!(matches!(extension, "css" | "js"), "{path}");
        // The hash is the last 22 characters (base64url may itself hold a `-`).
        let split = stem
            .len()
            .checked_sub(23)
            .unwrap_or_else(|| panic!("{path}"));
        let (prefix, hash) = (&stem[..split], &stem[split + 1..]);
        assert!(
            prefix.starts_with("console") && stem.as_bytes()[split] == b'-',
            "{path}"
        );
        assert_eq!(hash.len(), 22, "a 22-character content hash: {path}");
        assert!(
            hash.bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_'),
            "base64url: {path}"
        );
    }
    paths
}

#[tokio::test]
async fn the_console_page_is_served_with_a_strict_policy_and_hashed_assets() {
    let app = spawn_app().await;
    let page = app.get(&format!("{}/", app.admin)).await;
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(page.header("cache-control"), Some("no-cache"));
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    let policy = page.header("content-security-policy").unwrap_or_default();
    for directive in [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    ] {
        assert!(policy.contains(directive), "{directive} in {policy}");
    }
    assert!(
        !policy.contains("unsafe-inline") && !policy.contains("unsafe-eval"),
        "{policy}"
    );
    // The hooks the browser tests drive.
    for hook in [
        "id=\"signin\"",
        "id=\"signin-key\" name=\"key\" type=\"password\"",
        "id=\"signout\"",
        "id=\"rooms\"",
        "id=\"chart\"",
        "id=\"room-form\"",
        "id=\"new-room\"",
        "id=\"confirm\"",
        "id=\"shortcuts\"",
        "id=\"console-status\"",
    ] {
        assert!(page.text.contains(hook), "{hook} in the page");
    }

    let assets = linked_assets(&page.text);
    assert!(
        assets.iter().filter(|path| path.ends_with(".css")).count() == 1
            && assets.iter().filter(|path| path.ends_with(".js")).count() >= 1,
        "a stylesheet and the scripts: {assets:?}"
    );
    for path in &assets {
        let content_type = if path.ends_with(".css") {
            "text/css; charset=utf-8"
        } else {
            "text/javascript; charset=utf-8"
        };
        let asset = app.get(&format!("{}{path}", app.admin)).await;
        assert_eq!(asset.status, 200, "{path}");
        assert_eq!(asset.header("content-type"), Some(content_type));
        assert_eq!(
            asset.header("cache-control"),
            Some("public, max-age=31536000, immutable"),
            "a hashed name is cached forever"
        );
        assert_eq!(asset.header("x-content-type-options"), Some("nosniff"));
        assert!(!asset.text.is_empty());
    }
    // A name this build does not hash to is not served, whatever its shape.
    let stale = app
        .get(&format!(
            "{}/assets/console-AAAAAAAAAAAAAAAAAAAAAA.js",
            app.admin
        ))
        .await;
    assert_eq!((stale.status, stale.code()), (404, "not_found"));
}

#[tokio::test]
async fn the_console_page_and_its_assets_never_carry_the_key() {
    let app = spawn_app().await;
    let (_, cookie) = sign_in(&app).await;
    // Signed in or not, with the key in a header or not: the same page, and never the key.
    let anonymous = app.get(&format!("{}/", app.admin)).await;
    let signed_in = app
        .send(
            app.http
                .get(format!("{}/", app.admin))
                .header(reqwest::header::COOKIE, &cookie)
                .bearer_auth(TEST_ADMIN_KEY),
        )
        .await;
    assert_eq!(anonymous.text, signed_in.text);
    let mut texts = vec![anonymous.text.clone()];
    for path in linked_assets(&anonymous.text) {
        texts.push(app.get(&format!("{}{path}", app.admin)).await.text);
    }
    for text in &texts {
        assert!(!text.contains(TEST_ADMIN_KEY), "the key is never embedded");
        assert!(!text.contains("admin-dev"), "nor the development default");
    }
    // Were the script not to take the sign-in form over, the key would still never be put in
    // a URL: the form posts.
    assert!(
        page_has_post_sign_in(&anonymous.text),
        "form#signin posts to the session route"
    );
    // No inline code for the policy to refuse: every script element loads a file or is data.
    let page = &anonymous.text;
    for (index, _) in page.match_indices("<script") {
        let tag = page[index..].split('>').next().unwrap_or_default();
        assert!(
            tag.contains(" src=\"/assets/console-") || tag.contains("type=\"application/json\""),
            "inline script: {tag}"
        );
    }
    assert!(!page.contains(" style=\""), "no inline style");
    assert!(!page.contains(" onclick="), "no inline handler");
}

fn page_has_post_sign_in(page: &str) -> bool {
    page.split("<form")
        .find(|form| form.contains("id=\"signin\""))
        .and_then(|form| form.split('>').next())
        .is_some_and(|tag| {
            tag.contains("method=\"post\"") && tag.contains("action=\"/api/admin/session\"")
        })
}
