//! The scheduled drop. Before `opensAt` there is no line: a join enters the pre-queue and gets
//! an opaque handle. At `opensAt` the pre-queue is drawn into the line in one `Drawn` event: a
//! crypto-grade random permutation, round-robin across identities, so arriving early buys
//! nothing and a second entry from one address never outranks any other address's first. The
//! event carries the whole order, so a replay restores the draw instead of drawing again, and a
//! handle is exchanged for its drawn ticket from then on.

use std::collections::{HashMap, HashSet};

use qm_core::eta::wait_after_opening;
use qm_core::room::{EffectiveState, RoomState};
use qm_core::{ApiError, ErrorCode};
use rand::seq::SliceRandom;
use rand::{CryptoRng, Rng};

use super::commands::JoinRequest;
use super::event::{EventRecord, RoomEvent};
use super::place::{LapseReason, PlaceStatus};
use super::room::{Room, TicketRecord, TicketStatus};

/// Default hard ceiling of one room's pre-queue (`PREQUEUE_MAX`).
pub const DEFAULT_PRE_QUEUE_CEILING: u64 = 1_000_000;
/// Handles stay below 2^53 so they survive a JavaScript number.
const HANDLE_LIMIT: u64 = 1 << 53;

/// One pre-queue entry, in arrival order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PreEntry {
    pub(crate) handle: u64,
    pub(crate) session_hash: String,
    pub(crate) identity: String,
}

/// The pre-queue and what became of drawn and purged handles.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PreQueue {
    pub(crate) entries: Vec<PreEntry>,
    /// Handle -> index in `entries`.
    by_handle: HashMap<u64, usize>,
    /// Entries per non-empty identity, for `preQueueMaxPerIp`.
    by_identity: HashMap<String, u32>,
    /// Handle -> the ticket the draw gave it.
    drawn: HashMap<u64, u64>,
    /// Handles discarded by a purge before their draw.
    purged: HashSet<u64>,
}

/// Where a pre-queue handle stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HandleStatus {
    /// Still in the pre-queue.
    Waiting,
    Drawn(u64),
    Lapsed(LapseReason),
}

impl PreQueue {
    pub(crate) fn len(&self) -> u64 {
        self.entries.len() as u64
    }

    pub(crate) fn handle_status(&self, handle: u64) -> HandleStatus {
        if let Some(ticket) = self.drawn.get(&handle) {
            return HandleStatus::Drawn(*ticket);
        }
        if self.by_handle.contains_key(&handle) {
            return HandleStatus::Waiting;
        }
        if self.purged.contains(&handle) {
            return HandleStatus::Lapsed(LapseReason::Purged);
        }
        HandleStatus::Lapsed(LapseReason::RoomReset)
    }

    pub(crate) fn entry(&self, handle: u64) -> Option<&PreEntry> {
        self.entries.get(*self.by_handle.get(&handle)?)
    }

    pub(crate) fn for_identity(&self, identity: &str) -> u32 {
        self.by_identity.get(identity).copied().unwrap_or(0)
    }

    /// Every handle issued in this generation (waiting, drawn or purged), for the support
    /// lookup's scan of reference codes. O(n) in the handles issued.
    pub(crate) fn all_handles(&self) -> Vec<u64> {
        self.entries
            .iter()
            .map(|entry| entry.handle)
            .chain(self.drawn.keys().copied())
            .chain(self.purged.iter().copied())
            .collect()
    }

    /// Whether `handle` was ever issued in this generation.
    pub(crate) fn knows(&self, handle: u64) -> bool {
        self.by_handle.contains_key(&handle)
            || self.drawn.contains_key(&handle)
            || self.purged.contains(&handle)
    }

    fn push(&mut self, entry: PreEntry) {
        if !entry.identity.is_empty() {
            *self.by_identity.entry(entry.identity.clone()).or_default() += 1;
        }
        self.by_handle.insert(entry.handle, self.entries.len());
        self.entries.push(entry);
    }

    /// Takes back the newest entry (a pre-join that did not land).
    pub(crate) fn pop(&mut self) -> Option<PreEntry> {
        let entry = self.entries.pop()?;
        self.by_handle.remove(&entry.handle);
        if let Some(count) = self.by_identity.get_mut(&entry.identity) {
            *count -= 1;
            if *count == 0 {
                self.by_identity.remove(&entry.identity);
            }
        }
        Some(entry)
    }

    fn purge(&mut self) {
        for entry in self.entries.drain(..) {
            self.purged.insert(entry.handle);
        }
        self.by_handle.clear();
        self.by_identity.clear();
    }
}

/// The refusal of a pre-queue join at the pre-queue's hard ceiling.
pub(crate) fn pre_queue_full() -> ApiError {
    ApiError::new(
        ErrorCode::PrequeueFull,
        "the pre-queue for this drop is full; try again after the doors open",
    )
}

/// The drawn order of `entries`' handles: each identity's entries are shuffled, then dealt in
/// rounds (every identity's first, then every second, …), each round shuffled. An entry with no
/// identity is an identity of its own. Which of an identity's entries is its "first" is drawn
/// too, so no entry's position depends on when it arrived.
pub(crate) fn draw_order(entries: &[PreEntry], rng: &mut (impl Rng + CryptoRng)) -> Vec<u64> {
    let mut groups: Vec<Vec<u64>> = Vec::new();
    let mut group_of: HashMap<&str, usize> = HashMap::new();
    for entry in entries {
        if entry.identity.is_empty() {
            groups.push(vec![entry.handle]);
            continue;
        }
        let group = *group_of.entry(entry.identity.as_str()).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[group].push(entry.handle);
    }
    for group in &mut groups {
        group.shuffle(rng);
    }
    let rounds = groups.iter().map(Vec::len).max().unwrap_or(0);
    let mut order = Vec::with_capacity(entries.len());
    for round in 0..rounds {
        let start = order.len();
        order.extend(groups.iter().filter_map(|group| group.get(round)));
        order[start..].shuffle(rng);
    }
    order
}

impl Room {
    /// Whether a join now enters the pre-queue.
    pub(crate) fn pre_queue_open(&self, now_ms: i64) -> bool {
        self.effective_state(now_ms) == EffectiveState::Scheduled
    }

    /// Whether the doors have opened on an undrawn pre-queue: nothing may take a ticket before
    /// the draw, or a latecomer would stand ahead of everyone who pre-queued.
    pub fn draw_due(&self, now_ms: i64) -> bool {
        !self.pre_queue.entries.is_empty() && !self.pre_queue_open(now_ms)
    }

    /// The refusal of a join over `preQueueMaxPerIp` or the ceiling, if any.
    pub(crate) fn pre_join_refusal(&self, request: &JoinRequest) -> Option<ApiError> {
        if self.pre_queue.len() >= request.effective_pre_queue_ceiling() {
            return Some(pre_queue_full());
        }
        if !request.identity.is_empty()
            && let Some(cap) = self.config.pre_queue_max_per_ip
            && self.pre_queue.for_identity(&request.identity) >= cap
        {
            return Some(self.pre_queue_identity_limit());
        }
        None
    }

    /// The refusal of a pre-queue join over `preQueueMaxPerIp`.
    pub(crate) fn pre_queue_identity_limit(&self) -> ApiError {
        let cap = self.config.pre_queue_max_per_ip.unwrap_or_default();
        ApiError::new(
            ErrorCode::PrequeueIdentityLimit,
            format!("this address already holds {cap} entries in this drop's pre-queue"),
        )
    }

    /// A fresh handle: random, below 2^53, never issued in this generation.
    pub(crate) fn new_handle(&self, rng: &mut impl Rng) -> u64 {
        loop {
            let handle = rng.random_range(1..HANDLE_LIMIT);
            if !self.pre_queue.knows(handle) {
                return handle;
            }
        }
    }

    /// Enters the pre-queue with `handle` (checked by [`Room::pre_join_refusal`]).
    pub(crate) fn pre_join(
        &mut self,
        handle: u64,
        request: &JoinRequest,
        now_ms: i64,
    ) -> EventRecord {
        self.commit(
            now_ms,
            RoomEvent::PreJoined {
                handle,
                session_hash: request.session_hash.clone(),
                identity: request.identity.clone(),
            },
        )
    }

    /// The drawn order for the pre-queue as it stands.
    pub fn draw_order_now(&self, rng: &mut (impl Rng + CryptoRng)) -> Vec<u64> {
        draw_order(&self.pre_queue.entries, rng)
    }

    /// Draws the pre-queue into the line if the doors have opened on it.
    pub fn draw_if_due(
        &mut self,
        rng: &mut (impl Rng + CryptoRng),
        now_ms: i64,
    ) -> Option<EventRecord> {
        if !self.draw_due(now_ms) {
            return None;
        }
        let order = self.draw_order_now(rng);
        let first_ticket = self.next_ticket;
        Some(self.commit(
            now_ms,
            RoomEvent::Drawn {
                first_ticket,
                order,
            },
        ))
    }

    pub(crate) fn apply_pre_joined(&mut self, handle: u64, session_hash: &str, identity: &str) {
        self.pre_queue.push(PreEntry {
            handle,
            session_hash: session_hash.to_owned(),
            identity: identity.to_owned(),
        });
    }

    /// Gives every drawn handle its ticket, in order, from `first_ticket` (the line's next).
    pub(crate) fn apply_drawn(&mut self, first_ticket: u64, order: &[u64], at_ms: i64) {
        debug_assert_eq!(first_ticket, self.next_ticket, "a draw continues the line");
        for handle in order {
            let Some(entry) = self.pre_queue.entry(*handle).cloned() else {
                continue;
            };
            let ticket = self.next_ticket;
            self.tickets.push(TicketRecord {
                joined_at_ms: at_ms,
                session_hash: entry.session_hash,
                identity: entry.identity.clone(),
                status: TicketStatus::Waiting,
                door_spent: false,
            });
            self.next_ticket += 1;
            if !entry.identity.is_empty() {
                *self.waiting_by_identity.entry(entry.identity).or_default() += 1;
            }
            self.pre_queue.drawn.insert(*handle, ticket);
        }
        self.pre_queue.entries.clear();
        self.pre_queue.by_handle.clear();
        self.pre_queue.by_identity.clear();
    }

    pub(crate) fn apply_pre_queue_purged(&mut self) {
        self.pre_queue.purge();
    }

    /// Whether `handle` was issued in this generation (waiting, drawn or purged).
    pub fn knows_handle(&self, handle: u64) -> bool {
        self.pre_queue.knows(handle)
    }

    /// Number of pre-queue entries.
    pub fn pre_count(&self) -> u64 {
        self.pre_queue.len()
    }

    /// The answer for a handle still in the pre-queue: no position, the clock to opensAt plus
    /// the drain of the tickets already held as the floor of the wait.
    pub(crate) fn pre_queued_place(&self, handle: u64, bound: bool, now_ms: i64) -> PlaceStatus {
        let mut place = self.waiting_place(0, bound, now_ms);
        place.handle = Some(handle);
        place.eta_sec = self.scheduled_wait_floor(now_ms);
        place
    }

    /// What a pre-queue entry can be promised: the clock to opensAt plus the drain of every
    /// ticket already held (the draw decides the rest, so nothing is added for it).
    fn scheduled_wait_floor(&self, now_ms: i64) -> Option<u64> {
        let opens_at_ms = self.config.opens_at.unwrap_or(now_ms);
        let admitting_once_open = self.config.state != RoomState::Paused;
        wait_after_opening(
            opens_at_ms,
            now_ms,
            self.waiting(),
            self.config.rate_per_minute,
            admitting_once_open,
        )
    }
}

#[cfg(test)]
#[path = "prequeue_tests.rs"]
mod tests;
