//! The answer for a content-hashed asset: its name changes whenever its bytes do, so it may be
//! cached forever.

use axum::response::{IntoResponse, Response};
use http::HeaderValue;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS};

/// `200` with the file, `immutable` for a year, and `nosniff`.
pub fn immutable_asset(content_type: &'static str, body: &'static [u8]) -> Response {
    (
        [
            (CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=31536000, immutable"),
            ),
            (X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        ],
        body,
    )
        .into_response()
}
