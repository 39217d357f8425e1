//! The door check's status form (`GET /api/check?answer=status`), for a reverse proxy that
//! reads only a subrequest's status and headers — nginx's `auth_request` without njs: 204
//! serves the page, 401 sends the visitor to `X-QM-Location`. Everything such a proxy cannot
//! do itself (URL decoding and encoding, cookie lines) is done here, so its configuration needs
//! none. The JSON form (`check.rs`) is unchanged beside it.

use axum::Json;
use axum::response::{IntoResponse, Response};
use http::header::CACHE_CONTROL;
use http::{HeaderValue, StatusCode};
use serde_json::Value;

use crate::check::{Checked, DOOR_SESSION_HEADER, answer_body, finish};
use crate::cookies::door_cookie_name;
use crate::return_trip::{with_return, without_pass};
use qm_http::AppError;

/// The headers of the status form.
const ACTION_HEADER: &str = "x-qm-action";
const REASON_HEADER: &str = "x-qm-reason";
const LOCATION_HEADER: &str = "x-qm-location";
const WAITING_ROOM_HEADER: &str = "x-qm-waiting-room";
const CLEAR_TOKEN_HEADER: &str = "x-qm-clear-token";
const SET_COOKIE_HEADER: &str = "x-qm-set-cookie";
const ERROR_HEADER: &str = "x-qm-error";

/// The status form (`answer=status`), for a proxy that reads only a subrequest's status and
/// headers (nginx `auth_request`): 204 serves the page; 401 sends the visitor to
/// `X-QM-Location` — the waiting page with `qm_return` (queue), or the page itself without its
/// `qm_token` once the token opened a door session. `X-QM-Set-Cookie` is the `qm_dk_<roomId>`
/// cookie line to send the visitor (the new key, or its expiry); `X-QM-Session` the new key.
/// The proxy needs no JSON, URL encoding or cookie logic of its own.
pub(crate) fn status_answer(checked: Checked) -> Response {
    let reply = &checked.reply;
    let action = if reply.room_found {
        reply.action.as_str()
    } else {
        "pass"
    };
    let reason = if reply.room_found {
        reply.reason.as_str()
    } else {
        "no_room"
    };
    let secure = checked.page.as_deref().is_some_and(|page| {
        page.get(..8)
            .is_some_and(|s| s.eq_ignore_ascii_case("https://"))
    });
    let clear = reply.clear_token || checked.dropped_key;
    let cookie_name = door_cookie_name(&checked.room_id);
    let set_cookie = match &checked.new_key {
        Some(key) => Some(door_cookie_line(&cookie_name, key, secure, false)),
        None if clear => Some(door_cookie_line(&cookie_name, "", secure, true)),
        None => None,
    };
    let clean_page = checked.page.as_deref().map(without_pass);
    // Where the visitor goes instead of the page: the waiting page asking to come back, or
    // the page without the pass once the pass became a door session.
    let location = if action == "queue" {
        Some(match &clean_page {
            Some(page) => with_return(&checked.waiting_room_url, page),
            None => checked.waiting_room_url.clone(),
        })
    } else if checked.new_key.is_some() && checked.token_in_request {
        clean_page.clone()
    } else {
        None
    };
    let mut response = match &location {
        Some(_) => {
            let body = answer_body(&checked, false);
            (StatusCode::UNAUTHORIZED, Json(Value::Object(body))).into_response()
        }
        None => StatusCode::NO_CONTENT.into_response(),
    };
    let out = response.headers_mut();
    let mut put = |name: &'static str, value: &str| {
        if let Ok(value) = HeaderValue::from_str(value) {
            out.insert(name, value);
        }
    };
    put(ACTION_HEADER, action);
    if !reason.is_empty() {
        put(REASON_HEADER, reason);
    }
    if let Some(key) = &checked.new_key {
        put(DOOR_SESSION_HEADER, key);
    }
    if let Some(line) = &set_cookie {
        put(SET_COOKIE_HEADER, line);
    }
    if clear {
        put(CLEAR_TOKEN_HEADER, "1");
    }
    if action == "queue" {
        put(WAITING_ROOM_HEADER, &checked.waiting_room_url);
    }
    if let Some(location) = &location {
        put(LOCATION_HEADER, location);
    }
    finish(response, checked.origin)
}

/// A refusal in the status form: its usual JSON body and status, the code also in
/// `X-QM-Error` — but never 401 or 403, the two statuses `auth_request` reads as a verdict, so
/// a proxy cannot mistake a refused key for "queue": those refusals answer 400 here.
pub(crate) fn status_refusal(error: AppError) -> Response {
    let code = error.0.code.as_str();
    let mut response = error.into_response();
    if matches!(
        response.status(),
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN
    ) {
        *response.status_mut() = StatusCode::BAD_REQUEST;
    }
    response
        .headers_mut()
        .insert(ERROR_HEADER, HeaderValue::from_static(code));
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The `qm_dk_<roomId>` cookie a connector keeps the door-session key in, or its expiry.
fn door_cookie_line(name: &str, key: &str, secure: bool, expire: bool) -> String {
    let mut line = format!("{name}={key}; Path=/; HttpOnly; SameSite=Lax");
    if expire {
        line.push_str("; Max-Age=0");
    }
    if secure {
        line.push_str("; Secure");
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_door_cookie_line_sets_or_expires_the_key() {
        assert_eq!(
            door_cookie_line("qm_dk_r", "k", true, false),
            "qm_dk_r=k; Path=/; HttpOnly; SameSite=Lax; Secure"
        );
        assert_eq!(
            door_cookie_line("qm_dk_r", "", false, true),
            "qm_dk_r=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0"
        );
    }
}
