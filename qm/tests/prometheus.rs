//! A real Prometheus scraping a running `qm all`: the admin process's `/metrics` with a monitor
//! token, the gateway's private listener without one. Through Prometheus's own HTTP API the test
//! asserts both scrapes are up and that a room's waiting gauge follows the joins; `promtool
//! check metrics` passes on both expositions. Needs Debian's `prometheus` (`.ci/run` installs it).

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use qm_tests::process::free_addr;
use qm_tests::prometheus::{PrometheusServer, promtool_check};
use serde_json::{Value, json};

const ADMIN_KEY: &str = "prometheus-test-admin-key";
const ROOM: &str = "launch";
const LIMIT: Duration = Duration::from_secs(40);

/// `qm all` as a child process, killed when dropped.
struct QmAll {
    child: Child,
    gateway: SocketAddr,
    admin: SocketAddr,
    metrics: SocketAddr,
}

impl QmAll {
    fn start() -> QmAll {
        let (gateway, admin, metrics, engine) =
            (free_addr(), free_addr(), free_addr(), free_addr());
        let child = Command::new(env!("CARGO_BIN_EXE_qm"))
            .arg("all")
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOST", "127.0.0.1")
            .env("PORT", gateway.port().to_string())
            .env("ADMIN_PORT", admin.port().to_string())
            .env("ENGINE_ADDR", engine.to_string())
            .env("GATEWAY_METRICS_ADDR", metrics.to_string())
            .env("ADMIN_KEY", ADMIN_KEY)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("qm all starts");
        QmAll {
            child,
            gateway,
            admin,
            metrics,
        }
    }
}

impl Drop for QmAll {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn wait_healthy(client: &reqwest::Client, url: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while tokio::time::Instant::now() < deadline {
        if let Ok(response) = client.get(url).send().await
            && response.status() == 200
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{url} never answered 200");
}

async fn admin_post(client: &reqwest::Client, qm: &QmAll, path: &str, body: Value) -> Value {
    let response = client
        .post(format!("http://{}/api/admin{path}", qm.admin))
        .bearer_auth(ADMIN_KEY)
        .json(&body)
        .send()
        .await
        .expect("the admin process answers");
    assert_eq!(response.status(), 200, "POST {path}");
    response.json().await.expect("JSON")
}

async fn join(client: &reqwest::Client, qm: &QmAll, visitors: usize) {
    for _ in 0..visitors {
        let response = client
            .post(format!("http://{}/api/join", qm.gateway))
            .json(&json!({ "roomId": ROOM }))
            .send()
            .await
            .expect("the gateway answers");
        assert_eq!(response.status(), 200, "join");
    }
}

async fn text(request: reqwest::RequestBuilder) -> String {
    let response = request.send().await.expect("answers");
    assert_eq!(response.status(), 200);
    response.text().await.expect("text")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_qm_all_and_the_waiting_gauge_follows_joins() {
    tokio::time::timeout(LIMIT, async {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .expect("the http client builds");
        let qm = QmAll::start();
        wait_healthy(&client, &format!("http://{}/healthz", qm.admin)).await;
        wait_healthy(&client, &format!("http://{}/healthz", qm.gateway)).await;
        let minted = admin_post(&client, &qm, "/monitor-token", json!({ "label": "prometheus" })).await;
        let token = minted["token"].as_str().expect("a monitor token").to_owned();
        admin_post(
            &client,
            &qm,
            "/rooms",
            json!({ "id": ROOM, "name": "Launch", "targetUrl": "https://shop.example/launch",
                    "ratePerMinute": 0 }),
        )
        .await;

        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
             scrape_configs:\n\
             \x20 - job_name: qm-admin\n\
             \x20   authorization:\n\
             \x20     credentials: {token}\n\
             \x20   static_configs:\n\
             \x20     - targets: ['{admin}']\n\
             \x20 - job_name: qm-gateway\n\
             \x20   static_configs:\n\
             \x20     - targets: ['{metrics}']\n",
            admin = qm.admin,
            metrics = qm.metrics,
        );
        let prometheus = PrometheusServer::start(&config).await;
        let scrape_limit = Duration::from_secs(15);
        prometheus
            .wait_for("up{job=\"qm-admin\"}", 1.0, scrape_limit)
            .await;
        prometheus
            .wait_for("up{job=\"qm-gateway\"}", 1.0, scrape_limit)
            .await;
        let waiting = format!("qm_room_waiting{{job=\"qm-admin\",room=\"{ROOM}\"}}");
        prometheus.wait_for(&waiting, 0.0, scrape_limit).await;

        join(&client, &qm, 5).await;
        prometheus.wait_for(&waiting, 5.0, scrape_limit).await;
        join(&client, &qm, 3).await;
        prometheus.wait_for(&waiting, 8.0, scrape_limit).await;
        prometheus
            .wait_for(
                "sum(qm_gateway_http_requests_total{job=\"qm-gateway\",route=\"/api/join\",code=\"200\"})",
                8.0,
                scrape_limit,
            )
            .await;

        let admin_exposition = text(
            client
                .get(format!("http://{}/metrics", qm.admin))
                .bearer_auth(&token),
        )
        .await;
        promtool_check(&admin_exposition);
        let gateway_exposition = text(client.get(format!("http://{}/metrics", qm.metrics))).await;
        promtool_check(&gateway_exposition);
    })
    .await
    .expect("the scrape test finishes within its limit");
}
