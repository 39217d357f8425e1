//! The pages a visitor's browser loads from the gateway: `/w/:roomId` (the waiting page from
//! qm-web with the room's name and branding injected) and the page's content-hashed assets,
//! cached forever.
//!
//! The page is also served for browsers without JavaScript, which have no second way to hold or
//! recover a place: GET reads the browser's place from its `qm_<room>` and `qms_<room>` cookies
//! and renders it as text (with a meta refresh, and the way through once passed); the form it
//! offers posts to [`crate::join_form`]. The same read fills `lapsed` in
//! the page config: "expired" when the visitor's own entry window ran out, "reset" when the
//! operator or the room discarded the place (eject, purge, room reset), absent when nothing is
//! known to be lost. A cookie that does not verify (forged, garbage, too old, another room's) is
//! not a lapse: it never named a place we can speak for, exactly as `/api/join` treats it.
//!
//! The page's language: `?lang=en|th` wins and is remembered in `qm_lang` (Path=/, SameSite=Lax,
//! a year), then that cookie, then Accept-Language. A room named `lang` owns `qm_lang` as its
//! queue cookie, so on that one room the choice is honoured but not remembered.
//!
//! The room's branding colours reach the script as `theme` only when they are `#rgb`/`#rrggbb`
//! (checked again here, not trusted from storage), which it applies as CSS custom properties.

use axum::extract::{Path, State};
use axum::response::{Html, IntoResponse, Response};
use http::header::{ACCEPT_LANGUAGE, CACHE_CONTROL, X_CONTENT_TYPE_OPTIONS};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use qm_core::clock::now_ms;
use qm_core::ids::is_valid_room_id;
use qm_proto::{PlaceStatus, RoomInfoReply, RoomRef, place_reply, place_status};
use qm_web::{JoinNotice, Lapsed, Locale, OperatorMessage, PageView, PlaceView};
use serde_json::{Map, Value, json};

use crate::GatewayState;
use crate::cookies::{
    LANGUAGE_COOKIE, LANGUAGE_COOKIE_MAX_AGE_SEC, RequestCookies, queue_cookie_name,
};
use crate::request::{ClientAddress, QueryParams, is_https};
use crate::return_trip::{with_pass, with_return};
use crate::status_body::Branding;
use crate::status_read::{read_status, status_request};

/// The page loads only its own script and style (no inline code); images may come from the
/// brand's CDN.
const WAITING_PAGE_CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: https:; \
     connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'self'";

/// What the server could read of the browser's place.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PlaceRead {
    /// No cookie token that verifies for this room.
    NoToken,
    /// The engine says the place is gone; `None` when its reason is one we cannot name.
    Lapsed(Option<Lapsed>),
    /// A place, with its support reference code once computed.
    Place(Box<PlaceStatus>, Option<String>),
    /// The engine could not be asked (or the room is gone, which the room info says).
    Unknown,
}

impl PlaceRead {
    /// The read with the place's support reference code, for the page without JavaScript.
    fn with_support_ref(self, key: &[u8; 32], room_id: &str) -> PlaceRead {
        match self {
            PlaceRead::Place(place, _) => {
                let code = crate::status_body::answered_place(&place).map(|visitor_place| {
                    qm_core::support_ref::support_ref_with_key(
                        key,
                        room_id,
                        place.generation,
                        visitor_place,
                    )
                });
                PlaceRead::Place(place, code)
            }
            other => other,
        }
    }
}

/// The engine's word for a refusal, as the page says it: the visitor's own entry window ran out
/// (`expired`), or we discarded the place (`reset`).
fn lapsed_of(reason: &str) -> Option<Lapsed> {
    match reason {
        "expired" => Some(Lapsed::Expired),
        "ejected" | "purged" | "room_reset" => Some(Lapsed::Reset),
        _ => None,
    }
}

/// GET /w/:roomId.
pub(crate) async fn waiting_page(
    State(state): State<GatewayState>,
    ClientAddress(address): ClientAddress,
    Path(room_id): Path<String>,
    query: QueryParams,
    headers: HeaderMap,
) -> Response {
    if let Err(refusal) = state.page_limiter.admit_as(address, "page loads") {
        return qm_http::AppError(refusal).into_response();
    }
    if !is_valid_room_id(&room_id) {
        return page_response(StatusCode::NOT_FOUND, qm_web::not_found_page());
    }
    let cookies = RequestCookies::from_headers(&headers);
    let (info, place) = tokio::join!(
        room_info(&state, &room_id),
        read_place(&state, &room_id, &cookies)
    );
    let chosen = query.non_empty("lang").and_then(Locale::from_tag);
    let locale = chosen.unwrap_or_else(|| locale_of(&headers));
    let place = place.with_support_ref(&state.support_ref_key, &room_id);
    let page = render_page_in(
        &PageFrame::default(),
        PageParts {
            room_id: &room_id,
            info: info.as_ref(),
            place: &place,
            return_url: query.non_empty("qm_return"),
            pass_token: cookies.get(&queue_cookie_name(&room_id)),
            locale,
            notice: None,
            notify_enabled: state.config.email_notify,
        },
    );
    let mut response = page_response(StatusCode::OK, page);
    if let Some(chosen) = chosen
        && room_id != "lang"
    {
        let mut cookie = format!(
            "{LANGUAGE_COOKIE}={}; Path=/; Max-Age={LANGUAGE_COOKIE_MAX_AGE_SEC}; SameSite=Lax",
            chosen.tag()
        );
        if is_https(&headers) {
            cookie.push_str("; Secure");
        }
        if let Ok(value) = HeaderValue::from_str(&cookie) {
            response
                .headers_mut()
                .append(http::header::SET_COOKIE, value);
        }
    }
    response
}

/// `/w/<room>`, with `?qm_return=` when one was asked for.
pub(crate) fn page_path(room_id: &str, return_url: Option<&str>) -> String {
    match return_url {
        Some(return_url) => with_return(&format!("/w/{room_id}"), return_url),
        None => format!("/w/{room_id}"),
    }
}

pub(crate) async fn room_info(state: &GatewayState, room_id: &str) -> Option<RoomInfoReply> {
    match state
        .engine
        .clone()
        .room_info(RoomRef {
            room_id: room_id.to_owned(),
        })
        .await
    {
        Ok(info) => Some(info.into_inner()),
        Err(status) => {
            // The page still loads and keeps trying to join; it says nothing about the room yet.
            tracing::warn!(room_id, code = ?status.code(), "room info unavailable for the waiting page");
            None
        }
    }
}

/// The browser's place in `room_id`, from its cookies.
pub(crate) async fn read_place(
    state: &GatewayState,
    room_id: &str,
    cookies: &RequestCookies,
) -> PlaceRead {
    let Some(presented) = cookies
        .get(&queue_cookie_name(room_id))
        .and_then(|token| state.token_check().verify(token, Some(room_id)))
    else {
        return PlaceRead::NoToken;
    };
    let request = status_request(&presented, cookies);
    match read_status(&state.visitor_calls, request).await {
        Ok(place_reply::Outcome::Place(place)) => PlaceRead::Place(Box::new(place), None),
        Ok(place_reply::Outcome::Lapsed(lapsed)) => {
            // A room that is gone reads as `room_reset`: the room info then says "not found".
            let kind = lapsed_of(&lapsed.reason);
            if kind.is_none() {
                tracing::warn!(
                    room_id,
                    reason = lapsed.reason,
                    "a lapse reason the page cannot name"
                );
            }
            PlaceRead::Lapsed(kind)
        }
        Err(_) => PlaceRead::Unknown,
    }
}

/// The remembered language (`qm_lang`), else the browser's Accept-Language.
pub(crate) fn locale_of(headers: &HeaderMap) -> Locale {
    RequestCookies::from_headers(headers)
        .get(LANGUAGE_COOKIE)
        .and_then(Locale::from_tag)
        .unwrap_or_else(|| {
            Locale::from_accept_language(
                headers
                    .get(ACCEPT_LANGUAGE)
                    .and_then(|value| value.to_str().ok()),
            )
        })
}

/// Where a waiting page is served from: the queue host's own `/w/<room>` (the default), or a
/// site's URL on an inline host, whose assets, API and join form live under `/__qm`.
#[derive(Debug, Default)]
pub(crate) struct PageFrame {
    /// Prefixed to the asset paths (`/__qm` inline).
    pub(crate) asset_base: &'static str,
    /// Fields added to the script's config (`inline`, `apiBase`, `retryAfterSec`).
    pub(crate) config: Map<String, Value>,
    /// Where the no-JavaScript join form posts, instead of `/w/<room>`.
    pub(crate) form_action: Option<String>,
}

/// The waiting page for what the server knows: the config for the script and the rendered view.
pub(crate) fn render_page(
    room_id: &str,
    info: Option<&RoomInfoReply>,
    place: &PlaceRead,
    return_url: Option<&str>,
    locale: Locale,
    notice: Option<JoinNotice>,
    notify_enabled: bool,
) -> String {
    let page = PageParts {
        room_id,
        info,
        place,
        return_url,
        pass_token: None,
        locale,
        notice,
        notify_enabled,
    };
    render_page_in(&PageFrame::default(), page)
}

/// What one waiting page shows, wherever it is served.
pub(crate) struct PageParts<'a> {
    pub(crate) room_id: &'a str,
    pub(crate) info: Option<&'a RoomInfoReply>,
    pub(crate) place: &'a PlaceRead,
    pub(crate) return_url: Option<&'a str>,
    /// The visitor's token, handed back to the site in the way through (`qm_token`); `None`
    /// on an inline host, where the page stands on the site's own URL and cookies carry it.
    pub(crate) pass_token: Option<&'a str>,
    pub(crate) locale: Locale,
    pub(crate) notice: Option<JoinNotice>,
    pub(crate) notify_enabled: bool,
}

/// [`render_page`] in a frame.
pub(crate) fn render_page_in(frame: &PageFrame, page: PageParts<'_>) -> String {
    let PageParts {
        room_id,
        info,
        place,
        return_url,
        pass_token,
        locale,
        notice,
        notify_enabled,
    } = page;
    let framed = |mut config: Value, mut view: PageView| {
        if let Value::Object(fields) = &mut config {
            fields.extend(frame.config.clone());
        }
        if let Some(action) = &frame.form_action {
            view.form_action = action.clone();
        }
        qm_web::waiting_page_under(&config, &view, frame.asset_base)
    };
    let now = now_ms();
    let Some(info) = info else {
        let config = json!({ "roomId": room_id, "found": null });
        let view = PageView {
            locale,
            place: PlaceView::Unavailable,
            notice,
            message: None,
            form_action: page_path(room_id, None),
        };
        return framed(config, view);
    };
    if !info.found {
        // The script says so itself from `found: false`; the text is for a browser without it.
        let view = PageView {
            locale,
            place: PlaceView::NoRoom,
            notice,
            message: None,
            form_action: page_path(room_id, None),
        };
        let config = page_config(room_id, info, None, now);
        return framed(config, view);
    }
    let return_url = return_url.filter(|url| return_url_allowed(url, &info.return_origins));
    let lapsed = match place {
        PlaceRead::Lapsed(lapsed) => *lapsed,
        _ => None,
    };
    let mut config = page_config(room_id, info, return_url, now);
    if let Value::Object(fields) = &mut config {
        if let Some(lapsed) = lapsed {
            fields.insert("lapsed".into(), json!(lapsed.as_str()));
        }
        // Whether the page offers the turn-notification form (EMAIL_NOTIFY).
        fields.insert("notify".into(), json!(notify_enabled));
    }
    let branding = Branding::parse(&info.branding_json);
    let message = branding.message.map(|text| OperatorMessage {
        text,
        age_sec: branding
            .message_at
            .map(|message_at| (now.saturating_sub(message_at).max(0) / 1000) as u64),
    });
    let view = PageView {
        locale,
        place: place_view(place, return_url, pass_token, now),
        notice,
        message,
        form_action: page_path(room_id, return_url),
    };
    framed(config, view)
}

/// What a visitor without JavaScript is shown for the place read. Only a place this browser
/// owns (its ownership cookie is the place's binding) is shown as theirs: any other would be
/// replaced by their next join anyway. The way through carries `pass_token` as `qm_token`.
fn place_view(
    place: &PlaceRead,
    return_url: Option<&str>,
    pass_token: Option<&str>,
    now: i64,
) -> PlaceView {
    match place {
        PlaceRead::NoToken => PlaceView::Join { lapsed: None },
        PlaceRead::Lapsed(lapsed) => PlaceView::Join { lapsed: *lapsed },
        PlaceRead::Unknown => PlaceView::Unavailable,
        PlaceRead::Place(place, support_ref) => {
            let bypass_pass = matches!(place.place, Some(place_status::Place::Ticket(0)));
            if place.passed && (place.bound || bypass_pass) {
                let target = return_url.unwrap_or(&place.redirect_url);
                if target.starts_with("https://") || target.starts_with("http://") {
                    return PlaceView::Passed {
                        target_url: match pass_token {
                            Some(token) => with_pass(target, token),
                            None => target.to_owned(),
                        },
                    };
                }
                return PlaceView::Unavailable;
            }
            if place.passed || !place.bound {
                return PlaceView::Join { lapsed: None };
            }
            let opens_in_sec = (place.state == "scheduled")
                .then_some(place.opens_at_ms)
                .flatten()
                .map(|opens_at_ms| (opens_at_ms.saturating_sub(now).max(0) / 1000) as u64);
            PlaceView::Waiting {
                position: place.position,
                ahead: place.ahead,
                eta_sec: place.eta_sec,
                paused: place.state == "paused",
                opens_in_sec,
                support_ref: support_ref.clone(),
            }
        }
    }
}

/// What the page's script reads as `window.QM_CONFIG`. `now` travels beside every server
/// instant it carries (opensAt, branding.messageAt), so the page renders them in the device's
/// frame.
fn page_config(room_id: &str, info: &RoomInfoReply, return_url: Option<&str>, now: i64) -> Value {
    if !info.found {
        return json!({ "roomId": room_id, "found": false });
    }
    let branding = match serde_json::from_str::<Value>(&info.branding_json) {
        Ok(Value::Object(branding)) => branding,
        _ => Map::new(),
    };
    let carries_instant = info.opens_at_ms.is_some() || branding.contains_key("messageAt");
    let mut config = Map::new();
    config.insert("roomId".into(), json!(room_id));
    config.insert("found".into(), json!(true));
    config.insert("name".into(), json!(info.name));
    let theme = theme_of(&branding);
    config.insert("branding".into(), Value::Object(branding));
    if !theme.is_empty() {
        config.insert("theme".into(), Value::Object(theme));
    }
    config.insert("state".into(), json!(info.effective_state));
    if let Some(opens_at_ms) = info.opens_at_ms {
        config.insert("opensAt".into(), json!(opens_at_ms));
    }
    if carries_instant {
        config.insert("now".into(), json!(now));
    }
    // A return URL the room's policy refuses is stripped, never honoured (open redirect).
    if let Some(return_url) = return_url.filter(|url| return_url_allowed(url, &info.return_origins))
    {
        config.insert("returnUrl".into(), json!(return_url));
    }
    Value::Object(config)
}

/// The branding colours the page may apply, by their CSS custom property's name: only well-formed
/// `#rgb`/`#rrggbb` values, whatever storage holds.
fn theme_of(branding: &Map<String, Value>) -> Map<String, Value> {
    [
        ("primaryColor", "primary"),
        ("accentColor", "accent"),
        ("backgroundColor", "background"),
        ("textColor", "text"),
    ]
    .into_iter()
    .filter_map(|(key, property)| {
        let colour = branding.get(key)?.as_str()?;
        qm_core::room::is_hex_color(colour).then(|| (property.to_owned(), json!(colour)))
    })
    .collect()
}

/// Whether `url` is an http(s) URL whose origin is on the room's return list.
pub(crate) fn return_url_allowed(url: &str, return_origins: &[String]) -> bool {
    let Ok(parsed) = url::Url::parse(url) else {
        return false;
    };
    if !matches!(parsed.scheme(), "http" | "https") {
        return false;
    }
    let origin = parsed.origin().ascii_serialization();
    return_origins.iter().any(|allowed| {
        url::Url::parse(allowed.trim())
            .is_ok_and(|allowed| allowed.origin().ascii_serialization() == origin)
    })
}

pub(crate) fn page_response(status: StatusCode, html: String) -> Response {
    let mut response = (status, Html(html)).into_response();
    let headers = response.headers_mut();
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        HeaderName::from_static("content-security-policy"),
        HeaderValue::from_static(WAITING_PAGE_CSP),
    );
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

/// GET /assets/:name and /__qm/assets/:name: this build's hashed files, and the names of
/// earlier builds WAITING_ASSETS_KEEP lists.
pub(crate) async fn asset(State(state): State<GatewayState>, Path(name): Path<String>) -> Response {
    match qm_web::asset_or_kept(&name, &state.config.waiting_assets_keep) {
        Some((content_type, body)) => qm_http::immutable_asset(content_type, body),
        None => qm_http::AppError::new(qm_core::ErrorCode::NotFound, "no such asset in this build")
            .into_response(),
    }
}

#[cfg(test)]
#[path = "pages_tests.rs"]
mod tests;
