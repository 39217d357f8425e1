//! `qm-bench sse`: many idle event streams held open on one gateway process, beside a bare
//! axum server holding as many streams with the same heartbeat in a process of its own (the
//! ceiling: what hyper and axum alone cost per open stream).
//!
//! Each side runs in its own process, so its resident memory (`VmRSS`) is its own: the figure
//! is the growth from before the first stream opened to the rest after every stream has had
//! heartbeats, divided by the streams. The client here opens every stream over a raw loopback
//! socket (a real status request: the visitor's token and cookies), times the open until the
//! first frame, and then times every frame: a frame later than the 5 s heartbeat after the one
//! before is late by the difference, and a stream silent at the end counts as late by how long
//! it has been silent past its due heartbeat.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use axum::Router;
use axum::response::sse::{Event, Sse};
use axum::routing::get;
use futures::StreamExt;
use qm_tests::process::{AdminProcess, EngineProcess, GatewayProcess, free_addr};
use qm_tests::{TEST_ADMIN_KEY, room_body, test_env};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{Semaphore, watch};

/// The spec's heartbeat: every open stream gets a status frame at least this often.
const HEARTBEAT: Duration = Duration::from_secs(5);
/// The room every stream waits in (still: rate 0, so every frame after the first is a heartbeat).
const ROOM: &str = "streams";

/// The settings of one `qm-bench sse` run.
#[derive(Debug, Clone)]
pub(crate) struct SseBench {
    pub(crate) streams: usize,
    /// Seconds every stream is held after the last one opened, before the rest is measured.
    pub(crate) idle_seconds: u64,
    /// Streams being opened at once (connect until the first frame).
    pub(crate) opening: usize,
    /// The ceiling on hyper's HTTP/1 connection alone (the gateway's own serving settings)
    /// instead of `axum::serve`.
    pub(crate) hyper_ceiling: bool,
}

/// What holding the streams on one server measured.
#[derive(Debug)]
struct HeldStreams {
    opened: usize,
    /// Streams that failed to open, ended early, or answered no 200; the first reason seen.
    failed: usize,
    first_failure: Option<String>,
    /// From the first connect to the last stream's first frame.
    open_seconds: f64,
    rss_before_kib: u64,
    rss_opening_peak_kib: u64,
    rss_rest_kib: u64,
    heartbeats: usize,
    late_max: Duration,
    late_p99: Duration,
}

impl HeldStreams {
    fn per_stream_kib(&self, rss_kib: u64) -> f64 {
        rss_kib.saturating_sub(self.rss_before_kib) as f64 / self.opened.max(1) as f64
    }
}

/// The `qm` binary beside this one (`cargo build --release` builds both).
pub(crate) fn qm_binary() -> anyhow::Result<PathBuf> {
    let here = std::env::current_exe().context("this bench's own path")?;
    let qm = here.with_file_name("qm");
    anyhow::ensure!(
        qm.exists(),
        "{} is missing: this bench runs the real processes; build them with \
         `cargo build --release -p qm -p qm-tests`",
        qm.display()
    );
    Ok(qm)
}

/// A process's resident memory in KiB (`VmRSS` of /proc/<pid>/status).
fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.split_whitespace().next()?.parse().ok())
        .context("no VmRSS line")
}

pub(crate) async fn sse(bench: SseBench) -> anyhow::Result<()> {
    let qm = qm_binary()?;
    println!(
        "qm-bench sse  streams={} idle={}s opening={} cores={}",
        bench.streams,
        bench.idle_seconds,
        bench.opening,
        crate::num_cpus()
    );

    let bare = BareSseProcess::start(bench.hyper_ceiling)?;
    let requests = vec![stream_request(bare.addr, "/events", ""); bench.streams];
    let ceiling = hold_streams(bare.addr, bare.pid(), requests, &bench).await?;
    drop(bare);

    let mut env = test_env();
    env.insert("SSE_MAX_TOTAL".to_owned(), (bench.streams * 2).to_string());
    env.insert("SSE_PER_IP".to_owned(), (bench.streams * 2).to_string());
    // The default leaves half the open-file limit for the inline gate's origin connections; a
    // gateway that only holds streams may hold one per descriptor.
    env.insert(
        "MAX_CONNECTIONS".to_owned(),
        (bench.streams + 256).to_string(),
    );
    let engine = EngineProcess::start(&qm, &env, free_addr()).await;
    let gateway = GatewayProcess::start(&qm, &env, engine.addr(), free_addr().port()).await;
    let admin = AdminProcess::start(&qm, &env, engine.addr(), free_addr().port()).await;
    let gateway_addr: SocketAddr = gateway
        .url()
        .trim_start_matches("http://")
        .parse()
        .context("the gateway's address")?;
    create_room(&admin.url(), ROOM).await?;
    let visitors = join_visitors(&gateway.url(), ROOM, bench.streams).await?;
    let requests = visitors
        .iter()
        .map(|(token, cookies)| {
            let token: String = url::form_urlencoded::byte_serialize(token.as_bytes()).collect();
            stream_request(gateway_addr, &format!("/api/events?token={token}"), cookies)
        })
        .collect();
    let pid = gateway.pid().context("the gateway's process id")?;
    let gateway_run = hold_streams(gateway_addr, pid, requests, &bench).await;
    let gateway_log = gateway.log_tail();
    drop((admin, gateway, engine));
    let gateway_run = gateway_run?;

    report(&bench, &ceiling, &gateway_run);
    if gateway_run.failed > 0 || ceiling.failed > 0 {
        anyhow::bail!(
            "streams failed: gateway {} ({:?}), bare server {} ({:?}); gateway log:\n{gateway_log}",
            gateway_run.failed,
            gateway_run.first_failure,
            ceiling.failed,
            ceiling.first_failure
        );
    }
    Ok(())
}

fn report(bench: &SseBench, ceiling: &HeldStreams, gateway: &HeldStreams) {
    let kib = |run: &HeldStreams, rss| run.per_stream_kib(rss);
    let bare = if bench.hyper_ceiling {
        "bare hyper"
    } else {
        "bare axum"
    };
    println!(
        "{:<38} {:>14} {:>14} {:>12}",
        "figure", "gateway", bare, "target"
    );
    let rows: [(&str, String, String, String); 6] = [
        (
            "streams open",
            gateway.opened.to_string(),
            ceiling.opened.to_string(),
            format!(">= {}", bench.streams),
        ),
        (
            "opened in (s)",
            format!("{:.2}", gateway.open_seconds),
            format!("{:.2}", ceiling.open_seconds),
            "<= 5".to_owned(),
        ),
        (
            "RSS per idle stream (KiB)",
            format!("{:.1}", kib(gateway, gateway.rss_rest_kib)),
            format!("{:.1}", kib(ceiling, ceiling.rss_rest_kib)),
            "<= 12".to_owned(),
        ),
        (
            "RSS per stream, opening peak (KiB)",
            format!("{:.1}", kib(gateway, gateway.rss_opening_peak_kib)),
            format!("{:.1}", kib(ceiling, ceiling.rss_opening_peak_kib)),
            String::new(),
        ),
        (
            "heartbeats received",
            gateway.heartbeats.to_string(),
            ceiling.heartbeats.to_string(),
            String::new(),
        ),
        (
            "heartbeat late, p99 / max (ms)",
            format!(
                "{} / {}",
                gateway.late_p99.as_millis(),
                gateway.late_max.as_millis()
            ),
            format!(
                "{} / {}",
                ceiling.late_p99.as_millis(),
                ceiling.late_max.as_millis()
            ),
            "max <= 1000".to_owned(),
        ),
    ];
    for (figure, ours, bare, target) in rows {
        println!("{figure:<38} {ours:>14} {bare:>14} {target:>12}");
    }
    let per_stream = kib(gateway, gateway.rss_rest_kib);
    println!(
        "RSS before the streams: gateway {} KiB, bare {} KiB; at rest: gateway {} KiB, bare {} KiB",
        gateway.rss_before_kib, ceiling.rss_before_kib, gateway.rss_rest_kib, ceiling.rss_rest_kib
    );
    println!(
        "100,000 streams on one gateway: {per_stream:.1} KiB x 100,000 = {:.0} MiB above its {:.0} MiB at rest without streams (and 100,000 open files)",
        per_stream * 100_000.0 / 1024.0,
        gateway.rss_before_kib as f64 / 1024.0
    );
    let met = gateway.opened >= bench.streams
        && gateway.open_seconds <= 5.0
        && per_stream <= 12.0
        && gateway.late_max <= Duration::from_secs(1);
    println!(
        "{}",
        json!({
            "bench": "sse",
            "streams": bench.streams,
            "opened": gateway.opened,
            "open_seconds": gateway.open_seconds,
            "kib_per_idle_stream": (per_stream * 10.0).round() / 10.0,
            "bare_kib_per_idle_stream": (kib(ceiling, ceiling.rss_rest_kib) * 10.0).round() / 10.0,
            "heartbeat_late_max_ms": gateway.late_max.as_millis() as u64,
            "heartbeats": gateway.heartbeats,
            "targets_met": met,
        })
    );
}

/// The raw HTTP/1.1 request of one stream.
fn stream_request(addr: SocketAddr, path_and_query: &str, cookies: &str) -> String {
    let cookie_line = if cookies.is_empty() {
        String::new()
    } else {
        format!("Cookie: {cookies}\r\n")
    };
    format!(
        "GET {path_and_query} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n{cookie_line}\r\n"
    )
}

/// A still room `room` created through the admin process at `admin`.
pub(crate) async fn create_room(admin: &str, room: &str) -> anyhow::Result<()> {
    let answer = reqwest::Client::new()
        .post(format!("{admin}/api/admin/rooms"))
        .bearer_auth(TEST_ADMIN_KEY)
        .json(&room_body(room, 0, json!({})))
        .send()
        .await?;
    anyhow::ensure!(
        answer.status().is_success(),
        "creating the room: {}",
        answer.text().await.unwrap_or_default()
    );
    Ok(())
}

/// Joins `count` new visitors to `room`: each one's token and the cookies its join set.
pub(crate) async fn join_visitors(
    gateway: &str,
    room: &str,
    count: usize,
) -> anyhow::Result<Vec<(String, String)>> {
    let http = crate::client(64);
    let url = format!("{gateway}/api/join");
    let joins = futures::stream::iter(0..count)
        .map(|_| {
            let request = http.post(&url).json(&json!({ "roomId": room }));
            async move {
                let answer = request.send().await?;
                anyhow::ensure!(answer.status().is_success(), "join: {}", answer.status());
                let cookies = answer
                    .headers()
                    .get_all(reqwest::header::SET_COOKIE)
                    .iter()
                    .filter_map(|value| value.to_str().ok()?.split(';').next())
                    .collect::<Vec<_>>()
                    .join("; ");
                let body: serde_json::Value = answer.json().await?;
                let token = body["token"].as_str().context("a join's token")?.to_owned();
                Ok((token, cookies))
            }
        })
        .buffer_unordered(64)
        .collect::<Vec<anyhow::Result<(String, String)>>>()
        .await;
    joins.into_iter().collect()
}

/// What one stream saw.
#[derive(Default)]
struct StreamSeen {
    opened_at: Option<Duration>,
    failure: Option<String>,
    heartbeats: usize,
    lates: Vec<Duration>,
}

/// Opens every request's stream against `addr`, `bench.opening` at a time, holds them all for
/// `bench.idle_seconds` after the last opened, and measures the server process `pid`.
async fn hold_streams(
    addr: SocketAddr,
    pid: u32,
    requests: Vec<String>,
    bench: &SseBench,
) -> anyhow::Result<HeldStreams> {
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_before_kib = rss_kib(pid)?;
    let (stop_tx, stop) = watch::channel(false);
    let opening = Arc::new(Semaphore::new(bench.opening));
    let (opened_tx, mut opened_rx) = tokio::sync::mpsc::unbounded_channel();
    let started = Instant::now();
    let tasks: Vec<_> = requests
        .into_iter()
        .map(|request| {
            let opening = opening.clone();
            let stop = stop.clone();
            let opened = opened_tx.clone();
            tokio::spawn(follow(addr, request, opening, started, opened, stop))
        })
        .collect();
    drop(opened_tx);
    // The peak while opening: sampled until every stream has opened (or failed to).
    let mut rss_opening_peak_kib = rss_before_kib;
    let mut settled = 0;
    let mut sample = tokio::time::interval(Duration::from_millis(100));
    while settled < tasks.len() {
        tokio::select! {
            done = opened_rx.recv() => match done {
                Some(()) => settled += 1,
                None => break,
            },
            _ = sample.tick() => rss_opening_peak_kib = rss_opening_peak_kib.max(rss_kib(pid)?),
        }
    }
    rss_opening_peak_kib = rss_opening_peak_kib.max(rss_kib(pid)?);
    tokio::time::sleep(Duration::from_secs(bench.idle_seconds)).await;
    let rss_rest_kib = rss_kib(pid)?;
    let _ = stop_tx.send(true);

    let mut held = HeldStreams {
        opened: 0,
        failed: 0,
        first_failure: None,
        open_seconds: 0.0,
        rss_before_kib,
        rss_opening_peak_kib,
        rss_rest_kib,
        heartbeats: 0,
        late_max: Duration::ZERO,
        late_p99: Duration::ZERO,
    };
    let mut lates = Vec::new();
    for task in tasks {
        let seen = task.await.context("a stream's task")?;
        match (seen.opened_at, seen.failure) {
            (Some(opened_at), None) => {
                held.opened += 1;
                held.open_seconds = held.open_seconds.max(opened_at.as_secs_f64());
            }
            (_, failure) => {
                held.failed += 1;
                if held.first_failure.is_none() {
                    held.first_failure = failure;
                }
            }
        }
        held.heartbeats += seen.heartbeats;
        lates.extend(seen.lates);
    }
    lates.sort_unstable();
    held.late_max = lates.last().copied().unwrap_or_default();
    held.late_p99 = crate::percentile(&lates, 0.99);
    Ok(held)
}

/// One stream: connect, send the request, wait for the 200 and the first frame (while holding
/// an opening permit), then time every frame until told to stop.
async fn follow(
    addr: SocketAddr,
    request: String,
    opening: Arc<Semaphore>,
    started: Instant,
    opened: tokio::sync::mpsc::UnboundedSender<()>,
    mut stop: watch::Receiver<bool>,
) -> StreamSeen {
    let mut seen = StreamSeen::default();
    let permit = opening.acquire_owned().await;
    let mut frames = FrameCounter::default();
    let mut buffer = vec![0u8; 2048];
    let first = async {
        let mut socket = TcpStream::connect(addr).await.context("connect")?;
        socket
            .write_all(request.as_bytes())
            .await
            .context("write")?;
        let mut head = Vec::new();
        loop {
            let read = socket.read(&mut buffer).await.context("read")?;
            anyhow::ensure!(read > 0, "the server closed before the first frame");
            if head.len() < 12 {
                head.extend_from_slice(&buffer[..read.min(12)]);
            }
            if frames.feed(&buffer[..read]) > 0 {
                break;
            }
        }
        anyhow::ensure!(
            head.starts_with(b"HTTP/1.1 200"),
            "answered {}",
            String::from_utf8_lossy(&head)
        );
        Ok(socket)
    }
    .await;
    drop(permit);
    let _ = opened.send(());
    let mut socket = match first {
        Ok(socket) => socket,
        Err(error) => {
            seen.failure = Some(format!("{error:#}"));
            return seen;
        }
    };
    seen.opened_at = Some(started.elapsed());
    let mut last = Instant::now();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            read = socket.read(&mut buffer) => match read {
                Ok(read) if read > 0 => {
                    if frames.feed(&buffer[..read]) > 0 {
                        let now = Instant::now();
                        seen.heartbeats += 1;
                        seen.lates.push((now - last).saturating_sub(HEARTBEAT));
                        last = now;
                    }
                }
                _ => {
                    seen.failure = Some("the stream ended while held".to_owned());
                    break;
                }
            },
        }
    }
    // A stream silent at the end is late by how long it has been past its due heartbeat.
    seen.lates.push(last.elapsed().saturating_sub(HEARTBEAT));
    seen
}

/// Counts `event:` lines in a byte stream read in pieces.
#[derive(Default)]
struct FrameCounter {
    tail: Vec<u8>,
}

impl FrameCounter {
    const MARK: &'static [u8] = b"event:";

    fn feed(&mut self, bytes: &[u8]) -> usize {
        self.tail.extend_from_slice(bytes);
        let count = self
            .tail
            .windows(Self::MARK.len())
            .filter(|window| *window == Self::MARK)
            .count();
        let keep = self.tail.len().min(Self::MARK.len() - 1);
        self.tail.drain(..self.tail.len() - keep);
        count
    }
}

/// The ceiling: this binary's `bare-sse` subcommand in a process of its own.
struct BareSseProcess {
    child: Child,
    addr: SocketAddr,
}

impl BareSseProcess {
    fn start(hyper_http1: bool) -> anyhow::Result<BareSseProcess> {
        let mut command = Command::new(std::env::current_exe()?);
        command.arg("bare-sse");
        if hyper_http1 {
            command.arg("--hyper-http1");
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .context("starting the bare SSE server")?;
        let mut line = String::new();
        let stdout = child.stdout.take().context("its stdout")?;
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line)?;
        let addr = line
            .trim()
            .parse()
            .context("the bare SSE server's address")?;
        Ok(BareSseProcess { child, addr })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for BareSseProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `qm-bench bare-sse`: a server whose `/events` answers a stream of `event: status` frames
/// the size of a waiting visitor's, the first at once and then every heartbeat; it prints its
/// address on the first line of stdout. `hyper_http1` serves it on hyper's HTTP/1 connection
/// alone, with the settings the gateway's own accept loop uses, instead of `axum::serve`.
pub(crate) async fn bare_sse_server(hyper_http1: bool) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("{}", listener.local_addr()?);
    let frame = json!({
        "state": "waiting", "position": 12345, "ahead": 12344, "etaSec": 3600,
        "roomId": ROOM, "now": 0, "ref": "QM-ABCD-EFGH", "paused": false,
    })
    .to_string();
    let app = Router::new().route(
        "/events",
        get(move || {
            let frame = frame.clone();
            async move {
                let beats = futures::stream::unfold(true, move |first| {
                    let frame = frame.clone();
                    async move {
                        if !first {
                            tokio::time::sleep(HEARTBEAT).await;
                        }
                        let event = Event::default().event("status").data(frame);
                        Some((Ok::<_, std::convert::Infallible>(event), false))
                    }
                });
                Sse::new(beats)
            }
        }),
    );
    if !hyper_http1 {
        axum::serve(listener, app).await?;
        return Ok(());
    }
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        tokio::spawn(async move {
            let service =
                hyper::service::service_fn(move |request: http::Request<hyper::body::Incoming>| {
                    let app = app.clone();
                    async move {
                        use tower::ServiceExt as _;
                        app.oneshot(request.map(axum::body::Body::new)).await
                    }
                });
            let _ = hyper::server::conn::http1::Builder::new()
                .writev(false)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::FrameCounter;

    #[test]
    fn frames_are_counted_across_reads() {
        let mut counter = FrameCounter::default();
        assert_eq!(
            counter.feed(b"HTTP/1.1 200 OK\r\n\r\n1a\r\nevent: status\ndata: {}\n\n"),
            1
        );
        assert_eq!(counter.feed(b"\r\n1a\r\neve"), 0);
        assert_eq!(counter.feed(b"nt: status\ndata: {}\n\nevent: status\n"), 2);
    }
}
