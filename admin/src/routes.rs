//! Every route of the admin process, in one table: the operator API (served under both
//! `/api/admin` and `/api/v1/admin`), readiness, the console page and its assets, and the
//! documentation pages. A route is added here and nowhere else, so this file is the map of what
//! the process answers; the handlers live in the module named beside each one.

use axum::Router;
use axum::routing::{get, post};

use crate::{
    AdminState, connectors, console, events, health, metrics, rooms, session_routes, targeting,
    visitors,
};

/// The whole router of the process, with its state.
pub(crate) fn router(state: AdminState) -> Router {
    let api = api_routes();
    Router::new()
        .nest("/api/admin", api.clone())
        .nest("/api/v1/admin", api)
        // The console: the page and its content-hashed assets.
        .route("/", get(console::page))
        .route("/assets/{name}", get(console::asset))
        .route("/healthz", get(health::healthz))
        // The documentation that ships with the build; no credential.
        .merge(qm_docs::routes())
        // Applies to the routes above it: a wrong verb answers the `{error, code}` envelope.
        .method_not_allowed_fallback(qm_http::method_not_allowed)
        .fallback(qm_http::not_found)
        .with_state(state)
}

/// The operator API, served under both `/api/admin` and `/api/v1/admin`: the same handlers, so
/// the two answer byte for byte alike. Every route but `/session` (which signs a console in and
/// out) and `/events` (which also takes a ticket) requires a credential through `Authenticated`.
fn api_routes() -> Router<AdminState> {
    Router::new()
        .route("/rooms", get(rooms::list_rooms).post(rooms::put_room))
        .route(
            "/rooms/{id}",
            get(rooms::get_room).delete(rooms::delete_room),
        )
        .route("/rooms/{id}/state", post(rooms::set_state))
        .route("/rooms/{id}/rate", post(rooms::set_rate))
        .route("/rooms/{id}/flush", post(rooms::flush))
        .route("/rooms/{id}/schedule", post(rooms::schedule))
        .route("/rooms/{id}/eject", post(rooms::eject))
        .route("/rooms/{id}/purge", post(rooms::purge))
        .route("/rooms/{id}/visitors", get(visitors::lookup))
        .route("/rooms/{id}/targeting", get(targeting::targeting))
        .route("/rooms/{id}/connectors", get(connectors::connectors))
        .route("/health", get(health::admin_health))
        .route(
            "/session",
            get(session_routes::who)
                .post(session_routes::sign_in)
                .delete(session_routes::sign_out),
        )
        .route("/sse-ticket", post(events::mint_ticket))
        .route("/events", get(events::events))
        .route("/metrics", get(metrics::metrics))
        .method_not_allowed_fallback(qm_http::method_not_allowed)
}
