//! URL targeting: the page a door check names (`url=`, else the Referer, else unknown), the
//! `targeting` verdict on scoped rooms only, `out_of_scope` minting nothing, `GET
//! /api/targeting` with its ETag, and the admin targeting page's counters and dry run.

use qm_tests::{Reply, TestApp, room_body, spawn_app, spawn_app_with};
use serde_json::{Value, json};

const CHECKOUT: &str = "https://shop.example/checkout/pay";
const HELP: &str = "https://shop.example/checkout/help";
const ABOUT: &str = "https://shop.example/about";

async fn scoped_room(app: &TestApp, id: &str, patterns: Value) {
    app.create_room(room_body(id, 0, json!({ "urlPatterns": patterns })))
        .await;
}

/// GET `/api/check` with these query pairs and, optionally, a Referer.
async fn check(app: &TestApp, query: &[(&str, &str)], referer: Option<&str>) -> Reply {
    let mut request = app
        .http
        .get(format!("{}/api/check", app.gateway))
        .query(query);
    if let Some(referer) = referer {
        request = request.header(reqwest::header::REFERER, referer);
    }
    app.send(request).await
}

/// The check's scope and deciding rule.
fn verdict(reply: &Reply) -> (Value, Value) {
    (
        reply.body["targeting"]["scope"].clone(),
        reply.body["targeting"]["rule"].clone(),
    )
}

/// What a check could change in a room's line.
fn line(room: &Value) -> Value {
    json!([
        room["seq"],
        room["waiting"],
        room["nextTicket"],
        room["activePasses"],
        room["passedTotal"],
        room["preQueue"]
    ])
}

async fn admin_targeting(app: &TestApp, prefix: &str, room: &str, query: &str) -> Reply {
    let request = app
        .http
        .get(format!(
            "{}{prefix}/rooms/{room}/targeting{query}",
            app.admin
        ))
        .bearer_auth(qm_tests::TEST_ADMIN_KEY);
    app.send(request).await
}

#[tokio::test]
async fn an_out_of_scope_page_passes_and_mints_nothing() {
    let app = spawn_app().await;
    scoped_room(&app, "scoped", json!(["/checkout/*"])).await;
    let (joined, cookies) = app.join_as_new_visitor("scoped").await;
    let token = joined.body["token"].as_str().expect("token").to_owned();
    let before = line(&app.room("scoped").await);

    for token in [None, Some(token.as_str())] {
        let mut request = app
            .http
            .get(format!("{}/api/check", app.gateway))
            .query(&[("roomId", "scoped"), ("url", ABOUT)])
            .header(reqwest::header::COOKIE, &cookies);
        if let Some(token) = token {
            request = request.query(&[("token", token)]);
        }
        let reply = app.send(request).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        assert_eq!(
            reply.body,
            json!({
                "action": "pass",
                "reason": "out_of_scope",
                "targeting": {"rev": 1, "rules": 1, "scope": "out", "rule": null, "action": "pass"},
            }),
            "no waitingRoomUrl, no sess, no place"
        );
        assert!(reply.cookie("qm_scoped").is_none() && reply.cookie("qms_scoped").is_none());
    }
    assert_eq!(
        line(&app.room("scoped").await),
        before,
        "the room's line is unchanged"
    );

    let in_scope = check(&app, &[("roomId", "scoped"), ("url", CHECKOUT)], None).await;
    assert_eq!(in_scope.body["action"], "queue", "{}", in_scope.text);
    assert_eq!(in_scope.body["reason"], "no_token");
    assert!(in_scope.body["waitingRoomUrl"].is_string());
    assert_eq!(
        in_scope.body["targeting"],
        json!({"rev": 1, "rules": 1, "scope": "in", "rule": "/checkout/*", "action": "queue"})
    );
}

#[tokio::test]
async fn a_check_without_a_page_is_unknown_and_queued() {
    let app = spawn_app().await;
    scoped_room(&app, "blind", json!(["/checkout/*"])).await;
    for referer in [None, Some("not a url"), Some("android-app://com.shop/")] {
        let reply = check(&app, &[("roomId", "blind")], referer).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        assert_eq!(reply.body["action"], "queue", "{referer:?}: {}", reply.text);
        assert_eq!(reply.body["reason"], "no_token");
        assert_eq!(
            reply.body["targeting"],
            json!({"rev": 1, "rules": 1, "scope": "unknown", "rule": null, "action": "queue"}),
            "{referer:?}: never let through unprotected"
        );
    }
}

#[tokio::test]
async fn the_referer_names_the_page_when_url_is_absent_and_url_wins_when_both_are_sent() {
    let app = spawn_app().await;
    scoped_room(&app, "ref", json!(["/checkout/*"])).await;
    let by_referer = check(&app, &[("roomId", "ref")], Some(ABOUT)).await;
    assert_eq!(
        by_referer.body["reason"], "out_of_scope",
        "{}",
        by_referer.text
    );
    let by_referer = check(&app, &[("roomId", "ref")], Some(CHECKOUT)).await;
    assert_eq!(verdict(&by_referer), (json!("in"), json!("/checkout/*")));
    let both = check(&app, &[("roomId", "ref"), ("url", CHECKOUT)], Some(ABOUT)).await;
    assert_eq!(both.body["action"], "queue", "url= decides: {}", both.text);
    assert_eq!(verdict(&both).0, "in");
}

#[tokio::test]
async fn an_exception_wins_whatever_the_order() {
    let app = spawn_app().await;
    scoped_room(&app, "first", json!(["!/checkout/help", "/checkout/*"])).await;
    scoped_room(&app, "last", json!(["/checkout/*", "!/checkout/help"])).await;
    for room in ["first", "last"] {
        let help = check(&app, &[("roomId", room), ("url", HELP)], None).await;
        assert_eq!(help.body["action"], "pass", "{room}: {}", help.text);
        assert_eq!(help.body["reason"], "out_of_scope");
        assert_eq!(verdict(&help), (json!("out"), json!("!/checkout/help")));
        let pay = check(&app, &[("roomId", room), ("url", CHECKOUT)], None).await;
        assert_eq!(pay.body["action"], "queue", "{room}: {}", pay.text);
        assert_eq!(verdict(&pay), (json!("in"), json!("/checkout/*")));
    }
}

#[tokio::test]
async fn a_pinned_rule_matches_its_own_origin_only() {
    let app = spawn_app().await;
    scoped_room(&app, "pinned", json!(["https://shop.example/checkout/*"])).await;
    let own = check(&app, &[("roomId", "pinned"), ("url", CHECKOUT)], None).await;
    assert_eq!(own.body["action"], "queue", "{}", own.text);
    assert_eq!(
        verdict(&own),
        (json!("in"), json!("https://shop.example/checkout/*"))
    );
    for other in [
        "https://evil.example/checkout/pay",
        "http://shop.example/checkout/pay",
        "https://shop.example:8443/checkout/pay",
    ] {
        let reply = check(&app, &[("roomId", "pinned"), ("url", other)], None).await;
        assert_eq!(
            reply.body["reason"], "out_of_scope",
            "{other}: {}",
            reply.text
        );
    }
}

#[tokio::test]
async fn an_unscoped_room_answers_exactly_as_before() {
    let app = spawn_app().await;
    app.create_room(room_body("plain", 0, json!({}))).await;
    let bare = check(&app, &[("roomId", "plain")], None).await;
    assert_eq!(bare.status, 200, "{}", bare.text);
    assert!(bare.body.get("targeting").is_none(), "{}", bare.text);
    for (query, referer) in [
        (vec![("roomId", "plain"), ("url", ABOUT)], None),
        (vec![("roomId", "plain"), ("targeting", "1")], Some(ABOUT)),
        (
            vec![("roomId", "plain"), ("url", CHECKOUT), ("targeting", "1")],
            None,
        ),
    ] {
        let reply = check(&app, &query, referer).await;
        assert_eq!(reply.body, bare.body, "{query:?}: {}", reply.text);
    }
}

#[tokio::test]
async fn targeting_1_lists_the_rules() {
    let app = spawn_app().await;
    scoped_room(&app, "listed", json!(["/checkout/*", "!/checkout/help"])).await;
    let reply = check(
        &app,
        &[("roomId", "listed"), ("url", HELP), ("targeting", "1")],
        None,
    )
    .await;
    assert_eq!(
        reply.body["targeting"],
        json!({
            "rev": 1, "rules": 2, "scope": "out", "rule": "!/checkout/help", "action": "pass",
            "patterns": [
                {"pattern": "/checkout/*", "action": "queue"},
                {"pattern": "!/checkout/help", "action": "pass"},
            ],
        }),
        "{}",
        reply.text
    );
    let unasked = check(&app, &[("roomId", "listed"), ("url", HELP)], None).await;
    assert!(unasked.body["targeting"].get("patterns").is_none());
}

#[tokio::test]
async fn a_malformed_url_is_refused_with_invalid_url() {
    let app = spawn_app().await;
    scoped_room(&app, "strict", json!(["/checkout/*"])).await;
    app.create_room(room_body("loose", 0, json!({}))).await;
    let long = format!("https://shop.example/{}", "a".repeat(5000));
    for bad in [
        "/checkout/pay",
        "shop.example/checkout",
        "ftp://shop.example/checkout/pay",
        "javascript:alert(1)",
        "https://",
        long.as_str(),
    ] {
        for room in ["strict", "loose"] {
            let reply = check(&app, &[("roomId", room), ("url", bad)], None).await;
            assert_eq!(
                (reply.status, reply.code()),
                (400, "invalid_url"),
                "{room} {bad:.40}: {}",
                reply.text
            );
            assert!(reply.body["error"].is_string());
        }
        let dry_run = admin_targeting(
            &app,
            "/api/admin",
            "strict",
            &format!("?url={}", urlencode(bad)),
        )
        .await;
        assert_eq!(
            (dry_run.status, dry_run.code()),
            (400, "invalid_url"),
            "dry run {bad:.40}: {}",
            dry_run.text
        );
    }
}

fn urlencode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

#[tokio::test]
async fn the_targeting_read_has_a_strong_etag_and_answers_304_until_the_rules_change() {
    let app = spawn_app().await;
    scoped_room(&app, "polled", json!(["/checkout/*"])).await;
    let url = format!("{}/api/targeting?roomId=polled", app.gateway);
    let first = app.get(&url).await;
    assert_eq!(first.status, 200, "{}", first.text);
    assert_eq!(first.header("cache-control"), Some("no-cache"));
    let etag = first.header("etag").expect("ETag").to_owned();
    assert!(
        etag.starts_with('"') && !etag.starts_with("W/"),
        "strong: {etag}"
    );
    assert_eq!(first.body["roomId"], "polled");
    assert_eq!(first.body["rev"], 1);
    assert_eq!(first.body["scoped"], true);
    assert!(first.body["updatedAt"].as_i64().unwrap_or(0) > 0);
    assert_eq!(
        first.body["patterns"],
        json!([{"pattern": "/checkout/*", "action": "queue"}])
    );
    let v1 = app
        .get(&format!("{}/api/v1/targeting?roomId=polled", app.gateway))
        .await;
    assert_eq!(
        (v1.status, &v1.text, v1.header("etag")),
        (200, &first.text, Some(etag.as_str()))
    );

    let revalidate = |tag: String| {
        app.send(
            app.http
                .get(&url)
                .header(reqwest::header::IF_NONE_MATCH, tag),
        )
    };
    let unchanged = revalidate(etag.clone()).await;
    assert_eq!(unchanged.status, 304);
    assert!(unchanged.text.is_empty(), "a 304 has no body");
    assert_eq!(unchanged.header("etag"), Some(etag.as_str()));

    // Another field changing is not a rule change.
    app.admin_post("/rooms", json!({"id": "polled", "ratePerMinute": 5}))
        .await;
    assert_eq!(revalidate(etag.clone()).await.status, 304);

    let updated = app
        .admin_post(
            "/rooms",
            json!({"id": "polled", "urlPatterns": ["/checkout/*", "!/checkout/help"]}),
        )
        .await;
    assert_eq!(updated.status, 200, "{}", updated.text);
    let changed = revalidate(etag.clone()).await;
    assert_eq!(changed.status, 200, "{}", changed.text);
    assert_eq!(changed.body["rev"], 2);
    assert_eq!(changed.body["patterns"][1]["action"], "pass");
    let new_etag = changed.header("etag").expect("ETag").to_owned();
    assert_ne!(new_etag, etag);
    assert!(changed.body["updatedAt"].as_i64() >= first.body["updatedAt"].as_i64());
    assert_eq!(revalidate(new_etag).await.status, 304);
}

#[tokio::test]
async fn the_targeting_read_refuses_bad_rooms_and_wrong_verbs() {
    let app = spawn_app().await;
    app.create_room(room_body("open", 0, json!({}))).await;
    let unscoped = app
        .get(&format!("{}/api/targeting?roomId=open", app.gateway))
        .await;
    assert_eq!(unscoped.status, 200, "{}", unscoped.text);
    assert_eq!(
        (
            &unscoped.body["rev"],
            &unscoped.body["scoped"],
            &unscoped.body["patterns"]
        ),
        (&json!(0), &json!(false), &json!([]))
    );
    for query in ["", "?roomId=", "?roomId=bad%20id"] {
        let reply = app
            .get(&format!("{}/api/targeting{query}", app.gateway))
            .await;
        assert_eq!(
            (reply.status, reply.code()),
            (400, "invalid_room_id"),
            "{query}"
        );
    }
    let missing = app
        .get(&format!("{}/api/v1/targeting?roomId=ghost", app.gateway))
        .await;
    assert_eq!((missing.status, missing.code()), (404, "room_not_found"));
    for prefix in ["/api", "/api/v1"] {
        let reply = app
            .send(
                app.http
                    .post(format!("{}{prefix}/targeting?roomId=open", app.gateway)),
            )
            .await;
        assert_eq!(
            (reply.status, reply.code()),
            (405, "method_not_allowed"),
            "{prefix}"
        );
        let allow = reply.header("allow").unwrap_or("");
        assert!(allow.contains("GET"), "{prefix} Allow: {allow}");
    }
}

#[tokio::test]
async fn the_admin_counters_move_with_checks_and_the_dry_run_leaves_them_alone() {
    let app = spawn_app().await;
    scoped_room(&app, "counted", json!(["/checkout/*", "!/checkout/help"])).await;
    let fresh = admin_targeting(&app, "/api/admin", "counted", "").await;
    assert_eq!(fresh.status, 200, "{}", fresh.text);
    assert_eq!(
        fresh.body["rules"],
        json!([
            {"pattern": "/checkout/*", "action": "queue", "matchCount": 0, "lastMatchedAt": null},
            {"pattern": "!/checkout/help", "action": "pass", "matchCount": 0, "lastMatchedAt": null},
        ])
    );
    assert_eq!(
        (&fresh.body["unmatchedChecks"], &fresh.body["noUrlChecks"]),
        (&json!(0), &json!(0))
    );
    assert!(fresh.body.get("dryRun").is_none());

    for page in [
        Some(CHECKOUT),
        Some(CHECKOUT),
        Some(HELP),
        Some(ABOUT),
        None,
    ] {
        let mut query = vec![("roomId", "counted")];
        if let Some(page) = page {
            query.push(("url", page));
        }
        assert_eq!(check(&app, &query, None).await.status, 200);
    }
    let counted = admin_targeting(&app, "/api/admin", "counted", "").await;
    let counts = |reply: &Reply| {
        json!([
            reply.body["rules"][0]["matchCount"],
            reply.body["rules"][1]["matchCount"],
            reply.body["unmatchedChecks"],
            reply.body["noUrlChecks"],
        ])
    };
    assert_eq!(counts(&counted), json!([2, 1, 1, 1]), "{}", counted.text);
    assert!(
        counted.body["rules"][0]["lastMatchedAt"]
            .as_i64()
            .unwrap_or(0)
            > 0
    );
    assert_eq!(counted.body["rev"], 1);
    assert_eq!(counted.body["scoped"], true);

    for prefix in ["/api/admin", "/api/v1/admin"] {
        let dry_run = admin_targeting(
            &app,
            prefix,
            "counted",
            &format!("?url={}", urlencode(HELP)),
        )
        .await;
        assert_eq!(dry_run.status, 200, "{}", dry_run.text);
        assert_eq!(
            dry_run.body["dryRun"],
            json!({"url": HELP, "scope": "out", "rule": "!/checkout/help", "action": "pass"})
        );
        assert_eq!(
            counts(&dry_run),
            json!([2, 1, 1, 1]),
            "the dry run counts nothing"
        );
    }
    let dry_in = admin_targeting(
        &app,
        "/api/admin",
        "counted",
        &format!("?url={}", urlencode(CHECKOUT)),
    )
    .await;
    assert_eq!(
        dry_in.body["dryRun"],
        json!({"url": CHECKOUT, "scope": "in", "rule": "/checkout/*", "action": "queue"})
    );
    assert_eq!(
        counts(&admin_targeting(&app, "/api/admin", "counted", "").await),
        json!([2, 1, 1, 1])
    );

    // New rules start the counters again.
    app.admin_post(
        "/rooms",
        json!({"id": "counted", "urlPatterns": ["/checkout/*"]}),
    )
    .await;
    let reset = admin_targeting(&app, "/api/admin", "counted", "").await;
    assert_eq!(reset.body["rev"], 2);
    assert_eq!(
        json!([
            reset.body["rules"][0]["matchCount"],
            reset.body["unmatchedChecks"]
        ]),
        json!([0, 0]),
        "{}",
        reset.text
    );

    let unknown = admin_targeting(&app, "/api/admin", "ghost", "").await;
    assert_eq!((unknown.status, unknown.code()), (404, "room_not_found"));
    let anonymous = app
        .get(&format!("{}/api/admin/rooms/counted/targeting", app.admin))
        .await;
    assert_eq!(anonymous.status, 401);
}

#[tokio::test]
async fn the_targeting_read_spends_the_check_budget() {
    let app = spawn_app_with(&[("CHECK_LIMIT_PER_MIN", "2")]).await;
    scoped_room(&app, "budget", json!(["/checkout/*"])).await;
    let url = format!("{}/api/targeting?roomId=budget", app.gateway);
    assert_eq!(app.get(&url).await.status, 200);
    let checked = check(&app, &[("roomId", "budget"), ("url", CHECKOUT)], None).await;
    assert_eq!(checked.status, 200, "{}", checked.text);
    let refused = app.get(&url).await;
    assert_eq!(
        (refused.status, refused.code()),
        (429, "rate_limited"),
        "{}",
        refused.text
    );
    assert!(refused.header("retry-after").is_some());
}
