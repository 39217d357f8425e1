//! Durable-store behaviour that has no memory-store counterpart, on a private Valkey and a
//! fresh database whatever `QM_TEST_STORE` says.

use qm_tests::servers::{TcpProxy, ValkeyOptions, rewrite_port};
use qm_tests::{Backing, room_body, spawn_app_on};
use serde_json::json;

#[tokio::test]
async fn a_room_valkey_holds_but_the_journal_never_recorded_gives_way() {
    let backing = Backing::start(ValkeyOptions::default()).await;
    // As if this Valkey outlived the database it was paired with.
    backing
        .valkey
        .command(&[
            "HSET",
            "qm:{orphan}:m",
            "seq",
            "41",
            "exists",
            "1",
            "next",
            "9",
            "head",
            "3",
        ])
        .await;
    let app = spawn_app_on(Some(backing), &[]).await;
    let reply = app
        .admin_post("/rooms", room_body("orphan", 0, json!({})))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.body["created"], true);
    assert_eq!(reply.body["room"]["seq"], 1, "{}", reply.text);
    let join = app.join("orphan", None, None).await;
    assert_eq!(join.status, 200, "{}", join.text);
    assert_eq!(join.body["position"], 1);
    assert_eq!(app.room("orphan").await["nextTicket"], 2);
}

#[tokio::test]
async fn the_journal_carries_every_change_in_seq_order() {
    let backing = Backing::start(ValkeyOptions::default()).await;
    let database = backing.database.url();
    let app = spawn_app_on(Some(backing), &[]).await;
    app.create_room(room_body("kept", 0, json!({}))).await;
    for _ in 0..3 {
        assert_eq!(app.join("kept", None, None).await.status, 200);
    }
    let flushed = app
        .admin_post("/rooms/kept/flush", json!({"count": 1}))
        .await;
    assert_eq!(flushed.status, 200, "{}", flushed.text);
    let mut connection = <sqlx::PgConnection as sqlx::Connection>::connect(&database)
        .await
        .expect("connect to the test database");
    let rows: Vec<(i64, String)> =
        sqlx::query_as("SELECT seq, kind FROM room_events WHERE room_id = 'kept' ORDER BY seq")
            .fetch_all(&mut connection)
            .await
            .expect("read the journal");
    let kinds: Vec<&str> = rows.iter().map(|(_, kind)| kind.as_str()).collect();
    assert_eq!(kinds, ["created", "joined", "joined", "joined", "passed"]);
    let seqs: Vec<i64> = rows.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5], "gap-free, in order");
    let last: i64 = sqlx::query_scalar("SELECT last_seq FROM rooms WHERE room_id = 'kept'")
        .fetch_one(&mut connection)
        .await
        .expect("read the head");
    assert_eq!(last, 5);
}

/// The engine's refusal keeps its retry hint on the way to the visitor: `qm-retry-after` over
/// gRPC, `Retry-After` over HTTP.
#[tokio::test]
async fn a_join_the_journal_cannot_record_answers_503_with_retry_after() {
    let backing = Backing::start(ValkeyOptions::default()).await;
    let proxy = TcpProxy::start(backing.database.server_addr()).await;
    let proxied = rewrite_port(&backing.database.url(), proxy.addr());
    let app = spawn_app_on(Some(backing), &[("DATABASE_URL", proxied.as_str())]).await;
    app.create_room(room_body("cut", 0, json!({}))).await;
    assert_eq!(app.join("cut", None, None).await.status, 200);

    proxy.cut();
    let refused = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        loop {
            let reply = app.join("cut", None, None).await;
            if reply.status != 200 {
                break reply;
            }
        }
    })
    .await
    .expect("a join is refused while the journal is cut");
    assert_eq!(
        (refused.status, refused.code()),
        (503, "storage_unavailable"),
        "{}",
        refused.text
    );
    let retry_after: u64 = refused
        .header("retry-after")
        .and_then(|value| value.parse().ok())
        .expect("Retry-After on storage_unavailable");
    assert!(retry_after >= 1);
    assert!(
        refused.cookie("qm_cut").is_none(),
        "no ticket is handed out"
    );
    proxy.restore();
}

/// A pass that admits somebody is answered only once the admission is on disk: with the journal
/// cut, the check that would open a door session answers 503 `storage_unavailable` without a
/// key, and once the journal is back a retry is admitted (the refused opening was taken back,
/// so the pass is not spent).
#[tokio::test]
async fn a_door_session_the_journal_cannot_record_is_refused_and_a_retry_is_admitted() {
    let backing = Backing::start(ValkeyOptions::default()).await;
    let proxy = TcpProxy::start(backing.database.server_addr()).await;
    let proxied = rewrite_port(&backing.database.url(), proxy.addr());
    let app = spawn_app_on(Some(backing), &[("DATABASE_URL", proxied.as_str())]).await;
    app.create_room(room_body("door", 0, json!({}))).await;
    let (joined, _) = app.join_as_new_visitor("door").await;
    let token = joined.body["token"].as_str().expect("token").to_owned();
    let flushed = app
        .admin_post("/rooms/door/flush", json!({ "count": 1 }))
        .await;
    assert_eq!(flushed.status, 200, "{}", flushed.text);
    let check = || {
        app.send(
            app.http
                .get(format!("{}/api/check", app.gateway))
                .query(&[("roomId", "door"), ("token", token.as_str())]),
        )
    };

    proxy.cut();
    let refused = tokio::time::timeout(std::time::Duration::from_secs(30), check())
        .await
        .expect("the check answers while the journal is cut");
    assert_eq!(
        (refused.status, refused.code()),
        (503, "storage_unavailable"),
        "{}",
        refused.text
    );
    assert!(refused.header("retry-after").is_some());
    assert!(refused.body.get("sess").is_none(), "no key is handed out");
    proxy.restore();

    let admitted = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        loop {
            let reply = check().await;
            if reply.status == 200 {
                break reply;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    })
    .await
    .expect("a retry is answered once the journal is back");
    assert_eq!(admitted.body["action"], "pass", "{}", admitted.text);
    assert!(
        admitted.body["sess"].as_str().is_some(),
        "the retry opens the session: {}",
        admitted.text
    );
}
