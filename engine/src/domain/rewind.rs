//! Taking back a batch of changes that never landed. The durable store executes commands on its
//! live copy of a room before it knows whether Valkey will take them (another engine may have
//! changed the room first); when Valkey refuses the batch, the copy must return to where it
//! stood. Joins and pre-queue entries — the changes two engines make at full speed to one
//! room — only append, so they are taken back in O(batch) here; any other change is not, and
//! the store reloads the room instead (rare: operators' actions, the outflow slice, the draw).

use super::event::{EventRecord, RoomEvent};
use super::room::{OutflowCarry, Room, release_identity};

/// Where a room stood before a batch: enough to take back appended joins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    seq: u64,
    next_ticket: u64,
    pre_entries: u64,
    carry: OutflowCarry,
}

impl Mark {
    /// The room's seq when the mark was taken.
    pub fn seq(&self) -> u64 {
        self.seq
    }
}

impl Room {
    /// Marks where the room stands before a batch of commands.
    pub fn mark(&self) -> Mark {
        Mark {
            seq: self.seq,
            next_ticket: self.next_ticket,
            pre_entries: self.pre_count(),
            carry: self.carry,
        }
    }

    /// Whether [`Room::rewind`] can take `records` back.
    pub fn can_rewind(records: &[EventRecord]) -> bool {
        records.iter().all(|record| {
            matches!(
                record.event,
                RoomEvent::Joined { .. } | RoomEvent::PreJoined { .. }
            )
        })
    }

    /// Takes back `records` (everything applied since `mark`, all joins or pre-queue entries)
    /// and the outflow carry, so the room is again what it was at `mark`. Answers false, having
    /// changed nothing, when the records are not the ones applied since `mark` or cannot be
    /// taken back: the caller then reloads the room.
    pub fn rewind(&mut self, mark: &Mark, records: &[EventRecord]) -> bool {
        let joins = records
            .iter()
            .filter(|record| matches!(record.event, RoomEvent::Joined { .. }))
            .count() as u64;
        let pre_joins = records.len() as u64 - joins;
        let follows_mark = Room::can_rewind(records)
            && self.seq == mark.seq + records.len() as u64
            && self.next_ticket == mark.next_ticket + joins
            && self.pre_count() == mark.pre_entries + pre_joins;
        if !follows_mark {
            return false;
        }
        for record in records.iter().rev() {
            match &record.event {
                RoomEvent::Joined { ticket, .. } => {
                    debug_assert_eq!(
                        *ticket + 1,
                        self.next_ticket,
                        "joins come back newest first"
                    );
                    if let Some(taken) = self.tickets.pop() {
                        release_identity(&mut self.waiting_by_identity, &taken.identity);
                    }
                    self.presence.remove(ticket);
                    self.next_ticket -= 1;
                    self.head = self.head.min(self.next_ticket);
                }
                RoomEvent::PreJoined { .. } => {
                    self.pre_queue.pop();
                }
                _ => unreachable!("checked by can_rewind"),
            }
        }
        self.seq = mark.seq;
        self.carry = mark.carry;
        true
    }

    /// Keeps what this engine knows of the room beyond its journal — the outflow carry and
    /// the sightings of holders — when `self` replaces `previous` (a reload from the journal).
    pub fn keep_local_state(&mut self, previous: &mut Room) {
        self.carry = previous.carry;
        for (ticket, seen) in previous.presence.drain() {
            let kept = self.presence.entry(ticket).or_insert(seen);
            *kept = (*kept).max(seen);
        }
    }
}

#[cfg(test)]
#[path = "rewind_tests.rs"]
mod tests;
