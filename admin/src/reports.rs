//! `GET /api/admin/reports?roomId=&bucket=hour|day&since=&until=&format=csv`: a room's history
//! in rows (the engine folds its events, `qm_engine::reports`), as JSON or, for BI tools, as CSV
//! (`?format=csv` or `Accept: text/csv`). `since`/`until` are epoch ms bounding the rows' starts.

use axum::Json;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use http::HeaderMap;
use http::header::{ACCEPT, CONTENT_DISPOSITION, CONTENT_TYPE};
use qm_core::{ApiError, ErrorCode};
use qm_proto::ReportRequest;
use serde::Deserialize;
use serde_json::Value;

use crate::AdminState;
use crate::auth::Authenticated;
use qm_http::AppError;

/// The CSV form's columns, in order: fields of the JSON rows.
const CSV_COLUMNS: &[&str] = &[
    "start",
    "joins",
    "passes",
    "peakDepth",
    "medianWaitSec",
    "p95WaitSec",
    "abandoned",
    "ejected",
    "purged",
    "etaQuoted",
    "etaAccuracyPct",
    "etaMedianErrorSec",
];

#[derive(Debug, Deserialize)]
pub(crate) struct ReportQuery {
    #[serde(rename = "roomId")]
    room_id: Option<String>,
    bucket: Option<String>,
    since: Option<String>,
    until: Option<String>,
    format: Option<String>,
}

fn refusal(message: impl Into<String>) -> ApiError {
    ApiError::new(ErrorCode::InvalidReportQuery, message)
}

fn instant(name: &str, text: Option<&str>) -> Result<i64, ApiError> {
    match text.map(str::trim).filter(|text| !text.is_empty()) {
        None => Ok(0),
        Some(text) => text
            .parse::<i64>()
            .ok()
            .filter(|ms| *ms > 0)
            .ok_or_else(|| refusal(format!("{name} must be an instant in epoch ms"))),
    }
}

/// Whether the caller asked for CSV: `format=csv` wins, else an `Accept` naming `text/csv`.
fn wants_csv(format: Option<&str>, headers: &HeaderMap) -> Result<bool, ApiError> {
    match format {
        Some("csv") => Ok(true),
        Some("json") => Ok(false),
        Some(_) => Err(refusal("format must be json or csv")),
        None => Ok(headers
            .get(ACCEPT)
            .and_then(|accept| accept.to_str().ok())
            .is_some_and(|accept| accept.contains("text/csv"))),
    }
}

/// GET /api/admin/reports.
pub(crate) async fn reports(
    _: Authenticated,
    State(state): State<AdminState>,
    Query(query): Query<ReportQuery>,
    headers: HeaderMap,
) -> Result<Response, AppError> {
    let room_id = crate::metrics::required_room_id(query.room_id)?;
    // The engine judges the bucket (`qm_engine::reports::Bucket`): 400 invalid_report_query.
    let bucket = query.bucket.unwrap_or_else(|| "hour".to_owned());
    let since_ms = instant("since", query.since.as_deref())?;
    let until_ms = instant("until", query.until.as_deref())?;
    if until_ms != 0 && until_ms <= since_ms {
        return Err(refusal("until must be later than since").into());
    }
    let csv = wants_csv(query.format.as_deref(), &headers)?;
    let reply = state
        .engine
        .clone()
        .report(ReportRequest {
            room_id: room_id.clone(),
            bucket: bucket.clone(),
            since_ms,
            until_ms,
        })
        .await?
        .into_inner();
    let report: Value = serde_json::from_str(&reply.report_json).map_err(|error| {
        ApiError::new(ErrorCode::Internal, format!("the engine's report: {error}"))
    })?;
    if !csv {
        return Ok(Json(report).into_response());
    }
    let rows = report["rows"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let disposition = format!("attachment; filename=\"qm-report-{room_id}-{bucket}.csv\"");
    Ok((
        [
            (CONTENT_TYPE, "text/csv; charset=utf-8".to_owned()),
            (CONTENT_DISPOSITION, disposition),
        ],
        csv_text(rows),
    )
        .into_response())
}

/// The rows as RFC 4180 CSV with a header line: a null is an empty cell. Every cell is a number
/// or an ISO instant, so none needs quoting.
fn csv_text(rows: &[Value]) -> String {
    let mut text = CSV_COLUMNS.join(",");
    text.push_str("\r\n");
    for row in rows {
        let cells: Vec<String> = CSV_COLUMNS
            .iter()
            .map(|column| match &row[*column] {
                Value::Null => String::new(),
                Value::String(text) => text.clone(),
                other => other.to_string(),
            })
            .collect();
        text.push_str(&cells.join(","));
        text.push_str("\r\n");
    }
    text
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn csv_has_a_header_and_empty_cells_for_nulls() {
        let rows = [
            json!({"start": "2026-12-06T00:00:00Z", "joins": 3, "passes": 1,
            "peakDepth": 3, "medianWaitSec": null, "etaAccuracyPct": 66.7}),
        ];
        let text = csv_text(&rows);
        let lines: Vec<&str> = text.split("\r\n").collect();
        assert_eq!(lines[0], CSV_COLUMNS.join(","));
        assert_eq!(lines[1], "2026-12-06T00:00:00Z,3,1,3,,,,,,,66.7,");
        assert_eq!(lines[2], "");
    }

    #[test]
    fn csv_is_asked_for_by_format_or_accept() {
        let mut headers = HeaderMap::new();
        assert_eq!(wants_csv(None, &headers).ok(), Some(false));
        assert_eq!(wants_csv(Some("csv"), &headers).ok(), Some(true));
        headers.insert(ACCEPT, "text/csv".parse().expect("header"));
        assert_eq!(wants_csv(None, &headers).ok(), Some(true));
        assert_eq!(wants_csv(Some("json"), &headers).ok(), Some(false));
        assert!(wants_csv(Some("xml"), &headers).is_err());
    }
}
