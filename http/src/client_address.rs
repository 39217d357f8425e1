//! The client address a request counts as, one rule for both HTTP processes: the gateway's
//! per-client limits and identity, and the admin process's credential lockout
//! (ADMIN_AUTH_FAIL_PER_MIN) both use [`client_address`].

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use http::HeaderMap;
use qm_core::config::TrustedProxies;

/// Which address counts. The socket peer, unless the peer is a trusted proxy; then
/// X-Forwarded-For (every instance of the header, each a comma list, in order) is walked from the
/// right, past the addresses that are themselves trusted proxies, and the first untrusted one is
/// the client. If every hop is trusted the leftmost counts. A malformed entry stops the walk at
/// the last good address reached: text a client wrote is never an identity, and a client whose
/// peer is not trusted never chooses its own. `Forwarded:` and `X-Real-IP` are not read.
/// IPv4-mapped IPv6 addresses (`::ffff:1.2.3.4`) count as the IPv4 address.
pub fn client_address(peer: IpAddr, headers: &HeaderMap, trusted: &TrustedProxies) -> IpAddr {
    let mut client = peer.to_canonical();
    if !trusted.contains(client) {
        return client;
    }
    for value in headers.get_all("x-forwarded-for").iter().rev() {
        let Ok(list) = value.to_str() else {
            return client;
        };
        for entry in list.rsplit(',').map(str::trim) {
            // An empty list element (`a,,b`, a blank header) carries nothing: skip it.
            if entry.is_empty() {
                continue;
            }
            let Some(hop) = parse_hop(entry) else {
                return client;
            };
            client = hop;
            if !trusted.contains(hop) {
                return hop;
            }
        }
    }
    client
}

/// One X-Forwarded-For entry: an IP address, optionally with a port as some proxies append it
/// (`203.0.113.9:4711`, `[2001:db8::1]:443`, `[2001:db8::1]`). Anything else (`unknown`, a name,
/// an obfuscated identifier) is malformed.
fn parse_hop(entry: &str) -> Option<IpAddr> {
    let ip = if let Ok(ip) = entry.parse::<IpAddr>() {
        ip
    } else if let Ok(socket) = entry.parse::<SocketAddr>() {
        socket.ip()
    } else {
        entry
            .strip_prefix('[')?
            .strip_suffix(']')?
            .parse::<Ipv6Addr>()
            .ok()?
            .into()
    };
    Some(ip.to_canonical())
}
