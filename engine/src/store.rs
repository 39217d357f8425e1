//! The `Store` trait: every operation the engine offers, each atomic and scoped to one room.
//! The memory store implements it in-process; a durable store (Valkey + Postgres journal)
//! implements the same contract, so the gRPC service never knows which one it talks to.
//!
//! Futures are boxed so the trait stays object-safe (`Arc<dyn Store>`): one allocation per call
//! is nothing beside a gRPC round trip.

use std::future::Future;
use std::pin::Pin;

use qm_core::ApiError;
use qm_core::room::RoomState;
use qm_proto::{RoomInfoReply, RoomView, StatsReply};
use serde_json::Value;
use tokio::sync::watch;

use crate::domain::{
    CheckAnswer, Claim, EjectedFrom, JoinRequest, PlaceAnswer, PlaceStatus, Purged, Room,
};

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

pub trait Store: Send + Sync + 'static {
    /// Creates or updates a room from a `POST /api/admin/rooms` body, validated and merged
    /// atomically with the stored room.
    fn put_room(&self, body: Value) -> StoreFuture<'_, PutOutcome>;
    fn get_room(&self, room_id: String) -> StoreFuture<'_, RoomJson>;
    /// Admin room objects in creation order.
    fn list_rooms(&self) -> StoreFuture<'_, Vec<RoomJson>>;
    /// Removes a room; its generation and seq are remembered for a re-create.
    fn delete_room(&self, room_id: String) -> StoreFuture<'_, ()>;
    /// What the edge needs to serve a room (`found: false` when there is none).
    fn room_info(&self, room_id: String) -> StoreFuture<'_, RoomInfoReply>;

    fn join(&self, room_id: String, request: JoinRequest) -> StoreFuture<'_, PlaceStatus>;
    fn status(
        &self,
        room_id: String,
        claim: Claim,
        session_hash: String,
    ) -> StoreFuture<'_, PlaceAnswer>;
    /// The door check; `None` when the room does not exist (counted: the edge fails open).
    fn check(&self, room_id: String, claim: Option<Claim>) -> StoreFuture<'_, Option<CheckAnswer>>;

    fn set_state(&self, room_id: String, state: RoomState) -> StoreFuture<'_, RoomJson>;
    fn set_rate(&self, room_id: String, rate_per_minute: u32) -> StoreFuture<'_, RoomJson>;
    /// Promotes up to `count` waiting tickets now; answers how many passed.
    fn flush(&self, room_id: String, count: u64) -> StoreFuture<'_, (u64, RoomJson)>;
    /// Applies a `POST .../schedule` body.
    fn schedule(&self, room_id: String, body: Value) -> StoreFuture<'_, RoomJson>;
    fn eject(&self, room_id: String, ticket: u64) -> StoreFuture<'_, (EjectedFrom, RoomJson)>;
    /// Discards the waiting line and the pre-queue; answers how many of each.
    fn purge(&self, room_id: String) -> StoreFuture<'_, (Purged, RoomJson)>;

    /// One outflow slice for every room, for the calendar second of `now_ms`.
    fn tick(&self, now_ms: i64) -> StoreFuture<'_, ()>;
    /// Subscribes to a room's views; a missing room reads `exists: false` until it is created.
    fn watch(&self, room_id: String) -> StoreFuture<'_, RoomWatch>;
    fn stats(&self) -> StoreFuture<'_, StatsReply>;
    /// Sightings of the holders of `tickets` now (QM-345): a gateway's report of the streams it
    /// holds open. Best effort and unjournaled; unknown rooms and tickets are ignored.
    fn seen(&self, room_id: String, tickets: Vec<u64>) -> StoreFuture<'_, ()>;

    /// Runs `read` on the room as this engine holds it (under the room's lock: keep it short),
    /// for the support lookup. The memory store reads the room itself; the durable store reads
    /// its replica after catching up from the journal, so it may miss a commit landing during
    /// the call, and its presence is this engine's sightings only (the outflow decides by the
    /// ones in Valkey). `room_not_found` for a missing room.
    fn read_room<'a>(&'a self, room_id: String, read: RoomReader<'a>) -> StoreFuture<'a, ()>;

    /// Whether the store can persist changes now, as it changes (`None`: always ready).
    fn readiness(&self) -> Option<watch::Receiver<bool>> {
        None
    }
}
