//! GET /api/verify and GET /api/verify.gif: the install check a connector's CLI, settings screen
//! or GTM template runs before it goes live. The handler gathers the facts (the room's info, the
//! engine's scope verdicts on the named page and on the room's targetUrl, the credential
//! presented), records the connector's check-in in the engine, and `verify_checks.rs` judges
//! them (the version against `qm-registry`'s). Both routes spend the caller's
//! CHECK_LIMIT_PER_MIN budget, like `/api/check`. A key in `?key=` or a wrong Bearer key is a
//! failing check, never a refusal: this is a report.

use std::net::IpAddr;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::header::{AUTHORIZATION, CACHE_CONTROL, CONTENT_TYPE, ORIGIN};
use http::{HeaderMap, HeaderValue, StatusCode, Uri};
use qm_core::ErrorCode;
use qm_core::scope::page_url;
use qm_proto::{CheckInRequest, RoomRef, TargetingReply, TargetingRequest};
use serde_json::{Value, json};

use crate::GatewayState;
use crate::check::bearer_is_public_or_admin_key;
use crate::request::{ClientAddress, QueryParams, public_base};
use crate::verify_checks::{Check, Facts, KeyFact, OriginFact, RoomFacts, Status, checks};
use qm_http::AppError;

/// A transparent 1x1 GIF: what the GTM sandbox loads to learn the verdict.
const PIXEL: &[u8] = &[
    0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xff, 0xff, 0xff, 0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x01, 0x00, 0x00, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3b,
];
/// The header naming the failing check ids.
const VERIFY_HEADER: &str = "x-qm-verify";
/// Longest connector name and version taken.
const MAX_CONNECTOR_LEN: usize = 64;

/// A finished report.
struct Report {
    room_id: String,
    origin: OriginFact,
    key: KeyFact,
    connector: Option<String>,
    version: Option<String>,
    checks: Vec<Check>,
}

impl Report {
    fn failing_ids(&self) -> Vec<&'static str> {
        self.checks
            .iter()
            .filter(|check| check.status == Status::Fail)
            .map(|check| check.id)
            .collect()
    }

    fn checks_json(&self) -> Value {
        self.checks.iter().map(Check::to_json).collect()
    }

    fn body(&self) -> Value {
        let origin = match &self.origin {
            OriginFact::Known(origin) => json!(origin),
            _ => Value::Null,
        };
        json!({
            "ok": self.failing_ids().is_empty(),
            "roomId": self.room_id,
            "origin": origin,
            "privileged": self.key == KeyFact::Right,
            "connector": self.connector,
            "version": self.version,
            "checks": self.checks_json(),
        })
    }
}

/// GET /api/verify?roomId=&url=&origin=&connector=&version=.
pub(crate) async fn verify(
    State(state): State<GatewayState>,
    ClientAddress(address): ClientAddress,
    query: QueryParams,
    headers: HeaderMap,
    uri: Uri,
) -> Result<Response, AppError> {
    let report = report(&state, address, &query, &headers, &uri).await?;
    Ok(no_store(Json(report.body()).into_response()))
}

/// GET /api/verify.gif?roomId=&origin=&connector=: 200 and a pixel when ok, else 424.
pub(crate) async fn verify_gif(
    State(state): State<GatewayState>,
    ClientAddress(address): ClientAddress,
    query: QueryParams,
    headers: HeaderMap,
    uri: Uri,
) -> Result<Response, AppError> {
    let report = report(&state, address, &query, &headers, &uri).await?;
    let failing = report.failing_ids();
    if failing.is_empty() {
        let response = (
            [(CONTENT_TYPE, HeaderValue::from_static("image/gif"))],
            PIXEL,
        );
        return Ok(no_store(response.into_response()));
    }
    let body = json!({
        "ok": false,
        "error": ErrorCode::VerifyFailed.as_str(),
        "checks": report.checks_json(),
    });
    let mut response = (StatusCode::FAILED_DEPENDENCY, Json(body)).into_response();
    if let Ok(value) = HeaderValue::from_str(&failing.join(",")) {
        response.headers_mut().insert(VERIFY_HEADER, value);
    }
    Ok(no_store(response))
}

fn no_store(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

async fn report(
    state: &GatewayState,
    address: IpAddr,
    query: &QueryParams,
    headers: &HeaderMap,
    uri: &Uri,
) -> Result<Report, AppError> {
    state.spend_check_budget(address)?;
    let room_id = query.room_id()?;
    let page = match query.non_empty("url") {
        Some(url) if page_url(url).is_none() => {
            return Err(AppError::new(
                ErrorCode::InvalidUrl,
                "url must be the absolute http(s) URL of the page, at most 4096 characters",
            ));
        }
        url => url.map(str::to_owned),
    };
    let connector = connector_field(query, "connector")?;
    let version = connector_field(query, "version")?;
    let origin = origin_fact(query, page.as_deref(), headers);
    let key = key_fact(state, headers);

    let mut engine = state.engine.clone();
    let info = engine
        .room_info(RoomRef {
            room_id: room_id.clone(),
        })
        .await?
        .into_inner();
    let (page_reply, target_reply) = if info.found {
        let page_reply = match &page {
            Some(url) => Some(dry_run(state, &room_id, url).await?),
            None => None,
        };
        (
            page_reply,
            Some(dry_run(state, &room_id, &info.target_url).await?),
        )
    } else {
        (None, None)
    };
    if let (true, Some(connector)) = (info.found, &connector) {
        let check_in = CheckInRequest {
            room_id: room_id.clone(),
            generation: info.generation,
            connector: connector.clone(),
            version: version.clone().unwrap_or_default(),
            origin: match &origin {
                OriginFact::Known(origin) => origin.clone(),
                _ => String::new(),
            },
        };
        // A lost check-in costs the console one row; the report is still right.
        if let Err(status) = engine.check_in(check_in).await {
            tracing::warn!(room = %room_id, error = %status.message(), "connector check-in not recorded");
        }
    }
    let room = match (&target_reply, info.found) {
        (Some(target), true) => Some(RoomFacts {
            info: &info,
            page: page_reply.as_ref(),
            target,
        }),
        _ => None,
    };
    let base = public_base(&state.config, headers, uri);
    let checks = checks(&Facts {
        room_id: &room_id,
        room,
        origin: &origin,
        key,
        key_in_query: query.contains("key"),
        connector: connector.as_deref(),
        version: version.as_deref(),
        registry: qm_registry::all(),
        server: Some(base.as_str()).filter(|base| !base.is_empty()),
        now_ms: qm_core::clock::now_ms(),
    });
    Ok(Report {
        room_id,
        origin,
        key,
        connector,
        version,
        checks,
    })
}

/// The engine's verdict on one page (a dry run: it counts nothing).
async fn dry_run(
    state: &GatewayState,
    room_id: &str,
    url: &str,
) -> Result<TargetingReply, AppError> {
    let request = TargetingRequest {
        room_id: room_id.to_owned(),
        counters: false,
        dry_run_url: url.to_owned(),
    };
    Ok(state.engine.clone().targeting(request).await?.into_inner())
}

/// `connector=` or `version=`: at most 64 letters, digits and `.`, `_`, `-`, `+`, so the console
/// can show it as it came.
fn connector_field(query: &QueryParams, name: &str) -> Result<Option<String>, AppError> {
    let Some(value) = query.non_empty(name) else {
        return Ok(None);
    };
    let fine = value.len() <= MAX_CONNECTOR_LEN
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+'));
    if !fine {
        return Err(AppError::new(
            ErrorCode::InvalidConnector,
            format!(
                "{name} must be at most {MAX_CONNECTOR_LEN} letters, digits and . _ - + (like connector=node&version=1.2.0)"
            ),
        ));
    }
    Ok(Some(value.to_owned()))
}

/// `origin=`, else the origin of `url=`, else the Origin header. Any absolute http(s) URL
/// names its origin; anything else sent is malformed (a report, not a refusal).
fn origin_fact(query: &QueryParams, page: Option<&str>, headers: &HeaderMap) -> OriginFact {
    let sent = query
        .non_empty("origin")
        .map(str::to_owned)
        .or_else(|| page.map(str::to_owned))
        .or_else(|| {
            headers
                .get(ORIGIN)
                .and_then(|value| value.to_str().ok())
                .filter(|origin| !origin.is_empty())
                .map(str::to_owned)
        });
    let Some(sent) = sent else {
        return OriginFact::Unknown;
    };
    match page_url(sent.trim()) {
        Some(url) => OriginFact::Known(url.origin().ascii_serialization()),
        None => OriginFact::Malformed(sent.chars().take(200).collect()),
    }
}

fn key_fact(state: &GatewayState, headers: &HeaderMap) -> KeyFact {
    if !headers.contains_key(AUTHORIZATION) {
        return KeyFact::Absent;
    }
    match bearer_is_public_or_admin_key(&state.config, headers) {
        true => KeyFact::Right,
        false => KeyFact::Wrong,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::headers;

    #[test]
    fn origin_from_origin_then_url_then_header() {
        let query = |text: &str| QueryParams::parse(Some(text));
        let header = headers(&[("origin", "https://header.example")]);
        assert_eq!(
            origin_fact(
                &query("origin=https%3A%2F%2FShop.example%2F"),
                None,
                &header
            ),
            OriginFact::Known("https://shop.example".into())
        );
        assert_eq!(
            origin_fact(&query(""), Some("https://page.example:8443/a?b"), &header),
            OriginFact::Known("https://page.example:8443".into())
        );
        assert_eq!(
            origin_fact(&query(""), None, &header),
            OriginFact::Known("https://header.example".into())
        );
        assert_eq!(
            origin_fact(&query(""), None, &HeaderMap::new()),
            OriginFact::Unknown
        );
        assert_eq!(
            origin_fact(&query("origin=null"), None, &header),
            OriginFact::Malformed("null".into())
        );
    }

    #[test]
    fn connector_fields_are_short_and_plain() {
        let query = |text: &str| QueryParams::parse(Some(text));
        assert_eq!(
            connector_field(&query("connector=node"), "connector").ok(),
            Some(Some("node".into()))
        );
        assert_eq!(
            connector_field(&query("version=1.2.0-rc.1%2Bb"), "version").ok(),
            Some(Some("1.2.0-rc.1+b".into()))
        );
        assert_eq!(connector_field(&query(""), "connector").ok(), Some(None));
        for bad in ["a%20b", "%3Cscript%3E", &"x".repeat(65)] {
            let error = connector_field(&query(&format!("connector={bad}")), "connector")
                .expect_err("refused");
            assert_eq!(error.0.code, ErrorCode::InvalidConnector, "{bad}");
        }
    }

    #[test]
    fn the_pixel_is_a_gif() {
        assert!(PIXEL.starts_with(b"GIF89a"));
        assert_eq!(PIXEL.last(), Some(&0x3b));
    }
}
