//! Tests of the server harness itself (`qm_tests::servers`): the private Valkey, the fresh
//! PostgreSQL database and the cuttable TCP proxy behave as the durable-store tests rely on.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use qm_tests::servers::{
    FreshDatabase, PrivateValkey, TcpProxy, ValkeyExtras, ValkeyOptions, ValkeyTopology,
    rewrite_port,
};
use sqlx::postgres::PgConnection;
use sqlx::{Connection, Row};

/// Runs a test body with an upper bound, so a wedged server fails the test instead of hanging.
async fn bounded<F: Future<Output = ()>>(limit_secs: u64, body: F) {
    tokio::time::timeout(Duration::from_secs(limit_secs), body)
        .await
        .unwrap_or_else(|_| panic!("test did not finish within {limit_secs} s"));
}

async fn select_one(connection: &mut PgConnection) -> Result<i32, sqlx::Error> {
    let row = sqlx::query("SELECT 1").fetch_one(connection).await?;
    row.try_get(0)
}

#[tokio::test]
async fn valkey_starts_and_answers_commands() {
    bounded(20, async {
        let valkey = PrivateValkey::start_as(
            ValkeyTopology::Single,
            ValkeyOptions::default(),
            ValkeyExtras::default(),
        )
        .await;
        assert!(valkey.url().starts_with("redis://127.0.0.1:"));
        assert_eq!(valkey.url(), format!("redis://127.0.0.1:{}", valkey.port()));
        assert_eq!(valkey.command(&["SET", "k", "v"]).await, "+OK\r\n");
        let reply = valkey.command(&["GET", "k"]).await;
        assert!(reply.contains('v'), "GET k: {reply:?}");
        assert_eq!(valkey.command(&["DBSIZE"]).await, ":1\r\n");
        valkey.flushall().await;
        assert_eq!(valkey.command(&["DBSIZE"]).await, ":0\r\n");
        // Multi-element replies are read completely.
        valkey.command(&["RPUSH", "list", "a", "b c"]).await;
        assert_eq!(
            valkey.command(&["LRANGE", "list", "0", "-1"]).await,
            "*2\r\n$1\r\na\r\n$3\r\nb c\r\n"
        );
    })
    .await;
}

/// `QM_TEST_VALKEY=cluster` runs the durable suite on this: three primaries sharing the slots,
/// a keyed command sent where `MOVED` points, a server command answered by every node.
#[tokio::test]
async fn a_valkey_cluster_serves_every_slot_and_keeps_writes_across_kill9() {
    bounded(60, async {
        let mut valkey = PrivateValkey::start_as(
            ValkeyTopology::Cluster,
            ValkeyOptions { aof: true },
            ValkeyExtras::default(),
        )
        .await;
        let url = valkey.url();
        assert!(url.starts_with("redis-cluster://127.0.0.1:"), "{url}");
        assert_eq!(url.matches("node=127.0.0.1:").count(), 2, "{url}");
        // Keys of six rooms: their hash tags spread them over the slots, so over the nodes.
        let rooms = ["a", "b", "c", "d", "e", "f"];
        let mut slots = std::collections::BTreeSet::new();
        for room in rooms {
            let key = format!("qm:{{{room}}}:m");
            assert_eq!(valkey.command(&["SET", &key, room]).await, "+OK\r\n");
            slots.insert(valkey.command(&["CLUSTER", "KEYSLOT", &key]).await);
        }
        assert!(
            slots.len() > 1,
            "the rooms hash to different slots: {slots:?}"
        );
        let total = valkey.command(&["DBSIZE"]).await;
        assert_eq!(
            total,
            format!(":{}\r\n", rooms.len()),
            "DBSIZE sums the nodes"
        );
        // Every key found from the first node, wherever it lives.
        tokio::time::sleep(Duration::from_millis(1200)).await;
        valkey.kill9();
        valkey.restart().await;
        for room in rooms {
            let key = format!("qm:{{{room}}}:m");
            let reply = valkey.command(&["GET", &key]).await;
            assert_eq!(
                reply,
                format!("$1\r\n{room}\r\n"),
                "GET {key} after the restart"
            );
        }
        valkey.flushall().await;
        assert_eq!(valkey.command(&["DBSIZE"]).await, ":0\r\n");
        assert_eq!(valkey.aof_dirs().len(), 3);
    })
    .await;
}

#[tokio::test]
async fn valkey_with_aof_keeps_writes_across_kill9() {
    bounded(30, async {
        let mut valkey = PrivateValkey::start(ValkeyOptions { aof: true }).await;
        let port = valkey.port();
        assert_eq!(valkey.command(&["SET", "k", "v"]).await, "+OK\r\n");
        // appendfsync everysec: give the once-a-second fsync time to run.
        tokio::time::sleep(Duration::from_millis(1200)).await;
        valkey.kill9();
        valkey.restart().await;
        assert_eq!(valkey.port(), port, "restart keeps the port");
        assert_eq!(valkey.command(&["GET", "k"]).await, "$1\r\nv\r\n");
    })
    .await;
}

#[tokio::test]
async fn valkey_without_aof_loses_writes_on_kill9() {
    bounded(20, async {
        let mut valkey = PrivateValkey::start(ValkeyOptions::default()).await;
        assert_eq!(valkey.command(&["SET", "k", "v"]).await, "+OK\r\n");
        valkey.kill9();
        valkey.restart().await;
        assert_eq!(valkey.command(&["GET", "k"]).await, "$-1\r\n");
    })
    .await;
}

#[tokio::test]
async fn valkey_dir_is_removed_on_drop() {
    bounded(20, async {
        let valkey = PrivateValkey::start(ValkeyOptions { aof: true }).await;
        let dir = valkey.dir().to_path_buf();
        assert!(dir.is_dir());
        drop(valkey);
        assert!(!dir.exists(), "{} still exists", dir.display());
    })
    .await;
}

#[tokio::test]
async fn fresh_database_is_usable_private_and_dropped() {
    bounded(30, async {
        let database = FreshDatabase::create().await;
        let other = FreshDatabase::create().await;
        assert_ne!(database.url(), other.url());
        assert!(database.url().ends_with(database.name()));
        assert!(database.name().starts_with("qm_test_"));

        let mut connection = PgConnection::connect(&database.url())
            .await
            .expect("connect to the fresh database");
        sqlx::raw_sql("CREATE TABLE t(x int); INSERT INTO t VALUES (41), (1)")
            .execute(&mut connection)
            .await
            .expect("create and fill a table");
        let sum: i64 = sqlx::query("SELECT sum(x) FROM t")
            .fetch_one(&mut connection)
            .await
            .expect("select from the table")
            .get(0);
        assert_eq!(sum, 42);
        // The other database does not see this one's table. The connection stays open on
        // purpose: the drop must force it off.
        let mut other_connection = PgConnection::connect(&other.url())
            .await
            .expect("connect to the other fresh database");
        let missing = sqlx::query("SELECT x FROM t")
            .fetch_all(&mut other_connection)
            .await;
        assert!(missing.is_err(), "the other database has no table t");

        let admin_url = database.admin_url().to_owned();
        let names = [database.name().to_owned(), other.name().to_owned()];
        drop(database);
        drop(other);
        let mut admin = PgConnection::connect(&admin_url)
            .await
            .expect("connect to the admin database");
        for name in names {
            let left: i64 = sqlx::query("SELECT count(*) FROM pg_database WHERE datname = $1")
                .bind(&name)
                .fetch_one(&mut admin)
                .await
                .expect("query pg_database")
                .get(0);
            assert_eq!(left, 0, "database {name} was not dropped");
        }
    })
    .await;
}

#[tokio::test]
async fn tcp_proxy_cuts_and_restores_postgres() {
    bounded(30, async {
        let database = FreshDatabase::create().await;
        let proxy = TcpProxy::start(database.server_addr()).await;
        let proxied_url = rewrite_port(&database.url(), proxy.addr());

        let mut before = PgConnection::connect(&proxied_url)
            .await
            .expect("connect through the proxy");
        assert_eq!(select_one(&mut before).await.expect("SELECT 1"), 1);

        proxy.cut();
        assert!(proxy.is_cut());
        let broken = tokio::time::timeout(Duration::from_secs(2), select_one(&mut before))
            .await
            .expect("a query on a cut connection fails quickly instead of hanging");
        assert!(broken.is_err(), "a query on a cut connection fails");
        let refused =
            tokio::time::timeout(Duration::from_secs(2), PgConnection::connect(&proxied_url))
                .await
                .expect("connecting through a cut proxy fails quickly instead of hanging");
        assert!(refused.is_err(), "connecting through a cut proxy fails");

        proxy.restore();
        let mut after =
            tokio::time::timeout(Duration::from_secs(5), PgConnection::connect(&proxied_url))
                .await
                .expect("connect after restore in time")
                .expect("connect through the restored proxy");
        assert_eq!(select_one(&mut after).await.expect("SELECT 1"), 1);
    })
    .await;
}

#[tokio::test]
async fn tcp_proxy_cuts_valkey() {
    bounded(20, async {
        let valkey = PrivateValkey::start(ValkeyOptions::default()).await;
        let proxy = TcpProxy::start(valkey.addr()).await;
        let mut stream = tokio::net::TcpStream::connect(proxy.addr())
            .await
            .expect("connect through the proxy");
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        stream.write_all(b"PING\r\n").await.expect("send PING");
        let mut reply = [0_u8; 7];
        stream.read_exact(&mut reply).await.expect("read PONG");
        assert_eq!(&reply, b"+PONG\r\n");

        proxy.cut();
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(2), stream.read_to_end(&mut rest))
            .await
            .expect("a cut connection closes quickly");
        // EOF or a reset: either way the connection is gone.
        assert!(read.map(|count| count == 0).unwrap_or(true));
    })
    .await;
}

#[test]
fn rewrite_port_points_urls_at_the_proxy() {
    let proxy: SocketAddr = "127.0.0.1:6000".parse().expect("a socket address");
    assert_eq!(
        rewrite_port(
            "postgres://postgres@db.internal:5432/qm_test_0a?sslmode=disable",
            proxy
        ),
        "postgres://postgres@127.0.0.1:6000/qm_test_0a?sslmode=disable"
    );
    assert_eq!(
        rewrite_port("redis://127.0.0.1:6379", proxy),
        "redis://127.0.0.1:6000"
    );
    assert_eq!(
        rewrite_port("postgres://user:secret@localhost/postgres", proxy),
        "postgres://user:secret@127.0.0.1:6000/postgres"
    );
}
