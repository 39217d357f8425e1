//! What each [`Rule`] of the table accepts: a value is parsed once, into a [`Parsed`] value, or
//! refused with a reason that the caller prefixes with the variable's name.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::inline_hosts::InlineHosts;
use super::proxies::TrustedProxies;
use super::table::Rule;

/// A value that passed its rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Parsed {
    Text(String),
    Number(u64),
    Flag(bool),
    Ip(IpAddr),
    SocketAddr(SocketAddr),
    IpRanges(TrustedProxies),
    AssetNames(Vec<String>),
    InlineHosts(InlineHosts),
}

impl Rule {
    /// Parses `text` (never blank: blank counts as unset), or says what is wrong with it.
    pub(super) fn parse(&self, text: &str) -> Result<Parsed, String> {
        let trimmed = text.trim();
        match *self {
            Rule::Text => Ok(Parsed::Text(text.to_owned())),
            // Keys are taken exactly as given: their length counts every character.
            Rule::MinLength(min) if text.len() < min => {
                Err(format!("must be at least {min} characters"))
            }
            Rule::MinLength(_) => Ok(Parsed::Text(text.to_owned())),
            Rule::Number { min, max } => parse_number(text, min, max).map(Parsed::Number),
            Rule::Flag => parse_flag(trimmed).map(Parsed::Flag),
            Rule::OneOf(words) if words.contains(&trimmed) => Ok(Parsed::Text(trimmed.to_owned())),
            Rule::OneOf(words) => Err(format!("'{trimmed}' is not one of {}", words.join(", "))),
            Rule::Host => parse_host(trimmed).map(Parsed::Ip),
            Rule::SocketAddr => parse_socket_addr(trimmed)
                .map(Parsed::SocketAddr)
                .ok_or_else(|| format!("'{text}' is not host:port (e.g. 127.0.0.1:50051)")),
            Rule::HostPort => parse_host_port(trimmed)
                .map(|()| Parsed::Text(trimmed.to_owned()))
                .ok_or_else(|| {
                    format!("'{text}' is not host:port (e.g. qm-engine:50051 or 10.0.0.7:50051)")
                }),
            Rule::Url { schemes, example } => {
                let known = schemes.iter().any(|scheme| {
                    text.strip_prefix(scheme)
                        .is_some_and(|rest| rest.starts_with("://"))
                });
                if known {
                    return Ok(Parsed::Text(text.to_owned()));
                }
                let spelled: Vec<String> = schemes
                    .iter()
                    .map(|scheme| format!("{scheme}://"))
                    .collect();
                Err(format!(
                    "must be a {} URL (e.g. {example})",
                    spelled.join(" or ")
                ))
            }
            Rule::SmtpUrl => check_smtp_url(trimmed).map(|()| Parsed::Text(trimmed.to_owned())),
            Rule::Mailbox if looks_like_mailbox(trimmed) => Ok(Parsed::Text(trimmed.to_owned())),
            Rule::Mailbox => Err(format!(
                "'{trimmed}' is not an address (queue@example.com or Name <queue@example.com>)"
            )),
            Rule::IpRanges => TrustedProxies::parse(text).map(Parsed::IpRanges),
            Rule::AssetNames => parse_asset_names(text).map(Parsed::AssetNames),
            Rule::PublicUrl => parse_public_url(trimmed).map(Parsed::Text),
            Rule::InlineHosts => InlineHosts::parse(text).map(Parsed::InlineHosts),
        }
    }
}

/// PUBLIC_URL: the base every absolute URL the gateway builds starts with, kept without a
/// trailing slash (`https://queue.example.com` or `https://example.com/queue`).
fn parse_public_url(text: &str) -> Result<String, String> {
    let example = "e.g. https://queue.example.com";
    let url = url::Url::parse(text)
        .map_err(|_| format!("'{text}' is not an absolute URL ({example})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("must be an http:// or https:// URL ({example})"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("must name a host ({example})"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must not carry a user name or password".to_owned());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!("must not carry a query or fragment ({example})"));
    }
    Ok(url.as_str().trim_end_matches('/').to_owned())
}

fn parse_number(text: &str, min: u64, max: u64) -> Result<u64, String> {
    let number: u64 = text
        .trim()
        .parse()
        .map_err(|_| format!("'{text}' is not a whole number"))?;
    if number < min || number > max {
        return Err(format!("{number} is outside {min}..={max}"));
    }
    Ok(number)
}

fn parse_flag(text: &str) -> Result<bool, String> {
    match text {
        "0" | "false" => Ok(false),
        "1" | "true" => Ok(true),
        other => Err(format!("'{other}' is not 0/1/true/false")),
    }
}

fn parse_host(text: &str) -> Result<IpAddr, String> {
    if text == "localhost" {
        return Ok(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    text.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .map_err(|_| format!("'{text}' is not an IP address"))
}

fn parse_socket_addr(text: &str) -> Option<SocketAddr> {
    if let Ok(addr) = text.parse() {
        return Some(addr);
    }
    let (host, port) = text.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    (host == "localhost").then(|| SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
}

/// `host:port` where the host is a DNS name, an IPv4 address or a bracketed IPv6 address.
fn parse_host_port(text: &str) -> Option<()> {
    let (host, port) = text.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    if port == 0 {
        return None;
    }
    if let Some(inner) = host
        .strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
    {
        return inner.parse::<std::net::Ipv6Addr>().ok().map(|_| ());
    }
    let name_like = !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        });
    name_like.then_some(())
}

/// SMTP_URL's rules: `smtp://host[:port]` (plain; `?tls=required` for STARTTLS,
/// `?tls=opportunistic`) or `smtps://host[:port]` (TLS from the first byte), optionally with
/// `user:pass@`.
fn check_smtp_url(text: &str) -> Result<(), String> {
    let url = url::Url::parse(text).map_err(|_| {
        "is not a URL (e.g. smtp://127.0.0.1:25 or smtps://mail.example:465)".to_owned()
    })?;
    if !matches!(url.scheme(), "smtp" | "smtps") {
        return Err(format!("scheme '{}' is not smtp or smtps", url.scheme()));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("names no host".to_owned());
    }
    let tls = url
        .query_pairs()
        .find(|(key, _)| key == "tls")
        .map(|(_, value)| value.into_owned());
    match (url.scheme(), tls.as_deref()) {
        (_, None) | ("smtp", Some("required" | "opportunistic")) => Ok(()),
        (scheme, Some(other)) => Err(format!(
            "tls={other} is not understood with {scheme}:// (smtp:// takes tls=required or tls=opportunistic)"
        )),
    }
}

/// Whether EMAIL_FROM reads as `local@domain` or `Name <local@domain>`.
fn looks_like_mailbox(text: &str) -> bool {
    let address = match (text.rfind('<'), text.strip_suffix('>')) {
        (Some(open), Some(inner)) => &inner[open + 1..],
        (None, None) => text,
        _ => return false,
    };
    match address.split_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && !domain.is_empty()
                && !domain.contains('@')
                && !address.chars().any(char::is_whitespace)
        }
        None => false,
    }
}

/// The longest WAITING_ASSETS_KEEP list: a few deploys' worth, never an open-ended set.
const MAX_KEPT_ASSETS: usize = 64;

/// WAITING_ASSETS_KEEP: comma- or space-separated `waiting-<hash>.css|js` names, where `<hash>`
/// is the 22 base64url characters of the spec's asset hash. A path, a `/assets/` prefix or any
/// other file is refused: the list can only alias a name to this build's own file.
fn parse_asset_names(text: &str) -> Result<Vec<String>, String> {
    let mut names: Vec<String> = Vec::new();
    for name in text
        .split([',', ' ', '\n'])
        .map(str::trim)
        .filter(|name| !name.is_empty())
    {
        // `<stem>-<hash>.<css|js>`, the hash being the last 22 characters before the extension
        // (base64url may itself contain '-'), the stem `waiting` or `waiting-<letters>`.
        let base = name
            .strip_suffix(".css")
            .or_else(|| name.strip_suffix(".js"))
            .unwrap_or_default();
        let well_formed = base.len() > 23 && base.is_char_boundary(base.len() - 23) && {
            let (stem, dashed_hash) = base.split_at(base.len() - 23);
            let stem_ok = stem == "waiting"
                || stem.strip_prefix("waiting-").is_some_and(|rest| {
                    !rest.is_empty()
                        && rest
                            .bytes()
                            .all(|byte| byte.is_ascii_lowercase() || byte == b'-')
                });
            stem_ok
                && dashed_hash.starts_with('-')
                && dashed_hash[1..]
                    .bytes()
                    .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_')
        };
        if !well_formed {
            return Err(format!(
                "'{name}' is not a waiting-page asset name (waiting-<22-character hash>.css or .js)"
            ));
        }
        if !names.iter().any(|known| known == name) {
            names.push(name.to_owned());
        }
    }
    if names.len() > MAX_KEPT_ASSETS {
        return Err(format!("at most {MAX_KEPT_ASSETS} names"));
    }
    Ok(names)
}

/// A URL with any password replaced, for showing.
pub(super) fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    match rest.split_once('@') {
        Some((user_info, host)) if user_info.contains(':') => {
            let user = user_info.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{host}")
        }
        _ => url.to_owned(),
    }
}
