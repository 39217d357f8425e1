//! The gateway's request parsers as the fuzz targets in `fuzz/` call them. Not an API: the
//! module is hidden and exists only because a fuzz crate sees nothing `pub(crate)`. Each function
//! is a thin call of the parser the routes use, so the fuzzer exercises the real code.

use std::net::IpAddr;

use http::HeaderMap;
use qm_core::config::TrustedProxies;

/// The cookies of a request as [`crate::cookies::RequestCookies::from_headers`] reads them, in
/// order, as owned pairs.
pub fn request_cookies(headers: &HeaderMap) -> Vec<(String, String)> {
    crate::cookies::RequestCookies::from_headers(headers)
        .iter()
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect()
}

/// The value [`crate::cookies::RequestCookies::get`] answers for `name`.
pub fn request_cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    crate::cookies::RequestCookies::from_headers(headers)
        .get(name)
        .map(str::to_owned)
}

/// The client address the per-client limits count, from the socket peer and X-Forwarded-For
/// ([`crate::request::client_address`]).
pub fn client_address(peer: IpAddr, headers: &HeaderMap, trusted: &TrustedProxies) -> IpAddr {
    crate::request::client_address(peer, headers, trusted)
}
