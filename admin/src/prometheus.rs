//! `GET /metrics`: the Prometheus text exposition (format 0.0.4) of the rooms, the engine and this
//! process's alerts, behind a read credential (the monitor token, viewer or above — room ids and
//! depths are commercially sensitive).
//!
//! The rooms' figures are read at each scrape from the engine's admin room objects, the numbers
//! the listing shows, so a dashboard and the console never disagree; the engine's own figures
//! (journal, backends, rebuilds, fail-open checks) come from its `Metrics` call, already encoded.
//! An engine that does not answer is reported as `qm_engine_up 0` in a scrape that still
//! succeeds, so the scraper tells "the engine is down" from "the admin is down".
//!
//! A room is a label value; at most [`MAX_ROOMS_EXPOSED`] rooms are exposed (the oldest first),
//! so a runaway number of rooms cannot blow up the scraper's series. `qm_rooms` counts them all.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::header::CONTENT_TYPE;
use prometheus::core::Collector;
use prometheus::{Encoder, GaugeVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, TextEncoder};
use qm_proto::{ListRoomsRequest, MetricsRequest};
use serde_json::Value;

use crate::AdminState;
use crate::auth::Authenticated;

/// Rooms exposed as label values, at most.
pub(crate) const MAX_ROOMS_EXPOSED: usize = 1_000;

const CONTENT_TYPE_0_0_4: &str = "text/plain; version=0.0.4; charset=utf-8";

/// GET /metrics.
pub(crate) async fn metrics(_: Authenticated, State(state): State<AdminState>) -> Response {
    let mut rooms_call = state.engine.clone();
    let mut metrics_call = state.engine.clone();
    let (rooms, engine) = tokio::join!(
        rooms_call.list_rooms(ListRoomsRequest {}),
        metrics_call.metrics(MetricsRequest {}),
    );
    let rooms: Option<Vec<Value>> = rooms.ok().map(|reply| {
        reply
            .into_inner()
            .room_json
            .iter()
            .filter_map(|room| serde_json::from_str(room).ok())
            .collect()
    });
    let engine_text = engine.ok().map(|reply| reply.into_inner().text);
    let alerts = state.alerts.counts();
    let mut text = exposition(rooms.as_deref(), &alerts);
    if let Some(engine_text) = engine_text {
        text.push_str(&engine_text);
    }
    ([(CONTENT_TYPE, CONTENT_TYPE_0_0_4)], text).into_response()
}

/// What the alerts contribute: firing alerts per alert name, pages delivered and failed.
#[derive(Debug, Default)]
pub(crate) struct AlertCounts {
    pub(crate) firing: Vec<(&'static str, u64)>,
    pub(crate) delivered: u64,
    pub(crate) failed: u64,
}

/// The per-room families, filled from the room objects.
struct RoomFamilies {
    gauges: Vec<(&'static str, IntGaugeVec)>,
    counters: Vec<(&'static str, IntCounterVec)>,
    rates: Vec<(&'static str, f64, GaugeVec)>,
    estimated_wait: GaugeVec,
    unbounded: IntGaugeVec,
    state: IntGaugeVec,
}

fn labelled<T>(
    make: impl FnOnce(Opts, &[&str]) -> prometheus::Result<T>,
    name: &str,
    help: &str,
    labels: &[&str],
) -> T {
    make(Opts::new(name, help), labels).expect("a valid metric name and labels")
}

impl RoomFamilies {
    fn new() -> RoomFamilies {
        let gauge = |field, name, help| (field, labelled(IntGaugeVec::new, name, help, &["room"]));
        let counter =
            |field, name, help| (field, labelled(IntCounterVec::new, name, help, &["room"]));
        let rate = |field, scale, name, help| {
            (field, scale, labelled(GaugeVec::new, name, help, &["room"]))
        };
        RoomFamilies {
            gauges: vec![
                gauge(
                    "waiting",
                    "qm_room_waiting",
                    "Tickets waiting in the room's line.",
                ),
                gauge(
                    "preQueue",
                    "qm_room_pre_queue",
                    "Entries in the room's pre-queue, waiting for the doors to open.",
                ),
                gauge(
                    "activePasses",
                    "qm_room_active_passes",
                    "Passes holding a maxConcurrent slot now.",
                ),
                gauge(
                    "doorSessions",
                    "qm_room_door_sessions",
                    "Door sessions open now (admitted visitors on the site).",
                ),
            ],
            counters: vec![
                counter(
                    "joinedTotal",
                    "qm_room_joins_total",
                    "Tickets issued since the room was created.",
                ),
                counter(
                    "passedTotal",
                    "qm_room_passes_total",
                    "Passes granted by outflow and flush since the room was created.",
                ),
                counter(
                    "ejectedTotal",
                    "qm_room_ejects_total",
                    "Tickets ejected from the line or as passes since the room was created.",
                ),
                counter(
                    "purgedTotal",
                    "qm_room_purged_total",
                    "Waiting tickets and pre-queue entries purged since the room was created.",
                ),
            ],
            rates: vec![
                rate(
                    "passedLastMin",
                    1.0 / 60.0,
                    "qm_room_outflow_per_second",
                    "Measured outflow: passes granted over the last minute, per second.",
                ),
                rate(
                    "rate",
                    1.0 / 60.0,
                    "qm_room_configured_rate_per_second",
                    "The room's configured outflow (ratePerMinute), per second.",
                ),
                rate(
                    "oldestWaitSec",
                    1.0,
                    "qm_room_oldest_wait_seconds",
                    "How long the head of the line has waited.",
                ),
            ],
            estimated_wait: labelled(
                GaugeVec::new,
                "qm_room_estimated_wait_seconds",
                "The wait quoted to a visitor joining now; absent while the room admits nobody.",
                &["room"],
            ),
            unbounded: labelled(
                IntGaugeVec::new,
                "qm_room_wait_unbounded",
                "1 while the room admits nobody (paused, rate 0 or no outflow): no wait can be quoted.",
                &["room"],
            ),
            state: labelled(
                IntGaugeVec::new,
                "qm_room_state",
                "1 for the room's effective state (active, paused, bypass or scheduled).",
                &["room", "state"],
            ),
        }
    }

    fn record(&self, room: &Value) {
        let Some(id) = room.get("id").and_then(Value::as_str) else {
            return;
        };
        let number = |field: &str| match field {
            // Tickets are minted from 1, so the next one says how many were issued.
            "joinedTotal" => room
                .get("nextTicket")
                .and_then(Value::as_u64)
                .map(|next| next.saturating_sub(1)),
            _ => room.get(field).and_then(Value::as_u64),
        };
        for (field, gauge) in &self.gauges {
            let value = number(field).unwrap_or(0);
            gauge
                .with_label_values(&[id])
                .set(i64::try_from(value).unwrap_or(i64::MAX));
        }
        for (field, counter) in &self.counters {
            counter
                .with_label_values(&[id])
                .inc_by(number(field).unwrap_or(0));
        }
        for (field, scale, gauge) in &self.rates {
            let value = number(field).unwrap_or(0) as f64 * scale;
            gauge.with_label_values(&[id]).set(value);
        }
        // No number is the honest estimate of a room that admits nobody: the series is left out
        // and `qm_room_wait_unbounded` says why (the exposition has no portable infinity).
        let estimate = room.get("estWaitSec").and_then(Value::as_u64);
        if let Some(seconds) = estimate {
            self.estimated_wait
                .with_label_values(&[id])
                .set(seconds as f64);
        }
        self.unbounded
            .with_label_values(&[id])
            .set(i64::from(estimate.is_none()));
        if let Some(state) = room.get("effectiveState").and_then(Value::as_str) {
            self.state.with_label_values(&[id, state]).set(1);
        }
    }

    fn collectors(self) -> Vec<Box<dyn Collector>> {
        let mut all: Vec<Box<dyn Collector>> = Vec::new();
        all.extend(
            self.gauges
                .into_iter()
                .map(|(_, gauge)| Box::new(gauge) as Box<dyn Collector>),
        );
        all.extend(
            self.counters
                .into_iter()
                .map(|(_, counter)| Box::new(counter) as Box<dyn Collector>),
        );
        all.extend(
            self.rates
                .into_iter()
                .map(|(_, _, gauge)| Box::new(gauge) as Box<dyn Collector>),
        );
        all.push(Box::new(self.estimated_wait));
        all.push(Box::new(self.unbounded));
        all.push(Box::new(self.state));
        all
    }
}

/// This process's part of the exposition: the engine's reach, the rooms (`None`: the engine did
/// not answer), the alerts.
pub(crate) fn exposition(rooms: Option<&[Value]>, alerts: &AlertCounts) -> String {
    let registry = prometheus::Registry::new();
    let mut collectors: Vec<Box<dyn Collector>> = Vec::new();
    let engine_up = IntGauge::new(
        "qm_engine_up",
        "1 when the engine answered this scrape, else 0 (and no room figures).",
    )
    .expect("a valid name");
    engine_up.set(i64::from(rooms.is_some()));
    collectors.push(Box::new(engine_up));
    if let Some(rooms) = rooms {
        let count = IntGauge::new(
            "qm_rooms",
            "Rooms, all of them (at most 1,000 are labelled).",
        )
        .expect("a valid name");
        count.set(i64::try_from(rooms.len()).unwrap_or(i64::MAX));
        collectors.push(Box::new(count));
        let families = RoomFamilies::new();
        for room in rooms.iter().take(MAX_ROOMS_EXPOSED) {
            families.record(room);
        }
        collectors.extend(families.collectors());
    }
    let firing = labelled(
        IntGaugeVec::new,
        "qm_alerts_firing",
        "Alerts of this admin process firing now, by alert name.",
        &["alertname"],
    );
    for (alertname, count) in &alerts.firing {
        firing
            .with_label_values(&[alertname])
            .set(i64::try_from(*count).unwrap_or(i64::MAX));
    }
    let pages = labelled(
        IntCounterVec::new,
        "qm_alert_pages_total",
        "Alert pages offered to ALERT_WEBHOOK_URL, by outcome.",
        &["outcome"],
    );
    pages
        .with_label_values(&["delivered"])
        .inc_by(alerts.delivered);
    pages.with_label_values(&["failed"]).inc_by(alerts.failed);
    collectors.push(Box::new(firing));
    collectors.push(Box::new(pages));
    for collector in collectors {
        if let Err(error) = registry.register(collector) {
            tracing::error!(%error, "a metric could not be registered");
        }
    }
    let mut text = Vec::new();
    if let Err(error) = TextEncoder::new().encode(&registry.gather(), &mut text) {
        tracing::error!(%error, "the metrics could not be encoded");
    }
    String::from_utf8(text).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn has(text: &str, line: &str) -> bool {
        text.lines().any(|got| got == line)
    }

    #[test]
    fn a_room_object_becomes_its_series() {
        let rooms = [
            json!({"id": "drop", "waiting": 12, "preQueue": 3, "activePasses": 4, "doorSessions": 2,
                   "nextTicket": 21, "passedTotal": 8, "ejectedTotal": 1, "purgedTotal": 0,
                   "passedLastMin": 30, "rate": 60, "oldestWaitSec": 95, "estWaitSec": 13,
                   "effectiveState": "active"}),
            json!({"id": "paused-room", "waiting": 5, "nextTicket": 6, "rate": 0,
                   "estWaitSec": null, "effectiveState": "paused"}),
        ];
        let alerts = AlertCounts {
            firing: vec![("QmRoomStalled", 1)],
            delivered: 2,
            failed: 1,
        };
        let text = exposition(Some(&rooms), &alerts);
        for line in [
            "qm_engine_up 1",
            "qm_rooms 2",
            "qm_room_waiting{room=\"drop\"} 12",
            "qm_room_pre_queue{room=\"drop\"} 3",
            "qm_room_active_passes{room=\"drop\"} 4",
            "qm_room_door_sessions{room=\"drop\"} 2",
            "qm_room_joins_total{room=\"drop\"} 20",
            "qm_room_passes_total{room=\"drop\"} 8",
            "qm_room_ejects_total{room=\"drop\"} 1",
            "qm_room_purged_total{room=\"drop\"} 0",
            "qm_room_outflow_per_second{room=\"drop\"} 0.5",
            "qm_room_configured_rate_per_second{room=\"drop\"} 1",
            "qm_room_oldest_wait_seconds{room=\"drop\"} 95",
            "qm_room_estimated_wait_seconds{room=\"drop\"} 13",
            "qm_room_wait_unbounded{room=\"paused-room\"} 1",
            "qm_room_wait_unbounded{room=\"drop\"} 0",
            "qm_room_state{room=\"drop\",state=\"active\"} 1",
            "qm_room_state{room=\"paused-room\",state=\"paused\"} 1",
            "qm_alerts_firing{alertname=\"QmRoomStalled\"} 1",
            "qm_alert_pages_total{outcome=\"delivered\"} 2",
            "qm_alert_pages_total{outcome=\"failed\"} 1",
            "# TYPE qm_room_joins_total counter",
            "# TYPE qm_room_waiting gauge",
        ] {
            assert!(has(&text, line), "{line} in\n{text}");
        }
        assert!(
            !text.contains("qm_room_estimated_wait_seconds{room=\"paused-room\"}"),
            "no estimate for a room that admits nobody: {text}"
        );
    }

    #[test]
    fn an_engine_that_does_not_answer_is_a_scrape_that_says_so() {
        let text = exposition(None, &AlertCounts::default());
        assert!(has(&text, "qm_engine_up 0"), "{text}");
        assert!(!text.contains("qm_room_"), "{text}");
    }

    #[test]
    fn labelled_rooms_are_bounded() {
        let rooms: Vec<Value> = (0..MAX_ROOMS_EXPOSED + 5)
            .map(|index| json!({"id": format!("room-{index}"), "waiting": 1}))
            .collect();
        let text = exposition(Some(&rooms), &AlertCounts::default());
        let waiting_series = text
            .lines()
            .filter(|line| line.starts_with("qm_room_waiting{"))
            .count();
        assert_eq!(waiting_series, MAX_ROOMS_EXPOSED);
        assert!(has(&text, &format!("qm_rooms {}", MAX_ROOMS_EXPOSED + 5)));
    }
}
