//! Connectors that checked in: every install check (`GET /api/verify`, `/api/verify.gif`) that
//! names a `connector` is recorded here per room as (connector, version, origin) with its first
//! and last sighting and a count, for the console's "connectors that checked in" list. Held in
//! this engine's memory only (a diagnostic: not journaled, gone on restart, per engine), and
//! bounded, because anyone may call the public route with made-up names: at most
//! [`MAX_PER_ROOM`] entries a room (the least recently seen goes first) and [`MAX_ROOMS`] rooms
//! (the room seen least recently goes first). A room's list starts again when its generation
//! changes, so a re-created room does not inherit the old one's connectors.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// Entries kept per room.
pub(crate) const MAX_PER_ROOM: usize = 50;
/// Rooms kept.
pub(crate) const MAX_ROOMS: usize = 10_000;
/// Longest connector name, version and origin kept (longer ones are cut, never refused here:
/// the gateway refuses them first).
const MAX_FIELD_LEN: usize = 256;

/// One connector, version and origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CheckIn {
    pub(crate) connector: String,
    pub(crate) version: String,
    pub(crate) origin: String,
    pub(crate) first_seen_ms: i64,
    pub(crate) last_seen_ms: i64,
    pub(crate) count: u64,
}

#[derive(Debug, Default)]
struct RoomCheckIns {
    generation: u64,
    entries: Vec<CheckIn>,
    last_seen_ms: i64,
}

/// Every room's check-ins; one lock held for a few instructions per install check.
#[derive(Debug, Default)]
pub(crate) struct CheckIns {
    rooms: Mutex<HashMap<String, RoomCheckIns>>,
}

fn clamp(text: &str) -> String {
    let mut end = text.len().min(MAX_FIELD_LEN);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

impl CheckIns {
    /// Records one check-in of a room at `generation`.
    pub(crate) fn record(
        &self,
        room_id: &str,
        generation: u64,
        connector: &str,
        version: &str,
        origin: &str,
        now_ms: i64,
    ) {
        let (connector, version, origin) = (clamp(connector), clamp(version), clamp(origin));
        let mut rooms = self.rooms.lock().unwrap_or_else(PoisonError::into_inner);
        if !rooms.contains_key(room_id) && rooms.len() >= MAX_ROOMS {
            let stalest = rooms
                .iter()
                .min_by_key(|(_, room)| room.last_seen_ms)
                .map(|(id, _)| id.clone());
            if let Some(stalest) = stalest {
                rooms.remove(&stalest);
            }
        }
        let room = rooms.entry(room_id.to_owned()).or_default();
        if room.generation != generation {
            *room = RoomCheckIns {
                generation,
                ..RoomCheckIns::default()
            };
        }
        room.last_seen_ms = now_ms;
        let known = room.entries.iter_mut().find(|entry| {
            entry.connector == connector && entry.version == version && entry.origin == origin
        });
        if let Some(entry) = known {
            entry.last_seen_ms = now_ms;
            entry.count += 1;
            return;
        }
        if room.entries.len() >= MAX_PER_ROOM
            && let Some(stalest) =
                (0..room.entries.len()).min_by_key(|&i| room.entries[i].last_seen_ms)
        {
            room.entries.swap_remove(stalest);
        }
        room.entries.push(CheckIn {
            connector,
            version,
            origin,
            first_seen_ms: now_ms,
            last_seen_ms: now_ms,
            count: 1,
        });
    }

    /// A room's check-ins at `generation`, most recently seen first.
    pub(crate) fn read(&self, room_id: &str, generation: u64) -> Vec<CheckIn> {
        let rooms = self.rooms.lock().unwrap_or_else(PoisonError::into_inner);
        let mut entries = match rooms.get(room_id) {
            Some(room) if room.generation == generation => room.entries.clone(),
            _ => Vec::new(),
        };
        entries.sort_by_key(|entry| std::cmp::Reverse(entry.last_seen_ms));
        entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_connector_version_and_origin_is_one_entry_counted() {
        let check_ins = CheckIns::default();
        check_ins.record("r", 1, "node", "1.0.0", "https://a.example", 10);
        check_ins.record("r", 1, "node", "1.0.0", "https://a.example", 20);
        check_ins.record("r", 1, "node", "1.0.1", "https://a.example", 30);
        let read = check_ins.read("r", 1);
        assert_eq!(read.len(), 2);
        assert_eq!((read[0].version.as_str(), read[0].count), ("1.0.1", 1));
        assert_eq!(
            (read[1].first_seen_ms, read[1].last_seen_ms, read[1].count),
            (10, 20, 2)
        );
        assert!(check_ins.read("other", 1).is_empty());
    }

    #[test]
    fn a_new_generation_starts_a_fresh_list() {
        let check_ins = CheckIns::default();
        check_ins.record("r", 1, "node", "1", "", 10);
        assert!(check_ins.read("r", 2).is_empty());
        check_ins.record("r", 2, "gtm", "1", "", 20);
        let read = check_ins.read("r", 2);
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].connector, "gtm");
    }

    #[test]
    fn bounded_per_room_and_in_rooms() {
        let check_ins = CheckIns::default();
        for i in 0..(MAX_PER_ROOM as i64 + 5) {
            check_ins.record("r", 1, &format!("c{i}"), "1", "", i);
        }
        let read = check_ins.read("r", 1);
        assert_eq!(read.len(), MAX_PER_ROOM);
        assert!(
            read.iter().all(|entry| entry.connector != "c0"),
            "the least recently seen went first"
        );
        for i in 0..(MAX_ROOMS as i64 + 1) {
            check_ins.record(&format!("room{i}"), 1, "c", "1", "", 100 + i);
        }
        let rooms = check_ins.rooms.lock().unwrap().len();
        assert_eq!(rooms, MAX_ROOMS);
        assert!(check_ins.read("r", 1).is_empty(), "the stalest room went");
        let long = "x".repeat(1000);
        check_ins.record("room5", 1, &long, "1", "", 1);
        assert!(
            check_ins
                .read("room5", 1)
                .iter()
                .all(|entry| entry.connector.len() <= MAX_FIELD_LEN)
        );
    }
}
