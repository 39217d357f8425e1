//! The alert rules, as a pure function of what the evaluator saw: each evaluation takes one
//! observation (the engine's answer and every room's counters) and returns the transitions it
//! causes. Nothing here does I/O, so the hysteresis is tested with a scripted clock.
//!
//! The rules (OPERATIONS.md, Alerts):
//! - `surge` (per room): arrivals over the last `surge_window_sec`, scaled to a minute, at or
//!   over `surge_per_min`; clear only under half of it.
//! - `stalled` (per room): people waiting and nobody admitted for `stall_sec` (paused, a rate
//!   of 0, or an outflow that stopped); a room whose doors are still shut is not stalled.
//! - `storage`: the engine answers but says its store cannot persist (Valkey or Postgres).
//! - `readiness`: the engine does not answer this process (down, unreachable, or refusing its
//!   credential). Storage trouble also takes readiness away; it pages once, as `storage`.
//!
//! Hysteresis: an alert fires the first evaluation its condition holds and resolves only after
//! the condition has stayed clear for `resolve_sec`; a condition that comes back within that
//! time keeps the one alert firing. While the engine does not answer, the room and storage
//! alerts keep their state: nothing can be seen, so nothing resolves.

use std::collections::{BTreeMap, HashMap, VecDeque};

use qm_core::config::AlertSettings;

/// One rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Rule {
    Surge,
    Stalled,
    Storage,
    Readiness,
}

impl Rule {
    pub(crate) const ALL: [Rule; 4] = [Rule::Surge, Rule::Stalled, Rule::Storage, Rule::Readiness];

    /// The rule's name in the API.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Rule::Surge => "surge",
            Rule::Stalled => "stalled",
            Rule::Storage => "storage",
            Rule::Readiness => "readiness",
        }
    }

    /// Alertmanager's `alertname` label.
    pub(crate) fn alertname(self) -> &'static str {
        match self {
            Rule::Surge => "QmRoomSurge",
            Rule::Stalled => "QmRoomStalled",
            Rule::Storage => "QmStorageUnavailable",
            Rule::Readiness => "QmEngineUnreachable",
        }
    }

    pub(crate) fn severity(self) -> &'static str {
        match self {
            Rule::Surge => "warning",
            Rule::Stalled | Rule::Storage | Rule::Readiness => "critical",
        }
    }
}

/// What an alert is about: a rule, and the room for the per-room rules.
pub(crate) type Key = (Rule, Option<String>);

/// One room as the evaluator saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RoomSeen {
    pub(crate) id: String,
    /// Configured state: active | paused | bypass.
    pub(crate) state: String,
    /// Effective state: adds scheduled (doors still shut).
    pub(crate) effective_state: String,
    pub(crate) rate_per_minute: u64,
    pub(crate) waiting: u64,
    pub(crate) pre_queue: u64,
    /// Tickets issued since the room was created.
    pub(crate) joined_total: u64,
    /// Passes granted since the room was created.
    pub(crate) passed_total: u64,
    /// When the room was created: it had no arrivals then.
    pub(crate) created_at_ms: i64,
}

/// The engine as the evaluator saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EngineSeen {
    /// The engine did not answer; the reason as readiness words it.
    Unreachable(String),
    Answered {
        storage_ready: bool,
        store: String,
        rooms: Vec<RoomSeen>,
    },
}

/// A change of an alert's state, to record and to send.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Transition {
    pub(crate) rule: Rule,
    pub(crate) room: Option<String>,
    pub(crate) firing: bool,
    pub(crate) at_ms: i64,
    /// When the alert started firing (equal to `at_ms` on the firing transition).
    pub(crate) started_at_ms: i64,
    /// One line for a person: what is wrong, with the figures that made it fire.
    pub(crate) summary: String,
}

/// An alert that is firing.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Firing {
    pub(crate) since_ms: i64,
    /// When its condition was last seen clear, while it waits out `resolve_sec`.
    pub(crate) clear_since_ms: Option<i64>,
    pub(crate) summary: String,
}

/// Per-room memory: the arrival samples and when the line last moved.
#[derive(Debug, Default)]
struct RoomMemory {
    /// (at, arrivals so far): tickets issued plus pre-queue entries, so the doors opening
    /// (pre-queue entries becoming tickets) is not counted twice.
    arrivals: VecDeque<(i64, u64)>,
    passed_total: u64,
    /// Last time the room had nobody waiting or admitted somebody.
    moved_at_ms: i64,
}

/// The rules' state between evaluations.
#[derive(Debug)]
pub(crate) struct Evaluator {
    settings: AlertSettings,
    rooms: HashMap<String, RoomMemory>,
    firing: BTreeMap<Key, Firing>,
}

/// A condition as one evaluation found it.
enum Seen {
    /// Fire (or keep firing), with the summary.
    Holds(String),
    /// Neither fire nor count as clear (a surge between half the threshold and the threshold).
    Between,
    Clear,
}

impl Evaluator {
    pub(crate) fn new(settings: AlertSettings) -> Evaluator {
        Evaluator {
            settings,
            rooms: HashMap::new(),
            firing: BTreeMap::new(),
        }
    }

    /// The alerts firing now, in a stable order.
    pub(crate) fn firing(&self) -> &BTreeMap<Key, Firing> {
        &self.firing
    }

    /// Applies one observation taken at `now_ms` and returns the transitions it causes.
    pub(crate) fn observe(&mut self, now_ms: i64, engine: &EngineSeen) -> Vec<Transition> {
        let mut seen: Vec<(Key, Seen)> = Vec::new();
        match engine {
            EngineSeen::Unreachable(reason) => {
                seen.push((
                    (Rule::Readiness, None),
                    Seen::Holds(format!("the engine does not answer: {reason}")),
                ));
            }
            EngineSeen::Answered {
                storage_ready,
                store,
                rooms,
            } => {
                seen.push(((Rule::Readiness, None), Seen::Clear));
                let storage = if *storage_ready {
                    Seen::Clear
                } else {
                    Seen::Holds(format!(
                        "the {store} store cannot persist: joins and admissions are refused until Valkey and Postgres answer"
                    ))
                };
                seen.push(((Rule::Storage, None), storage));
                seen.extend(self.rooms_seen(now_ms, rooms));
            }
        }
        let mut transitions = Vec::new();
        for (key, condition) in seen {
            if let Some(transition) = self.apply(now_ms, key, condition) {
                transitions.push(transition);
            }
        }
        transitions
    }

    /// The per-room conditions; forgets rooms that are gone (their alerts then clear).
    fn rooms_seen(&mut self, now_ms: i64, rooms: &[RoomSeen]) -> Vec<(Key, Seen)> {
        let settings = self.settings;
        let window_ms = i64::try_from(settings.surge_window_sec * 1000).unwrap_or(i64::MAX);
        let stall_ms = i64::try_from(settings.stall_sec * 1000).unwrap_or(i64::MAX);
        let mut seen = Vec::new();
        for room in rooms {
            let memory = self
                .rooms
                .entry(room.id.clone())
                .or_insert_with(|| RoomMemory {
                    // A room made within the window had no arrivals at its creation, so one
                    // made and flooded between two evaluations still counts its first
                    // arrivals; an older room's past is unknown and not a surge.
                    arrivals: if now_ms - room.created_at_ms < window_ms {
                        VecDeque::from([(room.created_at_ms.min(now_ms), 0)])
                    } else {
                        VecDeque::new()
                    },
                    moved_at_ms: now_ms,
                    passed_total: room.passed_total,
                });
            let per_minute = memory.arrivals_per_minute(
                now_ms,
                room.joined_total + room.pre_queue,
                window_ms,
                settings.surge_window_sec,
            );
            let surge = if per_minute >= settings.surge_per_min {
                Seen::Holds(format!(
                    "room {} surges: {per_minute} arrivals/min, at or over {}/min",
                    room.id, settings.surge_per_min
                ))
            } else if per_minute * 2 >= settings.surge_per_min {
                Seen::Between
            } else {
                Seen::Clear
            };
            seen.push(((Rule::Surge, Some(room.id.clone())), surge));

            let doors_shut = room.effective_state == "scheduled";
            if room.waiting == 0
                || doors_shut
                || room.state == "bypass"
                || room.passed_total > memory.passed_total
            {
                memory.moved_at_ms = now_ms;
            }
            memory.passed_total = room.passed_total;
            let still_ms = now_ms - memory.moved_at_ms;
            let stalled = if still_ms >= stall_ms {
                let why = if room.state == "paused" {
                    "the room is paused"
                } else if room.rate_per_minute == 0 {
                    "its rate is 0/min"
                } else {
                    "its outflow stopped"
                };
                Seen::Holds(format!(
                    "room {} admits nobody: {} waiting, no admission for {} s ({why})",
                    room.id,
                    room.waiting,
                    still_ms / 1000
                ))
            } else {
                Seen::Clear
            };
            seen.push(((Rule::Stalled, Some(room.id.clone())), stalled));
        }
        self.rooms
            .retain(|id, _| rooms.iter().any(|room| &room.id == id));
        // A firing room alert whose room is gone is seen clear.
        for (rule, room) in self.firing.keys() {
            if let Some(id) = room
                && !rooms.iter().any(|seen_room| &seen_room.id == id)
            {
                seen.push(((*rule, Some(id.clone())), Seen::Clear));
            }
        }
        seen
    }

    /// One alert's step of the hysteresis.
    fn apply(&mut self, now_ms: i64, key: Key, condition: Seen) -> Option<Transition> {
        let resolve_ms = i64::try_from(self.settings.resolve_sec * 1000).unwrap_or(i64::MAX);
        match (condition, self.firing.get_mut(&key)) {
            (Seen::Holds(summary), None) => {
                self.firing.insert(
                    key.clone(),
                    Firing {
                        since_ms: now_ms,
                        clear_since_ms: None,
                        summary: summary.clone(),
                    },
                );
                Some(Transition {
                    rule: key.0,
                    room: key.1,
                    firing: true,
                    at_ms: now_ms,
                    started_at_ms: now_ms,
                    summary,
                })
            }
            (Seen::Holds(_) | Seen::Between, Some(firing)) => {
                firing.clear_since_ms = None;
                None
            }
            (Seen::Clear, Some(firing)) => {
                let clear_since = *firing.clear_since_ms.get_or_insert(now_ms);
                if now_ms - clear_since < resolve_ms {
                    return None;
                }
                let firing = self.firing.remove(&key)?;
                Some(Transition {
                    rule: key.0,
                    room: key.1,
                    firing: false,
                    at_ms: now_ms,
                    started_at_ms: firing.since_ms,
                    summary: firing.summary,
                })
            }
            (Seen::Between | Seen::Clear, None) => None,
        }
    }
}

impl RoomMemory {
    /// Records the arrivals count and returns arrivals over the window, scaled to a minute.
    /// The baseline is the newest sample at least a window old (the first sample until the
    /// evaluator has watched the room that long).
    fn arrivals_per_minute(
        &mut self,
        now_ms: i64,
        arrived: u64,
        window_ms: i64,
        window_sec: u64,
    ) -> u64 {
        self.arrivals.push_back((now_ms, arrived));
        while self.arrivals.len() > 1
            && self
                .arrivals
                .get(1)
                .is_some_and(|(at, _)| now_ms - at >= window_ms)
        {
            self.arrivals.pop_front();
        }
        let baseline = self.arrivals.front().map_or(arrived, |(_, count)| *count);
        arrived.saturating_sub(baseline) * 60 / window_sec.max(1)
    }
}

#[cfg(test)]
mod tests;
