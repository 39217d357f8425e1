//! The admin room object: the configuration (camelCase, `null` where unset) with the engine's
//! facts and live stats as top-level fields, and `estWaitSec`, the wait a visitor joining now
//! can be promised — `null` whenever the room admits nobody.

use qm_core::eta::{wait_after_opening, wait_for_position};
use qm_core::room::{EffectiveState, RoomState};
use serde_json::{Map, Value, json};

use super::room::Room;

/// Live numbers an operator reads beside the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveStats {
    pub waiting: u64,
    pub passed_last_min: u64,
    pub oldest_wait_sec: u64,
    pub active_passes: u64,
    pub passed_total: u64,
    pub next_ticket: u64,
    /// `None` = unbounded (the room admits nobody).
    pub est_wait_sec: Option<u64>,
    /// True when the estimate is only a floor (doors still shut: the draw decides the rest).
    pub est_wait_floor: bool,
}

impl Room {
    pub fn live_stats(&self, now_ms: i64) -> LiveStats {
        let waiting = self.waiting();
        let passed_last_min = self.passed_last_minute(now_ms);
        let oldest_wait_sec = self.oldest_wait_sec(now_ms);
        let (est_wait_sec, est_wait_floor) =
            self.estimated_wait(now_ms, waiting, passed_last_min, oldest_wait_sec);
        LiveStats {
            waiting,
            passed_last_min,
            oldest_wait_sec,
            active_passes: self.active_passes(now_ms),
            passed_total: self.passed_total,
            next_ticket: self.next_ticket,
            est_wait_sec,
            est_wait_floor,
        }
    }

    fn estimated_wait(
        &self,
        now_ms: i64,
        waiting: u64,
        passed_last_min: u64,
        oldest_wait_sec: u64,
    ) -> (Option<u64>, bool) {
        let rate = self.config.rate_per_minute;
        let admits_nobody = self.config.state == RoomState::Paused || rate == 0;
        if self.effective_state(now_ms) == EffectiveState::Scheduled {
            // Doors shut: the clock, plus the drain of everyone already holding a ticket.
            let opens_at_ms = self.config.opens_at.unwrap_or(now_ms);
            // Bypass passes everyone at the open: the clock alone.
            let (drained, admitting) = match self.config.state {
                RoomState::Bypass => (0, true),
                _ => (waiting, !admits_nobody),
            };
            let wait = wait_after_opening(opens_at_ms, now_ms, drained, rate, admitting);
            return (wait, true);
        }
        if self.config.state == RoomState::Bypass {
            return (Some(0), false);
        }
        if admits_nobody {
            return (None, false);
        }
        // Measured outflow of zero: people wait, nobody passed for a minute, the head is stuck.
        if waiting > 0 && passed_last_min == 0 && oldest_wait_sec >= 60 {
            return (None, false);
        }
        if waiting == 0 && self.free_slots(now_ms) > 0 {
            return (Some(0), false);
        }
        (wait_for_position(waiting + 1, rate, true), false)
    }

    /// The admin room object (GetRoom, ListRooms and every operator reply's `room_json`).
    pub fn admin_json(&self, now_ms: i64) -> Value {
        let mut object = match serde_json::to_value(&self.config) {
            Ok(Value::Object(object)) => object,
            _ => Map::new(),
        };
        let stats = self.live_stats(now_ms);
        let extra = json!({
            "rate": self.config.rate_per_minute,
            "effectiveState": self.effective_state(now_ms).as_str(),
            "generation": self.generation,
            "seq": self.seq,
            "createdAt": self.created_at_ms,
            "updatedAt": self.updated_at_ms,
            "preQueue": self.pre_count(),
            "waiting": stats.waiting,
            "passedLastMin": stats.passed_last_min,
            "oldestWaitSec": stats.oldest_wait_sec,
            "activePasses": stats.active_passes,
            "passedTotal": stats.passed_total,
            "ejectedTotal": self.ejected_total,
            "purgedTotal": self.purged_total,
            "nextTicket": stats.next_ticket,
            "estWaitSec": stats.est_wait_sec,
            "estWaitFloor": stats.est_wait_floor,
            // Ghost tickets (QM-345): passes usable at the door that hold no slot, and waiting
            // tickets whose holder is away (counted from the head, at most 10,000 looked at).
            "slotlessPasses": self.slotless_passes(now_ms),
            "absentWaiting": self.absent_waiting(now_ms),
            // Door sessions open now (admitted visitors browsing the site).
            "doorSessions": self.live_door_sessions(now_ms),
        });
        if let Value::Object(extra) = extra {
            object.extend(extra);
        }
        Value::Object(object)
    }
}
