//! What the gateway reads from a request besides its route: the client address, the query string
//! (parsed leniently: a visitor route never fails on a stray parameter), the JSON body under the
//! spec's limits, and the scheme and host the browser used.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequest, FromRequestParts, Request};
use http::header::{CONTENT_LENGTH, CONTENT_TYPE, HOST};
use http::request::Parts;
use http::{HeaderMap, Uri};
use qm_core::ErrorCode;
use qm_core::config::Config;
use serde_json::{Map, Value};

use qm_http::AppError;

use crate::GatewayState;

/// Largest request body a visitor route reads (QM: bodies are small JSON objects).
pub(crate) const MAX_BODY_BYTES: usize = 16 * 1024;

/// The address this request counts against for per-client limits (JOIN_LIMIT_PER_MIN,
/// SSE_PER_IP, queueMaxPerIp) and the identity `/api/check` vouches for by default: the socket
/// peer, or, when the peer is one of TRUSTED_PROXIES, the client it forwarded for (see
/// [`client_address`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClientAddress(pub(crate) IpAddr);

impl FromRequestParts<GatewayState> for ClientAddress {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &GatewayState,
    ) -> Result<Self, Self::Rejection> {
        // A router driven without connect info (in-process tests) counts as one unknown client.
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(peer)| peer.ip())
            .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        Ok(ClientAddress(client_address(
            peer,
            &parts.headers,
            &state.config.trusted_proxies,
        )))
    }
}

pub(crate) use qm_http::client_address;

/// The query string as ordered pairs. Never rejects.
#[derive(Debug, Clone, Default)]
pub(crate) struct QueryParams(pub(crate) Vec<(String, String)>);

impl QueryParams {
    /// `roomId`, which the route requires: missing or malformed is 400 `invalid_room_id`.
    pub(crate) fn room_id(&self) -> Result<String, AppError> {
        match self.get("roomId") {
            Some(room_id) if qm_core::ids::is_valid_room_id(room_id) => Ok(room_id.to_owned()),
            _ => Err(AppError::new(
                qm_core::ErrorCode::InvalidRoomId,
                "roomId must name a room",
            )),
        }
    }

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

/// The base every absolute URL the gateway builds starts with (no trailing slash): PUBLIC_URL
/// when set. Otherwise the scheme and Host the browser used, but only when that Host names this
/// server itself ([`is_own_host`]): a Host a client wrote (`evil.example`) never reaches an
/// answer. Anything else gives the empty base, so the URL is relative to wherever the browser
/// is (the waiting page's own origin).
pub(crate) fn public_base(config: &Config, headers: &HeaderMap, uri: &Uri) -> String {
    if let Some(base) = &config.public_url {
        return base.clone();
    }
    match request_host(headers, uri) {
        Some(host) if is_own_host(&host, config.gateway_addr) => {
            format!("{}://{host}", forwarded_scheme(headers))
        }
        _ => String::new(),
    }
}

/// Whether a Host value (`name[:port]`) names this server: `localhost`, a loopback address, or
/// the specific address HOST binds, on any port. A name is never trusted without PUBLIC_URL.
pub(crate) fn is_own_host(host: &str, listener: SocketAddr) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split_once(']').map_or(rest, |(inner, _)| inner)
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if port.bytes().all(|byte| byte.is_ascii_digit()) => name,
            _ => host,
        }
    };
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    let Ok(ip) = name.parse::<IpAddr>() else {
        return false;
    };
    let ip = ip.to_canonical();
    ip.is_loopback() || (!listener.ip().is_unspecified() && ip == listener.ip().to_canonical())
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
    use qm_core::config::TrustedProxies;

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

    fn base(overrides: &[(&str, &str)], host: &str) -> String {
        let source: std::collections::HashMap<&str, &str> = overrides.iter().copied().collect();
        let config = Config::from_source(&source).unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(HOST, host.parse().unwrap());
        public_base(&config, &headers, &"/api/check".parse().unwrap())
    }

    #[test]
    fn absolute_urls_come_from_public_url_or_the_servers_own_host() {
        // PUBLIC_URL wins over any Host.
        let public = [("PUBLIC_URL", "https://queue.example/")];
        assert_eq!(base(&public, "evil.example"), "https://queue.example");
        // Without it: loopback, localhost and HOST's own address are kept, with their port.
        assert_eq!(base(&[], "127.0.0.1:8080"), "http://127.0.0.1:8080");
        assert_eq!(base(&[], "localhost:8080"), "http://localhost:8080");
        assert_eq!(base(&[], "[::1]:8080"), "http://[::1]:8080");
        let bound = [("HOST", "192.0.2.10"), ("ADMIN_KEY", "a-long-random-key")];
        assert_eq!(base(&bound, "192.0.2.10"), "http://192.0.2.10");
        // Any other Host gives relative URLs: the attacker's name never reaches an answer.
        for foreign in [
            "evil.example",
            "evil.example:8080",
            "198.51.100.1",
            "localhost.evil",
        ] {
            assert_eq!(base(&[], foreign), "", "{foreign}");
            assert_eq!(base(&bound, foreign), "", "{foreign}");
        }
        // A wildcard listener trusts no address but loopback.
        let wildcard = [("HOST", "0.0.0.0"), ("ADMIN_KEY", "a-long-random-key")];
        assert_eq!(base(&wildcard, "0.0.0.0"), "");
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    /// The address that counts for `peer` with these X-Forwarded-For header instances.
    fn client(trusted: &str, peer: &str, forwarded_for: &[&str]) -> IpAddr {
        let trusted = TrustedProxies::parse(trusted).unwrap();
        let mut headers = HeaderMap::new();
        for value in forwarded_for {
            headers.append("x-forwarded-for", value.parse().unwrap());
        }
        client_address(ip(peer), &headers, &trusted)
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_forwards() {
        assert_eq!(
            client("", "198.51.100.7", &["203.0.113.9"]),
            ip("198.51.100.7")
        );
        assert_eq!(
            client("10.0.0.0/8", "198.51.100.7", &["203.0.113.9"]),
            ip("198.51.100.7")
        );
        assert_eq!(
            client("127.0.0.1", "127.0.0.2", &["203.0.113.9"]),
            ip("127.0.0.2")
        );
        // A trusted peer that forwards nothing is itself the client.
        assert_eq!(client("127.0.0.1", "127.0.0.1", &[]), ip("127.0.0.1"));
    }

    #[test]
    fn the_walk_goes_from_the_right_past_trusted_hops() {
        let trusted = "127.0.0.1, 10.0.0.0/8";
        assert_eq!(
            client(trusted, "127.0.0.1", &["203.0.113.9"]),
            ip("203.0.113.9")
        );
        assert_eq!(
            client(trusted, "127.0.0.1", &["203.0.113.9, 10.1.2.3"]),
            ip("203.0.113.9")
        );
        // A client-written entry to the left of the first untrusted hop changes nothing.
        assert_eq!(
            client(trusted, "127.0.0.1", &["6.6.6.6, 203.0.113.9, 10.1.2.3"]),
            ip("203.0.113.9")
        );
        // Every instance of the header counts, in order, as one list.
        assert_eq!(
            client(
                trusted,
                "127.0.0.1",
                &["6.6.6.6, 203.0.113.9", "10.1.2.3", " 10.4.5.6 "]
            ),
            ip("203.0.113.9")
        );
        // Every hop trusted: the leftmost counts.
        assert_eq!(
            client(trusted, "127.0.0.1", &["10.9.9.9, 10.1.2.3"]),
            ip("10.9.9.9")
        );
        // Empty elements carry nothing and are skipped.
        assert_eq!(
            client(trusted, "127.0.0.1", &["203.0.113.9,, 10.1.2.3,", ""]),
            ip("203.0.113.9")
        );
    }

    #[test]
    fn a_malformed_entry_stops_the_walk_at_the_last_good_address() {
        let trusted = "127.0.0.1, 10.0.0.0/8";
        for bad in [
            "unknown",
            "evil.example",
            "_hidden",
            "203.0.113.999",
            "1.2.3.4 5.6.7.8",
        ] {
            // Right after the peer: the peer counts.
            assert_eq!(
                client(trusted, "127.0.0.1", &[bad]),
                ip("127.0.0.1"),
                "{bad}"
            );
            // Behind a trusted hop: that hop counts, never the text nor what lies beyond it.
            assert_eq!(
                client(
                    trusted,
                    "127.0.0.1",
                    &[&format!("203.0.113.9, {bad}, 10.1.2.3")]
                ),
                ip("10.1.2.3"),
                "{bad}"
            );
        }
        // A header value that is not visible ASCII is malformed as a whole.
        let trusted_list = TrustedProxies::parse(trusted).unwrap();
        let mut headers = HeaderMap::new();
        headers.append("x-forwarded-for", "203.0.113.9".parse().unwrap());
        headers.append(
            "x-forwarded-for",
            http::HeaderValue::from_bytes(b"10.1.2.3\xff").unwrap(),
        );
        assert_eq!(
            client_address(ip("127.0.0.1"), &headers, &trusted_list),
            ip("127.0.0.1")
        );
    }

    #[test]
    fn ports_and_mapped_addresses_are_read_as_their_ip() {
        let trusted = "127.0.0.1, 10.0.0.0/8, fd00::/8";
        assert_eq!(
            client(trusted, "127.0.0.1", &["203.0.113.9:4711, 10.1.2.3:80"]),
            ip("203.0.113.9")
        );
        assert_eq!(
            client(trusted, "127.0.0.1", &["[2001:db8::1]:443"]),
            ip("2001:db8::1")
        );
        assert_eq!(
            client(trusted, "fd00::2", &["[2001:db8::1]"]),
            ip("2001:db8::1")
        );
        // An IPv4-mapped peer is trusted as its IPv4 address, and a mapped hop counts as IPv4.
        assert_eq!(
            client(
                trusted,
                "::ffff:127.0.0.1",
                &["::ffff:203.0.113.9, ::ffff:10.1.2.3"]
            ),
            ip("203.0.113.9")
        );
        assert_eq!(client("", "::ffff:198.51.100.7", &[]), ip("198.51.100.7"));
    }
}
