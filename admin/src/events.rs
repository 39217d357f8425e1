//! The console's live feed: `POST /api/admin/sse-ticket` and `GET /api/admin/events`.
//!
//! EventSource cannot send a header, and a key in a URL lands in logs, so the stream is opened
//! with a ticket: random, single use, valid 30 s, spent on first use and scoped to the credential
//! that minted it (a ticket minted by a console session dies with that session). Bearer and the
//! console cookie are accepted on the stream as well. Tickets, like sessions, are records the
//! engine keeps for every admin process (kind `ticket`, named by a digest of the ticket), so a
//! ticket minted through one admin instance opens the stream on another, and taking it is one
//! step there: two instances redeeming it at once cannot both succeed. A stream opened by a
//! console session ends at the first tick after that session is signed out.
//!
//! Every 2 s the stream reads `ListRooms` and `Stats` from the engine and sends an `event: stats`
//! frame computed by [`crate::frames`]: real engine numbers, never invented. A tick the engine
//! cannot answer is an `event: unavailable` frame `{error, code}`; the stream stays open and the
//! client keeps what it holds (the next frame is still relative to it).

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use futures::Stream;
use qm_core::ApiError;
use qm_core::shutdown::stopped;
use qm_proto::{
    EngineClient, GetRecordRequest, ListRoomsRequest, PutRecordRequest, RecordRef, StatsRequest,
};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::AdminState;
use crate::auth::{AuthError, Authenticated, still_live};
use crate::frames::{FrameSequence, Sparkline, totals};
use crate::principal::Role;
use crate::rooms::{parse_rooms, redact_room};
use qm_http::AppError;

/// How long a ticket may wait to be redeemed.
pub(crate) const TICKET_TTL: Duration = Duration::from_secs(30);
/// Interval between frames.
pub(crate) const TICK: Duration = Duration::from_secs(2);
/// Outstanding tickets the engine keeps for the admin processes; a flood of mints past it is
/// refused, not stored.
const MAX_TICKETS: u32 = 10_000;
/// The engine's name for a ticket record.
const RECORD_KIND: &str = "ticket";

/// A ticket's record: named by a digest of the ticket, so the store never holds a bearer secret.
fn ticket_record(ticket: &str) -> RecordRef {
    RecordRef {
        kind: RECORD_KIND.to_owned(),
        id: Sha256::digest(ticket.as_bytes()).to_vec(),
    }
}

/// Unspent event-stream tickets, kept by the engine for every admin process.
pub(crate) struct TicketStore {
    engine: EngineClient,
}

impl TicketStore {
    pub(crate) fn new(engine: EngineClient) -> TicketStore {
        TicketStore { engine }
    }

    pub(crate) async fn mint(&self, caller: Authenticated) -> Result<String, AuthError> {
        let ticket = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>());
        let payload = serde_json::to_vec(&caller).map_err(|error| {
            AuthError::Engine(ApiError::internal(format!("a ticket record: {error}")))
        })?;
        let reply = self
            .engine
            .clone()
            .put_record(PutRecordRequest {
                record: Some(ticket_record(&ticket)),
                payload,
                ttl_ms: TICKET_TTL.as_millis() as u64,
                max_of_kind: MAX_TICKETS,
            })
            .await
            .map_err(|status| AuthError::Engine(status.into()))?
            .into_inner();
        if reply.full {
            return Err(AuthError::TooManyTickets);
        }
        Ok(ticket)
    }

    /// Spends a ticket: it is gone after this call whatever the answer.
    pub(crate) async fn redeem(&self, ticket: &str) -> Result<Option<Authenticated>, AuthError> {
        let reply = self
            .engine
            .clone()
            .get_record(GetRecordRequest {
                record: Some(ticket_record(ticket)),
                take: true,
            })
            .await
            .map_err(|status| AuthError::Engine(status.into()))?
            .into_inner();
        Ok(reply
            .found
            .then(|| serde_json::from_slice(&reply.payload).ok())
            .flatten())
    }
}

/// POST /api/admin/sse-ticket.
pub(crate) async fn mint_ticket(
    caller: Authenticated,
    State(state): State<AdminState>,
) -> Response {
    match state.tickets.mint(caller).await {
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
    let Some(caller) = state.tickets.redeem(ticket).await? else {
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
