//! The change feed: how committed events reach every engine's replicas. An engine applies its
//! own batches once they are journaled and announces them over Valkey pub/sub; the others
//! apply what they hear, and catch up from the journal when what they hear does not continue
//! their replica (a message lost, or one that overtook another). A rebuild is announced as a
//! reload: the others fold the room's journal again.

use std::sync::Arc;

use fred::prelude::{ClientLike, EventInterface, PubsubInterface};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use super::rebuild::{Folded, fold};
use super::shared::Shared;
use super::valkey::{self, Valkey};
use super::writer::{Trouble, Writer};
use crate::domain::{EventRecord, Room, RoomEvent};

/// What one engine tells the others after a commit or a rebuild.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Change {
    engine: String,
    room: String,
    #[serde(default)]
    records: Vec<EventRecord>,
    #[serde(default)]
    reload: bool,
}

/// Records that do not continue a replica: it must catch up from the journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Behind;

impl Shared {
    /// Applies this engine's committed records to the replica (catching up first when other
    /// engines' commits have not reached it yet) and tells the other engines.
    pub(crate) async fn apply_committed(&self, room_id: &str, records: &[EventRecord]) {
        if self.apply_to_replica(room_id, records).is_err() {
            self.catch_up(room_id).await;
        }
        self.announce(Change {
            engine: self.engine_id.clone(),
            room: room_id.to_owned(),
            records: records.to_vec(),
            reload: false,
        });
    }

    /// Applies committed records to the room's replica in seq order, skipping those it has,
    /// and tells its watchers.
    pub(crate) fn apply_to_replica(
        &self,
        room_id: &str,
        records: &[EventRecord],
    ) -> Result<(), Behind> {
        let slot = self.slot(room_id);
        let now = self.now_ms();
        let mut room = slot.lock();
        let mut changed = false;
        let mut result = Ok(());
        for record in records {
            if record.seq <= room.seq() {
                continue;
            }
            if room.apply(record).is_err() {
                result = Err(Behind);
                break;
            }
            if matches!(record.event, RoomEvent::Created { .. }) {
                self.rooms.note_created(&slot);
            }
            changed = true;
        }
        if changed {
            slot.publish(&room, now);
        }
        result
    }

    /// Brings the replica up to the journal.
    pub(crate) async fn catch_up(&self, room_id: &str) {
        let have = self
            .rooms
            .get(room_id)
            .map_or(0, |slot| slot.read(Room::seq));
        match self.journal.events_after(room_id, have).await {
            Ok(records) if !records.is_empty() => {
                if self.apply_to_replica(room_id, &records).is_err() {
                    // The journal itself does not continue the replica: fold it from the start.
                    self.diverge(room_id);
                }
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(room_id, %error, "could not catch up from the journal"),
        }
    }

    /// Puts `room` in as the id's replica and live copy, with `trouble` (none for a sound room).
    pub(crate) fn install(&self, room: Room, trouble: Option<Trouble>) {
        let room_id = room.room_id().to_owned();
        let live = room.clone();
        let slot = self
            .rooms
            .install(room, self.now_ms(), || Writer::new(Room::unborn(&room_id)));
        if slot.read(Room::is_live) {
            self.rooms.note_created(&slot);
        }
        slot.extra.reset_live(live);
        slot.extra.set_trouble(trouble);
    }

    /// Reloads a room from the journal (another engine rebuilt it).
    pub(crate) async fn reload(&self, room_id: &str) {
        match self.journal.events_after(room_id, 0).await {
            Ok(records) => {
                let Folded { room, broken } = fold(room_id, &records);
                self.install(room, broken.map(|why| Trouble::Broken(why.to_string())));
            }
            Err(error) => tracing::warn!(room_id, %error, "could not reload a room"),
        }
    }

    pub(crate) fn announce(&self, change: Change) {
        let _ = self.announcements.send(change);
    }

    pub(crate) fn announce_reload(&self, room_id: &str) {
        self.announce(Change {
            engine: self.engine_id.clone(),
            room: room_id.to_owned(),
            records: Vec::new(),
            reload: true,
        });
    }

    /// Another engine's change, heard over pub/sub.
    async fn follow(&self, change: Change) {
        if change.reload {
            return self.reload(&change.room).await;
        }
        if self
            .apply_to_replica(&change.room, &change.records)
            .is_err()
        {
            self.catch_up(&change.room).await;
        }
        if let Some(slot) = self.rooms.get(&change.room) {
            slot.extra.follow(&change.records);
        }
    }
}

/// Publishes this engine's changes for the other engines, in the order they were committed.
pub(crate) async fn announce_changes(valkey: Valkey, mut changes: mpsc::UnboundedReceiver<Change>) {
    while let Some(change) = changes.recv().await {
        let Ok(message) = serde_json::to_string(&change) else {
            continue;
        };
        if let Err(error) = valkey.publish(message).await {
            tracing::warn!(%error, room_id = change.room, "could not announce a change to other engines");
        }
    }
}

/// Follows other engines' commits and rebuilds over pub/sub.
pub(crate) async fn follow_changes(shared: Arc<Shared>, url: String) {
    let subscriber = match fred::prelude::Config::from_url(&url).and_then(|config| {
        fred::prelude::Builder::from_config(config)
            .set_policy(fred::types::config::ReconnectPolicy::new_constant(0, 200))
            .build_subscriber_client()
    }) {
        Ok(subscriber) => subscriber,
        Err(error) => {
            tracing::error!(%error, "cannot follow other engines' changes");
            return;
        }
    };
    let mut messages = subscriber.message_rx();
    if let Err(error) = subscriber.init().await {
        tracing::error!(%error, "cannot follow other engines' changes");
        return;
    }
    let _resubscribe = subscriber.manage_subscriptions();
    if let Err(error) = subscriber.subscribe(valkey::CHANGES_CHANNEL).await {
        tracing::error!(%error, "cannot follow other engines' changes");
        return;
    }
    while let Ok(message) = messages.recv().await {
        let Some(text) = message.value.as_string() else {
            continue;
        };
        let Ok(change) = serde_json::from_str::<Change>(&text) else {
            continue;
        };
        if change.engine != shared.engine_id {
            shared.follow(change).await;
        }
    }
}
