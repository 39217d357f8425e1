//! The test harness: [`spawn_app`] starts the real engine, gateway and admin on ephemeral
//! loopback ports inside the test process, composed by the same [`qm::Components`] as `qm all`
//! (they still talk gRPC to each other), and gives the test HTTP helpers to speak to them as a
//! browser, a connector or an operator would.
//!
//! The store comes from `QM_TEST_STORE`: `memory` (the default) or `valkey`, which starts a
//! private redis-server and a fresh Postgres database for each app ([`servers`]), so the same
//! suite proves both stores.

pub mod axe;
pub mod browser;
pub mod npm;
pub mod origin;
pub mod postgres;
pub mod process;
pub mod prometheus;
pub mod servers;
pub mod smtp;
pub mod sse;
pub mod tokens;
pub mod webhook;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use qm::{Components, EngineSite, Listeners};
use qm_core::config::Config;
use qm_core::shutdown::Shutdown;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub use smtp::SmtpSink;
pub use sse::SseStream;

/// The admin key every spawned app uses unless a test overrides ADMIN_KEY.
pub const TEST_ADMIN_KEY: &str = "test-admin-key-0123";

/// One running set of components.
pub struct TestApp {
    /// `http://127.0.0.1:<port>` of the gateway.
    pub gateway: String,
    /// `http://127.0.0.1:<port>` of the gateway's private metrics listener.
    pub gateway_metrics: String,
    /// `http://127.0.0.1:<port>` of the admin process.
    pub admin: String,
    pub engine_addr: SocketAddr,
    pub config: Arc<Config>,
    /// The servers behind a durable store (`None` on the memory store).
    pub backing: Option<Backing>,
    /// A client without a cookie store: tests pass cookies explicitly.
    pub http: reqwest::Client,
    /// Set when the app stops (or is dropped): every component drains and ends.
    shutdown: Shutdown,
    /// The components' run ([`qm::Components::run`]): edges drain first, then the engine.
    task: Option<JoinHandle<()>>,
}

/// The private Valkey and the fresh database of an app on the durable store.
pub struct Backing {
    pub valkey: servers::PrivateValkey,
    pub database: servers::FreshDatabase,
}

impl Backing {
    pub async fn start(options: servers::ValkeyOptions) -> Backing {
        Backing {
            valkey: servers::PrivateValkey::start(options).await,
            database: servers::FreshDatabase::create().await,
        }
    }

    /// The settings that point a process at these servers.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("STORE".to_owned(), "valkey".to_owned()),
            ("SIDESTORE".to_owned(), "pg".to_owned()),
            ("VALKEY_URL".to_owned(), self.valkey.url()),
            ("DATABASE_URL".to_owned(), self.database.url()),
        ]
    }
}

/// The store the suite runs on: `QM_TEST_STORE` (memory or valkey).
pub fn test_store() -> String {
    match std::env::var("QM_TEST_STORE").as_deref() {
        Err(_) | Ok("" | "memory") => "memory".to_owned(),
        Ok("valkey") => "valkey".to_owned(),
        Ok(other) => panic!("QM_TEST_STORE={other:?}: use memory or valkey"),
    }
}

/// The settings every test process starts from.
pub fn test_env() -> HashMap<String, String> {
    [
        ("SECRET", "integration-test-secret-0123456789"),
        ("ADMIN_KEY", TEST_ADMIN_KEY),
        ("PUBLIC_API_KEY", "public-api-key-0123"),
        // Every test client is one loopback address: the per-address budgets are raised here
        // and set low by the tests of those limits.
        ("JOIN_LIMIT_PER_MIN", "100000000"),
        ("STATUS_LIMIT_PER_MIN", "100000000"),
        ("PAGE_LIMIT_PER_MIN", "100000000"),
        ("STREAM_OPEN_LIMIT_PER_MIN", "100000000"),
        ("ADMIN_AUTH_FAIL_PER_MIN", "100000"),
        ("SHUTDOWN_DRAIN_SEC", "2"),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), value.to_owned()))
    .collect()
}

/// Starts every component with the test defaults.
pub async fn spawn_app() -> TestApp {
    spawn_app_with(&[]).await
}

/// Starts every component, with `overrides` on top of the test defaults (a map, never the
/// process environment, so tests run in parallel).
pub async fn spawn_app_with(overrides: &[(&str, &str)]) -> TestApp {
    let wants_memory = overrides
        .iter()
        .any(|(key, value)| *key == "STORE" && *value == "memory");
    let backing = if test_store() == "valkey" && !wants_memory {
        Some(Backing::start(servers::ValkeyOptions::default()).await)
    } else {
        None
    };
    spawn_app_on(backing, overrides).await
}

/// Starts every component on `backing` (the durable store) or, without one, the memory store.
pub async fn spawn_app_on(backing: Option<Backing>, overrides: &[(&str, &str)]) -> TestApp {
    let mut env = test_env();
    if let Some(backing) = &backing {
        env.extend(backing.env());
    }
    for (key, value) in overrides {
        env.insert((*key).to_owned(), (*value).to_owned());
    }
    let config = Arc::new(Config::from_source(&env).expect("test configuration is valid"));
    let mut app = start(config, EngineSite::Local(bind().await)).await;
    app.backing = backing;
    app.wait_ready().await;
    app
}

/// Starts a gateway and an admin process in this test process, talking to an engine that runs
/// elsewhere (a `qm engine` child process in the fault tests). Not waited on for readiness:
/// the engine may be down on purpose.
pub async fn spawn_edge(engine_addr: SocketAddr, env: &HashMap<String, String>) -> TestApp {
    let config = Arc::new(Config::from_source(env).expect("test configuration is valid"));
    start(config, EngineSite::Remote(engine_addr.to_string())).await
}

/// Builds the components through `qm`'s own composition (what `qm all` runs) on ephemeral
/// loopback listeners, and runs them in a task until the app stops.
async fn start(config: Arc<Config>, engine: EngineSite) -> TestApp {
    let gateway_listener = bind().await;
    let gateway = format!("http://{}", gateway_listener.local_addr().expect("address"));
    let admin_listener = bind().await;
    let admin = format!("http://{}", admin_listener.local_addr().expect("address"));
    let metrics_listener = bind().await;
    let gateway_metrics = format!("http://{}", metrics_listener.local_addr().expect("address"));
    let listeners = Listeners {
        engine,
        gateway: Some(gateway_listener),
        gateway_metrics: Some(metrics_listener),
        admin: Some(admin_listener),
    };
    let components = Components::build(config.clone(), listeners)
        .await
        .expect("components build");
    let engine_addr: SocketAddr = components
        .engine_target()
        .parse()
        .expect("the engine's address (bound here, or a socket address elsewhere)");
    let shutdown = Shutdown::new();
    let running = components.run(shutdown.clone());
    let task = tokio::spawn(async move {
        if let Err(error) = running.await {
            panic!("components stopped: {error}");
        }
    });

    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(512)
        .timeout(Duration::from_secs(30))
        .build()
        .expect("http client builds");
    TestApp {
        gateway,
        gateway_metrics,
        admin,
        engine_addr,
        config,
        backing: None,
        http,
        shutdown,
        task: Some(task),
    }
}

async fn bind() -> TcpListener {
    TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind an ephemeral loopback port")
}

/// A room body with the fields every test room needs; `extra` overrides or adds fields.
pub fn room_body(id: &str, rate_per_minute: u32, extra: Value) -> Value {
    let mut body = json!({
        "id": id,
        "name": format!("Room {id}"),
        "targetUrl": "https://shop.example/checkout",
        "ratePerMinute": rate_per_minute,
        "queueMaxPerIp": null,
    });
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        for (key, value) in extra {
            body.insert(key.clone(), value.clone());
        }
    }
    body
}

/// A parsed HTTP answer.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
    pub text: String,
}

impl Reply {
    async fn read(response: reqwest::Response) -> Reply {
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Reply {
            status,
            headers,
            body,
            text,
        }
    }

    /// The `code` of an `{error, code}` body.
    pub fn code(&self) -> &str {
        self.body["code"].as_str().unwrap_or("")
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }

    /// Every Set-Cookie header as `name=value; attributes`.
    pub fn set_cookies(&self) -> Vec<String> {
        self.headers
            .get_all(reqwest::header::SET_COOKIE)
            .iter()
            .filter_map(|value| value.to_str().ok().map(str::to_owned))
            .collect()
    }

    /// The value a Set-Cookie header gives cookie `name`, if any.
    pub fn cookie(&self, name: &str) -> Option<String> {
        self.set_cookies().iter().find_map(|cookie| {
            let (pair, _) = cookie.split_once(';').unwrap_or((cookie, ""));
            let (key, value) = pair.split_once('=')?;
            (key.trim() == name).then(|| value.trim().to_owned())
        })
    }
}

impl TestApp {
    /// Waits until both HTTP processes report ready.
    /// Waits until the gateway and the admin process both answer /healthz 200.
    /// A gRPC client of this app's engine, presenting the configured credential.
    pub fn engine(&self) -> qm_proto::EngineClient {
        qm_proto::EngineTarget::from_config_at(&self.config, self.engine_addr)
            .expect("the test engine is reachable as configured")
            .client()
    }

    pub async fn wait_ready(&self) {
        for _ in 0..200 {
            let gateway = self.get(&format!("{}/healthz", self.gateway)).await.status;
            let admin = self.get(&format!("{}/healthz", self.admin)).await.status;
            if gateway == 200 && admin == 200 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("components did not become ready within 5 s");
    }

    pub async fn get(&self, url: &str) -> Reply {
        Reply::read(
            self.http
                .get(url)
                .send()
                .await
                .expect("request reaches the server"),
        )
        .await
    }

    pub async fn send(&self, request: reqwest::RequestBuilder) -> Reply {
        Reply::read(request.send().await.expect("request reaches the server")).await
    }

    /// An authenticated admin call: `method` on `/api/admin<path>`.
    pub async fn admin_call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Reply {
        let mut request = self
            .http
            .request(method, format!("{}/api/admin{path}", self.admin))
            .bearer_auth(TEST_ADMIN_KEY);
        if let Some(body) = body {
            request = request.json(&body);
        }
        self.send(request).await
    }

    pub async fn admin_post(&self, path: &str, body: Value) -> Reply {
        self.admin_call(reqwest::Method::POST, path, Some(body))
            .await
    }

    /// Creates a room (or fails the test).
    pub async fn create_room(&self, body: Value) -> Value {
        let reply = self.admin_post("/rooms", body).await;
        assert_eq!(reply.status, 200, "create room: {}", reply.text);
        reply.body["room"].clone()
    }

    /// The admin object of one room.
    pub async fn room(&self, id: &str) -> Value {
        let reply = self
            .admin_call(reqwest::Method::GET, &format!("/rooms/{id}"), None)
            .await;
        assert_eq!(reply.status, 200, "get room: {}", reply.text);
        reply.body["room"].clone()
    }

    /// POST /api/join with an optional body token and Cookie header.
    pub async fn join(&self, room_id: &str, token: Option<&str>, cookies: Option<&str>) -> Reply {
        let mut body = json!({ "roomId": room_id });
        if let Some(token) = token {
            body["token"] = json!(token);
        }
        let mut request = self
            .http
            .post(format!("{}/api/join", self.gateway))
            .json(&body);
        if let Some(cookies) = cookies {
            request = request.header(reqwest::header::COOKIE, cookies);
        }
        self.send(request).await
    }

    /// A fresh visitor joins; returns the reply and the Cookie header that browser would send.
    pub async fn join_as_new_visitor(&self, room_id: &str) -> (Reply, String) {
        let reply = self.join(room_id, None, None).await;
        assert_eq!(reply.status, 200, "join: {}", reply.text);
        let cookies = format!(
            "qm_{room_id}={}; qms_{room_id}={}",
            reply
                .cookie(&format!("qm_{room_id}"))
                .expect("qm_ cookie set"),
            reply
                .cookie(&format!("qms_{room_id}"))
                .expect("qms_ cookie set"),
        );
        (reply, cookies)
    }

    /// GET /api/status?token=.
    pub async fn status(&self, token: &str) -> Reply {
        let request = self
            .http
            .get(format!("{}/api/status", self.gateway))
            .query(&[("token", token)]);
        self.send(request).await
    }

    /// Opens the visitor event stream at `path` (`/events`, `/api/events`, `/api/v1/events`).
    pub async fn events(&self, path: &str, token: &str) -> Result<SseStream, Reply> {
        let request = self
            .http
            .get(format!("{}{path}", self.gateway))
            .query(&[("token", token)]);
        SseStream::open(request).await
    }

    /// Stops every component and waits for them to finish.
    pub async fn stop(mut self) {
        self.shutdown.trigger();
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
        }
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.shutdown.trigger();
    }
}
