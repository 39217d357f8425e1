//! The tonic `Engine` service: maps the wire types of `qm.engine.v1` to the store and back.
//! No rules live here; errors leave as `ApiError::to_status()` so the edge reads the spec code
//! back from the `qm-code` metadata.

use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use qm_core::room::{ProtectionMode, RoomState};
use qm_core::{ApiError, ErrorCode};
use qm_proto::engine::engine_server::Engine;
use qm_proto::engine::find_credential_reply;
use qm_proto::engine::{claim, place_reply, place_status};
use qm_proto::{
    AppendAuditReply, AuditEntry, CreateMonitorTokenRequest, CreateOperatorRequest,
    FindCredentialReply, FindCredentialRequest, ListAuditReply, ListAuditRequest,
    ListMonitorTokensReply, ListMonitorTokensRequest, ListOperatorsReply, ListOperatorsRequest,
    RevokeMonitorTokensReply, RevokeMonitorTokensRequest, RevokeOperatorReply,
    RevokeOperatorRequest,
};
use qm_proto::{
    CheckInReply, CheckInRequest, CheckInsReply, CheckReply, CheckRequest, ConnectorCheckIn,
    DeleteReply, EjectReply, EjectRequest, FlushReply, FlushRequest, HistoryReply, HistoryRequest,
    Lapsed, ListRoomsReply, ListRoomsRequest, LookupVisitorsReply, LookupVisitorsRequest,
    MetricsReply, MetricsRequest, NotifyReply, NotifyRequest, OriginAnswersReply,
    OriginAnswersRequest, PlaceReply, PurgeReply, PutRoomRequest, ReportReply, ReportRequest,
    RoomInfoReply, RoomRef, RoomReply, RoomView, ScheduleRequest, SecurityReply, SecurityRequest,
    SeenReply, SeenRequest, SetRateRequest, SetStateRequest, StatsReply, StatsRequest,
    StatusRequest, TargetingReply, TargetingRequest, VisitorBatch, VisitorBatchReply, WatchRequest,
};
use serde_json::Value;
use tokio::sync::watch;
use tonic::{Request, Response, Status};

use crate::access::{Access, Credential, monitor_token_to_wire, operator_to_wire};
use crate::auto_activate::AutoActivation;
use crate::autotune::InlineAnswers;
use crate::check_ins::CheckIns;
use crate::domain::{
    Claim, ClaimedPlace, DoorInput, JoinRequest, LookupKeys, PlaceAnswer, PlaceStatus,
};
use crate::history::History;
use crate::notify::Notifier;
use crate::reports::Bucket;
use crate::security::{Flagged, ScoredJoin, SecurityLedger};
use crate::shutdown::stopped;
use crate::store::Store;
use crate::targeting_counters::TargetingCounters;
use crate::targeting_wire::{check_targeting, dry_run_page, targeting_reply};

type Reply<T> = Result<Response<T>, Status>;

/// The gRPC face of a store.
pub(crate) struct EngineService {
    store: Arc<dyn Store>,
    /// PREQUEUE_MAX, handed to every join.
    pre_queue_ceiling: u64,
    /// Set at shutdown: open Watch streams end so the server can drain.
    stop: watch::Receiver<bool>,
    /// Turn notifications, when EMAIL_NOTIFY is on: hooked around join, eject and purge.
    notifier: Option<Arc<Notifier>>,
    /// The charts' sample rings, fed by the history sampler.
    history: Arc<History>,
    /// Keys derived from SECRET for the support lookup (reference codes, session digests).
    lookup_keys: Arc<LookupKeys>,
    /// The admin targeting page's counters, fed by every check on a scoped room.
    targeting_counters: Arc<TargetingCounters>,
    /// Connectors that ran an install check, for the console.
    check_ins: Arc<CheckIns>,
    /// Operators, monitor tokens and the audit trail.
    access: Arc<Access>,
    /// Bot protection's account of the joins this engine ran.
    security: Arc<SecurityLedger>,
    /// The key of the client digests in that account (from SECRET).
    client_digest_key: [u8; 32],
    /// When this engine started counting (epoch ms): the security account's `since`.
    started_ms: i64,
    /// Threshold activation's arrival counts, fed by joins and door checks.
    auto_activation: Arc<AutoActivation>,
    /// Autotune's inline answers, fed by the gateways' reports.
    inline_answers: Arc<InlineAnswers>,
}

impl EngineService {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        pre_queue_ceiling: u64,
        stop: watch::Receiver<bool>,
    ) -> EngineService {
        EngineService {
            store,
            pre_queue_ceiling,
            stop,
            notifier: None,
            history: Arc::new(History::new(qm_core::clock::now_ms())),
            lookup_keys: Arc::new(LookupKeys {
                ref_keys: Vec::new(),
                session_key: [0; 32],
            }),
            targeting_counters: Arc::default(),
            check_ins: Arc::default(),
            access: Arc::new(Access::memory()),
            security: Arc::default(),
            client_digest_key: [0; 32],
            started_ms: qm_core::clock::now_ms(),
            auto_activation: Arc::default(),
            inline_answers: Arc::default(),
        }
    }

    /// The keyring the gateway signs and codes under, so a lookup computes the code the
    /// waiting page showed with the very same function.
    pub(crate) fn with_keyring(mut self, keyring: &qm_core::token::Keyring) -> EngineService {
        let session_key = keyring
            .derived_keys(qm_core::support_ref::SUPPORT_SESSION_INFO)
            .first()
            .copied()
            .unwrap_or_default();
        self.lookup_keys = Arc::new(LookupKeys {
            ref_keys: keyring.derived_keys(qm_core::support_ref::SUPPORT_REF_INFO),
            session_key,
        });
        self.client_digest_key = keyring
            .derived_keys(qm_core::bot::CLIENT_DIGEST_INFO)
            .first()
            .copied()
            .unwrap_or_default();
        self
    }

    /// Counts a join in bot protection's account: its score, and whether `enforce` refused
    /// it a new place or `monitor` let in one that `enforce` would have refused. The room's
    /// mode is read only for a script-like join that got a new place.
    async fn account_for_protection(
        &self,
        room_id: &str,
        identity: &str,
        score: u32,
        reasons: u32,
        joined: &Result<PlaceStatus, ApiError>,
    ) {
        let flagged = match joined {
            Err(error) if error.code == ErrorCode::BlockedByProtection => Some(Flagged::Refused),
            Err(_) => return,
            Ok(place) if score >= qm_core::bot::BLOCK_AT && place.new_place => {
                let mode = self.store.protection_mode(room_id.to_owned()).await;
                matches!(mode, Ok(Some(ProtectionMode::Monitor))).then_some(Flagged::WouldRefuse)
            }
            Ok(_) => None,
        };
        let client = flagged
            .and(Some(identity))
            .filter(|identity| !identity.is_empty())
            .map(|identity| {
                qm_core::support_ref::session_digest(&self.client_digest_key, identity)
            });
        self.security.record(ScoredJoin {
            score,
            reasons,
            client,
            flagged,
            at_ms: qm_core::clock::now_ms(),
            room_id,
        });
    }

    pub(crate) fn with_auto_activation(mut self, controller: Arc<AutoActivation>) -> EngineService {
        self.auto_activation = controller;
        self
    }

    pub(crate) fn with_inline_answers(mut self, answers: Arc<InlineAnswers>) -> EngineService {
        self.inline_answers = answers;
        self
    }

    /// The targeting counters, shared with the task that flushes them to the store.
    pub(crate) fn with_targeting_counters(
        mut self,
        counters: Arc<TargetingCounters>,
    ) -> EngineService {
        self.targeting_counters = counters;
        self
    }

    pub(crate) fn with_history(mut self, history: Arc<History>) -> EngineService {
        self.history = history;
        self
    }

    pub(crate) fn with_access(mut self, access: Arc<Access>) -> EngineService {
        self.access = access;
        self
    }

    pub(crate) fn with_notifier(mut self, notifier: Option<Arc<Notifier>>) -> EngineService {
        self.notifier = notifier;
        self
    }
}

fn claim_from_wire(claim: Option<qm_proto::Claim>) -> Option<Claim> {
    let claim = claim?;
    let place = match claim.place? {
        claim::Place::Ticket(ticket) => ClaimedPlace::Ticket(ticket),
        claim::Place::Handle(handle) => ClaimedPlace::Handle(handle),
    };
    Some(Claim {
        generation: claim.generation,
        place,
    })
}

fn place_to_wire(place: PlaceStatus) -> qm_proto::PlaceStatus {
    qm_proto::PlaceStatus {
        room_id: place.room_id,
        generation: place.generation,
        place: Some(match place.handle {
            Some(handle) => place_status::Place::Handle(handle),
            None => place_status::Place::Ticket(place.ticket),
        }),
        position: place.position,
        ahead: place.ahead,
        eta_sec: place.eta_sec,
        state: place.state.as_str().to_owned(),
        passed: place.passed,
        redirect_url: place.redirect_url.unwrap_or_default(),
        new_place: place.new_place,
        bound: place.bound,
        now_ms: place.now_ms,
        opens_at_ms: place.opens_at_ms,
        pre_count: place.pre_count,
        pass_expires_at_ms: place.pass_expires_at_ms,
        branding_json: place.branding_json,
        replaced_reason: place
            .replaced_reason
            .map(|reason| reason.as_str().to_owned())
            .unwrap_or_default(),
    }
}

fn answer_to_wire(answer: PlaceAnswer) -> PlaceReply {
    let outcome = match answer {
        PlaceAnswer::Place(place) => place_reply::Outcome::Place(place_to_wire(place)),
        PlaceAnswer::Lapsed(reason) => place_reply::Outcome::Lapsed(Lapsed {
            reason: reason.as_str().to_owned(),
        }),
    };
    PlaceReply {
        outcome: Some(outcome),
        ..PlaceReply::default()
    }
}

fn parse_body(body_json: &str) -> Result<Value, ApiError> {
    serde_json::from_str(body_json).map_err(|error| {
        ApiError::new(
            ErrorCode::InvalidJson,
            format!("the body is not valid JSON: {error}"),
        )
    })
}

fn room_reply(room: &Value) -> RoomReply {
    RoomReply {
        room_json: room.to_string(),
        created: false,
    }
}

/// A door key's digest as the edge computes it (64 lowercase hex digits); anything else is no
/// key, so a malformed value can neither open nor match a session.
fn digest_or_empty(digest: String) -> String {
    let well_formed = digest.len() == 64
        && digest
            .bytes()
            .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte));
    if well_formed { digest } else { String::new() }
}

fn checked_room_id(room_id: String) -> Result<String, ApiError> {
    if qm_core::ids::is_valid_room_id(&room_id) {
        Ok(room_id)
    } else {
        Err(ApiError::new(
            ErrorCode::InvalidRoomId,
            "room ids are 1-64 characters of A-Z a-z 0-9 _ -",
        ))
    }
}

/// A Watch stream: the current view, then the newest view after each change, until the room's
/// channel closes or the engine stops.
fn view_stream(
    current: RoomView,
    changes: watch::Receiver<RoomView>,
    stop: watch::Receiver<bool>,
) -> WatchStream {
    struct Cursor {
        first: Option<RoomView>,
        changes: watch::Receiver<RoomView>,
        stop: watch::Receiver<bool>,
    }
    let cursor = Cursor {
        first: Some(current),
        changes,
        stop,
    };
    Box::pin(futures::stream::unfold(cursor, |mut cursor| async move {
        if let Some(first) = cursor.first.take() {
            return Some((Ok(first), cursor));
        }
        tokio::select! {
            changed = cursor.changes.changed() => {
                changed.ok()?;
                let view = cursor.changes.borrow_and_update().clone();
                Some((Ok(view), cursor))
            }
            () = stopped(&mut cursor.stop) => None,
        }
    }))
}

type WatchStream = Pin<Box<dyn Stream<Item = Result<RoomView, Status>> + Send>>;

#[tonic::async_trait]
impl Engine for EngineService {
    async fn join(&self, request: Request<qm_proto::JoinRequest>) -> Reply<PlaceReply> {
        let request = request.into_inner();
        let room_id = checked_room_id(request.room_id)?;
        self.auto_activation.arrived(&room_id);
        // Only a script-like join's address is ever shown (as a digest), so only it is kept.
        let flagged_identity =
            (request.bot_score >= qm_core::bot::BLOCK_AT).then(|| request.identity.clone());
        let join = JoinRequest {
            claim: claim_from_wire(request.claim),
            session_hash: request.session_hash,
            identity: request.identity,
            pre_queue_ceiling: Some(self.pre_queue_ceiling),
            bot_score: request.bot_score,
        };
        // The notification hook needs the claim the join replaced, so it keeps the request.
        let hook_request = self.notifier.as_ref().map(|_| join.clone());
        let joined = self.store.join(room_id.clone(), join).await;
        self.account_for_protection(
            &room_id,
            flagged_identity.as_deref().unwrap_or_default(),
            request.bot_score,
            request.bot_reasons,
            &joined,
        )
        .await;
        let place = joined?;
        let mut reply = answer_to_wire(PlaceAnswer::Place(place));
        if let (Some(notifier), Some(join)) = (&self.notifier, &hook_request) {
            notifier.annotate_join(&room_id, join, &mut reply).await;
        }
        Ok(Response::new(reply))
    }

    async fn status(&self, request: Request<StatusRequest>) -> Reply<PlaceReply> {
        let request = request.into_inner();
        let Some(claim) = claim_from_wire(request.claim) else {
            return Err(ApiError::new(
                ErrorCode::InvalidToken,
                "status needs the place a verified token claims",
            )
            .into());
        };
        let answer = self
            .store
            .status(request.room_id, claim, request.session_hash)
            .await?;
        Ok(Response::new(answer_to_wire(answer)))
    }

    async fn visitors(&self, request: Request<VisitorBatch>) -> Reply<VisitorBatchReply> {
        Ok(Response::new(
            qm_proto::answer_visitor_calls(self, request.into_inner()).await,
        ))
    }

    async fn check(&self, request: Request<CheckRequest>) -> Reply<CheckReply> {
        let request = request.into_inner();
        self.auto_activation.arrived(&request.room_id);
        let page = Some(request.url).filter(|url| !url.is_empty());
        let reply = match self
            .store
            .check(
                request.room_id.clone(),
                DoorInput {
                    claim: claim_from_wire(request.claim),
                    page,
                    ownership_hash: request.session_hash,
                    key_hash: digest_or_empty(request.door_key_hash),
                    new_key_hash: digest_or_empty(request.new_door_key_hash),
                },
            )
            .await?
        {
            Some(answer) => CheckReply {
                targeting: answer.targeting.as_ref().map(|verdict| {
                    let now = qm_core::clock::now_ms();
                    self.targeting_counters.record(
                        &request.room_id,
                        answer.generation,
                        verdict,
                        now,
                    );
                    check_targeting(verdict, request.want_rules)
                }),
                room_found: true,
                action: answer.action.as_str().to_owned(),
                reason: answer.reason.to_owned(),
                state: answer.state.as_str().to_owned(),
                generation: answer.generation,
                target_url: answer.target_url,
                tag_origins: answer.tag_origins,
                session_opened: answer.session_opened,
                clear_token: answer.clear_token,
                session_expires_at_ms: answer.session_expires_at_ms,
                backend_down: self.store.backend_down(),
            },
            None => CheckReply {
                room_found: false,
                action: "pass".to_owned(),
                reason: "no_room".to_owned(),
                ..CheckReply::default()
            },
        };
        Ok(Response::new(reply))
    }

    type WatchStream = WatchStream;

    async fn watch(&self, request: Request<WatchRequest>) -> Reply<Self::WatchStream> {
        let room_watch = self.store.watch(request.into_inner().room_id).await?;
        Ok(Response::new(view_stream(
            room_watch.current,
            room_watch.changes,
            self.stop.clone(),
        )))
    }

    async fn seen(&self, request: Request<SeenRequest>) -> Reply<SeenReply> {
        let request = request.into_inner();
        let room_id = checked_room_id(request.room_id)?;
        self.store.seen(room_id, request.tickets).await?;
        Ok(Response::new(SeenReply {}))
    }

    async fn origin_answers(
        &self,
        request: Request<OriginAnswersRequest>,
    ) -> Reply<OriginAnswersReply> {
        for room in request.into_inner().rooms {
            self.inline_answers
                .record(&room.room_id, &room.latency_ms, &room.ok);
        }
        Ok(Response::new(OriginAnswersReply {}))
    }

    async fn room_info(&self, request: Request<RoomRef>) -> Reply<RoomInfoReply> {
        Ok(Response::new(
            self.store.room_info(request.into_inner().room_id).await?,
        ))
    }

    async fn put_room(&self, request: Request<PutRoomRequest>) -> Reply<RoomReply> {
        let body = parse_body(&request.into_inner().body_json)?;
        let outcome = self.store.put_room(body).await?;
        if outcome.created
            && let Some(room_id) = outcome.room.get("id").and_then(Value::as_str)
        {
            self.security.forget(room_id);
        }
        Ok(Response::new(RoomReply {
            room_json: outcome.room.to_string(),
            created: outcome.created,
        }))
    }

    async fn get_room(&self, request: Request<RoomRef>) -> Reply<RoomReply> {
        let room = self.store.get_room(request.into_inner().room_id).await?;
        Ok(Response::new(room_reply(&room)))
    }

    async fn list_rooms(&self, _request: Request<ListRoomsRequest>) -> Reply<ListRoomsReply> {
        let rooms = self.store.list_rooms().await?;
        Ok(Response::new(ListRoomsReply {
            room_json: rooms.iter().map(Value::to_string).collect(),
        }))
    }

    async fn delete_room(&self, request: Request<RoomRef>) -> Reply<DeleteReply> {
        let room_id = request.into_inner().room_id;
        self.store.delete_room(room_id.clone()).await?;
        self.security.forget(&room_id);
        Ok(Response::new(DeleteReply { deleted: true }))
    }

    async fn set_state(&self, request: Request<SetStateRequest>) -> Reply<RoomReply> {
        let request = request.into_inner();
        let state = RoomState::parse(&request.state)?;
        let room = self.store.set_state(request.room_id, state).await?;
        Ok(Response::new(room_reply(&room)))
    }

    async fn set_rate(&self, request: Request<SetRateRequest>) -> Reply<RoomReply> {
        let request = request.into_inner();
        let room = self
            .store
            .set_rate(request.room_id, request.rate_per_minute)
            .await?;
        Ok(Response::new(room_reply(&room)))
    }

    async fn flush(&self, request: Request<FlushRequest>) -> Reply<FlushReply> {
        let request = request.into_inner();
        let (promoted, room) = self.store.flush(request.room_id, request.count).await?;
        Ok(Response::new(FlushReply {
            promoted,
            room_json: room.to_string(),
        }))
    }

    async fn schedule(&self, request: Request<ScheduleRequest>) -> Reply<RoomReply> {
        let request = request.into_inner();
        let body = parse_body(&request.body_json)?;
        let room = self.store.schedule(request.room_id, body).await?;
        Ok(Response::new(room_reply(&room)))
    }

    async fn eject(&self, request: Request<EjectRequest>) -> Reply<EjectReply> {
        let request = request.into_inner();
        let (was, room) = self
            .store
            .eject(request.room_id.clone(), request.ticket)
            .await?;
        if let Some(notifier) = &self.notifier {
            notifier.after_eject(&request.room_id, request.ticket).await;
        }
        Ok(Response::new(EjectReply {
            was: was.as_str().to_owned(),
            room_json: room.to_string(),
        }))
    }

    async fn purge(&self, request: Request<RoomRef>) -> Reply<PurgeReply> {
        let room_id = request.into_inner().room_id;
        let (purged, room) = self.store.purge(room_id.clone()).await?;
        if let Some(notifier) = &self.notifier {
            notifier.after_purge(&room_id).await;
        }
        Ok(Response::new(PurgeReply {
            purged: purged.total(),
            pre_queue: purged.pre_queue,
            room_json: room.to_string(),
        }))
    }

    async fn stats(&self, _request: Request<StatsRequest>) -> Reply<StatsReply> {
        Ok(Response::new(self.store.stats().await?))
    }

    async fn report(&self, request: Request<ReportRequest>) -> Reply<ReportReply> {
        let request = request.into_inner();
        let room_id = checked_room_id(request.room_id)?;
        let bucket = Bucket::from_name(&request.bucket).ok_or_else(|| {
            ApiError::new(ErrorCode::InvalidReportQuery, "bucket must be hour or day")
        })?;
        let until_ms = match request.until_ms {
            0 => i64::MAX,
            until => until,
        };
        let fold = self.store.report(room_id.clone()).await?;
        let rows = fold.rows(bucket, request.since_ms, until_ms);
        let source = match self.store.stats().await?.store.as_str() {
            "memory" => "memory",
            _ => "journal",
        };
        let report = serde_json::json!({
            "roomId": room_id,
            "bucket": request.bucket,
            "source": source,
            "truncated": rows.len() == crate::reports::MAX_ROWS,
            "rows": rows,
        });
        Ok(Response::new(ReportReply {
            report_json: report.to_string(),
        }))
    }

    async fn metrics(&self, _request: Request<MetricsRequest>) -> Reply<MetricsReply> {
        let stats = self.store.stats().await?;
        Ok(Response::new(MetricsReply {
            text: crate::metrics::exposition(&stats, self.store.store_metrics()),
        }))
    }

    async fn notify(&self, request: Request<NotifyRequest>) -> Reply<NotifyReply> {
        let Some(notifier) = &self.notifier else {
            return Err(ApiError::new(
                ErrorCode::NotifyDisabled,
                "turn notifications are off on this server (EMAIL_NOTIFY)",
            )
            .into());
        };
        let request = request.into_inner();
        let room_id = checked_room_id(request.room_id)?;
        let Some(claim) = claim_from_wire(request.claim) else {
            return Err(ApiError::new(
                ErrorCode::InvalidToken,
                "notify needs the place a verified token claims",
            )
            .into());
        };
        let notify = notifier
            .register(&room_id, claim, &request.session_hash, &request.email)
            .await?;
        Ok(Response::new(NotifyReply { notify }))
    }

    async fn lookup_visitors(
        &self,
        request: Request<LookupVisitorsRequest>,
    ) -> Reply<LookupVisitorsReply> {
        use qm_proto::engine::lookup_visitors_request::Query;
        let request = request.into_inner();
        let room_id = checked_room_id(request.room_id)?;
        let answer = match request.query {
            Some(Query::Ticket(ticket)) => {
                crate::visitors::by_ticket(self.store.as_ref(), &self.lookup_keys, room_id, ticket)
                    .await?
            }
            Some(Query::SupportRef(code)) => {
                let Some(code) = qm_core::support_ref::normalize(&code) else {
                    return Err(ApiError::new(
                        ErrorCode::InvalidRef,
                        "a reference is six characters of 0-9 and A-Z without I, L, O, U",
                    )
                    .into());
                };
                crate::visitors::by_ref(
                    self.store.as_ref(),
                    self.lookup_keys.clone(),
                    room_id,
                    code,
                )
                .await?
            }
            None => {
                return Err(ApiError::new(
                    ErrorCode::InvalidVisitorQuery,
                    "name the visitor by ticket or by reference",
                )
                .into());
            }
        };
        Ok(Response::new(LookupVisitorsReply {
            answer_json: answer.to_string(),
        }))
    }

    async fn targeting(&self, request: Request<TargetingRequest>) -> Reply<TargetingReply> {
        let request = request.into_inner();
        let room_id = checked_room_id(request.room_id)?;
        let dry_run_url = dry_run_page(&request.dry_run_url)?;
        let Some((generation, targeting)) = self.store.targeting(room_id.clone()).await? else {
            return Err(
                ApiError::new(ErrorCode::RoomNotFound, format!("no room {room_id:?}")).into(),
            );
        };
        let (era, rules) = ((generation, targeting.rev()), targeting.patterns().len());
        let _no_flush_in_flight = match request.counters {
            true => Some(self.targeting_counters.flush_gate.lock().await),
            false => None,
        };
        let counts = if !request.counters {
            None
        } else if let Some(mut shared) = self
            .store
            .shared_targeting(room_id.clone(), era, rules)
            .await?
        {
            // Every engine's flushed counts, and what this one has not flushed yet.
            shared.add(
                &self
                    .targeting_counters
                    .unflushed(&room_id, era.0, era.1, rules),
            );
            Some(shared)
        } else {
            Some(self.targeting_counters.read(&room_id, era.0, era.1, rules))
        };
        Ok(Response::new(targeting_reply(
            room_id,
            generation,
            &targeting,
            counts,
            dry_run_url,
        )))
    }

    async fn history(&self, request: Request<HistoryRequest>) -> Reply<HistoryReply> {
        let request = request.into_inner();
        let room_id = checked_room_id(request.room_id)?;
        // The live point comes from the same room object the listing shows; an unknown room
        // is `room_not_found` from the store.
        let room = self.store.get_room(room_id).await?;
        let samples = self
            .history
            .read(&room, request.since_ms, qm_core::clock::now_ms());
        Ok(Response::new(HistoryReply {
            samples,
            step_ms: crate::history::SAMPLE_EVERY.as_millis() as u64,
        }))
    }

    async fn check_in(&self, request: Request<CheckInRequest>) -> Reply<CheckInReply> {
        let request = request.into_inner();
        let room_id = checked_room_id(request.room_id)?;
        self.check_ins.record(
            &room_id,
            request.generation,
            &request.connector,
            &request.version,
            &request.origin,
            qm_core::clock::now_ms(),
        );
        Ok(Response::new(CheckInReply {}))
    }

    async fn security(&self, request: Request<SecurityRequest>) -> Reply<SecurityReply> {
        let wanted = request.into_inner().room_id;
        let rooms = if wanted.is_empty() {
            self.store.list_rooms().await?
        } else {
            vec![self.store.get_room(checked_room_id(wanted)?).await?]
        };
        let reports: Vec<Value> = rooms
            .iter()
            .filter_map(|room| {
                let room_id = room.get("id").and_then(Value::as_str)?;
                let mode = room
                    .pointer("/protection/mode")
                    .and_then(Value::as_str)
                    .unwrap_or("off");
                Some(self.security.room_report(room_id, mode))
            })
            .collect();
        let report = serde_json::json!({
            "rooms": reports,
            "since": self.started_ms,
            "recentPerRoom": crate::security::RECENT_EXAMPLES,
        });
        Ok(Response::new(SecurityReply {
            report_json: report.to_string(),
        }))
    }

    async fn check_ins(&self, request: Request<RoomRef>) -> Reply<CheckInsReply> {
        let room_id = checked_room_id(request.into_inner().room_id)?;
        let info = self.store.room_info(room_id.clone()).await?;
        if !info.found {
            return Err(
                ApiError::new(ErrorCode::RoomNotFound, format!("no room {room_id:?}")).into(),
            );
        }
        let check_ins = self
            .check_ins
            .read(&room_id, info.generation)
            .into_iter()
            .map(|entry| ConnectorCheckIn {
                connector: entry.connector,
                version: entry.version,
                origin: entry.origin,
                first_seen_ms: entry.first_seen_ms,
                last_seen_ms: entry.last_seen_ms,
                count: entry.count,
            })
            .collect();
        Ok(Response::new(CheckInsReply { room_id, check_ins }))
    }

    async fn create_operator(
        &self,
        request: Request<CreateOperatorRequest>,
    ) -> Reply<qm_proto::Operator> {
        let new = crate::access::new_operator(request.into_inner())?;
        let operator = self.access.create_operator(new).await?;
        Ok(Response::new(operator_to_wire(operator)))
    }

    async fn list_operators(
        &self,
        _request: Request<ListOperatorsRequest>,
    ) -> Reply<ListOperatorsReply> {
        let operators = self.access.list_operators().await?;
        Ok(Response::new(ListOperatorsReply {
            operators: operators.into_iter().map(operator_to_wire).collect(),
        }))
    }

    async fn revoke_operator(
        &self,
        request: Request<RevokeOperatorRequest>,
    ) -> Reply<RevokeOperatorReply> {
        let operator = self
            .access
            .revoke_operator(&request.into_inner().id)
            .await?;
        Ok(Response::new(RevokeOperatorReply {
            operator: Some(operator_to_wire(operator)),
        }))
    }

    async fn create_monitor_token(
        &self,
        request: Request<CreateMonitorTokenRequest>,
    ) -> Reply<qm_proto::MonitorToken> {
        let new = crate::access::new_monitor_token(request.into_inner(), qm_core::clock::now_ms())?;
        let token = self.access.create_monitor_token(new).await?;
        Ok(Response::new(monitor_token_to_wire(token)))
    }

    async fn list_monitor_tokens(
        &self,
        _request: Request<ListMonitorTokensRequest>,
    ) -> Reply<ListMonitorTokensReply> {
        let tokens = self.access.list_monitor_tokens().await?;
        Ok(Response::new(ListMonitorTokensReply {
            tokens: tokens.into_iter().map(monitor_token_to_wire).collect(),
        }))
    }

    async fn revoke_monitor_tokens(
        &self,
        request: Request<RevokeMonitorTokensRequest>,
    ) -> Reply<RevokeMonitorTokensReply> {
        let request = request.into_inner();
        let revoked = self
            .access
            .revoke_monitor_tokens(&request.id, request.all)
            .await?;
        Ok(Response::new(RevokeMonitorTokensReply { revoked }))
    }

    async fn find_credential(
        &self,
        request: Request<FindCredentialRequest>,
    ) -> Reply<FindCredentialReply> {
        let found = self
            .access
            .find_credential(&request.into_inner().verifiers)
            .await?
            .map(|credential| match credential {
                Credential::Operator(operator) => {
                    find_credential_reply::Found::Operator(operator_to_wire(operator))
                }
                Credential::Monitor(token) => {
                    find_credential_reply::Found::Monitor(monitor_token_to_wire(token))
                }
            });
        Ok(Response::new(FindCredentialReply { found }))
    }

    async fn append_audit(&self, request: Request<AuditEntry>) -> Reply<AppendAuditReply> {
        let id = self.access.append_audit(request.into_inner()).await?;
        Ok(Response::new(AppendAuditReply { id }))
    }

    async fn list_audit(&self, request: Request<ListAuditRequest>) -> Reply<ListAuditReply> {
        let query = crate::access::audit_query(request.into_inner())?;
        let page = self.access.list_audit(&query).await?;
        Ok(Response::new(ListAuditReply {
            entries: page.entries,
            next_before_id: page.next_before_id,
        }))
    }

    async fn put_record(
        &self,
        request: Request<qm_proto::PutRecordRequest>,
    ) -> Reply<qm_proto::PutRecordReply> {
        let new = crate::access::records::NewRecord::parse(request.into_inner())?;
        let stored = self.access.put_record(new).await?;
        Ok(Response::new(qm_proto::PutRecordReply { full: !stored }))
    }

    async fn get_record(
        &self,
        request: Request<qm_proto::GetRecordRequest>,
    ) -> Reply<qm_proto::GetRecordReply> {
        let request = request.into_inner();
        let key = crate::access::records::RecordKey::parse(request.record)?;
        let found = self.access.get_record(&key, request.take).await?;
        Ok(Response::new(match found {
            Some(found) => qm_proto::GetRecordReply {
                found: true,
                payload: found.payload,
                left_ms: found.left_ms,
            },
            None => qm_proto::GetRecordReply::default(),
        }))
    }

    async fn auth_failures(
        &self,
        request: Request<qm_proto::AuthFailuresRequest>,
    ) -> Reply<qm_proto::AuthFailuresReply> {
        let query = crate::access::failures::FailureQuery::parse(request.into_inner())?;
        let locked_for_sec = self.access.auth_failures(&query).await?;
        Ok(Response::new(qm_proto::AuthFailuresReply {
            locked_for_sec,
        }))
    }

    async fn delete_record(
        &self,
        request: Request<qm_proto::RecordRef>,
    ) -> Reply<qm_proto::DeleteRecordReply> {
        let key = crate::access::records::RecordKey::parse(Some(request.into_inner()))?;
        let existed = self.access.delete_record(&key).await?;
        Ok(Response::new(qm_proto::DeleteRecordReply { existed }))
    }
}
