//! The room table both stores keep: one slot per room id, holding the [`Room`] the engine
//! answers from and the view channel its watchers follow. A slot outlives its room's delete
//! (the id's generation and seq carry on into a re-create) and is made on first use by a
//! watcher too, so a room created later reaches the watchers that were already there.
//!
//! `S` is what a store keeps beside each room (nothing for the memory store; the writer and
//! the trouble flag for the durable one).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use qm_proto::RoomView;
use tokio::sync::watch;

use crate::domain::Room;
use crate::store::RoomWatch;
use crate::view::{missing_view, room_view};

/// Takes a lock even if a panic poisoned it: room state is changed only by `Room::apply` and
/// the sightings, which leave it consistent between steps, so the data behind a poisoned lock
/// is sound.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(crate) struct Slot<S> {
    room_id: String,
    /// A std mutex: it guards pure computation on the room and is never held across an
    /// `.await`.
    room: Mutex<Room>,
    channel: watch::Sender<RoomView>,
    /// When this id's room was last created, as a count of creations this engine has seen:
    /// breaks ties between rooms created in the same millisecond.
    created_order: AtomicU64,
    pub(crate) extra: S,
}

impl<S> Slot<S> {
    pub(crate) fn room_id(&self) -> &str {
        &self.room_id
    }

    pub(crate) fn read<T>(&self, read: impl FnOnce(&Room) -> T) -> T {
        read(&lock(&self.room))
    }

    /// The room under its lock, for a change (keep it short; publish before letting go).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Room> {
        lock(&self.room)
    }

    pub(crate) fn watched(&self) -> bool {
        self.channel.receiver_count() > 0
    }

    /// Sends the room's new view to its watchers. Building a view is skipped when nobody
    /// watches, so a burst of joins into an unwatched room costs nothing here; a new watcher
    /// builds its first view itself. Called under the room lock, so views go out in seq order.
    pub(crate) fn publish(&self, room: &Room, now_ms: i64) {
        if self.watched() {
            self.channel.send_replace(view_of(room, now_ms));
        }
    }

    /// Sends the view when the effective state moved on by itself (the doors opened at
    /// opensAt) without an event.
    pub(crate) fn publish_if_state_changed(&self, room: &Room, now_ms: i64) {
        if self.watched()
            && room.is_live()
            && self.channel.borrow().effective_state != room.effective_state(now_ms).as_str()
        {
            self.channel.send_replace(room_view(room, now_ms));
        }
    }
}

fn view_of(room: &Room, now_ms: i64) -> RoomView {
    if room.is_live() {
        room_view(room, now_ms)
    } else {
        missing_view(room.room_id(), room.seq(), now_ms)
    }
}

pub(crate) struct RoomTable<S> {
    /// A std mutex around a map lookup, never held across an `.await`. Lock order is table,
    /// then room.
    slots: Mutex<HashMap<String, Arc<Slot<S>>>>,
    creations: AtomicU64,
}

impl<S> Default for RoomTable<S> {
    fn default() -> Self {
        RoomTable {
            slots: Mutex::new(HashMap::new()),
            creations: AtomicU64::new(0),
        }
    }
}

impl<S> RoomTable<S> {
    pub(crate) fn get(&self, room_id: &str) -> Option<Arc<Slot<S>>> {
        lock(&self.slots).get(room_id).cloned()
    }

    /// The id's slot, made (with a room not yet created) when it has none.
    pub(crate) fn get_or_make(&self, room_id: &str, extra: impl FnOnce() -> S) -> Arc<Slot<S>> {
        let mut slots = lock(&self.slots);
        if let Some(slot) = slots.get(room_id) {
            return slot.clone();
        }
        let room = Room::unborn(room_id);
        let slot = Arc::new(Slot {
            room_id: room_id.to_owned(),
            channel: watch::channel(view_of(&room, 0)).0,
            room: Mutex::new(room),
            created_order: AtomicU64::new(0),
            extra: extra(),
        });
        slots.insert(room_id.to_owned(), slot.clone());
        slot
    }

    /// Puts `room` in its id's slot in place of what was there (a load or a rebuild) and tells
    /// the watchers.
    pub(crate) fn install(
        &self,
        room: Room,
        now_ms: i64,
        extra: impl FnOnce() -> S,
    ) -> Arc<Slot<S>> {
        let slot = self.get_or_make(room.room_id(), extra);
        let mut current = slot.lock();
        *current = room;
        slot.publish(&current, now_ms);
        drop(current);
        slot
    }

    /// Notes that `slot`'s room was (re-)created just now, for the listing's order.
    pub(crate) fn note_created(&self, slot: &Slot<S>) {
        let order = self.creations.fetch_add(1, Ordering::Relaxed) + 1;
        slot.created_order.store(order, Ordering::Relaxed);
    }

    /// Every slot, rooms in creation order (the instant of their `created` event, then the
    /// order this engine saw them created, then id), ids without a live room last.
    pub(crate) fn all(&self) -> Vec<Arc<Slot<S>>> {
        let mut slots: Vec<Arc<Slot<S>>> = lock(&self.slots).values().cloned().collect();
        slots.sort_by_cached_key(|slot| {
            let order = slot.created_order.load(Ordering::Relaxed);
            let (gone, created_at_ms) = slot.read(|room| (!room.is_live(), room.created_at_ms()));
            (gone, created_at_ms, order, slot.room_id.clone())
        });
        slots
    }

    /// The admin objects of every room that exists, in creation order.
    pub(crate) fn admin_rooms(&self, now_ms: i64) -> Vec<serde_json::Value> {
        self.all()
            .iter()
            .filter_map(|slot| slot.read(|room| room.is_live().then(|| room.admin_json(now_ms))))
            .collect()
    }

    /// Rooms that exist.
    pub(crate) fn live_count(&self) -> u64 {
        let slots: Vec<Arc<Slot<S>>> = lock(&self.slots).values().cloned().collect();
        slots.iter().filter(|slot| slot.read(Room::is_live)).count() as u64
    }

    /// Subscribes to a room id's views; an id without a room reads `exists: false` until one
    /// is created.
    pub(crate) fn watch(&self, room_id: &str, now_ms: i64, extra: impl FnOnce() -> S) -> RoomWatch {
        let slot = self.get_or_make(room_id, extra);
        // Subscribe before reading the room: a change after this point is also sent to us, so
        // the first view plus the changes never miss one (at worst a view repeats).
        let changes = slot.channel.subscribe();
        let current = slot.read(|room| view_of(room, now_ms));
        RoomWatch { current, changes }
    }
}
