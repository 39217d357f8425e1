//! POST /api/notify {token?, email?, roomId?}: registers (or, with an empty or omitted email,
//! withdraws) the visitor's turn notification, and the `notify` statement of /api/join.
//!
//! The place comes from the body token or the queue cookie, never the URL, and it counts only
//! with its ownership cookie `qms_<roomId>`: a token presented by another browser carries no
//! place, so it is refused like an invalid token. Without a body token the room is `roomId` when
//! given, else the one room whose `qm_<roomId>` cookie verifies. The engine checks the address,
//! the generation and the binding, and stores the record.

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::header::CACHE_CONTROL;
use http::{HeaderMap, HeaderValue};
use qm_core::{ApiError, ErrorCode};
use qm_proto::{NotifyRequest, NotifyStatement, PlaceReply};
use serde_json::{Map, Value, json};

use crate::GatewayState;
use crate::body_fields::{optional_room_id_field, token_field};
use crate::cookies::RequestCookies;
use crate::places::{PresentedPlace, presented_session_hash};
use crate::request::{ClientAddress, JsonObject};
use qm_http::AppError;

/// Longer than any address (254): the engine checks the address itself.
const MAX_EMAIL_FIELD_LEN: usize = 320;

/// A notify body, once its fields are checked.
#[derive(Debug, PartialEq, Eq)]
struct NotifyBody {
    token: Option<String>,
    /// Empty: withdraw.
    email: String,
    room_id: Option<String>,
}

fn parse_notify_body(body: &Map<String, Value>) -> Result<NotifyBody, ApiError> {
    let token = token_field(body)?;
    let email = match body.get("email") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(email)) if email.len() <= MAX_EMAIL_FIELD_LEN => email.trim().to_owned(),
        Some(_) => {
            return Err(ApiError::new(
                ErrorCode::InvalidEmail,
                "email must be a string: an e-mail address, or empty to withdraw",
            ));
        }
    };
    let room_id = optional_room_id_field(body)?;
    Ok(NotifyBody {
        token,
        email,
        room_id,
    })
}

/// POST /api/notify.
pub(crate) async fn notify(
    State(state): State<GatewayState>,
    ClientAddress(address): ClientAddress,
    headers: HeaderMap,
    body: Result<JsonObject, AppError>,
) -> Result<Response, AppError> {
    // Shares the join budget: each registration can cause an e-mail to an address the caller
    // chose, so it is held to the rate a client may take places at.
    state.join_limiter.admit(address)?;
    let JsonObject(body) = body?;
    let notify_body = parse_notify_body(&body)?;
    let cookies = RequestCookies::from_headers(&headers);
    let place = presented_place(&state, &notify_body, &cookies)?;
    let room_id = place.claims.room_id.clone();
    let session_hash = presented_session_hash(&cookies, &room_id);
    if session_hash.is_empty() {
        return Err(AppError(not_this_browser()));
    }
    let request = NotifyRequest {
        room_id,
        claim: Some(place.engine_claim()),
        session_hash,
        email: notify_body.email,
    };
    let reply = state.engine.clone().notify(request).await?.into_inner();
    let answer = json!({ "ok": true, "notify": statement_json(reply.notify.as_ref()) });
    let mut response = Json(answer).into_response();
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// The body token when one is sent (it must verify: a bad one is not silently replaced by a
/// cookie naming some other place), else the queue cookie.
fn presented_place(
    state: &GatewayState,
    body: &NotifyBody,
    cookies: &RequestCookies,
) -> Result<PresentedPlace, ApiError> {
    let check = state.token_check();
    match &body.token {
        Some(token) => check.verify(token, body.room_id.as_deref()).ok_or_else(|| {
            ApiError::new(
                ErrorCode::InvalidToken,
                "the token does not verify (or names another room); join again",
            )
        }),
        None => check.for_status(None, body.room_id.as_deref(), cookies),
    }
}

fn not_this_browser() -> ApiError {
    ApiError::new(
        ErrorCode::InvalidToken,
        "this place belongs to the browser that queued for it; its ownership cookie was not sent",
    )
}

/// `{emailMasked, requestedAt, delivery}` or null.
pub(crate) fn statement_json(statement: Option<&NotifyStatement>) -> Value {
    match statement {
        Some(statement) => json!({
            "emailMasked": statement.email_masked,
            "requestedAt": statement.requested_at_ms,
            "delivery": statement.delivery,
        }),
        None => Value::Null,
    }
}

/// Adds `notify` to a join answer when the engine made a statement (EMAIL_NOTIFY on): the page
/// reads its absence as "no statement" and null as "nothing stored".
pub(crate) fn add_join_statement(answer: &mut Map<String, Value>, reply: &PlaceReply) {
    if reply.notify_enabled {
        answer.insert("notify".into(), statement_json(reply.notify.as_ref()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{assert_refused, object as body};

    #[test]
    fn notify_bodies_are_checked_field_by_field() {
        assert_eq!(
            parse_notify_body(&body(json!({ "token": "t.s", "email": " a@b.c " }))),
            Ok(NotifyBody {
                token: Some("t.s".into()),
                email: "a@b.c".into(),
                room_id: None,
            })
        );
        let withdraw = parse_notify_body(&body(json!({ "roomId": "r", "email": null }))).unwrap();
        assert_eq!(withdraw.email, "");
        assert_eq!(withdraw.room_id.as_deref(), Some("r"));
        assert_eq!(parse_notify_body(&body(json!({}))).unwrap().token, None);
        assert_refused(
            parse_notify_body,
            &[
                (json!({ "token": 5 }), ErrorCode::InvalidTokenField),
                (json!({ "token": ["t"] }), ErrorCode::InvalidTokenField),
                (
                    json!({ "token": "x".repeat(4097) }),
                    ErrorCode::InvalidTokenField,
                ),
                (json!({ "email": 7 }), ErrorCode::InvalidEmail),
                (json!({ "email": "x".repeat(321) }), ErrorCode::InvalidEmail),
                (json!({ "roomId": "no spaces" }), ErrorCode::InvalidRoomId),
                // The token is checked first, the room last.
                (
                    json!({ "token": 5, "roomId": "no spaces" }),
                    ErrorCode::InvalidTokenField,
                ),
                (
                    json!({ "email": 7, "roomId": "no spaces" }),
                    ErrorCode::InvalidEmail,
                ),
            ],
        );
    }

    #[test]
    fn the_join_statement_is_absent_when_off_and_null_when_empty() {
        let mut answer = Map::new();
        add_join_statement(&mut answer, &PlaceReply::default());
        assert!(!answer.contains_key("notify"));
        let enabled = PlaceReply {
            notify_enabled: true,
            ..PlaceReply::default()
        };
        add_join_statement(&mut answer, &enabled);
        assert_eq!(answer["notify"], Value::Null);
        let stored = PlaceReply {
            notify_enabled: true,
            notify: Some(NotifyStatement {
                email_masked: "j***@e***.com".into(),
                requested_at_ms: 7,
                delivery: "pending".into(),
            }),
            ..PlaceReply::default()
        };
        add_join_statement(&mut answer, &stored);
        assert_eq!(
            answer["notify"],
            json!({ "emailMasked": "j***@e***.com", "requestedAt": 7, "delivery": "pending" })
        );
    }
}
