//! `qm all` under a 1,024-file limit (`ulimit -n 1024`), as an attacker on one address meets
//! it: 5,000 event streams are refused past SSE_PER_IP with 429 sse_per_ip_limit; 1,500 idle
//! connections held at once are shed (the default ceiling is derived from the limit) and the
//! process answers health as soon as they go; and with a ceiling set above the limit, accept
//! failing with EMFILE neither crashes nor spins the process. Bounded: a few seconds a phase.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use qm_tests::process::free_addr;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const ADMIN_KEY: &str = "fd-limit-test-admin-key";

struct Qm {
    child: Child,
    gateway: String,
    admin: String,
}

impl Drop for Qm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `qm all` with its open-file limit at 1,024 and `extra` settings; waits until it serves.
async fn start(extra: &[(&str, &str)]) -> Qm {
    let gateway = free_addr();
    let admin = free_addr();
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg("ulimit -n 1024 && exec \"$0\" all")
        .arg(env!("CARGO_BIN_EXE_qm"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOST", "127.0.0.1")
        .env("PORT", gateway.port().to_string())
        .env("ADMIN_PORT", admin.port().to_string())
        .env("ENGINE_ADDR", free_addr().to_string())
        .env("ADMIN_KEY", ADMIN_KEY)
        .env("SHUTDOWN_DRAIN_SEC", "1")
        .env("STREAM_OPEN_LIMIT_PER_MIN", "100000")
        .env("JOIN_LIMIT_PER_MIN", "100000")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (name, value) in extra {
        command.env(name, value);
    }
    let child = command.spawn().expect("qm starts");
    let qm = Qm {
        child,
        gateway: gateway.to_string(),
        admin: admin.to_string(),
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while get_status(&qm.gateway, "/healthz").await != Some(200) {
        assert!(tokio::time::Instant::now() < deadline, "qm did not serve");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    qm
}

/// The status of one GET on a fresh connection, `None` if nothing answered within 5 s.
async fn get_status(address: &str, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(address).await.ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    first_status(&mut stream).await
}

/// The status code of the first answer on `stream`.
async fn first_status(stream: &mut TcpStream) -> Option<u16> {
    let mut head = [0u8; 12];
    tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut head))
        .await
        .ok()?
        .ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// A visitor token for a new room on `qm`.
async fn token(qm: &Qm) -> String {
    let http = reqwest::Client::new();
    let room =
        json!({"id": "fd", "name": "fd", "targetUrl": "https://shop.example/", "ratePerMinute": 0});
    let created = http
        .post(format!("http://{}/api/admin/rooms", qm.admin))
        .bearer_auth(ADMIN_KEY)
        .json(&room)
        .send()
        .await
        .expect("admin answers");
    assert!(created.status().is_success(), "{}", created.status());
    let joined: serde_json::Value = http
        .post(format!("http://{}/api/join", qm.gateway))
        .json(&json!({"roomId": "fd"}))
        .send()
        .await
        .expect("gateway answers")
        .json()
        .await
        .expect("json");
    joined["token"].as_str().expect("a token").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_thousand_streams_from_one_address_under_a_1024_file_limit() {
    let qm = start(&[]).await;
    let token = token(&qm).await;
    let request = format!("GET /events?token={token} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");

    // 5,000 opens, 50 at a time; the ones let in are held open, the refused ones closed.
    let mut held = Vec::new();
    let (mut opened, mut per_ip, mut other) = (0, 0, Vec::new());
    for _ in 0..100 {
        let batch: Vec<_> = (0..50)
            .map(|_| {
                let address = qm.gateway.clone();
                let request = request.clone();
                tokio::spawn(async move {
                    let mut stream = TcpStream::connect(&address).await.ok()?;
                    stream.write_all(request.as_bytes()).await.ok()?;
                    let status = first_status(&mut stream).await?;
                    Some((status, stream))
                })
            })
            .collect();
        for task in batch {
            match task.await.ok().flatten() {
                Some((200, stream)) => {
                    opened += 1;
                    held.push(stream);
                }
                Some((429, _)) => per_ip += 1,
                outcome => other.push(outcome.map(|(status, _)| status)),
            }
        }
    }
    eprintln!("5,000 stream opens: {opened} open, {per_ip} refused 429, other {other:?}");
    assert_eq!(opened, 20, "SSE_PER_IP streams open");
    assert_eq!(per_ip, 4980, "the rest refused sse_per_ip_limit");
    assert_eq!(get_status(&qm.gateway, "/healthz").await, Some(200));

    // 1,500 idle connections at once: shed past the derived ceiling, never EMFILE.
    let mut idle = Vec::new();
    for _ in 0..1500 {
        if let Ok(stream) = TcpStream::connect(&qm.gateway).await {
            idle.push(stream);
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    drop(idle);
    drop(held);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(get_status(&qm.gateway, "/healthz").await, Some(200));
    assert_eq!(
        get_status(&qm.gateway, &format!("/api/status?token={token}")).await,
        Some(200)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_failing_with_emfile_neither_crashes_nor_spins() {
    // A ceiling above the file limit: the process runs out of descriptors before it sheds.
    let mut qm = start(&[("MAX_CONNECTIONS", "5000")]).await;
    let mut idle = Vec::new();
    for _ in 0..1500 {
        if let Ok(stream) = TcpStream::connect(&qm.gateway).await {
            idle.push(stream);
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        qm.child.try_wait().expect("wait").is_none(),
        "qm is still running"
    );
    drop(idle);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while get_status(&qm.gateway, "/healthz").await != Some(200) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "qm serves again once descriptors are free"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
