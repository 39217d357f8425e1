//! What the server enforces on every connection, read once from the configuration: the
//! header-read and keep-alive timeouts, the caps on a request's head, URL and cookies, and the
//! connection ceiling with the paths that stay answered past it.

use std::time::Duration;

use qm_core::config::Config;

/// The limits of one listener.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// How long a stopping server waits for open requests (SHUTDOWN_DRAIN_SEC).
    pub drain: Duration,
    /// Time a connection has to send a complete request head (HEADER_READ_TIMEOUT_SEC).
    pub header_read_timeout: Duration,
    /// Time an idle keep-alive connection is kept (KEEPALIVE_IDLE_SEC).
    pub keepalive_idle: Duration,
    /// Largest request head, request line and headers together (MAX_HEADER_BYTES).
    pub max_header_bytes: usize,
    /// Longest request line (MAX_URL_BYTES).
    pub max_url_bytes: usize,
    /// Most cookies one request may carry (MAX_COOKIES).
    pub max_cookies: usize,
    /// Open connections before new ones are shed with 503 (MAX_CONNECTIONS).
    pub max_connections: usize,
    /// Paths answered even on a shed connection: readiness and version, per the spec.
    pub exempt_paths: &'static [&'static str],
}

impl ServeOptions {
    /// The configured limits, with `exempt_paths` answered past the connection ceiling.
    pub fn from_config(config: &Config, exempt_paths: &'static [&'static str]) -> ServeOptions {
        ServeOptions {
            drain: Duration::from_secs(config.shutdown_drain_sec),
            header_read_timeout: Duration::from_secs(config.header_read_timeout_sec),
            keepalive_idle: Duration::from_secs(config.keepalive_idle_sec),
            max_header_bytes: config.max_header_bytes,
            max_url_bytes: config.max_url_bytes,
            max_cookies: config.max_cookies,
            max_connections: config.max_connections(),
            exempt_paths,
        }
    }

    /// Past the ceiling connections are still accepted, to be told 503 (or served health),
    /// up to this many more; beyond that a new connection is closed at once, so the process
    /// keeps descriptors for its own work.
    pub(crate) fn hard_ceiling(&self) -> usize {
        self.max_connections
            .saturating_add((self.max_connections / 8).max(16))
    }
}
