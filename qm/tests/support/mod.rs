//! What the fault tests share: a cluster (a `qm engine` child process on a private Valkey and a
//! Postgres database, with the gateway and admin in the test process), bursts of joins, and
//! the judge that classifies every join of a history the way Jepsen does (`STORE-FACTS.md`):
//!
//! - **lost**: answered 200, not in the line afterwards: never allowed;
//! - **recovered**: not answered 200 (503 or a transport error), in the line afterwards:
//!   allowed (the change was journaled, only its answer was lost);
//! - **duplicated**: two 200 answers carrying the same ticket: never allowed.
//!
//! The line's order must survive too: a room with `ratePerMinute: 0` admits nobody, so every
//! acknowledged ticket keeps the position its join answered (every ticket below it was
//! journaled before it), positions rise strictly with the ticket, and the room's `waiting`
//! count is the acknowledged tickets plus the recovered ones. The journal in Postgres holds
//! seqs 1..n without a gap, one `joined` event per place in the line, and Valkey holds nothing
//! the journal lacks (its seq is the journal's).

// Each test file uses a different part of this module.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use qm_tests::postgres::{JournalSummary, PrivatePostgres, journal_summary};
use qm_tests::process::{EngineProcess, free_addr};
use qm_tests::servers::{FreshDatabase, PrivateValkey, ValkeyExtras, ValkeyOptions};
use qm_tests::{TestApp, room_body, spawn_edge, test_env};
use serde_json::{Value, json};

/// A request that gets no answer within this counts as unacknowledged.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the system may take after a burst to answer every status again.
pub(crate) const RECOVERY_LIMIT: Duration = Duration::from_secs(15);
/// A client whose join failed waits this long before its next one, so a fault is not a spin.
pub(crate) const FAILURE_PAUSE: Duration = Duration::from_millis(100);

// ---------------------------------------------------------------------------------------------
// The set-up: the servers, an engine process, and the edge in this process
// ---------------------------------------------------------------------------------------------

/// How a cluster's servers are set up.
#[derive(Debug, Clone, Default)]
pub(crate) struct Setup {
    pub(crate) valkey: ValkeyOptions,
    pub(crate) valkey_extras: ValkeyExtras,
    /// A private Postgres cluster (which the test may stop) instead of a fresh database on the
    /// machine's server.
    pub(crate) private_postgres: bool,
}

/// Where the journal lives.
pub(crate) enum Journal {
    Fresh(FreshDatabase),
    Private(PrivatePostgres),
}

/// The servers, the engine process and the settings they were started with. Kept apart from
/// the [`Edge`] so a fault can take the engine or a server mutably while a burst runs.
pub(crate) struct Cluster {
    pub(crate) engine: EngineProcess,
    pub(crate) env: HashMap<String, String>,
    /// Declared after the engine, dropped after it: the servers outlive the processes.
    pub(crate) valkey: PrivateValkey,
    pub(crate) journal: Journal,
    pub(crate) database_url: String,
}

impl Cluster {
    /// The private Postgres cluster (a test that asked for one).
    pub(crate) fn postgres(&mut self) -> &mut PrivatePostgres {
        match &mut self.journal {
            Journal::Private(postgres) => postgres,
            Journal::Fresh(_) => panic!("this cluster's journal is on the machine's server"),
        }
    }
}

/// The gateway and admin in this process, and a client that never panics on a failure.
pub(crate) struct Edge {
    pub(crate) app: TestApp,
    pub(crate) client: reqwest::Client,
}

/// A private Valkey with AOF and a fresh database, the engine on them, the edge here.
pub(crate) async fn start() -> (Cluster, Edge) {
    start_with(Setup {
        valkey: ValkeyOptions { aof: true },
        ..Setup::default()
    })
    .await
}

pub(crate) async fn start_with(setup: Setup) -> (Cluster, Edge) {
    let valkey = PrivateValkey::start_with(setup.valkey, setup.valkey_extras).await;
    let journal = if setup.private_postgres {
        Journal::Private(PrivatePostgres::start().await)
    } else {
        Journal::Fresh(FreshDatabase::create().await)
    };
    let database_url = match &journal {
        Journal::Fresh(database) => database.url(),
        Journal::Private(postgres) => postgres.url(),
    };
    let mut env = test_env();
    for (key, value) in [
        ("STORE", "valkey".to_owned()),
        ("SIDESTORE", "pg".to_owned()),
        ("VALKEY_URL", valkey.url()),
        ("DATABASE_URL", database_url.clone()),
    ] {
        env.insert(key.to_owned(), value);
    }
    let engine = EngineProcess::start(env!("CARGO_BIN_EXE_qm"), &env, free_addr()).await;
    let app = spawn_edge(engine.addr(), &env).await;
    app.wait_ready().await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(512)
        .timeout(REQUEST_TIMEOUT)
        .build()
        .expect("the http client builds");
    (
        Cluster {
            engine,
            env,
            valkey,
            journal,
            database_url,
        },
        Edge { app, client },
    )
}

impl Edge {
    /// Creates a room that admits nobody, so positions only change by faults.
    pub(crate) async fn create_still_room(&self, room_id: &str) {
        self.app.create_room(room_body(room_id, 0, json!({}))).await;
    }

    /// One join by a new visitor, never panicking: the fault may make it fail any way.
    pub(crate) async fn join(&self, room_id: &str) -> Outcome {
        let sent = self
            .client
            .post(format!("{}/api/join", self.app.gateway))
            .json(&json!({ "roomId": room_id }))
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(error) => {
                return Outcome::Transport {
                    timeout: error.is_timeout(),
                };
            }
        };
        let status = response.status().as_u16();
        let body: Value = match response.text().await {
            Ok(text) => serde_json::from_str(&text).unwrap_or(Value::Null),
            Err(error) => {
                return Outcome::Transport {
                    timeout: error.is_timeout(),
                };
            }
        };
        if status != 200 {
            let code = body["code"].as_str().unwrap_or("").to_owned();
            return Outcome::Refused { status, code };
        }
        let token = body["token"].as_str().expect("a 200 join carries a token");
        let ticket = token_ticket(token).expect("the token's payload carries the ticket n");
        let position = body["position"]
            .as_u64()
            .expect("a 200 join into a still room answers a position");
        Outcome::Acked(Ack {
            ticket,
            position,
            token: token.to_owned(),
        })
    }

    /// One join, timed.
    pub(crate) async fn timed_join(&self, room_id: &str) -> Answer {
        let at = Instant::now();
        let outcome = self.join(room_id).await;
        Answer {
            outcome,
            at,
            took: at.elapsed(),
        }
    }

    /// GET /api/status, never panicking.
    pub(crate) async fn status(&self, token: &str) -> Result<(u16, Value), String> {
        let response = self
            .client
            .get(format!("{}/api/status", self.app.gateway))
            .query(&[("token", token)])
            .send()
            .await
            .map_err(|error| error.to_string())?;
        let status = response.status().as_u16();
        let text = response.text().await.map_err(|error| error.to_string())?;
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
    }

    /// Fires `joins` joins, `in_flight` at a time; `acked` counts the 200s as they arrive
    /// and `finished` is set to `joins` once every join is answered.
    pub(crate) async fn burst(
        &self,
        room_id: &str,
        joins: usize,
        in_flight: usize,
        acked: &AtomicUsize,
        finished: &AtomicUsize,
    ) -> Vec<Answer> {
        let answers = futures::stream::iter(0..joins)
            .map(|_| async {
                let answer = self.timed_join(room_id).await;
                if matches!(answer.outcome, Outcome::Acked(_)) {
                    acked.fetch_add(1, Ordering::Relaxed);
                } else {
                    tokio::time::sleep(FAILURE_PAUSE * 2).await;
                }
                answer
            })
            .buffer_unordered(in_flight)
            .collect()
            .await;
        finished.store(joins, Ordering::Relaxed);
        answers
    }

    /// `clients` visitors joining one after another until `load` is stopped; every answer is
    /// recorded in `load`.
    pub(crate) async fn keep_joining(&self, room_id: &str, clients: usize, load: &Load) {
        let client = || async {
            while !load.stop.load(Ordering::Relaxed) {
                let answer = self.timed_join(room_id).await;
                let failed = !matches!(answer.outcome, Outcome::Acked(_));
                load.record(answer);
                if failed {
                    tokio::time::sleep(FAILURE_PAUSE).await;
                }
            }
        };
        futures::future::join_all((0..clients).map(|_| client())).await;
    }

    /// Joins `joins` new visitors that must all be answered 200.
    pub(crate) async fn join_all(&self, room_id: &str, joins: usize) -> Vec<Ack> {
        futures::stream::iter(0..joins)
            .map(|_| async {
                match self.join(room_id).await {
                    Outcome::Acked(ack) => ack,
                    other => panic!("a join without a fault failed: {other:?}"),
                }
            })
            .buffer_unordered(50)
            .collect()
            .await
    }

    /// Waits until the gateway reports the engine ready again.
    pub(crate) async fn wait_healthy(&self, limit: Duration, engine: &EngineProcess) {
        let deadline = Instant::now() + limit;
        loop {
            let health = self
                .client
                .get(format!("{}/healthz", self.app.gateway))
                .send()
                .await;
            if health.is_ok_and(|response| response.status() == 200) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "/healthz did not answer 200 within {limit:?}; engine log:\n{}",
                engine.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until a join succeeds again (the room may still be rebuilding after the fault
    /// although `/healthz` is 200); answers how long that took.
    pub(crate) async fn wait_joins_back(&self, room_id: &str, limit: Duration) -> (Duration, Ack) {
        let since = Instant::now();
        loop {
            match self.join(room_id).await {
                Outcome::Acked(ack) => return (since.elapsed(), ack),
                other => assert!(
                    since.elapsed() < limit,
                    "no join succeeded within {limit:?} of the fault's end: last {other:?}"
                ),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The status of a place once the system answers it: 503s and transport errors (the room
    /// is still being rebuilt) are retried until `deadline`.
    pub(crate) async fn settled_status(
        &self,
        token: &str,
        deadline: Instant,
    ) -> Result<Value, String> {
        loop {
            let last = match self.status(token).await {
                Ok((200, body)) => return Ok(body),
                Ok((status, body)) => format!("{status} {body}"),
                Err(error) => error,
            };
            if Instant::now() >= deadline {
                return Err(last);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// One join's answer.
#[derive(Debug, Clone)]
pub(crate) enum Outcome {
    Acked(Ack),
    Refused {
        status: u16,
        code: String,
    },
    /// No HTTP answer: the connection failed, or nothing came within [`REQUEST_TIMEOUT`].
    Transport {
        timeout: bool,
    },
}

impl Outcome {
    /// `503 storage_unavailable`, `no answer (timeout)`, ...; `200` for an acknowledged join.
    pub(crate) fn label(&self) -> String {
        match self {
            Outcome::Acked(_) => "200".to_owned(),
            Outcome::Refused { status, code } => format!("{status} {code}"),
            Outcome::Transport { timeout: true } => "no answer (timeout)".to_owned(),
            Outcome::Transport { timeout: false } => "no answer (transport)".to_owned(),
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Ack {
    pub(crate) ticket: u64,
    pub(crate) position: u64,
    pub(crate) token: String,
}

/// A join's outcome, when it was sent and how long its answer took.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub(crate) outcome: Outcome,
    pub(crate) at: Instant,
    pub(crate) took: Duration,
}

/// The answers of a [`Edge::keep_joining`] burst as they arrive, and its stop flag.
#[derive(Default)]
pub(crate) struct Load {
    answers: Mutex<Vec<Answer>>,
    acked: AtomicUsize,
    stop: AtomicBool,
}

impl Load {
    fn record(&self, answer: Answer) {
        if matches!(answer.outcome, Outcome::Acked(_)) {
            self.acked.fetch_add(1, Ordering::Relaxed);
        }
        self.answers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(answer);
    }

    /// Joins answered 200 so far.
    pub(crate) fn acked(&self) -> usize {
        self.acked.load(Ordering::Relaxed)
    }

    /// Waits until `target` joins were answered 200; panics after `limit`.
    pub(crate) async fn wait_acked(&self, target: usize, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.acked() < target {
            assert!(
                Instant::now() < deadline,
                "only {} of {target} joins were acknowledged within {limit:?}",
                self.acked()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Tells the joining clients to stop after their current join.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    pub(crate) fn into_answers(self) -> Vec<Answer> {
        self.answers
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The shape of a small burst around a fault: `clients` visitors join one after another;
/// the fault starts once `before` joins are acknowledged, and the burst stops once `after`
/// more are acknowledged after the fault ended.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    pub(crate) clients: usize,
    pub(crate) before: usize,
    pub(crate) after: usize,
}

impl Plan {
    /// A few hundred joins: enough for a history, small enough for CI.
    pub(crate) const SMALL: Plan = Plan {
        clients: 32,
        before: 300,
        after: 300,
    };
}

/// How long a burst may take to reach the next count of acknowledged joins.
const PHASE_LIMIT: Duration = Duration::from_secs(40);

/// A burst around a fault, as the clients saw it.
pub(crate) struct Run<T> {
    pub(crate) answers: Vec<Answer>,
    /// What the fault answered.
    pub(crate) fault: T,
    /// From the fault's end to the first join acknowledged after it.
    pub(crate) back_after: Duration,
    /// When the fault started and ended.
    pub(crate) fault_started: Instant,
    pub(crate) fault_ended: Instant,
}

impl<T> Run<T> {
    /// Answers to joins sent between the fault's start and its end.
    pub(crate) fn during_fault(&self) -> impl Iterator<Item = &Answer> {
        self.answers
            .iter()
            .filter(|answer| answer.at >= self.fault_started && answer.at < self.fault_ended)
    }
}

/// Runs `plan`'s burst on `room_id` with `fault` (a lazy future: it starts only once `before`
/// joins are acknowledged) in the middle of it.
pub(crate) async fn burst_around<T>(
    edge: &Edge,
    room_id: &str,
    plan: Plan,
    fault: impl Future<Output = T>,
) -> Run<T> {
    let load = Load::default();
    let control = async {
        load.wait_acked(plan.before, PHASE_LIMIT).await;
        let started = Instant::now();
        let answered = fault.await;
        let ended = Instant::now();
        let acked = load.acked();
        load.wait_acked(acked + plan.after, PHASE_LIMIT).await;
        load.stop();
        (answered, started, ended)
    };
    let ((), (fault, fault_started, fault_ended)) =
        tokio::join!(edge.keep_joining(room_id, plan.clients, &load), control);
    let answers = load.into_answers();
    let back_after = answers
        .iter()
        .filter(|answer| matches!(answer.outcome, Outcome::Acked(_)) && answer.at >= fault_ended)
        .map(|answer| (answer.at + answer.took).saturating_duration_since(fault_ended))
        .min()
        .expect("joins were acknowledged after the fault");
    Run {
        answers,
        fault,
        back_after,
        fault_started,
        fault_ended,
    }
}

pub(crate) use qm_tests::tokens::token_ticket;

// ---------------------------------------------------------------------------------------------
// Judging a history
// ---------------------------------------------------------------------------------------------

/// What a fault run measured.
#[derive(Debug, Default)]
pub(crate) struct Verdict {
    /// Joins answered 200.
    pub(crate) acked: usize,
    /// Joins answered otherwise (a 503 or no answer at all).
    pub(crate) unacked: usize,
    /// Unacknowledged joins by answer (`503 storage_unavailable`, `no answer (transport)`, ...).
    pub(crate) refusals: BTreeMap<String, usize>,
    /// Places in the line nobody was told about: the room's `waiting` minus the acknowledged.
    pub(crate) recovered: usize,
    pub(crate) lost: usize,
    pub(crate) duplicated: usize,
    pub(crate) waiting: u64,
    /// The slowest answer of any join.
    pub(crate) max_latency: Duration,
    /// The room's journal in Postgres once the history is drained.
    pub(crate) journal: JournalSummary,
}

impl Verdict {
    /// Unacknowledged joins answered 503 (whatever the code).
    pub(crate) fn refused_503(&self) -> usize {
        self.refusals
            .iter()
            .filter(|(label, _)| label.starts_with("503"))
            .map(|(_, count)| count)
            .sum()
    }

    /// One line for the fault table: the judged figures.
    pub(crate) fn row(&self, label: &str) -> String {
        format!(
            "fault-table | {label} | acked {} | unacked {} ({:?}) | recovered {} | lost {} | \
             duplicated {} | journal gap-free {} (seq 1..{}) | max answer {:.2} s",
            self.acked,
            self.unacked,
            self.refusals,
            self.recovered,
            self.lost,
            self.duplicated,
            self.journal.gap_free(),
            self.journal.max_seq,
            self.max_latency.as_secs_f64()
        )
    }
}

/// Drains the history: asks the status of every acknowledged place, classifies every join,
/// and reads the journal and Valkey. Panics, with the figures, on a lost or duplicated join, a
/// changed order, a journal gap, or Valkey holding what the journal lacks.
pub(crate) async fn judge(
    edge: &Edge,
    cluster: &Cluster,
    room_id: &str,
    answers: &[Answer],
    label: &str,
) -> Verdict {
    let engine = &cluster.engine;
    let mut verdict = Verdict::default();
    let mut acks: Vec<&Ack> = Vec::new();
    for answer in answers {
        verdict.max_latency = verdict.max_latency.max(answer.took);
        if let Outcome::Acked(ack) = &answer.outcome {
            acks.push(ack);
            continue;
        }
        verdict.unacked += 1;
        *verdict.refusals.entry(answer.outcome.label()).or_default() += 1;
    }
    verdict.acked = acks.len();

    // Duplicated: one ticket answered 200 twice.
    let mut by_ticket: BTreeMap<u64, usize> = BTreeMap::new();
    for ack in &acks {
        *by_ticket.entry(ack.ticket).or_default() += 1;
    }
    let duplicated: Vec<u64> = by_ticket
        .iter()
        .filter(|(_, answers)| **answers > 1)
        .map(|(ticket, _)| *ticket)
        .collect();
    verdict.duplicated = duplicated.len();

    // Lost: answered 200, and the place is not waiting any more.
    let deadline = Instant::now() + RECOVERY_LIMIT;
    let statuses: Vec<(&Ack, Result<Value, String>)> = futures::stream::iter(acks.iter())
        .map(|ack| async move { (*ack, edge.settled_status(&ack.token, deadline).await) })
        .buffer_unordered(64)
        .collect()
        .await;
    let mut lost = Vec::new();
    let mut after: BTreeMap<u64, u64> = BTreeMap::new();
    let mut moved = Vec::new();
    for (ack, body) in statuses {
        let body = body.unwrap_or_else(|last| {
            panic!(
                "{label}: the status of ticket {} still failed {RECOVERY_LIMIT:?} after the \
                 burst: {last}; engine log:\n{}",
                ack.ticket,
                engine.log_tail()
            )
        });
        match body["position"].as_u64() {
            Some(position) if body["passed"] == false => {
                after.insert(ack.ticket, position);
                if position != ack.position {
                    moved.push((ack.ticket, ack.position, position));
                }
            }
            _ => lost.push((ack.ticket, body)),
        }
    }
    verdict.lost = lost.len();

    let room = edge.app.room(room_id).await;
    verdict.waiting = room["waiting"]
        .as_u64()
        .expect("the room has a waiting count");
    let present = after.len() as u64;
    verdict.recovered = verdict.waiting.saturating_sub(present) as usize;
    verdict.journal = journal_summary(&cluster.database_url, room_id).await;
    eprintln!("{label}: {verdict:?}");

    assert!(
        duplicated.is_empty(),
        "{label}: {} tickets were answered 200 twice, e.g. {:?}",
        duplicated.len(),
        &duplicated[..duplicated.len().min(20)]
    );
    assert!(
        lost.is_empty(),
        "{label}: {} acknowledged joins were lost, e.g. {:?}; engine log:\n{}",
        lost.len(),
        &lost[..lost.len().min(5)],
        engine.log_tail()
    );
    assert!(
        verdict.waiting >= present,
        "{label}: the room counts {} waiting but {present} acknowledged places are in it",
        verdict.waiting
    );
    assert!(
        verdict.recovered <= verdict.unacked,
        "{label}: {} places nobody was told about, but only {} joins went unacknowledged",
        verdict.recovered,
        verdict.unacked
    );
    // Order: in ticket order the positions rise strictly; the k-th acknowledged ticket is at
    // least k-th and none is past the end of the line.
    let positions: Vec<(u64, u64)> = after.into_iter().collect();
    for pair in positions.windows(2) {
        assert!(
            pair[0].1 < pair[1].1,
            "{label}: order changed: ticket {} is at position {}, ticket {} at {}",
            pair[0].0,
            pair[0].1,
            pair[1].0,
            pair[1].1
        );
    }
    for (rank, (ticket, position)) in positions.iter().enumerate() {
        assert!(
            *position > rank as u64 && *position <= verdict.waiting,
            "{label}: ticket {ticket}, acknowledged rank {rank}, is at position {position} of a \
             line of {}",
            verdict.waiting
        );
    }
    // Every ticket below an acknowledged one was journaled before it and nobody is admitted:
    // its position cannot have moved since its join answered it.
    assert!(
        moved.is_empty(),
        "{label}: {} acknowledged places moved (ticket, answered, now), e.g. {:?}",
        moved.len(),
        &moved[..moved.len().min(10)]
    );
    assert_eq!(
        verdict.waiting,
        (verdict.acked + verdict.recovered) as u64,
        "{label}: waiting = acknowledged + recovered"
    );
    // The journal: seqs 1..n without a gap, and one `joined` event per place in the line.
    assert!(
        verdict.journal.gap_free(),
        "{label}: the journal of {room_id} is not gap-free: {:?}",
        verdict.journal
    );
    assert_eq!(
        verdict.journal.joined, verdict.waiting,
        "{label}: one joined event in the journal per place in the line"
    );
    // Nothing half-written: Valkey's seq is the journal's once the engine has settled.
    let journaled = verdict.journal.last_seq;
    let valkey_seq = settled_valkey_seq(cluster, room_id, journaled).await;
    assert_eq!(
        valkey_seq,
        journaled,
        "{label}: Valkey holds the room at seq {valkey_seq:?}, the journal at {journaled:?}: \
         Valkey holds changes the journal lacks (or lost some); engine log:\n{}",
        engine.log_tail()
    );
    verdict
}

/// The room's seq in Valkey (`qm:{room}:m`, field `seq`), read until it is `expected` or
/// [`RECOVERY_LIMIT`] has passed (a rebuild may still be under way).
pub(crate) async fn settled_valkey_seq(
    cluster: &Cluster,
    room_id: &str,
    expected: Option<u64>,
) -> Option<u64> {
    let key = format!("qm:{{{room_id}}}:m");
    let deadline = Instant::now() + RECOVERY_LIMIT;
    loop {
        let reply = cluster.valkey.command(&["HGET", &key, "seq"]).await;
        let seq = reply.lines().nth(1).and_then(|line| line.parse().ok());
        if seq == expected || Instant::now() >= deadline {
            return seq;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `count` reaches `target`, or the burst is over (`finished` reached `total`).
pub(crate) async fn wait_for(
    count: &AtomicUsize,
    target: usize,
    finished: &AtomicUsize,
    total: usize,
) {
    while count.load(Ordering::Relaxed) < target && finished.load(Ordering::Relaxed) < total {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// The fault tests of one file run one at a time: two bursts side by side on a small machine
/// would measure the machine, not the store.
static ALONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Runs a test alone and within `limit` (the wait for the other tests is not part of it).
pub(crate) async fn alone_within(limit: Duration, test: impl Future<Output = ()>) {
    let _alone = ALONE.lock().await;
    within(limit, test).await;
}

pub(crate) async fn within(limit: Duration, test: impl Future<Output = ()>) {
    if tokio::time::timeout(limit, test).await.is_err() {
        panic!("the test did not finish within {limit:?}");
    }
}

/// The `qm` binary with exactly `env` (and PATH), as an operator would run it.
pub(crate) fn qm_command(env: &HashMap<String, String>) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_qm"));
    command
        .env_clear()
        .envs(env)
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    command
}
