//! The composition on the memory store: it serves, and on shutdown the edges stop accepting and
//! drain while the engine still answers, and the engine stops only after them.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::*;

async fn loopback() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").await.expect("bind")
}

fn config() -> Arc<Config> {
    let env = HashMap::from([("SHUTDOWN_DRAIN_SEC", "1")]);
    Arc::new(Config::from_source(&env).expect("valid"))
}

#[tokio::test]
async fn edges_drain_before_the_engine_stops() {
    let gateway = loopback().await;
    let gateway_addr = gateway.local_addr().expect("address");
    let listeners = Listeners {
        engine: EngineSite::Local(loopback().await),
        gateway: Some(gateway),
        gateway_metrics: None,
        admin: Some(loopback().await),
    };
    let components = Components::build(config(), listeners)
        .await
        .expect("builds");
    let engine_addr: std::net::SocketAddr =
        components.engine_target().parse().expect("a bound address");
    let shutdown = Shutdown::new();
    let running = tokio::spawn(components.run(shutdown.clone()));
    let health = qm_proto::EngineTarget::from_config_at(&config(), engine_addr)
        .expect("reachable")
        .health_channel();
    let mut ready = false;
    for _ in 0..100 {
        let answered = reqwest::get(format!("http://{gateway_addr}/healthz")).await;
        if answered.is_ok_and(|reply| reply.status() == 200) {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(ready, "the gateway answers once the engine does");

    // A request whose body never finishes: the gateway's drain has to wait it out.
    let mut stuck = TcpStream::connect(gateway_addr).await.expect("connect");
    stuck
        .write_all(
            b"POST /api/join HTTP/1.1\r\nhost: q\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{",
        )
        .await
        .expect("write");
    tokio::time::sleep(Duration::from_millis(100)).await;

    let asked = Instant::now();
    shutdown.trigger();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        TcpStream::connect(gateway_addr).await.is_err(),
        "the gateway stopped accepting"
    );
    assert!(!running.is_finished(), "the gateway is draining");
    assert_eq!(
        qm_proto::client::engine_ready(health.clone()).await,
        Ok(()),
        "the engine still serves while the edges drain"
    );

    let outcome = tokio::time::timeout(Duration::from_secs(5), running)
        .await
        .expect("stops within the drain bound")
        .expect("no panic");
    assert!(outcome.is_ok(), "{outcome:?}");
    assert!(
        asked.elapsed() >= Duration::from_millis(900),
        "the drain was waited out"
    );
    assert!(
        TcpStream::connect(engine_addr).await.is_err(),
        "the engine stopped after the edges"
    );
}

#[tokio::test]
async fn an_edge_alone_talks_to_the_engine_elsewhere_and_stops_on_the_flag() {
    let listeners = Listeners {
        engine: EngineSite::Remote("engine.internal:9".to_owned()),
        gateway: Some(loopback().await),
        gateway_metrics: None,
        admin: None,
    };
    let components = Components::build(config(), listeners)
        .await
        .expect("builds");
    assert_eq!(components.engine_target(), "engine.internal:9");
    let shutdown = Shutdown::new();
    shutdown.trigger();
    let outcome = tokio::time::timeout(Duration::from_secs(5), components.run(shutdown))
        .await
        .expect("stops");
    assert!(outcome.is_ok(), "{outcome:?}");
}
