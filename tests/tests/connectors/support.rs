//! What the Worker and Node connector tests share: a guard for a connector's runtime process
//! (killed, and its scratch directory removed, when the test ends however it ends), and a
//! stand-in queue server that records the door checks a connector sends and answers them as an
//! old release (no `/api/v1` routes: a plain-text 404 there, the real gateway's answer under
//! `/api`) or as a broken one (a 502 HTML page to everything); and the fetch, from the npm
//! registry, of the runtimes the tests need that Debian does not ship (workerd, Express).
#![allow(dead_code)] // each connector module uses the part it needs

use std::io::Write;
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

/// A runtime (or library) the tests take from the npm registry into `<target>/<dir_name>`
/// when it is missing, as `qm_tests::axe` does for axe-core: npm installs into a staging
/// directory of this process that is then renamed into place in one step, so two test
/// binaries fetching at once never see (nor leave) a half-written copy, and the one that loses
/// the race uses the winner's. `override_var` names a path to use instead; a path it names that
/// does not exist is never replaced by a download.
pub(crate) struct NpmRuntime<'a> {
    /// What the one-line messages call it.
    pub(crate) what: &'a str,
    pub(crate) override_var: &'a str,
    pub(crate) dir_name: &'a str,
    /// What `npm install` is given, e.g. `workerd@1.20261123.1`.
    pub(crate) package: &'a str,
    /// Paths inside the prefix, in order of preference: the first present is the answer.
    pub(crate) wanted: &'a [&'a str],
}

impl NpmRuntime<'_> {
    /// The wanted path, fetched first when missing and npm is on the PATH. Blocking (it may
    /// run npm): call it off the async runtime's threads. `Err` is the one line a test that
    /// needs it fails with.
    pub(crate) fn locate_or_fetch(&self) -> Result<PathBuf, String> {
        let what = self.what;
        let var = self.override_var;
        if let Some(path) = std::env::var_os(var).filter(|path| !path.is_empty()) {
            let path = PathBuf::from(path);
            return if path.exists() {
                Ok(path)
            } else {
                Err(format!(
                    "{what} not found at {} ({var}): point {var} at it, or unset it to have the \
                     tests fetch it with npm",
                    path.display()
                ))
            };
        }
        let prefix = qm_tests::axe::target_dir().join(self.dir_name);
        if let Some(found) = self.found_in(&prefix) {
            return Ok(found);
        }
        let command = format!(
            "npm install --no-save --no-audit --no-fund --prefix {} {}",
            prefix.display(),
            self.package
        );
        if !npm_available() {
            return Err(format!(
                "{what} not found under {} and npm is not installed to fetch it: apt-get install \
                 npm (then the tests run `{command}` themselves), or set {var}",
                prefix.display()
            ));
        }
        self.fetch_into(&prefix).map_err(|reason| {
            format!(
                "{what} not found under {} and `{command}` failed: {reason}",
                prefix.display()
            )
        })?;
        let found = self
            .found_in(&prefix)
            .ok_or_else(|| format!("`{command}` finished but left no {what}"))?;
        // Straight to stderr, past the test harness's capture: the one line says what was done.
        let _ = writeln!(
            std::io::stderr(),
            "qm-tests: {what} was missing; fetched {} with `{command}`",
            self.package
        );
        Ok(found)
    }

    fn found_in(&self, prefix: &Path) -> Option<PathBuf> {
        self.wanted
            .iter()
            .map(|relative| prefix.join(relative))
            .find(|path| path.exists())
    }

    /// Installs under a staging prefix beside `prefix`, then renames it to `prefix` (a
    /// leftover `prefix` without the wanted files, from an interrupted install, is moved aside
    /// first; losing the race to another process's complete copy is success).
    fn fetch_into(&self, prefix: &Path) -> Result<(), String> {
        let parent = prefix.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent)
            .map_err(|error| format!("create {}: {error}", parent.display()))?;
        let pid = std::process::id();
        let staging = parent.join(format!("{}.partial-{pid}", self.dir_name));
        let _ = std::fs::remove_dir_all(&staging);
        std::fs::create_dir_all(&staging)
            .map_err(|error| format!("create {}: {error}", staging.display()))?;
        let placed = self.run_npm_install(&staging).and_then(|()| {
            if self.found_in(&staging).is_none() {
                return Err(format!("npm finished but left no {}", self.what));
            }
            if prefix.exists() && self.found_in(prefix).is_none() {
                let aside = prefix.with_file_name(format!("{}.stale-{pid}", self.dir_name));
                // Another process may move the same leftover first: then there is nothing to do.
                if std::fs::rename(prefix, &aside).is_ok() {
                    let _ = std::fs::remove_dir_all(&aside);
                }
            }
            match std::fs::rename(&staging, prefix) {
                Ok(()) => Ok(()),
                Err(_) if self.found_in(prefix).is_some() => Ok(()),
                Err(error) => Err(format!(
                    "move {} to {}: {error}",
                    staging.display(),
                    prefix.display()
                )),
            }
        });
        // Nothing is left behind: on success the rename consumed the staging directory (or
        // another process won the race and this copy is surplus), on failure it is half-written.
        let _ = std::fs::remove_dir_all(&staging);
        placed
    }

    fn run_npm_install(&self, staging: &Path) -> Result<(), String> {
        let output = Command::new("npm")
            .args([
                "install",
                "--no-save",
                "--no-audit",
                "--no-fund",
                "--prefix",
            ])
            .arg(staging)
            .arg(self.package)
            .stdin(Stdio::null())
            .output()
            .map_err(|error| format!("start npm: {error}"))?;
        if output.status.success() {
            return Ok(());
        }
        // npm's last lines carry the reason (registry unreachable, no such version).
        let stderr = String::from_utf8_lossy(&output.stderr);
        let lines: Vec<&str> = stderr
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty())
            .collect();
        let tail = lines[lines.len().saturating_sub(3)..].join(" | ");
        Err(format!("npm exited with {}: {tail}", output.status))
    }
}

fn npm_available() -> bool {
    Command::new("npm")
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}
