//! The audit trail, admin side: what an entry says (who, what, the route, a redacted summary of
//! the body, the client address, the status answered), written by the gate (`crate::gate`) for
//! every change and every refused credential — one place, not per handler — and read back by
//! `GET /api/admin/audit`. The engine keeps the trail (append-only; Postgres on the durable
//! store).
//!
//! When the append fails (the engine unreachable, storage down) the change has already happened,
//! so its answer still goes out; the failure is logged at error with the action and route. The
//! append is awaited (bounded by [`APPEND_TIMEOUT`]) before the answer, so an answered change is
//! in the trail whenever the engine took it.

use std::time::Duration;

use axum::Json;
use axum::extract::{Query, State};
use qm_core::{ApiError, ErrorCode};
use qm_proto::{AuditEntry, ListAuditRequest};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::AdminState;
use crate::principal::Principal;
use qm_http::AppError;

/// How long an append may take before the answer goes out without it.
const APPEND_TIMEOUT: Duration = Duration::from_secs(3);
/// Longest summary kept (characters of JSON text).
const SUMMARY_MAX_CHARS: usize = 2_000;
/// Field names whose values never reach the trail: keys, secrets, tokens, passwords, e-mail.
const SECRET_FIELD_PARTS: &[&str] = &["key", "secret", "token", "password", "email", "cookie"];

/// Put on a response by a handler that knows more than the grants table: who acted (the
/// console's sign-in names the principal it just signed in) or which action it was (a room
/// write is a create or an update).
#[derive(Debug, Clone, Default)]
pub(crate) struct AuditNote {
    pub(crate) actor: Option<Principal>,
    pub(crate) action: Option<&'static str>,
}

impl AuditNote {
    pub(crate) fn actor(principal: Principal) -> AuditNote {
        AuditNote {
            actor: Some(principal),
            action: None,
        }
    }

    pub(crate) fn action(action: &'static str) -> AuditNote {
        AuditNote {
            actor: None,
            action: Some(action),
        }
    }
}

/// The body's summary for the trail: the JSON with every secret-looking field's value replaced
/// (the field name is kept, so the trail says a key was sent, never which); `null` when there is
/// no body, a note when it is not JSON.
pub(crate) fn summarize(body: &[u8]) -> String {
    if body.iter().all(u8::is_ascii_whitespace) {
        return "null".to_owned();
    }
    let Ok(mut value) = serde_json::from_slice::<Value>(body) else {
        return json!({ "unreadable": body.len() }).to_string();
    };
    redact(&mut value);
    let mut text = value.to_string();
    if text.chars().count() > SUMMARY_MAX_CHARS {
        text = text.chars().take(SUMMARY_MAX_CHARS).collect::<String>() + "…";
    }
    text
}

fn is_secret_field(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    SECRET_FIELD_PARTS.iter().any(|part| lower.contains(part))
}

fn redact(value: &mut Value) {
    match value {
        Value::Object(fields) => {
            for (name, field) in fields.iter_mut() {
                if is_secret_field(name) {
                    *field = Value::String("[redacted]".to_owned());
                } else {
                    redact(field);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact),
        _ => {}
    }
}

/// The entry's actor fields for a principal, or the anonymous actor of a refused credential.
pub(crate) fn actor_fields(principal: Option<&Principal>) -> (String, String, String) {
    match principal {
        Some(principal) => (
            principal.kind.as_str().to_owned(),
            principal.id.clone(),
            principal.name.clone(),
        ),
        None => ("anonymous".to_owned(), String::new(), String::new()),
    }
}

/// Appends one entry; a failure is logged, never answered.
pub(crate) async fn append(state: &AdminState, entry: AuditEntry) {
    let action = entry.action.clone();
    let route = entry.route.clone();
    let call = async { state.engine.clone().append_audit(entry).await };
    match tokio::time::timeout(APPEND_TIMEOUT, call).await {
        Ok(Ok(_)) => {}
        Ok(Err(status)) => {
            tracing::error!(%action, %route, error = %status.message(), "audit append failed");
        }
        Err(_) => tracing::error!(%action, %route, "audit append timed out"),
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct AuditQuery {
    room: Option<String>,
    operator: Option<String>,
    action: Option<String>,
    since: Option<String>,
    until: Option<String>,
    before: Option<String>,
    limit: Option<String>,
}

fn number<T: std::str::FromStr>(name: &str, text: Option<&str>) -> Result<Option<T>, ApiError> {
    match text.map(str::trim).filter(|text| !text.is_empty()) {
        None => Ok(None),
        Some(text) => text.parse().map(Some).map_err(|_| {
            ApiError::new(
                ErrorCode::InvalidAuditQuery,
                format!("{name} must be a whole number"),
            )
        }),
    }
}

fn entry_json(entry: &AuditEntry) -> Value {
    let summary = serde_json::from_str::<Value>(&entry.summary)
        .unwrap_or_else(|_| Value::String(entry.summary.clone()));
    let mut object = Map::new();
    object.insert("id".to_owned(), json!(entry.id));
    object.insert("at".to_owned(), json!(entry.at_ms));
    object.insert(
        "actor".to_owned(),
        json!({ "kind": entry.actor_kind, "id": entry.actor_id, "name": entry.actor_name }),
    );
    object.insert("action".to_owned(), json!(entry.action));
    object.insert(
        "roomId".to_owned(),
        if entry.room_id.is_empty() {
            Value::Null
        } else {
            json!(entry.room_id)
        },
    );
    object.insert("route".to_owned(), json!(entry.route));
    object.insert("summary".to_owned(), summary);
    object.insert("client".to_owned(), json!(entry.client));
    object.insert("status".to_owned(), json!(entry.status));
    Value::Object(object)
}

/// GET /api/admin/audit?room=&operator=&action=&since=&until=&before=&limit= → `{entries,
/// next}`: newest first; `next` is the `before` of the following page, null on the last.
/// Instants are epoch ms.
pub(crate) async fn list(
    State(state): State<AdminState>,
    Query(query): Query<AuditQuery>,
) -> Result<Json<Value>, AppError> {
    let limit: Option<u32> = number("limit", query.limit.as_deref())?;
    if limit.is_some_and(|limit| !(1..=500).contains(&limit)) {
        return Err(ApiError::new(ErrorCode::InvalidAuditQuery, "limit must be 1..500").into());
    }
    let request = ListAuditRequest {
        room_id: query.room.unwrap_or_default(),
        operator: query.operator.unwrap_or_default(),
        action: query.action.unwrap_or_default(),
        since_ms: number("since", query.since.as_deref())?.unwrap_or(0),
        until_ms: number("until", query.until.as_deref())?.unwrap_or(0),
        before_id: number("before", query.before.as_deref())?.unwrap_or(0),
        limit: limit.unwrap_or(100),
    };
    let reply = state.engine.clone().list_audit(request).await?.into_inner();
    let entries: Vec<Value> = reply.entries.iter().map(entry_json).collect();
    let next = (reply.next_before_id != 0).then_some(reply.next_before_id);
    Ok(Json(json!({ "entries": entries, "next": next })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_dropped_and_field_names_kept() {
        let body = br#"{"key":"qmo_abc","name":"Ann","nested":{"adminKey":"k","email":"a@b.c","rate":5},"list":[{"token":"t"}]}"#;
        let summary: Value = serde_json::from_str(&summarize(body)).expect("json");
        assert_eq!(summary["key"], "[redacted]");
        assert_eq!(summary["name"], "Ann");
        assert_eq!(summary["nested"]["adminKey"], "[redacted]");
        assert_eq!(summary["nested"]["email"], "[redacted]");
        assert_eq!(summary["nested"]["rate"], 5);
        assert_eq!(summary["list"][0]["token"], "[redacted]");
        let text = summarize(body);
        for secret in ["qmo_abc", "a@b.c", "\"k\"", "\"t\""] {
            assert!(!text.contains(secret), "{text}");
        }
    }

    #[test]
    fn an_empty_or_unreadable_body_is_summarized_without_its_text() {
        assert_eq!(summarize(b""), "null");
        assert_eq!(summarize(b"key=secret"), r#"{"unreadable":10}"#);
    }
}
