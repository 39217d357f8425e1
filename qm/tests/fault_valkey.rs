//! The fault table's Valkey rows, on the durable store (`STORE=valkey SIDESTORE=pg`): a
//! `qm engine` child process on a private Valkey and a fresh Postgres database, the gateway
//! and admin in this process, a small burst of joins with the fault in the middle of it, then
//! the history judged (see `support`): nothing acknowledged lost, nothing duplicated, the line
//! in ticket order, the journal gap-free, and Valkey holding nothing the journal lacks.

mod support;

use std::time::Duration;

use qm_tests::servers::{ValkeyExtras, ValkeyOptions};
use support::{Plan, Setup, Verdict, alone_within, burst_around, judge, start_with};

/// Every test's whole body runs within this.
const TEST_LIMIT: Duration = Duration::from_secs(90);
const ROOM: &str = "fault";
/// How long a killed Valkey stays down: past the engine's 2 s Valkey command timeout, so the
/// calls queued meanwhile fail and the room is rebuilt from the journal.
const VALKEY_DOWNTIME: Duration = Duration::from_millis(2_500);

/// Prints the judged figures as one row of the fault table.
fn report(label: &str, verdict: &Verdict, extra: &str) {
    eprintln!("{} | {extra}", verdict.row(label));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valkey_fsync_always_killed_mid_burst_loses_nothing_acknowledged() {
    alone_within(TEST_LIMIT, async {
        let (mut cluster, edge) = start_with(Setup {
            valkey: ValkeyOptions { aof: true },
            valkey_extras: ValkeyExtras {
                config_file: None,
                args: vec!["--appendfsync".to_owned(), "always".to_owned()],
            },
            ..Setup::default()
        })
        .await;
        assert_eq!(
            cluster
                .valkey
                .command(&["CONFIG", "GET", "appendfsync"])
                .await,
            "*2\r\n$11\r\nappendfsync\r\n$6\r\nalways\r\n"
        );
        edge.create_still_room(ROOM).await;
        let database_url = cluster.database_url.clone();
        let valkey = &mut cluster.valkey;
        let run = burst_around(&edge, ROOM, Plan::SMALL, async {
            valkey.kill9();
            // Everything in the journal was landed in Valkey, and answered by it, first.
            let journaled = qm_tests::postgres::journal_summary(&database_url, ROOM).await;
            tokio::time::sleep(VALKEY_DOWNTIME).await;
            valkey.restart().await;
            let reply = valkey
                .command(&["HGET", &format!("qm:{{{ROOM}}}:m"), "seq"])
                .await;
            let reloaded: Option<u64> = reply.lines().nth(1).and_then(|line| line.parse().ok());
            (journaled.last_seq, reloaded)
        })
        .await;
        let (journaled_at_kill, reloaded) = run.fault;
        // With `appendfsync always` every write Valkey answered was on disk before the answer:
        // the AOF it reloads holds every landing the engine was told of, so at least all the
        // journal held when it died.
        assert!(
            reloaded >= journaled_at_kill,
            "Valkey reloaded the room at seq {reloaded:?}, below the journal's \
             {journaled_at_kill:?} at the kill: it lost writes it had answered"
        );
        let verdict = judge(
            &edge,
            &cluster,
            ROOM,
            &run.answers,
            "valkey fsync always kill -9",
        )
        .await;
        assert!(verdict.unacked > 0, "the kill left joins unanswered");
        report(
            "1 valkey appendfsync always, kill -9",
            &verdict,
            &format!(
                "journal seq {journaled_at_kill:?} at the kill, valkey reloaded seq {reloaded:?}; \
                 joins back {:.2} s after the restart",
                run.back_after.as_secs_f64()
            ),
        );
    })
    .await;
}
