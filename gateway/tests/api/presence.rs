//! Presence reports (QM-345): the gateway makes the 5 s stream heartbeats itself, so it tells
//! the engine which holders its open streams vouch for, in one `Seen` call per room per
//! heartbeat, naming only places the stream's ownership cookie proves.

use std::time::Duration;

use futures::StreamExt;

use crate::harness::{Frames, TestGateway, spawn_gateway};

/// Opens `/events` as the browser that holds `cookies` (token from the cookie).
async fn stream_with_cookies(gateway: &TestGateway, cookies: &str) -> Frames {
    let response = gateway
        .http
        .get(format!("{}/events", gateway.url))
        .query(&[("roomId", "beat")])
        .header(reqwest::header::COOKIE, cookies)
        .send()
        .await
        .expect("the gateway answers");
    assert_eq!(response.status(), 200);
    Frames {
        headers: response.headers().clone(),
        body: response.bytes_stream().boxed(),
        buffer: String::new(),
    }
}

#[tokio::test]
async fn open_streams_are_reported_once_per_room_per_heartbeat() {
    let gateway = spawn_gateway(&[]).await;
    gateway.engine.create_room("beat", "paused", 0);
    let (first, first_cookies) = gateway.join_as_new_visitor("beat").await;
    let (second, second_cookies) = gateway.join_as_new_visitor("beat").await;
    let (unproved, _) = gateway.join_as_new_visitor("beat").await;
    let mut streams = vec![
        stream_with_cookies(&gateway, &first_cookies).await,
        stream_with_cookies(&gateway, &second_cookies).await,
        // The same browser in a second tab: still one ticket in the report.
        stream_with_cookies(&gateway, &second_cookies).await,
    ];
    // A token without its ownership cookie proves nothing: never reported.
    let mut unproved_stream = gateway
        .events("/events", unproved.body["token"].as_str().unwrap())
        .await
        .expect("opens");
    for stream in &mut streams {
        stream
            .next(Duration::from_secs(3))
            .await
            .expect("first frame");
    }
    unproved_stream
        .next(Duration::from_secs(3))
        .await
        .expect("first frame");

    tokio::time::sleep(Duration::from_millis(6_500)).await;
    let calls = gateway.engine.seen_calls.lock().unwrap().clone();
    assert_eq!(
        calls.len(),
        1,
        "one call for the room in one heartbeat: {calls:?}"
    );
    assert_eq!(calls[0].0, "beat");
    // Tickets 1 and 2 are proved by their cookies; ticket 3 (token only) is not.
    assert_eq!(calls[0].1, vec![1, 2], "each proved ticket once: {calls:?}");
    drop((first, second, streams, unproved_stream));
    gateway.stop().await;
}
