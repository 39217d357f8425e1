//! The book in Postgres (`turn_notifications`), on the journal's pool. Each operation is a
//! single statement (the carry is one transaction), so engines sharing the table agree: a lease
//! is an `UPDATE … WHERE lease_until_ms <= now RETURNING`, which only one engine can win.

use sqlx::Row;
use sqlx::postgres::{PgPool, PgRow};

use super::record::{BookError, BookResult, Delivery, PlaceKey, PlaceKind, Record, Settlement};

const COLUMNS: &str = "room_id, generation, place_kind, place_number, sealed_email, \
     masked_email, owner_hash, requested_at_ms, delivery, attempts, next_attempt_at_ms, \
     lease_until_ms, lapsed_since_ms";
const KEY_MATCH: &str =
    "room_id = $1 AND generation = $2 AND place_kind = $3 AND place_number = $4";

pub(crate) struct PgBook {
    pool: PgPool,
}

fn read_row(row: &PgRow) -> BookResult<Record> {
    let kind: String = row.try_get("place_kind")?;
    let delivery: String = row.try_get("delivery")?;
    let generation: i64 = row.try_get("generation")?;
    let number: i64 = row.try_get("place_number")?;
    let attempts: i32 = row.try_get("attempts")?;
    Ok(Record {
        key: PlaceKey {
            room_id: row.try_get("room_id")?,
            generation: generation as u64,
            kind: PlaceKind::parse(&kind)
                .ok_or_else(|| BookError::BadRow(format!("place_kind {kind:?}")))?,
            number: number as u64,
        },
        sealed_email: row.try_get("sealed_email")?,
        masked_email: row.try_get("masked_email")?,
        owner_hash: row.try_get("owner_hash")?,
        requested_at_ms: row.try_get("requested_at_ms")?,
        delivery: Delivery::parse(&delivery)
            .ok_or_else(|| BookError::BadRow(format!("delivery {delivery:?}")))?,
        attempts: attempts.max(0) as u32,
        next_attempt_at_ms: row.try_get("next_attempt_at_ms")?,
        lease_until_ms: row.try_get("lease_until_ms")?,
        lapsed_since_ms: row.try_get("lapsed_since_ms")?,
    })
}

/// Binds the four key columns as $1..$4.
macro_rules! bind_key {
    ($query:expr, $key:expr) => {
        $query
            .bind(&$key.room_id)
            .bind($key.generation as i64)
            .bind($key.kind.as_str())
            .bind($key.number as i64)
    };
}

impl PgBook {
    pub(crate) fn new(pool: PgPool) -> PgBook {
        PgBook { pool }
    }

    pub(crate) async fn get(&self, key: &PlaceKey) -> BookResult<Option<Record>> {
        let sql = format!("SELECT {COLUMNS} FROM turn_notifications WHERE {KEY_MATCH}");
        let row = bind_key!(sqlx::query(&sql), key)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(read_row).transpose()
    }

    pub(crate) async fn put(&self, record: &Record) -> BookResult<()> {
        let sql = format!(
            "INSERT INTO turn_notifications ({COLUMNS}) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) \
             ON CONFLICT (room_id, generation, place_kind, place_number) DO UPDATE SET \
             sealed_email = EXCLUDED.sealed_email, masked_email = EXCLUDED.masked_email, \
             owner_hash = EXCLUDED.owner_hash, requested_at_ms = EXCLUDED.requested_at_ms, \
             delivery = EXCLUDED.delivery, attempts = EXCLUDED.attempts, \
             next_attempt_at_ms = EXCLUDED.next_attempt_at_ms, \
             lease_until_ms = EXCLUDED.lease_until_ms, lapsed_since_ms = EXCLUDED.lapsed_since_ms"
        );
        bind_key!(sqlx::query(&sql), record.key)
            .bind(&record.sealed_email)
            .bind(&record.masked_email)
            .bind(&record.owner_hash)
            .bind(record.requested_at_ms)
            .bind(record.delivery.as_str())
            .bind(record.attempts as i32)
            .bind(record.next_attempt_at_ms)
            .bind(record.lease_until_ms)
            .bind(record.lapsed_since_ms)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub(crate) async fn delete(&self, key: &PlaceKey) -> BookResult<bool> {
        let sql = format!("DELETE FROM turn_notifications WHERE {KEY_MATCH}");
        let done = bind_key!(sqlx::query(&sql), key)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    pub(crate) async fn carry(&self, from: &PlaceKey, to: &PlaceKey) -> BookResult<bool> {
        let mut transaction = self.pool.begin().await?;
        let delete = format!("DELETE FROM turn_notifications WHERE {KEY_MATCH}");
        bind_key!(sqlx::query(&delete), to)
            .execute(&mut *transaction)
            .await?;
        let moved = bind_key!(
            sqlx::query(
                "UPDATE turn_notifications SET room_id = $5, generation = $6, place_kind = $7, \
                 place_number = $8, delivery = 'pending', attempts = 0, next_attempt_at_ms = 0, \
                 lease_until_ms = 0, lapsed_since_ms = NULL \
                 WHERE room_id = $1 AND generation = $2 AND place_kind = $3 AND place_number = $4",
            ),
            from
        )
        .bind(&to.room_id)
        .bind(to.generation as i64)
        .bind(to.kind.as_str())
        .bind(to.number as i64)
        .execute(&mut *transaction)
        .await?;
        transaction.commit().await?;
        Ok(moved.rows_affected() > 0)
    }

    pub(crate) async fn list(&self, room_id: Option<&str>) -> BookResult<Vec<Record>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM turn_notifications WHERE $1::text IS NULL OR room_id = $1"
        );
        let rows = sqlx::query(&sql)
            .bind(room_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(read_row).collect()
    }

    pub(crate) async fn lease(
        &self,
        key: &PlaceKey,
        now_ms: i64,
        lease_until_ms: i64,
    ) -> BookResult<Option<Record>> {
        let sql = format!(
            "UPDATE turn_notifications SET lease_until_ms = $6, attempts = attempts + 1 \
             WHERE {KEY_MATCH} AND delivery = 'pending' AND next_attempt_at_ms <= $5 \
             AND lease_until_ms <= $5 RETURNING {COLUMNS}"
        );
        let row = bind_key!(sqlx::query(&sql), key)
            .bind(now_ms)
            .bind(lease_until_ms)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(read_row).transpose()
    }

    pub(crate) async fn settle(
        &self,
        key: &PlaceKey,
        lease_until_ms: i64,
        settlement: Settlement,
    ) -> BookResult<()> {
        let (delivery, next_attempt_at_ms) = match settlement {
            Settlement::Sent => (Some(Delivery::Sent), None),
            Settlement::Failed => (Some(Delivery::Failed), None),
            Settlement::RetryAt(at_ms) => (None, Some(at_ms)),
        };
        let sql = format!(
            "UPDATE turn_notifications SET lease_until_ms = 0, \
             delivery = COALESCE($6, delivery), \
             next_attempt_at_ms = COALESCE($7, next_attempt_at_ms) \
             WHERE {KEY_MATCH} AND lease_until_ms = $5"
        );
        bind_key!(sqlx::query(&sql), key)
            .bind(lease_until_ms)
            .bind(delivery.map(Delivery::as_str))
            .bind(next_attempt_at_ms)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub(crate) async fn set_lapsed(&self, key: &PlaceKey, since_ms: Option<i64>) -> BookResult<()> {
        let sql = format!(
            "UPDATE turn_notifications SET lapsed_since_ms = \
             CASE WHEN $5::bigint IS NULL THEN NULL ELSE COALESCE(lapsed_since_ms, $5) END \
             WHERE {KEY_MATCH}"
        );
        bind_key!(sqlx::query(&sql), key)
            .bind(since_ms)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
