//! PostgreSQL for the fault tests: a private cluster a test may stop and crash
//! ([`PrivatePostgres`], initdb'd into a temp dir on a free loopback port — never the machine's
//! own server), what a room's journal holds ([`journal_summary`]), and a row lock held on a
//! room's journal row from another connection ([`RowLock`]).
//!
//! Like [`crate::servers`], everything here panics with a message that says what went wrong:
//! this is test-harness code.

use std::net::TcpListener as StdTcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use sqlx::Connection;
use sqlx::postgres::PgConnection;

/// How long connecting to a PostgreSQL server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The account a cluster runs as when the tests run as root (PostgreSQL refuses root).
const POSTGRES_ACCOUNT: &str = "postgres";

/// A PostgreSQL cluster owned by one test: its own data directory under the system temp dir
/// and its own loopback port, trust authentication for `postgres`, stopped and removed on drop.
/// When the tests run as root the cluster runs as the `postgres` account.
#[derive(Debug)]
pub struct PrivatePostgres {
    bin: PathBuf,
    /// The temp dir: `data/` (the cluster), `server.log`, and the Unix socket.
    root: PathBuf,
    port: u16,
    /// `(uid, gid)` to run the server as, when the tests run as root.
    account: Option<(u32, u32)>,
    running: bool,
}

impl PrivatePostgres {
    /// Runs `initdb` and starts the server, waiting until it accepts connections.
    ///
    /// Panics if no PostgreSQL server binaries are installed, or if they fail (with the log).
    pub async fn start() -> PrivatePostgres {
        tokio::task::spawn_blocking(PrivatePostgres::start_blocking)
            .await
            .unwrap_or_else(|error| panic!("starting the private PostgreSQL failed: {error}"))
    }

    fn start_blocking() -> PrivatePostgres {
        let bin = find_postgres_bin();
        let root = std::env::temp_dir().join(format!(
            "qm-postgres-{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::create_dir_all(&root).unwrap_or_else(|error| {
            panic!(
                "create the private PostgreSQL dir {}: {error}",
                root.display()
            )
        });
        let account = postgres_account();
        if let Some((uid, gid)) = account {
            std::os::unix::fs::chown(&root, Some(uid), Some(gid)).unwrap_or_else(|error| {
                panic!("give {} to the postgres account: {error}", root.display())
            });
        }
        let mut cluster = PrivatePostgres {
            bin,
            root,
            port: 0,
            account,
            running: false,
        };
        let data = cluster.data_dir();
        let initdb = command(&cluster.bin, "initdb", account)
            .arg("-D")
            .arg(&data)
            .args(["-U", "postgres", "--auth=trust", "--no-sync"])
            .output()
            .unwrap_or_else(|error| panic!("run initdb: {error}"));
        assert!(
            initdb.status.success(),
            "initdb {} failed: {}{}",
            data.display(),
            String::from_utf8_lossy(&initdb.stdout),
            String::from_utf8_lossy(&initdb.stderr)
        );
        // The free port is released before the server binds it: try a few.
        let mut last = String::new();
        for _ in 0..5 {
            cluster.port = free_port();
            match cluster.pg_ctl_start() {
                Ok(()) => return cluster,
                Err(failure) => last = failure,
            }
        }
        panic!("the private PostgreSQL did not start: {last}");
    }

    /// `postgres://postgres@127.0.0.1:<port>/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// `pg_ctl stop -m immediate`: every backend is killed at once, nothing is checkpointed,
    /// and the next start runs crash recovery from the WAL.
    pub async fn stop_immediate(&mut self) {
        let output = self.pg_ctl(&["stop", "-m", "immediate", "-w"]).await;
        assert!(
            output.status.success(),
            "pg_ctl stop -m immediate failed: {}\n{}",
            String::from_utf8_lossy(&output.stderr),
            self.log_tail()
        );
        self.running = false;
    }

    /// Starts the stopped server again on the same port, waiting until it accepts connections.
    pub async fn restart(&mut self) {
        let cluster = PgCtl {
            bin: self.bin.clone(),
            root: self.root.clone(),
            port: self.port,
            account: self.account,
        };
        let started = tokio::task::spawn_blocking(move || cluster.start())
            .await
            .unwrap_or_else(|error| panic!("restarting the private PostgreSQL failed: {error}"));
        if let Err(failure) = started {
            panic!("the private PostgreSQL did not restart: {failure}");
        }
        self.running = true;
    }

    /// Ends every client backend with `pg_terminate_backend` (their clients see the connection
    /// close); answers how many were ended.
    pub async fn terminate_backends(&self) -> u64 {
        let mut connection = connect(&self.url()).await;
        let ended: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()) AS ended",
        )
        .fetch_one(&mut connection)
        .await
        .unwrap_or_else(|error| panic!("pg_terminate_backend: {error}"));
        let _ = connection.close().await;
        ended.max(0) as u64
    }

    /// Stalls the whole server with SIGSTOP — the postmaster and every backend, so open
    /// connections stay open and answer nothing — until [`resume`](Self::resume).
    pub fn pause(&self) {
        self.signal_all("STOP");
    }

    /// SIGCONT after [`pause`](Self::pause).
    pub fn resume(&self) {
        self.signal_all("CONT");
    }

    /// Sends `signal` to the postmaster (the first line of `postmaster.pid`) and its children.
    fn signal_all(&self, signal: &str) {
        let pid_file = self.data_dir().join("postmaster.pid");
        let text = std::fs::read_to_string(&pid_file)
            .unwrap_or_else(|error| panic!("read {}: {error}", pid_file.display()));
        let postmaster = text.lines().next().unwrap_or_default().trim().to_owned();
        let children = std::process::Command::new("pgrep")
            .args(["-P", &postmaster])
            .output()
            .unwrap_or_else(|error| panic!("run pgrep -P {postmaster}: {error}"));
        let mut pids = vec![postmaster.clone()];
        pids.extend(
            String::from_utf8_lossy(&children.stdout)
                .split_whitespace()
                .map(str::to_owned),
        );
        let status = std::process::Command::new("kill")
            .arg(format!("-{signal}"))
            .args(&pids)
            .status()
            .unwrap_or_else(|error| panic!("run kill -{signal}: {error}"));
        assert!(status.success(), "kill -{signal} {pids:?}: {status}");
    }

    /// The last lines of the server's log.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.root.join("server.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    fn data_dir(&self) -> PathBuf {
        self.root.join("data")
    }

    fn pg_ctl_start(&mut self) -> Result<(), String> {
        let cluster = PgCtl {
            bin: self.bin.clone(),
            root: self.root.clone(),
            port: self.port,
            account: self.account,
        };
        cluster.start()?;
        self.running = true;
        Ok(())
    }

    async fn pg_ctl(&self, args: &[&str]) -> Output {
        let cluster = PgCtl {
            bin: self.bin.clone(),
            root: self.root.clone(),
            port: self.port,
            account: self.account,
        };
        let args: Vec<String> = args.iter().map(|arg| (*arg).to_owned()).collect();
        tokio::task::spawn_blocking(move || cluster.pg_ctl(&args))
            .await
            .unwrap_or_else(|error| panic!("pg_ctl failed: {error}"))
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        if self.running {
            let cluster = PgCtl {
                bin: self.bin.clone(),
                root: self.root.clone(),
                port: self.port,
                account: self.account,
            };
            let stop = ["stop", "-m", "immediate", "-w"].map(str::to_owned);
            let output = cluster.pg_ctl(&stop);
            if !output.status.success() {
                eprintln!(
                    "could not stop the private PostgreSQL in {}: {}",
                    self.root.display(),
                    String::from_utf8_lossy(&output.stderr)
                );
            }
        }
        if let Err(error) = std::fs::remove_dir_all(&self.root) {
            eprintln!(
                "could not remove the private PostgreSQL dir {}: {error}",
                self.root.display()
            );
        }
    }
}

/// What `pg_ctl` needs, owned, so it can run on a blocking thread.
struct PgCtl {
    bin: PathBuf,
    root: PathBuf,
    port: u16,
    account: Option<(u32, u32)>,
}

impl PgCtl {
    fn pg_ctl(&self, args: &[String]) -> Output {
        command(&self.bin, "pg_ctl", self.account)
            .arg("-D")
            .arg(self.root.join("data"))
            .args(args)
            .output()
            .unwrap_or_else(|error| panic!("run pg_ctl: {error}"))
    }

    /// `pg_ctl start -w` on loopback only, the socket in the temp dir; the error has the log.
    fn start(&self) -> Result<(), String> {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1",
            self.port,
            self.root.display()
        );
        let log = self.root.join("server.log");
        let args = [
            "-l".to_owned(),
            log.display().to_string(),
            "-o".to_owned(),
            options,
            "-w".to_owned(),
            "-t".to_owned(),
            "30".to_owned(),
            "start".to_owned(),
        ];
        let output = self.pg_ctl(&args);
        if output.status.success() {
            return Ok(());
        }
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        Err(format!(
            "pg_ctl start on port {}: {}; log:\n{}",
            self.port,
            String::from_utf8_lossy(&output.stderr),
            lines[lines.len().saturating_sub(20)..].join("\n")
        ))
    }
}

/// `program` from `bin`, run as `account` when given.
fn command(bin: &Path, program: &str, account: Option<(u32, u32)>) -> Command {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new(bin.join(program));
    if let Some((uid, gid)) = account {
        command.uid(uid).gid(gid);
        // initdb and pg_ctl look at HOME and the working directory; root's are not readable.
        command.current_dir("/").env("HOME", "/");
    }
    command
}

/// The newest `/usr/lib/postgresql/<version>/bin` holding `initdb`.
fn find_postgres_bin() -> PathBuf {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin).unwrap_or_else(|| {
        panic!(
            "no /usr/lib/postgresql/<version>/bin/initdb: install the PostgreSQL server \
             (apt-get install postgresql) — the private-cluster fault tests need it"
        )
    })
}

/// `Some((uid, gid))` of the `postgres` account when this process runs as root.
fn postgres_account() -> Option<(u32, u32)> {
    let id = |args: &[&str]| -> Option<u32> {
        let output = Command::new("id").args(args).output().ok()?;
        String::from_utf8_lossy(&output.stdout).trim().parse().ok()
    };
    if id(&["-u"])? != 0 {
        return None;
    }
    let uid = id(&["-u", POSTGRES_ACCOUNT]);
    let gid = id(&["-g", POSTGRES_ACCOUNT]);
    match (uid, gid) {
        (Some(uid), Some(gid)) => Some((uid, gid)),
        _ => panic!(
            "running as root, and PostgreSQL refuses root: create the {POSTGRES_ACCOUNT} \
             account (installing postgresql does) for the private cluster to run as"
        ),
    }
}

fn free_port() -> u16 {
    StdTcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("bind an ephemeral loopback port to find a free one")
        .port()
}

async fn connect(url: &str) -> PgConnection {
    match tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect(url)).await {
        Ok(Ok(connection)) => connection,
        Ok(Err(error)) => panic!("connect to {url}: {error}"),
        Err(_) => panic!("connect to {url}: no answer within {CONNECT_TIMEOUT:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// The journal as Postgres holds it
// ---------------------------------------------------------------------------------------------

/// What the journal holds for one room (`rooms` and `room_events`, see `migrations/`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JournalSummary {
    /// `rooms.last_seq`, `None` when the room has no row.
    pub last_seq: Option<u64>,
    /// Rows in `room_events`, and their lowest and highest seq (0 when there are none).
    pub events: u64,
    pub min_seq: u64,
    pub max_seq: u64,
    /// Of which `joined` events.
    pub joined: u64,
}

impl JournalSummary {
    /// Seqs 1..=n, each once (the primary key), and `last_seq` is n.
    pub fn gap_free(&self) -> bool {
        self.events > 0
            && self.min_seq == 1
            && self.max_seq == self.events
            && self.last_seq == Some(self.max_seq)
    }
}

/// Reads the journal of `room_id` in the database at `url`.
pub async fn journal_summary(url: &str, room_id: &str) -> JournalSummary {
    let mut connection = connect(url).await;
    let last_seq: Option<i64> = sqlx::query_scalar("SELECT last_seq FROM rooms WHERE room_id = $1")
        .bind(room_id)
        .fetch_optional(&mut connection)
        .await
        .unwrap_or_else(|error| panic!("read rooms.last_seq of {room_id}: {error}"));
    let (events, min_seq, max_seq, joined): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT count(*), coalesce(min(seq), 0), coalesce(max(seq), 0), \
         count(*) FILTER (WHERE kind = 'joined') FROM room_events WHERE room_id = $1",
    )
    .bind(room_id)
    .fetch_one(&mut connection)
    .await
    .unwrap_or_else(|error| panic!("read room_events of {room_id}: {error}"));
    let _ = connection.close().await;
    let count = |value: i64| value.max(0) as u64;
    JournalSummary {
        last_seq: last_seq.map(count),
        events: count(events),
        min_seq: count(min_seq),
        max_seq: count(max_seq),
        joined: count(joined),
    }
}

/// A transaction on another connection holding `SELECT ... FOR UPDATE` on a room's `rooms`
/// row, so every journal commit for that room waits on it until [`release`](Self::release).
pub struct RowLock {
    connection: PgConnection,
}

impl RowLock {
    /// Takes the lock on `room_id`'s row in the database at `url`. Panics if the room has no
    /// row.
    pub async fn take(url: &str, room_id: &str) -> RowLock {
        let mut connection = connect(url).await;
        sqlx::raw_sql("BEGIN")
            .execute(&mut connection)
            .await
            .unwrap_or_else(|error| panic!("BEGIN: {error}"));
        let locked: Option<i64> =
            sqlx::query_scalar("SELECT last_seq FROM rooms WHERE room_id = $1 FOR UPDATE")
                .bind(room_id)
                .fetch_optional(&mut connection)
                .await
                .unwrap_or_else(|error| panic!("lock the rooms row of {room_id}: {error}"));
        assert!(
            locked.is_some(),
            "the journal has no rooms row for {room_id}"
        );
        RowLock { connection }
    }

    /// Ends the transaction (ROLLBACK: it changed nothing), letting the waiting commits go.
    pub async fn release(mut self) {
        sqlx::raw_sql("ROLLBACK")
            .execute(&mut self.connection)
            .await
            .unwrap_or_else(|error| panic!("ROLLBACK: {error}"));
        let _ = self.connection.close().await;
    }
}
