//! The credential lockout (ADMIN_AUTH_FAIL_PER_MIN): wrong credentials are counted per client
//! address (the gateway's identity rule, `qm_http::client_address`) over a sliding window of
//! ADMIN_AUTH_LOCKOUT_SEC (60 by default: "per minute"). An address that has reached the limit
//! is refused with 429 `too_many_auth_failures` before any credential it sends is read, until its
//! oldest counted failure leaves the window. A right key from one address never resets another.
//!
//! The counts live in this admin process's memory: with several admin instances behind a load
//! balancer each keeps its own, so an address may try up to the limit on each instance. That is
//! documented in OPERATIONS.md; the engine is not asked, so a guessing flood costs it nothing.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Addresses tracked at once; past it the address whose newest failure is oldest is forgotten
/// (a flood from many addresses cannot grow memory without bound).
const MAX_ADDRESSES: usize = 100_000;

/// Failure times per client address.
pub(crate) struct AuthFailures {
    limit: usize,
    window: Duration,
    /// A std mutex: map operations only, never held across an `.await`.
    failures: Mutex<HashMap<IpAddr, VecDeque<Instant>>>,
}

impl AuthFailures {
    pub(crate) fn new(limit: u32, window: Duration) -> AuthFailures {
        AuthFailures {
            limit: usize::try_from(limit).unwrap_or(usize::MAX).max(1),
            window,
            failures: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn from_config(config: &qm_core::config::Config) -> AuthFailures {
        AuthFailures::new(
            config.admin_auth_fail_per_min,
            Duration::from_secs(config.admin_auth_lockout_sec),
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, VecDeque<Instant>>> {
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether `client` is locked out at `now`: `Some(seconds until it is let in again)`.
    pub(crate) fn locked_at(&self, client: IpAddr, now: Instant) -> Option<u64> {
        let mut failures = self.lock();
        let times = failures.get_mut(&client)?;
        while times
            .front()
            .is_some_and(|first| now.duration_since(*first) >= self.window)
        {
            times.pop_front();
        }
        if times.is_empty() {
            failures.remove(&client);
            return None;
        }
        if times.len() < self.limit {
            return None;
        }
        // Let in again once enough failures have aged out to drop below the limit.
        let index = times.len() - self.limit;
        let frees_at = times.get(index).map(|time| *time + self.window)?;
        let wait = frees_at.saturating_duration_since(now);
        Some(wait.as_secs() + u64::from(wait.subsec_nanos() > 0))
    }

    pub(crate) fn locked(&self, client: IpAddr) -> Option<u64> {
        self.locked_at(client, Instant::now())
    }

    /// Counts one wrong credential from `client` at `now`.
    pub(crate) fn fail_at(&self, client: IpAddr, now: Instant) {
        let mut failures = self.lock();
        if failures.len() >= MAX_ADDRESSES && !failures.contains_key(&client) {
            let stalest = failures
                .iter()
                .min_by_key(|(_, times)| times.back().copied())
                .map(|(address, _)| *address);
            if let Some(stalest) = stalest {
                failures.remove(&stalest);
            }
        }
        let times = failures.entry(client).or_default();
        times.push_back(now);
        // Only the newest `limit` failures can ever matter.
        while times.len() > self.limit {
            times.pop_front();
        }
    }

    pub(crate) fn fail(&self, client: IpAddr) {
        self.fail_at(client, Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(203, 0, 113, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(203, 0, 113, 2));

    #[test]
    fn the_limit_locks_the_address_until_the_window_passes() {
        let failures = AuthFailures::new(3, Duration::from_secs(60));
        let start = Instant::now();
        for second in 0..3 {
            assert_eq!(failures.locked_at(A, start), None);
            failures.fail_at(A, start + Duration::from_secs(second));
        }
        let now = start + Duration::from_secs(10);
        assert_eq!(failures.locked_at(A, now), Some(50));
        assert_eq!(failures.locked_at(B, now), None, "another address is free");
        // The first failure ages out at 60 s: one under the limit again.
        assert_eq!(
            failures.locked_at(A, start + Duration::from_secs(59)),
            Some(1)
        );
        assert_eq!(failures.locked_at(A, start + Duration::from_secs(60)), None);
    }

    #[test]
    fn spread_out_failures_never_lock() {
        let failures = AuthFailures::new(2, Duration::from_secs(60));
        let start = Instant::now();
        for minute in 0..10 {
            let at = start + Duration::from_secs(minute * 61);
            assert_eq!(failures.locked_at(A, at), None);
            failures.fail_at(A, at);
        }
    }
}
