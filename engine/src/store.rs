//! The `Store` trait: every operation the engine offers, each atomic and scoped to one room.
//! Every change goes through one method, [`Store::execute`], which runs a domain
//! [`Command`] (the rules live in `domain`, once); reads answer from the room as the store
//! holds it. The memory store implements it in-process; the durable store (Valkey + Postgres
//! journal) implements the same contract, so the gRPC service never knows which one it talks
//! to. The typed helpers (`join`, `flush`, …) are `execute` plus the answer's shape.
//!
//! Futures are boxed so the trait stays object-safe (`Arc<dyn Store>`): one allocation per call
//! is nothing beside a gRPC round trip.

use std::future::Future;
use std::pin::Pin;

use qm_core::room::{ProtectionMode, RoomState};
use qm_core::{ApiError, ErrorCode};
use qm_proto::{RoomInfoReply, RoomView, StatsReply};
use serde_json::Value;
use tokio::sync::watch;

use crate::domain::{
    CheckAnswer, Claim, Command, DoorDecision, DoorInput, EjectedFrom, JoinRequest, Outcome,
    PlaceAnswer, PlaceStatus, Purged, Room, RoomEvent, Targeting,
};
use crate::targeting_counters::RoomCounts;

/// What every store operation returns.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, ApiError>> + Send + 'a>>;

/// A read of one room as this engine holds it, with the clock of the read.
pub type RoomReader<'a> = Box<dyn FnOnce(&Room, i64) + Send + 'a>;

/// An admin room object (configuration, facts and live stats) after an operation.
pub type RoomJson = Value;

/// The answer to a create-or-update.
#[derive(Debug, Clone, PartialEq)]
pub struct PutOutcome {
    pub room: RoomJson,
    pub created: bool,
}

/// A subscription to one room's line: the view now, then the newest view after each change.
/// A slow reader sees the latest view, never a backlog.
#[derive(Debug)]
pub struct RoomWatch {
    pub current: RoomView,
    pub changes: watch::Receiver<RoomView>,
}

/// A command answered with an outcome of another kind: a bug, never a visitor's doing.
fn mismatched(outcome: &Outcome) -> ApiError {
    ApiError::new(
        ErrorCode::Internal,
        format!("the store answered {outcome:?} to a command of another kind"),
    )
}

pub trait Store: Send + Sync + 'static {
    /// Runs `command` on the room (a `Put` creates it when there is none) and answers once the
    /// change is as durable as the store makes changes: an error changes nothing.
    fn execute(&self, room_id: String, command: Command) -> StoreFuture<'_, Outcome>;

    fn get_room(&self, room_id: String) -> StoreFuture<'_, RoomJson>;
    /// Admin room objects in creation order.
    fn list_rooms(&self) -> StoreFuture<'_, Vec<RoomJson>>;
    /// What the edge needs to serve a room (`found: false` when there is none).
    fn room_info(&self, room_id: String) -> StoreFuture<'_, RoomInfoReply>;
    /// The room's bot-protection mode (`None`: no room, or no `protection`), read without
    /// building anything else of the room: a bot flood asks it once per join.
    fn protection_mode(&self, room_id: String) -> StoreFuture<'_, Option<ProtectionMode>>;
    fn status(
        &self,
        room_id: String,
        claim: Claim,
        session_hash: String,
    ) -> StoreFuture<'_, PlaceAnswer>;
    /// The door's decision read from the room as this engine holds it; `None` when the room
    /// does not exist (counted: the edge fails open).
    fn door_read(&self, room_id: String, input: DoorInput)
    -> StoreFuture<'_, Option<DoorDecision>>;
    /// A room's URL targeting and its generation, read as this engine holds the room (`None`
    /// when there is no room). Polled by connectors: a plain read, no catching up.
    fn targeting(&self, room_id: String) -> StoreFuture<'_, Option<(u64, Targeting)>>;
    /// One outflow slice for every room, for the calendar second of `now_ms`.
    fn tick(&self, now_ms: i64) -> StoreFuture<'_, ()>;
    /// Subscribes to a room's views; a missing room reads `exists: false` until it is created.
    fn watch(&self, room_id: String) -> StoreFuture<'_, RoomWatch>;
    fn stats(&self) -> StoreFuture<'_, StatsReply>;
    /// The room's history folded for `/api/admin/reports` (`crate::reports`): replayed from the
    /// journal on the durable store, what this boot saw on memory. `room_not_found` for a
    /// missing room.
    fn report(&self, room_id: String) -> StoreFuture<'_, crate::reports::ReportFold>;
    /// Sightings of the holders of `tickets` now (QM-345): a gateway's report of the streams it
    /// holds open. Best effort and unjournaled; unknown rooms and tickets are ignored.
    fn seen(&self, room_id: String, tickets: Vec<u64>) -> StoreFuture<'_, ()>;
    /// Runs `read` on the room as this engine holds it (under the room's lock: keep it short),
    /// for the support lookup. The durable store reads its replica after catching up from the
    /// journal, so it may miss a commit landing during the call, and its presence is this
    /// engine's sightings. `room_not_found` for a missing room.
    fn read_room<'a>(&'a self, room_id: String, read: RoomReader<'a>) -> StoreFuture<'a, ()>;

    /// The door check: answered from the read copy unless it opens a door session or records
    /// one's use, which run as [`Command::Door`] (decided again on the room as it stands). An
    /// opening is answered only once it is as durable as the store makes changes; a refused
    /// opening changes nothing, so a retry is admitted. A refused record of use still lets the
    /// visitor through: it is bookkeeping, and the next check records it.
    fn check(&self, room_id: String, input: DoorInput) -> StoreFuture<'_, Option<CheckAnswer>> {
        Box::pin(async move {
            let Some(decision) = self.door_read(room_id.clone(), input.clone()).await? else {
                return Ok(None);
            };
            let Some(change) = decision.change else {
                return Ok(Some(decision.answer));
            };
            match self.execute(room_id, Command::Door(input)).await {
                Ok(Outcome::Door(answer)) => Ok(Some(answer)),
                Ok(outcome) => Err(mismatched(&outcome)),
                Err(_) if matches!(change, RoomEvent::DoorSeen { .. }) => Ok(Some(decision.answer)),
                Err(refusal) => Err(refusal),
            }
        })
    }

    /// What the store records as it works, for `/metrics` (`None`: the memory store, which has
    /// no journal or backend to measure).
    fn store_metrics(&self) -> Option<&crate::metrics::StoreMetrics> {
        None
    }

    /// Whether several engines share this store's rooms, so the targeting counters of each must
    /// be added up ([`Store::add_targeting`]); the memory store serves one engine.
    fn shares_targeting(&self) -> bool {
        false
    }

    /// Adds one engine's targeting counts (since its last flush) to the room's shared ones.
    fn add_targeting(&self, _room_id: String, _counts: RoomCounts) -> StoreFuture<'_, ()> {
        Box::pin(std::future::ready(Ok(())))
    }

    /// The room's shared targeting counts at `generation` and rule revision `rev`, as every
    /// engine has flushed them (`None`: the store shares none).
    fn shared_targeting(
        &self,
        _room_id: String,
        _era: (u64, u64),
        _rules: usize,
    ) -> StoreFuture<'_, Option<RoomCounts>> {
        Box::pin(std::future::ready(Ok(None)))
    }

    /// Whether the store can persist changes now, as it changes (`None`: always ready).
    fn readiness(&self) -> Option<watch::Receiver<bool>> {
        None
    }

    /// Whether the backend that takes a room's changes is unreachable right now (Valkey, on the
    /// durable store): the inline gate's onBackendDown. The memory store has none to lose.
    fn backend_down(&self) -> bool {
        false
    }

    /// Creates or updates a room from a `POST /api/admin/rooms` body.
    fn put_room(&self, body: Value) -> StoreFuture<'_, PutOutcome> {
        Box::pin(async move {
            let room_id = Command::put_target(&body, qm_core::clock::now_ms())?;
            let outcome = self.execute(room_id.clone(), Command::Put(body)).await?;
            let Outcome::Put { created } = outcome else {
                return Err(mismatched(&outcome));
            };
            let room = self.get_room(room_id).await?;
            Ok(PutOutcome { room, created })
        })
    }

    /// Removes a room; its generation and seq are remembered for a re-create.
    fn delete_room(&self, room_id: String) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            match self.execute(room_id, Command::Delete).await? {
                Outcome::Deleted => Ok(()),
                outcome => Err(mismatched(&outcome)),
            }
        })
    }

    fn join(&self, room_id: String, request: JoinRequest) -> StoreFuture<'_, PlaceStatus> {
        Box::pin(async move {
            match self.execute(room_id, Command::Join(request)).await? {
                Outcome::Place(place) => Ok(place),
                outcome => Err(mismatched(&outcome)),
            }
        })
    }

    fn set_state(&self, room_id: String, state: RoomState) -> StoreFuture<'_, RoomJson> {
        self.change(room_id, Command::SetState(state))
    }

    fn set_rate(&self, room_id: String, rate_per_minute: u32) -> StoreFuture<'_, RoomJson> {
        self.change(room_id, Command::SetRate(rate_per_minute))
    }

    /// Applies a `POST .../schedule` body.
    fn schedule(&self, room_id: String, body: Value) -> StoreFuture<'_, RoomJson> {
        self.change(room_id, Command::Schedule(body))
    }

    /// A state, rate or schedule change, answered with the room after it.
    fn change(&self, room_id: String, command: Command) -> StoreFuture<'_, RoomJson> {
        Box::pin(async move {
            match self.execute(room_id.clone(), command).await? {
                Outcome::Changed => self.get_room(room_id).await,
                outcome => Err(mismatched(&outcome)),
            }
        })
    }

    /// Promotes up to `count` waiting tickets now; answers how many passed.
    fn flush(&self, room_id: String, count: u64) -> StoreFuture<'_, (u64, RoomJson)> {
        Box::pin(async move {
            match self.execute(room_id.clone(), Command::Flush(count)).await? {
                Outcome::Flushed(passed) => Ok((passed, self.get_room(room_id).await?)),
                outcome => Err(mismatched(&outcome)),
            }
        })
    }

    fn eject(&self, room_id: String, ticket: u64) -> StoreFuture<'_, (EjectedFrom, RoomJson)> {
        Box::pin(async move {
            match self
                .execute(room_id.clone(), Command::Eject(ticket))
                .await?
            {
                Outcome::Ejected(was) => Ok((was, self.get_room(room_id).await?)),
                outcome => Err(mismatched(&outcome)),
            }
        })
    }

    /// Discards the waiting line and the pre-queue; answers how many of each.
    fn purge(&self, room_id: String) -> StoreFuture<'_, (Purged, RoomJson)> {
        Box::pin(async move {
            match self.execute(room_id.clone(), Command::Purge).await? {
                Outcome::Purged(purged) => Ok((purged, self.get_room(room_id).await?)),
                outcome => Err(mismatched(&outcome)),
            }
        })
    }
}
