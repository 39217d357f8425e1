//! `DurableStore` (`STORE=valkey SIDESTORE=pg`): the live queue in Valkey, every change
//! journaled to Postgres before anybody is told about it.
//!
//! - A mutation is one Valkey function (`qm.lua`), atomic on the room's keys; it answers the
//!   new seq and what changed, from which the engine builds the same [`EventRecord`] the pure
//!   domain would.
//! - The record goes to the [`committer`], which group-commits it to the Postgres journal and
//!   only then applies it to the room's replica (the engine-local [`Room`] every read is
//!   answered from) and publishes it to the other engines over pub/sub.
//! - A room whose changes could not be committed, or that Valkey lost, is rebuilt from the
//!   journal ([`Shared::rebuild`]); a gap in the journal stops that room's rebuild with an
//!   error, never a guess.

mod committer;
pub mod journal;
mod presence;
mod replicas;
mod scheduled;
mod valkey;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fred::prelude::{ClientLike, EventInterface, PubsubInterface};
use futures::future::join_all;
use qm_core::clock::now_ms;
use qm_core::room::{RoomConfig, RoomState, apply_schedule, check_rate};
use qm_core::{ApiError, ErrorCode};
use qm_proto::{RoomInfoReply, StatsReply};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use self::committer::Committer;
use self::journal::{Journal, JournalReadError};
use self::replicas::{Replica, Replicas, Trouble, lock};
use self::valkey::Valkey;
use crate::domain::{
    CheckAnswer, Claim, ClaimedPlace, EjectedFrom, EventRecord, JoinRequest, LapseReason, PassedBy,
    PlaceAnswer, PlaceStatus, Purged, Room, RoomEvent, check_flush_count, ticket_not_found,
};
use crate::store::{PutOutcome, RoomJson, RoomReader, RoomWatch, Store, StoreFuture};
use crate::view::room_info;

/// How long a room's outflow lease lasts without renewal: a dead holder's rooms move to
/// another engine within this.
/// Joins retried when the doors open under them (a pre-queue that closed, a draw still due).
const JOIN_ATTEMPTS: usize = 4;
const LEASE: Duration = Duration::from_secs(3);
/// Longest a Valkey command may take before the call answers 503.
const VALKEY_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the recovery task looks at diverged rooms and probes both servers.
const RECOVERY_PERIOD: Duration = Duration::from_millis(200);

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

/// What one engine tells the others after a commit or a rebuild.
#[derive(Debug, Serialize, Deserialize)]
struct Change {
    engine: String,
    room: String,
    #[serde(default)]
    records: Vec<EventRecord>,
    #[serde(default)]
    reload: bool,
}

/// The state the store's tasks share.
pub(crate) struct Shared {
    engine_id: String,
    valkey: Valkey,
    journal: Journal,
    replicas: Replicas,
    /// Rooms whose Valkey state is ahead of (or lost from) the journal, waiting for a rebuild.
    diverged: Mutex<HashSet<String>>,
    journal_ok: AtomicBool,
    valkey_ok: AtomicBool,
    ready: watch::Sender<bool>,
    /// Changes to announce, in order, by a task of their own so no commit waits on pub/sub.
    announcements: mpsc::UnboundedSender<Change>,
    /// Sightings of holders (QM-345) waiting to be written to Valkey, once a second per room.
    sightings: presence::Sightings,
}

impl Shared {
    fn is_diverged(&self, room_id: &str) -> bool {
        lock(&self.diverged).contains(room_id)
    }

    /// Marks a room for rebuild: it refuses changes until then.
    fn diverge(&self, room_id: &str) {
        lock(&self.diverged).insert(room_id.to_owned());
        if let Some(replica) = self.replicas.get(room_id)
            && replica.trouble().is_none()
        {
            replica.set_trouble(Some(Trouble::Rebuilding));
        }
    }

    fn set_journal_ok(&self, ok: bool) {
        self.journal_ok.store(ok, Ordering::Relaxed);
        self.update_ready();
    }

    fn set_valkey_ok(&self, ok: bool) {
        self.valkey_ok.store(ok, Ordering::Relaxed);
        self.update_ready();
    }

    fn update_ready(&self) {
        let ready =
            self.journal_ok.load(Ordering::Relaxed) && self.valkey_ok.load(Ordering::Relaxed);
        self.ready.send_if_modified(|current| {
            let changed = *current != ready;
            *current = ready;
            changed
        });
    }

    /// Applies committed records to the replica, first catching up from the journal when
    /// other engines' commits have not reached it yet, and tells the other engines.
    async fn apply_committed(&self, room_id: &str, records: &[EventRecord]) {
        if self.replicas.apply(room_id, records, now_ms()).is_err() {
            self.catch_up(room_id).await;
        }
        self.announce(Change {
            engine: self.engine_id.clone(),
            room: room_id.to_owned(),
            records: records.to_vec(),
            reload: false,
        });
    }

    fn announce(&self, change: Change) {
        let _ = self.announcements.send(change);
    }

    /// Brings the replica up to the journal.
    async fn catch_up(&self, room_id: &str) {
        let have = self
            .replicas
            .get(room_id)
            .map_or(0, |replica| replica.read(Room::seq));
        match self.journal.events_after(room_id, have).await {
            Ok(records) if !records.is_empty() => {
                if self.replicas.apply(room_id, &records, now_ms()).is_err() {
                    // The journal itself does not continue the replica: fold it from the start.
                    self.diverge(room_id);
                }
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(room_id, %error, "could not catch up from the journal"),
        }
    }

    /// Folds the room's whole journal and puts the result in Valkey and in the replica. A
    /// journal with a gap leaves the room broken (and held in Valkey) with the reason.
    async fn rebuild(&self, room_id: &str) -> Result<(), String> {
        // Hold first, so no engine changes the room while its journal is read.
        match self.valkey.hold(room_id).await {
            Ok(()) => self.set_valkey_ok(true),
            Err(error) => {
                self.set_valkey_ok(false);
                return Err(format!("valkey: {error}"));
            }
        }
        let records = self
            .journal
            .events_after(room_id, 0)
            .await
            .map_err(|error| error.to_string())?;
        let now = now_ms();
        let room = match fold(&records) {
            Folded {
                room: Some(room),
                broken: None,
            } => room,
            Folded { room, broken } => {
                let why = broken.unwrap_or_default();
                tracing::error!(room_id, %why, "the room's journal cannot be replayed; the room stays down");
                if let Some(partial) = room {
                    self.replicas
                        .install(partial, Some(Trouble::Broken(why.clone())), now);
                }
                self.undiverge(room_id);
                return Err(why);
            }
        };
        self.valkey
            .restore(&room)
            .await
            .map_err(|error| format!("valkey: {error}"))?;
        tracing::info!(
            room_id,
            seq = room.seq(),
            waiting = room.waiting(),
            "room rebuilt from the journal"
        );
        self.replicas.install(room, None, now);
        self.undiverge(room_id);
        self.announce(Change {
            engine: self.engine_id.clone(),
            room: room_id.to_owned(),
            records: Vec::new(),
            reload: true,
        });
        Ok(())
    }

    /// Rebuilds every diverged room; answers the ones that could not be, and why.
    async fn rebuild_diverged(&self) -> Vec<(String, String)> {
        let diverged: Vec<String> = lock(&self.diverged).iter().cloned().collect();
        let mut failed = Vec::new();
        for room_id in diverged {
            if let Err(why) = self.rebuild(&room_id).await {
                failed.push((room_id, why));
            }
        }
        failed
    }

    fn undiverge(&self, room_id: &str) {
        lock(&self.diverged).remove(room_id);
    }

    /// Reloads a replica from the journal (another engine rebuilt the room).
    async fn reload(&self, room_id: &str) {
        match self.journal.events_after(room_id, 0).await {
            Ok(records) => {
                let Folded { room, broken } = fold(&records);
                if let Some(room) = room {
                    self.replicas
                        .install(room, broken.map(Trouble::Broken), now_ms());
                }
            }
            Err(error) => tracing::warn!(room_id, %error, "could not reload a room"),
        }
    }
}

/// A journal folded as far as it goes: the room (none if not even its creation could be
/// read) and, if the fold stopped early, why.
struct Folded {
    room: Option<Room>,
    broken: Option<String>,
}

/// Folds a journal into a room, stopping at the first gap or reordering.
fn fold(records: &[EventRecord]) -> Folded {
    let Some(first) = records.first() else {
        return Folded {
            room: None,
            broken: Some("the journal holds no events for this room".to_owned()),
        };
    };
    let mut room = match Room::replay([first]) {
        Ok(room) => room,
        Err(error) => {
            return Folded {
                room: None,
                broken: Some(error.to_string()),
            };
        }
    };
    for record in &records[1..] {
        let applied =
            if matches!(record.event, RoomEvent::Created { .. }) && record.seq == room.seq() + 1 {
                Room::replay([record]).map(|fresh| room = fresh)
            } else {
                room.apply(record)
            };
        if let Err(error) = applied {
            return Folded {
                room: Some(room),
                broken: Some(error.to_string()),
            };
        }
    }
    Folded {
        room: Some(room),
        broken: None,
    }
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

fn unavailable(message: impl Into<String>) -> ApiError {
    ApiError::new(ErrorCode::StorageUnavailable, message)
}

/// The refusal of a change to a room that is being rebuilt from its journal.
pub(crate) fn rebuilding() -> ApiError {
    unavailable("the room is being rebuilt from its journal; try again in a moment")
}

/// Refuses a room that is being rebuilt or whose journal cannot be replayed.
fn refuse_if_troubled(replica: &Replica) -> Result<(), ApiError> {
    match replica.trouble() {
        None => Ok(()),
        Some(Trouble::Rebuilding) => Err(rebuilding()),
        Some(Trouble::Broken(why)) => Err(unavailable(format!(
            "the room's journal cannot be replayed ({why}); an operator must look"
        ))),
    }
}

fn room_not_found(room_id: &str) -> ApiError {
    ApiError::new(ErrorCode::RoomNotFound, format!("no room {room_id:?}"))
}

pub struct DurableStore {
    shared: Arc<Shared>,
    committer: Committer,
    no_room_checks: AtomicU64,
    started_at_ms: i64,
}

impl DurableStore {
    /// Connects to both servers, migrates the journal, loads every room, rebuilds in Valkey
    /// whatever is missing or out of step with the journal, and starts the committer, the
    /// recovery task and the change follower.
    pub async fn start(options: &DurableOptions) -> Result<DurableStore, DurableError> {
        let journal = Journal::connect_lazy(&options.database_url)?;
        journal.migrate().await?;
        let valkey = Valkey::new(&options.valkey_url, VALKEY_TIMEOUT)?;
        valkey.connect().await?;
        valkey.load_library().await?;

        let (ready, _) = watch::channel(true);
        let (announcements, to_announce) = mpsc::unbounded_channel();
        tokio::spawn(announce_changes(valkey.clone(), to_announce));
        let shared = Arc::new(Shared {
            engine_id: qm_core::ids::new_session_id(),
            valkey,
            journal,
            replicas: Replicas::default(),
            diverged: Mutex::new(HashSet::new()),
            journal_ok: AtomicBool::new(true),
            valkey_ok: AtomicBool::new(true),
            ready,
            announcements,
            sightings: presence::Sightings::default(),
        });
        load_rooms(&shared).await?;
        tokio::spawn(follow_changes(shared.clone(), options.valkey_url.clone()));
        tokio::spawn(recover(shared.clone()));
        let committer = Committer::start(shared.clone());
        Ok(DurableStore {
            shared,
            committer,
            no_room_checks: AtomicU64::new(0),
            started_at_ms: now_ms(),
        })
    }

    /// The journal's Postgres pool (turn notifications keep their table beside it).
    pub fn pg_pool(&self) -> sqlx::PgPool {
        self.shared.journal.pool().clone()
    }

    /// Rebuilds one room (or every room) from the journal now: `qm rebuild [ROOM]`.
    pub async fn rebuild(&self, room_id: Option<&str>) -> Result<Vec<String>, String> {
        let rooms = match room_id {
            Some(room_id) => vec![room_id.to_owned()],
            None => self
                .shared
                .journal
                .rooms()
                .await
                .map_err(|error| error.to_string())?
                .into_iter()
                .map(|room| room.room_id)
                .collect(),
        };
        for room_id in &rooms {
            self.shared
                .rebuild(room_id)
                .await
                .map_err(|why| format!("{room_id}: {why}"))?;
        }
        Ok(rooms)
    }

    /// The replica of a room that can take changes now.
    fn serviceable(&self, room_id: &str) -> Result<Arc<Replica>, ApiError> {
        let replica = self
            .shared
            .replicas
            .get(room_id)
            .ok_or_else(|| room_not_found(room_id))?;
        refuse_if_troubled(&replica)?;
        if replica.read(Room::is_deleted) {
            return Err(room_not_found(room_id));
        }
        Ok(replica)
    }

    /// Maps a function's guard statuses to answers; a positive or zero status passes through.
    fn guard(
        &self,
        room_id: &str,
        reply: Result<valkey::Reply, fred::error::Error>,
    ) -> Result<valkey::Reply, ApiError> {
        let reply = match reply {
            Ok(reply) => {
                self.shared.set_valkey_ok(true);
                reply
            }
            Err(error) => {
                tracing::warn!(room_id, %error, "valkey call failed");
                if !matches!(
                    error.kind(),
                    fred::error::ErrorKind::Timeout
                        | fred::error::ErrorKind::IO
                        | fred::error::ErrorKind::Canceled
                ) {
                    return Err(unavailable(format!(
                        "the live queue refused the change: {error}"
                    )));
                }
                self.shared.set_valkey_ok(false);
                // The change may have run before the connection dropped: only the journal can
                // say, so the room is rebuilt from it.
                self.shared.diverge(room_id);
                return Err(unavailable("the live queue (Valkey) is unreachable"));
            }
        };
        match reply.status {
            valkey::HELD => Err(rebuilding()),
            valkey::MISSING => {
                self.shared.diverge(room_id);
                Err(unavailable(
                    "the live queue lost this room; it is being rebuilt from its journal",
                ))
            }
            valkey::NO_ROOM => Err(room_not_found(room_id)),
            _ => Ok(reply),
        }
    }

    /// Journals the record the function recorded; answers once it is on disk and applied.
    async fn record(
        &self,
        room_id: &str,
        seq: i64,
        at_ms: i64,
        event: RoomEvent,
    ) -> Result<(), ApiError> {
        let record = EventRecord {
            seq: seq as u64,
            at_ms,
            event,
        };
        self.committer.commit(room_id, record).await
    }

    fn admin_json(&self, room_id: &str) -> Result<RoomJson, ApiError> {
        let replica = self
            .shared
            .replicas
            .get(room_id)
            .ok_or_else(|| room_not_found(room_id))?;
        replica.read(|room| {
            if room.is_deleted() {
                Err(room_not_found(room_id))
            } else {
                Ok(room.admin_json(now_ms()))
            }
        })
    }

    async fn put_room_now(&self, body: Value) -> Result<PutOutcome, ApiError> {
        let now = now_ms();
        let Some(room_id) = body.get("id").and_then(Value::as_str).map(str::to_owned) else {
            return RoomConfig::apply_patch(None, &body, now).and(Err(ApiError::new(
                ErrorCode::MissingField,
                "id is required to create a room",
            )));
        };
        let existing = self.shared.replicas.get(&room_id);
        if let Some(replica) = &existing {
            refuse_if_troubled(replica)?;
        }
        let live = existing.as_ref().and_then(|replica| {
            replica.read(|room| (!room.is_deleted()).then(|| room.config().clone()))
        });
        if let Some(current) = live {
            let config = RoomConfig::apply_patch(Some(&current), &body, now)?;
            let reply = self.guard(
                &room_id,
                self.shared.valkey.update(&room_id, now, &config).await,
            )?;
            self.record(&room_id, reply.status, now, RoomEvent::Updated { config })
                .await?;
            return Ok(PutOutcome {
                room: self.admin_json(&room_id)?,
                created: false,
            });
        }
        let config = RoomConfig::apply_patch(None, &body, now)?;
        let retired_generation = existing
            .as_ref()
            .map_or(0, |replica| replica.read(Room::generation));
        let generation = (retired_generation + 1).max((now / 1000).max(0) as u64);
        let mut reply = self
            .create_in_valkey(&room_id, now, generation, &config)
            .await?;
        if reply.status == valkey::EXISTS
            && existing.is_none()
            && self.forget_orphan(&room_id).await?
        {
            reply = self
                .create_in_valkey(&room_id, now, generation, &config)
                .await?;
        }
        if reply.status == valkey::EXISTS {
            return Err(unavailable(
                "another engine is creating this room at this moment; try again",
            ));
        }
        self.record(
            &room_id,
            reply.status,
            now,
            RoomEvent::Created { config, generation },
        )
        .await?;
        Ok(PutOutcome {
            room: self.admin_json(&room_id)?,
            created: true,
        })
    }

    async fn create_in_valkey(
        &self,
        room_id: &str,
        now: i64,
        generation: u64,
        config: &RoomConfig,
    ) -> Result<valkey::Reply, ApiError> {
        let reply = self
            .shared
            .valkey
            .create(room_id, now, generation, config)
            .await;
        self.guard(room_id, reply)
    }

    /// Deletes a room Valkey holds but the journal never recorded (a Valkey that outlived its
    /// database): nobody was ever told about it, so it gives way to the journal's. Answers
    /// whether it was such an orphan.
    async fn forget_orphan(&self, room_id: &str) -> Result<bool, ApiError> {
        let journaled = self
            .shared
            .journal
            .last_seq(room_id)
            .await
            .map_err(|_| unavailable("the journal is unreachable"))?;
        if journaled.is_some() {
            return Ok(false);
        }
        tracing::warn!(
            room_id,
            "valkey held a room the journal never recorded; replacing it"
        );
        self.shared
            .valkey
            .forget(room_id)
            .await
            .map_err(|error| unavailable(format!("the live queue refused the change: {error}")))?;
        Ok(true)
    }

    async fn delete_room_now(&self, room_id: &str) -> Result<(), ApiError> {
        self.serviceable(room_id)?;
        let now = now_ms();
        let reply = self.guard(room_id, self.shared.valkey.delete(room_id, now).await)?;
        self.record(room_id, reply.status, now, RoomEvent::Deleted)
            .await
    }

    async fn join_now(&self, room_id: &str, request: JoinRequest) -> Result<PlaceStatus, ApiError> {
        let replica = self.serviceable(room_id)?;
        if replica.read(|room| claims_unknown_place(room, request.claim.as_ref())) {
            self.shared.catch_up(room_id).await;
        }
        // The doors can open between the replica's answer and Valkey's: each such refusal
        // (a pre-queue that closed, a draw still due) is settled and the join tried again.
        for _ in 0..JOIN_ATTEMPTS {
            let now = now_ms();
            let replaced = match replica.read(|room| room.join_without_minting(&request, now)) {
                Ok(place) => {
                    // A join that keeps its place is a sighting of its holder.
                    if place.bound && place.ticket != 0 {
                        self.sighted(&replica, room_id, &[place.ticket], now);
                    }
                    return Ok(place);
                }
                Err(replaced) => replaced,
            };
            if let Some(refusal) = replica.read(|room| room.protection_refusal(&request)) {
                return Err(refusal);
            }
            if replica.read(|room| room.pre_queue_open(now)) {
                match self.pre_join_now(&replica, &request, replaced, now).await? {
                    Some(place) => return Ok(place),
                    None => continue,
                }
            }
            if replica.read(|room| room.draw_due(now)) {
                self.draw_now(&replica, now).await?;
                continue;
            }
            let has_holder = !request.session_hash.is_empty();
            let reply = self.guard(
                room_id,
                self.shared
                    .valkey
                    .join(room_id, now, &request.identity, has_holder)
                    .await,
            )?;
            match reply.status {
                valkey::IDENTITY_LIMIT => return Err(replica.read(Room::identity_limit_error)),
                valkey::BYPASS => return Ok(replica.read(|room| room.bypass_place(replaced, now))),
                valkey::DOORS_SHUT | valkey::DRAW_PENDING => {
                    // This replica is behind Valkey on the schedule or the pre-queue.
                    self.shared.catch_up(room_id).await;
                    continue;
                }
                _ => {}
            }
            let ticket = reply.value(0);
            let event = RoomEvent::Joined {
                ticket,
                session_hash: request.session_hash.clone(),
                identity: request.identity.clone(),
            };
            self.record(room_id, reply.status, now, event).await?;
            return Ok(replica.read(|room| room.minted_place(ticket, &request, replaced, now_ms())));
        }
        Err(unavailable(
            "the doors are opening: the pre-queue is being drawn, try again in a moment",
        ))
    }

    async fn status_now(
        &self,
        room_id: &str,
        claim: Claim,
        session_hash: &str,
    ) -> Result<PlaceAnswer, ApiError> {
        let Some(replica) = self.shared.replicas.get(room_id) else {
            return Ok(PlaceAnswer::Lapsed(LapseReason::RoomReset));
        };
        refuse_if_troubled(&replica)?;
        if replica.read(|room| claims_unknown_place(room, Some(&claim))) {
            self.shared.catch_up(room_id).await;
        }
        let now = now_ms();
        let answer = replica.read(|room| {
            if room.is_deleted() {
                PlaceAnswer::Lapsed(LapseReason::RoomReset)
            } else {
                room.status(&claim, session_hash, now)
            }
        });
        // A status that proves the place (its ownership cookie) is a sighting of its holder.
        if let PlaceAnswer::Place(place) = &answer
            && place.bound
            && place.ticket != 0
        {
            self.sighted(&replica, room_id, &[place.ticket], now);
        }
        Ok(answer)
    }

    fn check_now(
        &self,
        room_id: &str,
        claim: Option<&Claim>,
    ) -> Result<Option<CheckAnswer>, ApiError> {
        let replica = match self.serviceable(room_id) {
            Ok(replica) => replica,
            Err(error) if error.code == ErrorCode::RoomNotFound => {
                self.no_room_checks.fetch_add(1, Ordering::Relaxed);
                return Ok(None);
            }
            Err(error) => return Err(error),
        };
        Ok(Some(replica.read(|room| room.check(claim, now_ms()))))
    }

    /// Runs a change of meta fields (`rate`, `state`, `opens`, `pqmax`) and journals its event.
    async fn set_fields(
        &self,
        room_id: &str,
        fields: &[(&str, String)],
        event: RoomEvent,
    ) -> Result<RoomJson, ApiError> {
        self.serviceable(room_id)?;
        let now = now_ms();
        let reply = self.guard(room_id, self.shared.valkey.set(room_id, now, fields).await)?;
        self.record(room_id, reply.status, now, event).await?;
        self.admin_json(room_id)
    }

    async fn flush_now(&self, room_id: &str, count: u64) -> Result<(u64, RoomJson), ApiError> {
        // Room first, then the argument: the same order of refusals as the memory store.
        self.serviceable(room_id)?;
        check_flush_count(count)?;
        let now = now_ms();
        let reply = self.guard(room_id, self.shared.valkey.flush(room_id, now, count).await)?;
        if reply.status == 0 {
            return Ok((0, self.admin_json(room_id)?));
        }
        let passed = reply.value(2);
        let event = RoomEvent::Passed {
            first: reply.value(0),
            last: reply.value(1),
            count: passed,
            by: PassedBy::Flush,
            credit_after: None,
            ns: reply.values_from(3),
        };
        self.record(room_id, reply.status, now, event).await?;
        Ok((passed, self.admin_json(room_id)?))
    }

    async fn eject_now(
        &self,
        room_id: &str,
        ticket: u64,
    ) -> Result<(EjectedFrom, RoomJson), ApiError> {
        self.serviceable(room_id)?;
        let now = now_ms();
        let reply = self.guard(
            room_id,
            self.shared.valkey.eject(room_id, now, ticket).await,
        )?;
        let was = match reply.value(0) {
            1 => EjectedFrom::Waiting,
            2 => EjectedFrom::Passed,
            _ => return Err(ticket_not_found(ticket)),
        };
        self.record(
            room_id,
            reply.status,
            now,
            RoomEvent::Ejected { ticket, was },
        )
        .await?;
        Ok((was, self.admin_json(room_id)?))
    }

    async fn purge_now(&self, room_id: &str) -> Result<(Purged, RoomJson), ApiError> {
        self.serviceable(room_id)?;
        let now = now_ms();
        let reply = self.guard(room_id, self.shared.valkey.purge(room_id, now).await)?;
        if reply.status == 0 {
            return Ok((Purged::default(), self.admin_json(room_id)?));
        }
        let purged = Purged {
            waiting: reply.value(0),
            pre_queue: reply.value(1),
        };
        let event = RoomEvent::Purged {
            count: purged.waiting,
            pre_queue: purged.pre_queue,
        };
        self.record(room_id, reply.status, now, event).await?;
        Ok((purged, self.admin_json(room_id)?))
    }

    /// One outflow slice of one room, if this engine holds its lease.
    async fn tick_room(&self, replica: Arc<Replica>, now: i64) {
        replica.publish_if_state_changed(now);
        let room_id = replica.read(|room| room.room_id().to_owned());
        if replica.read(Room::is_deleted) || replica.trouble().is_some() {
            return;
        }
        // This engine's sightings first, so the slice decides with every one made before it.
        self.write_sightings(&room_id, now).await;
        if replica.read(|room| room.draw_due(now)) {
            if let Err(error) = self.draw_now(&replica, now).await {
                tracing::warn!(room_id, error = %error.message, "the pre-queue draw did not land; retrying next second");
            }
            return;
        }
        let result = self
            .shared
            .valkey
            .tick(&room_id, now, &self.shared.engine_id, LEASE)
            .await;
        let Ok(reply) = self.guard(&room_id, result) else {
            return;
        };
        if reply.status <= 0 {
            return;
        }
        let event = RoomEvent::Passed {
            first: reply.value(0),
            last: reply.value(1),
            count: reply.value(2),
            by: PassedBy::Outflow,
            credit_after: Some(reply.value(3)),
            ns: reply.values_from(4),
        };
        if let Err(error) = self.record(&room_id, reply.status, now, event).await {
            tracing::warn!(room_id, error = %error.message, "outflow slice not journaled; it is taken back");
        }
    }
}

/// Loads every journaled room into a replica and makes Valkey agree with the journal.
async fn load_rooms(shared: &Arc<Shared>) -> Result<(), DurableError> {
    let epoch = shared.valkey.epoch().await?;
    let rooms = shared.journal.rooms().await?;
    let mut ahead = Vec::new();
    for journaled in &rooms {
        let records = shared.journal.events_after(&journaled.room_id, 0).await?;
        let now = now_ms();
        let Folded { room, broken } = fold(&records);
        if let Some(room) = room {
            shared
                .replicas
                .install(room, broken.clone().map(Trouble::Broken), now);
        }
        if let Some(why) = broken {
            tracing::error!(room_id = journaled.room_id, %why, "the room's journal cannot be replayed; the room stays down");
            continue;
        }
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
async fn recover(shared: Arc<Shared>) {
    let mut probes = 0u64;
    loop {
        tokio::time::sleep(RECOVERY_PERIOD).await;
        probes += 1;
        if probes.is_multiple_of(5) || !*shared.ready.borrow() {
            shared.set_journal_ok(shared.journal.ping().await.is_ok());
            match shared.valkey.epoch().await {
                Ok(Some(_)) => shared.set_valkey_ok(true),
                Ok(None) => {
                    shared.set_valkey_ok(true);
                    tracing::warn!("valkey lost its data; rebuilding every room from the journal");
                    for replica in shared.replicas.all() {
                        let room_id = replica.read(|room| room.room_id().to_owned());
                        if !matches!(replica.trouble(), Some(Trouble::Broken(_))) {
                            shared.diverge(&room_id);
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

/// Publishes this engine's changes for the other engines, in the order they were committed.
async fn announce_changes(valkey: Valkey, mut changes: mpsc::UnboundedReceiver<Change>) {
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
async fn follow_changes(shared: Arc<Shared>, url: String) {
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
        if change.engine == shared.engine_id {
            continue;
        }
        if change.reload {
            shared.reload(&change.room).await;
        } else if shared
            .replicas
            .apply(&change.room, &change.records, now_ms())
            .is_err()
        {
            shared.catch_up(&change.room).await;
        }
    }
}

impl Store for DurableStore {
    fn put_room(&self, body: Value) -> StoreFuture<'_, PutOutcome> {
        Box::pin(self.put_room_now(body))
    }

    fn get_room(&self, room_id: String) -> StoreFuture<'_, RoomJson> {
        Box::pin(std::future::ready(self.admin_json(&room_id)))
    }

    fn list_rooms(&self) -> StoreFuture<'_, Vec<RoomJson>> {
        let now = now_ms();
        let rooms = self
            .shared
            .replicas
            .all()
            .iter()
            .filter_map(|replica| {
                replica.read(|room| (!room.is_deleted()).then(|| room.admin_json(now)))
            })
            .collect();
        Box::pin(std::future::ready(Ok(rooms)))
    }

    fn delete_room(&self, room_id: String) -> StoreFuture<'_, ()> {
        Box::pin(async move { self.delete_room_now(&room_id).await })
    }

    fn room_info(&self, room_id: String) -> StoreFuture<'_, RoomInfoReply> {
        let info = self
            .shared
            .replicas
            .get(&room_id)
            .and_then(|replica| {
                replica.read(|room| (!room.is_deleted()).then(|| room_info(room, now_ms())))
            })
            .unwrap_or_else(|| RoomInfoReply {
                found: false,
                room_id,
                ..RoomInfoReply::default()
            });
        Box::pin(std::future::ready(Ok(info)))
    }

    fn join(&self, room_id: String, request: JoinRequest) -> StoreFuture<'_, PlaceStatus> {
        Box::pin(async move { self.join_now(&room_id, request).await })
    }

    fn status(
        &self,
        room_id: String,
        claim: Claim,
        session_hash: String,
    ) -> StoreFuture<'_, PlaceAnswer> {
        Box::pin(async move { self.status_now(&room_id, claim, &session_hash).await })
    }

    fn read_room<'a>(&'a self, room_id: String, read: RoomReader<'a>) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let Some(replica) = self.shared.replicas.get(&room_id) else {
                return Err(room_not_found(&room_id));
            };
            refuse_if_troubled(&replica)?;
            // Places made through another engine reach this replica over pub/sub; catching up
            // first means a lookup sees every commit made before it started.
            self.shared.catch_up(&room_id).await;
            let now = now_ms();
            replica.read(|room| {
                if room.is_deleted() {
                    Err(room_not_found(&room_id))
                } else {
                    read(room, now);
                    Ok(())
                }
            })
        })
    }

    fn check(&self, room_id: String, claim: Option<Claim>) -> StoreFuture<'_, Option<CheckAnswer>> {
        Box::pin(std::future::ready(self.check_now(&room_id, claim.as_ref())))
    }

    fn set_state(&self, room_id: String, state: RoomState) -> StoreFuture<'_, RoomJson> {
        Box::pin(async move {
            self.set_fields(
                &room_id,
                &[("state", state.as_str().to_owned())],
                RoomEvent::StateSet { state },
            )
            .await
        })
    }

    fn set_rate(&self, room_id: String, rate_per_minute: u32) -> StoreFuture<'_, RoomJson> {
        Box::pin(async move {
            self.serviceable(&room_id)?;
            let rate_per_minute = check_rate(u64::from(rate_per_minute))?;
            self.set_fields(
                &room_id,
                &[("rate", rate_per_minute.to_string())],
                RoomEvent::RateSet { rate_per_minute },
            )
            .await
        })
    }

    fn flush(&self, room_id: String, count: u64) -> StoreFuture<'_, (u64, RoomJson)> {
        Box::pin(async move { self.flush_now(&room_id, count).await })
    }

    fn schedule(&self, room_id: String, body: Value) -> StoreFuture<'_, RoomJson> {
        Box::pin(async move {
            let replica = self.serviceable(&room_id)?;
            let scheduled = replica.read(|room| apply_schedule(room.config(), &body))?;
            let event = RoomEvent::Scheduled {
                opens_at: scheduled.opens_at,
                pre_queue_max_per_ip: scheduled.pre_queue_max_per_ip,
            };
            let opens = scheduled
                .opens_at
                .map(|at| at.to_string())
                .unwrap_or_default();
            let pqmax = valkey::pre_queue_cap_arg(scheduled.pre_queue_max_per_ip);
            self.set_fields(&room_id, &[("opens", opens), ("pqmax", pqmax)], event)
                .await
        })
    }

    fn eject(&self, room_id: String, ticket: u64) -> StoreFuture<'_, (EjectedFrom, RoomJson)> {
        Box::pin(async move { self.eject_now(&room_id, ticket).await })
    }

    fn purge(&self, room_id: String) -> StoreFuture<'_, (Purged, RoomJson)> {
        Box::pin(async move { self.purge_now(&room_id).await })
    }

    fn tick(&self, now_ms: i64) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let replicas = self.shared.replicas.all();
            join_all(
                replicas
                    .into_iter()
                    .map(|replica| self.tick_room(replica, now_ms)),
            )
            .await;
            Ok(())
        })
    }

    fn watch(&self, room_id: String) -> StoreFuture<'_, RoomWatch> {
        Box::pin(std::future::ready(Ok(self
            .shared
            .replicas
            .watch(&room_id, now_ms()))))
    }

    fn stats(&self) -> StoreFuture<'_, StatsReply> {
        let rooms = self
            .shared
            .replicas
            .all()
            .iter()
            .filter(|replica| !replica.read(Room::is_deleted))
            .count() as u64;
        Box::pin(std::future::ready(Ok(StatsReply {
            rooms,
            no_room_checks: self.no_room_checks.load(Ordering::Relaxed),
            store: "valkey+pg".to_owned(),
            storage_ready: *self.shared.ready.borrow(),
            started_at_ms: self.started_at_ms,
        })))
    }

    fn readiness(&self) -> Option<watch::Receiver<bool>> {
        Some(self.shared.ready.subscribe())
    }

    fn seen(&self, room_id: String, tickets: Vec<u64>) -> StoreFuture<'_, ()> {
        if let Some(replica) = self.shared.replicas.get(&room_id)
            && !replica.read(Room::is_deleted)
        {
            self.sighted(&replica, &room_id, &tickets, now_ms());
        }
        Box::pin(std::future::ready(Ok(())))
    }
}
