//! TRUSTED_PROXIES: the peers whose X-Forwarded-For the gateway believes, as single addresses
//! and CIDR ranges. IPv4-mapped IPv6 compares as IPv4, so a range matches however an address
//! arrives.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One TRUSTED_PROXIES entry: a single address (`127.0.0.1`, `::1`) or a CIDR range
/// (`10.0.0.0/8`, `fd00::/8`). An IPv4-mapped IPv6 entry (`::ffff:10.0.0.0/104`) is kept as the
/// IPv4 range it names, so it matches however the address arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpRange {
    network: IpAddr,
    prefix: u8,
}

impl IpRange {
    /// Parses one entry, or says what is wrong with it.
    pub fn parse(text: &str) -> Result<IpRange, String> {
        let text = text.trim();
        let (address, prefix) = match text.split_once('/') {
            Some((address, prefix)) => (address.trim(), Some(prefix.trim())),
            None => (text, None),
        };
        let address: IpAddr = address
            .parse()
            .map_err(|_| format!("'{text}' is not an IP address or CIDR range"))?;
        let width: u8 = if address.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => width,
            Some(digits) => digits
                .parse::<u8>()
                .ok()
                .filter(|prefix| {
                    digits.bytes().all(|byte| byte.is_ascii_digit()) && *prefix <= width
                })
                .ok_or_else(|| format!("'{text}' has a prefix length outside 1..={width}"))?,
        };
        let range = IpRange {
            network: address,
            prefix,
        };
        if range.masked(address) != address {
            return Err(format!(
                "'{text}' has bits set beyond its /{prefix} prefix; did you mean {}/{prefix}?",
                range.masked(address)
            ));
        }
        // ::ffff:a.b.c.d/96+ is an IPv4 range spelled in IPv6.
        let range = match address {
            IpAddr::V6(v6) if prefix >= 96 && v6.to_ipv4_mapped().is_some() => IpRange {
                network: IpAddr::V6(v6).to_canonical(),
                prefix: prefix - 96,
            },
            _ => range,
        };
        if range.prefix == 0 {
            return Err(format!(
                "'{text}' trusts every address, so any client could choose its identity; name the proxies' own ranges"
            ));
        }
        Ok(range)
    }

    /// Whether `ip` lies in this range. An IPv4-mapped IPv6 address compares as IPv4.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        ip.is_ipv4() == self.network.is_ipv4() && self.masked(ip) == self.network
    }

    /// `ip` with every bit past the prefix cleared (`ip` is of the range's family).
    fn masked(&self, ip: IpAddr) -> IpAddr {
        match ip {
            IpAddr::V4(v4) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                IpAddr::V4(Ipv4Addr::from(u32::from(v4) & mask))
            }
            IpAddr::V6(v6) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask))
            }
        }
    }
}

impl fmt::Display for IpRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = if self.network.is_ipv4() { 32 } else { 128 };
        if self.prefix == width {
            write!(f, "{}", self.network)
        } else {
            write!(f, "{}/{}", self.network, self.prefix)
        }
    }
}

/// TRUSTED_PROXIES: the peers whose X-Forwarded-For the gateway believes. Empty (the default)
/// trusts nobody: the socket peer is the client.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<IpRange>);

impl TrustedProxies {
    /// A comma-separated list of addresses and CIDR ranges; empty items are skipped, any other
    /// bad item is an error naming it.
    pub fn parse(text: &str) -> Result<TrustedProxies, String> {
        text.split(',')
            .map(str::trim)
            .filter(|entry| !entry.is_empty())
            .map(IpRange::parse)
            .collect::<Result<Vec<_>, _>>()
            .map(TrustedProxies)
    }

    /// Whether `ip` is one of the trusted proxies.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|range| range.contains(ip))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every entry as shown (`10.0.0.0/8`, `127.0.0.1`).
    pub fn to_strings(&self) -> Vec<String> {
        self.0.iter().map(IpRange::to_string).collect()
    }
}
