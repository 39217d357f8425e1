//! The harness: a fake engine on 127.0.0.1:0, the real gateway in front of it on another
//! ephemeral port, and HTTP helpers that speak to it as a browser would.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use qm_core::config::Config;
use qm_core::shutdown::Shutdown;
use serde_json::{Value, json};

use crate::fake_engine::FakeEngine;

pub(crate) struct TestGateway {
    pub(crate) url: String,
    pub(crate) engine: FakeEngine,
    pub(crate) http: reqwest::Client,
    pub(crate) stop: Shutdown,
    pub(crate) server: tokio::task::JoinHandle<std::io::Result<()>>,
    pub(crate) _engine_stop: Shutdown,
}

pub(crate) async fn spawn_gateway(overrides: &[(&str, &str)]) -> TestGateway {
    let engine = FakeEngine::default();
    let (engine_addr, engine_stop) = engine.serve().await;
    let mut env: HashMap<String, String> = [
        ("SECRET", "gateway-http-test-secret-0123"),
        ("ADMIN_KEY", "gateway-test-admin-key"),
        ("PUBLIC_API_KEY", "gateway-test-public-key"),
        ("JOIN_LIMIT_PER_MIN", "100000"),
        ("SHUTDOWN_DRAIN_SEC", "2"),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), value.to_owned()))
    .collect();
    for (key, value) in overrides {
        env.insert((*key).to_owned(), (*value).to_owned());
    }
    let config = Arc::new(Config::from_source(&env).expect("valid test config"));
    let target = qm_proto::EngineTarget::from_config_at(&config, engine_addr).unwrap();
    let app = qm_gateway::GatewayApp::new(config, target.client(), target.health_channel());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let stop = Shutdown::new();
    let server = tokio::spawn(app.run(listener, None, stop.wait()));
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    TestGateway {
        url,
        engine,
        http,
        stop,
        server,
        _engine_stop: engine_stop,
    }
}

#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) headers: reqwest::header::HeaderMap,
    pub(crate) text: String,
    pub(crate) body: Value,
}

impl Reply {
    pub(crate) async fn read(response: reqwest::Response) -> Reply {
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Reply {
            status,
            headers,
            text,
            body,
        }
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }

    pub(crate) fn set_cookies(&self) -> Vec<String> {
        self.headers
            .get_all("set-cookie")
            .iter()
            .filter_map(|value| value.to_str().ok().map(str::to_owned))
            .collect()
    }

    pub(crate) fn cookie(&self, name: &str) -> Option<String> {
        self.set_cookies().iter().find_map(|cookie| {
            let pair = cookie.split(';').next()?;
            let (key, value) = pair.split_once('=')?;
            (key == name).then(|| value.to_owned())
        })
    }
}

impl TestGateway {
    pub(crate) async fn send(&self, request: reqwest::RequestBuilder) -> Reply {
        Reply::read(request.send().await.expect("the gateway answers")).await
    }

    pub(crate) async fn join(&self, room_id: &str, cookies: Option<&str>) -> Reply {
        let mut request = self
            .http
            .post(format!("{}/api/join", self.url))
            .json(&json!({ "roomId": room_id }));
        if let Some(cookies) = cookies {
            request = request.header("cookie", cookies);
        }
        self.send(request).await
    }

    /// A new visitor joins; the reply and the Cookie header its browser sends from now on.
    pub(crate) async fn join_as_new_visitor(&self, room_id: &str) -> (Reply, String) {
        let reply = self.join(room_id, None).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        let cookies = format!(
            "qm_{room_id}={}; qms_{room_id}={}",
            reply.cookie(&format!("qm_{room_id}")).unwrap(),
            reply.cookie(&format!("qms_{room_id}")).unwrap()
        );
        (reply, cookies)
    }

    pub(crate) async fn events(&self, path: &str, token: &str) -> Result<Frames, Reply> {
        let response = self
            .http
            .get(format!("{}{path}", self.url))
            .query(&[("token", token)])
            .send()
            .await
            .expect("the gateway answers");
        if response.status() != 200 {
            return Err(Reply::read(response).await);
        }
        let headers = response.headers().clone();
        Ok(Frames {
            headers,
            body: response.bytes_stream().boxed(),
            buffer: String::new(),
        })
    }

    pub(crate) async fn stop(self) {
        self.stop.trigger();
        let _ = tokio::time::timeout(Duration::from_secs(10), self.server).await;
    }
}

pub(crate) struct Frames {
    pub(crate) headers: reqwest::header::HeaderMap,
    pub(crate) body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    pub(crate) buffer: String,
}

impl std::fmt::Debug for Frames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Frames")
            .field("buffer", &self.buffer)
            .finish()
    }
}

impl Frames {
    /// The next `(event, data)` within `wait`.
    pub(crate) async fn next(&mut self, wait: Duration) -> Option<(String, Value)> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let raw: String = self.buffer.drain(..end + 2).collect();
                let mut event = String::new();
                let mut data = String::new();
                for line in raw.lines() {
                    if let Some(value) = line.strip_prefix("event:") {
                        event = value.trim().to_owned();
                    } else if let Some(value) = line.strip_prefix("data:") {
                        data.push_str(value.trim_start());
                    }
                }
                return Some((event, serde_json::from_str(&data).unwrap_or(Value::Null)));
            }
            let chunk = tokio::time::timeout_at(deadline, self.body.next())
                .await
                .ok()??
                .ok()?;
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    pub(crate) async fn next_where(
        &mut self,
        wait: Duration,
        accept: impl Fn(&Value) -> bool,
    ) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let (_, data) = self.next(left).await?;
            if accept(&data) {
                return Some(data);
            }
        }
    }

    pub(crate) async fn ends_within(&mut self, wait: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            match tokio::time::timeout_at(deadline, self.body.next()).await {
                Err(_) => return false,
                Ok(None) | Ok(Some(Err(_))) => return true,
                Ok(Some(Ok(_))) => continue,
            }
        }
    }
}
