//! Building [`Config`] from the table's values: every value has passed its own rule already
//! ([`Values::read`]); what is here are the rules that relate variables to each other
//! (production needs the durable store and a secret, the default admin key keeps every listener
//! on loopback, STORE and SIDESTORE go together, EMAIL_NOTIFY needs SMTP_URL).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use secrecy::SecretString;

use super::values::Values;
use super::{
    AlertSettings, CertAndKey, Config, ConfigError, ConfigSource, DEFAULT_ADMIN_KEY, EngineTls,
    StoreKind, invalid,
};

impl Config {
    /// Reads and validates every variable.
    pub fn from_source(source: &dyn ConfigSource) -> Result<Config, ConfigError> {
        let mut values = Values::read(source)?;
        let node_env = values.text("NODE_ENV")?;
        let qm_env = values.text("QM_ENV")?;
        let production = [node_env, qm_env]
            .iter()
            .flatten()
            .any(|value| value.trim() == "production");

        let admin_key = values.required_text("ADMIN_KEY")?;
        let default_key = admin_key == DEFAULT_ADMIN_KEY;
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
        let host = values.ip("HOST")?.unwrap_or(IpAddr::V4(default_host));
        check_reach("HOST", host, default_key)?;
        let port: u16 = values.number("PORT")?;
        let admin_host = values.required_ip("ADMIN_HOST")?;
        check_reach("ADMIN_HOST", admin_host, default_key)?;
        let admin_port: u16 = values.number("ADMIN_PORT")?;
        let engine_addr = values.socket_addr("ENGINE_ADDR")?;
        let engine_connect = values.text("ENGINE_CONNECT")?;

        let store = values.required_text("STORE")?;
        let store = StoreKind::from_name(&store)
            .ok_or_else(|| invalid("STORE", format!("'{store}' is not one of memory, valkey")))?;
        if production && store != StoreKind::Valkey {
            return Err(invalid(
                "STORE",
                "production requires STORE=valkey SIDESTORE=pg",
            ));
        }
        check_sidestore(store, values.text("SIDESTORE")?.as_deref())?;
        let valkey_url = values.required_text("VALKEY_URL")?;
        let database_url = values.required_text("DATABASE_URL")?;

        let secret = values.text("SECRET")?;
        let secret_is_configured = secret.is_some();
        let secret = match secret {
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

        let engine_token = values.text("ENGINE_TOKEN")?;
        check_engine_reach(engine_addr, secret_is_configured || engine_token.is_some())?;
        if engine_connect.is_some() && !(secret_is_configured || engine_token.is_some()) {
            return Err(invalid(
                "ENGINE_CONNECT",
                "names an engine in another process, whose credential this one cannot know: set SECRET (or ENGINE_TOKEN) to the same value on every process",
            ));
        }
        let engine_tls = engine_tls(&mut values)?;

        let email_notify = values.flag("EMAIL_NOTIFY")?;
        let smtp_url = values.text("SMTP_URL")?;
        if email_notify && smtp_url.is_none() {
            return Err(invalid(
                "SMTP_URL",
                "required with EMAIL_NOTIFY=1 (e.g. smtp://127.0.0.1:25 or smtps://user:pass@mail.example:465)",
            ));
        }

        let config = Config {
            production,
            gateway_addr: SocketAddr::new(host, port),
            admin_addr: SocketAddr::new(admin_host, admin_port),
            engine_addr,
            engine_connect,
            engine_token: engine_token.map(SecretString::from),
            engine_tls,
            store,
            valkey_url,
            database_url,
            secret_is_configured,
            secret: SecretString::from(secret),
            secret_previous: values.text("SECRET_PREVIOUS")?.map(SecretString::from),
            token_sign_v2: values.flag("TOKEN_SIGN_V2")?,
            token_max_age_sec: values.number("TOKEN_MAX_AGE_SEC")?,
            queue_cookie_max_age_sec: values.number("QUEUE_COOKIE_MAX_AGE_SEC")?,
            admin_key: SecretString::from(admin_key),
            public_api_key: values.text("PUBLIC_API_KEY")?.map(SecretString::from),
            admin_auth_fail_per_min: values.number("ADMIN_AUTH_FAIL_PER_MIN")?,
            admin_auth_lockout_sec: values.number("ADMIN_AUTH_LOCKOUT_SEC")?,
            join_limit_per_min: values.number("JOIN_LIMIT_PER_MIN")?,
            check_limit_per_min: values.number("CHECK_LIMIT_PER_MIN")?,
            sse_max_total: values.number("SSE_MAX_TOTAL")?,
            sse_per_ip: values.number("SSE_PER_IP")?,
            room_cookie_cap: values.number("ROOM_COOKIE_CAP")?,
            status_limit_per_min: values.number("STATUS_LIMIT_PER_MIN")?,
            page_limit_per_min: values.number("PAGE_LIMIT_PER_MIN")?,
            stream_open_limit_per_min: values.number("STREAM_OPEN_LIMIT_PER_MIN")?,
            public_url: values.text("PUBLIC_URL")?,
            header_read_timeout_sec: values.number("HEADER_READ_TIMEOUT_SEC")?,
            keepalive_idle_sec: values.number("KEEPALIVE_IDLE_SEC")?,
            max_header_bytes: values.number("MAX_HEADER_BYTES")?,
            max_url_bytes: values.number("MAX_URL_BYTES")?,
            max_cookies: values.number("MAX_COOKIES")?,
            max_connections: values.optional_number("MAX_CONNECTIONS")?,
            prequeue_max: values.number("PREQUEUE_MAX")?,
            autotune_probe_ms: values.number("AUTOTUNE_PROBE_MS")?,
            gateway_metrics_addr: values.optional_socket_addr("GATEWAY_METRICS_ADDR")?,
            alert_webhook_url: values.text("ALERT_WEBHOOK_URL")?.map(SecretString::from),
            alerts: AlertSettings {
                eval_ms: values.number("ALERT_EVAL_MS")?,
                surge_per_min: values.number("ALERT_SURGE_PER_MIN")?,
                surge_window_sec: values.number("ALERT_SURGE_WINDOW_SEC")?,
                stall_sec: values.number("ALERT_STALL_SEC")?,
                resolve_sec: values.number("ALERT_RESOLVE_SEC")?,
            },
            shutdown_drain_sec: values.number("SHUTDOWN_DRAIN_SEC")?,
            trusted_proxies: values.ip_ranges("TRUSTED_PROXIES")?.unwrap_or_default(),
            inline_hosts: values.inline_hosts("INLINE_HOSTS")?.unwrap_or_default(),
            inline_origin_timeout_sec: values.number("INLINE_ORIGIN_TIMEOUT_SEC")?,
            email_notify,
            smtp_url: smtp_url.map(SecretString::from),
            email_from: values.required_text("EMAIL_FROM")?,
            waiting_assets_keep: values
                .asset_names("WAITING_ASSETS_KEEP")?
                .unwrap_or_default(),
            // Only `json` changes the format; the binary has always ignored anything else.
            log_json: values.text("LOG_FORMAT")?.as_deref() == Some("json"),
            log_level: values.text("LOG_LEVEL")?,
            rust_log: values.text("RUST_LOG")?,
        };
        // A variable of the table that nothing above takes would be checked and then ignored.
        debug_assert!(
            values.is_drained(),
            "configuration variables read but not used: {:?}",
            values.leftover()
        );
        Ok(config)
    }
}

/// A listener beyond loopback needs a real admin key: the default one is public knowledge.
fn check_reach(var: &'static str, ip: IpAddr, default_key: bool) -> Result<(), ConfigError> {
    if default_key && !ip.is_loopback() {
        return Err(invalid(
            var,
            format!(
                "{ip} is not loopback, and ADMIN_KEY is the default key; set ADMIN_KEY to a long random key to listen beyond this machine"
            ),
        ));
    }
    Ok(())
}

/// An engine port beyond loopback must demand a credential the other processes can share: one
/// derived from a random per-boot SECRET would lock every gateway out, so the setting is
/// refused rather than left open or broken.
fn check_engine_reach(addr: SocketAddr, shared_credential: bool) -> Result<(), ConfigError> {
    if addr.ip().is_loopback() || shared_credential {
        return Ok(());
    }
    Err(invalid(
        "ENGINE_ADDR",
        format!(
            "{addr} is not loopback, and the engine's credential would be random per boot; set SECRET (or ENGINE_TOKEN) to the same value on every process to open the engine port beyond this machine"
        ),
    ))
}

/// ENGINE_TLS_CERT and ENGINE_TLS_KEY go together; the client side takes a CA and a name.
fn engine_tls(values: &mut Values) -> Result<EngineTls, ConfigError> {
    let cert = values.text("ENGINE_TLS_CERT")?;
    let key = values.text("ENGINE_TLS_KEY")?;
    let server = match (cert, key) {
        (Some(cert), Some(key)) => Some(CertAndKey { cert, key }),
        (None, None) => None,
        (Some(_), None) => {
            return Err(invalid("ENGINE_TLS_KEY", "required with ENGINE_TLS_CERT"));
        }
        (None, Some(_)) => {
            return Err(invalid("ENGINE_TLS_CERT", "required with ENGINE_TLS_KEY"));
        }
    };
    Ok(EngineTls {
        server,
        ca: values.text("ENGINE_TLS_CA")?,
        domain: values.text("ENGINE_TLS_DOMAIN")?,
    })
}

/// The journal goes with the durable store: `STORE=valkey SIDESTORE=pg`, or neither.
fn check_sidestore(store: StoreKind, sidestore: Option<&str>) -> Result<(), ConfigError> {
    match (store, sidestore) {
        (StoreKind::Valkey, Some("pg")) | (StoreKind::Memory, None | Some("memory")) => Ok(()),
        (StoreKind::Valkey, None) => Err(invalid(
            "SIDESTORE",
            "STORE=valkey needs SIDESTORE=pg (the journal)",
        )),
        (StoreKind::Valkey, Some(other)) => {
            Err(invalid("SIDESTORE", format!("'{other}' is not pg")))
        }
        (StoreKind::Memory, Some(other)) => Err(invalid(
            "SIDESTORE",
            format!("'{other}' needs STORE=valkey; STORE=memory keeps no journal"),
        )),
    }
}
