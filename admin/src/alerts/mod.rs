//! Alerts: the admin process evaluates the rules (`rules`) every ALERT_EVAL_MS from what the
//! engine answers, keeps their state, and pages each transition to ALERT_WEBHOOK_URL
//! (`webhook`). `GET /api/admin/alerts` shows the state, `POST /api/admin/alerts` sends a test
//! page. Without a webhook the rules still run and show in the console; nothing is sent.
//!
//! A page that could not be delivered is tried again at the next evaluations, in order, up to
//! `DELIVERY_ATTEMPTS` times. Each admin process evaluates on its own: several of them page the
//! same alert with the same fingerprint (OPERATIONS.md, Alerts, says how to run them).

mod rules;
mod webhook;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use qm_core::config::{AlertSettings, Config};
use qm_core::{ApiError, ErrorCode};
use qm_proto::{EngineClient, ListRoomsRequest, StatsRequest};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::AdminState;
use crate::auth::Authenticated;
use qm_http::AppError;
use rules::{EngineSeen, Evaluator, RoomSeen, Rule, Transition};
use webhook::{Page, Webhook};

/// Transitions kept for the state view, newest first.
const RECENT: usize = 50;
/// Times a page is offered to the webhook before it is given up (and logged).
const DELIVERY_ATTEMPTS: u32 = 5;

/// The alerts of this admin process.
pub(crate) struct Alerts {
    settings: AlertSettings,
    webhook: Option<Webhook>,
    book: Mutex<Book>,
}

/// Everything the state view shows, behind one lock.
struct Book {
    rules: Evaluator,
    recent: VecDeque<Value>,
    pending: VecDeque<(Page, u32)>,
    evaluated_at_ms: Option<i64>,
    sent: u64,
    failed: u64,
    given_up: u64,
    last_delivery: Option<Value>,
}

impl Alerts {
    pub(crate) fn from_config(config: &Config) -> Alerts {
        Alerts {
            settings: config.alerts,
            webhook: config.alert_webhook_url().cloned().map(Webhook::new),
            book: Mutex::new(Book {
                rules: Evaluator::new(config.alerts),
                recent: VecDeque::new(),
                pending: VecDeque::new(),
                evaluated_at_ms: None,
                sent: 0,
                failed: 0,
                given_up: 0,
                last_delivery: None,
            }),
        }
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        self.book
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// One evaluation: look at the engine, apply the rules, page what changed.
    async fn evaluate(&self, engine: &EngineClient) {
        let seen = observe(engine).await;
        let now_ms = qm_core::clock::now_ms();
        {
            let mut book = self.book();
            let transitions = book.rules.observe(now_ms, &seen);
            book.evaluated_at_ms = Some(now_ms);
            for transition in &transitions {
                log_transition(transition);
                book.recent.push_front(transition_json(transition));
                book.recent.truncate(RECENT);
                if self.webhook.is_some() {
                    book.pending
                        .push_back((Page::from_transition(transition), 0));
                }
            }
        }
        self.deliver_pending().await;
    }

    /// Sends the queued pages in order; stops at the first refusal (tried again next time).
    async fn deliver_pending(&self) {
        let Some(webhook) = &self.webhook else {
            return;
        };
        loop {
            let Some((page, attempts)) = self.book().pending.front().cloned() else {
                return;
            };
            let outcome = webhook.send(&page).await;
            let mut book = self.book();
            book.record(&page, &outcome);
            book.pending.pop_front();
            if let Err(refused) = outcome {
                if attempts + 1 < DELIVERY_ATTEMPTS {
                    book.pending.push_front((page, attempts + 1));
                } else {
                    book.given_up += 1;
                    tracing::warn!(alertname = page.alertname, room = ?page.room, %refused, "alert page given up after {DELIVERY_ATTEMPTS} attempts");
                }
                return;
            }
        }
    }

    /// What `/metrics` shows of the alerts.
    pub(crate) fn counts(&self) -> crate::prometheus::AlertCounts {
        let book = self.book();
        let mut firing: Vec<(&'static str, u64)> =
            Rule::ALL.iter().map(|rule| (rule.alertname(), 0)).collect();
        for (rule, _) in book.rules.firing().keys() {
            if let Some(entry) = firing
                .iter_mut()
                .find(|(name, _)| *name == rule.alertname())
            {
                entry.1 += 1;
            }
        }
        crate::prometheus::AlertCounts {
            firing,
            delivered: book.sent,
            failed: book.failed,
        }
    }

    /// The state view.
    fn view(&self) -> Value {
        let book = self.book();
        let firing: Vec<Value> = book
            .rules
            .firing()
            .iter()
            .map(|((rule, room), firing)| {
                json!({
                    "rule": rule.name(),
                    "alertname": rule.alertname(),
                    "severity": rule.severity(),
                    "roomId": room,
                    "since": firing.since_ms,
                    "clearSince": firing.clear_since_ms,
                    "summary": firing.summary,
                })
            })
            .collect();
        let settings = self.settings;
        json!({
            "enabled": self.webhook.is_some(),
            "evalMs": settings.eval_ms,
            "evaluatedAt": book.evaluated_at_ms,
            "rules": Rule::ALL.iter().map(|rule| json!({
                "rule": rule.name(),
                "alertname": rule.alertname(),
                "severity": rule.severity(),
                "fires": rule_fires(*rule, settings),
            })).collect::<Vec<_>>(),
            "resolveSec": settings.resolve_sec,
            "firing": firing,
            "recent": book.recent,
            "delivery": {
                "sent": book.sent,
                "failed": book.failed,
                "givenUp": book.given_up,
                "pending": book.pending.len(),
                "last": book.last_delivery,
            },
        })
    }
}

/// What makes a rule fire, with this process's thresholds.
fn rule_fires(rule: Rule, settings: AlertSettings) -> String {
    match rule {
        Rule::Surge => format!(
            "a room's arrivals over the last {} s reach {}/min; clear under {}/min",
            settings.surge_window_sec,
            settings.surge_per_min,
            settings.surge_per_min / 2
        ),
        Rule::Stalled => format!(
            "people wait in a room and nobody is admitted for {} s",
            settings.stall_sec
        ),
        Rule::Storage => "the engine's store cannot persist (Valkey or Postgres)".to_owned(),
        Rule::Readiness => "the engine does not answer this admin process".to_owned(),
    }
}

fn transition_json(transition: &Transition) -> Value {
    json!({
        "rule": transition.rule.name(),
        "alertname": transition.rule.alertname(),
        "roomId": transition.room,
        "status": if transition.firing { "firing" } else { "resolved" },
        "at": transition.at_ms,
        "startedAt": transition.started_at_ms,
        "summary": transition.summary,
    })
}

impl Book {
    /// Counts a delivery, the evaluator's or a test page's, and keeps it as the last one.
    fn record(&mut self, page: &Page, outcome: &Result<u16, webhook::Refused>) {
        match outcome {
            Ok(_) => self.sent += 1,
            Err(_) => self.failed += 1,
        }
        self.last_delivery = Some(json!({
            "at": qm_core::clock::now_ms(),
            "alertname": page.alertname,
            "ok": outcome.is_ok(),
            "status": outcome.as_ref().ok(),
            "error": outcome.as_ref().err().map(ToString::to_string),
        }));
    }
}

fn log_transition(transition: &Transition) {
    if transition.firing {
        tracing::warn!(rule = transition.rule.name(), room = ?transition.room, "alert firing: {}", transition.summary);
    } else {
        tracing::info!(rule = transition.rule.name(), room = ?transition.room, "alert resolved: {}", transition.summary);
    }
}

/// The engine's answer: its storage and every room's counters, or why it did not answer.
async fn observe(engine: &EngineClient) -> EngineSeen {
    let stats = match engine.clone().stats(StatsRequest {}).await {
        Ok(stats) => stats.into_inner(),
        Err(status) => return EngineSeen::Unreachable(unreachable_reason(&status)),
    };
    let rooms = match engine.clone().list_rooms(ListRoomsRequest {}).await {
        Ok(reply) => reply.into_inner().room_json,
        Err(status) => return EngineSeen::Unreachable(unreachable_reason(&status)),
    };
    EngineSeen::Answered {
        storage_ready: stats.storage_ready,
        store: stats.store,
        rooms: rooms.iter().filter_map(|json| room_seen(json)).collect(),
    }
}

fn unreachable_reason(status: &tonic::Status) -> String {
    if status.code() == tonic::Code::Unauthenticated {
        qm_proto::client::CREDENTIAL_REFUSED.to_owned()
    } else {
        format!("{:?}: {}", status.code(), status.message())
    }
}

/// The counters the rules read from an admin room object.
fn room_seen(json: &str) -> Option<RoomSeen> {
    let room: Value = serde_json::from_str(json).ok()?;
    let number = |field: &str| room[field].as_u64().unwrap_or(0);
    let text = |field: &str| room[field].as_str().unwrap_or_default().to_owned();
    Some(RoomSeen {
        id: text("id"),
        state: text("state"),
        effective_state: text("effectiveState"),
        rate_per_minute: number("ratePerMinute"),
        waiting: number("waiting"),
        pre_queue: number("preQueue"),
        joined_total: number("nextTicket").saturating_sub(1),
        passed_total: number("passedTotal"),
        created_at_ms: room["createdAt"].as_i64().unwrap_or(0),
    })
}

/// Evaluates every ALERT_EVAL_MS until the process stops.
pub(crate) async fn run(
    alerts: Arc<Alerts>,
    engine: EngineClient,
    mut stopping: watch::Receiver<bool>,
) {
    let mut ticks = tokio::time::interval(Duration::from_millis(alerts.settings.eval_ms));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The watch's guard is not Send: only whether the wait ended leaves this future.
    let stopped = async move { stopping.wait_for(|stopping| *stopping).await.is_ok() };
    tokio::pin!(stopped);
    loop {
        tokio::select! {
            _ = ticks.tick() => alerts.evaluate(&engine).await,
            _ = &mut stopped => return,
        }
    }
}

/// GET /api/admin/alerts.
pub(crate) async fn state(_: Authenticated, State(state): State<AdminState>) -> Json<Value> {
    Json(state.alerts.view())
}

/// POST /api/admin/alerts: a test page, so an operator sees the webhook works before the night.
pub(crate) async fn test_page(
    caller: Authenticated,
    State(state): State<AdminState>,
) -> Result<Json<Value>, AppError> {
    let Some(webhook) = &state.alerts.webhook else {
        return Err(ApiError::new(
            ErrorCode::AlertsDisabled,
            "no ALERT_WEBHOOK_URL is configured: alerts are evaluated and shown, never sent",
        )
        .into());
    };
    let page = Page {
        alertname: "QmTestPage",
        severity: "info",
        room: None,
        firing: true,
        starts_at_ms: qm_core::clock::now_ms(),
        ends_at_ms: None,
        summary: format!(
            "test page from Queue Manager, sent by {}: alerts reach this receiver",
            caller.principal.name
        ),
    };
    let outcome = webhook.send(&page).await;
    state.alerts.book().record(&page, &outcome);
    match outcome {
        Ok(status) => Ok(Json(
            json!({ "ok": true, "delivered": true, "status": status }),
        )),
        Err(refused) => Err(ApiError::new(ErrorCode::WebhookFailed, refused.to_string()).into()),
    }
}
