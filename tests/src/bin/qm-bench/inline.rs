//! `qm-bench inline`: requests/s of an admitted visitor through the inline gate (the door check,
//! remembered for up to a second per door-session key, then the forward to the origin), beside
//! the same origin hit directly, and beside a bare forwarding proxy (hyper-util's pooled client,
//! no door check, no header work) in front of the same origin: the share of the direct figure
//! that forwarding alone costs on this machine. The origin is the test origin's `/hello`; the
//! load generator is wrk, a separate process able to saturate the origin hit directly.

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use qm_tests::origin::TestOrigin;
use reqwest::header::{COOKIE, HOST};
use serde_json::json;

use crate::wrk::{self, WrkLoad, WrkRun};
use crate::{Run, client, drive_with, num_cpus};

const HOST_NAME: &str = "shop.bench";
const ROOM: &str = "bench";

/// Sends `count` GETs to `url` with `headers`, `concurrency` at a time, timing each. A request
/// counts as failed unless it answers 200 with the origin's body.
async fn drive_get(
    client: &reqwest::Client,
    url: &str,
    headers: &[(reqwest::header::HeaderName, String)],
    count: usize,
    concurrency: usize,
) -> Run {
    let request = || {
        headers
            .iter()
            .fold(client.get(url), |request, (name, value)| {
                request.header(name, value)
            })
    };
    drive_with(count, concurrency, request, |status, body| {
        status == 200 && body == b"hello"
    })
    .await
}

/// A bare forwarding proxy to `origin`: what hyper-util's pooled client costs by itself.
async fn bare_proxy(origin: String) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let addr = listener.local_addr().expect("address");
    let client: Client<HttpConnector, hyper::body::Incoming> =
        Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            let client = client.clone();
            let origin = origin.clone();
            tokio::spawn(async move {
                let service =
                    service_fn(move |mut request: hyper::Request<hyper::body::Incoming>| {
                        let client = client.clone();
                        let path = request
                            .uri()
                            .path_and_query()
                            .map_or("/".to_owned(), |path| path.as_str().to_owned());
                        if let Ok(uri) = format!("{origin}{path}").parse() {
                            *request.uri_mut() = uri;
                        }
                        request.headers_mut().remove(http::header::HOST);
                        async move { client.request(request).await }
                    });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    format!("http://{addr}")
}

/// The settings of one `qm-bench inline` invocation.
pub(crate) struct InlineBench {
    pub(crate) store: String,
    pub(crate) concurrency: usize,
    pub(crate) threads: usize,
    pub(crate) seconds: u64,
    pub(crate) rounds: usize,
}

/// The median of `values` (0 when empty); the benches' figure across rounds.
pub(crate) fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => 0.0,
        len if len % 2 == 1 => sorted[len / 2],
        len => (sorted[len / 2 - 1] + sorted[len / 2]) / 2.0,
    }
}

pub(crate) async fn inline(bench: InlineBench) -> anyhow::Result<()> {
    let InlineBench {
        store,
        concurrency,
        threads,
        seconds,
        rounds,
    } = bench;
    let store = store.as_str();
    wrk::require()?;
    let backing = match store {
        "memory" => None,
        "valkey" => {
            Some(qm_tests::Backing::start(qm_tests::servers::ValkeyOptions { aof: true }).await)
        }
        other => anyhow::bail!("--store {other}: use memory or valkey"),
    };
    let origin = TestOrigin::start().await;
    let app = qm_tests::spawn_app_on(backing, &[("INLINE_HOSTS", "shop.bench=bench")]).await;
    app.create_room(qm_tests::room_body(
        ROOM,
        0,
        json!({ "proxyOrigin": origin.url }),
    ))
    .await;
    let http = client(concurrency);
    let joined = app
        .send(
            http.post(format!("{}/__qm/api/join", app.gateway))
                .header(HOST, HOST_NAME)
                .json(&json!({ "roomId": ROOM })),
        )
        .await;
    let cookie = format!(
        "qm_{ROOM}={}; qms_{ROOM}={}",
        joined.cookie(&format!("qm_{ROOM}")).unwrap_or_default(),
        joined.cookie(&format!("qms_{ROOM}")).unwrap_or_default()
    );
    let flushed = app
        .admin_post(&format!("/rooms/{ROOM}/flush"), json!({ "count": 1 }))
        .await;
    anyhow::ensure!(flushed.status == 200, "flush: {}", flushed.text);

    let direct_url = format!("{}/hello", origin.url);
    let proxy_url = format!("{}/hello", bare_proxy(origin.url.clone()).await);
    let gate_url = format!("{}/hello", app.gateway);
    // The first page opens the visitor's door session; like a browser, every later request
    // carries its key (`qm_dk_`) beside the queue's cookies.
    let first = app
        .send(
            http.get(format!("{}/hello", app.gateway))
                .header(HOST, HOST_NAME)
                .header(COOKIE, &cookie),
        )
        .await;
    let door_key = first
        .cookie(&format!("qm_dk_{ROOM}"))
        .ok_or_else(|| anyhow::anyhow!("the first page opens a door session: {}", first.text))?;
    let cookie = format!("{cookie}; qm_dk_{ROOM}={door_key}");
    let gate_headers = [(HOST, HOST_NAME.to_owned()), (COOKIE, cookie)];
    // Every path must answer 200 `hello` before it is measured (wrk counts statuses only);
    // this also warms connections, pools and allocators.
    for (url, headers) in [
        (&direct_url, &[][..]),
        (&proxy_url, &[][..]),
        (&gate_url, &gate_headers[..]),
    ] {
        let warm = drive_get(&http, url, headers, concurrency * 4, concurrency).await;
        anyhow::ensure!(
            warm.failures == 0,
            "{url}: {} of {} warm-up requests did not answer 200 hello",
            warm.failures,
            concurrency * 4
        );
    }
    // wrk replaces its own Host header only when given one spelled `Host`; a lower-case name
    // would send two, and the first (the gateway's address) names no inline host.
    let gate_wrk_headers = [
        format!("Host: {HOST_NAME}"),
        format!("Cookie: {}", gate_headers[1].1),
    ];
    let load = WrkLoad {
        threads,
        connections: concurrency,
        seconds,
    };
    // Alternate, so a noisy moment on the shared machine hits all three.
    let mut direct = Vec::new();
    let mut proxied = Vec::new();
    let mut gated = Vec::new();
    for _ in 0..rounds {
        direct.push(wrk::run(&direct_url, &[], load).await?);
        proxied.push(wrk::run(&proxy_url, &[], load).await?);
        gated.push(wrk::run(&gate_url, &gate_wrk_headers, load).await?);
    }
    // A run with failures says what they were, and what one request answers now.
    for (url, headers, runs) in [
        (&direct_url, &[][..], &direct),
        (&proxy_url, &[][..], &proxied),
        (&gate_url, &gate_headers[..], &gated),
    ] {
        for run in runs.iter().filter(|run| run.failures > 0) {
            eprint!("{url}: {}", run.failure_lines);
        }
        if runs.iter().any(|run| run.failures > 0) {
            let request = headers
                .iter()
                .fold(http.get(url.as_str()), |request, (name, value)| {
                    request.header(name, value)
                });
            match request.send().await {
                Ok(answer) => {
                    let status = answer.status();
                    let body = answer.text().await.unwrap_or_default();
                    eprintln!("{url}: one request now answers {status}: {body:.200}");
                }
                Err(error) => eprintln!("{url}: one request now fails: {error}"),
            }
        }
    }
    app.stop().await;

    println!(
        "qm-bench inline  store={store} wrk -t{threads} -c{concurrency} -d{seconds}s rounds={rounds} cores={}",
        num_cpus()
    );
    println!(
        "{:<34} {:>12} {:>10} {:>10} {:>9}",
        "run", "requests/s", "p50 ms", "p99 ms", "failures"
    );
    let rows = direct.iter().zip(&proxied).zip(&gated).enumerate();
    for (index, ((direct, proxied), gated)) in rows {
        for (name, run) in [
            ("origin direct", direct),
            ("bare forwarding proxy", proxied),
            ("through the inline gate", gated),
        ] {
            println!(
                "{:<34} {:>12.0} {:>10.2} {:>10.2} {:>9}",
                format!("{name} #{}", index + 1),
                run.per_second,
                run.p50_ms,
                run.p99_ms,
                run.failures
            );
        }
    }
    let per_round = |runs: &[WrkRun], over: &[WrkRun]| -> Vec<f64> {
        runs.iter()
            .zip(over)
            .map(|(run, base)| (run.per_second / base.per_second * 1000.0).round() / 1000.0)
            .collect()
    };
    let gated_over_direct = per_round(&gated, &direct);
    let proxy_over_direct = per_round(&proxied, &direct);
    let gated_over_proxy = per_round(&gated, &proxied);
    println!(
        "per round: gated ÷ direct {gated_over_direct:?}   bare proxy ÷ direct {proxy_over_direct:?}   gated ÷ bare proxy {gated_over_proxy:?}"
    );
    println!(
        "median: gated ÷ direct {:.2}   bare proxy ÷ direct {:.2}   gated ÷ bare proxy {:.2}",
        median(&gated_over_direct),
        median(&proxy_over_direct),
        median(&gated_over_proxy)
    );
    let rates = |runs: &[WrkRun]| {
        runs.iter()
            .map(|run| run.per_second.round())
            .collect::<Vec<_>>()
    };
    let report = json!({
        "bench": "inline",
        "store": store,
        "load": format!("wrk -t{threads} -c{concurrency} -d{seconds}s"),
        "direct_rps": rates(&direct),
        "bare_proxy_rps": rates(&proxied),
        "gated_rps": rates(&gated),
        "gated_p99_ms": gated.iter().map(|run| run.p99_ms).collect::<Vec<_>>(),
        "gated_over_direct": gated_over_direct,
        "bare_proxy_over_direct": proxy_over_direct,
        "gated_over_bare_proxy": gated_over_proxy,
    });
    println!("{report}");
    let failures: u64 = direct
        .iter()
        .chain(&proxied)
        .chain(&gated)
        .map(|run| run.failures)
        .sum();
    anyhow::ensure!(failures == 0, "{failures} requests failed");
    Ok(())
}
