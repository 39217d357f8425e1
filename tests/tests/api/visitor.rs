//! POST /api/join and GET /api/status: places, cookies, ownership, generations, refusals.

use qm_tests::{room_body, spawn_app, spawn_app_with};
use serde_json::json;

use crate::{token_generation, token_ticket};

#[tokio::test]
async fn join_answers_a_place_and_sets_both_cookies_on_path_root() {
    let app = spawn_app().await;
    app.create_room(room_body("launch", 0, json!({}))).await;
    let reply = app.join("launch", None, None).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.body["position"], 1);
    assert_eq!(reply.body["ahead"], 0);
    assert_eq!(reply.body["state"], "active");
    assert!(
        reply.body["etaSec"].is_null(),
        "rate 0 admits nobody: {}",
        reply.text
    );
    let token = reply.body["token"].as_str().expect("token");
    assert_eq!(token_ticket(token), Some(1));

    let cookies = reply.set_cookies();
    let queue_cookie = cookies
        .iter()
        .find(|c| c.starts_with("qm_launch="))
        .expect("qm_launch set");
    let owner_cookie = cookies
        .iter()
        .find(|c| c.starts_with("qms_launch="))
        .expect("qms_launch set");
    assert!(queue_cookie.contains("Path=/"), "{queue_cookie}");
    assert!(owner_cookie.contains("Path=/"), "{owner_cookie}");
    assert!(owner_cookie.contains("HttpOnly"), "{owner_cookie}");
    assert_eq!(reply.cookie("qm_launch").as_deref(), Some(token));
    let session = reply.cookie("qms_launch").expect("session id");
    assert!((16..=128).contains(&session.len()));
}

#[tokio::test]
async fn positions_follow_arrival_and_eta_follows_the_rate() {
    let app = spawn_app().await;
    app.create_room(room_body("line", 0, json!({ "state": "paused" })))
        .await;
    for expected in 1..=5u64 {
        let (reply, _) = app.join_as_new_visitor("line").await;
        assert_eq!(reply.body["position"], expected);
        assert_eq!(reply.body["ahead"], expected - 1);
        assert_eq!(reply.body["state"], "paused");
        assert!(
            reply.body["etaSec"].is_null(),
            "a paused room quotes no wait"
        );
    }
    app.admin_post("/rooms/line/rate", json!({ "ratePerMinute": 60 }))
        .await;
    app.admin_post("/rooms/line/state", json!({ "state": "active" }))
        .await;
    // Tickets are not admitted while we look: rate 60 promotes one a second, so look at a late one.
    let (reply, _) = app.join_as_new_visitor("line").await;
    let position = reply.body["position"].as_u64().expect("position");
    assert_eq!(
        reply.body["etaSec"].as_u64(),
        Some(position),
        "60/min admits one per second"
    );
}

#[tokio::test]
async fn a_rejoin_keeps_its_place_only_with_the_ownership_cookie() {
    let app = spawn_app().await;
    app.create_room(room_body("own", 0, json!({}))).await;
    let (first, cookies) = app.join_as_new_visitor("own").await;
    let token = first.body["token"].as_str().unwrap().to_owned();
    app.join_as_new_visitor("own").await;

    // Same browser (cookies): same ticket, same token.
    let again = app.join("own", None, Some(&cookies)).await;
    assert_eq!(again.status, 200);
    assert_eq!(again.body["position"], 1);
    assert_eq!(again.body["token"].as_str(), Some(token.as_str()));
    // Token in the body plus the ownership cookie: same place.
    let session = cookies
        .split("; ")
        .find(|c| c.starts_with("qms_own="))
        .unwrap();
    let body_token = app.join("own", Some(&token), Some(session)).await;
    assert_eq!(body_token.body["position"], 1);

    // The token alone, from a browser that did not queue for it: a new place at the back.
    let stolen = app.join("own", Some(&token), None).await;
    assert_eq!(stolen.status, 200);
    assert_eq!(stolen.body["position"], 3);
    assert_ne!(
        token_ticket(stolen.body["token"].as_str().unwrap()),
        Some(1)
    );
}

#[tokio::test]
async fn a_bad_token_is_no_claim_and_buys_a_fresh_place() {
    let app = spawn_app().await;
    app.create_room(room_body("fresh", 0, json!({}))).await;
    let reply = app.join("fresh", Some("not-a-token"), None).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body["position"], 1);
}

#[tokio::test]
async fn join_refusals_carry_their_codes() {
    let app = spawn_app().await;
    app.create_room(room_body("refuse", 0, json!({}))).await;
    let url = format!("{}/api/join", app.gateway);
    let cases = [
        (json!({}), 400, "invalid_room_id"),
        (json!({ "roomId": "bad room" }), 400, "invalid_room_id"),
        (json!({ "roomId": 7 }), 400, "invalid_room_id"),
        (
            json!({ "roomId": "refuse", "token": 12 }),
            400,
            "invalid_token_field",
        ),
        (json!({ "roomId": "nowhere" }), 404, "room_not_found"),
    ];
    for (body, status, code) in cases {
        let reply = app.send(app.http.post(&url).json(&body)).await;
        assert_eq!(reply.status, status, "{body}: {}", reply.text);
        assert_eq!(reply.code(), code, "{body}");
        assert!(
            reply.body["error"].is_string(),
            "{{error, code}} envelope: {}",
            reply.text
        );
    }
    let malformed = app
        .send(
            app.http
                .post(&url)
                .header("content-type", "application/json")
                .body("{nope"),
        )
        .await;
    assert_eq!(malformed.status, 400);
    assert_eq!(malformed.code(), "invalid_json");
    // Nothing was lost: the room still hands out ticket 1.
    assert_eq!(app.join("refuse", None, None).await.body["position"], 1);
}

#[tokio::test]
async fn joins_past_join_limit_per_min_are_refused_with_retry_after() {
    let app = spawn_app_with(&[("JOIN_LIMIT_PER_MIN", "3")]).await;
    app.create_room(room_body("limited", 0, json!({}))).await;
    for _ in 0..3 {
        assert_eq!(app.join("limited", None, None).await.status, 200);
    }
    let refused = app.join("limited", None, None).await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.code(), "rate_limited");
    assert!(refused.header("retry-after").is_some());
    assert!(
        refused.cookie("qm_limited").is_none(),
        "a refusal hands out nothing"
    );
}

#[tokio::test]
async fn status_reads_the_place_from_the_token_or_the_cookie() {
    let app = spawn_app().await;
    app.create_room(room_body("st", 0, json!({}))).await;
    app.join_as_new_visitor("st").await;
    let (reply, cookies) = app.join_as_new_visitor("st").await;
    let token = reply.body["token"].as_str().unwrap();

    let by_query = app.status(token).await;
    assert_eq!(by_query.status, 200, "{}", by_query.text);
    assert_eq!(by_query.body["position"], 2);
    assert_eq!(by_query.body["ahead"], 1);
    assert_eq!(by_query.body["passed"], false);
    assert_eq!(by_query.body["state"], "active");

    let by_cookie = app
        .send(
            app.http
                .get(format!("{}/api/status?roomId=st", app.gateway))
                .header("cookie", &cookies),
        )
        .await;
    assert_eq!(by_cookie.body["position"], 2, "{}", by_cookie.text);

    let none = app.get(&format!("{}/api/status", app.gateway)).await;
    assert_eq!((none.status, none.code()), (401, "invalid_token"));
    let forged = app.status(&format!("{}x", token)).await;
    assert_eq!((forged.status, forged.code()), (401, "invalid_token"));
    let other_secret =
        qm_core::token::Keyring::new("another-secret-0123456789".to_owned().into(), None, false);
    let foreign = other_secret.sign_visitor(&qm_core::token::VisitorClaims {
        room_id: "st".into(),
        place: qm_core::token::VisitorPlace::Ticket(1),
        generation: token_generation(token).unwrap(),
        iat: qm_core::clock::now_ms(),
    });
    assert_eq!(app.status(&foreign).await.status, 401);
}

#[tokio::test]
async fn a_flushed_ticket_reads_passed_with_its_redirect() {
    let app = spawn_app().await;
    app.create_room(room_body("pass", 0, json!({}))).await;
    let (reply, _) = app.join_as_new_visitor("pass").await;
    let token = reply.body["token"].as_str().unwrap();
    let flush = app
        .admin_post("/rooms/pass/flush", json!({ "count": 1 }))
        .await;
    assert_eq!(flush.status, 200, "{}", flush.text);
    let status = app.status(token).await;
    assert_eq!(status.body["passed"], true, "{}", status.text);
    assert_eq!(status.body["redirectUrl"], "https://shop.example/checkout");
}

#[tokio::test]
async fn ejected_and_purged_places_read_expired() {
    let app = spawn_app().await;
    app.create_room(room_body("gone", 0, json!({}))).await;
    let (first, _) = app.join_as_new_visitor("gone").await;
    let (second, _) = app.join_as_new_visitor("gone").await;
    let (third, _) = app.join_as_new_visitor("gone").await;
    let eject = app
        .admin_post("/rooms/gone/eject", json!({ "ticket": 1 }))
        .await;
    assert_eq!(eject.status, 200, "{}", eject.text);
    let ejected = app.status(first.body["token"].as_str().unwrap()).await;
    assert_eq!(ejected.status, 200);
    assert_eq!(ejected.body["expired"], true, "{}", ejected.text);
    assert_eq!(ejected.body["reason"], "ejected");
    // The ejected place no longer counts ahead of anyone.
    assert_eq!(
        app.status(second.body["token"].as_str().unwrap())
            .await
            .body["position"],
        1
    );

    let purge = app.admin_post("/rooms/gone/purge", json!({})).await;
    assert_eq!(purge.status, 200, "{}", purge.text);
    assert_eq!(purge.body["purged"], 2);
    let purged = app.status(third.body["token"].as_str().unwrap()).await;
    assert_eq!(purged.body["expired"], true);
    assert_eq!(purged.body["reason"], "purged");
}

#[tokio::test]
async fn a_re_created_room_has_a_new_generation_and_old_tokens_lapse() {
    let app = spawn_app().await;
    app.create_room(room_body("gen", 0, json!({}))).await;
    let (reply, cookies) = app.join_as_new_visitor("gen").await;
    let old_token = reply.body["token"].as_str().unwrap().to_owned();
    let old_generation = token_generation(&old_token).unwrap();

    let deleted = app
        .admin_call(reqwest::Method::DELETE, "/rooms/gen", None)
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.text);
    let while_gone = app.status(&old_token).await;
    assert_eq!(
        while_gone.body,
        json!({ "expired": true, "reason": "room_reset" })
    );

    app.create_room(room_body("gen", 0, json!({}))).await;
    let lapsed = app.status(&old_token).await;
    assert_eq!(lapsed.status, 200);
    assert_eq!(lapsed.body["expired"], true);
    assert_eq!(lapsed.body["reason"], "room_reset");

    // Joining with the old token (and its cookies) gets a place in the new line.
    let rejoin = app.join("gen", Some(&old_token), Some(&cookies)).await;
    assert_eq!(rejoin.status, 200, "{}", rejoin.text);
    let new_token = rejoin.body["token"].as_str().unwrap();
    assert!(token_generation(new_token).unwrap() > old_generation);
    assert_eq!(rejoin.body["position"], 1);
}

#[tokio::test]
async fn a_bypass_room_passes_everyone_with_ticket_zero() {
    let app = spawn_app().await;
    app.create_room(room_body("open", 0, json!({ "state": "bypass" })))
        .await;
    let reply = app.join("open", None, None).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body["state"], "bypass");
    assert_eq!(reply.body["passed"], true, "{}", reply.text);
    assert_eq!(token_ticket(reply.body["token"].as_str().unwrap()), Some(0));
    assert_eq!(
        app.room("open").await["waiting"],
        0,
        "a bypass pass holds no place"
    );
}

#[tokio::test]
async fn the_queue_host_keeps_at_most_room_cookie_cap_rooms_of_cookies() {
    let app = spawn_app_with(&[("ROOM_COOKIE_CAP", "3")]).await;
    let mut jar: Vec<String> = Vec::new();
    for index in 0..4 {
        let id = format!("cap{index}");
        app.create_room(room_body(&id, 0, json!({}))).await;
        let reply = app.join(&id, None, Some(&jar.join("; "))).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        for cookie in reply.set_cookies() {
            let pair = cookie.split(';').next().unwrap().to_owned();
            let name = pair.split('=').next().unwrap().to_owned();
            jar.retain(|existing| !existing.starts_with(&format!("{name}=")));
            if !cookie.contains("Max-Age=0") {
                jar.push(pair);
            }
        }
        // Distinct iat values order the rooms.
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let rooms: std::collections::BTreeSet<String> = jar
        .iter()
        .filter_map(|pair| pair.split('=').next())
        .filter_map(|name| {
            name.strip_prefix("qms_")
                .or_else(|| name.strip_prefix("qm_"))
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(rooms.len(), 3, "{jar:?}");
    assert!(
        !rooms.contains("cap0"),
        "the oldest room's cookies were expired: {jar:?}"
    );
}

#[tokio::test]
async fn before_the_doors_open_every_answer_quotes_the_clock_plus_the_drain() {
    let app = spawn_app().await;
    // One ticket held before the drop was scheduled; then a pre-queue entry. At 1/min that
    // ticket is not let through while the test runs (a faster room could admit it before the
    // drop is scheduled on a loaded machine, and the drain would read 0).
    app.create_room(room_body("soon", 1, json!({}))).await;
    app.join_as_new_visitor("soon").await;
    let opens_at = qm_core::clock::now_ms() + 600_000;
    let scheduled = app
        .admin_post("/rooms/soon/schedule", json!({ "opensAt": opens_at }))
        .await;
    assert_eq!(scheduled.status, 200, "{}", scheduled.text);
    let (reply, _) = app.join_as_new_visitor("soon").await;
    assert_eq!(reply.body["state"], "scheduled", "{}", reply.text);
    assert_eq!(reply.body["preQueued"], true, "{}", reply.text);
    assert_eq!(reply.body["opensAt"], opens_at);
    assert!(
        reply.body["now"].is_i64(),
        "a frame with a server instant carries now"
    );
    let token = reply.body["token"].as_str().unwrap().to_owned();
    let join_eta = reply.body["etaSec"].as_u64().expect("a number");
    // 600 s on the clock, then the drain of the one ticket already held (the draw decides
    // the rest, so nothing is added for it): 60 s at 1/min.
    assert!((660..=661).contains(&join_eta), "{join_eta}");

    let status = app.status(&token).await;
    let status_eta = status.body["etaSec"]
        .as_u64()
        .expect("status quotes the same sum");
    let mut stream = app.events("/events", &token).await.expect("stream opens");
    let frame = stream
        .next_frame(std::time::Duration::from_secs(3))
        .await
        .expect("first frame");
    let stream_eta = frame.data["etaSec"]
        .as_u64()
        .expect("the stream quotes the same sum");
    for eta in [status_eta, stream_eta] {
        assert!(
            eta.abs_diff(join_eta) <= 1,
            "join {join_eta}, status {status_eta}, stream {stream_eta}"
        );
    }
    // The operator's floor: the clock plus the drain of the one ticket holder.
    let room = app.room("soon").await;
    let estimate = room["estWaitSec"].as_u64().expect("estWaitSec");
    assert!((660..=661).contains(&estimate), "{room}");
    assert_eq!(room["estWaitFloor"], true);
}

#[tokio::test]
async fn an_address_holds_at_most_queue_max_per_ip_places_and_a_refusal_hands_out_nothing() {
    let app = spawn_app().await;
    app.create_room(room_body("few", 0, json!({ "queueMaxPerIp": 2 })))
        .await;
    app.join_as_new_visitor("few").await;
    let (_, cookies) = app.join_as_new_visitor("few").await;
    let refused = app.join("few", None, None).await;
    assert_eq!(refused.status, 429, "{}", refused.text);
    assert_eq!(refused.code(), "queue_identity_limit");
    assert!(refused.body.get("token").is_none());
    assert!(
        refused.set_cookies().is_empty(),
        "nothing spendable: {:?}",
        refused.set_cookies()
    );
    // A place already held is still answered.
    assert_eq!(
        app.join("few", None, Some(&cookies)).await.body["position"],
        2
    );
}

#[tokio::test]
async fn oversized_and_non_json_bodies_are_refused_with_their_codes() {
    let app = spawn_app().await;
    app.create_room(room_body("body", 0, json!({}))).await;
    let url = format!("{}/api/join", app.gateway);
    let huge = json!({ "roomId": "body", "padding": "x".repeat(20_000) });
    let too_large = app.send(app.http.post(&url).json(&huge)).await;
    assert_eq!(
        (too_large.status, too_large.code()),
        (413, "payload_too_large"),
        "{}",
        too_large.text
    );
    let form = app
        .send(
            app.http
                .post(&url)
                .header("content-type", "application/x-www-form-urlencoded")
                .body("roomId=body"),
        )
        .await;
    assert_eq!(
        (form.status, form.code()),
        (415, "unsupported_media_type"),
        "{}",
        form.text
    );
}
