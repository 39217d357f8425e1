//! Versioned and bare paths, verbs and unknown paths, readiness, the waiting page and assets.

use std::sync::Arc;

use qm_core::config::Config;
use serde_json::json;

use crate::harness::Reply;
use crate::harness::spawn_gateway;

#[tokio::test]
async fn contract_routes_answer_alike_under_both_prefixes_with_json_errors() {
    let gateway = spawn_gateway(&[]).await;
    gateway.engine.create_room("v", "paused", 0);
    let (reply, _) = gateway.join_as_new_visitor("v").await;
    let token = reply.body["token"].as_str().unwrap();
    for route in ["status", "check"] {
        let query = [("token", token), ("roomId", "v")];
        let pinned = gateway
            .send(
                gateway
                    .http
                    .get(format!("{}/api/v1/{route}", gateway.url))
                    .query(&query),
            )
            .await;
        let alias = gateway
            .send(
                gateway
                    .http
                    .get(format!("{}/api/{route}", gateway.url))
                    .query(&query),
            )
            .await;
        assert_eq!(pinned.status, 200, "{route}: {}", pinned.text);
        assert_eq!(pinned.text, alias.text, "{route}");
    }
    for (method, path, allowed) in [
        (reqwest::Method::GET, "/api/join", "POST"),
        (reqwest::Method::GET, "/api/v1/join", "POST"),
        (reqwest::Method::POST, "/api/status", "GET"),
        (reqwest::Method::DELETE, "/api/v1/check", "GET"),
        (reqwest::Method::POST, "/events", "GET"),
    ] {
        let reply = gateway
            .send(
                gateway
                    .http
                    .request(method.clone(), format!("{}{path}", gateway.url)),
            )
            .await;
        assert_eq!(reply.status, 405, "{method} {path}");
        assert_eq!(
            reply.body["code"], "method_not_allowed",
            "{method} {path}: {}",
            reply.text
        );
        assert!(
            reply.header("allow").unwrap_or("").contains(allowed),
            "{method} {path}"
        );
    }
    for path in ["/api/nothing", "/api/v1/nothing", "/nothing"] {
        let reply = gateway
            .send(gateway.http.get(format!("{}{path}", gateway.url)))
            .await;
        assert_eq!(
            (reply.status, reply.body["code"].as_str()),
            (404, Some("not_found")),
            "{path}"
        );
    }
    for path in ["/api/join", "/api/v1/status", "/events", "/api/events"] {
        let preflight = gateway
            .send(
                gateway
                    .http
                    .request(
                        reqwest::Method::OPTIONS,
                        format!("{}{path}?roomId=v", gateway.url),
                    )
                    .header("origin", "https://shop.example"),
            )
            .await;
        assert!(preflight.status < 300, "{path}: {}", preflight.status);
        assert!(
            preflight.header("access-control-allow-origin").is_none(),
            "{path}: same-origin routes never advertise one"
        );
    }
}

#[tokio::test]
async fn readiness_follows_the_engine() {
    let gateway = spawn_gateway(&[]).await;
    for path in ["/healthz", "/api/health", "/api/v1/health", "/api/version"] {
        let reply = gateway
            .send(gateway.http.get(format!("{}{path}", gateway.url)))
            .await;
        assert_eq!(reply.status, 200, "{path}: {}", reply.text);
        assert_eq!(reply.body["ready"], true);
        assert_eq!(reply.body["process"], "gateway");
        assert_eq!(reply.body["checks"]["engine"], "ok");
        assert!(reply.body["version"].is_string());
    }

    let dead = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead_addr = dead.local_addr().unwrap();
    drop(dead);
    let config = Arc::new(Config::defaults());
    let target = qm_proto::EngineTarget::from_config_at(&config, dead_addr).unwrap();
    let app = qm_gateway::GatewayApp::new(config, target.client(), target.health_channel());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(app.run(listener, None, std::future::pending()));
    let http = reqwest::Client::new();
    let not_ready = Reply::read(http.get(format!("{url}/healthz")).send().await.unwrap()).await;
    assert_eq!(not_ready.status, 503);
    assert_eq!(not_ready.body["ready"], false);
    assert!(
        not_ready.body["checks"]["engine"]
            .as_str()
            .unwrap_or("")
            .contains("unreachable"),
        "{}",
        not_ready.text
    );
    let version = Reply::read(http.get(format!("{url}/api/version")).send().await.unwrap()).await;
    assert_eq!(version.status, 200);
    let join = Reply::read(
        http.post(format!("{url}/api/join"))
            .json(&json!({ "roomId": "r" }))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (join.status, join.body["code"].as_str()),
        (503, Some("engine_unavailable"))
    );
}

#[tokio::test]
async fn the_waiting_page_and_its_assets() {
    let gateway = spawn_gateway(&[]).await;
    gateway.engine.create_room("page", "active", 60);
    gateway.engine.edit_room("page", |room| {
        room.branding_json = r#"{"title":"The big drop"}"#.into()
    });
    let page = gateway
        .send(
            gateway
                .http
                .get(format!("{}/w/page", gateway.url))
                .query(&[("qm_return", "https://evil.example/steal")]),
        )
        .await;
    assert_eq!(page.status, 200);
    assert!(
        page.header("content-type")
            .unwrap_or("")
            .starts_with("text/html")
    );
    assert!(
        page.header("content-security-policy")
            .unwrap_or("")
            .contains("script-src 'self'")
    );
    assert!(page.text.contains(r#""roomId":"page""#));
    assert!(page.text.contains("The big drop"));
    assert!(
        !page.text.contains("evil.example"),
        "a refused qm_return is stripped"
    );
    let kept = gateway
        .send(
            gateway
                .http
                .get(format!("{}/w/page", gateway.url))
                .query(&[("qm_return", "https://shop.example/cart")]),
        )
        .await;
    assert!(kept.text.contains("https://shop.example/cart"));

    for asset in qm_web::asset_names() {
        for prefix in ["/assets/", "/__qm/assets/"] {
            let reply = gateway
                .send(gateway.http.get(format!("{}{prefix}{asset}", gateway.url)))
                .await;
            assert_eq!(reply.status, 200, "{prefix}{asset}");
            assert_eq!(
                reply.header("cache-control"),
                Some("public, max-age=31536000, immutable")
            );
            assert!(
                page.text.contains(&format!("/assets/{asset}")),
                "the page links {asset}"
            );
        }
    }
    let missing = gateway
        .send(
            gateway
                .http
                .get(format!("{}/assets/waiting-nope.css", gateway.url)),
        )
        .await;
    assert_eq!(missing.status, 404);
    let unknown_room = gateway
        .send(gateway.http.get(format!("{}/w/ghost", gateway.url)))
        .await;
    assert_eq!(unknown_room.status, 200);
    assert!(unknown_room.text.contains(r#""found":false"#));
    let invalid = gateway
        .send(gateway.http.get(format!("{}/w/bad%20room", gateway.url)))
        .await;
    assert_eq!(invalid.status, 404);
    assert!(
        invalid
            .header("content-type")
            .unwrap_or("")
            .starts_with("text/html")
    );
}
