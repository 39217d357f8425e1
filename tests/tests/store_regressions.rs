//! Places where the two stores once answered differently, each run on both: the memory store
//! and the durable store (a private Valkey and a fresh database), on a clock the test moves.
//!
//! - A pass older than a day can still be revoked: the durable store once answered
//!   `ticket_not_found` where the memory store answered `was: passed`.
//! - Two engines updating one room at the same moment: the durable store once merged each
//!   update into its own view and wrote the whole configuration back, so one update could undo
//!   the other.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use qm_core::ErrorCode;
use qm_engine::domain::{Claim, ClaimedPlace, EjectedFrom, JoinRequest, LapseReason, PlaceAnswer};
use qm_engine::store::Store;
use qm_engine::{DurableOptions, DurableStore, Environment, MemoryStore};
use qm_tests::Backing;
use qm_tests::servers::ValkeyOptions;
use serde_json::json;

const T0: i64 = 1_900_000_000_000;
const DAY_MS: i64 = 86_400_000;

/// A clock the test moves, and the environment stores read it through.
fn clock() -> (Arc<AtomicI64>, Environment) {
    let now = Arc::new(AtomicI64::new(T0));
    let read = now.clone();
    let environment = Environment::simulated(Arc::new(move || read.load(Ordering::Relaxed)), 7);
    (now, environment)
}

async fn durable(backing: &Backing, environment: Environment) -> DurableStore {
    let options = DurableOptions {
        valkey_url: backing.valkey.url(),
        database_url: backing.database.url(),
    };
    DurableStore::start_with(&options, environment)
        .await
        .unwrap_or_else(|error| panic!("start the durable store: {error}"))
}

fn room_body(room_id: &str) -> serde_json::Value {
    json!({"id": room_id, "targetUrl": "https://shop.example.com/", "ratePerMinute": 0})
}

/// Joins, is flushed through, and is revoked a day and an hour later.
async fn a_day_old_pass_is_revoked(store: &dyn Store, now: &AtomicI64) {
    store.put_room(room_body("old")).await.expect("create");
    let visitor = JoinRequest {
        session_hash: "holder".to_owned(),
        ..JoinRequest::default()
    };
    let place = store.join("old".into(), visitor).await.expect("join");
    let (passed, _) = store.flush("old".into(), 1).await.expect("flush");
    assert_eq!(passed, 1);
    now.fetch_add(DAY_MS + 3_600_000, Ordering::Relaxed);
    let (was, _) = store
        .eject("old".into(), place.ticket)
        .await
        .expect("a day-old pass is still a pass to revoke");
    assert_eq!(was, EjectedFrom::Passed);
    let claim = Claim {
        generation: place.generation,
        place: ClaimedPlace::Ticket(place.ticket),
    };
    let answer = store
        .status("old".into(), claim, "holder".into())
        .await
        .expect("status");
    assert_eq!(answer, PlaceAnswer::Lapsed(LapseReason::Ejected));
    let again = store.eject("old".into(), place.ticket).await;
    assert_eq!(
        again.expect_err("revoked once").code,
        ErrorCode::TicketNotFound
    );
}

#[tokio::test]
async fn a_pass_older_than_a_day_is_revoked_on_the_memory_store() {
    let (now, environment) = clock();
    let store = MemoryStore::with_environment(environment);
    a_day_old_pass_is_revoked(&store, &now).await;
}

#[tokio::test]
async fn a_pass_older_than_a_day_is_revoked_on_the_durable_store() {
    let backing = Backing::start(ValkeyOptions::default()).await;
    let (now, environment) = clock();
    let store = durable(&backing, environment).await;
    a_day_old_pass_is_revoked(&store, &now).await;
}

/// Rounds of two updates at once, one through each of `left` and `right` (the same store, or
/// two engines on one Valkey), each naming a different field: both must hold afterwards.
async fn concurrent_updates_both_hold(left: &dyn Store, right: &dyn Store) {
    left.put_room(room_body("both")).await.expect("create");
    wait_for_room(right, "both").await;
    for round in 1..=25u32 {
        let name = format!("Round {round}");
        let (named, rated) = tokio::join!(
            left.put_room(json!({"id": "both", "name": name})),
            right.put_room(json!({"id": "both", "ratePerMinute": round})),
        );
        named.expect("the name update");
        rated.expect("the rate update");
        for store in [left, right] {
            let room = settled_room(store, "both", round).await;
            assert_eq!(
                (room["name"].as_str(), room["ratePerMinute"].as_u64()),
                (Some(name.as_str()), Some(u64::from(round))),
                "round {round}: neither update undid the other: {room}"
            );
        }
    }
}

async fn wait_for_room(store: &dyn Store, room_id: &str) {
    for _ in 0..200 {
        if store.get_room(room_id.to_owned()).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("room {room_id} never reached the other engine");
}

/// The room once this store has heard of both updates of `round` (the other engine's arrive
/// over pub/sub a moment later).
async fn settled_room(store: &dyn Store, room_id: &str, round: u32) -> serde_json::Value {
    let seq_after_round = 1 + 2 * u64::from(round);
    for _ in 0..200 {
        let room = store.get_room(room_id.to_owned()).await.expect("room");
        if room["seq"].as_u64() >= Some(seq_after_round) {
            return room;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("round {round} never settled");
}

#[tokio::test]
async fn concurrent_updates_both_hold_on_the_memory_store() {
    let store = MemoryStore::new();
    concurrent_updates_both_hold(&store, &store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_updates_through_two_engines_both_hold_on_the_durable_store() {
    let backing = Backing::start(ValkeyOptions::default()).await;
    let left = durable(&backing, Environment::real()).await;
    let right = durable(&backing, Environment::real()).await;
    concurrent_updates_both_hold(&left, &right).await;
}
