//! The admin process: the operator API under `/api/admin/*` (also `/api/v1/admin/*`), its
//! readiness, and the console page (`/` and its assets, see `console`). It holds no queue
//! state: every action is one engine call. Its only memory is the console's sessions and
//! event-stream tickets (a restart signs out).

mod auth;
mod connectors;
mod console;
mod events;
mod extract;
mod frames;
mod health;
mod metrics;
mod rooms;
mod routes;
mod session;
mod session_routes;
mod targeting;
mod visitors;

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use qm_core::config::Config;
use qm_proto::EngineClient;
use tokio::sync::watch;
use tonic::transport::Channel;

pub use qm_http::AppError;

/// Cheap handles shared by every handler.
#[derive(Clone)]
pub(crate) struct AdminState {
    pub(crate) config: Arc<Config>,
    pub(crate) engine: EngineClient,
    /// Channel for the engine's gRPC health service, for readiness.
    pub(crate) engine_health: Channel,
    /// Signed-in consoles (in memory: a restart signs them out).
    pub(crate) sessions: Arc<session::SessionStore>,
    /// Unspent event-stream tickets.
    pub(crate) tickets: Arc<events::TicketStore>,
    /// Turns true when the process stops: open event streams end on it.
    pub(crate) shutdown: watch::Receiver<bool>,
}

/// Readiness: answered even on a connection shed past MAX_CONNECTIONS (the spec's health
/// exemption).
const HEALTH_PATHS: &[&str] = &["/healthz", "/api/admin/health", "/api/v1/admin/health"];

/// The admin HTTP application, ready to serve on a listener.
pub struct AdminApp {
    state: AdminState,
    stopping: watch::Sender<bool>,
}

impl AdminApp {
    pub fn new(config: Arc<Config>, engine: EngineClient, engine_health: Channel) -> AdminApp {
        let (stopping, shutdown) = watch::channel(false);
        AdminApp {
            state: AdminState {
                sessions: Arc::new(session::SessionStore::from_config(&config)),
                tickets: Arc::new(events::TicketStore::default()),
                config,
                engine,
                engine_health,
                shutdown,
            },
            stopping,
        }
    }

    /// Every route of the admin process; the table is `routes.rs`.
    pub fn router(&self) -> Router {
        routes::router(self.state.clone())
    }

    /// Serves until `shutdown` resolves, then drains open requests for at most
    /// SHUTDOWN_DRAIN_SEC.
    pub async fn run(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let options = qm_http::ServeOptions::from_config(&self.state.config, HEALTH_PATHS);
        let router = self.router();
        qm_http::serve(listener, router, shutdown, self.stopping, options).await
    }
}
