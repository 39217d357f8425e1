//! How a change reaches the durable store: every command on a room runs through
//! [`Room::execute`] on this engine's live copy of the room, and the events it records are
//! offered to Valkey as one batch that lands only if the room there is still at the seq the
//! copy started from (compare-and-set). Landed, the batch goes to the group commit and its
//! callers are answered once Postgres has it. Refused because another engine landed first, the
//! copy takes its batch back ([`Room::rewind`], or a reload from the replica and Valkey's tail)
//! and runs the same commands again on the newer room.
//!
//! Commands queue per room; one task per busy room drains the queue, so whatever arrived while
//! the previous batch was landing goes out together and a hot room lands many joins per round
//! trip. Two engines writing one room take turns at the seq; what that costs is measured in
//! docs/BENCHMARKS.md.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use qm_core::{ApiError, ErrorCode};
use tokio::sync::oneshot;

use super::shared::Shared;
use super::valkey::{Landing, Tail};
use super::{rebuilding, unavailable};
use crate::Environment;
use crate::domain::{Command, EventRecord, Executed, Mark, Outcome, Room};
use crate::rooms::{Slot, lock};

/// Most commands one batch carries.
const MAX_BATCH: usize = 1024;
/// How many times a batch is run again after another engine landed first.
const MAX_ATTEMPTS: usize = 16;
/// Events Valkey keeps below the seq this engine knows to be journaled, for engines that are
/// a little behind.
const TAIL_KEPT: u64 = 1024;

/// Why a room cannot be served right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Trouble {
    /// Valkey holds changes the journal does not (or lost some): the room is being rebuilt.
    Rebuilding,
    /// The journal cannot be folded (a gap or a reordering): an operator must look.
    Broken(String),
}

type Answer = oneshot::Sender<Result<Outcome, ApiError>>;

struct Queued {
    command: Command,
    at_ms: i64,
    answer: Answer,
}

#[derive(Default)]
struct Queue {
    waiting: VecDeque<Queued>,
    draining: bool,
}

/// What the durable store keeps beside each room's replica.
pub(crate) struct Writer {
    /// The room as this engine's landings leave it: the replica plus every change landed in
    /// Valkey and not yet journaled. Commands execute here, never on the replica.
    live: Mutex<Room>,
    queue: Mutex<Queue>,
    trouble: Mutex<Option<Trouble>>,
    /// Set when the live copy may hold changes Valkey refused: the next batch reloads it.
    needs_reload: AtomicBool,
}

impl Writer {
    /// A writer whose live copy starts as `room` (the replica as loaded).
    pub(crate) fn new(room: Room) -> Writer {
        Writer {
            live: Mutex::new(room),
            queue: Mutex::new(Queue::default()),
            trouble: Mutex::new(None),
            needs_reload: AtomicBool::new(false),
        }
    }

    pub(crate) fn trouble(&self) -> Option<Trouble> {
        lock(&self.trouble).clone()
    }

    pub(crate) fn set_trouble(&self, trouble: Option<Trouble>) {
        *lock(&self.trouble) = trouble;
    }

    /// The live copy under its lock (keep it short).
    pub(crate) fn live(&self) -> MutexGuard<'_, Room> {
        lock(&self.live)
    }

    /// Replaces the live copy (a load or a rebuild), keeping this engine's sightings and
    /// outflow carry.
    pub(crate) fn reset_live(&self, mut room: Room) {
        let mut live = self.live();
        room.keep_local_state(&mut live);
        *live = room;
        self.needs_reload.store(false, Ordering::Relaxed);
    }

    /// Applies events another engine committed, when they continue the live copy (otherwise
    /// the next landing learns of them from Valkey).
    pub(crate) fn follow(&self, records: &[EventRecord]) {
        let mut live = self.live();
        let Some(first) = records
            .iter()
            .position(|record| record.seq == live.seq() + 1)
        else {
            return;
        };
        for record in &records[first..] {
            if live.apply(record).is_err() {
                self.needs_reload.store(true, Ordering::Relaxed);
                return;
            }
        }
    }

    /// Refuses a room that is being rebuilt or whose journal cannot be replayed.
    pub(crate) fn serviceable(&self) -> Result<(), ApiError> {
        match self.trouble() {
            None => Ok(()),
            Some(Trouble::Rebuilding) => Err(rebuilding()),
            Some(Trouble::Broken(why)) => Err(unavailable(format!(
                "the room's journal cannot be replayed ({why}); an operator must look"
            ))),
        }
    }

    /// Runs a batch on the live copy: where it started, and each command's result.
    fn execute(&self, batch: &[Queued], environment: &Environment) -> (Mark, Vec<Executed>) {
        let mut live = self.live();
        let mark = live.mark();
        let mut rng = environment.rng();
        let results = batch
            .iter()
            .map(|queued| live.execute(&queued.command, queued.at_ms, &mut rng))
            .collect();
        (mark, results)
    }

    /// Takes back a refused batch and applies the events that landed before it. False when
    /// that cannot be done in place (the caller reloads the copy).
    fn rebase(&self, mark: &Mark, ours: &[EventRecord], seq: u64, theirs: &[EventRecord]) -> bool {
        let mut live = self.live();
        if !live.rewind(mark, ours) {
            return false;
        }
        if seq <= mark.seq() || theirs.len() as u64 != seq - mark.seq() {
            return false;
        }
        theirs.iter().all(|record| live.apply(record).is_ok())
    }
}

/// Answers every command of a batch with its own outcome.
fn answer(batch: Vec<Queued>, results: Vec<Executed>) {
    for (queued, executed) in batch.into_iter().zip(results) {
        let _ = queued.answer.send(executed.outcome);
    }
}

fn refuse(batch: Vec<Queued>, refusal: &ApiError) {
    for queued in batch {
        let _ = queued.answer.send(Err(refusal.clone()));
    }
}

impl Shared {
    /// Runs `command` on the room at `at_ms` and answers once its events are journaled.
    pub(crate) async fn submit(
        self: &Arc<Self>,
        slot: Arc<Slot<Writer>>,
        command: Command,
        at_ms: i64,
    ) -> Result<Outcome, ApiError> {
        slot.extra.serviceable()?;
        let (answer, answered) = oneshot::channel();
        let start = {
            let mut queue = lock(&slot.extra.queue);
            queue.waiting.push_back(Queued {
                command,
                at_ms,
                answer,
            });
            !std::mem::replace(&mut queue.draining, true)
        };
        if start {
            tokio::spawn(self.clone().drain(slot));
        }
        answered
            .await
            .map_err(|_| unavailable("the engine is stopping"))?
    }

    /// Lands the room's queued commands batch by batch until none is left.
    async fn drain(self: Arc<Self>, slot: Arc<Slot<Writer>>) {
        loop {
            let batch: Vec<Queued> = {
                let mut queue = lock(&slot.extra.queue);
                if queue.waiting.is_empty() {
                    queue.draining = false;
                    return;
                }
                let take = queue.waiting.len().min(MAX_BATCH);
                queue.waiting.drain(..take).collect()
            };
            self.land(&slot, batch).await;
        }
    }

    /// Executes a batch, lands it, and hands it to the group commit; runs it again on the
    /// newer room when another engine landed first.
    async fn land(&self, slot: &Slot<Writer>, batch: Vec<Queued>) {
        let room_id = slot.room_id();
        for _ in 0..MAX_ATTEMPTS {
            if let Err(refusal) = slot.extra.serviceable() {
                return refuse(batch, &refusal);
            }
            if slot.extra.needs_reload.load(Ordering::Relaxed)
                && let Err(refusal) = self.reload_live(slot).await
            {
                return refuse(batch, &refusal);
            }
            let (mark, results) = slot.extra.execute(&batch, &self.environment);
            let records: Vec<EventRecord> = results
                .iter()
                .flat_map(|executed| executed.records.iter().cloned())
                .collect();
            if records.is_empty() {
                return answer(batch, results);
            }
            self.landings.fetch_add(1, Ordering::Relaxed);
            let keep_after = slot.read(Room::seq).saturating_sub(TAIL_KEPT);
            let landing = self
                .valkey
                .land(room_id, mark.seq(), keep_after, &records)
                .await;
            let refusal = match landing {
                Ok(Landing::Landed) => {
                    self.set_valkey_ok(true);
                    return self.after_landing(room_id, records, batch, results).await;
                }
                Ok(Landing::Stale { seq, events }) => {
                    self.stale_landings.fetch_add(1, Ordering::Relaxed);
                    if !slot.extra.rebase(&mark, &records, seq, &events)
                        && let Err(refusal) = self.reload_live(slot).await
                    {
                        return refuse(batch, &refusal);
                    }
                    continue;
                }
                Ok(Landing::Held) => rebuilding(),
                Ok(Landing::Missing) => {
                    self.diverge(room_id);
                    unavailable(
                        "the live queue lost this room; it is being rebuilt from its journal",
                    )
                }
                Err(error) => self.valkey_failed(room_id, &error),
            };
            slot.extra.needs_reload.store(true, Ordering::Relaxed);
            return refuse(batch, &refusal);
        }
        slot.extra.needs_reload.store(true, Ordering::Relaxed);
        refuse(
            batch,
            &unavailable("the room changed under this change too often; try again"),
        );
    }

    /// A landed batch waits for the journal; its callers are answered then.
    async fn after_landing(
        &self,
        room_id: &str,
        records: Vec<EventRecord>,
        batch: Vec<Queued>,
        results: Vec<Executed>,
    ) {
        let Some(committer) = self.committer.get() else {
            return refuse(batch, &unavailable("the engine is starting"));
        };
        let committed = committer.commit(room_id, records).await;
        tokio::spawn(async move {
            match committed.await {
                Ok(Ok(())) => answer(batch, results),
                Ok(Err(refusal)) => refuse(batch, &refusal),
                Err(_) => refuse(batch, &unavailable("the engine is stopping")),
            }
        });
    }

    /// A Valkey call that failed: unreachable or timed out, it may still have run, so only the
    /// journal can say what happened and the room is rebuilt from it.
    pub(crate) fn valkey_failed(&self, room_id: &str, error: &fred::error::Error) -> ApiError {
        tracing::warn!(room_id, %error, "valkey call failed");
        if !matches!(
            error.kind(),
            fred::error::ErrorKind::Timeout
                | fred::error::ErrorKind::IO
                | fred::error::ErrorKind::Canceled
        ) {
            self.metrics.failed(crate::metrics::Backend::Valkey);
            return unavailable(format!("the live queue refused the change: {error}"));
        }
        self.set_valkey_ok(false);
        self.diverge(room_id);
        unavailable("the live queue (Valkey) is unreachable")
    }

    /// Makes the live copy Valkey's room again: the replica caught up from the journal plus
    /// the events Valkey landed beyond it. A Valkey that cannot say what lies between (it lost
    /// the room, or holds events the journal never had) has the room rebuilt from the journal.
    async fn reload_live(&self, slot: &Slot<Writer>) -> Result<(), ApiError> {
        let room_id = slot.room_id();
        self.catch_up(room_id).await;
        // The tail continues this copy of the replica, not the replica itself: the change
        // feed may advance the replica while the tail is asked for.
        let mut fresh = slot.read(Room::clone);
        let committed = fresh.seq();
        let tail = match self.valkey.tail(room_id, committed).await {
            Ok(tail) => tail,
            Err(error) => return Err(self.valkey_failed(room_id, &error)),
        };
        match tail {
            Tail::Held => return Err(rebuilding()),
            Tail::At { seq, events }
                if seq >= committed && events.len() as u64 == seq - committed =>
            {
                if events.iter().all(|event| fresh.apply(event).is_ok()) {
                    slot.extra.reset_live(fresh);
                    return Ok(());
                }
            }
            Tail::At { .. } | Tail::Missing => {}
        }
        tracing::warn!(
            room_id,
            "valkey and the journal disagree on the room; rebuilding it"
        );
        self.diverge(room_id);
        match self.rebuild(room_id).await {
            Ok(()) => Ok(()),
            Err(error) => Err(ApiError::new(
                ErrorCode::StorageUnavailable,
                format!("the room could not be rebuilt: {error}"),
            )),
        }
    }
}
