//! `GET /api/admin/metrics?roomId=&range=`: a room's time series for the console's charts —
//! joins per minute, passes per minute and queue depth — from the engine's sample ring (one
//! sample per 10 s, the last hour; see `qm_engine::history`). Nothing is interpolated: each point
//! is a sample the engine took, the last one is the room now, and a rate is the change between
//! two consecutive samples scaled to a minute (`null` for the first point, which has no
//! predecessor).

use axum::Json;
use axum::extract::{Query, State};
use qm_core::{ApiError, ErrorCode};
use qm_proto::{HistoryRequest, HistorySample};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::AdminState;
use crate::auth::Authenticated;
use qm_http::AppError;

/// The ranges a chart may ask for, and their length. The engine keeps one hour.
const RANGES: &[(&str, i64)] = &[
    ("5m", 5 * 60_000),
    ("15m", 15 * 60_000),
    ("30m", 30 * 60_000),
    ("1h", 60 * 60_000),
];
const DEFAULT_RANGE: &str = "15m";

#[derive(Debug, Deserialize)]
pub(crate) struct MetricsQuery {
    #[serde(rename = "roomId")]
    room_id: Option<String>,
    range: Option<String>,
}

/// The range's length in ms, or the refusal that lists the accepted ones.
fn range_ms(range: &str) -> Result<i64, ApiError> {
    RANGES
        .iter()
        .find(|(name, _)| *name == range)
        .map(|(_, length)| *length)
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::InvalidRange,
                "range must be one of 5m, 15m, 30m, 1h",
            )
        })
}

/// Per-minute rate of a counter between two samples; `None` when no time passed.
fn per_minute(later: u64, earlier: u64, elapsed_ms: i64) -> Option<f64> {
    (elapsed_ms > 0).then(|| {
        let per_minute = later.saturating_sub(earlier) as f64 * 60_000.0 / elapsed_ms as f64;
        (per_minute * 10.0).round() / 10.0
    })
}

/// The chart points of a sample run, oldest first.
pub(crate) fn points(samples: &[HistorySample]) -> Vec<Value> {
    samples
        .iter()
        .enumerate()
        .map(|(index, sample)| {
            let previous = index.checked_sub(1).and_then(|before| samples.get(before));
            let rate = |now: u64, then: fn(&HistorySample) -> u64| {
                previous.and_then(|previous| {
                    per_minute(now, then(previous), sample.at_ms - previous.at_ms)
                })
            };
            json!({
                "t": sample.at_ms,
                "joinsPerMin": rate(sample.joined_total, |s| s.joined_total),
                "passesPerMin": rate(sample.passed_total, |s| s.passed_total),
                "waiting": sample.waiting,
                "joinedTotal": sample.joined_total,
                "passedTotal": sample.passed_total,
            })
        })
        .collect()
}

/// The `roomId` a per-room read names (the charts, the reports), or 400 `invalid_room_id`.
pub(crate) fn required_room_id(room_id: Option<String>) -> Result<String, ApiError> {
    room_id
        .filter(|id| qm_core::ids::is_valid_room_id(id))
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::InvalidRoomId,
                "roomId is required: 1-64 characters of A-Z a-z 0-9 _ -",
            )
        })
}

/// GET /api/admin/metrics.
pub(crate) async fn metrics(
    _: Authenticated,
    State(state): State<AdminState>,
    Query(query): Query<MetricsQuery>,
) -> Result<Json<Value>, AppError> {
    let room_id = required_room_id(query.room_id)?;
    let range = query.range.unwrap_or_else(|| DEFAULT_RANGE.to_owned());
    let length = range_ms(&range)?;
    let now = qm_core::clock::now_ms();
    let reply = state
        .engine
        .clone()
        .history(HistoryRequest {
            room_id: room_id.clone(),
            since_ms: now - length,
        })
        .await?
        .into_inner();
    Ok(Json(json!({
        "roomId": room_id,
        "range": range,
        "stepSec": reply.step_ms / 1000,
        "now": now,
        "points": points(&reply.samples),
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at_ms: i64, joined: u64, passed: u64, waiting: u64) -> HistorySample {
        HistorySample {
            at_ms,
            joined_total: joined,
            passed_total: passed,
            waiting,
        }
    }

    #[test]
    fn rates_are_the_change_between_samples_per_minute() {
        let points = points(&[
            sample(0, 0, 0, 0),
            sample(10_000, 5, 1, 4),
            sample(10_000, 5, 1, 4),
        ]);
        assert_eq!(points[0]["joinsPerMin"], Value::Null);
        assert_eq!(points[1]["joinsPerMin"], json!(30.0));
        assert_eq!(points[1]["passesPerMin"], json!(6.0));
        assert_eq!(points[1]["waiting"], json!(4));
        assert_eq!(points[2]["joinsPerMin"], Value::Null, "no time passed");
    }

    #[test]
    fn only_the_documented_ranges_are_accepted() {
        assert_eq!(range_ms("1h").ok(), Some(3_600_000));
        assert_eq!(range_ms("5m").ok(), Some(300_000));
        for bad in ["", "2h", "1d", "60", "1H"] {
            assert_eq!(
                range_ms(bad).err().map(|error| error.code),
                Some(ErrorCode::InvalidRange)
            );
        }
    }
}
