//! Real servers for the durable-store tests: a private Valkey / Redis per test — one server
//! or a 3-primary cluster ([`PrivateValkey`], in `servers/valkey.rs`) — a fresh PostgreSQL database per test ([`FreshDatabase`]), and a TCP
//! proxy that can be cut to simulate an outage between a component and its store
//! ([`TcpProxy`], with [`rewrite_port`] to point a store URL at it).
//!
//! Everything here panics with a message that says what went wrong and how to fix the
//! environment: this is test-harness code, and a clear panic is the most useful failure.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use sqlx::Connection;
use sqlx::postgres::PgConnection;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

mod valkey;
pub use valkey::{
    ClientKiller, KillTally, PrivateValkey, ValkeyExtras, ValkeyOptions, ValkeyTopology,
};

/// How long connecting to PostgreSQL may take.
const POSTGRES_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The admin URL used when `DATABASE_URL` is not set.
const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

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
