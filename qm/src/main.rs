//! The `qm` binary. It only parses the target, binds its listeners and hands them to
//! [`qm::run_all`], which composes the `qm-engine`, `qm-gateway` and `qm-admin` libraries.
//! `qm` alone runs `qm all`. `qm migrate` and `qm rebuild [ROOM]` are the durable store's
//! maintenance commands; `qm healthcheck engine|gateway|admin` is a container's health check.

mod healthcheck;

use std::sync::Arc;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use qm::{EngineSite, Listeners};
use qm_core::config::{Config, Process, ProcessEnv};
use qm_core::shutdown::{Shutdown, shutdown_signal};
use tokio::net::TcpListener;

/// mimalloc: the request path allocates many small short-lived buffers, where glibc's
/// allocator showed as the largest cost in the join burst profile.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "qm", version, about = "Queue Manager: a virtual waiting room")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Clone, PartialEq, Eq)]
enum Command {
    #[command(flatten)]
    Run(Target),
    /// Applies the journal's migrations to DATABASE_URL and exits.
    Migrate,
    /// Replays the journal (DATABASE_URL) into Valkey (VALKEY_URL) for one room or every room,
    /// refusing a room whose journal has a gap; exits 1 if any room could not be rebuilt.
    Rebuild {
        /// The room id; every journaled room when omitted.
        room: Option<String>,
    },
    /// Exits 0 when the process of that kind on this host (its address from the same
    /// environment) is ready, 1 with the reason when it is not: a container's health check.
    Healthcheck {
        #[arg(value_enum)]
        process: healthcheck::Probed,
    },
}

#[derive(Subcommand, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// Engine, gateway and admin in one process (they still talk gRPC over loopback).
    All,
    /// The engine: all state, gRPC on ENGINE_ADDR.
    Engine,
    /// The public visitor contract on HOST:PORT.
    Gateway,
    /// The operator API on ADMIN_HOST:ADMIN_PORT.
    Admin,
}

impl Target {
    /// The processes this target runs: the configuration warns only about what they read.
    fn processes(self) -> &'static [Process] {
        match self {
            Target::All => Process::ALL,
            Target::Engine => &[Process::Engine],
            Target::Gateway => &[Process::Gateway],
            Target::Admin => &[Process::Admin],
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let command = Cli::parse().command.unwrap_or(Command::Run(Target::All));
    let config = match Config::from_source(&ProcessEnv) {
        Ok(config) => Arc::new(config),
        Err(error) => {
            eprintln!("qm: configuration error: {error}");
            std::process::exit(2);
        }
    };
    init_logging(&config);
    let target = match command {
        Command::Run(target) => target,
        Command::Migrate => return migrate(&config).await,
        Command::Rebuild { room } => return rebuild(&config, room.as_deref()).await,
        Command::Healthcheck { process } => match healthcheck::check(&config, process).await {
            Ok(()) => return Ok(()),
            Err(why) => {
                eprintln!("qm healthcheck: not ready: {why}");
                std::process::exit(1);
            }
        },
    };
    if target != Target::All && !config.engine_credential_is_shared() {
        eprintln!(
            "qm: configuration error: SECRET: a process that runs only part of Queue Manager reaches the others through the engine credential, derived from SECRET or set as ENGINE_TOKEN; set one of them, to the same value on every process"
        );
        std::process::exit(2);
    }
    for warning in config.warnings_for(target.processes()) {
        tracing::warn!(%warning, "configuration");
    }

    let shutdown = Shutdown::new();
    let on_signal = shutdown.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("shutdown signal received, draining");
        on_signal.trigger();
    });
    // Which parts this process serves; the engine of a lone edge runs at ENGINE_ADDR.
    let runs = |part: Target| target == Target::All || target == part;
    let engine = if runs(Target::Engine) {
        EngineSite::Local(bind(config.engine_addr, "ENGINE_ADDR").await?)
    } else {
        EngineSite::Remote(config.engine_target())
    };
    let gateway = match runs(Target::Gateway) {
        true => Some(bind(config.gateway_addr, "HOST/PORT").await?),
        false => None,
    };
    let gateway_metrics = match (runs(Target::Gateway), config.gateway_metrics_addr) {
        (true, Some(addr)) => Some(bind(addr, "GATEWAY_METRICS_ADDR").await?),
        _ => None,
    };
    let admin = match runs(Target::Admin) {
        true => Some(bind(config.admin_addr, "ADMIN_HOST/ADMIN_PORT").await?),
        false => None,
    };
    let listeners = Listeners {
        engine,
        gateway,
        gateway_metrics,
        admin,
    };
    let outcome = qm::run_all(config, listeners, shutdown).await;
    tracing::info!("stopped");
    Ok(outcome?)
}

async fn migrate(config: &Config) -> anyhow::Result<()> {
    let journal = qm_engine::durable::journal::Journal::connect_lazy(&config.database_url)
        .context("DATABASE_URL")?;
    journal.migrate().await.context("migrations")?;
    println!("qm migrate: the journal schema is up to date");
    Ok(())
}

async fn rebuild(config: &Config, room: Option<&str>) -> anyhow::Result<()> {
    let store = qm_engine::DurableStore::start(&qm_engine::durable_options(config))
        .await
        .context("durable store")?;
    match store.rebuild(room).await {
        Ok(rooms) => {
            for room in rooms {
                println!("qm rebuild: {room}: rebuilt from the journal");
            }
            Ok(())
        }
        Err(why) => {
            eprintln!("qm rebuild: {why}");
            std::process::exit(1);
        }
    }
}

async fn bind(addr: std::net::SocketAddr, what: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} ({what})"))
}

/// Logging as LOG_FORMAT and LOG_LEVEL (or RUST_LOG) say; `info` text lines by default.
fn init_logging(config: &Config) {
    use tracing_subscriber::EnvFilter;
    let filter = config
        .log_filters()
        .find_map(|filter| EnvFilter::try_new(filter).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    if config.log_json() {
        builder.json().init();
    } else {
        builder.init();
    }
}
