//! The X-Forwarded-For walk and TRUSTED_PROXIES: the address a request counts against, from a
//! socket peer and any number of forwarded headers, and the proxy list's own parser.
//!
//! Input: a selector byte (which peer), then lines: the first is appended to TRUSTED_PROXIES
//! (after `127.0.0.0/8,::1`, so the walk is reached), every other line is one X-Forwarded-For
//! header value.

#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use http::{HeaderMap, HeaderValue};
use libfuzzer_sys::fuzz_target;
use qm_core::config::{IpRange, TrustedProxies};

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let mut lines = text.split('\n');
    let extra = lines.next().unwrap_or_default();

    // The proxy list's parser on its own: never a panic, and a list it accepts reads back the
    // same from its own rendering.
    let _ = IpRange::parse(extra);
    if let Ok(parsed) = TrustedProxies::parse(extra) {
        let shown = parsed.to_strings().join(",");
        assert_eq!(
            TrustedProxies::parse(&shown).as_ref(),
            Ok(&parsed),
            "{shown}"
        );
    }
    let trusted = TrustedProxies::parse(&format!("127.0.0.0/8,::1,{extra}"))
        .or_else(|_| TrustedProxies::parse("127.0.0.0/8,::1"))
        .expect("the base list parses");

    let peer = match selector % 5 {
        0 => IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)),
        1 => IpAddr::V6(Ipv4Addr::new(127, 0, 0, 2).to_ipv6_mapped()),
        2 => IpAddr::V6(Ipv6Addr::LOCALHOST),
        3 => IpAddr::V4(Ipv4Addr::new(203, 0, 113, selector)),
        _ => IpAddr::V6(Ipv6Addr::new(
            0x2001,
            0xdb8,
            0,
            0,
            0,
            0,
            0,
            u16::from(selector),
        )),
    };
    let mut headers = HeaderMap::new();
    for line in lines.take(64) {
        if let Ok(value) = HeaderValue::from_str(line) {
            headers.append("x-forwarded-for", value);
        }
    }

    let client = qm_gateway::fuzzing::client_address(peer, &headers, &trusted);
    // Always in canonical form, so ::ffff:1.2.3.4 and 1.2.3.4 count as one client.
    assert_eq!(client, client.to_canonical());
    // A peer that is not a trusted proxy is the client, whatever it forwarded.
    if !trusted.contains(peer) {
        assert_eq!(client, peer.to_canonical());
    }
    // Without a forwarded header there is nothing to believe: the peer is the client.
    if headers.is_empty() {
        assert_eq!(client, peer.to_canonical());
    }
});
