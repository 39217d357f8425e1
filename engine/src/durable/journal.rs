//! The Postgres journal: `rooms` (each room id's last committed seq) and `room_events`, the
//! gap-free record of every room's events. A batch commits in one transaction and only for
//! rooms whose journal it continues exactly (`last_seq = first - 1` under the row lock), so the
//! journal never holds a gap or a reordering however many engines write to it.
//!
//! Commits go through a pool of their own whose connections wait at most [`COMMIT_LOCK_WAIT`]
//! for a lock: a `rooms` row held by someone else (an operator's open transaction, a stuck
//! `SELECT ... FOR UPDATE`) fails the commit, and its joins answer 503 `storage_unavailable`
//! well inside the edge's engine-call timeout, instead of queueing every room's commits behind
//! the lock for as long as it is held.

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{ConnectOptions, Executor, Row};

/// Longest a commit waits for a lock (2 s of `lock_timeout` on the commit connections). Well below
/// the edge's 5 s engine-call timeout, so a locked journal answers 503 `storage_unavailable`
/// rather than leaving the edge to give up. Only commits have it: a rebuild's or a migration's
/// wait (another engine migrating) is not a fault.
const COMMIT_LOCK_WAIT: &str = "SET lock_timeout = '2s'";
/// Longest a commit may take from this side: past the lock wait, below the edge's 5 s
/// engine-call timeout, so the caller is answered 503 `storage_unavailable` by the engine.
const COMMIT_TIMEOUT: Duration = Duration::from_secs(4);
/// Connections of the commit pool: one committer task commits one transaction at a time.
const COMMIT_CONNECTIONS: u32 = 2;

use crate::domain::EventRecord;

/// Migrations embedded from the workspace's `migrations/` folder.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

/// One room's contiguous run of events to commit.
#[derive(Debug, Clone)]
pub(crate) struct Run {
    pub(crate) room_id: String,
    pub(crate) records: Vec<EventRecord>,
}

impl Run {
    fn first_seq(&self) -> u64 {
        self.records.first().map_or(0, |record| record.seq)
    }

    fn last_seq(&self) -> u64 {
        self.records.last().map_or(0, |record| record.seq)
    }
}

/// A journaled room id: its last seq and whether it was ever created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalRoom {
    pub room_id: String,
    pub last_seq: u64,
}

#[derive(Clone)]
pub struct Journal {
    pool: PgPool,
    /// For [`Journal::commit`] only: its connections wait at most [`COMMIT_LOCK_WAIT`] for a
    /// lock.
    commits: PgPool,
}

impl Journal {
    /// Connects lazily: the engine starts (and reports not ready) while Postgres is down.
    pub fn connect_lazy(url: &str) -> Result<Journal, sqlx::Error> {
        let options: PgConnectOptions = url.parse()?;
        let options = options.disable_statement_logging();
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .acquire_timeout(Duration::from_secs(2))
            .connect_lazy_with(options.clone());
        let commits = PgPoolOptions::new()
            .max_connections(COMMIT_CONNECTIONS)
            .acquire_timeout(Duration::from_secs(2))
            .after_connect(|connection, _| {
                Box::pin(async move {
                    connection.execute(COMMIT_LOCK_WAIT).await?;
                    Ok(())
                })
            })
            .connect_lazy_with(options);
        Ok(Journal { pool, commits })
    }

    /// The pool, for engine parts that keep tables of their own beside the journal.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    pub async fn migrate(&self) -> Result<(), sqlx::migrate::MigrateError> {
        MIGRATOR.run(&self.pool).await
    }

    /// `SELECT 1`: is the journal reachable.
    pub async fn ping(&self) -> Result<(), sqlx::Error> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map(|_| ())
    }

    /// Commits every run that continues its room's journal and answers which rooms were
    /// committed. A run that does not continue its room (an earlier seq is still in flight from
    /// another engine, or the journal moved on) is left out, not failed.
    ///
    /// One statement, so one round trip and atomic on its own: the `UPDATE` moves each room's
    /// `last_seq` under its row lock only where it reads `first - 1`, and the events are
    /// inserted for exactly the rooms it moved.
    ///
    /// Bounded by [`COMMIT_TIMEOUT`] on this side too, for what `lock_timeout` cannot see (a
    /// stalled server, a connection that hangs): a commit given up on is in doubt exactly like
    /// one whose connection broke, and is handled the same way (the room is rebuilt from what
    /// the journal holds).
    pub(crate) async fn commit(&self, runs: &[Run]) -> Result<Vec<String>, sqlx::Error> {
        match tokio::time::timeout(COMMIT_TIMEOUT, self.commit_unbounded(runs)).await {
            Ok(result) => result,
            Err(_) => Err(sqlx::Error::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("journal commit took longer than {COMMIT_TIMEOUT:?}"),
            ))),
        }
    }

    async fn commit_unbounded(&self, runs: &[Run]) -> Result<Vec<String>, sqlx::Error> {
        let room_ids: Vec<&str> = runs.iter().map(|run| run.room_id.as_str()).collect();
        let firsts: Vec<i64> = runs.iter().map(|run| run.first_seq() as i64).collect();
        let lasts: Vec<i64> = runs.iter().map(|run| run.last_seq() as i64).collect();
        // A room id's first event ever (seq 1) needs its row; a re-created room keeps its own.
        let new_rooms: Vec<&str> = runs
            .iter()
            .filter(|run| run.first_seq() == 1)
            .map(|run| run.room_id.as_str())
            .collect();
        if !new_rooms.is_empty() {
            sqlx::query(
                "INSERT INTO rooms (room_id) SELECT room_id FROM UNNEST($1::text[]) AS r(room_id) \
                 ON CONFLICT (room_id) DO NOTHING",
            )
            .bind(&new_rooms)
            .execute(&self.commits)
            .await?;
        }

        let mut event_rooms = Vec::new();
        let mut seqs = Vec::new();
        let mut ats = Vec::new();
        let mut kinds = Vec::new();
        let mut payloads = Vec::new();
        for run in runs {
            for record in &run.records {
                event_rooms.push(run.room_id.as_str());
                seqs.push(record.seq as i64);
                ats.push(record.at_ms);
                kinds.push(record.event.kind());
                payloads.push(
                    serde_json::to_value(&record.event)
                        .map_err(|error| sqlx::Error::Encode(Box::new(error)))?,
                );
            }
        }
        sqlx::query_scalar(
            "WITH moved AS ( \
                 UPDATE rooms SET last_seq = r.last_seq \
                 FROM UNNEST($1::text[], $2::bigint[], $3::bigint[]) AS r(room_id, first_seq, last_seq) \
                 WHERE rooms.room_id = r.room_id AND rooms.last_seq = r.first_seq - 1 \
                 RETURNING rooms.room_id \
             ), written AS ( \
                 INSERT INTO room_events (room_id, seq, at_ms, kind, payload) \
                 SELECT e.room_id, e.seq, e.at_ms, e.kind, e.payload \
                 FROM UNNEST($4::text[], $5::bigint[], $6::bigint[], $7::text[], $8::jsonb[]) \
                     AS e(room_id, seq, at_ms, kind, payload) \
                 WHERE e.room_id IN (SELECT room_id FROM moved) \
             ) \
             SELECT room_id FROM moved",
        )
        .bind(&room_ids)
        .bind(&firsts)
        .bind(&lasts)
        .bind(&event_rooms)
        .bind(&seqs)
        .bind(&ats)
        .bind(&kinds)
        .bind(&payloads)
        .fetch_all(&self.commits)
        .await
    }

    /// Every journaled room id, in creation order.
    pub async fn rooms(&self) -> Result<Vec<JournalRoom>, sqlx::Error> {
        let rows = sqlx::query("SELECT room_id, last_seq FROM rooms ORDER BY created_order")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                Ok(JournalRoom {
                    room_id: row.try_get("room_id")?,
                    last_seq: row.try_get::<i64, _>("last_seq")? as u64,
                })
            })
            .collect()
    }

    /// The room's last committed seq (`None` for an id never journaled).
    pub async fn last_seq(&self, room_id: &str) -> Result<Option<u64>, sqlx::Error> {
        let seq: Option<i64> = sqlx::query_scalar("SELECT last_seq FROM rooms WHERE room_id = $1")
            .bind(room_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(seq.map(|seq| seq as u64))
    }

    /// The room's events with seq above `after`, in seq order. A row that does not parse is an
    /// error: a rebuild never skips what it cannot read.
    pub async fn events_after(
        &self,
        room_id: &str,
        after: u64,
    ) -> Result<Vec<EventRecord>, JournalReadError> {
        let rows = sqlx::query(
            "SELECT seq, at_ms, payload FROM room_events WHERE room_id = $1 AND seq > $2 ORDER BY seq",
        )
        .bind(room_id)
        .bind(after as i64)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let seq = row.try_get::<i64, _>("seq")? as u64;
                let payload: serde_json::Value = row.try_get("payload")?;
                let event = serde_json::from_value(payload)
                    .map_err(|error| JournalReadError::Unreadable { seq, error })?;
                Ok(EventRecord {
                    seq,
                    at_ms: row.try_get("at_ms")?,
                    event,
                })
            })
            .collect()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum JournalReadError {
    #[error("journal unreachable: {0}")]
    Database(#[from] sqlx::Error),
    #[error("journal event seq {seq} does not parse: {error}")]
    Unreadable { seq: u64, error: serde_json::Error },
}
