//! What the Worker and Node connector tests share: a guard for a connector's runtime process
//! (killed, and its scratch directory removed, when the test ends however it ends), and a
//! stand-in queue server that records the door checks a connector sends and answers them as an
//! old release (no `/api/v1` routes: a plain-text 404 there, the real gateway's answer under
//! `/api`) or as a broken one (a 502 HTML page to everything); and the one-time fall back from
//! `/api/v1` to `/api` every connector must make.
#![allow(dead_code)] // each connector module uses the part it needs

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use tokio::task::JoinHandle;

/// A connector's runtime (workerd, node) serving on a loopback port.
pub(crate) struct RuntimeChild {
    what: &'static str,
    child: Option<Child>,
    scratch: PathBuf,
    log: PathBuf,
    /// `http://127.0.0.1:<port>`: the site as a visitor reaches it.
    pub(crate) url: String,
}

impl RuntimeChild {
    /// A fresh scratch directory for a runtime's files, named for the process and `port`.
    pub(crate) fn scratch_dir(what: &str, port: u16) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("qm-connector-{what}-{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the runtime's scratch directory");
        dir
    }

    /// Starts `command` (its output to a log in `scratch`) and waits until `addr` accepts
    /// connections; panics with the log's tail when it exits or does not listen in 20 s.
    pub(crate) async fn start(
        what: &'static str,
        mut command: Command,
        scratch: PathBuf,
        addr: SocketAddr,
    ) -> RuntimeChild {
        let log = scratch.join("runtime.log");
        let out = std::fs::File::create(&log).expect("create the runtime's log");
        let err = out.try_clone().expect("clone the log handle");
        let child = command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|error| panic!("start {what}: {error}"));
        let mut runtime = RuntimeChild {
            what,
            child: Some(child),
            scratch,
            log,
            url: format!("http://{addr}"),
        };
        runtime.wait_listening(addr).await;
        runtime
    }

    async fn wait_listening(&mut self, addr: SocketAddr) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            if tokio::net::TcpStream::connect(addr).await.is_ok() {
                return;
            }
            let exited = self
                .child
                .as_mut()
                .and_then(|child| child.try_wait().ok().flatten());
            if let Some(status) = exited {
                panic!(
                    "{} exited with {status} before listening on {addr}; log:\n{}",
                    self.what,
                    self.log_tail()
                );
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} did not listen on {addr} within 20 s; log:\n{}",
                self.what,
                self.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The runtime's last log lines (what a failing assertion shows).
    pub(crate) fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for RuntimeChild {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

/// The workspace's root (where `connectors/` lives).
pub(crate) fn workspace_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.parent().unwrap_or(manifest_dir).to_path_buf()
}

/// One request the stand-in server received.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    pub(crate) path: String,
    pub(crate) query: Vec<(String, String)>,
    pub(crate) headers: http::HeaderMap,
}

impl Seen {
    pub(crate) fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }
}

#[derive(Clone)]
struct StandIn {
    /// The real gateway an old release's `/api/*` answers come from; `None`: broken.
    upstream: Option<String>,
    seen: Arc<Mutex<Vec<Seen>>>,
    http: reqwest::Client,
}

/// A stand-in queue server on an ephemeral loopback port.
pub(crate) struct StandInServer {
    /// `http://127.0.0.1:<port>`: what the connector is configured with as its server.
    pub(crate) url: String,
    state: StandIn,
    task: JoinHandle<()>,
}

impl StandInServer {
    /// An old release in front of the real gateway `upstream`: `/api/v1/*` is a plain-text
    /// 404 (no JSON `code`), `/api/*` is the gateway's own answer.
    pub(crate) async fn old_release(upstream: &str) -> StandInServer {
        StandInServer::start(Some(upstream.trim_end_matches('/').to_owned())).await
    }

    /// A server that answers every request 502 with an HTML page (a proxy in front of a dead
    /// queue server).
    pub(crate) async fn broken() -> StandInServer {
        StandInServer::start(None).await
    }

    async fn start(upstream: Option<String>) -> StandInServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the stand-in server");
        let addr = listener.local_addr().expect("stand-in address");
        let state = StandIn {
            upstream,
            seen: Arc::default(),
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(Duration::from_secs(5))
                .build()
                .expect("a reqwest client"),
        };
        let app = Router::new().fallback(answer).with_state(state.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        StandInServer {
            url: format!("http://{addr}"),
            state,
            task,
        }
    }

    /// Every request received so far, in order.
    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.state
            .seen
            .lock()
            .expect("the record is not poisoned")
            .clone()
    }

    /// The requests received on `path`.
    pub(crate) fn seen_on(&self, path: &str) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(|seen| seen.path == path)
            .collect()
    }
}

impl Drop for StandInServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn answer(State(state): State<StandIn>, request: Request) -> Response {
    let path = request.uri().path().to_owned();
    let raw_query = request.uri().query().unwrap_or("").to_owned();
    let query = url::form_urlencoded::parse(raw_query.as_bytes())
        .into_owned()
        .collect();
    state
        .seen
        .lock()
        .expect("the record is not poisoned")
        .push(Seen {
            path: path.clone(),
            query,
            headers: request.headers().clone(),
        });
    let Some(upstream) = state.upstream else {
        return (
            http::StatusCode::BAD_GATEWAY,
            [("content-type", "text/html")],
            "<html><body><h1>502 Bad Gateway</h1></body></html>",
        )
            .into_response();
    };
    if path.starts_with("/api/v1/") {
        return (http::StatusCode::NOT_FOUND, "Not Found").into_response();
    }
    let mut forwarded = state
        .http
        .get(format!("{upstream}{path}?{raw_query}"))
        .timeout(Duration::from_secs(5));
    for name in ["authorization", "x-qm-session", "user-agent", "accept"] {
        if let Some(value) = request.headers().get(name) {
            forwarded = forwarded.header(name, value.clone());
        }
    }
    let Ok(reply) = forwarded.send().await else {
        return (http::StatusCode::BAD_GATEWAY, "upstream unreachable").into_response();
    };
    let status = reply.status().as_u16();
    let content_type = reply
        .headers()
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .unwrap_or("application/json")
        .to_owned();
    let body = reply.bytes().await.unwrap_or_default();
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Body::from(body))
        .unwrap_or_default()
}

/// Drives a connector configured against [`StandInServer::old_release`] (at `site`, its base
/// URL) through three pages and proves the one-time fall back: `/api/v1/check` asked once, every
/// later check on `/api/check`, each naming the room, the page and the agent, the key only ever
/// in the Authorization header. Returns the checks `/api` received, for what a connector vouches
/// beyond that (its `ip`).
pub(crate) async fn assert_falls_back_once(
    old: &StandInServer,
    site: &str,
    log_tail: impl Fn() -> String,
) -> Vec<Seen> {
    use crate::journey::{self, API_KEY, ROOM};

    let page = format!("{site}/shop/item?colour=red");
    let first = journey::visit(&page, None).await;
    assert_eq!(first.status, 302, "queued through /api: {}", log_tail());
    let location = first.location.unwrap_or_default();
    assert!(
        location.contains(&format!("/w/{ROOM}")),
        "the waiting page: {location}"
    );
    let again = journey::visit(&format!("{site}/shop/other"), None).await;
    assert_eq!(again.status, 302);
    let about = journey::visit(&format!("{site}/about"), None).await;
    assert!(
        journey::served(&about, "/about"),
        "out of scope through /api"
    );

    assert_eq!(
        old.seen_on("/api/v1/check").len(),
        1,
        "/api/v1 is tried once, then remembered as missing"
    );
    let checks = old.seen_on("/api/check");
    assert_eq!(checks.len(), 3, "every check after the first goes to /api");
    let first_check = &checks[0];
    assert_eq!(first_check.param("roomId"), Some(ROOM));
    assert_eq!(first_check.param("url"), Some(page.as_str()));
    assert_eq!(first_check.param("agent"), Some("Mozilla/5.0 (journey)"));
    assert_eq!(
        first_check.header("authorization"),
        Some(format!("Bearer {API_KEY}").as_str()),
        "the key goes in the Authorization header"
    );
    assert_key_never_in_a_url(old);
    checks
}

/// No request the stand-in received carried the API key in its query.
pub(crate) fn assert_key_never_in_a_url(old: &StandInServer) {
    for seen in old.seen() {
        assert!(
            seen.query
                .iter()
                .all(|(_, value)| !value.contains(crate::journey::API_KEY)),
            "the key never rides in a URL: {:?}",
            seen.query
        );
    }
}
