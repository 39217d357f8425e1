//! A webhook receiver for the alert tests: an axum app on an ephemeral loopback port that keeps
//! every JSON body posted to it, in order, and answers 200 — or, once told to refuse, 500, as
//! a receiver that is down or misconfigured would.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::routing::post;
use http::StatusCode;
use serde_json::Value;
use tokio::task::JoinHandle;

#[derive(Clone, Default)]
struct Shared {
    pages: Arc<Mutex<Vec<Value>>>,
    refuse: Arc<AtomicBool>,
}

/// A running receiver.
pub struct WebhookReceiver {
    /// `http://127.0.0.1:<port>/hook`, what ALERT_WEBHOOK_URL names.
    pub url: String,
    shared: Shared,
    task: JoinHandle<()>,
}

async fn receive(State(shared): State<Shared>, body: axum::Json<Value>) -> StatusCode {
    if shared.refuse.load(Ordering::Relaxed) {
        return StatusCode::INTERNAL_SERVER_ERROR;
    }
    shared
        .pages
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(body.0);
    StatusCode::OK
}

impl WebhookReceiver {
    pub async fn start() -> WebhookReceiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the webhook receiver");
        let addr = listener.local_addr().expect("receiver address");
        let shared = Shared::default();
        let app = Router::new()
            .route("/hook", post(receive))
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        WebhookReceiver {
            url: format!("http://{addr}/hook"),
            shared,
            task,
        }
    }

    /// From now on, answer 500 (or 200 again).
    pub fn refuse(&self, refuse: bool) {
        self.shared.refuse.store(refuse, Ordering::Relaxed);
    }

    /// Every page taken so far, oldest first.
    pub fn pages(&self) -> Vec<Value> {
        self.shared
            .pages
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// `(alertname, status)` of every page taken so far, oldest first.
    pub fn transitions(&self) -> Vec<(String, String)> {
        self.pages()
            .iter()
            .map(|page| {
                (
                    page["alerts"][0]["labels"]["alertname"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    page["status"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }

    /// Waits until a page with this alertname and status arrives; panics after `limit`.
    pub async fn wait_for(&self, alertname: &str, status: &str, limit: Duration) -> Value {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let found = self.pages().into_iter().find(|page| {
                page["alerts"][0]["labels"]["alertname"] == alertname && page["status"] == status
            });
            if let Some(page) = found {
                return page;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no {alertname} {status} page within {limit:?}; pages so far: {:?}",
                self.transitions()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for WebhookReceiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}
