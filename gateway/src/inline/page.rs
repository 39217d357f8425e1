//! The waiting page in place of the site's page, at the URL the visitor asked for: its assets,
//! API and join form under `/__qm`, and the script told so (`inline`, `apiBase`) so that it
//! never puts the place in a URL, and goes back to this very URL once let through. In retry
//! mode (the backend is down and the room stays closed) no place is taken: the page says the
//! queue is briefly unavailable and asks again after Retry-After.

use axum::response::Response;
use http::header::RETRY_AFTER;
use http::{HeaderMap, HeaderValue, StatusCode};
use serde_json::{Map, json};

use super::OWN_PREFIX;
use crate::GatewayState;
use crate::cookies::RequestCookies;
use crate::pages::{
    PageFrame, PageParts, PlaceRead, locale_of, page_response, read_place, render_page_in,
    room_info,
};

/// The waiting page for `room_id`; `retry_after_sec` puts it in retry mode (503).
pub(super) async fn waiting(
    state: &GatewayState,
    room_id: &str,
    headers: &HeaderMap,
    retry_after_sec: Option<u64>,
) -> Response {
    let cookies = RequestCookies::from_headers(headers);
    let (info, place) = match retry_after_sec {
        // Nothing is read that the backend would have to answer: the page only waits.
        Some(_) => (None, PlaceRead::Unknown),
        None => {
            let (info, place) = tokio::join!(
                room_info(state, room_id),
                read_place(state, room_id, &cookies)
            );
            (info, place)
        }
    };
    let mut config = Map::new();
    config.insert("inline".into(), json!(true));
    config.insert("apiBase".into(), json!(OWN_PREFIX));
    if let Some(seconds) = retry_after_sec {
        config.insert("retryAfterSec".into(), json!(seconds));
    }
    let frame = PageFrame {
        asset_base: OWN_PREFIX,
        config,
        form_action: Some(format!("{OWN_PREFIX}/w")),
    };
    let html = render_page_in(
        &frame,
        PageParts {
            room_id,
            info: info.as_ref(),
            place: &place,
            return_url: None,
            pass_token: None,
            locale: locale_of(headers),
            notice: None,
            notify_enabled: state.config.email_notify,
        },
    );
    match retry_after_sec {
        None => page_response(StatusCode::OK, html),
        Some(seconds) => {
            let mut response = page_response(StatusCode::SERVICE_UNAVAILABLE, html);
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(seconds));
            response
        }
    }
}
