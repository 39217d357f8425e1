//! Threshold activation (`autoActivate`): the controller that turns a room from bypass to
//! active when its arrivals reach the threshold, and back to bypass once it has been calm.
//!
//! Arrivals are the joins and door checks that reach this engine for the room, counted per
//! second over the last minute — only for rooms whose `autoActivate` is enabled, so no other
//! request pays for it. Once a second the controller reads every room and decides:
//! - bypass and arrivals ≥ `threshold`/min → active;
//! - active, activated by this controller, arrivals under half the threshold and nobody
//!   waiting, without a break for `calmSec` → bypass. The gap between the two lines (threshold
//!   and half of it) and the calm period are the hysteresis: a room hovering at the threshold
//!   does not flap.
//!
//! A room an operator made active is never returned to bypass by the controller, and any state
//! an operator sets meanwhile ends the controller's claim. Each change is an ordinary state
//! change (journaled like an operator's) and an audit entry (`room.auto_state`, actor
//! `system`/`auto-activate`) that says why, which the console's audit trail shows. Counts and
//! claims are this engine's memory: after a restart a room the controller had activated stays
//! active until an operator decides.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use qm_core::room::{AutoActivate, RoomState};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::access::Access;
use crate::shutdown::stopped;
use crate::store::Store;

/// Arrivals per second over the last minute.
#[derive(Debug, Default)]
struct Window {
    seconds: VecDeque<(i64, u64)>,
}

impl Window {
    fn add(&mut self, second: i64) {
        match self.seconds.back_mut() {
            Some((last, count)) if *last == second => *count += 1,
            _ => self.seconds.push_back((second, 1)),
        }
        self.prune(second);
    }

    fn prune(&mut self, second: i64) {
        while self
            .seconds
            .front()
            .is_some_and(|(first, _)| *first <= second - 60)
        {
            self.seconds.pop_front();
        }
    }

    fn per_minute(&mut self, second: i64) -> u64 {
        self.prune(second);
        self.seconds.iter().map(|(_, count)| count).sum()
    }
}

/// What the controller remembers of a room between passes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Claim {
    /// The controller made the room active (and may return it to bypass).
    activated: bool,
    /// Since when (epoch ms) the room has been calm without a break.
    calm_since_ms: Option<i64>,
}

/// A change the controller makes, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decision {
    pub(crate) state: RoomState,
    pub(crate) reason: String,
}

/// One room as the controller reads it.
#[derive(Debug, Clone, Copy)]
struct Reading {
    settings: AutoActivate,
    state: RoomState,
    waiting: u64,
    per_minute: u64,
}

/// Decides one room: the pure rule, given what the controller remembered.
fn decide(reading: Reading, claim: &mut Claim, now_ms: i64) -> Option<Decision> {
    let Reading {
        settings,
        state,
        waiting,
        per_minute,
    } = reading;
    match state {
        RoomState::Bypass if per_minute >= settings.threshold => {
            *claim = Claim {
                activated: true,
                calm_since_ms: None,
            };
            Some(Decision {
                state: RoomState::Active,
                reason: format!(
                    "arrivals reached {per_minute}/min, at or over the threshold of {}/min",
                    settings.threshold
                ),
            })
        }
        RoomState::Active if claim.activated => {
            let calm = per_minute * 2 < settings.threshold && waiting == 0;
            if !calm {
                claim.calm_since_ms = None;
                return None;
            }
            let since = *claim.calm_since_ms.get_or_insert(now_ms);
            let calm_ms = settings.calm_sec().saturating_mul(1000);
            if now_ms - since < i64::try_from(calm_ms).unwrap_or(i64::MAX) {
                return None;
            }
            *claim = Claim::default();
            Some(Decision {
                state: RoomState::Bypass,
                reason: format!(
                    "calm for {} s: arrivals {per_minute}/min, under half the threshold of {}/min, and nobody waiting",
                    settings.calm_sec(),
                    settings.threshold
                ),
            })
        }
        // Bypass under the threshold; active by an operator; paused: nothing to do, and no
        // claim survives a state the controller did not set.
        _ => {
            if state != RoomState::Active {
                *claim = Claim::default();
            }
            None
        }
    }
}

/// The controller's memory: arrival windows of the watched rooms and its claims on them.
#[derive(Debug, Default)]
pub(crate) struct AutoActivation {
    watched: RwLock<HashMap<String, Arc<Mutex<Window>>>>,
    claims: Mutex<HashMap<String, Claim>>,
}

impl AutoActivation {
    /// Counts an arrival for `room_id` now when the room is watched; nothing otherwise.
    pub(crate) fn arrived(&self, room_id: &str) {
        self.arrived_at(room_id, qm_core::clock::now_ms);
    }

    fn arrived_at(&self, room_id: &str, now_ms: impl FnOnce() -> i64) {
        let window = self
            .watched
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(room_id)
            .cloned();
        if let Some(window) = window {
            window
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .add(now_ms().div_euclid(1000));
        }
    }

    /// One pass over `rooms` (admin room objects): watches the rooms that ask for it, forgets
    /// the others, and answers the changes to make.
    fn pass(&self, rooms: &[Value], now_ms: i64) -> Vec<(String, Decision)> {
        let mut decisions = Vec::new();
        let mut watched = self.watched.write().unwrap_or_else(PoisonError::into_inner);
        let mut claims = self.claims.lock().unwrap_or_else(PoisonError::into_inner);
        let mut seen = Vec::new();
        for room in rooms {
            let Some(id) = room.get("id").and_then(Value::as_str) else {
                continue;
            };
            let settings = room
                .get("autoActivate")
                .and_then(|value| serde_json::from_value::<AutoActivate>(value.clone()).ok())
                .filter(|settings| settings.enabled);
            let (Some(settings), Some(state)) = (
                settings,
                room.get("state")
                    .and_then(Value::as_str)
                    .and_then(|state| RoomState::parse(state).ok()),
            ) else {
                continue;
            };
            seen.push(id.to_owned());
            let window = watched.entry(id.to_owned()).or_default().clone();
            let per_minute = window
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .per_minute(now_ms.div_euclid(1000));
            let reading = Reading {
                settings,
                state,
                waiting: room.get("waiting").and_then(Value::as_u64).unwrap_or(0),
                per_minute,
            };
            let claim = claims.entry(id.to_owned()).or_default();
            if let Some(decision) = decide(reading, claim, now_ms) {
                decisions.push((id.to_owned(), decision));
            }
        }
        watched.retain(|id, _| seen.contains(id));
        claims.retain(|id, _| seen.contains(id));
        decisions
    }
}

/// Runs the controller once a second until the stop flag is set.
pub(crate) async fn run(
    store: Arc<dyn Store>,
    access: Arc<Access>,
    controller: Arc<AutoActivation>,
    mut stop: watch::Receiver<bool>,
) {
    let mut every = tokio::time::interval(Duration::from_secs(1));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = every.tick() => {}
            () = stopped(&mut stop) => break,
        }
        let rooms = match store.list_rooms().await {
            Ok(rooms) => rooms,
            Err(error) => {
                tracing::debug!(code = %error.code, "auto-activation: rooms unreadable");
                continue;
            }
        };
        let now_ms = qm_core::clock::now_ms();
        for (room_id, decision) in controller.pass(&rooms, now_ms) {
            apply(&*store, &access, &room_id, decision, now_ms).await;
        }
    }
}

async fn apply(store: &dyn Store, access: &Access, room_id: &str, decision: Decision, now_ms: i64) {
    if let Err(error) = store.set_state(room_id.to_owned(), decision.state).await {
        tracing::warn!(room = room_id, code = %error.code, error = %error.message, "auto-activation could not change the room's state");
        return;
    }
    tracing::info!(room = room_id, state = decision.state.as_str(), reason = %decision.reason, "auto-activation");
    let entry = qm_proto::AuditEntry {
        at_ms: now_ms,
        actor_kind: "system".into(),
        actor_name: "auto-activate".into(),
        action: "room.auto_state".into(),
        room_id: room_id.to_owned(),
        summary: json!({ "state": decision.state.as_str(), "reason": decision.reason }).to_string(),
        ..Default::default()
    };
    if let Err(error) = access.append_audit(entry).await {
        tracing::warn!(room = room_id, code = %error.code, "auto-activation's audit entry was not written");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(state: RoomState, per_minute: u64, waiting: u64) -> Reading {
        Reading {
            settings: AutoActivate {
                enabled: true,
                threshold: 100,
                calm_sec: Some(10),
            },
            state,
            waiting,
            per_minute,
        }
    }

    #[test]
    fn a_surge_activates_and_a_calm_period_returns_to_bypass() {
        let mut claim = Claim::default();
        assert_eq!(
            decide(reading(RoomState::Bypass, 99, 0), &mut claim, 0),
            None
        );
        let up = decide(reading(RoomState::Bypass, 100, 0), &mut claim, 1_000);
        assert_eq!(up.map(|decision| decision.state), Some(RoomState::Active));
        // Under the threshold but not under half of it: not calm.
        assert_eq!(
            decide(reading(RoomState::Active, 60, 0), &mut claim, 2_000),
            None
        );
        assert_eq!(claim.calm_since_ms, None);
        // Calm from 3 s; people still waiting at 8 s break it; calm again from 9 s.
        assert_eq!(
            decide(reading(RoomState::Active, 10, 0), &mut claim, 3_000),
            None
        );
        assert_eq!(
            decide(reading(RoomState::Active, 10, 4), &mut claim, 8_000),
            None
        );
        assert_eq!(
            decide(reading(RoomState::Active, 10, 0), &mut claim, 9_000),
            None
        );
        assert_eq!(
            decide(reading(RoomState::Active, 10, 0), &mut claim, 18_999),
            None
        );
        let down = decide(reading(RoomState::Active, 10, 0), &mut claim, 19_000);
        assert_eq!(down.map(|decision| decision.state), Some(RoomState::Bypass));
        assert_eq!(claim, Claim::default());
    }

    #[test]
    fn a_room_an_operator_activated_or_paused_is_left_alone() {
        let mut claim = Claim::default();
        for now in [0, 60_000, 600_000] {
            assert_eq!(
                decide(reading(RoomState::Active, 0, 0), &mut claim, now),
                None
            );
        }
        decide(reading(RoomState::Bypass, 500, 0), &mut claim, 0);
        assert!(claim.activated);
        // The operator pauses it: the claim ends, and a later active is the operator's.
        assert_eq!(
            decide(reading(RoomState::Paused, 0, 0), &mut claim, 1_000),
            None
        );
        assert!(!claim.activated);
        assert_eq!(
            decide(reading(RoomState::Active, 0, 0), &mut claim, 900_000),
            None
        );
    }

    #[test]
    fn arrivals_count_only_the_last_minute_of_watched_rooms() {
        let controller = AutoActivation::default();
        let room = json!({
            "id": "r", "state": "bypass", "waiting": 0,
            "autoActivate": { "enabled": true, "threshold": 3 }
        });
        controller.arrived_at("r", || 0);
        assert!(
            controller.pass(std::slice::from_ref(&room), 0).is_empty(),
            "not watched yet"
        );
        for at in [1_000, 2_000] {
            controller.arrived_at("r", || at);
        }
        assert!(
            controller
                .pass(std::slice::from_ref(&room), 2_000)
                .is_empty()
        );
        controller.arrived_at("r", || 61_500);
        assert!(
            controller
                .pass(std::slice::from_ref(&room), 61_500)
                .is_empty(),
            "1 s fell out"
        );
        controller.arrived_at("r", || 61_600);
        let decisions = controller.pass(std::slice::from_ref(&room), 61_600);
        assert_eq!(decisions.len(), 1);
        assert_eq!(decisions[0].1.state, RoomState::Active);
        assert!(controller.pass(&[], 62_000).is_empty());
        assert!(
            controller
                .watched
                .read()
                .map(|w| w.is_empty())
                .unwrap_or(false),
            "a gone room is forgotten"
        );
    }
}
