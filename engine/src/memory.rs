//! `MemoryStore`: the in-process store for development and tests. Diskless, starts empty,
//! keeps no journal: a change is [`Room::execute`] under the room's lock, and its records are
//! folded into the room's report (what this boot saw) and dropped. Locks are std mutexes never held across an `.await`; the futures it returns are
//! ready.

use std::future::ready;
use std::sync::atomic::{AtomicU64, Ordering};

use qm_core::room::ProtectionMode;
use qm_core::{ApiError, ErrorCode};
use qm_proto::{RoomInfoReply, StatsReply};

use crate::Environment;
use crate::domain::{
    Claim, Command, DoorDecision, DoorInput, LapseReason, Outcome, PlaceAnswer, Room, RoomEvent,
    Targeting,
};
use crate::reports::ReportFold;
use crate::rooms::{RoomTable, Slot};
use crate::store::{RoomJson, RoomReader, RoomWatch, Store, StoreFuture};
use crate::view::room_info;

/// Each room's report of this boot, fed every record the room takes (`crate::reports`).
type Reports = std::sync::Mutex<ReportFold>;

/// Rooms, each behind its own lock so rooms never contend with each other.
pub struct MemoryStore {
    rooms: RoomTable<Reports>,
    environment: Environment,
    /// `/api/check` calls for rooms that do not exist (the edge failed open).
    no_room_checks: AtomicU64,
    started_at_ms: i64,
}

fn room_not_found(room_id: &str) -> ApiError {
    ApiError::new(ErrorCode::RoomNotFound, format!("no room {room_id:?}"))
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new()
    }
}

impl MemoryStore {
    pub fn new() -> MemoryStore {
        MemoryStore::with_environment(Environment::real())
    }

    /// A store on a given clock and source of randomness (tests).
    pub fn with_environment(environment: Environment) -> MemoryStore {
        MemoryStore {
            rooms: RoomTable::default(),
            no_room_checks: AtomicU64::new(0),
            started_at_ms: environment.now_ms(),
            environment,
        }
    }

    fn now_ms(&self) -> i64 {
        self.environment.now_ms()
    }

    /// Reads a live room under its lock.
    fn read_live<T>(&self, room_id: &str, read: impl FnOnce(&mut Room, i64) -> T) -> Option<T> {
        let slot = self.rooms.get(room_id)?;
        let mut room = slot.lock();
        room.is_live().then(|| read(&mut room, self.now_ms()))
    }

    fn execute_now(&self, room_id: &str, command: &Command) -> Result<Outcome, ApiError> {
        let slot = match command {
            Command::Put(_) => self.rooms.get_or_make(room_id, Reports::default),
            _ => self
                .rooms
                .get(room_id)
                .ok_or_else(|| room_not_found(room_id))?,
        };
        let now = self.now_ms();
        let mut room = slot.lock();
        let executed = room.execute(command, now, &mut self.environment.rng());
        if executed.records.is_empty() {
            return executed.outcome;
        }
        report(&slot, &room, &executed.records);
        for record in &executed.records {
            match &record.event {
                RoomEvent::Created { generation, .. } => {
                    tracing::info!(room_id, generation, seq = record.seq, "room created");
                    self.rooms.note_created(&slot);
                }
                RoomEvent::Deleted => tracing::info!(room_id, seq = record.seq, "room deleted"),
                RoomEvent::Drawn { .. } => {
                    tracing::info!(room_id, seq = record.seq, "pre-queue drawn")
                }
                _ => {}
            }
        }
        slot.publish(&room, now);
        executed.outcome
    }

    fn tick_room(&self, slot: &Slot<Reports>, now: i64) {
        let mut room = slot.lock();
        if !room.is_live() {
            return;
        }
        let executed = room.execute(&Command::Tick, now, &mut self.environment.rng());
        if let Err(error) = &executed.outcome {
            tracing::warn!(room_id = slot.room_id(), error = %error.message, "outflow slice failed");
        }
        if executed.records.is_empty() {
            slot.publish_if_state_changed(&room, now);
        } else {
            report(slot, &room, &executed.records);
            slot.publish(&room, now);
        }
    }
}

/// Feeds a room's report the records it just took (the room as they leave it).
fn report(slot: &Slot<Reports>, room: &Room, records: &[crate::domain::EventRecord]) {
    let mut fold = slot
        .extra
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for record in records {
        fold.observe(room, record);
    }
}

impl Store for MemoryStore {
    fn execute(&self, room_id: String, command: Command) -> StoreFuture<'_, Outcome> {
        Box::pin(ready(self.execute_now(&room_id, &command)))
    }

    fn get_room(&self, room_id: String) -> StoreFuture<'_, RoomJson> {
        let room = self
            .read_live(&room_id, |room, now| room.admin_json(now))
            .ok_or_else(|| room_not_found(&room_id));
        Box::pin(ready(room))
    }

    fn list_rooms(&self) -> StoreFuture<'_, Vec<RoomJson>> {
        Box::pin(ready(Ok(self.rooms.admin_rooms(self.now_ms()))))
    }

    fn protection_mode(&self, room_id: String) -> StoreFuture<'_, Option<ProtectionMode>> {
        let mode = self.read_live(&room_id, |room, _| {
            room.config.protection.map(|protection| protection.mode)
        });
        Box::pin(ready(Ok(mode.flatten())))
    }

    fn room_info(&self, room_id: String) -> StoreFuture<'_, RoomInfoReply> {
        let info = self
            .read_live(&room_id, |room, now| room_info(room, now))
            .unwrap_or_else(|| RoomInfoReply {
                found: false,
                room_id,
                ..RoomInfoReply::default()
            });
        Box::pin(ready(Ok(info)))
    }

    fn status(
        &self,
        room_id: String,
        claim: Claim,
        session_hash: String,
    ) -> StoreFuture<'_, PlaceAnswer> {
        let answer = self
            .read_live(&room_id, |room, now| {
                let answer = room.status(&claim, &session_hash, now);
                // A status that proves the place is a sighting of its holder (QM-345).
                if let PlaceAnswer::Place(place) = &answer
                    && place.bound
                {
                    room.see(place.ticket, now);
                }
                answer
            })
            .unwrap_or(PlaceAnswer::Lapsed(LapseReason::RoomReset));
        Box::pin(ready(Ok(answer)))
    }

    fn door_read(
        &self,
        room_id: String,
        input: DoorInput,
    ) -> StoreFuture<'_, Option<DoorDecision>> {
        let answer = self.read_live(&room_id, |room, now| room.door_decision(&input, now));
        if answer.is_none() {
            self.no_room_checks.fetch_add(1, Ordering::Relaxed);
        }
        Box::pin(ready(Ok(answer)))
    }

    fn targeting(&self, room_id: String) -> StoreFuture<'_, Option<(u64, Targeting)>> {
        let targeting = self.read_live(&room_id, |room, _| {
            (room.generation(), room.targeting().clone())
        });
        Box::pin(ready(Ok(targeting)))
    }

    fn tick(&self, now_ms: i64) -> StoreFuture<'_, ()> {
        for slot in self.rooms.all() {
            self.tick_room(&slot, now_ms);
        }
        Box::pin(ready(Ok(())))
    }

    fn report(&self, room_id: String) -> StoreFuture<'_, ReportFold> {
        let report = self
            .rooms
            .get(&room_id)
            .filter(|slot| slot.lock().is_live())
            .map(|slot| {
                slot.extra
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone()
            })
            .ok_or_else(|| room_not_found(&room_id));
        Box::pin(ready(report))
    }

    fn watch(&self, room_id: String) -> StoreFuture<'_, RoomWatch> {
        Box::pin(ready(Ok(self.rooms.watch(
            &room_id,
            self.now_ms(),
            Reports::default,
        ))))
    }

    fn stats(&self) -> StoreFuture<'_, StatsReply> {
        Box::pin(ready(Ok(StatsReply {
            rooms: self.rooms.live_count(),
            no_room_checks: self.no_room_checks.load(Ordering::Relaxed),
            store: "memory".to_owned(),
            storage_ready: true,
            started_at_ms: self.started_at_ms,
            ..StatsReply::default()
        })))
    }

    fn seen(&self, room_id: String, tickets: Vec<u64>) -> StoreFuture<'_, ()> {
        self.read_live(&room_id, |room, now| room.see_all(&tickets, now));
        Box::pin(ready(Ok(())))
    }

    fn read_room<'a>(&'a self, room_id: String, read: RoomReader<'a>) -> StoreFuture<'a, ()> {
        let result = self
            .read_live(&room_id, |room, now| read(room, now))
            .ok_or_else(|| room_not_found(&room_id));
        Box::pin(ready(result))
    }
}

#[cfg(test)]
mod tests;
