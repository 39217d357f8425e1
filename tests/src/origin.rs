//! A small site for the inline gate to stand in front of: an axum app on an ephemeral loopback
//! port that says what it was sent (`/echo`), hashes a streamed upload without buffering it
//! (`/hash`), streams an answer whose last chunk waits for the test (`/slow`), answers with
//! hop-by-hop headers of its own (`/hop`), and a plain page anywhere else. It counts the
//! requests that reached it, so a test can prove the gate kept one away.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use futures::StreamExt;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

#[derive(Clone, Default)]
struct Shared {
    hits: Arc<AtomicUsize>,
    release: Arc<Notify>,
}

/// A running origin.
pub struct TestOrigin {
    /// `http://127.0.0.1:<port>`, what a room's proxyOrigin names.
    pub url: String,
    pub addr: SocketAddr,
    shared: Shared,
    task: JoinHandle<()>,
}

impl TestOrigin {
    pub async fn start() -> TestOrigin {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the origin");
        let addr = listener.local_addr().expect("origin address");
        let shared = Shared::default();
        let app = Router::new()
            .route("/echo", any(echo))
            .route("/hash", post(hash))
            .route("/slow", get(slow))
            .route("/hop", get(hop))
            .route("/hello", get(|| async { "hello" }))
            .fallback(page)
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        TestOrigin {
            url: format!("http://{addr}"),
            addr,
            shared,
            task,
        }
    }

    /// Requests that reached the origin so far.
    pub fn hits(&self) -> usize {
        self.shared.hits.load(Ordering::SeqCst)
    }

    /// Lets the `/slow` answer in progress send its last chunk.
    pub fn release_slow(&self) {
        self.shared.release.notify_one();
    }

    /// Stops the origin: its port refuses connections from now on.
    pub fn stop(&self) {
        self.task.abort();
    }
}

impl Drop for TestOrigin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn count(shared: &Shared) {
    shared.hits.fetch_add(1, Ordering::SeqCst);
}

/// `{method, uri, headers: {name: [values]}}` of the request as it arrived.
async fn echo(State(shared): State<Shared>, request: Request) -> Response {
    count(&shared);
    let mut headers: Map<String, Value> = Map::new();
    for (name, value) in request.headers() {
        let values = headers
            .entry(name.as_str().to_owned())
            .or_insert_with(|| json!([]));
        if let Some(values) = values.as_array_mut() {
            values.push(json!(value.to_str().unwrap_or("<binary>")));
        }
    }
    axum::Json(json!({
        "method": request.method().as_str(),
        "uri": request.uri().to_string(),
        "headers": headers,
    }))
    .into_response()
}

/// `{len, sha256}` of the body, read chunk by chunk as it streams in.
async fn hash(State(shared): State<Shared>, request: Request) -> Response {
    count(&shared);
    let mut stream = request.into_body().into_data_stream();
    let mut hasher = Sha256::new();
    let mut len = 0usize;
    let mut chunks = 0usize;
    while let Some(chunk) = stream.next().await {
        let Ok(chunk) = chunk else {
            return (http::StatusCode::BAD_REQUEST, "body broke off").into_response();
        };
        len += chunk.len();
        chunks += 1;
        hasher.update(&chunk);
    }
    axum::Json(json!({
        "len": len,
        "chunks": chunks,
        "sha256": hex::encode(hasher.finalize()),
    }))
    .into_response()
}

/// `first\n` at once, `last\n` only once the test calls [`TestOrigin::release_slow`].
async fn slow(State(shared): State<Shared>) -> Response {
    count(&shared);
    let release = shared.release.clone();
    let chunks = futures::stream::unfold(0u8, move |step| {
        let release = release.clone();
        async move {
            match step {
                0 => Some((Ok::<_, std::io::Error>("first\n"), 1)),
                1 => {
                    release.notified().await;
                    Some((Ok("last\n"), 2))
                }
                _ => None,
            }
        }
    });
    Response::builder()
        .header("content-type", "text/plain")
        .body(Body::from_stream(chunks))
        .unwrap_or_default()
}

/// An answer carrying connection-level headers a proxy must not pass on.
async fn hop(State(shared): State<Shared>) -> Response {
    count(&shared);
    Response::builder()
        .header("x-origin-hop", "1")
        .header("connection", "x-origin-hop")
        .header("keep-alive", "timeout=5")
        .header("x-origin-kept", "1")
        .body(Body::from("hop"))
        .unwrap_or_default()
}

async fn page(State(shared): State<Shared>, request: Request) -> Response {
    count(&shared);
    axum::response::Html(format!(
        "<!doctype html><title>site</title><p>site page {}</p>",
        request.uri()
    ))
    .into_response()
}
