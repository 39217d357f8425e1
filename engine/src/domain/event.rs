//! A room's events. Every mutation of a [`super::Room`] is exactly one event carrying the room's
//! next `seq` (monotonic and gap-free per room id, also across delete and re-create), and the
//! live state is the fold of those events: a durable store journals them, and a rebuild replays
//! them and refuses to guess across a gap.

use qm_core::room::{RoomConfig, RoomState};
use serde::{Deserialize, Serialize};

/// One journaled change of a room.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventRecord {
    pub seq: u64,
    /// When the change happened (epoch ms); every time-dependent rule reads it from here.
    pub at_ms: i64,
    pub event: RoomEvent,
}

/// What changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum RoomEvent {
    /// The room came into being with this configuration and generation.
    Created {
        config: RoomConfig,
        generation: u64,
    },
    /// The configuration was replaced (create/update through the admin document).
    Updated {
        config: RoomConfig,
    },
    /// A ticket was minted at the back of the line, bound to a session hash (empty = no holder).
    Joined {
        ticket: u64,
        session_hash: String,
        identity: String,
    },
    /// Every ticket still waiting in `first..=last` passed (`count` of them): the lowest waiting
    /// tickets, in order. Outflow also records the credit it carried over.
    Passed {
        first: u64,
        last: u64,
        count: u64,
        by: PassedBy,
        credit_after: Option<u64>,
        /// Ghost tickets (QM-345), ascending: promoted while their holder was absent, so their
        /// passes own no `maxConcurrent` slot. Omitted when empty, so journal rows written
        /// before presence existed still parse (as "nobody was slotless").
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        ns: Vec<u64>,
    },
    /// A waiting ticket left the line, or a pass was revoked.
    Ejected {
        ticket: u64,
        was: EjectedFrom,
    },
    /// Every waiting ticket and pre-queue entry was discarded without admitting anybody
    /// (`count` waiting tickets, `pre_queue` entries).
    Purged {
        count: u64,
        #[serde(default)]
        pre_queue: u64,
    },
    /// A join before opensAt entered the pre-queue under an opaque handle.
    PreJoined {
        handle: u64,
        session_hash: String,
        identity: String,
    },
    /// The doors opened: the pre-queue's handles in drawn order took tickets
    /// `first_ticket..first_ticket + order.len()`. Replaying this restores the draw.
    Drawn {
        first_ticket: u64,
        order: Vec<u64>,
    },
    RateSet {
        rate_per_minute: u32,
    },
    StateSet {
        state: RoomState,
    },
    /// The doors-open instant and the pre-queue cap after a schedule change.
    Scheduled {
        opens_at: Option<i64>,
        pre_queue_max_per_ip: Option<u32>,
    },
    /// The room is gone; its generation and seq are remembered for a re-create.
    Deleted,
    /// A door check spent `ticket`'s pass into a door session bound to `key_hash` (the
    /// SHA-256 of the key the visitor holds), or the browser that queued took its live session
    /// over under a new key. `holds_slot`: the pass held a `maxConcurrent` slot, which the
    /// session keeps while live.
    DoorOpened {
        ticket: u64,
        key_hash: String,
        granted_at_ms: i64,
        holds_slot: bool,
    },
    /// The door session of `ticket` was used (recorded at most once per quarter of its idle
    /// window).
    DoorSeen {
        ticket: u64,
    },
}

impl RoomEvent {
    /// The event's type tag as it appears in the serialized form.
    pub fn kind(&self) -> &'static str {
        match self {
            RoomEvent::Created { .. } => "created",
            RoomEvent::Updated { .. } => "updated",
            RoomEvent::Joined { .. } => "joined",
            RoomEvent::Passed { .. } => "passed",
            RoomEvent::Ejected { .. } => "ejected",
            RoomEvent::Purged { .. } => "purged",
            RoomEvent::PreJoined { .. } => "pre_joined",
            RoomEvent::Drawn { .. } => "drawn",
            RoomEvent::RateSet { .. } => "rate_set",
            RoomEvent::StateSet { .. } => "state_set",
            RoomEvent::Scheduled { .. } => "scheduled",
            RoomEvent::Deleted => "deleted",
            RoomEvent::DoorOpened { .. } => "door_opened",
            RoomEvent::DoorSeen { .. } => "door_seen",
        }
    }
}

/// Who admitted a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PassedBy {
    /// The per-second outflow slice.
    Outflow,
    /// An operator's flush.
    Flush,
}

/// What an ejected ticket was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EjectedFrom {
    Waiting,
    Passed,
}

impl EjectedFrom {
    pub fn as_str(self) -> &'static str {
        match self {
            EjectedFrom::Waiting => "waiting",
            EjectedFrom::Passed => "passed",
        }
    }
}
