//! Alerts through the operator API on a running app: the state view, the test page (400
//! `alerts_disabled` without a webhook, 502 `webhook_failed` when it refuses, delivered in the
//! shape receivers read otherwise), and a stalled room paging once and resolving once. The
//! whole scripted incident, storage and readiness included, is `qm/tests/alerts.rs`.

use std::time::Duration;

use qm_tests::webhook::WebhookReceiver;
use qm_tests::{room_body, spawn_app, spawn_app_with};
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn without_a_webhook_the_rules_show_and_a_test_page_is_refused() {
    let app = spawn_app().await;
    let state = app.admin_call(Method::GET, "/alerts", None).await;
    assert_eq!(state.status, 200, "{}", state.body);
    assert_eq!(state.body["enabled"], false);
    let rules: Vec<&str> = state.body["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .filter_map(|rule| rule["rule"].as_str())
        .collect();
    assert_eq!(rules, ["surge", "stalled", "storage", "readiness"]);
    assert_eq!(state.body["firing"], json!([]));

    let test = app.admin_post("/alerts", json!({})).await;
    assert_eq!(
        (test.status, test.code()),
        (400, "alerts_disabled"),
        "{}",
        test.body
    );
    app.stop().await;
}

#[tokio::test]
async fn a_test_page_reaches_the_receiver_and_a_refusal_is_502() {
    let receiver = WebhookReceiver::start().await;
    let app = spawn_app_with(&[("ALERT_WEBHOOK_URL", &receiver.url)]).await;

    let sent = app.admin_post("/alerts", json!({})).await;
    assert_eq!(sent.status, 200, "{}", sent.body);
    assert_eq!(
        (sent.body["delivered"].clone(), sent.body["status"].clone()),
        (json!(true), json!(200))
    );
    let page = receiver
        .wait_for("QmTestPage", "firing", Duration::from_secs(5))
        .await;
    assert!(
        page["text"]
            .as_str()
            .is_some_and(|text| text.starts_with("[FIRING] test page")),
        "Slack-style text: {page}"
    );
    assert_eq!(page["alerts"][0]["labels"]["severity"], "info");
    assert_eq!(page["version"], "4", "Alertmanager's webhook shape: {page}");

    receiver.refuse(true);
    let refused = app.admin_post("/alerts", json!({})).await;
    assert_eq!(
        (refused.status, refused.code()),
        (502, "webhook_failed"),
        "{}",
        refused.body
    );
    assert!(
        refused.body["error"]
            .as_str()
            .is_some_and(|error| error.contains("500")),
        "the refusal names the receiver's answer: {}",
        refused.body
    );
    let state = app.admin_call(Method::GET, "/alerts", None).await;
    assert_eq!(state.body["enabled"], true);
    assert_eq!(
        state.body["delivery"]["last"]["ok"], false,
        "{}",
        state.body
    );
    assert_eq!(state.body["delivery"]["sent"], 1);
    assert_eq!(state.body["delivery"]["failed"], 1);
    // The webhook's address is a credential: the health view says only that it is set.
    let health = app.admin_call(Method::GET, "/health", None).await;
    assert_eq!(
        health.body["config"]["ALERT_WEBHOOK_URL"], "set",
        "{}",
        health.body["config"]
    );
    assert!(!health.body.to_string().contains(&receiver.url));
    app.stop().await;
}

#[tokio::test]
async fn a_stalled_room_pages_once_and_resolves_once_when_the_line_moves() {
    let receiver = WebhookReceiver::start().await;
    let app = spawn_app_with(&[
        ("ALERT_WEBHOOK_URL", &receiver.url),
        ("ALERT_EVAL_MS", "200"),
        ("ALERT_STALL_SEC", "2"),
        ("ALERT_RESOLVE_SEC", "1"),
        ("ALERT_SURGE_PER_MIN", "1000000"),
    ])
    .await;
    app.create_room(room_body("stuck", 0, json!({}))).await;
    for _ in 0..3 {
        let (joined, _) = app.join_as_new_visitor("stuck").await;
        assert_eq!(joined.status, 200, "{}", joined.body);
    }
    let fired = receiver
        .wait_for("QmRoomStalled", "firing", Duration::from_secs(10))
        .await;
    assert_eq!(fired["alerts"][0]["labels"]["room"], "stuck");
    let text = fired["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("3 waiting") && text.contains("rate is 0/min"),
        "{text}"
    );
    let state = app.admin_call(Method::GET, "/alerts", None).await;
    assert_eq!(state.body["firing"][0]["rule"], "stalled", "{}", state.body);
    assert_eq!(state.body["firing"][0]["roomId"], "stuck");

    let moved = app
        .admin_post("/rooms/stuck/rate", json!({ "ratePerMinute": 600 }))
        .await;
    assert_eq!(moved.status, 200, "{}", moved.body);
    let resolved = receiver
        .wait_for("QmRoomStalled", "resolved", Duration::from_secs(10))
        .await;
    assert_eq!(
        resolved["alerts"][0]["fingerprint"],
        fired["alerts"][0]["fingerprint"]
    );
    assert_ne!(resolved["alerts"][0]["endsAt"], "0001-01-01T00:00:00Z");
    // Two more evaluations: nothing flaps back.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        receiver.transitions(),
        [
            ("QmRoomStalled".to_owned(), "firing".to_owned()),
            ("QmRoomStalled".to_owned(), "resolved".to_owned()),
        ]
    );
    let state = app.admin_call(Method::GET, "/alerts", None).await;
    assert_eq!(state.body["firing"], json!([]));
    assert_eq!(state.body["recent"][0]["status"], "resolved");
    app.stop().await;
}
