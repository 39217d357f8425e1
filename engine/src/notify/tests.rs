//! The notifier against the pre-queue contract it relies on: `status` of a handle answers a
//! place with ticket 0 while it is in the pre-queue, and the drawn ticket after the draw. A
//! wrapper around the memory store that draws on command plays that part, so the mailer's
//! re-keying is tested without a real clock reaching opensAt (the real draw is covered by
//! `tests/tests/api/notify.rs::a_notification_filed_on_a_pre_queue_handle_follows_the_drawn_ticket`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use qm_core::config::Config;
use qm_proto::engine::{place_reply, place_status};
use qm_proto::{PlaceReply, RoomInfoReply, StatsReply};
use serde_json::json;
use tokio::task::JoinSet;

use super::*;
use crate::MemoryStore;
use crate::domain::{Command, DoorDecision, DoorInput, Outcome, Targeting};
use crate::store::{RoomJson, RoomWatch, StoreFuture};

/// The memory store, with pre-queue handles: `handles[q]` is `None` before the draw and the
/// drawn ticket after it.
struct DrawStore {
    inner: MemoryStore,
    handles: Mutex<HashMap<u64, Option<u64>>>,
}

impl DrawStore {
    fn draw(&self, handle: u64, ticket: u64) {
        self.handles.lock().unwrap().insert(handle, Some(ticket));
    }
}

impl Store for DrawStore {
    fn execute(&self, room_id: String, command: Command) -> StoreFuture<'_, Outcome> {
        self.inner.execute(room_id, command)
    }
    fn get_room(&self, room_id: String) -> StoreFuture<'_, RoomJson> {
        self.inner.get_room(room_id)
    }
    fn list_rooms(&self) -> StoreFuture<'_, Vec<RoomJson>> {
        self.inner.list_rooms()
    }
    fn room_info(&self, room_id: String) -> StoreFuture<'_, RoomInfoReply> {
        self.inner.room_info(room_id)
    }
    fn protection_mode(
        &self,
        room_id: String,
    ) -> StoreFuture<'_, Option<qm_core::room::ProtectionMode>> {
        self.inner.protection_mode(room_id)
    }
    fn read_room<'a>(
        &'a self,
        room_id: String,
        read: crate::store::RoomReader<'a>,
    ) -> StoreFuture<'a, ()> {
        self.inner.read_room(room_id, read)
    }
    fn status(
        &self,
        room_id: String,
        claim: Claim,
        session_hash: String,
    ) -> StoreFuture<'_, PlaceAnswer> {
        let ClaimedPlace::Handle(handle) = claim.place else {
            return self.inner.status(room_id, claim, session_hash);
        };
        let drawn = self.handles.lock().unwrap().get(&handle).copied();
        Box::pin(async move {
            let Some(drawn) = drawn else {
                return Ok(PlaceAnswer::Lapsed(LapseReason::RoomReset));
            };
            // Ticket 1 is a waiting place this test keeps for its shape.
            let ticket = drawn.unwrap_or(1);
            let answer = self
                .inner
                .status(
                    room_id,
                    Claim {
                        generation: claim.generation,
                        place: ClaimedPlace::Ticket(ticket),
                    },
                    session_hash,
                )
                .await?;
            Ok(match (answer, drawn) {
                (PlaceAnswer::Place(mut place), None) => {
                    place.ticket = 0;
                    place.position = None;
                    PlaceAnswer::Place(place)
                }
                (answer, _) => answer,
            })
        })
    }
    fn door_read(
        &self,
        room_id: String,
        input: DoorInput,
    ) -> StoreFuture<'_, Option<DoorDecision>> {
        self.inner.door_read(room_id, input)
    }
    fn targeting(&self, room_id: String) -> StoreFuture<'_, Option<(u64, Targeting)>> {
        self.inner.targeting(room_id)
    }
    fn tick(&self, now_ms: i64) -> StoreFuture<'_, ()> {
        self.inner.tick(now_ms)
    }
    fn seen(&self, room_id: String, tickets: Vec<u64>) -> StoreFuture<'_, ()> {
        self.inner.seen(room_id, tickets)
    }
    fn watch(&self, room_id: String) -> StoreFuture<'_, RoomWatch> {
        self.inner.watch(room_id)
    }
    fn stats(&self) -> StoreFuture<'_, StatsReply> {
        self.inner.stats()
    }
    fn report(&self, room_id: String) -> StoreFuture<'_, crate::reports::ReportFold> {
        self.inner.report(room_id)
    }
}

const OWNER: &str = "owner-session-hash";

async fn setup() -> (Arc<DrawStore>, Arc<Notifier>, u64) {
    let store = Arc::new(DrawStore {
        inner: MemoryStore::new(),
        handles: Mutex::new(HashMap::new()),
    });
    store
        .put_room(
            json!({"id": "drop", "targetUrl": "https://shop.example.com/", "ratePerMinute": 0}),
        )
        .await
        .unwrap();
    for _ in 0..2 {
        let request = JoinRequest {
            session_hash: OWNER.into(),
            ..JoinRequest::default()
        };
        store.join("drop".into(), request).await.unwrap();
    }
    let env: HashMap<&str, &str> = [
        ("SECRET", "notify-unit-test-secret-0123"),
        ("EMAIL_NOTIFY", "1"),
        ("SMTP_URL", "smtp://127.0.0.1:9"),
    ]
    .into_iter()
    .collect();
    let config = Config::from_source(&env).unwrap();
    let notifier = Notifier::new(&config, store.clone(), None).unwrap();
    let generation = store.room_info("drop".into()).await.unwrap().generation;
    (store, Arc::new(notifier), generation)
}

fn handle_claim(generation: u64, handle: u64) -> Claim {
    Claim {
        generation,
        place: ClaimedPlace::Handle(handle),
    }
}

fn key(generation: u64, kind: PlaceKind, number: u64) -> PlaceKey {
    PlaceKey {
        room_id: "drop".into(),
        generation,
        kind,
        number,
    }
}

#[tokio::test]
async fn a_pre_queue_record_follows_its_drawn_ticket() {
    let (store, notifier, g) = setup().await;
    store.handles.lock().unwrap().insert(5, None);
    let statement = notifier
        .register("drop", handle_claim(g, 5), OWNER, "jane@example.com")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(statement.email_masked, "j***@e***.com");
    let filed = notifier
        .book
        .get(&key(g, PlaceKind::Handle, 5))
        .await
        .unwrap()
        .unwrap();

    let sends = Arc::new(tokio::sync::Semaphore::new(1));
    let mut in_flight = JoinSet::new();
    // Still in the pre-queue: the record stays where it is.
    notifier.follow(filed.clone(), &sends, &mut in_flight).await;
    assert!(
        notifier
            .book
            .get(&key(g, PlaceKind::Handle, 5))
            .await
            .unwrap()
            .is_some()
    );

    store.draw(5, 2);
    notifier.follow(filed, &sends, &mut in_flight).await;
    assert!(
        notifier
            .book
            .get(&key(g, PlaceKind::Handle, 5))
            .await
            .unwrap()
            .is_none()
    );
    let drawn = notifier
        .book
        .get(&key(g, PlaceKind::Ticket, 2))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(drawn.masked_email, "j***@e***.com");
    assert!(in_flight.is_empty(), "a waiting ticket is not mailed");
}

#[tokio::test]
async fn registering_on_a_drawn_handle_files_against_its_ticket() {
    let (store, notifier, g) = setup().await;
    store.draw(7, 1);
    notifier
        .register("drop", handle_claim(g, 7), OWNER, "jane@example.com")
        .await
        .unwrap();
    assert!(
        notifier
            .book
            .get(&key(g, PlaceKind::Ticket, 1))
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        notifier
            .book
            .get(&key(g, PlaceKind::Handle, 7))
            .await
            .unwrap()
            .is_none()
    );
    // Another browser's session is refused.
    let error = notifier
        .register("drop", handle_claim(g, 7), "someone-else", "x@example.com")
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::InvalidToken);
}

fn join_reply(generation: u64, ticket: u64, replaced_reason: &str) -> PlaceReply {
    PlaceReply {
        outcome: Some(place_reply::Outcome::Place(qm_proto::PlaceStatus {
            generation,
            place: Some(place_status::Place::Ticket(ticket)),
            new_place: true,
            replaced_reason: replaced_reason.into(),
            ..qm_proto::PlaceStatus::default()
        })),
        ..PlaceReply::default()
    }
}

#[tokio::test]
async fn a_join_exchanging_a_handle_for_its_ticket_carries_the_record_for_its_owner_only() {
    let (store, notifier, g) = setup().await;
    store.handles.lock().unwrap().insert(3, None);
    notifier
        .register("drop", handle_claim(g, 3), OWNER, "jane@example.com")
        .await
        .unwrap();
    let exchange = |session: &str| JoinRequest {
        claim: Some(handle_claim(g, 3)),
        session_hash: session.into(),
        ..JoinRequest::default()
    };

    let mut stranger = join_reply(g, 2, "");
    notifier
        .annotate_join("drop", &exchange("someone-else"), &mut stranger)
        .await;
    assert!(stranger.notify_enabled);
    assert_eq!(stranger.notify, None, "nobody else's record moves");

    let mut owner = join_reply(g, 2, "");
    notifier
        .annotate_join("drop", &exchange(OWNER), &mut owner)
        .await;
    assert_eq!(owner.notify.unwrap().delivery, "pending");
    assert!(
        notifier
            .book
            .get(&key(g, PlaceKind::Handle, 3))
            .await
            .unwrap()
            .is_none()
    );

    // "unbound" never carries, even for the record's own browser.
    notifier
        .register(
            "drop",
            Claim {
                generation: g,
                place: ClaimedPlace::Ticket(1),
            },
            OWNER,
            "jane@example.com",
        )
        .await
        .unwrap();
    let mut unbound = join_reply(g, 2, "unbound");
    let request = JoinRequest {
        claim: Some(Claim {
            generation: g,
            place: ClaimedPlace::Ticket(1),
        }),
        session_hash: OWNER.into(),
        ..JoinRequest::default()
    };
    notifier
        .book
        .delete(&key(g, PlaceKind::Ticket, 2))
        .await
        .unwrap();
    notifier.annotate_join("drop", &request, &mut unbound).await;
    assert_eq!(unbound.notify, None);
    assert!(
        notifier
            .book
            .get(&key(g, PlaceKind::Ticket, 1))
            .await
            .unwrap()
            .is_some()
    );
}
