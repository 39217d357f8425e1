//! Named operators and monitor tokens: `GET/POST /api/admin/operators`, `DELETE
//! /api/admin/operators/:id`, `GET/POST/DELETE /api/admin/monitor-token`, and `POST
//! /api/admin/shutdown`. The keys are minted here (`crate::keys`) and shown once; the engine
//! stores only their verifiers. No route changes an operator's role: revoke and create anew.

use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use http::HeaderMap;
use qm_core::{ApiError, ErrorCode};
use qm_proto::{
    CreateMonitorTokenRequest, CreateOperatorRequest, ListMonitorTokensRequest,
    ListOperatorsRequest, MonitorToken, Operator, RevokeMonitorTokensRequest,
    RevokeOperatorRequest,
};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::AdminState;
use crate::auth::Authenticated;
use crate::extract::ObjectBody;
use crate::keys::{self, KeyKind};
use crate::principal::Role;
use qm_http::AppError;

type Answer = Result<Json<Value>, AppError>;

/// Longest a monitor token may be minted for: a year.
const MAX_MONITOR_TTL_SEC: u64 = 366 * 24 * 3600;

fn operator_json(operator: &Operator) -> Value {
    json!({
        "id": operator.id,
        "name": operator.name,
        "role": operator.role,
        "createdAt": operator.created_at_ms,
        "createdBy": operator.created_by,
    })
}

fn monitor_json(token: &MonitorToken) -> Value {
    json!({
        "id": token.id,
        "label": token.label,
        "createdAt": token.created_at_ms,
        "createdBy": token.created_by,
        "expiresAt": (token.expires_at_ms != 0).then_some(token.expires_at_ms),
    })
}

/// GET /operators.
pub(crate) async fn list(State(state): State<AdminState>) -> Answer {
    let reply = state
        .engine
        .clone()
        .list_operators(ListOperatorsRequest {})
        .await?
        .into_inner();
    let operators: Vec<Value> = reply.operators.iter().map(operator_json).collect();
    Ok(Json(json!({ "operators": operators })))
}

/// POST /operators `{name, role}` → `{operator, key}`: the key is shown this once.
pub(crate) async fn create(
    caller: Authenticated,
    State(state): State<AdminState>,
    ObjectBody(body): ObjectBody,
) -> Answer {
    if let Some(unknown) = body.as_object().and_then(|fields| {
        fields
            .keys()
            .find(|name| !["name", "role"].contains(&name.as_str()))
    }) {
        return Err(ApiError::new(
            ErrorCode::UnknownField,
            format!("{unknown} is not a field of an operator (name, role)"),
        )
        .into());
    }
    let role = body.get("role").and_then(Value::as_str).unwrap_or("");
    if Role::parse_operator_role(role).is_none() {
        return Err(ApiError::new(
            ErrorCode::InvalidRole,
            "role must be one of owner, operator, viewer",
        )
        .into());
    }
    let name = body.get("name").and_then(Value::as_str).unwrap_or("");
    let keyring = &state.config.keyring();
    let key = keys::mint(keyring, KeyKind::Operator);
    let request = CreateOperatorRequest {
        name: name.to_owned(),
        role: role.to_owned(),
        verifiers: keys::verifiers(keyring, KeyKind::Operator, &key),
        created_by: caller.principal.name.clone(),
    };
    let operator = state
        .engine
        .clone()
        .create_operator(request)
        .await?
        .into_inner();
    Ok(Json(
        json!({ "ok": true, "operator": operator_json(&operator), "key": key }),
    ))
}

/// DELETE /operators/:id: revoked at once on every admin instance (the next request with its
/// key, or a console it signed in, finds nothing).
pub(crate) async fn revoke(State(state): State<AdminState>, Path(id): Path<String>) -> Answer {
    let reply = state
        .engine
        .clone()
        .revoke_operator(RevokeOperatorRequest { id })
        .await?
        .into_inner();
    let operator = reply.operator.as_ref().map(operator_json);
    Ok(Json(json!({ "ok": true, "operator": operator })))
}

/// The base of a link into this admin process: the scheme and Host the caller used.
fn admin_base(headers: &HeaderMap) -> String {
    let host = headers
        .get(http::header::HOST)
        .and_then(|value| value.to_str().ok())
        .filter(|host| {
            host.bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || b".-:[]".contains(&byte))
        });
    let scheme = headers
        .get("x-forwarded-proto")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(',').next())
        .map(str::trim)
        .filter(|scheme| scheme.eq_ignore_ascii_case("https"))
        .map_or("http", |_| "https");
    host.map_or_else(String::new, |host| format!("{scheme}://{host}"))
}

/// POST /monitor-token `{label?, expiresInSec?}` → `{token, id, link}`: the token is shown this
/// once; the link carries it in the URL fragment, which no browser sends to a server.
pub(crate) async fn mint_monitor(
    caller: Authenticated,
    State(state): State<AdminState>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let fields = if body.iter().all(u8::is_ascii_whitespace) {
        Map::new()
    } else {
        match serde_json::from_slice::<Value>(&body) {
            Ok(Value::Object(fields)) => fields,
            _ => {
                return Err(AppError::new(
                    ErrorCode::InvalidJson,
                    "the body must be a JSON object (or empty)",
                ));
            }
        }
    };
    if let Some(unknown) = fields
        .keys()
        .find(|name| !["label", "expiresInSec"].contains(&name.as_str()))
    {
        return Err(ApiError::new(
            ErrorCode::UnknownField,
            format!("{unknown} is not a field of a monitor token (label, expiresInSec)"),
        )
        .into());
    }
    let label = match fields.get("label") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(label)) => label.trim().to_owned(),
        Some(_) => {
            return Err(ApiError::new(ErrorCode::InvalidLabel, "label must be a string").into());
        }
    };
    let expires_at_ms = match fields.get("expiresInSec") {
        None | Some(Value::Null) => 0,
        Some(value) => {
            match value.as_u64() {
                Some(seconds) if (60..=MAX_MONITOR_TTL_SEC).contains(&seconds) => {
                    let millis =
                        i64::try_from(Duration::from_secs(seconds).as_millis()).unwrap_or(i64::MAX);
                    qm_core::clock::now_ms().saturating_add(millis)
                }
                _ => {
                    return Err(ApiError::new(
                    ErrorCode::InvalidExpiry,
                    format!("expiresInSec must be a whole number of seconds, 60..{MAX_MONITOR_TTL_SEC}"),
                )
                .into());
                }
            }
        }
    };
    let keyring = &state.config.keyring();
    let token = keys::mint(keyring, KeyKind::Monitor);
    let request = CreateMonitorTokenRequest {
        label,
        verifiers: keys::verifiers(keyring, KeyKind::Monitor, &token),
        created_by: caller.principal.name.clone(),
        expires_at_ms,
    };
    let created = state
        .engine
        .clone()
        .create_monitor_token(request)
        .await?
        .into_inner();
    let link = format!("{}/#monitor={token}", admin_base(&headers));
    Ok(Json(json!({
        "ok": true,
        "token": token,
        "id": created.id,
        "link": link,
        "monitor": monitor_json(&created),
    })))
}

/// GET /monitor-token: the live share links (never their tokens, which are not kept).
pub(crate) async fn list_monitors(State(state): State<AdminState>) -> Answer {
    let reply = state
        .engine
        .clone()
        .list_monitor_tokens(ListMonitorTokensRequest {})
        .await?
        .into_inner();
    let tokens: Vec<Value> = reply.tokens.iter().map(monitor_json).collect();
    Ok(Json(json!({ "tokens": tokens })))
}

#[derive(Debug, Deserialize)]
pub(crate) struct RevokeQuery {
    id: Option<String>,
    all: Option<String>,
}

/// DELETE /monitor-token?id= (one) or ?all=1 (every one).
pub(crate) async fn revoke_monitors(
    State(state): State<AdminState>,
    Query(query): Query<RevokeQuery>,
) -> Answer {
    let all = query.all.as_deref() == Some("1");
    let id = query.id.unwrap_or_default();
    if !all && id.is_empty() {
        return Err(ApiError::new(
            ErrorCode::MissingField,
            "name the share link to revoke (?id=) or revoke every one (?all=1)",
        )
        .into());
    }
    let reply = state
        .engine
        .clone()
        .revoke_monitor_tokens(RevokeMonitorTokensRequest { id, all })
        .await?
        .into_inner();
    Ok(Json(json!({ "ok": true, "revoked": reply.revoked })))
}

/// POST /shutdown → `{ok, stopping, uptimeSec}`, then a clean stop: this admin process stops
/// serving (open requests drain), and a process running it with others (`qm all`) stops them
/// in its usual order, because a component that stops on its own stops the rest.
pub(crate) async fn shutdown(State(state): State<AdminState>) -> Json<Value> {
    let uptime_sec = state.started_at.elapsed().as_secs();
    tracing::warn!(uptime_sec, "shutdown requested through the admin API");
    let stop = state.stop.clone();
    // A moment for this answer to be written before the listener closes.
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        stop.trigger();
    });
    Json(json!({ "ok": true, "stopping": true, "uptimeSec": uptime_sec }))
}
