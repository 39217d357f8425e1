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

/// The deployment's Valkey configuration, which the truncated-AOF row runs on.
fn deploy_valkey_conf() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/valkey.conf")
}

/// Cuts the newest incremental AOF file at two thirds of its length, moved one byte back when
/// that falls between two commands (where the next byte opens a RESP array after a CRLF), so
/// the cut is always inside a record; far enough back that the last landings (acknowledged and
/// journaled) are gone. Answers the file's length before and after.
fn truncate_aof(dir: &std::path::Path) -> (u64, u64) {
    let incr = std::fs::read_dir(dir)
        .unwrap_or_else(|error| panic!("read the AOF dir {}: {error}", dir.display()))
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.to_string_lossy().ends_with(".incr.aof"))
        .max()
        .unwrap_or_else(|| panic!("no incremental AOF file in {}", dir.display()));
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&incr)
        .unwrap_or_else(|error| panic!("open {}: {error}", incr.display()));
    let before = file.metadata().expect("the AOF file has metadata").len();
    let bytes =
        std::fs::read(&incr).unwrap_or_else(|error| panic!("read {}: {error}", incr.display()));
    let mut after = before * 2 / 3;
    let at = after as usize;
    if at >= 2 && bytes.get(at) == Some(&b'*') && &bytes[at - 2..at] == b"\r\n" {
        after -= 1;
    }
    file.set_len(after)
        .unwrap_or_else(|error| panic!("truncate {}: {error}", incr.display()));
    (before, after)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_aof_is_loaded_and_the_room_rebuilt_from_the_journal() {
    alone_within(TEST_LIMIT, async {
        let (mut cluster, edge) = start_with(Setup {
            valkey: ValkeyOptions { aof: true },
            valkey_extras: ValkeyExtras {
                config_file: Some(deploy_valkey_conf()),
                args: Vec::new(),
            },
            ..Setup::default()
        })
        .await;
        // What the deployment says about a truncated AOF: nothing, so Valkey's default.
        assert_eq!(
            cluster
                .valkey
                .command(&["CONFIG", "GET", "aof-load-truncated"])
                .await,
            "*2\r\n$18\r\naof-load-truncated\r\n$3\r\nyes\r\n"
        );
        edge.create_still_room(ROOM).await;
        let database_url = cluster.database_url.clone();
        let valkey = &mut cluster.valkey;
        let run = burst_around(&edge, ROOM, Plan::SMALL, async {
            valkey.kill9();
            // Every server's (one, or each node of a cluster): the room's node is among them.
            let (before, after) = valkey
                .aof_dirs()
                .iter()
                .map(|dir| truncate_aof(dir))
                .fold((0, 0), |(before, after), (b, a)| (before + b, after + a));
            let journaled = qm_tests::postgres::journal_summary(&database_url, ROOM).await;
            valkey.restart().await;
            let reply = valkey
                .command(&["HGET", &format!("qm:{{{ROOM}}}:m"), "seq"])
                .await;
            let reloaded: Option<u64> = reply.lines().nth(1).and_then(|line| line.parse().ok());
            (before, after, journaled.last_seq, reloaded)
        })
        .await;
        let (aof_before, aof_after, journaled_at_kill, reloaded) = run.fault;
        let log = cluster.valkey.logs();
        assert!(
            log.contains("aof-load-truncated"),
            "Valkey loaded the truncated AOF as the deployment configures it; log:\n{log}"
        );
        // The cut took acknowledged landings away: only the journal still has them.
        assert!(
            reloaded < journaled_at_kill,
            "the truncated AOF reloads the room at seq {reloaded:?}, behind the journal's \
             {journaled_at_kill:?}"
        );
        let verdict = judge(&edge, &cluster, ROOM, &run.answers, "truncated AOF").await;
        report(
            "2 truncated AOF (deploy/valkey.conf)",
            &verdict,
            &format!(
                "AOF cut from {aof_before} to {aof_after} bytes; journal seq {journaled_at_kill:?} \
                 at the kill, valkey reloaded seq {reloaded:?}; joins back {:.2} s after the \
                 restart",
                run.back_after.as_secs_f64()
            ),
        );
    })
    .await;
}

/// How long Valkey is stalled with SIGSTOP.
const STALL: Duration = Duration::from_secs(10);
/// The longest a join may take while Valkey is stalled: the edge's engine-call timeout (5 s,
/// `qm_proto::CALL_TIMEOUT`) and a margin for this small machine — never a hang.
const STALLED_ANSWER_LIMIT: Duration = Duration::from_secs(7);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valkey_stalled_by_sigstop_answers_503_without_a_hang_or_a_duplicate() {
    alone_within(TEST_LIMIT, async {
        let (cluster, edge) = start_with(Setup {
            valkey: ValkeyOptions { aof: true },
            ..Setup::default()
        })
        .await;
        edge.create_still_room(ROOM).await;
        let valkey = &cluster.valkey;
        let run = burst_around(&edge, ROOM, Plan::SMALL, async {
            valkey.pause();
            tokio::time::sleep(STALL).await;
            valkey.resume();
        })
        .await;
        let verdict = judge(&edge, &cluster, ROOM, &run.answers, "valkey SIGSTOP").await;
        // While stalled: refused with 503 (the engine's 2 s Valkey timeout), never left
        // hanging, never an answer other than 200 or 503.
        let during: Vec<&support::Answer> = run.during_fault().collect();
        assert!(
            during
                .iter()
                .any(|answer| answer.outcome.label().starts_with("503")),
            "joins sent while Valkey was stalled were refused with 503"
        );
        for label in verdict.refusals.keys() {
            assert!(
                label.starts_with("503"),
                "a join refused while Valkey was stalled answers 503, not {label}"
            );
        }
        assert!(
            verdict.max_latency <= STALLED_ANSWER_LIMIT,
            "every join was answered within {STALLED_ANSWER_LIMIT:?}: the slowest took {:?}",
            verdict.max_latency
        );
        report(
            "3 valkey SIGSTOP 10 s",
            &verdict,
            &format!(
                "{} joins sent during the stall; joins back {:.2} s after SIGCONT",
                during.len(),
                run.back_after.as_secs_f64()
            ),
        );
    })
    .await;
}

/// How long, and how often, Valkey's client connections are killed.
const KILLING_FOR: Duration = Duration::from_secs(3);
const KILL_EVERY: Duration = Duration::from_millis(200);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_connections_killed_every_200_ms_lose_and_duplicate_nothing() {
    alone_within(TEST_LIMIT, async {
        let (cluster, edge) = start_with(Setup {
            valkey: ValkeyOptions { aof: true },
            ..Setup::default()
        })
        .await;
        edge.create_still_room(ROOM).await;
        let valkey = &cluster.valkey;
        let run = burst_around(&edge, ROOM, Plan::SMALL, async {
            let killer = valkey.kill_clients_every(KILL_EVERY);
            tokio::time::sleep(KILLING_FOR).await;
            killer.stop().await
        })
        .await;
        let tally = run.fault;
        assert!(
            tally.killed > 0,
            "CLIENT KILL closed the engine's connections: {tally:?}"
        );
        let verdict = judge(&edge, &cluster, ROOM, &run.answers, "CLIENT KILL loop").await;
        for label in verdict.refusals.keys() {
            assert!(
                label.starts_with("503"),
                "a join refused while connections were killed answers 503, not {label}"
            );
        }
        report(
            "4 CLIENT KILL TYPE normal every 200 ms for 3 s",
            &verdict,
            &format!(
                "{} rounds closed {} connections; joins back {:.2} s after the last",
                tally.rounds,
                tally.killed,
                run.back_after.as_secs_f64()
            ),
        );
    })
    .await;
}

/// How long Valkey stays over its memory limit.
const OUT_OF_MEMORY_FOR: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valkey_at_maxmemory_refuses_joins_with_503_and_half_writes_nothing() {
    alone_within(TEST_LIMIT, async {
        let (cluster, edge) = start_with(Setup {
            valkey: ValkeyOptions { aof: true },
            valkey_extras: ValkeyExtras {
                config_file: None,
                args: vec!["--maxmemory-policy".to_owned(), "noeviction".to_owned()],
            },
            ..Setup::default()
        })
        .await;
        edge.create_still_room(ROOM).await;
        let valkey = &cluster.valkey;
        let run = burst_around(&edge, ROOM, Plan::SMALL, async {
            // One byte: every write is over the limit; noeviction refuses it with -OOM.
            assert_eq!(
                valkey.command(&["CONFIG", "SET", "maxmemory", "1"]).await,
                "+OK\r\n"
            );
            tokio::time::sleep(OUT_OF_MEMORY_FOR).await;
            assert_eq!(
                valkey.command(&["CONFIG", "SET", "maxmemory", "0"]).await,
                "+OK\r\n"
            );
        })
        .await;
        let verdict = judge(&edge, &cluster, ROOM, &run.answers, "valkey maxmemory").await;
        let during: Vec<String> = run
            .during_fault()
            .map(|answer| answer.outcome.label())
            .collect();
        assert!(
            during
                .iter()
                .any(|label| label == "503 storage_unavailable"),
            "joins sent while Valkey was out of memory answer 503 storage_unavailable: \
             {during:?}"
        );
        for label in verdict.refusals.keys() {
            assert_eq!(
                label, "503 storage_unavailable",
                "a join refused while Valkey was out of memory"
            );
        }
        let oom = cluster.engine.log_tail().contains("OOM");
        report(
            "5 valkey maxmemory 1 byte, noeviction, 2 s",
            &verdict,
            &format!(
                "{} joins sent while out of memory; engine log names OOM: {oom}; joins back \
                 {:.2} s after the limit was lifted",
                during.len(),
                run.back_after.as_secs_f64()
            ),
        );
    })
    .await;
}
