//! Conditional requests: whether a client's `If-None-Match` already names the answer's ETag, so
//! a route with a stable validator (the guides, a room's URL targeting) answers 304 without a
//! body.

use http::HeaderMap;
use http::header::IF_NONE_MATCH;

/// Whether `If-None-Match` names `etag` (or is `*`). Every listed tag is compared weakly, as RFC
/// 9110 asks of If-None-Match on a GET: a `W/` prefix does not prevent a match.
pub fn if_none_match(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .any(|tag| tag == "*" || tag.trim_start_matches("W/") == etag)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn with_if_none_match(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            IF_NONE_MATCH,
            HeaderValue::from_str(value).expect("header value"),
        );
        headers
    }

    #[test]
    fn every_listed_tag_is_compared_weakly_and_star_matches() {
        let etag = "\"abc\"";
        assert!(if_none_match(&with_if_none_match("\"abc\""), etag));
        assert!(if_none_match(&with_if_none_match("\"x\", W/\"abc\""), etag));
        assert!(if_none_match(&with_if_none_match("*"), etag));
        assert!(!if_none_match(&with_if_none_match("\"abcd\""), etag));
        assert!(!if_none_match(&HeaderMap::new(), etag));
    }
}
