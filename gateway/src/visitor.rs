//! POST /api/join and GET /api/status: a place in line, its cookies and the cookie cap, and the
//! place's status, re-signing a due token (see [`crate::refresh`]). The engine decides every
//! place; the gateway verifies and signs tokens and hands the engine only verified claims and the
//! hash of the ownership cookie.

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::header::CACHE_CONTROL;
use http::{HeaderMap, HeaderValue};
use qm_core::ApiError;
use qm_core::clock::now_ms;
use qm_core::ids::{is_valid_session_id, new_session_id, session_hash};
use qm_core::token::{VisitorClaims, VisitorPlace};
use qm_proto::{JoinRequest, PlaceStatus, place_reply, place_status};
use serde_json::{Map, Value};

use crate::GatewayState;
use crate::body_fields::{room_id_field, token_field};
use crate::cookies::{
    CookiePolicy, RequestCookies, append_set_cookies, place_cookies, session_cookie_name,
};
use crate::protection::bot_reasons;
use crate::refresh::{Renewal, drawn_place, engine_grants_refresh, is_due};
use crate::request::{ClientAddress, JsonObject, QueryParams, is_https};
use crate::status_body::{lapsed_fields, place_fields_with_ref, with_now};
use crate::status_read::{read_status, status_request};
use qm_http::AppError;

/// What a join body asks for, once its fields are checked.
#[derive(Debug, PartialEq, Eq)]
struct JoinBody {
    room_id: String,
    token: Option<String>,
}

fn parse_join_body(body: &Map<String, Value>) -> Result<JoinBody, ApiError> {
    let room_id = room_id_field(body)?;
    let token = token_field(body)?;
    Ok(JoinBody { room_id, token })
}

/// POST /api/join {roomId, token?}.
pub(crate) async fn join(
    State(state): State<GatewayState>,
    ClientAddress(address): ClientAddress,
    headers: HeaderMap,
    body: Result<JsonObject, AppError>,
) -> Result<Response, AppError> {
    // The limit comes first: a refused client costs no parsing, no HMAC and no engine call.
    state.join_limiter.admit(address)?;
    let JsonObject(body) = body?;
    let join_body = parse_join_body(&body)?;
    let room_id = join_body.room_id.as_str();
    let joined = join_room(
        &state,
        room_id,
        join_body.token.as_deref(),
        address.to_string(),
        &headers,
    )
    .await?;
    tracing::debug!(
        room_id,
        new_place = joined.place.new_place,
        "visitor joined"
    );

    let mut answer = Map::new();
    answer.insert("token".into(), Value::String(joined.token));
    answer.extend(with_now(
        place_fields_with_ref(&joined.place, &state.support_ref_key, room_id),
        joined.place.now_ms,
    ));
    answer.extend(joined.notify_statement);
    let set_cookies = joined.set_cookies;

    let mut response = Json(Value::Object(answer)).into_response();
    let response_headers = response.headers_mut();
    response_headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    append_set_cookies(response_headers, &set_cookies);
    Ok(response)
}

/// A join as the engine answered it, ready to hand back.
pub(crate) struct Joined {
    pub(crate) place: PlaceStatus,
    /// The token that names the place: the one presented when the place was kept unchanged.
    pub(crate) token: String,
    /// `qm_<room>` and `qms_<room>` (and the expiries ROOM_COOKIE_CAP asks for).
    pub(crate) set_cookies: Vec<String>,
    /// `notify`, when EMAIL_NOTIFY is on; empty otherwise.
    pub(crate) notify_statement: Map<String, Value>,
}

/// Joins `room_id` for the browser that sent `headers` (its cookies, its bot score), claiming
/// the place named by `body_token` or else the queue cookie. Shared by /api/join and the
/// waiting page's form.
pub(crate) async fn join_room(
    state: &GatewayState,
    room_id: &str,
    body_token: Option<&str>,
    identity: String,
    headers: &HeaderMap,
) -> Result<Joined, ApiError> {
    let cookies = RequestCookies::from_headers(headers);
    let now = now_ms();
    let presented = state
        .token_check_at(now)
        .for_join(room_id, body_token, &cookies);
    let session_id = cookies
        .get(&session_cookie_name(room_id))
        .filter(|session_id| is_valid_session_id(session_id))
        .map(str::to_owned)
        .unwrap_or_else(new_session_id);
    let reasons = bot_reasons(headers);
    let request = JoinRequest {
        room_id: room_id.to_owned(),
        claim: presented.as_ref().map(|place| place.engine_claim()),
        session_hash: session_hash(&session_id),
        identity,
        bot_score: qm_core::bot::score_of(reasons),
        bot_reasons: reasons,
    };
    let mut reply = state.visitor_calls.join(request).await?;
    let mut notify_statement = Map::new();
    crate::notify::add_join_statement(&mut notify_statement, &reply);
    let Some(place_reply::Outcome::Place(place)) = reply.outcome.take() else {
        return Err(ApiError::internal(
            "the engine answered a join without a place",
        ));
    };

    // A kept place answers the token presented, unchanged; a new place (or a pre-queue handle
    // exchanged for its drawn ticket) gets a newly signed one.
    let claims = claims_of(room_id, &place, now)?;
    let token = match &presented {
        Some(presented)
            if !place.new_place
                && presented.claims.place == claims.place
                && presented.claims.generation == claims.generation =>
        {
            presented.token.clone()
        }
        _ => state.keyring.sign_visitor(&claims),
    };
    let policy = CookiePolicy {
        max_age_sec: state.config.queue_cookie_max_age_sec,
        secure: is_https(headers),
    };
    let set_cookies = place_cookies(
        &policy,
        &cookies,
        room_id,
        &token,
        &session_id,
        state.config.room_cookie_cap,
    );
    Ok(Joined {
        place,
        token,
        set_cookies,
        notify_statement,
    })
}

/// The claims of the place the engine answered, issued now.
fn claims_of(room_id: &str, place: &PlaceStatus, now: i64) -> Result<VisitorClaims, ApiError> {
    let visitor_place = match place.place {
        Some(place_status::Place::Ticket(ticket)) => VisitorPlace::Ticket(ticket),
        Some(place_status::Place::Handle(handle)) => VisitorPlace::Handle(handle),
        None => {
            return Err(ApiError::internal(
                "the engine minted a place without a ticket or handle",
            ));
        }
    };
    Ok(VisitorClaims {
        room_id: room_id.to_owned(),
        place: visitor_place,
        generation: place.generation,
        iat: now,
    })
}

/// GET /api/status?token= (or ?roomId= to pick the cookie).
pub(crate) async fn status(
    State(state): State<GatewayState>,
    ClientAddress(address): ClientAddress,
    query: QueryParams,
    headers: HeaderMap,
) -> Result<Response, AppError> {
    // Before any work: a page polls every 5 s only while its stream is down.
    state.status_limiter.admit_as(address, "status reads")?;
    let cookies = RequestCookies::from_headers(&headers);
    let now = now_ms();
    let place = state
        .token_check_at(now)
        .for_status_query(&query, &cookies)?;
    let request = status_request(&place, &cookies);
    let refresh_after_ms = state.config.token_refresh_after_ms();
    let mut renewal = None;
    let body = match read_status(&state.visitor_calls, request).await? {
        place_reply::Outcome::Place(answer) => {
            let drawn = drawn_place(&place.claims, &answer);
            if (drawn.is_some() || is_due(&place.claims, now, refresh_after_ms))
                && engine_grants_refresh(&place.claims, &answer)
            {
                let claims = VisitorClaims {
                    place: drawn.unwrap_or(place.claims.place),
                    ..place.claims.clone()
                };
                renewal = Renewal::issue(&state, &claims, &cookies, &headers, now);
            }
            let fields =
                place_fields_with_ref(&answer, &state.support_ref_key, &place.claims.room_id);
            with_now(fields, answer.now_ms)
        }
        place_reply::Outcome::Lapsed(lapsed) => lapsed_fields(&lapsed.reason),
    };
    let body = match &renewal {
        Some(renewal) => {
            let mut renewed = Map::new();
            renewed.insert("token".into(), Value::String(renewal.token.clone()));
            renewed.extend(body);
            renewed
        }
        None => body,
    };
    let mut response = Json(Value::Object(body)).into_response();
    let response_headers = response.headers_mut();
    response_headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Some(renewal) = &renewal {
        append_set_cookies(response_headers, &renewal.set_cookies);
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{assert_refused, object as body};
    use qm_core::ErrorCode;
    use serde_json::json;

    #[test]
    fn join_bodies_are_checked_field_by_field() {
        assert_eq!(
            parse_join_body(&body(json!({ "roomId": "launch", "token": "t.s" }))),
            Ok(JoinBody {
                room_id: "launch".into(),
                token: Some("t.s".into())
            })
        );
        assert_eq!(
            parse_join_body(&body(json!({ "roomId": "launch", "token": null }))).map(|b| b.token),
            Ok(None)
        );
        assert_eq!(
            parse_join_body(&body(json!({ "roomId": "launch", "token": "" }))).map(|b| b.token),
            Ok(None)
        );
        assert_refused(
            parse_join_body,
            &[
                (json!({}), ErrorCode::InvalidRoomId),
                (json!({ "roomId": 7 }), ErrorCode::InvalidRoomId),
                (json!({ "roomId": "has space" }), ErrorCode::InvalidRoomId),
                // The room is checked first.
                (json!({ "token": 12 }), ErrorCode::InvalidRoomId),
                (
                    json!({ "roomId": "r", "token": 12 }),
                    ErrorCode::InvalidTokenField,
                ),
                (
                    json!({ "roomId": "r", "token": "x".repeat(4097) }),
                    ErrorCode::InvalidTokenField,
                ),
            ],
        );
    }
}
