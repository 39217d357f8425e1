//! URL targeting at the edge: which page a door check is about (`url=`, else the Referer), the
//! `targeting` object its answer carries on a scoped room, and `GET /api/targeting`, the rule
//! list an edge connector polls (strong ETag, 304 on a match). The verdict itself is the
//! engine's: the gateway only refuses a malformed `url=` and passes the page on.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::header::{CACHE_CONTROL, ETAG, REFERER};
use http::{HeaderMap, HeaderValue, StatusCode};
use qm_core::ErrorCode;
use qm_core::scope::page_url;
use qm_proto::{CheckTargeting, TargetingPattern, TargetingReply, TargetingRequest};
use serde_json::{Value, json};

use crate::GatewayState;
use crate::request::{ClientAddress, QueryParams};
use qm_http::AppError;

/// The page a check names: `url=` when sent (refused with `invalid_url` unless it is an
/// absolute http(s) URL of bounded length), else the Referer (passed on as it came: one that is
/// not a web URL is an unknown page, never an error), else none (unknown: queued).
pub(crate) fn page_named(
    query: &QueryParams,
    headers: &HeaderMap,
) -> Result<Option<String>, AppError> {
    if let Some(url) = query.non_empty("url") {
        return match page_url(url) {
            Some(_) => Ok(Some(url.to_owned())),
            None => Err(AppError::new(
                ErrorCode::InvalidUrl,
                "url must be the absolute http(s) URL of the page, at most 4096 characters",
            )),
        };
    }
    Ok(headers
        .get(REFERER)
        .and_then(|value| value.to_str().ok())
        .filter(|referer| !referer.is_empty())
        .map(str::to_owned))
}

/// `?targeting=1`: the answer lists the room's rules.
pub(crate) fn wants_rules(query: &QueryParams) -> bool {
    matches!(query.get("targeting"), Some("1" | "true"))
}

fn patterns_json(patterns: &[TargetingPattern]) -> Value {
    patterns
        .iter()
        .map(|rule| json!({"pattern": rule.pattern, "action": rule.action}))
        .collect()
}

/// The `targeting` object of a door check's answer.
pub(crate) fn check_json(targeting: &CheckTargeting, want_rules: bool) -> Value {
    let mut body = json!({
        "rev": targeting.rev,
        "rules": targeting.rules,
        "scope": targeting.scope,
        "rule": targeting.rule,
        "action": targeting.action,
    });
    if want_rules {
        body["patterns"] = patterns_json(&targeting.patterns);
    }
    body
}

/// The strong validator of a room's targeting: the answer is a function of the room, its
/// generation and its rule revision, so these three name it.
fn etag(reply: &TargetingReply) -> String {
    format!("\"{}.{}.{}\"", reply.room_id, reply.generation, reply.rev)
}

/// GET /api/targeting?roomId=: the room's rules for an edge connector. It spends the caller's
/// CHECK_LIMIT_PER_MIN budget, like every other route a connector calls.
pub(crate) async fn targeting(
    State(state): State<GatewayState>,
    ClientAddress(address): ClientAddress,
    query: QueryParams,
    headers: HeaderMap,
) -> Result<Response, AppError> {
    state.spend_check_budget(address)?;
    let room_id = query.room_id()?;
    let request = TargetingRequest {
        room_id,
        ..TargetingRequest::default()
    };
    let reply = state.engine.clone().targeting(request).await?.into_inner();
    let etag = etag(&reply);
    let mut response = if qm_http::if_none_match(&headers, &etag) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        axum::Json(json!({
            "roomId": reply.room_id,
            "rev": reply.rev,
            "scoped": reply.scoped,
            "updatedAt": reply.updated_at_ms,
            "patterns": patterns_json(&reply.patterns),
        }))
        .into_response()
    };
    let response_headers = response.headers_mut();
    // Cached, but asked about every time: a 304 is the cheap answer, never a stale rule list.
    response_headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(value) = HeaderValue::from_str(&etag) {
        response_headers.insert(ETAG, value);
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::headers;

    #[test]
    fn url_then_referer_then_nothing() {
        let query = |text: &str| QueryParams::parse(Some(text));
        let referer = headers(&[("referer", "https://shop.example/from")]);
        let named = page_named(&query("url=https%3A%2F%2Fshop.example%2Fa"), &referer);
        assert_eq!(
            named.ok().flatten(),
            Some("https://shop.example/a".to_owned())
        );
        assert_eq!(
            page_named(&query("roomId=r"), &referer).ok().flatten(),
            Some("https://shop.example/from".to_owned())
        );
        assert_eq!(
            page_named(&query("url="), &HeaderMap::new()).ok().flatten(),
            None,
            "an empty url= is no url"
        );
        let garbage = headers(&[("referer", "not a url")]);
        assert!(
            page_named(&query("roomId=r"), &garbage).is_ok(),
            "a bad Referer is an unknown page, not an error"
        );
        for bad in ["/relative", "ftp://x.example/", "javascript:alert(1)"] {
            let error = page_named(&query(&format!("url={bad}")), &HeaderMap::new())
                .expect_err("malformed url=");
            assert_eq!(error.0.code, ErrorCode::InvalidUrl, "{bad}");
        }
    }
}
