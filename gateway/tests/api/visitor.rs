//! POST /api/join and GET /api/status: places, cookies and the cookie cap, refusals.

use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::future::join_all;

use serde_json::{Value, json};

use crate::fake_engine::TARGET_URL;
use crate::harness::spawn_gateway;

#[tokio::test]
async fn join_sets_both_cookies_and_a_rejoin_keeps_the_place_only_with_them() {
    let gateway = spawn_gateway(&[]).await;
    gateway.engine.create_room("launch", "active", 0);
    let (first, cookies) = gateway.join_as_new_visitor("launch").await;
    assert_eq!(first.body["position"], 1);
    assert_eq!(first.body["ahead"], 0);
    assert_eq!(first.body["etaSec"], Value::Null);
    assert_eq!(first.body["state"], "active");
    assert_eq!(first.body["passed"], false);
    let token = first.body["token"].as_str().unwrap().to_owned();
    let set_cookies = first.set_cookies();
    let queue = set_cookies
        .iter()
        .find(|c| c.starts_with("qm_launch="))
        .unwrap();
    let owner = set_cookies
        .iter()
        .find(|c| c.starts_with("qms_launch="))
        .unwrap();
    assert!(
        queue.contains("Path=/")
            && queue.contains("SameSite=Lax")
            && queue.contains("Max-Age=86400"),
        "{queue}"
    );
    assert!(
        !queue.contains("HttpOnly"),
        "the page may read its token cookie: {queue}"
    );
    assert!(
        owner.contains("HttpOnly") && owner.contains("Path=/"),
        "{owner}"
    );
    assert!(!queue.contains("Secure"));
    assert_eq!(first.header("cache-control"), Some("no-store"));

    let again = gateway.join("launch", Some(&cookies)).await;
    assert_eq!(
        again.body["token"].as_str(),
        Some(token.as_str()),
        "same browser, same token"
    );
    assert_eq!(again.body["position"], 1);
    let stolen = gateway
        .send(
            gateway
                .http
                .post(format!("{}/api/join", gateway.url))
                .json(&json!({ "roomId": "launch", "token": token })),
        )
        .await;
    assert_eq!(
        stolen.body["position"], 2,
        "a token without its browser is a new place"
    );

    let https = gateway
        .send(
            gateway
                .http
                .post(format!("{}/api/join", gateway.url))
                .header("x-forwarded-proto", "https")
                .json(&json!({ "roomId": "launch" })),
        )
        .await;
    assert!(
        https
            .set_cookies()
            .iter()
            .all(|cookie| cookie.contains("; Secure")),
        "{:?}",
        https.set_cookies()
    );
}

#[tokio::test]
async fn join_refusals_and_body_rules() {
    let gateway = spawn_gateway(&[("JOIN_LIMIT_PER_MIN", "6")]).await;
    gateway.engine.create_room("r", "active", 60);
    let url = format!("{}/api/join", gateway.url);
    let cases = [
        (json!({ "roomId": "bad room" }), 400, "invalid_room_id"),
        (
            json!({ "roomId": "r", "token": 5 }),
            400,
            "invalid_token_field",
        ),
        (json!({ "roomId": "nowhere" }), 404, "room_not_found"),
    ];
    for (body, status, code) in cases {
        let reply = gateway.send(gateway.http.post(&url).json(&body)).await;
        assert_eq!(
            (reply.status, reply.body["code"].as_str()),
            (status, Some(code)),
            "{body}"
        );
        assert!(reply.body["error"].is_string());
    }
    let too_large = gateway
        .send(
            gateway
                .http
                .post(&url)
                .header("content-type", "application/json")
                .body(format!(r#"{{"roomId":"{}"}}"#, "x".repeat(17_000))),
        )
        .await;
    assert_eq!(
        (too_large.status, too_large.body["code"].as_str()),
        (413, Some("payload_too_large"))
    );
    let form = gateway
        .send(
            gateway
                .http
                .post(&url)
                .header("content-type", "application/x-www-form-urlencoded")
                .body("roomId=r"),
        )
        .await;
    assert_eq!(
        (form.status, form.body["code"].as_str()),
        (415, Some("unsupported_media_type"))
    );
    let array = gateway
        .send(
            gateway
                .http
                .post(&url)
                .header("content-type", "application/json")
                .body("[]"),
        )
        .await;
    assert_eq!(
        (array.status, array.body["code"].as_str()),
        (400, Some("invalid_json"))
    );
    // Six joins per minute were spent above; the seventh is refused.
    let refused = gateway.join("r", None).await;
    assert_eq!(
        (refused.status, refused.body["code"].as_str()),
        (429, Some("rate_limited")),
        "{}",
        refused.text
    );
    assert!(refused.header("retry-after").is_some());
    assert!(refused.set_cookies().is_empty());
}

#[tokio::test]
async fn status_by_token_by_named_cookie_and_by_the_single_cookie() {
    let gateway = spawn_gateway(&[]).await;
    gateway.engine.create_room("st", "active", 60);
    gateway.join_as_new_visitor("st").await;
    let (reply, cookies) = gateway.join_as_new_visitor("st").await;
    let token = reply.body["token"].as_str().unwrap();
    let by_token = gateway
        .send(
            gateway
                .http
                .get(format!("{}/api/status", gateway.url))
                .query(&[("token", token)]),
        )
        .await;
    // `ref` is the place's support code (the join's, as the status names the same place).
    let mut body = by_token.body.clone();
    let code = body
        .as_object_mut()
        .and_then(|fields| fields.remove("ref"))
        .expect("status answers ref");
    assert_eq!(code, reply.body["ref"]);
    assert_eq!(
        body,
        json!({ "position": 2, "ahead": 1, "etaSec": 2, "state": "active", "passed": false })
    );
    let by_room = gateway
        .send(
            gateway
                .http
                .get(format!("{}/api/status?roomId=st", gateway.url))
                .header("cookie", &cookies),
        )
        .await;
    assert_eq!(by_room.body["position"], 2);
    let by_single = gateway
        .send(
            gateway
                .http
                .get(format!("{}/api/status", gateway.url))
                .header("cookie", &cookies),
        )
        .await;
    assert_eq!(by_single.body["position"], 2);
    let none = gateway
        .send(gateway.http.get(format!("{}/api/status", gateway.url)))
        .await;
    assert_eq!(
        (none.status, none.body["code"].as_str()),
        (401, Some("invalid_token"))
    );

    gateway.engine.flush("st", 2);
    let passed = gateway
        .send(
            gateway
                .http
                .get(format!("{}/api/status", gateway.url))
                .query(&[("token", token)]),
        )
        .await;
    assert_eq!(passed.body["passed"], true);
    assert_eq!(passed.body["redirectUrl"], TARGET_URL);
    gateway.engine.delete_room("st");
    let gone = gateway
        .send(
            gateway
                .http
                .get(format!("{}/api/status", gateway.url))
                .query(&[("token", token)]),
        )
        .await;
    assert_eq!(
        gone.body,
        json!({ "expired": true, "reason": "room_reset" })
    );
}

#[tokio::test]
async fn the_cookie_cap_expires_the_oldest_rooms() {
    let gateway = spawn_gateway(&[("ROOM_COOKIE_CAP", "2")]).await;
    let mut jar: Vec<String> = Vec::new();
    for index in 0..3 {
        let room_id = format!("cap{index}");
        gateway.engine.create_room(&room_id, "active", 0);
        let reply = gateway.join(&room_id, Some(&jar.join("; "))).await;
        assert_eq!(reply.status, 200);
        for cookie in reply.set_cookies() {
            let pair = cookie.split(';').next().unwrap().to_owned();
            let name = pair.split('=').next().unwrap().to_owned();
            jar.retain(|existing| !existing.starts_with(&format!("{name}=")));
            if !cookie.contains("Max-Age=0") {
                jar.push(pair);
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let names: Vec<&str> = jar
        .iter()
        .filter_map(|pair| pair.split('=').next())
        .collect();
    assert!(
        !names.iter().any(|name| name.ends_with("cap0")),
        "{names:?}"
    );
    assert!(
        names.contains(&"qm_cap1") && names.contains(&"qm_cap2"),
        "{names:?}"
    );
}

#[tokio::test]
async fn concurrent_joins_share_engine_calls_and_each_keeps_its_own_answer() {
    let gateway = spawn_gateway(&[]).await;
    gateway.engine.create_room("rush", "active", 0);
    let batches_before = gateway.engine.visitor_batches.load(Ordering::SeqCst);
    // Joins for a room the engine does not know, in among the others: each gets its refusal.
    let rooms: Vec<&str> = (0..64)
        .map(|n| if n % 4 == 3 { "nowhere" } else { "rush" })
        .collect();
    let replies = join_all(rooms.iter().map(|room| gateway.join(room, None))).await;

    let mut positions = Vec::new();
    for (room, reply) in rooms.iter().zip(&replies) {
        if *room == "rush" {
            assert_eq!(reply.status, 200, "{}", reply.text);
            positions.push(reply.body["position"].as_u64().expect("a position"));
        } else {
            assert_eq!(
                (reply.status, reply.body["code"].as_str()),
                (404, Some("room_not_found")),
                "{}",
                reply.text
            );
        }
    }
    positions.sort_unstable();
    assert_eq!(positions, (1..=48).collect::<Vec<u64>>(), "one place each");
    let batches = gateway.engine.visitor_batches.load(Ordering::SeqCst) - batches_before;
    assert!(
        batches < rooms.len(),
        "{} joins at once went as {batches} engine calls",
        rooms.len()
    );
}

#[tokio::test]
async fn an_engine_without_batches_gets_every_call_on_its_own() {
    // An engine from before the Visitors RPC, as a rolling deploy that updates the gateways
    // first meets it: the gateway stops asking once it has been told, and sends each call as its
    // own RPC.
    let gateway = spawn_gateway(&[]).await;
    gateway
        .engine
        .without_visitor_batches
        .store(true, Ordering::SeqCst);
    gateway.engine.create_room("older", "active", 0);
    let replies = join_all((0..8).map(|_| gateway.join("older", None))).await;
    let mut positions: Vec<u64> = replies
        .iter()
        .map(|reply| {
            assert_eq!(reply.status, 200, "{}", reply.text);
            reply.body["position"].as_u64().expect("a position")
        })
        .collect();
    positions.sort_unstable();
    assert_eq!(positions, (1..=8).collect::<Vec<u64>>());
    // Only the batches already under way when the first answer came asked (at most 4 go at once).
    let asked = gateway.engine.visitor_batches.load(Ordering::SeqCst);
    assert!((1..=4).contains(&asked), "asked {asked} times");

    let (joined, cookies) = gateway.join_as_new_visitor("older").await;
    let status = gateway
        .send(
            gateway
                .http
                .get(format!(
                    "{}/api/status?token={}",
                    gateway.url,
                    joined.body["token"].as_str().unwrap()
                ))
                .header("cookie", cookies),
        )
        .await;
    assert_eq!(status.status, 200, "{}", status.text);
    assert_eq!(status.body["position"], 9);
    assert_eq!(
        gateway.engine.visitor_batches.load(Ordering::SeqCst),
        asked,
        "not asked again"
    );
}
