//! qm-bench: measured figures, each beside a ceiling measured in the same run on the same
//! machine, because these machines are shared and noisy: a ratio travels, a raw number does not.
//!
//! `qm-bench burst-join` — a burst of joins through HTTP on loopback against the real gateway,
//! engine (memory store) and admin, beside a bare hyper server answering the same client with
//! the same concurrency.

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
}

/// Latencies and throughput of one run.
struct Run {
    requests: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
    failures: usize,
}

impl Run {
    fn per_second(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }

    fn percentile(&self, fraction: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let index = ((self.latencies.len() as f64 - 1.0) * fraction).round() as usize;
        self.latencies[index]
    }
}

/// Sends `count` POSTs with `body` to `url`, `concurrency` at a time, timing each.
async fn drive(
    client: &reqwest::Client,
    url: &str,
    body: serde_json::Value,
    count: usize,
    concurrency: usize,
) -> Run {
    let started = Instant::now();
    let results: Vec<(Duration, bool)> = futures::stream::iter(0..count)
        .map(|_| {
            let request = client.post(url).json(&body);
            async move {
                let sent = Instant::now();
                let ok = match request.send().await {
                    Ok(response) => {
                        let ok = response.status().is_success();
                        ok && response.bytes().await.is_ok()
                    }
                    Err(_) => false,
                };
                (sent.elapsed(), ok)
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let elapsed = started.elapsed();
    let failures = results.iter().filter(|(_, ok)| !ok).count();
    let mut latencies: Vec<Duration> = results.into_iter().map(|(latency, _)| latency).collect();
    latencies.sort_unstable();
    Run {
        requests: count,
        elapsed,
        latencies,
        failures,
    }
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

async fn burst_join(joins: usize, concurrency: usize, store: &str) -> anyhow::Result<()> {
    if store != "memory" {
        anyhow::bail!("--store {store}: only the memory store is built so far");
    }
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

    let app = qm_tests::spawn_app().await;
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
    for (name, run) in [
        ("bare hyper server (ceiling)", &ceiling),
        ("POST /api/join (gateway+engine)", &burst),
    ] {
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
    }
}
