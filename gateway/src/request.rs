//! What the gateway reads from a request besides its route: the client address, the query string
//! (parsed leniently: a visitor route never fails on a stray parameter), the JSON body under the
//! spec's limits, and the scheme and host the browser used.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequest, FromRequestParts, Request};
use http::header::{CONTENT_LENGTH, CONTENT_TYPE, HOST};
use http::request::Parts;
use http::{HeaderMap, Uri};
use qm_core::ErrorCode;
use serde_json::{Map, Value};

use qm_edge::AppError;

/// Largest request body a visitor route reads (QM: bodies are small JSON objects).
pub(crate) const MAX_BODY_BYTES: usize = 16 * 1024;

/// The address this request counts against for per-client limits: the socket peer for now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClientAddress(pub(crate) IpAddr);

impl<S: Send + Sync> FromRequestParts<S> for ClientAddress {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        // A router driven without connect info (in-process tests) counts as one unknown client.
        let address = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(peer)| peer.ip())
            .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        Ok(ClientAddress(address))
    }
}

/// The query string as ordered pairs. Never rejects.
#[derive(Debug, Clone, Default)]
pub(crate) struct QueryParams(pub(crate) Vec<(String, String)>);

impl QueryParams {
    pub(crate) fn parse(query: Option<&str>) -> QueryParams {
        let pairs = query
            .map(|query| {
                url::form_urlencoded::parse(query.as_bytes())
                    .into_owned()
                    .collect()
            })
            .unwrap_or_default();
        QueryParams(pairs)
    }

    /// The first value of `name`, if present.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// The first non-empty value of `name`.
    pub(crate) fn non_empty(&self, name: &str) -> Option<&str> {
        self.get(name).filter(|value| !value.is_empty())
    }

    pub(crate) fn contains(&self, name: &str) -> bool {
        self.0.iter().any(|(key, _)| key == name)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for QueryParams {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(QueryParams::parse(parts.uri.query()))
    }
}

/// A JSON object body of at most [`MAX_BODY_BYTES`]: 413 payload_too_large beyond it, 415 for a
/// declared non-JSON type, 400 invalid_json for anything that is not one JSON object.
#[derive(Debug, Clone)]
pub(crate) struct JsonObject(pub(crate) Map<String, Value>);

impl<S: Send + Sync> FromRequest<S> for JsonObject {
    type Rejection = AppError;

    async fn from_request(request: Request, _state: &S) -> Result<Self, Self::Rejection> {
        check_content_type(request.headers())?;
        let declared_length = request
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse::<u64>().ok());
        if declared_length.is_some_and(|length| length > MAX_BODY_BYTES as u64) {
            return Err(too_large());
        }
        let bytes = axum::body::to_bytes(request.into_body(), MAX_BODY_BYTES)
            .await
            .map_err(|error| {
                if is_length_limit(&error) {
                    too_large()
                } else {
                    AppError::new(ErrorCode::InvalidJson, "the request body could not be read")
                }
            })?;
        parse_object(&bytes).map(JsonObject)
    }
}

fn check_content_type(headers: &HeaderMap) -> Result<(), AppError> {
    // A body without a declared type is read as JSON; a declared other type is refused.
    let Some(value) = headers.get(CONTENT_TYPE) else {
        return Ok(());
    };
    let media_type = value
        .to_str()
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if media_type == "application/json" || media_type.ends_with("+json") {
        Ok(())
    } else {
        Err(AppError::new(
            ErrorCode::UnsupportedMediaType,
            "send the body as application/json",
        ))
    }
}

fn too_large() -> AppError {
    AppError::new(
        ErrorCode::PayloadTooLarge,
        format!("the request body is larger than {MAX_BODY_BYTES} bytes"),
    )
}

fn is_length_limit(error: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if current.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = current.source();
    }
    false
}

/// One JSON object, or 400 invalid_json.
pub(crate) fn parse_object(bytes: &[u8]) -> Result<Map<String, Value>, AppError> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(_) => Err(AppError::new(
            ErrorCode::InvalidJson,
            "the request body must be a JSON object",
        )),
        Err(_) => Err(AppError::new(
            ErrorCode::InvalidJson,
            "the request body is not valid JSON",
        )),
    }
}

/// Whether the browser reached us over https, as the proxy in front of us reports it.
pub(crate) fn is_https(headers: &HeaderMap) -> bool {
    forwarded_scheme(headers) == "https"
}

/// `http` or `https`: the first X-Forwarded-Proto value, default http.
pub(crate) fn forwarded_scheme(headers: &HeaderMap) -> &'static str {
    let first = headers
        .get("x-forwarded-proto")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(',').next())
        .map(str::trim);
    match first {
        Some(scheme) if scheme.eq_ignore_ascii_case("https") => "https",
        _ => "http",
    }
}

/// The host the browser asked for: the Host header, else the URI authority (HTTP/2).
pub(crate) fn request_host(headers: &HeaderMap, uri: &Uri) -> Option<String> {
    let host = headers
        .get(HOST)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
        .or_else(|| {
            uri.authority()
                .map(|authority| authority.as_str().to_owned())
        })?;
    // A host is a name or address with an optional port: nothing that could break out of a URL.
    let acceptable = !host.is_empty()
        && host
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b".-:[]_".contains(&byte));
    acceptable.then_some(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_params_are_lenient_and_ordered() {
        let query = QueryParams::parse(Some("token=a%2Eb&roomId=r&token=second&empty="));
        assert_eq!(query.get("token"), Some("a.b"));
        assert_eq!(query.get("roomId"), Some("r"));
        assert_eq!(query.non_empty("empty"), None);
        assert!(query.contains("empty"));
        assert_eq!(QueryParams::parse(None).get("x"), None);
    }

    #[test]
    fn only_objects_are_bodies() {
        assert!(parse_object(br#"{"roomId":"r"}"#).is_ok());
        for body in [&b"[1]"[..], b"\"text\"", b"{nope", b""] {
            assert_eq!(
                parse_object(body).unwrap_err().0.code,
                ErrorCode::InvalidJson
            );
        }
    }

    async fn extract(
        body: axum::body::Body,
        content_type: Option<&str>,
    ) -> Result<JsonObject, ErrorCode> {
        let mut request = Request::new(body);
        if let Some(content_type) = content_type {
            request
                .headers_mut()
                .insert(CONTENT_TYPE, content_type.parse().unwrap());
        }
        JsonObject::from_request(request, &())
            .await
            .map_err(|error| error.0.code)
    }

    #[tokio::test]
    async fn bodies_over_the_limit_are_refused_even_without_a_length() {
        // Streamed (no Content-Length): the limit is found while reading.
        let chunks = vec![
            Ok::<_, std::io::Error>(vec![b' '; MAX_BODY_BYTES]),
            Ok(b"{}".to_vec()),
        ];
        let streamed = axum::body::Body::from_stream(futures::stream::iter(chunks));
        assert_eq!(
            extract(streamed, Some("application/json"))
                .await
                .unwrap_err(),
            ErrorCode::PayloadTooLarge
        );
        let small = axum::body::Body::from(r#"{"roomId":"r"}"#);
        assert!(
            extract(small, None).await.is_ok(),
            "an undeclared type is read as JSON"
        );
        let typed = axum::body::Body::from(r#"{"roomId":"r"}"#);
        assert!(
            extract(typed, Some("application/json; charset=utf-8"))
                .await
                .is_ok()
        );
        let form = axum::body::Body::from("roomId=r");
        assert_eq!(
            extract(form, Some("application/x-www-form-urlencoded"))
                .await
                .unwrap_err(),
            ErrorCode::UnsupportedMediaType
        );
    }

    #[test]
    fn scheme_and_host() {
        let mut headers = HeaderMap::new();
        assert_eq!(forwarded_scheme(&headers), "http");
        headers.insert("x-forwarded-proto", "HTTPS, http".parse().unwrap());
        assert!(is_https(&headers));
        headers.insert(HOST, "queue.example:8443".parse().unwrap());
        let uri: Uri = "/api/check".parse().unwrap();
        assert_eq!(
            request_host(&headers, &uri).as_deref(),
            Some("queue.example:8443")
        );
        headers.insert(HOST, "evil.example/path?".parse().unwrap());
        assert_eq!(request_host(&headers, &uri), None);
    }
}
