//! A scripted incident on the durable store, with a `qm engine` and a `qm admin` child process
//! and a webhook receiver: a surge of joins into a room that admits nobody, the room stalling,
//! the rate raised so the line moves, Valkey killed and restarted, the engine killed and
//! restarted. Each of the four alerts must page exactly once firing and exactly once resolved,
//! in that order, with nothing else sent — the hysteresis of OPERATIONS.md, Alerts, under a
//! real outage rather than a scripted clock.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use qm_tests::TEST_ADMIN_KEY;
use qm_tests::process::{AdminProcess, free_addr};
use qm_tests::webhook::WebhookReceiver;
use serde_json::{Value, json};
use support::{RECOVERY_LIMIT, alone_within, start};

const TEST_LIMIT: Duration = Duration::from_secs(150);
const ROOM: &str = "incident";
/// How long any one page may take to arrive once its cause is in place.
const PAGE_LIMIT: Duration = Duration::from_secs(20);

async fn alerts_state(client: &reqwest::Client, admin: &str) -> Value {
    let response = client
        .get(format!("{admin}/api/admin/alerts"))
        .bearer_auth(TEST_ADMIN_KEY)
        .send()
        .await
        .expect("the admin process answers");
    assert_eq!(response.status(), 200);
    response.json().await.expect("JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_alert_fires_once_and_resolves_once_across_an_incident() {
    alone_within(TEST_LIMIT, async {
        let receiver = WebhookReceiver::start().await;
        let (mut cluster, edge) = start().await;
        let mut env: HashMap<String, String> = cluster.env.clone();
        for (key, value) in [
            ("ALERT_WEBHOOK_URL", receiver.url.as_str()),
            ("ALERT_EVAL_MS", "200"),
            ("ALERT_SURGE_PER_MIN", "300"),
            ("ALERT_SURGE_WINDOW_SEC", "2"),
            ("ALERT_STALL_SEC", "2"),
            ("ALERT_RESOLVE_SEC", "2"),
        ] {
            env.insert(key.to_owned(), value.to_owned());
        }
        let admin = AdminProcess::start(
            env!("CARGO_BIN_EXE_qm"),
            &env,
            cluster.engine.addr(),
            free_addr().port(),
        )
        .await;
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .expect("the http client builds");

        // A surge into a room that admits nobody: 30 joins in well under 2 s is ≥ 900/min.
        edge.create_still_room(ROOM).await;
        let joined = edge.join_all(ROOM, 30).await;
        assert_eq!(joined.len(), 30);
        let surge = receiver.wait_for("QmRoomSurge", "firing", PAGE_LIMIT).await;
        assert_eq!(surge["alerts"][0]["labels"]["room"], ROOM);
        receiver
            .wait_for("QmRoomStalled", "firing", PAGE_LIMIT)
            .await;
        // The joins stopped: the window empties, then the surge resolves after its hold.
        receiver
            .wait_for("QmRoomSurge", "resolved", PAGE_LIMIT)
            .await;

        // The operator raises the rate: the line moves, the stall resolves.
        let raised = client
            .post(format!("{}/api/admin/rooms/{ROOM}/rate", admin.url()))
            .bearer_auth(TEST_ADMIN_KEY)
            .json(&json!({ "ratePerMinute": 6000 }))
            .send()
            .await
            .expect("the admin process answers");
        assert_eq!(raised.status(), 200);
        receiver
            .wait_for("QmRoomStalled", "resolved", PAGE_LIMIT)
            .await;

        // Storage trouble: Valkey dies. The engine answers and says it cannot persist.
        cluster.valkey.kill9();
        let storage = receiver
            .wait_for("QmStorageUnavailable", "firing", PAGE_LIMIT)
            .await;
        assert_eq!(storage["alerts"][0]["labels"]["severity"], "critical");
        cluster.valkey.restart().await;
        receiver
            .wait_for("QmStorageUnavailable", "resolved", PAGE_LIMIT)
            .await;

        // Readiness lost: the engine dies; it comes back.
        cluster.engine.kill9();
        receiver
            .wait_for("QmEngineUnreachable", "firing", PAGE_LIMIT)
            .await;
        cluster.engine.restart().await;
        edge.wait_healthy(RECOVERY_LIMIT, &cluster.engine).await;
        receiver
            .wait_for("QmEngineUnreachable", "resolved", PAGE_LIMIT)
            .await;

        // Settled: a few more evaluations, and nothing else was sent.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let mut counts: HashMap<(String, String), usize> = HashMap::new();
        for transition in receiver.transitions() {
            *counts.entry(transition).or_default() += 1;
        }
        let expected: HashMap<(String, String), usize> = [
            "QmRoomSurge",
            "QmRoomStalled",
            "QmStorageUnavailable",
            "QmEngineUnreachable",
        ]
        .iter()
        .flat_map(|name| {
            ["firing", "resolved"].map(|status| (((*name).to_owned(), status.to_owned()), 1))
        })
        .collect();
        assert_eq!(counts, expected, "pages: {:?}", receiver.transitions());
        let state = alerts_state(&client, &admin.url()).await;
        assert_eq!(state["firing"], json!([]), "{state}");
        assert_eq!(state["delivery"]["pending"], 0, "{state}");
    })
    .await;
}
