//! `MemoryStore`: the in-process store for development and tests. Diskless, starts empty,
//! keeps no journal (the events are produced and dropped). Every operation is synchronous
//! under std mutexes that are never held across an `.await`; the futures it returns are ready.

use std::collections::HashMap;
use std::future::ready;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use qm_core::clock::now_ms;
use qm_core::room::{RoomConfig, RoomState, apply_schedule};
use qm_core::{ApiError, ErrorCode};
use qm_proto::{RoomInfoReply, RoomView, StatsReply};
use serde_json::Value;
use tokio::sync::watch;

use crate::domain::{
    CheckAnswer, Claim, EjectedFrom, JoinRequest, LapseReason, PlaceAnswer, PlaceStatus, Purged,
    Room,
};
use crate::store::{PutOutcome, RoomJson, RoomReader, RoomWatch, Store, StoreFuture};
use crate::view::{missing_view, room_info, room_view};

/// Rooms, each behind its own lock so rooms never contend with each other.
pub struct MemoryStore {
    /// The room table. A std mutex, not a tokio one: it guards a map lookup and is never held
    /// across an `.await`. Lock order is table, then room; joins take only the room lock.
    table: Mutex<RoomTable>,
    /// `/api/check` calls for rooms that do not exist (the edge failed open).
    no_room_checks: AtomicU64,
    started_at_ms: i64,
}

#[derive(Default)]
struct RoomTable {
    rooms: HashMap<String, Arc<RoomSlot>>,
    /// Last generation and seq of each deleted room id, so a re-create starts a new generation
    /// and continues the id's seq.
    retired: HashMap<String, Retired>,
    /// One view channel per room id that has a room or had a watcher. It outlives a delete so
    /// a re-created room reaches the watchers that were already there.
    channels: HashMap<String, watch::Sender<RoomView>>,
    /// Creation counter: ListRooms answers in creation order.
    next_order: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Retired {
    generation: u64,
    seq: u64,
}

struct RoomSlot {
    order: u64,
    room: Mutex<Room>,
    channel: watch::Sender<RoomView>,
}

/// Takes a lock even if a panic poisoned it: room state is changed only by `Room::apply`,
/// which leaves it consistent between records, so the data behind a poisoned lock is sound.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn room_not_found(room_id: &str) -> ApiError {
    ApiError::new(ErrorCode::RoomNotFound, format!("no room {room_id:?}"))
}

/// Sends the room's new view to its watchers. Building a view is skipped when nobody watches,
/// so a burst of joins into an unwatched room costs nothing here; a new watcher builds its
/// first view itself. Called under the room lock, so views go out in seq order.
fn publish(slot: &RoomSlot, room: &Room, now_ms: i64) {
    if slot.channel.receiver_count() > 0 {
        slot.channel.send_replace(room_view(room, now_ms));
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new()
    }
}

impl MemoryStore {
    pub fn new() -> MemoryStore {
        MemoryStore {
            table: Mutex::new(RoomTable::default()),
            no_room_checks: AtomicU64::new(0),
            started_at_ms: now_ms(),
        }
    }

    fn slot(&self, room_id: &str) -> Option<Arc<RoomSlot>> {
        lock(&self.table).rooms.get(room_id).cloned()
    }

    /// Runs `operation` on a live room under its lock and publishes the new view when it
    /// reports a change.
    fn with_room<T>(
        &self,
        room_id: &str,
        operation: impl FnOnce(&mut Room, i64) -> Result<(T, bool), ApiError>,
    ) -> Result<T, ApiError> {
        let slot = self.slot(room_id).ok_or_else(|| room_not_found(room_id))?;
        let mut room = lock(&slot.room);
        if room.is_deleted() {
            return Err(room_not_found(room_id));
        }
        let now = now_ms();
        let (answer, changed) = operation(&mut room, now)?;
        if changed {
            publish(&slot, &room, now);
        }
        Ok(answer)
    }

    fn put_room_now(&self, body: &Value) -> Result<PutOutcome, ApiError> {
        let now = now_ms();
        let Some(room_id) = body.get("id").and_then(Value::as_str) else {
            // No usable id: the create rules name what is wrong (missing or invalid).
            return RoomConfig::apply_patch(None, body, now).and(Err(ApiError::new(
                ErrorCode::MissingField,
                "id is required to create a room",
            )));
        };
        let mut table = lock(&self.table);
        if let Some(slot) = table.rooms.get(room_id).cloned() {
            let mut room = lock(&slot.room);
            let config = RoomConfig::apply_patch(Some(room.config()), body, now)?;
            let record = room.update(config, now);
            tracing::debug!(room_id, seq = record.seq, "room updated");
            publish(&slot, &room, now);
            return Ok(PutOutcome {
                room: room.admin_json(now),
                created: false,
            });
        }

        let config = RoomConfig::apply_patch(None, body, now)?;
        let retired = table.retired.get(&config.id).copied().unwrap_or_default();
        // A new generation also across restarts of this diskless store: unix seconds only grow,
        // so tokens from an earlier boot's room read `room_reset`.
        let generation = (retired.generation + 1).max((now / 1000).max(0) as u64);
        let (room, record) = Room::create(config, generation, retired.seq, now);
        let room_id = room.room_id().to_owned();
        tracing::info!(room_id, generation, seq = record.seq, "room created");
        let view = room_view(&room, now);
        let channel = table
            .channels
            .entry(room_id.clone())
            .or_insert_with(|| watch::channel(view.clone()).0)
            .clone();
        if channel.receiver_count() > 0 {
            channel.send_replace(view);
        }
        let json = room.admin_json(now);
        let order = table.next_order;
        table.next_order += 1;
        table.rooms.insert(
            room_id,
            Arc::new(RoomSlot {
                order,
                room: Mutex::new(room),
                channel,
            }),
        );
        Ok(PutOutcome {
            room: json,
            created: true,
        })
    }

    fn delete_room_now(&self, room_id: &str) -> Result<(), ApiError> {
        let now = now_ms();
        let mut table = lock(&self.table);
        let slot = table
            .rooms
            .remove(room_id)
            .ok_or_else(|| room_not_found(room_id))?;
        let mut room = lock(&slot.room);
        let record = room.delete(now);
        table.retired.insert(
            room_id.to_owned(),
            Retired {
                generation: room.generation(),
                seq: room.seq(),
            },
        );
        tracing::info!(room_id, seq = record.seq, "room deleted");
        if slot.channel.receiver_count() > 0 {
            slot.channel
                .send_replace(missing_view(room_id, room.seq(), now));
        } else {
            table.channels.remove(room_id);
        }
        Ok(())
    }

    fn watch_now(&self, room_id: &str) -> RoomWatch {
        let now = now_ms();
        let mut table = lock(&self.table);
        let slot = table.rooms.get(room_id).cloned();
        let retired_seq = table.retired.get(room_id).map_or(0, |retired| retired.seq);
        let channel = match &slot {
            Some(slot) => slot.channel.clone(),
            None => table
                .channels
                .entry(room_id.to_owned())
                .or_insert_with(|| watch::channel(missing_view(room_id, retired_seq, now)).0)
                .clone(),
        };
        // Subscribe before reading the room: a change after this point is also sent to us, so
        // the first view plus the changes never miss one (at worst a view repeats).
        let changes = channel.subscribe();
        drop(table);
        let current = match slot {
            Some(slot) => {
                let room = lock(&slot.room);
                if room.is_deleted() {
                    missing_view(room_id, room.seq(), now)
                } else {
                    room_view(&room, now)
                }
            }
            None => missing_view(room_id, retired_seq, now),
        };
        RoomWatch { current, changes }
    }

    fn tick_now(&self, now: i64) {
        let slots: Vec<Arc<RoomSlot>> = lock(&self.table).rooms.values().cloned().collect();
        for slot in slots {
            let mut room = lock(&slot.room);
            if room.is_deleted() {
                continue;
            }
            let drawn = room.draw_if_due(&mut rand::rng(), now);
            if let Some(drawn) = &drawn {
                tracing::info!(room_id = room.room_id(), seq = drawn.seq, "pre-queue drawn");
            }
            let record = room.tick(now).or(drawn);
            if let Some(record) = &record {
                tracing::trace!(room_id = room.room_id(), seq = record.seq, "outflow slice");
            }
            // Also publish when the effective state flips (doors open at opensAt) without an event.
            let flipped = slot.channel.receiver_count() > 0
                && slot.channel.borrow().effective_state != room.effective_state(now).as_str();
            if record.is_some() || flipped {
                publish(&slot, &room, now);
            }
        }
    }

    fn list_rooms_now(&self) -> Vec<RoomJson> {
        let mut slots: Vec<Arc<RoomSlot>> = lock(&self.table).rooms.values().cloned().collect();
        slots.sort_by_key(|slot| slot.order);
        let now = now_ms();
        slots
            .iter()
            .filter_map(|slot| {
                let room = lock(&slot.room);
                (!room.is_deleted()).then(|| room.admin_json(now))
            })
            .collect()
    }
}

impl Store for MemoryStore {
    fn put_room(&self, body: Value) -> StoreFuture<'_, PutOutcome> {
        Box::pin(ready(self.put_room_now(&body)))
    }

    fn get_room(&self, room_id: String) -> StoreFuture<'_, RoomJson> {
        Box::pin(ready(self.with_room(&room_id, |room, now| {
            Ok((room.admin_json(now), false))
        })))
    }

    fn list_rooms(&self) -> StoreFuture<'_, Vec<RoomJson>> {
        Box::pin(ready(Ok(self.list_rooms_now())))
    }

    fn delete_room(&self, room_id: String) -> StoreFuture<'_, ()> {
        Box::pin(ready(self.delete_room_now(&room_id)))
    }

    fn room_info(&self, room_id: String) -> StoreFuture<'_, RoomInfoReply> {
        let info = self
            .with_room(&room_id, |room, now| Ok((room_info(room, now), false)))
            .unwrap_or_else(|_| RoomInfoReply {
                found: false,
                room_id,
                ..RoomInfoReply::default()
            });
        Box::pin(ready(Ok(info)))
    }

    fn join(&self, room_id: String, request: JoinRequest) -> StoreFuture<'_, PlaceStatus> {
        Box::pin(ready(self.with_room(&room_id, |room, now| {
            let drawn = room.draw_if_due(&mut rand::rng(), now).is_some();
            let outcome = room.join(&request, now)?;
            let changed = drawn || outcome.record.is_some();
            // A join that keeps its place is a sighting of its holder (QM-345).
            if outcome.record.is_none() && outcome.place.bound {
                room.see(outcome.place.ticket, now);
            }
            Ok((outcome.place, changed))
        })))
    }

    fn read_room<'a>(&'a self, room_id: String, read: RoomReader<'a>) -> StoreFuture<'a, ()> {
        let result = self.with_room(&room_id, |room, now| {
            read(room, now);
            Ok(((), false))
        });
        Box::pin(ready(result))
    }

    fn status(
        &self,
        room_id: String,
        claim: Claim,
        session_hash: String,
    ) -> StoreFuture<'_, PlaceAnswer> {
        let answer = self
            .with_room(&room_id, |room, now| {
                let answer = room.status(&claim, &session_hash, now);
                // A status that proves the place is a sighting of its holder (QM-345).
                if let PlaceAnswer::Place(place) = &answer
                    && place.bound
                {
                    room.see(place.ticket, now);
                }
                Ok((answer, false))
            })
            .unwrap_or(PlaceAnswer::Lapsed(LapseReason::RoomReset));
        Box::pin(ready(Ok(answer)))
    }

    fn check(&self, room_id: String, claim: Option<Claim>) -> StoreFuture<'_, Option<CheckAnswer>> {
        let answer = self
            .with_room(&room_id, |room, now| {
                Ok((room.check(claim.as_ref(), now), false))
            })
            .ok();
        if answer.is_none() {
            self.no_room_checks.fetch_add(1, Ordering::Relaxed);
        }
        Box::pin(ready(Ok(answer)))
    }

    fn set_state(&self, room_id: String, state: RoomState) -> StoreFuture<'_, RoomJson> {
        Box::pin(ready(self.with_room(&room_id, |room, now| {
            room.set_state(state, now);
            Ok((room.admin_json(now), true))
        })))
    }

    fn set_rate(&self, room_id: String, rate_per_minute: u32) -> StoreFuture<'_, RoomJson> {
        Box::pin(ready(self.with_room(&room_id, |room, now| {
            let rate_per_minute = qm_core::room::check_rate(u64::from(rate_per_minute))?;
            room.set_rate(rate_per_minute, now);
            Ok((room.admin_json(now), true))
        })))
    }

    fn flush(&self, room_id: String, count: u64) -> StoreFuture<'_, (u64, RoomJson)> {
        Box::pin(ready(self.with_room(&room_id, |room, now| {
            let (promoted, record) = room.flush(count, now)?;
            Ok(((promoted, room.admin_json(now)), record.is_some()))
        })))
    }

    fn schedule(&self, room_id: String, body: Value) -> StoreFuture<'_, RoomJson> {
        Box::pin(ready(self.with_room(&room_id, |room, now| {
            let scheduled = apply_schedule(room.config(), &body)?;
            room.schedule(&scheduled, now);
            Ok((room.admin_json(now), true))
        })))
    }

    fn eject(&self, room_id: String, ticket: u64) -> StoreFuture<'_, (EjectedFrom, RoomJson)> {
        Box::pin(ready(self.with_room(&room_id, |room, now| {
            let (was, _) = room.eject(ticket, now)?;
            Ok(((was, room.admin_json(now)), true))
        })))
    }

    fn purge(&self, room_id: String) -> StoreFuture<'_, (Purged, RoomJson)> {
        Box::pin(ready(self.with_room(&room_id, |room, now| {
            let (purged, record) = room.purge(now);
            Ok(((purged, room.admin_json(now)), record.is_some()))
        })))
    }

    fn tick(&self, now_ms: i64) -> StoreFuture<'_, ()> {
        self.tick_now(now_ms);
        Box::pin(ready(Ok(())))
    }

    fn watch(&self, room_id: String) -> StoreFuture<'_, RoomWatch> {
        Box::pin(ready(Ok(self.watch_now(&room_id))))
    }

    fn seen(&self, room_id: String, tickets: Vec<u64>) -> StoreFuture<'_, ()> {
        let _ = self.with_room(&room_id, |room, now| {
            room.see_all(&tickets, now);
            Ok(((), false))
        });
        Box::pin(ready(Ok(())))
    }

    fn stats(&self) -> StoreFuture<'_, StatsReply> {
        let rooms = lock(&self.table).rooms.len() as u64;
        Box::pin(ready(Ok(StatsReply {
            rooms,
            no_room_checks: self.no_room_checks.load(Ordering::Relaxed),
            store: "memory".to_owned(),
            storage_ready: true,
            started_at_ms: self.started_at_ms,
        })))
    }
}

#[cfg(test)]
mod tests;
