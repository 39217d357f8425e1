//! GET /api/check: fail-open, pass and queue, vouching credentials, CORS and its preflight.

use serde_json::json;

use crate::harness::spawn_gateway;

#[tokio::test]
async fn the_door_check_fails_open_queues_and_answers_cors_only_to_tag_origins() {
    let gateway = spawn_gateway(&[]).await;
    let unknown = gateway
        .send(
            gateway
                .http
                .get(format!("{}/api/check?roomId=ghost", gateway.url)),
        )
        .await;
    assert_eq!(
        unknown.body,
        json!({ "action": "pass", "reason": "no_room" })
    );

    gateway.engine.create_room("door", "active", 0);
    gateway.engine.edit_room("door", |room| {
        room.tag_origins = vec!["https://tags.example".into()]
    });
    let queued = gateway
        .send(
            gateway
                .http
                .get(format!("{}/api/check?roomId=door", gateway.url))
                .header("x-forwarded-proto", "https"),
        )
        .await;
    assert_eq!(queued.body["action"], "queue");
    let host = gateway.url.trim_start_matches("http://");
    assert_eq!(
        queued.body["waitingRoomUrl"],
        format!("https://{host}/w/door")
    );

    let (reply, _) = gateway.join_as_new_visitor("door").await;
    let token = reply.body["token"].as_str().unwrap().to_owned();
    gateway.engine.flush("door", 1);
    let passed = gateway
        .send(
            gateway
                .http
                .get(format!("{}/api/check", gateway.url))
                .query(&[("roomId", "door"), ("token", &token)]),
        )
        .await;
    assert_eq!(passed.body["action"], "pass", "{}", passed.text);

    let url = format!("{}/api/check?roomId=door", gateway.url);
    for (origin, allowed) in [
        ("https://tags.example", true),
        ("https://shop.example", true),
        ("https://evil.example", false),
    ] {
        let actual = gateway
            .send(gateway.http.get(&url).header("origin", origin))
            .await;
        let preflight = gateway
            .send(
                gateway
                    .http
                    .request(reqwest::Method::OPTIONS, &url)
                    .header("origin", origin)
                    .header("access-control-request-method", "GET"),
            )
            .await;
        assert_eq!(
            actual.header("access-control-allow-origin"),
            preflight.header("access-control-allow-origin"),
            "{origin}"
        );
        assert_eq!(
            actual.header("access-control-allow-origin") == Some(origin),
            allowed,
            "{origin}"
        );
        assert_eq!(actual.header("vary"), Some("Origin"));
    }

    let vouch = format!(
        "{}/api/check?roomId=door&ip=203.0.113.7&agent=edge",
        gateway.url
    );
    let anonymous = gateway.send(gateway.http.get(&vouch)).await;
    assert_eq!(
        (anonymous.status, anonymous.body["code"].as_str()),
        (401, Some("unauthorized"))
    );
    let in_query = gateway
        .send(
            gateway
                .http
                .get(format!("{vouch}&key=gateway-test-public-key")),
        )
        .await;
    assert_eq!(
        (in_query.status, in_query.body["code"].as_str()),
        (401, Some("credential_in_query"))
    );
    let vouched = gateway
        .send(
            gateway
                .http
                .get(&vouch)
                .bearer_auth("gateway-test-public-key"),
        )
        .await;
    assert_eq!(vouched.status, 200, "{}", vouched.text);
}
