//! The scheduled drop, end to end on the running processes: before opensAt joins take opaque
//! pre-queue handles and the scheduled frame; the pre-queue caps refuse with nothing
//! spendable; at opensAt the draw places every entry, fairly; handles are exchanged for their
//! drawn tickets on join, status and the stream. Runs on both stores (`QM_TEST_STORE`).

use std::collections::HashMap;
use std::time::Duration;

use futures::StreamExt;
use qm_tests::{Reply, TestApp, room_body, spawn_app_with};
use serde_json::{Value, json};

use crate::{token_handle, token_ticket};

/// POST /api/join as a new browser forwarded for `client` (the app trusts 127.0.0.1).
async fn join_from(app: &TestApp, room_id: &str, client: &str) -> Reply {
    app.send(
        app.http
            .post(format!("{}/api/join", app.gateway))
            .header("x-forwarded-for", client)
            .json(&json!({ "roomId": room_id })),
    )
    .await
}

/// The Cookie header the browser that got `reply` sends back.
fn cookies_of(reply: &Reply, room_id: &str) -> String {
    format!(
        "qm_{room_id}={}; qms_{room_id}={}",
        reply.cookie(&format!("qm_{room_id}")).expect("qm_ cookie"),
        reply
            .cookie(&format!("qms_{room_id}"))
            .expect("qms_ cookie"),
    )
}

fn far_future() -> i64 {
    qm_core::clock::now_ms() + 3_600_000
}

/// Brings the doors forward to now and waits until the room reads drawn (no pre-queue left).
async fn open_doors(app: &TestApp, room_id: &str) {
    let reply = app
        .admin_post(
            &format!("/rooms/{room_id}/schedule"),
            json!({ "opensAt": qm_core::clock::now_ms() + 300 }),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let room = app.room(room_id).await;
        if room["effectiveState"] != "scheduled" && room["preQueue"] == 0 {
            return;
        }
    }
    panic!("the pre-queue was not drawn within 10 s of opensAt");
}

fn spearman(pairs: &[(f64, f64)]) -> f64 {
    let n = pairs.len() as f64;
    let squared: f64 = pairs.iter().map(|(a, b)| (a - b).powi(2)).sum();
    1.0 - 6.0 * squared / (n * (n * n - 1.0))
}

#[tokio::test]
async fn before_opens_at_joins_get_handles_and_the_scheduled_frame() {
    let app = spawn_app_with(&[("TRUSTED_PROXIES", "127.0.0.1")]).await;
    let opens_at = far_future();
    app.create_room(room_body("pre", 60, json!({ "opensAt": opens_at })))
        .await;
    let first = join_from(&app, "pre", "198.51.100.1").await;
    let second = join_from(&app, "pre", "198.51.100.2").await;
    for reply in [&first, &second] {
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
    let body = &second.body;
    for (key, value) in [
        ("state", json!("scheduled")),
        ("scheduled", json!(true)),
        ("preQueued", json!(true)),
        ("preCount", json!(2)),
        ("opensAt", json!(opens_at)),
        ("position", Value::Null),
        ("ahead", Value::Null),
        ("passed", json!(false)),
    ] {
        assert_eq!(body[key], value, "{key} in {body}");
    }
    assert!(body["now"].is_i64(), "opensAt travels with now: {body}");
    let token = body["token"].as_str().expect("token");
    let handle = token_handle(token).expect("the token carries a handle q");
    assert_eq!(token_ticket(token), None, "and no ticket n");
    assert_ne!(
        token_handle(first.body["token"].as_str().expect("token")),
        Some(handle - 1),
        "handles are opaque, not arrival numbers"
    );

    let status = app.status(token).await;
    assert_eq!(status.body["preQueued"], true, "{}", status.text);
    assert_eq!(status.body["opensAt"], opens_at);
    let mut stream = app.events("/events", token).await.expect("stream opens");
    let frame = stream
        .next_frame(Duration::from_secs(3))
        .await
        .expect("first frame");
    assert_eq!(frame.data["preQueued"], true, "{:?}", frame.data);
    assert_eq!(frame.data["preCount"], 2);

    let room = app.room("pre").await;
    assert_eq!(room["preQueue"], 2, "{room}");
    assert_eq!(room["waiting"], 0, "{room}");
}

#[tokio::test]
async fn the_pre_queue_caps_refuse_with_nothing_spendable() {
    let app = spawn_app_with(&[("TRUSTED_PROXIES", "127.0.0.1"), ("PREQUEUE_MAX", "4")]).await;
    app.create_room(room_body(
        "capped",
        60,
        json!({ "opensAt": far_future(), "preQueueMaxPerIp": 2 }),
    ))
    .await;
    for _ in 0..2 {
        let reply = join_from(&app, "capped", "198.51.100.7").await;
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
    let refused = join_from(&app, "capped", "198.51.100.7").await;
    assert_eq!(refused.status, 429, "{}", refused.text);
    assert_eq!(refused.code(), "prequeue_identity_limit");
    assert!(refused.body.get("token").is_none(), "{}", refused.text);
    assert!(
        refused.set_cookies().is_empty(),
        "no token, handle or cookie: {:?}",
        refused.set_cookies()
    );
    for client in ["198.51.100.8", "198.51.100.9"] {
        let reply = join_from(&app, "capped", client).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
    let full = join_from(&app, "capped", "198.51.100.10").await;
    assert_eq!(full.status, 503, "{}", full.text);
    assert_eq!(full.code(), "prequeue_full");
    assert!(full.set_cookies().is_empty(), "{:?}", full.set_cookies());
    assert_eq!(app.room("capped").await["preQueue"], 4);

    // A purge empties the pre-queue and counts it.
    let purged = app.admin_post("/rooms/capped/purge", json!({})).await;
    assert_eq!(purged.status, 200, "{}", purged.text);
    assert_eq!(
        (
            purged.body["purged"].clone(),
            purged.body["preQueue"].clone()
        ),
        (json!(4), json!(4))
    );
    assert_eq!(app.room("capped").await["preQueue"], 0);
}

#[tokio::test]
async fn the_draw_is_fair_across_two_thousand_entries_from_two_hundred_addresses() {
    const CLIENTS: usize = 200;
    const PER_CLIENT: usize = 10;
    let app = spawn_app_with(&[("TRUSTED_PROXIES", "127.0.0.1")]).await;
    // Rate 0: nobody passes, so positions stay put while they are read.
    app.create_room(room_body("fair", 0, json!({ "opensAt": far_future() })))
        .await;
    // The worst arrival pattern for a naive round-robin: every address's first entry, then
    // every second, and so on. Arrival index = position in this list.
    let arrivals: Vec<usize> = (0..PER_CLIENT).flat_map(|_| 0..CLIENTS).collect();
    let mut tokens: Vec<(usize, usize, String)> = Vec::with_capacity(arrivals.len());
    for (chunk_index, chunk) in arrivals.chunks(16).enumerate() {
        let replies = futures::future::join_all(chunk.iter().map(|client| {
            let client = format!("198.18.{}.{}", client / 250, client % 250 + 1);
            let app = &app;
            async move { join_from(app, "fair", &client).await }
        }))
        .await;
        for (offset, reply) in replies.into_iter().enumerate() {
            assert_eq!(reply.status, 200, "{}", reply.text);
            let arrival = chunk_index * 16 + offset;
            let token = reply.body["token"].as_str().expect("token").to_owned();
            tokens.push((arrival, chunk[offset], token));
        }
    }
    assert_eq!(app.room("fair").await["preQueue"], 2000);
    open_doors(&app, "fair").await;

    let positions: Vec<(usize, usize, u64)> = futures::stream::iter(tokens.iter())
        .map(|(arrival, client, token)| {
            let app = &app;
            async move {
                let status = app.status(token).await;
                let position = status.body["position"]
                    .as_u64()
                    .unwrap_or_else(|| panic!("a drawn position: {}", status.text));
                (*arrival, *client, position)
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let mut seen: Vec<u64> = positions.iter().map(|(_, _, position)| *position).collect();
    seen.sort_unstable();
    assert_eq!(
        seen,
        (1..=2000).collect::<Vec<u64>>(),
        "every entry drawn once"
    );

    let pairs: Vec<(f64, f64)> = positions
        .iter()
        .map(|(arrival, _, position)| (*arrival as f64 + 1.0, *position as f64))
        .collect();
    let rho = spearman(&pairs);
    assert!(
        rho.abs() < 0.1,
        "arrival order and drawn position correlate: rho = {rho}"
    );

    // No address's second entry ahead of any address's first.
    let mut by_client: HashMap<usize, Vec<u64>> = HashMap::new();
    for (_, client, position) in &positions {
        by_client.entry(*client).or_default().push(*position);
    }
    let mut latest_first = 0;
    let mut earliest_second = u64::MAX;
    for drawn in by_client.values_mut() {
        drawn.sort_unstable();
        latest_first = latest_first.max(drawn[0]);
        earliest_second = earliest_second.min(drawn[1]);
    }
    assert!(
        latest_first < earliest_second,
        "an address's second entry (at {earliest_second}) outranks another's first (at {latest_first})"
    );
    assert_eq!(
        latest_first, CLIENTS as u64,
        "the first round is exactly 1..={CLIENTS}"
    );
    let room = app.room("fair").await;
    assert_eq!(
        (room["waiting"].clone(), room["preQueue"].clone()),
        (json!(2000), json!(0))
    );
}

#[tokio::test]
async fn a_handle_is_exchanged_for_its_drawn_ticket_on_join_status_and_stream() {
    let app = spawn_app_with(&[("TRUSTED_PROXIES", "127.0.0.1")]).await;
    app.create_room(room_body("swap", 0, json!({ "opensAt": far_future() })))
        .await;
    let mut browsers = Vec::new();
    for client in ["203.0.113.1", "203.0.113.2", "203.0.113.3"] {
        let reply = join_from(&app, "swap", client).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        let token = reply.body["token"].as_str().expect("token").to_owned();
        browsers.push((token, cookies_of(&reply, "swap")));
    }
    // The third browser holds a stream open across the draw.
    let stream_request = app
        .http
        .get(format!("{}/events", app.gateway))
        .header(reqwest::header::COOKIE, browsers[2].1.as_str())
        .query(&[("roomId", "swap")]);
    let mut stream = qm_tests::SseStream::open(stream_request)
        .await
        .expect("stream opens");
    open_doors(&app, "swap").await;

    // Join with the handle: the same place, now a ticket, and a token that says so.
    let (handle_token, cookies) = &browsers[0];
    let joined = app.join("swap", Some(handle_token), Some(cookies)).await;
    assert_eq!(joined.status, 200, "{}", joined.text);
    let ticket = token_ticket(joined.body["token"].as_str().expect("token"))
        .expect("the exchanged token carries n");
    assert!((1..=3).contains(&ticket));
    assert_eq!(joined.body["position"], ticket, "{}", joined.text);
    assert!(
        joined.cookie("qm_swap").is_some(),
        "the cookie follows the ticket"
    );
    assert_eq!(
        joined.cookie("qms_swap"),
        cookies.split("qms_swap=").nth(1).map(str::to_owned),
        "the same ownership session"
    );

    // Status with the handle and its cookies: the drawn position and the exchanged token.
    let (handle_token, cookies) = &browsers[1];
    let status = app
        .send(
            app.http
                .get(format!("{}/api/status", app.gateway))
                .header(reqwest::header::COOKIE, cookies.as_str())
                .query(&[("roomId", "swap")]),
        )
        .await;
    assert_eq!(status.status, 200, "{}", status.text);
    let exchanged = status.body["token"].as_str().expect("an exchanged token");
    assert_eq!(token_ticket(exchanged), status.body["position"].as_u64());
    assert!(status.cookie("qm_swap").is_some());
    // Without its ownership cookie the handle still reads its position but earns no token.
    let bare = app.status(handle_token).await;
    assert!(bare.body["position"].is_u64(), "{}", bare.text);
    assert!(bare.body.get("token").is_none(), "{}", bare.text);

    // The open stream ends with a refresh frame, so its reconnect exchanges the token.
    let refresh = stream
        .frame_where(Duration::from_secs(5), |frame| frame.event == "refresh")
        .await;
    assert!(
        refresh.is_some(),
        "a drawn handle's stream ends for its ticket"
    );
    let reopened = app
        .http
        .get(format!("{}/events", app.gateway))
        .header(reqwest::header::COOKIE, browsers[2].1.as_str())
        .query(&[("roomId", "swap")]);
    let mut stream = qm_tests::SseStream::open(reopened).await.expect("reopens");
    assert!(
        stream
            .headers
            .get_all(reqwest::header::SET_COOKIE)
            .iter()
            .count()
            >= 2,
        "the reconnect re-sets both cookies"
    );
    let frame = stream
        .next_frame(Duration::from_secs(3))
        .await
        .expect("first frame");
    let token = frame.data["token"]
        .as_str()
        .expect("frames carry the ticket token");
    assert_eq!(token_ticket(token), frame.data["position"].as_u64());
}
