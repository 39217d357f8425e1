//! Reading a visitor's place: the claim a verified token makes, what the engine answers about
//! it (a live place or the reason it lapsed), and the door check's pass/queue decision. All of
//! it is a pure function of the room and the clock.

use qm_core::eta::{wait_after_opening, wait_for_position};
use qm_core::room::{EffectiveState, RoomState};

use super::prequeue::HandleStatus;
use super::room::{Room, TicketStatus};
use super::targeting::PageVerdict;

/// A place a verified token claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    pub generation: u64,
    pub place: ClaimedPlace,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimedPlace {
    /// A ticket number; 0 is a bypass pass.
    Ticket(u64),
    /// A pre-queue handle: exchanged for its drawn ticket once the doors open.
    Handle(u64),
}

/// Why a presented place is no longer one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LapseReason {
    /// The room was deleted, re-created or never held this place.
    RoomReset,
    Ejected,
    Purged,
    /// The pass's entry window ran out.
    Expired,
    /// Join only: the place belongs to another browser's ownership cookie.
    Unbound,
}

impl LapseReason {
    pub fn as_str(self) -> &'static str {
        match self {
            LapseReason::RoomReset => "room_reset",
            LapseReason::Ejected => "ejected",
            LapseReason::Purged => "purged",
            LapseReason::Expired => "expired",
            LapseReason::Unbound => "unbound",
        }
    }
}

/// A live place, as the status wire reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlaceStatus {
    pub room_id: String,
    pub generation: u64,
    /// The ticket (0 for a bypass pass and for a pre-queue entry).
    pub ticket: u64,
    /// A pre-queue entry's handle, while it waits for the draw.
    pub handle: Option<u64>,
    /// Entries in the room's pre-queue.
    pub pre_count: u64,
    /// 1-based; `None` once passed.
    pub position: Option<u64>,
    pub ahead: Option<u64>,
    /// `None` when the room admits nobody.
    pub eta_sec: Option<u64>,
    pub state: EffectiveState,
    pub passed: bool,
    /// The targetUrl, for a passed place.
    pub redirect_url: Option<String>,
    /// 0 while waiting.
    pub pass_expires_at_ms: i64,
    pub new_place: bool,
    pub bound: bool,
    pub now_ms: i64,
    pub opens_at_ms: Option<i64>,
    pub branding_json: String,
    /// Join only: why the presented claim was replaced.
    pub replaced_reason: Option<LapseReason>,
}

/// What the engine says about a claimed place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlaceAnswer {
    Place(PlaceStatus),
    Lapsed(LapseReason),
}

/// The door check's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckAction {
    Pass,
    Queue,
}

impl CheckAction {
    pub fn as_str(self) -> &'static str {
        match self {
            CheckAction::Pass => "pass",
            CheckAction::Queue => "queue",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckAnswer {
    pub action: CheckAction,
    /// `bypass`, `passed`, `session`, `no_token`, `waiting`, `pass_spent`, `session_ended` or
    /// a lapse reason.
    pub reason: &'static str,
    pub state: EffectiveState,
    pub generation: u64,
    pub target_url: String,
    pub tag_origins: Vec<String>,
    /// The check opened (or reclaimed) a door session under the key it was offered.
    pub session_opened: bool,
    /// The presented token or key is dead for good: the client drops both.
    pub clear_token: bool,
    /// When the door session found or opened ends at the latest (0 without one).
    pub session_expires_at_ms: i64,
    /// The page's verdict on a scoped room (`None` on an unscoped one).
    pub targeting: Option<PageVerdict>,
}

impl Room {
    /// The status of a claimed place, or why it lapsed. `session_hash` only decides `bound`.
    pub fn status(&self, claim: &Claim, session_hash: &str, now_ms: i64) -> PlaceAnswer {
        if claim.generation != self.generation {
            return PlaceAnswer::Lapsed(LapseReason::RoomReset);
        }
        let ticket = match claim.place {
            ClaimedPlace::Ticket(ticket) => ticket,
            ClaimedPlace::Handle(handle) => match self.pre_queue.handle_status(handle) {
                HandleStatus::Drawn(ticket) => ticket,
                HandleStatus::Lapsed(reason) => return PlaceAnswer::Lapsed(reason),
                HandleStatus::Waiting => {
                    let bound = self.pre_queue.entry(handle).is_some_and(|entry| {
                        !entry.session_hash.is_empty() && entry.session_hash == session_hash
                    });
                    return PlaceAnswer::Place(self.pre_queued_place(handle, bound, now_ms));
                }
            },
        };
        if ticket >= self.next_ticket {
            return PlaceAnswer::Lapsed(LapseReason::RoomReset);
        }
        let state = self.effective_state(now_ms);
        if ticket == 0 {
            // A bypass pass holds nothing: it is a pass exactly while the queue stays off.
            return match state {
                EffectiveState::Bypass => PlaceAnswer::Place(self.passed_place(
                    0,
                    now_ms + self.pass_ttl_ms(),
                    false,
                    now_ms,
                )),
                _ => PlaceAnswer::Lapsed(LapseReason::Expired),
            };
        }
        let Some(record) = self.ticket(ticket) else {
            return PlaceAnswer::Lapsed(LapseReason::RoomReset);
        };
        let bound = !record.session_hash.is_empty() && record.session_hash == session_hash;
        match record.status {
            TicketStatus::Waiting if state == EffectiveState::Bypass => PlaceAnswer::Place(
                self.passed_place(ticket, now_ms + self.pass_ttl_ms(), bound, now_ms),
            ),
            TicketStatus::Waiting => PlaceAnswer::Place(self.waiting_place(ticket, bound, now_ms)),
            TicketStatus::Passed { at_ms } if now_ms < self.pass_expires_at(at_ms) => {
                PlaceAnswer::Place(self.passed_place(
                    ticket,
                    self.pass_expires_at(at_ms),
                    bound,
                    now_ms,
                ))
            }
            TicketStatus::Passed { .. } => PlaceAnswer::Lapsed(LapseReason::Expired),
            TicketStatus::Ejected => PlaceAnswer::Lapsed(LapseReason::Ejected),
            TicketStatus::Purged => PlaceAnswer::Lapsed(LapseReason::Purged),
        }
    }

    /// A door answer with this room's particulars and no session.
    pub(crate) fn check_answer(
        &self,
        action: CheckAction,
        reason: &'static str,
        state: EffectiveState,
    ) -> CheckAnswer {
        CheckAnswer {
            action,
            reason,
            state,
            generation: self.generation,
            target_url: self.config.target_url.clone(),
            tag_origins: self.config.effective_tag_origins(),
            session_opened: false,
            clear_token: false,
            session_expires_at_ms: 0,
            targeting: None,
        }
    }

    fn base_place(&self, ticket: u64, bound: bool, now_ms: i64) -> PlaceStatus {
        PlaceStatus {
            room_id: self.config.id.clone(),
            generation: self.generation,
            ticket,
            handle: None,
            pre_count: self.pre_count(),
            position: None,
            ahead: None,
            eta_sec: None,
            state: self.effective_state(now_ms),
            passed: false,
            redirect_url: None,
            pass_expires_at_ms: 0,
            new_place: false,
            bound,
            now_ms,
            opens_at_ms: self.config.opens_at,
            branding_json: self.branding_json.clone(),
            replaced_reason: None,
        }
    }

    pub(crate) fn waiting_place(&self, ticket: u64, bound: bool, now_ms: i64) -> PlaceStatus {
        let mut place = self.base_place(ticket, bound, now_ms);
        if let Some(position) = self.position_of(ticket) {
            place.position = Some(position);
            place.ahead = Some(position - 1);
            let rate = self.config.rate_per_minute;
            place.eta_sec = match (place.state, self.config.opens_at) {
                (EffectiveState::Scheduled, Some(opens_at_ms)) => {
                    let admitting_once_open = self.config.state != RoomState::Paused;
                    wait_after_opening(opens_at_ms, now_ms, position, rate, admitting_once_open)
                }
                (state, _) => wait_for_position(position, rate, state == EffectiveState::Active),
            };
        }
        place
    }

    pub(crate) fn passed_place(
        &self,
        ticket: u64,
        expires_at_ms: i64,
        bound: bool,
        now_ms: i64,
    ) -> PlaceStatus {
        let mut place = self.base_place(ticket, bound, now_ms);
        place.passed = true;
        place.eta_sec = Some(0);
        place.redirect_url = Some(self.config.target_url.clone());
        place.pass_expires_at_ms = expires_at_ms;
        place
    }
}
