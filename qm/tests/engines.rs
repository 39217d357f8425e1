//! Two engines on one Valkey (and one Postgres journal), on the durable store
//! (`STORE=valkey SIDESTORE=pg`). Both take joins and both see the whole line; the outflow of a
//! room runs on whichever engine holds the room's lease, so together they admit the configured
//! rate — never a doubled slice. When the lease holder is killed (SIGKILL), the other engine
//! takes the room over once the lease lapses and the outflow goes on at the same rate, in
//! ticket order. The admin targeting page's counters add up the door checks both engines
//! answered.
//!
//! Each engine is a `qm engine` child process; each has its own gateway and admin in this
//! process. Passes are counted by sampling the room's `passedTotal` through the admin API in
//! the middle of every calendar second: the engines run each room's slice just past the second
//! boundary, so the difference between two samples is exactly one slice.

use std::collections::HashSet;
use std::time::Duration;

use futures::StreamExt;
use qm_core::clock::now_ms;
use qm_tests::process::{EngineProcess, free_addr};
use qm_tests::servers::{PrivateValkey, ValkeyOptions};
use qm_tests::{Backing, TestApp, room_body, spawn_edge, test_env};
use serde_json::json;

const ROOM: &str = "pair";
const RATE_PER_MINUTE: u32 = 600;
/// Passes one slice admits at that rate.
const PER_SECOND: u64 = 10;
/// Each steady second admits `PER_SECOND ± TOLERANCE`.
const TOLERANCE: u64 = 2;
const JOINS_VIA_A: usize = 600;
const JOINS_VIA_B: usize = 20;
/// Whole seconds measured before the kill.
const SECONDS_BEFORE_KILL: usize = 6;
/// Seconds after the kill the survivor may take to run the room's first slice (the lease lasts
/// 3 s after the holder's last renewal).
const MAX_GAP_SECONDS: usize = 4;
/// The slice right after the takeover may carry the credit left over; it never exceeds this.
const MAX_TAKEOVER_SLICE: u64 = 20;
/// Steady seconds measured after the takeover.
const STEADY_SECONDS_AFTER: usize = 5;

/// Where an engine's slice for a second has certainly been committed and followed by both
/// engines' replicas, and the next one has not started.
const SAMPLE_OFFSET_MS: i64 = 500;

/// Sleeps until the middle of the next calendar second; answers that second.
async fn until_mid_second() -> i64 {
    let now = now_ms();
    let mut second = now.div_euclid(1000);
    if now - second * 1000 >= SAMPLE_OFFSET_MS {
        second += 1;
    }
    let wait = second * 1000 + SAMPLE_OFFSET_MS - now;
    tokio::time::sleep(Duration::from_millis(wait.max(0) as u64)).await;
    second
}

async fn passed_total(edge: &TestApp) -> u64 {
    edge.room(ROOM).await["passedTotal"]
        .as_u64()
        .expect("the room JSON carries passedTotal")
}

/// `(second, passedTotal)` in the middle of each of the next `count` calendar seconds.
async fn sample_seconds(edge: &TestApp, count: usize) -> Vec<(i64, u64)> {
    let mut samples = Vec::with_capacity(count);
    for _ in 0..count {
        let second = until_mid_second().await;
        samples.push((second, passed_total(edge).await));
    }
    samples
}

/// Passes in each second: the difference of consecutive samples.
fn per_second(samples: &[(i64, u64)]) -> Vec<u64> {
    samples
        .windows(2)
        .map(|pair| {
            assert_eq!(
                pair[1].0,
                pair[0].0 + 1,
                "samples are a second apart: {samples:?}"
            );
            pair[1].1 - pair[0].1
        })
        .collect()
}

/// The value of a Valkey key, read over a raw connection (`None` if it is not set).
async fn valkey_get(valkey: &PrivateValkey, key: &str) -> Option<String> {
    let reply = valkey.command(&["GET", key]).await;
    let (header, rest) = reply.split_once("\r\n")?;
    if header == "$-1" {
        return None;
    }
    assert!(
        header.starts_with('$'),
        "GET {key} answers a bulk string: {reply:?}"
    );
    Some(rest.trim_end_matches("\r\n").to_owned())
}

/// Joins `count` new visitors through `edge`; answers each one's position and token.
async fn fill(edge: &TestApp, count: usize) -> Vec<(u64, String)> {
    futures::stream::iter(0..count)
        .map(|_| async {
            let reply = edge.join(ROOM, None, None).await;
            assert_eq!(reply.status, 200, "join: {}", reply.text);
            let position = reply.body["position"].as_u64().expect("a position");
            let token = reply.body["token"].as_str().expect("a token").to_owned();
            (position, token)
        })
        .buffer_unordered(100)
        .collect()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_engines_on_one_valkey_share_the_outflow_and_survive_a_kill() {
    tokio::time::timeout(Duration::from_secs(120), share_and_survive())
        .await
        .expect("the two-engine test finishes within 120 s");
}

async fn share_and_survive() {
    let backing = Backing::start(ValkeyOptions { aof: false }).await;
    let mut env = test_env();
    env.extend(backing.env());
    // A starts first, on an empty Valkey: it is the engine that writes Valkey's epoch mark.
    let engine_a = EngineProcess::start(env!("CARGO_BIN_EXE_qm"), &env, free_addr()).await;
    let engine_b = EngineProcess::start(env!("CARGO_BIN_EXE_qm"), &env, free_addr()).await;
    let mut engines = [engine_a, engine_b];
    let edges = [
        spawn_edge(engines[0].addr(), &env).await,
        spawn_edge(engines[1].addr(), &env).await,
    ];
    for edge in &edges {
        edge.wait_ready().await;
    }
    let [edge_a, edge_b] = &edges;

    // Both engines take joins, and both see the whole line.
    edge_a
        .create_room(room_body(
            ROOM,
            RATE_PER_MINUTE,
            json!({ "state": "paused" }),
        ))
        .await;
    let (via_a, via_b) = tokio::join!(fill(edge_a, JOINS_VIA_A), fill(edge_b, JOINS_VIA_B));
    let visitors: Vec<(u64, String)> = via_a.into_iter().chain(via_b).collect();
    let total = visitors.len() as u64;
    let positions: HashSet<u64> = visitors.iter().map(|(position, _)| *position).collect();
    assert_eq!(
        positions,
        (1..=total).collect::<HashSet<u64>>(),
        "joins through both engines make one line, positions 1..={total}"
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let (waiting_a, waiting_b) = loop {
        let waiting_a = edge_a.room(ROOM).await["waiting"].as_u64();
        let waiting_b = edge_b.room(ROOM).await["waiting"].as_u64();
        if (waiting_a == Some(total) && waiting_b == Some(total))
            || tokio::time::Instant::now() > deadline
        {
            break (waiting_a, waiting_b);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        (waiting_a, waiting_b),
        (Some(total), Some(total)),
        "both engines see the whole line"
    );

    // Together they admit the configured rate.
    let activated = edge_a
        .admin_post(
            &format!("/rooms/{ROOM}/state"),
            json!({ "state": "active" }),
        )
        .await;
    assert_eq!(activated.status, 200, "activate: {}", activated.text);
    let activated_second = now_ms().div_euclid(1000);
    let before = sample_seconds(edge_a, SECONDS_BEFORE_KILL + 1).await;
    let before_kill = per_second(&before);

    // Kill the engine that holds the room's lease. Valkey's epoch mark carries the id of the
    // engine that wrote it (A, started first on an empty Valkey), so the lease names A exactly
    // when it equals the mark.
    let lease = valkey_get(&backing.valkey, &format!("qm:{{{ROOM}}}:l"))
        .await
        .expect("an engine holds the room's lease");
    let epoch = valkey_get(&backing.valkey, "qm:epoch")
        .await
        .expect("the first engine marked Valkey's epoch");
    let holder = if lease == epoch { 0 } else { 1 };
    let survivor = 1 - holder;
    engines[holder].kill9();
    let survivor_edge = &edges[survivor];

    let mut after = vec![*before.last().expect("samples before the kill")];
    after.extend(
        sample_seconds(
            survivor_edge,
            MAX_GAP_SECONDS + 1 + STEADY_SECONDS_AFTER + 1,
        )
        .await,
    );
    let after_kill = per_second(&after);
    eprintln!(
        "engines: holder {} killed; passes per second before the kill {before_kill:?}, after \
         {after_kill:?}",
        ["A", "B"][holder]
    );

    for passes in &before_kill {
        assert!(
            (PER_SECOND - TOLERANCE..=PER_SECOND + TOLERANCE).contains(passes),
            "two engines admit {PER_SECOND} ± {TOLERANCE} each second, never a doubled slice: \
             {before_kill:?}"
        );
    }
    let gap = after_kill.iter().take_while(|passes| **passes == 0).count();
    assert!(
        gap <= MAX_GAP_SECONDS,
        "the survivor takes the room over within {MAX_GAP_SECONDS} s: {after_kill:?}"
    );
    let takeover = after_kill[gap];
    let steady = &after_kill[gap + 1..];
    assert!(
        steady.len() >= STEADY_SECONDS_AFTER,
        "{STEADY_SECONDS_AFTER} s measured after the takeover: {after_kill:?}"
    );
    for passes in steady {
        assert!(
            (PER_SECOND - TOLERANCE..=PER_SECOND + TOLERANCE).contains(passes),
            "the survivor admits {PER_SECOND} ± {TOLERANCE} each second: {after_kill:?}"
        );
    }
    for (second, passed) in before.iter().chain(&after) {
        let allowed = PER_SECOND * (second - activated_second).max(0) as u64 + PER_SECOND;
        assert!(
            *passed <= allowed,
            "{passed} passed by second {second}, more than the rate allows ({allowed}) since \
             the room was activated in second {activated_second}"
        );
    }

    // The admissions followed ticket order across the takeover: pause, then the P lowest
    // tickets have passed and everybody else waits, moved up by P.
    let paused = survivor_edge
        .admin_post(
            &format!("/rooms/{ROOM}/state"),
            json!({ "state": "paused" }),
        )
        .await;
    assert_eq!(paused.status, 200, "pause: {}", paused.text);
    let passed = passed_total(survivor_edge).await;
    assert!(passed > 0 && passed < total, "{passed} of {total} passed");
    let statuses: Vec<(u64, serde_json::Value)> = futures::stream::iter(&visitors)
        .map(|(position, token)| async move {
            let status = survivor_edge.status(token).await;
            assert_eq!(status.status, 200, "status: {}", status.text);
            (*position, status.body)
        })
        .buffer_unordered(100)
        .collect()
        .await;
    for (ticket, status) in &statuses {
        if *ticket <= passed {
            assert_eq!(
                status["passed"], true,
                "ticket {ticket} of the {passed} lowest: {status}"
            );
        } else {
            assert_eq!(status["passed"], false, "ticket {ticket} waits: {status}");
            assert_eq!(
                status["position"],
                ticket - passed,
                "ticket {ticket} moved up by {passed}: {status}"
            );
        }
    }
    eprintln!("engines: {passed} of {total} passed, all in ticket order");

    // Checked last, so a failure here says everything else held.
    assert!(
        takeover <= MAX_TAKEOVER_SLICE,
        "the first slice after the takeover admits at most {MAX_TAKEOVER_SLICE} (one slice \
         plus the carried credit), not the missed seconds at once: {after_kill:?}"
    );
}

/// The door checks each engine answers, added up: what the admin targeting page shows through
/// either engine once both have flushed (within a second or two).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn targeting_counters_add_up_across_engines() {
    tokio::time::timeout(Duration::from_secs(60), counters_add_up())
        .await
        .expect("the targeting-counters test finishes within 60 s");
}

async fn counters_add_up() {
    const CHECKOUT: &str = "https://shop.example/checkout/pay";
    const ABOUT: &str = "https://shop.example/about";
    let backing = Backing::start(ValkeyOptions { aof: false }).await;
    let mut env = test_env();
    env.extend(backing.env());
    let engine_a = EngineProcess::start(env!("CARGO_BIN_EXE_qm"), &env, free_addr()).await;
    let engine_b = EngineProcess::start(env!("CARGO_BIN_EXE_qm"), &env, free_addr()).await;
    let edge_a = spawn_edge(engine_a.addr(), &env).await;
    let edge_b = spawn_edge(engine_b.addr(), &env).await;
    edge_a.wait_ready().await;
    edge_b.wait_ready().await;
    edge_a
        .create_room(room_body(
            "scoped",
            0,
            json!({ "urlPatterns": ["/checkout/*"] }),
        ))
        .await;
    // Each engine learns of the room (pub/sub) before it answers checks for it.
    wait_for_room(&edge_b).await;
    for (edge, page) in [
        (&edge_a, CHECKOUT),
        (&edge_a, CHECKOUT),
        (&edge_a, CHECKOUT),
        (&edge_b, CHECKOUT),
        (&edge_b, CHECKOUT),
        (&edge_b, ABOUT),
    ] {
        let request = edge
            .http
            .get(format!("{}/api/check", edge.gateway))
            .query(&[("roomId", "scoped"), ("url", page)]);
        let reply = edge.send(request).await;
        assert_eq!(reply.status, 200, "check: {}", reply.text);
    }

    let counts = |body: &serde_json::Value| {
        (
            body["rules"][0]["matchCount"].as_u64(),
            body["unmatchedChecks"].as_u64(),
        )
    };
    for edge in [&edge_a, &edge_b] {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        let seen = loop {
            let reply = edge
                .send(
                    edge.http
                        .get(format!("{}/api/admin/rooms/scoped/targeting", edge.admin))
                        .bearer_auth(qm_tests::TEST_ADMIN_KEY),
                )
                .await;
            assert_eq!(reply.status, 200, "{}", reply.text);
            let seen = counts(&reply.body);
            if seen == (Some(5), Some(1)) || tokio::time::Instant::now() > deadline {
                break seen;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(
            seen,
            (Some(5), Some(1)),
            "the page through either engine counts every engine's checks"
        );
    }
}

/// Waits until an edge's engine knows the room.
async fn wait_for_room(edge: &TestApp) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let reply = edge
            .send(
                edge.http
                    .get(format!("{}/api/admin/rooms/scoped", edge.admin))
                    .bearer_auth(qm_tests::TEST_ADMIN_KEY),
            )
            .await;
        if reply.status == 200 {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the second engine never learned of the room: {}",
            reply.text
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
