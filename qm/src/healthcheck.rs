//! `qm healthcheck engine|gateway|admin`: asks the process of that kind on this host whether it
//! is ready, and exits 0 when it is, 1 when it is not (with the reason on stderr). It reads the
//! same environment as the process it asks, so a container's health check needs no other tool:
//! the gateway and the admin process answer `GET /healthz`, the engine its gRPC health service.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use qm_core::config::Config;
use qm_proto::client::EngineTarget;

/// Which process to ask.
#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Probed {
    Engine,
    Gateway,
    Admin,
}

/// How long one check may take: a health check that hangs is one that failed.
const TIMEOUT: Duration = Duration::from_secs(3);

/// Ready, or why not.
pub(crate) async fn check(config: &Config, probed: Probed) -> Result<(), String> {
    match probed {
        Probed::Engine => {
            let local = local(config.engine_addr);
            let target = EngineTarget::from_config_at(config, local)
                .map_err(|error| format!("engine: {error}"))?;
            qm_proto::client::engine_ready(target.health_channel()).await
        }
        Probed::Gateway => healthz(local(config.gateway_addr)).await,
        Probed::Admin => healthz(local(config.admin_addr)).await,
    }
}

/// The address to reach a listener on this host: a wildcard listen address (`0.0.0.0`, `::`)
/// is reached on loopback.
fn local(listen: SocketAddr) -> SocketAddr {
    let ip = match listen.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, listen.port())
}

async fn healthz(addr: SocketAddr) -> Result<(), String> {
    let client = reqwest::Client::builder()
        .timeout(TIMEOUT)
        .build()
        .map_err(|error| error.to_string())?;
    let url = format!("http://{addr}/healthz");
    let response = client
        .get(&url)
        .send()
        .await
        .map_err(|error| format!("{url}: {error}"))?;
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    let body = response.text().await.unwrap_or_default();
    Err(format!("{url}: {status} {body}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wildcard_listener_is_reached_on_loopback() {
        let addr = |text: &str| text.parse::<SocketAddr>().expect("an address");
        assert_eq!(local(addr("0.0.0.0:8080")), addr("127.0.0.1:8080"));
        assert_eq!(local(addr("[::]:8081")), addr("[::1]:8081"));
        assert_eq!(local(addr("10.0.0.7:50051")), addr("10.0.0.7:50051"));
    }
}
