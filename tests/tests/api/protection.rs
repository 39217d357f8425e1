//! Room protection (bot scoring) on joins: `enforce` refuses a script-like join a new place with
//! 403 `blocked_by_protection` and hands out nothing; a browser-like join is admitted; `monitor`
//! and `off` admit both; a place already held is kept whatever the score.

use qm_tests::{Reply, TestApp, room_body, spawn_app};
use serde_json::json;

const BROWSER: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36";

/// A join the way a browser's fetch sends it.
async fn browser_join(app: &TestApp, room_id: &str, cookies: Option<&str>) -> Reply {
    let mut request = app
        .http
        .post(format!("{}/api/join", app.gateway))
        .header("user-agent", BROWSER)
        .header("accept", "*/*")
        .header("accept-language", "th-TH,th;q=0.9,en;q=0.8")
        .json(&json!({ "roomId": room_id }));
    if let Some(cookies) = cookies {
        request = request.header("cookie", cookies);
    }
    app.send(request).await
}

/// A join the way a script sends it.
async fn script_join(app: &TestApp, room_id: &str, cookies: Option<&str>) -> Reply {
    let mut request = app
        .http
        .post(format!("{}/api/join", app.gateway))
        .header("user-agent", "python-requests/2.32")
        .json(&json!({ "roomId": room_id }));
    if let Some(cookies) = cookies {
        request = request.header("cookie", cookies);
    }
    app.send(request).await
}

#[tokio::test]
async fn enforce_refuses_script_like_joins_and_hands_out_nothing() {
    let app = spawn_app().await;
    app.create_room(room_body(
        "guarded",
        0,
        json!({ "protection": { "mode": "enforce" } }),
    ))
    .await;
    let refused = script_join(&app, "guarded", None).await;
    assert_eq!(refused.status, 403, "{}", refused.text);
    assert_eq!(refused.code(), "blocked_by_protection");
    assert!(refused.body.get("token").is_none(), "{}", refused.text);
    assert!(
        refused.set_cookies().is_empty(),
        "{:?}",
        refused.set_cookies()
    );
    assert_eq!(app.room("guarded").await["waiting"], 0, "no place minted");

    let admitted = browser_join(&app, "guarded", None).await;
    assert_eq!(admitted.status, 200, "{}", admitted.text);
    assert_eq!(admitted.body["position"], 1);

    // A place already held is kept, whatever sends the rejoin.
    let cookies = format!(
        "qm_guarded={}; qms_guarded={}",
        admitted.cookie("qm_guarded").expect("qm_"),
        admitted.cookie("qms_guarded").expect("qms_")
    );
    let rejoin = script_join(&app, "guarded", Some(&cookies)).await;
    assert_eq!(rejoin.status, 200, "{}", rejoin.text);
    assert_eq!(rejoin.body["position"], 1);
}

#[tokio::test]
async fn monitor_and_off_admit_script_like_joins() {
    let app = spawn_app().await;
    for (room_id, mode) in [("watched", "monitor"), ("open", "off")] {
        app.create_room(room_body(
            room_id,
            0,
            json!({ "protection": { "mode": mode } }),
        ))
        .await;
        let reply = script_join(&app, room_id, None).await;
        assert_eq!(reply.status, 200, "{mode}: {}", reply.text);
    }
    app.create_room(room_body("plain", 0, json!({}))).await;
    assert_eq!(script_join(&app, "plain", None).await.status, 200);
}
