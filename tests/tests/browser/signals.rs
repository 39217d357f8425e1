//! The console's Alerts and Automatic decisions panels in headless chromium, on real causes: a
//! room that admits nobody while people wait fires `QmRoomStalled` (paged to a real receiver),
//! a test page goes out from the panel's button, and threshold activation turns a bypass room
//! active on a surge of joins — the panel shows that decision with the controller's reason.

use std::time::Duration;

use qm_tests::browser::{self, Browser};
use qm_tests::webhook::WebhookReceiver;
use qm_tests::{room_body, spawn_app_with};
use serde_json::json;

use crate::console::{assert_no_console_errors_but, click, sign_in, wait_text};

#[tokio::test]
async fn the_alerts_and_decisions_panels_show_what_fired_and_what_the_controllers_did() {
    browser::run(150, async {
        let receiver = WebhookReceiver::start().await;
        let app = spawn_app_with(&[
            ("ALERT_WEBHOOK_URL", receiver.url.as_str()),
            ("ALERT_EVAL_MS", "200"),
            ("ALERT_STALL_SEC", "1"),
        ])
        .await;
        app.create_room(room_body("still", 0, json!({}))).await;
        app.join_as_new_visitor("still").await;
        app.create_room(room_body(
            "surge",
            0,
            json!({ "state": "bypass", "autoActivate": { "enabled": true, "threshold": 3, "calmSec": 600 } }),
        ))
        .await;
        // The controller watches the room from its next pass (once a second).
        tokio::time::sleep(Duration::from_millis(1_300)).await;
        for _ in 0..3 {
            let joined = app.join("surge", None, None).await;
            assert_eq!(joined.status, 200, "{}", joined.text);
        }
        receiver
            .wait_for("QmRoomStalled", "firing", Duration::from_secs(10))
            .await;

        let browser = Browser::open().await;
        sign_in(&browser, &app).await;
        let firing = wait_text(&browser, "#alerts-firing", "the stalled alert", |text| {
            text.contains("room still admits nobody")
        })
        .await;
        assert!(firing.contains("firing since"), "{firing}");
        let delivery = wait_text(&browser, "#alerts-delivery", "the delivery line", |text| {
            text.contains("delivered")
        })
        .await;
        assert!(delivery.starts_with("Pages go to the webhook"), "{delivery}");

        click(&browser, "#alerts-test").await;
        wait_text(&browser, "#alerts-test-status", "the test page's answer", |text| {
            text.starts_with("The webhook took the test page")
        })
        .await;
        receiver
            .wait_for("QmTestPage", "firing", Duration::from_secs(5))
            .await;

        click(&browser, "#rooms [data-room-id=\"surge\"] .room-select").await;
        let decision = wait_text(&browser, "#decisions-list", "the activation", |text| {
            text.contains("auto-activation · active")
        })
        .await;
        assert!(decision.contains("threshold of 3/min"), "the reason: {decision}");
        browser
            .js(
                "document.querySelector('#decisions-heading').scrollIntoView({block: 'start'})",
                vec![],
            )
            .await
            .expect("scroll to the panel");
        browser.screenshot("console-alerts-decisions-1280x800").await;
        browser
            .assert_accessible("the console's alerts and decisions panels")
            .await;
        assert_no_console_errors_but(&browser, &[]).await;
    })
    .await;
}
