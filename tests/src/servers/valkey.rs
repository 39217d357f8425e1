//! A private Valkey for one test: one server, or — with `QM_TEST_VALKEY=cluster` — a
//! 3-primary Valkey Cluster on loopback (`--cluster-enabled yes`, the slots split in three),
//! so the same durable-store and fault tests run on both. A fault (kill -9, restart, SIGSTOP,
//! `FLUSHALL`, `CLIENT KILL`, `CONFIG SET`) reaches every node of a cluster; a keyed command
//! follows the cluster's `MOVED` answer to the node that holds the key.

use std::net::{SocketAddr, TcpListener as StdTcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How long a Valkey server may take to answer `PING` after it is started.
const VALKEY_START_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one raw RESP command may take, connect included.
const VALKEY_COMMAND_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a cluster may take to agree that every slot is served (`cluster_state:ok`).
const CLUSTER_READY_TIMEOUT: Duration = Duration::from_secs(15);
/// The primaries of a test cluster.
const CLUSTER_PRIMARIES: usize = 3;
/// Every key's hash slot is one of these.
const CLUSTER_SLOTS: usize = 16_384;
/// Longer than any stall a test makes (SIGSTOP for 10 s), so no node is ever judged failed:
/// the tests are about the engine riding out a store fault, not about cluster failover.
const CLUSTER_NODE_TIMEOUT_MS: &str = "30000";

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

/// One server, or a cluster of three primaries: what `QM_TEST_VALKEY` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValkeyTopology {
    Single,
    Cluster,
}

impl ValkeyTopology {
    /// `QM_TEST_VALKEY`: unset or `single` (the default), or `cluster`.
    pub fn from_env() -> ValkeyTopology {
        match std::env::var("QM_TEST_VALKEY").as_deref() {
            Err(_) | Ok("" | "single") => ValkeyTopology::Single,
            Ok("cluster") => ValkeyTopology::Cluster,
            Ok(other) => panic!("QM_TEST_VALKEY={other:?}: use single or cluster"),
        }
    }
}

/// A private Valkey owned by one test: each server on its own loopback port with its own data
/// directory under the system temp dir, all gone when this value is dropped.
#[derive(Debug)]
pub struct PrivateValkey {
    topology: ValkeyTopology,
    nodes: Vec<Node>,
}

impl PrivateValkey {
    /// Starts a private Valkey with `options` (of the topology `QM_TEST_VALKEY` names) and
    /// waits until it serves.
    ///
    /// Panics if neither `valkey-server` nor `redis-server` is on `PATH`, or if a server does
    /// not come up within 5 s (the panic shows the tail of its log).
    pub async fn start(options: ValkeyOptions) -> PrivateValkey {
        PrivateValkey::start_with(options, ValkeyExtras::default()).await
    }

    /// [`start`](Self::start) with a configuration file and overriding directives.
    pub async fn start_with(options: ValkeyOptions, extras: ValkeyExtras) -> PrivateValkey {
        PrivateValkey::start_as(ValkeyTopology::from_env(), options, extras).await
    }

    /// [`start_with`](Self::start_with) of a given topology, whatever `QM_TEST_VALKEY` says.
    pub async fn start_as(
        topology: ValkeyTopology,
        options: ValkeyOptions,
        extras: ValkeyExtras,
    ) -> PrivateValkey {
        let binary = find_valkey_binary();
        let count = match topology {
            ValkeyTopology::Single => 1,
            ValkeyTopology::Cluster => CLUSTER_PRIMARIES,
        };
        let mut nodes = Vec::with_capacity(count);
        for _ in 0..count {
            let clustered = topology == ValkeyTopology::Cluster;
            nodes.push(Node::start(&binary, options, &extras, clustered).await);
        }
        let valkey = PrivateValkey { topology, nodes };
        if topology == ValkeyTopology::Cluster {
            valkey.form_cluster().await;
        }
        valkey
    }

    pub fn topology(&self) -> ValkeyTopology {
        self.topology
    }

    /// `redis://127.0.0.1:<port>`, or for a cluster
    /// `redis-cluster://127.0.0.1:<port>?node=127.0.0.1:<port>&node=…`.
    pub fn url(&self) -> String {
        match self.topology {
            ValkeyTopology::Single => format!("redis://{}", self.addr()),
            ValkeyTopology::Cluster => {
                let others: Vec<String> = self.nodes[1..]
                    .iter()
                    .map(|node| format!("node={}", node.addr()))
                    .collect();
                format!("redis-cluster://{}?{}", self.addr(), others.join("&"))
            }
        }
    }

    /// The loopback port of the (first) server, stable across [`restart`](Self::restart).
    pub fn port(&self) -> u16 {
        self.nodes[0].port
    }

    /// The (first) server's loopback address.
    pub fn addr(&self) -> SocketAddr {
        self.nodes[0].addr()
    }

    /// The (first) server's private data directory (AOF files and `server.log` live here).
    pub fn dir(&self) -> &Path {
        &self.nodes[0].dir
    }

    /// The (first) server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.nodes[0].child.as_ref().map(Child::id)
    }

    /// Every server's multi-part AOF directory (`appendonlydir` under its data directory).
    pub fn aof_dirs(&self) -> Vec<PathBuf> {
        self.nodes
            .iter()
            .map(|node| node.dir.join("appendonlydir"))
            .collect()
    }

    /// Every server's log, one after the other.
    pub fn logs(&self) -> String {
        self.nodes
            .iter()
            .map(|node| std::fs::read_to_string(node.log_path()).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Stalls every server with SIGSTOP: each keeps its connections open and answers nothing
    /// until [`resume`](Self::resume).
    pub fn pause(&self) {
        for node in &self.nodes {
            node.signal("STOP");
        }
    }

    /// SIGCONT after [`pause`](Self::pause): the servers work through what queued meanwhile.
    pub fn resume(&self) {
        for node in &self.nodes {
            node.signal("CONT");
        }
    }

    /// Kills every server with SIGKILL — no shutdown save, no final fsync — and reaps it.
    pub fn kill9(&mut self) {
        for node in &mut self.nodes {
            node.kill9();
        }
    }

    /// Starts every server again on the same port and directory with the same options (each
    /// reloads its AOF first, if it has one; a cluster node its `nodes.conf`), and waits until
    /// they serve. A server that is still running is killed first.
    ///
    /// Panics (with the log tail) if one does not come up within 5 s.
    pub async fn restart(&mut self) {
        self.kill9();
        for node in &mut self.nodes {
            node.restart().await;
        }
        if self.topology == ValkeyTopology::Cluster {
            self.wait_cluster_ok().await;
        }
    }

    /// Sends one command (`args[0]` is the command name) over a fresh TCP connection and
    /// returns the raw RESP reply, e.g. `+OK\r\n`, `$1\r\nv\r\n`, `$-1\r\n` or `:3\r\n`.
    ///
    /// On a cluster, a command about the server rather than a key (`FLUSHALL`, `DBSIZE`,
    /// `CONFIG`, `CLIENT`, `FUNCTION`, `INFO`) goes to every node: integer replies are summed,
    /// others must agree. A keyed command goes where the cluster's `MOVED` sends it.
    ///
    /// Panics if a server cannot be reached or does not reply within 5 s.
    pub async fn command(&self, args: &[&str]) -> String {
        if self.nodes.len() == 1 {
            return raw_command(self.addr(), args).await;
        }
        if about_the_server(args) {
            let mut replies = Vec::with_capacity(self.nodes.len());
            for node in &self.nodes {
                replies.push(raw_command(node.addr(), args).await);
            }
            return combined(args, replies);
        }
        let reply = raw_command(self.addr(), args).await;
        match moved_to(&reply) {
            Some(holder) => raw_command(holder, args).await,
            None => reply,
        }
    }

    /// `FLUSHALL` on every server. Panics unless each answers `+OK`.
    pub async fn flushall(&self) {
        let reply = self.command(&["FLUSHALL"]).await;
        assert_eq!(reply, "+OK\r\n", "FLUSHALL on {}", self.url());
    }

    /// Starts sending `CLIENT KILL TYPE normal` every `period` to every server from a
    /// connection of its own (spared: `SKIPME` is on by default), closing every other ordinary
    /// client connection — the engine's command connections — until [`ClientKiller::stop`].
    pub fn kill_clients_every(&self, period: Duration) -> ClientKiller {
        let addrs: Vec<SocketAddr> = self.nodes.iter().map(Node::addr).collect();
        let (stop, mut stopped) = watch::channel(false);
        let task = tokio::spawn(async move {
            let mut tally = KillTally::default();
            let mut streams = Vec::with_capacity(addrs.len());
            for addr in &addrs {
                let stream = TcpStream::connect(addr)
                    .await
                    .unwrap_or_else(|error| panic!("connect to Valkey at {addr}: {error}"));
                streams.push((*addr, stream));
            }
            let kill = encode_command(&["CLIENT", "KILL", "TYPE", "normal"]);
            loop {
                tokio::select! {
                    _ = stopped.wait_for(|stop| *stop) => return tally,
                    () = tokio::time::sleep(period) => {}
                }
                for (addr, stream) in &mut streams {
                    stream
                        .write_all(&kill)
                        .await
                        .unwrap_or_else(|error| panic!("CLIENT KILL on {addr}: {error}"));
                    let reply = read_reply(stream)
                        .await
                        .unwrap_or_else(|error| panic!("CLIENT KILL on {addr}: {error}"));
                    let killed: u64 = reply
                        .trim_start_matches(':')
                        .trim_end()
                        .parse()
                        .unwrap_or_else(|_| panic!("CLIENT KILL on {addr} answered {reply:?}"));
                    tally.killed += killed;
                }
                tally.rounds += 1;
            }
        });
        ClientKiller { stop, task }
    }

    /// Gives each primary a third of the slots, introduces them to each other, and waits until
    /// every node serves every slot.
    async fn form_cluster(&self) {
        let share = CLUSTER_SLOTS / self.nodes.len();
        for (index, node) in self.nodes.iter().enumerate() {
            let first = index * share;
            let last = if index + 1 == self.nodes.len() {
                CLUSTER_SLOTS - 1
            } else {
                first + share - 1
            };
            let (first, last) = (first.to_string(), last.to_string());
            let reply =
                raw_command(node.addr(), &["CLUSTER", "ADDSLOTSRANGE", &first, &last]).await;
            assert_eq!(reply, "+OK\r\n", "CLUSTER ADDSLOTSRANGE on {}", node.addr());
        }
        let first = self.nodes[0].addr();
        for node in &self.nodes[1..] {
            let (port, bus) = (node.port.to_string(), node.bus_port.to_string());
            let reply = raw_command(first, &["CLUSTER", "MEET", "127.0.0.1", &port, &bus]).await;
            assert_eq!(
                reply,
                "+OK\r\n",
                "CLUSTER MEET {} from {first}",
                node.addr()
            );
        }
        self.wait_cluster_ok().await;
    }

    /// Waits until every node says `cluster_state:ok` and knows every other node.
    async fn wait_cluster_ok(&self) {
        let deadline = Instant::now() + CLUSTER_READY_TIMEOUT;
        let known = format!("cluster_known_nodes:{}", self.nodes.len());
        loop {
            let mut all_ok = true;
            let mut last = String::new();
            for node in &self.nodes {
                let info = raw_command(node.addr(), &["CLUSTER", "INFO"]).await;
                if !(info.contains("cluster_state:ok") && info.contains(&known)) {
                    all_ok = false;
                    last = format!("{}: {info}", node.addr());
                    break;
                }
            }
            if all_ok {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the test cluster did not reach cluster_state:ok within {CLUSTER_READY_TIMEOUT:?}; \
                 {last}\nlogs:\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Whether a command is about the server rather than a key: on a cluster it goes to every node.
fn about_the_server(args: &[&str]) -> bool {
    let name = args.first().map(|name| name.to_ascii_uppercase());
    matches!(
        name.as_deref(),
        Some("FLUSHALL" | "FLUSHDB" | "DBSIZE" | "CONFIG" | "CLIENT" | "FUNCTION" | "INFO")
    )
}

/// One reply from the replies of every node: integers summed, anything else agreed on.
fn combined(args: &[&str], replies: Vec<String>) -> String {
    let integers: Option<Vec<i64>> = replies
        .iter()
        .map(|reply| reply.strip_prefix(':')?.trim_end().parse().ok())
        .collect();
    if let Some(integers) = integers {
        return format!(":{}\r\n", integers.iter().sum::<i64>());
    }
    assert!(
        replies.windows(2).all(|pair| pair[0] == pair[1]),
        "{args:?} answered differently on the cluster's nodes: {replies:?}"
    );
    replies.into_iter().next().unwrap_or_default()
}

/// The node a `-MOVED <slot> <host:port>` reply sends a keyed command to.
fn moved_to(reply: &str) -> Option<SocketAddr> {
    let rest = reply.strip_prefix("-MOVED ")?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

impl Drop for PrivateValkey {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            node.kill9();
            if let Err(error) = std::fs::remove_dir_all(&node.dir) {
                eprintln!(
                    "could not remove the private Valkey dir {}: {error}",
                    node.dir.display()
                );
            }
        }
    }
}

/// One `valkey-server` (or `redis-server`) process.
#[derive(Debug)]
struct Node {
    binary: PathBuf,
    port: u16,
    /// The cluster bus port (`--cluster-port`), for a cluster node.
    bus_port: u16,
    clustered: bool,
    dir: PathBuf,
    options: ValkeyOptions,
    extras: ValkeyExtras,
    child: Option<Child>,
}

impl Node {
    async fn start(
        binary: &Path,
        options: ValkeyOptions,
        extras: &ValkeyExtras,
        clustered: bool,
    ) -> Node {
        let dir = std::env::temp_dir().join(format!(
            "qm-valkey-{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::create_dir_all(&dir).unwrap_or_else(|error| {
            panic!("create the private Valkey dir {}: {error}", dir.display())
        });
        let mut node = Node {
            binary: binary.to_path_buf(),
            port: 0,
            bus_port: 0,
            clustered,
            dir,
            options,
            extras: extras.clone(),
            child: None,
        };
        // A free port is released before the server binds it, so another process may take it
        // in between: the server then exits at once and we try again with other ports.
        let mut last_failure = String::new();
        for _ in 0..5 {
            node.port = free_port();
            node.bus_port = free_port();
            match node.spawn_and_wait().await {
                Ok(()) => return node,
                Err(failure) => last_failure = failure,
            }
        }
        panic!(
            "{} did not come up in {}: {last_failure}",
            node.binary.display(),
            node.dir.display()
        );
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    fn signal(&self, signal: &str) {
        let pid = self
            .child
            .as_ref()
            .map(Child::id)
            .expect("the Valkey server is running");
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string())
            .status()
            .unwrap_or_else(|error| panic!("run kill -{signal} {pid}: {error}"));
        assert!(status.success(), "kill -{signal} {pid}: {status}");
    }

    fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            // `Child::kill` sends SIGKILL on Unix. It fails only if the child already exited.
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    async fn restart(&mut self) {
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
        if self.clustered {
            command
                .args(["--cluster-enabled", "yes"])
                .args(["--cluster-config-file", "nodes.conf"])
                .args(["--cluster-node-timeout", CLUSTER_NODE_TIMEOUT_MS])
                .arg("--cluster-port")
                .arg(self.bus_port.to_string());
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

/// How many times a [`ClientKiller`] ran `CLIENT KILL` (on every server), and how many
/// connections it closed.
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

/// One command on a fresh connection to `addr`; panics past 5 s.
async fn raw_command(addr: SocketAddr, args: &[&str]) -> String {
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
