//! Bringing Valkey and the replicas in step with the journal: the fold of a room's events, the
//! rebuild of a room whose Valkey state is ahead of (or lost from) the journal, the load of
//! every room at start-up, and the task that rebuilds diverged rooms and notices a Valkey that
//! lost everything. A journal with a gap stops its room's rebuild with an error, never a guess.

use std::sync::Arc;
use std::time::Duration;

use super::DurableError;
use super::journal::JournalReadError;
use super::shared::Shared;
use super::writer::Trouble;
use crate::domain::{ApplyError, EventRecord, Room};

/// How often the recovery task looks at diverged rooms and probes both servers.
const RECOVERY_PERIOD: Duration = Duration::from_millis(200);

/// Why a room could not be rebuilt from its journal.
#[derive(Debug, thiserror::Error)]
pub enum RebuildError {
    #[error("valkey: {0}")]
    Valkey(#[from] fred::error::Error),
    #[error("{0}")]
    Journal(#[from] JournalReadError),
    #[error("{room_id}: the journal cannot be replayed: {why}")]
    Broken { room_id: String, why: ApplyError },
}

/// A journal folded as far as it goes: the room (unborn when not even its creation could be
/// read) and, if the fold stopped early, why.
pub(crate) struct Folded {
    pub(crate) room: Room,
    pub(crate) broken: Option<ApplyError>,
}

/// Folds a room's journal, stopping at the first gap or reordering.
pub(crate) fn fold(room_id: &str, records: &[EventRecord]) -> Folded {
    fold_observed(room_id, records, |_, _| {})
}

/// [`fold`], showing `observe` each record with the room as it stands once applied (reports).
pub(crate) fn fold_observed(
    room_id: &str,
    records: &[EventRecord],
    mut observe: impl FnMut(&Room, &EventRecord),
) -> Folded {
    let seq_before = records
        .first()
        .map_or(0, |first| first.seq.saturating_sub(1));
    let mut room = Room::unborn_after(room_id, seq_before);
    for record in records {
        if let Err(error) = room.apply(record) {
            return Folded {
                room,
                broken: Some(error),
            };
        }
        observe(&room, record);
    }
    Folded { room, broken: None }
}

impl Shared {
    /// Folds the room's whole journal and puts the result in Valkey, the replica and the live
    /// copy, taking back every landed change the journal lacks. An id the journal never
    /// recorded is forgotten in Valkey. A journal with a gap leaves the room broken (and held
    /// in Valkey) with the reason.
    pub(crate) async fn rebuild(&self, room_id: &str) -> Result<(), RebuildError> {
        // Hold first, so no engine lands anything while the journal is read.
        if let Err(error) = self.valkey.hold(room_id).await {
            self.set_valkey_ok(false);
            return Err(error.into());
        }
        self.set_valkey_ok(true);
        let records = self.journal.events_after(room_id, 0).await?;
        let Folded { room, broken } = fold(room_id, &records);
        if let Some(why) = broken {
            tracing::error!(room_id, %why, "the room's journal cannot be replayed; the room stays down");
            self.install(room, Some(Trouble::Broken(why.to_string())));
            self.undiverge(room_id);
            return Err(RebuildError::Broken {
                room_id: room_id.to_owned(),
                why,
            });
        }
        if records.is_empty() {
            tracing::warn!(
                room_id,
                "valkey held a room the journal never recorded; forgetting it"
            );
            self.valkey.forget(room_id).await?;
        } else {
            let sightings: Vec<(u64, i64)> = room
                .presence
                .iter()
                .map(|(ticket, at)| (*ticket, *at))
                .collect();
            self.valkey
                .restore(room_id, room.seq(), room.outflow_credit(), &sightings)
                .await?;
        }
        tracing::info!(
            room_id,
            seq = room.seq(),
            waiting = room.waiting(),
            "room rebuilt from the journal"
        );
        self.install(room, None);
        self.undiverge(room_id);
        self.announce_reload(room_id);
        self.metrics.rebuilt();
        Ok(())
    }

    /// Rebuilds every diverged room; answers the ones that could not be, and why.
    pub(crate) async fn rebuild_diverged(&self) -> Vec<(String, RebuildError)> {
        let mut failed = Vec::new();
        for room_id in self.diverged() {
            if let Err(why) = self.rebuild(&room_id).await {
                failed.push((room_id, why));
            }
        }
        failed
    }
}

/// Loads every journaled room into a replica and makes Valkey agree with the journal.
pub(crate) async fn load_rooms(shared: &Arc<Shared>) -> Result<(), DurableError> {
    let epoch = shared.valkey.epoch().await?;
    let rooms = shared.journal.rooms().await?;
    let mut ahead = Vec::new();
    for journaled in &rooms {
        let records = shared.journal.events_after(&journaled.room_id, 0).await?;
        let Folded { room, broken } = fold(&journaled.room_id, &records);
        shared.install(
            room,
            broken.as_ref().map(|why| Trouble::Broken(why.to_string())),
        );
        if let Some(why) = broken {
            tracing::error!(room_id = journaled.room_id, %why, "the room's journal cannot be replayed; the room stays down");
            continue;
        }
        shared.valkey.drop_earlier_keys(&journaled.room_id).await?;
        match shared.valkey.seq(&journaled.room_id).await? {
            Some(seq) if epoch.is_some() && seq == journaled.last_seq => {}
            Some(seq) if epoch.is_some() && seq > journaled.last_seq => {
                ahead.push((journaled.room_id.clone(), seq))
            }
            _ => shared.diverge(&journaled.room_id),
        }
    }
    if !ahead.is_empty() {
        // Another engine may be committing those changes right now; give it a moment before
        // calling them lost.
        tokio::time::sleep(Duration::from_secs(1)).await;
        for (room_id, seq) in ahead {
            if shared.journal.last_seq(&room_id).await?.unwrap_or(0) < seq {
                shared.diverge(&room_id);
            }
        }
    }
    for (room_id, why) in shared.rebuild_diverged().await {
        tracing::error!(room_id, %why, "rebuild failed at start-up");
    }
    if epoch.is_none() {
        shared.valkey.set_epoch(&shared.engine_id).await?;
    }
    tracing::info!(rooms = rooms.len(), "durable store loaded");
    Ok(())
}

/// Rebuilds diverged rooms, probes both servers, and notices a Valkey that lost everything.
pub(crate) async fn recover(shared: Arc<Shared>) {
    let mut probes = 0u64;
    loop {
        tokio::time::sleep(RECOVERY_PERIOD).await;
        probes += 1;
        if probes.is_multiple_of(5) || !shared.is_ready() {
            shared.set_journal_ok(shared.journal.ping().await.is_ok());
            match shared.valkey.epoch().await {
                Ok(Some(_)) => shared.set_valkey_ok(true),
                Ok(None) => {
                    shared.set_valkey_ok(true);
                    tracing::warn!("valkey lost its data; rebuilding every room from the journal");
                    // A Valkey that lost its data lost the function library with it.
                    if let Err(error) = shared.valkey.load_library().await {
                        tracing::warn!(%error, "could not load the function library again");
                        continue;
                    }
                    for slot in shared.rooms.all() {
                        if !matches!(slot.extra.trouble(), Some(Trouble::Broken(_))) {
                            shared.diverge(slot.room_id());
                        }
                    }
                    if let Err(error) = shared.valkey.set_epoch(&shared.engine_id).await {
                        tracing::warn!(%error, "could not mark valkey's epoch");
                    }
                }
                Err(_) => shared.set_valkey_ok(false),
            }
        }
        for (room_id, why) in shared.rebuild_diverged().await {
            tracing::debug!(room_id, %why, "rebuild deferred");
        }
    }
}
