//! The one gate every operator-API route passes, built from that route's row of the grants table
//! (`crate::routes`). In order:
//!
//! 1. the client address (the gateway's identity rule, `qm_http::client_address`);
//! 2. a locked-out address is answered 429 `too_many_auth_failures` + Retry-After before any
//!    credential it sent is read (`crate::lockout`);
//! 3. a credential in the URL is refused (`credential_in_query`), on every route;
//! 4. the credential (Bearer, console cookie, or on the event stream a ticket) is judged
//!    (`crate::auth`); a wrong one counts against the lockout and is recorded as `auth.failed`;
//! 5. the principal's role is held against the row's grant: 403 `insufficient_role` naming the
//!    role needed;
//! 6. the route runs; a change (a row with an audit action) is recorded with who, what, the
//!    route, a redacted summary of the body, the client and the status answered.
//!
//! A route that judges a credential itself (the console's sign-in) marks a refusal on its
//! response (`RefusedCredential`) and the gate counts and records it the same way.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::Method;
use qm_core::{ApiError, ErrorCode};
use qm_proto::AuditEntry;

use crate::AdminState;
use crate::audit::{self, AuditNote};
use crate::auth::{
    self, AuthError, Authenticated, PresentedKind, RefusedCredential, log_refused,
    refuse_query_credential,
};
use crate::events::redeem_ticket;
use crate::principal::{Grant, Principal};
use qm_http::AppError;

/// Largest body a recorded change may carry (the summary is cut far below this).
const MAX_AUDITED_BODY_BYTES: usize = 1024 * 1024;

/// One row of the grants table: a route, what it needs, and what the trail calls it.
#[derive(Debug, Clone)]
pub(crate) struct RouteRow {
    pub(crate) method: Method,
    /// Where the route is mounted: `/api/admin` for the operator API, `` for a route of its own
    /// at the root (`/metrics`).
    pub(crate) mount: &'static str,
    /// The path under `mount`, as the router spells it (`/rooms/{id}/rate`).
    pub(crate) path: &'static str,
    pub(crate) grant: Grant,
    /// The audit action of a change (`room.rate`); `None` for a read, which is not recorded.
    pub(crate) action: Option<&'static str>,
    /// Whether `?ticket=` (an event-stream ticket) is accepted as the credential.
    pub(crate) tickets: bool,
}

impl RouteRow {
    /// The route as the trail names it: `POST /api/admin/rooms/:id/rate`.
    fn route_name(&self) -> String {
        format!(
            "{} {}{}",
            self.method,
            self.mount,
            self.path.replace("{id}", ":id")
        )
    }
}

/// The gate's state: the process's handles and the row it guards.
#[derive(Clone)]
pub(crate) struct Gate {
    pub(crate) state: AdminState,
    pub(crate) row: Arc<RouteRow>,
}

fn client_of(state: &AdminState, request: &Request) -> IpAddr {
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(peer)| peer.ip())
        .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    qm_http::client_address(peer, request.headers(), &state.config.trusted_proxies)
}

/// The room a change is about: the `{id}` of a room route, or the `id` of a room document.
fn room_of(row: &RouteRow, path: &str, body: &[u8]) -> String {
    if !row.action.is_some_and(|action| action.starts_with("room")) {
        return String::new();
    }
    if row.path.starts_with("/rooms/{id}") {
        return path
            .split("/rooms/")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_default()
            .to_owned();
    }
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|value| {
            value
                .get("id")
                .and_then(|id| id.as_str())
                .map(str::to_owned)
        })
        .unwrap_or_default()
}

/// What a recorded request was: filled in as the gate learns it.
struct Record {
    client: IpAddr,
    route: String,
    room_id: String,
    summary: String,
}

impl Record {
    fn entry(
        &self,
        actor: Option<&Principal>,
        action: &str,
        summary: String,
        status: u16,
    ) -> AuditEntry {
        let (actor_kind, actor_id, actor_name) = audit::actor_fields(actor);
        AuditEntry {
            id: 0,
            at_ms: qm_core::clock::now_ms(),
            actor_kind,
            actor_id,
            actor_name,
            action: action.to_owned(),
            room_id: self.room_id.clone(),
            route: self.route.clone(),
            summary,
            client: self.client.to_string(),
            status: u32::from(status),
        }
    }
}

/// Counts and records a refused credential.
async fn refused_credential(state: &AdminState, record: &Record, kind: PresentedKind, status: u16) {
    state.failures.fail(record.client).await;
    let summary = serde_json::json!({ "credential": kind.as_str() }).to_string();
    audit::append(state, record.entry(None, "auth.failed", summary, status)).await;
}

/// What the credential check reads of a request (owned: the body stays behind).
struct Head {
    method: Method,
    uri: http::Uri,
    headers: http::HeaderMap,
    peer: Option<IpAddr>,
}

/// Judges the request's credential for a row that needs one.
async fn judge(
    state: &AdminState,
    row: &RouteRow,
    head: &Head,
) -> Result<Authenticated, (AuthError, PresentedKind)> {
    let ticket = row
        .tickets
        .then(|| {
            head.uri.query().and_then(|query| {
                query
                    .split('&')
                    .filter_map(|pair| pair.split_once('='))
                    .find(|(name, _)| *name == "ticket")
                    .map(|(_, value)| value.to_owned())
            })
        })
        .flatten();
    let peer = head.peer;
    if let Some(ticket) = ticket {
        return match redeem_ticket(state, &ticket).await {
            Ok(caller) => Ok(caller),
            Err(error) => {
                if error.counts() {
                    log_refused(PresentedKind::EventTicket, peer, &error);
                }
                Err((error, PresentedKind::EventTicket))
            }
        };
    }
    let kind = if head.headers.contains_key(http::header::AUTHORIZATION) {
        PresentedKind::BearerKey
    } else {
        PresentedKind::ConsoleSession
    };
    auth::authenticate(state, &head.method, &head.uri, &head.headers, peer)
        .await
        .map_err(|error| (error, kind))
}

/// The gate (see the module documentation).
pub(crate) async fn gate(State(gate): State<Gate>, request: Request, next: Next) -> Response {
    let Gate { state, row } = gate;
    let client = client_of(&state, &request);
    if let Some(wait_sec) = state.failures.locked(client).await {
        let refusal = ApiError::new(
            ErrorCode::TooManyAuthFailures,
            "too many wrong credentials from this address; wait and try again",
        )
        .with_retry_after(wait_sec.max(1));
        return AppError(refusal).into_response();
    }
    // No key is ever accepted from a URL, on any route (the event stream's ticket is not a key).
    if let Err(error) = refuse_query_credential(request.uri()) {
        return AppError::from(error).into_response();
    }
    let mut record = Record {
        client,
        route: row.route_name(),
        room_id: String::new(),
        summary: "null".to_owned(),
    };

    let (caller, mut request) = if row.grant == Grant::Open {
        (None, request)
    } else {
        let head = Head {
            method: request.method().clone(),
            uri: request.uri().clone(),
            headers: request.headers().clone(),
            peer: auth::peer_of(request.extensions()),
        };
        match judge(&state, &row, &head).await {
            Ok(caller) => (Some(caller), request),
            Err((error, kind)) => {
                let counts = error.counts();
                let response = AppError::from(error).into_response();
                if counts {
                    refused_credential(&state, &record, kind, response.status().as_u16()).await;
                }
                return response;
            }
        }
    };

    // A change's body is read once here for its summary, then handed on unchanged.
    if row.action.is_some() {
        let (parts, body) = request.into_parts();
        let bytes = match axum::body::to_bytes(body, MAX_AUDITED_BODY_BYTES).await {
            Ok(bytes) => bytes,
            Err(_) => {
                let refusal = ApiError::new(
                    ErrorCode::PayloadTooLarge,
                    "the body is larger than an admin change may be",
                );
                return AppError(refusal).into_response();
            }
        };
        record.summary = audit::summarize(&bytes);
        record.room_id = room_of(&row, parts.uri.path(), &bytes);
        request = Request::from_parts(parts, Body::from(bytes));
    }

    let response = match &caller {
        Some(caller) => match row.grant.check(&caller.principal) {
            Ok(()) => {
                request.extensions_mut().insert(caller.clone());
                next.run(request).await
            }
            Err(refusal) => AppError(refusal).into_response(),
        },
        None => next.run(request).await,
    };

    let status = response.status().as_u16();
    if let Some(RefusedCredential(kind)) = response.extensions().get::<RefusedCredential>() {
        refused_credential(&state, &record, *kind, status).await;
        return response;
    }
    if let Some(action) = row.action {
        let note = response
            .extensions()
            .get::<AuditNote>()
            .cloned()
            .unwrap_or_default();
        let actor = note
            .actor
            .as_ref()
            .or(caller.as_ref().map(|caller| &caller.principal));
        let action = note.action.unwrap_or(action);
        // A change nobody made (a sign-out with no session, an unauthenticated refusal of an
        // open route) is not a change: nothing to record.
        if actor.is_some() {
            let entry = record.entry(actor, action, record.summary.clone(), status);
            audit::append(&state, entry).await;
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(method: Method, path: &'static str, action: Option<&'static str>) -> RouteRow {
        RouteRow {
            method,
            mount: "/api/admin",
            path,
            grant: Grant::Change,
            action,
            tickets: false,
        }
    }

    #[test]
    fn the_trail_names_the_route_by_its_pattern() {
        let rate = row(Method::POST, "/rooms/{id}/rate", Some("room.rate"));
        assert_eq!(rate.route_name(), "POST /api/admin/rooms/:id/rate");
    }

    #[test]
    fn a_change_names_its_room_from_the_path_or_the_document() {
        let rate = row(Method::POST, "/rooms/{id}/rate", Some("room.rate"));
        assert_eq!(
            room_of(&rate, "/api/v1/admin/rooms/shop-1/rate", b"{}"),
            "shop-1"
        );
        let put = row(Method::POST, "/rooms", Some("room.put"));
        assert_eq!(
            room_of(&put, "/api/admin/rooms", br#"{"id":"shop-2"}"#),
            "shop-2"
        );
        assert_eq!(room_of(&put, "/api/admin/rooms", b"not json"), "");
        let operator = row(Method::DELETE, "/operators/{id}", Some("operator.revoke"));
        assert_eq!(room_of(&operator, "/api/admin/operators/op-1", b""), "");
    }
}
