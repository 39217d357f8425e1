//! A small in-memory stand-in for the engine's gRPC API: enough of Join, Status, Check, Watch and
//! RoomInfo (plus the standard health service) for the gateway's own HTTP tests. The real engine
//! is exercised by the workspace's black-box suite.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::Stream;
use qm_core::eta::wait_for_position;
use qm_core::shutdown::Shutdown;
use qm_core::{ApiError, ErrorCode};
use qm_proto::engine_server::{Engine, EngineServer};
use qm_proto::*;
use tokio::sync::watch;
use tokio_stream::StreamExt;
use tonic::{Request, Response, Status};

#[derive(Debug, Clone)]
pub(crate) struct FakeRoom {
    pub(crate) generation: u64,
    pub(crate) state: String,
    pub(crate) rate_per_minute: u32,
    pub(crate) head: u64,
    pub(crate) next_ticket: u64,
    pub(crate) holes: Vec<u64>,
    pub(crate) owners: HashMap<u64, String>,
    pub(crate) tag_origins: Vec<String>,
    pub(crate) return_origins: Vec<String>,
    pub(crate) branding_json: String,
    pub(crate) seq: u64,
}

impl FakeRoom {
    fn new(generation: u64, state: &str, rate_per_minute: u32) -> FakeRoom {
        FakeRoom {
            generation,
            state: state.to_owned(),
            rate_per_minute,
            head: 1,
            next_ticket: 1,
            holes: Vec::new(),
            owners: HashMap::new(),
            tag_origins: vec!["https://shop.example".into()],
            return_origins: vec!["https://shop.example".into()],
            branding_json: "{}".into(),
            seq: 0,
        }
    }
}

/// One Seen RPC as the fake received it: (room id, tickets).
pub(crate) type SeenCall = (String, Vec<u64>);

pub(crate) const TARGET_URL: &str = "https://shop.example/checkout";

#[derive(Default)]
struct Inner {
    rooms: HashMap<String, FakeRoom>,
    generations: HashMap<String, u64>,
    views: HashMap<String, watch::Sender<RoomView>>,
}

/// Shared with the test so it can drive the line.
#[derive(Clone, Default)]
pub(crate) struct FakeEngine {
    inner: Arc<Mutex<Inner>>,
    /// Watch RPCs opened in total, and open right now.
    pub(crate) watch_calls: Arc<AtomicUsize>,
    pub(crate) watch_open: Arc<AtomicUsize>,
    pub(crate) status_calls: Arc<AtomicUsize>,
    /// Visitors RPCs: the batches the gateway's visitor calls came in.
    pub(crate) visitor_batches: Arc<AtomicUsize>,
    /// Answer Visitors as an engine from before that RPC would: `Unimplemented`.
    pub(crate) without_visitor_batches: Arc<AtomicBool>,
    /// Every Seen RPC: (room id, tickets).
    pub(crate) seen_calls: Arc<Mutex<Vec<SeenCall>>>,
    /// Bumped to end every open Watch stream (a broken engine connection, as the gateway sees it).
    watch_breaker: Arc<Mutex<Option<watch::Sender<u64>>>>,
}

fn view_of(room_id: &str, room: Option<&FakeRoom>) -> RoomView {
    match room {
        None => RoomView {
            room_id: room_id.to_owned(),
            exists: false,
            ..Default::default()
        },
        Some(room) => RoomView {
            room_id: room_id.to_owned(),
            exists: true,
            generation: room.generation,
            seq: room.seq,
            state: room.state.clone(),
            effective_state: room.state.clone(),
            rate_per_minute: room.rate_per_minute,
            head: room.head,
            next_ticket: room.next_ticket,
            holes: room.holes.clone(),
            target_url: TARGET_URL.into(),
            branding_json: room.branding_json.clone(),
            ..Default::default()
        },
    }
}

impl FakeEngine {
    /// Applies `change` to the room (creating nothing) and publishes the new view.
    fn change(&self, room_id: &str, change: impl FnOnce(&mut Inner)) {
        let mut inner = self.inner.lock().unwrap();
        change(&mut inner);
        if let Some(room) = inner.rooms.get_mut(room_id) {
            room.seq += 1;
        }
        let view = view_of(room_id, inner.rooms.get(room_id));
        if let Some(sender) = inner.views.get(room_id) {
            sender.send_replace(view);
        }
    }

    pub(crate) fn create_room(&self, room_id: &str, state: &str, rate_per_minute: u32) {
        self.change(room_id, |inner| {
            let generation = inner.generations.entry(room_id.to_owned()).or_insert(0);
            *generation += 1;
            let room = FakeRoom::new(*generation, state, rate_per_minute);
            inner.rooms.insert(room_id.to_owned(), room);
        });
    }

    pub(crate) fn delete_room(&self, room_id: &str) {
        self.change(room_id, |inner| {
            inner.rooms.remove(room_id);
        });
    }

    pub(crate) fn edit_room(&self, room_id: &str, edit: impl FnOnce(&mut FakeRoom)) {
        self.change(room_id, |inner| {
            if let Some(room) = inner.rooms.get_mut(room_id) {
                edit(room);
            }
        });
    }

    /// Admits the next `count` waiting tickets.
    pub(crate) fn flush(&self, room_id: &str, count: u64) {
        self.edit_room(room_id, |room| {
            room.head = (room.head + count).min(room.next_ticket);
            let head = room.head;
            room.holes.retain(|hole| *hole >= head);
        });
    }

    pub(crate) fn eject(&self, room_id: &str, ticket: u64) {
        self.edit_room(room_id, |room| {
            room.holes.push(ticket);
            room.holes.sort_unstable();
        });
    }

    /// Ends every open Watch stream, as an engine restart would.
    pub(crate) fn break_watches(&self) {
        if let Some(breaker) = self.watch_breaker.lock().unwrap().as_ref() {
            breaker.send_modify(|count| *count += 1);
        }
    }

    fn breaker(&self) -> watch::Receiver<u64> {
        let mut breaker = self.watch_breaker.lock().unwrap();
        let sender = breaker.get_or_insert_with(|| watch::channel(0).0);
        let mut receiver = sender.subscribe();
        receiver.mark_unchanged();
        receiver
    }

    /// Serves the fake (and a SERVING health service) on an ephemeral port.
    pub(crate) async fn serve(&self) -> (SocketAddr, Shutdown) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Shutdown::new();
        let stopped = stop.wait();
        let (_reporter, health) = tonic_health::server::health_reporter();
        let engine = EngineServer::new(self.clone());
        tokio::spawn(async move {
            let _reporter = _reporter;
            tonic::transport::Server::builder()
                .add_service(health)
                .add_service(engine)
                .serve_with_incoming_shutdown(
                    tonic::transport::server::TcpIncoming::from(listener),
                    stopped,
                )
                .await
                .unwrap();
        });
        (addr, stop)
    }

    fn place_status(room_id: &str, room: &FakeRoom, ticket: u64, new_place: bool) -> PlaceStatus {
        let passed = ticket < room.head;
        let position = (!passed).then(|| {
            ticket - room.head + 1 - room.holes.iter().filter(|hole| **hole < ticket).count() as u64
        });
        PlaceStatus {
            room_id: room_id.to_owned(),
            generation: room.generation,
            place: Some(place_status::Place::Ticket(ticket)),
            position,
            ahead: position.map(|position| position - 1),
            eta_sec: position.and_then(|position| {
                wait_for_position(position, room.rate_per_minute, room.state == "active")
            }),
            state: room.state.clone(),
            passed,
            redirect_url: if passed {
                TARGET_URL.into()
            } else {
                String::new()
            },
            new_place,
            now_ms: qm_core::clock::now_ms(),
            branding_json: room.branding_json.clone(),
            ..Default::default()
        }
    }
}

fn ticket_of(claim: &Option<Claim>, generation: u64) -> Option<u64> {
    match claim {
        Some(Claim {
            generation: claimed,
            place: Some(claim::Place::Ticket(ticket)),
        }) if *claimed == generation => Some(*ticket),
        _ => None,
    }
}

/// As the engine does: the room's tag origins plus its targetUrl origin.
fn effective_tag_origins(room: &FakeRoom) -> Vec<String> {
    let mut origins = room.tag_origins.clone();
    origins.push("https://shop.example".into());
    origins
}

fn lapsed(reason: &str) -> PlaceReply {
    PlaceReply {
        outcome: Some(place_reply::Outcome::Lapsed(Lapsed {
            reason: reason.into(),
        })),
        ..PlaceReply::default()
    }
}

type ViewStream = Pin<Box<dyn Stream<Item = Result<RoomView, Status>> + Send>>;

/// Counts a Watch stream as open until the gateway drops it.
struct OpenGuard(Arc<AtomicUsize>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[tonic::async_trait]
impl Engine for FakeEngine {
    async fn join(&self, request: Request<JoinRequest>) -> Result<Response<PlaceReply>, Status> {
        let request = request.into_inner();
        let mut inner = self.inner.lock().unwrap();
        let Some(room) = inner.rooms.get_mut(&request.room_id) else {
            return Err(ApiError::new(ErrorCode::RoomNotFound, "no such room").to_status());
        };
        let kept = ticket_of(&request.claim, room.generation).filter(|ticket| {
            room.owners.get(ticket) == Some(&request.session_hash) && !room.holes.contains(ticket)
        });
        let (ticket, new_place) = match kept {
            Some(ticket) => (ticket, false),
            None => {
                let ticket = room.next_ticket;
                room.next_ticket += 1;
                room.owners.insert(ticket, request.session_hash.clone());
                room.seq += 1;
                (ticket, true)
            }
        };
        let status = FakeEngine::place_status(&request.room_id, room, ticket, new_place);
        let view = view_of(&request.room_id, Some(room));
        if let Some(sender) = inner.views.get(&request.room_id) {
            sender.send_replace(view);
        }
        Ok(Response::new(PlaceReply {
            outcome: Some(place_reply::Outcome::Place(status)),
            ..PlaceReply::default()
        }))
    }

    async fn status(
        &self,
        request: Request<StatusRequest>,
    ) -> Result<Response<PlaceReply>, Status> {
        self.status_calls.fetch_add(1, Ordering::SeqCst);
        let request = request.into_inner();
        let inner = self.inner.lock().unwrap();
        let Some(room) = inner.rooms.get(&request.room_id) else {
            return Ok(Response::new(lapsed("room_reset")));
        };
        let Some(ticket) = ticket_of(&request.claim, room.generation) else {
            return Ok(Response::new(lapsed("room_reset")));
        };
        if room.holes.contains(&ticket) {
            return Ok(Response::new(lapsed("ejected")));
        }
        let mut status = FakeEngine::place_status(&request.room_id, room, ticket, false);
        status.bound = !request.session_hash.is_empty()
            && room.owners.get(&ticket) == Some(&request.session_hash);
        Ok(Response::new(PlaceReply {
            outcome: Some(place_reply::Outcome::Place(status)),
            ..PlaceReply::default()
        }))
    }

    async fn visitors(
        &self,
        request: Request<VisitorBatch>,
    ) -> Result<Response<VisitorBatchReply>, Status> {
        self.visitor_batches.fetch_add(1, Ordering::SeqCst);
        if self.without_visitor_batches.load(Ordering::SeqCst) {
            return Err(Status::unimplemented("Visitors"));
        }
        Ok(Response::new(
            answer_visitor_calls(self, request.into_inner()).await,
        ))
    }

    async fn check(&self, request: Request<CheckRequest>) -> Result<Response<CheckReply>, Status> {
        let request = request.into_inner();
        let inner = self.inner.lock().unwrap();
        let Some(room) = inner.rooms.get(&request.room_id) else {
            return Ok(Response::new(CheckReply {
                room_found: false,
                action: "pass".into(),
                reason: "no_room".into(),
                ..Default::default()
            }));
        };
        let (action, reason) = match ticket_of(&request.claim, room.generation) {
            _ if room.state == "bypass" => ("pass", "bypass"),
            Some(ticket) if ticket < room.head => ("pass", "passed"),
            Some(_) => ("queue", "waiting"),
            None => ("queue", "no_token"),
        };
        Ok(Response::new(CheckReply {
            room_found: true,
            action: action.into(),
            reason: reason.into(),
            state: room.state.clone(),
            generation: room.generation,
            target_url: TARGET_URL.into(),
            tag_origins: effective_tag_origins(room),
            ..Default::default()
        }))
    }

    type WatchStream = ViewStream;

    async fn watch(&self, request: Request<WatchRequest>) -> Result<Response<ViewStream>, Status> {
        let room_id = request.into_inner().room_id;
        self.watch_calls.fetch_add(1, Ordering::SeqCst);
        self.watch_open.fetch_add(1, Ordering::SeqCst);
        let guard = OpenGuard(self.watch_open.clone());
        let receiver = {
            let mut inner = self.inner.lock().unwrap();
            let view = view_of(&room_id, inner.rooms.get(&room_id));
            inner
                .views
                .entry(room_id)
                .or_insert_with(|| watch::channel(view).0)
                .subscribe()
        };
        let mut breaker = self.breaker();
        let stream = tokio_stream::wrappers::WatchStream::new(receiver).map(move |view| {
            let _held = &guard;
            Ok(view)
        });
        let broken = async move {
            let _ = breaker.changed().await;
        };
        Ok(Response::new(Box::pin(futures::StreamExt::take_until(
            stream,
            Box::pin(broken),
        ))))
    }

    async fn seen(&self, request: Request<SeenRequest>) -> Result<Response<SeenReply>, Status> {
        let request = request.into_inner();
        self.seen_calls
            .lock()
            .unwrap()
            .push((request.room_id, request.tickets));
        Ok(Response::new(SeenReply {}))
    }

    async fn origin_answers(
        &self,
        _request: Request<OriginAnswersRequest>,
    ) -> Result<Response<OriginAnswersReply>, Status> {
        Ok(Response::new(OriginAnswersReply {}))
    }

    async fn room_info(
        &self,
        request: Request<RoomRef>,
    ) -> Result<Response<RoomInfoReply>, Status> {
        let room_id = request.into_inner().room_id;
        let inner = self.inner.lock().unwrap();
        let reply = match inner.rooms.get(&room_id) {
            None => RoomInfoReply {
                found: false,
                room_id,
                ..Default::default()
            },
            Some(room) => RoomInfoReply {
                found: true,
                name: format!("Room {room_id}"),
                room_id,
                target_url: TARGET_URL.into(),
                tag_origins: effective_tag_origins(room),
                return_origins: room.return_origins.clone(),
                branding_json: room.branding_json.clone(),
                state: room.state.clone(),
                effective_state: room.state.clone(),
                generation: room.generation,
                opens_at_ms: None,
                ..Default::default()
            },
        };
        Ok(Response::new(reply))
    }

    async fn put_room(&self, _: Request<PutRoomRequest>) -> Result<Response<RoomReply>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn get_room(&self, _: Request<RoomRef>) -> Result<Response<RoomReply>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn list_rooms(
        &self,
        _: Request<ListRoomsRequest>,
    ) -> Result<Response<ListRoomsReply>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn delete_room(&self, _: Request<RoomRef>) -> Result<Response<DeleteReply>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn set_state(&self, _: Request<SetStateRequest>) -> Result<Response<RoomReply>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn set_rate(&self, _: Request<SetRateRequest>) -> Result<Response<RoomReply>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn flush(&self, _: Request<FlushRequest>) -> Result<Response<FlushReply>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn schedule(&self, _: Request<ScheduleRequest>) -> Result<Response<RoomReply>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn eject(&self, _: Request<EjectRequest>) -> Result<Response<EjectReply>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn purge(&self, _: Request<RoomRef>) -> Result<Response<PurgeReply>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn stats(&self, _: Request<StatsRequest>) -> Result<Response<StatsReply>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn metrics(&self, _: Request<MetricsRequest>) -> Result<Response<MetricsReply>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn report(&self, _: Request<ReportRequest>) -> Result<Response<ReportReply>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn notify(
        &self,
        _: Request<qm_proto::NotifyRequest>,
    ) -> Result<Response<qm_proto::NotifyReply>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn history(
        &self,
        _: Request<qm_proto::HistoryRequest>,
    ) -> Result<Response<qm_proto::HistoryReply>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn lookup_visitors(
        &self,
        _: Request<qm_proto::LookupVisitorsRequest>,
    ) -> Result<Response<qm_proto::LookupVisitorsReply>, Status> {
        Err(Status::unimplemented("fake"))
    }

    /// Fake rooms have no rules: an unscoped room at rev 0, or `room_not_found`.
    async fn targeting(
        &self,
        request: Request<TargetingRequest>,
    ) -> Result<Response<TargetingReply>, Status> {
        let room_id = request.into_inner().room_id;
        let inner = self.inner.lock().unwrap();
        match inner.rooms.get(&room_id) {
            Some(room) => Ok(Response::new(TargetingReply {
                generation: room.generation,
                room_id,
                ..Default::default()
            })),
            None => Err(
                ApiError::new(ErrorCode::RoomNotFound, format!("no room {room_id:?}")).to_status(),
            ),
        }
    }

    async fn check_in(
        &self,
        _request: Request<CheckInRequest>,
    ) -> Result<Response<CheckInReply>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn check_ins(
        &self,
        _request: Request<RoomRef>,
    ) -> Result<Response<CheckInsReply>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn create_operator(
        &self,
        _: Request<qm_proto::CreateOperatorRequest>,
    ) -> Result<Response<qm_proto::Operator>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn list_operators(
        &self,
        _: Request<qm_proto::ListOperatorsRequest>,
    ) -> Result<Response<qm_proto::ListOperatorsReply>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn revoke_operator(
        &self,
        _: Request<qm_proto::RevokeOperatorRequest>,
    ) -> Result<Response<qm_proto::RevokeOperatorReply>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn create_monitor_token(
        &self,
        _: Request<qm_proto::CreateMonitorTokenRequest>,
    ) -> Result<Response<qm_proto::MonitorToken>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn list_monitor_tokens(
        &self,
        _: Request<qm_proto::ListMonitorTokensRequest>,
    ) -> Result<Response<qm_proto::ListMonitorTokensReply>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn revoke_monitor_tokens(
        &self,
        _: Request<qm_proto::RevokeMonitorTokensRequest>,
    ) -> Result<Response<qm_proto::RevokeMonitorTokensReply>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn find_credential(
        &self,
        _: Request<qm_proto::FindCredentialRequest>,
    ) -> Result<Response<qm_proto::FindCredentialReply>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn append_audit(
        &self,
        _: Request<qm_proto::AuditEntry>,
    ) -> Result<Response<qm_proto::AppendAuditReply>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn list_audit(
        &self,
        _: Request<qm_proto::ListAuditRequest>,
    ) -> Result<Response<qm_proto::ListAuditReply>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn put_record(
        &self,
        _: Request<qm_proto::PutRecordRequest>,
    ) -> Result<Response<qm_proto::PutRecordReply>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn get_record(
        &self,
        _: Request<qm_proto::GetRecordRequest>,
    ) -> Result<Response<qm_proto::GetRecordReply>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn auth_failures(
        &self,
        _: Request<qm_proto::AuthFailuresRequest>,
    ) -> Result<Response<qm_proto::AuthFailuresReply>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn delete_record(
        &self,
        _: Request<qm_proto::RecordRef>,
    ) -> Result<Response<qm_proto::DeleteRecordReply>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn security(
        &self,
        _: Request<qm_proto::SecurityRequest>,
    ) -> Result<Response<qm_proto::SecurityReply>, Status> {
        Err(Status::unimplemented("fake"))
    }
}
