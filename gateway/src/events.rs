//! The visitor event stream (`/api/events`, `/api/v1/events`, the bare `/events`): `event:
//! status` frames with the same JSON as `/api/status`, the first at once, then whenever this
//! listener's JSON changes, and every 5 s as a heartbeat. A waiting listener's position comes
//! from its room hub's view, computed here; the engine is asked for this one place only when the
//! view says it no longer waits (it passed or lapsed), and after that only on heartbeats.
//!
//! Token refresh (QM-391, QM-469): a stream opened with a due token whose refresh is granted
//! re-signs the place, sets both queue cookies on its response and carries the fresh token as
//! `token` in every status frame. A stream cannot set cookies once its headers are sent, so an
//! open stream whose token falls due sends `event: refresh` (`data: {}`) and ends, delayed past
//! the due instant by the place's jitter, for the page to reopen it. Only if the engine, asked
//! at that instant, would grant the refresh: otherwise the stream carries on.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use http::{HeaderMap, HeaderValue};
use qm_core::ApiError;
use qm_core::clock::now_ms;
use qm_core::shutdown::stopped;
use qm_core::token::{VisitorClaims, VisitorPlace};
use qm_proto::{StatusRequest, place_reply, place_status};
use serde_json::{Map, Value};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::GatewayState;
use crate::cookies::{RequestCookies, append_set_cookies};
use crate::hub::{LatestView, RoomHub};
use crate::places::PresentedPlace;
use crate::rate_limit::StreamPermit;
use crate::refresh::{Renewal, engine_grants_refresh, is_due, stream_refresh_at_ms};
use crate::request::{ClientAddress, QueryParams};
use crate::status_body::{lapsed_fields, place_fields, view_fields, with_now_here};
use crate::status_read::{read_status, status_request};
use crate::stream_clock::HEARTBEAT;
use crate::visitor_calls::VisitorCalls;
use qm_http::AppError;

/// GET /api/events: 401 before the stream starts when no token verifies, the stream limits,
/// then the stream.
pub(crate) async fn events(
    State(state): State<GatewayState>,
    ClientAddress(address): ClientAddress,
    query: QueryParams,
    headers: HeaderMap,
) -> Result<Response, AppError> {
    let cookies = RequestCookies::from_headers(&headers);
    let now = now_ms();
    let place = state
        .token_check_at(now)
        .for_status_query(&query, &cookies)?;
    let permit = state.stream_limits.acquire(address)?;
    // Opens that were let in spend the budget: a client cycling its streams is slowed, and one
    // refused for holding too many already (sse_per_ip_limit) is not charged for it.
    state
        .stream_open_limiter
        .admit_as(address, "event streams opened")?;
    let request = status_request(&place, &cookies);
    let hub = state.hubs.subscribe(&place.claims.room_id);
    let refresh_after_ms = state.config.token_refresh_after_ms();
    let mut listener = Listener::new(
        state.visitor_calls.clone(),
        &place,
        request,
        refresh_after_ms,
    );
    listener.support_ref_key = state.support_ref_key;
    // The first frame comes from the engine itself, so an unreachable engine is a plain 503
    // before the stream starts rather than a stream that says nothing.
    let first = listener.ask_engine().await.map_err(AppError)?;
    // A handle the draw turned into a ticket is re-signed for it, like a due token.
    let drawn = listener.place != place.claims.place;
    let renewal =
        if (drawn || is_due(&place.claims, now, refresh_after_ms)) && listener.refresh_granted {
            let claims = VisitorClaims {
                place: listener.place,
                ..place.claims.clone()
            };
            Renewal::issue(&state, &claims, &cookies, &headers, now_ms())
        } else {
            None
        };
    let set_cookies = match renewal {
        Some(renewal) => {
            listener.claims = renewal.claims;
            listener.fresh_token = Some(renewal.token);
            renewal.set_cookies
        }
        None => Vec::new(),
    };
    let frames = listener.into_frames(first, hub, permit, state.shutdown.clone());
    let mut response = Sse::new(frames).into_response();
    let response_headers = response.headers_mut();
    response_headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    append_set_cookies(response_headers, &set_cookies);
    Ok(response)
}

/// One stream's knowledge of its place.
struct Listener {
    engine: VisitorCalls,
    room_id: String,
    /// What the engine is asked: the token's claim and the hash of the ownership cookie.
    request: StatusRequest,
    /// The place as the edge computes it: the token's, or the drawn ticket a pre-queue handle
    /// became (the engine says so on Status).
    generation: u64,
    place: VisitorPlace,
    /// The claims of the stream's token: the presented one, or the one re-signed at open.
    claims: VisitorClaims,
    /// The token re-signed at open, carried as `token` in every status frame.
    fresh_token: Option<String>,
    refresh_after_ms: u64,
    /// The engine's latest answer would grant a refresh (a bound place of the token's generation
    /// still waiting). Once false it stays false: none of the three comes back.
    refresh_granted: bool,
    /// The latest view gave this place's status (at open, the engine did). When a view stops
    /// giving it — the place passed, was ejected, its room was reset — the engine is asked
    /// once; while later views go on not giving it, only heartbeats ask.
    view_gave_place: bool,
    /// The place lapsed: it never comes back, so nobody is asked again.
    lapsed: Option<Map<String, Value>>,
    /// The ticket this stream's heartbeats vouch for (QM-345): the engine's latest answer named
    /// it and the request's ownership cookie proved it.
    vouched_ticket: Option<u64>,
    /// The key of the `ref` every frame of a place carries.
    support_ref_key: [u8; 32],
}

impl Listener {
    fn new(
        engine: VisitorCalls,
        place: &PresentedPlace,
        request: StatusRequest,
        refresh_after_ms: u64,
    ) -> Listener {
        Listener {
            engine,
            room_id: place.claims.room_id.clone(),
            request,
            generation: place.claims.generation,
            place: place.claims.place,
            claims: place.claims.clone(),
            fresh_token: None,
            refresh_after_ms,
            refresh_granted: false,
            view_gave_place: true,
            lapsed: None,
            vouched_ticket: None,
            support_ref_key: [0; 32],
        }
    }

    /// The support reference code of the place this stream follows; none once it lapsed.
    fn support_ref(&self, fields: &Map<String, Value>) -> Option<String> {
        (!fields.contains_key("expired")).then(|| {
            qm_core::support_ref::support_ref_with_key(
                &self.support_ref_key,
                &self.room_id,
                self.generation,
                self.place,
            )
        })
    }

    /// This place's status from the engine (without `now`).
    async fn ask_engine(&mut self) -> Result<Map<String, Value>, ApiError> {
        if let Some(lapsed) = &self.lapsed {
            return Ok(lapsed.clone());
        }
        match read_status(&self.engine, self.request.clone()).await? {
            place_reply::Outcome::Place(place) => {
                self.refresh_granted = engine_grants_refresh(&self.claims, &place);
                if let Some(place_status::Place::Ticket(ticket)) = place.place {
                    self.place = VisitorPlace::Ticket(ticket);
                    self.generation = place.generation;
                }
                self.vouched_ticket = match place.place {
                    Some(place_status::Place::Ticket(ticket)) if place.bound => Some(ticket),
                    _ => None,
                };
                Ok(place_fields(&place))
            }
            place_reply::Outcome::Lapsed(lapsed) => {
                self.refresh_granted = false;
                self.vouched_ticket = None;
                let fields = lapsed_fields(&lapsed.reason);
                self.lapsed = Some(fields.clone());
                Ok(fields)
            }
        }
    }

    fn status_from_view(&self, latest: &LatestView) -> Option<Map<String, Value>> {
        if self.lapsed.is_some() {
            return None;
        }
        let hub_view = latest.as_ref()?;
        view_fields(
            &hub_view.view,
            &hub_view.branding,
            self.generation,
            self.place,
            now_ms(),
        )
    }

    /// After a view change: the new body, or `None` to send nothing.
    async fn on_view_change(&mut self, latest: &LatestView) -> Option<Map<String, Value>> {
        if let Some(fields) = self.status_from_view(latest) {
            self.view_gave_place = true;
            return Some(fields);
        }
        if !self.view_gave_place || self.lapsed.is_some() {
            return None;
        }
        self.view_gave_place = false;
        self.ask_engine().await.ok()
    }

    /// At a heartbeat: the body to send (`None` keeps the previous one, e.g. the engine is down).
    async fn on_heartbeat(&mut self, latest: &LatestView) -> Option<Map<String, Value>> {
        if let Some(fields) = self.status_from_view(latest) {
            return Some(fields);
        }
        match self.ask_engine().await {
            Ok(fields) => Some(fields),
            Err(error) => {
                tracing::debug!(room_id = %self.room_id, code = error.code.as_str(), "status for a stream failed, repeating the last frame");
                None
            }
        }
    }

    /// Whether the stream's token is a handle the draw has since turned into a ticket, and the
    /// engine would re-sign it for this browser.
    fn drawn_since_open(&self) -> bool {
        matches!(self.claims.place, VisitorPlace::Handle(_))
            && matches!(self.place, VisitorPlace::Ticket(_))
            && self.refresh_granted
    }

    /// When this stream ends for a refresh: at its token's due instant plus the place's jitter.
    /// None when no refresh can be granted (the engine already refused one: that never changes)
    /// or the token is already due (a stream opened with a due token either re-signed it at open
    /// or was refused the refresh).
    fn refresh_deadline(&self) -> Option<Instant> {
        let now = now_ms();
        if !self.refresh_granted || is_due(&self.claims, now, self.refresh_after_ms) {
            return None;
        }
        let refresh_at_ms = stream_refresh_at_ms(&self.claims, self.refresh_after_ms);
        let wait_ms = u64::try_from(refresh_at_ms.saturating_sub(now)).unwrap_or(0);
        Some(Instant::now() + Duration::from_millis(wait_ms))
    }

    fn into_frames(
        mut self,
        first: Map<String, Value>,
        hub: Arc<RoomHub>,
        permit: StreamPermit,
        mut shutdown: watch::Receiver<bool>,
    ) -> impl Stream<Item = Result<Event, Infallible>> + Send + 'static {
        async_stream::stream! {
            // Held for the stream's life: its place in the limits and in the room's fan-out.
            let _permit = permit;
            let mut views = hub.views();
            let mut views_open = true;
            // Held for the stream's life too: its ticket in the room's presence report.
            let mut presence = hub.presence();
            presence.set(self.vouched_ticket);
            // The last body sent, held as its JSON: an idle stream's memory is mostly what it
            // keeps between heartbeats, and the text is a fraction of the map's size.
            let mut last = body_json(&first);
            yield Ok(status_event(&first, self.fresh_token.as_deref(), self.support_ref(&first)));
            drop(first);
            let mut next_heartbeat = Instant::now() + HEARTBEAT;
            let mut refresh_deadline = self.refresh_deadline();
            loop {
                let step = tokio::select! {
                    biased;
                    _ = stopped(&mut shutdown) => break,
                    changed = views.changed(), if views_open => {
                        if changed.is_err() {
                            // The hub's follower stopped (shutting down): heartbeats carry on.
                            views_open = false;
                            continue;
                        }
                        let latest = views.borrow_and_update().clone();
                        // Engine calls are boxed: awaited inline they would size every idle
                        // stream's state for the largest call, held the whole stream long.
                        match Box::pin(self.on_view_change(&latest)).await {
                            Some(fields) => Step::Changed(fields),
                            None => continue,
                        }
                    }
                    // The precondition keeps the placeholder instant from ever being awaited.
                    _ = tokio::time::sleep_until(refresh_deadline.unwrap_or(next_heartbeat)),
                        if refresh_deadline.is_some() => {
                        // Granted only if the engine, asked now, still holds the place for us.
                        match Box::pin(self.ask_engine()).await {
                            Ok(_) if self.refresh_granted => Step::Refresh,
                            Ok(fields) => {
                                refresh_deadline = None;
                                Step::Changed(fields)
                            }
                            Err(error) => {
                                tracing::debug!(room_id = %self.room_id, code = error.code.as_str(), "refresh check for a stream failed, asking again at the next heartbeat");
                                refresh_deadline = Some(Instant::now() + HEARTBEAT);
                                continue;
                            }
                        }
                    }
                    _ = tokio::time::sleep_until(next_heartbeat) => {
                        let latest = views.borrow().clone();
                        let fields = Box::pin(self.on_heartbeat(&latest)).await;
                        Step::Heartbeat(fields.unwrap_or_else(|| {
                            serde_json::from_str(&last).unwrap_or_default()
                        }))
                    }
                };
                let (fields, heartbeat) = match step {
                    Step::Changed(fields) => (fields, false),
                    Step::Heartbeat(fields) => (fields, true),
                    Step::Refresh => {
                        tracing::debug!(room_id = %self.room_id, "stream token due, ending the stream for a refresh");
                        yield Ok(refresh_event());
                        break;
                    }
                };
                let json = body_json(&fields);
                if !heartbeat && json == last {
                    continue;
                }
                presence.set(self.vouched_ticket);
                yield Ok(status_event(&fields, self.fresh_token.as_deref(), self.support_ref(&fields)));
                last = json;
                next_heartbeat = Instant::now() + HEARTBEAT;
                if self.drawn_since_open() {
                    // The stream cannot set cookies any more: the reconnect exchanges the token.
                    tracing::debug!(room_id = %self.room_id, "pre-queue handle drawn, ending the stream for its ticket");
                    yield Ok(refresh_event());
                    break;
                }
            }
            drop(presence);
            drop(hub);
        }
    }
}

/// What the stream does next.
enum Step {
    /// Send this status body if it differs from the last one sent.
    Changed(Map<String, Value>),
    /// Send this status body: a heartbeat goes out even unchanged.
    Heartbeat(Map<String, Value>),
    /// Send `event: refresh` and end.
    Refresh,
}

/// A status frame; `fresh_token` (a token re-signed at open) rides in every one as `token`,
/// and the place's support reference code as `ref`, as on /api/status.
fn status_event(
    fields: &Map<String, Value>,
    fresh_token: Option<&str>,
    support_ref: Option<String>,
) -> Event {
    let mut body = Map::new();
    if let Some(token) = fresh_token {
        body.insert("token".into(), Value::String(token.to_owned()));
    }
    body.extend(with_now_here(fields.clone()));
    if let Some(code) = support_ref {
        body.insert("ref".into(), Value::String(code));
    }
    Event::default()
        .event("status")
        .data(Value::Object(body).to_string())
}

/// A status body as JSON (without `now`): what a stream compares the next body with.
fn body_json(fields: &Map<String, Value>) -> String {
    serde_json::to_string(fields).unwrap_or_default()
}

/// The refresh frame (QM-469): `event: refresh` with `data: {}`.
fn refresh_event() -> Event {
    Event::default().event("refresh").data("{}")
}
