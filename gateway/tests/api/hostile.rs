//! A hostile client over raw TCP: stuffed cookie headers, slow and silent connections, idle
//! keep-alives, over-long URLs, malformed heads, two Host headers and more connections than the
//! ceiling. Every refusal must carry the `{error, code}` envelope; the server's CPU per stuffed
//! request is measured from the process's own accounting.

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::harness::{TestGateway, spawn_gateway};

/// One raw answer: the status, the head as text and the body parsed as JSON (Null if not).
#[derive(Debug)]
struct RawReply {
    status: u16,
    head: String,
    body: Value,
}

fn address(gateway: &TestGateway) -> String {
    gateway.url.trim_start_matches("http://").to_owned()
}

/// Reads one answer until the server closes (or `wait` passes); `None` if nothing came back.
async fn read_reply(stream: &mut TcpStream, wait: Duration) -> Option<RawReply> {
    let mut bytes = Vec::new();
    let _ = tokio::time::timeout(wait, stream.read_to_end(&mut bytes)).await;
    parse_reply(&bytes)
}

fn parse_reply(bytes: &[u8]) -> Option<RawReply> {
    let text = String::from_utf8_lossy(bytes);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some(RawReply {
        status,
        head: head.to_owned(),
        body: serde_json::from_str(body).unwrap_or(Value::Null),
    })
}

/// Sends `request` on a new connection and reads the answer until the server closes.
async fn exchange(gateway: &TestGateway, request: &[u8]) -> RawReply {
    let mut stream = TcpStream::connect(address(gateway)).await.expect("connect");
    // The server may answer and close before it has read everything: that is the point.
    let _ = stream.write_all(request).await;
    read_reply(&mut stream, Duration::from_secs(10))
        .await
        .expect("an answer")
}

/// The CPU time this whole test process has used so far (every thread), to the nanosecond.
fn process_cpu() -> Duration {
    let mut total = 0u64;
    let tasks = std::fs::read_dir("/proc/self/task").expect("Linux /proc");
    for task in tasks.flatten() {
        let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        total += stat
            .split_whitespace()
            .next()
            .and_then(|ns| ns.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Duration::from_nanos(total)
}

/// A join of room `room` with `cookies` room-named cookies, as one raw request.
fn stuffed_join(room: &str, cookies: usize) -> Vec<u8> {
    let jar: Vec<String> = (0..cookies)
        .map(|index| format!("qm_room{index:05}=eyJpYXQiOjF9.c2lnbmF0dXJl"))
        .collect();
    let body = format!(r#"{{"roomId":"{room}"}}"#);
    format!(
        "POST /api/join HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nCookie: {}\r\nConnection: close\r\n\r\n{body}",
        body.len(),
        jar.join("; ")
    )
    .into_bytes()
}

fn assert_envelope(reply: &RawReply, status: u16, code: &str) {
    assert_eq!(reply.status, status, "{reply:?}");
    assert_eq!(reply.body["code"], code, "{reply:?}");
    assert!(reply.body["error"].is_string(), "{reply:?}");
    assert!(
        reply
            .head
            .to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{reply:?}"
    );
}

#[tokio::test]
async fn ten_thousand_cookies_are_refused_in_the_envelope_for_little_cpu() {
    let gateway = spawn_gateway(&[]).await;
    gateway.engine.create_room("stuffed", "active", 0);
    let request = stuffed_join("stuffed", 10_000);
    assert!(request.len() > 80_000, "{}", request.len());
    let rounds = 20;
    let cpu_before = process_cpu();
    for _ in 0..rounds {
        let reply = exchange(&gateway, &request).await;
        assert_envelope(&reply, 431, "request_header_too_large");
    }
    let per_request = (process_cpu() - cpu_before) / rounds;
    eprintln!(
        "10,000 cookies (default caps): {per_request:?} CPU per refused request (client included)"
    );
    // The issue's bound is 2 ms of server CPU; this counts the client too, in a debug build.
    assert!(per_request < Duration::from_millis(20), "{per_request:?}");

    // Under the head cap but over the cookie cap: refused by count, also in the envelope.
    let reply = exchange(&gateway, &stuffed_join("stuffed", 201)).await;
    assert_envelope(&reply, 431, "too_many_cookies");
    // At the cap a join goes through.
    let reply = exchange(&gateway, &stuffed_join("stuffed", 199)).await;
    assert_eq!(reply.status, 200, "{reply:?}");
}

#[tokio::test]
async fn a_stuffed_jar_let_through_is_read_in_linear_time_and_answered_with_few_set_cookies() {
    let gateway = spawn_gateway(&[("MAX_HEADER_BYTES", "1048576"), ("MAX_COOKIES", "10000")]).await;
    gateway.engine.create_room("linear", "active", 0);
    let request = stuffed_join("linear", 10_000);
    let rounds = 5;
    let cpu_before = process_cpu();
    let mut set_cookies = 0;
    for _ in 0..rounds {
        let reply = exchange(&gateway, &request).await;
        assert_eq!(reply.status, 200, "{reply:?}");
        set_cookies = reply
            .head
            .lines()
            .filter(|line| line.to_ascii_lowercase().starts_with("set-cookie:"))
            .count();
    }
    let per_request = (process_cpu() - cpu_before) / rounds;
    eprintln!(
        "10,000 cookies let through: {per_request:?} CPU per join, {set_cookies} Set-Cookie lines"
    );
    // Two for the joined room and three for each of at most 16 evicted rooms (was 29,981).
    assert!(set_cookies <= 50, "{set_cookies}");
    // Measured in a debug build (client included): quadratic reading ~600 ms, linear ~85 ms
    // (most of it decoding 10,000 token-shaped values, which release builds do in a few ms).
    assert!(per_request < Duration::from_millis(300), "{per_request:?}");
}

/// Median wall time of `count` normal joins.
async fn median_join(gateway: &TestGateway, count: usize) -> Duration {
    let mut times = Vec::with_capacity(count);
    for _ in 0..count {
        let started = Instant::now();
        let reply = gateway.join("calm", None).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        times.push(started.elapsed());
    }
    times.sort();
    times[count / 2]
}

#[tokio::test]
async fn eight_cookie_attackers_do_not_slow_a_normal_join_much() {
    let gateway = spawn_gateway(&[]).await;
    gateway.engine.create_room("calm", "active", 0);
    gateway.engine.create_room("stuffed", "active", 0);
    let quiet = median_join(&gateway, 20).await;
    let stop = Instant::now() + Duration::from_secs(3);
    let request = std::sync::Arc::new(stuffed_join("stuffed", 10_000));
    let target = address(&gateway);
    let attackers: Vec<_> = (0..8)
        .map(|_| {
            let request = request.clone();
            let target = target.clone();
            tokio::spawn(async move {
                let mut sent = 0u32;
                while Instant::now() < stop {
                    if let Ok(mut stream) = TcpStream::connect(&target).await {
                        let _ = stream.write_all(&request).await;
                        let _ = read_reply(&mut stream, Duration::from_secs(2)).await;
                        sent += 1;
                    }
                }
                sent
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let attacked = median_join(&gateway, 20).await;
    let mut sent = 0;
    for attacker in attackers {
        sent += attacker.await.unwrap_or(0);
    }
    eprintln!(
        "normal join median: {quiet:?} quiet, {attacked:?} under 8 attackers ({sent} stuffed requests)"
    );
    // Was 0.5 ms -> 1.3 s. Generous: a shared machine and a debug build.
    assert!(
        attacked < quiet + Duration::from_millis(250),
        "{quiet:?} -> {attacked:?}"
    );
}

#[tokio::test]
async fn a_silent_or_dribbling_connection_is_answered_408_at_the_timeout_while_joins_stay_fast() {
    let gateway = spawn_gateway(&[("HEADER_READ_TIMEOUT_SEC", "1")]).await;
    gateway.engine.create_room("calm", "active", 0);
    let target = address(&gateway);

    // Silent: nothing at all after the connect.
    let started = Instant::now();
    let mut silent = TcpStream::connect(&target).await.expect("connect");
    // Dribbling: a head one byte at a time, never finished.
    let dribbler = tokio::spawn({
        let target = target.clone();
        async move {
            let mut stream = TcpStream::connect(&target).await.expect("connect");
            let started = Instant::now();
            let head =
                b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaa";
            for byte in head {
                if stream.write_all(&[*byte]).await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let reply = read_reply(&mut stream, Duration::from_secs(5)).await;
            (reply, started.elapsed())
        }
    });
    // Many slow connections at once do not slow anyone else.
    let mut slow = Vec::new();
    for _ in 0..50 {
        let mut stream = TcpStream::connect(&target).await.expect("connect");
        let _ = stream.write_all(b"GET / HTTP/1.1\r\nHo").await;
        slow.push(stream);
    }
    let fast = median_join(&gateway, 10).await;
    assert!(fast < Duration::from_millis(500), "{fast:?}");

    let reply = read_reply(&mut silent, Duration::from_secs(5))
        .await
        .expect("a 408 before the close");
    let silent_after = started.elapsed();
    assert_envelope(&reply, 408, "request_timeout");
    assert!(
        silent_after >= Duration::from_millis(900) && silent_after < Duration::from_secs(4),
        "{silent_after:?}"
    );
    let (reply, dribbled_for) = dribbler.await.expect("dribbler");
    let reply = reply.expect("a 408 before the close");
    assert_envelope(&reply, 408, "request_timeout");
    assert!(
        dribbled_for >= Duration::from_millis(900) && dribbled_for < Duration::from_secs(4),
        "{dribbled_for:?}"
    );
    eprintln!(
        "silent closed after {silent_after:?}, dribbler after {dribbled_for:?}, joins meanwhile {fast:?}"
    );
    for mut stream in slow {
        let reply = read_reply(&mut stream, Duration::from_secs(5)).await;
        assert_eq!(reply.map(|reply| reply.status), Some(408));
    }
}

#[tokio::test]
async fn an_idle_keep_alive_closes_quietly_and_a_stream_is_never_cut() {
    let gateway = spawn_gateway(&[
        ("HEADER_READ_TIMEOUT_SEC", "1"),
        ("KEEPALIVE_IDLE_SEC", "1"),
    ])
    .await;
    gateway.engine.create_room("beat", "paused", 0);
    let (reply, _) = gateway.join_as_new_visitor("beat").await;
    let token = reply.body["token"].as_str().unwrap().to_owned();
    let mut frames = gateway.events("/events", &token).await.expect("opens");
    frames
        .next(Duration::from_secs(3))
        .await
        .expect("first frame");

    let mut stream = TcpStream::connect(address(&gateway))
        .await
        .expect("connect");
    stream
        .write_all(b"GET /api/version HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let mut first = vec![0u8; 4096];
    let read = stream.read(&mut first).await.unwrap();
    assert!(first[..read].starts_with(b"HTTP/1.1 200"));
    let idle_from = Instant::now();
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut rest)).await;
    let idle_for = idle_from.elapsed();
    assert!(closed.is_ok(), "the idle connection is closed");
    assert!(
        rest.is_empty(),
        "closed quietly: {:?}",
        String::from_utf8_lossy(&rest)
    );
    assert!(idle_for >= Duration::from_millis(900), "{idle_for:?}");

    // The stream outlived both timeouts several times over: its heartbeat still comes.
    let (event, _) = frames
        .next(Duration::from_secs(7))
        .await
        .expect("the stream is still open");
    assert_eq!(event, "status");
}

#[tokio::test]
async fn over_long_urls_malformed_heads_and_two_hosts_are_refused_in_the_envelope() {
    let gateway = spawn_gateway(&[]).await;
    let long = format!(
        "GET /api/status?roomId={} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        "a".repeat(10_000)
    );
    assert_envelope(
        &exchange(&gateway, long.as_bytes()).await,
        414,
        "uri_too_long",
    );
    // Hyper's own refusal of a head it cannot parse, rewritten on the way out.
    let garbage = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header\r\n\r\n";
    assert_envelope(&exchange(&gateway, garbage).await, 400, "bad_request");
    let two_hosts = b"GET /api/version HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n";
    assert_envelope(&exchange(&gateway, two_hosts).await, 400, "invalid_host");
    // A normal request on the same server is untouched.
    let fine = exchange(
        &gateway,
        b"GET /api/version HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(fine.status, 200, "{fine:?}");
}

#[tokio::test]
async fn past_the_connection_ceiling_new_connections_are_shed_but_health_is_answered() {
    let gateway = spawn_gateway(&[("MAX_CONNECTIONS", "4")]).await;
    let target = address(&gateway);
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(TcpStream::connect(&target).await.expect("connect"));
    }
    // Let the server count them.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let busy = exchange(
        &gateway,
        b"GET /api/status?roomId=r HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    )
    .await;
    assert_envelope(&busy, 503, "server_busy");
    assert!(
        busy.head.to_ascii_lowercase().contains("retry-after: 5"),
        "{busy:?}"
    );
    let health = exchange(
        &gateway,
        b"GET /api/version HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    )
    .await;
    assert_eq!(health.status, 200, "{health:?}");

    // Past the margin (16 more) a connection is closed unanswered, and the server lives on.
    for _ in 0..16 {
        held.push(TcpStream::connect(&target).await.expect("connect"));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut beyond = TcpStream::connect(&target).await.expect("connect");
    let _ = beyond
        .write_all(b"GET /api/version HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await;
    assert!(
        read_reply(&mut beyond, Duration::from_secs(3))
            .await
            .is_none()
    );
    drop(held);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = exchange(
        &gateway,
        b"GET /api/version HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(after.status, 200, "{after:?}");
}

#[tokio::test]
async fn a_foreign_host_never_reaches_an_answer() {
    let gateway = spawn_gateway(&[]).await;
    gateway.engine.create_room("door", "active", 0);
    let request =
        b"GET /api/check?roomId=door HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n";
    let mut stream = TcpStream::connect(address(&gateway))
        .await
        .expect("connect");
    stream.write_all(request).await.unwrap();
    let mut bytes = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut bytes)).await;
    let text = String::from_utf8_lossy(&bytes);
    let reply = parse_reply(&bytes).expect("an answer");
    assert_eq!(reply.status, 200, "{text}");
    assert_eq!(reply.body["action"], "queue", "{text}");
    assert_eq!(reply.body["waitingRoomUrl"], "/w/door", "{text}");
    assert!(!text.contains("evil.example"), "{text}");

    // With PUBLIC_URL every absolute URL is built from it, whatever the Host.
    let public = spawn_gateway(&[("PUBLIC_URL", "https://queue.example")]).await;
    public.engine.create_room("door", "active", 0);
    let mut stream = TcpStream::connect(address(&public)).await.expect("connect");
    stream.write_all(request).await.unwrap();
    let mut bytes = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut bytes)).await;
    let text = String::from_utf8_lossy(&bytes);
    let reply = parse_reply(&bytes).expect("an answer");
    assert_eq!(
        reply.body["waitingRoomUrl"], "https://queue.example/w/door",
        "{text}"
    );
    assert!(!text.contains("evil.example"), "{text}");
}
