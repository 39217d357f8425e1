//! The engine's port is a door of its own: every `Engine` call without the engine credential,
//! or with another one, is refused before any handler runs (a refused `DeleteRoom` deletes
//! nothing), while the standard health service answers anyone so probes keep working. With
//! ENGINE_TLS_* the same calls run over TLS, and a plain-text client is not served.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use qm_core::config::Config;
use qm_engine::EngineApp;
use qm_proto::engine::engine_client::EngineClient as RawClient;
use qm_proto::engine::*;
use qm_proto::{EngineClient, EngineTarget};
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tonic::Code;
use tonic::transport::{Channel, Endpoint};

const ENGINE_TOKEN: &str = "engine-credential-test-token";

struct Engine {
    addr: SocketAddr,
    config: Arc<Config>,
    _stop: oneshot::Sender<()>,
}

async fn start(extra: &[(&str, &str)]) -> Engine {
    let mut env: HashMap<&str, &str> = HashMap::from([("ENGINE_TOKEN", ENGINE_TOKEN)]);
    env.extend(extra.iter().copied());
    let config = Arc::new(Config::from_source(&env).expect("valid config"));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let engine = EngineApp::new(config.clone()).await.expect("engine builds");
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(engine.run(listener, async move {
        let _ = stopped.await;
    }));
    Engine {
        addr,
        config,
        _stop: stop,
    }
}

impl Engine {
    fn target(&self) -> EngineTarget {
        EngineTarget::from_config_at(&self.config, self.addr).expect("reachable")
    }

    /// A client presenting the right credential.
    fn client(&self) -> EngineClient {
        self.target().client()
    }

    /// A generated client over a plain channel: no credential at all.
    fn bare_client(&self) -> RawClient<Channel> {
        let channel = Endpoint::from_shared(format!("http://{}", self.addr))
            .expect("uri")
            .connect_lazy();
        RawClient::new(channel)
    }
}

/// The code a call ended with (`Ok` when it was served).
async fn outcome<T>(call: impl Future<Output = Result<T, tonic::Status>>) -> Code {
    match call.await {
        Ok(_) => Code::Ok,
        Err(status) => status.code(),
    }
}

/// Makes every RPC of the Engine service through `client` and returns each one's code.
macro_rules! every_rpc {
    ($client:expr) => {{
        let client = &mut $client;
        let room = || RoomRef {
            room_id: "guarded".into(),
        };
        vec![
            ("Join", outcome(client.join(JoinRequest::default())).await),
            (
                "Status",
                outcome(client.status(StatusRequest::default())).await,
            ),
            (
                "Check",
                outcome(client.check(CheckRequest::default())).await,
            ),
            (
                "Watch",
                outcome(client.watch(WatchRequest::default())).await,
            ),
            ("RoomInfo", outcome(client.room_info(room())).await),
            ("Seen", outcome(client.seen(SeenRequest::default())).await),
            (
                "PutRoom",
                outcome(client.put_room(PutRoomRequest::default())).await,
            ),
            ("GetRoom", outcome(client.get_room(room())).await),
            (
                "ListRooms",
                outcome(client.list_rooms(ListRoomsRequest::default())).await,
            ),
            ("DeleteRoom", outcome(client.delete_room(room())).await),
            (
                "SetState",
                outcome(client.set_state(SetStateRequest::default())).await,
            ),
            (
                "SetRate",
                outcome(client.set_rate(SetRateRequest::default())).await,
            ),
            (
                "Flush",
                outcome(client.flush(FlushRequest::default())).await,
            ),
            (
                "Schedule",
                outcome(client.schedule(ScheduleRequest::default())).await,
            ),
            (
                "Eject",
                outcome(client.eject(EjectRequest::default())).await,
            ),
            ("Purge", outcome(client.purge(room())).await),
            (
                "Stats",
                outcome(client.stats(StatsRequest::default())).await,
            ),
            (
                "Notify",
                outcome(client.notify(NotifyRequest::default())).await,
            ),
            (
                "History",
                outcome(client.history(HistoryRequest::default())).await,
            ),
            (
                "LookupVisitors",
                outcome(client.lookup_visitors(LookupVisitorsRequest::default())).await,
            ),
        ]
    }};
}

async fn create_guarded_room(client: &mut EngineClient) {
    let body =
        json!({"id": "guarded", "targetUrl": "https://shop.example.com/", "ratePerMinute": 60});
    client
        .put_room(PutRoomRequest {
            body_json: body.to_string(),
        })
        .await
        .expect("the credentialed client creates a room");
}

#[tokio::test]
async fn every_call_without_the_credential_is_refused_before_any_handler() {
    let engine = start(&[]).await;
    let mut trusted = engine.client();
    create_guarded_room(&mut trusted).await;

    let wrong = EngineTarget::new(engine.addr, "another-engine-credential")
        .expect("a socket address")
        .client();
    for (who, codes) in [
        ("no credential", every_rpc!(engine.bare_client())),
        ("a wrong credential", every_rpc!(wrong.clone())),
    ] {
        assert_eq!(codes.len(), 20, "the service's every RPC");
        for (rpc, code) in codes {
            assert_eq!(code, Code::Unauthenticated, "{rpc} with {who}");
        }
    }

    // Nothing the refused calls asked for happened: the room is still there, as it was.
    let room = trusted
        .get_room(RoomRef {
            room_id: "guarded".into(),
        })
        .await
        .expect("the room survived the refused DeleteRoom and PutRoom")
        .into_inner();
    assert!(room.room_json.contains("shop.example.com"));
    // The right credential is served on the same port.
    let listed = trusted
        .list_rooms(ListRoomsRequest::default())
        .await
        .expect("served")
        .into_inner();
    assert_eq!(listed.room_json.len(), 1);
}

#[tokio::test]
async fn the_health_service_answers_without_the_credential() {
    let engine = start(&[]).await;
    let anyone =
        EngineTarget::new(engine.addr, "no-credential-needed-here").expect("a socket address");
    qm_proto::client::engine_ready(anyone.health_channel())
        .await
        .expect("a probe needs no credential");
}

#[tokio::test]
async fn processes_sharing_secret_share_the_credential() {
    // No ENGINE_TOKEN: the credential is derived from SECRET on both sides.
    let secret = [("SECRET", "a-secret-both-processes-share")];
    let mut env: HashMap<&str, &str> = secret.into_iter().collect();
    let config = Arc::new(Config::from_source(&env).expect("valid"));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let engine = EngineApp::new(config).await.expect("builds");
    let (_stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(engine.run(listener, async move {
        let _ = stopped.await;
    }));

    let edge = Config::from_source(&env).expect("valid");
    let mut client = EngineTarget::from_config_at(&edge, addr).unwrap().client();
    assert_eq!(
        outcome(client.list_rooms(ListRoomsRequest::default())).await,
        Code::Ok
    );

    env.insert("SECRET", "another-secret-of-another-deploy");
    let stranger = Config::from_source(&env).expect("valid");
    let mut client = EngineTarget::from_config_at(&stranger, addr)
        .unwrap()
        .client();
    assert_eq!(
        outcome(client.list_rooms(ListRoomsRequest::default())).await,
        Code::Unauthenticated
    );
}

#[tokio::test]
async fn with_tls_calls_are_encrypted_and_plain_text_is_not_served() {
    let certified = rcgen::generate_simple_self_signed(vec!["engine.internal".to_owned()])
        .expect("a self-signed certificate");
    let dir = std::env::temp_dir().join(format!("qm-engine-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let cert = dir.join("engine.pem");
    let key = dir.join("engine.key");
    std::fs::write(&cert, certified.cert.pem()).expect("write cert");
    std::fs::write(&key, certified.key_pair.serialize_pem()).expect("write key");
    let (cert, key) = (cert.display().to_string(), key.display().to_string());

    let engine = start(&[
        ("ENGINE_TLS_CERT", cert.as_str()),
        ("ENGINE_TLS_KEY", key.as_str()),
    ])
    .await;
    // The edge's side: the CA to trust and the name on the certificate.
    let edge = Config::from_source(&HashMap::from([
        ("ENGINE_TOKEN", ENGINE_TOKEN),
        ("ENGINE_TLS_CA", cert.as_str()),
        ("ENGINE_TLS_DOMAIN", "engine.internal"),
    ]))
    .expect("valid edge config");
    let target = EngineTarget::from_config_at(&edge, engine.addr).expect("CA readable");
    let mut client = target.client();
    create_guarded_room(&mut client).await;
    qm_proto::client::engine_ready(target.health_channel())
        .await
        .expect("health over TLS");

    // Plain gRPC on the TLS port is not served.
    let mut plain = EngineTarget::new(engine.addr, ENGINE_TOKEN)
        .expect("a socket address")
        .client();
    assert_ne!(
        outcome(plain.list_rooms(ListRoomsRequest::default())).await,
        Code::Ok
    );
    // A client that trusts another name refuses the certificate.
    let mut wrong_name = EngineTarget::from_config_at(
        &Config::from_source(&HashMap::from([
            ("ENGINE_TOKEN", ENGINE_TOKEN),
            ("ENGINE_TLS_CA", cert.as_str()),
            ("ENGINE_TLS_DOMAIN", "someone.else"),
        ]))
        .expect("valid"),
        engine.addr,
    )
    .expect("CA readable")
    .client();
    assert_ne!(
        outcome(wrong_name.list_rooms(ListRoomsRequest::default())).await,
        Code::Ok
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn an_unreadable_tls_file_stops_the_engine_naming_its_variable() {
    let env = HashMap::from([
        ("ENGINE_TLS_CERT", "/nonexistent/engine.pem"),
        ("ENGINE_TLS_KEY", "/nonexistent/engine.key"),
    ]);
    let config = Arc::new(Config::from_source(&env).expect("valid config"));
    let error = EngineApp::new(config)
        .await
        .err()
        .expect("refused")
        .to_string();
    assert!(error.starts_with("ENGINE_TLS_CERT"), "{error}");
}
