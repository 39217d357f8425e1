//! Per-client limits of this process: the join, door-check, status, page and stream-open rate
//! limiters (JOIN_LIMIT_PER_MIN, CHECK_LIMIT_PER_MIN, STATUS_LIMIT_PER_MIN, PAGE_LIMIT_PER_MIN,
//! STREAM_OPEN_LIMIT_PER_MIN; a token bucket per client address) and the open-stream counters
//! (SSE_MAX_TOTAL, SSE_PER_IP). Both are sharded maps behind short std mutexes, never held across
//! an await, so a surge of concurrent joins from many addresses does not queue on one lock.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use qm_core::{ApiError, ErrorCode};

const SHARDS: usize = 32;
/// A shard sweeps its full (idle) buckets after this many new addresses in it.
const SWEEP_EVERY_INSERTS: usize = 256;
/// What the stream limits tell a refused client to wait, per the spec.
pub(crate) const STREAM_RETRY_AFTER_SEC: u64 = 5;

/// One shard: its entries and how many were added since it last swept.
struct Shard<V> {
    entries: HashMap<IpAddr, V>,
    inserts_since_sweep: usize,
}

/// `SHARDS` maps keyed by address, each behind its own lock.
struct ShardedMap<V> {
    hasher: std::collections::hash_map::RandomState,
    shards: Vec<Mutex<Shard<V>>>,
}

impl<V> ShardedMap<V> {
    fn new() -> Self {
        ShardedMap {
            hasher: std::collections::hash_map::RandomState::new(),
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        entries: HashMap::new(),
                        inserts_since_sweep: 0,
                    })
                })
                .collect(),
        }
    }

    fn shard(&self, address: &IpAddr) -> MutexGuard<'_, Shard<V>> {
        let index = (self.hasher.hash_one(address) as usize) % SHARDS;
        // A panic while holding a shard leaves plain counters behind: keep using them.
        self.shards[index]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

struct Bucket {
    tokens: f64,
    updated_at: Instant,
}

/// A token bucket per client address: `limit_per_minute` joins in a burst, refilled smoothly.
pub(crate) struct JoinRateLimiter {
    buckets: ShardedMap<Bucket>,
    capacity: f64,
    refill_per_sec: f64,
    /// Requests refused since start (`qm_gateway_rate_limited_total`).
    refused: AtomicU64,
}

impl JoinRateLimiter {
    /// Requests this limiter refused since the process started.
    pub(crate) fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    pub(crate) fn per_minute(limit_per_minute: u32) -> JoinRateLimiter {
        let capacity = f64::from(limit_per_minute.max(1));
        JoinRateLimiter {
            buckets: ShardedMap::new(),
            capacity,
            refill_per_sec: capacity / 60.0,
            refused: AtomicU64::new(0),
        }
    }

    /// Takes one join from `address`'s bucket, or says how many seconds until one is available.
    pub(crate) fn try_acquire(&self, address: IpAddr, now: Instant) -> Result<(), u64> {
        let mut shard = self.buckets.shard(&address);
        let capacity = self.capacity;
        let refill_per_sec = self.refill_per_sec;
        let mut inserted = false;
        let bucket = shard.entries.entry(address).or_insert_with(|| {
            inserted = true;
            Bucket {
                tokens: capacity,
                updated_at: now,
            }
        });
        let elapsed = now
            .saturating_duration_since(bucket.updated_at)
            .as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * refill_per_sec).min(capacity);
        bucket.updated_at = now;
        let outcome = if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            let wait_sec = ((1.0 - bucket.tokens) / refill_per_sec).ceil();
            self.refused.fetch_add(1, Ordering::Relaxed);
            Err((wait_sec as u64).max(1))
        };
        if inserted {
            shard.inserts_since_sweep += 1;
        }
        if shard.inserts_since_sweep >= SWEEP_EVERY_INSERTS {
            // A full bucket is the same as no bucket: forget idle addresses.
            shard.inserts_since_sweep = 0;
            shard.entries.retain(|_, bucket| {
                let elapsed = now
                    .saturating_duration_since(bucket.updated_at)
                    .as_secs_f64();
                bucket.tokens + elapsed * refill_per_sec < capacity
            });
        }
        outcome
    }

    /// Takes one join from `address`'s bucket now, or answers the 429 with its Retry-After.
    pub(crate) fn admit(&self, address: IpAddr) -> Result<(), ApiError> {
        self.try_acquire(address, Instant::now())
            .map_err(JoinRateLimiter::refusal)
    }

    /// Takes one from `address`'s bucket now, or answers 429 rate_limited naming `what` (e.g.
    /// "status reads") with its Retry-After.
    pub(crate) fn admit_as(&self, address: IpAddr, what: &str) -> Result<(), ApiError> {
        self.try_acquire(address, Instant::now())
            .map_err(|retry_after_sec| {
                ApiError::new(
                    ErrorCode::RateLimited,
                    format!("too many {what} from this address; wait a moment and try again"),
                )
                .with_retry_after(retry_after_sec)
            })
    }

    /// The 429 a refused join answers.
    pub(crate) fn refusal(retry_after_sec: u64) -> ApiError {
        ApiError::new(
            ErrorCode::RateLimited,
            "too many joins from this address; wait a moment and try again",
        )
        .with_retry_after(retry_after_sec)
    }

    /// The 429 a refused door check answers.
    pub(crate) fn check_refusal(retry_after_sec: u64) -> ApiError {
        ApiError::new(
            ErrorCode::RateLimited,
            "too many door checks for this client address; wait a moment and try again",
        )
        .with_retry_after(retry_after_sec)
    }

    #[cfg(test)]
    fn tracked_addresses(&self) -> usize {
        self.buckets
            .shards
            .iter()
            .map(|shard| shard.lock().map(|shard| shard.entries.len()).unwrap_or(0))
            .sum()
    }
}

/// Open event streams of this process, in total and per client address.
pub(crate) struct StreamLimits {
    open_total: AtomicUsize,
    per_address: ShardedMap<usize>,
    max_total: usize,
    max_per_address: usize,
}

/// One open stream's place in the counters, given back when the stream is dropped.
pub(crate) struct StreamPermit {
    limits: Arc<StreamLimits>,
    address: IpAddr,
}

impl StreamLimits {
    pub(crate) fn new(max_total: usize, max_per_address: usize) -> Arc<StreamLimits> {
        Arc::new(StreamLimits {
            open_total: AtomicUsize::new(0),
            per_address: ShardedMap::new(),
            max_total,
            max_per_address,
        })
    }

    /// A permit for one more stream from `address`, or the spec's refusal: 503 sse_capacity at
    /// SSE_MAX_TOTAL, 429 sse_per_ip_limit at SSE_PER_IP, both with Retry-After: 5.
    pub(crate) fn acquire(self: &Arc<Self>, address: IpAddr) -> Result<StreamPermit, ApiError> {
        let previous_total = self.open_total.fetch_add(1, Ordering::AcqRel);
        if previous_total >= self.max_total {
            self.open_total.fetch_sub(1, Ordering::AcqRel);
            return Err(ApiError::new(
                ErrorCode::SseCapacity,
                "this server holds as many live streams as it can; retry shortly",
            )
            .with_retry_after(STREAM_RETRY_AFTER_SEC));
        }
        let mut shard = self.per_address.shard(&address);
        let open_here = shard.entries.entry(address).or_insert(0);
        if *open_here >= self.max_per_address {
            drop(shard);
            self.open_total.fetch_sub(1, Ordering::AcqRel);
            return Err(ApiError::new(
                ErrorCode::SsePerIpLimit,
                "too many live streams from this address",
            )
            .with_retry_after(STREAM_RETRY_AFTER_SEC));
        }
        *open_here += 1;
        Ok(StreamPermit {
            limits: self.clone(),
            address,
        })
    }

    /// Streams open right now.
    pub(crate) fn open_total(&self) -> usize {
        self.open_total.load(Ordering::Acquire)
    }
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        let mut shard = self.limits.per_address.shard(&self.address);
        if let Some(open_here) = shard.entries.get_mut(&self.address) {
            *open_here = open_here.saturating_sub(1);
            if *open_here == 0 {
                shard.entries.remove(&self.address);
            }
        }
        drop(shard);
        self.limits.open_total.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn address(last: u8) -> IpAddr {
        IpAddr::from([203, 0, 113, last])
    }

    #[test]
    fn a_burst_up_to_the_limit_then_refusals_with_a_wait() {
        let limiter = JoinRateLimiter::per_minute(3);
        let start = Instant::now();
        for _ in 0..3 {
            assert_eq!(limiter.try_acquire(address(1), start), Ok(()));
        }
        // 3 per minute refills one every 20 s.
        assert_eq!(limiter.try_acquire(address(1), start), Err(20));
        // Another address has its own bucket.
        assert_eq!(limiter.try_acquire(address(2), start), Ok(()));
        assert_eq!(
            limiter.try_acquire(address(1), start + Duration::from_secs(10)),
            Err(10)
        );
        assert_eq!(
            limiter.try_acquire(address(1), start + Duration::from_secs(20)),
            Ok(())
        );
        assert!(
            limiter
                .try_acquire(address(1), start + Duration::from_secs(20))
                .is_err()
        );
    }

    #[test]
    fn the_bucket_never_holds_more_than_the_limit() {
        let limiter = JoinRateLimiter::per_minute(2);
        let start = Instant::now();
        let later = start + Duration::from_secs(3600);
        assert!(limiter.try_acquire(address(1), start).is_ok());
        assert!(limiter.try_acquire(address(1), later).is_ok());
        assert!(limiter.try_acquire(address(1), later).is_ok());
        assert!(limiter.try_acquire(address(1), later).is_err());
    }

    #[test]
    fn idle_addresses_are_forgotten() {
        let limiter = JoinRateLimiter::per_minute(60);
        let start = Instant::now();
        let count = SHARDS * SWEEP_EVERY_INSERTS * 2;
        for index in 0..count {
            let address = IpAddr::from((index as u32).to_be_bytes());
            assert!(limiter.try_acquire(address, start).is_ok());
        }
        // Sweeps so far found every bucket in use (just spent from).
        assert!(
            limiter.tracked_addresses() >= count * 3 / 4,
            "{}",
            limiter.tracked_addresses()
        );
        // A minute later every bucket is full again; new arrivals sweep them away.
        let later = start + Duration::from_secs(61);
        for index in 0..count {
            let address = IpAddr::from((u32::MAX - index as u32).to_be_bytes());
            assert!(limiter.try_acquire(address, later).is_ok());
        }
        assert!(
            limiter.tracked_addresses() < count * 3 / 2,
            "{}",
            limiter.tracked_addresses()
        );
    }

    #[test]
    fn stream_limits_per_address_and_in_total() {
        let limits = StreamLimits::new(3, 2);
        let first = limits.acquire(address(1)).expect("first");
        let _second = limits.acquire(address(1)).expect("second");
        let per_address = limits
            .acquire(address(1))
            .err()
            .expect("third from one address");
        assert_eq!(per_address.code, ErrorCode::SsePerIpLimit);
        assert_eq!(per_address.retry_after_sec, Some(5));
        let _other = limits.acquire(address(2)).expect("another address");
        let total = limits.acquire(address(3)).err().expect("over the total");
        assert_eq!(total.code, ErrorCode::SseCapacity);
        assert_eq!(total.retry_after_sec, Some(5));
        assert_eq!(limits.open_total(), 3);
        drop(first);
        assert_eq!(limits.open_total(), 2);
        assert!(
            limits.acquire(address(1)).is_ok(),
            "a closed stream gives its place back"
        );
    }
}
