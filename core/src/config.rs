//! Configuration, read once from an injected source (the process environment in `main`, a map in
//! tests) into typed structs and validated at start-up. Variable names are exactly the spec's.
//! A bad value stops start-up with a message naming the variable; secrets are never printed.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

use crate::token::Keyring;

/// The key the server uses when ADMIN_KEY is unset: fine on a laptop, never on a network.
pub const DEFAULT_ADMIN_KEY: &str = "admin-dev";
/// Where STORE=valkey finds Valkey unless VALKEY_URL says otherwise.
pub const DEFAULT_VALKEY_URL: &str = "redis://127.0.0.1:6379";
/// Where SIDESTORE=pg finds Postgres unless DATABASE_URL says otherwise.
pub const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// Who turn notifications come from unless EMAIL_FROM says otherwise.
pub const DEFAULT_EMAIL_FROM: &str = "Queue Manager <queue@localhost>";

/// Where configuration values come from.
pub trait ConfigSource {
    fn get(&self, key: &str) -> Option<String>;
}

/// The process environment.
pub struct ProcessEnv;

impl ConfigSource for ProcessEnv {
    fn get(&self, key: &str) -> Option<String> {
        std::env::var(key).ok()
    }
}

impl ConfigSource for HashMap<String, String> {
    fn get(&self, key: &str) -> Option<String> {
        HashMap::get(self, key).cloned()
    }
}

impl ConfigSource for HashMap<&str, &str> {
    fn get(&self, key: &str) -> Option<String> {
        HashMap::get(self, key).map(|value| (*value).to_owned())
    }
}

/// A value that stops start-up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var}: {reason}")]
pub struct ConfigError {
    pub var: &'static str,
    pub reason: String,
}

fn invalid(var: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        var,
        reason: reason.into(),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    Memory,
    Valkey,
}

impl StoreKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StoreKind::Memory => "memory",
            StoreKind::Valkey => "valkey",
        }
    }
}

/// Every setting of every process. Each process reads the part it needs.
#[derive(Debug)]
pub struct Config {
    /// NODE_ENV=production or QM_ENV=production.
    pub production: bool,
    /// Gateway listen address (HOST, PORT).
    pub gateway_addr: SocketAddr,
    /// Admin listen address (ADMIN_HOST, ADMIN_PORT).
    pub admin_addr: SocketAddr,
    /// Engine gRPC address (ENGINE_ADDR): where the engine listens and the others connect.
    pub engine_addr: SocketAddr,
    pub store: StoreKind,
    /// Valkey of the durable store (VALKEY_URL); its password is withheld from health.
    pub valkey_url: String,
    /// Postgres of the durable store's journal (DATABASE_URL).
    pub database_url: String,
    /// Whether SECRET was set (a random per-boot secret signs nothing that survives a restart).
    pub secret_is_configured: bool,
    secret: SecretString,
    secret_previous: Option<SecretString>,
    pub token_sign_v2: bool,
    pub token_max_age_sec: u64,
    pub queue_cookie_max_age_sec: u64,
    admin_key: SecretString,
    public_api_key: Option<SecretString>,
    pub join_limit_per_min: u32,
    /// Door checks a minute per client address (CHECK_LIMIT_PER_MIN); a vouched check counts
    /// against the vouched address, not the connector calling for it.
    pub check_limit_per_min: u32,
    pub sse_max_total: usize,
    pub sse_per_ip: usize,
    pub room_cookie_cap: usize,
    /// Hard ceiling of one room's pre-queue (PREQUEUE_MAX): a join over it is 503 prequeue_full.
    pub prequeue_max: u64,
    /// Seconds a stopping process waits for open requests and streams before it exits.
    pub shutdown_drain_sec: u64,
    /// Peers whose X-Forwarded-For the gateway believes (TRUSTED_PROXIES); empty trusts nobody.
    pub trusted_proxies: TrustedProxies,
    /// Turn notifications by e-mail (EMAIL_NOTIFY); off by default.
    pub email_notify: bool,
    /// The SMTP relay (SMTP_URL); may carry a password, so it is never printed whole.
    smtp_url: Option<SecretString>,
    /// The From of every turn e-mail (EMAIL_FROM).
    pub email_from: String,
    /// WAITING_ASSETS_KEEP: hashed waiting-page asset names of earlier builds
    /// (`waiting-<hash>.css|js`) this build keeps answering with its own file of the same kind,
    /// so a page an older instance handed out still loads during a rolling deploy.
    pub waiting_assets_keep: Vec<String>,
}

impl Config {
    /// Reads and validates every variable.
    pub fn from_source(source: &dyn ConfigSource) -> Result<Config, ConfigError> {
        let read = |var: &'static str| source.get(var).filter(|value| !value.trim().is_empty());
        let production = ["NODE_ENV", "QM_ENV"]
            .iter()
            .any(|var| read(var).is_some_and(|value| value.trim() == "production"));

        let admin_key = read("ADMIN_KEY").unwrap_or_else(|| DEFAULT_ADMIN_KEY.to_owned());
        let default_key = admin_key == DEFAULT_ADMIN_KEY;
        if admin_key.len() < 8 {
            return Err(invalid("ADMIN_KEY", "must be at least 8 characters"));
        }
        if production && default_key {
            return Err(invalid(
                "ADMIN_KEY",
                "the default key is refused in production; set a long random key",
            ));
        }

        // With the default admin key nothing binds beyond loopback.
        let default_host = if default_key {
            Ipv4Addr::LOCALHOST
        } else {
            Ipv4Addr::UNSPECIFIED
        };
        let host = parse_host("HOST", read("HOST"), IpAddr::V4(default_host), default_key)?;
        let admin_host = parse_host(
            "ADMIN_HOST",
            read("ADMIN_HOST"),
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            default_key,
        )?;
        let port = parse_number::<u16>("PORT", read("PORT"), 8080, 0, u16::MAX)?;
        let admin_port = parse_number::<u16>("ADMIN_PORT", read("ADMIN_PORT"), 8081, 0, u16::MAX)?;
        let engine_addr = match read("ENGINE_ADDR") {
            None => SocketAddr::from((Ipv4Addr::LOCALHOST, 50051)),
            Some(value) => parse_socket_addr(value.trim()).ok_or_else(|| {
                invalid(
                    "ENGINE_ADDR",
                    format!("'{value}' is not host:port (e.g. 127.0.0.1:50051)"),
                )
            })?,
        };

        let store = match read("STORE").as_deref().map(str::trim) {
            None | Some("memory") => StoreKind::Memory,
            Some("valkey") => StoreKind::Valkey,
            Some(other) => {
                return Err(invalid(
                    "STORE",
                    format!("'{other}' is not one of memory, valkey"),
                ));
            }
        };
        if production && store != StoreKind::Valkey {
            return Err(invalid(
                "STORE",
                "production requires STORE=valkey SIDESTORE=pg",
            ));
        }
        match (store, read("SIDESTORE").as_deref().map(str::trim)) {
            (StoreKind::Valkey, Some("pg")) | (StoreKind::Memory, None | Some("memory")) => {}
            (StoreKind::Valkey, None) => {
                return Err(invalid(
                    "SIDESTORE",
                    "STORE=valkey needs SIDESTORE=pg (the journal)",
                ));
            }
            (StoreKind::Valkey, Some(other)) => {
                return Err(invalid("SIDESTORE", format!("'{other}' is not pg")));
            }
            (StoreKind::Memory, Some(other)) => {
                return Err(invalid(
                    "SIDESTORE",
                    format!("'{other}' needs STORE=valkey; STORE=memory keeps no journal"),
                ));
            }
        }
        let valkey_url = read("VALKEY_URL").unwrap_or_else(|| DEFAULT_VALKEY_URL.to_owned());
        if !(valkey_url.starts_with("redis://") || valkey_url.starts_with("rediss://")) {
            return Err(invalid(
                "VALKEY_URL",
                "must be a redis:// or rediss:// URL (e.g. redis://127.0.0.1:6379)",
            ));
        }
        let database_url = read("DATABASE_URL").unwrap_or_else(|| DEFAULT_DATABASE_URL.to_owned());
        if !(database_url.starts_with("postgres://") || database_url.starts_with("postgresql://")) {
            return Err(invalid(
                "DATABASE_URL",
                "must be a postgres:// URL (e.g. postgres://postgres@127.0.0.1:5432/postgres)",
            ));
        }

        let secret_is_configured = read("SECRET").is_some();
        let secret = match read("SECRET") {
            Some(secret) if secret.len() < 16 => {
                return Err(invalid("SECRET", "must be at least 16 characters"));
            }
            Some(secret) => secret,
            None if production => return Err(invalid("SECRET", "required in production")),
            None if store == StoreKind::Valkey => {
                return Err(invalid(
                    "SECRET",
                    "required with SIDESTORE=pg: places outlive a restart, so must their signatures",
                ));
            }
            None => crate::ids::new_session_id(),
        };
        let secret_previous = read("SECRET_PREVIOUS").map(SecretString::from);
        let token_sign_v2 = parse_flag("TOKEN_SIGN_V2", read("TOKEN_SIGN_V2"))?;
        let token_max_age_sec = parse_number(
            "TOKEN_MAX_AGE_SEC",
            read("TOKEN_MAX_AGE_SEC"),
            86_400u64,
            60,
            31_536_000,
        )?;
        let queue_cookie_max_age_sec = parse_number(
            "QUEUE_COOKIE_MAX_AGE_SEC",
            read("QUEUE_COOKIE_MAX_AGE_SEC"),
            86_400u64,
            60,
            31_536_000,
        )?;
        let public_api_key = read("PUBLIC_API_KEY").map(SecretString::from);
        if public_api_key
            .as_ref()
            .is_some_and(|key| key.expose_secret().len() < 8)
        {
            return Err(invalid("PUBLIC_API_KEY", "must be at least 8 characters"));
        }

        let trusted_proxies = match read("TRUSTED_PROXIES") {
            None => TrustedProxies::default(),
            Some(text) => {
                TrustedProxies::parse(&text).map_err(|reason| invalid("TRUSTED_PROXIES", reason))?
            }
        };

        let email_notify = parse_flag("EMAIL_NOTIFY", read("EMAIL_NOTIFY"))?;
        let smtp_url = read("SMTP_URL").map(|url| url.trim().to_owned());
        match &smtp_url {
            Some(url) => check_smtp_url(url).map_err(|reason| invalid("SMTP_URL", reason))?,
            None if email_notify => {
                return Err(invalid(
                    "SMTP_URL",
                    "required with EMAIL_NOTIFY=1 (e.g. smtp://127.0.0.1:25 or smtps://user:pass@mail.example:465)",
                ));
            }
            None => {}
        }
        let email_from = read("EMAIL_FROM")
            .map(|from| from.trim().to_owned())
            .unwrap_or_else(|| DEFAULT_EMAIL_FROM.to_owned());
        if !looks_like_mailbox(&email_from) {
            return Err(invalid(
                "EMAIL_FROM",
                format!(
                    "'{email_from}' is not an address (queue@example.com or Name <queue@example.com>)"
                ),
            ));
        }

        Ok(Config {
            production,
            gateway_addr: SocketAddr::new(host, port),
            admin_addr: SocketAddr::new(admin_host, admin_port),
            engine_addr,
            store,
            valkey_url,
            database_url,
            secret_is_configured,
            secret: SecretString::from(secret),
            secret_previous,
            token_sign_v2,
            token_max_age_sec,
            queue_cookie_max_age_sec,
            admin_key: SecretString::from(admin_key),
            public_api_key,
            join_limit_per_min: parse_number(
                "JOIN_LIMIT_PER_MIN",
                read("JOIN_LIMIT_PER_MIN"),
                120,
                1,
                100_000_000,
            )?,
            check_limit_per_min: parse_number(
                "CHECK_LIMIT_PER_MIN",
                read("CHECK_LIMIT_PER_MIN"),
                600,
                1,
                100_000_000,
            )?,
            sse_max_total: parse_number(
                "SSE_MAX_TOTAL",
                read("SSE_MAX_TOTAL"),
                50_000,
                1,
                10_000_000,
            )?,
            sse_per_ip: parse_number("SSE_PER_IP", read("SSE_PER_IP"), 20, 1, 1_000_000)?,
            room_cookie_cap: parse_number("ROOM_COOKIE_CAP", read("ROOM_COOKIE_CAP"), 8, 1, 50)?,
            prequeue_max: parse_number(
                "PREQUEUE_MAX",
                read("PREQUEUE_MAX"),
                1_000_000,
                1,
                100_000_000,
            )?,
            shutdown_drain_sec: parse_number(
                "SHUTDOWN_DRAIN_SEC",
                read("SHUTDOWN_DRAIN_SEC"),
                10,
                0,
                600,
            )?,
            trusted_proxies,
            email_notify,
            smtp_url: smtp_url.map(SecretString::from),
            email_from,
            waiting_assets_keep: match read("WAITING_ASSETS_KEEP") {
                Some(text) => parse_asset_names(&text)
                    .map_err(|reason| invalid("WAITING_ASSETS_KEEP", reason))?,
                None => Vec::new(),
            },
        })
    }

    /// SMTP_URL as configured (it may hold a password: never log it).
    pub fn smtp_url(&self) -> Option<&SecretString> {
        self.smtp_url.as_ref()
    }

    /// The configuration of a process started with nothing set: what a newcomer gets.
    pub fn defaults() -> Config {
        let empty: HashMap<String, String> = HashMap::new();
        // The empty source passes every rule by construction.
        Config::from_source(&empty).expect("defaults are valid")
    }

    /// The keyring built from SECRET, SECRET_PREVIOUS and TOKEN_SIGN_V2.
    pub fn keyring(&self) -> Keyring {
        Keyring::new(
            self.secret.clone(),
            self.secret_previous.clone(),
            self.token_sign_v2,
        )
    }

    pub fn admin_key(&self) -> &SecretString {
        &self.admin_key
    }

    pub fn public_api_key(&self) -> Option<&SecretString> {
        self.public_api_key.as_ref()
    }

    pub fn uses_default_admin_key(&self) -> bool {
        self.admin_key.expose_secret() == DEFAULT_ADMIN_KEY
    }

    /// Token refresh is due this long after a token's iat: half the shorter lifetime.
    pub fn token_refresh_after_ms(&self) -> u64 {
        self.token_max_age_sec.min(self.queue_cookie_max_age_sec) * 1000 / 2
    }

    /// The effective configuration for /api/admin/health, with every secret withheld.
    pub fn public_json(&self) -> Value {
        json!({
            "production": self.production,
            "HOST": self.gateway_addr.ip().to_string(),
            "PORT": self.gateway_addr.port(),
            "ADMIN_HOST": self.admin_addr.ip().to_string(),
            "ADMIN_PORT": self.admin_addr.port(),
            "ENGINE_ADDR": self.engine_addr.to_string(),
            "STORE": self.store.as_str(),
            "SIDESTORE": if self.store == StoreKind::Valkey { "pg" } else { "none" },
            "VALKEY_URL": without_password(&self.valkey_url),
            "DATABASE_URL": without_password(&self.database_url),
            "SECRET": if self.secret_is_configured { "set" } else { "random per boot" },
            "SECRET_PREVIOUS": if self.secret_previous.is_some() { "set" } else { "unset" },
            "TOKEN_SIGN_V2": self.token_sign_v2,
            "TOKEN_MAX_AGE_SEC": self.token_max_age_sec,
            "QUEUE_COOKIE_MAX_AGE_SEC": self.queue_cookie_max_age_sec,
            "ADMIN_KEY": if self.uses_default_admin_key() { "default (admin-dev)" } else { "set" },
            "PUBLIC_API_KEY": if self.public_api_key.is_some() { "set" } else { "unset" },
            "JOIN_LIMIT_PER_MIN": self.join_limit_per_min,
            "CHECK_LIMIT_PER_MIN": self.check_limit_per_min,
            "SSE_MAX_TOTAL": self.sse_max_total,
            "SSE_PER_IP": self.sse_per_ip,
            "ROOM_COOKIE_CAP": self.room_cookie_cap,
            "PREQUEUE_MAX": self.prequeue_max,
            "SHUTDOWN_DRAIN_SEC": self.shutdown_drain_sec,
            "TRUSTED_PROXIES": self.trusted_proxies.to_strings(),
            "EMAIL_NOTIFY": self.email_notify,
            "SMTP_URL": self
                .smtp_url
                .as_ref()
                .map(|url| without_password(url.expose_secret())),
            "EMAIL_FROM": self.email_from,
            "WAITING_ASSETS_KEEP": self.waiting_assets_keep,
        })
    }

    /// Settings that work but deserve an operator's attention.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if !self.secret_is_configured {
            warnings.push("SECRET is unset: tokens are signed with a random per-boot secret and every place is lost on restart".to_owned());
        }
        if self.uses_default_admin_key() {
            warnings
                .push("ADMIN_KEY is the default key: the server only binds loopback".to_owned());
        }
        if self.store == StoreKind::Memory {
            warnings.push("STORE=memory keeps nothing across a restart".to_owned());
        }
        warnings
    }
}

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

/// A URL with any password replaced, for showing.
fn without_password(url: &str) -> String {
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

fn parse_host(
    var: &'static str,
    value: Option<String>,
    default: IpAddr,
    default_key: bool,
) -> Result<IpAddr, ConfigError> {
    let ip = match value.as_deref().map(str::trim) {
        None => default,
        Some("localhost") => IpAddr::V4(Ipv4Addr::LOCALHOST),
        Some(text) => text
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse()
            .map_err(|_| invalid(var, format!("'{text}' is not an IP address")))?,
    };
    if default_key && !ip.is_loopback() {
        return Err(invalid(
            var,
            format!(
                "{ip} is not loopback, and ADMIN_KEY is the default key; set ADMIN_KEY to a long random key to listen beyond this machine"
            ),
        ));
    }
    Ok(ip)
}

fn parse_socket_addr(text: &str) -> Option<SocketAddr> {
    if let Ok(addr) = text.parse() {
        return Some(addr);
    }
    let (host, port) = text.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    (host == "localhost").then(|| SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
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

fn parse_flag(var: &'static str, value: Option<String>) -> Result<bool, ConfigError> {
    match value.as_deref().map(str::trim) {
        None | Some("0") | Some("false") => Ok(false),
        Some("1") | Some("true") => Ok(true),
        Some(other) => Err(invalid(var, format!("'{other}' is not 0/1/true/false"))),
    }
}

fn parse_number<T>(
    var: &'static str,
    value: Option<String>,
    default: T,
    min: T,
    max: T,
) -> Result<T, ConfigError>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
{
    let Some(text) = value else {
        return Ok(default);
    };
    let number: T = text
        .trim()
        .parse()
        .map_err(|_| invalid(var, format!("'{text}' is not a whole number")))?;
    if number < min || number > max {
        return Err(invalid(var, format!("{number} is outside {min}..={max}")));
    }
    Ok(number)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let map: HashMap<&str, &str> = pairs.iter().copied().collect();
        Config::from_source(&map)
    }

    #[test]
    fn kept_asset_names_are_checked_and_shown() {
        let kept = config(&[(
            "WAITING_ASSETS_KEEP",
            "waiting-47DEQpj8HBSa-_TImW-5JC.css, waiting-47DEQpj8HBSa-_TImW-5JC.js waiting-47DEQpj8HBSa-_TImW-5JC.css",
        )])
        .expect("valid");
        assert_eq!(
            kept.waiting_assets_keep,
            [
                "waiting-47DEQpj8HBSa-_TImW-5JC.css",
                "waiting-47DEQpj8HBSa-_TImW-5JC.js"
            ]
        );
        let ui = config(&[(
            "WAITING_ASSETS_KEEP",
            "waiting-ui-47DEQpj8HBSa-_TImW-5JC.js",
        )])
        .expect("a script of its own stem");
        assert_eq!(ui.waiting_assets_keep.len(), 1);
        assert_eq!(
            kept.public_json()["WAITING_ASSETS_KEEP"],
            json!([
                "waiting-47DEQpj8HBSa-_TImW-5JC.css",
                "waiting-47DEQpj8HBSa-_TImW-5JC.js"
            ])
        );
        assert!(Config::defaults().waiting_assets_keep.is_empty());
        for bad in [
            "waiting-short.css",
            "/assets/waiting-47DEQpj8HBSa-_TImW-5JC.css",
            "waiting-47DEQpj8HBSa-_TImW-5JC.html",
            "other-47DEQpj8HBSa-_TImW-5JC.css",
            "waiting-47DEQpj8HBSa-_TImW-5J!.js",
            "waiting-UI-47DEQpj8HBSa-_TImW-5JC.js",
            "waitingx47DEQpj8HBSa-_TImW-5JC.js",
        ] {
            let error = config(&[("WAITING_ASSETS_KEEP", bad)]).expect_err(bad);
            assert_eq!(error.var, "WAITING_ASSETS_KEEP");
        }
    }

    #[test]
    fn defaults_bind_loopback() {
        let config = Config::defaults();
        assert_eq!(config.gateway_addr, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(config.admin_addr, "127.0.0.1:8081".parse().unwrap());
        assert_eq!(config.engine_addr, "127.0.0.1:50051".parse().unwrap());
        assert_eq!(config.store, StoreKind::Memory);
        assert_eq!(config.room_cookie_cap, 8);
        assert_eq!(config.token_refresh_after_ms(), 43_200_000);
    }

    #[test]
    fn default_admin_key_refuses_a_public_host() {
        let error = config(&[("HOST", "0.0.0.0")]).unwrap_err();
        assert_eq!(error.var, "HOST");
        let error = config(&[("ADMIN_HOST", "10.0.0.1")]).unwrap_err();
        assert_eq!(error.var, "ADMIN_HOST");
        let ok = config(&[("HOST", "0.0.0.0"), ("ADMIN_KEY", "a-long-random-key")]).unwrap();
        assert_eq!(ok.gateway_addr.ip().to_string(), "0.0.0.0");
        // With a real key and HOST unset the gateway listens on every interface.
        let ok = config(&[("ADMIN_KEY", "a-long-random-key")]).unwrap();
        assert!(ok.gateway_addr.ip().is_unspecified());
        assert!(ok.admin_addr.ip().is_loopback());
    }

    #[test]
    fn bad_values_name_their_variable() {
        for (var, value) in [
            ("PORT", "eighty"),
            ("PORT", "70000"),
            ("TOKEN_MAX_AGE_SEC", "59"),
            ("STORE", "disk"),
            ("TOKEN_SIGN_V2", "yes"),
            ("ENGINE_ADDR", "nowhere"),
            ("SSE_PER_IP", "0"),
            ("SECRET", "short"),
            ("ROOM_COOKIE_CAP", "-1"),
        ] {
            let error = config(&[(var, value)]).unwrap_err();
            assert_eq!(error.var, var, "{value}");
            assert!(error.to_string().starts_with(var));
        }
    }

    #[test]
    fn the_durable_store_needs_its_journal_a_secret_and_urls() {
        let durable = [
            ("STORE", "valkey"),
            ("SIDESTORE", "pg"),
            ("SECRET", "a-secret-of-sixteen-or-more"),
        ];
        let config_ok = config(&durable).expect("valid durable config");
        assert_eq!(config_ok.valkey_url, DEFAULT_VALKEY_URL);
        assert_eq!(config_ok.database_url, DEFAULT_DATABASE_URL);
        assert_eq!(config(&durable[..2]).unwrap_err().var, "SECRET");
        assert_eq!(config(&[("SIDESTORE", "pg")]).unwrap_err().var, "SIDESTORE");
        assert_eq!(
            config(&[("STORE", "valkey"), ("SIDESTORE", "mysql")])
                .unwrap_err()
                .var,
            "SIDESTORE"
        );
        let mut bad_url = durable.to_vec();
        bad_url.push(("VALKEY_URL", "127.0.0.1:6379"));
        assert_eq!(config(&bad_url).unwrap_err().var, "VALKEY_URL");
        let mut bad_db = durable.to_vec();
        bad_db.push(("DATABASE_URL", "mysql://x"));
        assert_eq!(config(&bad_db).unwrap_err().var, "DATABASE_URL");
        let mut with_password = durable.to_vec();
        with_password.push(("DATABASE_URL", "postgres://qm:hunter2@db:5432/qm"));
        let shown = config(&with_password).expect("valid").public_json();
        assert_eq!(shown["DATABASE_URL"], "postgres://qm:***@db:5432/qm");
    }

    #[test]
    fn production_requires_the_durable_store_and_a_secret() {
        let key = ("ADMIN_KEY", "a-long-random-key");
        assert_eq!(
            config(&[("NODE_ENV", "production"), key]).unwrap_err().var,
            "STORE"
        );
        assert_eq!(
            config(&[("QM_ENV", "production"), key, ("STORE", "valkey")])
                .unwrap_err()
                .var,
            "SIDESTORE"
        );
        assert_eq!(
            config(&[
                ("QM_ENV", "production"),
                key,
                ("STORE", "valkey"),
                ("SIDESTORE", "pg")
            ])
            .unwrap_err()
            .var,
            "SECRET"
        );
        assert_eq!(
            config(&[("QM_ENV", "production"), ("STORE", "valkey")])
                .unwrap_err()
                .var,
            "ADMIN_KEY"
        );
    }

    #[test]
    fn secrets_never_appear_in_the_public_view() {
        let config = config(&[
            ("SECRET", "0123456789abcdef-secret"),
            ("ADMIN_KEY", "super-secret-admin"),
        ])
        .unwrap();
        let text = config.public_json().to_string();
        assert!(!text.contains("0123456789abcdef-secret"));
        assert!(!text.contains("super-secret-admin"));
        assert!(!format!("{config:?}").contains("super-secret-admin"));
    }

    #[test]
    fn email_notify_needs_a_valid_smtp_url_and_hides_its_password() {
        let off = Config::defaults();
        assert!(!off.email_notify);
        assert_eq!(off.email_from, DEFAULT_EMAIL_FROM);
        assert_eq!(off.public_json()["SMTP_URL"], Value::Null);
        assert_eq!(
            config(&[("EMAIL_NOTIFY", "1")]).unwrap_err().var,
            "SMTP_URL"
        );
        for bad in [
            "mail.example:25",
            "http://mail.example",
            "smtp://",
            "smtps://mail.example?tls=required",
            "smtp://mail.example?tls=maybe",
        ] {
            let error = config(&[("EMAIL_NOTIFY", "1"), ("SMTP_URL", bad)]).unwrap_err();
            assert_eq!(error.var, "SMTP_URL", "{bad}");
        }
        let on = config(&[
            ("EMAIL_NOTIFY", "true"),
            ("SMTP_URL", "smtps://queue:hunter2@mail.example:465"),
            ("EMAIL_FROM", "Launch <launch@shop.example>"),
        ])
        .unwrap();
        assert!(on.email_notify);
        let shown = on.public_json();
        assert_eq!(shown["SMTP_URL"], "smtps://queue:***@mail.example:465");
        assert_eq!(shown["EMAIL_FROM"], "Launch <launch@shop.example>");
        assert!(!shown.to_string().contains("hunter2"));
        assert!(!format!("{on:?}").contains("hunter2"));
        for bad in ["nobody", "a@", "Name <a@b", "<@b>", "a b@c"] {
            assert_eq!(
                config(&[("EMAIL_FROM", bad)]).unwrap_err().var,
                "EMAIL_FROM",
                "{bad}"
            );
        }
        assert!(config(&[("SMTP_URL", "smtp://127.0.0.1:2525?tls=required")]).is_ok());
    }

    #[test]
    fn trusted_proxies_are_addresses_and_cidr_ranges() {
        assert!(Config::defaults().trusted_proxies.is_empty());
        let config = config(&[(
            "TRUSTED_PROXIES",
            " 10.0.0.0/8, 127.0.0.1,::1 , fd00::/8,,::ffff:192.168.0.0/112",
        )])
        .unwrap();
        let trusted = &config.trusted_proxies;
        assert_eq!(
            config.public_json()["TRUSTED_PROXIES"],
            json!([
                "10.0.0.0/8",
                "127.0.0.1",
                "::1",
                "fd00::/8",
                "192.168.0.0/16"
            ])
        );
        let ip = |text: &str| text.parse::<IpAddr>().unwrap();
        for inside in [
            "10.0.0.0",
            "10.255.255.255",
            "127.0.0.1",
            "::1",
            "fd12:3456::1",
            "192.168.4.5",
            // IPv4-mapped IPv6 compares as IPv4.
            "::ffff:10.1.2.3",
            "::ffff:127.0.0.1",
        ] {
            assert!(trusted.contains(ip(inside)), "{inside}");
        }
        for outside in [
            "11.0.0.0",
            "9.255.255.255",
            "127.0.0.2",
            "::2",
            "fe00::1",
            "203.0.113.9",
            "::ffff:203.0.113.9",
            // ::a00:1 is not 10.0.0.1: only the mapped form compares as IPv4.
            "::a00:1",
        ] {
            assert!(!trusted.contains(ip(outside)), "{outside}");
        }
        let host = IpRange::parse("2001:db8::7/128").unwrap();
        assert!(host.contains(ip("2001:db8::7")) && !host.contains(ip("2001:db8::8")));
        assert!(
            IpRange::parse("1.2.3.4/32")
                .unwrap()
                .contains(ip("1.2.3.4"))
        );
    }

    #[test]
    fn a_bad_trusted_proxy_stops_start_up_naming_the_entry() {
        for entry in [
            "proxy.internal",
            "10.0.0.0/33",
            "10.0.0.0/-1",
            "10.0.0.0/+8",
            "fd00::/129",
            "10.0.0.0/",
            "10.1.2.3/8",
            "0.0.0.0/0",
            "::/0",
            "::ffff:0.0.0.0/96",
            "1.2.3",
            "127.0.0.1:80",
        ] {
            let error = config(&[("TRUSTED_PROXIES", &format!("127.0.0.1, {entry}"))]).unwrap_err();
            assert_eq!(error.var, "TRUSTED_PROXIES", "{entry}");
            let message = error.to_string();
            assert!(message.starts_with("TRUSTED_PROXIES"), "{message}");
            assert!(message.contains(&format!("'{entry}'")), "{message}");
        }
        let hint = config(&[("TRUSTED_PROXIES", "10.1.2.3/8")]).unwrap_err();
        assert!(hint.reason.contains("10.0.0.0/8"), "{}", hint.reason);
    }
}
