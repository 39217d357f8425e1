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
use axum::extract::{Query, State};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use futures::Stream;
use http::{Extensions, HeaderMap, Method, Uri};
use qm_core::ApiError;
use qm_core::shutdown::stopped;
use qm_proto::{ListRoomsRequest, StatsRequest};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::sync::watch;

use crate::AdminState;
use crate::auth::{
    AuthError, Authenticated, Credential, PresentedKind, authenticate, log_refused, peer_of,
};
use crate::frames::{FrameSequence, Sparkline, totals};
use crate::rooms::parse_rooms;
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

    pub(crate) fn mint(&self, credential: Credential) -> Result<String, AuthError> {
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
                credential,
                expires_at: now + TICKET_TTL,
            },
        );
        Ok(ticket)
    }

    /// Spends a ticket: it is gone after this call whatever the answer.
    pub(crate) fn redeem(&self, ticket: &str) -> Option<Credential> {
        let spent = self.lock().remove(ticket)?;
        (spent.expires_at > Instant::now()).then_some(spent.credential)
    }
}

/// POST /api/admin/sse-ticket.
pub(crate) async fn mint_ticket(
    caller: Authenticated,
    State(state): State<AdminState>,
) -> Response {
    match state.tickets.mint(caller.credential) {
        Ok(ticket) => {
            Json(json!({ "ticket": ticket, "expiresInSec": TICKET_TTL.as_secs() })).into_response()
        }
        Err(error) => AppError::from(error).into_response(),
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct EventsQuery {
    ticket: Option<String>,
}

/// GET /api/admin/events.
pub(crate) async fn events(
    State(state): State<AdminState>,
    Query(query): Query<EventsQuery>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    extensions: Extensions,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, AppError> {
    let client = peer_of(&extensions);
    let credential = match query.ticket.as_deref() {
        Some(ticket) => {
            let live = state
                .tickets
                .redeem(ticket)
                .filter(|credential| credential_is_live(&state, credential));
            let Some(credential) = live else {
                log_refused(PresentedKind::EventTicket, client, &AuthError::BadTicket);
                return Err(AuthError::BadTicket.into());
            };
            credential
        }
        None => authenticate(&state, &method, &uri, &headers, client)?.credential,
    };
    Ok(Sse::new(frame_stream(state, credential)))
}

/// A console session can be revoked (signed out) while its stream is open; the key cannot.
fn credential_is_live(state: &AdminState, credential: &Credential) -> bool {
    match credential {
        Credential::Session(session_id) => state.sessions.is_live(session_id),
        Credential::AdminKey => true,
    }
}

struct Cursor {
    state: AdminState,
    /// Who opened the stream: checked every tick, so a signed-out console stops being fed.
    credential: Credential,
    sequence: FrameSequence,
    sparkline: Sparkline,
    interval: tokio::time::Interval,
    shutdown: watch::Receiver<bool>,
}

fn frame_stream(
    state: AdminState,
    credential: Credential,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let mut interval = tokio::time::interval(TICK);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let cursor = Cursor {
        shutdown: state.shutdown.clone(),
        state,
        credential,
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
        if !credential_is_live(&cursor.state, &cursor.credential) {
            return None;
        }
        let event = match read_engine(&cursor.state).await {
            Ok((rooms, stats)) => {
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
        let ticket = store.mint(Credential::AdminKey).expect("minted");
        assert_eq!(store.redeem(&ticket), Some(Credential::AdminKey));
        assert_eq!(store.redeem(&ticket), None);
        assert_eq!(store.redeem("never-minted"), None);
    }

    #[test]
    fn an_expired_ticket_is_refused() {
        let store = TicketStore::default();
        let ticket = store.mint(Credential::AdminKey).expect("minted");
        if let Some(entry) = store.lock().get_mut(&ticket) {
            entry.expires_at = Instant::now() - Duration::from_millis(1);
        }
        assert_eq!(store.redeem(&ticket), None);
    }
}
