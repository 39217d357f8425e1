//! The admin credential lockout's wrong credentials, per client address, for every admin
//! process alike: an address that presented `limit` wrong credentials within `window` is
//! locked out until the oldest of its newest `limit` failures leaves the window (the admin
//! process's own rule, `admin/src/lockout.rs`, which also counts locally). In this engine's
//! memory on the memory store, in Postgres (`admin_failures`, migration 0004) on the durable
//! store, where every engine reads the same rows.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

use qm_core::{ApiError, ErrorCode};
use sqlx::{PgPool, Row};

/// Addresses tracked at once in memory; past it the address whose newest failure is oldest is
/// forgotten (a flood from many addresses cannot grow memory without bound).
const MAX_ADDRESSES: usize = 100_000;
/// Longest address kept (an IPv6 address in text is at most 45 characters).
const MAX_ADDRESS_LEN: usize = 64;
/// Largest limit and window an admin process may ask for (ADMIN_AUTH_* are bounded lower).
const MAX_LIMIT: u32 = 1_000_000;
const MAX_WINDOW_MS: u64 = 24 * 3600 * 1000;

/// One AuthFailures question, checked.
#[derive(Debug, Clone)]
pub(crate) struct FailureQuery {
    pub(crate) address: String,
    pub(crate) window_ms: i64,
    pub(crate) limit: usize,
    pub(crate) record: bool,
}

impl FailureQuery {
    pub(crate) fn parse(request: qm_proto::AuthFailuresRequest) -> Result<FailureQuery, ApiError> {
        if request.address.is_empty() || request.address.len() > MAX_ADDRESS_LEN {
            return Err(ApiError::new(
                ErrorCode::BadRequest,
                format!("a client address is 1 to {MAX_ADDRESS_LEN} bytes"),
            ));
        }
        if request.window_ms == 0 || request.window_ms > MAX_WINDOW_MS {
            return Err(ApiError::new(
                ErrorCode::BadRequest,
                format!("the lockout window is 1 ms to {MAX_WINDOW_MS} ms"),
            ));
        }
        Ok(FailureQuery {
            address: request.address,
            window_ms: request.window_ms as i64,
            limit: request.limit.clamp(1, MAX_LIMIT) as usize,
            record: request.record,
        })
    }
}

/// Seconds until an address with these failure times (newest first, those within the window)
/// may present a credential again; 0 when it is not locked out.
fn locked_for_sec(newest_first: &[i64], query: &FailureQuery, now_ms: i64) -> u64 {
    let Some(frees_from) = newest_first.get(query.limit - 1) else {
        return 0;
    };
    let wait_ms = frees_from.saturating_add(query.window_ms) - now_ms;
    u64::try_from(wait_ms).map_or(0, |wait_ms| wait_ms.div_ceil(1000))
}

/// The failures of the memory store.
#[derive(Debug, Default)]
pub(crate) struct MemoryFailures {
    /// Address → failure times, oldest first, at most the newest `limit`. A std mutex, never
    /// held across an `.await`.
    times: Mutex<HashMap<String, VecDeque<i64>>>,
}

impl MemoryFailures {
    pub(crate) fn answer(&self, query: &FailureQuery, now_ms: i64) -> u64 {
        let mut all = self.times.lock().unwrap_or_else(PoisonError::into_inner);
        if query.record && all.len() >= MAX_ADDRESSES && !all.contains_key(&query.address) {
            let stalest = all
                .iter()
                .min_by_key(|(_, times)| times.back().copied())
                .map(|(address, _)| address.clone());
            if let Some(stalest) = stalest {
                all.remove(&stalest);
            }
        }
        let times = if query.record {
            all.entry(query.address.clone()).or_default()
        } else {
            match all.get_mut(&query.address) {
                Some(times) => times,
                None => return 0,
            }
        };
        let since = now_ms - query.window_ms;
        while times.front().is_some_and(|at| *at <= since) {
            times.pop_front();
        }
        if query.record {
            times.push_back(now_ms);
        }
        while times.len() > query.limit {
            times.pop_front();
        }
        let newest_first: Vec<i64> = times.iter().rev().copied().collect();
        if times.is_empty() {
            all.remove(&query.address);
        }
        locked_for_sec(&newest_first, query, now_ms)
    }
}

/// A database failure as the admin answers it: 503, try again.
fn unavailable(error: sqlx::Error) -> ApiError {
    tracing::warn!(error = %error, "credential lockout storage failed");
    ApiError::new(
        ErrorCode::StorageUnavailable,
        "the credential lockout's storage is unavailable right now; try again shortly",
    )
    .with_retry_after(2)
}

/// Counts (with `record`) and answers in Postgres; failures older than the window are swept
/// whenever one is recorded.
pub(crate) async fn pg_answer(
    pool: &PgPool,
    query: &FailureQuery,
    now_ms: i64,
) -> Result<u64, ApiError> {
    let since = now_ms - query.window_ms;
    if query.record {
        sqlx::query("DELETE FROM admin_failures WHERE at_ms <= $1")
            .bind(since)
            .execute(pool)
            .await
            .map_err(unavailable)?;
        sqlx::query("INSERT INTO admin_failures (address, at_ms) VALUES ($1, $2)")
            .bind(&query.address)
            .bind(now_ms)
            .execute(pool)
            .await
            .map_err(unavailable)?;
    }
    let rows = sqlx::query(
        "SELECT at_ms FROM admin_failures WHERE address = $1 AND at_ms > $2 \
         ORDER BY at_ms DESC LIMIT $3",
    )
    .bind(&query.address)
    .bind(since)
    .bind(query.limit as i64)
    .fetch_all(pool)
    .await
    .map_err(unavailable)?;
    let newest_first: Vec<i64> = rows
        .iter()
        .map(|row| row.try_get::<i64, _>("at_ms"))
        .collect::<Result<_, _>>()
        .map_err(unavailable)?;
    Ok(locked_for_sec(&newest_first, query, now_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(address: &str, record: bool) -> FailureQuery {
        FailureQuery {
            address: address.to_owned(),
            window_ms: 60_000,
            limit: 3,
            record,
        }
    }

    #[test]
    fn the_limit_locks_the_address_until_the_window_passes() {
        let failures = MemoryFailures::default();
        assert_eq!(failures.answer(&query("a", true), 0), 0);
        assert_eq!(failures.answer(&query("a", true), 1_000), 0);
        assert_eq!(
            failures.answer(&query("a", true), 2_000),
            58,
            "the third locks"
        );
        assert_eq!(failures.answer(&query("a", false), 10_000), 50);
        assert_eq!(
            failures.answer(&query("b", false), 10_000),
            0,
            "another is free"
        );
        assert_eq!(failures.answer(&query("a", false), 59_500), 1);
        assert_eq!(
            failures.answer(&query("a", false), 60_000),
            0,
            "the first aged out"
        );
    }

    #[test]
    fn spread_out_failures_never_lock() {
        let failures = MemoryFailures::default();
        for minute in 0..10 {
            assert_eq!(failures.answer(&query("a", true), minute * 61_000), 0);
        }
    }

    #[test]
    fn questions_are_checked() {
        let request = |address: &str, window_ms: u64| qm_proto::AuthFailuresRequest {
            address: address.to_owned(),
            window_ms,
            limit: 0,
            record: false,
        };
        let parsed = FailureQuery::parse(request("203.0.113.1", 60_000)).expect("valid");
        assert_eq!(parsed.limit, 1, "at least one failure locks");
        assert!(FailureQuery::parse(request("", 60_000)).is_err());
        assert!(FailureQuery::parse(request(&"1".repeat(65), 60_000)).is_err());
        assert!(FailureQuery::parse(request("203.0.113.1", 0)).is_err());
    }
}
