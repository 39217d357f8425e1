//! `qm` child processes for the fault tests, each started with a given environment on a fixed
//! loopback port, so it can be killed with SIGKILL and started again where the others expect
//! it: a `qm engine` ([`EngineProcess`]; the gateway and admin in the test process reach it, see
//! [`crate::spawn_edge`]) and a `qm admin` ([`AdminProcess`]).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running (or killed) engine process.
pub struct EngineProcess {
    binary: PathBuf,
    env: HashMap<String, String>,
    addr: SocketAddr,
    log: PathBuf,
    child: Option<Child>,
}

/// A free loopback address for an engine.
pub fn free_addr() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener
        .local_addr()
        .expect("bound listener has an address")
}

impl EngineProcess {
    /// Starts `binary engine` with `env` (plus ENGINE_ADDR) and waits until it serves.
    pub async fn start(
        binary: impl Into<PathBuf>,
        env: &HashMap<String, String>,
        addr: SocketAddr,
    ) -> EngineProcess {
        let log = std::env::temp_dir().join(format!(
            "qm-engine-{}-{}.log",
            std::process::id(),
            addr.port()
        ));
        let mut engine = EngineProcess {
            binary: binary.into(),
            env: env.clone(),
            addr,
            log,
            child: None,
        };
        engine.restart().await;
        engine
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Starts the process again (after a kill) and waits until it serves.
    pub async fn restart(&mut self) {
        self.kill9();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("open the engine log");
        let child = Command::new(&self.binary)
            .arg("engine")
            .env_clear()
            .envs(&self.env)
            .env("ENGINE_ADDR", self.addr.to_string())
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start the qm binary");
        self.child = Some(child);
        self.wait_serving(Duration::from_secs(20)).await;
    }

    /// Waits until the engine's health service answers serving.
    pub async fn wait_serving(&mut self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            // The health service asks no credential.
            let channel = qm_proto::EngineTarget::new(self.addr, "").health_channel();
            if qm_proto::client::engine_ready(channel).await.is_ok() {
                return;
            }
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                panic!("the engine exited with {status}; log:\n{}", self.log_tail());
            }
            if tokio::time::Instant::now() > deadline {
                panic!(
                    "the engine did not serve within {limit:?}; log:\n{}",
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGKILL, and wait for the process to be gone.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The last lines the engine logged.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for EngineProcess {
    fn drop(&mut self) {
        self.kill9();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// A running (or killed) `qm admin` process on a fixed loopback port.
pub struct AdminProcess {
    binary: PathBuf,
    env: HashMap<String, String>,
    port: u16,
    log: PathBuf,
    child: Option<Child>,
}

impl AdminProcess {
    /// Starts `binary admin` with `env` on `127.0.0.1:<port>`, talking to the engine at
    /// `engine`, and waits until its `/healthz` answers 200 (the engine must be up).
    pub async fn start(
        binary: impl Into<PathBuf>,
        env: &HashMap<String, String>,
        engine: SocketAddr,
        port: u16,
    ) -> AdminProcess {
        let mut env = env.clone();
        env.insert("ENGINE_ADDR".to_owned(), engine.to_string());
        env.insert("ADMIN_HOST".to_owned(), "127.0.0.1".to_owned());
        env.insert("ADMIN_PORT".to_owned(), port.to_string());
        let log = std::env::temp_dir().join(format!("qm-admin-{}-{port}.log", std::process::id()));
        let mut admin = AdminProcess {
            binary: binary.into(),
            env,
            port,
            log,
            child: None,
        };
        admin.restart().await;
        admin
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Starts the process again (after a kill) and waits until `/healthz` answers 200.
    pub async fn restart(&mut self) {
        self.kill9();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("open the admin log");
        let child = Command::new(&self.binary)
            .arg("admin")
            .env_clear()
            .envs(&self.env)
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start the qm binary");
        self.child = Some(child);
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .expect("the http client builds");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let health = client.get(format!("{}/healthz", self.url())).send().await;
            if health.is_ok_and(|response| response.status() == 200) {
                return;
            }
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                panic!("qm admin exited with {status}; log:\n{}", self.log_tail());
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "qm admin did not answer /healthz 200 within 20 s; log:\n{}",
                self.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGKILL, and wait for the process to be gone.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The last lines the admin process logged.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for AdminProcess {
    fn drop(&mut self) {
        self.kill9();
        let _ = std::fs::remove_file(&self.log);
    }
}
