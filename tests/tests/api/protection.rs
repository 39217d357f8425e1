//! Room protection (bot scoring) on joins: `enforce` refuses a script-like join a new place with
//! 403 `blocked_by_protection` and hands out nothing; a browser-like join is admitted; `monitor`
//! and `off` admit both; a place already held is kept whatever the score. The account of it,
//! `GET /api/admin/security`: per room the scores, what enforce refused and what monitor let in
//! that enforce would have refused, with reasons and examples whose address is a digest.

use qm_tests::{Reply, TestApp, room_body, spawn_app};
use serde_json::{Value, json};

use crate::credentials::{Cred, call, mint_monitor};

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

/// The security report's entry for `room_id`, read with `cred`.
async fn security_of(app: &TestApp, cred: &Cred, room_id: &str) -> Value {
    let reply = call(app, reqwest::Method::GET, "/security", cred, None, &[]).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.body["rooms"]
        .as_array()
        .and_then(|rooms| rooms.iter().find(|room| room["roomId"] == room_id))
        .cloned()
        .unwrap_or_else(|| panic!("no {room_id} in {}", reply.text))
}

#[tokio::test]
async fn the_security_report_counts_what_enforce_refused_and_what_monitor_would_have() {
    let app = spawn_app().await;
    for (room_id, mode) in [
        ("watched", "monitor"),
        ("guarded", "enforce"),
        ("open", "off"),
    ] {
        app.create_room(room_body(
            room_id,
            0,
            json!({ "protection": { "mode": mode } }),
        ))
        .await;
    }
    for _ in 0..2 {
        assert_eq!(browser_join(&app, "watched", None).await.status, 200);
        assert_eq!(script_join(&app, "watched", None).await.status, 200);
    }
    assert_eq!(script_join(&app, "guarded", None).await.status, 403);
    assert_eq!(browser_join(&app, "guarded", None).await.status, 200);
    assert_eq!(script_join(&app, "open", None).await.status, 200);

    let (_, monitor) = mint_monitor(&app).await;
    let monitor = Cred::Bearer(monitor);
    let watched = security_of(&app, &monitor, "watched").await;
    assert_eq!(watched["mode"], "monitor");
    assert_eq!(watched["scored"], 4, "{watched}");
    assert_eq!(watched["scores"]["browserLike"], 2, "{watched}");
    assert_eq!(watched["scores"]["scriptLike"], 2, "{watched}");
    assert_eq!(watched["wouldRefuse"], 2, "{watched}");
    assert_eq!(watched["refused"], 0, "{watched}");
    // python-requests without Accept-Language (the client sends `Accept: */*`): two reasons,
    // twice each.
    let reasons: Vec<(&str, u64)> = watched["topReasons"]
        .as_array()
        .map(|reasons| {
            reasons
                .iter()
                .filter_map(|entry| Some((entry["reason"].as_str()?, entry["count"].as_u64()?)))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        reasons,
        [("automation_user_agent", 2), ("no_accept_language", 2)],
        "{watched}"
    );
    let recent = watched["recent"].as_array().cloned().unwrap_or_default();
    assert_eq!(recent.len(), 2, "{watched}");
    for example in &recent {
        assert_eq!(example["outcome"], "would_refuse", "{example}");
        assert_eq!(example["score"], 85, "{example}");
        let client = example["client"].as_str().unwrap_or_default();
        assert_eq!(client.len(), 12, "a 12-hex digest: {example}");
        assert!(client.chars().all(|c| c.is_ascii_hexdigit()), "{example}");
        assert!(!example.to_string().contains("127.0.0.1"), "{example}");
    }
    assert_eq!(
        recent[0]["client"], recent[1]["client"],
        "one address, one digest"
    );

    let guarded = security_of(&app, &monitor, "guarded").await;
    assert_eq!(
        (guarded["refused"].as_u64(), guarded["wouldRefuse"].as_u64()),
        (Some(1), Some(0)),
        "{guarded}"
    );
    assert_eq!(guarded["recent"][0]["outcome"], "refused", "{guarded}");
    // With protection off a script-like join is scored, never counted as a refusal.
    let open = security_of(&app, &monitor, "open").await;
    assert_eq!(open["scores"]["scriptLike"], 1, "{open}");
    assert_eq!(
        (open["refused"].as_u64(), open["wouldRefuse"].as_u64()),
        (Some(0), Some(0)),
        "{open}"
    );
    assert_eq!(open["recent"], json!([]), "{open}");

    // One room, bad input, and no credential.
    let one = call(
        &app,
        reqwest::Method::GET,
        "/security?roomId=guarded",
        &monitor,
        None,
        &[],
    )
    .await;
    assert_eq!(
        one.body["rooms"].as_array().map(Vec::len),
        Some(1),
        "{}",
        one.text
    );
    let bad = call(
        &app,
        reqwest::Method::GET,
        "/security?roomId=no%20such",
        &monitor,
        None,
        &[],
    )
    .await;
    assert_eq!(
        (bad.status, bad.code()),
        (400, "invalid_room_id"),
        "{}",
        bad.text
    );
    let missing = call(
        &app,
        reqwest::Method::GET,
        "/security?roomId=nowhere",
        &monitor,
        None,
        &[],
    )
    .await;
    assert_eq!(
        (missing.status, missing.code()),
        (404, "room_not_found"),
        "{}",
        missing.text
    );
    let anonymous = call(
        &app,
        reqwest::Method::GET,
        "/security",
        &Cred::None,
        None,
        &[],
    )
    .await;
    assert_eq!(anonymous.status, 401, "{}", anonymous.text);
}
