//! The grants matrix: every operator-API route × every kind of credential answers what the
//! grants table says. The table the process serves (`qm_admin::grants()`) is first held against
//! the spec's grants as written out here, so a route added without a row, or a grant changed
//! by accident, fails this test.

use qm_tests::{Reply, TestApp, room_body, spawn_app};
use serde_json::json;

use crate::credentials::{Cred, call, create_operator, mint_monitor, sign_in};

/// The spec's grants, route by route: the lowest role that may use it (`none`: the route judges
/// its own credential — the console's sign-in, sign-out and who-am-I).
const EXPECTED: &[(&str, &str, &str)] = &[
    ("GET", "/rooms", "monitor"),
    ("POST", "/rooms", "operator"),
    ("GET", "/rooms/{id}", "monitor"),
    ("DELETE", "/rooms/{id}", "owner"),
    ("POST", "/rooms/{id}/state", "operator"),
    ("POST", "/rooms/{id}/rate", "operator"),
    ("POST", "/rooms/{id}/flush", "operator"),
    ("POST", "/rooms/{id}/schedule", "operator"),
    ("POST", "/rooms/{id}/eject", "operator"),
    ("POST", "/rooms/{id}/purge", "operator"),
    ("GET", "/rooms/{id}/visitors", "viewer"),
    ("GET", "/rooms/{id}/targeting", "viewer"),
    ("GET", "/rooms/{id}/connectors", "monitor"),
    ("GET", "/health", "monitor"),
    ("GET", "/session", "none"),
    ("POST", "/session", "none"),
    ("DELETE", "/session", "none"),
    ("POST", "/sse-ticket", "monitor"),
    ("GET", "/events", "monitor"),
    ("GET", "/metrics", "monitor"),
    ("GET", "/security", "monitor"),
    ("GET", "/reports", "monitor"),
    ("GET", "/alerts", "monitor"),
    ("POST", "/alerts", "operator"),
    ("GET", "/audit", "viewer"),
    ("GET", "/operators", "owner"),
    ("POST", "/operators", "owner"),
    ("DELETE", "/operators/{id}", "owner"),
    ("GET", "/monitor-token", "viewer"),
    ("POST", "/monitor-token", "owner"),
    ("DELETE", "/monitor-token", "owner"),
    ("POST", "/shutdown", "owner"),
];

const LADDER: &[&str] = &["monitor", "viewer", "operator", "owner"];

fn rung(role: &str) -> usize {
    LADDER
        .iter()
        .position(|rung| *rung == role)
        .unwrap_or_else(|| panic!("{role} is not a role"))
}

#[test]
fn the_served_table_is_the_spec_grants() {
    let served: Vec<(String, String, &str)> = qm_admin::grants();
    let expected: Vec<(String, String, &str)> = EXPECTED
        .iter()
        .map(|(method, path, role)| ((*method).to_owned(), (*path).to_owned(), *role))
        .collect();
    assert_eq!(served, expected);
}

/// One credential of the matrix: how it is presented and the role it carries.
struct Column {
    name: &'static str,
    cred: Cred,
    /// `None`: not a valid credential (401 on every guarded route).
    role: Option<&'static str>,
    /// A cookie without X-QM-CSRF: refused on every non-GET with 403 csrf_required.
    cookie_without_csrf: bool,
}

async fn columns(app: &TestApp) -> Vec<Column> {
    let (_, viewer) = create_operator(app, "matrix-viewer", "viewer").await;
    let (_, operator) = create_operator(app, "matrix-operator", "operator").await;
    let (_, owner) = create_operator(app, "matrix-owner", "owner").await;
    let (_, monitor) = mint_monitor(app).await;
    let (_, owner_cookie) = sign_in(app, qm_tests::TEST_ADMIN_KEY).await;
    let (_, viewer_cookie) = sign_in(app, &viewer).await;
    let column = |name, cred, role| Column {
        name,
        cred,
        role,
        cookie_without_csrf: false,
    };
    vec![
        column("none", Cred::None, None),
        column(
            "wrong key",
            Cred::Bearer("not-a-key-0123456789".to_owned()),
            None,
        ),
        column("viewer key", Cred::Bearer(viewer), Some("viewer")),
        column("operator key", Cred::Bearer(operator), Some("operator")),
        column("owner key", Cred::Bearer(owner), Some("owner")),
        column("ADMIN_KEY", crate::credentials::admin_key(), Some("owner")),
        column("monitor token", Cred::Bearer(monitor), Some("monitor")),
        Column {
            name: "owner cookie without X-QM-CSRF",
            cred: Cred::Cookie {
                cookie: owner_cookie.clone(),
                csrf: false,
            },
            role: Some("owner"),
            cookie_without_csrf: true,
        },
        column(
            "owner cookie with X-QM-CSRF",
            Cred::Cookie {
                cookie: owner_cookie,
                csrf: true,
            },
            Some("owner"),
        ),
        column(
            "viewer cookie with X-QM-CSRF",
            Cred::Cookie {
                cookie: viewer_cookie,
                csrf: true,
            },
            Some("viewer"),
        ),
    ]
}

/// What the cell must answer: `Ok(())` when it was let in (anything but 401/403/429/5xx).
fn judge(method: &str, needs: &str, column: &Column, reply: &Reply) -> Result<(), String> {
    let got = (reply.status, reply.code().to_owned());
    let expected = match column.role {
        None => Some((401, "unauthorized")),
        Some(_) if column.cookie_without_csrf && method != "GET" => Some((403, "csrf_required")),
        Some(role) if rung(role) < rung(needs) => Some((403, "insufficient_role")),
        Some(_) => None,
    };
    match expected {
        Some((status, code)) if got != (status, code.to_owned()) => Err(format!(
            "expected {status} {code}, got {got:?}: {}",
            reply.text
        )),
        Some(_) => Ok(()),
        None if matches!(reply.status, 401 | 403 | 429) || reply.status >= 500 => Err(format!(
            "expected to be let in, got {got:?}: {}",
            reply.text
        )),
        None => Ok(()),
    }
}

#[tokio::test]
async fn every_route_answers_every_credential_as_the_table_says() {
    let app = spawn_app().await;
    app.create_room(room_body("matrix", 10, json!({}))).await;
    let columns = columns(&app).await;
    let mut failures = Vec::new();
    for (method, path, needs) in EXPECTED {
        if *needs == "none" {
            continue;
        }
        let concrete = path.replace(
            "{id}",
            if path.starts_with("/operators") {
                "op-unknown"
            } else {
                "matrix"
            },
        );
        let body = (*method != "GET" && *method != "DELETE").then(|| json!({}));
        for column in &columns {
            // Shutting down would end the app: only the refusals are asked here (the allowed
            // shutdown is `credentials.rs::an_owner_shuts_the_app_down_cleanly`).
            let allowed = column.role.is_some_and(|role| rung(role) >= rung(needs))
                && !(column.cookie_without_csrf && *method != "GET");
            if *path == "/shutdown" && allowed {
                continue;
            }
            let verb = reqwest::Method::from_bytes(method.as_bytes()).expect("verb");
            let reply = call(&app, verb, &concrete, &column.cred, body.clone(), &[]).await;
            if let Err(why) = judge(method, needs, column, &reply) {
                failures.push(format!("{method} {path} × {}: {why}", column.name));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // The versioned prefix is the same table.
    let refused = app
        .send(
            app.http
                .delete(format!("{}/api/v1/admin/rooms/matrix", app.admin))
                .bearer_auth(match &columns[3].cred {
                    Cred::Bearer(key) => key.clone(),
                    _ => String::new(),
                }),
        )
        .await;
    assert_eq!((refused.status, refused.code()), (403, "insufficient_role"));
    app.stop().await;
}

#[tokio::test]
async fn a_credential_in_the_url_is_refused_on_every_route() {
    let app = spawn_app().await;
    for (method, path, _) in EXPECTED {
        let concrete = path.replace("{id}", "matrix");
        let verb = reqwest::Method::from_bytes(method.as_bytes()).expect("verb");
        let reply = call(
            &app,
            verb,
            &format!("{concrete}?key=x"),
            &crate::credentials::admin_key(),
            None,
            &[("X-QM-CSRF", "1")],
        )
        .await;
        assert_eq!(
            (reply.status, reply.code()),
            (401, "credential_in_query"),
            "{method} {path}: {}",
            reply.text
        );
    }
    app.stop().await;
}
