//! The support lookup, GET /api/admin/rooms/:id/visitors: by ticket and by the reference code
//! the visitor's own answers carry (typed any way they might read it out), its refusals, and
//! that it never shows a raw session hash, an address, a cookie or a token. Runs on both stores.

use qm_tests::{TEST_ADMIN_KEY, TestApp, room_body, spawn_app};
use reqwest::Method;
use serde_json::{Value, json};

async fn lookup(app: &TestApp, room: &str, query: &str) -> qm_tests::Reply {
    app.admin_call(
        Method::GET,
        &format!("/rooms/{room}/visitors?{query}"),
        None,
    )
    .await
}

/// The identifiers a visitor's join answer and cookies hold, none of which a lookup may show.
fn secrets_of(join: &qm_tests::Reply, room: &str) -> Vec<String> {
    let token = join.body["token"].as_str().expect("token").to_owned();
    let session = join
        .cookie(&format!("qms_{room}"))
        .expect("ownership cookie");
    vec![qm_core::ids::session_hash(&session), session, token]
}

fn assert_shows_none(reply: &qm_tests::Reply, secrets: &[String]) {
    for secret in secrets {
        assert!(!secret.is_empty());
        assert!(
            !reply.text.contains(secret.as_str()),
            "the lookup shows {secret}: {}",
            reply.text
        );
    }
    assert!(
        !reply.text.contains("127.0.0.1"),
        "an address: {}",
        reply.text
    );
}

#[tokio::test]
async fn a_ticket_reads_waiting_passed_or_ejected_in_words() {
    let app = spawn_app().await;
    app.create_room(room_body("look", 0, json!({ "passedTtlSec": 600 })))
        .await;
    let (first, _) = app.join_as_new_visitor("look").await;
    let (second, _) = app.join_as_new_visitor("look").await;
    let (third, _) = app.join_as_new_visitor("look").await;
    let ticket =
        |reply: &qm_tests::Reply| crate::token_ticket(reply.body["token"].as_str().unwrap());
    let (first_ticket, second_ticket, third_ticket) = (
        ticket(&first).expect("ticket"),
        ticket(&second).expect("ticket"),
        ticket(&third).expect("ticket"),
    );
    let flushed = app
        .admin_post("/rooms/look/flush", json!({ "count": 1 }))
        .await;
    assert_eq!(flushed.status, 200, "{}", flushed.text);
    let ejected = app
        .admin_post("/rooms/look/eject", json!({ "ticket": third_ticket }))
        .await;
    assert_eq!(ejected.status, 200, "{}", ejected.text);

    let passed = lookup(&app, "look", &format!("ticket={first_ticket}")).await;
    assert_eq!(passed.status, 200, "{}", passed.text);
    let visitor = &passed.body["visitor"];
    assert_eq!(visitor["ticket"], first_ticket);
    assert_eq!(visitor["state"], "passed");
    let remaining = visitor["passTtlRemainingSec"].as_i64().expect("ttl");
    assert!((590..=600).contains(&remaining), "{remaining}");
    assert!(visitor["passExpiresAt"].as_i64().is_some());
    assert_eq!(visitor["bound"], true);
    assert_eq!(
        visitor["ref"], first.body["ref"],
        "the code the page showed"
    );
    assert_shows_none(&passed, &secrets_of(&first, "look"));

    let waiting = lookup(&app, "look", &format!("ticket={second_ticket}")).await;
    let visitor = &waiting.body["visitor"];
    assert_eq!(visitor["state"], "waiting", "{}", waiting.text);
    assert_eq!(
        (visitor["position"].clone(), visitor["ahead"].clone()),
        (json!(1), json!(0))
    );
    assert!(visitor["lastSeenAt"].as_i64().is_some());
    assert_eq!(visitor["generation"], app.room("look").await["generation"]);
    let session = visitor["session"].as_str().expect("a session digest");
    assert_eq!(session.len(), 12);
    assert_ne!(
        Some(session),
        passed.body["visitor"]["session"].as_str(),
        "two browsers, two digests"
    );
    assert_shows_none(&waiting, &secrets_of(&second, "look"));

    let gone = lookup(&app, "look", &format!("ticket={third_ticket}")).await;
    let visitor = &gone.body["visitor"];
    assert_eq!(
        (visitor["state"].clone(), visitor["reason"].clone()),
        (json!("expired"), json!("ejected")),
        "{}",
        gone.text
    );
    assert_shows_none(&gone, &secrets_of(&third, "look"));

    let versioned = app
        .send(
            app.http
                .get(format!(
                    "{}/api/v1/admin/rooms/look/visitors?ticket={second_ticket}",
                    app.admin
                ))
                .bearer_auth(TEST_ADMIN_KEY),
        )
        .await;
    assert_eq!(versioned.status, 200);
    assert_eq!(versioned.body["visitor"]["ticket"], second_ticket);
}

#[tokio::test]
async fn the_reference_the_visitor_reads_out_finds_their_place_however_it_is_typed() {
    let app = spawn_app().await;
    app.create_room(room_body("phone", 0, json!({}))).await;
    let mut joins = Vec::new();
    for _ in 0..5 {
        joins.push(app.join_as_new_visitor("phone").await.0);
    }
    let join = &joins[3];
    let code = join.body["ref"]
        .as_str()
        .expect("the join answer carries ref");
    let ticket = crate::token_ticket(join.body["token"].as_str().unwrap()).unwrap();
    let typed = code.replace('-', "").to_lowercase();
    let spaced = format!("  {} {} ", &code[..3], &code[4..]);
    for query in [code.to_owned(), typed, spaced] {
        let reply = app
            .send(
                app.http
                    .get(format!("{}/api/admin/rooms/phone/visitors", app.admin))
                    .query(&[("ref", query.as_str())])
                    .bearer_auth(TEST_ADMIN_KEY),
            )
            .await;
        assert_eq!(reply.status, 200, "{query:?}: {}", reply.text);
        assert_eq!(reply.body["visitor"]["ticket"], ticket, "{query:?}");
        assert_eq!(reply.body["visitor"]["state"], "waiting");
        assert_eq!(reply.body["visitor"]["position"], 4);
        assert_eq!(reply.body["visitor"]["ref"], code);
        assert_shows_none(&reply, &secrets_of(join, "phone"));
    }
    // The status answer shows the same code the join did.
    let status = app.status(join.body["token"].as_str().unwrap()).await;
    assert_eq!(status.body["ref"], code);

    // A well-formed code no place shows.
    let other = (0..)
        .map(|n: u32| format!("ZZ{}-{:03}", n % 10, n))
        .find(|candidate| {
            joins
                .iter()
                .all(|join| join.body["ref"] != candidate.as_str())
        })
        .unwrap();
    let missing = lookup(&app, "phone", &format!("ref={other}")).await;
    assert_eq!(
        (missing.status, missing.code()),
        (404, "visitor_not_found"),
        "{}",
        missing.text
    );
}

#[tokio::test]
async fn malformed_or_missing_names_are_refused_with_their_code() {
    let app = spawn_app().await;
    app.create_room(room_body("bad", 0, json!({}))).await;
    let cases: [(&str, u16, &str); 8] = [
        ("ticket=-1", 400, "invalid_ticket"),
        ("ticket=abc", 400, "invalid_ticket"),
        ("ticket=", 400, "invalid_ticket"),
        ("ref=K7F-3QU", 400, "invalid_ref"),
        ("ref=K7F", 400, "invalid_ref"),
        ("", 400, "invalid_visitor_query"),
        ("ticket=1&ref=K7F-3QX", 400, "invalid_visitor_query"),
        ("ticket=99", 404, "ticket_not_found"),
    ];
    for (query, status, code) in cases {
        let reply = lookup(&app, "bad", query).await;
        assert_eq!(
            (reply.status, reply.code()),
            (status, code),
            "{query}: {}",
            reply.text
        );
    }
    let no_room = lookup(&app, "nowhere", "ticket=1").await;
    assert_eq!((no_room.status, no_room.code()), (404, "room_not_found"));
    let bad_room = lookup(&app, "no%20such", "ticket=1").await;
    assert_eq!(bad_room.code(), "invalid_room_id");
    let anonymous = app
        .get(&format!(
            "{}/api/admin/rooms/bad/visitors?ticket=1",
            app.admin
        ))
        .await;
    assert_eq!((anonymous.status, anonymous.code()), (401, "unauthorized"));
}

#[tokio::test]
async fn a_console_session_may_look_visitors_up() {
    let app = spawn_app().await;
    app.create_room(room_body("desk", 0, json!({}))).await;
    let (join, _) = app.join_as_new_visitor("desk").await;
    let signed_in = app
        .send(
            app.http
                .post(format!("{}/api/admin/session", app.admin))
                .header("x-qm-csrf", "1")
                .json(&json!({ "key": TEST_ADMIN_KEY })),
        )
        .await;
    let cookie = signed_in.cookie("qm_console").expect("qm_console is set");
    let reply = app
        .send(
            app.http
                .get(format!("{}/api/admin/rooms/desk/visitors", app.admin))
                .query(&[("ref", join.body["ref"].as_str().unwrap_or_default())])
                .header(reqwest::header::COOKIE, format!("qm_console={cookie}")),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let visitor: &Value = &reply.body["visitor"];
    assert_eq!(visitor["state"], "waiting");
}
