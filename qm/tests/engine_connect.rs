//! Separate processes on the names a deployment gives them: a `qm engine` process (memory
//! store) and a `qm admin` process whose ENGINE_ADDR leads nowhere but whose ENGINE_CONNECT
//! names the engine by a DNS name (`localhost:<port>`), as a compose service or a Kubernetes
//! Service name would. The admin process is ready, and the room it writes is the engine's.

use std::time::Duration;

use qm_tests::process::{AdminProcess, EngineProcess, free_addr};
use qm_tests::{TEST_ADMIN_KEY, test_env};
use serde_json::json;

#[tokio::test]
async fn an_edge_reaches_its_engine_by_host_name() {
    let env = test_env();
    let engine_addr = free_addr();
    let _engine = EngineProcess::start(env!("CARGO_BIN_EXE_qm"), &env, engine_addr).await;

    let mut edge_env = env.clone();
    edge_env.insert(
        "ENGINE_CONNECT".to_owned(),
        format!("localhost:{}", engine_addr.port()),
    );
    // ENGINE_ADDR names a port nothing listens on: only ENGINE_CONNECT can lead to the engine.
    let nowhere = free_addr();
    let admin = AdminProcess::start(
        env!("CARGO_BIN_EXE_qm"),
        &edge_env,
        nowhere,
        free_addr().port(),
    )
    .await;

    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("the http client builds");
    let health: serde_json::Value = client
        .get(format!("{}/api/admin/health", admin.url()))
        .bearer_auth(TEST_ADMIN_KEY)
        .send()
        .await
        .expect("the admin process answers")
        .json()
        .await
        .expect("a JSON health body");
    assert_eq!(
        health["config"]["ENGINE_CONNECT"],
        json!(format!("localhost:{}", engine_addr.port())),
        "{health}"
    );
    let created = client
        .post(format!("{}/api/admin/rooms", admin.url()))
        .bearer_auth(TEST_ADMIN_KEY)
        .json(&json!({ "id": "named", "targetUrl": "https://shop.example/", "ratePerMinute": 10 }))
        .send()
        .await
        .expect("the admin process answers");
    assert_eq!(created.status(), 200, "the engine took the room");
}
