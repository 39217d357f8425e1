//! The credential lockout (ADMIN_AUTH_FAIL_PER_MIN): wrong credentials are counted per client
//! address (the gateway's identity rule, `qm_http::client_address`) over a sliding window of
//! ADMIN_AUTH_LOCKOUT_SEC (60 by default: "per minute"). An address that has reached the limit
//! is refused with 429 `too_many_auth_failures` before any credential it sends is read, until its
//! oldest counted failure leaves the window. A right key from one address never resets another.
//!
//! The counts are shared by every admin process: each wrong credential is also counted by the
//! engine (`AuthFailures`, in Postgres on the durable store), and an address is locked out when
//! either this process's own count or the shared one says so. So behind a load balancer an
//! address gets the limit once, not once per instance, and while the engine cannot be reached
//! the local count still holds (ADMIN_KEY is judged without the engine). An address this
//! process already knows to be locked out is refused without asking the engine.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use qm_proto::{AuthFailuresRequest, EngineClient};

/// Addresses tracked at once; past it the address whose newest failure is oldest is forgotten
/// (a flood from many addresses cannot grow memory without bound).
const MAX_ADDRESSES: usize = 100_000;

/// Failure times per client address.
pub(crate) struct AuthFailures {
    limit: usize,
    window: Duration,
    /// A std mutex: map operations only, never held across an `.await`.
    failures: Mutex<HashMap<IpAddr, VecDeque<Instant>>>,
    /// Where the shared count is kept (`None`: this process's count alone, in unit tests).
    engine: Option<EngineClient>,
}

impl AuthFailures {
    pub(crate) fn new(limit: u32, window: Duration) -> AuthFailures {
        AuthFailures {
            limit: usize::try_from(limit).unwrap_or(usize::MAX).max(1),
            window,
            failures: Mutex::new(HashMap::new()),
            engine: None,
        }
    }

    pub(crate) fn from_config(
        config: &qm_core::config::Config,
        engine: EngineClient,
    ) -> AuthFailures {
        AuthFailures {
            engine: Some(engine),
            ..AuthFailures::new(
                config.admin_auth_fail_per_min,
                Duration::from_secs(config.admin_auth_lockout_sec),
            )
        }
    }

    /// The shared count's answer for `client`: seconds locked out, 0 when free; `None` when
    /// the engine cannot say (the local count decides alone).
    async fn shared(&self, client: IpAddr, record: bool) -> Option<u64> {
        let engine = self.engine.as_ref()?;
        let request = AuthFailuresRequest {
            address: client.to_string(),
            window_ms: self.window.as_millis() as u64,
            limit: u32::try_from(self.limit).unwrap_or(u32::MAX),
            record,
        };
        match engine.clone().auth_failures(request).await {
            Ok(reply) => Some(reply.into_inner().locked_for_sec),
            Err(status) => {
                tracing::debug!(%status, "the shared credential lockout could not be asked");
                None
            }
        }
    }

    /// Seconds `client` is locked out for, by this process's count or the shared one.
    pub(crate) async fn locked(&self, client: IpAddr) -> Option<u64> {
        if let Some(wait) = self.locked_at(client, Instant::now()) {
            return Some(wait);
        }
        self.shared(client, false).await.filter(|wait| *wait > 0)
    }

    /// Counts one wrong credential from `client`, here and in the shared count.
    pub(crate) async fn fail(&self, client: IpAddr) {
        self.fail_at(client, Instant::now());
        self.shared(client, true).await;
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
