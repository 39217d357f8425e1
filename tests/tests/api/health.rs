//! Readiness: every process answers /healthz, 200 when ready and 503 naming what is missing.

use std::sync::Arc;

use qm_tests::spawn_app;

#[tokio::test]
async fn gateway_and_admin_are_ready_with_a_live_engine() {
    let app = spawn_app().await;
    for url in [
        format!("{}/healthz", app.gateway),
        format!("{}/api/health", app.gateway),
        format!("{}/api/v1/health", app.gateway),
        format!("{}/healthz", app.admin),
    ] {
        let reply = app.get(&url).await;
        assert_eq!(reply.status, 200, "{url}: {}", reply.text);
        assert_eq!(reply.body["ready"], true, "{url}");
    }
    let version = app.get(&format!("{}/api/version", app.gateway)).await;
    assert_eq!(version.status, 200);
    assert!(version.body["version"].is_string(), "{}", version.text);
}

#[tokio::test]
async fn without_an_engine_the_edge_is_not_ready_and_says_why() {
    // A port with nobody listening.
    let dead = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead_addr = dead.local_addr().unwrap();
    drop(dead);
    let config = Arc::new(qm_core::config::Config::defaults());
    let target = qm_proto::EngineTarget::from_config_at(&config, dead_addr).unwrap();
    let gateway =
        qm_gateway::GatewayApp::new(config.clone(), target.client(), target.health_channel());
    let admin = qm_admin::AdminApp::new(config, target.client(), target.health_channel());
    let gateway_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let admin_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let gateway_url = format!("http://{}", gateway_listener.local_addr().unwrap());
    let admin_url = format!("http://{}", admin_listener.local_addr().unwrap());
    tokio::spawn(gateway.run(gateway_listener, None, std::future::pending()));
    tokio::spawn(admin.run(admin_listener, std::future::pending()));

    let http = reqwest::Client::new();
    for url in [
        format!("{gateway_url}/healthz"),
        format!("{gateway_url}/api/health"),
        format!("{admin_url}/healthz"),
    ] {
        let reply = http.get(&url).send().await.unwrap();
        assert_eq!(reply.status(), 503, "{url}");
        let body: serde_json::Value = reply.json().await.unwrap();
        assert_eq!(body["ready"], false);
        assert!(
            body["checks"]["engine"]
                .as_str()
                .unwrap_or("")
                .contains("unreachable"),
            "{url}: {body}"
        );
    }
    let version = http
        .get(format!("{gateway_url}/api/version"))
        .send()
        .await
        .unwrap();
    assert_eq!(version.status(), 200, "/api/version is always 200");
    // A visitor call answers 503 with a code, not a hang or a 500.
    let join = http
        .post(format!("{gateway_url}/api/join"))
        .json(&serde_json::json!({ "roomId": "r" }))
        .send()
        .await
        .unwrap();
    assert_eq!(join.status(), 503);
    let body: serde_json::Value = join.json().await.unwrap();
    assert_eq!(body["code"], "engine_unavailable");
}

#[tokio::test]
async fn an_edge_whose_credential_the_engine_refuses_is_not_ready_and_says_why() {
    let app = spawn_app().await;
    let mut env = qm_tests::test_env();
    env.insert("SECRET".into(), "another-deployment-secret-0123".into());
    let stranger = qm_tests::spawn_edge(app.engine_addr, &env).await;
    for url in [
        format!("{}/healthz", stranger.gateway),
        format!("{}/healthz", stranger.admin),
    ] {
        let reply = stranger.get(&url).await;
        assert_eq!(reply.status, 503, "{url}: {}", reply.text);
        assert_eq!(
            reply.body["checks"]["engine"],
            qm_proto::client::CREDENTIAL_REFUSED,
            "{url}"
        );
    }
    let join = stranger.join("anything", None, None).await;
    assert_eq!(join.status, 503);
    assert_eq!(join.code(), "engine_unavailable");
    // The engine's own edges, with the right credential, are unaffected.
    let ours = app.get(&format!("{}/healthz", app.gateway)).await;
    assert_eq!(ours.status, 200);
}
