//! POST /w/:roomId, the waiting page's join form for a browser without JavaScript, which has
//! no second way to hold or recover a place. It joins exactly as `/api/join` does with the
//! browser's cookies (a held place is kept; a lapsed token is no claim, so the engine mints the
//! replacement), sets `qm_<room>` and `qms_<room>` under the cookie cap, and answers 303 to the
//! page, which then shows the place as text. A refusal answers the page itself, with the
//! refusal's status and Retry-After and a sentence in the visitor's language. Only a post from
//! the page's own origin is taken: any other site could otherwise send a visitor to the back.

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::header::{CACHE_CONTROL, LOCATION, ORIGIN, RETRY_AFTER};
use http::{HeaderMap, HeaderValue, StatusCode, Uri};
use qm_core::ids::is_valid_room_id;
use qm_core::{ApiError, ErrorCode};
use qm_web::JoinNotice;

use crate::GatewayState;
use crate::cookies::append_set_cookies;
use crate::pages::{PlaceRead, locale_of, page_path, page_response, render_page, room_info};
use crate::request::{ClientAddress, QueryParams, request_host};
use crate::visitor::join_room;

/// POST /w/:roomId.
pub(crate) async fn join_form(
    State(state): State<GatewayState>,
    ClientAddress(address): ClientAddress,
    Path(room_id): Path<String>,
    query: QueryParams,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if let Err(refusal) = state.page_limiter.admit_as(address, "page loads") {
        return qm_http::AppError(refusal).into_response();
    }
    if !is_valid_room_id(&room_id) {
        return page_response(StatusCode::NOT_FOUND, qm_web::not_found_page());
    }
    let return_url = query.non_empty("qm_return");
    let refusal = if !form_is_same_origin(&headers, &uri) {
        // A cross-site post could replace a visitor's place with a new one at the back.
        ApiError::new(
            ErrorCode::CsrfRequired,
            "the join form is only accepted from its own page",
        )
    } else if let Err(refusal) = state.join_limiter.admit(address) {
        refusal
    } else {
        match form_join(&state, &room_id, address.to_string(), &headers).await {
            Ok(set_cookies) => return see_the_page(&room_id, return_url, &set_cookies),
            Err(error) => error,
        }
    };
    if refusal.code == ErrorCode::RoomNotFound {
        return page_response(StatusCode::NOT_FOUND, qm_web::not_found_page());
    }
    let notice = join_notice(&refusal);
    let info = room_info(&state, &room_id).await;
    let page = render_page(
        &room_id,
        info.as_ref(),
        &PlaceRead::NoToken,
        return_url,
        locale_of(&headers),
        Some(notice),
        state.config.email_notify,
    );
    let mut response = page_response(refusal.code.http_status(), page);
    if let Some(seconds) = refusal.retry_after() {
        response
            .headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

/// The join of the form: the cookie token if it verifies, the ownership cookie if well formed.
/// Returns the cookies to set.
async fn form_join(
    state: &GatewayState,
    room_id: &str,
    identity: String,
    headers: &HeaderMap,
) -> Result<Vec<String>, ApiError> {
    let joined = join_room(state, room_id, None, identity, headers).await?;
    tracing::debug!(
        room_id,
        new_place = joined.place.new_place,
        "visitor joined from the form"
    );
    Ok(joined.set_cookies)
}

/// Whether a form post comes from a page of this host. Browsers say so in Sec-Fetch-Site, or
/// else in Origin; a client that sends neither (no browser ever omits both on a form post) is
/// not a cross-site page and is let through.
fn form_is_same_origin(headers: &HeaderMap, uri: &Uri) -> bool {
    if let Some(site) = headers.get("sec-fetch-site") {
        return matches!(site.to_str(), Ok("same-origin" | "none"));
    }
    let Some(origin) = headers.get(ORIGIN) else {
        return true;
    };
    let Some(origin) = origin
        .to_str()
        .ok()
        .and_then(|origin| url::Url::parse(origin).ok())
    else {
        // Includes `Origin: null` (a sandboxed or privacy-hidden origin).
        return false;
    };
    let Some(origin_host) = origin.host_str() else {
        return false;
    };
    let origin_authority = match origin.port() {
        Some(port) => format!("{origin_host}:{port}"),
        None => origin_host.to_owned(),
    };
    let Some(host) = request_host(headers, uri) else {
        return false;
    };
    let host = host
        .strip_suffix(":80")
        .or_else(|| host.strip_suffix(":443"))
        .unwrap_or(&host);
    origin_authority.eq_ignore_ascii_case(host)
}

/// What the page tells a visitor whose form join was refused.
fn join_notice(error: &ApiError) -> JoinNotice {
    let retry_after_sec = error.retry_after().unwrap_or(5);
    match error.code {
        ErrorCode::RateLimited => JoinNotice::RateLimited { retry_after_sec },
        ErrorCode::QueueIdentityLimit | ErrorCode::PrequeueIdentityLimit => {
            JoinNotice::IdentityLimit
        }
        ErrorCode::BlockedByProtection => JoinNotice::Blocked,
        ErrorCode::CsrfRequired => JoinNotice::CrossSite,
        code if code.http_status() == StatusCode::SERVICE_UNAVAILABLE => {
            JoinNotice::Busy { retry_after_sec }
        }
        _ => JoinNotice::Failed,
    }
}

/// 303 to the page (keeping its `qm_return`), with the place's cookies.
fn see_the_page(room_id: &str, return_url: Option<&str>, set_cookies: &[String]) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    let headers = response.headers_mut();
    // The room id is from the checked alphabet and the return URL is percent-encoded.
    if let Ok(location) = HeaderValue::from_str(&page_path(room_id, return_url)) {
        headers.insert(LOCATION, location);
    }
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    append_set_cookies(headers, set_cookies);
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::headers as form_headers;

    #[test]
    fn the_join_form_is_accepted_only_from_its_own_origin() {
        let uri: Uri = "/w/drop".parse().unwrap();
        let host = ("host", "queue.example");
        for (pairs, allowed) in [
            (vec![host, ("sec-fetch-site", "same-origin")], true),
            (vec![host, ("sec-fetch-site", "cross-site")], false),
            (vec![host, ("sec-fetch-site", "same-site")], false),
            (vec![host, ("origin", "https://queue.example")], true),
            (
                vec![
                    ("host", "queue.example:443"),
                    ("origin", "https://queue.example"),
                ],
                true,
            ),
            (
                vec![
                    ("host", "127.0.0.1:8080"),
                    ("origin", "http://127.0.0.1:8080"),
                ],
                true,
            ),
            (vec![host, ("origin", "https://evil.example")], false),
            (vec![host, ("origin", "null")], false),
            (vec![host], true),
        ] {
            assert_eq!(
                form_is_same_origin(&form_headers(&pairs), &uri),
                allowed,
                "{pairs:?}"
            );
        }
    }

    #[test]
    fn refusals_become_notices_with_their_wait() {
        let limited = crate::rate_limit::JoinRateLimiter::refusal(7);
        assert_eq!(
            join_notice(&limited),
            JoinNotice::RateLimited { retry_after_sec: 7 }
        );
        let storage = ApiError::new(ErrorCode::StorageUnavailable, "x");
        assert!(matches!(join_notice(&storage), JoinNotice::Busy { .. }));
        assert_eq!(
            join_notice(&ApiError::new(ErrorCode::QueueIdentityLimit, "x")),
            JoinNotice::IdentityLimit
        );
        assert_eq!(join_notice(&ApiError::internal("x")), JoinNotice::Failed);
    }

    #[test]
    fn a_see_other_keeps_the_return_and_sets_the_cookies() {
        let response = see_the_page(
            "drop",
            Some("https://shop.example/"),
            &["qm_drop=t; Path=/".to_owned()],
        );
        assert_eq!(response.status(), StatusCode::SEE_OTHER);
        assert_eq!(
            response.headers().get(LOCATION).unwrap(),
            "/w/drop?qm_return=https%3A%2F%2Fshop.example%2F"
        );
        assert_eq!(
            response.headers().get("set-cookie").unwrap(),
            "qm_drop=t; Path=/"
        );
    }
}
