//! Real servers for the durable-store tests: a private Valkey / Redis process per test
//! ([`PrivateValkey`]), a fresh PostgreSQL database per test ([`FreshDatabase`]), and a TCP
//! proxy that can be cut to simulate an outage between a component and its store
//! ([`TcpProxy`], with [`rewrite_port`] to point a store URL at it).
//!
//! Everything here panics with a message that says what went wrong and how to fix the
//! environment: this is test-harness code, and a clear panic is the most useful failure.

use std::net::{SocketAddr, TcpListener as StdTcpListener, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sqlx::Connection;
use sqlx::postgres::PgConnection;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How long a Valkey server may take to answer `PING` after it is started.
const VALKEY_START_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one raw RESP command may take, connect included.
const VALKEY_COMMAND_TIMEOUT: Duration = Duration::from_secs(5);
/// How long connecting to PostgreSQL may take.
const POSTGRES_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The admin URL used when `DATABASE_URL` is not set.
const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

// ---------------------------------------------------------------------------------------------
// Valkey / Redis
// ---------------------------------------------------------------------------------------------

/// How a [`PrivateValkey`] is configured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ValkeyOptions {
    /// Run with `--appendonly yes --appendfsync everysec` (writes survive a SIGKILL once the
    /// once-a-second fsync has run); otherwise `--appendonly no` (nothing survives a restart).
    pub aof: bool,
}

/// More of a [`PrivateValkey`]'s configuration, for the fault tests: a configuration file to
/// start from (e.g. the deployment's `deploy/valkey.conf`) and directives that override
/// everything else (e.g. `--appendfsync always`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ValkeyExtras {
    /// Read first, so the test's port, directory and log (and `args`) override it.
    pub config_file: Option<PathBuf>,
    /// Directives given after every other one, e.g. `["--appendfsync", "always"]`.
    pub args: Vec<String>,
}

/// A `valkey-server` (or `redis-server`) process owned by one test: its own loopback port and
/// its own data directory under the system temp dir, both gone when this value is dropped.
#[derive(Debug)]
pub struct PrivateValkey {
    binary: PathBuf,
    port: u16,
    dir: PathBuf,
    options: ValkeyOptions,
    extras: ValkeyExtras,
    child: Option<Child>,
}

impl PrivateValkey {
    /// Starts a private server with `options` and waits until it answers `PING`.
    ///
    /// Panics if neither `valkey-server` nor `redis-server` is on `PATH`, or if the server
    /// does not come up within 5 s (the panic shows the tail of its log).
    pub async fn start(options: ValkeyOptions) -> PrivateValkey {
        PrivateValkey::start_with(options, ValkeyExtras::default()).await
    }

    /// [`start`](Self::start) with a configuration file and overriding directives.
    pub async fn start_with(options: ValkeyOptions, extras: ValkeyExtras) -> PrivateValkey {
        let binary = find_valkey_binary();
        let dir = std::env::temp_dir().join(format!(
            "qm-valkey-{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::create_dir_all(&dir).unwrap_or_else(|error| {
            panic!("create the private Valkey dir {}: {error}", dir.display())
        });
        let mut server = PrivateValkey {
            binary,
            port: 0,
            dir,
            options,
            extras,
            child: None,
        };
        // The free port is released before the server binds it, so another process may take it
        // in between: the server then exits at once and we try again with another port.
        let mut last_failure = String::new();
        for _ in 0..5 {
            server.port = free_port();
            match server.spawn_and_wait().await {
                Ok(()) => return server,
                Err(failure) => last_failure = failure,
            }
        }
        panic!(
            "{} did not come up in {}: {last_failure}",
            server.binary.display(),
            server.dir.display()
        );
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The loopback port the server listens on (stable across [`restart`](Self::restart)).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's loopback address.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// The server's private data directory (AOF files and `server.log` live here).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The directory of the multi-part AOF (`appendonlydir` under [`dir`](Self::dir)).
    pub fn aof_dir(&self) -> PathBuf {
        self.dir.join("appendonlydir")
    }

    /// Stalls the server with SIGSTOP: it keeps its connections open and answers nothing
    /// until [`resume`](Self::resume).
    pub fn pause(&self) {
        self.signal("STOP");
    }

    /// SIGCONT after [`pause`](Self::pause): the server works through what queued meanwhile.
    pub fn resume(&self) {
        self.signal("CONT");
    }

    fn signal(&self, signal: &str) {
        let pid = self.pid().expect("the Valkey server is running");
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string())
            .status()
            .unwrap_or_else(|error| panic!("run kill -{signal} {pid}: {error}"));
        assert!(status.success(), "kill -{signal} {pid}: {status}");
    }

    /// Kills the server with SIGKILL — no shutdown save, no final fsync — and reaps it.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            // `Child::kill` sends SIGKILL on Unix. It fails only if the child already exited.
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port and directory with the same options, and
    /// waits until it answers `PING` (it reloads its AOF first, if it has one). A server that
    /// is still running is killed first.
    ///
    /// Panics (with the log tail) if it does not come up within 5 s.
    pub async fn restart(&mut self) {
        self.kill9();
        let deadline = Instant::now() + VALKEY_START_TIMEOUT;
        loop {
            match self.spawn_and_wait().await {
                Ok(()) => return,
                // The port can be briefly busy right after the kill: try again until the
                // deadline.
                Err(failure) if Instant::now() >= deadline => panic!(
                    "{} did not restart on port {}: {failure}",
                    self.binary.display(),
                    self.port
                ),
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    /// Sends one command (`args[0]` is the command name) over a fresh TCP connection and
    /// returns the raw RESP reply, e.g. `+OK\r\n`, `$1\r\nv\r\n`, `$-1\r\n` or `:3\r\n`.
    ///
    /// Panics if the server cannot be reached or does not reply within 5 s.
    pub async fn command(&self, args: &[&str]) -> String {
        let addr = self.addr();
        let exchange = async {
            let mut stream = TcpStream::connect(addr).await?;
            stream.write_all(&encode_command(args)).await?;
            read_reply(&mut stream).await
        };
        match tokio::time::timeout(VALKEY_COMMAND_TIMEOUT, exchange).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(error)) => panic!("Valkey command {args:?} on {addr} failed: {error}"),
            Err(_) => panic!("Valkey command {args:?} on {addr} got no reply within 5 s"),
        }
    }

    /// `FLUSHALL`: empties every database. Panics unless the server answers `+OK`.
    pub async fn flushall(&self) {
        let reply = self.command(&["FLUSHALL"]).await;
        assert_eq!(reply, "+OK\r\n", "FLUSHALL on {}", self.url());
    }

    /// Starts sending `CLIENT KILL TYPE normal` every `period` from a connection of its own
    /// (spared: `SKIPME` is on by default), closing every other ordinary client connection —
    /// the engine's command connections — until [`ClientKiller::stop`].
    pub fn kill_clients_every(&self, period: Duration) -> ClientKiller {
        let addr = self.addr();
        let (stop, mut stopped) = watch::channel(false);
        let task = tokio::spawn(async move {
            let mut tally = KillTally::default();
            let mut stream = TcpStream::connect(addr)
                .await
                .unwrap_or_else(|error| panic!("connect to Valkey at {addr}: {error}"));
            let kill = encode_command(&["CLIENT", "KILL", "TYPE", "normal"]);
            loop {
                tokio::select! {
                    _ = stopped.wait_for(|stop| *stop) => return tally,
                    () = tokio::time::sleep(period) => {}
                }
                stream
                    .write_all(&kill)
                    .await
                    .unwrap_or_else(|error| panic!("CLIENT KILL on {addr}: {error}"));
                let reply = read_reply(&mut stream)
                    .await
                    .unwrap_or_else(|error| panic!("CLIENT KILL on {addr}: {error}"));
                let killed: u64 = reply
                    .trim_start_matches(':')
                    .trim_end()
                    .parse()
                    .unwrap_or_else(|_| panic!("CLIENT KILL on {addr} answered {reply:?}"));
                tally.rounds += 1;
                tally.killed += killed;
            }
        });
        ClientKiller { stop, task }
    }

    /// Spawns the server on `self.port` and waits for `PING`; on failure the child is killed
    /// and the error carries the log tail.
    async fn spawn_and_wait(&mut self) -> Result<(), String> {
        let mut command = Command::new(&self.binary);
        if let Some(file) = &self.extras.config_file {
            command.arg(file);
        }
        command
            .arg("--port")
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1"])
            .arg("--dir")
            .arg(&self.dir)
            .args(["--save", ""])
            .args(["--daemonize", "no"])
            .arg("--logfile")
            .arg(self.log_path());
        if self.options.aof {
            command.args(["--appendonly", "yes", "--appendfsync", "everysec"]);
        } else {
            command.args(["--appendonly", "no"]);
        }
        command.args(&self.extras.args);
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("spawn {}: {error}", self.binary.display()));
        let child = self.child.insert(child);
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let deadline = Instant::now() + VALKEY_START_TIMEOUT;
        let failure = loop {
            match child.try_wait() {
                Ok(Some(status)) => break format!("the server exited with {status}"),
                Ok(None) => {}
                Err(error) => break format!("cannot poll the server process: {error}"),
            }
            if ping(addr).await {
                return Ok(());
            }
            if Instant::now() >= deadline {
                break "no +PONG within 5 s".to_owned();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        self.kill9();
        Err(format!(
            "{failure}; tail of {}:\n{}",
            self.log_path().display(),
            log_tail(&self.log_path(), 30)
        ))
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("server.log")
    }
}

impl Drop for PrivateValkey {
    fn drop(&mut self) {
        self.kill9();
        if let Err(error) = std::fs::remove_dir_all(&self.dir) {
            eprintln!(
                "could not remove the private Valkey dir {}: {error}",
                self.dir.display()
            );
        }
    }
}

/// How many times a [`ClientKiller`] ran `CLIENT KILL`, and how many connections it closed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KillTally {
    pub rounds: u64,
    pub killed: u64,
}

/// The loop started by [`PrivateValkey::kill_clients_every`].
#[derive(Debug)]
pub struct ClientKiller {
    stop: watch::Sender<bool>,
    task: JoinHandle<KillTally>,
}

impl ClientKiller {
    /// Ends the loop; answers what it did. Panics if the loop itself failed.
    pub async fn stop(self) -> KillTally {
        self.stop.send_replace(true);
        self.task
            .await
            .unwrap_or_else(|error| panic!("the CLIENT KILL loop failed: {error}"))
    }
}

/// `valkey-server` if it is on `PATH`, else `redis-server`, else a panic saying what to install.
fn find_valkey_binary() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in ["valkey-server", "redis-server"] {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join(name);
            if is_executable(&candidate) {
                return candidate;
            }
        }
    }
    panic!(
        "no valkey-server or redis-server on PATH: install one (apt-get install redis-server, \
         or valkey-server) — the durable-store tests need it"
    );
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|metadata| metadata.is_file() && metadata.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// A loopback port that was free a moment ago.
fn free_port() -> u16 {
    StdTcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("bind an ephemeral loopback port to find a free one")
        .port()
}

/// Whether `addr` answers `PING` with `+PONG` (a server still loading its AOF answers
/// `-LOADING`, which is not ready yet).
async fn ping(addr: SocketAddr) -> bool {
    let exchange = async {
        let mut stream = TcpStream::connect(addr).await?;
        stream.write_all(b"PING\r\n").await?;
        read_reply(&mut stream).await
    };
    matches!(
        tokio::time::timeout(Duration::from_millis(500), exchange).await,
        Ok(Ok(reply)) if reply.starts_with("+PONG")
    )
}

/// One command as a RESP array of bulk strings.
fn encode_command(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Reads until one complete RESP reply has arrived and returns it as text.
async fn read_reply(stream: &mut TcpStream) -> std::io::Result<String> {
    let mut buffer = Vec::new();
    let mut chunk = [0_u8; 4096];
    loop {
        if let Some(length) = reply_length(&buffer) {
            buffer.truncate(length);
            return Ok(String::from_utf8_lossy(&buffer).into_owned());
        }
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!(
                    "connection closed after a partial reply {:?}",
                    String::from_utf8_lossy(&buffer)
                ),
            ));
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
}

/// The byte length of the first complete RESP (2 or 3) reply in `buffer`, or `None` if more
/// bytes are needed.
fn reply_length(buffer: &[u8]) -> Option<usize> {
    let line_end = buffer.windows(2).position(|pair| pair == b"\r\n")?;
    let after_line = line_end + 2;
    let count = || -> Option<i64> {
        std::str::from_utf8(&buffer[1..line_end])
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    match buffer[0] {
        // Bulk string, bulk error, verbatim string: `$<n>\r\n<n bytes>\r\n`, `$-1` is nil.
        b'$' | b'!' | b'=' => match usize::try_from(count()?) {
            Ok(length) => {
                let end = after_line + length + 2;
                (buffer.len() >= end).then_some(end)
            }
            Err(_) => Some(after_line),
        },
        // Array, set, push, map: `*<n>\r\n` then n replies (2n for a map), `*-1` is nil.
        kind @ (b'*' | b'~' | b'>' | b'%') => match usize::try_from(count()?) {
            Ok(items) => {
                let items = if kind == b'%' { items * 2 } else { items };
                let mut position = after_line;
                for _ in 0..items {
                    position += reply_length(&buffer[position..])?;
                }
                Some(position)
            }
            Err(_) => Some(after_line),
        },
        // Simple string, error, integer and the other one-line types.
        _ => Some(after_line),
    }
}

fn log_tail(path: &Path, lines: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(error) => format!("(no log: {error})"),
    }
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL
// ---------------------------------------------------------------------------------------------

/// A PostgreSQL database created for one test (`qm_test_<16 hex>`) on the server that
/// `DATABASE_URL` points at (default `postgres://postgres@127.0.0.1:5432/postgres`), dropped
/// `WITH (FORCE)` when this value is dropped.
#[derive(Debug)]
pub struct FreshDatabase {
    admin_url: String,
    name: String,
    url: String,
}

impl FreshDatabase {
    /// Creates a new, empty database.
    ///
    /// Panics if PostgreSQL is not reachable at the admin URL or refuses `CREATE DATABASE`.
    pub async fn create() -> FreshDatabase {
        let admin_url = admin_database_url();
        let name = format!("qm_test_{:016x}", rand::random::<u64>());
        let mut admin = connect_admin(&admin_url).await;
        sqlx::raw_sql(&format!("CREATE DATABASE \"{name}\""))
            .execute(&mut admin)
            .await
            .unwrap_or_else(|error| panic!("CREATE DATABASE {name} at {admin_url}: {error}"));
        let _ = admin.close().await;
        let mut url = url::Url::parse(&admin_url)
            .unwrap_or_else(|error| panic!("DATABASE_URL {admin_url} is not a URL: {error}"));
        url.set_path(&format!("/{name}"));
        FreshDatabase {
            admin_url,
            name,
            url: url.to_string(),
        }
    }

    /// The URL of this database (the admin URL with its database name replaced).
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// The database name, `qm_test_<16 hex>`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The admin URL the database was created from.
    pub fn admin_url(&self) -> &str {
        &self.admin_url
    }

    /// The PostgreSQL server's socket address (host and port of the URL; port 5432 if the URL
    /// has none) — what a [`TcpProxy`] in front of it targets.
    pub fn server_addr(&self) -> SocketAddr {
        let url = url::Url::parse(&self.url).expect("the database URL was parsed before");
        let host = url.host_str().unwrap_or("127.0.0.1");
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let port = url.port().unwrap_or(5432);
        (host, port)
            .to_socket_addrs()
            .ok()
            .and_then(|mut addrs| addrs.next())
            .unwrap_or_else(|| panic!("cannot resolve the PostgreSQL host {host}:{port}"))
    }
}

impl Drop for FreshDatabase {
    fn drop(&mut self) {
        // Drop cannot await, and may run inside a runtime that must not be blocked by a nested
        // one: run the DROP on a thread of its own with a small runtime, and wait for it.
        let admin_url = self.admin_url.clone();
        let name = self.name.clone();
        let dropper = std::thread::spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(error) => {
                    eprintln!("could not drop test database {name}: no runtime: {error}");
                    return;
                }
            };
            runtime.block_on(async {
                let connect = PgConnection::connect(&admin_url);
                let mut admin = match tokio::time::timeout(POSTGRES_CONNECT_TIMEOUT, connect).await
                {
                    Ok(Ok(admin)) => admin,
                    Ok(Err(error)) => {
                        eprintln!("could not drop test database {name}: {error}");
                        return;
                    }
                    Err(_) => {
                        eprintln!("could not drop test database {name}: connect timed out");
                        return;
                    }
                };
                let drop = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
                if let Err(error) = sqlx::raw_sql(&drop).execute(&mut admin).await {
                    eprintln!("could not drop test database {name}: {error}");
                }
                let _ = admin.close().await;
            });
        });
        if dropper.join().is_err() {
            eprintln!("the thread dropping test database {} panicked", self.name);
        }
    }
}

/// `DATABASE_URL`, or the local default.
fn admin_database_url() -> String {
    std::env::var("DATABASE_URL")
        .ok()
        .filter(|url| !url.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_DATABASE_URL.to_owned())
}

async fn connect_admin(admin_url: &str) -> PgConnection {
    let failure = match tokio::time::timeout(
        POSTGRES_CONNECT_TIMEOUT,
        PgConnection::connect(admin_url),
    )
    .await
    {
        Ok(Ok(connection)) => return connection,
        Ok(Err(error)) => error.to_string(),
        Err(_) => "connect timed out after 10 s".to_owned(),
    };
    panic!(
        "PostgreSQL is not reachable at {admin_url}: start it (pg_ctlcluster <version> main \
         start) or install it (apt-get install postgresql); set DATABASE_URL to point \
         elsewhere ({failure})"
    );
}

// ---------------------------------------------------------------------------------------------
// Cuttable TCP proxy
// ---------------------------------------------------------------------------------------------

/// A loopback TCP proxy in front of one server. [`cut`](Self::cut) simulates an outage:
/// every forwarded connection is closed at once and new ones are accepted and closed
/// immediately (clients see EOF quickly, never a hang) until [`restore`](Self::restore).
#[derive(Debug)]
pub struct TcpProxy {
    addr: SocketAddr,
    target: SocketAddr,
    cut: watch::Sender<bool>,
    listener: JoinHandle<()>,
}

impl TcpProxy {
    /// Listens on `127.0.0.1:0` and forwards every accepted connection to `target`.
    pub async fn start(target: SocketAddr) -> TcpProxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind an ephemeral loopback port for the proxy");
        let addr = listener
            .local_addr()
            .expect("a bound listener has an address");
        let (cut, _) = watch::channel(false);
        let cut_state = cut.subscribe();
        let listener = tokio::spawn(accept_loop(listener, target, cut_state));
        TcpProxy {
            addr,
            target,
            cut,
            listener,
        }
    }

    /// The address clients connect to instead of the target.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address connections are forwarded to.
    pub fn target(&self) -> SocketAddr {
        self.target
    }

    /// Closes every forwarded connection and refuses (accepts and closes) new ones.
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    /// Forwards new connections again (connections closed by [`cut`](Self::cut) stay closed).
    pub fn restore(&self) {
        self.cut.send_replace(false);
    }

    /// Whether the proxy is currently cut.
    pub fn is_cut(&self) -> bool {
        *self.cut.borrow()
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        // Closing the forwarded connections too: the sender's drop ends their tasks.
        self.cut.send_replace(true);
        self.listener.abort();
    }
}

async fn accept_loop(listener: TcpListener, target: SocketAddr, cut: watch::Receiver<bool>) {
    loop {
        let Ok((inbound, _)) = listener.accept().await else {
            // Accept errors (e.g. too many open files) are transient: back off briefly.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        if *cut.borrow() {
            drop(inbound);
            continue;
        }
        tokio::spawn(forward(inbound, target, cut.clone()));
    }
}

/// Forwards one connection until either side closes it or the proxy is cut or dropped.
async fn forward(mut inbound: TcpStream, target: SocketAddr, mut cut: watch::Receiver<bool>) {
    let piping = async {
        let mut outbound = TcpStream::connect(target).await?;
        tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await
    };
    tokio::select! {
        _ = piping => {}
        // Ends when the proxy is cut (checked against the current value first, so a cut that
        // raced this connection's accept still applies) or when the proxy is dropped.
        _ = cut.wait_for(|cut| *cut) => {}
    }
}

/// `url` (a `postgres://` or `redis://` URL) with its host and port replaced by `addr`, e.g.
/// to point a component at a [`TcpProxy`].
pub fn rewrite_port(url: &str, addr: SocketAddr) -> String {
    let mut parsed =
        url::Url::parse(url).unwrap_or_else(|error| panic!("{url} is not a URL: {error}"));
    parsed
        .set_ip_host(addr.ip())
        .unwrap_or_else(|()| panic!("{url} has no host to rewrite"));
    parsed
        .set_port(Some(addr.port()))
        .unwrap_or_else(|()| panic!("{url} cannot take a port"));
    parsed.to_string()
}
