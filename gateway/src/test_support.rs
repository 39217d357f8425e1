//! Builders the gateway's unit tests share: a JSON body as the handlers receive it, and a
//! header map from name-value pairs.

use http::HeaderMap;
use serde_json::{Map, Value};

/// `value`'s members, as [`crate::request::JsonObject`] hands a handler its body (empty when
/// `value` is not an object).
pub(crate) fn object(value: Value) -> Map<String, Value> {
    value.as_object().cloned().unwrap_or_default()
}

/// A header map holding each `(name, value)` pair, the last of a repeated name winning.
pub(crate) fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in pairs {
        let value = value.parse().expect("a test header value is visible ASCII");
        headers.insert(*name, value);
    }
    headers
}

/// Asserts that `parse` refuses each body of `cases` with the code beside it.
pub(crate) fn assert_refused<T: std::fmt::Debug>(
    parse: impl Fn(&Map<String, Value>) -> Result<T, qm_core::ApiError>,
    cases: &[(Value, qm_core::ErrorCode)],
) {
    for (body, code) in cases {
        assert_eq!(
            parse(&object(body.clone())).unwrap_err().code,
            *code,
            "{body}"
        );
    }
}
