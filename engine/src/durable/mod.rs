//! `DurableStore` (`STORE=valkey SIDESTORE=pg`): the live queue in Valkey, every change
//! journaled to Postgres before anybody is told about it. The rules are the domain's, run in
//! this engine; Valkey and Postgres only store what it decided.
//!
//! - [`writer`]: a change is a domain command executed on the engine's live copy of the room;
//!   its events land in Valkey only if the room there has not changed since (compare-and-set
//!   on the seq), then wait for the group commit ([`committer`]) to the Postgres [`journal`].
//! - [`feed`]: committed events are applied to the room's replica (the copy every read and
//!   Watch stream answers from, so none shows a change that may still be taken back) and
//!   announced to the other engines over pub/sub.
//! - [`rebuild`]: a room whose changes could not be committed, or that Valkey lost, is rebuilt
//!   from the journal; a gap in the journal stops that room with an error, never a guess.
//! - [`outflow`]: the per-room outflow lease and the sightings of holders.

mod committer;
mod feed;
pub mod journal;
mod outflow;
pub(crate) mod rebuild;
mod shared;
mod valkey;
mod writer;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::future::join_all;
use qm_core::room::ProtectionMode;
use qm_core::{ApiError, ErrorCode};
use qm_proto::{RoomInfoReply, StatsReply};
use tokio::sync::{mpsc, watch};

use self::committer::Committer;
use self::journal::{Journal, JournalReadError};
pub use self::rebuild::RebuildError;
use self::shared::Shared;
use self::valkey::Valkey;
use self::writer::Writer;
use crate::Environment;
use crate::domain::{
    Claim, ClaimedPlace, Command, DoorDecision, DoorInput, LapseReason, Outcome, PlaceAnswer, Room,
    Targeting,
};
use crate::rooms::Slot;
use crate::store::{RoomJson, RoomReader, RoomWatch, Store, StoreFuture};
use crate::targeting_counters::RoomCounts;
use crate::view::room_info;

/// Longest a Valkey command may take before the call answers 503.
const VALKEY_TIMEOUT: Duration = Duration::from_secs(2);

/// Where the durable store connects.
#[derive(Debug, Clone)]
pub struct DurableOptions {
    pub valkey_url: String,
    pub database_url: String,
}

/// Why the durable store could not start.
#[derive(Debug, thiserror::Error)]
pub enum DurableError {
    #[error("VALKEY_URL: {0}")]
    Valkey(#[from] fred::error::Error),
    #[error("DATABASE_URL: {0}")]
    Database(#[from] sqlx::Error),
    #[error("DATABASE_URL: migrations failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("journal: {0}")]
    Journal(#[from] JournalReadError),
}

pub(crate) fn unavailable(message: impl Into<String>) -> ApiError {
    ApiError::new(ErrorCode::StorageUnavailable, message)
}

/// The refusal of a change to a room that is being rebuilt from its journal.
pub(crate) fn rebuilding() -> ApiError {
    unavailable("the room is being rebuilt from its journal; try again in a moment")
}

fn room_not_found(room_id: &str) -> ApiError {
    ApiError::new(ErrorCode::RoomNotFound, format!("no room {room_id:?}"))
}

/// Whether `claim` names a place this replica has not heard of yet (made through another
/// engine): then the replica catches up from the journal before answering.
fn claims_unknown_place(room: &Room, claim: Option<&Claim>) -> bool {
    match claim.map(|claim| claim.place) {
        Some(ClaimedPlace::Ticket(ticket)) => ticket >= room.next_ticket(),
        Some(ClaimedPlace::Handle(handle)) => !room.knows_handle(handle),
        None => false,
    }
}

pub struct DurableStore {
    shared: Arc<Shared>,
    no_room_checks: AtomicU64,
    started_at_ms: i64,
}

/// A Valkey call about targeting counters that failed: a diagnostic, so the rooms are left
/// alone (a landing's failure is what marks them for a rebuild).
fn counters_unavailable(error: fred::error::Error) -> ApiError {
    tracing::debug!(%error, "targeting counters unavailable");
    ApiError::new(
        ErrorCode::StorageUnavailable,
        "the shared targeting counters are unavailable right now; try again shortly",
    )
    .with_retry_after(1)
}

impl DurableStore {
    /// Connects to both servers, migrates the journal, loads every room, rebuilds in Valkey
    /// whatever is missing or out of step with the journal, and starts the committer, the
    /// recovery task and the change follower.
    pub async fn start(options: &DurableOptions) -> Result<DurableStore, DurableError> {
        DurableStore::start_with(options, Environment::real()).await
    }

    /// [`DurableStore::start`] on a given clock and source of randomness (tests).
    pub async fn start_with(
        options: &DurableOptions,
        environment: Environment,
    ) -> Result<DurableStore, DurableError> {
        let journal = Journal::connect_lazy(&options.database_url)?;
        journal.migrate().await?;
        let valkey = Valkey::new(&options.valkey_url, VALKEY_TIMEOUT)?;
        valkey.connect().await?;
        valkey.load_library().await?;

        let (announcements, to_announce) = mpsc::unbounded_channel();
        tokio::spawn(feed::announce_changes(valkey.clone(), to_announce));
        let started_at_ms = environment.now_ms();
        let shared = Arc::new(Shared::new(valkey, journal, announcements, environment));
        let _ = shared.committer.set(Committer::start(shared.clone()));
        rebuild::load_rooms(&shared).await?;
        tokio::spawn(feed::follow_changes(
            shared.clone(),
            options.valkey_url.clone(),
        ));
        tokio::spawn(rebuild::recover(shared.clone()));
        Ok(DurableStore {
            shared,
            no_room_checks: AtomicU64::new(0),
            started_at_ms,
        })
    }

    /// The journal's Postgres pool (turn notifications keep their table beside it).
    pub fn pg_pool(&self) -> sqlx::PgPool {
        self.shared.journal.pool().clone()
    }

    /// Rebuilds one room (or every room) from the journal now: `qm rebuild [ROOM]`.
    pub async fn rebuild(&self, room_id: Option<&str>) -> Result<Vec<String>, RebuildError> {
        let rooms = match room_id {
            Some(room_id) => vec![room_id.to_owned()],
            None => self
                .shared
                .journal
                .rooms()
                .await
                .map_err(JournalReadError::from)?
                .into_iter()
                .map(|room| room.room_id)
                .collect(),
        };
        for room_id in &rooms {
            self.shared.rebuild(room_id).await?;
        }
        Ok(rooms)
    }

    /// The slot of a room that exists, refusing one that cannot be served.
    fn live_slot(&self, room_id: &str) -> Result<Arc<Slot<Writer>>, ApiError> {
        let slot = self
            .shared
            .rooms
            .get(room_id)
            .ok_or_else(|| room_not_found(room_id))?;
        slot.extra.serviceable()?;
        if !slot.read(Room::is_live) {
            return Err(room_not_found(room_id));
        }
        Ok(slot)
    }

    /// Reads a live room's replica.
    fn read_live<T>(&self, room_id: &str, read: impl FnOnce(&Room, i64) -> T) -> Option<T> {
        let slot = self.shared.rooms.get(room_id)?;
        slot.read(|room| room.is_live().then(|| read(room, self.shared.now_ms())))
    }

    async fn execute_now(&self, room_id: &str, command: Command) -> Result<Outcome, ApiError> {
        let slot = match command {
            Command::Put(_) => {
                let slot = self.shared.slot(room_id);
                slot.extra.serviceable()?;
                slot
            }
            _ => self.live_slot(room_id)?,
        };
        if let Command::Join(request) = &command {
            if slot.read(|room| claims_unknown_place(room, request.claim.as_ref())) {
                self.shared.catch_up(room_id).await;
            }
            // A join that keeps its place changes nothing: answered from the replica.
            let now = self.shared.now_ms();
            if let Some(place) = slot.read(|room| room.settled_answer(&command, now)) {
                if place.bound && place.ticket != 0 {
                    self.shared.sighted(&slot, &[place.ticket], now);
                }
                return Ok(Outcome::Place(place));
            }
        }
        self.shared
            .submit(slot, command, self.shared.now_ms())
            .await
    }

    async fn status_now(
        &self,
        room_id: &str,
        claim: Claim,
        session_hash: &str,
    ) -> Result<PlaceAnswer, ApiError> {
        let Some(slot) = self.shared.rooms.get(room_id) else {
            return Ok(PlaceAnswer::Lapsed(LapseReason::RoomReset));
        };
        slot.extra.serviceable()?;
        if slot.read(|room| claims_unknown_place(room, Some(&claim))) {
            self.shared.catch_up(room_id).await;
        }
        let now = self.shared.now_ms();
        let answer = slot.read(|room| match room.is_live() {
            true => room.status(&claim, session_hash, now),
            false => PlaceAnswer::Lapsed(LapseReason::RoomReset),
        });
        // A status that proves the place (its ownership cookie) is a sighting of its holder.
        if let PlaceAnswer::Place(place) = &answer
            && place.bound
            && place.ticket != 0
        {
            self.shared.sighted(&slot, &[place.ticket], now);
        }
        Ok(answer)
    }

    fn door_now(&self, room_id: &str, input: &DoorInput) -> Result<Option<DoorDecision>, ApiError> {
        let slot = match self.live_slot(room_id) {
            Ok(slot) => slot,
            Err(error) if error.code == ErrorCode::RoomNotFound => {
                self.no_room_checks.fetch_add(1, Ordering::Relaxed);
                return Ok(None);
            }
            Err(error) => return Err(error),
        };
        Ok(Some(slot.read(|room| {
            room.door_decision(input, self.shared.now_ms())
        })))
    }
}

impl Store for DurableStore {
    fn execute(&self, room_id: String, command: Command) -> StoreFuture<'_, Outcome> {
        Box::pin(async move { self.execute_now(&room_id, command).await })
    }

    fn get_room(&self, room_id: String) -> StoreFuture<'_, RoomJson> {
        let room = self
            .read_live(&room_id, |room, now| room.admin_json(now))
            .ok_or_else(|| room_not_found(&room_id));
        Box::pin(std::future::ready(room))
    }

    fn list_rooms(&self) -> StoreFuture<'_, Vec<RoomJson>> {
        let rooms = self.shared.rooms.admin_rooms(self.shared.now_ms());
        Box::pin(std::future::ready(Ok(rooms)))
    }

    fn protection_mode(&self, room_id: String) -> StoreFuture<'_, Option<ProtectionMode>> {
        let mode = self.read_live(&room_id, |room, _| {
            room.config.protection.map(|protection| protection.mode)
        });
        Box::pin(std::future::ready(Ok(mode.flatten())))
    }

    fn room_info(&self, room_id: String) -> StoreFuture<'_, RoomInfoReply> {
        let info = self
            .read_live(&room_id, room_info)
            .unwrap_or_else(|| RoomInfoReply {
                found: false,
                room_id,
                ..RoomInfoReply::default()
            });
        Box::pin(std::future::ready(Ok(info)))
    }

    fn status(
        &self,
        room_id: String,
        claim: Claim,
        session_hash: String,
    ) -> StoreFuture<'_, PlaceAnswer> {
        Box::pin(async move { self.status_now(&room_id, claim, &session_hash).await })
    }

    fn door_read(
        &self,
        room_id: String,
        input: DoorInput,
    ) -> StoreFuture<'_, Option<DoorDecision>> {
        Box::pin(std::future::ready(self.door_now(&room_id, &input)))
    }

    fn targeting(&self, room_id: String) -> StoreFuture<'_, Option<(u64, Targeting)>> {
        let targeting = self.read_live(&room_id, |room, _| {
            (room.generation(), room.targeting().clone())
        });
        Box::pin(std::future::ready(Ok(targeting)))
    }

    fn tick(&self, now_ms: i64) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let slots = self.shared.rooms.all();
            join_all(
                slots
                    .into_iter()
                    .map(|slot| self.shared.tick_room(slot, now_ms)),
            )
            .await;
            Ok(())
        })
    }

    fn watch(&self, room_id: String) -> StoreFuture<'_, RoomWatch> {
        let watch = self.shared.rooms.watch(&room_id, self.shared.now_ms(), || {
            Writer::new(Room::unborn(&room_id))
        });
        Box::pin(std::future::ready(Ok(watch)))
    }

    fn stats(&self) -> StoreFuture<'_, StatsReply> {
        Box::pin(std::future::ready(Ok(StatsReply {
            rooms: self.shared.rooms.live_count(),
            no_room_checks: self.no_room_checks.load(Ordering::Relaxed),
            store: "valkey+pg".to_owned(),
            storage_ready: self.shared.is_ready(),
            started_at_ms: self.started_at_ms,
            landings: self.shared.landings.load(Ordering::Relaxed),
            stale_landings: self.shared.stale_landings.load(Ordering::Relaxed),
        })))
    }

    fn report(&self, room_id: String) -> StoreFuture<'_, crate::reports::ReportFold> {
        Box::pin(async move {
            if self.read_live(&room_id, |_, _| ()).is_none() {
                return Err(room_not_found(&room_id));
            }
            let records = self
                .shared
                .journal
                .events_after(&room_id, 0)
                .await
                .map_err(|error| {
                    ApiError::new(
                        ErrorCode::StorageUnavailable,
                        format!("the journal could not be read: {error}"),
                    )
                })?;
            // A long journal is a lot of folding: off the threads that answer visitors.
            tokio::task::spawn_blocking(move || {
                crate::reports::ReportFold::replay(&room_id, &records)
            })
            .await
            .map_err(|_| ApiError::new(ErrorCode::Internal, "the report fold stopped"))
        })
    }

    fn store_metrics(&self) -> Option<&crate::metrics::StoreMetrics> {
        Some(&self.shared.metrics)
    }

    fn readiness(&self) -> Option<watch::Receiver<bool>> {
        Some(self.shared.ready.subscribe())
    }

    fn backend_down(&self) -> bool {
        !self.shared.is_valkey_ok()
    }

    fn shares_targeting(&self) -> bool {
        true
    }

    fn add_targeting(&self, room_id: String, counts: RoomCounts) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            self.shared
                .valkey
                .add_targeting(&room_id, &counts)
                .await
                .map_err(counters_unavailable)
        })
    }

    fn shared_targeting(
        &self,
        room_id: String,
        era: (u64, u64),
        rules: usize,
    ) -> StoreFuture<'_, Option<RoomCounts>> {
        Box::pin(async move {
            self.shared
                .valkey
                .targeting(&room_id, era, rules)
                .await
                .map(Some)
                .map_err(counters_unavailable)
        })
    }

    fn seen(&self, room_id: String, tickets: Vec<u64>) -> StoreFuture<'_, ()> {
        if let Some(slot) = self.shared.rooms.get(&room_id)
            && slot.read(Room::is_live)
        {
            self.shared.sighted(&slot, &tickets, self.shared.now_ms());
        }
        Box::pin(std::future::ready(Ok(())))
    }

    fn read_room<'a>(&'a self, room_id: String, read: RoomReader<'a>) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let slot = self.live_slot(&room_id)?;
            // Places made through another engine reach this replica over pub/sub; catching up
            // first means a lookup sees every commit made before it started.
            self.shared.catch_up(&room_id).await;
            slot.read(|room| match room.is_live() {
                true => {
                    read(room, self.shared.now_ms());
                    Ok(())
                }
                false => Err(room_not_found(&room_id)),
            })
        })
    }
}
