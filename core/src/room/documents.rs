//! The nested parts of a room document (branding, autotune, protection, autoActivate) and the
//! URL scope rules, each with its validation. Nested objects are replaced whole when present in
//! a patch, never deep-merged: what the operator sent is what the room holds.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::MAX_RATE_PER_MINUTE;
use super::fields::{MAX_URL_LEN, field_error};
use crate::text::{TextKind, check_operator_text, echo};
use crate::{ApiError, ErrorCode};

/// Most URL scope rules per room, longest rule, most wildcards per rule.
const MAX_URL_PATTERNS: usize = 25;
const MAX_URL_PATTERN_LEN: usize = 300;
const MAX_URL_PATTERN_WILDCARDS: usize = 10;

/// What the waiting page shows. Every key is optional; `messageAt` is stamped by the server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Branding {
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub logo_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub primary_color: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub accent_color: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub background_color: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub text_color: Option<String>,
    /// The operator's message to queued visitors.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub message: Option<String>,
    /// When the message text last changed (epoch ms); present exactly when `message` is.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub message_at: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub support_text: Option<String>,
}

/// The automatic rate controller's settings: what it reads of the origin's health (the health
/// URL it probes, or without one the answers the inline gate forwards for a room with a
/// `proxyOrigin`), the p95 latency it aims under, and the bounds of the rate it may set. Acted
/// on by the engine's controller (`qm_engine` `autotune`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Autotune {
    pub enabled: bool,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub min_rate: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub max_rate: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub target_p95_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub health_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cool_down_sec: Option<u64>,
}

impl Autotune {
    /// The p95 aimed under when `targetP95Ms` is not given.
    pub const DEFAULT_TARGET_P95_MS: u64 = 1_000;
    /// The pause after a change when `coolDownSec` is not given.
    pub const DEFAULT_COOL_DOWN_SEC: u64 = 30;
    /// The bounds of `coolDownSec`.
    pub const COOL_DOWN_SEC_RANGE: std::ops::RangeInclusive<u64> = 1..=3_600;

    pub fn target_p95_ms(&self) -> u64 {
        self.target_p95_ms.unwrap_or(Self::DEFAULT_TARGET_P95_MS)
    }

    pub fn cool_down_sec(&self) -> u64 {
        self.cool_down_sec.unwrap_or(Self::DEFAULT_COOL_DOWN_SEC)
    }

    /// The lowest rate the controller sets (at least 1: it never closes the door).
    pub fn min_rate(&self) -> u32 {
        self.min_rate.unwrap_or(1).max(1)
    }

    /// The highest rate the controller sets.
    pub fn max_rate(&self) -> u32 {
        self.max_rate
            .unwrap_or(crate::room::MAX_RATE_PER_MINUTE)
            .max(self.min_rate())
    }

    /// An enabled controller must have something to read: a health URL, or the inline gate's
    /// answers of a room in inline mode.
    pub(crate) fn check_source(&self, proxy_origin: Option<&str>) -> Result<(), ApiError> {
        if !self.enabled || self.health_url.is_some() || proxy_origin.is_some() {
            return Ok(());
        }
        Err(field_error(
            ErrorCode::InvalidAutotune,
            "autotune.healthUrl",
            "is required while autotune is enabled on a room without proxyOrigin: the origin's URL the controller probes (an inline room's controller reads the answers the gate forwards instead)",
        ))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProtectionMode {
    Off,
    Monitor,
    Enforce,
}

/// Bot-scoring mode (stored; acted on by a later issue).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Protection {
    pub mode: ProtectionMode,
}

/// Threshold activation: a room in bypass turns active when its arrivals (joins and door
/// checks) reach `threshold` a minute, and back to bypass once it has been calm (under half the
/// threshold, nobody waiting) for `calmSec` — only when it was this that activated it. Acted on
/// by the engine's controller (`qm_engine` `auto_activate.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AutoActivate {
    pub enabled: bool,
    pub threshold: u64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub calm_sec: Option<u64>,
}

impl AutoActivate {
    /// The calm period when `calmSec` is not given.
    pub const DEFAULT_CALM_SEC: u64 = 300;
    /// The bounds of `calmSec`.
    pub const CALM_SEC_RANGE: std::ops::RangeInclusive<u64> = 1..=86_400;

    /// The calm period in force.
    pub fn calm_sec(&self) -> u64 {
        self.calm_sec.unwrap_or(Self::DEFAULT_CALM_SEC)
    }
}

/// Refuses keys of a nested object outside `allowed`.
fn only_keys(
    object: &Map<String, Value>,
    allowed: &[&str],
    field: &str,
    code: ErrorCode,
) -> Result<(), ApiError> {
    match object.keys().find(|key| !allowed.contains(&key.as_str())) {
        Some(key) => Err(field_error(
            code,
            field,
            format!(
                "{} is not a key of {field}; allowed: {}",
                echo(key),
                allowed.join(", ")
            ),
        )),
        None => Ok(()),
    }
}

/// `null` or a branding object. `messageAt` in the input is ignored: the stamp is kept while
/// the message text is unchanged, set to `now_ms` when it changes, and dropped with the message.
pub(super) fn branding(
    value: &Value,
    previous: Option<&Branding>,
    now_ms: i64,
) -> Result<Option<Branding>, ApiError> {
    const KEYS: &[&str] = &[
        "title",
        "logoUrl",
        "primaryColor",
        "accentColor",
        "backgroundColor",
        "textColor",
        "message",
        "messageAt",
        "supportText",
    ];
    if value.is_null() {
        return Ok(None);
    }
    let Some(object) = value.as_object() else {
        return Err(field_error(
            ErrorCode::InvalidBranding,
            "branding",
            "must be null or an object",
        ));
    };
    only_keys(object, KEYS, "branding", ErrorCode::InvalidBranding)?;

    let mut branding = Branding {
        title: text_key(object, "title", 120, TextKind::Line)?,
        logo_url: text_key(object, "logoUrl", MAX_URL_LEN, TextKind::Line)?,
        primary_color: text_key(object, "primaryColor", 7, TextKind::Line)?,
        accent_color: text_key(object, "accentColor", 7, TextKind::Line)?,
        background_color: text_key(object, "backgroundColor", 7, TextKind::Line)?,
        text_color: text_key(object, "textColor", 7, TextKind::Line)?,
        // Shown as paragraphs: the operator may break lines.
        message: text_key(object, "message", 2000, TextKind::Paragraph)?,
        message_at: None,
        support_text: text_key(object, "supportText", 500, TextKind::Paragraph)?,
    };
    if let Some(logo_url) = &branding.logo_url {
        check_logo_url(logo_url)?;
    }
    for (key, color) in [
        ("primaryColor", &branding.primary_color),
        ("accentColor", &branding.accent_color),
        ("backgroundColor", &branding.background_color),
        ("textColor", &branding.text_color),
    ] {
        if let Some(color) = color
            && !is_hex_color(color)
        {
            return Err(field_error(
                ErrorCode::InvalidBranding,
                &format!("branding.{key}"),
                format!("{} is not a #rgb or #rrggbb colour", echo(color)),
            ));
        }
    }
    branding.message_at = branding.message.as_ref().map(|message| match previous {
        Some(previous) if previous.message.as_ref() == Some(message) => {
            previous.message_at.unwrap_or(now_ms)
        }
        _ => now_ms,
    });
    Ok(Some(branding))
}

/// An optional string key of branding; `null` and `""` both mean absent. Control characters are
/// refused as `kind` says.
fn text_key(
    object: &Map<String, Value>,
    key: &str,
    max_chars: usize,
    kind: TextKind,
) -> Result<Option<String>, ApiError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if text.is_empty() => Ok(None),
        Some(Value::String(text)) if text.chars().count() <= max_chars => {
            check_operator_text(
                &format!("branding.{key}"),
                text,
                kind,
                ErrorCode::InvalidBranding,
            )?;
            Ok(Some(text.clone()))
        }
        Some(Value::String(_)) => Err(field_error(
            ErrorCode::InvalidBranding,
            &format!("branding.{key}"),
            format!("is longer than {max_chars} characters"),
        )),
        Some(_) => Err(field_error(
            ErrorCode::InvalidBranding,
            &format!("branding.{key}"),
            "must be a string",
        )),
    }
}

/// An http(s) URL, or a path on this server (starting with one `/`).
fn check_logo_url(text: &str) -> Result<(), ApiError> {
    let invalid = |why: &str| field_error(ErrorCode::InvalidBranding, "branding.logoUrl", why);
    if text
        .chars()
        .any(|character| character.is_whitespace() || character.is_control() || character == '\\')
    {
        return Err(invalid(
            "must not contain whitespace, control characters or backslashes",
        ));
    }
    if text.starts_with('/') && !text.starts_with("//") {
        return Ok(());
    }
    match url::Url::parse(text) {
        Ok(url)
            if matches!(url.scheme(), "http" | "https")
                && url.host_str().is_some_and(|host| !host.is_empty()) =>
        {
            Ok(())
        }
        _ => Err(invalid("must be an http(s) URL or a path starting with /")),
    }
}

/// `#rgb` or `#rrggbb`: the only colour form a room stores, so a page may inline it as CSS.
pub fn is_hex_color(text: &str) -> bool {
    let Some(digits) = text.strip_prefix('#') else {
        return false;
    };
    matches!(digits.len(), 3 | 6) && digits.bytes().all(|byte| byte.is_ascii_hexdigit())
}

/// `null` or `{enabled, minRate?, maxRate?, targetP95Ms?}`.
pub(super) fn autotune(value: &Value) -> Result<Option<Autotune>, ApiError> {
    let code = ErrorCode::InvalidAutotune;
    if value.is_null() {
        return Ok(None);
    }
    let Some(object) = value.as_object() else {
        return Err(field_error(
            code,
            "autotune",
            "must be null or an object {enabled, minRate?, maxRate?, targetP95Ms?, healthUrl?, coolDownSec?}",
        ));
    };
    only_keys(
        object,
        &[
            "enabled",
            "minRate",
            "maxRate",
            "targetP95Ms",
            "healthUrl",
            "coolDownSec",
        ],
        "autotune",
        code,
    )?;
    let Some(enabled) = object.get("enabled").and_then(Value::as_bool) else {
        return Err(field_error(
            code,
            "autotune.enabled",
            "is required and must be true or false",
        ));
    };
    let rate = |key: &str| -> Result<Option<u32>, ApiError> {
        match object.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => match value.as_u64() {
                Some(rate) if rate <= u64::from(MAX_RATE_PER_MINUTE) => Ok(Some(rate as u32)),
                _ => Err(field_error(
                    code,
                    &format!("autotune.{key}"),
                    format!("must be a whole number from 0 to {MAX_RATE_PER_MINUTE}"),
                )),
            },
        }
    };
    let min_rate = rate("minRate")?;
    let max_rate = rate("maxRate")?;
    if let (Some(min), Some(max)) = (min_rate, max_rate)
        && max < min
    {
        return Err(field_error(
            code,
            "autotune.maxRate",
            format!("({max}) is below autotune.minRate ({min})"),
        ));
    }
    let target_p95_ms = match object.get("targetP95Ms") {
        None | Some(Value::Null) => None,
        Some(value) => match value.as_u64() {
            Some(ms) if ms >= 1 => Some(ms),
            _ => {
                return Err(field_error(
                    code,
                    "autotune.targetP95Ms",
                    "must be a whole number of milliseconds, at least 1",
                ));
            }
        },
    };
    let health_url = match object.get("healthUrl") {
        None | Some(Value::Null) => None,
        Some(value) => Some(health_url(value)?),
    };
    let cool_down_sec = match object.get("coolDownSec") {
        None | Some(Value::Null) => None,
        Some(value) => match value.as_u64() {
            Some(sec) if Autotune::COOL_DOWN_SEC_RANGE.contains(&sec) => Some(sec),
            _ => {
                return Err(field_error(
                    code,
                    "autotune.coolDownSec",
                    "must be a whole number of seconds from 1 to 3600",
                ));
            }
        },
    };
    Ok(Some(Autotune {
        enabled,
        min_rate,
        max_rate,
        target_p95_ms,
        health_url,
        cool_down_sec,
    }))
}

/// An `http://` URL with a host, at most 2048 characters: the origin's health page. Plain http
/// only, like `proxyOrigin`: the controller reaches the origin inside the operator's network.
fn health_url(value: &Value) -> Result<String, ApiError> {
    let invalid = |why: &str| field_error(ErrorCode::InvalidAutotune, "autotune.healthUrl", why);
    let Some(text) = value.as_str() else {
        return Err(invalid("must be an http:// URL string"));
    };
    if text.len() > 2048 {
        return Err(invalid("must be at most 2048 characters"));
    }
    match url::Url::parse(text) {
        Ok(url)
            if url.scheme() == "http" && url.host_str().is_some_and(|host| !host.is_empty()) =>
        {
            Ok(text.to_owned())
        }
        _ => Err(invalid("must be an http:// URL with a host")),
    }
}

/// `null` or `{mode: "off" | "monitor" | "enforce"}`.
pub(super) fn protection(value: &Value) -> Result<Option<Protection>, ApiError> {
    let code = ErrorCode::InvalidProtection;
    if value.is_null() {
        return Ok(None);
    }
    let Some(object) = value.as_object() else {
        return Err(field_error(
            code,
            "protection",
            "must be null or an object {mode}",
        ));
    };
    only_keys(object, &["mode"], "protection", code)?;
    let mode = match object.get("mode").and_then(Value::as_str) {
        Some("off") => ProtectionMode::Off,
        Some("monitor") => ProtectionMode::Monitor,
        Some("enforce") => ProtectionMode::Enforce,
        _ => {
            return Err(field_error(
                code,
                "protection.mode",
                "is required and must be \"off\", \"monitor\" or \"enforce\"",
            ));
        }
    };
    Ok(Some(Protection { mode }))
}

/// `null` or `{enabled, threshold >= 1}`.
pub(super) fn auto_activate(value: &Value) -> Result<Option<AutoActivate>, ApiError> {
    let code = ErrorCode::InvalidAutoActivate;
    if value.is_null() {
        return Ok(None);
    }
    let Some(object) = value.as_object() else {
        return Err(field_error(
            code,
            "autoActivate",
            "must be null or an object {enabled, threshold, calmSec?}",
        ));
    };
    only_keys(
        object,
        &["enabled", "threshold", "calmSec"],
        "autoActivate",
        code,
    )?;
    let Some(enabled) = object.get("enabled").and_then(Value::as_bool) else {
        return Err(field_error(
            code,
            "autoActivate.enabled",
            "is required and must be true or false",
        ));
    };
    let threshold = match object.get("threshold").and_then(Value::as_u64) {
        Some(threshold) if threshold >= 1 => threshold,
        _ => {
            return Err(field_error(
                code,
                "autoActivate.threshold",
                "is required and must be a whole number, at least 1",
            ));
        }
    };
    let calm_sec = match object.get("calmSec") {
        None | Some(Value::Null) => None,
        Some(value) => match value.as_u64() {
            Some(calm) if AutoActivate::CALM_SEC_RANGE.contains(&calm) => Some(calm),
            _ => {
                return Err(field_error(
                    code,
                    "autoActivate.calmSec",
                    "must be a whole number of seconds from 1 to 86400",
                ));
            }
        },
    };
    Ok(Some(AutoActivate {
        enabled,
        threshold,
        calm_sec,
    }))
}

/// The URL scope: at most 25 rules; `null` is read as `[]` (unscoped).
pub(super) fn url_patterns(value: &Value) -> Result<Vec<String>, ApiError> {
    let code = ErrorCode::InvalidUrlPattern;
    if value.is_null() {
        return Ok(Vec::new());
    }
    let Some(items) = value.as_array() else {
        return Err(field_error(
            code,
            "urlPatterns",
            "must be an array of rules ([] = every page is queued)",
        ));
    };
    if items.len() > MAX_URL_PATTERNS {
        return Err(field_error(
            code,
            "urlPatterns",
            format!(
                "holds {} rules; at most {MAX_URL_PATTERNS} are allowed",
                items.len()
            ),
        ));
    }
    items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            let field = format!("urlPatterns[{index}]");
            let Some(rule) = item.as_str() else {
                return Err(field_error(code, &field, "must be a string"));
            };
            check_url_pattern(rule)
                .map_err(|why| field_error(code, &field, format!("{} {why}", echo(rule))))?;
            Ok(rule.to_owned())
        })
        .collect()
}

/// One scope rule: after an optional leading `!` (exception), it starts with `/` (path),
/// `*` (anywhere) or `https://host/` (pins the origin). The error is the reason.
fn check_url_pattern(rule: &str) -> Result<(), String> {
    if rule.chars().count() > MAX_URL_PATTERN_LEN {
        return Err(format!("is longer than {MAX_URL_PATTERN_LEN} characters"));
    }
    let wildcards = rule.matches('*').count();
    if wildcards > MAX_URL_PATTERN_WILDCARDS {
        return Err(format!(
            "has {wildcards} * wildcards; at most {MAX_URL_PATTERN_WILDCARDS} are allowed"
        ));
    }
    if rule
        .chars()
        .any(|character| character.is_whitespace() || character.is_control())
    {
        return Err("must not contain whitespace or control characters".to_owned());
    }
    let body = rule.strip_prefix('!').unwrap_or(rule);
    if body.is_empty() {
        return Err(if rule.is_empty() {
            "is empty"
        } else {
            "is an exception (!) with no rule after it"
        }
        .to_owned());
    }
    if body.starts_with('/') || body.starts_with('*') {
        return Ok(());
    }
    if let Some(rest) = body.strip_prefix("https://") {
        return match rest.split_once('/') {
            Some((host, _)) if !host.is_empty() => Ok(()),
            Some(_) => Err("names no host after https://".to_owned()),
            None => Err(
                "must carry a path after the host, e.g. https://shop.example.com/checkout"
                    .to_owned(),
            ),
        };
    }
    if body.starts_with("http://") {
        return Err("must use https:// to pin an origin".to_owned());
    }
    Err(
        "must start with / (a path), * (anywhere) or https://host/path (a pinned origin)"
            .to_owned(),
    )
}
