//! Which client address counts (TRUSTED_PROXIES): the socket peer, unless the peer is a trusted
//! proxy; then the first untrusted X-Forwarded-For hop from the right. The test client connects
//! from 127.0.0.1.

use qm_tests::{Reply, TestApp, room_body, spawn_app, spawn_app_with};
use serde_json::json;

/// POST /api/join as a new visitor (no token, no cookies) forwarded for `forwarded_for`.
async fn join_via(app: &TestApp, room_id: &str, forwarded_for: &str) -> Reply {
    app.send(
        app.http
            .post(format!("{}/api/join", app.gateway))
            .header("x-forwarded-for", forwarded_for)
            .json(&json!({ "roomId": room_id })),
    )
    .await
}

/// A room whose line holds at most one place per client address.
async fn one_place_per_client(app: &TestApp, room_id: &str) {
    app.create_room(room_body(room_id, 0, json!({ "queueMaxPerIp": 1 })))
        .await;
}

fn assert_joined(reply: &Reply, what: &str) {
    assert_eq!(reply.status, 200, "{what}: {}", reply.text);
    assert!(reply.body["token"].is_string(), "{what}: {}", reply.text);
}

fn assert_identity_limited(reply: &Reply, what: &str) {
    assert_eq!(reply.status, 429, "{what}: {}", reply.text);
    assert_eq!(reply.code(), "queue_identity_limit", "{what}");
    assert!(reply.body.get("token").is_none(), "{what}: {}", reply.text);
}

#[tokio::test]
async fn behind_a_trusted_proxy_x_forwarded_for_names_the_client() {
    let app = spawn_app_with(&[("TRUSTED_PROXIES", "127.0.0.1")]).await;
    one_place_per_client(&app, "fwd").await;
    assert_joined(&join_via(&app, "fwd", "203.0.113.1").await, "first client");
    assert_joined(
        &join_via(&app, "fwd", "203.0.113.2").await,
        "another client behind the same proxy",
    );
    assert_identity_limited(
        &join_via(&app, "fwd", "203.0.113.1").await,
        "the first client again",
    );
    // The same client written as an IPv4-mapped IPv6 address is the same client.
    assert_identity_limited(
        &join_via(&app, "fwd", "::ffff:203.0.113.2").await,
        "the second client, IPv4-mapped",
    );
}

#[tokio::test]
async fn without_trusted_proxies_x_forwarded_for_is_ignored() {
    let app = spawn_app().await;
    one_place_per_client(&app, "direct").await;
    assert_joined(&join_via(&app, "direct", "203.0.113.1").await, "first join");
    assert_identity_limited(
        &join_via(&app, "direct", "203.0.113.2").await,
        "a different X-Forwarded-For from the same socket",
    );
    // A trusted list that does not name the peer is the same as none.
    let app = spawn_app_with(&[("TRUSTED_PROXIES", "10.0.0.0/8, ::1")]).await;
    one_place_per_client(&app, "direct").await;
    assert_joined(&join_via(&app, "direct", "203.0.113.1").await, "first join");
    assert_identity_limited(
        &join_via(&app, "direct", "203.0.113.2").await,
        "an untrusted peer's X-Forwarded-For",
    );
}

#[tokio::test]
async fn a_proxy_chain_counts_the_first_untrusted_hop_from_the_right() {
    let app = spawn_app_with(&[("TRUSTED_PROXIES", "127.0.0.1,10.0.0.0/8")]).await;
    let health = app.admin_call(reqwest::Method::GET, "/health", None).await;
    assert_eq!(
        health.body["config"]["TRUSTED_PROXIES"],
        json!(["127.0.0.1", "10.0.0.0/8"]),
        "{}",
        health.text
    );
    one_place_per_client(&app, "chain").await;
    assert_joined(
        &join_via(&app, "chain", "203.0.113.9, 10.1.2.3").await,
        "203.0.113.9 through an internal hop",
    );
    // The same client reached directly (or through another internal hop) is 203.0.113.9 again.
    assert_identity_limited(
        &join_via(&app, "chain", "203.0.113.9").await,
        "203.0.113.9 directly",
    );
    assert_identity_limited(
        &join_via(&app, "chain", "203.0.113.9, 10.200.0.1").await,
        "203.0.113.9 through another internal hop",
    );
    // Whatever a client writes to the left of its own address changes nothing.
    assert_identity_limited(
        &join_via(&app, "chain", "198.51.100.77, 203.0.113.9, 10.1.2.3").await,
        "203.0.113.9 with a forged entry in front",
    );
    assert_joined(
        &join_via(&app, "chain", "198.51.100.1, 10.1.2.3").await,
        "another client through the chain",
    );
}

#[tokio::test]
async fn a_malformed_x_forwarded_for_never_becomes_an_identity() {
    let app = spawn_app_with(&[("TRUSTED_PROXIES", "127.0.0.1")]).await;
    one_place_per_client(&app, "junk").await;
    // `unknown` stops the walk at the trusted peer itself: the proxy is the client.
    assert_joined(&join_via(&app, "junk", "unknown").await, "first junk entry");
    assert_identity_limited(
        &join_via(&app, "junk", "another-made-up-name").await,
        "different junk, same last good address",
    );
    assert_identity_limited(
        &join_via(&app, "junk", "203.0.113.5, not-an-address").await,
        "a real address beyond junk is not reached",
    );
    assert_joined(
        &join_via(&app, "junk", "203.0.113.5").await,
        "a well-formed entry still counts",
    );
}

#[tokio::test]
async fn join_limit_per_min_counts_the_forwarded_client() {
    let app = spawn_app_with(&[
        ("TRUSTED_PROXIES", "127.0.0.1"),
        ("JOIN_LIMIT_PER_MIN", "2"),
    ])
    .await;
    app.create_room(room_body("rate", 0, json!({}))).await;
    for attempt in 0..2 {
        assert_joined(
            &join_via(&app, "rate", "203.0.113.1").await,
            &format!("join {attempt} of the first client"),
        );
    }
    let refused = join_via(&app, "rate", "203.0.113.1").await;
    assert_eq!(refused.status, 429, "{}", refused.text);
    assert_eq!(refused.code(), "rate_limited");
    assert_joined(
        &join_via(&app, "rate", "203.0.113.2").await,
        "another client behind the same proxy",
    );
}

#[tokio::test]
async fn sse_per_ip_counts_the_forwarded_client() {
    let app = spawn_app_with(&[("TRUSTED_PROXIES", "127.0.0.1"), ("SSE_PER_IP", "1")]).await;
    app.create_room(room_body("streams", 0, json!({}))).await;
    let joined = join_via(&app, "streams", "203.0.113.1").await;
    assert_joined(&joined, "join");
    let token = joined.body["token"].as_str().expect("a token").to_owned();
    let open = |forwarded_for: &'static str| {
        qm_tests::SseStream::open(
            app.http
                .get(format!("{}/events", app.gateway))
                .header("x-forwarded-for", forwarded_for)
                .query(&[("token", token.as_str())]),
        )
    };
    let _first = open("203.0.113.1").await.expect("the first stream opens");
    let refused = open("203.0.113.1")
        .await
        .err()
        .expect("a second is refused");
    assert_eq!(refused.status, 429, "{}", refused.text);
    assert_eq!(refused.code(), "sse_per_ip_limit");
    let _other = open("203.0.113.2")
        .await
        .expect("another client behind the proxy opens its own");
}
