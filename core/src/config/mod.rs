//! Configuration, read once from an injected source (the process environment in `main`, a map in
//! tests) into typed structs and validated at start-up. Variable names are exactly the spec's.
//! A bad value stops start-up with a message naming the variable; secrets are never printed.
//!
//! - [`table`]: every variable declared once (default, rule, secrecy, readers, view, warning).
//! - `values` and `rules`: each variable read and checked against its own rule.
//! - `parse`: [`Config::from_source`], the rules that relate variables to each other.
//! - `proxies`: TRUSTED_PROXIES' address ranges.
//! - `inline_hosts`: INLINE_HOSTS, the hosts of inline mode and their rooms.

mod fd_limit;
mod inline_hosts;
mod parse;
mod proxies;
mod rules;
pub mod table;
#[cfg(test)]
mod tests;
mod values;

use std::collections::HashMap;
use std::net::SocketAddr;

use secrecy::{ExposeSecret, SecretString};
use serde_json::{Map, Value, json};

use crate::token::Keyring;

pub use inline_hosts::{InlineHost, InlineHosts};
pub use proxies::{IpRange, TrustedProxies};
pub use table::{Process, VARIABLES, Variable};

use rules::without_password;
use table::Shown;

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

    /// The kind STORE names (`memory` or `valkey`).
    pub fn from_name(name: &str) -> Option<StoreKind> {
        match name {
            "memory" => Some(StoreKind::Memory),
            "valkey" => Some(StoreKind::Valkey),
            _ => None,
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
    /// Engine gRPC address (ENGINE_ADDR): where the engine listens, and where the others
    /// connect unless ENGINE_CONNECT says otherwise.
    pub engine_addr: SocketAddr,
    /// ENGINE_CONNECT: the engine as a gateway or admin process reaches it (`host:port`, a DNS
    /// name allowed: a Service name in Kubernetes, a service in compose).
    pub engine_connect: Option<String>,
    /// ENGINE_TOKEN: the credential every engine call carries; `None` derives it from SECRET.
    engine_token: Option<SecretString>,
    /// TLS of the engine's port (ENGINE_TLS_*): plain gRPC when unset.
    pub engine_tls: EngineTls,
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
    /// Wrong admin credentials one client address may present within ADMIN_AUTH_LOCKOUT_SEC
    /// before it is locked out (counted per admin process).
    pub admin_auth_fail_per_min: u32,
    /// The window failures are counted over, and how long a lockout lasts after the failure
    /// that caused it ages out (60: the spec's "per minute").
    pub admin_auth_lockout_sec: u64,
    pub join_limit_per_min: u32,
    /// Door checks a minute per client address (CHECK_LIMIT_PER_MIN); a vouched check counts
    /// against the vouched address, not the connector calling for it.
    pub check_limit_per_min: u32,
    pub sse_max_total: usize,
    pub sse_per_ip: usize,
    pub room_cookie_cap: usize,
    /// Status reads a minute per client address (STATUS_LIMIT_PER_MIN).
    pub status_limit_per_min: u32,
    /// Waiting-page loads and form joins a minute per client address (PAGE_LIMIT_PER_MIN).
    pub page_limit_per_min: u32,
    /// Event-stream opens a minute per client address (STREAM_OPEN_LIMIT_PER_MIN).
    pub stream_open_limit_per_min: u32,
    /// PUBLIC_URL without a trailing slash: the base of every absolute URL the gateway builds.
    pub public_url: Option<String>,
    /// Seconds a connection has to send a complete request head (HEADER_READ_TIMEOUT_SEC).
    pub header_read_timeout_sec: u64,
    /// Seconds an idle keep-alive connection stays open (KEEPALIVE_IDLE_SEC).
    pub keepalive_idle_sec: u64,
    /// Largest request head, request line and headers together (MAX_HEADER_BYTES).
    pub max_header_bytes: usize,
    /// Longest request line (MAX_URL_BYTES).
    pub max_url_bytes: usize,
    /// Most cookies one request may carry (MAX_COOKIES).
    pub max_cookies: usize,
    /// MAX_CONNECTIONS as set; [`Config::max_connections`] derives it when unset.
    max_connections: Option<usize>,
    /// Hard ceiling of one room's pre-queue (PREQUEUE_MAX): a join over it is 503 prequeue_full.
    pub prequeue_max: u64,
    /// How often the rate controller probes a room's health URL (AUTOTUNE_PROBE_MS).
    pub autotune_probe_ms: u64,
    /// Where each gateway serves its own Prometheus metrics (GATEWAY_METRICS_ADDR), an address
    /// that stays private; `None`: no metrics listener.
    pub gateway_metrics_addr: Option<SocketAddr>,
    /// Where alerts are sent (ALERT_WEBHOOK_URL); its path may be a credential, never printed.
    alert_webhook_url: Option<SecretString>,
    /// The alert rules' thresholds (ALERT_*).
    pub alerts: AlertSettings,
    /// Seconds a stopping process waits for open requests and streams before it exits.
    pub shutdown_drain_sec: u64,
    /// Peers whose X-Forwarded-For the gateway believes (TRUSTED_PROXIES); empty trusts nobody.
    pub trusted_proxies: TrustedProxies,
    /// Hosts this gateway stands in front of, each with its room (INLINE_HOSTS): inline mode.
    pub inline_hosts: InlineHosts,
    /// Seconds the inline gate waits for an origin's answer to begin (INLINE_ORIGIN_TIMEOUT_SEC).
    pub inline_origin_timeout_sec: u64,
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
    /// LOG_FORMAT=json: the binary logs JSON lines.
    log_json: bool,
    /// LOG_LEVEL: the binary's log filter (e.g. `debug`, `qm_engine=trace`).
    log_level: Option<String>,
    /// RUST_LOG: the usual tracing filter, tried when LOG_LEVEL is unset or does not parse.
    rust_log: Option<String>,
}

/// The default connection ceiling for an open-file limit (`None`: unknown, taken as 1,024).
pub fn derived_max_connections(open_file_limit: Option<u64>) -> usize {
    let limit = open_file_limit.unwrap_or(1024);
    let ceiling = limit.saturating_sub(256) / 2;
    usize::try_from(ceiling.clamp(64, 1_000_000)).unwrap_or(64)
}

/// The files of the engine port's TLS, as configured (read when the processes start).
/// The alert rules' thresholds (OPERATIONS.md, Alerts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlertSettings {
    /// How often the rules are evaluated (ALERT_EVAL_MS).
    pub eval_ms: u64,
    /// Arrivals a minute in one room that page a surge (ALERT_SURGE_PER_MIN).
    pub surge_per_min: u64,
    /// The window arrivals are counted over, scaled to a minute (ALERT_SURGE_WINDOW_SEC).
    pub surge_window_sec: u64,
    /// Seconds people may wait with nobody admitted before a stall pages (ALERT_STALL_SEC).
    pub stall_sec: u64,
    /// Seconds a condition must stay clear before its alert resolves (ALERT_RESOLVE_SEC).
    pub resolve_sec: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineTls {
    /// ENGINE_TLS_CERT and ENGINE_TLS_KEY: the engine serves TLS with this certificate chain
    /// and key (PEM files).
    pub server: Option<CertAndKey>,
    /// ENGINE_TLS_CA: the gateway and admin reach the engine over TLS, trusting this CA (PEM).
    pub ca: Option<String>,
    /// ENGINE_TLS_DOMAIN: the name the engine's certificate must carry (else ENGINE_ADDR's host).
    pub domain: Option<String>,
}

/// A certificate chain and its private key, as PEM file paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertAndKey {
    pub cert: String,
    pub key: String,
}

/// HKDF info of the engine credential derived from SECRET.
pub const ENGINE_TOKEN_INFO: &[u8] = b"qm:engine-token";

impl Config {
    /// The credential every call to the engine carries, and the one the engine demands:
    /// ENGINE_TOKEN, else HKDF(SECRET, `qm:engine-token`) in hex. Never log it.
    pub fn engine_credential(&self) -> SecretString {
        if let Some(token) = &self.engine_token {
            return token.clone();
        }
        let key = self
            .keyring()
            .derived_keys(ENGINE_TOKEN_INFO)
            .first()
            .copied()
            .unwrap_or_default();
        SecretString::from(hex::encode(key))
    }

    /// Where the edges reach the engine: ENGINE_CONNECT, else ENGINE_ADDR.
    pub fn engine_target(&self) -> String {
        self.engine_connect
            .clone()
            .unwrap_or_else(|| self.engine_addr.to_string())
    }

    /// Whether separate processes can share the engine credential: SECRET or ENGINE_TOKEN is
    /// set. Without either, each process derives its own from a random per-boot secret, which
    /// only the components of one `qm all` share.
    pub fn engine_credential_is_shared(&self) -> bool {
        self.secret_is_configured || self.engine_token.is_some()
    }

    /// Open connections each HTTP listener holds before it sheds new ones with 503: MAX_CONNECTIONS,
    /// else half of what the open-file limit leaves after 256 kept for everything else, at
    /// least 64.
    pub fn max_connections(&self) -> usize {
        self.max_connections
            .unwrap_or_else(|| derived_max_connections(fd_limit::open_file_limit()))
    }

    /// ALERT_WEBHOOK_URL as configured (its path may be a credential: never log it).
    pub fn alert_webhook_url(&self) -> Option<&SecretString> {
        self.alert_webhook_url.as_ref()
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

    /// The effective configuration for /api/admin/health, with every secret withheld: each
    /// variable of the table as its `shown` says, after `production` (NODE_ENV or QM_ENV).
    pub fn public_json(&self) -> Value {
        let mut view = Map::new();
        view.insert("production".to_owned(), json!(self.production));
        for variable in VARIABLES {
            let shown = match variable.shown {
                Shown::Value(show) => show(self),
                Shown::Url(url) => json!(url(self).map(without_password)),
                Shown::Withheld { is_set, unset } => {
                    json!(if is_set(self) { "set" } else { unset })
                }
                Shown::Nowhere => continue,
            };
            view.insert(variable.name.to_owned(), shown);
        }
        Value::Object(view)
    }

    /// Settings that work but deserve an operator's attention, in table order.
    pub fn warnings(&self) -> Vec<String> {
        self.warnings_for(Process::ALL)
    }

    /// The warnings about variables one of `processes` reads: what `qm gateway` alone, say,
    /// should tell its operator at start-up.
    pub fn warnings_for(&self, processes: &[Process]) -> Vec<String> {
        VARIABLES
            .iter()
            .filter(|variable| variable.is_read_by(processes))
            .filter_map(|variable| variable.warning)
            .filter(|warning| (warning.when)(self))
            .map(|warning| warning.says.to_owned())
            .collect()
    }

    /// Whether logs are JSON lines (LOG_FORMAT=json) rather than text.
    pub fn log_json(&self) -> bool {
        self.log_json
    }

    /// The log filters to try, in order: LOG_LEVEL, then RUST_LOG (the first that parses wins;
    /// `info` when none does).
    pub fn log_filters(&self) -> impl Iterator<Item = &str> {
        [self.log_level.as_deref(), self.rust_log.as_deref()]
            .into_iter()
            .flatten()
    }
}
