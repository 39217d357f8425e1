//! Presence and ghost tickets (QM-345). A pass reserves a `maxConcurrent` slot only for a holder
//! seen within `presenceSec`; a "seen" is the ticket's join, a status call that proves the place
//! (its ownership cookie), a join that keeps it, or a stream heartbeat reported by a gateway.
//!
//! - Outflow walks the line from its head in FIFO order. A present holder costs one visitor of
//!   credit and a free slot; an absent holder's ticket is promoted with the batch for free and
//!   its pass owns no slot (listed in the `Passed` event's `ns`, so a replay restores it
//!   slotless). The batch stops at the first present holder that cannot be paid for, so the
//!   promoted range is still the lowest waiting tickets. A room at rate 0 admits nobody, ghosts
//!   included.
//! - A pass holds its slot while it is inside `passedTtlSec`, is not a ghost, and either
//!   `presenceSec` has not run out since the grant or its holder was seen at or after the grant
//!   (was told they are through). A holder never told gives the slot back after `presenceSec`,
//!   for good: a sighting of a pass later than `presenceSec` after its grant is not recorded, so
//!   a holder coming back late still enters at the door but cannot overfill the room.
//! - Tickets without a recorded holder (empty session hash: engine-internal callers) are always
//!   present; `presenceSec: null` makes everyone present, which is the rule before QM-345.
//!
//! Sightings are not journaled (far too frequent); only their outcome, `ns`, is. The durable
//! store keeps them in Valkey (`qm.lua`, key `s`) and must decide exactly as this file does.

use super::room::{LivePass, MAX_PASS_TTL_MS, Room, TicketRecord, TicketStatus};

/// Most tickets one outflow slice examines (holes included), so one slice, and the Valkey
/// function that mirrors it, stays short however many ghosts sit at the head of the line.
pub(crate) const MAX_EXAMINED_PER_SLICE: u64 = 10_000;
/// How far the presence map may outgrow the tickets that can still use it before it is trimmed.
const PRESENCE_SLACK: usize = 1024;

impl Room {
    /// The presence window in ms; `None` when the rule is off.
    pub(crate) fn presence_window_ms(&self) -> Option<i64> {
        self.config
            .presence_sec
            .map(|seconds| seconds.saturating_mul(1000) as i64)
    }

    /// Records a sighting of `ticket`'s holder at `at_ms`. Only a waiting ticket or a pass with
    /// a recorded holder has a presence to keep, and a pass only within `presenceSec` of its
    /// grant (after that its slot is gone for good); anything else is ignored. Answers whether
    /// the sighting was kept.
    pub fn see(&mut self, ticket: u64, at_ms: i64) -> bool {
        let Some(record) = self.ticket(ticket) else {
            return false;
        };
        if record.session_hash.is_empty() {
            return false;
        }
        match record.status {
            TicketStatus::Waiting => {}
            TicketStatus::Passed { at_ms: granted_at } => {
                if let Some(window) = self.presence_window_ms()
                    && at_ms >= granted_at + window
                {
                    return false;
                }
            }
            TicketStatus::Ejected | TicketStatus::Purged => return false,
        }
        let seen = self.presence.entry(ticket).or_insert(at_ms);
        *seen = (*seen).max(at_ms);
        true
    }

    /// Records sightings of several tickets at once (a gateway's heartbeat report).
    pub fn see_all(&mut self, tickets: &[u64], at_ms: i64) {
        for ticket in tickets {
            self.see(*ticket, at_ms);
        }
        self.trim_presence(at_ms);
    }

    /// Records sightings each made at its own instant (another engine's, or a store's record of
    /// them).
    pub fn see_each(&mut self, sightings: &[(u64, i64)]) {
        for (ticket, at_ms) in sightings {
            self.see(*ticket, *at_ms);
        }
    }

    /// The oldest sighting that can still decide anything at `now_ms`: a holder last seen
    /// before it is absent whatever, and a pass granted before it has expired.
    pub fn sightings_useful_since(&self, now_ms: i64) -> i64 {
        let window = self.presence_window_ms().unwrap_or(0);
        now_ms - window.max(self.pass_ttl_ms())
    }

    /// When the holder of `ticket` was last seen: its latest sighting, else its join.
    fn last_seen(&self, ticket: u64, record: &TicketRecord) -> i64 {
        self.presence
            .get(&ticket)
            .copied()
            .unwrap_or(record.joined_at_ms)
            .max(record.joined_at_ms)
    }

    /// Whether the holder of a waiting `ticket` counts as present at `now_ms`.
    pub fn is_present(&self, ticket: u64, now_ms: i64) -> bool {
        let Some(window) = self.presence_window_ms() else {
            return true;
        };
        let Some(record) = self.ticket(ticket) else {
            return true;
        };
        record.session_hash.is_empty() || now_ms < self.last_seen(ticket, record) + window
    }

    /// Whether `pass` holds a `maxConcurrent` slot at `now_ms`.
    pub(crate) fn pass_holds_slot(&self, pass: &LivePass, now_ms: i64) -> bool {
        // A live door session keeps the slot its pass held (`door.rs`).
        if self.session_holds_slot(pass.ticket, now_ms) {
            return true;
        }
        if pass.slotless || pass.at_ms + self.pass_ttl_ms() <= now_ms {
            return false;
        }
        let Some(window) = self.presence_window_ms() else {
            return true;
        };
        if now_ms < pass.at_ms + window {
            return true;
        }
        match self.ticket(pass.ticket) {
            Some(record) if !record.session_hash.is_empty() => {
                self.last_seen(pass.ticket, record) >= pass.at_ms
            }
            _ => true,
        }
    }

    /// Passes holding a slot at `now_ms`, counted up to `limit` (a full room need not count on).
    pub(crate) fn slot_holders(&self, now_ms: i64, limit: u64) -> u64 {
        let ttl_ms = self.pass_ttl_ms();
        // Passes are in grant order: the expired ones come first.
        let expired = self
            .passes
            .partition_point(|pass| pass.at_ms + ttl_ms <= now_ms);
        let mut holders = 0;
        for pass in self.passes.range(expired..) {
            if holders >= limit {
                break;
            }
            if self.pass_holds_slot(pass, now_ms) {
                holders += 1;
            }
        }
        if holders >= limit {
            return holders;
        }
        // Door sessions keep their slot past their pass's window; those passes were skipped.
        let past = self
            .door
            .slots_past_pass(self.session_bounds(), ttl_ms, now_ms);
        holders.saturating_add(past).min(limit)
    }

    /// The live pass of `ticket`, if it is still in the list.
    pub(crate) fn pass_of(&self, ticket: u64) -> Option<LivePass> {
        let index = self
            .passes
            .binary_search_by_key(&ticket, |pass| pass.ticket)
            .ok()?;
        self.passes.get(index).copied()
    }

    /// One slice's batch for `credit` (sixtieths): how many of the lowest waiting tickets pass
    /// and how many of them are paid for (present holders, each costing 60 and a slot).
    pub(crate) fn outflow_batch(&mut self, credit: u64, now_ms: i64) -> (u64, u64) {
        self.trim_presence(now_ms);
        let affordable = (credit / 60).min(self.free_slots(now_ms));
        if self.presence_window_ms().is_none() {
            let admit = affordable.min(self.waiting());
            return (admit, admit);
        }
        if self.config.rate_per_minute == 0 {
            // A room set to admit nobody admits nobody: ghosts ride with a moving line only.
            return (0, 0);
        }
        let mut affordable = affordable;
        let (mut count, mut paid, mut examined) = (0, 0, 0);
        let mut holes = self.holes.iter().peekable();
        let mut ticket = self.head;
        while ticket < self.next_ticket && examined < MAX_EXAMINED_PER_SLICE {
            examined += 1;
            if holes.next_if(|hole| **hole == ticket).is_some() {
                ticket += 1;
                continue;
            }
            if self.is_present(ticket, now_ms) {
                if affordable == 0 {
                    break;
                }
                affordable -= 1;
                paid += 1;
            }
            count += 1;
            ticket += 1;
        }
        (count, paid)
    }

    /// The waiting tickets in `first..=last` whose holder is absent at `now_ms`, ascending:
    /// the `ns` of a promotion of that range.
    pub(crate) fn absent_between(&self, first: u64, last: u64, now_ms: i64) -> Vec<u64> {
        if self.presence_window_ms().is_none() {
            return Vec::new();
        }
        (first..=last)
            .filter(|ticket| {
                self.ticket_status(*ticket) == Some(TicketStatus::Waiting)
                    && !self.is_present(*ticket, now_ms)
            })
            .collect()
    }

    /// Tickets whose holder is absent among the waiting ones (admin stats), counted from the
    /// head up to [`MAX_EXAMINED_PER_SLICE`] tickets.
    pub fn absent_waiting(&self, now_ms: i64) -> u64 {
        if self.presence_window_ms().is_none() {
            return 0;
        }
        let end = self
            .next_ticket
            .min(self.head.saturating_add(MAX_EXAMINED_PER_SLICE));
        (self.head..end)
            .filter(|ticket| {
                self.ticket_status(*ticket) == Some(TicketStatus::Waiting)
                    && !self.is_present(*ticket, now_ms)
            })
            .count() as u64
    }

    /// Live passes that own no slot at `now_ms` (ghosts, and holders never told in time).
    pub fn slotless_passes(&self, now_ms: i64) -> u64 {
        let ttl_ms = self.pass_ttl_ms();
        let live = self
            .passes
            .iter()
            .filter(|pass| pass.at_ms + ttl_ms > now_ms)
            .count() as u64;
        // A door session keeps its slot after its pass's entry window closes, so the slot
        // holders can outnumber the live passes: then no live pass is slotless.
        live.saturating_sub(self.active_passes(now_ms))
    }

    /// Forgets sightings no rule can read any more (tickets that left the line, passes past a
    /// day), once the map has clearly outgrown the tickets that can use it: amortised O(1).
    fn trim_presence(&mut self, now_ms: i64) {
        let useful = self.waiting() as usize + self.passes.len();
        if self.presence.len() <= useful * 2 + PRESENCE_SLACK {
            return;
        }
        let tickets = &self.tickets;
        self.presence.retain(|ticket, _| {
            let Some(record) = tickets.get(ticket.wrapping_sub(1) as usize) else {
                return false;
            };
            match record.status {
                TicketStatus::Waiting => true,
                TicketStatus::Passed { at_ms } => at_ms + MAX_PASS_TTL_MS >= now_ms,
                TicketStatus::Ejected | TicketStatus::Purged => false,
            }
        });
    }
}
