//! `qm-bench inline`: requests/s of an admitted visitor through the inline gate (the door check,
//! remembered for up to a second per door-session key, then the pooled forward to the origin), beside the same origin hit directly by
//! the same client with the same concurrency, and beside a bare forwarding proxy (hyper-util's
//! pooled client, no door check, no header work) in front of the same origin: the share of the
//! direct figure that forwarding alone costs on this machine. The origin is the test origin's
//! `/hello`.

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use qm_tests::origin::TestOrigin;
use reqwest::header::{COOKIE, HOST};
use serde_json::json;

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

pub(crate) async fn inline(requests: usize, concurrency: usize, store: &str) -> anyhow::Result<()> {
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
    // Warm both paths (connections, pools, allocators) before measuring.
    drive_get(&http, &direct_url, &[], concurrency * 4, concurrency).await;
    drive_get(&http, &proxy_url, &[], concurrency * 4, concurrency).await;
    drive_get(
        &http,
        &gate_url,
        &gate_headers,
        concurrency * 4,
        concurrency,
    )
    .await;
    // Alternate, twice each, so a noisy moment on the shared machine hits both sides.
    let mut direct = Vec::new();
    let mut proxied = Vec::new();
    let mut gated = Vec::new();
    for _ in 0..2 {
        direct.push(drive_get(&http, &direct_url, &[], requests, concurrency).await);
        proxied.push(drive_get(&http, &proxy_url, &[], requests, concurrency).await);
        gated.push(drive_get(&http, &gate_url, &gate_headers, requests, concurrency).await);
    }
    app.stop().await;

    println!(
        "qm-bench inline  store={store} requests={requests} concurrency={concurrency} cores={}",
        num_cpus()
    );
    println!(
        "{:<34} {:>12} {:>10} {:>10} {:>9}",
        "run", "requests/s", "p50 ms", "p99 ms", "failures"
    );
    let rounds = direct.iter().zip(&proxied).zip(&gated).enumerate();
    for (index, ((direct, proxied), gated)) in rounds {
        for (name, run) in [
            ("origin direct", direct),
            ("bare forwarding proxy", proxied),
            ("through the inline gate", gated),
        ] {
            println!(
                "{:<34} {:>12.0} {:>10.2} {:>10.2} {:>9}",
                format!("{name} #{}", index + 1),
                run.per_second(),
                run.percentile(0.50).as_secs_f64() * 1000.0,
                run.percentile(0.99).as_secs_f64() * 1000.0,
                run.failures
            );
        }
    }
    let best = |runs: &[Run]| runs.iter().map(Run::per_second).fold(0.0, f64::max);
    let ratio = best(&gated) / best(&direct);
    let proxy_ratio = best(&proxied) / best(&direct);
    println!(
        "gated ÷ direct (best of each): {ratio:.2}   bare proxy ÷ direct: {proxy_ratio:.2}   gated ÷ bare proxy: {:.2}",
        best(&gated) / best(&proxied)
    );
    let report = json!({
        "bench": "inline",
        "store": store,
        "requests": requests,
        "concurrency": concurrency,
        "direct_rps": direct.iter().map(|run| run.per_second().round()).collect::<Vec<_>>(),
        "bare_proxy_rps": proxied.iter().map(|run| run.per_second().round()).collect::<Vec<_>>(),
        "gated_rps": gated.iter().map(|run| run.per_second().round()).collect::<Vec<_>>(),
        "gated_p99_ms": gated.iter().map(|run| run.percentile(0.99).as_secs_f64() * 1000.0).collect::<Vec<_>>(),
        "ratio": (ratio * 1000.0).round() / 1000.0,
        "bare_proxy_ratio": (proxy_ratio * 1000.0).round() / 1000.0,
    });
    println!("{report}");
    let failures: usize = direct
        .iter()
        .chain(&proxied)
        .chain(&gated)
        .map(|run| run.failures)
        .sum();
    anyhow::ensure!(failures == 0, "{failures} requests failed");
    Ok(())
}
