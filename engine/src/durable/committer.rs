//! Group commit: every batch of events an engine lands in Valkey waits here until Postgres has
//! it. One task drains whatever has queued while the previous transaction ran and commits it
//! all in one transaction, so the batch grows with the load and an idle engine commits at
//! once. A batch is answered only after its events are committed and applied to the room's
//! replica.
//!
//! A room whose events cannot be committed (Postgres down, or an earlier seq never arrives
//! because the engine that landed it died) is *diverged*: Valkey holds changes the journal does
//! not. Its waiting batches get 503 `storage_unavailable` and the room is rebuilt from the
//! journal, which takes every uncommitted change back.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use qm_core::{ApiError, ErrorCode};
use tokio::sync::{mpsc, oneshot};

use super::journal::Run;
use super::shared::Shared;
use crate::domain::EventRecord;

/// Most events in one transaction.
const MAX_BATCH: usize = 4096;
/// How long a room's events may wait for an earlier seq before the room is declared diverged.
const STALL: Duration = Duration::from_millis(1500);
/// Pause before looking again at runs that are waiting for an earlier seq.
const RETRY: Duration = Duration::from_millis(2);

/// The answer a landed batch waits for.
pub(crate) type Committed = oneshot::Receiver<Result<(), ApiError>>;

/// One landed batch: consecutive events of one room.
struct Pending {
    records: Vec<EventRecord>,
    queued_at: Instant,
    done: oneshot::Sender<Result<(), ApiError>>,
}

struct Item {
    room_id: String,
    pending: Pending,
}

/// A room's batches waiting for the journal, by first seq.
type Waiting = HashMap<String, BTreeMap<u64, Pending>>;

#[derive(Clone)]
pub(crate) struct Committer {
    sender: mpsc::Sender<Item>,
}

fn not_committed(message: &str) -> ApiError {
    ApiError::new(ErrorCode::StorageUnavailable, message.to_owned())
}

impl Committer {
    /// Starts the commit task; `shared` is where committed events are applied.
    pub(crate) fn start(shared: Arc<Shared>) -> Committer {
        let (sender, receiver) = mpsc::channel(65_536);
        tokio::spawn(run(shared, receiver));
        Committer { sender }
    }

    /// Queues a landed batch (non-empty, consecutive seqs); the answer comes once it is in the
    /// journal and applied to the room's replica.
    pub(crate) async fn commit(&self, room_id: &str, records: Vec<EventRecord>) -> Committed {
        let (done, answer) = oneshot::channel();
        let item = Item {
            room_id: room_id.to_owned(),
            pending: Pending {
                records,
                queued_at: Instant::now(),
                done,
            },
        };
        if let Err(refused) = self.sender.send(item).await {
            let _ = refused
                .0
                .pending
                .done
                .send(Err(not_committed("the engine is stopping")));
        }
        answer
    }
}

async fn run(shared: Arc<Shared>, mut receiver: mpsc::Receiver<Item>) {
    let mut waiting: Waiting = HashMap::new();
    loop {
        // `None` when the retry pause ran out with nothing new.
        let next = if waiting.is_empty() {
            Some(receiver.recv().await)
        } else {
            tokio::time::timeout(RETRY, receiver.recv()).await.ok()
        };
        let mut events = match next {
            Some(Some(item)) => queue(&shared, &mut waiting, item),
            Some(None) if waiting.is_empty() => return,
            Some(None) | None => 0,
        };
        while events < MAX_BATCH {
            let Ok(item) = receiver.try_recv() else { break };
            events += queue(&shared, &mut waiting, item);
        }
        if !waiting.is_empty() {
            commit_batch(&shared, &mut waiting).await;
        }
    }
}

/// Files a batch; answers how many events it holds.
fn queue(shared: &Shared, waiting: &mut Waiting, item: Item) -> usize {
    if shared.is_diverged(&item.room_id) {
        let _ = item.pending.done.send(Err(super::rebuilding()));
        return 0;
    }
    let Some(first) = item.pending.records.first().map(|record| record.seq) else {
        let _ = item.pending.done.send(Ok(()));
        return 0;
    };
    let events = item.pending.records.len();
    waiting
        .entry(item.room_id)
        .or_default()
        .insert(first, item.pending);
    events
}

/// The lowest contiguous run of each room's waiting batches, and how many batches it spans.
fn runs(waiting: &Waiting) -> Vec<(Run, usize)> {
    waiting
        .iter()
        .map(|(room_id, pending)| {
            let mut records: Vec<EventRecord> = Vec::new();
            let mut batches = 0;
            for (first, batch) in pending {
                if records.last().is_some_and(|last| last.seq + 1 != *first) {
                    break;
                }
                records.extend(batch.records.iter().cloned());
                batches += 1;
            }
            let run = Run {
                room_id: room_id.clone(),
                records,
            };
            (run, batches)
        })
        .collect()
}

async fn commit_batch(shared: &Arc<Shared>, waiting: &mut Waiting) {
    let runs = runs(waiting);
    let journal_runs: Vec<Run> = runs.iter().map(|(run, _)| run.clone()).collect();
    let started = Instant::now();
    match shared.journal.commit(&journal_runs).await {
        Ok(committed) => {
            let events = journal_runs.iter().map(|run| run.records.len()).sum();
            shared
                .metrics
                .journal_committed(started.elapsed().as_secs_f64(), events);
            shared.set_journal_ok(true);
            for (run, batches) in runs
                .iter()
                .filter(|(run, _)| committed.contains(&run.room_id))
            {
                shared.apply_committed(&run.room_id, &run.records).await;
                let Some(pending) = waiting.get_mut(&run.room_id) else {
                    continue;
                };
                for _ in 0..*batches {
                    if let Some((_, batch)) = pending.pop_first() {
                        let _ = batch.done.send(Ok(()));
                    }
                }
                if pending.is_empty() {
                    waiting.remove(&run.room_id);
                }
            }
            // What is left waits for an earlier seq; past STALL that seq is never coming.
            let stalled: Vec<String> = waiting
                .iter()
                .filter(|(_, pending)| {
                    pending
                        .values()
                        .any(|batch| batch.queued_at.elapsed() > STALL)
                })
                .map(|(room_id, _)| room_id.clone())
                .collect();
            for room_id in stalled {
                tracing::warn!(
                    room_id,
                    "journal does not continue the room's events; rebuilding it"
                );
                fail_room(
                    shared,
                    waiting,
                    &room_id,
                    "the change could not be journaled in order",
                );
            }
        }
        Err(error) => {
            shared.set_journal_ok(false);
            tracing::error!(%error, "journal commit failed; the batch is taken back");
            let rooms: Vec<String> = waiting.keys().cloned().collect();
            for room_id in rooms {
                fail_room(
                    shared,
                    waiting,
                    &room_id,
                    "the change could not be written to the journal",
                );
            }
        }
    }
}

fn fail_room(shared: &Arc<Shared>, waiting: &mut Waiting, room_id: &str, why: &str) {
    shared.diverge(room_id);
    for (_, batch) in waiting.remove(room_id).unwrap_or_default() {
        let _ = batch.done.send(Err(not_committed(why)));
    }
}
