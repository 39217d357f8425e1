//! Configuration tests: each variable's rule and message, the rules between variables, the
//! redacted view, and the table against itself and against README.md.

use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;

use serde_json::{Value, json};

use super::table::{Fallback, Shown, VARIABLES};
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
fn an_engine_port_beyond_loopback_needs_a_credential_other_processes_can_share() {
    let open = config(&[("ENGINE_ADDR", "10.0.0.5:50051")]).unwrap_err();
    assert_eq!(open.var, "ENGINE_ADDR");
    assert!(open.to_string().contains("SECRET"), "{open}");
    for shared in [
        ("SECRET", "a-secret-of-sixteen-or-more"),
        ("ENGINE_TOKEN", "an-engine-token-of-16+"),
    ] {
        let reachable = config(&[("ENGINE_ADDR", "10.0.0.5:50051"), shared]).expect("valid");
        assert!(reachable.engine_credential_is_shared());
    }
    assert!(!Config::defaults().engine_credential_is_shared());
}

#[test]
fn engine_connect_names_the_engine_by_host_and_port_and_needs_a_shared_credential() {
    let secret = ("SECRET", "a-secret-of-sixteen-or-more");
    assert_eq!(Config::defaults().engine_target(), "127.0.0.1:50051");
    for (given, target) in [
        ("qm-engine:50051", "qm-engine:50051"),
        (
            " qm-engine.queue.svc.cluster.local:7000 ",
            "qm-engine.queue.svc.cluster.local:7000",
        ),
        ("10.0.0.7:50051", "10.0.0.7:50051"),
        ("[fd00::7]:50051", "[fd00::7]:50051"),
    ] {
        let edge = config(&[("ENGINE_CONNECT", given), secret]).expect(given);
        assert_eq!(edge.engine_target(), target);
        assert_eq!(edge.public_json()["ENGINE_CONNECT"], json!(target));
    }
    for bad in [
        "qm-engine",
        "qm-engine:0",
        "qm-engine:70000",
        "http://qm-engine:50051",
        "-engine:50051",
        "qm_engine:50051",
        "[not-v6]:50051",
        ":50051",
    ] {
        let refused = config(&[("ENGINE_CONNECT", bad), secret]).unwrap_err();
        assert_eq!(refused.var, "ENGINE_CONNECT", "{bad}");
        assert!(refused.to_string().contains("host:port"), "{refused}");
    }
    let alone = config(&[("ENGINE_CONNECT", "qm-engine:50051")]).unwrap_err();
    assert_eq!(alone.var, "ENGINE_CONNECT");
    assert!(alone.to_string().contains("SECRET"), "{alone}");
}

#[test]
fn the_engine_credential_is_the_token_or_derived_from_secret() {
    use secrecy::ExposeSecret;
    let token = config(&[("ENGINE_TOKEN", "an-engine-token-of-16+")]).unwrap();
    assert_eq!(
        token.engine_credential().expose_secret(),
        "an-engine-token-of-16+"
    );
    let secret = [("SECRET", "a-secret-of-sixteen-or-more")];
    let (one, two) = (config(&secret).unwrap(), config(&secret).unwrap());
    let derived = one.engine_credential();
    assert_eq!(
        derived.expose_secret(),
        two.engine_credential().expose_secret()
    );
    assert_eq!(derived.expose_secret().len(), 64, "hex of 32 bytes");
    assert!(!derived.expose_secret().contains("a-secret"));
    let short = config(&[("ENGINE_TOKEN", "short")]).unwrap_err();
    assert_eq!(short.var, "ENGINE_TOKEN");
}

#[test]
fn engine_tls_files_come_in_pairs() {
    let half = config(&[("ENGINE_TLS_CERT", "/etc/qm/engine.pem")]).unwrap_err();
    assert!(half.var.starts_with("ENGINE_TLS_"), "{half}");
    let both = config(&[
        ("ENGINE_TLS_CERT", "/etc/qm/engine.pem"),
        ("ENGINE_TLS_KEY", "/etc/qm/engine.key"),
    ])
    .unwrap();
    assert!(both.engine_tls.server.is_some());
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
    let mut clustered = durable.to_vec();
    clustered.push((
        "VALKEY_URL",
        "redis-cluster://:pw-0123@10.0.0.1:6379?node=10.0.0.2:6379&node=10.0.0.3:6379",
    ));
    let shown = config(&clustered)
        .expect("a cluster URL is valid")
        .public_json();
    assert_eq!(
        shown["VALKEY_URL"],
        "redis-cluster://:***@10.0.0.1:6379?node=10.0.0.2:6379&node=10.0.0.3:6379"
    );
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

#[test]
fn the_table_names_each_variable_once() {
    let mut seen = BTreeSet::new();
    for variable in VARIABLES {
        assert!(seen.insert(variable.name), "{} twice", variable.name);
        assert!(
            variable
                .name
                .bytes()
                .all(|byte| byte.is_ascii_uppercase() || byte.is_ascii_digit() || byte == b'_'),
            "{}",
            variable.name
        );
        assert!(
            !variable.read_by.is_empty(),
            "{} is read by nobody",
            variable.name
        );
    }
}

#[test]
fn every_default_value_passes_its_rule() {
    for variable in VARIABLES {
        if let Fallback::Value(default) = variable.default {
            assert!(
                variable.rule.parse(default).is_ok(),
                "{}'s default {default:?}",
                variable.name
            );
        }
    }
}

#[test]
fn a_secret_is_never_shown_as_its_value() {
    for variable in VARIABLES.iter().filter(|variable| variable.secret) {
        assert!(
            !matches!(variable.shown, Shown::Value(_)),
            "{} is a secret shown as it is",
            variable.name
        );
    }
}

/// A valid value for every variable of the table, secrets recognisable in the output.
fn every_variable_set() -> HashMap<&'static str, &'static str> {
    HashMap::from([
        ("NODE_ENV", "production"),
        ("QM_ENV", "production"),
        ("HOST", "0.0.0.0"),
        ("PORT", "9080"),
        ("ADMIN_HOST", "::1"),
        ("ADMIN_PORT", "9081"),
        ("ENGINE_ADDR", "localhost:50052"),
        ("ENGINE_TOKEN", "the-engine-token-value-1"),
        ("ENGINE_TLS_CERT", "/etc/qm/engine.pem"),
        ("ENGINE_TLS_KEY", "/etc/qm/engine.key"),
        ("ENGINE_TLS_CA", "/etc/qm/ca.pem"),
        ("ENGINE_TLS_DOMAIN", "engine.internal"),
        ("STORE", "valkey"),
        ("SIDESTORE", "pg"),
        ("VALKEY_URL", "redis://:valkey-password-1@valkey:6379"),
        ("DATABASE_URL", "postgres://qm:database-password-1@db/qm"),
        ("SECRET", "the-secret-value-0123456789"),
        ("SECRET_PREVIOUS", "the-previous-secret-0123"),
        ("TOKEN_SIGN_V2", "1"),
        ("TOKEN_MAX_AGE_SEC", "3600"),
        ("QUEUE_COOKIE_MAX_AGE_SEC", "7200"),
        ("ADMIN_KEY", "the-admin-key-value"),
        ("PUBLIC_API_KEY", "the-public-api-key"),
        ("ADMIN_AUTH_FAIL_PER_MIN", "26"),
        ("ADMIN_AUTH_LOCKOUT_SEC", "27"),
        ("JOIN_LIMIT_PER_MIN", "11"),
        ("CHECK_LIMIT_PER_MIN", "12"),
        ("SSE_MAX_TOTAL", "13"),
        ("SSE_PER_IP", "14"),
        ("ROOM_COOKIE_CAP", "15"),
        ("STATUS_LIMIT_PER_MIN", "18"),
        ("PAGE_LIMIT_PER_MIN", "19"),
        ("STREAM_OPEN_LIMIT_PER_MIN", "20"),
        ("PUBLIC_URL", "https://queue.shop.example/"),
        ("HEADER_READ_TIMEOUT_SEC", "21"),
        ("KEEPALIVE_IDLE_SEC", "22"),
        ("MAX_HEADER_BYTES", "8192"),
        ("MAX_URL_BYTES", "2048"),
        ("MAX_COOKIES", "23"),
        ("MAX_CONNECTIONS", "24"),
        ("PREQUEUE_MAX", "16"),
        ("AUTOTUNE_PROBE_MS", "250"),
        ("GATEWAY_METRICS_ADDR", "10.0.0.5:9464"),
        ("ENGINE_CONNECT", "qm-engine:50051"),
        ("SHUTDOWN_DRAIN_SEC", "17"),
        (
            "ALERT_WEBHOOK_URL",
            "https://hooks.example/services/T1/B2/secret-path",
        ),
        ("ALERT_EVAL_MS", "250"),
        ("ALERT_SURGE_PER_MIN", "31"),
        ("ALERT_SURGE_WINDOW_SEC", "32"),
        ("ALERT_STALL_SEC", "33"),
        ("ALERT_RESOLVE_SEC", "34"),
        ("TRUSTED_PROXIES", "10.0.0.0/8"),
        ("INLINE_HOSTS", "Shop.Example=drop"),
        ("INLINE_ORIGIN_TIMEOUT_SEC", "25"),
        ("EMAIL_NOTIFY", "1"),
        ("SMTP_URL", "smtps://queue:smtp-password-1@mail.example:465"),
        ("EMAIL_FROM", "queue@shop.example"),
        ("WAITING_ASSETS_KEEP", "waiting-47DEQpj8HBSa-_TImW-5JC.css"),
        ("LOG_FORMAT", "json"),
        ("LOG_LEVEL", "debug"),
        ("RUST_LOG", "warn"),
    ])
}

#[test]
fn every_variable_of_the_table_reaches_the_config() {
    let source = every_variable_set();
    let names: BTreeSet<&str> = VARIABLES.iter().map(|variable| variable.name).collect();
    assert_eq!(
        names,
        source.keys().copied().collect(),
        "the test sets every variable"
    );
    let config = Config::from_source(&source).expect("valid");
    assert!(config.production);
    assert_eq!(config.gateway_addr, "0.0.0.0:9080".parse().unwrap());
    assert_eq!(config.admin_addr, "[::1]:9081".parse().unwrap());
    assert_eq!(config.engine_addr, "127.0.0.1:50052".parse().unwrap());
    assert_eq!(config.store, StoreKind::Valkey);
    assert!(config.token_sign_v2);
    assert_eq!(
        (config.token_max_age_sec, config.queue_cookie_max_age_sec),
        (3600, 7200)
    );
    assert_eq!(
        (config.join_limit_per_min, config.check_limit_per_min),
        (11, 12)
    );
    assert_eq!(
        (
            config.admin_auth_fail_per_min,
            config.admin_auth_lockout_sec
        ),
        (26, 27)
    );
    assert_eq!(
        (
            config.sse_max_total,
            config.sse_per_ip,
            config.room_cookie_cap
        ),
        (13, 14, 15)
    );
    assert_eq!((config.prequeue_max, config.shutdown_drain_sec), (16, 17));
    assert_eq!(
        config.alerts,
        crate::config::AlertSettings {
            eval_ms: 250,
            surge_per_min: 31,
            surge_window_sec: 32,
            stall_sec: 33,
            resolve_sec: 34,
        }
    );
    assert!(config.alert_webhook_url().is_some());
    assert_eq!(
        config.gateway_metrics_addr,
        Some("10.0.0.5:9464".parse().unwrap())
    );
    assert_eq!(
        (
            config.status_limit_per_min,
            config.page_limit_per_min,
            config.stream_open_limit_per_min
        ),
        (18, 19, 20)
    );
    assert_eq!(
        config.public_url.as_deref(),
        Some("https://queue.shop.example")
    );
    assert_eq!(
        (config.header_read_timeout_sec, config.keepalive_idle_sec),
        (21, 22)
    );
    assert_eq!(
        (
            config.max_header_bytes,
            config.max_url_bytes,
            config.max_cookies,
            config.max_connections()
        ),
        (8192, 2048, 23, 24)
    );
    assert_eq!(
        config.inline_hosts.room_for("shop.example:443"),
        Some("drop")
    );
    assert_eq!(config.inline_origin_timeout_sec, 25);
    assert!(config.email_notify);
    assert_eq!(config.email_from, "queue@shop.example");
    assert!(config.log_json());
    assert_eq!(config.log_filters().collect::<Vec<_>>(), ["debug", "warn"]);

    // Every variable the view shows is there, and no secret's value is.
    let view = config.public_json();
    for variable in VARIABLES {
        let shown = view.get(variable.name).is_some();
        assert_eq!(
            shown,
            !matches!(variable.shown, Shown::Nowhere),
            "{}",
            variable.name
        );
    }
    assert_eq!(view["production"], true);
    assert_eq!(view["SECRET"], "set");
    assert_eq!(view["ADMIN_KEY"], "set");
    assert_eq!(view["VALKEY_URL"], "redis://:***@valkey:6379");
    let text = view.to_string();
    for variable in VARIABLES.iter().filter(|variable| variable.secret) {
        let value = source[variable.name];
        let hidden = value
            .split_once("://")
            .and_then(|(_, rest)| rest.split_once('@'))
            .and_then(|(user_info, _)| user_info.split_once(':'))
            .map_or(value, |(_, password)| password);
        assert!(!text.contains(hidden), "{} shows {hidden}", variable.name);
    }
}

#[test]
fn the_view_keeps_its_order_and_shape() {
    let view = Config::defaults().public_json();
    let keys: Vec<&str> = view
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys[..3], ["production", "HOST", "PORT"]);
    assert_eq!(keys.last(), Some(&"WAITING_ASSETS_KEEP"));
    assert_eq!(view["SECRET"], "random per boot");
    assert_eq!(view["SECRET_PREVIOUS"], "unset");
    assert_eq!(view["ADMIN_KEY"], "default (admin-dev)");
    assert_eq!(view["PUBLIC_API_KEY"], "unset");
    assert_eq!(view["SIDESTORE"], "none");
    assert_eq!(view["TRUSTED_PROXIES"], json!([]));
    assert_eq!(view["INLINE_HOSTS"], json!([]));
    assert_eq!(view["INLINE_ORIGIN_TIMEOUT_SEC"], 30);
    assert_eq!(view["PORT"], 8080);
}

#[test]
fn warnings_come_from_the_table_for_the_processes_that_read_them() {
    let defaults = Config::defaults();
    let all = defaults.warnings();
    assert_eq!(all.len(), 3, "{all:?}");
    assert!(
        all.iter()
            .any(|warning| warning.starts_with("STORE=memory"))
    );
    let gateway = defaults.warnings_for(&[Process::Gateway]);
    assert_eq!(gateway.len(), 2, "{gateway:?}");
    assert!(!gateway.iter().any(|warning| warning.starts_with("STORE")));
    let engine = defaults.warnings_for(&[Process::Engine]);
    assert!(
        !engine
            .iter()
            .any(|warning| warning.starts_with("ADMIN_KEY"))
    );
    let quiet = config(&[
        ("STORE", "valkey"),
        ("SIDESTORE", "pg"),
        ("SECRET", "a-secret-of-sixteen-or-more"),
        ("ADMIN_KEY", "a-long-random-key"),
        ("PUBLIC_URL", "https://queue.example"),
    ])
    .expect("valid");
    assert!(quiet.warnings().is_empty(), "{:?}", quiet.warnings());
    // Beyond loopback without PUBLIC_URL, the operator hears that URLs may be relative.
    let no_public_url = config(&[("ADMIN_KEY", "a-long-random-key")]).expect("valid");
    assert!(
        no_public_url
            .warnings_for(&[Process::Gateway])
            .iter()
            .any(|warning| warning.starts_with("PUBLIC_URL"))
    );
}

#[test]
fn public_url_is_an_absolute_base_without_query_or_credentials() {
    for good in [
        "https://queue.example",
        "http://127.0.0.1:8080/",
        "https://shop.example/queue/",
    ] {
        let parsed = config(&[("PUBLIC_URL", good)]).expect(good);
        let base = parsed.public_url.expect("set");
        assert!(!base.ends_with('/'), "{base}");
    }
    for bad in [
        "queue.example",
        "/w",
        "ftp://queue.example",
        "https://queue.example/?a=1",
        "https://queue.example/#x",
        "https://user:pw@queue.example",
    ] {
        let error = config(&[("PUBLIC_URL", bad)]).expect_err(bad);
        assert_eq!(error.var, "PUBLIC_URL", "{bad}");
    }
}

#[test]
fn connection_limits_have_their_defaults_and_bounds() {
    let defaults = Config::defaults();
    assert_eq!(defaults.header_read_timeout_sec, 10);
    assert_eq!(defaults.keepalive_idle_sec, 75);
    assert_eq!(defaults.max_header_bytes, 32_768);
    assert_eq!(defaults.max_url_bytes, 8192);
    assert_eq!(defaults.max_cookies, 200);
    assert!(defaults.max_connections() >= 64);
    for (name, value) in [
        ("HEADER_READ_TIMEOUT_SEC", "0"),
        ("MAX_HEADER_BYTES", "100"),
        ("MAX_URL_BYTES", "70000"),
        ("MAX_COOKIES", "0"),
        ("MAX_CONNECTIONS", "0"),
    ] {
        assert_eq!(config(&[(name, value)]).expect_err(name).var, name);
    }
}

#[test]
fn logging_settings_keep_their_lenient_reading() {
    let defaults = Config::defaults();
    assert!(!defaults.log_json());
    assert_eq!(defaults.log_filters().count(), 0);
    // Only `json` switches the format; anything else is text, as it always was.
    assert!(!config(&[("LOG_FORMAT", "JSON")]).expect("valid").log_json());
}

/// The backquoted names of the first column of README.md's "## Configuration" table.
fn readme_variables() -> BTreeSet<String> {
    let readme = include_str!("../../../README.md");
    let section = readme
        .split("\n## ")
        .find(|section| section.starts_with("Configuration\n"))
        .expect("README.md has a ## Configuration section");
    section
        .lines()
        .filter(|line| line.starts_with('|'))
        .filter_map(|line| line.split('|').nth(1))
        .flat_map(|cell| {
            cell.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn the_readme_documents_exactly_the_table() {
    let documented = readme_variables();
    let declared: BTreeSet<String> = VARIABLES
        .iter()
        .map(|variable| variable.name.to_owned())
        .collect();
    let undocumented: Vec<&String> = declared.difference(&documented).collect();
    let unknown: Vec<&String> = documented.difference(&declared).collect();
    assert!(
        undocumented.is_empty(),
        "README.md's configuration table misses {undocumented:?}"
    );
    assert!(
        unknown.is_empty(),
        "README.md's configuration table names {unknown:?}, which the configuration table does not have"
    );
}

#[test]
fn a_bad_inline_host_stops_start_up_naming_the_variable_and_the_entry() {
    let source = HashMap::from([("INLINE_HOSTS", "shop.example=drop,www.example")]);
    let error = Config::from_source(&source).unwrap_err().to_string();
    assert!(error.contains("INLINE_HOSTS"), "{error}");
    assert!(
        error.contains("'www.example' is not host=roomId"),
        "{error}"
    );
}
