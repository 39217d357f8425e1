//! A `Visitors` batch answered call by call by the handlers of the calls' own RPCs, and a
//! failed call carried as the `Status` its own RPC would have answered: its code, message and
//! metadata (`qm-code`, `qm-retry-after`), so the edge reads it back with the same
//! `ApiError::from_status` as any other failure.

use tonic::metadata::{KeyAndValueRef, MetadataKey, MetadataMap, MetadataValue};
use tonic::{Code, Request, Status};

use crate::engine::engine_server::Engine;
use crate::engine::visitor_answer::Answer;
use crate::engine::visitor_call::Call;
use crate::engine::{CallFailure, VisitorAnswer, VisitorBatch, VisitorBatchReply, VisitorCall};

/// Answers every call of `batch` with `engine`'s own Join, Status and Check handlers, in the
/// calls' order. They run together, polled in order: on the durable store a room's writer
/// still takes the joins as one batch, in the order the gateway queued them.
pub async fn answer_visitor_calls<E: Engine>(engine: &E, batch: VisitorBatch) -> VisitorBatchReply {
    let answers = batch
        .calls
        .into_iter()
        .map(|call| answer_visitor_call(engine, call));
    VisitorBatchReply {
        answers: futures::future::join_all(answers).await,
    }
}

async fn answer_visitor_call<E: Engine>(engine: &E, call: VisitorCall) -> VisitorAnswer {
    let answer = match call.call {
        Some(Call::Join(join)) => engine
            .join(Request::new(join))
            .await
            .map(|reply| Answer::Place(reply.into_inner())),
        Some(Call::Status(status)) => engine
            .status(Request::new(status))
            .await
            .map(|reply| Answer::Place(reply.into_inner())),
        Some(Call::Check(check)) => engine
            .check(Request::new(check))
            .await
            .map(|reply| Answer::Check(reply.into_inner())),
        None => Err(Status::invalid_argument("a visitor call names no call")),
    };
    VisitorAnswer {
        answer: Some(
            answer.unwrap_or_else(|status| Answer::Failure(CallFailure::from_status(&status))),
        ),
    }
}

impl CallFailure {
    /// The failure `status` carries.
    pub fn from_status(status: &Status) -> CallFailure {
        let metadata = status
            .metadata()
            .iter()
            .filter_map(|entry| match entry {
                KeyAndValueRef::Ascii(key, value) => {
                    Some((key.as_str().to_owned(), value.to_str().ok()?.to_owned()))
                }
                KeyAndValueRef::Binary(..) => None,
            })
            .collect();
        CallFailure {
            code: status.code() as i32,
            message: status.message().to_owned(),
            metadata,
        }
    }

    /// The `Status` the call's own RPC would have answered.
    pub fn into_status(self) -> Status {
        let mut metadata = MetadataMap::new();
        for (key, value) in self.metadata {
            if let (Ok(key), Ok(value)) = (
                MetadataKey::from_bytes(key.as_bytes()),
                MetadataValue::try_from(value.as_str()),
            ) {
                metadata.insert(key, value);
            }
        }
        Status::with_metadata(Code::from(self.code), self.message, metadata)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_comes_back_as_the_status_it_was() {
        let mut metadata = MetadataMap::new();
        metadata.insert("qm-code", MetadataValue::from_static("rate_limited"));
        metadata.insert("qm-retry-after", MetadataValue::from_static("7"));
        let status = Status::with_metadata(Code::ResourceExhausted, "slow down", metadata);
        let back = CallFailure::from_status(&status).into_status();
        assert_eq!(back.code(), Code::ResourceExhausted);
        assert_eq!(back.message(), "slow down");
        assert_eq!(
            back.metadata().get("qm-code").and_then(|v| v.to_str().ok()),
            Some("rate_limited")
        );
        assert_eq!(
            back.metadata()
                .get("qm-retry-after")
                .and_then(|v| v.to_str().ok()),
            Some("7")
        );
    }
}
