//! `qm healthcheck engine|gateway|admin`, the health check the container image runs: with the
//! process's own environment it exits 0 while that process is ready and 1, saying why, once it
//! is not. The admin process's `/livez` stays 200 through an engine outage (liveness), while its
//! `/healthz` turns 503 (readiness).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use qm_tests::process::{AdminProcess, EngineProcess, free_addr};
use qm_tests::test_env;

fn qm(env: &HashMap<String, String>, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_qm"));
    command
        .args(args)
        .env_clear()
        .envs(env)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .stdin(Stdio::null());
    command
}

fn healthcheck(env: &HashMap<String, String>, process: &str) -> Output {
    qm(env, &["healthcheck", process])
        .output()
        .expect("qm healthcheck runs")
}

/// A `qm gateway` child, killed when dropped.
struct Gateway(Child);

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn wait_until_ready(env: &HashMap<String, String>, process: &str) {
    for _ in 0..200 {
        if healthcheck(env, process).status.success() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let last = healthcheck(env, process);
    panic!(
        "qm healthcheck {process} never passed: {}",
        String::from_utf8_lossy(&last.stderr)
    );
}

#[tokio::test]
async fn healthcheck_follows_each_process_readiness() {
    let env = test_env();
    let engine_addr = free_addr();
    let mut engine = EngineProcess::start(env!("CARGO_BIN_EXE_qm"), &env, engine_addr).await;
    let admin_port = free_addr().port();
    let admin = AdminProcess::start(env!("CARGO_BIN_EXE_qm"), &env, engine_addr, admin_port).await;
    let gateway_addr: SocketAddr = free_addr();

    let mut edge_env = env.clone();
    edge_env.insert("ENGINE_ADDR".to_owned(), engine_addr.to_string());
    // The gateway and the admin listen on every address; the check reaches them on loopback.
    edge_env.insert("HOST".to_owned(), "0.0.0.0".to_owned());
    edge_env.insert("PORT".to_owned(), gateway_addr.port().to_string());
    edge_env.insert("ADMIN_HOST".to_owned(), "127.0.0.1".to_owned());
    edge_env.insert("ADMIN_PORT".to_owned(), admin_port.to_string());
    let _gateway = Gateway(
        qm(&edge_env, &["gateway"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("qm gateway starts"),
    );

    wait_until_ready(&edge_env, "gateway").await;
    for process in ["engine", "admin"] {
        let output = healthcheck(&edge_env, process);
        assert!(
            output.status.success(),
            "{process}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("the http client builds");
    let live = |http: reqwest::Client, url: String| async move {
        http.get(format!("{url}/livez"))
            .send()
            .await
            .expect("the admin process answers")
            .status()
    };
    assert_eq!(live(http.clone(), admin.url()).await, 200);

    engine.kill9();
    for process in ["engine", "gateway", "admin"] {
        let output = healthcheck(&edge_env, process);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{process}: {stderr}");
        assert!(stderr.contains("not ready"), "{process}: {stderr}");
    }
    let readiness = http
        .get(format!("{}/healthz", admin.url()))
        .send()
        .await
        .expect("the admin process answers");
    assert_eq!(readiness.status(), 503, "unready without its engine");
    assert_eq!(
        live(http.clone(), admin.url()).await,
        200,
        "alive without its engine"
    );

    engine.restart().await;
    wait_until_ready(&edge_env, "gateway").await;
    wait_until_ready(&edge_env, "admin").await;
}
