//! The book of turn notifications, on one of its two backings: in memory on `STORE=memory`;
//! in Postgres (`turn_notifications`, migration 0002) with `SIDESTORE=pg`, where every change
//! is one statement so several engines can share the table.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use super::pg::PgBook;
use super::record::{BookResult, Delivery, PlaceKey, Record, Settlement};

/// The book on one of its two backings.
pub(crate) enum Book {
    Memory(MemoryBook),
    Pg(PgBook),
}

impl Book {
    pub(crate) async fn get(&self, key: &PlaceKey) -> BookResult<Option<Record>> {
        match self {
            Book::Memory(book) => Ok(book.records().get(key).cloned()),
            Book::Pg(book) => book.get(key).await,
        }
    }

    /// Files `record` against its place, replacing whatever was there.
    pub(crate) async fn put(&self, record: Record) -> BookResult<()> {
        match self {
            Book::Memory(book) => {
                book.records().insert(record.key.clone(), record);
                Ok(())
            }
            Book::Pg(book) => book.put(&record).await,
        }
    }

    pub(crate) async fn delete(&self, key: &PlaceKey) -> BookResult<bool> {
        match self {
            Book::Memory(book) => Ok(book.records().remove(key).is_some()),
            Book::Pg(book) => book.delete(key).await,
        }
    }

    /// Moves the record filed under `from` to `to` as a new wait: delivery pending, no
    /// attempts, no lease, not lapsed. Whatever `to` held is replaced. Answers whether a record
    /// moved.
    pub(crate) async fn carry(&self, from: &PlaceKey, to: &PlaceKey) -> BookResult<bool> {
        if from == to {
            return Ok(false);
        }
        match self {
            Book::Memory(book) => {
                let mut records = book.records();
                let Some(mut record) = records.remove(from) else {
                    return Ok(false);
                };
                record.key = to.clone();
                record.delivery = Delivery::Pending;
                record.attempts = 0;
                record.next_attempt_at_ms = 0;
                record.lease_until_ms = 0;
                record.lapsed_since_ms = None;
                records.insert(to.clone(), record);
                Ok(true)
            }
            Book::Pg(book) => book.carry(from, to).await,
        }
    }

    /// Every record (the mailer's scan) or, with `room_id`, one room's.
    pub(crate) async fn list(&self, room_id: Option<&str>) -> BookResult<Vec<Record>> {
        match self {
            Book::Memory(book) => Ok(book
                .records()
                .values()
                .filter(|record| room_id.is_none_or(|room_id| record.key.room_id == room_id))
                .cloned()
                .collect()),
            Book::Pg(book) => book.list(room_id).await,
        }
    }

    /// Takes a pending, due, unleased record for sending until `lease_until_ms`, counting the
    /// attempt. `None` when it is not (any more) such a record: another engine took it, it was
    /// withdrawn, or it is not due.
    pub(crate) async fn lease(
        &self,
        key: &PlaceKey,
        now_ms: i64,
        lease_until_ms: i64,
    ) -> BookResult<Option<Record>> {
        match self {
            Book::Memory(book) => {
                let mut records = book.records();
                let Some(record) = records.get_mut(key) else {
                    return Ok(None);
                };
                if record.delivery != Delivery::Pending
                    || record.next_attempt_at_ms > now_ms
                    || record.lease_until_ms > now_ms
                {
                    return Ok(None);
                }
                record.lease_until_ms = lease_until_ms;
                record.attempts += 1;
                Ok(Some(record.clone()))
            }
            Book::Pg(book) => book.lease(key, now_ms, lease_until_ms).await,
        }
    }

    /// Records how the attempt that leased the record ended. A record withdrawn or carried
    /// away meanwhile is left alone: only the lease holder's record is settled.
    pub(crate) async fn settle(
        &self,
        key: &PlaceKey,
        lease_until_ms: i64,
        settlement: Settlement,
    ) -> BookResult<()> {
        match self {
            Book::Memory(book) => {
                let mut records = book.records();
                if let Some(record) = records.get_mut(key)
                    && record.lease_until_ms == lease_until_ms
                {
                    record.lease_until_ms = 0;
                    match settlement {
                        Settlement::Sent => record.delivery = Delivery::Sent,
                        Settlement::Failed => record.delivery = Delivery::Failed,
                        Settlement::RetryAt(at_ms) => record.next_attempt_at_ms = at_ms,
                    }
                }
                Ok(())
            }
            Book::Pg(book) => book.settle(key, lease_until_ms, settlement).await,
        }
    }

    /// Sets (`Some`) or clears (`None`) when the place was first seen lapsed; an instant
    /// already set is kept.
    pub(crate) async fn set_lapsed(&self, key: &PlaceKey, since_ms: Option<i64>) -> BookResult<()> {
        match self {
            Book::Memory(book) => {
                if let Some(record) = book.records().get_mut(key) {
                    record.lapsed_since_ms =
                        since_ms.map(|since| record.lapsed_since_ms.unwrap_or(since));
                }
                Ok(())
            }
            Book::Pg(book) => book.set_lapsed(key, since_ms).await,
        }
    }
}

/// The in-process book of `STORE=memory`: gone with the process, like the line itself.
#[derive(Default)]
pub(crate) struct MemoryBook {
    /// A std mutex: it guards map operations only and is never held across an `.await`.
    records: Mutex<HashMap<PlaceKey, Record>>,
}

impl MemoryBook {
    fn records(&self) -> MutexGuard<'_, HashMap<PlaceKey, Record>> {
        // A panic under the lock leaves a map of whole records: still sound.
        self.records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(number: u64) -> PlaceKey {
        PlaceKey::ticket("r", 1, number).unwrap()
    }

    fn record(number: u64) -> Record {
        Record::new(
            key(number),
            vec![1, 2, 3],
            "j***@e***.com".into(),
            "owner".into(),
            5,
        )
    }

    #[tokio::test]
    async fn a_carried_record_starts_a_new_wait() {
        let book = Book::Memory(MemoryBook::default());
        book.put(record(1)).await.unwrap();
        book.settle(&key(1), 0, Settlement::Sent).await.unwrap();
        book.set_lapsed(&key(1), Some(9)).await.unwrap();
        assert!(book.carry(&key(1), &key(7)).await.unwrap());
        assert_eq!(book.get(&key(1)).await.unwrap(), None);
        let carried = book.get(&key(7)).await.unwrap().unwrap();
        assert_eq!(carried.delivery, Delivery::Pending);
        assert_eq!(carried.lapsed_since_ms, None);
        assert_eq!(carried.requested_at_ms, 5);
        assert!(!book.carry(&key(1), &key(8)).await.unwrap());
        assert_eq!(PlaceKey::ticket("r", 1, 0), None);
    }

    #[tokio::test]
    async fn one_lease_at_a_time_and_only_when_due() {
        let book = Book::Memory(MemoryBook::default());
        book.put(record(1)).await.unwrap();
        let leased = book.lease(&key(1), 100, 1_100).await.unwrap().unwrap();
        assert_eq!(leased.attempts, 1);
        assert_eq!(book.lease(&key(1), 200, 1_200).await.unwrap(), None);
        book.settle(&key(1), 1_100, Settlement::RetryAt(3_000))
            .await
            .unwrap();
        assert_eq!(book.lease(&key(1), 2_000, 3_000).await.unwrap(), None);
        let again = book.lease(&key(1), 3_000, 4_000).await.unwrap().unwrap();
        assert_eq!(again.attempts, 2);
        // A settlement under a lease that is not the record's changes nothing.
        book.settle(&key(1), 1_100, Settlement::Sent).await.unwrap();
        assert_eq!(
            book.get(&key(1)).await.unwrap().unwrap().delivery,
            Delivery::Pending
        );
        book.settle(&key(1), 4_000, Settlement::Failed)
            .await
            .unwrap();
        assert_eq!(
            book.get(&key(1)).await.unwrap().unwrap().delivery,
            Delivery::Failed
        );
    }

    #[tokio::test]
    async fn lapsed_since_keeps_its_first_instant() {
        let book = Book::Memory(MemoryBook::default());
        book.put(record(1)).await.unwrap();
        book.set_lapsed(&key(1), Some(10)).await.unwrap();
        book.set_lapsed(&key(1), Some(20)).await.unwrap();
        assert_eq!(
            book.get(&key(1)).await.unwrap().unwrap().lapsed_since_ms,
            Some(10)
        );
        book.set_lapsed(&key(1), None).await.unwrap();
        assert_eq!(
            book.get(&key(1)).await.unwrap().unwrap().lapsed_since_ms,
            None
        );
    }
}
