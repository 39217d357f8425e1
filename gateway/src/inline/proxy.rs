//! Forwarding an admitted request to the room's `proxyOrigin` over the gateway's keep-alive
//! connections to each origin ([`super::origin_pool`], hyper's HTTP/1 client connections). Both
//! bodies stream: nothing is buffered whole, so the visitor routes' 16 KiB JSON limit never
//! applies here, and a slow answer reaches the browser chunk by chunk. Hop-by-hop headers (and any a `Connection` header names)
//! are dropped both ways; `X-Forwarded-For` is appended to, `-Proto` and `-Host` set; the
//! queue's own cookies never reach the origin. The origin must answer within
//! INLINE_ORIGIN_TIMEOUT_SEC (connect and response head); a body already streaming is never cut.

use std::net::IpAddr;
use std::time::Duration;

use axum::extract::Request;
use axum::response::Response;
use http::header::{CONNECTION, COOKIE, HOST};
use http::{HeaderMap, HeaderName, HeaderValue, Uri};
use qm_core::{ApiError, ErrorCode};

use super::origin_pool::OriginPool;

/// Headers that describe one connection, never the message: not forwarded either way.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// The one origin client of a gateway.
pub(super) struct OriginClient {
    pool: OriginPool,
    timeout: Duration,
}

/// Where a room's requests are forwarded: its proxyOrigin, read once when the room's settings
/// are, so a request pays for none of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct OriginTarget {
    /// `host:port` (or `host`), what the connection is opened to.
    authority: Box<str>,
    /// The same, as the Host header the origin gets.
    host: HeaderValue,
}

impl OriginTarget {
    /// The target of a proxyOrigin `http://host[:port]`; `None` for anything else (the gate
    /// speaks plain http to the site's internal address).
    pub(super) fn parse(proxy_origin: &str) -> Option<OriginTarget> {
        let authority = proxy_origin.strip_prefix("http://")?.trim_end_matches('/');
        if authority.is_empty() || authority.contains('/') {
            return None;
        }
        Some(OriginTarget {
            authority: authority.into(),
            host: HeaderValue::from_str(authority).ok()?,
        })
    }
}

/// What the gate tells the origin about the visitor's request.
pub(super) struct Forwarding<'a> {
    /// The room's proxyOrigin as written, for the log.
    pub(super) origin: &'a str,
    /// Where it points; `None` when it is not an `http://` origin.
    pub(super) target: Option<&'a OriginTarget>,
    /// The socket peer, appended to X-Forwarded-For.
    pub(super) peer: IpAddr,
    /// The scheme the browser used (a trusted proxy's X-Forwarded-Proto, else http).
    pub(super) scheme: &'static str,
    /// The Host the browser asked for.
    pub(super) host: &'a str,
}

impl OriginClient {
    pub(super) fn new(timeout: Duration) -> OriginClient {
        OriginClient {
            pool: OriginPool::default(),
            timeout,
        }
    }

    /// Sends `request` on to the origin and answers what it answers, streaming.
    pub(super) async fn forward(
        &self,
        request: Request,
        to: &Forwarding<'_>,
    ) -> Result<Response, ApiError> {
        let Some(target) = to.target else {
            return Err(ApiError::new(
                ErrorCode::OriginUnavailable,
                "the gate forwards over plain http only: set the room's proxyOrigin to the site's internal http:// address",
            ));
        };
        let (mut parts, body) = request.into_parts();
        // Origin-form, as a client sends it to the server it is connected to.
        if parts.uri.scheme().is_some() || parts.uri.path_and_query().is_none() {
            let path = parts
                .uri
                .path_and_query()
                .map_or("/", |path_and_query| path_and_query.as_str());
            parts.uri = path
                .parse::<Uri>()
                .map_err(|_| unavailable("the request's path cannot be sent to the origin"))?;
        }
        parts.version = http::Version::HTTP_11;
        prepare_request_headers(&mut parts.headers, to);
        parts.headers.insert(HOST, target.host.clone());
        let outgoing = http::Request::from_parts(parts, body);
        let answer =
            tokio::time::timeout(self.timeout, self.pool.send(&target.authority, outgoing)).await;
        let response = match answer {
            Ok(Ok(response)) => response,
            Ok(Err(error)) => {
                tracing::warn!(origin = to.origin, %error, "origin unreachable");
                return Err(unavailable(
                    "the site's origin could not be reached or refused the request",
                ));
            }
            Err(_) => {
                tracing::warn!(origin = to.origin, "origin did not answer in time");
                return Err(unavailable(
                    "the site's origin did not answer in time (INLINE_ORIGIN_TIMEOUT_SEC)",
                ));
            }
        };
        let (mut parts, body) = response.into_parts();
        drop_hop_by_hop(&mut parts.headers);
        Ok(Response::from_parts(parts, body))
    }
}

fn unavailable(message: &str) -> ApiError {
    ApiError::new(ErrorCode::OriginUnavailable, message)
}

/// The visitor's headers as the origin gets them.
fn prepare_request_headers(headers: &mut HeaderMap, to: &Forwarding<'_>) {
    drop_hop_by_hop(headers);
    // The origin's own host is named by the caller; the browser's Host travels as
    // X-Forwarded-Host.
    headers.remove(HOST);
    strip_queue_cookies(headers);
    let peer = to.peer.to_string();
    let forwarded_for = match headers.get_all(X_FORWARDED_FOR).iter().next() {
        None => peer,
        Some(_) => {
            let mut chain = String::new();
            for value in headers
                .get_all(X_FORWARDED_FOR)
                .iter()
                .filter_map(|value| value.to_str().ok())
                .map(str::trim)
                .filter(|value| !value.is_empty())
            {
                chain.push_str(value);
                chain.push_str(", ");
            }
            chain.push_str(&peer);
            chain
        }
    };
    set(headers, X_FORWARDED_FOR, &forwarded_for);
    headers.insert(
        HeaderName::from_static("x-forwarded-proto"),
        HeaderValue::from_static(to.scheme),
    );
    set(headers, "x-forwarded-host", to.host);
}

const X_FORWARDED_FOR: &str = "x-forwarded-for";

fn set(headers: &mut HeaderMap, name: &'static str, value: &str) {
    if let Ok(value) = HeaderValue::from_str(value) {
        headers.insert(HeaderName::from_static(name), value);
    } else {
        headers.remove(name);
    }
}

/// Removes the hop-by-hop headers and every header a `Connection` header names. Most messages
/// carry none of them, so one look over the names comes first.
fn drop_hop_by_hop(headers: &mut HeaderMap) {
    if !headers
        .keys()
        .any(|name| HOP_BY_HOP.contains(&name.as_str()))
    {
        return;
    }
    let named: Vec<HeaderName> = headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|list| list.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(*name);
    }
}

/// Whether a cookie is the queue's own: `qm_<room>`, `qms_<room>`, `qm_dk_<room>`, `qm_lang`.
fn is_queue_cookie(name: &str) -> bool {
    name.starts_with("qm_") || name.starts_with("qms_")
}

/// The cookie pairs of a Cookie header value.
fn cookie_items(text: &str) -> impl Iterator<Item = &str> {
    text.split(';')
        .map(str::trim)
        .filter(|item| !item.is_empty())
}

fn cookie_name(item: &str) -> &str {
    item.split_once('=').map_or(item, |(name, _)| name).trim()
}

/// The Cookie headers without the queue's own cookies, folded into one (as HTTP/1.1 sends it).
/// Left as they are when they hold none of the queue's cookies.
fn strip_queue_cookies(headers: &mut HeaderMap) {
    let mut values = headers.get_all(COOKIE).iter();
    let Some(first) = values.next() else {
        return;
    };
    if values.next().is_none()
        && first
            .to_str()
            .is_ok_and(|text| !cookie_items(text).any(|item| is_queue_cookie(cookie_name(item))))
    {
        return;
    }
    let mut kept = String::new();
    for item in headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(cookie_items)
        .filter(|item| !is_queue_cookie(cookie_name(item)))
    {
        if !kept.is_empty() {
            kept.push_str("; ");
        }
        kept.push_str(item);
    }
    headers.remove(COOKIE);
    if !kept.is_empty()
        && let Ok(value) = HeaderValue::from_str(&kept)
    {
        headers.insert(COOKIE, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::headers;

    fn forwarding() -> Forwarding<'static> {
        Forwarding {
            origin: "http://10.0.0.5:8080",
            target: None,
            peer: "203.0.113.9".parse().unwrap(),
            scheme: "https",
            host: "shop.example",
        }
    }

    #[test]
    fn hop_by_hop_and_connection_named_headers_are_dropped() {
        let mut sent = headers(&[
            ("connection", "keep-alive, X-Secret-Hop"),
            ("x-secret-hop", "1"),
            ("keep-alive", "timeout=5"),
            ("te", "trailers"),
            ("upgrade", "websocket"),
            ("accept", "text/html"),
        ]);
        drop_hop_by_hop(&mut sent);
        let names: Vec<&str> = sent.keys().map(HeaderName::as_str).collect();
        assert_eq!(names, ["accept"]);
    }

    #[test]
    fn the_origin_gets_the_forwarded_headers_and_none_of_the_queue_cookies() {
        let mut sent = headers(&[
            ("host", "shop.example"),
            ("x-forwarded-for", "198.51.100.1"),
            ("x-forwarded-proto", "ftp"),
            ("cookie", "qm_drop=tok; cart=3; qms_drop=s"),
        ]);
        sent.append(
            COOKIE,
            HeaderValue::from_static("qm_dk_drop=k; theme=dark; qm_lang=th"),
        );
        prepare_request_headers(&mut sent, &forwarding());
        assert!(sent.get(HOST).is_none(), "the client names the origin");
        assert_eq!(sent["x-forwarded-for"], "198.51.100.1, 203.0.113.9");
        assert_eq!(sent["x-forwarded-proto"], "https");
        assert_eq!(sent["x-forwarded-host"], "shop.example");
        assert_eq!(sent.get_all(COOKIE).iter().count(), 1);
        assert_eq!(sent[COOKIE], "cart=3; theme=dark");

        let mut only_queue = headers(&[("cookie", "qm_drop=tok; qms_drop=s")]);
        prepare_request_headers(&mut only_queue, &forwarding());
        assert!(only_queue.get(COOKIE).is_none());
        assert_eq!(only_queue["x-forwarded-for"], "203.0.113.9");
    }
}
