//! The engine: every piece of queue state (rooms, tickets, passes, outflow) behind the
//! `qm.engine.v1.Engine` gRPC API. The gateway and the admin process are its only callers; they
//! verify credentials at the edge and hand it verified facts.
//!
//! - [`domain`]: the pure room state machine, changed only by applying events.
//! - [`store`]: the `Store` trait, atomic room-scoped operations; [`memory`] and [`durable`]
//!   (Valkey + the Postgres journal) implement it.
//! - `service`: the tonic service over a store; `outflow`: the per-second ticker.
//! - `access`: operators, monitor tokens (verifiers only) and the audit trail, in memory or in
//!   Postgres beside the journal; served by `service`, not part of a `Store`.
//!
//! [`EngineApp::run`] serves the engine and the standard gRPC health service on a bound
//! listener until the shutdown future resolves, then ends Watch streams, stops the ticker and
//! drains within `SHUTDOWN_DRAIN_SEC`.

mod access;
mod auto_activate;
mod autotune;
mod check_ins;
mod credential;
pub mod domain;
pub mod durable;
mod environment;
pub mod history;
pub mod memory;
mod metrics;
mod notify;
mod outflow;
pub mod reports;
mod rooms;
mod security;
mod service;
mod shutdown;
pub mod store;
mod targeting_counters;
mod targeting_wire;
mod view;
mod visitors;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use qm_core::config::{Config, StoreKind};
use qm_proto::engine::engine_server::EngineServer;
use secrecy::ExposeSecret;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Identity, Server, ServerTlsConfig};
use tonic_health::ServingStatus;

pub use durable::{DurableOptions, DurableStore};
pub use environment::{Clock, Environment};
pub use memory::MemoryStore;
pub use notify::{MailerConfigError, Notifier};
pub use store::Store;

use crate::credential::RequireCredential;
use crate::service::EngineService;
use crate::shutdown::stopped;

/// Why the engine could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("durable store: {0}")]
    Durable(#[from] durable::DurableError),
    #[error("grpc server failed: {0}")]
    Server(#[from] tonic::transport::Error),
    #[error("turn notifications: {0}")]
    Notify(#[from] MailerConfigError),
    #[error("{variable}: cannot read {path}: {error}")]
    TlsFile {
        variable: &'static str,
        path: String,
        error: std::io::Error,
    },
}

/// A configured engine, ready to serve.
pub struct EngineApp {
    config: Arc<Config>,
    store: Arc<dyn Store>,
    /// Turn notifications (EMAIL_NOTIFY); `None` when off.
    notifier: Option<Arc<Notifier>>,
    /// ENGINE_TLS_CERT and ENGINE_TLS_KEY, read: the port serves TLS with them.
    tls: Option<ServerTlsConfig>,
    /// Operators, monitor tokens and the audit trail.
    access: Arc<access::Access>,
}

/// Reads one of the engine's TLS files, naming its variable when it cannot.
fn read_tls_file(variable: &'static str, path: &str) -> Result<Vec<u8>, EngineError> {
    std::fs::read(path).map_err(|error| EngineError::TlsFile {
        variable,
        path: path.to_owned(),
        error,
    })
}

/// The port's TLS, when configured: read now so a bad path stops start-up.
fn server_tls(config: &Config) -> Result<Option<ServerTlsConfig>, EngineError> {
    let Some(files) = &config.engine_tls.server else {
        return Ok(None);
    };
    let cert = read_tls_file("ENGINE_TLS_CERT", &files.cert)?;
    let key = read_tls_file("ENGINE_TLS_KEY", &files.key)?;
    Ok(Some(
        ServerTlsConfig::new().identity(Identity::from_pem(cert, key)),
    ))
}

impl EngineApp {
    /// Builds the engine on the configured store. The durable store connects, migrates its
    /// journal and brings Valkey in step with it before this returns.
    pub async fn new(config: Arc<Config>) -> Result<EngineApp, EngineError> {
        let (store, pg_pool): (Arc<dyn Store>, _) = match config.store {
            StoreKind::Memory => (Arc::new(MemoryStore::new()), None),
            StoreKind::Valkey => {
                let durable = DurableStore::start(&durable_options(&config)).await?;
                let pool = durable.pg_pool();
                (Arc::new(durable), Some(pool))
            }
        };
        let tls = server_tls(&config)?;
        let access = Arc::new(access::Access::new(pg_pool.clone()));
        let notifier = match config.email_notify {
            true => Some(Arc::new(Notifier::new(&config, store.clone(), pg_pool)?)),
            false => None,
        };
        Ok(EngineApp {
            config,
            store,
            notifier,
            tls,
            access,
        })
    }

    /// The store this engine serves (tests and embedding).
    pub fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    /// Serves until `shutdown` resolves, then stops accepting, ends Watch streams and the
    /// ticker, and gives in-flight calls `SHUTDOWN_DRAIN_SEC` to finish.
    pub async fn run(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), EngineError> {
        let (stop_sender, stop) = watch::channel(false);
        let (health, health_service) = tonic_health::server::health_reporter();
        health.set_serving::<EngineServer<EngineService>>().await;

        let ticker = tokio::spawn(outflow::run_ticker(self.store.clone(), stop.clone()));
        let inline_answers = Arc::new(autotune::InlineAnswers::default());
        tokio::spawn(autotune::run(
            autotune::Controller {
                store: self.store.clone(),
                access: self.access.clone(),
                inline_answers: inline_answers.clone(),
                probe_every: Duration::from_millis(self.config.autotune_probe_ms),
            },
            stop.clone(),
        ));
        let auto_activation = Arc::new(auto_activate::AutoActivation::default());
        tokio::spawn(auto_activate::run(
            self.store.clone(),
            self.access.clone(),
            auto_activation.clone(),
            stop.clone(),
        ));
        let targeting_counters = Arc::new(if self.store.shares_targeting() {
            targeting_counters::TargetingCounters::shared()
        } else {
            targeting_counters::TargetingCounters::default()
        });
        if self.store.shares_targeting() {
            tokio::spawn(targeting_counters::run_flusher(
                self.store.clone(),
                targeting_counters.clone(),
                stop.clone(),
            ));
        }
        let history = Arc::new(history::History::new(qm_core::clock::now_ms()));
        let sampler = tokio::spawn(history::run_sampler(
            self.store.clone(),
            history.clone(),
            stop.clone(),
        ));
        let mailer = self
            .notifier
            .clone()
            .map(|notifier| tokio::spawn(notify::run_mailer(notifier, stop.clone())));
        if let Some(readiness) = self.store.readiness() {
            tokio::spawn(report_storage(readiness, health.clone(), stop.clone()));
        }
        let relay_health = health.clone();
        let relay = tokio::spawn(async move {
            shutdown.await;
            tracing::info!("engine stopping");
            relay_health
                .set_service_status("", ServingStatus::NotServing)
                .await;
            relay_health
                .set_not_serving::<EngineServer<EngineService>>()
                .await;
            stop_sender.send_replace(true);
            // Keep the sender alive until the server is done, so receivers read "stopped", not "gone".
            std::future::pending::<()>().await;
        });

        let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
        let engine = EngineServer::with_interceptor(
            EngineService::new(self.store.clone(), self.config.prequeue_max, stop.clone())
                .with_notifier(self.notifier.clone())
                .with_history(history)
                .with_targeting_counters(targeting_counters)
                .with_access(self.access.clone())
                .with_auto_activation(auto_activation)
                .with_inline_answers(inline_answers)
                .with_keyring(&self.config.keyring()),
            RequireCredential::new(self.config.engine_credential().expose_secret()),
        );
        let mut server_stop = stop.clone();
        // A peer that vanished without closing (a gateway's host lost, a stranger's half-open
        // connection) is found by keep-alive pings and its connection dropped.
        let mut builder = Server::builder()
            .http2_keepalive_interval(Some(Duration::from_secs(20)))
            .http2_keepalive_timeout(Some(Duration::from_secs(20)));
        if let Some(tls) = self.tls.clone() {
            builder = builder.tls_config(tls)?;
        }
        let server = builder
            .add_service(health_service)
            .add_service(engine)
            .serve_with_incoming_shutdown(incoming, async move { stopped(&mut server_stop).await });

        let drain = Duration::from_secs(self.config.shutdown_drain_sec);
        let mut drain_stop = stop.clone();
        let result = tokio::select! {
            result = server => result.map_err(EngineError::from),
            () = async { stopped(&mut drain_stop).await; tokio::time::sleep(drain).await } => {
                tracing::warn!(drain_sec = drain.as_secs(), "engine drain timed out; closing remaining calls");
                Ok(())
            }
        };
        relay.abort();
        if tokio::time::timeout(Duration::from_secs(1), ticker)
            .await
            .is_err()
        {
            tracing::warn!("outflow ticker did not stop in time");
        }
        if tokio::time::timeout(Duration::from_secs(1), sampler)
            .await
            .is_err()
        {
            tracing::warn!("history sampler did not stop in time");
        }
        if let Some(mailer) = mailer
            && tokio::time::timeout(Duration::from_secs(1), mailer)
                .await
                .is_err()
        {
            tracing::warn!("turn notification mailer did not stop in time");
        }
        tracing::info!("engine stopped");
        result
    }
}

/// The durable store's connection settings from the configuration.
pub fn durable_options(config: &Config) -> DurableOptions {
    DurableOptions {
        valkey_url: config.valkey_url.clone(),
        database_url: config.database_url.clone(),
    }
}

/// Follows the store's readiness into the gRPC health service: the engine reports not serving
/// while changes cannot be persisted, so every edge's /healthz turns 503.
async fn report_storage(
    mut readiness: watch::Receiver<bool>,
    health: tonic_health::server::HealthReporter,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let ready = *readiness.borrow_and_update();
        let status = if ready {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        };
        if ready {
            tracing::info!("storage ready");
        } else {
            tracing::warn!("storage unavailable: reporting not serving");
        }
        health.set_service_status("", status).await;
        tokio::select! {
            changed = readiness.changed() => if changed.is_err() { return },
            () = stopped(&mut stop) => return,
        }
    }
}
