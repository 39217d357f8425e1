//! The audit trail through the admin API: every change and every refused credential recorded
//! with who, what, the route, a summary without secrets, the client and the status; read back
//! newest first with filters and paging.

use qm_tests::{room_body, spawn_app};
use serde_json::{Value, json};

use crate::credentials::{Cred, admin_key, call, create_operator, sign_in};

async fn audit_get(app: &qm_tests::TestApp, query: &str) -> qm_tests::Reply {
    call(
        app,
        reqwest::Method::GET,
        &format!("/audit{query}"),
        &admin_key(),
        None,
        &[],
    )
    .await
}

/// `room_id`'s audit entries of `action`, oldest first (the controllers' tests read these).
pub(crate) async fn entries_oldest_first(
    app: &qm_tests::TestApp,
    room_id: &str,
    action: &str,
) -> Vec<Value> {
    let reply = audit_get(app, &format!("?room={room_id}&action={action}&limit=100")).await;
    let mut entries = entries(&reply);
    entries.reverse();
    entries
}

fn entries(reply: &qm_tests::Reply) -> Vec<Value> {
    assert_eq!(reply.status, 200, "audit: {}", reply.text);
    reply.body["entries"].as_array().expect("entries").clone()
}

#[tokio::test]
async fn an_operators_rate_change_is_in_the_trail_with_their_name_and_no_secret() {
    let app = spawn_app().await;
    app.create_room(room_body("audit-a", 10, json!({}))).await;
    let (ann_id, ann) = create_operator(&app, "Ann", "operator").await;
    let (_, viewer) = create_operator(&app, "Val", "viewer").await;
    let rate = call(
        &app,
        reqwest::Method::POST,
        "/rooms/audit-a/rate",
        &Cred::Bearer(ann.clone()),
        Some(json!({ "ratePerMinute": 42 })),
        &[],
    )
    .await;
    assert_eq!(rate.status, 200, "{}", rate.text);
    // A refused credential and a console sign-in are recorded too.
    let wrong = call(
        &app,
        reqwest::Method::GET,
        "/rooms",
        &Cred::Bearer("wrong-key-0123456789".to_owned()),
        None,
        &[],
    )
    .await;
    assert_eq!(wrong.status, 401);
    let (_, cookie) = sign_in(&app, &ann).await;
    let signed_out = call(
        &app,
        reqwest::Method::DELETE,
        "/session",
        &Cred::Cookie { cookie, csrf: true },
        None,
        &[],
    )
    .await;
    assert_eq!(signed_out.status, 200);
    // A change the role does not allow is recorded as tried, with its 403.
    let (_, viewer_key) = create_operator(&app, "Vic", "viewer").await;
    let refused = call(
        &app,
        reqwest::Method::POST,
        "/rooms/audit-a/state",
        &Cred::Bearer(viewer_key),
        Some(json!({ "state": "paused" })),
        &[],
    )
    .await;
    assert_eq!(refused.status, 403);

    let trail = call(
        &app,
        reqwest::Method::GET,
        "/audit",
        &Cred::Bearer(viewer),
        None,
        &[],
    )
    .await;
    let all = entries(&trail);
    for secret in [
        ann.as_str(),
        qm_tests::TEST_ADMIN_KEY,
        "wrong-key-0123456789",
    ] {
        assert!(
            !trail.text.contains(secret),
            "a secret reached the trail: {}",
            trail.text
        );
    }
    let change = all
        .iter()
        .find(|entry| entry["action"] == "room.rate")
        .unwrap_or_else(|| panic!("no room.rate entry: {}", trail.text));
    assert_eq!(
        change["actor"],
        json!({ "kind": "operator", "id": ann_id, "name": "Ann" })
    );
    assert_eq!(change["route"], "POST /api/admin/rooms/:id/rate");
    assert_eq!(change["roomId"], "audit-a");
    assert_eq!(change["summary"], json!({ "ratePerMinute": 42 }));
    assert_eq!(change["status"], 200);
    assert_eq!(change["client"], "127.0.0.1");
    assert!(
        change["at"]
            .as_i64()
            .is_some_and(|at| at > 1_700_000_000_000)
    );

    let created = all
        .iter()
        .find(|entry| entry["action"] == "operator.create" && entry["summary"]["name"] == "Ann")
        .expect("operator.create");
    assert_eq!(created["actor"]["kind"], "owner");
    assert_eq!(
        created["summary"],
        json!({ "name": "Ann", "role": "operator" })
    );
    let room = all
        .iter()
        .find(|entry| entry["action"] == "room.create")
        .expect("room.create");
    assert_eq!(room["roomId"], "audit-a");
    let failed = all
        .iter()
        .find(|entry| entry["action"] == "auth.failed")
        .expect("auth.failed");
    assert_eq!(failed["actor"]["kind"], "anonymous");
    assert_eq!(failed["status"], 401);
    let signed_in = all
        .iter()
        .find(|entry| entry["action"] == "session.sign_in")
        .expect("session.sign_in");
    assert_eq!(signed_in["actor"]["name"], "Ann");
    assert_eq!(signed_in["summary"], json!({ "key": "[redacted]" }));

    let signed_out = all
        .iter()
        .find(|entry| entry["action"] == "session.sign_out")
        .expect("session.sign_out");
    assert_eq!(signed_out["actor"]["name"], "Ann");
    let tried = all
        .iter()
        .find(|entry| entry["action"] == "room.state")
        .expect("room.state");
    assert_eq!(
        (tried["actor"]["name"].clone(), tried["status"].clone()),
        (json!("Vic"), json!(403))
    );

    // Newest first.
    let ids: Vec<u64> = all
        .iter()
        .filter_map(|entry| entry["id"].as_u64())
        .collect();
    assert!(ids.windows(2).all(|pair| pair[0] > pair[1]), "{ids:?}");
    app.stop().await;
}

#[tokio::test]
async fn the_trail_filters_and_pages() {
    let app = spawn_app().await;
    app.create_room(room_body("audit-f", 10, json!({}))).await;
    app.create_room(room_body("audit-g", 10, json!({}))).await;
    let (_, bob) = create_operator(&app, "Bob", "operator").await;
    for rate in [1, 2, 3] {
        let reply = call(
            &app,
            reqwest::Method::POST,
            "/rooms/audit-f/rate",
            &Cred::Bearer(bob.clone()),
            Some(json!({ "rate": rate })),
            &[],
        )
        .await;
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
    app.admin_post("/rooms/audit-g/state", json!({ "state": "paused" }))
        .await;

    let by_bob = entries(&audit_get(&app, "?operator=Bob").await);
    assert_eq!(by_bob.len(), 3);
    assert!(by_bob.iter().all(|entry| entry["actor"]["name"] == "Bob"));
    let by_room = entries(&audit_get(&app, "?room=audit-g").await);
    assert!(by_room.iter().all(|entry| entry["roomId"] == "audit-g"));
    assert!(by_room.iter().any(|entry| entry["action"] == "room.state"));
    let by_action = entries(&audit_get(&app, "?action=room.rate").await);
    assert_eq!(by_action.len(), 3);
    assert_eq!(
        by_action[0]["summary"],
        json!({ "rate": 3 }),
        "newest first"
    );

    // Paging: one at a time, following `next`, until the oldest.
    let first = audit_get(&app, "?action=room.rate&limit=1").await;
    let page = entries(&first);
    assert_eq!(page.len(), 1);
    let mut seen = vec![page[0]["summary"]["rate"].clone()];
    let mut next = first.body["next"].as_u64();
    while let Some(before) = next {
        let reply = call(
            &app,
            reqwest::Method::GET,
            &format!("/audit?action=room.rate&limit=1&before={before}"),
            &admin_key(),
            None,
            &[],
        )
        .await;
        for entry in entries(&reply) {
            seen.push(entry["summary"]["rate"].clone());
        }
        next = reply.body["next"].as_u64();
        assert!(seen.len() <= 3, "paging ends");
    }
    assert_eq!(seen, vec![json!(3), json!(2), json!(1)]);

    // A time range that ends before anything happened is empty.
    assert!(entries(&audit_get(&app, "?until=1000").await).is_empty());
    let bad = audit_get(&app, "?limit=0").await;
    assert_eq!((bad.status, bad.code()), (400, "invalid_audit_query"));
    app.stop().await;
}
