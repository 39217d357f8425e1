//! The scheduled drop across engine restarts on the durable store: the draw is recorded as one
//! journal event, so an engine killed after the doors opened — and even a Valkey emptied with
//! it — comes back with exactly the drawn order, never a second draw. A `qm engine` child
//! process, a private Valkey and a fresh Postgres database; the gateway and admin run here.

use std::collections::BTreeMap;
use std::future::Future;
use std::process::Command;
use std::time::{Duration, Instant};

use qm_tests::process::{EngineProcess, free_addr};
use qm_tests::servers::ValkeyOptions;
use qm_tests::{Backing, TestApp, room_body, spawn_edge, test_env};
use serde_json::json;

const TEST_LIMIT: Duration = Duration::from_secs(120);
const ENTRIES: usize = 300;
const SETTLE_LIMIT: Duration = Duration::from_secs(20);

async fn within_limit(test: impl Future<Output = ()>) {
    if tokio::time::timeout(TEST_LIMIT, test).await.is_err() {
        panic!("the test did not finish within {TEST_LIMIT:?}");
    }
}

/// Every entry's drawn position, read once the engine answers 200 again.
async fn positions(app: &TestApp, tokens: &[String]) -> BTreeMap<usize, u64> {
    let deadline = Instant::now() + SETTLE_LIMIT;
    let mut drawn = BTreeMap::new();
    for (entry, token) in tokens.iter().enumerate() {
        loop {
            let status = app.status(token).await;
            if status.status == 200
                && let Some(position) = status.body["position"].as_u64()
            {
                drawn.insert(entry, position);
                break;
            }
            assert!(
                Instant::now() < deadline,
                "entry {entry} has no drawn position: {} {}",
                status.status,
                status.text
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    drawn
}

/// A private Valkey and a fresh database, a `qm engine` process on them, and the edge here.
async fn start() -> (Backing, EngineProcess, TestApp) {
    let backing = Backing::start(ValkeyOptions { aof: true }).await;
    let mut env = test_env();
    env.extend(backing.env());
    let engine = EngineProcess::start(env!("CARGO_BIN_EXE_qm"), &env, free_addr()).await;
    let app = spawn_edge(engine.addr(), &env).await;
    app.wait_ready().await;
    (backing, engine, app)
}

fn drawn_events(database_url: &str) -> String {
    let output = Command::new("psql")
        .arg(database_url)
        .args(["-tA", "-c"])
        .arg("SELECT count(*) FROM room_events WHERE room_id = 'drop' AND kind = 'drawn'")
        .output()
        .expect("psql runs (apt-get install postgresql-client)");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_restart_across_opens_at_replays_the_drawn_order() {
    within_limit(async {
        let (backing, mut engine, app) = start().await;

        // Rate 0: nobody passes, so every position is the draw's alone.
        let opens_at = qm_core::clock::now_ms() + 3_600_000;
        app.create_room(room_body(
            "drop",
            0,
            json!({ "opensAt": opens_at, "preQueueMaxPerIp": null }),
        ))
        .await;
        let mut tokens = Vec::with_capacity(ENTRIES);
        for _ in 0..ENTRIES {
            let (reply, _) = app.join_as_new_visitor("drop").await;
            assert_eq!(reply.body["preQueued"], true, "{}", reply.text);
            tokens.push(reply.body["token"].as_str().expect("token").to_owned());
        }

        // The doors open while the engine is down: the engine that comes back draws.
        let soon = app
            .admin_post(
                "/rooms/drop/schedule",
                json!({ "opensAt": qm_core::clock::now_ms() + 1_000 }),
            )
            .await;
        assert_eq!(soon.status, 200, "{}", soon.text);
        engine.kill9();
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        engine.restart().await;
        let first = positions(&app, &tokens).await;
        let mut seen: Vec<u64> = first.values().copied().collect();
        seen.sort_unstable();
        assert_eq!(
            seen,
            (1..=ENTRIES as u64).collect::<Vec<_>>(),
            "every entry drawn once"
        );
        assert_eq!(
            drawn_events(&backing.database.url()),
            "1",
            "one draw, journaled"
        );

        // A restart after the draw replays it.
        engine.kill9();
        engine.restart().await;
        assert_eq!(
            positions(&app, &tokens).await,
            first,
            "the same order after a restart"
        );

        // So does a rebuild of an emptied Valkey from the journal.
        engine.kill9();
        backing.valkey.flushall().await;
        engine.restart().await;
        assert_eq!(
            positions(&app, &tokens).await,
            first,
            "the same order after a rebuild"
        );
        assert_eq!(
            drawn_events(&backing.database.url()),
            "1",
            "never drawn again"
        );
        let room = app.room("drop").await;
        assert_eq!(
            (room["waiting"].clone(), room["preQueue"].clone()),
            (json!(ENTRIES), json!(0))
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_queue_survives_a_rebuild_of_an_emptied_valkey_and_draws_whole() {
    within_limit(async {
        let (backing, mut engine, app) = start().await;
        let opens_at = qm_core::clock::now_ms() + 3_600_000;
        app.create_room(room_body(
            "drop",
            0,
            json!({ "opensAt": opens_at, "preQueueMaxPerIp": 40 }),
        ))
        .await;
        let mut tokens = Vec::with_capacity(40);
        for _ in 0..40 {
            let (reply, _) = app.join_as_new_visitor("drop").await;
            assert_eq!(reply.body["preQueued"], true, "{}", reply.text);
            tokens.push(reply.body["token"].as_str().expect("token").to_owned());
        }

        // Valkey loses everything before the doors open: the pre-queue comes back from the
        // journal, caps included.
        engine.kill9();
        backing.valkey.flushall().await;
        engine.restart().await;
        let deadline = Instant::now() + SETTLE_LIMIT;
        loop {
            let status = app.status(&tokens[0]).await;
            if status.status == 200 && status.body["preQueued"] == true {
                assert_eq!(status.body["preCount"], 40, "{}", status.text);
                break;
            }
            assert!(
                Instant::now() < deadline,
                "no pre-queue after the rebuild: {}",
                status.text
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let capped = app.join("drop", None, None).await;
        assert_eq!(capped.code(), "prequeue_identity_limit", "{}", capped.text);

        let soon = app
            .admin_post(
                "/rooms/drop/schedule",
                json!({ "opensAt": qm_core::clock::now_ms() + 300 }),
            )
            .await;
        assert_eq!(soon.status, 200, "{}", soon.text);
        let drawn = positions(&app, &tokens).await;
        let mut seen: Vec<u64> = drawn.values().copied().collect();
        seen.sort_unstable();
        assert_eq!(
            seen,
            (1..=40).collect::<Vec<u64>>(),
            "the restored pre-queue drew whole"
        );
        assert_eq!(drawn_events(&backing.database.url()), "1");
    })
    .await;
}
