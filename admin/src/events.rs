//! The console's live feed: `POST /api/admin/sse-ticket` and `GET /api/admin/events`.
//!
//! EventSource cannot send a header, and a key in a URL lands in logs, so the stream is opened
//! with a ticket: random, single use, valid 30 s, spent on first use and scoped to the credential
//! that minted it (a ticket minted by a console session dies with that session). Bearer and the
//! console cookie are accepted on the stream as well. Tickets, like sessions, live in this admin
//! process's memory. A stream opened by a console session ends at the first tick after that
//! session is signed out.
//!
//! Every 2 s the stream reads `ListRooms` and `Stats` from the engine and sends an `event: stats`
//! frame computed by [`crate::frames`]: real engine numbers, never invented. A tick the engine
//! cannot answer is an `event: unavailable` frame `{error, code}`; the stream stays open and the
//! client keeps what it holds (the next frame is still relative to it).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use futures::Stream;
use qm_core::ApiError;
use qm_core::shutdown::stopped;
use qm_proto::{ListRoomsRequest, StatsRequest};
use serde_json::{Map, Value, json};
use tokio::sync::watch;

use crate::AdminState;
use crate::auth::{AuthError, Authenticated, Credential, still_live};
use crate::frames::{FrameSequence, Sparkline, totals};
use crate::principal::{Principal, Role};
use crate::rooms::{parse_rooms, redact_room};
use qm_http::AppError;

/// How long a ticket may wait to be redeemed.
pub(crate) const TICKET_TTL: Duration = Duration::from_secs(30);
/// Interval between frames.
pub(crate) const TICK: Duration = Duration::from_secs(2);
/// Outstanding tickets one process keeps; a flood of mints past it is refused, not stored.
const MAX_TICKETS: usize = 10_000;

#[derive(Debug, Clone)]
struct Ticket {
    credential: Credential,
    principal: Principal,
    expires_at: Instant,
}

/// Unspent event-stream tickets.
#[derive(Default)]
pub(crate) struct TicketStore {
    /// Ticket → who minted it. A std mutex, never held across an `.await`.
    tickets: Mutex<HashMap<String, Ticket>>,
}

impl TicketStore {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Ticket>> {
        self.tickets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn mint(&self, caller: Authenticated) -> Result<String, AuthError> {
        let now = Instant::now();
        let mut tickets = self.lock();
        tickets.retain(|_, ticket| ticket.expires_at > now);
        if tickets.len() >= MAX_TICKETS {
            return Err(AuthError::TooManyTickets);
        }
        let ticket = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>());
        tickets.insert(
            ticket.clone(),
            Ticket {
                credential: caller.credential,
                principal: caller.principal,
                expires_at: now + TICKET_TTL,
            },
        );
        Ok(ticket)
    }

    /// Spends a ticket: it is gone after this call whatever the answer.
    pub(crate) fn redeem(&self, ticket: &str) -> Option<Authenticated> {
        let spent = self.lock().remove(ticket)?;
        (spent.expires_at > Instant::now()).then_some(Authenticated {
            credential: spent.credential,
            principal: spent.principal,
        })
    }
}

/// POST /api/admin/sse-ticket.
pub(crate) async fn mint_ticket(
    caller: Authenticated,
    State(state): State<AdminState>,
) -> Response {
    match state.tickets.mint(caller) {
        Ok(ticket) => {
            Json(json!({ "ticket": ticket, "expiresInSec": TICKET_TTL.as_secs() })).into_response()
        }
        Err(error) => AppError::from(error).into_response(),
    }
}

/// The caller an event-stream ticket names: spent here whatever the answer, and refused if the
/// credential that minted it is no longer live (a signed-out console, a revoked key).
pub(crate) async fn redeem_ticket(
    state: &AdminState,
    ticket: &str,
) -> Result<Authenticated, AuthError> {
    let Some(caller) = state.tickets.redeem(ticket) else {
        return Err(AuthError::BadTicket);
    };
    if still_live(state, &caller.credential)
        .await
        .map_err(AuthError::Engine)?
    {
        Ok(caller)
    } else {
        Err(AuthError::BadTicket)
    }
}

/// GET /api/admin/events: the gate let the caller in (Bearer, cookie or a ticket).
pub(crate) async fn events(
    caller: Authenticated,
    State(state): State<AdminState>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    Sse::new(frame_stream(state, caller))
}

struct Cursor {
    state: AdminState,
    /// Who opened the stream: checked every tick, so a signed-out console or a revoked key
    /// stops being fed; a monitor principal is sent redacted rooms.
    caller: Authenticated,
    sequence: FrameSequence,
    sparkline: Sparkline,
    interval: tokio::time::Interval,
    shutdown: watch::Receiver<bool>,
}

fn frame_stream(
    state: AdminState,
    caller: Authenticated,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let mut interval = tokio::time::interval(TICK);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let cursor = Cursor {
        shutdown: state.shutdown.clone(),
        state,
        caller,
        sequence: FrameSequence::default(),
        sparkline: Sparkline::default(),
        interval,
    };
    futures::stream::unfold(cursor, |mut cursor| async move {
        if *cursor.shutdown.borrow() {
            return None;
        }
        tokio::select! {
            _ = cursor.interval.tick() => {}
            () = stopped(&mut cursor.shutdown) => return None,
        }
        // A tick the engine cannot answer keeps the stream (the frame says so); a credential
        // found revoked ends it.
        if let Ok(false) = still_live(&cursor.state, &cursor.caller.credential).await {
            return None;
        }
        let event = match read_engine(&cursor.state).await {
            Ok((mut rooms, stats)) => {
                if cursor.caller.principal.role == Role::Monitor {
                    rooms.iter_mut().for_each(redact_room);
                }
                let now = qm_core::clock::now_ms();
                let totals = totals(&rooms);
                cursor.sparkline.push(now, &totals);
                let mut others = Map::new();
                others.insert("totals".to_owned(), totals);
                others.insert("sparkline".to_owned(), cursor.sparkline.json());
                others.insert("storage".to_owned(), stats);
                others.insert("now".to_owned(), json!(now));
                let frame = cursor.sequence.next(rooms, others);
                Event::default().event("stats").data(frame.to_string())
            }
            Err(error) => Event::default()
                .event("unavailable")
                .data(error.body().to_string()),
        };
        Some((Ok(event), cursor))
    })
}

/// The rooms (creation order) and the engine's storage facts, or why the engine did not answer.
async fn read_engine(state: &AdminState) -> Result<(Vec<Value>, Value), ApiError> {
    let mut engine = state.engine.clone();
    let listed = engine.list_rooms(ListRoomsRequest {}).await?.into_inner();
    let stats = engine.stats(StatsRequest {}).await?.into_inner();
    let rooms = parse_rooms(&listed.room_json)?;
    let storage = json!({
        "store": stats.store,
        "ready": stats.storage_ready,
        "noRoomChecks": stats.no_room_checks,
    });
    Ok((rooms, storage))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_is_spent_on_first_use() {
        let store = TicketStore::default();
        let ticket = store.mint(owner()).expect("minted");
        let caller = store.redeem(&ticket).expect("redeemed once");
        assert_eq!(caller.credential, Credential::AdminKey);
        assert!(store.redeem(&ticket).is_none());
        assert!(store.redeem("never-minted").is_none());
    }

    #[test]
    fn an_expired_ticket_is_refused() {
        let store = TicketStore::default();
        let ticket = store.mint(owner()).expect("minted");
        if let Some(entry) = store.lock().get_mut(&ticket) {
            entry.expires_at = Instant::now() - Duration::from_millis(1);
        }
        assert!(store.redeem(&ticket).is_none());
    }

    fn owner() -> Authenticated {
        Authenticated {
            principal: Principal::owner(),
            credential: Credential::AdminKey,
        }
    }
}
