//! Sightings of ticket holders (QM-345) on the durable store. Presence lives in Valkey (the
//! `s` zset of `qm.lua`) so every engine's sightings count wherever the room's outflow runs. A
//! sighting is far too frequent to journal or to write one by one: the engine gathers them per
//! room here and writes each room's batch in one `qm_seen` call just before its outflow slice,
//! so at most once a second per room and never on a status request's path.

use std::collections::HashMap;
use std::sync::Mutex;

use super::replicas::{Replica, lock};
use super::{DurableStore, valkey};

/// Sightings not yet written: room id → ticket → latest sighting (epoch ms).
#[derive(Default)]
pub(crate) struct Sightings {
    pending: Mutex<HashMap<String, HashMap<u64, i64>>>,
}

impl Sightings {
    fn add(&self, room_id: &str, tickets: &[u64], at_ms: i64) {
        let mut pending = lock(&self.pending);
        let room = pending.entry(room_id.to_owned()).or_default();
        for ticket in tickets.iter().filter(|ticket| **ticket > 0) {
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

impl DurableStore {
    /// Notes sightings of `tickets`' holders at `at_ms`: at once in the engine's replica (its
    /// admin stats), and for Valkey at the room's next slice.
    pub(super) fn sighted(&self, replica: &Replica, room_id: &str, tickets: &[u64], at_ms: i64) {
        if tickets.is_empty() {
            return;
        }
        replica.see(tickets, at_ms);
        self.shared.sightings.add(room_id, tickets, at_ms);
    }

    /// Writes the room's pending sightings to Valkey. Best effort: a lost batch only makes a
    /// holder look absent until the next sighting, so a failure is logged, never retried or
    /// turned into a rebuild.
    pub(super) async fn write_sightings(&self, room_id: &str, now_ms: i64) {
        let batch = self.shared.sightings.take(room_id);
        if batch.is_empty() {
            return;
        }
        match self.shared.valkey.seen(room_id, now_ms, &batch).await {
            Ok(reply) if reply.status < 0 && reply.status != valkey::NO_ROOM => {
                tracing::debug!(room_id, status = reply.status, "sightings not recorded");
            }
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(room_id, %error, sightings = batch.len(), "could not record sightings");
            }
        }
    }
}
