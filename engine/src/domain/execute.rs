//! The one entry point for changing a room: [`Room::execute`] runs a [`Command`] against the
//! room as it stands and answers what happened plus the events it recorded. Both stores call
//! it, so every rule of a change (which checks come first, that the doors' draw lands before
//! anyone takes a ticket, how a create continues a deleted id) lives here once:
//!
//! - the memory store executes under the room's lock and drops the records;
//! - the durable store executes on its engine's live copy of the room, lands the records in
//!   Valkey only if nobody changed the room since (compare-and-set on `seq`), then journals
//!   them; a refused landing re-executes the same command on the newer room.

use qm_core::room::{RoomConfig, RoomState, apply_schedule, check_rate};
use qm_core::{ApiError, ErrorCode};
use rand::{CryptoRng, Rng};
use serde_json::Value;

use super::commands::{JoinRequest, Purged};
use super::door::DoorInput;
use super::event::{EjectedFrom, EventRecord};
use super::place::{CheckAnswer, PlaceStatus};
use super::room::Room;

/// A change asked of one room.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Create or update from a `POST /api/admin/rooms` body.
    Put(Value),
    Delete,
    Join(JoinRequest),
    SetState(RoomState),
    SetRate(u32),
    /// Promote up to this many now.
    Flush(u64),
    /// A `POST .../schedule` body.
    Schedule(Value),
    Eject(u64),
    Purge,
    /// The outflow slice of the calendar second of the execution instant (drawing first if
    /// the doors opened on a pre-queue).
    Tick,
    /// A door check that opens a door session or records its use (`door.rs`): decided again
    /// on the room as it stands, so two checks spending one pass cannot both open a session.
    Door(DoorInput),
}

impl Command {
    /// The room a create-or-update body names. A body without a usable id is refused with
    /// what is wrong in it (the create rules name a missing or invalid field first).
    pub fn put_target(body: &Value, now_ms: i64) -> Result<String, ApiError> {
        match body.get("id").and_then(Value::as_str) {
            Some(room_id) => Ok(room_id.to_owned()),
            None => RoomConfig::apply_patch(None, body, now_ms).and(Err(ApiError::new(
                ErrorCode::MissingField,
                "id is required to create a room",
            ))),
        }
    }
}

/// What a command did.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Put {
        created: bool,
    },
    Deleted,
    Place(PlaceStatus),
    /// A state, rate or schedule change.
    Changed,
    Flushed(u64),
    Ejected(EjectedFrom),
    Purged(Purged),
    Ticked,
    Door(CheckAnswer),
}

/// A command's outcome and the records it appended, in seq order (none when nothing changed).
/// A refused command appended nothing, with one exception: a join refused after the doors
/// opened still lands the draw it made first (the draw is due whoever asked).
#[derive(Debug, Clone, PartialEq)]
pub struct Executed {
    pub outcome: Result<Outcome, ApiError>,
    pub records: Vec<EventRecord>,
}

impl Executed {
    fn done(outcome: Outcome, records: Vec<EventRecord>) -> Executed {
        Executed {
            outcome: Ok(outcome),
            records,
        }
    }

    fn refused(refusal: ApiError) -> Executed {
        Executed {
            outcome: Err(refusal),
            records: Vec::new(),
        }
    }
}

fn room_not_found(room_id: &str) -> ApiError {
    ApiError::new(ErrorCode::RoomNotFound, format!("no room {room_id:?}"))
}

impl Room {
    /// A room id that has never held a room: the slot a first `Put` creates it in.
    pub fn unborn(room_id: &str) -> Room {
        Room::unborn_after(room_id, 0)
    }

    /// A room id whose next event is `seq_before + 1` and must create it (a journal's start).
    pub fn unborn_after(room_id: &str, seq_before: u64) -> Room {
        Room::blank(
            RoomConfig::with_defaults(room_id.to_owned(), String::new(), 0),
            seq_before,
        )
    }

    /// Whether the room exists (created and not deleted).
    pub fn is_live(&self) -> bool {
        self.created && !self.deleted
    }

    /// The answer to `command` when it needs no change at all: a join that keeps the place
    /// its claim names (or takes a bypass pass) while no draw is due. A store may answer this
    /// from a read copy without queueing the command behind changes.
    pub fn settled_answer(&self, command: &Command, now_ms: i64) -> Option<PlaceStatus> {
        let Command::Join(request) = command else {
            return None;
        };
        if !self.is_live() || self.draw_due(now_ms) {
            return None;
        }
        self.join_without_minting(request, now_ms).ok()
    }

    /// Runs `command` at `now_ms`, drawing any randomness (pre-queue handles, the draw) from
    /// `rng`. A refusal changes nothing but the draw a join makes first (see [`Executed`]).
    pub fn execute(
        &mut self,
        command: &Command,
        now_ms: i64,
        rng: &mut (impl Rng + CryptoRng),
    ) -> Executed {
        if let Command::Join(request) = command
            && self.is_live()
        {
            let drawn: Vec<EventRecord> = self.draw_if_due(rng, now_ms).into_iter().collect();
            return match self.join(request, now_ms, rng) {
                Ok(joined) => {
                    // A join that keeps its place is a sighting of its holder (QM-345).
                    if joined.record.is_none() && joined.place.bound {
                        self.see(joined.place.ticket, now_ms);
                    }
                    let records = drawn.into_iter().chain(joined.record).collect();
                    Executed::done(Outcome::Place(joined.place), records)
                }
                Err(refusal) => Executed {
                    outcome: Err(refusal),
                    records: drawn,
                },
            };
        }
        match self.execute_change(command, now_ms, rng) {
            Ok((outcome, records)) => Executed::done(outcome, records),
            Err(refusal) => Executed::refused(refusal),
        }
    }

    /// Every command but a join: checks first, then the change.
    fn execute_change(
        &mut self,
        command: &Command,
        now_ms: i64,
        rng: &mut (impl Rng + CryptoRng),
    ) -> Result<(Outcome, Vec<EventRecord>), ApiError> {
        if let Command::Put(body) = command {
            return self.put(body, now_ms);
        }
        if !self.is_live() {
            return Err(room_not_found(self.room_id()));
        }
        Ok(match command {
            Command::Put(_) | Command::Join(_) => unreachable!("handled above"),
            Command::Delete => (Outcome::Deleted, vec![self.delete(now_ms)]),
            Command::SetState(state) => (Outcome::Changed, vec![self.set_state(*state, now_ms)]),
            Command::SetRate(rate) => {
                let rate = check_rate(u64::from(*rate))?;
                (Outcome::Changed, vec![self.set_rate(rate, now_ms)])
            }
            Command::Flush(count) => {
                let (passed, record) = self.flush(*count, now_ms)?;
                (Outcome::Flushed(passed), record.into_iter().collect())
            }
            Command::Schedule(body) => {
                let scheduled = apply_schedule(self.config(), body)?;
                (Outcome::Changed, vec![self.schedule(&scheduled, now_ms)])
            }
            Command::Eject(ticket) => {
                let (was, record) = self.eject(*ticket, now_ms)?;
                (Outcome::Ejected(was), vec![record])
            }
            Command::Purge => {
                let (purged, record) = self.purge(now_ms);
                (Outcome::Purged(purged), record.into_iter().collect())
            }
            Command::Tick => {
                let drawn = self.draw_if_due(rng, now_ms);
                let passed = self.tick(now_ms);
                (Outcome::Ticked, drawn.into_iter().chain(passed).collect())
            }
            Command::Door(input) => {
                let decision = self.door_decision(input, now_ms);
                let records = decision
                    .change
                    .map(|event| self.commit(now_ms, event))
                    .into_iter()
                    .collect();
                (Outcome::Door(decision.answer), records)
            }
        })
    }

    /// Creates the room (a new id, or a new generation of a deleted one, continuing its seq)
    /// or merges `body` into the live configuration.
    fn put(&mut self, body: &Value, now_ms: i64) -> Result<(Outcome, Vec<EventRecord>), ApiError> {
        if self.is_live() {
            let config = RoomConfig::apply_patch(Some(self.config()), body, now_ms)?;
            let record = self.update(config, now_ms);
            return Ok((Outcome::Put { created: false }, vec![record]));
        }
        let config = RoomConfig::apply_patch(None, body, now_ms)?;
        // A new generation also across restarts of the diskless store: unix seconds only grow,
        // so tokens from an earlier boot's room read `room_reset`.
        let generation = (self.generation + 1).max((now_ms / 1000).max(0) as u64);
        let (room, record) = Room::create(config, generation, self.seq, now_ms);
        *self = room;
        Ok((Outcome::Put { created: true }, vec![record]))
    }
}
