//! The gate of an inline host: every request for the site (any path but `/__qm/*`) asks the
//! door once, with what the browser presents in cookies only (the `qm_<room>` token, the
//! `qm_dk_<room>` door-session key, the `qms_<room>` ownership cookie), the request's own URL as
//! the page and the client address as the identity. Pass: forwarded to `proxyOrigin`. Queue: a
//! browser navigation gets the waiting page in place, anything else `403 not_admitted`.
//!
//! A door-session key the engine let through is let through again without asking it for up to
//! a second ([`super::admitted`]).
//!
//! While the backend is down (the engine says so, refuses the check with
//! `storage_unavailable`, or cannot be reached at all) the room's `onBackendDown` decides:
//! `closed` answers a navigation with the waiting page in retry mode (503 + Retry-After, no
//! place taken) and anything else 503; `open` forwards unqueued. A visitor the door passes is
//! forwarded whatever the backend's state.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use axum::extract::{ConnectInfo, Request};
use axum::response::{IntoResponse, Response};
use http::Method;
use http::header::{ACCEPT, HeaderMap};
use qm_core::clock::now_ms;
use qm_core::ids::is_valid_session_id;
use qm_core::{ApiError, ErrorCode};
use qm_http::AppError;

use super::InlineFront;
use super::page;
use super::proxy::Forwarding;
use super::rooms::{InlineRoom, Lookup};
use crate::cookies::{
    CookiePolicy, RequestCookies, append_set_cookies, door_cookie_name, eviction_cookies,
    queue_cookie_name, rooms_to_evict,
};
use crate::door::{self, DoorAnswer, DoorQuestion};
use crate::places::presented_session_hash;
use crate::request::{client_address, forwarded_scheme, is_https, request_host};

/// Seconds a browser shown the retry page (or a 503) waits before it asks again.
const BACKEND_DOWN_RETRY_SEC: u64 = 5;

pub(super) async fn serve(front: &InlineFront, request: Request, room_id: &str) -> Response {
    let state = &front.state;
    let room = match front.rooms.get(state, room_id).await {
        Lookup::Known(room) => room,
        Lookup::Unreachable(error, last) => {
            return backend_down(front, request, room_id, last.as_deref(), error).await;
        }
    };
    if let Some(refusal) = unusable(&room, room_id) {
        return AppError(refusal).into_response();
    }
    let cookies = RequestCookies::from_headers(request.headers());
    let door_key = cookies
        .get(&door_cookie_name(room_id))
        .filter(|key| is_valid_session_id(key));
    if door_key.is_some_and(|key| front.admitted.admits(room_id, key)) {
        return forward(front, request, room_id, &room).await;
    }
    let peer = peer_of(&request);
    let client = client_address(peer, request.headers(), &state.config.trusted_proxies);
    let question = DoorQuestion {
        room_id,
        tokens: cookies
            .get(&queue_cookie_name(room_id))
            .into_iter()
            .collect(),
        door_key,
        ownership_hash: presented_session_hash(&cookies, room_id),
        identity: client.to_string(),
        url: Some(page_url(front, &request, peer)),
        want_rules: false,
    };
    let answer = match door::ask(state, question).await {
        Ok(answer) => answer,
        Err(AppError(error)) if is_backend_down(error.code) => {
            return backend_down(front, request, room_id, Some(&room), error).await;
        }
        Err(error) => return error.into_response(),
    };
    if !answer.reply.room_found {
        // Deleted since the room's settings were read: nothing to forward to.
        return AppError(no_room(room_id)).into_response();
    }
    if let Some(key) = door_key
        && answer.reply.action == "pass"
        && answer.reply.reason == "session"
    {
        front
            .admitted
            .remember(room_id, key, answer.reply.session_expires_at_ms);
    }
    let set_cookies = door_cookies(front, request.headers(), &cookies, room_id, &answer);
    let mut response = if answer.reply.action == "pass" {
        forward(front, request, room_id, &room).await
    } else if answer.reply.backend_down {
        let error = ApiError::new(
            ErrorCode::StorageUnavailable,
            "the queue's backend is unreachable just now; try again shortly",
        );
        backend_down(front, request, room_id, Some(&room), error).await
    } else if is_navigation(&request) {
        page::waiting(state, room_id, request.headers(), None).await
    } else {
        AppError::new(
            ErrorCode::NotAdmitted,
            "this visitor has not been let through the room's line yet; load the page in a browser to join it",
        )
        .into_response()
    };
    append_set_cookies(response.headers_mut(), &set_cookies);
    response
}

/// The refusal of a room the gate cannot forward for.
fn unusable(room: &InlineRoom, room_id: &str) -> Option<ApiError> {
    if !room.found {
        return Some(no_room(room_id));
    }
    room.proxy_origin.is_empty().then(|| {
        ApiError::new(
            ErrorCode::InlineRoomUnavailable,
            format!("INLINE_HOSTS maps this host to room {room_id:?}, which has no proxyOrigin"),
        )
    })
}

fn no_room(room_id: &str) -> ApiError {
    ApiError::new(
        ErrorCode::InlineRoomUnavailable,
        format!("INLINE_HOSTS maps this host to room {room_id:?}, which does not exist"),
    )
}

fn is_backend_down(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::StorageUnavailable | ErrorCode::EngineUnavailable
    )
}

/// onBackendDown: `open` forwards unqueued; `closed` (and a room never read) keeps the site shut.
async fn backend_down(
    front: &InlineFront,
    request: Request,
    room_id: &str,
    room: Option<&InlineRoom>,
    error: ApiError,
) -> Response {
    if let Some(room) = room.filter(|room| room.open_when_down)
        && unusable(room, room_id).is_none()
    {
        return forward(front, request, room_id, room).await;
    }
    if is_navigation(&request) {
        return page::waiting(
            &front.state,
            room_id,
            request.headers(),
            Some(BACKEND_DOWN_RETRY_SEC),
        )
        .await;
    }
    AppError(error.with_retry_after(BACKEND_DOWN_RETRY_SEC)).into_response()
}

/// Forwards to the room's origin, counting how the origin answered for autotune.
async fn forward(
    front: &InlineFront,
    request: Request,
    room_id: &str,
    room: &InlineRoom,
) -> Response {
    let peer = peer_of(&request);
    let host = request_host(request.headers(), request.uri()).unwrap_or_default();
    let to = Forwarding {
        origin: &room.proxy_origin,
        target: room.target.as_ref(),
        peer,
        scheme: scheme_of(front, request.headers(), peer),
        host: &host,
    };
    let started = std::time::Instant::now();
    let forwarded = front.origin.forward(request, &to).await;
    let answered = matches!(&forwarded, Ok(response) if !response.status().is_server_error());
    front
        .answers
        .record(&front.state, room_id, started.elapsed(), answered);
    match forwarded {
        Ok(response) => response,
        Err(error) => AppError(error).into_response(),
    }
}

/// The socket peer (an in-process router without connect info counts as one unknown client).
fn peer_of(request: &Request) -> IpAddr {
    request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(peer)| peer.ip())
        .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
}

/// The scheme the browser used: X-Forwarded-Proto only from a trusted proxy, else http (the
/// gateway itself speaks plain HTTP).
fn scheme_of(front: &InlineFront, headers: &HeaderMap, peer: IpAddr) -> &'static str {
    if front
        .state
        .config
        .trusted_proxies
        .contains(peer.to_canonical())
    {
        forwarded_scheme(headers)
    } else {
        "http"
    }
}

/// The request's own absolute URL: the page the door is asked about.
fn page_url(front: &InlineFront, request: &Request, peer: IpAddr) -> String {
    let host = request_host(request.headers(), request.uri()).unwrap_or_default();
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", |path_and_query| path_and_query.as_str());
    format!(
        "{}://{host}{path}",
        scheme_of(front, request.headers(), peer)
    )
}

/// A browser loading a page (not a script, an image or an API call): what gets the waiting page.
fn is_navigation(request: &Request) -> bool {
    if !matches!(*request.method(), Method::GET | Method::HEAD) {
        return false;
    }
    let headers = request.headers();
    if let Some(mode) = headers.get("sec-fetch-mode") {
        return mode == "navigate";
    }
    headers
        .get_all(ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|accept| accept.contains("text/html"))
}

/// The cookies the door's answer asks for: a new door-session key (HttpOnly `qm_dk_<room>`, for
/// as long as the session can live, within the room-cookie cap), or the room's dead token and
/// key expired.
fn door_cookies(
    front: &InlineFront,
    headers: &HeaderMap,
    cookies: &RequestCookies,
    room_id: &str,
    answer: &DoorAnswer,
) -> Vec<String> {
    let secure = is_https(headers);
    let mut set_cookies = Vec::new();
    if answer.reply.clear_token {
        let policy = CookiePolicy {
            max_age_sec: 0,
            secure,
        };
        set_cookies.push(policy.expire(&queue_cookie_name(room_id)));
        set_cookies.push(policy.expire(&door_cookie_name(room_id)));
    }
    if let Some(key) = &answer.new_key {
        let left_ms = answer.reply.session_expires_at_ms.saturating_sub(now_ms());
        let policy = CookiePolicy {
            max_age_sec: u64::try_from(left_ms / 1000).unwrap_or(0),
            secure,
        };
        let evicted = rooms_to_evict(cookies, room_id, front.state.config.room_cookie_cap);
        set_cookies.extend(eviction_cookies(&policy, &evicted));
        set_cookies.push(policy.set(&door_cookie_name(room_id), key, true));
    }
    set_cookies
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;

    fn request(method: &str, headers: &[(&str, &str)]) -> Request {
        let mut builder = http::Request::builder().method(method).uri("/p");
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(Body::empty()).unwrap()
    }

    #[test]
    fn only_a_page_load_is_a_navigation() {
        assert!(is_navigation(&request(
            "GET",
            &[("accept", "text/html,*/*")]
        )));
        assert!(is_navigation(&request("HEAD", &[("accept", "text/html")])));
        assert!(is_navigation(&request(
            "GET",
            &[("sec-fetch-mode", "navigate"), ("accept", "*/*")]
        )));
        assert!(!is_navigation(&request(
            "GET",
            &[("sec-fetch-mode", "cors"), ("accept", "text/html")]
        )));
        assert!(!is_navigation(&request(
            "GET",
            &[("accept", "application/json")]
        )));
        assert!(!is_navigation(&request("POST", &[("accept", "text/html")])));
        assert!(!is_navigation(&request("GET", &[])));
    }
}
