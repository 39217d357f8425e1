//! The operator's room API: authentication, the writable set and its validation, the live
//! controls, and the listing's live stats and estWaitSec rules.

use qm_tests::{TEST_ADMIN_KEY, room_body, spawn_app};
use reqwest::Method;
use serde_json::{Value, json};

#[tokio::test]
async fn admin_routes_need_the_bearer_key_and_never_take_one_from_the_url() {
    let app = spawn_app().await;
    let url = format!("{}/api/admin/rooms", app.admin);
    let none = app.get(&url).await;
    assert_eq!((none.status, none.code()), (401, "unauthorized"));
    let wrong = app
        .send(app.http.get(&url).bearer_auth("not-the-key-at-all"))
        .await;
    assert_eq!((wrong.status, wrong.code()), (401, "unauthorized"));
    let in_query = app
        .send(app.http.get(format!("{url}?key={TEST_ADMIN_KEY}")))
        .await;
    assert_eq!(
        (in_query.status, in_query.code()),
        (401, "credential_in_query")
    );
    let in_query_with_header = app
        .send(
            app.http
                .get(format!("{url}?key=x"))
                .bearer_auth(TEST_ADMIN_KEY),
        )
        .await;
    assert_eq!(in_query_with_header.code(), "credential_in_query");
    let ok = app
        .send(app.http.get(&url).bearer_auth(TEST_ADMIN_KEY))
        .await;
    assert_eq!(ok.status, 200);
    assert_eq!(ok.body, json!({ "rooms": [] }));
    let versioned = app
        .send(
            app.http
                .get(format!("{}/api/v1/admin/rooms", app.admin))
                .bearer_auth(TEST_ADMIN_KEY),
        )
        .await;
    assert_eq!(versioned.text, ok.text);
}

#[tokio::test]
async fn the_listing_carries_configuration_state_and_live_stats() {
    let app = spawn_app().await;
    let created = app
        .create_room(room_body(
            "list",
            120,
            json!({ "maxConcurrent": 50, "branding": { "title": "Drop", "message": "Hello" } }),
        ))
        .await;
    assert_eq!(created["id"], "list");
    assert!(
        created["branding"]["messageAt"].as_i64().is_some(),
        "the server stamps messageAt"
    );
    app.create_room(room_body("second", 0, json!({}))).await;
    app.join_as_new_visitor("second").await;

    let reply = app.admin_call(Method::GET, "/rooms", None).await;
    let rooms = reply.body["rooms"].as_array().expect("rooms array");
    let ids: Vec<&str> = rooms
        .iter()
        .map(|room| room["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["list", "second"], "creation order");
    let room = &rooms[0];
    for key in [
        "waiting",
        "passedLastMin",
        "rate",
        "state",
        "oldestWaitSec",
        "estWaitSec",
        "effectiveState",
        "generation",
    ] {
        assert!(room.get(key).is_some(), "listing has {key}: {room}");
    }
    assert_eq!(room["rate"], 120);
    assert_eq!(room["ratePerMinute"], 120);
    assert_eq!(room["maxConcurrent"], 50);
    assert_eq!(room["state"], "active");
    assert_eq!(rooms[1]["waiting"], 1);
}

#[tokio::test]
async fn a_read_edit_write_round_trip_is_accepted() {
    let app = spawn_app().await;
    app.create_room(room_body("trip", 30, json!({}))).await;
    let mut room = app.room("trip").await;
    room["rate"] = json!(45);
    room["ratePerMinute"] = json!(45);
    let reply = app.admin_post("/rooms", room).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(app.room("trip").await["ratePerMinute"], 45);
}

fn error_of(reply: &qm_tests::Reply) -> (u16, String) {
    (reply.status, reply.code().to_owned())
}

#[tokio::test]
async fn the_writable_set_is_validated_field_by_field() {
    let app = spawn_app().await;
    app.create_room(room_body("valid", 10, json!({}))).await;
    let base = |extra: Value| room_body("valid", 10, extra);
    let long_rule = format!("/{}", "a".repeat(300));
    let many_rules: Vec<String> = (0..26).map(|i| format!("/p{i}")).collect();
    let cases: Vec<(Value, &str)> = vec![
        (base(json!({ "colour": "red" })), "unknown_field"),
        (base(json!({ "redacted": true })), "redacted_shape"),
        (base(json!({ "rate": 11 })), "conflicting_field"),
        (base(json!({ "ratePerMinute": -1 })), "invalid_rate"),
        (base(json!({ "ratePerMinute": "fast" })), "invalid_rate"),
        (
            base(json!({ "onBackendDown": "sometimes" })),
            "invalid_on_backend_down",
        ),
        (base(json!({ "state": "asleep" })), "invalid_state"),
        (
            base(json!({ "targetUrl": "ftp://shop.example" })),
            "invalid_target_url",
        ),
        (
            base(json!({ "urlPatterns": many_rules })),
            "invalid_url_pattern",
        ),
        (
            base(json!({ "urlPatterns": [long_rule] })),
            "invalid_url_pattern",
        ),
        (
            base(json!({ "urlPatterns": ["/a*b*c*d*e*f*g*h*i*j*k*"] })),
            "invalid_url_pattern",
        ),
        (
            base(json!({ "urlPatterns": ["shop"] })),
            "invalid_url_pattern",
        ),
        (
            base(json!({ "opensAt": "tomorrow-ish" })),
            "invalid_opens_at",
        ),
        (
            base(json!({ "queueMaxPerIp": 0 })),
            "invalid_queue_max_per_ip",
        ),
        (
            base(json!({ "preQueueMaxPerIp": 100001 })),
            "invalid_pre_queue_max_per_ip",
        ),
        (
            base(json!({ "protection": { "mode": "paranoid" } })),
            "invalid_protection",
        ),
        (
            base(json!({ "returnOrigins": ["not an origin"] })),
            "invalid_return_origins",
        ),
        (
            base(json!({ "maxConcurrent": 0 })),
            "invalid_max_concurrent",
        ),
        (
            json!({ "id": "new-room", "targetUrl": "https://shop.example/" }),
            "missing_field",
        ),
        (
            json!({ "id": "bad id", "targetUrl": "https://shop.example/", "ratePerMinute": 1 }),
            "invalid_room_id",
        ),
        (json!(["not", "an", "object"]), "invalid_json"),
    ];
    for (body, code) in cases {
        let reply = app.admin_post("/rooms", body.clone()).await;
        assert_eq!(
            error_of(&reply),
            (400, code.to_owned()),
            "{body}: {}",
            reply.text
        );
        assert!(
            reply.body["error"]
                .as_str()
                .is_some_and(|message| !message.is_empty())
        );
    }
    // Nothing of a refused body was applied.
    let room = app.room("valid").await;
    assert_eq!(room["ratePerMinute"], 10);
    assert_eq!(room["state"], "active");
    // `rate` alone, or agreeing with ratePerMinute, is accepted.
    assert_eq!(
        app.admin_post("/rooms", json!({ "id": "valid", "rate": 12 }))
            .await
            .status,
        200
    );
    assert_eq!(app.room("valid").await["ratePerMinute"], 12);
    assert_eq!(
        app.admin_post("/rooms", base(json!({ "rate": 10 })))
            .await
            .status,
        200
    );
    // A good rule set, opensAt as ISO-8601, and every optional field.
    let full = base(json!({
        "proxyOrigin": "http://10.0.0.5:8080",
        "maxConcurrent": 100, "passedTtlSec": 300, "sessionTtlSec": 600, "sessionMaxSec": 3600,
        "branding": { "title": "Big drop", "primaryColor": "#112233", "message": "Doors at nine" },
        "returnOrigins": ["https://shop.example"], "tagOrigins": null,
        "autotune": { "enabled": false }, "protection": { "mode": "monitor" },
        "autoActivate": { "enabled": true, "threshold": 500 },
        "urlPatterns": ["/checkout*", "!/checkout/help", "https://shop.example/cart"],
        "opensAt": "2030-01-01T09:00:00Z", "preQueueMaxPerIp": 4, "queueMaxPerIp": null,
        "presenceSec": 30, "onBackendDown": "open",
    }));
    let reply = app.admin_post("/rooms", full).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.body["room"]["opensAt"], 1_893_488_400_000i64);
    assert_eq!(reply.body["room"]["effectiveState"], "scheduled");
}

#[tokio::test]
async fn live_controls_act_at_once_and_validate_their_bodies() {
    let app = spawn_app().await;
    app.create_room(room_body("ctl", 0, json!({}))).await;
    for _ in 0..5 {
        app.join_as_new_visitor("ctl").await;
    }
    let paused = app
        .admin_post("/rooms/ctl/state", json!({ "state": "paused" }))
        .await;
    assert_eq!(paused.status, 200, "{}", paused.text);
    assert_eq!(paused.body["room"]["state"], "paused");
    assert_eq!(
        error_of(
            &app.admin_post("/rooms/ctl/state", json!({ "state": "off" }))
                .await
        )
        .1,
        "invalid_state"
    );

    assert_eq!(
        app.admin_post("/rooms/ctl/rate", json!({ "rate": 30 }))
            .await
            .body["room"]["ratePerMinute"],
        30
    );
    assert_eq!(
        app.admin_post("/rooms/ctl/rate", json!({ "ratePerMinute": 40 }))
            .await
            .body["room"]["rate"],
        40
    );
    let conflict = app
        .admin_post("/rooms/ctl/rate", json!({ "ratePerMinute": 1, "rate": 2 }))
        .await;
    assert_eq!(error_of(&conflict), (400, "conflicting_field".into()));
    assert_eq!(
        error_of(
            &app.admin_post("/rooms/ctl/rate", json!({ "rate": -5 }))
                .await
        ),
        (400, "invalid_rate".into())
    );

    let flushed = app
        .admin_post("/rooms/ctl/flush", json!({ "count": 2 }))
        .await;
    assert_eq!(flushed.status, 200, "{}", flushed.text);
    assert_eq!(flushed.body["promoted"], 2);
    assert_eq!(flushed.body["room"]["waiting"], 3);
    assert_eq!(
        error_of(
            &app.admin_post("/rooms/ctl/flush", json!({ "count": 0 }))
                .await
        )
        .1,
        "invalid_count"
    );

    let eject = app
        .admin_post("/rooms/ctl/eject", json!({ "ticket": 3 }))
        .await;
    assert_eq!(eject.status, 200, "{}", eject.text);
    assert_eq!(eject.body["was"], "waiting");
    assert_eq!(eject.body["room"]["waiting"], 2);
    assert_eq!(
        error_of(
            &app.admin_post("/rooms/ctl/eject", json!({ "ticket": 3 }))
                .await
        ),
        (404, "ticket_not_found".into())
    );
    assert_eq!(
        error_of(
            &app.admin_post("/rooms/ctl/eject", json!({ "ticket": "x" }))
                .await
        )
        .1,
        "invalid_ticket"
    );
    assert_eq!(
        app.admin_post("/rooms/ctl/eject", json!({ "ticket": 1 }))
            .await
            .body["was"],
        "passed"
    );

    let purge = app.admin_post("/rooms/ctl/purge", json!({})).await;
    assert_eq!(purge.status, 200, "{}", purge.text);
    assert_eq!(purge.body["purged"], 2);
    assert_eq!(purge.body["stats"]["waiting"], 0);
    assert_eq!(
        purge.body["stats"]["id"], "ctl",
        "the room and its settings are kept"
    );

    for path in [
        "/rooms/nope/state",
        "/rooms/nope/flush",
        "/rooms/nope/purge",
    ] {
        let body = json!({ "state": "paused", "count": 1 });
        assert_eq!(
            error_of(&app.admin_post(path, body).await),
            (404, "room_not_found".into()),
            "{path}"
        );
    }
    assert_eq!(
        error_of(&app.admin_post("/rooms/bad%20id/purge", json!({})).await).1,
        "invalid_room_id"
    );
    let deleted = app.admin_call(Method::DELETE, "/rooms/ctl", None).await;
    assert_eq!(deleted.status, 200);
    assert_eq!(
        error_of(&app.admin_call(Method::GET, "/rooms/ctl", None).await),
        (404, "room_not_found".into())
    );
}

#[tokio::test]
async fn schedule_applies_each_field_only_if_present() {
    let app = spawn_app().await;
    app.create_room(room_body("sched", 60, json!({}))).await;
    let opens_at = qm_core::clock::now_ms() + 3_600_000;
    let set = app
        .admin_post("/rooms/sched/schedule", json!({ "opensAt": opens_at }))
        .await;
    assert_eq!(set.status, 200, "{}", set.text);
    assert_eq!(set.body["room"]["opensAt"], opens_at);
    assert_eq!(set.body["room"]["effectiveState"], "scheduled");
    let cap = app
        .admin_post("/rooms/sched/schedule", json!({ "preQueueMaxPerIp": 3 }))
        .await;
    assert_eq!(
        cap.body["room"]["opensAt"], opens_at,
        "the cap alone leaves the drop scheduled"
    );
    assert_eq!(cap.body["room"]["preQueueMaxPerIp"], 3);
    assert_eq!(
        error_of(&app.admin_post("/rooms/sched/schedule", json!({})).await),
        (400, "nothing_to_change".into())
    );
    assert_eq!(
        error_of(
            &app.admin_post("/rooms/sched/schedule", json!({ "when": 1 }))
                .await
        )
        .1,
        "unknown_field"
    );
    assert_eq!(
        error_of(
            &app.admin_post("/rooms/sched/schedule", json!({ "opensAt": "soon" }))
                .await
        )
        .1,
        "invalid_opens_at"
    );
    let cancel = app
        .admin_post("/rooms/sched/schedule", json!({ "opensAt": null }))
        .await;
    assert!(cancel.body["room"]["opensAt"].is_null());
    assert_eq!(cancel.body["room"]["effectiveState"], "active");
}

#[tokio::test]
async fn est_wait_sec_is_only_ever_a_number_the_room_can_back() {
    let app = spawn_app().await;
    app.create_room(room_body("idle", 60, json!({}))).await;
    assert_eq!(
        app.room("idle").await["estWaitSec"],
        0,
        "active and empty admits at once"
    );

    app.create_room(room_body("zero", 0, json!({}))).await;
    assert!(
        app.room("zero").await["estWaitSec"].is_null(),
        "rate 0 admits nobody"
    );

    app.create_room(room_body("still", 60, json!({ "state": "paused" })))
        .await;
    assert!(
        app.room("still").await["estWaitSec"].is_null(),
        "paused admits nobody, queued or not"
    );
    for _ in 0..9 {
        app.join_as_new_visitor("still").await;
    }
    assert!(app.room("still").await["estWaitSec"].is_null());
    app.admin_post("/rooms/still/state", json!({ "state": "active" }))
        .await;
    // 9 waiting at 60/min: a newcomer is the 10th, about 10 s (a slice may already have run).
    let wait = app.room("still").await["estWaitSec"]
        .as_u64()
        .expect("a number");
    assert!((8..=10).contains(&wait), "{wait}");

    let opens_at = qm_core::clock::now_ms() + 600_000;
    app.create_room(room_body("later", 60, json!({ "opensAt": opens_at })))
        .await;
    let later = app.room("later").await;
    let wait = later["estWaitSec"].as_u64().expect("a floor");
    assert!((598..=600).contains(&wait), "{later}");
    assert_eq!(later["estWaitFloor"], true);
}

#[tokio::test]
async fn admin_health_shows_the_effective_config_without_secrets() {
    let app = spawn_app().await;
    let reply = app.admin_call(Method::GET, "/health", None).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.body["config"]["STORE"], app.config.store.as_str());
    let store = if app.backing.is_some() {
        "valkey+pg"
    } else {
        "memory"
    };
    assert_eq!(reply.body["storage"]["store"], store, "{}", reply.text);
    assert_eq!(reply.body["storage"]["ready"], true);
    assert!(reply.body["warnings"].is_array());
    assert!(!reply.text.contains(TEST_ADMIN_KEY));
    assert!(!reply.text.contains("integration-test-secret"));
}

#[tokio::test]
async fn room_commands_refuse_the_credential_then_the_room_id_then_the_body() {
    let app = spawn_app().await;
    app.create_room(room_body("order", 0, json!({}))).await;
    let post = |path: String, body: Value, key: Option<&str>| {
        let mut request = app
            .http
            .post(format!("{}/api/admin{path}", app.admin))
            .json(&body);
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        app.send(request)
    };
    let not_an_object = json!(["not", "an", "object"]);
    for action in ["state", "rate", "flush", "schedule", "eject"] {
        let bad_room = format!("/rooms/bad%20id/{action}");
        let good_room = format!("/rooms/order/{action}");
        let anonymous = post(bad_room.clone(), not_an_object.clone(), None).await;
        assert_eq!(
            error_of(&anonymous),
            (401, "unauthorized".into()),
            "{action}"
        );
        let bad_id = post(bad_room, not_an_object.clone(), Some(TEST_ADMIN_KEY)).await;
        assert_eq!(
            error_of(&bad_id),
            (400, "invalid_room_id".into()),
            "{action}"
        );
        let bad_body = post(
            good_room.clone(),
            not_an_object.clone(),
            Some(TEST_ADMIN_KEY),
        )
        .await;
        assert_eq!(
            error_of(&bad_body),
            (400, "invalid_json".into()),
            "{action}"
        );
        let no_json = app
            .send(
                app.http
                    .post(format!("{}/api/admin{good_room}", app.admin))
                    .bearer_auth(TEST_ADMIN_KEY)
                    .body("count=1"),
            )
            .await;
        assert_eq!(
            error_of(&no_json),
            (415, "unsupported_media_type".into()),
            "{action}"
        );
    }
}
