//! `qm-bench status`, `check` and `join`: the visitor's hot paths driven by wrk, each run
//! beside the ceiling — a bare axum server answering the bytes of a real join answer to the
//! same wrk, in the same process, alternated round by round so a noisy moment on the shared
//! machine hits every figure. Each figure is printed with its ratio to the ceiling of its own
//! round, the median of the rounds, and the target it is held to.

use std::path::{Path, PathBuf};

use axum::Router;
use axum::http::header::CONTENT_TYPE;
use bytes::Bytes;
use qm_tests::{Backing, TestApp, room_body, spawn_app_on};
use serde_json::json;

use crate::inline::median;
use crate::wrk::{self, WrkLoad, WrkRun};
use crate::{client, drive, num_cpus};

/// The settings every visitor bench shares.
#[derive(Debug, Clone)]
pub(crate) struct VisitorBench {
    pub(crate) store: String,
    pub(crate) threads: usize,
    pub(crate) concurrency: usize,
    pub(crate) seconds: u64,
    pub(crate) rounds: usize,
}

impl VisitorBench {
    fn load(&self, connections: usize) -> WrkLoad {
        WrkLoad {
            threads: self.threads,
            connections,
            seconds: self.seconds,
        }
    }
}

/// One measured path: what wrk sends, and what its figure is held to.
struct Target {
    name: String,
    url: String,
    headers: Vec<String>,
    script: Option<PathBuf>,
    connections: usize,
    /// The least ratio to the ceiling (or to `over`) that meets the target, if one is set.
    at_least: Option<f64>,
    /// Compare with another target's figure of the same round instead of the ceiling.
    over: Option<usize>,
    /// The greatest p99 in ms that meets the target, if one is set.
    p99_at_most: Option<f64>,
}

impl Target {
    fn get(name: impl Into<String>, url: String, headers: Vec<String>, connections: usize) -> Self {
        Target {
            name: name.into(),
            url,
            headers,
            script: None,
            connections,
            at_least: None,
            over: None,
            p99_at_most: None,
        }
    }

    fn at_least(mut self, ratio: f64) -> Self {
        self.at_least = Some(ratio);
        self
    }
}

/// The ceiling: a bare axum server answering every request with `body` as JSON.
pub(crate) async fn bare_axum(body: Bytes) -> anyhow::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let app = Router::new().fallback(move || {
        let body = body.clone();
        async move { ([(CONTENT_TYPE, "application/json")], body) }
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(format!("http://{addr}/"))
}

/// Starts the components on the store asked for.
async fn start_app(store: &str) -> anyhow::Result<TestApp> {
    let backing = match store {
        "memory" => None,
        "valkey" => Some(Backing::start(qm_tests::servers::ValkeyOptions { aof: true }).await),
        other => anyhow::bail!("--store {other}: use memory or valkey"),
    };
    // wrk is one client address: the door checks' per-address budget is raised as the test
    // defaults raise the others, so what is measured is the check, not its 429.
    Ok(spawn_app_on(backing, &[("CHECK_LIMIT_PER_MIN", "100000000")]).await)
}

/// Joins `room` once as a new visitor through `gateway`: the answer's body (the ceiling's
/// bytes) and token.
pub(crate) async fn join_one(gateway: &str, room: &str) -> anyhow::Result<(Bytes, String)> {
    let http = client(1);
    let answer = http
        .post(format!("{gateway}/api/join"))
        .json(&json!({ "roomId": room }))
        .send()
        .await?;
    anyhow::ensure!(
        answer.status().is_success(),
        "join {room}: {}",
        answer.status()
    );
    let body = answer.bytes().await?;
    let token = serde_json::from_slice::<serde_json::Value>(&body)?["token"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    anyhow::ensure!(!token.is_empty(), "join {room} answered no token");
    Ok((body, token))
}

/// Writes the wrk script that POSTs a join to `room` (wrk keeps no cookies: each request is a
/// new visitor).
pub(crate) fn join_script(dir: &Path, room: &str) -> anyhow::Result<PathBuf> {
    let path = dir.join(format!("join-{room}.lua"));
    std::fs::write(
        &path,
        format!(
            "wrk.method = \"POST\"\nwrk.body = '{{\"roomId\":\"{room}\"}}'\nwrk.headers[\"Content-Type\"] = \"application/json\"\n"
        ),
    )?;
    Ok(path)
}

/// Every round runs the ceiling, then each target; answers the ceiling's runs and each
/// target's, by round.
async fn measure(
    bench: &VisitorBench,
    ceiling_url: &str,
    targets: &[Target],
) -> anyhow::Result<(Vec<WrkRun>, Vec<Vec<WrkRun>>)> {
    let mut ceiling = Vec::new();
    let mut runs: Vec<Vec<WrkRun>> = targets.iter().map(|_| Vec::new()).collect();
    for _ in 0..bench.rounds {
        ceiling.push(wrk::run(ceiling_url, &[], bench.load(bench.concurrency)).await?);
        for (target, runs) in targets.iter().zip(&mut runs) {
            runs.push(
                wrk::run_script(
                    &target.url,
                    &target.headers,
                    target.script.as_deref(),
                    bench.load(target.connections),
                )
                .await?,
            );
        }
    }
    Ok((ceiling, runs))
}

pub(crate) fn round3(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}

/// Prints every run, each target's ratios and whether it met its target, and the JSON line;
/// fails when any request failed.
fn report(
    bench_name: &str,
    bench: &VisitorBench,
    ceiling: &[WrkRun],
    targets: &[Target],
    runs: &[Vec<WrkRun>],
) -> anyhow::Result<()> {
    println!(
        "qm-bench {bench_name}  store={} wrk -t{} -c{} -d{}s rounds={} cores={}",
        bench.store,
        bench.threads,
        bench.concurrency,
        bench.seconds,
        bench.rounds,
        num_cpus()
    );
    println!(
        "{:<52} {:>11} {:>8} {:>8} {:>8} {:>8}",
        "run", "requests/s", "p50 ms", "p99 ms", "ratio", "failures"
    );
    let mut summary = Vec::new();
    let mut failures = 0;
    for round in 0..ceiling.len() {
        let base = &ceiling[round];
        println!(
            "{:<52} {:>11.0} {:>8.2} {:>8.2} {:>8} {:>8}",
            format!(
                "bare axum, the ceiling (-c{}) #{}",
                bench.concurrency,
                round + 1
            ),
            base.per_second,
            base.p50_ms,
            base.p99_ms,
            "1",
            base.failures
        );
        failures += base.failures;
        for (target, runs_of) in targets.iter().zip(runs) {
            let run = &runs_of[round];
            let over = target.over.map_or(base, |index| &runs[index][round]);
            println!(
                "{:<52} {:>11.0} {:>8.2} {:>8.2} {:>8.3} {:>8}",
                format!("{} #{}", target.name, round + 1),
                run.per_second,
                run.p50_ms,
                run.p99_ms,
                run.per_second / over.per_second,
                run.failures
            );
            failures += run.failures;
            for line in run.failure_lines.lines() {
                eprintln!("{}: {line}", target.name);
            }
        }
    }
    println!(
        "{:<52} {:>12} {:>14} {:>10}",
        "target", "median ratio", "worst p99 ms", "met"
    );
    for (index, (target, runs_of)) in targets.iter().zip(runs).enumerate() {
        let ratios: Vec<f64> = runs_of
            .iter()
            .enumerate()
            .map(|(round, run)| {
                let over = target
                    .over
                    .map_or(&ceiling[round], |other| &runs[other][round]);
                round3(run.per_second / over.per_second)
            })
            .collect();
        let worst_p99 = runs_of.iter().map(|run| run.p99_ms).fold(0.0, f64::max);
        let ratio = median(&ratios);
        let met = target.at_least.is_none_or(|least| ratio >= least)
            && target.p99_at_most.is_none_or(|most| worst_p99 <= most);
        let over = match target.over {
            Some(other) => format!("of {}", targets[other].name),
            None => "of the ceiling".to_owned(),
        };
        let goal = match (target.at_least, target.p99_at_most) {
            (Some(least), Some(most)) => format!("≥ {least} {over}, p99 ≤ {most} ms"),
            (Some(least), None) => format!("≥ {least} {over}"),
            (None, Some(most)) => format!("p99 ≤ {most} ms"),
            (None, None) => "(no target)".to_owned(),
        };
        println!(
            "{:<52} {:>12.3} {:>14.2} {:>10}",
            target.name,
            ratio,
            worst_p99,
            if target.at_least.is_none() && target.p99_at_most.is_none() {
                "-"
            } else if met {
                "yes"
            } else {
                "NO"
            }
        );
        summary.push(json!({
            "run": target.name,
            "index": index,
            "rps": runs_of.iter().map(|run| run.per_second.round()).collect::<Vec<_>>(),
            "p99_ms": runs_of.iter().map(|run| run.p99_ms).collect::<Vec<_>>(),
            "ratios": ratios,
            "median_ratio": ratio,
            "target": goal,
            "met": met,
        }));
    }
    println!(
        "{}",
        json!({
            "bench": bench_name,
            "store": bench.store,
            "load": format!("wrk -t{} -c{} -d{}s", bench.threads, bench.concurrency, bench.seconds),
            "ceiling_rps": ceiling.iter().map(|run| run.per_second.round()).collect::<Vec<_>>(),
            "targets": summary,
        })
    );
    anyhow::ensure!(failures == 0, "{failures} requests failed");
    Ok(())
}

/// `qm-bench status`: a waiting visitor's `GET /api/status` at each of `positions`.
pub(crate) async fn status(bench: VisitorBench, mut positions: Vec<u64>) -> anyhow::Result<()> {
    wrk::require()?;
    positions.sort_unstable();
    positions.dedup();
    anyhow::ensure!(
        positions.first().is_some_and(|first| *first >= 1),
        "--positions: at least one, each ≥ 1"
    );
    let app = start_app(&bench.store).await?;
    app.create_room(room_body("bench", 0, json!({}))).await;
    let fill = client(256);
    let join_url = format!("{}/api/join", app.gateway);
    let mut waiting = 0;
    let mut targets = Vec::new();
    let mut ceiling_body = Bytes::new();
    for position in positions {
        let ahead = (position - 1 - waiting) as usize;
        if ahead > 0 {
            let filled = drive(&fill, &join_url, json!({ "roomId": "bench" }), ahead, 256).await;
            anyhow::ensure!(
                filled.failures == 0,
                "{} filling joins failed",
                filled.failures
            );
        }
        let (body, token) = join_one(&app.gateway, "bench").await?;
        ceiling_body = body;
        waiting = position;
        targets.push(
            Target::get(
                format!("GET /api/status at position {position}"),
                format!("{}/api/status?token={token}", app.gateway),
                Vec::new(),
                bench.concurrency,
            )
            .at_least(0.5),
        );
    }
    let line = app.room("bench").await["waiting"].as_u64().unwrap_or(0);
    anyhow::ensure!(line == waiting, "the line holds {line}, {waiting} joined");
    let ceiling_url = bare_axum(ceiling_body).await?;
    let (ceiling, runs) = measure(&bench, &ceiling_url, &targets).await?;
    app.stop().await;
    report("status", &bench, &ceiling, &targets, &runs)
}

/// `qm-bench check`: the door check of a waiting visitor's token, of a passed token already
/// spent into a door session (presented without that session's key: `pass_spent`), and of the
/// door session itself (`X-QM-Session`, as the snippet sends it: `session`).
pub(crate) async fn check(bench: VisitorBench) -> anyhow::Result<()> {
    wrk::require()?;
    let app = start_app(&bench.store).await?;
    app.create_room(room_body("door", 0, json!({}))).await;
    let (_, passed) = join_one(&app.gateway, "door").await?;
    let (ceiling_body, waiting) = join_one(&app.gateway, "door").await?;
    let flushed = app
        .admin_post("/rooms/door/flush", json!({ "count": 1 }))
        .await;
    anyhow::ensure!(flushed.status == 200, "flush: {}", flushed.text);
    let check_url = |token: &str| format!("{}/api/check?roomId=door&token={token}", app.gateway);
    let opened = app.send(client(1).get(check_url(&passed))).await;
    let key = opened.body["sess"].as_str().unwrap_or_default().to_owned();
    anyhow::ensure!(
        opened.body["action"] == "pass" && !key.is_empty(),
        "the first check of a passed token opens a door session: {}",
        opened.text
    );
    let expect = |url: String, headers: &[(&str, &str)], reason: &str| {
        let app = &app;
        let headers: Vec<(String, String)> = headers
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect();
        let reason = reason.to_owned();
        async move {
            let request = headers
                .iter()
                .fold(client(1).get(&url), |request, (name, value)| {
                    request.header(name, value)
                });
            let answer = app.send(request).await;
            anyhow::ensure!(
                answer.body["reason"] == reason.as_str(),
                "{url} answers {}, not reason {reason}",
                answer.text
            );
            Ok(())
        }
    };
    expect(check_url(&waiting), &[], "waiting").await?;
    expect(check_url(&passed), &[], "pass_spent").await?;
    expect(check_url(&passed), &[("X-QM-Session", &key)], "session").await?;
    let targets = vec![
        Target::get(
            "GET /api/check, a waiting token",
            check_url(&waiting),
            Vec::new(),
            bench.concurrency,
        ),
        Target::get(
            "GET /api/check, a passed token (spent)",
            check_url(&passed),
            Vec::new(),
            bench.concurrency,
        )
        .at_least(0.5),
        Target::get(
            "GET /api/check, a door session",
            check_url(&passed),
            vec![format!("X-QM-Session: {key}")],
            bench.concurrency,
        )
        .at_least(0.5),
    ];
    let ceiling_url = bare_axum(ceiling_body).await?;
    let (ceiling, runs) = measure(&bench, &ceiling_url, &targets).await?;
    app.stop().await;
    report("check", &bench, &ceiling, &targets, &runs)
}

/// `qm-bench join`: new visitors' `POST /api/join` on the memory store at the bench's
/// concurrency and at 256 in flight, and on the durable store at 256 (held to 0.7 of the
/// memory join at 256, p99 ≤ 50 ms); afterwards every room's line holds at least every join
/// wrk counted as answered.
pub(crate) async fn join(bench: VisitorBench) -> anyhow::Result<()> {
    wrk::require()?;
    let memory = start_app("memory").await?;
    let durable = start_app("valkey").await?;
    let scripts = std::env::temp_dir().join(format!("qm-bench-join-{}", std::process::id()));
    std::fs::create_dir_all(&scripts)?;
    let rooms = ["memory", "memory256", "durable256"];
    for (room, app) in rooms.iter().zip([&memory, &memory, &durable]) {
        app.create_room(room_body(room, 0, json!({}))).await;
    }
    let (ceiling_body, _) = join_one(&memory.gateway, "memory").await?;
    // Warm the durable path (its writer, committer and connections) before measuring.
    let warm = drive(
        &client(256),
        &format!("{}/api/join", durable.gateway),
        json!({ "roomId": "durable256" }),
        2_000,
        256,
    )
    .await;
    anyhow::ensure!(warm.failures == 0, "{} warm-up joins failed", warm.failures);
    let join_target = |name: &str, app: &TestApp, room: &str, connections: usize| {
        anyhow::Ok(Target {
            script: Some(join_script(&scripts, room)?),
            ..Target::get(
                name,
                format!("{}/api/join", app.gateway),
                Vec::new(),
                connections,
            )
        })
    };
    let targets = vec![
        join_target(
            &format!("POST /api/join, memory (-c{})", bench.concurrency),
            &memory,
            "memory",
            bench.concurrency,
        )?
        .at_least(0.4),
        join_target("POST /api/join, memory (-c256)", &memory, "memory256", 256)?,
        Target {
            at_least: Some(0.7),
            over: Some(1),
            p99_at_most: Some(50.0),
            ..join_target(
                "POST /api/join, durable (-c256)",
                &durable,
                "durable256",
                256,
            )?
        },
    ];
    let ceiling_url = bare_axum(ceiling_body).await?;
    let (ceiling, runs) = measure(&bench, &ceiling_url, &targets).await?;
    // Nothing wrk counted as answered is missing from its line.
    let before = [1, 0, warm.requests];
    for ((room, app), (runs_of, extra)) in rooms
        .iter()
        .zip([&memory, &memory, &durable])
        .zip(runs.iter().zip(before))
    {
        let answered: u64 = runs_of.iter().map(|run| run.requests).sum::<u64>() + extra as u64;
        let line = app.room(room).await["waiting"].as_u64().unwrap_or(0);
        anyhow::ensure!(
            line >= answered,
            "room {room}: {answered} joins answered, {line} in the line"
        );
    }
    memory.stop().await;
    durable.stop().await;
    let _ = std::fs::remove_dir_all(&scripts);
    let bench = VisitorBench {
        store: "memory+valkey".to_owned(),
        ..bench
    };
    report("join", &bench, &ceiling, &targets, &runs)
}
