//! The visitor's calls to the engine — Join, Status and Check — sent in batches: whatever
//! queued while this gateway's previous batches were in flight goes as one `Visitors` RPC. At
//! rest a call goes alone, at once; under load one round trip (its framing, its headers, its
//! pass through both tonic stacks) is shared by every call that waited for it. The engine
//! answers each call with the handler of its own RPC, so nothing is decided here and every
//! caller sees the reply, or the `Status`, it would have seen from that RPC. An engine older
//! than the `Visitors` RPC (a rolling deploy that updates the gateways first) answers it
//! `Unimplemented`: until the engine has answered one batch, that batch's calls are sent again
//! as their own RPCs; an engine replaced by an older one later fails the calls of the batch that
//! met it. Either way every call after goes as its own RPC.

use qm_proto::visitor_answer::Answer;
use qm_proto::visitor_call::Call;
use qm_proto::{
    CheckReply, CheckRequest, EngineClient, JoinRequest, PlaceReply, StatusRequest, VisitorBatch,
    VisitorCall,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tonic::{Code, Status};

/// Batches in flight at once: while they are, new calls queue for the next.
const BATCHES_IN_FLIGHT: usize = 4;
/// Most calls in one batch (one RPC's body stays small; more wait for the next).
const MOST_CALLS: usize = 256;
/// Calls waiting for a batch before a caller waits to queue (backpressure, not a drop).
const QUEUE_DEPTH: usize = 8192;

type Answered = oneshot::Sender<Result<Answer, Status>>;

/// Whether the engine answers `Visitors`: not known until it answered one batch.
const UNKNOWN: u8 = 0;
const BATCHES: u8 = 1;
const ONE_BY_ONE: u8 = 2;

/// Where the visitor routes send their engine calls; cheap to clone.
#[derive(Clone)]
pub(crate) struct VisitorCalls {
    queue: mpsc::Sender<(Call, Answered)>,
}

impl VisitorCalls {
    /// Starts the batching task on the current runtime; it ends when every handle is dropped.
    pub(crate) fn start(engine: EngineClient) -> VisitorCalls {
        let (queue, calls) = mpsc::channel(QUEUE_DEPTH);
        tokio::spawn(send_batches(engine, calls));
        VisitorCalls { queue }
    }

    pub(crate) async fn join(&self, request: JoinRequest) -> Result<PlaceReply, Status> {
        match self.call(Call::Join(request)).await? {
            Answer::Place(reply) => Ok(reply),
            other => Err(unexpected(&other)),
        }
    }

    pub(crate) async fn status(&self, request: StatusRequest) -> Result<PlaceReply, Status> {
        match self.call(Call::Status(request)).await? {
            Answer::Place(reply) => Ok(reply),
            other => Err(unexpected(&other)),
        }
    }

    pub(crate) async fn check(&self, request: CheckRequest) -> Result<CheckReply, Status> {
        match self.call(Call::Check(request)).await? {
            Answer::Check(reply) => Ok(reply),
            other => Err(unexpected(&other)),
        }
    }

    async fn call(&self, call: Call) -> Result<Answer, Status> {
        let (answered, answer) = oneshot::channel();
        self.queue
            .send((call, answered))
            .await
            .map_err(|_| Status::unavailable("the gateway is stopping"))?;
        match answer.await {
            Ok(Ok(Answer::Failure(failure))) => Err(failure.into_status()),
            Ok(answer) => answer,
            Err(_) => Err(Status::unavailable("the engine call was dropped")),
        }
    }
}

fn unexpected(answer: &Answer) -> Status {
    Status::internal(format!(
        "the engine answered a visitor call with {answer:?}"
    ))
}

/// Takes whatever queued (at least one call, at most [`MOST_CALLS`]) once a batch may go, and
/// sends it in a task of its own.
async fn send_batches(engine: EngineClient, mut calls: mpsc::Receiver<(Call, Answered)>) {
    let in_flight = Arc::new(Semaphore::new(BATCHES_IN_FLIGHT));
    let engine_batches = Arc::new(AtomicU8::new(UNKNOWN));
    loop {
        let Ok(permit) = in_flight.clone().acquire_owned().await else {
            return;
        };
        let Some(first) = calls.recv().await else {
            return;
        };
        let mut batch = vec![first];
        while batch.len() < MOST_CALLS {
            match calls.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        let engine = engine.clone();
        let engine_batches = engine_batches.clone();
        tokio::spawn(async move {
            let (calls, answered): (Vec<Call>, Vec<Answered>) = batch.into_iter().unzip();
            let known = engine_batches.load(Ordering::Relaxed);
            let answers = if known == ONE_BY_ONE {
                one_by_one(engine, calls).await
            } else {
                // Until the engine has answered one batch, the calls are kept to send alone
                // should it not know the RPC.
                let kept = (known == UNKNOWN).then(|| calls.clone());
                match (send_batch(engine.clone(), calls).await, kept) {
                    (Ok(answers), kept) => {
                        if kept.is_some() {
                            engine_batches.store(BATCHES, Ordering::Relaxed);
                        }
                        answers
                    }
                    (Err(status), Some(calls)) if status.code() == Code::Unimplemented => {
                        engine_batches.store(ONE_BY_ONE, Ordering::Relaxed);
                        one_by_one(engine, calls).await
                    }
                    (Err(status), _) => {
                        if status.code() == Code::Unimplemented {
                            // The engine was replaced by an older one: these calls are lost
                            // to it, every later one goes alone.
                            engine_batches.store(ONE_BY_ONE, Ordering::Relaxed);
                        }
                        answered.iter().map(|_| Err(status.clone())).collect()
                    }
                }
            };
            for (answered, answer) in answered.into_iter().zip(answers) {
                let _ = answered.send(answer);
            }
            drop(permit);
        });
    }
}

/// One `Visitors` RPC: an answer per call, in the calls' order.
async fn send_batch(
    mut engine: EngineClient,
    calls: Vec<Call>,
) -> Result<Vec<Result<Answer, Status>>, Status> {
    let count = calls.len();
    let request = VisitorBatch {
        calls: calls
            .into_iter()
            .map(|call| VisitorCall { call: Some(call) })
            .collect(),
    };
    let mut answers = engine
        .visitors(request)
        .await?
        .into_inner()
        .answers
        .into_iter();
    Ok((0..count)
        .map(|_| {
            answers
                .next()
                .and_then(|answer| answer.answer)
                .ok_or_else(|| Status::internal("the engine left a visitor call unanswered"))
        })
        .collect())
}

/// Each call as its own RPC, all at once: for an engine without the `Visitors` RPC.
async fn one_by_one(engine: EngineClient, calls: Vec<Call>) -> Vec<Result<Answer, Status>> {
    let answers = calls.into_iter().map(|call| {
        let mut engine = engine.clone();
        async move {
            match call {
                Call::Join(join) => engine
                    .join(join)
                    .await
                    .map(|reply| Answer::Place(reply.into_inner())),
                Call::Status(status) => engine
                    .status(status)
                    .await
                    .map(|reply| Answer::Place(reply.into_inner())),
                Call::Check(check) => engine
                    .check(check)
                    .await
                    .map(|reply| Answer::Check(reply.into_inner())),
            }
        }
    });
    futures::future::join_all(answers).await
}
