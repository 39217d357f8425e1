//! INLINE_HOSTS: the hosts this gateway stands in front of (inline mode), each mapped to the room
//! that queues it: `shop.example.com=drop,www.example.com:8443=sale`. A host compares
//! case-insensitively; an entry without a port matches the host on any port, one with a port
//! only on that port (a port-specific entry wins over a port-free one).

use crate::ids::is_valid_room_id;

/// One `host[:port]=roomId` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InlineHost {
    /// Lower-case host name or IP address (IPv6 without brackets).
    pub host: String,
    pub port: Option<u16>,
    pub room_id: String,
}

/// Every inline host, in the order configured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InlineHosts(Vec<InlineHost>);

impl InlineHosts {
    /// Parses the variable's text, or says which entry is wrong and why.
    pub fn parse(text: &str) -> Result<InlineHosts, String> {
        let mut hosts: Vec<InlineHost> = Vec::new();
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (authority, room_id) = entry
                .split_once('=')
                .map(|(host, room)| (host.trim(), room.trim()))
                .ok_or_else(|| format!("'{entry}' is not host=roomId"))?;
            if !is_valid_room_id(room_id) {
                return Err(format!(
                    "'{entry}': '{room_id}' is not a room id (1-64 characters of A-Z a-z 0-9 _ -)"
                ));
            }
            let (host, port) = split_authority(authority)
                .ok_or_else(|| format!("'{entry}': '{authority}' is not a host name or address"))?;
            if hosts
                .iter()
                .any(|known| known.host == host && known.port == port)
            {
                return Err(format!("'{authority}' is mapped twice"));
            }
            hosts.push(InlineHost {
                host,
                port,
                room_id: room_id.to_owned(),
            });
        }
        Ok(InlineHosts(hosts))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The room a request's Host (`name`, `name:port`, `[v6]:port`) is mapped to, if any.
    pub fn room_for(&self, host_header: &str) -> Option<&str> {
        let (host, port) = split_authority(host_header.trim())?;
        let exact = self
            .0
            .iter()
            .find(|entry| entry.host == host && entry.port.is_some() && entry.port == port);
        exact
            .or_else(|| {
                self.0
                    .iter()
                    .find(|entry| entry.host == host && entry.port.is_none())
            })
            .map(|entry| entry.room_id.as_str())
    }

    /// `host[:port]=roomId` for each entry, as the health view shows them.
    pub fn to_strings(&self) -> Vec<String> {
        self.0
            .iter()
            .map(|entry| {
                let host = if entry.host.contains(':') {
                    format!("[{}]", entry.host)
                } else {
                    entry.host.clone()
                };
                match entry.port {
                    Some(port) => format!("{host}:{port}={}", entry.room_id),
                    None => format!("{host}={}", entry.room_id),
                }
            })
            .collect()
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`, the host lower-cased; `None` when it is not one.
fn split_authority(text: &str) -> Option<(String, Option<u16>)> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (v6, after) = rest.split_once(']')?;
        v6.parse::<std::net::Ipv6Addr>().ok()?;
        let port = match after {
            "" => None,
            _ => Some(after.strip_prefix(':')?),
        };
        (v6, port)
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        }
    };
    let port = match port {
        None => None,
        Some(digits) if digits.bytes().all(|b| b.is_ascii_digit()) => {
            Some(digits.parse::<u16>().ok().filter(|port| *port != 0)?)
        }
        Some(_) => return None,
    };
    let valid_name = !host.is_empty()
        && host.len() <= 253
        && host.contains(|c: char| c.is_ascii_alphanumeric())
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b':'));
    valid_name.then(|| (host.to_ascii_lowercase(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_map_to_rooms_case_insensitively_with_or_without_a_port() {
        let hosts =
            InlineHosts::parse("Shop.Example.com=drop, shop.example.com:8443=sale,[::1]=v6")
                .unwrap();
        assert_eq!(hosts.room_for("shop.example.com"), Some("drop"));
        assert_eq!(hosts.room_for("SHOP.example.COM:80"), Some("drop"));
        assert_eq!(
            hosts.room_for("shop.example.com:8443"),
            Some("sale"),
            "a port-specific entry wins"
        );
        assert_eq!(hosts.room_for("[::1]:8080"), Some("v6"));
        assert_eq!(hosts.room_for("other.example.com"), None);
        assert_eq!(hosts.room_for("shop.example.com.evil"), None);
        assert_eq!(hosts.room_for(""), None);
        assert_eq!(
            hosts.to_strings(),
            [
                "shop.example.com=drop",
                "shop.example.com:8443=sale",
                "[::1]=v6"
            ]
        );
    }

    #[test]
    fn a_bad_entry_is_named() {
        for (text, says) in [
            ("shop.example.com", "is not host=roomId"),
            ("shop.example.com=bad room", "is not a room id"),
            ("=drop", "is not a host name"),
            ("shop.example.com:99999=drop", "is not a host name"),
            ("sh op.example.com=drop", "is not a host name"),
            ("a.example=x,A.example=y", "mapped twice"),
        ] {
            let error = InlineHosts::parse(text).unwrap_err();
            assert!(error.contains(says), "{text}: {error}");
        }
        assert!(InlineHosts::parse(" , ").unwrap().is_empty());
    }
}
