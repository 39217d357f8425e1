//! Tests of the memory store: room lifecycle, generations, watchers and counters.

use qm_core::ErrorCode;
use serde_json::json;

use qm_core::clock::now_ms;
use qm_core::room::RoomState;
use serde_json::Value;

use super::*;
use crate::domain::{ClaimedPlace, EjectedFrom, JoinRequest};

fn room_body(id: &str) -> Value {
    json!({"id": id, "targetUrl": "https://shop.example.com/", "ratePerMinute": 600})
}

fn visitor(session: &str) -> JoinRequest {
    JoinRequest {
        claim: None,
        session_hash: session.to_owned(),
        identity: String::new(),
        ..JoinRequest::default()
    }
}

#[tokio::test]
async fn rooms_are_created_updated_listed_and_deleted() {
    let store = MemoryStore::new();
    let created = store.put_room(room_body("b")).await.expect("create");
    assert!(created.created);
    assert_eq!(created.room["name"], "b");
    store.put_room(room_body("a")).await.expect("create");
    let updated = store
        .put_room(json!({"id": "b", "name": "Bee", "rate": 30}))
        .await
        .expect("update");
    assert!(!updated.created);
    assert_eq!(
        (updated.room["name"].clone(), updated.room["rate"].clone()),
        (json!("Bee"), json!(30))
    );
    assert_eq!(updated.room["seq"], 2);

    let ids: Vec<Value> = store
        .list_rooms()
        .await
        .expect("list")
        .into_iter()
        .map(|room| room["id"].clone())
        .collect();
    assert_eq!(ids, vec![json!("b"), json!("a")], "creation order");

    store.delete_room("b".into()).await.expect("delete");
    assert_eq!(
        store.get_room("b".into()).await.expect_err("gone").code,
        ErrorCode::RoomNotFound
    );
    assert_eq!(
        store.delete_room("b".into()).await.expect_err("gone").code,
        ErrorCode::RoomNotFound
    );
    assert_eq!(store.stats().await.expect("stats").rooms, 1);
}

#[tokio::test]
async fn invalid_bodies_are_refused_before_any_change() {
    let store = MemoryStore::new();
    let missing = store
        .put_room(json!({"targetUrl": "https://a.example/", "rate": 1}))
        .await
        .expect_err("no id");
    assert_eq!(missing.code, ErrorCode::MissingField);
    let unknown = store
        .put_room(json!({"id": "a", "targetUrl": "https://a.example/", "rate": 1, "colour": 1}))
        .await;
    assert_eq!(unknown.expect_err("unknown").code, ErrorCode::UnknownField);
    assert_eq!(store.stats().await.expect("stats").rooms, 0);
}

#[tokio::test]
async fn a_re_created_room_gets_a_new_generation_and_continues_its_seq() {
    let store = MemoryStore::new();
    let first = store.put_room(room_body("r")).await.expect("create").room;
    let generation = first["generation"].as_u64().expect("generation");
    assert!(
        generation >= (now_ms() / 1000) as u64 - 1,
        "generation is floored at unix seconds"
    );
    let place = store.join("r".into(), visitor("s")).await.expect("join");
    store.delete_room("r".into()).await.expect("delete");

    let again = store
        .put_room(room_body("r"))
        .await
        .expect("re-create")
        .room;
    assert!(again["generation"].as_u64().expect("generation") > generation);
    assert_eq!(again["seq"], 4, "created, joined, deleted, created");
    let old_claim = Claim {
        generation,
        place: ClaimedPlace::Ticket(place.ticket),
    };
    let status = store
        .status("r".into(), old_claim, "s".into())
        .await
        .expect("status");
    assert_eq!(status, PlaceAnswer::Lapsed(LapseReason::RoomReset));
    let rejoin = store
        .join(
            "r".into(),
            JoinRequest {
                claim: Some(old_claim),
                ..visitor("s")
            },
        )
        .await
        .expect("join");
    assert_eq!(
        (rejoin.ticket, rejoin.replaced_reason),
        (1, Some(LapseReason::RoomReset))
    );
}

#[tokio::test]
async fn missing_rooms() {
    let store = MemoryStore::new();
    assert_eq!(
        store
            .join("nope".into(), visitor("s"))
            .await
            .expect_err("missing")
            .code,
        ErrorCode::RoomNotFound
    );
    let claim = Claim {
        generation: 1,
        place: ClaimedPlace::Ticket(1),
    };
    assert_eq!(
        store
            .status("nope".into(), claim, String::new())
            .await
            .expect("status"),
        PlaceAnswer::Lapsed(LapseReason::RoomReset)
    );
    assert_eq!(
        store.check("nope".into(), None, None).await.expect("check"),
        None
    );
    assert_eq!(
        store
            .check("nope".into(), Some(claim), None)
            .await
            .expect("check"),
        None
    );
    assert_eq!(store.stats().await.expect("stats").no_room_checks, 2);
    assert!(!store.room_info("nope".into()).await.expect("info").found);
    for error in [
        store.set_rate("nope".into(), 5).await.map(|_| ()),
        store.flush("nope".into(), 5).await.map(|_| ()),
        store.purge("nope".into()).await.map(|_| ()),
        store.eject("nope".into(), 1).await.map(|_| ()),
    ] {
        assert_eq!(error.expect_err("missing").code, ErrorCode::RoomNotFound);
    }
}

#[tokio::test]
async fn operator_controls() {
    let store = MemoryStore::new();
    store.put_room(room_body("r")).await.expect("create");
    for session in ["a", "b", "c", "d"] {
        store
            .join("r".into(), visitor(session))
            .await
            .expect("join");
    }
    let (promoted, room) = store.flush("r".into(), 1).await.expect("flush");
    assert_eq!((promoted, room["waiting"].clone()), (1, json!(3)));
    let (was, room) = store.eject("r".into(), 1).await.expect("eject");
    assert_eq!(
        (was, room["activePasses"].clone()),
        (EjectedFrom::Passed, json!(0))
    );
    assert_eq!(
        store.eject("r".into(), 1).await.expect_err("twice").code,
        ErrorCode::TicketNotFound
    );
    let room = store
        .set_state("r".into(), RoomState::Paused)
        .await
        .expect("state");
    assert_eq!(room["effectiveState"], "paused");
    assert_eq!(
        store
            .set_rate("r".into(), 2_000_000)
            .await
            .expect_err("rate")
            .code,
        ErrorCode::InvalidRate
    );
    let room = store
        .schedule("r".into(), json!({"opensAt": now_ms() + 60_000}))
        .await
        .expect("schedule");
    assert_eq!(room["effectiveState"], "scheduled");
    assert_eq!(
        store
            .schedule("r".into(), json!({}))
            .await
            .expect_err("empty")
            .code,
        ErrorCode::NothingToChange
    );
    let (purged, room) = store.purge("r".into()).await.expect("purge");
    assert_eq!(
        (
            purged.total(),
            room["waiting"].clone(),
            room["passedTotal"].clone()
        ),
        (3, json!(0), json!(1))
    );
}

#[tokio::test]
async fn watchers_see_changes_and_survive_delete_and_re_create() {
    let store = MemoryStore::new();
    let mut early = store.watch("w".into()).await.expect("watch");
    assert!(!early.current.exists, "a missing room reads exists: false");

    store.put_room(room_body("w")).await.expect("create");
    early.changes.changed().await.expect("created");
    let view = early.changes.borrow_and_update().clone();
    assert!(view.exists);
    assert_eq!((view.head, view.next_ticket), (1, 1));

    store.join("w".into(), visitor("s")).await.expect("join");
    store.join("w".into(), visitor("t")).await.expect("join");
    early.changes.changed().await.expect("joined");
    let view = early.changes.borrow_and_update().clone();
    assert_eq!(view.next_ticket, 3, "coalesced: the newest view");
    assert_eq!(view.position_of(view.generation, 2), Some(2));

    let late = store.watch("w".into()).await.expect("watch");
    assert_eq!(
        late.current.next_ticket, 3,
        "a new watcher starts from the current view"
    );

    store.delete_room("w".into()).await.expect("delete");
    early.changes.changed().await.expect("deleted");
    assert!(!early.changes.borrow_and_update().exists);
    store.put_room(room_body("w")).await.expect("re-create");
    early.changes.changed().await.expect("re-created");
    let view = early.changes.borrow_and_update().clone();
    assert!(view.exists && view.next_ticket == 1);
}

#[tokio::test]
async fn ticks_promote_and_publish() {
    let store = MemoryStore::new();
    store.put_room(room_body("t")).await.expect("create");
    for _ in 0..25 {
        store.join("t".into(), visitor("")).await.expect("join");
    }
    let mut watch = store.watch("t".into()).await.expect("watch");
    let second = (now_ms() / 1000 + 1) * 1000;
    store.tick(second).await.expect("tick");
    store.tick(second + 1000).await.expect("tick");
    watch.changes.changed().await.expect("promoted");
    let view = watch.changes.borrow_and_update().clone();
    assert_eq!((view.head, view.promoted_total), (21, 20));
}

#[tokio::test]
async fn sightings_come_from_proved_statuses_kept_joins_and_seen_reports() {
    let store = MemoryStore::new();
    store.put_room(room_body("seen")).await.expect("create");
    let generation = store.get_room("seen".into()).await.expect("room")["generation"]
        .as_u64()
        .expect("generation");
    let first = store.join("seen".into(), visitor("a")).await.expect("join");
    let second = store.join("seen".into(), visitor("b")).await.expect("join");
    let third = store.join("seen".into(), visitor("c")).await.expect("join");
    let claim = |ticket| Claim {
        generation,
        place: ClaimedPlace::Ticket(ticket),
    };
    let sighted = |ticket: u64| {
        let slot = store.rooms.get("seen").expect("room");
        slot.read(|room| room.presence.contains_key(&ticket))
    };
    // The ownership cookie proves the place: a sighting. A token alone is not.
    store
        .status("seen".into(), claim(first.ticket), "a".into())
        .await
        .expect("status");
    store
        .status("seen".into(), claim(second.ticket), String::new())
        .await
        .expect("status");
    assert!(sighted(first.ticket));
    assert!(!sighted(second.ticket));
    // A join that keeps the place, and a gateway's heartbeat report.
    let kept = JoinRequest {
        claim: Some(claim(second.ticket)),
        ..visitor("b")
    };
    assert!(
        !store
            .join("seen".into(), kept)
            .await
            .expect("join")
            .new_place
    );
    assert!(sighted(second.ticket));
    store
        .seen("seen".into(), vec![third.ticket, 99])
        .await
        .expect("seen");
    assert!(sighted(third.ticket));
    assert!(!sighted(99));
}
