//! Door sessions: what lets an admitted visitor through page after page without queueing again.
//!
//! The first door check that presents a live pass opens a session bound to a fresh key the
//! edge drew (only its hash reaches the engine) and *spends* the pass: from then on the key,
//! not the token, is the credential. The same browser (its ownership cookie proves the ticket)
//! may reclaim a live session under a new key; anybody else presenting the token is refused
//! (`pass_spent`). A session ends when idle for `sessionTtlSec`, `sessionMaxSec` after it
//! opened, or when its ticket is ejected; ended, its key and token are dead for good
//! (`clearToken`).
//!
//! Opening is journaled (`DoorOpened`) before it is answered, so an admission survives a
//! restart and one that could not be written is taken back. Use is journaled coarsely
//! (`DoorSeen`, at most once per quarter of `sessionTtlSec`), so the idle end is decided by every
//! engine alike: a session ends more than `sessionTtlSec` and at most 1.25 × `sessionTtlSec`
//! after its last check.
//!
//! A session opened from a pass that held a `maxConcurrent` slot keeps that slot while it is
//! live (past `passedTtlSec` too) and gives it back when it ends (`presence.rs` counts it).

use std::collections::{BTreeMap, HashMap};

use qm_core::room::EffectiveState;

use super::event::RoomEvent;
use super::place::{CheckAction, CheckAnswer, Claim, ClaimedPlace, PlaceAnswer};
use super::room::{Room, TicketStatus};
use super::targeting::PageScope;

/// `sessionTtlSec` when the room does not set it: idle minutes before a session ends.
pub const DEFAULT_SESSION_TTL_SEC: u64 = 1200;
/// `sessionMaxSec` when the room does not set it: no session outlives a day.
pub const DEFAULT_SESSION_MAX_SEC: u64 = 86_400;
/// Ended sessions kept before the map is swept (they decide nothing once ended).
const SWEEP_SLACK: usize = 1024;

/// What a visitor presents at the door, as verified facts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DoorInput {
    /// The place the presented token names (verified at the edge).
    pub claim: Option<Claim>,
    /// The page being visited (`url=` or the Referer, unparsed), when the edge was told.
    pub page: Option<String>,
    /// Hash of the ownership cookie, "" without one.
    pub ownership_hash: String,
    /// Hash of a presented door-session key, "" without one.
    pub key_hash: String,
    /// Hash of the fresh key a session this check opens is bound to, "" when none was drawn.
    pub new_key_hash: String,
}

/// One open door session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DoorSession {
    pub(crate) key_hash: String,
    pub(crate) opened_at_ms: i64,
    pub(crate) seen_at_ms: i64,
    /// When its pass was granted (a slot it holds outlives the pass's own window).
    pub(crate) granted_at_ms: i64,
    /// Whether the pass it was opened from held a `maxConcurrent` slot.
    pub(crate) holds_slot: bool,
}

/// A room's door sessions, by ticket and by key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct DoorSessions {
    by_ticket: BTreeMap<u64, DoorSession>,
    by_key: HashMap<String, u64>,
}

/// The bounds of a room's sessions, in ms.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SessionBounds {
    idle_ms: i64,
    max_ms: i64,
}

impl SessionBounds {
    /// How often use is journaled: a quarter of the idle window.
    fn refresh_ms(self) -> i64 {
        (self.idle_ms / 4).max(1000)
    }

    /// When `session` ends: idle or absolute, whichever comes first.
    pub(crate) fn ends_at(self, session: &DoorSession) -> i64 {
        let idle_end = session.seen_at_ms + self.idle_ms + self.refresh_ms();
        idle_end.min(session.opened_at_ms + self.max_ms)
    }
}

impl DoorSessions {
    pub(crate) fn of_ticket(&self, ticket: u64) -> Option<&DoorSession> {
        self.by_ticket.get(&ticket)
    }

    fn ticket_of_key(&self, key_hash: &str) -> Option<u64> {
        self.by_key.get(key_hash).copied()
    }

    /// A session opened, or reclaimed under a new key (the old key dies; the absolute end
    /// still counts from the first opening).
    pub(crate) fn open(&mut self, ticket: u64, key_hash: &str, session: DoorSession) {
        let session = match self.by_ticket.remove(&ticket) {
            Some(old) => {
                self.by_key.remove(&old.key_hash);
                DoorSession {
                    opened_at_ms: old.opened_at_ms,
                    ..session
                }
            }
            None => session,
        };
        self.by_key.insert(key_hash.to_owned(), ticket);
        self.by_ticket.insert(ticket, session);
    }

    pub(crate) fn seen(&mut self, ticket: u64, at_ms: i64) {
        if let Some(session) = self.by_ticket.get_mut(&ticket) {
            session.seen_at_ms = session.seen_at_ms.max(at_ms);
        }
    }

    /// The ticket was ejected: its session ends now.
    pub(crate) fn end(&mut self, ticket: u64) {
        if let Some(session) = self.by_ticket.remove(&ticket) {
            self.by_key.remove(&session.key_hash);
        }
    }

    /// Forgets sessions that ended before `at_ms`, once they clearly outnumber the live ones:
    /// amortised O(1). Their tickets stay spent (the ticket record says so).
    pub(crate) fn sweep(&mut self, bounds: SessionBounds, at_ms: i64) {
        if self.by_ticket.len() <= SWEEP_SLACK {
            return;
        }
        let live = self
            .by_ticket
            .values()
            .filter(|session| at_ms < bounds.ends_at(session))
            .count();
        if self.by_ticket.len() <= live * 2 + SWEEP_SLACK {
            return;
        }
        let by_key = &mut self.by_key;
        self.by_ticket.retain(|_, session| {
            let keep = at_ms < bounds.ends_at(session);
            if !keep {
                by_key.remove(&session.key_hash);
            }
            keep
        });
    }

    /// Live sessions holding a slot whose pass is past its own window (`granted + ttl`).
    pub(crate) fn slots_past_pass(
        &self,
        bounds: SessionBounds,
        pass_ttl_ms: i64,
        now_ms: i64,
    ) -> u64 {
        self.by_ticket
            .values()
            .filter(|session| {
                session.holds_slot
                    && session.granted_at_ms + pass_ttl_ms <= now_ms
                    && now_ms < bounds.ends_at(session)
            })
            .count() as u64
    }
}

/// What the door decides, and the change it needs first (if any).
#[derive(Debug, Clone, PartialEq)]
pub struct DoorDecision {
    pub answer: CheckAnswer,
    pub change: Option<RoomEvent>,
}

impl Room {
    pub(crate) fn session_bounds(&self) -> SessionBounds {
        let seconds = |value: Option<u64>, default: u64| value.unwrap_or(default) as i64 * 1000;
        SessionBounds {
            idle_ms: seconds(self.config.session_ttl_sec, DEFAULT_SESSION_TTL_SEC),
            max_ms: seconds(self.config.session_max_sec, DEFAULT_SESSION_MAX_SEC),
        }
    }

    /// Door sessions live at `now_ms`.
    pub fn live_door_sessions(&self, now_ms: i64) -> u64 {
        let bounds = self.session_bounds();
        self.door
            .by_ticket
            .values()
            .filter(|session| now_ms < bounds.ends_at(session))
            .count() as u64
    }

    /// Whether `ticket` holds its slot through a live door session at `now_ms`.
    pub(crate) fn session_holds_slot(&self, ticket: u64, now_ms: i64) -> bool {
        self.door.of_ticket(ticket).is_some_and(|session| {
            session.holds_slot && now_ms < self.session_bounds().ends_at(session)
        })
    }

    /// The door check: pass or queue, and whether a session must be opened (or its use
    /// recorded) first. Pure: a store answers from a read copy when `change` is `None`, and
    /// otherwise runs [`super::Command::Door`], which decides again and commits the change.
    pub fn door_decision(&self, input: &DoorInput, now_ms: i64) -> DoorDecision {
        // A page the room's rules leave out passes before anything is spent or opened.
        let targeting = self.judge_page(input.page.as_deref());
        if let Some(verdict) = targeting.as_ref().filter(|v| v.scope == PageScope::Out) {
            return DoorDecision {
                answer: self.out_of_scope(verdict.clone(), now_ms),
                change: None,
            };
        }
        let mut decision = self.door_decision_in_scope(input, now_ms);
        decision.answer.targeting = targeting;
        decision
    }

    fn door_decision_in_scope(&self, input: &DoorInput, now_ms: i64) -> DoorDecision {
        let state = self.effective_state(now_ms);
        let bounds = self.session_bounds();
        let answer = |action, reason| self.check_answer(action, reason, state);
        if state == EffectiveState::Bypass {
            return DoorDecision {
                answer: answer(CheckAction::Pass, "bypass"),
                change: None,
            };
        }
        // A presented key: a live session lets the visitor through whatever the token says.
        let mut dead_key = false;
        if !input.key_hash.is_empty() {
            let session = self
                .door
                .ticket_of_key(&input.key_hash)
                .and_then(|ticket| Some((ticket, self.door.of_ticket(ticket)?)));
            match session {
                Some((ticket, session)) if now_ms < bounds.ends_at(session) => {
                    let mut pass = answer(CheckAction::Pass, "session");
                    pass.session_expires_at_ms = bounds.ends_at(session);
                    let stale = now_ms - session.seen_at_ms >= bounds.refresh_ms();
                    return DoorDecision {
                        answer: pass,
                        change: stale.then_some(RoomEvent::DoorSeen { ticket }),
                    };
                }
                _ => dead_key = true,
            }
        }
        let Some(claim) = &input.claim else {
            let reason = if dead_key {
                "session_ended"
            } else {
                "no_token"
            };
            let mut queue = answer(CheckAction::Queue, reason);
            queue.clear_token = dead_key;
            return DoorDecision {
                answer: queue,
                change: None,
            };
        };
        let mut decision = self.spend_pass(claim, input, now_ms);
        // A dead key beside a token still waiting: the token is worth keeping (its place).
        decision.answer.clear_token |= dead_key
            && decision.answer.action == CheckAction::Queue
            && decision.answer.reason != "waiting";
        decision
    }

    /// A presented token: a live pass opens a session (once), a spent one is refused, anything
    /// else queues with its reason.
    fn spend_pass(&self, claim: &Claim, input: &DoorInput, now_ms: i64) -> DoorDecision {
        let state = self.effective_state(now_ms);
        let queue = |reason: &'static str, clear_token: bool| {
            let mut answer = self.check_answer(CheckAction::Queue, reason, state);
            answer.clear_token = clear_token;
            DoorDecision {
                answer,
                change: None,
            }
        };
        match self.status(claim, "", now_ms) {
            PlaceAnswer::Place(place) if place.passed => {}
            PlaceAnswer::Place(_) => return queue("waiting", false),
            PlaceAnswer::Lapsed(reason) => return queue(reason.as_str(), true),
        }
        let ClaimedPlace::Ticket(ticket) = claim.place else {
            return queue("waiting", false);
        };
        // A bypass pass (ticket 0) lapses with the bypass, so a passed place has a record.
        let Some(record) = self.ticket(ticket) else {
            return queue("room_reset", true);
        };
        let TicketStatus::Passed { at_ms: granted_at } = record.status else {
            return queue("waiting", false);
        };
        let bounds = self.session_bounds();
        let reclaim = match self.door.of_ticket(ticket) {
            None if !record.door_spent => false,
            // Only the browser that queued (its ownership cookie) may take a live session
            // over under a new key; a copied token is refused.
            Some(session)
                if now_ms < bounds.ends_at(session)
                    && !input.ownership_hash.is_empty()
                    && input.ownership_hash == record.session_hash =>
            {
                true
            }
            Some(session) if now_ms >= bounds.ends_at(session) => {
                return queue("session_ended", true);
            }
            _ => return queue("pass_spent", true),
        };
        let mut pass = self.check_answer(CheckAction::Pass, "passed", state);
        if input.new_key_hash.is_empty() {
            // Nobody drew a key (an engine-internal caller): the pass admits without a session.
            return DoorDecision {
                answer: pass,
                change: None,
            };
        }
        let holds_slot = reclaim && self.session_holds_slot(ticket, now_ms)
            || !reclaim
                && self
                    .pass_of(ticket)
                    .is_some_and(|live| self.pass_holds_slot(&live, now_ms));
        pass.session_opened = true;
        pass.session_expires_at_ms = match self.door.of_ticket(ticket) {
            Some(session) => (now_ms + bounds.idle_ms + bounds.refresh_ms())
                .min(session.opened_at_ms + bounds.max_ms),
            None => now_ms + (bounds.idle_ms + bounds.refresh_ms()).min(bounds.max_ms),
        };
        DoorDecision {
            answer: pass,
            change: Some(RoomEvent::DoorOpened {
                ticket,
                key_hash: input.new_key_hash.clone(),
                granted_at_ms: granted_at,
                holds_slot,
            }),
        }
    }

    /// Applies a journaled opening.
    pub(crate) fn apply_door_opened(
        &mut self,
        ticket: u64,
        key_hash: &str,
        granted_at_ms: i64,
        holds_slot: bool,
        at_ms: i64,
    ) {
        let Some(record) = self.ticket_mut(ticket) else {
            return;
        };
        record.door_spent = true;
        let bounds = self.session_bounds();
        self.door.sweep(bounds, at_ms);
        self.door.open(
            ticket,
            key_hash,
            DoorSession {
                key_hash: key_hash.to_owned(),
                opened_at_ms: at_ms,
                seen_at_ms: at_ms,
                granted_at_ms,
                holds_slot,
            },
        );
    }
}
