//! `qm` child processes for the fault tests, each started with a given environment on a fixed
//! loopback port, so it can be killed with SIGKILL and started again where the others expect
//! it: a `qm engine` ([`EngineProcess`]; the gateway and admin in the test process reach it, see
//! [`crate::spawn_edge`]), a `qm admin` ([`AdminProcess`]) and a `qm gateway`
//! ([`GatewayProcess`]).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

/// One `qm <target>` child with a fixed environment, its stderr appended to a log file that is
/// removed when the child is dropped: what the engine and admin processes share.
struct QmChild {
    binary: PathBuf,
    target: &'static str,
    env: HashMap<String, String>,
    log: PathBuf,
    child: Option<Child>,
}

impl QmChild {
    fn new(
        binary: PathBuf,
        target: &'static str,
        env: HashMap<String, String>,
        port: u16,
    ) -> QmChild {
        let log =
            std::env::temp_dir().join(format!("qm-{target}-{}-{port}.log", std::process::id()));
        QmChild {
            binary,
            target,
            env,
            log,
            child: None,
        }
    }

    /// Kills a running child, then starts a new one.
    fn spawn(&mut self) {
        self.kill9();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap_or_else(|error| panic!("open the {} log: {error}", self.target));
        let child = Command::new(&self.binary)
            .arg(self.target)
            .env_clear()
            .envs(&self.env)
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start the qm binary");
        self.child = Some(child);
    }

    /// The running child's process id.
    fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// How the child ended, if it has.
    fn exited(&mut self) -> Option<ExitStatus> {
        self.child.as_mut()?.try_wait().ok().flatten()
    }

    fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for QmChild {
    fn drop(&mut self) {
        self.kill9();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// A running (or killed) engine process.
pub struct EngineProcess {
    addr: SocketAddr,
    process: QmChild,
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
        let mut env = env.clone();
        env.insert("ENGINE_ADDR".to_owned(), addr.to_string());
        let mut engine = EngineProcess {
            addr,
            process: QmChild::new(binary.into(), "engine", env, addr.port()),
        };
        engine.restart().await;
        engine
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Starts the process again (after a kill) and waits until it serves.
    pub async fn restart(&mut self) {
        self.process.spawn();
        self.wait_serving(Duration::from_secs(20)).await;
    }

    /// Waits until the engine's health service answers serving.
    pub async fn wait_serving(&mut self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            // The health service asks no credential.
            let channel = qm_proto::EngineTarget::new(self.addr, "")
                .expect("a socket address")
                .health_channel();
            if qm_proto::client::engine_ready(channel).await.is_ok() {
                return;
            }
            if let Some(status) = self.process.exited() {
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
        self.process.kill9();
    }

    /// The last lines the engine logged.
    pub fn log_tail(&self) -> String {
        self.process.log_tail()
    }

    /// The running process's id (for the benches that read its CPU time).
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }
}

/// A `qm admin` or `qm gateway` child on a fixed loopback port, ready once its `/healthz`
/// answers 200: what the two HTTP processes share.
struct HttpProcess {
    port: u16,
    process: QmChild,
}

impl HttpProcess {
    /// Starts `binary <target>` with `env` on `127.0.0.1:<port>` (`host_var`/`port_var` name
    /// the target's listen settings), talking to the engine at `engine`, and waits until it is
    /// ready (the engine must be up).
    async fn start(
        binary: PathBuf,
        target: &'static str,
        env: &HashMap<String, String>,
        (host_var, port_var): (&str, &str),
        engine: SocketAddr,
        port: u16,
    ) -> HttpProcess {
        let mut env = env.clone();
        env.insert("ENGINE_ADDR".to_owned(), engine.to_string());
        env.insert(host_var.to_owned(), "127.0.0.1".to_owned());
        env.insert(port_var.to_owned(), port.to_string());
        let mut process = HttpProcess {
            port,
            process: QmChild::new(binary, target, env, port),
        };
        process.restart().await;
        process
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    async fn restart(&mut self) {
        self.process.spawn();
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .expect("the http client builds");
        let target = self.process.target;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let health = client.get(format!("{}/healthz", self.url())).send().await;
            if health.is_ok_and(|response| response.status() == 200) {
                return;
            }
            if let Some(status) = self.process.exited() {
                panic!(
                    "qm {target} exited with {status}; log:\n{}",
                    self.process.log_tail()
                );
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "qm {target} did not answer /healthz 200 within 20 s; log:\n{}",
                self.process.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// A running (or killed) `qm admin` process on a fixed loopback port.
pub struct AdminProcess(HttpProcess);

impl AdminProcess {
    /// Starts `binary admin` with `env` on `127.0.0.1:<port>`, talking to the engine at
    /// `engine`, and waits until its `/healthz` answers 200 (the engine must be up).
    pub async fn start(
        binary: impl Into<PathBuf>,
        env: &HashMap<String, String>,
        engine: SocketAddr,
        port: u16,
    ) -> AdminProcess {
        let vars = ("ADMIN_HOST", "ADMIN_PORT");
        AdminProcess(HttpProcess::start(binary.into(), "admin", env, vars, engine, port).await)
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        self.0.url()
    }

    /// Starts the process again (after a kill) and waits until `/healthz` answers 200.
    pub async fn restart(&mut self) {
        self.0.restart().await;
    }

    /// SIGKILL, and wait for the process to be gone.
    pub fn kill9(&mut self) {
        self.0.process.kill9();
    }

    /// The last lines the admin process logged.
    pub fn log_tail(&self) -> String {
        self.0.process.log_tail()
    }
}

/// A running (or killed) `qm gateway` process on a fixed loopback port.
pub struct GatewayProcess(HttpProcess);

impl GatewayProcess {
    /// Starts `binary gateway` with `env` on `127.0.0.1:<port>`, talking to the engine at
    /// `engine`, and waits until its `/healthz` answers 200 (the engine must be up).
    pub async fn start(
        binary: impl Into<PathBuf>,
        env: &HashMap<String, String>,
        engine: SocketAddr,
        port: u16,
    ) -> GatewayProcess {
        let vars = ("HOST", "PORT");
        GatewayProcess(HttpProcess::start(binary.into(), "gateway", env, vars, engine, port).await)
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        self.0.url()
    }

    /// SIGKILL, and wait for the process to be gone.
    pub fn kill9(&mut self) {
        self.0.process.kill9();
    }

    /// The last lines the gateway process logged.
    pub fn log_tail(&self) -> String {
        self.0.process.log_tail()
    }

    /// The running process's id (for the benches that read its memory).
    pub fn pid(&self) -> Option<u32> {
        self.0.process.pid()
    }
}
