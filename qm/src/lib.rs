//! The composition of `qm all` (and of `qm engine | gateway | admin`, which run one part of it):
//! [`Components::build`] makes the engine, the gateway and the admin process on listeners the
//! caller bound, [`Components::run`] serves them until a shutdown flag is set. The binary and the
//! test harness both start the product through here, so tests run the composition operators do.
//!
//! Components stop in reverse order of their dependencies: the edges (gateway, admin) stop
//! accepting and drain first, while the engine still answers their in-flight calls; then the
//! engine stops. A component that stops on its own stops the others: a half-running `qm all`
//! helps nobody.

use std::sync::Arc;

use qm_admin::AdminApp;
use qm_core::config::Config;
use qm_core::shutdown::Shutdown;
use qm_engine::{EngineApp, EngineError};
use qm_gateway::GatewayApp;
use qm_proto::client::{EngineTarget, TargetError};
use tokio::net::TcpListener;
use tokio::task::{JoinError, JoinHandle, JoinSet};

/// Why the components could not start, or why one of them stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("engine: {0}")]
    Engine(#[from] EngineError),
    #[error("gateway: {0}")]
    Gateway(std::io::Error),
    #[error("admin: {0}")]
    Admin(std::io::Error),
    #[error("{0} panicked")]
    Panicked(&'static str),
    #[error("engine listener: {0}")]
    EngineListener(std::io::Error),
    #[error("reaching the engine: {0}")]
    EngineTarget(#[from] TargetError),
}

/// Where the engine the edges talk to is.
pub enum EngineSite {
    /// Served by this process on this listener; the edges connect to its bound address.
    Local(TcpListener),
    /// Served elsewhere (`qm gateway`, `qm admin`, or an engine process in a test), at this
    /// `host:port` (a DNS name is resolved at each connect).
    Remote(String),
}

/// The listeners of the components this process runs; `None` leaves that edge out.
pub struct Listeners {
    pub engine: EngineSite,
    pub gateway: Option<TcpListener>,
    /// The gateway's private metrics listener (GATEWAY_METRICS_ADDR), with the gateway only.
    pub gateway_metrics: Option<TcpListener>,
    pub admin: Option<TcpListener>,
}

/// Every component of this process, built and ready to serve.
pub struct Components {
    /// Where the edges reach the engine: its listener's address, or ENGINE_CONNECT's.
    engine_target: String,
    engine: Option<(EngineApp, TcpListener)>,
    gateway: Option<(GatewayApp, TcpListener, Option<TcpListener>)>,
    admin: Option<(AdminApp, TcpListener)>,
}

/// One component's task: its name (for logs and errors) and how it ended.
type Ended = (&'static str, Result<(), RunError>);

impl Components {
    /// Builds the components `listeners` name. The engine first: the durable store connects,
    /// migrates and catches up before this returns, and the edges connect to the address its
    /// listener actually bound (port 0 in tests).
    pub async fn build(config: Arc<Config>, listeners: Listeners) -> Result<Components, RunError> {
        let (engine_target, engine) = match listeners.engine {
            EngineSite::Local(listener) => {
                let addr = listener.local_addr().map_err(RunError::EngineListener)?;
                let engine = EngineApp::new(config.clone()).await?;
                (addr.to_string(), Some((engine, listener)))
            }
            EngineSite::Remote(authority) => (authority, None),
        };
        let target = EngineTarget::from_config_at(&config, &engine_target)?;
        let gateway_metrics = listeners.gateway_metrics;
        let gateway = listeners.gateway.map(|listener| {
            let app = GatewayApp::new(config.clone(), target.client(), target.health_channel());
            (app, listener, gateway_metrics)
        });
        let admin = listeners.admin.map(|listener| {
            let app = AdminApp::new(config.clone(), target.client(), target.health_channel());
            (app, listener)
        });
        Ok(Components {
            engine_target,
            engine,
            gateway,
            admin,
        })
    }

    /// The engine address the edges talk to (`host:port`).
    pub fn engine_target(&self) -> &str {
        &self.engine_target
    }

    /// Serves every component until `shutdown` is set or one of them stops on its own; then
    /// stops the edges (each drains for at most SHUTDOWN_DRAIN_SEC), then the engine. Returns
    /// the first error any component ended with.
    pub async fn run(self, shutdown: Shutdown) -> Result<(), RunError> {
        let edges_stop = Shutdown::new();
        let engine_stop = Shutdown::new();

        let mut engine = self.engine.map(|(engine, listener)| {
            tracing::info!(addr = %self.engine_target, "engine listening (grpc)");
            let stop = engine_stop.wait();
            tokio::spawn(async move { engine.run(listener, stop).await.map_err(RunError::from) })
        });
        let mut edges: JoinSet<Ended> = JoinSet::new();
        if let Some((gateway, listener, metrics)) = self.gateway {
            if let Ok(addr) = listener.local_addr() {
                tracing::info!(%addr, "gateway listening (http)");
            }
            if let Some(addr) = metrics
                .as_ref()
                .and_then(|metrics| metrics.local_addr().ok())
            {
                tracing::info!(%addr, "gateway metrics listening (http, private)");
            }
            let stop = edges_stop.wait();
            edges.spawn(async move {
                let result = gateway.run(listener, metrics, stop).await;
                ("gateway", result.map_err(RunError::Gateway))
            });
        }
        if let Some((admin, listener)) = self.admin {
            if let Ok(addr) = listener.local_addr() {
                tracing::info!(%addr, "admin listening (http)");
            }
            let stop = edges_stop.wait();
            edges.spawn(async move {
                let result = admin.run(listener, stop).await;
                ("admin", result.map_err(RunError::Admin))
            });
        }

        let mut outcome = Ok(());
        tokio::select! {
            () = shutdown.wait() => {}
            Some(joined) = edges.join_next() => keep_first_error(&mut outcome, edge_ended(joined)),
            joined = engine_ended(&mut engine) => keep_first_error(&mut outcome, joined),
        }

        // The edges first: they stop accepting and finish what they hold, which may still need
        // the engine. Their calls and Watch streams are gone once they end, so the engine's own
        // drain is then short.
        edges_stop.trigger();
        while let Some(joined) = edges.join_next().await {
            keep_first_error(&mut outcome, edge_ended(joined));
        }
        engine_stop.trigger();
        if engine.is_some() {
            keep_first_error(&mut outcome, engine_ended(&mut engine).await);
        }
        outcome
    }
}

/// Builds and runs the components on `listeners` until `shutdown` is set: `qm all` in one call.
pub async fn run_all(
    config: Arc<Config>,
    listeners: Listeners,
    shutdown: Shutdown,
) -> Result<(), RunError> {
    Components::build(config, listeners)
        .await?
        .run(shutdown)
        .await
}

/// The engine task's end. Never resolves when this process runs no engine (or it already
/// ended), so it can sit in a `select!` beside the flag.
async fn engine_ended(engine: &mut Option<JoinHandle<Result<(), RunError>>>) -> Ended {
    match engine {
        Some(task) => {
            let joined = task.await;
            *engine = None;
            (
                "engine",
                joined.unwrap_or(Err(RunError::Panicked("engine"))),
            )
        }
        None => std::future::pending().await,
    }
}

fn edge_ended(joined: Result<Ended, JoinError>) -> Ended {
    joined.unwrap_or((
        "gateway or admin",
        Err(RunError::Panicked("gateway or admin")),
    ))
}

fn keep_first_error(outcome: &mut Result<(), RunError>, (component, result): Ended) {
    match result {
        Ok(()) => tracing::info!(component, "component stopped"),
        Err(error) => {
            tracing::error!(component, %error, "component stopped");
            if outcome.is_ok() {
                *outcome = Err(error);
            }
        }
    }
}

#[cfg(test)]
mod tests;
