//! The admin process: the operator API under `/api/admin/*` (also `/api/v1/admin/*`), its
//! readiness, and the console page. It holds no state: every action is one engine call.

mod auth;
mod docs;
mod health;
mod rooms;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::response::Html;
use axum::routing::get;
use qm_core::config::Config;
use qm_proto::EngineClient;
use tonic::transport::Channel;

pub use qm_edge::AppError;

/// Cheap handles shared by every handler.
#[derive(Clone)]
pub(crate) struct AdminState {
    pub(crate) config: Arc<Config>,
    pub(crate) engine: EngineClient,
    /// Channel for the engine's gRPC health service, for readiness.
    pub(crate) engine_health: Channel,
}

/// The admin HTTP application, ready to serve on a listener.
pub struct AdminApp {
    state: AdminState,
}

impl AdminApp {
    pub fn new(config: Arc<Config>, engine: EngineClient, engine_health: Channel) -> AdminApp {
        AdminApp {
            state: AdminState {
                config,
                engine,
                engine_health,
            },
        }
    }

    /// Every route of the admin process.
    pub fn router(&self) -> Router {
        let api = rooms::routes().merge(health::admin_routes());
        Router::new()
            .nest("/api/admin", api.clone())
            .nest("/api/v1/admin", api)
            .route("/healthz", get(health::healthz))
            .route("/", get(console))
            .merge(docs::routes())
            .fallback(qm_edge::not_found)
            .with_state(self.state.clone())
    }

    /// Serves until `shutdown` resolves, then drains open requests for at most
    /// SHUTDOWN_DRAIN_SEC.
    pub async fn run(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let drain = Duration::from_secs(self.state.config.shutdown_drain_sec);
        qm_edge::serve(listener, self.router(), shutdown, drain).await
    }
}

/// The console arrives with its own issue; until then `/` says what the process serves.
async fn console() -> Html<&'static str> {
    Html(include_str!("console.html"))
}
