//! Group commit: every event the Valkey functions record waits here until Postgres has it.
//! One task drains whatever has queued while the previous transaction ran and commits it all
//! in one transaction, so the batch grows with the load and an idle engine commits at once.
//! A caller is answered only after its event is committed and applied to the replica.
//!
//! A room whose events cannot be committed (Postgres down, or an earlier seq never arrives
//! because the engine that made it died) is *diverged*: Valkey holds changes the journal does
//! not. Its waiting callers get 503 `storage_unavailable` and the room is rebuilt from the
//! journal, which takes every uncommitted change back.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use qm_core::{ApiError, ErrorCode};
use tokio::sync::{mpsc, oneshot};

use super::Shared;
use super::journal::Run;
use crate::domain::EventRecord;

/// Most events in one transaction.
const MAX_BATCH: usize = 4096;
/// How long a room's events may wait for an earlier seq before the room is declared diverged.
const STALL: Duration = Duration::from_millis(1500);
/// Pause before looking again at runs that are waiting for an earlier seq.
const RETRY: Duration = Duration::from_millis(2);

struct Pending {
    record: EventRecord,
    queued_at: Instant,
    done: oneshot::Sender<Result<(), ApiError>>,
}

struct Item {
    room_id: String,
    pending: Pending,
}

#[derive(Clone)]
pub(crate) struct Committer {
    sender: mpsc::Sender<Item>,
}

fn not_committed(message: &str) -> ApiError {
    ApiError::new(ErrorCode::StorageUnavailable, message.to_owned())
}

impl Committer {
    pub(crate) fn start(shared: Arc<Shared>) -> Committer {
        let (sender, receiver) = mpsc::channel(65_536);
        tokio::spawn(run(shared, receiver));
        Committer { sender }
    }

    /// Waits until `record` is in the journal and applied to the room's replica.
    pub(crate) async fn commit(&self, room_id: &str, record: EventRecord) -> Result<(), ApiError> {
        let (done, answer) = oneshot::channel();
        let item = Item {
            room_id: room_id.to_owned(),
            pending: Pending {
                record,
                queued_at: Instant::now(),
                done,
            },
        };
        self.sender
            .send(item)
            .await
            .map_err(|_| not_committed("the engine is stopping"))?;
        answer
            .await
            .map_err(|_| not_committed("the engine is stopping"))?
    }
}

async fn run(shared: Arc<Shared>, mut receiver: mpsc::Receiver<Item>) {
    let mut waiting: HashMap<String, BTreeMap<u64, Pending>> = HashMap::new();
    loop {
        // `None` when the retry pause ran out with nothing new.
        let next = if waiting.is_empty() {
            Some(receiver.recv().await)
        } else {
            tokio::time::timeout(RETRY, receiver.recv()).await.ok()
        };
        match next {
            Some(Some(item)) => queue(&shared, &mut waiting, item),
            Some(None) if waiting.is_empty() => return,
            Some(None) | None => {}
        }
        let mut queued = 1;
        while queued < MAX_BATCH {
            let Ok(item) = receiver.try_recv() else { break };
            queue(&shared, &mut waiting, item);
            queued += 1;
        }
        if !waiting.is_empty() {
            commit_batch(&shared, &mut waiting).await;
        }
    }
}

fn queue(shared: &Shared, waiting: &mut HashMap<String, BTreeMap<u64, Pending>>, item: Item) {
    if shared.is_diverged(&item.room_id) {
        let _ = item.pending.done.send(Err(super::rebuilding()));
        return;
    }
    waiting
        .entry(item.room_id)
        .or_default()
        .insert(item.pending.record.seq, item.pending);
}

/// The lowest contiguous run of each room's waiting events.
fn runs(waiting: &HashMap<String, BTreeMap<u64, Pending>>) -> Vec<Run> {
    waiting
        .iter()
        .map(|(room_id, pending)| {
            let mut records = Vec::new();
            for (seq, item) in pending {
                if records
                    .last()
                    .is_some_and(|last: &EventRecord| last.seq + 1 != *seq)
                {
                    break;
                }
                records.push(item.record.clone());
            }
            Run {
                room_id: room_id.clone(),
                records,
            }
        })
        .collect()
}

async fn commit_batch(shared: &Arc<Shared>, waiting: &mut HashMap<String, BTreeMap<u64, Pending>>) {
    let runs = runs(waiting);
    match shared.journal.commit(&runs).await {
        Ok(committed) => {
            shared.set_journal_ok(true);
            for run in runs.iter().filter(|run| committed.contains(&run.room_id)) {
                shared.apply_committed(&run.room_id, &run.records).await;
                let Some(pending) = waiting.get_mut(&run.room_id) else {
                    continue;
                };
                for record in &run.records {
                    if let Some(item) = pending.remove(&record.seq) {
                        let _ = item.done.send(Ok(()));
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
                        .any(|item| item.queued_at.elapsed() > STALL)
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

fn fail_room(
    shared: &Arc<Shared>,
    waiting: &mut HashMap<String, BTreeMap<u64, Pending>>,
    room_id: &str,
    why: &str,
) {
    shared.diverge(room_id);
    for (_, item) in waiting.remove(room_id).unwrap_or_default() {
        let _ = item.done.send(Err(not_committed(why)));
    }
}
