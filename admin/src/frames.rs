//! The frames of `GET /api/admin/events`, computed without I/O (QM-468, QM-480).
//!
//! A stream sends a full frame (no `delta` key) on connect and again on the next tick; after
//! that each tick is `{delta: true, rooms: [changed], removed: [ids], ...}` with the same other
//! keys as a full frame. A client applies a delta to the rooms it holds: a changed room replaces
//! its namesake, a new one is appended (server order is creation order), a removed id is
//! dropped. Appending is only right when the server's order is "the survivors in their old
//! order, then the newcomers", so any tick that breaks that (rooms changed order) goes out full.

use serde_json::{Map, Value, json};

/// Full frames a stream opens with before it switches to deltas.
const FULL_FRAMES_FIRST: u64 = 2;
/// Sparkline points a stream keeps: two minutes of 2 s ticks.
pub(crate) const SPARKLINE_POINTS: usize = 60;

/// How one tick's rooms go out relative to the previous tick's.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RoomsUpdate {
    Full(Vec<Value>),
    Delta {
        /// Changed and new rooms, in server order.
        changed: Vec<Value>,
        removed: Vec<String>,
    },
}

fn room_id(room: &Value) -> &str {
    room.get("id").and_then(Value::as_str).unwrap_or("")
}

/// The update that takes a client holding `previous` to `current`: a delta when appending
/// reproduces `current`'s order, a full list otherwise.
pub(crate) fn diff_rooms(previous: &[Value], current: &[Value]) -> RoomsUpdate {
    let current_ids: Vec<&str> = current.iter().map(room_id).collect();
    let survivors: Vec<&Value> = previous
        .iter()
        .filter(|room| current_ids.contains(&room_id(room)))
        .collect();
    // Survivors must lead `current` in their old order; everything after them is new.
    let order_kept = survivors.len() <= current.len()
        && survivors
            .iter()
            .zip(current)
            .all(|(old, new)| room_id(old) == room_id(new));
    if !order_kept {
        return RoomsUpdate::Full(current.to_vec());
    }
    let changed = survivors
        .iter()
        .zip(current)
        .filter(|(old, new)| ***old != **new)
        .map(|(_, new)| new.clone())
        .chain(current[survivors.len()..].iter().cloned())
        .collect();
    let removed = previous
        .iter()
        .map(room_id)
        .filter(|id| !current_ids.contains(id))
        .map(str::to_owned)
        .collect();
    RoomsUpdate::Delta { changed, removed }
}

/// What a client does with a delta: the reference the tests check the server against.
#[cfg(test)]
pub(crate) fn apply_delta(held: &[Value], changed: &[Value], removed: &[String]) -> Vec<Value> {
    let mut rooms: Vec<Value> = held
        .iter()
        .filter(|room| !removed.iter().any(|id| id == room_id(room)))
        .cloned()
        .collect();
    for room in changed {
        match rooms.iter_mut().find(|held| room_id(held) == room_id(room)) {
            Some(slot) => *slot = room.clone(),
            None => rooms.push(room.clone()),
        }
    }
    rooms
}

/// One stream's frame sequence: what the client holds and how many frames went out.
#[derive(Debug, Default)]
pub(crate) struct FrameSequence {
    held: Option<Vec<Value>>,
    sent: u64,
}

impl FrameSequence {
    /// The frame for this tick's `rooms`; `others` (totals, sparkline, now) ride on every frame.
    pub(crate) fn next(&mut self, rooms: Vec<Value>, others: Map<String, Value>) -> Value {
        let update = match &self.held {
            Some(held) if self.sent >= FULL_FRAMES_FIRST => diff_rooms(held, &rooms),
            _ => RoomsUpdate::Full(rooms.clone()),
        };
        self.held = Some(rooms);
        self.sent += 1;
        let mut frame = Map::new();
        match update {
            RoomsUpdate::Full(rooms) => {
                frame.insert("rooms".to_owned(), Value::Array(rooms));
            }
            RoomsUpdate::Delta { changed, removed } => {
                frame.insert("delta".to_owned(), Value::Bool(true));
                frame.insert("rooms".to_owned(), Value::Array(changed));
                frame.insert("removed".to_owned(), json!(removed));
            }
        }
        frame.extend(others);
        Value::Object(frame)
    }
}

/// Totals across rooms, summed from the very room objects the frame carries.
pub(crate) fn totals(rooms: &[Value]) -> Value {
    let sum = |field: &str| -> u64 {
        rooms
            .iter()
            .filter_map(|room| room.get(field).and_then(Value::as_u64))
            .sum()
    };
    json!({
        "rooms": rooms.len(),
        "waiting": sum("waiting"),
        "passedLastMin": sum("passedLastMin"),
        "preQueue": sum("preQueue"),
        "activePasses": sum("activePasses"),
        "passedTotal": sum("passedTotal"),
    })
}

/// The totals a stream has seen, newest last, for the header sparklines: measured each tick,
/// never back-filled.
#[derive(Debug, Default)]
pub(crate) struct Sparkline {
    points: std::collections::VecDeque<(i64, u64, u64)>,
}

impl Sparkline {
    pub(crate) fn push(&mut self, at_ms: i64, totals: &Value) {
        let waiting = totals["waiting"].as_u64().unwrap_or(0);
        let passed = totals["passedLastMin"].as_u64().unwrap_or(0);
        if self.points.len() == SPARKLINE_POINTS {
            self.points.pop_front();
        }
        self.points.push_back((at_ms, waiting, passed));
    }

    pub(crate) fn json(&self) -> Value {
        json!({
            "at": self.points.iter().map(|point| point.0).collect::<Vec<_>>(),
            "waiting": self.points.iter().map(|point| point.1).collect::<Vec<_>>(),
            "passedLastMin": self.points.iter().map(|point| point.2).collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn room(id: &str, waiting: u64) -> Value {
        json!({ "id": id, "waiting": waiting })
    }

    fn others() -> Map<String, Value> {
        let mut map = Map::new();
        map.insert("totals".to_owned(), json!({ "rooms": 0 }));
        map
    }

    #[test]
    fn two_full_frames_then_deltas() {
        let mut sequence = FrameSequence::default();
        let first = sequence.next(vec![room("a", 0)], others());
        assert!(first.get("delta").is_none());
        assert_eq!(first["rooms"], json!([room("a", 0)]));
        assert!(first.get("totals").is_some());
        let second = sequence.next(vec![room("a", 0)], others());
        assert!(second.get("delta").is_none());
        let third = sequence.next(vec![room("a", 0)], others());
        assert_eq!(third["delta"], json!(true));
        assert_eq!(third["rooms"], json!([]));
        assert_eq!(third["removed"], json!([]));
        assert!(
            third.get("totals").is_some(),
            "same other keys as a full frame"
        );
    }

    #[test]
    fn only_changed_rooms_new_ones_and_removed_ids() {
        let previous = vec![room("a", 0), room("b", 0), room("c", 0)];
        let current = vec![room("a", 0), room("c", 4), room("d", 1)];
        assert_eq!(
            diff_rooms(&previous, &current),
            RoomsUpdate::Delta {
                changed: vec![room("c", 4), room("d", 1)],
                removed: vec!["b".to_owned()],
            }
        );
    }

    #[test]
    fn a_reorder_goes_out_full() {
        let previous = vec![room("a", 0), room("b", 0)];
        let current = vec![room("b", 0), room("a", 0)];
        assert_eq!(
            diff_rooms(&previous, &current),
            RoomsUpdate::Full(current.clone())
        );
        // A newcomer ahead of a survivor cannot be appended either.
        let current = vec![room("z", 0), room("a", 0), room("b", 0)];
        assert!(matches!(
            diff_rooms(&previous, &current),
            RoomsUpdate::Full(_)
        ));
    }

    #[test]
    fn totals_sum_the_rooms() {
        let rooms = vec![
            json!({ "id": "a", "waiting": 3, "passedLastMin": 1, "preQueue": 0 }),
            json!({ "id": "b", "waiting": 2, "passedLastMin": 4, "preQueue": 5 }),
        ];
        let totals = totals(&rooms);
        assert_eq!(totals["rooms"], json!(2));
        assert_eq!(totals["waiting"], json!(5));
        assert_eq!(totals["passedLastMin"], json!(5));
        assert_eq!(totals["preQueue"], json!(5));
    }

    #[test]
    fn the_sparkline_keeps_the_newest_points() {
        let mut sparkline = Sparkline::default();
        for at in 0..(SPARKLINE_POINTS as i64 + 5) {
            sparkline.push(at, &json!({ "waiting": at, "passedLastMin": 1 }));
        }
        let json = sparkline.json();
        assert_eq!(
            json["waiting"].as_array().map(Vec::len),
            Some(SPARKLINE_POINTS)
        );
        assert_eq!(json["at"][0], json!(5));
    }

    /// A tick's rooms: survivors of the last tick (some changed, maybe shuffled) plus newcomers.
    fn next_rooms() -> impl Strategy<Value = Vec<Vec<Value>>> {
        let tick = proptest::collection::vec((0u8..12, 0u64..3), 0..8);
        proptest::collection::vec((tick, any::<bool>()), 1..8).prop_map(|ticks| {
            ticks
                .into_iter()
                .map(|(rooms, shuffle)| {
                    let mut seen = std::collections::HashSet::new();
                    let mut rooms: Vec<Value> = rooms
                        .into_iter()
                        .filter(|(id, _)| seen.insert(*id))
                        .map(|(id, waiting)| room(&format!("r{id}"), waiting))
                        .collect();
                    if !shuffle {
                        // Creation order: the ids' numeric order, as the engine lists them.
                        rooms.sort_by_key(|room| room_id(room)[1..].parse::<u8>().unwrap_or(0));
                    }
                    rooms
                })
                .collect()
        })
    }

    proptest! {
        /// Applying every delta to the last full frame reproduces each tick's full room list.
        #[test]
        fn deltas_always_reproduce_the_full_frame(ticks in next_rooms()) {
            let mut sequence = FrameSequence::default();
            let mut client: Vec<Value> = Vec::new();
            for rooms in ticks {
                let frame = sequence.next(rooms.clone(), others());
                let frame_rooms = frame["rooms"].as_array().cloned().unwrap_or_default();
                if frame.get("delta").is_some() {
                    let removed: Vec<String> = frame["removed"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default()
                        .iter()
                        .filter_map(|id| id.as_str().map(str::to_owned))
                        .collect();
                    // Only rooms that changed (or are new) travel.
                    for changed in &frame_rooms {
                        prop_assert!(!client.contains(changed));
                    }
                    client = apply_delta(&client, &frame_rooms, &removed);
                } else {
                    client = frame_rooms;
                }
                prop_assert_eq!(&client, &rooms);
            }
        }
    }
}
