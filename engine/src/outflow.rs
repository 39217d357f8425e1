//! The outflow ticker: one slice per calendar second for every room. It sleeps until just past
//! the next whole second of the wall clock, so each calendar second holds exactly one slice and
//! a room's per-second admissions line up with anyone counting them by the clock.

use std::sync::Arc;
use std::time::Duration;

use qm_core::clock::now_ms;
use tokio::sync::watch;

use crate::shutdown::stopped;
use crate::store::Store;

/// How far past the second boundary the tick lands: enough that a timer firing a hair early
/// (monotonic and wall clocks drift apart under NTP) still falls in the intended second.
const TICK_MARGIN_MS: i64 = 5;

/// Runs until the stop flag is set.
pub(crate) async fn run_ticker(store: Arc<dyn Store>, mut stop: watch::Receiver<bool>) {
    tracing::debug!("outflow ticker started");
    loop {
        let now = now_ms();
        let next_tick = (now.div_euclid(1000) + 1) * 1000 + TICK_MARGIN_MS;
        let sleep = Duration::from_millis((next_tick - now).max(1) as u64);
        tokio::select! {
            () = tokio::time::sleep(sleep) => {}
            () = stopped(&mut stop) => break,
        }
        if let Err(error) = store.tick(now_ms()).await {
            tracing::warn!(code = %error.code, error = %error.message, "outflow tick failed");
        }
    }
    tracing::debug!("outflow ticker stopped");
}
