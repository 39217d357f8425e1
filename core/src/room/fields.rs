//! Parsers for the scalar fields of a room document: numbers with their ranges, the id and
//! name, URLs and origins, instants and enumerations. Each returns the field's own error code
//! with a message naming the field and the rule it broke.

use serde_json::Value;
use url::Url;

use super::{BackendDownPolicy, RoomState};
use crate::text::{TextKind, check_operator_text, echo, echo_value};
use crate::{ApiError, ErrorCode};

/// Longest `targetUrl` (and `logoUrl`).
pub(super) const MAX_URL_LEN: usize = 2048;
/// Most entries in `returnOrigins` / `tagOrigins`.
const MAX_ORIGINS: usize = 50;
/// Latest accepted instant (9999-12-31T23:59:59.999Z): anything later is a unit mistake.
const MAX_INSTANT_MS: i64 = 253_402_300_799_999;

pub(super) fn field_error(code: ErrorCode, field: &str, why: impl std::fmt::Display) -> ApiError {
    ApiError::new(code, format!("{field}: {why}"))
}

/// A whole number in `min..=max`.
pub(super) fn integer(
    value: &Value,
    field: &str,
    min: u64,
    max: u64,
    code: ErrorCode,
) -> Result<u64, ApiError> {
    match value.as_u64() {
        Some(number) if (min..=max).contains(&number) => Ok(number),
        _ => Err(field_error(
            code,
            field,
            format!(
                "must be a whole number from {min} to {max}, got {}",
                echo_value(value)
            ),
        )),
    }
}

/// `null` or a whole number in `min..=max`.
pub(super) fn nullable_integer(
    value: &Value,
    field: &str,
    min: u64,
    max: u64,
    code: ErrorCode,
) -> Result<Option<u64>, ApiError> {
    if value.is_null() {
        return Ok(None);
    }
    integer(value, field, min, max, code)
        .map(Some)
        .map_err(|_| {
            field_error(
                code,
                field,
                format!(
                    "must be null or a whole number from {min} to {max}, got {}",
                    echo_value(value)
                ),
            )
        })
}

/// `preQueueMaxPerIp` / `queueMaxPerIp`: `null` (unlimited) or 1..=100000.
pub(super) fn per_ip_cap(
    value: &Value,
    field: &str,
    code: ErrorCode,
) -> Result<Option<u32>, ApiError> {
    nullable_integer(value, field, 1, 100_000, code)
        .map(|cap| cap.map(|cap| cap as u32))
        .map_err(|_| {
            field_error(
                code,
                field,
                format!(
                    "must be null (unlimited) or a whole number from 1 to 100000, got {}",
                    echo_value(value)
                ),
            )
        })
}

pub(super) fn room_id(value: &Value) -> Result<String, ApiError> {
    match value.as_str() {
        Some(id) if crate::ids::is_valid_room_id(id) => Ok(id.to_owned()),
        _ => Err(field_error(
            ErrorCode::InvalidRoomId,
            "id",
            format!(
                "must be 1-{} characters of A-Z a-z 0-9 _ -, got {}",
                crate::ids::ROOM_ID_MAX_LEN,
                echo_value(value)
            ),
        )),
    }
}

pub(super) fn name(value: &Value) -> Result<String, ApiError> {
    let name = value.as_str().map(str::trim).unwrap_or_default();
    if name.is_empty() || name.chars().count() > 120 {
        return Err(field_error(
            ErrorCode::InvalidName,
            "name",
            "must be a non-empty string of at most 120 characters",
        ));
    }
    check_operator_text("name", name, TextKind::Line, ErrorCode::InvalidName)?;
    Ok(name.to_owned())
}

/// An absolute http(s) URL with a host, kept exactly as written.
pub(super) fn target_url(value: &Value) -> Result<String, ApiError> {
    let invalid = |why: &str| field_error(ErrorCode::InvalidTargetUrl, "targetUrl", why);
    let Some(text) = value.as_str() else {
        return Err(invalid("must be a string holding an absolute http(s) URL"));
    };
    if text.len() > MAX_URL_LEN {
        return Err(invalid("is longer than 2048 characters"));
    }
    check_operator_text(
        "targetUrl",
        text,
        TextKind::Line,
        ErrorCode::InvalidTargetUrl,
    )?;
    if text.trim() != text || text.chars().any(char::is_whitespace) {
        return Err(invalid("must not contain whitespace"));
    }
    let url = Url::parse(text)
        .map_err(|_| invalid("is not an absolute URL (e.g. https://shop.example.com/)"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid("must use http or https"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(invalid("must name a host"));
    }
    Ok(text.to_owned())
}

/// `null` or an http(s) origin; stored normalised (lowercase host, no default port, no slash).
pub(super) fn proxy_origin(value: &Value) -> Result<Option<String>, ApiError> {
    if value.is_null() {
        return Ok(None);
    }
    let Some(text) = value.as_str() else {
        return Err(field_error(
            ErrorCode::InvalidProxyOrigin,
            "proxyOrigin",
            "must be null or an http(s) origin string",
        ));
    };
    parse_origin(text).map(Some).map_err(|why| {
        field_error(
            ErrorCode::InvalidProxyOrigin,
            "proxyOrigin",
            format!("{} {why}", echo(text)),
        )
    })
}

/// `null` or an array of at most 50 origins, normalised and deduplicated in order.
pub(super) fn origin_list(
    value: &Value,
    field: &str,
    code: ErrorCode,
) -> Result<Option<Vec<String>>, ApiError> {
    if value.is_null() {
        return Ok(None);
    }
    let Some(items) = value.as_array() else {
        return Err(field_error(
            code,
            field,
            "must be null or an array of origins like https://shop.example.com",
        ));
    };
    if items.len() > MAX_ORIGINS {
        return Err(field_error(
            code,
            field,
            format!(
                "holds {} origins; at most {MAX_ORIGINS} are allowed",
                items.len()
            ),
        ));
    }
    let mut origins: Vec<String> = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let Some(text) = item.as_str() else {
            return Err(field_error(
                code,
                &format!("{field}[{index}]"),
                "must be a string origin",
            ));
        };
        let origin = parse_origin(text).map_err(|why| {
            field_error(
                code,
                &format!("{field}[{index}]"),
                format!("{} {why}", echo(text)),
            )
        })?;
        if !origins.contains(&origin) {
            origins.push(origin);
        }
    }
    Ok(Some(origins))
}

/// `http(s)://host[:port]` with nothing after it but an optional `/`. The error is the reason,
/// phrased to follow the quoted input.
pub(super) fn parse_origin(text: &str) -> Result<String, &'static str> {
    if text.chars().any(char::is_whitespace) {
        return Err("must not contain whitespace");
    }
    if crate::text::first_control_character(text, TextKind::Line).is_some() {
        return Err("must not contain control characters (NUL, U+0001-U+001F, DEL, U+0080-U+009F)");
    }
    let url = Url::parse(text).map_err(|_| "is not an origin like https://shop.example.com")?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err("must use http or https");
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("must name a host");
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must not carry credentials");
    }
    if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
        return Err("is an origin only: no path, query or fragment");
    }
    Ok(url.origin().ascii_serialization())
}

/// The origin of a stored (already validated) URL.
pub(super) fn origin_of_url(text: &str) -> Option<String> {
    let url = Url::parse(text).ok()?;
    let origin = url.origin();
    origin.is_tuple().then(|| origin.ascii_serialization())
}

/// `null`, an integer epoch ms, or an RFC 3339 instant string; stored as epoch ms.
pub(super) fn opens_at(value: &Value) -> Result<Option<i64>, ApiError> {
    let invalid = || {
        field_error(
            ErrorCode::InvalidOpensAt,
            "opensAt",
            format!(
                "must be null, an epoch-milliseconds integer or an ISO-8601 instant like 2026-05-01T09:00:00Z, got {}",
                echo_value(value)
            ),
        )
    };
    match value {
        Value::Null => Ok(None),
        Value::Number(number) => match number.as_i64() {
            Some(ms) if (0..=MAX_INSTANT_MS).contains(&ms) => Ok(Some(ms)),
            _ => Err(invalid()),
        },
        Value::String(text) => {
            check_operator_text("opensAt", text, TextKind::Line, ErrorCode::InvalidOpensAt)?;
            opens_at_text(text).ok_or_else(invalid).map(Some)
        }
        _ => Err(invalid()),
    }
}

/// An RFC 3339 instant (surrounding whitespace ignored) within the accepted range, as epoch ms.
fn opens_at_text(text: &str) -> Option<i64> {
    match chrono::DateTime::parse_from_rfc3339(text.trim()) {
        Ok(instant) if (0..=MAX_INSTANT_MS).contains(&instant.timestamp_millis()) => {
            Some(instant.timestamp_millis())
        }
        _ => None,
    }
}

pub(super) fn state(value: &Value) -> Result<RoomState, ApiError> {
    match value.as_str() {
        Some(text) => RoomState::parse(text),
        None => Err(field_error(
            ErrorCode::InvalidState,
            "state",
            "must be one of active, paused, bypass",
        )),
    }
}

pub(super) fn on_backend_down(value: &Value) -> Result<BackendDownPolicy, ApiError> {
    match value.as_str() {
        Some("closed") => Ok(BackendDownPolicy::Closed),
        Some("open") => Ok(BackendDownPolicy::Open),
        _ => Err(field_error(
            ErrorCode::InvalidOnBackendDown,
            "onBackendDown",
            format!(
                "must be \"closed\" (the default) or \"open\", got {}",
                echo_value(value)
            ),
        )),
    }
}
