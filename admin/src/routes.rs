//! Every route of the admin process, in one table: the operator API (served under both
//! `/api/admin` and `/api/v1/admin`), readiness, the console page and its assets, and the
//! documentation pages. A route is added here and nowhere else, so this file is the map of what
//! the process answers; the handlers live in the module named beside each one.
//!
//! The operator API is built from [`api_table`]: each row is a route, the grant it needs
//! (`crate::principal::Grant`), the audit action of a change, and its handler. The router is
//! made from the rows and every row is wrapped in the gate (`crate::gate`) that enforces its
//! grant, so a route cannot be served without a grant: a handler that asks who the caller is
//! outside the gate is refused (`Authenticated` is only ever put there by the gate).

use std::sync::Arc;

use axum::Router;
use axum::handler::Handler;
use axum::routing::{MethodFilter, MethodRouter, get, on};
use http::Method;

use crate::gate::{Gate, RouteRow, gate};
use crate::principal::Grant;
use crate::{
    AdminState, alerts, audit, connectors, console, events, health, metrics, operators, prometheus,
    reports, rooms, security, session_routes, targeting, visitors,
};

/// The whole router of the process, with its state.
pub(crate) fn router(state: AdminState) -> Router {
    let api = api_routes(&state);
    Router::new()
        .nest("/api/admin", api.clone())
        .nest("/api/v1/admin", api)
        // The console: the page and its content-hashed assets.
        .route("/", get(console::page))
        .route("/assets/{name}", get(console::asset))
        .route("/healthz", get(health::healthz))
        .route("/livez", get(health::livez))
        // Prometheus: a read credential, held by the same gate as the operator API.
        .route("/metrics", prometheus_route(&state))
        // The documentation that ships with the build; no credential.
        .merge(qm_docs::routes())
        // Applies to the routes above it: a wrong verb answers the `{error, code}` envelope.
        .method_not_allowed_fallback(qm_http::method_not_allowed)
        .fallback(qm_http::not_found)
        .with_state(state)
}

/// `GET /metrics` behind its gate (the monitor token, viewer or above).
fn prometheus_route(state: &AdminState) -> MethodRouter<AdminState> {
    let guarded = Gate {
        state: state.clone(),
        row: Arc::new(RouteRow {
            method: Method::GET,
            mount: "",
            path: "/metrics",
            grant: Grant::Read,
            action: None,
            tickets: false,
        }),
    };
    get(prometheus::metrics).route_layer(axum::middleware::from_fn_with_state(guarded, gate))
}

/// One row: the route, what it needs, the audit action of a change, and the handler.
struct Row {
    grant_row: RouteRow,
    handler: MethodRouter<AdminState>,
}

fn row<H, T>(
    method: Method,
    path: &'static str,
    grant: Grant,
    action: Option<&'static str>,
    handler: H,
) -> Row
where
    H: Handler<T, AdminState>,
    T: 'static,
{
    let filter = MethodFilter::try_from(method.clone())
        .unwrap_or_else(|_| panic!("{method} {path}: no method filter for this verb"));
    Row {
        grant_row: RouteRow {
            method,
            mount: "/api/admin",
            path,
            grant,
            action,
            tickets: false,
        },
        handler: on(filter, handler),
    }
}

/// The grants table of the operator API. Grants as the spec lists them: viewer and the monitor
/// token read; the monitor token is refused audit, visitors, targeting and the share-link list;
/// operator also changes queue state and room settings; owner / ADMIN_KEY also manage operators
/// and monitor tokens (a credential is neither queue state nor a room setting), delete rooms
/// and shut down.
fn api_table() -> Vec<Row> {
    use Grant::{Change, Open, Own, Read, ReadSensitive};
    use Method as M;
    let mut table = vec![
        row(M::GET, "/rooms", Read, None, rooms::list_rooms),
        row(M::POST, "/rooms", Change, Some("room.put"), rooms::put_room),
        row(M::GET, "/rooms/{id}", Read, None, rooms::get_room),
        row(
            M::DELETE,
            "/rooms/{id}",
            Own,
            Some("room.delete"),
            rooms::delete_room,
        ),
        row(
            M::POST,
            "/rooms/{id}/state",
            Change,
            Some("room.state"),
            rooms::set_state,
        ),
        row(
            M::POST,
            "/rooms/{id}/rate",
            Change,
            Some("room.rate"),
            rooms::set_rate,
        ),
        row(
            M::POST,
            "/rooms/{id}/flush",
            Change,
            Some("room.flush"),
            rooms::flush,
        ),
        row(
            M::POST,
            "/rooms/{id}/schedule",
            Change,
            Some("room.schedule"),
            rooms::schedule,
        ),
        row(
            M::POST,
            "/rooms/{id}/eject",
            Change,
            Some("room.eject"),
            rooms::eject,
        ),
        row(
            M::POST,
            "/rooms/{id}/purge",
            Change,
            Some("room.purge"),
            rooms::purge,
        ),
        row(
            M::GET,
            "/rooms/{id}/visitors",
            ReadSensitive,
            None,
            visitors::lookup,
        ),
        row(
            M::GET,
            "/rooms/{id}/targeting",
            ReadSensitive,
            None,
            targeting::targeting,
        ),
        row(
            M::GET,
            "/rooms/{id}/connectors",
            Read,
            None,
            connectors::connectors,
        ),
        row(M::GET, "/health", Read, None, health::admin_health),
        row(M::GET, "/session", Open, None, session_routes::who),
        row(
            M::POST,
            "/session",
            Open,
            Some("session.sign_in"),
            session_routes::sign_in,
        ),
        row(
            M::DELETE,
            "/session",
            Open,
            Some("session.sign_out"),
            session_routes::sign_out,
        ),
        row(M::POST, "/sse-ticket", Read, None, events::mint_ticket),
        row(M::GET, "/events", Read, None, events::events),
        row(M::GET, "/metrics", Read, None, metrics::metrics),
        row(M::GET, "/security", Read, None, security::security),
        row(M::GET, "/reports", Read, None, reports::reports),
        row(M::GET, "/alerts", Read, None, alerts::state),
        row(
            M::POST,
            "/alerts",
            Change,
            Some("alerts.test"),
            alerts::test_page,
        ),
        row(M::GET, "/audit", ReadSensitive, None, audit::list),
        row(M::GET, "/operators", Own, None, operators::list),
        row(
            M::POST,
            "/operators",
            Own,
            Some("operator.create"),
            operators::create,
        ),
        row(
            M::DELETE,
            "/operators/{id}",
            Own,
            Some("operator.revoke"),
            operators::revoke,
        ),
        row(
            M::GET,
            "/monitor-token",
            ReadSensitive,
            None,
            operators::list_monitors,
        ),
        row(
            M::POST,
            "/monitor-token",
            Own,
            Some("monitor_token.create"),
            operators::mint_monitor,
        ),
        row(
            M::DELETE,
            "/monitor-token",
            Own,
            Some("monitor_token.revoke"),
            operators::revoke_monitors,
        ),
        row(
            M::POST,
            "/shutdown",
            Own,
            Some("shutdown"),
            operators::shutdown,
        ),
    ];
    // EventSource cannot send a header: the stream also takes a ticket.
    for entry in &mut table {
        entry.grant_row.tickets = entry.grant_row.path == "/events";
    }
    table
}

/// The grants table as data: `(method, path under /api/admin, lowest role or "none")`, for
/// the tests that hold every route against every credential.
pub fn grants() -> Vec<(String, String, &'static str)> {
    api_table()
        .into_iter()
        .map(|entry| {
            let row = entry.grant_row;
            let needs = row.grant.needs().map_or("none", |role| role.as_str());
            (row.method.to_string(), row.path.to_owned(), needs)
        })
        .collect()
}

/// The operator API, served under both `/api/admin` and `/api/v1/admin`: the same handlers, so
/// the two answer byte for byte alike. Every row is wrapped in its gate.
fn api_routes(state: &AdminState) -> Router<AdminState> {
    let mut router = Router::new();
    for entry in api_table() {
        let path = entry.grant_row.path;
        let guarded = Gate {
            state: state.clone(),
            row: Arc::new(entry.grant_row),
        };
        let handler = entry
            .handler
            .route_layer(axum::middleware::from_fn_with_state(guarded, gate));
        router = router.route(path, handler);
    }
    router.method_not_allowed_fallback(qm_http::method_not_allowed)
}
