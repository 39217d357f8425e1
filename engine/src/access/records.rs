//! Short-lived records every admin process must see alike — console sessions and event-stream
//! tickets — so a console request or a ticket may reach any admin instance behind a load
//! balancer. The engine does not read them: a record is a kind, an id (a digest of the bearer
//! secret the admin handed out, never the secret), an opaque payload and an expiry. An expired
//! record is never answered. `take` reads and deletes in one step, so a ticket is spent once
//! even when two admin processes redeem it at the same moment.
//!
//! In this engine's memory on the memory store, in Postgres (`admin_records`, migration 0004)
//! on the durable store, where every engine reads the same rows.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use qm_core::{ApiError, ErrorCode};
use sqlx::PgPool;
use sqlx::Row;

/// The kinds of record, as the wire and the table name them.
pub(crate) const KINDS: [&str; 2] = ["session", "ticket"];
/// Longest id, in bytes (a SHA-256 digest is 32).
const MAX_ID_LEN: usize = 64;
/// Largest payload, in bytes (a principal and its verifiers are a few hundred).
const MAX_PAYLOAD_LEN: usize = 16 * 1024;
/// Longest life of a record (a console session lives 12 h).
const MAX_TTL_MS: u64 = 24 * 3600 * 1000;
/// The most records of one kind a caller may ask the store to hold.
const MAX_OF_KIND: u32 = 100_000;

/// A record named by kind and id, checked.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct RecordKey {
    kind: &'static str,
    id: Vec<u8>,
}

impl RecordKey {
    pub(crate) fn parse(reference: Option<qm_proto::RecordRef>) -> Result<RecordKey, ApiError> {
        let reference = reference.unwrap_or_default();
        let kind = KINDS
            .into_iter()
            .find(|kind| *kind == reference.kind)
            .ok_or_else(|| {
                ApiError::new(
                    ErrorCode::BadRequest,
                    format!(
                        "record kind {:?} is not one of session, ticket",
                        reference.kind
                    ),
                )
            })?;
        if reference.id.is_empty() || reference.id.len() > MAX_ID_LEN {
            return Err(ApiError::new(
                ErrorCode::BadRequest,
                format!("a record id is 1 to {MAX_ID_LEN} bytes"),
            ));
        }
        Ok(RecordKey {
            kind,
            id: reference.id,
        })
    }
}

/// What PutRecord stores, checked.
#[derive(Debug, Clone)]
pub(crate) struct NewRecord {
    pub(crate) key: RecordKey,
    pub(crate) payload: Vec<u8>,
    pub(crate) ttl_ms: u64,
    pub(crate) max_of_kind: u32,
}

impl NewRecord {
    pub(crate) fn parse(request: qm_proto::PutRecordRequest) -> Result<NewRecord, ApiError> {
        let key = RecordKey::parse(request.record)?;
        if request.payload.len() > MAX_PAYLOAD_LEN {
            return Err(ApiError::new(
                ErrorCode::BadRequest,
                format!("a record's payload is at most {MAX_PAYLOAD_LEN} bytes"),
            ));
        }
        if request.ttl_ms == 0 || request.ttl_ms > MAX_TTL_MS {
            return Err(ApiError::new(
                ErrorCode::BadRequest,
                format!("a record lives 1 ms to {MAX_TTL_MS} ms"),
            ));
        }
        Ok(NewRecord {
            key,
            payload: request.payload,
            ttl_ms: request.ttl_ms,
            max_of_kind: request.max_of_kind.clamp(1, MAX_OF_KIND),
        })
    }
}

/// A live record as answered: its payload and how long it has left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) payload: Vec<u8>,
    pub(crate) left_ms: u64,
}

fn left_of(expires_at_ms: i64, now_ms: i64) -> Option<u64> {
    u64::try_from(expires_at_ms.checked_sub(now_ms)?)
        .ok()
        .filter(|left| *left > 0)
}

fn expiry(ttl_ms: u64, now_ms: i64) -> i64 {
    now_ms.saturating_add(i64::try_from(ttl_ms).unwrap_or(i64::MAX))
}

/// The records of the memory store.
#[derive(Debug, Default)]
pub(crate) struct MemoryRecords {
    /// Key → (payload, expires at ms). A std mutex, never held across an `.await`.
    records: Mutex<HashMap<RecordKey, (Vec<u8>, i64)>>,
}

impl MemoryRecords {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<RecordKey, (Vec<u8>, i64)>> {
        // A panic under this lock leaves a map of whole entries: still sound to use.
        self.records.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores the record; `false` (nothing stored) when its kind is full of live ones.
    pub(crate) fn put(&self, new: NewRecord, now_ms: i64) -> bool {
        let mut records = self.lock();
        records.retain(|_, (_, expires_at_ms)| *expires_at_ms > now_ms);
        let of_kind = records
            .keys()
            .filter(|key| key.kind == new.key.kind)
            .count();
        if of_kind >= new.max_of_kind as usize && !records.contains_key(&new.key) {
            return false;
        }
        records.insert(new.key, (new.payload, expiry(new.ttl_ms, now_ms)));
        true
    }

    pub(crate) fn get(&self, key: &RecordKey, take: bool, now_ms: i64) -> Option<Found> {
        let mut records = self.lock();
        let (payload, expires_at_ms) = if take {
            records.remove(key)?
        } else {
            records.get(key)?.clone()
        };
        Some(Found {
            payload,
            left_ms: left_of(expires_at_ms, now_ms)?,
        })
    }

    pub(crate) fn delete(&self, key: &RecordKey, now_ms: i64) -> bool {
        self.lock()
            .remove(key)
            .is_some_and(|(_, expires_at_ms)| expires_at_ms > now_ms)
    }
}

/// A database failure as the admin answers it: 503, try again.
fn unavailable(error: sqlx::Error) -> ApiError {
    tracing::warn!(error = %error, "admin record storage failed");
    ApiError::new(
        ErrorCode::StorageUnavailable,
        "session storage is unavailable right now; try again shortly",
    )
    .with_retry_after(2)
}

/// Stores the record in Postgres; `false` when its kind is full of live ones. Expired rows of
/// the kind are swept first, so the count is of live ones and the table stays small.
pub(crate) async fn pg_put(pool: &PgPool, new: NewRecord, now_ms: i64) -> Result<bool, ApiError> {
    let mut transaction = pool.begin().await.map_err(unavailable)?;
    sqlx::query("DELETE FROM admin_records WHERE kind = $1 AND expires_at_ms <= $2")
        .bind(new.key.kind)
        .bind(now_ms)
        .execute(&mut *transaction)
        .await
        .map_err(unavailable)?;
    let live: i64 = sqlx::query("SELECT count(*) FROM admin_records WHERE kind = $1")
        .bind(new.key.kind)
        .fetch_one(&mut *transaction)
        .await
        .and_then(|row| row.try_get(0))
        .map_err(unavailable)?;
    if live >= i64::from(new.max_of_kind) {
        return Ok(false);
    }
    sqlx::query(
        "INSERT INTO admin_records (kind, id, payload, expires_at_ms) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (kind, id) DO UPDATE SET payload = EXCLUDED.payload, \
         expires_at_ms = EXCLUDED.expires_at_ms",
    )
    .bind(new.key.kind)
    .bind(&new.key.id)
    .bind(&new.payload)
    .bind(expiry(new.ttl_ms, now_ms))
    .execute(&mut *transaction)
    .await
    .map_err(unavailable)?;
    transaction.commit().await.map_err(unavailable)?;
    Ok(true)
}

pub(crate) async fn pg_get(
    pool: &PgPool,
    key: &RecordKey,
    take: bool,
    now_ms: i64,
) -> Result<Option<Found>, ApiError> {
    let sql = if take {
        "DELETE FROM admin_records WHERE kind = $1 AND id = $2 RETURNING payload, expires_at_ms"
    } else {
        "SELECT payload, expires_at_ms FROM admin_records WHERE kind = $1 AND id = $2"
    };
    let row = sqlx::query(sql)
        .bind(key.kind)
        .bind(&key.id)
        .fetch_optional(pool)
        .await
        .map_err(unavailable)?;
    let Some(row) = row else {
        return Ok(None);
    };
    let payload: Vec<u8> = row.try_get("payload").map_err(unavailable)?;
    let expires_at_ms: i64 = row.try_get("expires_at_ms").map_err(unavailable)?;
    Ok(left_of(expires_at_ms, now_ms).map(|left_ms| Found { payload, left_ms }))
}

pub(crate) async fn pg_delete(
    pool: &PgPool,
    key: &RecordKey,
    now_ms: i64,
) -> Result<bool, ApiError> {
    let row = sqlx::query(
        "DELETE FROM admin_records WHERE kind = $1 AND id = $2 RETURNING expires_at_ms",
    )
    .bind(key.kind)
    .bind(&key.id)
    .fetch_optional(pool)
    .await
    .map_err(unavailable)?;
    Ok(row
        .and_then(|row| row.try_get::<i64, _>("expires_at_ms").ok())
        .is_some_and(|expires_at_ms| expires_at_ms > now_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(kind: &str, id: &[u8]) -> Result<RecordKey, ApiError> {
        RecordKey::parse(Some(qm_proto::RecordRef {
            kind: kind.to_owned(),
            id: id.to_vec(),
        }))
    }

    fn new(id: &[u8], ttl_ms: u64, max_of_kind: u32) -> NewRecord {
        NewRecord {
            key: key("ticket", id).expect("a valid key"),
            payload: id.to_vec(),
            ttl_ms,
            max_of_kind,
        }
    }

    #[test]
    fn keys_and_records_are_checked() {
        assert!(key("session", b"x").is_ok());
        assert_eq!(key("cookie", b"x").unwrap_err().code, ErrorCode::BadRequest);
        assert!(key("ticket", b"").is_err());
        assert!(key("ticket", &[0; 65]).is_err());
        let request = |payload: usize, ttl_ms: u64| qm_proto::PutRecordRequest {
            record: Some(qm_proto::RecordRef {
                kind: "session".to_owned(),
                id: b"id".to_vec(),
            }),
            payload: vec![0; payload],
            ttl_ms,
            max_of_kind: 0,
        };
        let parsed = NewRecord::parse(request(10, 1000)).expect("valid");
        assert_eq!(parsed.max_of_kind, 1, "at least one record of a kind");
        assert!(NewRecord::parse(request(MAX_PAYLOAD_LEN + 1, 1000)).is_err());
        assert!(NewRecord::parse(request(10, 0)).is_err());
        assert!(NewRecord::parse(request(10, MAX_TTL_MS + 1)).is_err());
    }

    #[test]
    fn a_record_lives_until_it_expires_is_taken_or_deleted() {
        let records = MemoryRecords::default();
        assert!(records.put(new(b"a", 1000, 10), 0));
        let a = key("ticket", b"a").expect("valid");
        let found = records.get(&a, false, 400).expect("live");
        assert_eq!(found.left_ms, 600);
        assert!(records.get(&a, false, 1000).is_none(), "expired");
        assert!(records.put(new(b"b", 1000, 10), 0));
        let b = key("ticket", b"b").expect("valid");
        assert!(records.get(&b, true, 1).is_some());
        assert!(
            records.get(&b, true, 1).is_none(),
            "a taken record is spent"
        );
        assert!(records.put(new(b"c", 1000, 10), 0));
        let c = key("ticket", b"c").expect("valid");
        assert!(records.delete(&c, 1));
        assert!(!records.delete(&c, 1));
        // A session and a ticket of the same id are two records.
        let session = key("session", b"a").expect("valid");
        assert!(records.get(&session, false, 1).is_none());
    }

    #[test]
    fn a_full_kind_refuses_new_records_until_some_expire() {
        let records = MemoryRecords::default();
        assert!(records.put(new(b"a", 1000, 2), 0));
        assert!(records.put(new(b"b", 2000, 2), 0));
        assert!(!records.put(new(b"c", 1000, 2), 10), "full");
        assert!(records.put(new(b"c", 1000, 2), 1000), "a has expired");
    }
}
