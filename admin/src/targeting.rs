//! The admin targeting page, GET /api/admin/rooms/:id/targeting?url=: the room's rules with how
//! often each decided a door check's scope (and when last), the checks whose page matched no
//! rule and those that came with no page; with `url=`, a dry run naming the rule that would win
//! for that page, which counts nothing. The counters are the engine's this process talks to
//! (OPERATIONS.md, URL targeting counters, says how they add up across engines).
//!
//! Grants: any console credential may read it. The monitor token, which the spec refuses
//! targeting, does not exist yet; when it does, it must be turned away here.

use axum::Json;
use axum::extract::Query;
use axum::extract::rejection::QueryRejection;
use qm_core::{ApiError, ErrorCode};
use qm_proto::TargetingRequest;
use serde_json::{Value, json};

use crate::extract::RoomTarget;
use qm_http::AppError;

/// The dry-run page, `url=` at most once; an empty one is no dry run. Its form is checked by
/// the engine (`invalid_url`), the one place that judges pages.
fn dry_run_url(pairs: &[(String, String)]) -> Result<String, AppError> {
    let mut urls = pairs.iter().filter(|(name, _)| name == "url");
    match (urls.next(), urls.next()) {
        (None, _) => Ok(String::new()),
        (Some((_, url)), None) => Ok(url.clone()),
        (Some(_), Some(_)) => Err(ApiError::new(
            ErrorCode::InvalidUrl,
            "give one url to dry-run, not several",
        )
        .into()),
    }
}

/// GET /api/admin/rooms/:id/targeting.
pub(crate) async fn targeting(
    mut room: RoomTarget,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Result<Json<Value>, AppError> {
    let Query(pairs) = query.map_err(|_| {
        AppError::from(ApiError::new(
            ErrorCode::InvalidUrl,
            "the query string cannot be read",
        ))
    })?;
    let request = TargetingRequest {
        room_id: room.id,
        counters: true,
        dry_run_url: dry_run_url(&pairs)?,
    };
    let reply = room.engine.targeting(request).await?.into_inner();
    let rules: Vec<Value> = reply
        .patterns
        .iter()
        .enumerate()
        .map(|(index, rule)| {
            let counter = reply.rule_counters.get(index);
            json!({
                "pattern": rule.pattern,
                "action": rule.action,
                "matchCount": counter.map_or(0, |counter| counter.match_count),
                "lastMatchedAt": counter.and_then(|counter| counter.last_matched_at_ms),
            })
        })
        .collect();
    let mut body = json!({
        "roomId": reply.room_id,
        "rev": reply.rev,
        "scoped": reply.scoped,
        "updatedAt": reply.updated_at_ms,
        "rules": rules,
        "unmatchedChecks": reply.unmatched_checks,
        "noUrlChecks": reply.no_url_checks,
    });
    if let Some(dry_run) = reply.dry_run {
        body["dryRun"] = json!({
            "url": dry_run.url,
            "scope": dry_run.scope,
            "rule": dry_run.rule,
            "action": dry_run.action,
        });
    }
    Ok(Json(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(query: &[(&str, &str)]) -> Vec<(String, String)> {
        query
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect()
    }

    #[test]
    fn one_url_at_most() {
        assert_eq!(dry_run_url(&pairs(&[])).ok(), Some(String::new()));
        assert_eq!(
            dry_run_url(&pairs(&[("url", "https://a.example/")])).ok(),
            Some("https://a.example/".to_owned())
        );
        let twice = dry_run_url(&pairs(&[("url", "https://a.example/"), ("url", "x")]));
        assert_eq!(
            twice.err().map(|AppError(e)| e.code),
            Some(ErrorCode::InvalidUrl)
        );
    }
}
