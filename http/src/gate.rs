//! What every request passes before its route, on both edges: exactly one Host header, no more
//! cookies than MAX_COOKIES (counted in one pass, before anything parses them), and on a
//! connection shed past the ceiling, nothing but the readiness and version routes. Also the
//! response body that tells the connection's guard when an answer is done.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::header::{CONNECTION, COOKIE, HOST};
use http::{HeaderMap, HeaderValue, Request};
use http_body::{Frame, SizeHint};
use qm_core::{ApiError, ErrorCode};

use crate::AppError;
use crate::guard::{InFlight, refusal_message};

/// What the gate checks a request against.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GateRules {
    pub(crate) max_cookies: usize,
    /// The connection was accepted past the ceiling: only `exempt_paths` are served.
    pub(crate) shed: bool,
    pub(crate) exempt_paths: &'static [&'static str],
}

/// The refusal `request` meets at the gate, if any.
pub(crate) fn refusal<B>(request: &Request<B>, rules: &GateRules) -> Option<ApiError> {
    let headers = request.headers();
    if headers.get_all(HOST).iter().nth(1).is_some() {
        return Some(refused(ErrorCode::InvalidHost));
    }
    if cookie_count(headers) > rules.max_cookies {
        return Some(refused(ErrorCode::TooManyCookies));
    }
    if rules.shed && !rules.exempt_paths.contains(&request.uri().path()) {
        return Some(refused(ErrorCode::ServerBusy));
    }
    None
}

fn refused(code: ErrorCode) -> ApiError {
    ApiError::new(code, refusal_message(code))
}

/// The answer to a refusal at the gate; the connection closes after it.
pub(crate) fn refusal_response(error: ApiError) -> Response {
    let mut response = AppError(error).into_response();
    response
        .headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

/// Cookies the request carries, counted as `;`-separated items of every Cookie header without
/// reading them (an empty item counts too: the cap is on what a client may send).
fn cookie_count(headers: &HeaderMap) -> usize {
    headers
        .get_all(COOKIE)
        .iter()
        .map(|value| {
            let bytes = value.as_bytes();
            bytes.iter().filter(|&&byte| byte == b';').count() + usize::from(!bytes.is_empty())
        })
        .sum()
}

/// A response body that counts its request done on the connection when it ends or is dropped.
pub(crate) struct TrackedBody {
    inner: axum::body::Body,
    _in_flight: InFlight,
}

impl TrackedBody {
    pub(crate) fn new(inner: axum::body::Body, in_flight: InFlight) -> TrackedBody {
        TrackedBody {
            inner,
            _in_flight: in_flight,
        }
    }
}

impl http_body::Body for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(shed: bool) -> GateRules {
        GateRules {
            max_cookies: 3,
            shed,
            exempt_paths: &["/healthz"],
        }
    }

    fn request(path: &str, headers: &[(&str, &str)]) -> Request<()> {
        let mut builder = Request::builder().uri(path);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(()).unwrap()
    }

    fn code(request: &Request<()>, rules: &GateRules) -> Option<ErrorCode> {
        refusal(request, rules).map(|error| error.code)
    }

    #[test]
    fn two_host_headers_are_refused() {
        let one = request("/", &[("host", "a")]);
        assert_eq!(code(&one, &rules(false)), None);
        let two = request("/", &[("host", "a"), ("host", "b")]);
        assert_eq!(code(&two, &rules(false)), Some(ErrorCode::InvalidHost));
    }

    #[test]
    fn cookies_are_counted_across_headers() {
        let three = request("/", &[("cookie", "a=1; b=2"), ("cookie", "c=3")]);
        assert_eq!(code(&three, &rules(false)), None);
        let four = request("/", &[("cookie", "a=1; b=2"), ("cookie", "c=3; d=4")]);
        assert_eq!(code(&four, &rules(false)), Some(ErrorCode::TooManyCookies));
        assert_eq!(
            ErrorCode::TooManyCookies.http_status(),
            http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
        );
    }

    #[test]
    fn a_shed_connection_is_served_only_its_exempt_paths() {
        assert_eq!(code(&request("/healthz", &[]), &rules(true)), None);
        assert_eq!(
            code(&request("/api/join", &[]), &rules(true)),
            Some(ErrorCode::ServerBusy)
        );
        let response = refusal_response(refused(ErrorCode::ServerBusy));
        assert_eq!(response.status(), http::StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()["retry-after"], "5");
        assert_eq!(response.headers()["connection"], "close");
    }
}
