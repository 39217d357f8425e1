//! POST /api/notify and turn e-mails: registering and withdrawing, the `notify` statement of
//! /api/join, delivery over real SMTP to the harness's sink (with retries), and the record
//! following its place — carried over by a rejoin the engine does not honour, deleted by an
//! eject or a purge, never taken along by another browser.

use std::time::Duration;

use qm_tests::servers::ValkeyOptions;
use qm_tests::smtp::ReceivedMail;
use qm_tests::{
    Backing, Reply, SmtpSink, TestApp, room_body, spawn_app, spawn_app_on, spawn_app_with,
};
use serde_json::{Value, json};

use crate::log_capture::Captured;
use crate::token_ticket;

const ADDRESS: &str = "jane.doe@example.com";

async fn notify_app(sink: &SmtpSink) -> TestApp {
    let url = sink.url();
    spawn_app_with(&[("EMAIL_NOTIFY", "1"), ("SMTP_URL", url.as_str())]).await
}

/// POST `path` (`/api/notify` or `/api/v1/notify`) with a JSON body and an optional Cookie.
async fn post_notify_at(app: &TestApp, path: &str, body: Value, cookies: Option<&str>) -> Reply {
    let mut request = app.http.post(format!("{}{path}", app.gateway)).json(&body);
    if let Some(cookies) = cookies {
        request = request.header(reqwest::header::COOKIE, cookies);
    }
    app.send(request).await
}

async fn post_notify(app: &TestApp, body: Value, cookies: Option<&str>) -> Reply {
    post_notify_at(app, "/api/notify", body, cookies).await
}

/// A visitor joins and registers `ADDRESS`; answers their token and cookies.
async fn registered_visitor(app: &TestApp, room_id: &str) -> (String, String) {
    let (joined, cookies) = app.join_as_new_visitor(room_id).await;
    let token = joined.body["token"].as_str().expect("token").to_owned();
    let reply = post_notify(
        app,
        json!({ "token": token, "email": ADDRESS }),
        Some(&cookies),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    (token, cookies)
}

async fn flush(app: &TestApp, room_id: &str, count: u64) {
    let reply = app
        .admin_post(
            &format!("/rooms/{room_id}/flush"),
            json!({ "count": count }),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
}

/// Rejoins until the statement's delivery reads `want` (it is settled just after the relay
/// accepts the message).
async fn wait_for_delivery(app: &TestApp, room_id: &str, token: &str, cookies: &str, want: &str) {
    let mut last = Value::Null;
    for _ in 0..50 {
        let reply = app.join(room_id, Some(token), Some(cookies)).await;
        last = reply.body["notify"].clone();
        if last["delivery"] == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("delivery never read {want}: {last}");
}

fn assert_turn_mail(mail: &ReceivedMail, room_name: &str) {
    assert_eq!(mail.rcpt_to, vec![ADDRESS.to_owned()], "{mail:?}");
    let to = mail.header("To").unwrap_or_default();
    assert!(to.contains(ADDRESS), "To: {to}");
    let subject = mail.header("Subject").unwrap_or_default();
    assert!(subject.contains(room_name), "Subject: {subject}");
    let body = mail.body();
    assert!(body.contains(&format!("queue for {room_name}")), "{body}");
    assert!(body.contains("browser you queued in"), "{body}");
    assert!(!body.contains("http"), "no links, nothing to track: {body}");
}

#[tokio::test]
async fn notify_registers_join_states_it_and_an_empty_email_withdraws_it() {
    let sink = SmtpSink::start().await;
    let app = notify_app(&sink).await;
    app.create_room(room_body("reg", 0, json!({}))).await;
    let (joined, cookies) = app.join_as_new_visitor("reg").await;
    assert_eq!(
        joined.body["notify"],
        Value::Null,
        "nothing stored yet: {}",
        joined.text
    );
    assert!(joined.body.as_object().unwrap().contains_key("notify"));
    let token = joined.body["token"].as_str().unwrap().to_owned();

    let registered = post_notify(
        &app,
        json!({ "token": token, "email": ADDRESS }),
        Some(&cookies),
    )
    .await;
    assert_eq!(registered.status, 200, "{}", registered.text);
    assert_eq!(registered.body["ok"], true);
    let statement = &registered.body["notify"];
    assert_eq!(statement["emailMasked"], "j***@e***.com", "{statement}");
    assert_eq!(statement["delivery"], "pending");
    assert!(statement["requestedAt"].as_i64().unwrap() > 1_600_000_000_000);
    assert!(!registered.text.contains(ADDRESS));
    assert_eq!(registered.header("cache-control"), Some("no-store"));

    let rejoin = app.join("reg", Some(&token), Some(&cookies)).await;
    assert_eq!(rejoin.body["token"], token.as_str(), "the place is kept");
    assert_eq!(rejoin.body["notify"], *statement);

    // Withdraw by cookie alone, through the pinned prefix.
    let withdrawn = post_notify_at(
        &app,
        "/api/v1/notify",
        json!({ "email": "" }),
        Some(&cookies),
    )
    .await;
    assert_eq!(withdrawn.status, 200, "{}", withdrawn.text);
    assert_eq!(withdrawn.body, json!({ "ok": true, "notify": null }));
    let rejoin = app.join("reg", Some(&token), Some(&cookies)).await;
    assert_eq!(rejoin.body["notify"], Value::Null);

    // Registering again with no email field at all is also a withdrawal.
    post_notify(
        &app,
        json!({ "token": token, "email": ADDRESS }),
        Some(&cookies),
    )
    .await;
    let omitted = post_notify(&app, json!({ "token": token }), Some(&cookies)).await;
    assert_eq!(omitted.body["notify"], Value::Null, "{}", omitted.text);
}

#[tokio::test]
async fn notify_is_absent_from_join_and_refused_when_email_notify_is_off() {
    let app = spawn_app().await;
    app.create_room(room_body("off", 0, json!({}))).await;
    let (joined, cookies) = app.join_as_new_visitor("off").await;
    assert!(
        !joined.body.as_object().unwrap().contains_key("notify"),
        "no statement when off: {}",
        joined.text
    );
    let token = joined.body["token"].as_str().unwrap();
    for path in ["/api/notify", "/api/v1/notify"] {
        let reply = post_notify_at(
            &app,
            path,
            json!({ "token": token, "email": ADDRESS }),
            Some(&cookies),
        )
        .await;
        assert_eq!(reply.status, 400, "{}", reply.text);
        assert_eq!(reply.code(), "notify_disabled");
        assert!(reply.body["error"].is_string());
    }
    let wrong_verb = app.get(&format!("{}/api/notify", app.gateway)).await;
    assert_eq!(wrong_verb.status, 405);
    assert_eq!(wrong_verb.code(), "method_not_allowed");
    assert!(
        wrong_verb
            .header("allow")
            .unwrap_or_default()
            .contains("POST")
    );
}

#[tokio::test]
async fn a_passed_ticket_is_mailed_over_smtp_and_reads_sent() {
    let sink = SmtpSink::start().await;
    let app = notify_app(&sink).await;
    app.create_room(room_body("mail", 0, json!({ "name": "Spring Launch" })))
        .await;
    let (token, cookies) = registered_visitor(&app, "mail").await;
    // A second visitor without a notification is passed too and gets nothing.
    app.join_as_new_visitor("mail").await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(sink.received().is_empty(), "nothing before the turn");

    flush(&app, "mail", 2).await;
    let received = sink.wait_for(1, Duration::from_secs(10)).await;
    assert_eq!(received.len(), 1, "{received:?}");
    assert_turn_mail(&received[0], "Spring Launch");
    assert!(
        received[0]
            .header("From")
            .unwrap_or_default()
            .contains("queue@localhost")
    );
    wait_for_delivery(&app, "mail", &token, &cookies, "sent").await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(sink.received().len(), 1, "sent exactly once");
}

#[tokio::test]
async fn a_refused_send_is_retried_with_backoff_until_it_arrives() {
    let sink = SmtpSink::start().await;
    sink.refuse_next(2);
    let app = notify_app(&sink).await;
    app.create_room(room_body("retry", 0, json!({ "name": "Retry Room" })))
        .await;
    let (token, cookies) = registered_visitor(&app, "retry").await;
    flush(&app, "retry", 1).await;
    // Attempt 1 refused, 1 s later attempt 2 refused, 2 s later attempt 3 delivered.
    let received = sink.wait_for(1, Duration::from_secs(20)).await;
    assert_eq!(received.len(), 1, "refused {} so far", sink.refused());
    assert_eq!(sink.refused(), 2);
    assert_turn_mail(&received[0], "Retry Room");
    wait_for_delivery(&app, "retry", &token, &cookies, "sent").await;
}

#[tokio::test]
async fn eject_and_purge_delete_the_record_and_a_rejoin_does_not_bring_it_back() {
    let sink = SmtpSink::start().await;
    let app = notify_app(&sink).await;
    app.create_room(room_body("drop", 0, json!({}))).await;
    let (ejected_token, ejected_cookies) = registered_visitor(&app, "drop").await;
    let (purged_token, purged_cookies) = registered_visitor(&app, "drop").await;

    let eject = app
        .admin_post("/rooms/drop/eject", json!({ "ticket": 1 }))
        .await;
    assert_eq!(eject.status, 200, "{}", eject.text);
    let rejoin = app
        .join("drop", Some(&ejected_token), Some(&ejected_cookies))
        .await;
    assert_eq!(rejoin.status, 200, "{}", rejoin.text);
    assert_ne!(
        token_ticket(rejoin.body["token"].as_str().unwrap()),
        Some(1),
        "a new place"
    );
    assert_eq!(
        rejoin.body["notify"],
        Value::Null,
        "the ejected place's record is gone and did not follow: {}",
        rejoin.text
    );
    // Notifying on the ejected place itself is refused.
    let lapsed = post_notify(
        &app,
        json!({ "token": ejected_token, "email": ADDRESS }),
        Some(&ejected_cookies),
    )
    .await;
    assert_eq!(lapsed.status, 409, "{}", lapsed.text);
    assert_eq!(lapsed.code(), "place_lapsed");

    let purge = app.admin_post("/rooms/drop/purge", json!({})).await;
    assert_eq!(purge.status, 200, "{}", purge.text);
    let rejoin = app
        .join("drop", Some(&purged_token), Some(&purged_cookies))
        .await;
    assert_eq!(rejoin.body["notify"], Value::Null, "{}", rejoin.text);

    // Nobody's turn mails anybody now.
    flush(&app, "drop", 10).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(sink.received().is_empty(), "{:?}", sink.received());
}

#[tokio::test]
async fn a_rejoin_with_an_expired_pass_carries_the_record_to_the_new_place() {
    let sink = SmtpSink::start().await;
    let app = notify_app(&sink).await;
    app.create_room(room_body(
        "again",
        0,
        json!({ "passedTtlSec": 10, "name": "Again Room" }),
    ))
    .await;
    let (token, cookies) = registered_visitor(&app, "again").await;
    flush(&app, "again", 1).await;
    assert_eq!(sink.wait_for(1, Duration::from_secs(10)).await.len(), 1);
    wait_for_delivery(&app, "again", &token, &cookies, "sent").await;

    tokio::time::sleep(Duration::from_millis(10_500)).await;
    assert_eq!(app.status(&token).await.body["reason"], "expired");
    let rejoin = app.join("again", Some(&token), Some(&cookies)).await;
    assert_eq!(rejoin.status, 200, "{}", rejoin.text);
    let new_token = rejoin.body["token"].as_str().unwrap().to_owned();
    assert_eq!(token_ticket(&new_token), Some(2), "{}", rejoin.text);
    assert_eq!(rejoin.body["notify"]["emailMasked"], "j***@e***.com");
    assert_eq!(
        rejoin.body["notify"]["delivery"], "pending",
        "a new wait: {}",
        rejoin.text
    );

    flush(&app, "again", 1).await;
    let received = sink.wait_for(2, Duration::from_secs(10)).await;
    assert_eq!(received.len(), 2, "the new turn is mailed too");
    assert_turn_mail(&received[1], "Again Room");
}

#[tokio::test]
async fn a_re_created_room_carries_the_record_for_its_own_browser_only() {
    let sink = SmtpSink::start().await;
    let app = notify_app(&sink).await;
    app.create_room(room_body("reborn", 0, json!({}))).await;
    let (token, cookies) = registered_visitor(&app, "reborn").await;
    let deleted = app
        .admin_call(reqwest::Method::DELETE, "/rooms/reborn", None)
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.text);
    app.create_room(room_body("reborn", 0, json!({}))).await;

    // The old generation's token names no place to notify about.
    let stale = post_notify(
        &app,
        json!({ "token": token, "email": ADDRESS }),
        Some(&cookies),
    )
    .await;
    assert_eq!(stale.status, 409, "{}", stale.text);
    assert_eq!(stale.code(), "stale_ticket");

    // Another browser presenting the dead token (without its ownership cookie) does not take
    // the record along.
    let stranger = app.join("reborn", Some(&token), None).await;
    assert_eq!(stranger.status, 200, "{}", stranger.text);
    assert_eq!(stranger.body["notify"], Value::Null, "{}", stranger.text);

    let owner = app.join("reborn", Some(&token), Some(&cookies)).await;
    assert_eq!(owner.status, 200, "{}", owner.text);
    assert_eq!(
        owner.body["notify"]["emailMasked"], "j***@e***.com",
        "carried to the new line: {}",
        owner.text
    );
    assert_eq!(owner.body["notify"]["delivery"], "pending");
}

#[tokio::test]
async fn notify_refusals_carry_their_codes() {
    let sink = SmtpSink::start().await;
    let app = notify_app(&sink).await;
    app.create_room(room_body("refuse", 0, json!({}))).await;
    let (joined, cookies) = app.join_as_new_visitor("refuse").await;
    let token = joined.body["token"].as_str().unwrap().to_owned();
    let owner_only = cookies
        .split("; ")
        .find(|cookie| cookie.starts_with("qms_"))
        .unwrap()
        .to_owned();

    let not_json = app
        .send(
            app.http
                .post(format!("{}/api/notify", app.gateway))
                .header("content-type", "application/json")
                .body("{not json"),
        )
        .await;
    assert_eq!((not_json.status, not_json.code()), (400, "invalid_json"));

    let cases: Vec<(Value, Option<&str>, u16, &str)> = vec![
        (
            json!({ "token": 42, "email": ADDRESS }),
            Some(&cookies),
            400,
            "invalid_token_field",
        ),
        (
            json!({ "token": token, "email": "not-an-address" }),
            Some(&cookies),
            400,
            "invalid_email",
        ),
        (
            json!({ "token": token, "email": 7 }),
            Some(&cookies),
            400,
            "invalid_email",
        ),
        (
            json!({ "token": "forged.token", "email": ADDRESS }),
            Some(&cookies),
            401,
            "invalid_token",
        ),
        // No token and no queue cookie.
        (
            json!({ "email": ADDRESS }),
            Some(&owner_only),
            401,
            "invalid_token",
        ),
        (json!({ "email": ADDRESS }), None, 401, "invalid_token"),
        // A token without the browser that queued for it.
        (
            json!({ "token": token, "email": ADDRESS }),
            None,
            401,
            "invalid_token",
        ),
        (
            json!({ "roomId": "bad room", "email": ADDRESS }),
            Some(&cookies),
            400,
            "invalid_room_id",
        ),
    ];
    for (body, cookie_header, status, code) in cases {
        let reply = post_notify(&app, body.clone(), cookie_header).await;
        assert_eq!(reply.status, status, "{body}: {}", reply.text);
        assert_eq!(reply.code(), code, "{body}: {}", reply.text);
        assert!(reply.body["error"].is_string(), "{}", reply.text);
        assert!(!reply.text.contains(ADDRESS), "{}", reply.text);
    }
    // A wrong ownership cookie is no better than none.
    let wrong_owner = format!("qm_refuse={token}; qms_refuse=abcdefghijklmnopqrstuvwxyz012345");
    let reply = post_notify(&app, json!({ "email": ADDRESS }), Some(&wrong_owner)).await;
    assert_eq!(
        (reply.status, reply.code()),
        (401, "invalid_token"),
        "{}",
        reply.text
    );
    // With roomId and the cookie, no token is needed.
    let by_room = post_notify(
        &app,
        json!({ "roomId": "refuse", "email": ADDRESS }),
        Some(&cookies),
    )
    .await;
    assert_eq!(by_room.status, 200, "{}", by_room.text);
}

#[tokio::test]
async fn the_address_never_appears_in_the_logs() {
    let (captured, _guard) = Captured::start(tracing::Level::TRACE);

    let sink = SmtpSink::start().await;
    sink.refuse_next(1);
    let app = notify_app(&sink).await;
    app.create_room(room_body("quiet", 0, json!({}))).await;
    let (token, cookies) = registered_visitor(&app, "quiet").await;
    let bad = post_notify(
        &app,
        json!({ "token": token, "email": "jane doe@example.com" }),
        Some(&cookies),
    )
    .await;
    assert_eq!(bad.code(), "invalid_email");
    flush(&app, "quiet", 1).await;
    assert_eq!(sink.wait_for(1, Duration::from_secs(15)).await.len(), 1);
    wait_for_delivery(&app, "quiet", &token, &cookies, "sent").await;
    app.stop().await;

    let logs = captured.text();
    assert!(
        logs.contains("turn notification sent"),
        "the capture works: {} bytes",
        logs.len()
    );
    for secret in [ADDRESS, "jane.doe", "jane doe", "example.com"] {
        assert!(!logs.contains(secret), "{secret:?} appears in the logs");
    }
}

#[tokio::test]
async fn two_engines_sharing_one_journal_send_a_turn_mail_once() {
    // Always on the durable store: the lease that keeps engines from sending twice lives in
    // Postgres.
    let sink = SmtpSink::start().await;
    let url = sink.url();
    let notify_env = [("EMAIL_NOTIFY", "1"), ("SMTP_URL", url.as_str())];
    let backing = Backing::start(ValkeyOptions::default()).await;
    let shared_env = backing.env();
    let first = spawn_app_on(Some(backing), &notify_env).await;
    let mut second_env: Vec<(&str, &str)> = shared_env
        .iter()
        .map(|(key, value)| (key.as_str(), value.as_str()))
        .collect();
    second_env.extend(notify_env);
    let second = spawn_app_on(None, &second_env).await;

    first
        .create_room(room_body("shared", 0, json!({ "name": "Shared Room" })))
        .await;
    let (token, cookies) = registered_visitor(&first, "shared").await;
    // The second engine knows the place and its record.
    let mut seen = Value::Null;
    for _ in 0..50 {
        seen = second
            .join("shared", Some(&token), Some(&cookies))
            .await
            .body["notify"]
            .clone();
        if seen.is_object() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(seen["emailMasked"], "j***@e***.com", "{seen}");

    flush(&first, "shared", 1).await;
    let received = sink.wait_for(1, Duration::from_secs(10)).await;
    assert_eq!(received.len(), 1);
    assert_turn_mail(&received[0], "Shared Room");
    wait_for_delivery(&second, "shared", &token, &cookies, "sent").await;
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert_eq!(sink.received().len(), 1, "both engines scanned; one sent");
    second.stop().await;
    first.stop().await;
}

#[tokio::test]
async fn a_notification_filed_on_a_pre_queue_handle_follows_the_drawn_ticket() {
    let sink = SmtpSink::start().await;
    let app = notify_app(&sink).await;
    let opens_at = qm_core::clock::now_ms() + 3_600_000;
    app.create_room(room_body(
        "drawmail",
        0,
        json!({ "name": "Midnight Drop", "opensAt": opens_at }),
    ))
    .await;
    let (token, cookies) = registered_visitor(&app, "drawmail").await;
    assert!(token_ticket(&token).is_none(), "registered on a handle");
    let joined = app.join("drawmail", Some(&token), Some(&cookies)).await;
    assert_eq!(joined.body["preQueued"], true, "{}", joined.text);
    assert_eq!(
        joined.body["notify"]["delivery"], "pending",
        "{}",
        joined.text
    );

    let opened = app
        .admin_post(
            "/rooms/drawmail/schedule",
            json!({ "opensAt": qm_core::clock::now_ms() + 200 }),
        )
        .await;
    assert_eq!(opened.status, 200, "{}", opened.text);
    // The handle's join after the draw names the drawn ticket, and the record came with it.
    let mut exchanged = Value::Null;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let reply = app.join("drawmail", Some(&token), Some(&cookies)).await;
        if reply.status == 200 && reply.body["position"].is_u64() {
            exchanged = reply.body.clone();
            break;
        }
    }
    assert_eq!(exchanged["position"], 1, "{exchanged}");
    let ticket_token = exchanged["token"].as_str().expect("token");
    assert_eq!(token_ticket(ticket_token), Some(1));
    assert_eq!(exchanged["notify"]["delivery"], "pending", "{exchanged}");

    flush(&app, "drawmail", 1).await;
    let received = sink.wait_for(1, Duration::from_secs(10)).await;
    assert_eq!(received.len(), 1, "{received:?}");
    assert_turn_mail(&received[0], "Midnight Drop");
}
