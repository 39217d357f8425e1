//! The engine over real gRPC: start `EngineApp` on an ephemeral port, talk to it with the shared
//! client, and stop it through its shutdown future.

use std::sync::Arc;
use std::time::Duration;

use qm_core::config::Config;
use qm_core::{ApiError, ErrorCode};
use qm_engine::{EngineApp, EngineError};
use qm_proto::engine::{claim, place_reply};
use qm_proto::{
    Claim, EngineClient, EngineTarget, JoinRequest, PutRoomRequest, RoomRef, StatusRequest,
    WatchRequest,
};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

struct RunningEngine {
    target: EngineTarget,
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), EngineError>>,
}

async fn spawn_engine() -> RunningEngine {
    let config = Arc::new(Config::defaults());
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let engine = EngineApp::new(config.clone())
        .await
        .expect("memory engine builds");
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(engine.run(listener, async move {
        let _ = stopped.await;
    }));
    let target = EngineTarget::from_config_at(&config, addr).expect("reachable");
    RunningEngine { target, stop, task }
}

impl RunningEngine {
    fn client(&self) -> EngineClient {
        self.target.client()
    }
}

fn ticket_claim(generation: u64, ticket: u64) -> Claim {
    Claim {
        generation,
        place: Some(claim::Place::Ticket(ticket)),
    }
}

#[tokio::test]
async fn join_status_and_watch_over_grpc() {
    let engine = spawn_engine().await;
    let mut client = engine.client();
    qm_proto::client::engine_ready(engine.target.health_channel())
        .await
        .expect("health says serving");

    let body = json!({"id": "launch", "targetUrl": "https://shop.example.com/", "ratePerMinute": 60, "state": "paused"});
    let created = client
        .put_room(PutRoomRequest {
            body_json: body.to_string(),
        })
        .await
        .expect("put room")
        .into_inner();
    assert!(created.created);
    let room: Value = serde_json::from_str(&created.room_json).expect("room json");
    let generation = room["generation"].as_u64().expect("generation");

    let mut watch = client
        .watch(WatchRequest {
            room_id: "launch".into(),
        })
        .await
        .expect("watch")
        .into_inner();
    let first = watch.message().await.expect("stream").expect("first view");
    assert!(first.exists);
    assert_eq!((first.head, first.next_ticket), (1, 1));

    let join = JoinRequest {
        room_id: "launch".into(),
        claim: None,
        session_hash: "h1".into(),
        identity: "10.0.0.1".into(),
        bot_score: 0,
        bot_reasons: 0,
    };
    let reply = client.join(join).await.expect("join").into_inner();
    let Some(place_reply::Outcome::Place(place)) = reply.outcome else {
        panic!("join answers a place");
    };
    assert_eq!(
        (
            place.position,
            place.ahead,
            place.new_place,
            place.state.as_str()
        ),
        (Some(1), Some(0), true, "paused")
    );
    assert_eq!(place.eta_sec, None, "a paused room promises no wait");

    let next = watch
        .message()
        .await
        .expect("stream")
        .expect("view after join");
    assert_eq!(next.next_ticket, 2);
    assert_eq!(next.position_of(generation, 1), Some(1));

    let status = StatusRequest {
        room_id: "launch".into(),
        claim: Some(ticket_claim(generation, 1)),
        session_hash: "h1".into(),
    };
    let reply = client.status(status).await.expect("status").into_inner();
    let Some(place_reply::Outcome::Place(place)) = reply.outcome else {
        panic!("status answers a place");
    };
    assert!(place.bound && !place.passed);

    let stale = StatusRequest {
        room_id: "launch".into(),
        claim: Some(ticket_claim(generation - 1, 1)),
        session_hash: String::new(),
    };
    let reply = client.status(stale).await.expect("status").into_inner();
    assert!(
        matches!(reply.outcome, Some(place_reply::Outcome::Lapsed(lapsed)) if lapsed.reason == "room_reset")
    );

    let missing = client
        .get_room(RoomRef {
            room_id: "nope".into(),
        })
        .await
        .expect_err("missing room");
    assert_eq!(
        ApiError::from_status(&missing).code,
        ErrorCode::RoomNotFound
    );
    let bad = client.put_room(PutRoomRequest {
        body_json: json!({"id": "x", "targetUrl": "https://a.example/", "rate": 1, "typo": 1})
            .to_string(),
    });
    assert_eq!(
        ApiError::from_status(&bad.await.expect_err("unknown field")).code,
        ErrorCode::UnknownField
    );

    // Shutdown ends the Watch stream and the server.
    engine.stop.send(()).expect("engine still running");
    let ended = tokio::time::timeout(Duration::from_secs(5), watch.message())
        .await
        .expect("stream ends promptly");
    assert!(matches!(ended, Ok(None) | Err(_)));
    let result = tokio::time::timeout(Duration::from_secs(5), engine.task)
        .await
        .expect("engine stops promptly");
    assert!(matches!(result, Ok(Ok(()))));
}

#[tokio::test]
async fn the_ticker_admits_on_whole_seconds() {
    let engine = spawn_engine().await;
    let mut client = engine.client();
    let body =
        json!({"id": "flow", "targetUrl": "https://shop.example.com/", "ratePerMinute": 600});
    client
        .put_room(PutRoomRequest {
            body_json: body.to_string(),
        })
        .await
        .expect("put room");
    for _ in 0..30 {
        let join = JoinRequest {
            room_id: "flow".into(),
            claim: None,
            session_hash: String::new(),
            identity: String::new(),
            bot_score: 0,
            bot_reasons: 0,
        };
        client.join(join).await.expect("join");
    }
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let room = client
        .get_room(RoomRef {
            room_id: "flow".into(),
        })
        .await
        .expect("room")
        .into_inner();
    let room: Value = serde_json::from_str(&room.room_json).expect("room json");
    let passed = room["passedTotal"].as_u64().expect("passedTotal");
    // Two or three whole seconds went by: at most three slices of ten (+1 carried visitor).
    assert!((10..=31).contains(&passed), "got {passed}");
    let _ = engine.stop.send(());
    let _ = engine.task.await;
}
