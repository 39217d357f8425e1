//! What the gate saw of each inline room's origin, for the engine's rate controller (autotune
//! of a room without a `healthUrl`): every forwarded request's time to the answer's head and
//! whether the origin answered at all (refused, unreachable, not in time or a 5xx count as
//! failed). Kept as a uniform sample of at most [`SAMPLE_PER_ROOM`] answers per room and sent to
//! the engine every [`REPORT_EVERY`] in one `OriginAnswers` call, so the cost to a forwarded
//! request is one short lock and a busy origin never costs more than a fixed report.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use qm_proto::{OriginAnswersRequest, RoomOriginAnswers};

use qm_core::shutdown::stopped;

use crate::GatewayState;

/// Answers kept per room between two reports.
const SAMPLE_PER_ROOM: usize = 200;
/// How often the sample goes to the engine.
const REPORT_EVERY: Duration = Duration::from_secs(1);

/// A uniform sample of one room's answers (reservoir sampling: every answer since the last
/// report had the same chance to be kept).
#[derive(Default)]
struct Reservoir {
    seen: u64,
    latency_ms: Vec<u32>,
    ok: Vec<bool>,
}

impl Reservoir {
    fn offer(&mut self, latency_ms: u32, ok: bool) {
        self.seen += 1;
        if self.latency_ms.len() < SAMPLE_PER_ROOM {
            self.latency_ms.push(latency_ms);
            self.ok.push(ok);
            return;
        }
        let slot = rand::random_range(0..self.seen);
        if let Ok(slot) = usize::try_from(slot)
            && slot < SAMPLE_PER_ROOM
        {
            self.latency_ms[slot] = latency_ms;
            self.ok[slot] = ok;
        }
    }
}

/// One gateway's account of its inline origins' answers since the last report.
#[derive(Default)]
pub(super) struct OriginAnswers {
    rooms: Mutex<HashMap<String, Reservoir>>,
    reporting: AtomicBool,
}

impl OriginAnswers {
    /// Counts one forwarded request's answer; the first starts the reporter.
    pub(super) fn record(
        self: &Arc<Self>,
        state: &GatewayState,
        room_id: &str,
        took: Duration,
        ok: bool,
    ) {
        let latency_ms = u32::try_from(took.as_millis()).unwrap_or(u32::MAX);
        {
            let mut rooms = self.rooms.lock().unwrap_or_else(PoisonError::into_inner);
            match rooms.get_mut(room_id) {
                Some(reservoir) => reservoir.offer(latency_ms, ok),
                None => rooms
                    .entry(room_id.to_owned())
                    .or_default()
                    .offer(latency_ms, ok),
            }
        }
        if !self.reporting.swap(true, Ordering::Relaxed) {
            tokio::spawn(report(Arc::downgrade(self), state.clone()));
        }
    }

    /// The sample since the last call, emptied.
    fn take(&self) -> Vec<RoomOriginAnswers> {
        let rooms = std::mem::take(&mut *self.rooms.lock().unwrap_or_else(PoisonError::into_inner));
        rooms
            .into_iter()
            .map(|(room_id, reservoir)| RoomOriginAnswers {
                room_id,
                latency_ms: reservoir.latency_ms,
                ok: reservoir.ok,
            })
            .collect()
    }
}

/// Sends the sample every [`REPORT_EVERY`] until the gateway stops. Best effort: a report the
/// engine cannot take is dropped (the controller then holds the rate for want of samples).
async fn report(answers: Weak<OriginAnswers>, state: GatewayState) {
    let mut shutdown = state.shutdown.clone();
    let mut every = tokio::time::interval(REPORT_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = every.tick() => {}
            () = stopped(&mut shutdown) => return,
        }
        let Some(answers) = answers.upgrade() else {
            return;
        };
        let rooms = answers.take();
        drop(answers);
        if rooms.is_empty() {
            continue;
        }
        let sent = state
            .engine
            .clone()
            .origin_answers(OriginAnswersRequest { rooms })
            .await;
        if let Err(status) = sent {
            tracing::debug!(code = ?status.code(), "inline origin answers not reported");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_is_bounded_and_keeps_the_error_share() {
        let mut reservoir = Reservoir::default();
        for index in 0..10_000u32 {
            reservoir.offer(index % 100, index % 10 != 0);
        }
        assert_eq!(reservoir.seen, 10_000);
        assert_eq!(reservoir.latency_ms.len(), SAMPLE_PER_ROOM);
        assert_eq!(reservoir.ok.len(), SAMPLE_PER_ROOM);
        let failed = reservoir.ok.iter().filter(|ok| !**ok).count();
        // A tenth failed; a uniform sample of 200 holds about 20 of them (well inside 5–50).
        assert!((5..=50).contains(&failed), "{failed} failed in the sample");
    }
}
