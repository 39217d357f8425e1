//! URL targeting on the wire: the verdict a door check carries (`CheckTargeting`) and the
//! `Targeting` RPC's answer (the public rule list, the admin counters, the dry run), built from
//! the domain's [`Targeting`] and the service's counters.

use qm_core::scope::page_url;
use qm_core::{ApiError, ErrorCode};
use qm_proto::{CheckTargeting, RuleCounter, TargetingDryRun, TargetingPattern, TargetingReply};

use crate::domain::{PageVerdict, Targeting, pattern_action};
use crate::targeting_counters::RoomCounts;

fn patterns_to_wire(patterns: &[String]) -> Vec<TargetingPattern> {
    patterns
        .iter()
        .map(|pattern| TargetingPattern {
            pattern: pattern.clone(),
            action: pattern_action(pattern).to_owned(),
        })
        .collect()
}

/// The `targeting` of a door check's answer; the rule list only when asked (`?targeting=1`).
pub(crate) fn check_targeting(verdict: &PageVerdict, want_rules: bool) -> CheckTargeting {
    CheckTargeting {
        rev: verdict.rev,
        rules: verdict.patterns.len() as u64,
        scope: verdict.scope.as_str().to_owned(),
        rule: verdict.rule_text().map(str::to_owned),
        action: verdict.scope.action().to_owned(),
        patterns: match want_rules {
            true => patterns_to_wire(&verdict.patterns),
            false => Vec::new(),
        },
    }
}

/// A dry-run page, checked before anything is read: `invalid_url` unless it is an absolute
/// http(s) URL of bounded length. `None` for no dry run.
pub(crate) fn dry_run_page(url: &str) -> Result<Option<&str>, ApiError> {
    if url.is_empty() {
        return Ok(None);
    }
    match page_url(url) {
        Some(_) => Ok(Some(url)),
        None => Err(ApiError::new(
            ErrorCode::InvalidUrl,
            "url must be an absolute http(s) URL of at most 4096 characters",
        )),
    }
}

/// What a check on `url` would get. An unscoped room queues every page.
fn dry_run(targeting: &Targeting, url: &str) -> TargetingDryRun {
    let (scope, rule, action) = match targeting.judge(Some(url)) {
        Some(verdict) => (
            verdict.scope.as_str(),
            verdict.rule_text().map(str::to_owned),
            verdict.scope.action(),
        ),
        None => ("in", None, "queue"),
    };
    TargetingDryRun {
        url: url.to_owned(),
        scope: scope.to_owned(),
        rule,
        action: action.to_owned(),
    }
}

/// The `Targeting` RPC's answer.
pub(crate) fn targeting_reply(
    room_id: String,
    generation: u64,
    targeting: &Targeting,
    counts: Option<RoomCounts>,
    dry_run_url: Option<&str>,
) -> TargetingReply {
    let mut reply = TargetingReply {
        room_id,
        generation,
        rev: targeting.rev(),
        scoped: targeting.is_scoped(),
        updated_at_ms: targeting.updated_at_ms(),
        patterns: patterns_to_wire(targeting.patterns()),
        dry_run: dry_run_url.map(|url| dry_run(targeting, url)),
        ..TargetingReply::default()
    };
    if let Some(counts) = counts {
        reply.rule_counters = counts
            .rules
            .iter()
            .map(|rule| RuleCounter {
                match_count: rule.matches,
                last_matched_at_ms: rule.last_matched_at_ms,
            })
            .collect();
        reply.unmatched_checks = counts.unmatched;
        reply.no_url_checks = counts.no_url;
    }
    reply
}
