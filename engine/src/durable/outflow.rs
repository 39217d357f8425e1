//! The outflow and presence on the durable store. Each second, for every room, an engine hands
//! Valkey the sightings of holders (QM-345) it gathered and asks for the room's outflow lease;
//! only the holder runs the slice, as a `Tick` command through the same landing as any change.
//! The holder takes the other engines' sightings from Valkey at each renewal, and all of them
//! (with the outflow credit the last holder left) when it takes the lease over, so the slice
//! decides with every sighting wherever it was made. A sighting is far too frequent to journal
//! or to write one by one: they wait here per room and leave once a second, never on a status
//! request's path.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::shared::Shared;
use super::valkey::Lease;
use super::writer::Writer;
use crate::domain::{Command, Room};
use crate::rooms::{Slot, lock};

/// How long a room's outflow lease lasts without renewal: a dead holder's rooms move to
/// another engine within this.
const LEASE: Duration = Duration::from_secs(3);

/// Sightings not yet written: room id → ticket → latest sighting (epoch ms).
#[derive(Default)]
pub(crate) struct Sightings {
    pending: Mutex<HashMap<String, HashMap<u64, i64>>>,
}

impl Sightings {
    fn add(&self, room_id: &str, tickets: &[u64], at_ms: i64) {
        let mut pending = lock(&self.pending);
        let room = pending.entry(room_id.to_owned()).or_default();
        for ticket in tickets {
            let seen = room.entry(*ticket).or_insert(at_ms);
            *seen = (*seen).max(at_ms);
        }
    }

    /// The room's batch, oldest ticket first, leaving nothing behind.
    fn take(&self, room_id: &str) -> Vec<(u64, i64)> {
        let Some(room) = lock(&self.pending).remove(room_id) else {
            return Vec::new();
        };
        let mut batch: Vec<(u64, i64)> = room.into_iter().collect();
        batch.sort_unstable();
        batch
    }
}

impl Shared {
    /// Notes sightings of `tickets`' holders at `at_ms`: in the replica (its admin stats) and
    /// the live copy (the slice decides by it) at once, and for Valkey at the next second. The
    /// replica keeps only what the presence rule lets it (a pass seen too late is not).
    pub(crate) fn sighted(&self, slot: &Slot<Writer>, tickets: &[u64], at_ms: i64) {
        let kept: Vec<u64> = {
            let mut room = slot.lock();
            tickets
                .iter()
                .copied()
                .filter(|ticket| room.see(*ticket, at_ms))
                .collect()
        };
        if kept.is_empty() {
            return;
        }
        slot.extra.live().see_all(&kept, at_ms);
        self.sightings.add(slot.room_id(), &kept, at_ms);
    }

    /// One second of one room: the sightings and the lease, then the slice if the lease is ours.
    pub(crate) async fn tick_room(self: &Arc<Self>, slot: Arc<Slot<Writer>>, now_ms: i64) {
        slot.read(|room| slot.publish_if_state_changed(room, now_ms));
        if !slot.read(Room::is_live) || slot.extra.trouble().is_some() {
            return;
        }
        let room_id = slot.room_id().to_owned();
        let sightings = self.sightings.take(&room_id);
        let (credit, trim_before) = {
            let live = slot.extra.live();
            (live.outflow_credit(), live.sightings_useful_since(now_ms))
        };
        let lease = self
            .valkey
            .lease(
                &room_id,
                &self.engine_id,
                LEASE,
                credit,
                trim_before,
                &sightings,
            )
            .await;
        match lease {
            Ok(Lease::Elsewhere) => return,
            Ok(Lease::Renewed { sightings }) => slot.extra.live().see_each(&sightings),
            Ok(Lease::TookOver { credit, sightings }) => {
                tracing::info!(room_id, credit, "outflow lease taken over");
                let mut live = slot.extra.live();
                live.take_over_outflow(credit);
                live.see_each(&sightings);
            }
            Err(error) => {
                tracing::warn!(room_id, %error, "could not renew the outflow lease");
                return;
            }
        }
        if let Err(error) = self.submit(slot, Command::Tick, now_ms).await {
            tracing::warn!(room_id, error = %error.message, "outflow slice not landed; retrying next second");
        }
    }
}
