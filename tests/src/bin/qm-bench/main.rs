//! qm-bench: measured figures, each beside a ceiling measured in the same run on the same
//! machine, because these machines are shared and noisy: a ratio travels, a raw number does not.
//!
//! `qm-bench burst-join` — a burst of joins through HTTP on loopback against the real gateway,
//! engine and admin, beside a bare hyper server answering the same client with the same
//! concurrency. `--store valkey` runs the durable store on a private redis-server (AOF on,
//! appendfsync everysec, as production) and a fresh Postgres database, and also measures the
//! two ceilings a durable join stands on: raw Valkey round trips/s and Postgres rows/s in
//! batched inserts.
//!
//! `qm-bench contention` — two engines on one Valkey and one journal joining one room at full
//! speed, beside one engine alone (see `contention.rs`).
//!
//! `qm-bench inline` — an admitted visitor's requests through the inline gate, beside the same
//! origin hit directly (see `inline.rs`).
//!
//! `qm-bench status`, `check`, `join` — the visitor's hot paths driven by wrk, beside a bare
//! axum server answering a real join answer's bytes (see `visitor.rs`).
//!
//! `qm-bench sse` — idle event streams held open on one gateway process, beside a bare axum
//! server holding as many in a process of its own (see `sse.rs`).
//!
//! `qm-bench cluster` — status and join through several engine and gateway processes on the
//! durable store, beside the same ceiling, with each role's CPU per request (see `cluster.rs`).

mod cluster;
mod contention;
mod inline;
mod sse;
mod visitor;
mod wrk;

use std::convert::Infallible;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::{Parser, Subcommand};
use futures::StreamExt;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::json;

/// mimalloc: the request path allocates many small short-lived buffers, where glibc's
/// allocator showed as the largest cost in the join burst profile.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "qm-bench", about = "Queue Manager benchmarks")]
struct Cli {
    #[command(subcommand)]
    bench: Bench,
}

#[derive(Subcommand)]
enum Bench {
    /// A burst of joins through HTTP, beside a bare hyper server's requests/s.
    BurstJoin {
        /// Joins in the burst.
        #[arg(long, default_value_t = 10_000)]
        joins: usize,
        /// Requests in flight at once.
        #[arg(long, default_value_t = 256)]
        concurrency: usize,
        /// Store under test.
        #[arg(long, default_value = "memory")]
        store: String,
    },
    /// Two engines joining one room at full speed on the durable store, beside one engine
    /// alone: joins/s, p99, retries per join, and the line checked whole.
    Contention {
        /// Joins in each run.
        #[arg(long, default_value_t = 10_000)]
        joins: usize,
        /// Requests in flight at once (split between the two engines' gateways).
        #[arg(long, default_value_t = 256)]
        concurrency: usize,
    },
    /// An admitted visitor's GETs through the inline gate, beside the origin hit directly (wrk).
    Inline {
        /// Requests in flight at once (wrk's connections).
        #[arg(long, default_value_t = 64)]
        concurrency: usize,
        /// wrk's threads: 2 saturates the origin hit directly on a 2-core machine, 1 does not.
        #[arg(long, default_value_t = 2)]
        threads: usize,
        /// Seconds each measured run lasts.
        #[arg(long, default_value_t = 5)]
        seconds: u64,
        /// Rounds of the three runs, alternated.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Store under test.
        #[arg(long, default_value = "memory")]
        store: String,
    },
    /// A waiting visitor's GET /api/status at several positions in the line (wrk), beside a
    /// bare axum server.
    Status {
        #[command(flatten)]
        load: VisitorArgs,
        /// Positions in the line measured, comma-separated (the line is filled up to each).
        #[arg(long, value_delimiter = ',', default_value = "1,10000,100000,1000000")]
        positions: Vec<u64>,
    },
    /// The door check of a waiting token, a spent passed token and a door session (wrk),
    /// beside a bare axum server.
    Check {
        #[command(flatten)]
        load: VisitorArgs,
    },
    /// New visitors' joins on the memory store and the durable store (wrk), beside a bare axum
    /// server.
    Join {
        #[command(flatten)]
        load: VisitorArgs,
    },
    /// Idle event streams held open on one gateway process, beside a bare axum server holding
    /// as many: memory per stream, the time to open them all, heartbeats' lateness.
    Sse {
        /// Streams held open at once.
        #[arg(long, default_value_t = 18_000)]
        streams: usize,
        /// Seconds every stream is held after the last one opened, before the rest is measured.
        #[arg(long, default_value_t = 12)]
        idle_seconds: u64,
        /// Streams being opened at once (connect until the first frame).
        #[arg(long, default_value_t = 256)]
        opening: usize,
        /// The ceiling on hyper's HTTP/1 connection alone, with the gateway's own serving
        /// settings, instead of `axum::serve`.
        #[arg(long)]
        hyper_ceiling: bool,
    },
    /// Status and join through several engine and gateway processes on the durable store,
    /// beside a bare axum server driven by the same wrk processes; each role's CPU per request.
    Cluster(cluster::ClusterBench),
    /// The ceiling `sse` starts in a process of its own (prints its address).
    #[command(hide = true)]
    BareSse {
        /// hyper's HTTP/1 connection alone instead of `axum::serve`.
        #[arg(long)]
        hyper_http1: bool,
    },
}

/// The load of the visitor benches.
#[derive(clap::Args)]
struct VisitorArgs {
    /// Store under test (join measures both).
    #[arg(long, default_value = "memory")]
    store: String,
    /// wrk's threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Requests in flight at once (wrk's connections).
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Seconds each measured run lasts.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Rounds, each the ceiling then every measured path.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
}

impl From<VisitorArgs> for visitor::VisitorBench {
    fn from(args: VisitorArgs) -> Self {
        visitor::VisitorBench {
            store: args.store,
            threads: args.threads,
            concurrency: args.concurrency,
            seconds: args.seconds,
            rounds: args.rounds,
        }
    }
}

/// Latencies and throughput of one run.
struct Run {
    requests: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
    failures: usize,
}

impl Run {
    fn from_results(requests: usize, elapsed: Duration, results: Vec<(Duration, bool)>) -> Run {
        let failures = results.iter().filter(|(_, ok)| !ok).count();
        let mut latencies: Vec<Duration> =
            results.into_iter().map(|(latency, _)| latency).collect();
        latencies.sort_unstable();
        Run {
            requests,
            elapsed,
            latencies,
            failures,
        }
    }

    fn per_second(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }

    fn percentile(&self, fraction: f64) -> Duration {
        percentile(&self.latencies, fraction)
    }
}

/// The `fraction` percentile of durations sorted ascending (zero when there are none).
fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 - 1.0) * fraction).round() as usize]
}

/// Sends `count` POSTs with `body` to `url`, `concurrency` at a time, timing each.
async fn drive(
    client: &reqwest::Client,
    url: &str,
    body: serde_json::Value,
    count: usize,
    concurrency: usize,
) -> Run {
    drive_with(
        count,
        concurrency,
        || client.post(url).json(&body),
        |status, _| status.is_success(),
    )
    .await
}

/// Sends `count` requests made by `request`, `concurrency` at a time, timing each; one counts
/// as answered when `answered` accepts its status and whole body.
async fn drive_with(
    count: usize,
    concurrency: usize,
    request: impl Fn() -> reqwest::RequestBuilder,
    answered: fn(reqwest::StatusCode, &[u8]) -> bool,
) -> Run {
    let started = Instant::now();
    let results: Vec<(Duration, bool)> = futures::stream::iter(0..count)
        .map(|_| {
            let request = request();
            async move {
                let sent = Instant::now();
                let ok = match request.send().await {
                    Ok(response) => {
                        let status = response.status();
                        response
                            .bytes()
                            .await
                            .is_ok_and(|body| answered(status, &body))
                    }
                    Err(_) => false,
                };
                (sent.elapsed(), ok)
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    Run::from_results(count, started.elapsed(), results)
}

/// The ceiling: a bare hyper HTTP/1.1 server that answers every request with a small JSON body.
async fn bare_server() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let service = service_fn(|_request| async {
                    let body =
                        r#"{"token":"x","position":1,"ahead":0,"etaSec":1,"state":"active"}"#;
                    Ok::<_, Infallible>(
                        hyper::Response::builder()
                            .header("content-type", "application/json")
                            .body(Full::new(Bytes::from_static(body.as_bytes())))
                            .expect("static response"),
                    )
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    format!("http://{addr}/")
}

fn client(concurrency: usize) -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency)
        .tcp_nodelay(true)
        .timeout(Duration::from_secs(30))
        .build()
        .expect("http client builds")
}

/// Raw Valkey round trips/s: PING, `concurrency` in flight, through one pipelined client.
async fn valkey_round_trips(url: &str, count: usize, concurrency: usize) -> anyhow::Result<Run> {
    use fred::prelude::*;
    let client = Builder::from_config(Config::from_url(url)?).build()?;
    client.init().await?;
    let started = Instant::now();
    let results: Vec<(Duration, bool)> = futures::stream::iter(0..count)
        .map(|_| {
            let client = client.clone();
            async move {
                let sent = Instant::now();
                let ok = client.ping::<String>(None).await.is_ok();
                (sent.elapsed(), ok)
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    Ok(Run::from_results(count, started.elapsed(), results))
}

/// Postgres rows/s in batched inserts: one transaction of `batch` rows per round trip, as
/// the journal's group commit writes them, from `concurrency` connections at once.
async fn postgres_batched_inserts(
    url: &str,
    rows: usize,
    batch: usize,
    connections: usize,
) -> anyhow::Result<Run> {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(connections as u32)
        .connect(url)
        .await?;
    sqlx::query(
        "CREATE TABLE bench_events (room_id text, seq bigint, at_ms bigint, payload jsonb, \
         PRIMARY KEY (room_id, seq))",
    )
    .execute(&pool)
    .await?;
    let payload = json!({"type": "joined", "ticket": 1, "sessionHash": "0".repeat(64), "identity": "127.0.0.1"});
    let started = Instant::now();
    let batches = rows.div_ceil(batch);
    let results: Vec<(Duration, bool)> = futures::stream::iter(0..batches)
        .map(|index| {
            let pool = pool.clone();
            let payload = payload.clone();
            async move {
                let sent = Instant::now();
                let seqs: Vec<i64> = (0..batch as i64).map(|n| (index * batch) as i64 + n).collect();
                let rooms = vec!["bench"; batch];
                let ats = vec![0i64; batch];
                let payloads = vec![payload; batch];
                let ok = async {
                    let mut transaction = pool.begin().await?;
                    sqlx::query(
                        "INSERT INTO bench_events SELECT * FROM UNNEST($1::text[], $2::bigint[], $3::bigint[], $4::jsonb[])",
                    )
                    .bind(&rooms)
                    .bind(&seqs)
                    .bind(&ats)
                    .bind(&payloads)
                    .execute(&mut *transaction)
                    .await?;
                    transaction.commit().await
                }
                .await
                .is_ok();
                (sent.elapsed(), ok)
            }
        })
        .buffer_unordered(connections)
        .collect()
        .await;
    let elapsed = started.elapsed();
    let mut run = Run::from_results(batches, elapsed, results);
    // The figure is rows/s: each request carried `batch` rows.
    run.requests = batches * batch;
    Ok(run)
}

async fn burst_join(joins: usize, concurrency: usize, store: &str) -> anyhow::Result<()> {
    let backing = match store {
        "memory" => None,
        "valkey" => {
            Some(qm_tests::Backing::start(qm_tests::servers::ValkeyOptions { aof: true }).await)
        }
        other => anyhow::bail!("--store {other}: use memory or valkey"),
    };
    let client = client(concurrency);

    // Warm both paths (connections, allocators) before measuring.
    let bare_url = bare_server().await;
    drive(&client, &bare_url, json!({}), concurrency * 4, concurrency).await;
    // The bare server answers in a fraction of the burst's time: give it more requests so its
    // figure is not a tenth of a second of noise.
    let ceiling = drive(
        &client,
        &bare_url,
        json!({}),
        joins.max(50_000),
        concurrency,
    )
    .await;

    let mut durable_ceilings = Vec::new();
    if let Some(backing) = &backing {
        let valkey =
            valkey_round_trips(&backing.valkey.url(), joins.max(50_000), concurrency).await?;
        let postgres =
            postgres_batched_inserts(&backing.database.url(), joins.max(50_000), 256, 4).await?;
        durable_ceilings.push(("raw Valkey round trips (PING)", valkey));
        durable_ceilings.push(("Postgres rows in 256-row batches", postgres));
    }

    let app = qm_tests::spawn_app_on(backing, &[]).await;
    app.create_room(qm_tests::room_body("warm", 0, json!({})))
        .await;
    app.create_room(qm_tests::room_body("bench", 0, json!({})))
        .await;
    let join_url = format!("{}/api/join", app.gateway);
    drive(
        &client,
        &join_url,
        json!({ "roomId": "warm" }),
        concurrency * 4,
        concurrency,
    )
    .await;
    let burst = drive(
        &client,
        &join_url,
        json!({ "roomId": "bench" }),
        joins,
        concurrency,
    )
    .await;
    let waiting = app.room("bench").await["waiting"].as_u64().unwrap_or(0);
    app.stop().await;

    let ratio = burst.per_second() / ceiling.per_second();
    println!(
        "qm-bench burst-join  store={store} joins={joins} concurrency={concurrency} cores={}",
        num_cpus()
    );
    println!(
        "{:<34} {:>12} {:>10} {:>10} {:>9}",
        "run", "requests/s", "p50 ms", "p99 ms", "failures"
    );
    let mut runs = vec![("bare hyper server (ceiling)", &ceiling)];
    runs.extend(durable_ceilings.iter().map(|(name, run)| (*name, run)));
    runs.push(("POST /api/join (gateway+engine)", &burst));
    for (name, run) in runs {
        println!(
            "{:<34} {:>12.0} {:>10.2} {:>10.2} {:>9}",
            name,
            run.per_second(),
            run.percentile(0.50).as_secs_f64() * 1000.0,
            run.percentile(0.99).as_secs_f64() * 1000.0,
            run.failures
        );
    }
    println!(
        "joins/s as a share of the ceiling: {:.1} %   (tickets in the line afterwards: {waiting})",
        ratio * 100.0
    );
    let report = json!({
        "bench": "burst-join",
        "store": store,
        "joins": joins,
        "concurrency": concurrency,
        "ceiling_rps": ceiling.per_second().round(),
        "joins_per_sec": burst.per_second().round(),
        "p50_ms": burst.percentile(0.50).as_secs_f64() * 1000.0,
        "p99_ms": burst.percentile(0.99).as_secs_f64() * 1000.0,
        "failures": burst.failures,
        "ratio_to_ceiling": (ratio * 1000.0).round() / 1000.0,
        "durable_ceilings": durable_ceilings.iter().map(|(name, run)| json!({
            "run": name,
            "per_sec": run.per_second().round(),
            "ratio_of_joins": ((burst.per_second() / run.per_second()) * 1000.0).round() / 1000.0,
        })).collect::<Vec<_>>(),
        "waiting_after": waiting,
    });
    println!("{report}");
    if burst.failures > 0 || waiting != joins as u64 {
        anyhow::bail!(
            "{} joins failed, {waiting} of {joins} in the line",
            burst.failures
        );
    }
    Ok(())
}

fn num_cpus() -> usize {
    std::thread::available_parallelism()
        .map(usize::from)
        .unwrap_or(1)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().bench {
        Bench::BurstJoin {
            joins,
            concurrency,
            store,
        } => burst_join(joins, concurrency, &store).await,
        Bench::Contention { joins, concurrency } => {
            contention::contention(joins, concurrency).await
        }
        Bench::Inline {
            concurrency,
            threads,
            seconds,
            rounds,
            store,
        } => {
            inline::inline(inline::InlineBench {
                store,
                concurrency,
                threads,
                seconds,
                rounds,
            })
            .await
        }
        Bench::Status { load, positions } => visitor::status(load.into(), positions).await,
        Bench::Check { load } => visitor::check(load.into()).await,
        Bench::Join { load } => visitor::join(load.into()).await,
        Bench::Sse {
            streams,
            idle_seconds,
            opening,
            hyper_ceiling,
        } => {
            sse::sse(sse::SseBench {
                streams,
                idle_seconds,
                opening,
                hyper_ceiling,
            })
            .await
        }
        Bench::Cluster(bench) => cluster::cluster(bench).await,
        Bench::BareSse { hyper_http1 } => sse::bare_sse_server(hyper_http1).await,
    }
}
