//! The admin process: the operator API under `/api/admin/*` (also `/api/v1/admin/*`), its
//! readiness, and the console page (`/` and its assets, see `console`). It holds no queue
//! state: every action is one engine call. It signs and verifies every admin credential
//! (`auth`, `keys`); the engine keeps the operators, monitor tokens and audit trail as
//! one-way verifiers and entries. Its only memory is the console's sessions, event-stream
//! tickets and the per-address count of wrong credentials (a restart signs out and forgets).
//!
//! Who may do what is one table (`routes`), each row enforced by one gate (`gate`): lockout,
//! credential, role, audit.

mod alerts;
mod audit;
mod auth;
mod connectors;
mod console;
mod events;
mod extract;
mod frames;
mod gate;
mod health;
mod keys;
mod lockout;
mod metrics;
mod operators;
mod principal;
mod prometheus;
mod reports;
mod rooms;
mod routes;
mod security;
mod session;
mod session_routes;
mod targeting;
mod visitors;

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use qm_core::config::Config;
use qm_core::shutdown::Shutdown;
use qm_proto::EngineClient;
use tokio::sync::watch;
use tonic::transport::Channel;

pub use qm_http::AppError;
pub use routes::grants;

/// Cheap handles shared by every handler.
#[derive(Clone)]
pub(crate) struct AdminState {
    pub(crate) config: Arc<Config>,
    pub(crate) engine: EngineClient,
    /// Channel for the engine's gRPC health service, for readiness.
    pub(crate) engine_health: Channel,
    /// Signed-in consoles, kept by the engine for every admin process.
    pub(crate) sessions: Arc<session::SessionStore>,
    /// Unspent event-stream tickets, kept by the engine likewise.
    pub(crate) tickets: Arc<events::TicketStore>,
    /// Turns true when the process stops: open event streams end on it.
    pub(crate) shutdown: watch::Receiver<bool>,
    /// Wrong credentials per client address (ADMIN_AUTH_FAIL_PER_MIN), here and shared.
    pub(crate) failures: Arc<lockout::AuthFailures>,
    /// Set by `POST /api/admin/shutdown`: the process stops serving as if signalled.
    pub(crate) stop: Shutdown,
    /// When this process started, for the shutdown answer's `uptimeSec`.
    pub(crate) started_at: Instant,
    /// The alert rules' state and the webhook they page.
    pub(crate) alerts: Arc<alerts::Alerts>,
}

/// Readiness: answered even on a connection shed past MAX_CONNECTIONS (the spec's health
/// exemption).
const HEALTH_PATHS: &[&str] = &[
    "/healthz",
    "/livez",
    "/api/admin/health",
    "/api/v1/admin/health",
];

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
                sessions: Arc::new(session::SessionStore::from_config(&config, engine.clone())),
                tickets: Arc::new(events::TicketStore::new(engine.clone())),
                failures: Arc::new(lockout::AuthFailures::from_config(&config, engine.clone())),
                stop: Shutdown::new(),
                started_at: Instant::now(),
                alerts: Arc::new(alerts::Alerts::from_config(&config)),
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

    /// Serves until `shutdown` resolves or an owner asks it to stop (`POST
    /// /api/admin/shutdown`), then drains open requests for at most SHUTDOWN_DRAIN_SEC. Stopping
    /// on request returns like any other stop, and the process running it stops the rest.
    pub async fn run(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let options = qm_http::ServeOptions::from_config(&self.state.config, HEALTH_PATHS);
        let router = self.router();
        let evaluator = tokio::spawn(alerts::run(
            self.state.alerts.clone(),
            self.state.engine.clone(),
            self.state.shutdown.clone(),
        ));
        let requested = self.state.stop.wait();
        let either = async move {
            tokio::select! {
                () = shutdown => {}
                () = requested => {}
            }
        };
        let served = qm_http::serve(listener, router, either, self.stopping, options).await;
        evaluator.abort();
        served
    }
}
