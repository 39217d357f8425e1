//! The one engine client the gateway and the admin process share. In `qm all` it still goes
//! through tonic over loopback, so every deployment exercises the same path.

use std::net::SocketAddr;
use std::time::Duration;

use tonic::transport::{Channel, Endpoint};

/// Generated client over a lazily connecting channel: cheap to clone, reconnects by itself.
pub type EngineClient = crate::engine::engine_client::EngineClient<Channel>;

/// How long one engine call may take before the edge answers 503 instead of hanging.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// A client for the engine at `addr`. It does not connect until the first call, so a gateway
/// can start before its engine and report itself not ready until the engine answers.
pub fn connect_lazy(addr: SocketAddr) -> EngineClient {
    let endpoint = Endpoint::from_shared(format!("http://{addr}"))
        .expect("a socket address is a valid uri")
        .connect_timeout(Duration::from_secs(2))
        .timeout(CALL_TIMEOUT)
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(20))
        .keep_alive_while_idle(true);
    crate::engine::engine_client::EngineClient::new(endpoint.connect_lazy())
}

/// Channel for side services on the same endpoint (gRPC health checking).
pub fn channel_lazy(addr: SocketAddr) -> Channel {
    Endpoint::from_shared(format!("http://{addr}"))
        .expect("a socket address is a valid uri")
        .connect_timeout(Duration::from_secs(2))
        .timeout(Duration::from_secs(2))
        .connect_lazy()
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
