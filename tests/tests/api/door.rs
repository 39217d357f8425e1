//! Door sessions at GET /api/check: the pass that opens one answers `sess`, the key carries the
//! visitor page after page, idle and absolute ends, eject, `clearToken`, the three ways a key
//! is replayed, and what a copied token, key or cookie can do (OPERATIONS.md, How a pass is
//! bound to a visitor).

use std::time::Duration;

use qm_tests::{Reply, TestApp, room_body, spawn_app, spawn_app_with};
use serde_json::{Value, json};

/// A visitor of `room` who joined (its cookies) and was admitted by a flush: (token, cookies).
async fn admitted_visitor(app: &TestApp, room: &str) -> (String, String) {
    let (reply, cookies) = app.join_as_new_visitor(room).await;
    let token = reply.body["token"].as_str().expect("token").to_owned();
    let flushed = app
        .admin_post(&format!("/rooms/{room}/flush"), json!({ "count": 1 }))
        .await;
    assert_eq!(flushed.status, 200, "{}", flushed.text);
    (token, cookies)
}

/// GET /api/check for `room` with these query pairs and headers.
async fn check(
    app: &TestApp,
    room: &str,
    query: &[(&str, &str)],
    headers: &[(&str, &str)],
) -> Reply {
    let mut request = app
        .http
        .get(format!("{}/api/check", app.gateway))
        .query(&[("roomId", room)])
        .query(query);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    app.send(request).await
}

async fn with_key(app: &TestApp, room: &str, key: &str) -> Reply {
    check(app, room, &[], &[("x-qm-session", key)]).await
}

fn verdict(reply: &Reply) -> (u16, &str, &str, bool) {
    (
        reply.status,
        reply.body["action"].as_str().unwrap_or(""),
        reply.body["reason"].as_str().unwrap_or(""),
        reply.body["clearToken"] == json!(true),
    )
}

fn key_of(reply: &Reply) -> String {
    reply.body["sess"]
        .as_str()
        .unwrap_or_else(|| panic!("the opening pass carries sess: {}", reply.text))
        .to_owned()
}

fn minted(room: &Value) -> u64 {
    room["nextTicket"].as_u64().expect("nextTicket")
}

#[tokio::test]
async fn a_door_session_carries_the_visitor_through_fifty_pages_without_a_new_place() {
    let app = spawn_app().await;
    app.create_room(room_body("pages", 0, json!({}))).await;
    let (token, _) = admitted_visitor(&app, "pages").await;
    let opened = check(&app, "pages", &[("token", &token)], &[]).await;
    assert_eq!(
        verdict(&opened),
        (200, "pass", "passed", false),
        "{}",
        opened.text
    );
    let key = key_of(&opened);
    let before = minted(&app.room("pages").await);
    for page in 0..50 {
        let url = format!("https://shop.example.com/page/{page}");
        let reply = check(&app, "pages", &[("url", &url)], &[("x-qm-session", &key)]).await;
        assert_eq!(
            verdict(&reply),
            (200, "pass", "session", false),
            "{}",
            reply.text
        );
        assert!(reply.body.get("sess").is_none(), "a key is handed out once");
    }
    let room = app.room("pages").await;
    assert_eq!(minted(&room), before, "no page check minted a place");
    assert_eq!(room["waiting"], 0);
    assert_eq!(room["doorSessions"], 1, "{room}");
}

#[tokio::test]
async fn the_key_is_accepted_as_header_query_or_inline_cookie_and_a_malformed_one_is_refused() {
    let app = spawn_app().await;
    app.create_room(room_body("ways", 0, json!({}))).await;
    let (token, _) = admitted_visitor(&app, "ways").await;
    let key = key_of(&check(&app, "ways", &[("token", &token)], &[]).await);
    let by_query = check(&app, "ways", &[("sess", &key)], &[]).await;
    assert_eq!(verdict(&by_query), (200, "pass", "session", false));
    let cookie = format!("qm_dk_ways={key}");
    let by_cookie = check(&app, "ways", &[], &[("cookie", &cookie)]).await;
    assert_eq!(verdict(&by_cookie), (200, "pass", "session", false));
    for malformed in ["short", "has space in it, sixteen+", &"k".repeat(129)] {
        let reply = with_key(&app, "ways", malformed).await;
        assert_eq!(
            (reply.status, reply.code()),
            (400, "invalid_session"),
            "{malformed:?}"
        );
        assert!(reply.body.get("sess").is_none());
    }
    let by_query = check(&app, "ways", &[("sess", "not a key")], &[]).await;
    assert_eq!((by_query.status, by_query.code()), (400, "invalid_session"));
}

#[tokio::test]
async fn a_forged_or_another_rooms_key_is_refused_and_told_to_clear() {
    let app = spawn_app().await;
    for room in ["one", "two"] {
        app.create_room(room_body(room, 0, json!({}))).await;
    }
    let (token, _) = admitted_visitor(&app, "one").await;
    let key = key_of(&check(&app, "one", &[("token", &token)], &[]).await);
    let elsewhere = with_key(&app, "two", &key).await;
    assert_eq!(
        verdict(&elsewhere),
        (200, "queue", "session_ended", true),
        "{}",
        elsewhere.text
    );
    assert!(elsewhere.body["waitingRoomUrl"].as_str().is_some());
    let forged = with_key(&app, "one", &"A".repeat(43)).await;
    assert_eq!(verdict(&forged), (200, "queue", "session_ended", true));
}

#[tokio::test]
async fn an_ejected_visitors_session_ends_and_the_token_is_dead_too() {
    let app = spawn_app().await;
    app.create_room(room_body("eject", 0, json!({}))).await;
    let (token, _) = admitted_visitor(&app, "eject").await;
    let key = key_of(&check(&app, "eject", &[("token", &token)], &[]).await);
    let ticket = crate::token_ticket(&token).expect("ticket");
    let ejected = app
        .admin_post("/rooms/eject/eject", json!({ "ticket": ticket }))
        .await;
    assert_eq!(ejected.status, 200, "{}", ejected.text);
    let reply = with_key(&app, "eject", &key).await;
    assert_eq!(
        verdict(&reply),
        (200, "queue", "session_ended", true),
        "{}",
        reply.text
    );
    let again = check(&app, "eject", &[("token", &token)], &[]).await;
    assert_eq!(verdict(&again), (200, "queue", "ejected", true));
}

#[tokio::test]
async fn an_idle_session_ends_after_session_ttl_and_a_busy_one_at_session_max() {
    let app = spawn_app().await;
    app.create_room(room_body("idle", 0, json!({ "sessionTtlSec": 10 })))
        .await;
    app.create_room(room_body(
        "busy",
        0,
        json!({ "sessionTtlSec": 10, "sessionMaxSec": 12 }),
    ))
    .await;
    let (idle_token, _) = admitted_visitor(&app, "idle").await;
    let (busy_token, _) = admitted_visitor(&app, "busy").await;
    let idle_key = key_of(&check(&app, "idle", &[("token", &idle_token)], &[]).await);
    let busy_key = key_of(&check(&app, "busy", &[("token", &busy_token)], &[]).await);
    // The busy visitor checks every two seconds; the idle one once, early.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        with_key(&app, "idle", &idle_key).await.body["action"],
        "pass"
    );
    for _ in 0..4 {
        assert_eq!(
            with_key(&app, "busy", &busy_key).await.body["action"],
            "pass"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    // 10 s after its open, the busy one is still in; past 12 s it is out however busy.
    assert_eq!(
        with_key(&app, "busy", &busy_key).await.body["action"],
        "pass"
    );
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let ended = with_key(&app, "busy", &busy_key).await;
    assert_eq!(
        verdict(&ended),
        (200, "queue", "session_ended", true),
        "{}",
        ended.text
    );
    // The idle one was last used at +2 s: out by +14.5 s (10 s idle plus a quarter of slack).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle = with_key(&app, "idle", &idle_key).await;
    assert_eq!(
        verdict(&idle),
        (200, "queue", "session_ended", true),
        "{}",
        idle.text
    );
    // Neither token opens another session: each pass was spent.
    let spent = check(&app, "idle", &[("token", &idle_token)], &[]).await;
    assert_eq!(verdict(&spent).1, "queue");
    assert!(spent.body.get("sess").is_none());
}

#[tokio::test]
async fn a_session_holds_its_slot_past_the_pass_window_and_gives_it_back_when_it_ends() {
    let app = spawn_app().await;
    app.create_room(room_body(
        "slots",
        600,
        json!({ "maxConcurrent": 1, "passedTtlSec": 10, "sessionTtlSec": 10,
                "presenceSec": null }),
    ))
    .await;
    let (first, _) = app.join_as_new_visitor("slots").await;
    let first_token = first.body["token"].as_str().expect("token").to_owned();
    // Admitted by the clock at once (rate 600, one free slot).
    let key = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let reply = check(&app, "slots", &[("token", &first_token)], &[]).await;
            if reply.body["action"] == "pass" {
                break key_of(&reply);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
    .expect("the first visitor is admitted");
    let (second, _) = app.join_as_new_visitor("slots").await;
    let second_token = second.body["token"].as_str().expect("token").to_owned();
    // 14 s of browsing (past the 10 s pass window): the session keeps the only slot.
    for _ in 0..7 {
        assert_eq!(with_key(&app, "slots", &key).await.body["action"], "pass");
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let waiting = check(&app, "slots", &[("token", &second_token)], &[]).await;
    assert_eq!(verdict(&waiting).2, "waiting", "{}", waiting.text);
    // The first visitor leaves; once the session ends the slot admits the second.
    let admitted = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let reply = check(&app, "slots", &[("token", &second_token)], &[]).await;
            if reply.body["action"] == "pass" {
                break reply;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
    .await
    .expect("the slot is given back when the session ends");
    assert!(admitted.body["sess"].as_str().is_some());
}

/// OPERATIONS.md, How a pass is bound to a visitor: each claim made there, tried as a hostile
/// client would (other addresses, a vouching connector, no cookies).
#[tokio::test]
async fn a_copied_token_admits_once_a_copied_key_is_a_bearer_credential_and_the_cookie_reclaims() {
    let app = spawn_app_with(&[("TRUSTED_PROXIES", "127.0.0.1")]).await;
    app.create_room(room_body("bound", 0, json!({}))).await;
    let (token, cookies) = admitted_visitor(&app, "bound").await;
    // The visitor's own first check spends the pass into a session.
    let opened = check(
        &app,
        "bound",
        &[("token", &token)],
        &[("x-forwarded-for", "198.51.100.1")],
    )
    .await;
    let key = key_of(&opened);
    // The token copied to five other addresses, no cookie: refused every time, nothing minted.
    for host in 2..7 {
        let address = format!("198.51.100.{host}");
        let copied = check(
            &app,
            "bound",
            &[("token", &token)],
            &[("x-forwarded-for", &address)],
        )
        .await;
        assert_eq!(
            verdict(&copied),
            (200, "queue", "pass_spent", true),
            "{}",
            copied.text
        );
        assert!(copied.body.get("sess").is_none());
    }
    // Through a vouching connector for another address: refused too.
    let vouched = check(
        &app,
        "bound",
        &[("token", &token), ("ip", "203.0.113.50"), ("agent", "curl")],
        &[("authorization", "Bearer public-api-key-0123")],
    )
    .await;
    assert_eq!(
        verdict(&vouched),
        (200, "queue", "pass_spent", true),
        "{}",
        vouched.text
    );
    // The key is a bearer credential: it admits from any address until the session ends.
    let elsewhere = check(
        &app,
        "bound",
        &[],
        &[("x-qm-session", &key), ("x-forwarded-for", "192.0.2.77")],
    )
    .await;
    assert_eq!(verdict(&elsewhere), (200, "pass", "session", false));
    // The token with the browser's ownership cookie reclaims the live session under a new key,
    // and the old key (wherever it was copied) stops working.
    let reclaimed = check(&app, "bound", &[("token", &token)], &[("cookie", &cookies)]).await;
    assert_eq!(
        verdict(&reclaimed),
        (200, "pass", "passed", false),
        "{}",
        reclaimed.text
    );
    let new_key = key_of(&reclaimed);
    assert_ne!(new_key, key);
    assert_eq!(
        verdict(&with_key(&app, "bound", &key).await).2,
        "session_ended"
    );
    assert_eq!(verdict(&with_key(&app, "bound", &new_key).await).1, "pass");
    // The ownership cookie without the token proves nothing at the door.
    let cookie_only: String = cookies
        .split("; ")
        .filter(|pair| pair.starts_with("qms_"))
        .collect();
    let alone = check(&app, "bound", &[], &[("cookie", &cookie_only)]).await;
    assert_eq!(verdict(&alone), (200, "queue", "no_token", false));
}
