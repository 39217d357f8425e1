//! Install checks: `GET /api/verify` and `GET /api/verify.gif`. Every check id passes on a good
//! install and fails when its fact is wrong; the gif answers the verdict as a status code; both
//! spend the door check's CHECK_LIMIT_PER_MIN budget; a connector's check-in is listed by the
//! admin afterwards.

use qm_tests::{Reply, TestApp, room_body, spawn_app, spawn_app_with};
use serde_json::{Value, json};

const PUBLIC_KEY: &str = "public-api-key-0123";
const PAGE: &str = "https://shop.example/checkout/pay";

/// A room scoped to `/checkout*` whose tag also runs on tags.example.
async fn good_room(app: &TestApp, id: &str) {
    app.create_room(room_body(
        id,
        60,
        json!({"urlPatterns": ["/checkout*", "!/checkout/help"], "tagOrigins": ["https://tags.example"]}),
    ))
    .await;
}

async fn verify_at(
    app: &TestApp,
    path: &str,
    query: &[(&str, &str)],
    bearer: Option<&str>,
) -> Reply {
    let mut request = app.http.get(format!("{}{path}", app.gateway)).query(query);
    if let Some(key) = bearer {
        request = request.bearer_auth(key);
    }
    app.send(request).await
}

async fn verify(app: &TestApp, query: &[(&str, &str)], bearer: Option<&str>) -> Reply {
    verify_at(app, "/api/verify", query, bearer).await
}

/// The check `id` of a report.
fn check<'a>(reply: &'a Reply, id: &str) -> &'a Value {
    reply.body["checks"]
        .as_array()
        .and_then(|checks| checks.iter().find(|check| check["id"] == id))
        .unwrap_or_else(|| panic!("no check {id} in {}", reply.text))
}

fn status<'a>(reply: &'a Reply, id: &str) -> &'a str {
    check(reply, id)["status"].as_str().unwrap_or("")
}

#[tokio::test]
async fn a_good_install_passes_every_check() {
    let app = spawn_app().await;
    good_room(&app, "good").await;
    let reply = verify(
        &app,
        &[
            ("roomId", "good"),
            ("url", PAGE),
            ("connector", "node"),
            ("version", "1.0.0"),
        ],
        Some(PUBLIC_KEY),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.header("cache-control"), Some("no-store"));
    assert_eq!(reply.body["ok"], true, "{}", reply.text);
    assert_eq!(reply.body["privileged"], true);
    assert_eq!(
        reply.body["origin"], "https://shop.example",
        "the origin of url="
    );
    for id in [
        "key_in_query",
        "api_key",
        "room_exists",
        "room_live",
        "origin_allowed",
        "url_in_scope",
        "target_in_scope",
        "connector_version",
    ] {
        assert_eq!(status(&reply, id), "pass", "{id}: {}", reply.text);
    }
    for check in reply.body["checks"].as_array().into_iter().flatten() {
        assert!(check["title"].is_string(), "{check}");
    }
}

#[tokio::test]
async fn each_check_fails_when_its_fact_is_wrong() {
    let app = spawn_app().await;
    good_room(&app, "shop").await;

    let unknown = verify(
        &app,
        &[("roomId", "nosuchroom"), ("connector", "nosuchconnector")],
        None,
    )
    .await;
    assert_eq!(unknown.status, 200, "{}", unknown.text);
    assert_eq!(unknown.body["ok"], false);
    assert_eq!(status(&unknown, "room_exists"), "fail");
    assert!(check(&unknown, "room_exists")["fix"].is_string());
    assert_eq!(
        status(&unknown, "connector_version"),
        "fail",
        "a connector the registry does not ship"
    );
    let old = verify(
        &app,
        &[
            ("roomId", "shop"),
            ("connector", "node"),
            // The lowest semantic version there is: older than any release.
            ("version", "0.0.0-0"),
        ],
        None,
    )
    .await;
    assert_eq!(status(&old, "connector_version"), "warn", "{}", old.text);
    let fix = check(&old, "connector_version")["fix"]
        .as_str()
        .unwrap_or("");
    let registry = app
        .get(&format!("{}/api/connectors?roomId=shop", app.gateway))
        .await;
    let upgrade = registry.body["connectors"]
        .as_array()
        .and_then(|entries| entries.iter().find(|entry| entry["name"] == "node"))
        .and_then(|node| node["upgrade"].as_str())
        .unwrap_or("(no node in the registry)");
    assert_eq!(
        fix, upgrade,
        "the registry's upgrade step, with this server filled in"
    );

    let in_query = verify(&app, &[("roomId", "shop"), ("key", PUBLIC_KEY)], None).await;
    assert_eq!(
        in_query.status, 200,
        "a report, not a refusal: {}",
        in_query.text
    );
    assert_eq!(status(&in_query, "key_in_query"), "fail");
    assert_eq!(
        in_query.body["privileged"], false,
        "a key in the URL is never accepted"
    );

    let wrong = verify(&app, &[("roomId", "shop")], Some("not-the-key")).await;
    assert_eq!(wrong.status, 200, "{}", wrong.text);
    assert_eq!(status(&wrong, "api_key"), "fail");
    assert_eq!(wrong.body["privileged"], false);

    let foreign = [("roomId", "shop"), ("origin", "https://blog.example")];
    let privileged = verify(&app, &foreign, Some(PUBLIC_KEY)).await;
    assert_eq!(status(&privileged, "origin_allowed"), "fail");
    let fix = check(&privileged, "origin_allowed")["fix"]
        .as_str()
        .unwrap_or("");
    assert!(
        fix.contains(r#"{"id":"shop","tagOrigins":["https://shop.example","https://tags.example","https://blog.example"]}"#),
        "{fix}"
    );
    let anonymous = verify(&app, &foreign, None).await;
    let fix = check(&anonymous, "origin_allowed")["fix"]
        .as_str()
        .unwrap_or("");
    assert!(
        !fix.contains("tags.example"),
        "an anonymous report does not list the room's origins: {fix}"
    );
    // The exact body, posted as the fix says, makes the check pass.
    let body: Value = serde_json::from_str(
        r#"{"id":"shop","tagOrigins":["https://shop.example","https://tags.example","https://blog.example"]}"#,
    )
    .unwrap_or(Value::Null);
    assert_eq!(app.admin_post("/rooms", body).await.status, 200);
    assert_eq!(
        status(&verify(&app, &foreign, None).await, "origin_allowed"),
        "pass"
    );

    let excluded = verify(
        &app,
        &[
            ("roomId", "shop"),
            ("url", "https://shop.example/checkout/help"),
        ],
        None,
    )
    .await;
    assert_eq!(status(&excluded, "url_in_scope"), "fail");
    let detail = check(&excluded, "url_in_scope")["detail"]
        .as_str()
        .unwrap_or("");
    assert!(
        detail.contains("!/checkout/help"),
        "names the rule: {detail}"
    );

    app.create_room(room_body(
        "elsewhere",
        60,
        json!({"urlPatterns": ["/sale*"]}),
    ))
    .await;
    let target = verify(&app, &[("roomId", "elsewhere")], None).await;
    assert_eq!(
        status(&target, "target_in_scope"),
        "fail",
        "{}",
        target.text
    );
    assert!(
        check(&target, "target_in_scope")["fix"]
            .as_str()
            .unwrap_or("")
            .contains(r#""urlPatterns":["/sale*","/checkout"]"#)
    );

    assert_eq!(
        app.admin_post("/rooms/shop/state", json!({"state": "paused"}))
            .await
            .status,
        200
    );
    let paused = verify(&app, &[("roomId", "shop")], None).await;
    assert_eq!(status(&paused, "room_live"), "fail");
    assert_eq!(paused.body["ok"], false);
    assert_eq!(
        app.admin_post("/rooms/shop/state", json!({"state": "bypass"}))
            .await
            .status,
        200
    );
    assert_eq!(
        status(
            &verify(&app, &[("roomId", "shop")], None).await,
            "room_live"
        ),
        "warn"
    );
}

#[tokio::test]
async fn the_origin_falls_back_to_the_origin_header() {
    let app = spawn_app().await;
    good_room(&app, "hdr").await;
    let request = app
        .http
        .get(format!("{}/api/verify", app.gateway))
        .query(&[("roomId", "hdr")])
        .header(reqwest::header::ORIGIN, "https://tags.example");
    let reply = app.send(request).await;
    assert_eq!(
        reply.body["origin"], "https://tags.example",
        "{}",
        reply.text
    );
    assert_eq!(status(&reply, "origin_allowed"), "pass");
    let none = verify(&app, &[("roomId", "hdr")], None).await;
    assert_eq!(
        status(&none, "origin_allowed"),
        "warn",
        "nothing named an origin"
    );
}

#[tokio::test]
async fn the_gif_answers_the_verdict_as_a_status_code() {
    let app = spawn_app().await;
    good_room(&app, "gtm").await;
    let ok = app
        .http
        .get(format!("{}/api/verify.gif", app.gateway))
        .query(&[
            ("roomId", "gtm"),
            ("origin", "https://tags.example"),
            ("connector", "gtm"),
        ])
        .send()
        .await
        .expect("request reaches the server");
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.headers()["content-type"], "image/gif");
    assert_eq!(ok.headers()["cache-control"], "no-store");
    let bytes = ok.bytes().await.unwrap_or_default();
    assert!(bytes.starts_with(b"GIF89a"), "{bytes:?}");

    let failed = verify_at(
        &app,
        "/api/verify.gif",
        &[
            ("roomId", "gtm"),
            ("origin", "https://evil.example"),
            ("key", "x"),
        ],
        None,
    )
    .await;
    assert_eq!(failed.status, 424, "{}", failed.text);
    assert_eq!(failed.header("cache-control"), Some("no-store"));
    assert_eq!(
        failed.header("x-qm-verify"),
        Some("key_in_query,origin_allowed")
    );
    assert_eq!(failed.body["ok"], false);
    assert_eq!(failed.body["error"], "verify_failed");
    assert!(failed.body["checks"].is_array());
}

#[tokio::test]
async fn verify_spends_the_door_checks_budget() {
    let app = spawn_app_with(&[("CHECK_LIMIT_PER_MIN", "2")]).await;
    good_room(&app, "budget").await;
    for _ in 0..2 {
        let check = app
            .get(&format!("{}/api/check?roomId=budget", app.gateway))
            .await;
        assert_eq!(check.status, 200, "{}", check.text);
    }
    for path in ["/api/verify", "/api/verify.gif"] {
        let refused = verify_at(&app, path, &[("roomId", "budget")], None).await;
        assert_eq!(refused.status, 429, "{path}: {}", refused.text);
        assert_eq!(refused.code(), "rate_limited");
        assert!(refused.header("retry-after").is_some());
    }
}

#[tokio::test]
async fn bad_input_is_refused_and_routes_are_aliased() {
    let app = spawn_app().await;
    good_room(&app, "input").await;
    for query in [
        &[][..],
        &[("roomId", "")][..],
        &[("roomId", "Not A Room!")][..],
    ] {
        for path in ["/api/verify", "/api/verify.gif"] {
            let reply = verify_at(&app, path, query, None).await;
            assert_eq!(reply.status, 400, "{path} {query:?}: {}", reply.text);
            assert_eq!(reply.code(), "invalid_room_id");
        }
    }
    let connector = verify(
        &app,
        &[("roomId", "input"), ("connector", "<script>")],
        None,
    )
    .await;
    assert_eq!(connector.status, 400, "{}", connector.text);
    assert_eq!(connector.code(), "invalid_connector");
    let url = verify(&app, &[("roomId", "input"), ("url", "/relative")], None).await;
    assert_eq!(url.code(), "invalid_url");

    let posted = app
        .send(
            app.http
                .post(format!("{}/api/verify?roomId=input", app.gateway)),
        )
        .await;
    assert_eq!(posted.status, 405);
    assert!(
        posted.header("allow").unwrap_or("").contains("GET"),
        "{:?}",
        posted.headers
    );

    let query = [("roomId", "input"), ("origin", "https://tags.example")];
    let v1 = verify_at(&app, "/api/v1/verify", &query, None).await;
    let plain = verify(&app, &query, None).await;
    assert_eq!(v1.status, 200, "{}", v1.text);
    assert_eq!(v1.body, plain.body);
    let gif = verify_at(&app, "/api/v1/verify.gif", &query, None).await;
    assert_eq!(gif.status, 200, "{}", gif.text);
}

#[tokio::test]
async fn a_connector_that_checked_in_is_listed_by_the_admin() {
    let app = spawn_app().await;
    good_room(&app, "listed").await;
    let node = [
        ("roomId", "listed"),
        ("url", PAGE),
        ("connector", "node"),
        ("version", "1.2.0"),
    ];
    for _ in 0..2 {
        assert_eq!(verify(&app, &node, None).await.status, 200);
    }
    let gif = [
        ("roomId", "listed"),
        ("origin", "https://tags.example"),
        ("connector", "gtm"),
    ];
    assert_eq!(
        verify_at(&app, "/api/verify.gif", &gif, None).await.status,
        200
    );
    // Without a connector nothing is recorded; an unknown room records nothing either.
    assert_eq!(
        verify(&app, &[("roomId", "listed")], None).await.status,
        200
    );

    let listed = app
        .admin_call(reqwest::Method::GET, "/rooms/listed/connectors", None)
        .await;
    assert_eq!(listed.status, 200, "{}", listed.text);
    let connectors = listed.body["connectors"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(connectors.len(), 2, "{}", listed.text);
    assert_eq!(connectors[0]["connector"], "gtm", "most recent first");
    assert_eq!(connectors[0]["origin"], "https://tags.example");
    assert_eq!(connectors[1]["connector"], "node");
    assert_eq!(connectors[1]["version"], "1.2.0");
    assert_eq!(connectors[1]["origin"], "https://shop.example");
    assert_eq!(connectors[1]["count"], 2);
    assert!(connectors[1]["lastSeen"].as_i64().unwrap_or(0) > 0);

    let missing = app
        .admin_call(reqwest::Method::GET, "/rooms/nosuchroom/connectors", None)
        .await;
    assert_eq!(missing.status, 404, "{}", missing.text);
    assert_eq!(missing.code(), "room_not_found");
    let anonymous = app
        .get(&format!("{}/api/admin/rooms/listed/connectors", app.admin))
        .await;
    assert_eq!(anonymous.status, 401);
}
