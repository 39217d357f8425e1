//! The room state machine: pure and synchronous (no I/O, no tokio). A [`Room`] changes only by
//! applying [`EventRecord`]s; commands validate, produce one event and apply it, so the same
//! fold serves the live engine, a journal replay and tests.

mod commands;
mod door;
mod event;
mod execute;
mod place;
mod prequeue;
mod presence;
mod rewind;
mod room;
mod summary;
mod targeting;
mod visitors;

#[cfg(test)]
mod door_tests;
#[cfg(test)]
mod presence_tests;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod visitors_tests;

pub use commands::{JoinOutcome, JoinRequest, Purged, ticket_not_found};
pub use door::{DEFAULT_SESSION_MAX_SEC, DEFAULT_SESSION_TTL_SEC, DoorDecision, DoorInput};
pub use event::{EjectedFrom, EventRecord, PassedBy, RoomEvent};
pub use execute::{Command, Executed, Outcome};
pub use place::{
    CheckAction, CheckAnswer, Claim, ClaimedPlace, LapseReason, PlaceAnswer, PlaceStatus,
};
pub use prequeue::DEFAULT_PRE_QUEUE_CEILING;
pub use rewind::Mark;
pub use room::{ApplyError, Room, TicketStatus};
pub use summary::LiveStats;
pub use targeting::{PageScope, PageVerdict, Targeting, pattern_action};
pub use visitors::{LookupKeys, MAX_REF_SCAN, RefScan, matching_places};
