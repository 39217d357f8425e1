//! A short per-room history for the console's charts (`GET /api/admin/metrics`): one sample
//! every 10 s for the last hour of each room's tickets issued, passes granted and line depth.
//!
//! The samples are read from the store's own admin room objects (the numbers the listing
//! shows), so the chart and the listing never disagree. The ring lives in this engine's memory
//! and is not journaled: a restarted engine charts from its start, and with several engines
//! each answers from what it sampled itself. A reader always gets one more point, the room as it
//! is now, and — for a room created since this engine started — the room's creation, when every
//! counter was zero by definition.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use qm_proto::HistorySample;
use serde_json::Value;
use tokio::sync::watch;

use crate::shutdown::stopped;
use crate::store::Store;

/// Interval between samples.
pub(crate) const SAMPLE_EVERY: Duration = Duration::from_secs(10);
/// Samples kept per room: one hour.
pub(crate) const SAMPLES_KEPT: usize = 360;

/// One room's ring and the generation it belongs to (a re-created room starts a new ring).
#[derive(Debug, Default)]
struct RoomHistory {
    generation: u64,
    samples: VecDeque<HistorySample>,
}

/// Every room's recent samples.
#[derive(Debug)]
pub struct History {
    /// Room id → ring. A std mutex: pushes and copies only, never held across an `.await`.
    rooms: Mutex<HashMap<String, RoomHistory>>,
    /// When this engine started: a room created later is known to have started at zero.
    started_at_ms: i64,
}

/// The sample a room object describes, with its generation and creation instant.
pub(crate) fn sample_of(room: &Value, at_ms: i64) -> (HistorySample, u64, i64) {
    let number = |field: &str| room.get(field).and_then(Value::as_u64).unwrap_or(0);
    let sample = HistorySample {
        at_ms,
        // Tickets are minted from 1, so the next one says how many were issued.
        joined_total: number("nextTicket").saturating_sub(1),
        passed_total: number("passedTotal"),
        waiting: number("waiting"),
    };
    let created_at = room.get("createdAt").and_then(Value::as_i64).unwrap_or(0);
    (sample, number("generation"), created_at)
}

impl History {
    pub fn new(started_at_ms: i64) -> History {
        History {
            rooms: Mutex::new(HashMap::new()),
            started_at_ms,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, RoomHistory>> {
        self.rooms
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records one sample of every listed room; rooms no longer listed are forgotten.
    pub(crate) fn record(&self, rooms: &[Value], at_ms: i64) {
        let mut table = self.lock();
        let mut listed = std::collections::HashSet::new();
        for room in rooms {
            let Some(room_id) = room.get("id").and_then(Value::as_str) else {
                continue;
            };
            listed.insert(room_id.to_owned());
            let (sample, generation, _) = sample_of(room, at_ms);
            let history = table.entry(room_id.to_owned()).or_default();
            if history.generation != generation {
                *history = RoomHistory {
                    generation,
                    samples: VecDeque::new(),
                };
            }
            if history.samples.len() == SAMPLES_KEPT {
                history.samples.pop_front();
            }
            history.samples.push_back(sample);
        }
        table.retain(|room_id, _| listed.contains(room_id));
    }

    /// The samples of `room` (its object as it is now, read at `now_ms`) from `since_ms` on,
    /// oldest first, ending with the live point.
    pub(crate) fn read(&self, room: &Value, since_ms: i64, now_ms: i64) -> Vec<HistorySample> {
        let room_id = room.get("id").and_then(Value::as_str).unwrap_or("");
        let (live, generation, created_at) = sample_of(room, now_ms);
        let mut samples: Vec<HistorySample> = self
            .lock()
            .get(room_id)
            .filter(|history| history.generation == generation)
            .map(|history| {
                history
                    .samples
                    .iter()
                    .filter(|sample| sample.at_ms >= since_ms && sample.at_ms < now_ms)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        let first_at = samples.first().map_or(now_ms, |sample| sample.at_ms);
        if created_at >= self.started_at_ms && created_at >= since_ms && created_at < first_at {
            samples.insert(
                0,
                HistorySample {
                    at_ms: created_at,
                    ..HistorySample::default()
                },
            );
        }
        samples.push(live);
        samples
    }
}

/// Samples every room each [`SAMPLE_EVERY`] until the stop flag is set.
pub(crate) async fn run_sampler(
    store: Arc<dyn Store>,
    history: Arc<History>,
    mut stop: watch::Receiver<bool>,
) {
    let mut interval = tokio::time::interval(SAMPLE_EVERY);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            () = stopped(&mut stop) => break,
        }
        match store.list_rooms().await {
            Ok(rooms) => history.record(&rooms, qm_core::clock::now_ms()),
            Err(error) => {
                tracing::warn!(code = %error.code, error = %error.message, "history sample failed");
            }
        }
    }
    tracing::debug!("history sampler stopped");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn room(next_ticket: u64, passed: u64, waiting: u64, generation: u64) -> Value {
        json!({
            "id": "r", "nextTicket": next_ticket, "passedTotal": passed, "waiting": waiting,
            "generation": generation, "createdAt": 1_000,
        })
    }

    #[test]
    fn samples_then_the_live_point() {
        let history = History::new(0);
        history.record(&[room(1, 0, 0, 1)], 10_000);
        history.record(&[room(4, 1, 2, 1)], 20_000);
        let read = history.read(&room(6, 2, 3, 1), 0, 25_000);
        let joined: Vec<u64> = read.iter().map(|sample| sample.joined_total).collect();
        assert_eq!(joined, vec![0, 0, 3, 5], "creation, two samples, live");
        assert_eq!(read[0].at_ms, 1_000);
        assert_eq!(read.last().map(|sample| sample.waiting), Some(3));
        // The range cuts old samples (and the creation point with them).
        let recent = history.read(&room(6, 2, 3, 1), 15_000, 25_000);
        assert_eq!(recent.len(), 2);
    }

    #[test]
    fn a_room_created_before_the_engine_started_gets_no_invented_origin() {
        let history = History::new(5_000);
        let read = history.read(&room(6, 2, 3, 1), 0, 25_000);
        assert_eq!(read.len(), 1, "only the live point");
    }

    #[test]
    fn a_recreated_room_starts_a_new_ring_and_a_deleted_one_is_forgotten() {
        let history = History::new(0);
        history.record(&[room(9, 0, 8, 1)], 10_000);
        history.record(&[room(1, 0, 0, 2)], 20_000);
        let read = history.read(&room(1, 0, 0, 2), 2_000, 25_000);
        assert_eq!(read.len(), 2);
        history.record(&[], 30_000);
        assert!(history.lock().is_empty());
    }

    #[test]
    fn the_ring_keeps_one_hour() {
        let history = History::new(0);
        for step in 0..(SAMPLES_KEPT as i64 + 10) {
            history.record(&[room(1, 0, 0, 1)], step * 10_000);
        }
        assert_eq!(history.lock()["r"].samples.len(), SAMPLES_KEPT);
    }
}
