//! What the book of turn notifications holds: one record per place, keyed by (room,
//! generation, place kind, place number), how its delivery stands, and how the book's storage
//! fails. A record holds the sealed address and its masked form, never the address itself.

use qm_core::{ApiError, ErrorCode};

use crate::domain::{Claim, ClaimedPlace};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum PlaceKind {
    Ticket,
    Handle,
}

impl PlaceKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            PlaceKind::Ticket => "ticket",
            PlaceKind::Handle => "handle",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<PlaceKind> {
        match text {
            "ticket" => Some(PlaceKind::Ticket),
            "handle" => Some(PlaceKind::Handle),
            _ => None,
        }
    }
}

/// The place a record is filed against.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PlaceKey {
    pub(crate) room_id: String,
    pub(crate) generation: u64,
    pub(crate) kind: PlaceKind,
    pub(crate) number: u64,
}

impl PlaceKey {
    /// The key of a claimed place; `None` for ticket 0, a bypass pass that holds no place.
    pub(crate) fn of_claim(room_id: &str, claim: &Claim) -> Option<PlaceKey> {
        let (kind, number) = match claim.place {
            ClaimedPlace::Ticket(0) => return None,
            ClaimedPlace::Ticket(ticket) => (PlaceKind::Ticket, ticket),
            ClaimedPlace::Handle(handle) => (PlaceKind::Handle, handle),
        };
        Some(PlaceKey {
            room_id: room_id.to_owned(),
            generation: claim.generation,
            kind,
            number,
        })
    }

    pub(crate) fn ticket(room_id: &str, generation: u64, ticket: u64) -> Option<PlaceKey> {
        PlaceKey::of_claim(
            room_id,
            &Claim {
                generation,
                place: ClaimedPlace::Ticket(ticket),
            },
        )
    }

    /// The claim the engine's store reads this place by.
    pub(crate) fn claim(&self) -> Claim {
        Claim {
            generation: self.generation,
            place: match self.kind {
                PlaceKind::Ticket => ClaimedPlace::Ticket(self.number),
                PlaceKind::Handle => ClaimedPlace::Handle(self.number),
            },
        }
    }
}

/// Where a record's e-mail stands. The wire spelling is the contract's `delivery`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// Registered; sent when the place passes (retried with backoff after a failure).
    Pending,
    /// The relay accepted the message.
    Sent,
    /// Every attempt failed; nothing more will be tried for this place.
    Failed,
}

impl Delivery {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Delivery::Pending => "pending",
            Delivery::Sent => "sent",
            Delivery::Failed => "failed",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Delivery> {
        match text {
            "pending" => Some(Delivery::Pending),
            "sent" => Some(Delivery::Sent),
            "failed" => Some(Delivery::Failed),
            _ => None,
        }
    }
}

/// One turn notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) key: PlaceKey,
    /// The address sealed by [`super::address::AddressCipher`].
    pub(crate) sealed_email: Vec<u8>,
    pub(crate) masked_email: String,
    /// Hash of the ownership cookie that registered it: only that browser's rejoin carries it.
    pub(crate) owner_hash: String,
    pub(crate) requested_at_ms: i64,
    pub(crate) delivery: Delivery,
    /// Send attempts made (counted when a sender takes the record).
    pub(crate) attempts: u32,
    /// No attempt before this instant (the retry backoff).
    pub(crate) next_attempt_at_ms: i64,
    /// A sender holds the record until then; another engine leaves it alone.
    pub(crate) lease_until_ms: i64,
    /// When the place was first seen lapsed in a way a rejoin can carry over (expired,
    /// room_reset); the record is kept a while for that rejoin, then forgotten.
    pub(crate) lapsed_since_ms: Option<i64>,
}

impl Record {
    /// A fresh registration.
    pub(crate) fn new(
        key: PlaceKey,
        sealed_email: Vec<u8>,
        masked_email: String,
        owner_hash: String,
        now_ms: i64,
    ) -> Record {
        Record {
            key,
            sealed_email,
            masked_email,
            owner_hash,
            requested_at_ms: now_ms,
            delivery: Delivery::Pending,
            attempts: 0,
            next_attempt_at_ms: 0,
            lease_until_ms: 0,
            lapsed_since_ms: None,
        }
    }
}

/// How a send attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settlement {
    Sent,
    RetryAt(i64),
    Failed,
}

/// The book's storage failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BookError {
    #[error("notification storage: {0}")]
    Database(#[from] sqlx::Error),
    #[error("notification storage holds a row it cannot read: {0}")]
    BadRow(String),
}

impl From<BookError> for ApiError {
    fn from(error: BookError) -> ApiError {
        tracing::warn!(error = %error, "turn notification storage failed");
        ApiError::new(
            ErrorCode::StorageUnavailable,
            "the notification could not be stored right now; try again shortly",
        )
        .with_retry_after(2)
    }
}

pub(crate) type BookResult<T> = Result<T, BookError>;
