//! Who may do what, end to end: operator keys and monitor tokens as credentials (Bearer and the
//! console sign-in), their revocation on the next request, the lockout
//! (ADMIN_AUTH_FAIL_PER_MIN), redacted reads through a monitor token, and the owner's shutdown.
//! The route-by-route matrix is `grants.rs`; the trail is `audit.rs`; the engine side of the same
//! records is `access.rs`.

use std::time::Duration;

use qm_tests::{Reply, TEST_ADMIN_KEY, TestApp, room_body, spawn_app, spawn_app_with};
use serde_json::{Value, json};

/// How a test request presents itself.
#[derive(Debug, Clone)]
pub(crate) enum Cred {
    None,
    Bearer(String),
    /// A console cookie, with or without the X-QM-CSRF header.
    Cookie {
        cookie: String,
        csrf: bool,
    },
}

/// `method` on `/api/admin<path>` with `cred`, an optional JSON body and extra headers. The
/// event stream's body is not read (it never ends): its status and headers are the answer.
pub(crate) async fn call(
    app: &TestApp,
    method: reqwest::Method,
    path: &str,
    cred: &Cred,
    body: Option<Value>,
    headers: &[(&str, &str)],
) -> Reply {
    let mut request = app
        .http
        .request(method, format!("{}/api/admin{path}", app.admin));
    match cred {
        Cred::None => {}
        Cred::Bearer(key) => request = request.bearer_auth(key),
        Cred::Cookie { cookie, csrf } => {
            request = request.header(reqwest::header::COOKIE, cookie);
            if *csrf {
                request = request.header("X-QM-CSRF", "1");
            }
        }
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = tokio::time::timeout(Duration::from_secs(20), request.send())
        .await
        .expect("answered in time")
        .expect("request reaches the server");
    let is_stream = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"));
    let status = response.status().as_u16();
    let response_headers = response.headers().clone();
    let text = if is_stream {
        String::new()
    } else {
        response.text().await.unwrap_or_default()
    };
    Reply {
        status,
        headers: response_headers,
        body: serde_json::from_str(&text).unwrap_or(Value::Null),
        text,
    }
}

pub(crate) fn admin_key() -> Cred {
    Cred::Bearer(TEST_ADMIN_KEY.to_owned())
}

/// Creates an operator with ADMIN_KEY; answers its id and key.
pub(crate) async fn create_operator(app: &TestApp, name: &str, role: &str) -> (String, String) {
    let reply = call(
        app,
        reqwest::Method::POST,
        "/operators",
        &admin_key(),
        Some(json!({ "name": name, "role": role })),
        &[],
    )
    .await;
    assert_eq!(reply.status, 200, "create operator: {}", reply.text);
    let id = reply.body["operator"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let key = reply.body["key"].as_str().expect("key").to_owned();
    assert!(key.starts_with("qmo_"), "{key}");
    assert_eq!(reply.body["operator"]["role"], role);
    (id, key)
}

/// Mints a monitor token with ADMIN_KEY; answers its id and token.
pub(crate) async fn mint_monitor(app: &TestApp) -> (String, String) {
    let reply = call(
        app,
        reqwest::Method::POST,
        "/monitor-token",
        &admin_key(),
        Some(json!({ "label": "wall screen" })),
        &[],
    )
    .await;
    assert_eq!(reply.status, 200, "mint monitor token: {}", reply.text);
    let token = reply.body["token"].as_str().expect("token").to_owned();
    assert!(token.starts_with("qmm_"), "{token}");
    let id = reply.body["id"].as_str().expect("id").to_owned();
    (id, token)
}

/// Signs a console in with `key`; answers the reply and the Cookie header.
pub(crate) async fn sign_in(app: &TestApp, key: &str) -> (Reply, String) {
    let reply = call(
        app,
        reqwest::Method::POST,
        "/session",
        &Cred::None,
        Some(json!({ "key": key })),
        &[("X-QM-CSRF", "1")],
    )
    .await;
    assert_eq!(reply.status, 200, "sign in: {}", reply.text);
    let value = reply.cookie("qm_console").expect("qm_console is set");
    (reply, format!("qm_console={value}"))
}

#[tokio::test]
async fn operator_keys_carry_their_role_and_sign_the_console_in() {
    let app = spawn_app().await;
    app.create_room(room_body("access-a", 10, json!({}))).await;
    let (_, viewer) = create_operator(&app, "Vera", "viewer").await;
    let (_, operator) = create_operator(&app, "Otto", "operator").await;

    let read = call(
        &app,
        reqwest::Method::GET,
        "/rooms",
        &Cred::Bearer(viewer.clone()),
        None,
        &[],
    )
    .await;
    assert_eq!(read.status, 200, "{}", read.text);
    let change = call(
        &app,
        reqwest::Method::POST,
        "/rooms/access-a/rate",
        &Cred::Bearer(viewer.clone()),
        Some(json!({ "ratePerMinute": 5 })),
        &[],
    )
    .await;
    assert_eq!((change.status, change.code()), (403, "insufficient_role"));
    assert!(
        change.body["error"]
            .as_str()
            .unwrap_or("")
            .contains("operator"),
        "{}",
        change.text
    );
    let change = call(
        &app,
        reqwest::Method::POST,
        "/rooms/access-a/rate",
        &Cred::Bearer(operator.clone()),
        Some(json!({ "ratePerMinute": 5 })),
        &[],
    )
    .await;
    assert_eq!(change.status, 200, "{}", change.text);
    let delete = call(
        &app,
        reqwest::Method::DELETE,
        "/rooms/access-a",
        &Cred::Bearer(operator.clone()),
        None,
        &[],
    )
    .await;
    assert_eq!((delete.status, delete.code()), (403, "insufficient_role"));
    assert!(
        delete.body["error"]
            .as_str()
            .unwrap_or("")
            .contains("owner"),
        "{}",
        delete.text
    );

    // The console signs in with an operator key and says who and which role.
    let (reply, cookie) = sign_in(&app, &viewer).await;
    assert_eq!(
        reply.body,
        json!({ "ok": true, "name": "Vera", "role": "viewer", "expiresInSec": 43200 })
    );
    assert!(!cookie.contains(&viewer), "the cookie never holds the key");
    let who = call(
        &app,
        reqwest::Method::GET,
        "/session",
        &Cred::Cookie {
            cookie: cookie.clone(),
            csrf: false,
        },
        None,
        &[],
    )
    .await;
    assert_eq!(
        (who.body["name"].clone(), who.body["role"].clone()),
        (json!("Vera"), json!("viewer"))
    );
    let change = call(
        &app,
        reqwest::Method::POST,
        "/rooms/access-a/state",
        &Cred::Cookie { cookie, csrf: true },
        Some(json!({ "state": "paused" })),
        &[],
    )
    .await;
    assert_eq!((change.status, change.code()), (403, "insufficient_role"));

    // A forged operator key (right prefix, wrong signature) is a wrong credential.
    let forged = forge(&operator);
    let refused = call(
        &app,
        reqwest::Method::GET,
        "/rooms",
        &Cred::Bearer(forged),
        None,
        &[],
    )
    .await;
    assert_eq!((refused.status, refused.code()), (401, "unauthorized"));
    app.stop().await;
}

#[tokio::test]
async fn a_revoked_operator_key_and_its_console_and_tickets_are_refused_on_the_next_request() {
    let app = spawn_app().await;
    let (id, key) = create_operator(&app, "Rita", "operator").await;
    let bearer = Cred::Bearer(key.clone());
    let (_, cookie) = sign_in(&app, &key).await;
    let console = Cred::Cookie {
        cookie,
        csrf: false,
    };
    assert_eq!(
        call(&app, reqwest::Method::GET, "/rooms", &bearer, None, &[])
            .await
            .status,
        200
    );
    assert_eq!(
        call(&app, reqwest::Method::GET, "/rooms", &console, None, &[])
            .await
            .status,
        200
    );
    let ticket = call(
        &app,
        reqwest::Method::POST,
        "/sse-ticket",
        &bearer,
        None,
        &[],
    )
    .await;
    assert_eq!(ticket.status, 200, "{}", ticket.text);
    let ticket = ticket.body["ticket"].as_str().expect("ticket").to_owned();

    let listed = call(
        &app,
        reqwest::Method::GET,
        "/operators",
        &admin_key(),
        None,
        &[],
    )
    .await;
    assert!(
        listed.body["operators"]
            .as_array()
            .expect("list")
            .iter()
            .any(|operator| operator["id"] == id.as_str())
    );
    assert!(!listed.text.contains(&key), "the key is never listed");

    let revoked = call(
        &app,
        reqwest::Method::DELETE,
        &format!("/operators/{id}"),
        &admin_key(),
        None,
        &[],
    )
    .await;
    assert_eq!(revoked.status, 200, "{}", revoked.text);

    let refused = call(&app, reqwest::Method::GET, "/rooms", &bearer, None, &[]).await;
    assert_eq!((refused.status, refused.code()), (401, "unauthorized"));
    let refused = call(&app, reqwest::Method::GET, "/rooms", &console, None, &[]).await;
    assert_eq!((refused.status, refused.code()), (401, "unauthorized"));
    let who = call(&app, reqwest::Method::GET, "/session", &console, None, &[]).await;
    assert_eq!(who.status, 401);
    let stream = call(
        &app,
        reqwest::Method::GET,
        &format!("/events?ticket={ticket}"),
        &Cred::None,
        None,
        &[],
    )
    .await;
    assert_eq!(stream.status, 401);
    let again = call(
        &app,
        reqwest::Method::POST,
        "/session",
        &Cred::None,
        Some(json!({ "key": key })),
        &[("X-QM-CSRF", "1")],
    )
    .await;
    assert_eq!(again.status, 401, "a revoked key cannot sign in");
    app.stop().await;
}

#[tokio::test]
async fn a_monitor_token_reads_redacted_rooms_and_is_refused_once_revoked() {
    let app = spawn_app().await;
    let room = room_body(
        "access-m",
        10,
        json!({
            "proxyOrigin": "http://127.0.0.1:9",
            "returnOrigins": ["https://shop.example", "https://m.shop.example"],
            "tagOrigins": ["https://tags.example"],
            "urlPatterns": ["/checkout*"],
        }),
    );
    app.create_room(room).await;
    let minted = call(
        &app,
        reqwest::Method::POST,
        "/monitor-token",
        &admin_key(),
        Some(json!({ "label": "lobby" })),
        &[("Host", "admin.example:8081")],
    )
    .await;
    assert_eq!(minted.status, 200, "{}", minted.text);
    let token = minted.body["token"].as_str().expect("token").to_owned();
    assert_eq!(
        minted.body["link"],
        json!(format!("http://admin.example:8081/#monitor={token}")),
        "the token rides in the fragment"
    );
    let id = minted.body["id"].as_str().expect("id").to_owned();
    let monitor = Cred::Bearer(token.clone());

    let read = call(
        &app,
        reqwest::Method::GET,
        "/rooms/access-m",
        &monitor,
        None,
        &[],
    )
    .await;
    assert_eq!(read.status, 200, "{}", read.text);
    let room = &read.body["room"];
    assert_eq!(room["redacted"], true);
    assert_eq!(room["proxyOrigin"], Value::Null);
    for list in ["returnOrigins", "tagOrigins", "urlPatterns"] {
        assert_eq!(room[list], json!([]), "{list}");
    }
    assert!(!read.text.contains("127.0.0.1:9") && !read.text.contains("m.shop.example"));
    let listed = call(&app, reqwest::Method::GET, "/rooms", &monitor, None, &[]).await;
    assert_eq!(listed.body["rooms"][0]["redacted"], true);
    // The owner reads the real thing.
    let full = app.room("access-m").await;
    assert_eq!(full["proxyOrigin"], "http://127.0.0.1:9");
    assert!(full.get("redacted").is_none());
    // Posting the redacted read back is refused, not a wipe.
    let mut back = room.clone();
    if let Some(fields) = back.as_object_mut() {
        fields.retain(|name, _| {
            [
                "id",
                "name",
                "targetUrl",
                "ratePerMinute",
                "proxyOrigin",
                "returnOrigins",
                "tagOrigins",
                "urlPatterns",
                "redacted",
            ]
            .contains(&name.as_str())
        });
    }
    let posted = app.admin_post("/rooms", back).await;
    assert_eq!((posted.status, posted.code()), (400, "redacted_shape"));

    // The monitor token signs a console in, read-only.
    let (reply, cookie) = sign_in(&app, &token).await;
    assert_eq!(reply.body["role"], "monitor");
    let console = Cred::Cookie { cookie, csrf: true };
    let audit = call(&app, reqwest::Method::GET, "/audit", &console, None, &[]).await;
    assert_eq!((audit.status, audit.code()), (403, "insufficient_role"));

    let links = call(
        &app,
        reqwest::Method::GET,
        "/monitor-token",
        &admin_key(),
        None,
        &[],
    )
    .await;
    assert_eq!(links.status, 200, "{}", links.text);
    assert!(
        links.body["tokens"]
            .as_array()
            .expect("tokens")
            .iter()
            .any(|link| link["id"] == id.as_str())
    );
    assert!(
        !links.text.contains(&token),
        "a listed link never shows its token"
    );

    let revoked = call(
        &app,
        reqwest::Method::DELETE,
        &format!("/monitor-token?id={id}"),
        &admin_key(),
        None,
        &[],
    )
    .await;
    assert_eq!(revoked.status, 200, "{}", revoked.text);
    let refused = call(&app, reqwest::Method::GET, "/rooms", &monitor, None, &[]).await;
    assert_eq!((refused.status, refused.code()), (401, "unauthorized"));
    let refused = call(&app, reqwest::Method::GET, "/rooms", &console, None, &[]).await;
    assert_eq!(refused.status, 401);

    // ?all=1 revokes every live link.
    let (_, first) = mint_monitor(&app).await;
    let (_, second) = mint_monitor(&app).await;
    let all = call(
        &app,
        reqwest::Method::DELETE,
        "/monitor-token?all=1",
        &admin_key(),
        None,
        &[],
    )
    .await;
    assert_eq!(
        (all.status, all.body["revoked"].clone()),
        (200, json!(2)),
        "{}",
        all.text
    );
    for token in [first, second] {
        let refused = call(
            &app,
            reqwest::Method::GET,
            "/rooms",
            &Cred::Bearer(token),
            None,
            &[],
        )
        .await;
        assert_eq!(refused.status, 401);
    }
    app.stop().await;
}

/// The key with one character of its signature changed.
pub(crate) fn forge(key: &str) -> String {
    let mut chars: Vec<char> = key.chars().collect();
    let at = chars.len() - 5;
    chars[at] = if chars[at] == 'A' { 'B' } else { 'A' };
    chars.into_iter().collect()
}

fn from(address: &str) -> [(&str, &str); 1] {
    [("X-Forwarded-For", address)]
}

#[tokio::test]
async fn wrong_credentials_lock_the_address_out_before_any_credential_is_read() {
    let app = spawn_app_with(&[
        ("ADMIN_AUTH_FAIL_PER_MIN", "3"),
        ("ADMIN_AUTH_LOCKOUT_SEC", "2"),
        ("TRUSTED_PROXIES", "127.0.0.1"),
    ])
    .await;
    let (_, monitor) = mint_monitor(&app).await;
    let wrong = Cred::Bearer("wrong-key-0123456789".to_owned());
    let (a, b, c) = ("203.0.113.7", "203.0.113.8", "203.0.113.9");
    for _ in 0..3 {
        let refused = call(&app, reqwest::Method::GET, "/rooms", &wrong, None, &from(a)).await;
        assert_eq!(refused.status, 401);
    }
    // The right key from the locked address is refused: nothing it sends is read.
    let locked = call(
        &app,
        reqwest::Method::GET,
        "/rooms",
        &admin_key(),
        None,
        &from(a),
    )
    .await;
    assert_eq!(
        (locked.status, locked.code()),
        (429, "too_many_auth_failures")
    );
    let retry: u64 = locked
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .expect("seconds");
    assert!((1..=2).contains(&retry), "{retry}");
    let in_query = call(
        &app,
        reqwest::Method::GET,
        "/rooms?key=x",
        &Cred::None,
        None,
        &from(a),
    )
    .await;
    assert_eq!(
        in_query.status, 429,
        "refused before the URL's credential is judged"
    );
    let monitor_locked = call(
        &app,
        reqwest::Method::GET,
        "/rooms",
        &Cred::Bearer(monitor.clone()),
        None,
        &from(a),
    )
    .await;
    assert_eq!(monitor_locked.status, 429);
    let sign_in_locked = call(
        &app,
        reqwest::Method::POST,
        "/session",
        &Cred::None,
        Some(json!({ "key": TEST_ADMIN_KEY })),
        &[("X-QM-CSRF", "1"), ("X-Forwarded-For", a)],
    )
    .await;
    assert_eq!(sign_in_locked.status, 429);

    // Another address is unaffected, and its right key resets nothing for the first.
    let other = call(
        &app,
        reqwest::Method::GET,
        "/rooms",
        &admin_key(),
        None,
        &from(b),
    )
    .await;
    assert_eq!(other.status, 200);
    assert_eq!(
        call(
            &app,
            reqwest::Method::GET,
            "/rooms",
            &admin_key(),
            None,
            &from(a)
        )
        .await
        .status,
        429
    );

    // Every kind of wrong credential counts: sign-in, event ticket, monitor token.
    let sign_in = call(
        &app,
        reqwest::Method::POST,
        "/session",
        &Cred::None,
        Some(json!({ "key": "typed-wrong" })),
        &[("X-QM-CSRF", "1"), ("X-Forwarded-For", c)],
    )
    .await;
    assert_eq!(sign_in.status, 401);
    let ticket = call(
        &app,
        reqwest::Method::GET,
        "/events?ticket=forged",
        &Cred::None,
        None,
        &from(c),
    )
    .await;
    assert_eq!(ticket.status, 401);
    let forged_monitor = forge(&monitor);
    let monitor_wrong = call(
        &app,
        reqwest::Method::GET,
        "/rooms",
        &Cred::Bearer(forged_monitor),
        None,
        &from(c),
    )
    .await;
    assert_eq!(monitor_wrong.status, 401);
    let c_locked = call(
        &app,
        reqwest::Method::GET,
        "/rooms",
        &Cred::Bearer(monitor.clone()),
        None,
        &from(c),
    )
    .await;
    assert_eq!(c_locked.status, 429);
    // Presenting nothing is not a wrong credential.
    for _ in 0..5 {
        assert_eq!(
            call(
                &app,
                reqwest::Method::GET,
                "/rooms",
                &Cred::None,
                None,
                &from(b)
            )
            .await
            .status,
            401
        );
    }
    assert_eq!(
        call(
            &app,
            reqwest::Method::GET,
            "/rooms",
            &admin_key(),
            None,
            &from(b)
        )
        .await
        .status,
        200
    );

    // The lock lifts once the window has passed.
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    let lifted = call(
        &app,
        reqwest::Method::GET,
        "/rooms",
        &admin_key(),
        None,
        &from(a),
    )
    .await;
    assert_eq!(lifted.status, 200, "{}", lifted.text);
    let health = call(
        &app,
        reqwest::Method::GET,
        "/health",
        &admin_key(),
        None,
        &from(b),
    )
    .await;
    assert_eq!(health.body["config"]["ADMIN_AUTH_FAIL_PER_MIN"], json!(3));
    app.stop().await;
}

#[tokio::test]
async fn an_owner_shuts_the_app_down_cleanly() {
    let app = spawn_app().await;
    let (_, operator) = create_operator(&app, "Olga", "operator").await;
    let refused = call(
        &app,
        reqwest::Method::POST,
        "/shutdown",
        &Cred::Bearer(operator),
        None,
        &[],
    )
    .await;
    assert_eq!((refused.status, refused.code()), (403, "insufficient_role"));
    let reply = call(
        &app,
        reqwest::Method::POST,
        "/shutdown",
        &admin_key(),
        None,
        &[],
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(
        (reply.body["ok"].clone(), reply.body["stopping"].clone()),
        (json!(true), json!(true))
    );
    assert!(reply.body["uptimeSec"].is_u64(), "{}", reply.text);
    // Both edges stop (the admin stopped on its own, so `qm all` stops the rest).
    let mut stopped = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let admin = app.http.get(format!("{}/healthz", app.admin)).send().await;
        let gateway = app
            .http
            .get(format!("{}/healthz", app.gateway))
            .send()
            .await;
        if admin.is_err() && gateway.is_err() {
            stopped = true;
            break;
        }
    }
    assert!(stopped, "the admin and the gateway stopped within 10 s");
}
