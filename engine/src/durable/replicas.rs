//! The engine's replicas of its rooms: each a [`Room`] folded from committed events only (its
//! own commits, other engines' commits heard over pub/sub, or the journal itself), so every
//! read and every Watch stream shows exactly what is on disk, never a change that may still be
//! taken back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use qm_proto::RoomView;
use tokio::sync::watch;

use crate::domain::{EventRecord, Room, RoomEvent};
use crate::store::RoomWatch;
use crate::view::{missing_view, room_view};

/// Why a room cannot be served right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Trouble {
    /// Valkey holds changes the journal does not (or lost some): the room is being rebuilt.
    Rebuilding,
    /// The journal cannot be folded (a gap or a reordering): an operator must look.
    Broken(String),
}

pub(crate) struct Replica {
    order: u64,
    room: Mutex<Room>,
    trouble: Mutex<Option<Trouble>>,
    channel: watch::Sender<RoomView>,
}

/// Takes a lock even if a panic poisoned it: what these locks guard is changed in single
/// steps that leave it consistent.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Replica {
    pub(crate) fn read<T>(&self, read: impl FnOnce(&Room) -> T) -> T {
        read(&lock(&self.room))
    }

    /// Records this engine's sightings of holders in the replica (for its admin stats; the
    /// outflow itself decides by the sightings in Valkey).
    pub(crate) fn see(&self, tickets: &[u64], at_ms: i64) {
        lock(&self.room).see_all(tickets, at_ms);
    }

    pub(crate) fn trouble(&self) -> Option<Trouble> {
        lock(&self.trouble).clone()
    }

    pub(crate) fn set_trouble(&self, trouble: Option<Trouble>) {
        *lock(&self.trouble) = trouble;
    }

    pub(crate) fn watched(&self) -> bool {
        self.channel.receiver_count() > 0
    }

    /// Sends the view to watchers when the effective state moved on by itself (doors open).
    pub(crate) fn publish_if_state_changed(&self, now_ms: i64) {
        if !self.watched() {
            return;
        }
        let room = lock(&self.room);
        if !room.is_deleted()
            && self.channel.borrow().effective_state != room.effective_state(now_ms).as_str()
        {
            self.channel.send_replace(room_view(&room, now_ms));
        }
    }

    fn publish(&self, room: &Room, now_ms: i64) {
        if self.watched() {
            let view = if room.is_deleted() {
                missing_view(room.room_id(), room.seq(), now_ms)
            } else {
                room_view(room, now_ms)
            };
            self.channel.send_replace(view);
        }
    }
}

/// Records that do not continue a replica: it holds `have` and must catch up from the journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Behind {
    pub(crate) have: u64,
}

#[derive(Default)]
pub(crate) struct Replicas {
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    /// Every room id with a journal, deleted ones too (their seq and generation carry on).
    rooms: HashMap<String, Arc<Replica>>,
    /// View channels of room ids watched before they had a room.
    channels: HashMap<String, watch::Sender<RoomView>>,
    next_order: u64,
}

impl Replicas {
    pub(crate) fn get(&self, room_id: &str) -> Option<Arc<Replica>> {
        lock(&self.table).rooms.get(room_id).cloned()
    }

    /// Every replica in creation order.
    pub(crate) fn all(&self) -> Vec<Arc<Replica>> {
        let mut all: Vec<Arc<Replica>> = lock(&self.table).rooms.values().cloned().collect();
        all.sort_by_key(|replica| replica.order);
        all
    }

    /// Puts `room` in place of whatever replica the id had (a start-up load or a rebuild),
    /// with `trouble` (none for a sound room), and tells the watchers.
    pub(crate) fn install(&self, room: Room, trouble: Option<Trouble>, now_ms: i64) {
        let mut table = lock(&self.table);
        let room_id = room.room_id().to_owned();
        if let Some(replica) = table.rooms.get(&room_id).cloned() {
            drop(table);
            let mut current = lock(&replica.room);
            *current = room;
            replica.set_trouble(trouble);
            replica.publish(&current, now_ms);
            return;
        }
        let channel = table
            .channels
            .remove(&room_id)
            .unwrap_or_else(|| watch::channel(room_view(&room, now_ms)).0);
        let order = table.next_order;
        table.next_order += 1;
        let replica = Arc::new(Replica {
            order,
            room: Mutex::new(room),
            trouble: Mutex::new(trouble),
            channel,
        });
        replica.publish(&lock(&replica.room), now_ms);
        table.rooms.insert(room_id, replica);
    }

    /// Applies committed records in seq order; records already applied are skipped.
    pub(crate) fn apply(
        &self,
        room_id: &str,
        records: &[EventRecord],
        now_ms: i64,
    ) -> Result<(), Behind> {
        let mut records = records.iter().peekable();
        let Some(replica) = self.get(room_id) else {
            // A room new to this engine starts with its Created record.
            let Some(first) =
                records.next_if(|record| matches!(record.event, RoomEvent::Created { .. }))
            else {
                return Err(Behind { have: 0 });
            };
            let room = Room::replay([first]).map_err(|_| Behind { have: 0 })?;
            self.install(room, None, now_ms);
            let rest: Vec<EventRecord> = records.cloned().collect();
            return self.apply(room_id, &rest, now_ms);
        };
        let mut room = lock(&replica.room);
        let mut changed = false;
        for record in records {
            if record.seq <= room.seq() {
                continue;
            }
            if record.seq != room.seq() + 1 {
                if changed {
                    replica.publish(&room, now_ms);
                }
                return Err(Behind { have: room.seq() });
            }
            if matches!(record.event, RoomEvent::Created { .. }) {
                // A re-create starts a fresh line after the deleted one.
                let seq_before = room.seq();
                let mut fresh = Room::replay([record]).map_err(|_| Behind { have: seq_before })?;
                std::mem::swap(&mut *room, &mut fresh);
            } else if room.apply(record).is_err() {
                return Err(Behind { have: room.seq() });
            }
            changed = true;
        }
        if changed {
            replica.publish(&room, now_ms);
        }
        Ok(())
    }

    pub(crate) fn watch(&self, room_id: &str, now_ms: i64) -> RoomWatch {
        let mut table = lock(&self.table);
        let replica = table.rooms.get(room_id).cloned();
        let channel = match &replica {
            Some(replica) => replica.channel.clone(),
            None => table
                .channels
                .entry(room_id.to_owned())
                .or_insert_with(|| watch::channel(missing_view(room_id, 0, now_ms)).0)
                .clone(),
        };
        // Subscribe before reading: a change after this point reaches us too.
        let changes = channel.subscribe();
        drop(table);
        let current = match replica {
            Some(replica) => {
                let room = lock(&replica.room);
                if room.is_deleted() {
                    missing_view(room_id, room.seq(), now_ms)
                } else {
                    room_view(&room, now_ms)
                }
            }
            None => missing_view(room_id, 0, now_ms),
        };
        RoomWatch { current, changes }
    }
}
