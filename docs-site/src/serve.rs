//! The public documentation pages, served alike by the admin process and the gateway (an
//! integrator often reaches only the public host): `/progress`, `/docs`, `/docs/:name`,
//! `/docs/th` and `/docs/th/:name` (the spec's unversioned surface). They carry no credential and
//! need none: they are the guides that ship with every build, rendered from the markdown
//! embedded at build time, for readers who only ever see the running server.
//!
//! The pages change only with a build, so they are sent with `Cache-Control: no-cache` and a
//! strong ETag: a browser revalidates every time (a deploy is seen at once) and is answered 304
//! without a body while nothing changed.

use axum::Router;
use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG, X_CONTENT_TYPE_OPTIONS,
};
use http::{HeaderMap, HeaderValue, StatusCode};
use qm_core::ErrorCode;
use qm_http::AppError;

use crate::{self as docs, DocPage, Locale};

/// Every documentation route, for either process's router.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/progress", get(progress))
        .route("/docs", get(english_index))
        .route("/docs/", get(english_index))
        .route("/docs/th", get(thai_index))
        .route("/docs/th/", get(thai_index))
        .route("/docs/th/{name}", get(thai_guide))
        .route("/docs/assets/{file}", get(stylesheet))
        .route("/docs/{name}", get(english_guide))
}

/// Why a documentation request has no page.
#[derive(Debug)]
enum DocsError {
    /// No guide answers to the name: a 404 page in the reader's language, listing the guides.
    UnknownGuide { locale: Locale, name: String },
}

impl IntoResponse for DocsError {
    fn into_response(self) -> Response {
        match self {
            DocsError::UnknownGuide { locale, name } => {
                let page = docs::not_found(locale, &name);
                page_response(StatusCode::NOT_FOUND, &page, None)
            }
        }
    }
}

/// GET /progress.
async fn progress(headers: HeaderMap) -> Response {
    page_response(StatusCode::OK, docs::progress(), Some(&headers))
}

/// GET /docs.
async fn english_index(headers: HeaderMap) -> Response {
    page_response(StatusCode::OK, docs::index(Locale::En), Some(&headers))
}

/// GET /docs/th.
async fn thai_index(headers: HeaderMap) -> Response {
    page_response(StatusCode::OK, docs::index(Locale::Th), Some(&headers))
}

/// GET /docs/:name.
async fn english_guide(
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<Response, DocsError> {
    guide(Locale::En, name, &headers)
}

/// GET /docs/th/:name.
async fn thai_guide(Path(name): Path<String>, headers: HeaderMap) -> Result<Response, DocsError> {
    guide(Locale::Th, name, &headers)
}

fn guide(locale: Locale, name: String, headers: &HeaderMap) -> Result<Response, DocsError> {
    match docs::guide(locale, &name) {
        Some(page) => Ok(page_response(StatusCode::OK, page, Some(headers))),
        None => Err(DocsError::UnknownGuide { locale, name }),
    }
}

/// GET /docs/assets/:file: the stylesheet under its content hash, cached forever like the
/// waiting page's assets (a new build links a new name).
async fn stylesheet(Path(file): Path<String>) -> Result<Response, AppError> {
    let css = docs::stylesheet(&file)
        .ok_or_else(|| AppError::new(ErrorCode::NotFound, "no such asset in this build"))?;
    Ok(qm_http::immutable_asset(
        qm_http::CSS_CONTENT_TYPE,
        css.as_bytes(),
    ))
}

/// A page with its headers; `request` (when given) may make it a 304 by its `If-None-Match`.
fn page_response(status: StatusCode, page: &DocPage, request: Option<&HeaderMap>) -> Response {
    let etag = HeaderValue::from_str(&page.etag).ok();
    let unchanged = status == StatusCode::OK
        && request.is_some_and(|headers| qm_http::if_none_match(headers, &page.etag));
    let mut response = if unchanged {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (status, page.html.clone()).into_response()
    };
    let headers = response.headers_mut();
    if !unchanged {
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static(docs::HTML_CONTENT_TYPE),
        );
    }
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(docs::CONTENT_SECURITY_POLICY),
    );
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    if let (StatusCode::OK, Some(etag)) = (status, etag) {
        headers.insert(ETAG, etag);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_if_none_match(value: &str) -> HeaderMap {
        use http::header::IF_NONE_MATCH;
        let mut headers = HeaderMap::new();
        headers.insert(
            IF_NONE_MATCH,
            HeaderValue::from_str(value).expect("header value"),
        );
        headers
    }

    #[test]
    fn a_matching_validator_answers_304_with_the_same_headers_and_no_body() {
        let page = docs::progress();
        let response = page_response(StatusCode::OK, page, Some(&with_if_none_match(&page.etag)));
        assert_eq!(response.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(
            response.headers().get(ETAG).map(|value| value.as_bytes()),
            Some(page.etag.as_bytes())
        );
        assert_eq!(
            response
                .headers()
                .get(CACHE_CONTROL)
                .map(|value| value.as_bytes()),
            Some(&b"no-cache"[..])
        );
        let not_found = page_response(StatusCode::NOT_FOUND, page, Some(&with_if_none_match("*")));
        assert_eq!(
            not_found.status(),
            StatusCode::NOT_FOUND,
            "a 404 is never a 304"
        );
        assert!(not_found.headers().get(ETAG).is_none());
    }
}
