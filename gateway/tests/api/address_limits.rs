//! Per-address limits on the routes a waiting page polls and reconnects to: `/api/status`
//! (STATUS_LIMIT_PER_MIN), `/w/<room>` (PAGE_LIMIT_PER_MIN) and event-stream opens
//! (STREAM_OPEN_LIMIT_PER_MIN), each 429 rate_limited with Retry-After past its budget.

use std::time::Duration;

use crate::harness::{Reply, spawn_gateway};

fn assert_limited(reply: &Reply) {
    assert_eq!(reply.status, 429, "{}", reply.text);
    assert_eq!(reply.body["code"], "rate_limited", "{}", reply.text);
    let wait: u64 = reply
        .header("retry-after")
        .and_then(|value| value.parse().ok())
        .expect("Retry-After");
    assert!(wait >= 1, "{wait}");
}

#[tokio::test]
async fn status_reads_page_loads_and_stream_opens_are_limited_per_address() {
    let gateway = spawn_gateway(&[
        ("STATUS_LIMIT_PER_MIN", "3"),
        ("PAGE_LIMIT_PER_MIN", "2"),
        ("STREAM_OPEN_LIMIT_PER_MIN", "2"),
    ])
    .await;
    gateway.engine.create_room("busy", "paused", 0);
    let (reply, _) = gateway.join_as_new_visitor("busy").await;
    let token = reply.body["token"].as_str().unwrap().to_owned();

    let status_url = format!("{}/api/status", gateway.url);
    for _ in 0..3 {
        let reply = gateway
            .send(gateway.http.get(&status_url).query(&[("token", &token)]))
            .await;
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
    let refused = gateway
        .send(gateway.http.get(&status_url).query(&[("token", &token)]))
        .await;
    assert_limited(&refused);

    let page_url = format!("{}/w/busy", gateway.url);
    for _ in 0..2 {
        let reply = gateway.send(gateway.http.get(&page_url)).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
    assert_limited(&gateway.send(gateway.http.get(&page_url)).await);

    // Two opens (each closed again) spend the budget; the third is refused.
    for _ in 0..2 {
        let mut frames = gateway.events("/events", &token).await.expect("opens");
        frames
            .next(Duration::from_secs(3))
            .await
            .expect("first frame");
    }
    let refused = gateway
        .events("/api/events", &token)
        .await
        .expect_err("over the open budget");
    assert_limited(&refused);
}

#[tokio::test]
async fn the_defaults_leave_a_real_page_far_below_every_limit() {
    // The page polls /api/status every 5 s while its stream is down (12 a minute) and reopens
    // its stream with a back-off from 1 s; a minute of the worst of both stays under the
    // defaults with room for many pages behind one address.
    let gateway = spawn_gateway(&[]).await;
    gateway.engine.create_room("calm", "paused", 0);
    let (reply, _) = gateway.join_as_new_visitor("calm").await;
    let token = reply.body["token"].as_str().unwrap().to_owned();
    let status_url = format!("{}/api/status", gateway.url);
    for _ in 0..60 {
        let reply = gateway
            .send(gateway.http.get(&status_url).query(&[("token", &token)]))
            .await;
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
    for _ in 0..20 {
        let reply = gateway
            .send(gateway.http.get(format!("{}/w/calm", gateway.url)))
            .await;
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
}
