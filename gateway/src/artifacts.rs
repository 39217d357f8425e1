//! The connector artifacts as files: `/connectors/<name>/latest.<js|tgz|zip>` and the browser
//! snippet under `/snippet/latest.js` (a stable name, cached five minutes) and
//! `/snippet/qm.<first 16 hex of its SHA-256>.js` (content-addressed, immutable). The bytes are
//! the registry's, so their SHA-256 is the one `/api/connectors` publishes, and it is also the
//! strong ETag. They are public files: no budget is spent, any origin may read them (a page
//! loading the snippet with `integrity=` needs CORS for the browser to check the hash).

use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use http::header::{
    ACCESS_CONTROL_ALLOW_ORIGIN, CACHE_CONTROL, CONTENT_DISPOSITION, CONTENT_TYPE, ETAG,
    X_CONTENT_TYPE_OPTIONS,
};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use qm_core::ErrorCode;
use qm_http::AppError;
use qm_registry::{ArtifactKind, Connector};

/// `latest` names move with each release: a short cache, then revalidation by ETag.
const LATEST_CACHE: &str = "public, max-age=300";
/// A content-addressed name never changes its bytes.
const PINNED_CACHE: &str = "public, max-age=31536000, immutable";
/// Lets a page that isolates itself (COEP) still load the snippet from this server.
const CROSS_ORIGIN_RESOURCE_POLICY: HeaderName =
    HeaderName::from_static("cross-origin-resource-policy");

/// GET /connectors/{name}/{file}: `file` must be `latest.<the connector's extension>`.
pub(crate) async fn connector_file(
    Path((name, file)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, AppError> {
    let connector = qm_registry::find(&name)
        .filter(|connector| file == format!("latest.{}", connector.artifact.extension()))
        .ok_or_else(|| {
            AppError::new(
                ErrorCode::NotFound,
                format!(
                    "no such connector file; the connectors and their files are listed at /api/connectors ({})",
                    known_files()
                ),
            )
        })?;
    Ok(served(connector, &headers, LATEST_CACHE))
}

/// GET /snippet/{file}: `latest.js`, or `qm.<hash>.js` for the current snippet's hash.
pub(crate) async fn snippet_file(
    Path(file): Path<String>,
    headers: HeaderMap,
) -> Result<Response, AppError> {
    let refusal = || {
        AppError::new(
            ErrorCode::NotFound,
            "no such snippet file: /snippet/latest.js, or the pinned name /api/connectors lists",
        )
    };
    let snippet = qm_registry::find("snippet").ok_or_else(refusal)?;
    let cache = if file == "latest.js" {
        LATEST_CACHE
    } else if file == snippet.pinned_file_name() {
        PINNED_CACHE
    } else {
        return Err(refusal());
    };
    Ok(served(snippet, &headers, cache))
}

/// The artifact, or 304 when `If-None-Match` names its digest.
fn served(connector: &Connector, headers: &HeaderMap, cache: &'static str) -> Response {
    let etag = format!("\"{}\"", connector.sha256_hex);
    let mut response = if qm_http::if_none_match(headers, &etag) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut response = connector.bytes.into_response();
        response.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static(connector.artifact.content_type()),
        );
        if connector.artifact != ArtifactKind::Js {
            let disposition = format!(
                "attachment; filename=\"{}\"",
                connector.download_file_name()
            );
            if let Ok(value) = HeaderValue::from_str(&disposition) {
                response.headers_mut().insert(CONTENT_DISPOSITION, value);
            }
        }
        response
    };
    let response_headers = response.headers_mut();
    response_headers.insert(CACHE_CONTROL, HeaderValue::from_static(cache));
    if let Ok(value) = HeaderValue::from_str(&etag) {
        response_headers.insert(ETAG, value);
    }
    response_headers.insert(ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    response_headers.insert(
        CROSS_ORIGIN_RESOURCE_POLICY,
        HeaderValue::from_static("cross-origin"),
    );
    response_headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

/// `name/latest.ext` of every connector, for the 404's message.
fn known_files() -> String {
    qm_registry::all()
        .iter()
        .map(|connector| {
            format!(
                "{}/latest.{}",
                connector.name,
                connector.artifact.extension()
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_connector_has_one_file_and_the_404_names_them() {
        let listed = known_files();
        for connector in qm_registry::all() {
            assert!(
                listed.contains(&connector.download_path()[12..]),
                "{listed}"
            );
        }
        assert!(listed.contains("snippet/latest.js"), "{listed}");
    }
}
