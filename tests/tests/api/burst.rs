//! The surge: 10,000 joins sent concurrently must all be answered, with unique tickets and
//! positions that are exactly 1..=10000 in ticket order.

use std::collections::HashSet;

use futures::StreamExt;
use qm_tests::{room_body, spawn_app};
use serde_json::json;

use crate::token_ticket;

const JOINS: usize = 10_000;
const IN_FLIGHT: usize = 250;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_concurrent_joins_keep_strict_order() {
    let app = spawn_app().await;
    app.create_room(room_body("burst", 0, json!({}))).await;
    let answers: Vec<(u64, u64)> = futures::stream::iter(0..JOINS)
        .map(|_| async {
            let reply = app.join("burst", None, None).await;
            assert_eq!(reply.status, 200, "{}", reply.text);
            let ticket =
                token_ticket(reply.body["token"].as_str().expect("token")).expect("ticket");
            let position = reply.body["position"].as_u64().expect("position");
            (ticket, position)
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    assert_eq!(answers.len(), JOINS, "every join answered");
    let tickets: HashSet<u64> = answers.iter().map(|(ticket, _)| *ticket).collect();
    assert_eq!(tickets.len(), JOINS, "no ticket handed out twice");

    let mut by_ticket = answers.clone();
    by_ticket.sort_unstable();
    let positions: Vec<u64> = by_ticket.iter().map(|(_, position)| *position).collect();
    let expected: Vec<u64> = (1..=JOINS as u64).collect();
    assert_eq!(
        positions, expected,
        "positions are a permutation of 1..=10000 in ticket order"
    );
    assert_eq!(app.room("burst").await["waiting"], JOINS as u64);
}
