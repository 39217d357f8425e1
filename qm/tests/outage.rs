//! A Postgres outage in the middle of a burst of joins, on the durable store
//! (`STORE=valkey SIDESTORE=pg`). The engine runs as a `qm engine` child process whose
//! `DATABASE_URL` goes through a cuttable TCP proxy; the gateway and admin run in this process.
//!
//! While the journal is cut a join is never acknowledged: it answers 503 `storage_unavailable`
//! (never a 500, never `engine_unavailable` — the engine is up) and `/healthz` turns 503. Once
//! the journal is back the engine is ready again, joins succeed, and the history is judged the
//! Jepsen way (`STORE-FACTS.md`): no acknowledged join is lost, no ticket is handed out twice,
//! the line stays in ticket order, and no half-made join (one that ran in Valkey but never
//! reached the journal) is left in the line or in Valkey. A join whose commit reached Postgres
//! just as the connection was cut is *recovered* — in the line although its caller got 503 —
//! which is allowed, but only for joins that were in flight at the cut.

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use qm_tests::process::{EngineProcess, free_addr};
use qm_tests::servers::{TcpProxy, ValkeyOptions, rewrite_port};
use qm_tests::tokens::token_ticket;
use qm_tests::{Backing, TestApp, room_body, spawn_edge, test_env};
use serde_json::json;
use tokio::time::Instant;

const ROOM: &str = "outage";
/// Joins in flight at every moment of the burst.
const IN_FLIGHT: usize = 250;
/// Acknowledged joins before the journal is cut.
const ACKED_BEFORE_CUT: usize = 1000;
/// How long the journal stays cut.
const CUT_FOR: Duration = Duration::from_secs(3);
/// The burst stops once the journal is back and this many joins were acknowledged.
const ACKED_TARGET: usize = 2500;
/// Joins sent after the burst, every one of which must succeed.
const FINAL_JOINS: usize = 500;
/// A worker whose join was refused waits this long before the next, so the cut is not a spin.
const REFUSED_PAUSE: Duration = Duration::from_millis(50);
/// How long after the cut a join may still find a connection the proxy has not closed yet.
const CUT_GRACE: Duration = Duration::from_millis(100);
/// `/healthz` must turn 503 within this of the cut.
const HEALTH_DOWN_WITHIN: Duration = Duration::from_secs(3);
/// `/healthz` must be 200 again, and joins succeed, within this of the restore.
const BACK_WITHIN: Duration = Duration::from_secs(5);

/// One join of the burst as the client saw it.
struct Answer {
    started: Instant,
    answered: Instant,
    status: u16,
    code: String,
    text: String,
    token: Option<String>,
    position: Option<u64>,
}

/// What the burst's workers share with the test.
#[derive(Default)]
struct Burst {
    answers: Mutex<Vec<Answer>>,
    acked: AtomicUsize,
    stop: AtomicBool,
}

impl Burst {
    fn record(&self, answer: Answer) {
        if answer.status == 200 {
            self.acked.fetch_add(1, Ordering::Relaxed);
        }
        self.answers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(answer);
    }

    fn first_ack_after(&self, instant: Instant) -> Option<Instant> {
        self.answers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .filter(|answer| answer.status == 200 && answer.started >= instant)
            .map(|answer| answer.answered)
            .min()
    }
}

async fn join_once(edge: &TestApp) -> Answer {
    let started = Instant::now();
    let reply = edge.join(ROOM, None, None).await;
    Answer {
        started,
        answered: Instant::now(),
        status: reply.status,
        code: reply.code().to_owned(),
        token: reply.body["token"].as_str().map(str::to_owned),
        position: reply.body["position"].as_u64(),
        text: reply.text,
    }
}

/// One of the burst's workers: joins until told to stop.
async fn worker(edge: &TestApp, burst: &Burst) {
    while !burst.stop.load(Ordering::Relaxed) {
        let answer = join_once(edge).await;
        let refused = answer.status != 200;
        burst.record(answer);
        if refused {
            tokio::time::sleep(REFUSED_PAUSE).await;
        }
    }
}

async fn healthz(edge: &TestApp) -> u16 {
    edge.get(&format!("{}/healthz", edge.gateway)).await.status
}

/// Polls the gateway's `/healthz` until it answers `status`; how long that took, if within
/// `limit`.
async fn wait_health(edge: &TestApp, status: u16, limit: Duration) -> Option<Duration> {
    let since = Instant::now();
    while since.elapsed() <= limit {
        if healthz(edge).await == status {
            return Some(since.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_cut_mid_burst_answers_503_and_loses_nothing() {
    tokio::time::timeout(Duration::from_secs(120), cut_mid_burst())
        .await
        .expect("the outage test finishes within 120 s");
}

async fn cut_mid_burst() {
    let backing = Backing::start(ValkeyOptions { aof: false }).await;
    let proxy = TcpProxy::start(backing.database.server_addr()).await;
    let mut env = test_env();
    env.extend(backing.env());
    env.insert(
        "DATABASE_URL".to_owned(),
        rewrite_port(&backing.database.url(), proxy.addr()),
    );
    let engine = EngineProcess::start(env!("CARGO_BIN_EXE_qm"), &env, free_addr()).await;
    let edge = spawn_edge(engine.addr(), &env).await;
    edge.wait_ready().await;
    edge.create_room(room_body(ROOM, 0, json!({}))).await;

    let burst = Burst::default();
    let workers = futures::future::join_all((0..IN_FLIGHT).map(|_| worker(&edge, &burst)));
    let control = async {
        while burst.acked.load(Ordering::Relaxed) < ACKED_BEFORE_CUT {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let cut_at = Instant::now();
        proxy.cut();
        let down_after = wait_health(&edge, 503, HEALTH_DOWN_WITHIN + Duration::from_secs(2)).await;
        tokio::time::sleep_until(cut_at + CUT_FOR).await;
        let restored_at = Instant::now();
        proxy.restore();
        let up_after = wait_health(&edge, 200, BACK_WITHIN + Duration::from_secs(5)).await;
        // The workers keep joining: the first join sent after the restore that succeeds.
        let deadline = restored_at + BACK_WITHIN + Duration::from_secs(10);
        let joins_back_at = loop {
            if let Some(at) = burst.first_ack_after(restored_at) {
                break Some(at);
            }
            if Instant::now() > deadline {
                break None;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while burst.acked.load(Ordering::Relaxed) < ACKED_TARGET && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        burst.stop.store(true, Ordering::Relaxed);
        (cut_at, restored_at, down_after, up_after, joins_back_at)
    };
    let (_, (cut_at, restored_at, down_after, up_after, joins_back_at)) =
        tokio::join!(workers, control);
    let answers = burst
        .answers
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);

    // The outage as the clients saw it.
    let refused: Vec<&Answer> = answers
        .iter()
        .filter(|answer| answer.status != 200)
        .collect();
    let refused_during_cut = refused
        .iter()
        .filter(|answer| answer.answered >= cut_at && answer.started < restored_at)
        .count();
    let joins_back_after = joins_back_at.map(|at| at.saturating_duration_since(restored_at));
    eprintln!(
        "outage: {} joins in the burst, {} acked, {} refused ({refused_during_cut} while cut); \
         /healthz 503 after {down_after:?}, 200 again {up_after:?} after the restore, joins \
         back after {joins_back_after:?}",
        answers.len(),
        answers.len() - refused.len(),
        refused.len(),
    );
    for answer in &refused {
        assert_ne!(
            answer.status, 500,
            "a join during the cut answered 500: {}",
            answer.text
        );
        assert_eq!(
            (answer.status, answer.code.as_str()),
            (503, "storage_unavailable"),
            "a join refused during the outage answers 503 storage_unavailable: {}",
            answer.text
        );
        assert!(
            answer.answered >= cut_at,
            "no join is refused before the cut: {}",
            answer.text
        );
        if let Some(back) = joins_back_at {
            assert!(
                answer.started < back,
                "no join is refused once joins succeed again: {}",
                answer.text
            );
        }
    }
    // Nothing sent once the cut has surely reached every connection can be acknowledged
    // before the journal is back.
    let acked_while_cut: Vec<&str> = answers
        .iter()
        .filter(|answer| {
            answer.status == 200
                && answer.started >= cut_at + CUT_GRACE
                && answer.started < restored_at
        })
        .map(|answer| answer.text.as_str())
        .take(5)
        .collect();
    assert!(
        acked_while_cut.is_empty(),
        "no join sent while the journal is cut is acknowledged: {acked_while_cut:?}"
    );
    assert!(
        refused_during_cut > 0,
        "joins were refused while the journal was cut"
    );
    let down_after = down_after.expect("/healthz answers 503 while the journal is cut");
    assert!(
        down_after <= HEALTH_DOWN_WITHIN,
        "/healthz turns 503 within {HEALTH_DOWN_WITHIN:?} of the cut: {down_after:?}"
    );
    let up_after = up_after.expect("/healthz answers 200 once the journal is back");
    assert!(
        up_after <= BACK_WITHIN,
        "/healthz is 200 within {BACK_WITHIN:?} of the restore: {up_after:?}"
    );
    let joins_back_after = joins_back_after.expect("joins succeed once the journal is back");
    assert!(
        joins_back_after <= BACK_WITHIN,
        "joins succeed within {BACK_WITHIN:?} of the restore: {joins_back_after:?}"
    );

    // More joins once everything is back: every one succeeds.
    let final_answers: Vec<Answer> = futures::stream::iter(0..FINAL_JOINS)
        .map(|_| join_once(&edge))
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    for answer in &final_answers {
        assert_eq!(
            answer.status, 200,
            "a join after the outage: {}",
            answer.text
        );
    }

    // The judgement, in Jepsen's terms: no acknowledged join is lost, none is duplicated, and
    // the line holds nothing the journal does not (no half-made join). A join whose commit
    // reached Postgres just as the connection was cut is *recovered* (in the line although its
    // caller got 503): allowed, but only for the joins that were in flight at the cut.
    let acked: Vec<(u64, u64, String)> = answers
        .iter()
        .chain(&final_answers)
        .filter(|answer| answer.status == 200)
        .map(|answer| {
            let token = answer.token.clone().expect("an acked join carries a token");
            let ticket = token_ticket(&token).expect("the token carries a ticket");
            let position = answer.position.expect("an acked join carries a position");
            (ticket, position, token)
        })
        .collect();
    let acked_count = acked.len() as u64;
    let tickets: HashSet<u64> = acked.iter().map(|(ticket, _, _)| *ticket).collect();
    assert_eq!(
        tickets.len() as u64,
        acked_count,
        "no ticket handed out twice"
    );

    let room = edge.room(ROOM).await;
    let waiting = room["waiting"].as_u64().expect("waiting");
    let next_ticket = room["nextTicket"].as_u64().expect("nextTicket");
    let seq = room["seq"].as_u64().expect("seq");
    // Nobody passed or left, so the line is exactly tickets 1..nextTicket.
    assert_eq!(
        waiting,
        next_ticket - 1,
        "the line is the tickets 1..nextTicket, without holes: {room}"
    );
    // The live queue in Valkey agrees with the journal the engine answers from: no join that
    // ran in Valkey but never reached the journal is left there.
    let live = valkey_fields(&backing, &["seq"]).await;
    assert_eq!(
        live,
        [Some(seq)],
        "Valkey's seq agrees with the journal (seq {seq}): no half-made join left in the live \
         queue"
    );

    let mut now_waiting: Vec<(u64, u64, u64)> = futures::stream::iter(&acked)
        .map(|(ticket, answered_position, token)| {
            let edge = &edge;
            async move {
                let status = edge.status(token).await;
                assert_eq!(
                    status.status, 200,
                    "status of ticket {ticket}: {}",
                    status.text
                );
                assert_ne!(
                    status.body["expired"], true,
                    "acked ticket {ticket} is lost: {}",
                    status.text
                );
                assert_eq!(
                    status.body["passed"], false,
                    "ticket {ticket} is still waiting: {}",
                    status.text
                );
                let position = status.body["position"]
                    .as_u64()
                    .unwrap_or_else(|| panic!("ticket {ticket} has a position: {}", status.text));
                (*ticket, *answered_position, position)
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    now_waiting.sort_unstable();
    // FIFO: the line is in ticket order and nobody left it, so every acked join still holds
    // the position it was answered, which is its ticket.
    let out_of_order: Vec<&(u64, u64, u64)> = now_waiting
        .iter()
        .filter(|(ticket, answered, now)| answered != now || now != ticket)
        .take(10)
        .collect();
    assert!(
        out_of_order.is_empty(),
        "every acked join keeps the position it was answered, in ticket order \
         (ticket, answered, now): {out_of_order:?}"
    );
    assert!(
        now_waiting
            .iter()
            .all(|(ticket, _, _)| *ticket < next_ticket),
        "every acked ticket is in the line"
    );

    let recovered = waiting - acked_count;
    let in_flight_at_cut = refused
        .iter()
        .filter(|answer| answer.started < cut_at)
        .count() as u64;
    eprintln!(
        "outage: {acked_count} acked joins in total, {waiting} waiting: {recovered} recovered \
         (refused with 503 but journaled; {in_flight_at_cut} refused joins were in flight at \
         the cut)"
    );
    if recovered == 0 {
        let positions: Vec<u64> = now_waiting.iter().map(|(_, _, now)| *now).collect();
        assert_eq!(positions, (1..=acked_count).collect::<Vec<u64>>());
    }
    assert!(
        recovered <= in_flight_at_cut,
        "only joins in flight at the cut can be in the line unacknowledged: {recovered} \
         recovered, {in_flight_at_cut} in flight"
    );
    drop(engine);
}

/// The integer fields of the room's meta hash in Valkey (`qm:{room}:m`, see `qm.lua`).
async fn valkey_fields<const N: usize>(backing: &Backing, fields: &[&str; N]) -> [Option<u64>; N] {
    let key = format!("qm:{{{ROOM}}}:m");
    let mut command = vec!["HMGET", key.as_str()];
    command.extend(fields.iter().copied());
    let reply = backing.valkey.command(&command).await;
    let mut values = reply
        .split("\r\n")
        .skip(1)
        .filter(|line| !line.starts_with('$') || *line == "$-1")
        .map(|line| line.parse::<u64>().ok());
    std::array::from_fn(|_| values.next().flatten())
}
