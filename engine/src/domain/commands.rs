//! Commands on a room. Each validates against the current state, builds exactly one event and
//! commits it through [`Room::apply`]; a command that changes nothing returns no event.

use qm_core::room::{EffectiveState, ProtectionMode, RoomConfig, RoomState, check_flush_count};
use qm_core::{ApiError, ErrorCode};
use rand::Rng;

use super::event::{EjectedFrom, EventRecord, PassedBy, RoomEvent};
use super::place::{Claim, LapseReason, PlaceAnswer, PlaceStatus};
use super::room::{CREDIT_CAP_SIXTIETHS, Room, TicketStatus};

/// Seconds of missed slices a late tick makes up (the ticker was starved, not the room paused).
const MAX_CATCH_UP_SECONDS: i64 = 5;

/// A visitor asking for a place.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JoinRequest {
    pub claim: Option<Claim>,
    /// Hash of the ownership cookie; empty = no holder (exempt from the identity cap).
    pub session_hash: String,
    /// The client address that counts for `queueMaxPerIp` and `preQueueMaxPerIp`; empty =
    /// exempt.
    pub identity: String,
    /// The pre-queue's hard ceiling (`PREQUEUE_MAX`); `None` = the default.
    pub pre_queue_ceiling: Option<u64>,
    /// The gateway's bot score (`qm_core::bot`), for the room's `protection`.
    pub bot_score: u32,
}

impl JoinRequest {
    /// The pre-queue ceiling in force for this join.
    pub fn effective_pre_queue_ceiling(&self) -> u64 {
        self.pre_queue_ceiling
            .unwrap_or(super::prequeue::DEFAULT_PRE_QUEUE_CEILING)
    }
}

/// What a purge discarded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Purged {
    pub waiting: u64,
    pub pre_queue: u64,
}

impl Purged {
    /// Everything discarded: the `purged` figure of the admin answer.
    pub fn total(self) -> u64 {
        self.waiting + self.pre_queue
    }
}

/// A join's answer and the event it recorded, if it minted a ticket.
#[derive(Debug, Clone, PartialEq)]
pub struct JoinOutcome {
    pub place: PlaceStatus,
    pub record: Option<EventRecord>,
}

impl Room {
    /// Keeps a claimed place that is still one and belongs to this browser; otherwise mints a
    /// new place at the back of the line (ticket 0 in a bypass room), saying why the claim was
    /// not honoured.
    pub fn join(
        &mut self,
        request: &JoinRequest,
        now_ms: i64,
        rng: &mut impl Rng,
    ) -> Result<JoinOutcome, ApiError> {
        let replaced_reason = match self.join_without_minting(request, now_ms) {
            Ok(place) => {
                return Ok(JoinOutcome {
                    place,
                    record: None,
                });
            }
            Err(reason) => reason,
        };
        if let Some(refusal) = self.protection_refusal(request) {
            return Err(refusal);
        }
        if self.pre_queue_open(now_ms) {
            if let Some(refusal) = self.pre_join_refusal(request) {
                return Err(refusal);
            }
            let handle = self.new_handle(rng);
            let record = self.pre_join(handle, request, now_ms);
            return Ok(JoinOutcome {
                place: self.minted_pre_queue_place(handle, replaced_reason, now_ms),
                record: Some(record),
            });
        }
        if self.draw_due(now_ms) {
            // The store draws before it joins; reaching here means it could not yet.
            return Err(ApiError::new(
                ErrorCode::StorageUnavailable,
                "the doors are opening: the pre-queue is being drawn, try again in a moment",
            ));
        }
        if !request.identity.is_empty()
            && let Some(cap) = self.config.queue_max_per_ip
            && self.waiting_for_identity(&request.identity) >= cap
        {
            return Err(self.identity_limit_error());
        }
        let ticket = self.next_ticket;
        let record = self.commit(
            now_ms,
            RoomEvent::Joined {
                ticket,
                session_hash: request.session_hash.clone(),
                identity: request.identity.clone(),
            },
        );
        Ok(JoinOutcome {
            place: self.minted_place(ticket, request, replaced_reason, now_ms),
            record: Some(record),
        })
    }

    /// The half of a join that mints nothing: the kept claimed place, or a bypass pass (ticket
    /// 0). `Err` carries why a claim was not honoured when a ticket must be minted.
    pub fn join_without_minting(
        &self,
        request: &JoinRequest,
        now_ms: i64,
    ) -> Result<PlaceStatus, Option<LapseReason>> {
        let replaced_reason = match &request.claim {
            None => None,
            Some(claim) => match self.honour_claim(claim, &request.session_hash, now_ms) {
                Ok(place) => return Ok(place),
                Err(reason) => Some(reason),
            },
        };
        if self.effective_state(now_ms) == EffectiveState::Bypass {
            return Ok(self.bypass_place(replaced_reason, now_ms));
        }
        Err(replaced_reason)
    }

    /// A new bypass pass: ticket 0, holding nothing.
    pub fn bypass_place(&self, replaced_reason: Option<LapseReason>, now_ms: i64) -> PlaceStatus {
        let mut place = self.passed_place(0, now_ms + self.pass_ttl_ms(), false, now_ms);
        place.new_place = true;
        place.replaced_reason = replaced_reason;
        place
    }

    /// The answer to a join that minted `ticket` (already applied to this room).
    pub fn minted_place(
        &self,
        ticket: u64,
        request: &JoinRequest,
        replaced_reason: Option<LapseReason>,
        now_ms: i64,
    ) -> PlaceStatus {
        let mut place = self.waiting_place(ticket, !request.session_hash.is_empty(), now_ms);
        place.new_place = true;
        place.replaced_reason = replaced_reason;
        place
    }

    /// The answer to a join that entered the pre-queue with `handle` (already applied).
    pub fn minted_pre_queue_place(
        &self,
        handle: u64,
        replaced_reason: Option<LapseReason>,
        now_ms: i64,
    ) -> PlaceStatus {
        let mut place = self.pre_queued_place(handle, true, now_ms);
        place.new_place = true;
        place.replaced_reason = replaced_reason;
        place
    }

    /// The refusal of a new place for a request that scores as a bot in a room whose
    /// `protection` enforces (`monitor` scores and admits). A place already held is never
    /// refused: the check comes after the claim is honoured.
    pub fn protection_refusal(&self, request: &JoinRequest) -> Option<ApiError> {
        let mode = self.config.protection.map(|protection| protection.mode)?;
        if mode != ProtectionMode::Enforce || request.bot_score < qm_core::bot::BLOCK_AT {
            return None;
        }
        Some(ApiError::new(
            ErrorCode::BlockedByProtection,
            "this request looks automated; open the waiting page in a browser to join",
        ))
    }

    /// The refusal of a join over `queueMaxPerIp`.
    pub fn identity_limit_error(&self) -> ApiError {
        let cap = self.config.queue_max_per_ip.unwrap_or_default();
        ApiError::new(
            ErrorCode::QueueIdentityLimit,
            format!(
                "this address already holds {cap} places in this line; wait for one to be admitted"
            ),
        )
    }

    /// The claimed place if it is kept, else why not.
    fn honour_claim(
        &self,
        claim: &Claim,
        session_hash: &str,
        now_ms: i64,
    ) -> Result<PlaceStatus, LapseReason> {
        let place = match self.status(claim, session_hash, now_ms) {
            PlaceAnswer::Place(place) => place,
            PlaceAnswer::Lapsed(reason) => return Err(reason),
        };
        if let Some(handle) = place.handle {
            let recorded = self
                .pre_queue
                .entry(handle)
                .map(|entry| entry.session_hash.as_str())
                .unwrap_or_default();
            if !recorded.is_empty() && recorded != session_hash {
                return Err(LapseReason::Unbound);
            }
        } else if place.ticket != 0 {
            let recorded = self
                .ticket(place.ticket)
                .map(|record| record.session_hash.as_str())
                .unwrap_or_default();
            if !recorded.is_empty() && recorded != session_hash {
                return Err(LapseReason::Unbound);
            }
        }
        Ok(place)
    }

    /// One outflow slice for the calendar second of `now_ms` (later calls in the same second
    /// do nothing): accrue `ratePerMinute / 60`, admit what the credit, the free
    /// `maxConcurrent` slots and the line allow (absent holders pass with the batch for free,
    /// see `presence.rs`), and cap the carried credit so an idle or blocked room does not bank
    /// a burst.
    pub fn tick(&mut self, now_ms: i64) -> Option<EventRecord> {
        let second = now_ms.div_euclid(1000);
        let elapsed = match self.carry.last_tick_second {
            Some(last) if second <= last => return None,
            Some(last) => (second - last).min(MAX_CATCH_UP_SECONDS) as u64,
            None => 1,
        };
        self.carry.last_tick_second = Some(second);
        if self.deleted
            || self.effective_state(now_ms) != EffectiveState::Active
            || self.draw_due(now_ms)
        {
            return None;
        }
        let credit = self.carry.credit_sixtieths + u64::from(self.config.rate_per_minute) * elapsed;
        // `paid` of the `admit` cost credit and a slot; the rest are ghosts (presence.rs).
        let (admit, paid) = self.outflow_batch(credit, now_ms);
        let credit_after = (credit - paid * 60).min(CREDIT_CAP_SIXTIETHS);
        if admit == 0 {
            self.carry.credit_sixtieths = credit_after;
            return None;
        }
        Some(self.promote(admit, PassedBy::Outflow, Some(credit_after), now_ms))
    }

    /// Hands this room's outflow to a new holder of its lease: it starts from the credit the
    /// last holder left (at most one visitor) and admits one second's slice at its first tick,
    /// never the seconds the lease stood vacant in one burst.
    pub fn take_over_outflow(&mut self, credit_sixtieths: u64) {
        self.carry.credit_sixtieths = credit_sixtieths.min(CREDIT_CAP_SIXTIETHS);
        self.carry.last_tick_second = None;
    }

    /// The outflow credit carried to the next slice, in sixtieths of a visitor.
    pub fn outflow_credit(&self) -> u64 {
        self.carry.credit_sixtieths
    }

    /// Operator override: promotes `min(count, waiting)` now, whatever the state, rate and
    /// `maxConcurrent`. Returns how many passed.
    pub fn flush(
        &mut self,
        count: u64,
        now_ms: i64,
    ) -> Result<(u64, Option<EventRecord>), ApiError> {
        check_flush_count(count)?;
        let admit = count.min(self.waiting());
        if admit == 0 {
            return Ok((0, None));
        }
        Ok((
            admit,
            Some(self.promote(admit, PassedBy::Flush, None, now_ms)),
        ))
    }

    fn promote(
        &mut self,
        admit: u64,
        by: PassedBy,
        credit_after: Option<u64>,
        now_ms: i64,
    ) -> EventRecord {
        let first = self.head;
        let last = self.nth_waiting(admit);
        let ns = self.absent_between(first, last, now_ms);
        self.commit(
            now_ms,
            RoomEvent::Passed {
                first,
                last,
                count: admit,
                by,
                credit_after,
                ns,
            },
        )
    }

    /// Takes a waiting ticket out of the line or revokes a pass.
    pub fn eject(
        &mut self,
        ticket: u64,
        now_ms: i64,
    ) -> Result<(EjectedFrom, EventRecord), ApiError> {
        let was = match self.ticket_status(ticket) {
            Some(TicketStatus::Waiting) => EjectedFrom::Waiting,
            Some(TicketStatus::Passed { .. }) => EjectedFrom::Passed,
            _ => return Err(ticket_not_found(ticket)),
        };
        Ok((was, self.commit(now_ms, RoomEvent::Ejected { ticket, was })))
    }

    /// Discards every waiting ticket and pre-queue entry without admitting anybody. Returns
    /// how many of each.
    pub fn purge(&mut self, now_ms: i64) -> (Purged, Option<EventRecord>) {
        let purged = Purged {
            waiting: self.waiting(),
            pre_queue: self.pre_count(),
        };
        if purged.waiting == 0 && purged.pre_queue == 0 {
            return (purged, None);
        }
        let event = RoomEvent::Purged {
            count: purged.waiting,
            pre_queue: purged.pre_queue,
        };
        (purged, Some(self.commit(now_ms, event)))
    }

    pub fn set_rate(&mut self, rate_per_minute: u32, now_ms: i64) -> EventRecord {
        self.commit(now_ms, RoomEvent::RateSet { rate_per_minute })
    }

    pub fn set_state(&mut self, state: RoomState, now_ms: i64) -> EventRecord {
        self.commit(now_ms, RoomEvent::StateSet { state })
    }

    /// Records a schedule change already validated by `qm_core::room::apply_schedule`.
    pub fn schedule(&mut self, scheduled: &RoomConfig, now_ms: i64) -> EventRecord {
        let event = RoomEvent::Scheduled {
            opens_at: scheduled.opens_at,
            pre_queue_max_per_ip: scheduled.pre_queue_max_per_ip,
        };
        self.commit(now_ms, event)
    }

    /// Replaces the configuration with one validated by `RoomConfig::apply_patch`.
    pub fn update(&mut self, config: RoomConfig, now_ms: i64) -> EventRecord {
        self.commit(now_ms, RoomEvent::Updated { config })
    }

    pub fn delete(&mut self, now_ms: i64) -> EventRecord {
        self.commit(now_ms, RoomEvent::Deleted)
    }
}

/// The refusal of an eject for a ticket that is neither waiting nor holding a pass.
pub fn ticket_not_found(ticket: u64) -> ApiError {
    ApiError::new(
        ErrorCode::TicketNotFound,
        format!("ticket {ticket} is neither waiting nor holding a pass in this room"),
    )
}
