//! The support lookup's reading of a room (GET /api/admin/rooms/:id/visitors): where one place
//! stands, in the words support reads out (state, position, the pass's expiry, presence), with
//! its binding to a browser only as a one-way digest. Never the raw session hash, the address
//! the place was taken from, or anything a token could be rebuilt from.
//!
//! A lookup by reference code cannot invert the code (that is its point): it computes the code
//! of every place the room issued in this generation and compares, which is O(n) in the room's
//! tickets and handles. The scan is split so the room lock is held only to copy the list of
//! places ([`Room::ref_scan`]); the codes are computed outside it ([`matching_places`]) and
//! bounded by [`MAX_REF_SCAN`], newest tickets first, so a very long room still answers for
//! everyone waiting or recently through.

use qm_core::room::EffectiveState;
use qm_core::support_ref::{session_digest, support_ref_with_key};
use qm_core::token::VisitorPlace;
use serde_json::{Map, Value, json};

use super::place::{Claim, ClaimedPlace, PlaceAnswer};
use super::room::{Room, TicketStatus};

/// Most places one reference lookup computes codes for (tickets, newest first, then handles).
/// About a second of HMACs per key in a release build: fine for a support tool, and it runs off
/// the room lock.
pub const MAX_REF_SCAN: u64 = 1_000_000;

/// The keys the lookup derives from SECRET: the reference code's (SECRET first, then
/// SECRET_PREVIOUS during a rotation) and the session digest's.
#[derive(Clone)]
pub struct LookupKeys {
    pub ref_keys: Vec<[u8; 32]>,
    pub session_key: [u8; 32],
}

impl LookupKeys {
    /// The code the waiting page shows now for `place` (under SECRET).
    fn current_ref(&self, room_id: &str, generation: u64, place: VisitorPlace) -> Option<String> {
        self.ref_keys
            .first()
            .map(|key| support_ref_with_key(key, room_id, generation, place))
    }

    /// Whether `place` was shown as `code` under any key of the keyring.
    pub fn shows(&self, room_id: &str, generation: u64, place: VisitorPlace, code: &str) -> bool {
        self.ref_keys
            .iter()
            .any(|key| support_ref_with_key(key, room_id, generation, place) == code)
    }
}

/// The places a reference lookup compares, copied from the room in one short step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefScan {
    pub room_id: String,
    pub generation: u64,
    /// Highest ticket issued (0: none).
    pub last_ticket: u64,
    /// Every pre-queue handle issued in this generation.
    pub handles: Vec<u64>,
}

/// The places of `scan` whose code `shows` recognises: tickets from the newest down, then
/// handles, at most [`MAX_REF_SCAN`] places compared in all.
pub fn matching_places(scan: &RefScan, shows: impl Fn(VisitorPlace) -> bool) -> Vec<VisitorPlace> {
    let tickets = (1..=scan.last_ticket).rev().map(VisitorPlace::Ticket);
    let handles = scan.handles.iter().copied().map(VisitorPlace::Handle);
    tickets
        .chain(handles)
        .take(MAX_REF_SCAN as usize)
        .filter(|place| shows(*place))
        .collect()
}

impl Room {
    /// What a reference lookup must compare (see [`matching_places`]).
    pub fn ref_scan(&self) -> RefScan {
        RefScan {
            room_id: self.config.id.clone(),
            generation: self.generation,
            last_ticket: self.next_ticket.saturating_sub(1),
            handles: self.pre_queue.all_handles(),
        }
    }

    /// The support view of `place`, or `None` when this generation never issued it. A drawn
    /// handle is answered as the ticket it drew (that ticket's code is what the page shows now).
    pub fn visitor_json(
        &self,
        place: VisitorPlace,
        keys: &LookupKeys,
        now_ms: i64,
    ) -> Option<Value> {
        let claimed = match place {
            VisitorPlace::Ticket(ticket) => {
                self.ticket(ticket)?;
                ClaimedPlace::Ticket(ticket)
            }
            VisitorPlace::Handle(handle) => {
                if !self.pre_queue.knows(handle) {
                    return None;
                }
                ClaimedPlace::Handle(handle)
            }
        };
        let claim = Claim {
            generation: self.generation,
            place: claimed,
        };
        // The same reading the visitor's own status gets, so support and page never disagree.
        let answer = self.status(&claim, "", now_ms);
        let mut fields = Map::new();
        fields.insert("generation".into(), json!(self.generation));
        fields.insert(
            "roomState".into(),
            json!(self.effective_state(now_ms).as_str()),
        );
        let ticket = match &answer {
            PlaceAnswer::Place(status) if status.handle.is_some() => None,
            PlaceAnswer::Place(status) => Some(status.ticket),
            PlaceAnswer::Lapsed(_) => match place {
                VisitorPlace::Ticket(ticket) => Some(ticket),
                VisitorPlace::Handle(_) => None,
            },
        };
        fields.insert("ticket".into(), json!(ticket));
        let shown = match ticket {
            Some(ticket) => VisitorPlace::Ticket(ticket),
            None => place,
        };
        fields.insert(
            "ref".into(),
            json!(keys.current_ref(&self.config.id, self.generation, shown)),
        );
        match &answer {
            PlaceAnswer::Place(status) if status.handle.is_some() => {
                fields.insert("state".into(), json!("pre_queued"));
                fields.insert("preQueued".into(), json!(status.pre_count));
                fields.insert("opensAt".into(), json!(status.opens_at_ms));
            }
            PlaceAnswer::Place(status) if status.passed => {
                fields.insert("state".into(), json!("passed"));
                fields.insert("passExpiresAt".into(), json!(status.pass_expires_at_ms));
                let remaining_ms = (status.pass_expires_at_ms - now_ms).max(0);
                fields.insert(
                    "passTtlRemainingSec".into(),
                    json!(remaining_ms.div_euclid(1000)),
                );
                if self.effective_state(now_ms) == EffectiveState::Bypass {
                    // A bypass pass lasts exactly while the queue stays off.
                    fields.insert("bypass".into(), json!(true));
                }
            }
            PlaceAnswer::Place(status) => {
                fields.insert("state".into(), json!("waiting"));
                fields.insert("position".into(), json!(status.position));
                fields.insert("ahead".into(), json!(status.ahead));
                fields.insert("etaSec".into(), json!(status.eta_sec));
            }
            PlaceAnswer::Lapsed(reason) => {
                fields.insert("state".into(), json!("expired"));
                fields.insert("reason".into(), json!(reason.as_str()));
            }
        }
        let session_hash = match (ticket, place) {
            (Some(ticket), _) => {
                let record = self.ticket(ticket)?;
                fields.insert("joinedAt".into(), json!(record.joined_at_ms));
                if let TicketStatus::Passed { at_ms } = record.status {
                    fields.insert("passedAt".into(), json!(at_ms));
                }
                if record.status == TicketStatus::Waiting
                    || matches!(record.status, TicketStatus::Passed { .. })
                {
                    let last_seen = self
                        .presence
                        .get(&ticket)
                        .copied()
                        .unwrap_or(record.joined_at_ms)
                        .max(record.joined_at_ms);
                    fields.insert("lastSeenAt".into(), json!(last_seen));
                    fields.insert("present".into(), json!(self.is_present(ticket, now_ms)));
                }
                record.session_hash.clone()
            }
            (None, VisitorPlace::Handle(handle)) => self
                .pre_queue
                .entry(handle)
                .map(|entry| entry.session_hash.clone())
                .unwrap_or_default(),
            (None, VisitorPlace::Ticket(_)) => String::new(),
        };
        let bound = !session_hash.is_empty();
        fields.insert("bound".into(), json!(bound));
        fields.insert(
            "session".into(),
            match bound {
                true => json!(session_digest(&keys.session_key, &session_hash)),
                false => Value::Null,
            },
        );
        Some(Value::Object(fields))
    }
}
