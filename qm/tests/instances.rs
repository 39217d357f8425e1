//! Two of every process on one Valkey and one Postgres, behind no sticky routing: two engines,
//! two gateways (one on each engine) and two admin processes (one on each engine). A visitor
//! joins through one gateway and reads its place through the other; an operator signs in on
//! one admin process and works through both. Mid-surge one of each is killed (SIGKILL):
//! nothing acknowledged is lost or doubled, the line keeps its first-come order, the operator's
//! session carries on through the survivor, and once the operator opens the room the
//! survivors admit the configured rate, in ticket order.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use qm_core::clock::now_ms;
use qm_tests::process::{AdminProcess, EngineProcess, GatewayProcess, free_addr};
use qm_tests::servers::ValkeyOptions;
use qm_tests::tokens::token_ticket;
use qm_tests::{Backing, TEST_ADMIN_KEY, room_body, test_env};
use serde_json::{Value, json};

const ROOM: &str = "surge";
/// Joins the surge tries, and how many at once.
const JOINS: usize = 400;
const IN_FLIGHT: usize = 16;
/// The kill comes once this many joins are acknowledged.
const KILL_AFTER_ACKS: usize = 150;
/// The rate the operator opens the room at once the surge is over: 10 a second.
const RATE_PER_MINUTE: u32 = 600;
const PER_SECOND: u64 = 10;
const TOLERANCE: u64 = 2;
const TEST_LIMIT: Duration = Duration::from_secs(180);

/// A visitor's acknowledged place.
#[derive(Debug, Clone)]
struct Ack {
    ticket: u64,
    position: u64,
    token: String,
}

/// The HTTP side of the test: one client, the operator's cookie, the live gateways and admins.
struct Traffic {
    http: reqwest::Client,
    gateways: Vec<String>,
    admins: Vec<String>,
    cookie: String,
    /// Round-robin position over whichever gateways are alive.
    turn: AtomicUsize,
    /// How many of `gateways` and `admins` are alive: the first `alive` of each.
    alive: AtomicUsize,
}

impl Traffic {
    fn next(&self, urls: &[String]) -> String {
        let alive = self.alive.load(Ordering::SeqCst).min(urls.len()).max(1);
        let turn = self.turn.fetch_add(1, Ordering::SeqCst);
        // The survivors are the last `alive` of the list (the first ones are killed).
        urls[urls.len() - alive + turn % alive].clone()
    }

    /// One join through the next gateway: the ack, or `None` for anything else.
    async fn join(&self) -> Option<Ack> {
        let gateway = self.next(&self.gateways);
        let response = self
            .http
            .post(format!("{gateway}/api/join"))
            .json(&json!({ "roomId": ROOM }))
            .send()
            .await
            .ok()?;
        if response.status() != 200 {
            return None;
        }
        let body: Value = response.json().await.ok()?;
        let token = body["token"].as_str()?.to_owned();
        Some(Ack {
            ticket: token_ticket(&token).expect("a token carries its ticket"),
            position: body["position"].as_u64()?,
            token,
        })
    }

    /// The place's status through the next gateway, retried through the survivors for a
    /// while (an engine taking a room over rebuilds it first).
    async fn settled_status(&self, token: &str) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        loop {
            let gateway = self.next(&self.gateways);
            let answer = self
                .http
                .get(format!("{gateway}/api/status"))
                .query(&[("token", token)])
                .send()
                .await;
            if let Ok(response) = answer
                && response.status() == 200
                && let Ok(body) = response.json::<Value>().await
            {
                return body;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the status of {token} never answered 200"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// An operator call with the console cookie through the next admin process.
    async fn operator(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let admin = self.next(&self.admins);
        let mut request = self
            .http
            .request(method, format!("{admin}/api/admin{path}"))
            .header(reqwest::header::COOKIE, &self.cookie)
            .header("X-QM-CSRF", "1");
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("the admin process answers");
        let status = response.status();
        let body: Value = response.json().await.expect("a JSON answer");
        assert_eq!(status, 200, "{path} through {admin}: {body}");
        body
    }

    async fn room(&self) -> Value {
        self.operator(reqwest::Method::GET, &format!("/rooms/{ROOM}"), None)
            .await["room"]
            .clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_of_every_process_keep_one_line_through_a_kill_of_one_of_each() {
    tokio::time::timeout(TEST_LIMIT, two_of_each())
        .await
        .expect("the 2+2+2 test finishes within its limit");
}

async fn two_of_each() {
    let backing = Backing::start(ValkeyOptions { aof: false }).await;
    let mut env = test_env();
    env.extend(backing.env());
    let qm = env!("CARGO_BIN_EXE_qm");
    let mut engine_1 = EngineProcess::start(qm, &env, free_addr()).await;
    let engine_2 = EngineProcess::start(qm, &env, free_addr()).await;
    let mut gateway_1 = GatewayProcess::start(qm, &env, engine_1.addr(), free_addr().port()).await;
    let gateway_2 = GatewayProcess::start(qm, &env, engine_2.addr(), free_addr().port()).await;
    let mut admin_1 = AdminProcess::start(qm, &env, engine_1.addr(), free_addr().port()).await;
    let admin_2 = AdminProcess::start(qm, &env, engine_2.addr(), free_addr().port()).await;

    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .pool_max_idle_per_host(64)
        .build()
        .expect("the http client builds");
    let signed_in = http
        .post(format!("{}/api/admin/session", admin_1.url()))
        .header("X-QM-CSRF", "1")
        .json(&json!({ "key": TEST_ADMIN_KEY }))
        .send()
        .await
        .expect("the admin process answers");
    assert_eq!(signed_in.status(), 200, "the operator signs in on admin 1");
    let cookie = signed_in
        .headers()
        .get(reqwest::header::SET_COOKIE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .expect("the console cookie")
        .to_owned();
    let traffic = Arc::new(Traffic {
        http,
        gateways: vec![gateway_1.url(), gateway_2.url()],
        admins: vec![admin_1.url(), admin_2.url()],
        cookie,
        turn: AtomicUsize::new(0),
        alive: AtomicUsize::new(2),
    });
    // A still room (rate 0) while the line forms; created through whichever admin is next.
    traffic
        .operator(
            reqwest::Method::POST,
            "/rooms",
            Some(room_body(ROOM, 0, json!({}))),
        )
        .await;
    // Both engines know the room before the surge (the second learns of it over pub/sub).
    for admin in &traffic.admins {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            let known = traffic
                .http
                .get(format!("{admin}/api/admin/rooms/{ROOM}"))
                .header(reqwest::header::COOKIE, &traffic.cookie)
                .send()
                .await
                .is_ok_and(|response| response.status() == 200);
            if known {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{admin}'s engine never learned of the room"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    // The surge: joins round-robin over both gateways; one of each process killed mid-way.
    let acked = Arc::new(AtomicUsize::new(0));
    let surge = {
        let traffic = traffic.clone();
        let acked = acked.clone();
        tokio::spawn(async move {
            futures::stream::iter(0..JOINS)
                .map(|_| {
                    let traffic = traffic.clone();
                    let acked = acked.clone();
                    async move {
                        let ack = traffic.join().await;
                        if ack.is_some() {
                            acked.fetch_add(1, Ordering::SeqCst);
                        }
                        ack
                    }
                })
                .buffer_unordered(IN_FLIGHT)
                .collect::<Vec<Option<Ack>>>()
                .await
        })
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while acked.load(Ordering::SeqCst) < KILL_AFTER_ACKS {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the surge never reached {KILL_AFTER_ACKS} acknowledged joins"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    traffic.alive.store(1, Ordering::SeqCst);
    engine_1.kill9();
    gateway_1.kill9();
    admin_1.kill9();
    // The operator's console carries on through the surviving admin process meanwhile.
    let during = traffic.room().await;
    assert_eq!(
        during["id"], ROOM,
        "the session outlives the killed admin process"
    );
    let answers = surge.await.expect("the surge task");
    let acks: Vec<Ack> = answers.into_iter().flatten().collect();
    let unacked = JOINS - acks.len();

    // Nothing acknowledged lost or doubled, and first-come order kept: in ticket order the
    // positions rise strictly, each unchanged since its join answered it (nobody was admitted).
    let mut by_ticket: BTreeMap<u64, &Ack> = BTreeMap::new();
    for ack in &acks {
        assert!(
            by_ticket.insert(ack.ticket, ack).is_none(),
            "ticket {} was answered twice",
            ack.ticket
        );
    }
    let mut positions = Vec::with_capacity(by_ticket.len());
    for (ticket, ack) in &by_ticket {
        let status = traffic.settled_status(&ack.token).await;
        assert_eq!(status["passed"], false, "ticket {ticket}: {status}");
        let position = status["position"]
            .as_u64()
            .unwrap_or_else(|| panic!("ticket {ticket} lost its place: {status}"));
        assert_eq!(position, ack.position, "ticket {ticket} moved");
        positions.push((*ticket, position));
    }
    for pair in positions.windows(2) {
        assert!(pair[0].1 < pair[1].1, "order changed: {pair:?}");
    }
    let room = traffic.room().await;
    let waiting = room["waiting"].as_u64().expect("a waiting count");
    assert!(
        waiting >= acks.len() as u64 && waiting <= JOINS as u64,
        "the line holds every acknowledged place ({}) and at most the {unacked} unanswered \
         joins beside them: {waiting}",
        acks.len()
    );
    eprintln!(
        "2+2+2: {} acknowledged, {unacked} unanswered around the kill, {waiting} waiting",
        acks.len()
    );

    // The operator opens the room through the survivor: it admits the rate, in ticket order.
    traffic
        .operator(
            reqwest::Method::POST,
            &format!("/rooms/{ROOM}/rate"),
            Some(json!({ "ratePerMinute": RATE_PER_MINUTE })),
        )
        .await;
    // The survivor holds the outflow lease at the latest 3 s after the killed engine's last
    // renewal; measure whole seconds after that.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let mut samples = Vec::new();
    for _ in 0..5 {
        let now = now_ms();
        let wait = 1000 - now.rem_euclid(1000) + 500;
        tokio::time::sleep(Duration::from_millis(wait as u64)).await;
        let passed = traffic.room().await["passedTotal"]
            .as_u64()
            .expect("passedTotal");
        samples.push(passed);
    }
    let per_second: Vec<u64> = samples.windows(2).map(|pair| pair[1] - pair[0]).collect();
    for passed in &per_second {
        assert!(
            passed.abs_diff(PER_SECOND) <= TOLERANCE,
            "the survivors admit {PER_SECOND} ± {TOLERANCE} a second: {per_second:?}"
        );
    }
    // In ticket order: no acknowledged place still waits below one that has passed.
    let mut passed_seen = false;
    for (ticket, ack) in by_ticket.iter().rev() {
        let status = traffic.settled_status(&ack.token).await;
        let passed = status["passed"] == true;
        assert!(
            passed || !passed_seen,
            "ticket {ticket} still waits while a later ticket has passed"
        );
        passed_seen |= passed;
    }
    drop(engine_2);
    drop(gateway_2);
    drop(admin_2);
}
