//! `qm-bench cluster`: the visitor's two hot paths — a waiting visitor's `GET /api/status` and
//! a new visitor's `POST /api/join` — through several real `qm engine` and `qm gateway`
//! processes on one Valkey and one Postgres (the durable store: the only one several engines
//! share), beside the bare axum ceiling driven by the same wrk processes in the same round.
//!
//! Each layout (`engines x gateways`) starts from a fresh Valkey and database; gateway `i`
//! talks to engine `i mod engines`, and one wrk per gateway drives it at once (its share of the
//! connections). Throughput on a machine of two cores says little about more cores, so every
//! run also reads each process's CPU time (`/proc/<pid>/stat`): CPU milliseconds per thousand
//! requests, by role. The gateway's CPU over the engine's for the same requests is how many
//! gateway cores one engine core feeds: the figure OPERATIONS.md sizes a deployment by.

use std::path::Path;

use anyhow::Context as _;
use qm_tests::process::{AdminProcess, EngineProcess, GatewayProcess, free_addr};
use qm_tests::servers::ValkeyOptions;
use qm_tests::{Backing, TEST_ADMIN_KEY, test_env};
use serde_json::json;

use crate::inline::median;
use crate::sse::{create_room, join_visitors, qm_binary};
use crate::visitor::{bare_axum, join_one, join_script, round3};
use crate::wrk::{self, Aim, WrkLoad, WrkRun};

const ROOM: &str = "cluster";
/// Joins through every gateway before the first measured run: writers, committers and every
/// connection warm.
const WARM_JOINS: usize = 2_000;

/// The settings of one `qm-bench cluster` run (its command-line arguments).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ClusterBench {
    /// Layouts measured, each ENGINESxGATEWAYS, comma-separated.
    #[arg(long, value_delimiter = ',', value_parser = parse_layout, default_value = "1x1,1x2,2x2")]
    pub(crate) layouts: Vec<(usize, usize)>,
    /// wrk threads in all, shared out over one wrk process per gateway (at least one each).
    #[arg(long, default_value_t = 2)]
    pub(crate) threads: usize,
    /// Connections in all for the ceiling and status, shared out over the wrk processes.
    #[arg(long, default_value_t = 64)]
    pub(crate) concurrency: usize,
    /// Connections in all for the joins.
    #[arg(long, default_value_t = 256)]
    pub(crate) join_concurrency: usize,
    /// Seconds each measured run lasts.
    #[arg(long, default_value_t = 5)]
    pub(crate) seconds: u64,
    /// Rounds per layout, each the ceiling, status, then join.
    #[arg(long, default_value_t = 3)]
    pub(crate) rounds: usize,
}

/// Reads `2x3` as two engines and three gateways.
pub(crate) fn parse_layout(text: &str) -> Result<(usize, usize), String> {
    let (engines, gateways) = text
        .split_once('x')
        .ok_or_else(|| format!("{text}: a layout is ENGINESxGATEWAYS, as 1x2"))?;
    let count = |part: &str| match part.trim().parse::<usize>() {
        Ok(count @ 1..=8) => Ok(count),
        _ => Err(format!("{text}: engines and gateways are each 1 to 8")),
    };
    Ok((count(engines)?, count(gateways)?))
}

/// CPU time (user + system) of each process, in clock ticks.
fn cpu_ticks(pids: &[u32]) -> anyhow::Result<Vec<u64>> {
    pids.iter()
        .map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .with_context(|| format!("reading /proc/{pid}/stat"))?;
            // The fields after the command name, which is in parentheses and may hold spaces:
            // utime and stime are the 12th and 13th of them (fields 14 and 15 of proc(5)).
            let after_name = stat.rsplit_once(')').context("a stat line")?.1;
            let fields: Vec<&str> = after_name.split_whitespace().collect();
            let field = |index: usize| -> anyhow::Result<u64> {
                Ok(fields.get(index).context("a short stat line")?.parse()?)
            };
            Ok(field(11)? + field(12)?)
        })
        .collect()
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 on Linux unless built otherwise).
fn ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|output| String::from_utf8(output.stdout).ok()?.trim().parse().ok())
        .unwrap_or(100.0)
}

/// One measured run of a path through the layout: wrk's figures and the CPU it cost.
struct Measured {
    run: WrkRun,
    /// CPU ms per thousand answered requests, every gateway together and every engine together.
    gateway_ms: f64,
    engine_ms: f64,
}

impl Measured {
    /// Gateway cores one engine core feeds on this path.
    fn gateways_per_engine(&self) -> f64 {
        if self.engine_ms > 0.0 {
            self.gateway_ms / self.engine_ms
        } else {
            f64::INFINITY
        }
    }
}

/// The processes of one layout on their own Valkey and database.
struct Layout {
    engines: Vec<EngineProcess>,
    gateways: Vec<GatewayProcess>,
    admin: AdminProcess,
    _backing: Backing,
}

impl Layout {
    async fn start(qm: &Path, engines: usize, gateways: usize) -> anyhow::Result<Layout> {
        let backing = Backing::start(ValkeyOptions { aof: true }).await;
        let mut env = test_env();
        env.extend(backing.env());
        let mut engine_processes = Vec::new();
        for _ in 0..engines {
            engine_processes.push(EngineProcess::start(qm, &env, free_addr()).await);
        }
        let mut gateway_processes = Vec::new();
        for index in 0..gateways {
            let engine = engine_processes[index % engines].addr();
            gateway_processes
                .push(GatewayProcess::start(qm, &env, engine, free_addr().port()).await);
        }
        let admin =
            AdminProcess::start(qm, &env, engine_processes[0].addr(), free_addr().port()).await;
        create_room(&admin.url(), ROOM).await?;
        Ok(Layout {
            engines: engine_processes,
            gateways: gateway_processes,
            admin,
            _backing: backing,
        })
    }

    fn gateway_urls(&self) -> Vec<String> {
        self.gateways.iter().map(GatewayProcess::url).collect()
    }

    /// Runs wrk at every aim at once and reads what the processes spent meanwhile.
    async fn measure(&self, aims: &[Aim], load: WrkLoad, ticks: f64) -> anyhow::Result<Measured> {
        let engine_pids: Vec<u32> = self.engines.iter().filter_map(EngineProcess::pid).collect();
        let gateway_pids: Vec<u32> = self
            .gateways
            .iter()
            .filter_map(GatewayProcess::pid)
            .collect();
        let engines_before = cpu_ticks(&engine_pids)?;
        let gateways_before = cpu_ticks(&gateway_pids)?;
        let run = wrk::run_together(aims, load).await?;
        let spent = |before: Vec<u64>, pids: &[u32]| -> anyhow::Result<f64> {
            let after: u64 = cpu_ticks(pids)?.iter().sum();
            let cpu_ms = after.saturating_sub(before.iter().sum()) as f64 * 1000.0 / ticks;
            Ok(cpu_ms * 1000.0 / run.requests.max(1) as f64)
        };
        Ok(Measured {
            engine_ms: spent(engines_before, &engine_pids)?,
            gateway_ms: spent(gateways_before, &gateway_pids)?,
            run,
        })
    }

    fn log_tails(&self) -> String {
        let engines = self.engines.iter().map(EngineProcess::log_tail);
        let gateways = self.gateways.iter().map(GatewayProcess::log_tail);
        engines.chain(gateways).collect::<Vec<_>>().join("\n---\n")
    }
}

/// A join through `gateway`, retried while its engine has not yet heard of the room (it
/// learns of it over pub/sub a moment after the engine the admin process asked).
async fn first_join(gateway: &str) -> anyhow::Result<(bytes::Bytes, String)> {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match join_one(gateway, ROOM).await {
            Ok(joined) => return Ok(joined),
            Err(error) if tokio::time::Instant::now() > deadline => {
                return Err(error.context(format!("{gateway} never knew the room")));
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
        }
    }
}

/// The line's length as the admin process at `admin` reports it.
async fn waiting(admin: &str) -> anyhow::Result<u64> {
    let room: serde_json::Value = reqwest::Client::new()
        .get(format!("{admin}/api/admin/rooms/{ROOM}"))
        .bearer_auth(TEST_ADMIN_KEY)
        .send()
        .await?
        .json()
        .await?;
    room["room"]["waiting"]
        .as_u64()
        .with_context(|| format!("the room's line: {room}"))
}

/// What one layout measured, round by round.
struct LayoutRuns {
    engines: usize,
    gateways: usize,
    ceiling: Vec<WrkRun>,
    status: Vec<Measured>,
    join: Vec<Measured>,
}

pub(crate) async fn cluster(bench: ClusterBench) -> anyhow::Result<()> {
    wrk::require()?;
    let qm = qm_binary()?;
    let ticks = ticks_per_second();
    let scripts = std::env::temp_dir().join(format!("qm-bench-cluster-{}", std::process::id()));
    std::fs::create_dir_all(&scripts)?;
    let script = join_script(&scripts, ROOM)?;
    println!(
        "qm-bench cluster  store=valkey+postgres wrk -t{} in all, -c{} (status, ceiling) / -c{} (join) shared over one wrk per gateway, -d{}s rounds={} cores={}",
        bench.threads,
        bench.concurrency,
        bench.join_concurrency,
        bench.seconds,
        bench.rounds,
        crate::num_cpus()
    );
    let mut results = Vec::new();
    for &(engines, gateways) in &bench.layouts {
        let layout = Layout::start(&qm, engines, gateways).await?;
        let measured = measure_layout(&bench, &layout, &script, ticks).await;
        let measured = measured.with_context(|| format!("logs:\n{}", layout.log_tails()))?;
        results.push(measured);
    }
    let _ = std::fs::remove_dir_all(&scripts);
    report(&bench, &results)
}

async fn measure_layout(
    bench: &ClusterBench,
    layout: &Layout,
    script: &Path,
    ticks: f64,
) -> anyhow::Result<LayoutRuns> {
    let urls = layout.gateway_urls();
    let mut tokens = Vec::new();
    let mut ceiling_body = bytes::Bytes::new();
    for url in &urls {
        let (body, token) = first_join(url).await?;
        ceiling_body = body;
        tokens.push(token);
    }
    for url in &urls {
        join_visitors(url, ROOM, WARM_JOINS / urls.len()).await?;
    }
    let ceiling_url = bare_axum(ceiling_body).await?;
    let processes = urls.len();
    let load = |connections: usize| WrkLoad {
        threads: (bench.threads / processes).max(1),
        connections: (connections / processes).max(1),
        seconds: bench.seconds,
    };
    let ceiling_aims: Vec<Aim> = urls
        .iter()
        .map(|_| Aim {
            url: ceiling_url.clone(),
            headers: Vec::new(),
            script: None,
        })
        .collect();
    let status_aims: Vec<Aim> = urls
        .iter()
        .zip(&tokens)
        .map(|(url, token)| {
            let token: String = url::form_urlencoded::byte_serialize(token.as_bytes()).collect();
            Aim {
                url: format!("{url}/api/status?token={token}"),
                headers: Vec::new(),
                script: None,
            }
        })
        .collect();
    let join_aims: Vec<Aim> = urls
        .iter()
        .map(|url| Aim {
            url: format!("{url}/api/join"),
            headers: Vec::new(),
            script: Some(script.to_path_buf()),
        })
        .collect();
    let mut runs = LayoutRuns {
        engines: layout.engines.len(),
        gateways: processes,
        ceiling: Vec::new(),
        status: Vec::new(),
        join: Vec::new(),
    };
    for _ in 0..bench.rounds {
        runs.ceiling
            .push(wrk::run_together(&ceiling_aims, load(bench.concurrency)).await?);
        runs.status.push(
            layout
                .measure(&status_aims, load(bench.concurrency), ticks)
                .await?,
        );
        runs.join.push(
            layout
                .measure(&join_aims, load(bench.join_concurrency), ticks)
                .await?,
        );
    }
    // Nothing wrk counted as answered is missing from the line.
    let answered: u64 = runs.join.iter().map(|join| join.run.requests).sum::<u64>()
        + (WARM_JOINS / processes * processes + processes) as u64;
    let line = waiting(&layout.admin.url()).await?;
    anyhow::ensure!(
        line >= answered,
        "{answered} joins answered, {line} in the line"
    );
    Ok(runs)
}

fn report(bench: &ClusterBench, layouts: &[LayoutRuns]) -> anyhow::Result<()> {
    println!(
        "{:<34} {:>11} {:>7} {:>8} {:>12} {:>12} {:>9} {:>8}",
        "run",
        "requests/s",
        "ratio",
        "p99 ms",
        "gw cpu ms/1k",
        "eng cpu ms/1k",
        "gw/engine",
        "failures"
    );
    let mut failures = 0;
    let mut summary = Vec::new();
    for layout in layouts {
        let name = format!("{}x{}", layout.engines, layout.gateways);
        for (round, ceiling) in layout.ceiling.iter().enumerate() {
            println!(
                "{:<34} {:>11.0} {:>7} {:>8.2} {:>12} {:>12} {:>9} {:>8}",
                format!("{name} bare axum, the ceiling #{}", round + 1),
                ceiling.per_second,
                "1",
                ceiling.p99_ms,
                "",
                "",
                "",
                ceiling.failures
            );
            failures += ceiling.failures;
            for (path, measured) in [
                ("GET /api/status", &layout.status[round]),
                ("POST /api/join", &layout.join[round]),
            ] {
                println!(
                    "{:<34} {:>11.0} {:>7.3} {:>8.2} {:>12.1} {:>12.1} {:>9.2} {:>8}",
                    format!("{name} {path} #{}", round + 1),
                    measured.run.per_second,
                    measured.run.per_second / ceiling.per_second,
                    measured.run.p99_ms,
                    measured.gateway_ms,
                    measured.engine_ms,
                    measured.gateways_per_engine(),
                    measured.run.failures
                );
                failures += measured.run.failures;
                for line in measured.run.failure_lines.lines() {
                    eprintln!("{name} {path}: {line}");
                }
            }
        }
        let mut paths = serde_json::Map::new();
        for (path, runs) in [("status", &layout.status), ("join", &layout.join)] {
            let ratios: Vec<f64> = runs
                .iter()
                .zip(&layout.ceiling)
                .map(|(measured, ceiling)| round3(measured.run.per_second / ceiling.per_second))
                .collect();
            let per_engine: Vec<f64> = runs
                .iter()
                .map(|measured| round3(measured.gateways_per_engine()))
                .collect();
            println!(
                "{name} {path}: median ratio {:.3}, median gateway cores per engine core {:.2}",
                median(&ratios),
                median(&per_engine)
            );
            paths.insert(
                path.to_owned(),
                json!({
                    "rps": runs.iter().map(|m| m.run.per_second.round()).collect::<Vec<_>>(),
                    "ratios": ratios,
                    "median_ratio": median(&ratios),
                    "gateway_cpu_ms_per_1k": runs.iter().map(|m| round3(m.gateway_ms)).collect::<Vec<_>>(),
                    "engine_cpu_ms_per_1k": runs.iter().map(|m| round3(m.engine_ms)).collect::<Vec<_>>(),
                    "median_gateways_per_engine": median(&per_engine),
                }),
            );
        }
        summary.push(json!({
            "layout": name,
            "ceiling_rps": layout.ceiling.iter().map(|run| run.per_second.round()).collect::<Vec<_>>(),
            "paths": paths,
        }));
    }
    println!(
        "{}",
        json!({
            "bench": "cluster",
            "load": format!("wrk -t{} -c{}/{} -d{}s", bench.threads, bench.concurrency, bench.join_concurrency, bench.seconds),
            "layouts": summary,
        })
    );
    anyhow::ensure!(failures == 0, "{failures} requests failed");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_layout_reads_as_engines_by_gateways() {
        assert_eq!(parse_layout("2x3"), Ok((2, 3)));
        assert!(parse_layout("2").is_err());
        assert!(parse_layout("0x1").is_err());
        assert!(parse_layout("1x9").is_err());
    }
}
