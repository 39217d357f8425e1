//! The install checks of `GET /api/verify`: from the facts the handler gathered (the room's
//! info, the engine's scope verdicts, the credential presented) to the list of checks, each with
//! a stable id, and on a failure the exact fix. Pure, so every verdict is tested here; what
//! counts as a failure (and so turns `verify.gif` into a 424) is decided in this one file.

use std::cmp::Ordering;

use qm_proto::{RoomInfoReply, TargetingDryRun, TargetingReply};
use qm_registry::Connector;
use serde_json::{Value, json};

/// A check's outcome. Only `Fail` makes the report not ok.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    Pass,
    Fail,
    Warn,
    Info,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Warn => "warn",
            Status::Info => "info",
        }
    }
}

/// One check of the report.
#[derive(Debug, Clone)]
pub(crate) struct Check {
    pub(crate) id: &'static str,
    pub(crate) status: Status,
    title: String,
    detail: Option<String>,
    fix: Option<String>,
}

impl Check {
    fn new(id: &'static str, status: Status, title: impl Into<String>) -> Check {
        Check {
            id,
            status,
            title: title.into(),
            detail: None,
            fix: None,
        }
    }

    fn detail(mut self, detail: impl Into<String>) -> Check {
        self.detail = Some(detail.into());
        self
    }

    fn fix(mut self, fix: impl Into<String>) -> Check {
        self.fix = Some(fix.into());
        self
    }

    pub(crate) fn to_json(&self) -> Value {
        let mut body = json!({"id": self.id, "status": self.status.as_str(), "title": self.title});
        if let Some(detail) = &self.detail {
            body["detail"] = json!(detail);
        }
        if let Some(fix) = &self.fix {
            body["fix"] = json!(fix);
        }
        body
    }
}

/// The origin the report is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OriginFact {
    /// Neither `origin=`, `url=` nor an Origin header named one.
    Unknown,
    /// `scheme://host[:port]`.
    Known(String),
    /// What was sent is not an http(s) origin.
    Malformed(String),
}

/// What the Bearer credential turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyFact {
    Absent,
    Right,
    Wrong,
}

/// The room as the engine answered it: its info and its rules with the dry runs of the named
/// page and of the room's own targetUrl.
pub(crate) struct RoomFacts<'a> {
    pub(crate) info: &'a RoomInfoReply,
    pub(crate) page: Option<&'a TargetingReply>,
    pub(crate) target: &'a TargetingReply,
}

/// Everything the checks judge.
pub(crate) struct Facts<'a> {
    pub(crate) room_id: &'a str,
    /// `None` when the room does not exist.
    pub(crate) room: Option<RoomFacts<'a>>,
    pub(crate) origin: &'a OriginFact,
    pub(crate) key: KeyFact,
    pub(crate) key_in_query: bool,
    pub(crate) connector: Option<&'a str>,
    pub(crate) version: Option<&'a str>,
    /// The connectors this server ships (`qm_registry::all()`; tests pass their own).
    pub(crate) registry: &'a [Connector],
    /// This server's public base URL, when known: fills `{server}` in an upgrade step.
    pub(crate) server: Option<&'a str>,
    /// Now, epoch ms: a scheduled room says how long until its doors open.
    pub(crate) now_ms: i64,
}

/// The checks, in the order a reader fixes them: credentials, the room, the page, the version.
pub(crate) fn checks(facts: &Facts<'_>) -> Vec<Check> {
    let mut checks = vec![key_in_query(facts.key_in_query), api_key(facts.key)];
    checks.push(room_exists(facts.room_id, facts.room.is_some()));
    if let Some(room) = &facts.room {
        checks.push(room_live(room.info, facts.now_ms));
        checks.push(origin_allowed(room.info, facts.origin, facts.key));
        checks.push(match room.page {
            Some(page) => in_scope("url_in_scope", "The page", room.info, page),
            None => Check::new(
                "url_in_scope",
                Status::Info,
                "No url= sent: the page's scope was not checked",
            ),
        });
        checks.push(in_scope(
            "target_in_scope",
            "The room's targetUrl",
            room.info,
            room.target,
        ));
    }
    checks.push(connector_version(facts));
    checks
}

fn key_in_query(present: bool) -> Check {
    if !present {
        return Check::new("key_in_query", Status::Pass, "No key in the URL");
    }
    Check::new("key_in_query", Status::Fail, "A key was sent in the URL (?key=)")
        .detail("a key in a URL lands in access logs and Referer headers; it was not used")
        .fix("remove ?key= and send the key as a header: Authorization: Bearer <PUBLIC_API_KEY>; rotate PUBLIC_API_KEY if a URL with it was ever deployed")
}

fn api_key(key: KeyFact) -> Check {
    match key {
        KeyFact::Absent => Check::new(
            "api_key",
            Status::Info,
            "No Authorization: Bearer key: an anonymous report",
        )
        .detail("a report with the Public API key as a Bearer key is privileged: its fixes quote the room's settings"),
        KeyFact::Right => Check::new(
            "api_key",
            Status::Pass,
            "The Bearer key is accepted: a privileged report",
        ),
        KeyFact::Wrong => Check::new("api_key", Status::Fail, "The Bearer key is not accepted")
            .detail("the Authorization: Bearer key is not this server's PUBLIC_API_KEY (or ADMIN_KEY); a connector vouching with it is refused with 401")
            .fix("set the connector's key to the server's current PUBLIC_API_KEY (the operator has it; after a rotation, the new one)"),
    }
}

fn room_exists(room_id: &str, found: bool) -> Check {
    if found {
        return Check::new(
            "room_exists",
            Status::Pass,
            format!("Room {room_id} exists"),
        );
    }
    Check::new(
        "room_exists",
        Status::Fail,
        format!("There is no room {room_id}"),
    )
    .detail("every door check for an unknown room passes (fail open): the page is not protected")
    .fix(format!(
        "correct roomId in the connector's settings, or create the room: POST /api/admin/rooms {}",
        json!({"id": room_id, "targetUrl": "https://<your site>/", "ratePerMinute": 60})
    ))
}

/// Paused fails: a paused room admits nobody, so deploying onto it holds every visitor of an
/// in-scope page. Bypass only warns: visitors pass unqueued, the install itself is right. A
/// scheduled drop is information: visitors pre-queue until the doors open.
fn room_live(info: &RoomInfoReply, now_ms: i64) -> Check {
    let state_fix = |state: &str| {
        format!(
            "POST /api/admin/rooms/{}/state {}",
            info.room_id,
            json!({"state": state})
        )
    };
    match info.effective_state.as_str() {
        "active" => Check::new("room_live", Status::Pass, "The room is active"),
        "paused" => Check::new("room_live", Status::Fail, "The room is paused")
            .detail("a paused room admits nobody: every visitor of a protected page waits until it is resumed")
            .fix(state_fix("active")),
        "bypass" => Check::new("room_live", Status::Warn, "The room is in bypass")
            .detail("every visitor passes unqueued: the install works but protects nothing until the room is active")
            .fix(state_fix("active")),
        "scheduled" => {
            let opens = info.opens_at_ms.map_or_else(
                || "later".to_owned(),
                |at| {
                    let minutes = ((at - now_ms).max(0) as u64).div_ceil(60_000);
                    format!("in about {minutes} min (opensAt {at}, epoch ms)")
                },
            );
            Check::new("room_live", Status::Info, "The room is scheduled")
                .detail(format!("its doors open {opens}; until then visitors join the pre-queue"))
        }
        other => Check::new("room_live", Status::Warn, format!("The room is {other}")),
    }
}

fn origin_allowed(info: &RoomInfoReply, origin: &OriginFact, key: KeyFact) -> Check {
    let origin = match origin {
        OriginFact::Unknown => {
            return Check::new("origin_allowed", Status::Warn, "No origin to check")
                .detail("neither origin=, url= nor an Origin header named the site the connector runs on")
                .fix("send origin=https://<your site> (or url= of a protected page)");
        }
        OriginFact::Malformed(sent) => {
            return Check::new("origin_allowed", Status::Fail, "The origin is not an http(s) origin")
                .detail(format!("{sent:?} is not an origin like https://shop.example"))
                .fix("send origin= as scheme://host[:port], the address bar of the site without its path");
        }
        OriginFact::Known(origin) => origin,
    };
    if info
        .tag_origins
        .iter()
        .any(|allowed| crate::check::origin_matches(allowed, origin))
    {
        return Check::new(
            "origin_allowed",
            Status::Pass,
            format!("{origin} is one of the room's tag origins"),
        );
    }
    let check = Check::new(
        "origin_allowed",
        Status::Fail,
        format!("{origin} is not one of the room's tag origins"),
    )
    .detail("a browser on that origin cannot read the door check, so the snippet there serves every page unqueued");
    let mut origins = info.tag_origins.clone();
    origins.push(origin.clone());
    let body = json!({"id": info.room_id, "tagOrigins": origins});
    match key {
        KeyFact::Right => check.fix(format!(
            "POST /api/admin/rooms {body} (tagOrigins only: returnOrigins, where a promoted visitor may be sent, need not change)"
        )),
        _ => check.fix(format!(
            "add {origin} to the room's tagOrigins, keeping the ones it has: POST /api/admin/rooms {}; a privileged report (Authorization: Bearer <PUBLIC_API_KEY>) quotes the exact body",
            json!({"id": info.room_id, "tagOrigins": ["<the room's tag origins>", origin]})
        )),
    }
}

fn in_scope(id: &'static str, what: &str, info: &RoomInfoReply, reply: &TargetingReply) -> Check {
    let Some(dry_run) = &reply.dry_run else {
        return Check::new(id, Status::Info, format!("{what} was not judged"));
    };
    if dry_run.scope != "out" {
        let why = match (&dry_run.rule, reply.scoped) {
            (_, false) => "the room has no urlPatterns: every page queues".to_owned(),
            (Some(rule), true) => format!("rule {rule:?} includes it"),
            (None, true) => "no exception excludes it".to_owned(),
        };
        return Check::new(id, Status::Pass, format!("{what} is in the room's scope"))
            .detail(format!("{}: {why}", dry_run.url));
    }
    Check::new(
        id,
        Status::Fail,
        format!("{what} is outside the room's scope"),
    )
    .detail(out_of_scope_detail(dry_run))
    .fix(out_of_scope_fix(info, reply, dry_run))
}

fn out_of_scope_detail(dry_run: &TargetingDryRun) -> String {
    match &dry_run.rule {
        Some(rule) => format!(
            "{}: the exception {rule:?} excludes it, so it is never queued",
            dry_run.url
        ),
        None => format!(
            "{}: no rule of urlPatterns includes it, so it is never queued",
            dry_run.url
        ),
    }
}

/// The urlPatterns body that brings the page in: without the exception that excluded it, or
/// with the page's path added when no rule named it (exceptions always win, so adding a rule
/// past an exception would change nothing).
fn out_of_scope_fix(
    info: &RoomInfoReply,
    reply: &TargetingReply,
    dry_run: &TargetingDryRun,
) -> String {
    let mut patterns: Vec<String> = reply
        .patterns
        .iter()
        .map(|rule| rule.pattern.clone())
        .collect();
    match &dry_run.rule {
        Some(rule) => patterns.retain(|pattern| pattern != rule),
        None => {
            let path = url::Url::parse(&dry_run.url)
                .map_or_else(|_| "/".to_owned(), |url| url.path().to_owned());
            patterns.push(path);
        }
    }
    format!(
        "POST /api/admin/rooms {}, or install the connector on a page the room protects",
        json!({"id": info.room_id, "urlPatterns": patterns})
    )
}

/// The version a connector reported against this server's registry. Only a name the registry
/// does not know fails: it is a typo, or a connector of another product, and either way this
/// report cannot vouch for it (a home-grown integration leaves `connector=` out and gets
/// information). An old version warns with the upgrade step; a version newer than the
/// registry's warns too: the server is older than its connector.
fn connector_version(facts: &Facts<'_>) -> Check {
    const ID: &str = "connector_version";
    let Some(name) = facts.connector else {
        return Check::new(ID, Status::Info, "No connector named: the version was not compared")
            .detail(format!(
                "a shipped connector sends connector=<name>&version=<its version>; this server ships {}",
                shipped(facts.registry)
            ));
    };
    let Some(latest) = facts
        .registry
        .iter()
        .find(|connector| connector.name == name)
    else {
        return Check::new(ID, Status::Fail, format!("Unknown connector {name:?}"))
            .detail(format!(
                "this server ships {}; a name it does not know is a typo or another product's connector, so its protocol cannot be vouched for",
                shipped(facts.registry)
            ))
            .fix("set connector= to the name of the connector installed (see GET /api/connectors); an integration of your own leaves connector= out");
    };
    let upgrade = qm_registry::fill(latest.upgrade, facts.server, Some(facts.room_id));
    let Some(version) = facts.version else {
        return Check::new(ID, Status::Warn, format!("{name}: no version sent"))
            .detail(format!("the latest {name} is {}", latest.version))
            .fix(format!(
                "send version= with connector=; to be sure of the latest: {upgrade}"
            ));
    };
    match latest.compare(version) {
        Some(Ordering::Equal) => Check::new(
            ID,
            Status::Pass,
            format!("{name} {version} is the latest"),
        ),
        Some(Ordering::Less) => Check::new(
            ID,
            Status::Warn,
            format!("{name} {version} is older than the latest {}", latest.version),
        )
        .fix(upgrade),
        Some(Ordering::Greater) => Check::new(
            ID,
            Status::Warn,
            format!("{name} {version} is newer than this server's {}", latest.version),
        )
        .detail("the queue server is older than its connector: a newer connector may ask for what this server does not answer")
        .fix(format!(
            "upgrade the queue server, or install the {name} {} this server ships: {}",
            latest.version,
            qm_registry::fill(latest.install, facts.server, Some(facts.room_id))
        )),
        None => Check::new(
            ID,
            Status::Warn,
            format!("{name}: {version:?} is not a semantic version"),
        )
        .detail(format!("the latest {name} is {}; a version reads like 1.2.3", latest.version))
        .fix(upgrade),
    }
}

/// `gtm, nginx, ...`: the names a report can compare.
fn shipped(registry: &[Connector]) -> String {
    registry
        .iter()
        .map(|connector| connector.name)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
#[path = "verify_checks_tests.rs"]
mod tests;
