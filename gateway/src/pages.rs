//! The pages a visitor's browser loads from the gateway: `/w/:roomId` (the waiting page from
//! qm-web with the room's name and branding injected) and the page's content-hashed assets,
//! cached forever.

use axum::extract::{Path, State};
use axum::response::{Html, IntoResponse, Response};
use http::header::{CACHE_CONTROL, CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS};
use http::{HeaderName, HeaderValue, StatusCode};
use qm_core::clock::now_ms;
use qm_core::ids::is_valid_room_id;
use qm_proto::{RoomInfoReply, RoomRef};
use serde_json::{Map, Value, json};

use crate::GatewayState;
use crate::request::QueryParams;

/// The page loads only its own script and style (no inline code); images may come from the
/// brand's CDN.
const WAITING_PAGE_CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: https:; \
     connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'self'";

/// GET /w/:roomId.
pub(crate) async fn waiting_page(
    State(state): State<GatewayState>,
    Path(room_id): Path<String>,
    query: QueryParams,
) -> Response {
    if !is_valid_room_id(&room_id) {
        return page_response(StatusCode::NOT_FOUND, qm_web::not_found_page());
    }
    let info = state
        .engine
        .clone()
        .room_info(RoomRef {
            room_id: room_id.clone(),
        })
        .await;
    let config = match info {
        Ok(info) => page_config(&room_id, &info.into_inner(), query.non_empty("qm_return")),
        Err(status) => {
            // The page still loads and keeps trying to join; it says nothing about the room yet.
            tracing::warn!(room_id, code = ?status.code(), "room info unavailable for the waiting page");
            json!({ "roomId": room_id, "found": null })
        }
    };
    page_response(StatusCode::OK, qm_web::waiting_page(&config))
}

/// What the page's script reads as `window.QM_CONFIG`.
fn page_config(room_id: &str, info: &RoomInfoReply, return_url: Option<&str>) -> Value {
    if !info.found {
        return json!({ "roomId": room_id, "found": false });
    }
    let branding = match serde_json::from_str::<Value>(&info.branding_json) {
        Ok(Value::Object(branding)) => branding,
        _ => Map::new(),
    };
    let mut config = Map::new();
    config.insert("roomId".into(), json!(room_id));
    config.insert("found".into(), json!(true));
    config.insert("name".into(), json!(info.name));
    config.insert("branding".into(), Value::Object(branding));
    config.insert("state".into(), json!(info.effective_state));
    if let Some(opens_at_ms) = info.opens_at_ms {
        config.insert("opensAt".into(), json!(opens_at_ms));
        config.insert("now".into(), json!(now_ms()));
    }
    // A return URL the room's policy refuses is stripped, never honoured (open redirect).
    if let Some(return_url) = return_url.filter(|url| return_url_allowed(url, &info.return_origins))
    {
        config.insert("returnUrl".into(), json!(return_url));
    }
    Value::Object(config)
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

fn page_response(status: StatusCode, html: String) -> Response {
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

/// GET /assets/:name and /__qm/assets/:name.
pub(crate) async fn asset(Path(name): Path<String>) -> Response {
    match qm_web::asset(&name) {
        Some((content_type, body)) => (
            [
                (CONTENT_TYPE, HeaderValue::from_static(content_type)),
                (
                    CACHE_CONTROL,
                    HeaderValue::from_static("public, max-age=31536000, immutable"),
                ),
                (X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
            ],
            body,
        )
            .into_response(),
        None => qm_edge::AppError::new(qm_core::ErrorCode::NotFound, "no such asset in this build")
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> RoomInfoReply {
        RoomInfoReply {
            found: true,
            room_id: "drop".into(),
            name: "The drop".into(),
            return_origins: vec!["https://shop.example".into()],
            branding_json: r#"{"title":"Big drop"}"#.into(),
            effective_state: "active".into(),
            ..Default::default()
        }
    }

    #[test]
    fn return_urls_keep_only_allowed_origins() {
        let origins = vec![
            "https://shop.example".to_owned(),
            "https://other.example:8443/".to_owned(),
        ];
        assert!(return_url_allowed(
            "https://shop.example/cart?x=1",
            &origins
        ));
        assert!(return_url_allowed("https://other.example:8443/", &origins));
        assert!(
            !return_url_allowed("https://other.example/", &origins),
            "the port is part of the origin"
        );
        assert!(!return_url_allowed("https://evil.example/", &origins));
        assert!(!return_url_allowed("javascript:alert(1)", &origins));
        assert!(!return_url_allowed("/relative", &origins));
    }

    #[test]
    fn the_page_config_carries_the_room_and_strips_a_refused_return() {
        let config = page_config("drop", &info(), Some("https://shop.example/cart"));
        assert_eq!(config["roomId"], "drop");
        assert_eq!(config["name"], "The drop");
        assert_eq!(config["branding"]["title"], "Big drop");
        assert_eq!(config["returnUrl"], "https://shop.example/cart");
        let refused = page_config("drop", &info(), Some("https://evil.example/"));
        assert!(refused.get("returnUrl").is_none());
        let unknown = page_config("nope", &RoomInfoReply::default(), None);
        assert_eq!(unknown, json!({ "roomId": "nope", "found": false }));
    }
}
