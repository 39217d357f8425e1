//! Versioning and verbs: /api/v1/<route> and /api/<route> answer byte for byte alike; a wrong
//! verb is 405 with Allow; unknown paths answer the `{error, code}` envelope.

use qm_tests::{room_body, spawn_app, spawn_app_with};
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn versioned_and_unversioned_paths_answer_identically() {
    let app = spawn_app().await;
    app.create_room(room_body("v", 0, json!({ "state": "paused" })))
        .await;
    let (reply, _) = app.join_as_new_visitor("v").await;
    let token = reply.body["token"].as_str().unwrap().to_owned();

    for route in ["status", "check"] {
        let query = [("token", token.as_str()), ("roomId", "v")];
        let pinned = app
            .send(
                app.http
                    .get(format!("{}/api/v1/{route}", app.gateway))
                    .query(&query),
            )
            .await;
        let alias = app
            .send(
                app.http
                    .get(format!("{}/api/{route}", app.gateway))
                    .query(&query),
            )
            .await;
        assert_eq!(pinned.status, 200, "{route}: {}", pinned.text);
        assert_eq!(pinned.text, alias.text, "{route}");
    }
    let pinned = app
        .send(
            app.http
                .post(format!("{}/api/v1/join", app.gateway))
                .json(&json!({ "roomId": "zz" })),
        )
        .await;
    let alias = app
        .send(
            app.http
                .post(format!("{}/api/join", app.gateway))
                .json(&json!({ "roomId": "zz" })),
        )
        .await;
    assert_eq!(
        (pinned.status, pinned.text.clone()),
        (alias.status, alias.text)
    );
    let pinned_join = app
        .send(
            app.http
                .post(format!("{}/api/v1/join", app.gateway))
                .json(&json!({ "roomId": "v" })),
        )
        .await;
    assert_eq!(pinned_join.status, 200);
    assert_eq!(pinned_join.body["position"], 2);
}

#[tokio::test]
async fn a_wrong_verb_is_405_with_allow() {
    let app = spawn_app().await;
    let cases = [
        (Method::GET, format!("{}/api/join", app.gateway), "POST"),
        (Method::GET, format!("{}/api/v1/join", app.gateway), "POST"),
        (Method::POST, format!("{}/api/status", app.gateway), "GET"),
        (Method::DELETE, format!("{}/api/check", app.gateway), "GET"),
        (Method::PUT, format!("{}/api/admin/rooms", app.admin), "GET"),
        (
            Method::GET,
            format!("{}/api/admin/rooms/x/flush", app.admin),
            "POST",
        ),
        (Method::POST, format!("{}/healthz", app.admin), "GET"),
        (Method::POST, format!("{}/healthz", app.gateway), "GET"),
    ];
    for (method, url, allowed) in cases {
        let reply = app
            .send(
                app.http
                    .request(method.clone(), &url)
                    .bearer_auth(qm_tests::TEST_ADMIN_KEY),
            )
            .await;
        assert_eq!(reply.status, 405, "{method} {url}: {}", reply.text);
        assert_eq!(reply.code(), "method_not_allowed", "{method} {url}");
        let allow = reply.header("allow").unwrap_or_default();
        assert!(allow.contains(allowed), "{method} {url}: Allow {allow}");
    }
}

#[tokio::test]
async fn every_admin_route_is_served_under_both_prefixes_with_its_verbs() {
    let app = spawn_app().await;
    // The admin routes table, as a client sees it: no admin route takes PATCH, so each answers
    // 405 naming exactly the verbs it does take.
    let routes = [
        ("/rooms", "GET,HEAD,POST"),
        ("/rooms/x", "GET,HEAD,DELETE"),
        ("/rooms/x/state", "POST"),
        ("/rooms/x/rate", "POST"),
        ("/rooms/x/flush", "POST"),
        ("/rooms/x/schedule", "POST"),
        ("/rooms/x/eject", "POST"),
        ("/rooms/x/purge", "POST"),
        ("/rooms/x/visitors", "GET,HEAD"),
        ("/health", "GET,HEAD"),
        ("/session", "GET,HEAD,POST,DELETE"),
        ("/sse-ticket", "POST"),
        ("/events", "GET,HEAD"),
        ("/metrics", "GET,HEAD"),
    ];
    for prefix in ["/api/admin", "/api/v1/admin"] {
        for (path, verbs) in routes {
            let url = format!("{}{prefix}{path}", app.admin);
            let reply = app
                .send(
                    app.http
                        .request(Method::PATCH, &url)
                        .bearer_auth(qm_tests::TEST_ADMIN_KEY),
                )
                .await;
            assert_eq!(reply.status, 405, "PATCH {url}: {}", reply.text);
            assert_eq!(reply.code(), "method_not_allowed", "PATCH {url}");
            let mut allow: Vec<&str> = reply
                .header("allow")
                .unwrap_or_default()
                .split(',')
                .collect();
            let mut expected: Vec<&str> = verbs.split(',').collect();
            allow.sort_unstable();
            expected.sort_unstable();
            assert_eq!(allow, expected, "PATCH {url}");
        }
    }
}

#[tokio::test]
async fn unknown_paths_answer_not_found_in_the_envelope() {
    let app = spawn_app().await;
    for url in [
        format!("{}/api/nothing", app.gateway),
        format!("{}/api/v1/nothing", app.gateway),
        format!("{}/api/admin/nothing", app.admin),
    ] {
        let reply = app
            .send(app.http.get(&url).bearer_auth(qm_tests::TEST_ADMIN_KEY))
            .await;
        assert_eq!(reply.status, 404, "{url}");
        assert_eq!(reply.code(), "not_found", "{url}: {}", reply.text);
    }
}

#[tokio::test]
async fn same_origin_routes_never_advertise_an_origin() {
    let app = spawn_app().await;
    app.create_room(room_body(
        "so",
        0,
        json!({ "tagOrigins": ["https://tags.example"] }),
    ))
    .await;
    for route in ["join", "status", "events"] {
        let preflight = app
            .send(
                app.http
                    .request(
                        Method::OPTIONS,
                        format!("{}/api/{route}?roomId=so", app.gateway),
                    )
                    .header("origin", "https://tags.example")
                    .header("access-control-request-method", "POST"),
            )
            .await;
        assert!(
            preflight.header("access-control-allow-origin").is_none(),
            "{route}"
        );
    }
    let join = app
        .send(
            app.http
                .post(format!("{}/api/join", app.gateway))
                .header("origin", "https://tags.example")
                .json(&json!({ "roomId": "so" })),
        )
        .await;
    assert!(join.header("access-control-allow-origin").is_none());
}

#[tokio::test]
async fn the_waiting_page_and_its_hashed_assets_are_served() {
    let app = spawn_app().await;
    app.create_room(room_body(
        "page",
        0,
        json!({ "branding": { "title": "The big drop" } }),
    ))
    .await;
    let page = app.get(&format!("{}/w/page", app.gateway)).await;
    assert_eq!(page.status, 200);
    assert!(
        page.header("content-type")
            .unwrap_or_default()
            .starts_with("text/html")
    );
    assert!(
        page.text.contains("\"roomId\":\"page\""),
        "QM_CONFIG carries the room id"
    );
    assert!(page.text.contains("The big drop"), "and its branding");
    assert!(!page.text.contains("<style"), "style is linked, not inline");
    let hrefs: Vec<String> = page
        .text
        .match_indices("/assets/waiting-")
        .map(|(start, _)| {
            let rest = &page.text[start..];
            rest[..rest.find('"').expect("quoted href")].to_owned()
        })
        .collect();
    assert!(hrefs.iter().any(|href| href.ends_with(".css")), "{hrefs:?}");
    assert!(hrefs.iter().any(|href| href.ends_with(".js")), "{hrefs:?}");
    for href in hrefs {
        let asset = app.get(&format!("{}{href}", app.gateway)).await;
        assert_eq!(asset.status, 200, "{href}");
        assert_eq!(
            asset.header("cache-control"),
            Some("public, max-age=31536000, immutable"),
            "{href}"
        );
        let inline = app.get(&format!("{}/__qm{href}", app.gateway)).await;
        assert_eq!(inline.status, 200, "/__qm{href}");
    }
    assert_eq!(
        app.get(&format!("{}/assets/waiting-nope.css", app.gateway))
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn an_earlier_builds_asset_names_keep_answering_when_listed() {
    // What an older instance's page links during a rolling deploy.
    let old_css = "waiting-0ldBuildCssHash0000000.css";
    let old_js = "waiting-0ldBuildJsHash-0000000.js";
    assert_eq!(old_css.len() - "waiting-".len() - ".css".len(), 22);
    assert_eq!(old_js.len() - "waiting-".len() - ".js".len(), 22);
    let app = spawn_app_with(&[("WAITING_ASSETS_KEEP", &format!("{old_css},{old_js}"))]).await;
    app.create_room(room_body("deploy", 0, json!({}))).await;
    let page = app.get(&format!("{}/w/deploy", app.gateway)).await;
    let current_css = page
        .text
        .split('"')
        .find(|part| part.starts_with("/assets/waiting-") && part.ends_with(".css"))
        .expect("the page links its stylesheet")
        .to_owned();
    let current = app.get(&format!("{}{current_css}", app.gateway)).await;
    for prefix in ["/assets/", "/__qm/assets/"] {
        let kept = app.get(&format!("{}{prefix}{old_css}", app.gateway)).await;
        assert_eq!(kept.status, 200, "{prefix}{old_css}");
        assert_eq!(
            kept.text, current.text,
            "the kept name answers this build's file"
        );
        assert_eq!(kept.header("content-type"), Some("text/css; charset=utf-8"));
        assert_eq!(
            kept.header("cache-control"),
            Some("public, max-age=31536000, immutable")
        );
    }
    let kept_js = app.get(&format!("{}/assets/{old_js}", app.gateway)).await;
    assert_eq!(kept_js.status, 200);
    assert!(
        kept_js
            .header("content-type")
            .unwrap_or_default()
            .starts_with("text/javascript")
    );
    // A name nobody listed is still 404.
    let unlisted = app
        .get(&format!(
            "{}/assets/waiting-NotListedAnywhere00000.css",
            app.gateway
        ))
        .await;
    assert_eq!(unlisted.status, 404);

    // The admin health shows the list, and a malformed one stops the process at start.
    let health = app.admin_call(reqwest::Method::GET, "/health", None).await;
    assert_eq!(
        health.body["config"]["WAITING_ASSETS_KEEP"],
        json!([old_css, old_js]),
        "{}",
        health.text
    );
    let config = qm_core::config::Config::from_source(&std::collections::HashMap::from([(
        "WAITING_ASSETS_KEEP".to_owned(),
        "../../etc/passwd".to_owned(),
    )]));
    assert_eq!(
        config.map(|_| ()).map_err(|error| error.var),
        Err("WAITING_ASSETS_KEEP")
    );
}
