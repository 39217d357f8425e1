//! The `qm` binary as an operator runs it: `qm all` starts the three components, reports its
//! addresses, serves, and stops cleanly on SIGTERM (open streams end, the process exits 0 within
//! the drain bound); a bad setting stops start-up with a message naming the variable; the log
//! never carries a token or a key.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

const ADMIN_KEY: &str = "process-test-admin-key";

struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
    log: Vec<String>,
}

impl Running {
    fn start() -> Running {
        let mut child = Command::new(env!("CARGO_BIN_EXE_qm"))
            .arg("all")
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("PORT", "0")
            .env("ADMIN_PORT", "0")
            .env("ENGINE_ADDR", "127.0.0.1:0")
            .env("ADMIN_KEY", ADMIN_KEY)
            .env("HOST", "127.0.0.1")
            .env("SHUTDOWN_DRAIN_SEC", "3")
            .env("LOG_FORMAT", "json")
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("qm starts");
        let stderr = child.stderr.take().expect("stderr piped");
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Running {
            child,
            lines,
            log: Vec::new(),
        }
    }

    /// Waits for the log line whose message is `message` and returns its `addr` field.
    fn address(&mut self, message: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            let Ok(line) = self.lines.recv_timeout(Duration::from_millis(200)) else {
                continue;
            };
            self.log.push(line.clone());
            let Ok(value) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if value["fields"]["message"] == message {
                return value["fields"]["addr"]
                    .as_str()
                    .expect("addr field")
                    .to_owned();
            }
        }
        panic!("no '{message}' line; log so far: {:#?}", self.log);
    }

    fn drain_log(&mut self) {
        while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(300)) {
            self.log.push(line);
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

#[tokio::test]
async fn qm_all_serves_and_stops_cleanly_on_sigterm() {
    let mut qm = Running::start();
    let gateway = format!("http://{}", qm.address("gateway listening (http)"));
    let admin = format!("http://{}", qm.address("admin listening (http)"));
    let http = reqwest::Client::new();

    let mut ready = false;
    for _ in 0..100 {
        let gateway_ok = http
            .get(format!("{gateway}/healthz"))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200);
        let admin_ok = http
            .get(format!("{admin}/healthz"))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200);
        if gateway_ok && admin_ok {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ready, "qm all becomes ready");

    let room = serde_json::json!({ "id": "proc", "name": "Proc", "targetUrl": "https://shop.example/", "ratePerMinute": 0 });
    let created = http
        .post(format!("{admin}/api/admin/rooms"))
        .bearer_auth(ADMIN_KEY)
        .json(&room)
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 200);
    let join: Value = http
        .post(format!("{gateway}/api/join"))
        .json(&serde_json::json!({ "roomId": "proc" }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = join["token"].as_str().expect("token").to_owned();
    let mut stream = http
        .get(format!("{gateway}/events"))
        .query(&[("token", &token)])
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    assert!(
        stream.chunk().await.unwrap().is_some(),
        "first frame arrives"
    );

    let sent_at = Instant::now();
    let killed = Command::new("kill")
        .arg("-TERM")
        .arg(qm.child.id().to_string())
        .status()
        .unwrap();
    assert!(killed.success());
    // The open stream ends (no hang), and the process exits 0 within the drain bound.
    let ended = tokio::time::timeout(Duration::from_secs(6), async {
        while let Ok(Some(_)) = stream.chunk().await {}
    })
    .await;
    assert!(ended.is_ok(), "the event stream ends on shutdown");
    let status = loop {
        if let Some(status) = qm.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            sent_at.elapsed() < Duration::from_secs(8),
            "qm exits within the drain bound"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "clean exit: {status:?}");

    qm.drain_log();
    let log = qm.log.join("\n");
    assert!(!log.contains(&token), "the log never contains a token");
    assert!(!log.contains(ADMIN_KEY), "the log never contains a key");
    assert!(log.contains("shutdown signal received"), "{log}");
}

#[test]
fn a_bad_setting_stops_start_up_naming_the_variable() {
    for (var, value) in [
        ("PORT", "eighty"),
        ("TOKEN_MAX_AGE_SEC", "5"),
        ("HOST", "0.0.0.0"),
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_qm"))
            .env_clear()
            .env(var, value)
            .output()
            .expect("qm runs");
        assert_eq!(output.status.code(), Some(2), "{var}={value}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(var), "{var}={value}: {stderr}");
    }
}

/// Runs `qm <target>` with only `env` set and checks it refuses to start, naming `named`.
fn refuses_to_start(target: &str, env: &[(&str, &str)], named: &str) {
    let output = Command::new(env!("CARGO_BIN_EXE_qm"))
        .arg(target)
        .env_clear()
        .envs(env.iter().copied())
        .output()
        .expect("qm runs");
    assert_eq!(output.status.code(), Some(2), "qm {target}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(named), "qm {target}: {stderr}");
}

#[test]
fn an_engine_credential_no_other_process_can_share_stops_start_up() {
    // An engine port beyond loopback with a credential derived from a random per-boot SECRET:
    // open to the network, yet no gateway could ever authenticate to it.
    refuses_to_start("engine", &[("ENGINE_ADDR", "0.0.0.0:0")], "ENGINE_ADDR");
    // A lone edge on loopback: its credential would differ from its engine's.
    refuses_to_start("gateway", &[("HOST", "127.0.0.1"), ("PORT", "0")], "SECRET");
}
