//! The room document: the whole writable set of `POST /api/admin/rooms` as a typed
//! [`RoomConfig`], and the one set of validation rules every process applies to it (create,
//! update, `.../rate`, `.../schedule`, and the `.../flush` and `.../eject` bodies). The engine
//! validates a patch atomically with the stored room it merges into; the admin process may call
//! the same functions to answer early.
//!
//! Every refusal is a 400 with the field's own code (`invalid_rate`, `invalid_url_pattern`, ...)
//! and a message that names the field and says why, because an operator reading the error is
//! the only person who can fix the body.

mod controls;
mod documents;
mod fields;
mod states;
#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{ApiError, ErrorCode};

pub use controls::{MAX_FLUSH, check_flush_count, parse_eject_body, parse_flush_body};
pub use documents::{AutoActivate, Autotune, Branding, Protection, ProtectionMode, is_hex_color};
pub use states::{BackendDownPolicy, EffectiveState, RoomState};

/// Default `passedTtlSec`: how long a pass admits at the door.
pub const DEFAULT_PASSED_TTL_SEC: u64 = 600;
/// Default per-identity caps of the pre-queue and the waiting line.
pub const DEFAULT_PER_IP_CAP: u32 = 16;
/// Default presence window of a pass holder.
pub const DEFAULT_PRESENCE_SEC: u64 = 30;
/// Highest accepted `ratePerMinute`.
pub const MAX_RATE_PER_MINUTE: u32 = 1_000_000;

/// The keys `POST /api/admin/rooms` writes (plus the `rate` alias).
const WRITABLE_KEYS: &[&str] = &[
    "id",
    "name",
    "targetUrl",
    "proxyOrigin",
    "ratePerMinute",
    "rate",
    "maxConcurrent",
    "passedTtlSec",
    "sessionTtlSec",
    "sessionMaxSec",
    "branding",
    "returnOrigins",
    "tagOrigins",
    "autotune",
    "protection",
    "autoActivate",
    "urlPatterns",
    "opensAt",
    "preQueueMaxPerIp",
    "queueMaxPerIp",
    "presenceSec",
    "state",
    "onBackendDown",
];

/// Keys that `GET /api/admin/rooms` returns beside the configuration: live stats and
/// engine-kept facts. A body that carries them is accepted and they are ignored, so an operator
/// (or a script) can read a room, edit one field and post the object straight back.
pub const READ_ONLY_KEYS: &[&str] = &[
    "effectiveState",
    "generation",
    "seq",
    "createdAt",
    "updatedAt",
    "preQueue",
    "waiting",
    "passedLastMin",
    "oldestWaitSec",
    "activePasses",
    "passedTotal",
    "ejectedTotal",
    "purgedTotal",
    "nextTicket",
    "estWaitSec",
    "estWaitFloor",
    "slotlessPasses",
    "absentWaiting",
    "doorSessions",
];

/// Longest `passedTtlSec`: a day. The engine drops passes older than this from its live list.
pub const MAX_PASSED_TTL_SEC: u64 = 86_400;

/// One room's configuration: exactly the writable set, camelCase on the wire, `null` where a
/// nullable field is unset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoomConfig {
    pub id: String,
    pub name: String,
    pub target_url: String,
    /// Inline mode: the internal origin an admitted visitor is forwarded to.
    pub proxy_origin: Option<String>,
    pub rate_per_minute: u32,
    pub max_concurrent: Option<u64>,
    pub passed_ttl_sec: u64,
    pub session_ttl_sec: Option<u64>,
    pub session_max_sec: Option<u64>,
    pub branding: Option<Branding>,
    pub return_origins: Option<Vec<String>>,
    pub tag_origins: Option<Vec<String>>,
    pub autotune: Option<Autotune>,
    pub protection: Option<Protection>,
    pub auto_activate: Option<AutoActivate>,
    /// The room's scope; empty means every page carrying the tag is queued.
    pub url_patterns: Vec<String>,
    /// Doors-open instant, epoch ms.
    pub opens_at: Option<i64>,
    /// `None` = unlimited.
    pub pre_queue_max_per_ip: Option<u32>,
    /// `None` = unlimited.
    pub queue_max_per_ip: Option<u32>,
    /// `None` = the presence rule is off.
    pub presence_sec: Option<u64>,
    pub state: RoomState,
    pub on_backend_down: BackendDownPolicy,
}

impl RoomConfig {
    /// A room with every optional field at its default.
    pub fn with_defaults(id: String, target_url: String, rate_per_minute: u32) -> RoomConfig {
        RoomConfig {
            name: id.clone(),
            id,
            target_url,
            proxy_origin: None,
            rate_per_minute,
            max_concurrent: None,
            passed_ttl_sec: DEFAULT_PASSED_TTL_SEC,
            session_ttl_sec: None,
            session_max_sec: None,
            branding: None,
            return_origins: None,
            tag_origins: None,
            autotune: None,
            protection: None,
            auto_activate: None,
            url_patterns: Vec::new(),
            opens_at: None,
            pre_queue_max_per_ip: Some(DEFAULT_PER_IP_CAP),
            queue_max_per_ip: Some(DEFAULT_PER_IP_CAP),
            presence_sec: Some(DEFAULT_PRESENCE_SEC),
            state: RoomState::Active,
            on_backend_down: BackendDownPolicy::Closed,
        }
    }

    /// Creates (`existing` = `None`) or updates a room from a `POST /api/admin/rooms` body.
    ///
    /// On create `id`, `targetUrl` and `ratePerMinute` (or its alias `rate`) are required and
    /// `name` defaults to the id; on update only the fields present change. Besides the
    /// writable set, the read-only keys of a room read ([`READ_ONLY_KEYS`], and `messageAt`
    /// inside `branding`) are accepted and ignored so a read-edit-write round trip works.
    /// The whole body is validated before anything is merged: an error leaves no half-applied
    /// patch, because the result is a new value and `existing` is never touched.
    pub fn apply_patch(
        existing: Option<&RoomConfig>,
        body: &Value,
        now_ms: i64,
    ) -> Result<RoomConfig, ApiError> {
        let object = body_object(body)?;
        refuse_redacted_read(object)?;
        if let Some(key) = object.keys().find(|key| {
            !WRITABLE_KEYS.contains(&key.as_str()) && !READ_ONLY_KEYS.contains(&key.as_str())
        }) {
            return Err(unknown_field(key, "POST /api/admin/rooms"));
        }
        let rate = read_rate_fields(object)?;

        let mut next = match existing {
            Some(existing) => {
                if let Some(id) = object.get("id") {
                    let id = fields::room_id(id)?;
                    if id != existing.id {
                        return Err(ApiError::new(
                            ErrorCode::InvalidRoomId,
                            format!(
                                "id: {id:?} does not match the room being updated ({:?}); ids cannot change",
                                existing.id
                            ),
                        ));
                    }
                }
                existing.clone()
            }
            None => {
                let id = fields::room_id(object.get("id").ok_or_else(|| missing_field("id"))?)?;
                let target_url = fields::target_url(
                    object
                        .get("targetUrl")
                        .ok_or_else(|| missing_field("targetUrl"))?,
                )?;
                let rate = rate.ok_or_else(|| missing_field("ratePerMinute"))?;
                RoomConfig::with_defaults(id, target_url, rate)
            }
        };

        // A nullable whole-number field within its bounds, when the body names it.
        let bounded = |field: &str, min: u64, max: u64, code: ErrorCode| {
            object
                .get(field)
                .map(|value| fields::nullable_integer(value, field, min, max, code))
                .transpose()
        };
        if let Some(rate) = rate {
            next.rate_per_minute = rate;
        }
        if let Some(value) = object.get("name") {
            next.name = fields::name(value)?;
        }
        if let Some(value) = object.get("targetUrl") {
            next.target_url = fields::target_url(value)?;
        }
        if let Some(value) = object.get("proxyOrigin") {
            next.proxy_origin = fields::proxy_origin(value)?;
        }
        if let Some(max) = bounded(
            "maxConcurrent",
            1,
            10_000_000,
            ErrorCode::InvalidMaxConcurrent,
        )? {
            next.max_concurrent = max;
        }
        if let Some(value) = object.get("passedTtlSec") {
            next.passed_ttl_sec = fields::integer(
                value,
                "passedTtlSec",
                10,
                MAX_PASSED_TTL_SEC,
                ErrorCode::InvalidPassedTtlSec,
            )?;
        }
        if let Some(ttl) = bounded("sessionTtlSec", 10, 86_400, ErrorCode::InvalidSessionTtlSec)? {
            next.session_ttl_sec = ttl;
        }
        if let Some(max) = bounded("sessionMaxSec", 10, 86_400, ErrorCode::InvalidSessionMaxSec)? {
            next.session_max_sec = max;
        }
        if let (Some(ttl), Some(max)) = (next.session_ttl_sec, next.session_max_sec)
            && max < ttl
        {
            return Err(ApiError::new(
                ErrorCode::InvalidSessionMaxSec,
                format!(
                    "sessionMaxSec: {max} is shorter than sessionTtlSec ({ttl}); a session cannot end before its idle timeout"
                ),
            ));
        }
        if let Some(value) = object.get("branding") {
            let previous = existing.and_then(|room| room.branding.as_ref());
            next.branding = documents::branding(value, previous, now_ms)?;
        }
        if let Some(value) = object.get("returnOrigins") {
            next.return_origins =
                fields::origin_list(value, "returnOrigins", ErrorCode::InvalidReturnOrigins)?;
        }
        if let Some(value) = object.get("tagOrigins") {
            next.tag_origins =
                fields::origin_list(value, "tagOrigins", ErrorCode::InvalidTagOrigins)?;
        }
        if let Some(value) = object.get("autotune") {
            next.autotune = documents::autotune(value)?;
        }
        if let Some(value) = object.get("protection") {
            next.protection = documents::protection(value)?;
        }
        if let Some(value) = object.get("autoActivate") {
            next.auto_activate = documents::auto_activate(value)?;
        }
        if let Some(value) = object.get("urlPatterns") {
            next.url_patterns = documents::url_patterns(value)?;
        }
        apply_schedule_fields(object, &mut next)?;
        if let Some(value) = object.get("queueMaxPerIp") {
            next.queue_max_per_ip =
                fields::per_ip_cap(value, "queueMaxPerIp", ErrorCode::InvalidQueueMaxPerIp)?;
        }
        if let Some(window) = bounded("presenceSec", 5, 3_600, ErrorCode::InvalidPresenceSec)? {
            next.presence_sec = window;
        }
        if let Some(value) = object.get("state") {
            next.state = fields::state(value)?;
        }
        if let Some(value) = object.get("onBackendDown") {
            next.on_backend_down = fields::on_backend_down(value)?;
        }
        if let Some(autotune) = &next.autotune {
            autotune.check_source(next.proxy_origin.as_deref())?;
        }
        Ok(next)
    }

    /// The configured state, or `scheduled` while `opensAt` is still ahead of `now_ms`.
    pub fn effective_state(&self, now_ms: i64) -> EffectiveState {
        if self.opens_at.is_some_and(|opens_at| opens_at > now_ms) {
            return EffectiveState::Scheduled;
        }
        match self.state {
            RoomState::Active => EffectiveState::Active,
            RoomState::Paused => EffectiveState::Paused,
            RoomState::Bypass => EffectiveState::Bypass,
        }
    }

    /// The origin of `targetUrl` (`scheme://host[:port]`), always on both origin lists.
    pub fn target_origin(&self) -> Option<String> {
        fields::origin_of_url(&self.target_url)
    }

    /// Which browser origins may read this room's door check: `tagOrigins`, else
    /// `returnOrigins`, plus the targetUrl origin, deduplicated, target origin first.
    pub fn effective_tag_origins(&self) -> Vec<String> {
        let configured = self.tag_origins.as_ref().or(self.return_origins.as_ref());
        self.with_target_origin(configured)
    }

    /// Where a promoted visitor may be sent: `returnOrigins` plus the targetUrl origin.
    pub fn effective_return_origins(&self) -> Vec<String> {
        self.with_target_origin(self.return_origins.as_ref())
    }

    fn with_target_origin(&self, configured: Option<&Vec<String>>) -> Vec<String> {
        let mut origins: Vec<String> = self.target_origin().into_iter().collect();
        for origin in configured.into_iter().flatten() {
            if !origins.contains(origin) {
                origins.push(origin.clone());
            }
        }
        origins
    }
}

/// Reads the body of `POST /api/admin/rooms/:id/rate`: `{ratePerMinute}` or its alias `{rate}`
/// (both allowed when they agree). Neither is 400 `missing_field`; any other key is
/// `unknown_field`, since only the rate can change through this route.
pub fn parse_rate_body(body: &Value) -> Result<u32, ApiError> {
    let object = body_object(body)?;
    if let Some(key) = object
        .keys()
        .find(|key| *key != "ratePerMinute" && *key != "rate")
    {
        return Err(unknown_field(key, "POST /api/admin/rooms/:id/rate"));
    }
    read_rate_fields(object)?.ok_or_else(|| {
        ApiError::new(
            ErrorCode::MissingField,
            "send ratePerMinute (or its alias rate): a whole number from 0 to 1000000",
        )
    })
}

/// Checks a rate that arrives already typed (the engine's SetRate call).
pub fn check_rate(rate_per_minute: u64) -> Result<u32, ApiError> {
    fields::integer(
        &Value::from(rate_per_minute),
        "ratePerMinute",
        0,
        u64::from(MAX_RATE_PER_MINUTE),
        ErrorCode::InvalidRate,
    )
    .map(|rate| rate as u32)
}

/// Applies the body of `POST /api/admin/rooms/:id/schedule` `{opensAt?, preQueueMaxPerIp?}`.
/// Each field changes only when present; `{"opensAt": null}` cancels the drop. A body with
/// neither field is 400 `nothing_to_change`, any other key `unknown_field`.
pub fn apply_schedule(existing: &RoomConfig, body: &Value) -> Result<RoomConfig, ApiError> {
    let object = body_object(body)?;
    if let Some(key) = object
        .keys()
        .find(|key| *key != "opensAt" && *key != "preQueueMaxPerIp")
    {
        return Err(unknown_field(key, "POST /api/admin/rooms/:id/schedule"));
    }
    if object.is_empty() {
        return Err(ApiError::new(
            ErrorCode::NothingToChange,
            "send opensAt (an instant, or null to cancel the drop) and/or preQueueMaxPerIp",
        ));
    }
    let mut next = existing.clone();
    apply_schedule_fields(object, &mut next)?;
    Ok(next)
}

/// The drop's fields, as the room document and the schedule route both take them.
fn apply_schedule_fields(
    object: &Map<String, Value>,
    next: &mut RoomConfig,
) -> Result<(), ApiError> {
    if let Some(value) = object.get("opensAt") {
        next.opens_at = fields::opens_at(value)?;
    }
    if let Some(value) = object.get("preQueueMaxPerIp") {
        next.pre_queue_max_per_ip = fields::per_ip_cap(
            value,
            "preQueueMaxPerIp",
            ErrorCode::InvalidPreQueueMaxPerIp,
        )?;
    }
    Ok(())
}

fn body_object(body: &Value) -> Result<&Map<String, Value>, ApiError> {
    body.as_object()
        .ok_or_else(|| ApiError::new(ErrorCode::InvalidJson, "the body must be a JSON object"))
}

/// A monitor-link read blanks the internal address, origin allowlists and URL rules; posting
/// it back would wipe all of them, so it is refused with its own code instead of a field name.
fn refuse_redacted_read(object: &Map<String, Value>) -> Result<(), ApiError> {
    if object.get("redacted") == Some(&Value::Bool(true)) {
        return Err(ApiError::new(
            ErrorCode::RedactedShape,
            "this is a redacted read from a monitor link; posting it back would wipe the internal address \
             (proxyOrigin), the origin allowlists (returnOrigins, tagOrigins) and the URL rules (urlPatterns). \
             Read the room with an operator credential and edit that instead",
        ));
    }
    Ok(())
}

/// `ratePerMinute` and its alias `rate`: each validated, and both only when they agree.
fn read_rate_fields(object: &Map<String, Value>) -> Result<Option<u32>, ApiError> {
    let read = |key: &str| {
        object
            .get(key)
            .map(|value| {
                fields::integer(
                    value,
                    key,
                    0,
                    u64::from(MAX_RATE_PER_MINUTE),
                    ErrorCode::InvalidRate,
                )
            })
            .transpose()
    };
    match (read("ratePerMinute")?, read("rate")?) {
        (Some(canonical), Some(alias)) if canonical != alias => Err(ApiError::new(
            ErrorCode::ConflictingField,
            format!(
                "ratePerMinute ({canonical}) and its alias rate ({alias}) disagree; send one, or both with the same value"
            ),
        )),
        (canonical, alias) => Ok(canonical.or(alias).map(|rate| rate as u32)),
    }
}

fn unknown_field(key: &str, route: &str) -> ApiError {
    ApiError::new(
        ErrorCode::UnknownField,
        format!(
            "{} is not a field of {route}; nothing was changed",
            crate::text::echo(key)
        ),
    )
}

fn missing_field(key: &str) -> ApiError {
    ApiError::new(
        ErrorCode::MissingField,
        format!("{key} is required to create a room"),
    )
}
