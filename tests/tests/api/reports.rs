//! `GET /api/admin/reports` on a running app: rows that say what visitors and operators did this
//! hour (joins, passes, the peak, the waits, an eject, ETA accuracy), the same rows as CSV read
//! back by a real CSV reader, the refusals of a bad query, and on the durable store the report
//! rebuilt from the journal by a restarted engine. The scripted day hour by hour is the engine's
//! `reports::tests`.

use std::time::Duration;

use qm_tests::servers::ValkeyOptions;
use qm_tests::{Backing, TEST_ADMIN_KEY, TestApp, room_body, spawn_app, spawn_app_on};
use reqwest::Method;
use serde_json::{Value, json};

async fn report(app: &TestApp, query: &str) -> Value {
    let reply = app
        .admin_call(Method::GET, &format!("/reports?{query}"), None)
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.body
}

/// Six join, five pass (the sixth is ejected first): the hour's row says so.
async fn script(app: &TestApp) {
    app.create_room(room_body("sale", 0, json!({}))).await;
    for _ in 0..6 {
        app.join_as_new_visitor("sale").await;
    }
    let eject = app
        .admin_post("/rooms/sale/eject", json!({ "ticket": 6 }))
        .await;
    assert_eq!(eject.status, 200, "{}", eject.text);
    let rate = app
        .admin_post("/rooms/sale/rate", json!({ "ratePerMinute": 600 }))
        .await;
    assert_eq!(rate.status, 200, "{}", rate.text);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while app.room("sale").await["passedTotal"] != 5 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the line drains at 10 a second"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn this_hour(body: &Value) -> Value {
    let rows = body["rows"].as_array().expect("rows");
    rows.last().cloned().expect("a row for this hour")
}

/// The rows summed (the peak: the highest), so a script that straddles an hour still adds up.
fn summed(body: &Value) -> Value {
    let rows = body["rows"].as_array().expect("rows");
    let sum = |field: &str| {
        rows.iter()
            .filter_map(|row| row[field].as_u64())
            .sum::<u64>()
    };
    let peak = rows
        .iter()
        .filter_map(|row| row["peakDepth"].as_u64())
        .max();
    json!({
        "joins": sum("joins"), "passes": sum("passes"), "ejected": sum("ejected"),
        "purged": sum("purged"), "etaQuoted": sum("etaQuoted"), "peakDepth": peak,
    })
}

fn check_the_script(body: &Value) {
    assert_eq!(
        summed(body),
        json!({"joins": 6, "passes": 5, "ejected": 1, "purged": 0, "etaQuoted": 0, "peakDepth": 6}),
        "joined while the rate was 0, nobody was quoted a number: {body}"
    );
    let row = this_hour(body);
    assert_eq!(row["etaAccuracyPct"], Value::Null, "{row}");
    let start = row["start"].as_str().expect("start");
    assert!(start.ends_with(":00:00Z"), "an hour's start: {start}");
    let waits = body["rows"].as_array().expect("rows");
    assert!(
        waits
            .iter()
            .any(|row| row["medianWaitSec"].is_u64() && row["p95WaitSec"].is_u64()),
        "the passes' waits: {body}"
    );
}

#[tokio::test]
async fn the_hour_row_says_what_happened_and_the_csv_reads_back_the_same() {
    let app = spawn_app().await;
    script(&app).await;
    let body = report(&app, "roomId=sale&bucket=hour").await;
    assert_eq!(body["roomId"], "sale");
    let expected_source = if app.backing.is_some() {
        "journal"
    } else {
        "memory"
    };
    assert_eq!(body["source"], expected_source);
    check_the_script(&body);
    let day = report(&app, "roomId=sale&bucket=day").await;
    assert_eq!(summed(&day)["joins"], 6);
    assert!(
        this_hour(&day)["start"]
            .as_str()
            .is_some_and(|start| start.ends_with("T00:00:00Z"))
    );

    // CSV by ?format=csv and by Accept, read by a CSV reader into the JSON rows' values.
    for request in [
        app.http
            .get(format!(
                "{}/api/admin/reports?roomId=sale&format=csv",
                app.admin
            ))
            .bearer_auth(TEST_ADMIN_KEY),
        app.http
            .get(format!("{}/api/admin/reports?roomId=sale", app.admin))
            .header("accept", "text/csv")
            .bearer_auth(TEST_ADMIN_KEY),
    ] {
        let response = request.send().await.expect("answers");
        assert_eq!(response.status(), 200);
        assert_eq!(
            response.headers()["content-type"],
            "text/csv; charset=utf-8"
        );
        let text = response.text().await.expect("text");
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        let header: Vec<String> = reader
            .headers()
            .expect("a header line")
            .iter()
            .map(str::to_owned)
            .collect();
        let records: Vec<csv::StringRecord> = reader
            .records()
            .collect::<Result<_, _>>()
            .expect("every line parses");
        assert_eq!(records.len(), body["rows"].as_array().map_or(0, Vec::len));
        for (record, row) in records.iter().zip(body["rows"].as_array().expect("rows")) {
            for (column, cell) in header.iter().zip(record.iter()) {
                let expected = match &row[column] {
                    Value::Null => String::new(),
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                assert_eq!(cell, expected, "column {column}");
            }
        }
    }
    app.stop().await;
}

#[tokio::test]
async fn a_bad_report_query_is_refused_and_a_missing_room_is_404() {
    let app = spawn_app().await;
    app.create_room(room_body("sale", 60, json!({}))).await;
    for (query, status, code) in [
        ("bucket=hour", 400, "invalid_room_id"),
        ("roomId=sale&bucket=week", 400, "invalid_report_query"),
        ("roomId=sale&since=yesterday", 400, "invalid_report_query"),
        (
            "roomId=sale&since=2000&until=1000",
            400,
            "invalid_report_query",
        ),
        ("roomId=sale&format=xml", 400, "invalid_report_query"),
        ("roomId=nowhere", 404, "room_not_found"),
    ] {
        let reply = app
            .admin_call(Method::GET, &format!("/reports?{query}"), None)
            .await;
        assert_eq!(
            (reply.status, reply.code()),
            (status, code),
            "{query}: {}",
            reply.text
        );
    }
    let empty = report(&app, "roomId=sale").await;
    assert_eq!(
        empty["rows"].as_array().map(Vec::len),
        Some(1),
        "the creation's hour"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_restarted_engine_reports_from_the_journal() {
    let backing = Backing::start(ValkeyOptions::default()).await;
    let mut app = spawn_app_on(Some(backing), &[]).await;
    script(&app).await;
    let before = report(&app, "roomId=sale").await;
    let backing = app.backing.take();
    app.stop().await;
    let app = spawn_app_on(backing, &[]).await;
    let after = report(&app, "roomId=sale").await;
    assert_eq!(after["rows"], before["rows"]);
    check_the_script(&after);
    app.stop().await;
}
