//! The one engine client the gateway and the admin process share. In `qm all` it still goes
//! through tonic over loopback, so every deployment exercises the same path.
//!
//! Every call carries the engine credential (`authorization: Bearer <hex SHA-256 of the
//! token>`, see [`wire_credential`]); the engine refuses a call without it before any handler
//! runs. With `ENGINE_TLS_CA` the connection is TLS, verified against that CA.

use std::time::Duration;

use qm_core::config::Config;
use secrecy::ExposeSecret;
use sha2::{Digest, Sha256};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use tonic::{Request, Status};

/// Generated client over a lazily connecting channel that adds the credential to every call:
/// cheap to clone, reconnects by itself.
pub type EngineClient =
    crate::engine::engine_client::EngineClient<InterceptedService<Channel, Credential>>;

/// How long one engine call may take before the edge answers 503 instead of hanging.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// The metadata value a call presents for `token`: `Bearer` and the token's SHA-256 in hex, so
/// the token itself never crosses the wire and any characters it holds are fine.
pub fn wire_credential(token: &str) -> String {
    format!("Bearer {}", hex::encode(Sha256::digest(token.as_bytes())))
}

/// Adds the engine credential to a call.
#[derive(Clone)]
pub struct Credential(MetadataValue<Ascii>);

impl Interceptor for Credential {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        request
            .metadata_mut()
            .insert("authorization", self.0.clone());
        Ok(request)
    }
}

/// Why the engine cannot be reached as configured.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("ENGINE_TLS_CA: cannot read {path}: {error}")]
    Ca { path: String, error: std::io::Error },
    #[error("ENGINE_TLS_CA: {0}")]
    Tls(#[from] tonic::transport::Error),
    #[error(transparent)]
    Address(#[from] BadAuthority),
}

/// Where the engine is and how to reach it.
#[derive(Clone)]
pub struct EngineTarget {
    /// `host:port`, as the endpoints are built from it.
    authority: String,
    credential: Credential,
    /// Calls: bounded by [`CALL_TIMEOUT`].
    calls: Endpoint,
    /// Readiness probes: a short timeout, no credential.
    probes: Endpoint,
}

/// Why an engine address cannot be reached at all.
#[derive(Debug, thiserror::Error)]
#[error("ENGINE_CONNECT: '{0}' does not make a URI")]
pub struct BadAuthority(String);

/// An endpoint for `authority` with the given scheme and call timeout.
fn endpoint(scheme: &str, authority: &str, timeout: Duration) -> Result<Endpoint, BadAuthority> {
    Ok(Endpoint::from_shared(format!("{scheme}://{authority}"))
        .map_err(|_| BadAuthority(authority.to_owned()))?
        .connect_timeout(Duration::from_secs(2))
        .timeout(timeout)
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(20))
        .keep_alive_while_idle(true))
}

impl EngineTarget {
    /// The engine at `authority` (`host:port`; a socket address or a DNS name), over plain
    /// gRPC, presenting `token`.
    pub fn new(authority: impl ToString, token: &str) -> Result<EngineTarget, BadAuthority> {
        let authority = authority.to_string();
        let credential = MetadataValue::try_from(wire_credential(token))
            .expect("Bearer and hex are visible ASCII");
        Ok(EngineTarget {
            calls: endpoint("http", &authority, CALL_TIMEOUT)?,
            probes: endpoint("http", &authority, Duration::from_secs(2))?,
            authority,
            credential: Credential(credential),
        })
    }

    /// The engine as the configuration names it: ENGINE_CONNECT (else ENGINE_ADDR), the engine
    /// credential, and TLS when ENGINE_TLS_CA is set (the CA file is read now, so a bad path
    /// stops start-up).
    pub fn from_config(config: &Config) -> Result<EngineTarget, TargetError> {
        EngineTarget::from_config_at(config, config.engine_target())
    }

    /// [`EngineTarget::from_config`] for an engine at `authority` (the address a listener
    /// actually bound, or a test's engine elsewhere).
    pub fn from_config_at(
        config: &Config,
        authority: impl ToString,
    ) -> Result<EngineTarget, TargetError> {
        let target = EngineTarget::new(authority, config.engine_credential().expose_secret())?;
        let Some(path) = &config.engine_tls.ca else {
            return Ok(target);
        };
        let ca = std::fs::read(path).map_err(|error| TargetError::Ca {
            path: path.clone(),
            error,
        })?;
        let domain = config
            .engine_tls
            .domain
            .clone()
            .unwrap_or_else(|| target.host().to_owned());
        target.with_tls(&ca, &domain)
    }

    /// Reaches the engine over TLS, trusting the PEM CA `ca` and expecting `domain` on its
    /// certificate.
    pub fn with_tls(mut self, ca: &[u8], domain: &str) -> Result<EngineTarget, TargetError> {
        let tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(ca))
            .domain_name(domain);
        self.calls = endpoint("https", &self.authority, CALL_TIMEOUT)?.tls_config(tls.clone())?;
        self.probes =
            endpoint("https", &self.authority, Duration::from_secs(2))?.tls_config(tls)?;
        Ok(self)
    }

    /// `host:port`, as configured.
    pub fn authority(&self) -> &str {
        &self.authority
    }

    /// The host the certificate must name by default: the authority without its port (an IPv6
    /// address without its brackets).
    fn host(&self) -> &str {
        let host = self
            .authority
            .rsplit_once(':')
            .map_or(self.authority.as_str(), |(host, _)| host);
        host.trim_start_matches('[').trim_end_matches(']')
    }

    /// A client that does not connect until the first call, so a gateway can start before its
    /// engine and report itself not ready until the engine answers.
    pub fn client(&self) -> EngineClient {
        crate::engine::engine_client::EngineClient::with_interceptor(
            self.calls.connect_lazy(),
            self.credential.clone(),
        )
    }

    /// Channel for the gRPC health service (readiness), which asks no credential.
    pub fn health_channel(&self) -> Channel {
        self.probes.connect_lazy()
    }
}

/// Whether the engine answers the standard gRPC health check as SERVING. The error says what
/// is wrong in words an operator can act on (it appears in readiness bodies).
pub async fn engine_ready(channel: Channel) -> Result<(), String> {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;

    let request = HealthCheckRequest {
        service: String::new(),
    };
    match HealthClient::new(channel).check(request).await {
        Ok(reply) if reply.get_ref().status == ServingStatus::Serving as i32 => Ok(()),
        Ok(_) => Err("engine reports not serving".to_owned()),
        Err(status) => Err(format!("engine unreachable: {}", status.message())),
    }
}

/// What readiness says when the engine serves but refuses this process's credential.
pub const CREDENTIAL_REFUSED: &str =
    "engine refused this process's credential: set the same SECRET (or ENGINE_TOKEN) as the engine";

/// Whether the engine serves (its health check) and accepts this process's credential (one
/// cheap authenticated call): an edge whose SECRET or ENGINE_TOKEN differs from its engine's
/// reports itself not ready, instead of looking healthy while every call is refused.
pub async fn engine_accepts(health: Channel, client: &EngineClient) -> Result<(), String> {
    engine_ready(health).await?;
    match client.clone().stats(crate::StatsRequest {}).await {
        Err(status) if status.code() == tonic::Code::Unauthenticated => {
            Err(CREDENTIAL_REFUSED.to_owned())
        }
        _ => Ok(()),
    }
}
