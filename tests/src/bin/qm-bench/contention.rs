//! `qm-bench contention`: two engines on one Valkey and one journal, joining one room at full
//! speed, beside one engine alone on another room in the same run. Each engine runs every
//! change on its own live copy of the room and lands it only if nobody changed the room since;
//! when the other engine landed first, the batch is taken back and run again. The figures say
//! what that costs: joins/s and p99 for each setting, batches landed, batches refused, retries
//! per join, and the verdict on the line itself (every acknowledged join present exactly once,
//! tickets 1..N without a gap).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use futures::StreamExt;
use qm_proto::StatsRequest;
use qm_tests::servers::ValkeyOptions;
use qm_tests::{Backing, TestApp, room_body, spawn_app_on};
use serde_json::json;

use crate::{Run, client, num_cpus};

/// One engine's landing counters.
#[derive(Debug, Clone, Copy, Default)]
struct Landings {
    landed_or_refused: u64,
    stale: u64,
}

async fn landings(app: &TestApp) -> anyhow::Result<Landings> {
    let mut engine = app.engine();
    let stats = engine.stats(StatsRequest {}).await?.into_inner();
    Ok(Landings {
        landed_or_refused: stats.landings,
        stale: stats.stale_landings,
    })
}

/// Sends `count` joins into `room_id`, spread over `gateways`, `concurrency` in flight in all;
/// answers the run and the tickets the acknowledged joins carry.
async fn joins(
    client: &reqwest::Client,
    gateways: &[&str],
    room_id: &str,
    count: usize,
    concurrency: usize,
) -> (Run, Vec<u64>) {
    let started = Instant::now();
    let body = json!({ "roomId": room_id });
    let results: Vec<(Duration, Option<u64>)> = futures::stream::iter(0..count)
        .map(|index| {
            let url = format!("{}/api/join", gateways[index % gateways.len()]);
            let request = client.post(url).json(&body);
            async move {
                let sent = Instant::now();
                let ticket = match request.send().await {
                    Ok(response) if response.status().is_success() => response
                        .json::<serde_json::Value>()
                        .await
                        .ok()
                        .and_then(|answer| {
                            qm_tests::tokens::token_ticket(answer["token"].as_str()?)
                        }),
                    _ => None,
                };
                (sent.elapsed(), ticket)
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let tickets = results.iter().filter_map(|(_, ticket)| *ticket).collect();
    let run = Run::from_results(
        count,
        started.elapsed(),
        results
            .into_iter()
            .map(|(latency, ticket)| (latency, ticket.is_some()))
            .collect(),
    );
    (run, tickets)
}

/// Waits until `app`'s engine knows `room_id` (rooms reach other engines over pub/sub).
async fn known(app: &TestApp, room_id: &str) -> anyhow::Result<()> {
    for _ in 0..500 {
        let reply = app
            .admin_call(reqwest::Method::GET, &format!("/rooms/{room_id}"), None)
            .await;
        if reply.status == 200 {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    anyhow::bail!("room {room_id} never reached the second engine")
}

/// Whether `tickets` are exactly 1..=count, each once.
fn exact_line(tickets: &[u64], count: usize) -> bool {
    let unique: HashSet<u64> = tickets.iter().copied().collect();
    unique.len() == count
        && tickets.len() == count
        && unique
            .iter()
            .all(|ticket| (1..=count as u64).contains(ticket))
}

pub(crate) async fn contention(count: usize, concurrency: usize) -> anyhow::Result<()> {
    let backing = Backing::start(ValkeyOptions { aof: true }).await;
    let env = backing.env();
    let overrides: Vec<(&str, &str)> = env
        .iter()
        .map(|(key, value)| (key.as_str(), value.as_str()))
        .collect();
    let second = spawn_app_on(None, &overrides).await;
    let first = spawn_app_on(Some(backing), &[]).await;
    for room_id in ["warm", "solo", "shared"] {
        first.create_room(room_body(room_id, 0, json!({}))).await;
        known(&second, room_id).await?;
    }
    let client = client(concurrency);
    let gateways = [first.gateway.as_str(), second.gateway.as_str()];
    joins(&client, &gateways, "warm", concurrency * 4, concurrency).await;

    let before = [landings(&first).await?, landings(&second).await?];
    let (solo, solo_tickets) = joins(&client, &gateways[..1], "solo", count, concurrency).await;
    let middle = [landings(&first).await?, landings(&second).await?];
    let (shared, shared_tickets) = joins(&client, &gateways, "shared", count, concurrency).await;
    let after = [landings(&first).await?, landings(&second).await?];

    let delta = |from: &[Landings; 2], to: &[Landings; 2]| Landings {
        landed_or_refused: (0..2)
            .map(|i| to[i].landed_or_refused - from[i].landed_or_refused)
            .sum(),
        stale: (0..2).map(|i| to[i].stale - from[i].stale).sum(),
    };
    let solo_landings = delta(&before, &middle);
    let shared_landings = delta(&middle, &after);
    let rooms = [
        first.room("shared").await,
        second.room("shared").await,
        first.room("solo").await,
    ];
    first.stop().await;
    second.stop().await;

    println!(
        "qm-bench contention  joins={count} concurrency={concurrency} cores={}",
        num_cpus()
    );
    println!(
        "{:<38} {:>10} {:>8} {:>8} {:>8} {:>9} {:>7} {:>12} {:>10}",
        "run",
        "joins/s",
        "p50 ms",
        "p99 ms",
        "failures",
        "batches",
        "stale",
        "retries/join",
        "exact line"
    );
    let rows = [
        (
            "one engine, one room",
            &solo,
            solo_landings,
            exact_line(&solo_tickets, count),
        ),
        (
            "two engines, one room (half each)",
            &shared,
            shared_landings,
            exact_line(&shared_tickets, count),
        ),
    ];
    for (name, run, landings, exact) in &rows {
        println!(
            "{:<38} {:>10.0} {:>8.2} {:>8.2} {:>8} {:>9} {:>7} {:>12.3} {:>10}",
            name,
            run.per_second(),
            run.percentile(0.50).as_secs_f64() * 1000.0,
            run.percentile(0.99).as_secs_f64() * 1000.0,
            run.failures,
            landings.landed_or_refused,
            landings.stale,
            landings.stale as f64 / count as f64,
            exact
        );
    }
    let waiting: Vec<u64> = rooms
        .iter()
        .map(|room| room["waiting"].as_u64().unwrap_or_default())
        .collect();
    println!(
        "waiting afterwards: shared room {} (first engine) / {} (second), solo room {}",
        waiting[0], waiting[1], waiting[2]
    );
    let report = json!({
        "bench": "contention",
        "joins": count,
        "concurrency": concurrency,
        "runs": rows.iter().map(|(name, run, landings, exact)| json!({
            "run": name,
            "joins_per_sec": run.per_second().round(),
            "p50_ms": run.percentile(0.50).as_secs_f64() * 1000.0,
            "p99_ms": run.percentile(0.99).as_secs_f64() * 1000.0,
            "failures": run.failures,
            "batches": landings.landed_or_refused,
            "stale_batches": landings.stale,
            "retries_per_join": landings.stale as f64 / count as f64,
            "exact_line": exact,
        })).collect::<Vec<_>>(),
        "waiting_after": waiting,
    });
    println!("{report}");
    let lost_or_doubled = rows
        .iter()
        .any(|(_, run, _, exact)| run.failures > 0 || !exact)
        || waiting.iter().any(|waiting| *waiting != count as u64);
    if lost_or_doubled {
        anyhow::bail!("a join failed, or the line is not exactly the acknowledged joins");
    }
    Ok(())
}
