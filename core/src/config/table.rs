//! Every environment variable of every process, declared once: its name, what unset means, the
//! rule a value must pass, whether it is a secret, which processes read it, how the health view
//! shows it and the start-up warning it may raise. Parsing ([`super::values`]), the redacted
//! view of `/api/admin/health` ([`super::Config::public_json`]) and the warnings
//! ([`super::Config::warnings`]) all walk [`VARIABLES`]; README.md's configuration table is
//! checked against it by a test.

use serde_json::{Value, json};

use super::{
    Config, DEFAULT_ADMIN_KEY, DEFAULT_DATABASE_URL, DEFAULT_EMAIL_FROM, DEFAULT_VALKEY_URL,
    StoreKind,
};

/// One environment variable.
#[derive(Debug)]
pub struct Variable {
    /// Exactly as the spec spells it.
    pub name: &'static str,
    /// What the process does when the variable is unset (or blank).
    pub default: Fallback,
    /// What a value must be; a value that breaks it stops start-up naming the variable.
    pub rule: Rule,
    /// A secret (or a URL that may carry a password): its value never reaches a log or a view.
    pub secret: bool,
    /// The processes that read it.
    pub read_by: &'static [Process],
    /// How `/api/admin/health` shows the effective value.
    pub shown: Shown,
    /// The start-up warning this variable raises, if any.
    pub warning: Option<Warning>,
}

/// What an unset variable means.
#[derive(Debug, Clone, Copy)]
pub enum Fallback {
    /// This value, read through the variable's rule exactly as if it had been set.
    Value(&'static str),
    /// Nothing: the code decides, as described here for people.
    Described(&'static str),
}

/// What a value must be.
#[derive(Debug, Clone, Copy)]
pub enum Rule {
    /// Any text.
    Text,
    /// Text of at least this many characters (keys and secrets).
    MinLength(usize),
    /// A whole number within `min..=max`.
    Number { min: u64, max: u64 },
    /// `0`, `1`, `false` or `true`.
    Flag,
    /// One of these words.
    OneOf(&'static [&'static str]),
    /// An IP address (IPv6 may be bracketed) or `localhost`.
    Host,
    /// `host:port`, the host an IP address or `localhost`.
    SocketAddr,
    /// `host:port`, the host a DNS name or an IP address (IPv6 bracketed), port 1–65535.
    HostPort,
    /// A URL of one of these schemes; `example` is quoted in the error.
    Url {
        schemes: &'static [&'static str],
        example: &'static str,
    },
    /// An `smtp://` or `smtps://` relay URL with an optional `tls=` query.
    SmtpUrl,
    /// `local@domain` or `Name <local@domain>`.
    Mailbox,
    /// Comma-separated IP addresses and CIDR ranges.
    IpRanges,
    /// Hashed waiting-page asset names (`waiting-<hash>.css|js`).
    AssetNames,
    /// An absolute `http(s)://` URL with a host and no query, fragment or credentials.
    PublicUrl,
    /// Comma-separated `host[:port]=roomId` entries (INLINE_HOSTS).
    InlineHosts,
}

/// A process of the product (`qm all` is all three).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Process {
    Engine,
    Gateway,
    Admin,
}

impl Process {
    /// Every process: what `qm all` runs.
    pub const ALL: &'static [Process] = &[Process::Engine, Process::Gateway, Process::Admin];
}

/// How the health view shows a variable.
#[derive(Debug, Clone, Copy)]
pub enum Shown {
    /// The effective value as it is.
    Value(fn(&Config) -> Value),
    /// A URL, with any password replaced by `***` (`null` when there is none).
    Url(fn(&Config) -> Option<&str>),
    /// Only whether it is set: `"set"`, or `unset` (e.g. `"random per boot"`); never the value.
    Withheld {
        is_set: fn(&Config) -> bool,
        unset: &'static str,
    },
    /// Not in the view (NODE_ENV and QM_ENV show as `production`; logging is the binary's).
    Nowhere,
}

/// A setting that works but deserves an operator's attention.
#[derive(Debug, Clone, Copy)]
pub struct Warning {
    pub when: fn(&Config) -> bool,
    pub says: &'static str,
}

use Process::{Admin, Engine, Gateway};

/// Every variable, in the order the health view lists them.
pub static VARIABLES: &[Variable] = &[
    Variable {
        name: "NODE_ENV",
        default: Fallback::Described("unset"),
        rule: Rule::Text,
        secret: false,
        read_by: Process::ALL,
        shown: Shown::Nowhere,
        warning: None,
    },
    Variable {
        name: "QM_ENV",
        default: Fallback::Described("unset"),
        rule: Rule::Text,
        secret: false,
        read_by: Process::ALL,
        shown: Shown::Nowhere,
        warning: None,
    },
    Variable {
        name: "HOST",
        default: Fallback::Described("127.0.0.1 with the default ADMIN_KEY, else 0.0.0.0"),
        rule: Rule::Host,
        secret: false,
        read_by: &[Gateway],
        shown: Shown::Value(|config| json!(config.gateway_addr.ip().to_string())),
        warning: None,
    },
    Variable {
        name: "PORT",
        default: Fallback::Value("8080"),
        rule: Rule::Number {
            min: 0,
            max: 65_535,
        },
        secret: false,
        read_by: &[Gateway],
        shown: Shown::Value(|config| json!(config.gateway_addr.port())),
        warning: None,
    },
    Variable {
        name: "ADMIN_HOST",
        default: Fallback::Value("127.0.0.1"),
        rule: Rule::Host,
        secret: false,
        read_by: &[Admin],
        shown: Shown::Value(|config| json!(config.admin_addr.ip().to_string())),
        warning: None,
    },
    Variable {
        name: "ADMIN_PORT",
        default: Fallback::Value("8081"),
        rule: Rule::Number {
            min: 0,
            max: 65_535,
        },
        secret: false,
        read_by: &[Admin],
        shown: Shown::Value(|config| json!(config.admin_addr.port())),
        warning: None,
    },
    Variable {
        name: "ENGINE_ADDR",
        default: Fallback::Value("127.0.0.1:50051"),
        rule: Rule::SocketAddr,
        secret: false,
        read_by: Process::ALL,
        shown: Shown::Value(|config| json!(config.engine_addr.to_string())),
        warning: None,
    },
    Variable {
        name: "ENGINE_CONNECT",
        default: Fallback::Described("ENGINE_ADDR"),
        rule: Rule::HostPort,
        secret: false,
        read_by: &[Gateway, Admin],
        shown: Shown::Value(|config| json!(config.engine_target())),
        warning: None,
    },
    Variable {
        name: "ENGINE_TOKEN",
        default: Fallback::Described("derived from SECRET"),
        rule: Rule::MinLength(16),
        secret: true,
        read_by: Process::ALL,
        shown: Shown::Withheld {
            is_set: |config| config.engine_token.is_some(),
            unset: "derived from SECRET",
        },
        warning: None,
    },
    Variable {
        name: "ENGINE_TLS_CERT",
        default: Fallback::Described("unset (plain gRPC)"),
        rule: Rule::Text,
        secret: false,
        read_by: &[Engine],
        shown: Shown::Value(|config| {
            json!(config.engine_tls.server.as_ref().map(|pair| &pair.cert))
        }),
        warning: None,
    },
    Variable {
        name: "ENGINE_TLS_KEY",
        default: Fallback::Described("unset (plain gRPC)"),
        rule: Rule::Text,
        secret: false,
        read_by: &[Engine],
        shown: Shown::Value(|config| {
            json!(config.engine_tls.server.as_ref().map(|pair| &pair.key))
        }),
        warning: None,
    },
    Variable {
        name: "ENGINE_TLS_CA",
        default: Fallback::Described("unset (plain gRPC)"),
        rule: Rule::Text,
        secret: false,
        read_by: &[Gateway, Admin],
        shown: Shown::Value(|config| json!(config.engine_tls.ca)),
        warning: None,
    },
    Variable {
        name: "ENGINE_TLS_DOMAIN",
        default: Fallback::Described("the host of ENGINE_ADDR"),
        rule: Rule::Text,
        secret: false,
        read_by: &[Gateway, Admin],
        shown: Shown::Value(|config| json!(config.engine_tls.domain)),
        warning: None,
    },
    Variable {
        name: "STORE",
        default: Fallback::Value("memory"),
        rule: Rule::OneOf(&["memory", "valkey"]),
        secret: false,
        read_by: &[Engine],
        shown: Shown::Value(|config| json!(config.store.as_str())),
        warning: Some(Warning {
            when: |config| config.store == StoreKind::Memory,
            says: "STORE=memory keeps nothing across a restart",
        }),
    },
    Variable {
        name: "SIDESTORE",
        default: Fallback::Described("unset"),
        rule: Rule::OneOf(&["pg", "memory"]),
        secret: false,
        read_by: &[Engine],
        shown: Shown::Value(|config| match config.store {
            StoreKind::Valkey => json!("pg"),
            StoreKind::Memory => json!("none"),
        }),
        warning: None,
    },
    Variable {
        name: "VALKEY_URL",
        default: Fallback::Value(DEFAULT_VALKEY_URL),
        rule: Rule::Url {
            schemes: &["redis", "rediss", "redis-cluster", "rediss-cluster"],
            example: DEFAULT_VALKEY_URL,
        },
        secret: true,
        read_by: &[Engine],
        shown: Shown::Url(|config| Some(config.valkey_url.as_str())),
        warning: None,
    },
    Variable {
        name: "DATABASE_URL",
        default: Fallback::Value(DEFAULT_DATABASE_URL),
        rule: Rule::Url {
            schemes: &["postgres", "postgresql"],
            example: DEFAULT_DATABASE_URL,
        },
        secret: true,
        read_by: &[Engine],
        shown: Shown::Url(|config| Some(config.database_url.as_str())),
        warning: None,
    },
    Variable {
        name: "SECRET",
        default: Fallback::Described("random per boot"),
        rule: Rule::MinLength(16),
        secret: true,
        read_by: Process::ALL,
        shown: Shown::Withheld {
            is_set: |config| config.secret_is_configured,
            unset: "random per boot",
        },
        warning: Some(Warning {
            when: |config| !config.secret_is_configured,
            says: "SECRET is unset: tokens are signed with a random per-boot secret and every place is lost on restart",
        }),
    },
    Variable {
        name: "SECRET_PREVIOUS",
        default: Fallback::Described("unset"),
        rule: Rule::Text,
        secret: true,
        read_by: Process::ALL,
        shown: Shown::Withheld {
            is_set: |config| config.secret_previous.is_some(),
            unset: "unset",
        },
        warning: None,
    },
    Variable {
        name: "TOKEN_SIGN_V2",
        default: Fallback::Value("0"),
        rule: Rule::Flag,
        secret: false,
        read_by: Process::ALL,
        shown: Shown::Value(|config| json!(config.token_sign_v2)),
        warning: None,
    },
    Variable {
        name: "TOKEN_MAX_AGE_SEC",
        default: Fallback::Value("86400"),
        rule: Rule::Number {
            min: 60,
            max: 31_536_000,
        },
        secret: false,
        read_by: &[Engine, Gateway],
        shown: Shown::Value(|config| json!(config.token_max_age_sec)),
        warning: None,
    },
    Variable {
        name: "QUEUE_COOKIE_MAX_AGE_SEC",
        default: Fallback::Value("86400"),
        rule: Rule::Number {
            min: 60,
            max: 31_536_000,
        },
        secret: false,
        read_by: &[Gateway],
        shown: Shown::Value(|config| json!(config.queue_cookie_max_age_sec)),
        warning: None,
    },
    Variable {
        name: "ADMIN_KEY",
        default: Fallback::Value(DEFAULT_ADMIN_KEY),
        rule: Rule::MinLength(8),
        secret: true,
        read_by: &[Gateway, Admin],
        shown: Shown::Withheld {
            is_set: |config| !config.uses_default_admin_key(),
            unset: "default (admin-dev)",
        },
        warning: Some(Warning {
            when: Config::uses_default_admin_key,
            says: "ADMIN_KEY is the default key: the server only binds loopback",
        }),
    },
    Variable {
        name: "PUBLIC_API_KEY",
        default: Fallback::Described("unset"),
        rule: Rule::MinLength(8),
        secret: true,
        read_by: &[Gateway],
        shown: Shown::Withheld {
            is_set: |config| config.public_api_key.is_some(),
            unset: "unset",
        },
        warning: None,
    },
    Variable {
        name: "ADMIN_AUTH_FAIL_PER_MIN",
        default: Fallback::Value("10"),
        rule: Rule::Number {
            min: 1,
            max: 100_000,
        },
        secret: false,
        read_by: &[Admin],
        shown: Shown::Value(|config| json!(config.admin_auth_fail_per_min)),
        warning: None,
    },
    Variable {
        name: "ADMIN_AUTH_LOCKOUT_SEC",
        default: Fallback::Value("60"),
        rule: Rule::Number { min: 1, max: 3600 },
        secret: false,
        read_by: &[Admin],
        shown: Shown::Value(|config| json!(config.admin_auth_lockout_sec)),
        warning: None,
    },
    Variable {
        name: "JOIN_LIMIT_PER_MIN",
        default: Fallback::Value("120"),
        rule: Rule::Number {
            min: 1,
            max: 100_000_000,
        },
        secret: false,
        read_by: &[Gateway],
        shown: Shown::Value(|config| json!(config.join_limit_per_min)),
        warning: None,
    },
    Variable {
        name: "CHECK_LIMIT_PER_MIN",
        default: Fallback::Value("600"),
        rule: Rule::Number {
            min: 1,
            max: 100_000_000,
        },
        secret: false,
        read_by: &[Gateway],
        shown: Shown::Value(|config| json!(config.check_limit_per_min)),
        warning: None,
    },
    Variable {
        name: "SSE_MAX_TOTAL",
        default: Fallback::Value("50000"),
        rule: Rule::Number {
            min: 1,
            max: 10_000_000,
        },
        secret: false,
        read_by: &[Gateway],
        shown: Shown::Value(|config| json!(config.sse_max_total)),
        warning: None,
    },
    Variable {
        name: "SSE_PER_IP",
        default: Fallback::Value("20"),
        rule: Rule::Number {
            min: 1,
            max: 1_000_000,
        },
        secret: false,
        read_by: &[Gateway],
        shown: Shown::Value(|config| json!(config.sse_per_ip)),
        warning: None,
    },
    Variable {
        name: "ROOM_COOKIE_CAP",
        default: Fallback::Value("8"),
        rule: Rule::Number { min: 1, max: 50 },
        secret: false,
        read_by: &[Gateway],
        shown: Shown::Value(|config| json!(config.room_cookie_cap)),
        warning: None,
    },
    Variable {
        name: "STATUS_LIMIT_PER_MIN",
        default: Fallback::Value("600"),
        rule: Rule::Number {
            min: 1,
            max: 100_000_000,
        },
        secret: false,
        read_by: &[Gateway],
        shown: Shown::Value(|config| json!(config.status_limit_per_min)),
        warning: None,
    },
    Variable {
        name: "PAGE_LIMIT_PER_MIN",
        default: Fallback::Value("300"),
        rule: Rule::Number {
            min: 1,
            max: 100_000_000,
        },
        secret: false,
        read_by: &[Gateway],
        shown: Shown::Value(|config| json!(config.page_limit_per_min)),
        warning: None,
    },
    Variable {
        name: "STREAM_OPEN_LIMIT_PER_MIN",
        default: Fallback::Value("300"),
        rule: Rule::Number {
            min: 1,
            max: 100_000_000,
        },
        secret: false,
        read_by: &[Gateway],
        shown: Shown::Value(|config| json!(config.stream_open_limit_per_min)),
        warning: None,
    },
    Variable {
        name: "PUBLIC_URL",
        default: Fallback::Described(
            "unset: the Host header when it names this server's own address, else relative URLs",
        ),
        rule: Rule::PublicUrl,
        secret: false,
        read_by: &[Gateway],
        shown: Shown::Value(|config| json!(config.public_url)),
        warning: Some(Warning {
            when: |config| config.public_url.is_none() && !config.gateway_addr.ip().is_loopback(),
            says: "PUBLIC_URL is unset: waitingRoomUrl is relative unless a request's Host names this server's own address",
        }),
    },
    Variable {
        name: "HEADER_READ_TIMEOUT_SEC",
        default: Fallback::Value("10"),
        rule: Rule::Number { min: 1, max: 300 },
        secret: false,
        read_by: &[Gateway, Admin],
        shown: Shown::Value(|config| json!(config.header_read_timeout_sec)),
        warning: None,
    },
    Variable {
        name: "KEEPALIVE_IDLE_SEC",
        default: Fallback::Value("75"),
        rule: Rule::Number { min: 1, max: 3600 },
        secret: false,
        read_by: &[Gateway, Admin],
        shown: Shown::Value(|config| json!(config.keepalive_idle_sec)),
        warning: None,
    },
    Variable {
        name: "MAX_HEADER_BYTES",
        default: Fallback::Value("32768"),
        rule: Rule::Number {
            min: 4096,
            max: 1_048_576,
        },
        secret: false,
        read_by: &[Gateway, Admin],
        shown: Shown::Value(|config| json!(config.max_header_bytes)),
        warning: None,
    },
    Variable {
        name: "MAX_URL_BYTES",
        default: Fallback::Value("8192"),
        rule: Rule::Number {
            min: 256,
            max: 65_000,
        },
        secret: false,
        read_by: &[Gateway, Admin],
        shown: Shown::Value(|config| json!(config.max_url_bytes)),
        warning: None,
    },
    Variable {
        name: "MAX_COOKIES",
        default: Fallback::Value("200"),
        rule: Rule::Number {
            min: 1,
            max: 10_000,
        },
        secret: false,
        read_by: &[Gateway, Admin],
        shown: Shown::Value(|config| json!(config.max_cookies)),
        warning: None,
    },
    Variable {
        name: "MAX_CONNECTIONS",
        default: Fallback::Described(
            "derived from the open-file limit: (limit - 256) / 2, at least 64",
        ),
        rule: Rule::Number {
            min: 1,
            max: 10_000_000,
        },
        secret: false,
        read_by: &[Gateway, Admin],
        shown: Shown::Value(|config| json!(config.max_connections())),
        warning: None,
    },
    Variable {
        name: "PREQUEUE_MAX",
        default: Fallback::Value("1000000"),
        rule: Rule::Number {
            min: 1,
            max: 100_000_000,
        },
        secret: false,
        read_by: &[Engine],
        shown: Shown::Value(|config| json!(config.prequeue_max)),
        warning: None,
    },
    Variable {
        name: "AUTOTUNE_PROBE_MS",
        default: Fallback::Value("1000"),
        rule: Rule::Number {
            min: 100,
            max: 60_000,
        },
        secret: false,
        read_by: &[Engine],
        shown: Shown::Value(|config| json!(config.autotune_probe_ms)),
        warning: None,
    },
    Variable {
        name: "GATEWAY_METRICS_ADDR",
        default: Fallback::Described("unset: the gateway serves no metrics"),
        rule: Rule::SocketAddr,
        secret: false,
        read_by: &[Gateway],
        shown: Shown::Value(|config| {
            json!(config.gateway_metrics_addr.map(|addr| addr.to_string()))
        }),
        warning: None,
    },
    Variable {
        name: "ALERT_WEBHOOK_URL",
        default: Fallback::Described("unset: alerts are evaluated and shown, never sent"),
        rule: Rule::Url {
            schemes: &["http", "https"],
            example: "https://hooks.example.com/services/T000/B000/XXXX",
        },
        // A Slack-style webhook's path is its credential.
        secret: true,
        read_by: &[Admin],
        shown: Shown::Withheld {
            is_set: |config| config.alert_webhook_url.is_some(),
            unset: "unset",
        },
        warning: None,
    },
    Variable {
        name: "ALERT_EVAL_MS",
        default: Fallback::Value("5000"),
        rule: Rule::Number {
            min: 100,
            max: 60_000,
        },
        secret: false,
        read_by: &[Admin],
        shown: Shown::Value(|config| json!(config.alerts.eval_ms)),
        warning: None,
    },
    Variable {
        name: "ALERT_SURGE_PER_MIN",
        default: Fallback::Value("1000"),
        rule: Rule::Number {
            min: 1,
            max: 1_000_000_000,
        },
        secret: false,
        read_by: &[Admin],
        shown: Shown::Value(|config| json!(config.alerts.surge_per_min)),
        warning: None,
    },
    Variable {
        name: "ALERT_SURGE_WINDOW_SEC",
        default: Fallback::Value("60"),
        rule: Rule::Number { min: 1, max: 3600 },
        secret: false,
        read_by: &[Admin],
        shown: Shown::Value(|config| json!(config.alerts.surge_window_sec)),
        warning: None,
    },
    Variable {
        name: "ALERT_STALL_SEC",
        default: Fallback::Value("120"),
        rule: Rule::Number {
            min: 1,
            max: 86_400,
        },
        secret: false,
        read_by: &[Admin],
        shown: Shown::Value(|config| json!(config.alerts.stall_sec)),
        warning: None,
    },
    Variable {
        name: "ALERT_RESOLVE_SEC",
        default: Fallback::Value("60"),
        rule: Rule::Number { min: 0, max: 3600 },
        secret: false,
        read_by: &[Admin],
        shown: Shown::Value(|config| json!(config.alerts.resolve_sec)),
        warning: None,
    },
    Variable {
        name: "SHUTDOWN_DRAIN_SEC",
        default: Fallback::Value("10"),
        rule: Rule::Number { min: 0, max: 600 },
        secret: false,
        read_by: Process::ALL,
        shown: Shown::Value(|config| json!(config.shutdown_drain_sec)),
        warning: None,
    },
    Variable {
        name: "TRUSTED_PROXIES",
        default: Fallback::Described("empty (trust nobody)"),
        rule: Rule::IpRanges,
        secret: false,
        read_by: &[Gateway],
        shown: Shown::Value(|config| json!(config.trusted_proxies.to_strings())),
        warning: None,
    },
    Variable {
        name: "INLINE_HOSTS",
        default: Fallback::Described("empty (no inline host)"),
        rule: Rule::InlineHosts,
        secret: false,
        read_by: &[Gateway],
        shown: Shown::Value(|config| json!(config.inline_hosts.to_strings())),
        warning: None,
    },
    Variable {
        name: "INLINE_ORIGIN_TIMEOUT_SEC",
        default: Fallback::Value("30"),
        rule: Rule::Number { min: 1, max: 600 },
        secret: false,
        read_by: &[Gateway],
        shown: Shown::Value(|config| json!(config.inline_origin_timeout_sec)),
        warning: None,
    },
    Variable {
        name: "EMAIL_NOTIFY",
        default: Fallback::Value("0"),
        rule: Rule::Flag,
        secret: false,
        read_by: &[Engine, Gateway],
        shown: Shown::Value(|config| json!(config.email_notify)),
        warning: None,
    },
    Variable {
        name: "SMTP_URL",
        default: Fallback::Described("unset"),
        rule: Rule::SmtpUrl,
        secret: true,
        read_by: &[Engine],
        shown: Shown::Url(|config| {
            use secrecy::ExposeSecret as _;
            config.smtp_url.as_ref().map(|url| url.expose_secret())
        }),
        warning: None,
    },
    Variable {
        name: "EMAIL_FROM",
        default: Fallback::Value(DEFAULT_EMAIL_FROM),
        rule: Rule::Mailbox,
        secret: false,
        read_by: &[Engine],
        shown: Shown::Value(|config| json!(config.email_from)),
        warning: None,
    },
    Variable {
        name: "WAITING_ASSETS_KEEP",
        default: Fallback::Described("unset"),
        rule: Rule::AssetNames,
        secret: false,
        read_by: &[Gateway],
        shown: Shown::Value(|config| json!(config.waiting_assets_keep)),
        warning: None,
    },
    Variable {
        name: "LOG_FORMAT",
        // Only `json` changes anything; any other value keeps the text format.
        default: Fallback::Described("text"),
        rule: Rule::Text,
        secret: false,
        read_by: Process::ALL,
        shown: Shown::Nowhere,
        warning: None,
    },
    Variable {
        name: "LOG_LEVEL",
        default: Fallback::Described("info"),
        rule: Rule::Text,
        secret: false,
        read_by: Process::ALL,
        shown: Shown::Nowhere,
        warning: None,
    },
    Variable {
        name: "RUST_LOG",
        default: Fallback::Described("unset"),
        rule: Rule::Text,
        secret: false,
        read_by: Process::ALL,
        shown: Shown::Nowhere,
        warning: None,
    },
];

/// The table's entry for `name`, if it has one.
pub fn variable(name: &str) -> Option<&'static Variable> {
    VARIABLES.iter().find(|variable| variable.name == name)
}

impl Variable {
    /// Whether one of `processes` reads this variable.
    pub fn is_read_by(&self, processes: &[Process]) -> bool {
        self.read_by
            .iter()
            .any(|process| processes.contains(process))
    }
}
