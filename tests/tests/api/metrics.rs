//! Prometheus metrics on a running app: the admin process's `GET /metrics` behind a read
//! credential, its room series following joins, ejects and purges, the engine's own figures
//! beside them, each gateway's private exposition (requests by route and code, open event
//! streams, rate-limit refusals, fail-open checks), and every exposition clean under
//! `promtool check metrics`. A real Prometheus scraping `qm all` is `qm/tests/prometheus.rs`.

use qm_tests::prometheus::{promtool_check, sample};
use qm_tests::{TEST_ADMIN_KEY, TestApp, room_body, spawn_app, spawn_app_with};
use serde_json::json;

use crate::credentials::mint_monitor;

async fn scrape(app: &TestApp, bearer: &str) -> String {
    let response = app
        .http
        .get(format!("{}/metrics", app.admin))
        .bearer_auth(bearer)
        .send()
        .await
        .expect("the admin process answers");
    assert_eq!(response.status(), 200);
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
    response.text().await.expect("text")
}

async fn gateway_scrape(app: &TestApp) -> String {
    let response = app
        .http
        .get(format!("{}/metrics", app.gateway_metrics))
        .send()
        .await
        .expect("the gateway's metrics listener answers");
    assert_eq!(response.status(), 200);
    response.text().await.expect("text")
}

fn room_sample(text: &str, name: &str, room: &str) -> Option<f64> {
    sample(text, &format!("{name}{{room=\"{room}\"}}"))
}

#[tokio::test]
async fn metrics_need_a_read_credential_never_one_in_the_url() {
    let app = spawn_app().await;
    let url = format!("{}/metrics", app.admin);
    let none = app.get(&url).await;
    assert_eq!((none.status, none.code()), (401, "unauthorized"));
    let in_query = app
        .send(
            app.http
                .get(format!("{url}?key={TEST_ADMIN_KEY}"))
                .bearer_auth(TEST_ADMIN_KEY),
        )
        .await;
    assert_eq!(
        (in_query.status, in_query.code()),
        (401, "credential_in_query")
    );
    let (_, monitor) = mint_monitor(&app).await;
    let text = scrape(&app, &monitor).await;
    assert_eq!(sample(&text, "qm_engine_up"), Some(1.0), "{text}");
    // The gateway's listener is private by address: nothing of it is on the public port.
    let public = app.get(&format!("{}/metrics", app.gateway)).await;
    assert_eq!(public.status, 404);
    app.stop().await;
}

#[tokio::test]
async fn the_room_series_follow_joins_ejects_and_purges() {
    let app = spawn_app().await;
    app.create_room(room_body("drop", 0, json!({}))).await;
    for _ in 0..3 {
        app.join_as_new_visitor("drop").await;
    }
    let text = scrape(&app, TEST_ADMIN_KEY).await;
    assert_eq!(room_sample(&text, "qm_room_waiting", "drop"), Some(3.0));
    assert_eq!(room_sample(&text, "qm_room_joins_total", "drop"), Some(3.0));
    assert_eq!(
        room_sample(&text, "qm_room_passes_total", "drop"),
        Some(0.0)
    );
    assert_eq!(
        room_sample(&text, "qm_room_wait_unbounded", "drop"),
        Some(1.0),
        "ratePerMinute 0 admits nobody"
    );
    assert_eq!(
        room_sample(&text, "qm_room_estimated_wait_seconds", "drop"),
        None
    );
    assert_eq!(
        sample(&text, "qm_room_state{room=\"drop\",state=\"active\"}"),
        Some(1.0)
    );
    assert_eq!(sample(&text, "qm_engine_rooms"), Some(1.0));
    assert_eq!(sample(&text, "qm_engine_storage_ready"), Some(1.0));
    promtool_check(&text);

    let eject = app
        .admin_post("/rooms/drop/eject", json!({ "ticket": 2 }))
        .await;
    assert_eq!(eject.status, 200, "{}", eject.text);
    let purge = app.admin_post("/rooms/drop/purge", json!({})).await;
    assert_eq!(purge.status, 200, "{}", purge.text);
    let text = scrape(&app, TEST_ADMIN_KEY).await;
    assert_eq!(room_sample(&text, "qm_room_waiting", "drop"), Some(0.0));
    assert_eq!(
        room_sample(&text, "qm_room_ejects_total", "drop"),
        Some(1.0)
    );
    assert_eq!(
        room_sample(&text, "qm_room_purged_total", "drop"),
        Some(2.0)
    );
    if app.backing.is_some() {
        // The durable store's own figures: every change above was one group commit or more.
        let commits = sample(&text, "qm_journal_commit_seconds_count").unwrap_or(0.0);
        assert!(commits >= 1.0, "journal commits counted: {text}");
        assert!(text.contains("# TYPE qm_journal_batch_events histogram"));
        assert!(sample(&text, "qm_valkey_landings_total").unwrap_or(0.0) >= 1.0);
    } else {
        assert!(
            !text.contains("qm_journal_"),
            "no journal on memory: {text}"
        );
    }
    promtool_check(&text);
    app.stop().await;
}

#[tokio::test]
async fn each_gateway_counts_routes_streams_refusals_and_fail_open_checks() {
    let app = spawn_app_with(&[("JOIN_LIMIT_PER_MIN", "2")]).await;
    app.create_room(room_body("live", 0, json!({}))).await;
    let (joined, _) = app.join_as_new_visitor("live").await;
    let token = joined.body["token"].as_str().expect("token").to_owned();
    app.join_as_new_visitor("live").await;
    let refused = app.join("live", None, None).await;
    assert_eq!(refused.status, 429, "the third join from one address");
    let fail_open = app
        .get(&format!("{}/api/check?roomId=nowhere&token=x", app.gateway))
        .await;
    assert_eq!(fail_open.body["reason"], "no_room", "{}", fail_open.text);
    let _stream = app.events("/events", &token).await.expect("stream opens");

    let text = gateway_scrape(&app).await;
    assert_eq!(
        sample(
            &text,
            "qm_gateway_http_requests_total{code=\"200\",route=\"/api/join\"}"
        ),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "qm_gateway_http_requests_total{code=\"429\",route=\"/api/join\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            "qm_gateway_http_request_duration_seconds_count{route=\"/api/join\"}"
        ),
        Some(3.0)
    );
    assert_eq!(
        sample(&text, "qm_gateway_rate_limited_total{limit=\"join\"}"),
        Some(1.0)
    );
    assert_eq!(
        sample(&text, "qm_gateway_fail_open_checks_total"),
        Some(1.0)
    );
    assert_eq!(
        sample(&text, "qm_gateway_event_streams{room=\"live\"}"),
        Some(1.0),
        "{text}"
    );
    promtool_check(&text);
    app.stop().await;
}

/// Every `qm_…` name in `text` (a histogram's `_bucket`, `_sum` and `_count` read as its name).
fn metric_names(text: &str) -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    let bytes = text.as_bytes();
    let mut at = 0;
    while let Some(found) = text[at..].find("qm_") {
        let start = at + found;
        let end = text[start..]
            .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
            .map_or(text.len(), |length| start + length);
        let preceded_by_word =
            start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_');
        if !preceded_by_word {
            let name = &text[start..end];
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| name.strip_suffix(suffix))
                .unwrap_or(name);
            names.insert(base.to_owned());
        }
        at = end;
    }
    names
}

fn repository_file(path: &str) -> String {
    let full = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|error| panic!("{}: {error}", full.display()))
}

#[tokio::test]
async fn the_dashboard_and_the_guide_name_only_metrics_the_product_exposes() {
    let guide = repository_file("docs/OPERATIONS.md");
    let section = guide
        .split("\n## Metrics\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("OPERATIONS.md has a Metrics section");
    let documented = metric_names(section);
    let dashboard: serde_json::Value =
        serde_json::from_str(&repository_file("deploy/grafana/queue-manager.json"))
            .expect("the dashboard is JSON");
    assert_eq!(dashboard["uid"], "queue-manager");
    let mut expressions = String::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            expressions.push_str(target["expr"].as_str().unwrap_or_default());
            expressions.push('\n');
        }
    }
    let charted = metric_names(&expressions);
    let undocumented: Vec<&String> = charted.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "the dashboard charts {undocumented:?}"
    );

    // What a scrape shows after traffic; the errors and rebuilds need a fault to appear, and the
    // journal's figures need the durable store.
    let app = spawn_app().await;
    app.create_room(room_body("seen", 60, json!({}))).await;
    let (joined, _) = app.join_as_new_visitor("seen").await;
    let token = joined.body["token"].as_str().expect("token").to_owned();
    app.get(&format!("{}/api/check?roomId=none&token=x", app.gateway))
        .await;
    // With no stream open the gateway's other families still encode.
    let quiet = gateway_scrape(&app).await;
    assert_eq!(
        sample(&quiet, "qm_gateway_rate_limited_total{limit=\"join\"}"),
        Some(0.0),
        "{quiet}"
    );
    promtool_check(&quiet);
    let _stream = app.events("/events", &token).await.expect("stream opens");
    let exposed: std::collections::BTreeSet<String> =
        metric_names(&scrape(&app, TEST_ADMIN_KEY).await)
            .union(&metric_names(&gateway_scrape(&app).await))
            .cloned()
            .collect();
    let durable_only = ["qm_journal_", "qm_valkey_"];
    let after_a_fault = [
        "qm_store_errors_total",
        "qm_room_rebuilds_total",
        "qm_room_estimated_wait_seconds",
    ];
    let missing: Vec<&String> = documented
        .iter()
        .filter(|name| !exposed.contains(*name))
        .filter(|name| !after_a_fault.contains(&name.as_str()))
        .filter(|name| {
            app.backing.is_some() || !durable_only.iter().any(|prefix| name.starts_with(prefix))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "documented but not exposed: {missing:?}"
    );
    app.stop().await;
}
