//! The fault table's admin row, on the durable store (`STORE=valkey SIDESTORE=pg`): a rate
//! change answered 200 by a `qm admin` child process, which is then killed with SIGKILL. The
//! rate must persist — through the admin's restart and through the engine's — and the room
//! must admit at that rate, in ticket order.

mod support;

use std::time::{Duration, Instant};

use qm_tests::TEST_ADMIN_KEY;
use qm_tests::process::{AdminProcess, free_addr};
use serde_json::{Value, json};
use support::{RECOVERY_LIMIT, alone_within, start};

const TEST_LIMIT: Duration = Duration::from_secs(60);
const ROOM: &str = "fault";
/// Visitors waiting when the rate changes.
const VISITORS: usize = 30;
/// The new rate: one admission a second, slow enough to count.
const NEW_RATE: u64 = 60;
/// How long the room admits at the new rate before the admissions are counted.
const ADMITTING_FOR: Duration = Duration::from_secs(4);

/// GET `/api/admin/rooms/:id` from the admin process at `admin`.
async fn room(client: &reqwest::Client, admin: &str) -> Value {
    let response = client
        .get(format!("{admin}/api/admin/rooms/{ROOM}"))
        .bearer_auth(TEST_ADMIN_KEY)
        .send()
        .await
        .expect("the admin process answers");
    assert_eq!(response.status(), 200, "GET the room from {admin}");
    let body: Value = response.json().await.expect("a JSON room");
    body["room"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_change_survives_kill_9_of_the_admin_process() {
    alone_within(TEST_LIMIT, async {
        let (mut cluster, edge) = start().await;
        edge.create_still_room(ROOM).await;
        let mut visitors = edge.join_all(ROOM, VISITORS).await;
        visitors.sort_by_key(|ack| ack.ticket);

        let mut admin = AdminProcess::start(
            env!("CARGO_BIN_EXE_qm"),
            &cluster.env,
            cluster.engine.addr(),
            free_addr().port(),
        )
        .await;
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .expect("the http client builds");
        let changed = client
            .post(format!("{}/api/admin/rooms/{ROOM}/rate", admin.url()))
            .bearer_auth(TEST_ADMIN_KEY)
            .json(&json!({ "ratePerMinute": NEW_RATE }))
            .send()
            .await
            .expect("the admin process answers the rate change");
        assert_eq!(changed.status(), 200, "the rate change is answered 200");
        // At once: nothing the admin process might still do after its answer survives this.
        admin.kill9();
        let rate_set_at = Instant::now();

        admin.restart().await;
        let after_admin = room(&client, &admin.url()).await;
        assert_eq!(
            after_admin["ratePerMinute"], NEW_RATE,
            "the restarted admin process reads the new rate: {after_admin}"
        );
        // And it is on the durable store, not in a process's memory: the engine too.
        cluster.engine.kill9();
        cluster.engine.restart().await;
        edge.wait_healthy(RECOVERY_LIMIT, &cluster.engine).await;
        let after_engine = room(&client, &admin.url()).await;
        assert_eq!(
            after_engine["ratePerMinute"], NEW_RATE,
            "the restarted engine keeps the new rate: {after_engine}"
        );

        // The room admits at that rate, in ticket order: the passed are a prefix of the line.
        tokio::time::sleep(ADMITTING_FOR).await;
        let deadline = Instant::now() + RECOVERY_LIMIT;
        let mut passed = Vec::new();
        for ack in &visitors {
            let body = edge
                .settled_status(&ack.token, deadline)
                .await
                .unwrap_or_else(|last| panic!("status of ticket {}: {last}", ack.ticket));
            passed.push(body["passed"] == true);
        }
        let elapsed = rate_set_at.elapsed();
        let admitted = passed.iter().filter(|passed| **passed).count();
        let prefix = passed.iter().take_while(|passed| **passed).count();
        assert_eq!(
            prefix, admitted,
            "admissions follow ticket order: {passed:?}"
        );
        // One a second, plus one for a slice already under way at each end.
        let allowed = (elapsed.as_secs_f64() * NEW_RATE as f64 / 60.0).ceil() as usize + 2;
        assert!(
            admitted >= 1 && admitted <= allowed,
            "{admitted} admitted in {elapsed:?} at {NEW_RATE}/min (at most {allowed})"
        );
        eprintln!(
            "fault-table | 8 rate change, then kill -9 of qm admin | rate {NEW_RATE}/min kept \
             through the admin's restart and the engine's | {admitted} of {VISITORS} admitted \
             in ticket order {:.1} s after the change (at most {allowed} allowed)",
            elapsed.as_secs_f64()
        );
    })
    .await;
}
