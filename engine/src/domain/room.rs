//! The state of one room's line and the single function that changes it, [`Room::apply`].
//!
//! The line is `head..next_ticket` minus `holes`: every ticket below `head` has left it
//! (passed, ejected or purged), `head` itself is waiting unless the line is empty, and `holes`
//! (sorted) are the tickets above `head` that were ejected while waiting. Promotion always
//! takes the lowest waiting tickets, which is what makes the line strictly FIFO.

use std::collections::{HashMap, VecDeque};

use qm_core::room::{EffectiveState, RoomConfig};

use super::door::DoorSessions;
use super::event::{EjectedFrom, EventRecord, PassedBy, RoomEvent};
use super::prequeue::PreQueue;
use super::targeting::Targeting;

/// Longest `passedTtlSec`: passes older than this can never hold a slot again, so they are
/// dropped from the live-pass list.
pub(crate) const MAX_PASS_TTL_MS: i64 = qm_core::room::MAX_PASSED_TTL_SEC as i64 * 1000;
/// Most credit a room carries between slices: one visitor (in sixtieths). A slice that
/// admitted all it could leaves less than that anyway (the fraction that makes 90/min read
/// 1, 2, 1, 2 and 1/min admit once a minute), so the cap only bites when admission was held
/// back (nobody waiting, slots full): such a room then resumes with at most one extra visitor,
/// never a banked burst.
pub(crate) const CREDIT_CAP_SIXTIETHS: u64 = 60;
/// Window of `passedLastMin`.
const PASS_WINDOW_SECONDS: usize = 60;

/// Where one ticket stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TicketStatus {
    Waiting,
    Passed { at_ms: i64 },
    Ejected,
    Purged,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TicketRecord {
    pub(crate) joined_at_ms: i64,
    /// Hash of the ownership cookie the ticket is bound to; empty = no recorded holder.
    pub(crate) session_hash: String,
    pub(crate) identity: String,
    pub(crate) status: TicketStatus,
    /// Its pass opened a door session (`door.rs`): the token no longer admits by itself.
    pub(crate) door_spent: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LivePass {
    pub(crate) ticket: u64,
    pub(crate) at_ms: i64,
    /// Promoted while its holder was absent (listed in the event's `ns`): owns no slot.
    pub(crate) slotless: bool,
}

/// Passes granted during one calendar second (a ring slot of the last minute).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct SecondCount {
    second: i64,
    count: u64,
}

/// Outflow bookkeeping that is deliberately not journaled: the credit accrued by slices that
/// admitted nobody, and the last second ticked. Losing it on a rebuild costs at most one
/// slice's fraction, and journaling an event per room per second would dwarf the real ones.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct OutflowCarry {
    /// Credit in sixtieths of a visitor, so `ratePerMinute / 60` per second is exact.
    pub(crate) credit_sixtieths: u64,
    pub(crate) last_tick_second: Option<i64>,
}

/// Why a record could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    #[error("event seq {got} does not follow {expected_after}: refusing to guess across a gap")]
    Gap { expected_after: u64, got: u64 },
    #[error("the first event of a room must be created")]
    NotCreated,
}

/// One room: configuration, line, passes and the counters its stats are read from.
#[derive(Debug, Clone, PartialEq)]
pub struct Room {
    pub(crate) config: RoomConfig,
    pub(crate) generation: u64,
    pub(crate) seq: u64,
    pub(crate) created: bool,
    pub(crate) deleted: bool,
    pub(crate) created_at_ms: i64,
    pub(crate) updated_at_ms: i64,
    pub(crate) next_ticket: u64,
    pub(crate) head: u64,
    pub(crate) holes: Vec<u64>,
    /// Index `ticket - 1`. Ticket 0 (a bypass pass) is never stored.
    pub(crate) tickets: Vec<TicketRecord>,
    /// Unrevoked passes of the last day, in ticket order (which is also grant order).
    pub(crate) passes: VecDeque<LivePass>,
    /// Waiting tickets per non-empty identity, for `queueMaxPerIp`.
    pub(crate) waiting_by_identity: HashMap<String, u32>,
    /// The scheduled drop's pre-queue, and the tickets its handles drew.
    pub(crate) pre_queue: PreQueue,
    pub(crate) carry: OutflowCarry,
    recent_passes: [SecondCount; PASS_WINDOW_SECONDS],
    pub(crate) passed_total: u64,
    /// Tickets ejected (from the line or as a pass) and entries purged (waiting tickets and
    /// pre-queue entries) since the room was created: the metrics' counters, derived in the fold.
    pub(crate) ejected_total: u64,
    pub(crate) purged_total: u64,
    /// The branding object as JSON, kept with the config because every status answer carries it.
    pub(crate) branding_json: String,
    /// Last sighting (epoch ms) of a ticket's holder after its join, for the presence rule
    /// (`presence.rs`). Not journaled, so not part of the fold: a ticket missing here was last
    /// seen at its join.
    pub(crate) presence: HashMap<u64, i64>,
    /// Door sessions opened from this room's passes (`door.rs`).
    pub(crate) door: DoorSessions,
    /// `urlPatterns` compiled, with the revision derived from the updates that changed them.
    pub(crate) targeting: Targeting,
}

impl Room {
    /// A room that exists only once a `Created` record is applied; `seq_before` is the last seq
    /// this room id used (0 for a new id), so seq stays gap-free across delete and re-create.
    pub(crate) fn blank(config: RoomConfig, seq_before: u64) -> Room {
        Room {
            config,
            generation: 0,
            seq: seq_before,
            created: false,
            deleted: false,
            created_at_ms: 0,
            updated_at_ms: 0,
            next_ticket: 1,
            head: 1,
            holes: Vec::new(),
            tickets: Vec::new(),
            passes: VecDeque::new(),
            waiting_by_identity: HashMap::new(),
            pre_queue: PreQueue::default(),
            carry: OutflowCarry::default(),
            recent_passes: [SecondCount::default(); PASS_WINDOW_SECONDS],
            passed_total: 0,
            ejected_total: 0,
            purged_total: 0,
            branding_json: "{}".to_owned(),
            presence: HashMap::new(),
            door: DoorSessions::default(),
            targeting: Targeting::default(),
        }
    }

    /// Creates a room: its first record is `Created` with seq `seq_before + 1`.
    pub fn create(
        config: RoomConfig,
        generation: u64,
        seq_before: u64,
        now_ms: i64,
    ) -> (Room, EventRecord) {
        let mut room = Room::blank(config.clone(), seq_before);
        let record = room.commit(now_ms, RoomEvent::Created { config, generation });
        (room, record)
    }

    /// Rebuilds a room by folding its records, refusing a gap or a missing `Created`.
    pub fn replay<'a>(
        records: impl IntoIterator<Item = &'a EventRecord>,
    ) -> Result<Room, ApplyError> {
        let mut records = records.into_iter();
        let first = records.next().ok_or(ApplyError::NotCreated)?;
        let RoomEvent::Created { config, .. } = &first.event else {
            return Err(ApplyError::NotCreated);
        };
        let mut room = Room::blank(config.clone(), first.seq.saturating_sub(1));
        room.apply(first)?;
        for record in records {
            room.apply(record)?;
        }
        Ok(room)
    }

    /// Produces the next record for `event` and applies it.
    pub(crate) fn commit(&mut self, at_ms: i64, event: RoomEvent) -> EventRecord {
        let record = EventRecord {
            seq: self.seq + 1,
            at_ms,
            event,
        };
        let applied = self.apply(&record);
        debug_assert!(
            applied.is_ok(),
            "a committed record always follows the room's seq"
        );
        record
    }

    /// The one place room state changes. Commands validate, build the event, and land here;
    /// a rebuild lands here with journaled records.
    pub fn apply(&mut self, record: &EventRecord) -> Result<(), ApplyError> {
        if record.seq != self.seq + 1 {
            return Err(ApplyError::Gap {
                expected_after: self.seq,
                got: record.seq,
            });
        }
        if !self.created && !matches!(record.event, RoomEvent::Created { .. }) {
            return Err(ApplyError::NotCreated);
        }
        self.seq = record.seq;
        let at_ms = record.at_ms;
        match &record.event {
            RoomEvent::Created { config, generation } => {
                // A re-create starts a fresh line after the deleted one; seq carries on.
                *self = Room::blank(config.clone(), record.seq);
                self.created = true;
                self.generation = *generation;
                self.created_at_ms = at_ms;
                self.set_config(config.clone(), at_ms);
            }
            RoomEvent::Updated { config } => self.set_config(config.clone(), at_ms),
            RoomEvent::Joined {
                ticket,
                session_hash,
                identity,
            } => {
                debug_assert_eq!(*ticket, self.next_ticket, "tickets are minted in order");
                self.tickets.push(TicketRecord {
                    joined_at_ms: at_ms,
                    session_hash: session_hash.clone(),
                    identity: identity.clone(),
                    status: TicketStatus::Waiting,
                    door_spent: false,
                });
                self.next_ticket += 1;
                if !identity.is_empty() {
                    *self
                        .waiting_by_identity
                        .entry(identity.clone())
                        .or_default() += 1;
                }
            }
            RoomEvent::Passed {
                first,
                last,
                count,
                by,
                credit_after,
                ns,
            } => {
                self.apply_passed(*first, *last, ns, at_ms);
                self.count_passes(*count, at_ms);
                if *by == PassedBy::Outflow
                    && let Some(credit) = credit_after
                {
                    self.carry.credit_sixtieths = *credit;
                }
            }
            RoomEvent::Ejected { ticket, was } => {
                self.ejected_total += 1;
                self.door.end(*ticket);
                self.apply_ejected(*ticket, *was);
            }
            RoomEvent::DoorOpened {
                ticket,
                key_hash,
                granted_at_ms,
                holds_slot,
            } => self.apply_door_opened(*ticket, key_hash, *granted_at_ms, *holds_slot, at_ms),
            RoomEvent::DoorSeen { ticket } => self.door.seen(*ticket, at_ms),
            RoomEvent::PreJoined {
                handle,
                session_hash,
                identity,
            } => self.apply_pre_joined(*handle, session_hash, identity),
            RoomEvent::Drawn {
                first_ticket,
                order,
            } => self.apply_drawn(*first_ticket, order, at_ms),
            RoomEvent::Purged { count, pre_queue } => {
                self.purged_total += count + pre_queue;
                self.apply_pre_queue_purged();
                for ticket in self.head..self.next_ticket {
                    if let Some(record) = self.ticket_mut(ticket)
                        && record.status == TicketStatus::Waiting
                    {
                        record.status = TicketStatus::Purged;
                    }
                }
                self.waiting_by_identity.clear();
                self.holes.clear();
                self.head = self.next_ticket;
            }
            RoomEvent::RateSet { rate_per_minute } => {
                // Takes effect on the next slice: the carry is under one visitor, never a
                // slice banked at the old rate.
                self.config.rate_per_minute = *rate_per_minute;
                self.updated_at_ms = at_ms;
            }
            RoomEvent::StateSet { state } => {
                self.config.state = *state;
                self.updated_at_ms = at_ms;
            }
            RoomEvent::Scheduled {
                opens_at,
                pre_queue_max_per_ip,
            } => {
                self.config.opens_at = *opens_at;
                self.config.pre_queue_max_per_ip = *pre_queue_max_per_ip;
                self.updated_at_ms = at_ms;
            }
            RoomEvent::Deleted => {
                // Only the id's generation and seq outlive a delete (for a re-create).
                let generation = self.generation;
                *self = Room::blank(self.config.clone(), record.seq);
                self.created = true;
                self.deleted = true;
                self.generation = generation;
            }
        }
        Ok(())
    }

    fn set_config(&mut self, config: RoomConfig, at_ms: i64) {
        self.branding_json = config
            .branding
            .as_ref()
            .and_then(|branding| serde_json::to_string(branding).ok())
            .unwrap_or_else(|| "{}".to_owned());
        self.targeting.follow(&config.url_patterns, at_ms);
        self.config = config;
        self.updated_at_ms = at_ms;
    }

    fn apply_passed(&mut self, first: u64, last: u64, slotless: &[u64], at_ms: i64) {
        for ticket in first..=last {
            let Some(record) = self.tickets.get_mut(ticket.wrapping_sub(1) as usize) else {
                continue;
            };
            if record.status != TicketStatus::Waiting {
                continue;
            }
            record.status = TicketStatus::Passed { at_ms };
            release_identity(&mut self.waiting_by_identity, &record.identity);
            self.passes.push_back(LivePass {
                ticket,
                at_ms,
                slotless: slotless.binary_search(&ticket).is_ok(),
            });
        }
        while self
            .passes
            .front()
            .is_some_and(|pass| pass.at_ms + MAX_PASS_TTL_MS < at_ms)
        {
            self.passes.pop_front();
        }
        let passed_holes = self.holes.partition_point(|hole| *hole <= last);
        self.holes.drain(..passed_holes);
        self.head = self.head.max(last + 1).min(self.next_ticket);
        self.settle_head();
    }

    fn apply_ejected(&mut self, ticket: u64, was: EjectedFrom) {
        let Some(record) = self.tickets.get_mut(ticket.wrapping_sub(1) as usize) else {
            return;
        };
        record.status = TicketStatus::Ejected;
        match was {
            EjectedFrom::Waiting => {
                release_identity(&mut self.waiting_by_identity, &record.identity);
                if ticket == self.head {
                    self.head += 1;
                    self.settle_head();
                } else if let Err(position) = self.holes.binary_search(&ticket) {
                    self.holes.insert(position, ticket);
                }
            }
            EjectedFrom::Passed => {
                if let Ok(position) = self
                    .passes
                    .binary_search_by_key(&ticket, |pass| pass.ticket)
                {
                    self.passes.remove(position);
                }
            }
        }
    }

    /// Keeps the invariant that `head` is waiting (or the line is empty).
    fn settle_head(&mut self) {
        while self.holes.first() == Some(&self.head) {
            self.holes.remove(0);
            self.head += 1;
        }
    }

    fn count_passes(&mut self, count: u64, at_ms: i64) {
        self.passed_total += count;
        let second = at_ms.div_euclid(1000);
        let slot = &mut self.recent_passes[second.rem_euclid(PASS_WINDOW_SECONDS as i64) as usize];
        if slot.second != second {
            *slot = SecondCount { second, count: 0 };
        }
        slot.count += count;
    }

    pub(crate) fn ticket(&self, ticket: u64) -> Option<&TicketRecord> {
        self.tickets.get(ticket.checked_sub(1)? as usize)
    }

    pub(crate) fn ticket_mut(&mut self, ticket: u64) -> Option<&mut TicketRecord> {
        self.tickets.get_mut(ticket.checked_sub(1)? as usize)
    }

    pub fn room_id(&self) -> &str {
        &self.config.id
    }

    pub fn config(&self) -> &RoomConfig {
        &self.config
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn seq(&self) -> u64 {
        self.seq
    }

    pub fn head(&self) -> u64 {
        self.head
    }

    pub fn next_ticket(&self) -> u64 {
        self.next_ticket
    }

    /// Ejected waiting tickets above `head`, ascending.
    pub fn holes(&self) -> &[u64] {
        &self.holes
    }

    pub fn passed_total(&self) -> u64 {
        self.passed_total
    }

    pub fn branding_json(&self) -> &str {
        &self.branding_json
    }

    pub fn is_deleted(&self) -> bool {
        self.deleted
    }

    pub fn created_at_ms(&self) -> i64 {
        self.created_at_ms
    }

    pub fn effective_state(&self, now_ms: i64) -> EffectiveState {
        self.config.effective_state(now_ms)
    }

    /// Where `ticket` stands (`None` for ticket 0 and tickets never minted).
    pub fn ticket_status(&self, ticket: u64) -> Option<TicketStatus> {
        self.ticket(ticket).map(|record| record.status)
    }

    /// Number of waiting tickets.
    pub fn waiting(&self) -> u64 {
        qm_core::line::waiting(self.head, self.next_ticket, &self.holes)
    }

    /// 1-based position of a waiting ticket: only waiting tickets ahead count.
    pub fn position_of(&self, ticket: u64) -> Option<u64> {
        qm_core::line::position_of(self.head, self.next_ticket, &self.holes, ticket)
    }

    /// The `count`-th lowest waiting ticket (1-based), i.e. the last one a promotion of
    /// `count` admits. `count` must not exceed [`Room::waiting`].
    pub(crate) fn nth_waiting(&self, count: u64) -> u64 {
        let mut last = self.head + count - 1;
        for hole in &self.holes {
            if *hole > last {
                break;
            }
            last += 1;
        }
        last
    }

    pub(crate) fn pass_ttl_ms(&self) -> i64 {
        self.config.passed_ttl_sec as i64 * 1000
    }

    /// When a pass granted at `at_ms` stops admitting.
    pub(crate) fn pass_expires_at(&self, at_ms: i64) -> i64 {
        at_ms + self.pass_ttl_ms()
    }

    /// Passes that hold a `maxConcurrent` slot: inside their entry window and, under the
    /// presence rule, not ghosts (see `presence.rs`).
    pub fn active_passes(&self, now_ms: i64) -> u64 {
        self.slot_holders(now_ms, u64::MAX)
    }

    /// `maxConcurrent` slots not held by an active pass.
    pub fn free_slots(&self, now_ms: i64) -> u64 {
        match self.config.max_concurrent {
            Some(max) => max.saturating_sub(self.slot_holders(now_ms, max)),
            None => u64::MAX,
        }
    }

    /// Passes granted in the 60 calendar seconds up to and including `now_ms`'s.
    pub fn passed_last_minute(&self, now_ms: i64) -> u64 {
        let now_second = now_ms.div_euclid(1000);
        self.recent_passes
            .iter()
            .filter(|slot| {
                slot.second <= now_second && now_second - slot.second < PASS_WINDOW_SECONDS as i64
            })
            .map(|slot| slot.count)
            .sum()
    }

    /// Seconds the head ticket has waited (0 when nobody waits).
    pub fn oldest_wait_sec(&self, now_ms: i64) -> u64 {
        if self.waiting() == 0 {
            return 0;
        }
        self.ticket(self.head).map_or(0, |record| {
            (now_ms - record.joined_at_ms).max(0) as u64 / 1000
        })
    }

    pub(crate) fn waiting_for_identity(&self, identity: &str) -> u32 {
        self.waiting_by_identity.get(identity).copied().unwrap_or(0)
    }
}

pub(super) fn release_identity(counts: &mut HashMap<String, u32>, identity: &str) {
    if identity.is_empty() {
        return;
    }
    if let Some(count) = counts.get_mut(identity) {
        *count -= 1;
        if *count == 0 {
            counts.remove(identity);
        }
    }
}
