//! The fault table's Postgres rows, on the durable store (`STORE=valkey SIDESTORE=pg`): a
//! `qm engine` child process on a private Valkey and a Postgres journal, the gateway and admin
//! in this process, a small burst of joins with the fault in the middle of it, then the
//! history judged (see `support`): nothing acknowledged lost, nothing duplicated, the line in
//! ticket order, the journal gap-free, and Valkey holding nothing the journal lacks.
//!
//! The crash row runs its own Postgres cluster (initdb into a temp dir, a free loopback port),
//! never the machine's server.

mod support;

use std::time::Duration;

use qm_tests::postgres::RowLock;
use qm_tests::servers::ValkeyOptions;
use support::{Plan, Setup, alone_within, burst_around, judge, start_with};

/// Every test's whole body runs within this.
const TEST_LIMIT: Duration = Duration::from_secs(120);
const ROOM: &str = "fault";
/// A room nobody locks, joined while [`ROOM`]'s row is locked.
const OTHER_ROOM: &str = "bystander";
/// How long the engine runs on fresh connections between the backends' end and the crash.
const BETWEEN_FAULTS: Duration = Duration::from_secs(1);
/// How long Postgres stays down after `pg_ctl stop -m immediate`: longer than the journal pools'
/// 2 s acquire timeout, so joins meet the outage rather than merely waiting it out.
const POSTGRES_DOWNTIME: Duration = Duration::from_secs(3);
/// How long the row lock is held.
const LOCK_HELD: Duration = Duration::from_secs(30);
/// How long Postgres is stalled by SIGSTOP.
const STALL: Duration = Duration::from_secs(8);
/// The longest a join may take while the journal is locked: the edge's engine-call timeout
/// (5 s, `qm_proto::CALL_TIMEOUT`) and a margin for this small machine.
const LOCKED_ANSWER_LIMIT: Duration = Duration::from_secs(7);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_backends_terminated_then_crashed_keeps_the_journal_gap_free() {
    alone_within(TEST_LIMIT, async {
        let (mut cluster, edge) = start_with(Setup {
            valkey: ValkeyOptions { aof: true },
            private_postgres: true,
            ..Setup::default()
        })
        .await;
        edge.create_still_room(ROOM).await;
        let postgres = cluster.postgres();
        let run = burst_around(&edge, ROOM, Plan::SMALL, async {
            let terminated = postgres.terminate_backends().await;
            tokio::time::sleep(BETWEEN_FAULTS).await;
            postgres.stop_immediate().await;
            tokio::time::sleep(POSTGRES_DOWNTIME).await;
            postgres.restart().await;
            terminated
        })
        .await;
        let terminated = run.fault;
        assert!(
            terminated > 0,
            "pg_terminate_backend ended the engine's connections"
        );
        let verdict = judge(&edge, &cluster, ROOM, &run.answers, "postgres crash").await;
        assert!(verdict.unacked > 0, "the crash left joins unanswered");
        for label in verdict.refusals.keys() {
            assert!(
                label.starts_with("503"),
                "a join refused while Postgres was down answers 503, not {label}"
            );
        }
        eprintln!(
            "{} | {terminated} backends terminated, then stop -m immediate for {:?}; joins back \
             {:.2} s after the restart",
            verdict.row("6 postgres backends terminated, then stop -m immediate"),
            POSTGRES_DOWNTIME,
            run.back_after.as_secs_f64()
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn journal_row_lock_held_30_s_times_joins_out_and_keeps_the_order() {
    alone_within(TEST_LIMIT, async {
        let (cluster, edge) = start_with(Setup {
            valkey: ValkeyOptions { aof: true },
            ..Setup::default()
        })
        .await;
        edge.create_still_room(ROOM).await;
        edge.create_still_room(OTHER_ROOM).await;
        let database_url = cluster.database_url.clone();
        let run = burst_around(&edge, ROOM, Plan::SMALL, async {
            let lock = RowLock::take(&database_url, ROOM).await;
            let held = tokio::time::Instant::now();
            // Another room's joins meanwhile: the commits they share with the locked room
            // must not leave them hanging either.
            let mut others = Vec::new();
            while held.elapsed() + Duration::from_secs(1) < LOCK_HELD {
                others.push(edge.timed_join(OTHER_ROOM).await);
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            tokio::time::sleep_until(held + LOCK_HELD).await;
            lock.release().await;
            others
        })
        .await;
        let others = &run.fault;
        let mut other_answers = std::collections::BTreeMap::<String, usize>::new();
        for answer in others {
            *other_answers.entry(answer.outcome.label()).or_default() += 1;
            assert!(
                answer.took <= LOCKED_ANSWER_LIMIT,
                "a join to another room took {:?} while {ROOM}'s row was locked",
                answer.took
            );
            let label = answer.outcome.label();
            assert!(
                label == "200" || label == "503 storage_unavailable",
                "a join to another room while {ROOM}'s row was locked answered {label}"
            );
        }
        let other_slowest = others.iter().map(|answer| answer.took).max();
        let verdict = judge(&edge, &cluster, ROOM, &run.answers, "row lock").await;
        let during: Vec<String> = run
            .during_fault()
            .map(|answer| answer.outcome.label())
            .collect();
        assert!(
            during.iter().any(|label| label.starts_with("503")),
            "joins sent while the journal's row was locked were refused with 503"
        );
        for label in verdict.refusals.keys() {
            assert_eq!(
                label, "503 storage_unavailable",
                "a join refused while the journal's row was locked"
            );
        }
        assert!(
            verdict.max_latency <= LOCKED_ANSWER_LIMIT,
            "every join was answered within {LOCKED_ANSWER_LIMIT:?}: the slowest took {:?}",
            verdict.max_latency
        );
        eprintln!(
            "{} | {} joins sent during the lock; joins back {:.2} s after it was released; \
             another room's joins meanwhile: {other_answers:?}, slowest {other_slowest:?}",
            verdict.row("7 journal row lock held 30 s"),
            during.len(),
            run.back_after.as_secs_f64()
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_stalled_by_sigstop_answers_503_without_a_hang() {
    alone_within(TEST_LIMIT, async {
        let (mut cluster, edge) = start_with(Setup {
            valkey: ValkeyOptions { aof: true },
            private_postgres: true,
            ..Setup::default()
        })
        .await;
        edge.create_still_room(ROOM).await;
        let postgres = cluster.postgres();
        let run = burst_around(&edge, ROOM, Plan::SMALL, async {
            postgres.pause();
            tokio::time::sleep(STALL).await;
            postgres.resume();
        })
        .await;
        let verdict = judge(&edge, &cluster, ROOM, &run.answers, "postgres stalled").await;
        let during: Vec<String> = run
            .during_fault()
            .map(|answer| answer.outcome.label())
            .collect();
        assert!(
            during
                .iter()
                .any(|label| label == "503 storage_unavailable"),
            "a stalled journal answers 503 storage_unavailable from the engine's own bounds \
             (a commit connection's liveness check, the commit's timeout), not the edge's \
             engine_unavailable: {during:?}"
        );
        for label in verdict.refusals.keys() {
            assert_eq!(
                label, "503 storage_unavailable",
                "a join refused while stalled"
            );
        }
        assert!(
            verdict.max_latency <= LOCKED_ANSWER_LIMIT,
            "every join was answered within {LOCKED_ANSWER_LIMIT:?}: the slowest took {:?}",
            verdict.max_latency
        );
        eprintln!(
            "{} | Postgres stalled {STALL:?} by SIGSTOP; {} joins sent meanwhile; joins back \
             {:.2} s after SIGCONT",
            verdict.row("6b postgres stalled by SIGSTOP"),
            during.len(),
            run.back_after.as_secs_f64()
        );
    })
    .await;
}
