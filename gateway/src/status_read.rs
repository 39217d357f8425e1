//! Reading a visitor's place from the engine, shared by `/api/status`, the event stream and the
//! waiting page: the request for a presented place (its claim and the hash of the room's
//! ownership cookie) and the engine's answer as one outcome. A room that is gone is the place's
//! lapse (`room_reset`), not an error: the place went with it.

use qm_core::{ApiError, ErrorCode};
use qm_proto::{StatusRequest, place_reply};

use crate::cookies::RequestCookies;
use crate::places::{PresentedPlace, presented_session_hash};
use crate::visitor_calls::VisitorCalls;

/// The engine request that reads `place` for the browser that sent `cookies`.
pub(crate) fn status_request(place: &PresentedPlace, cookies: &RequestCookies) -> StatusRequest {
    let room_id = &place.claims.room_id;
    // Fields other callers add to this request later stay at their defaults here.
    #[allow(
        clippy::needless_update,
        reason = "keeps this literal valid when the proto grows"
    )]
    StatusRequest {
        room_id: room_id.clone(),
        claim: Some(place.engine_claim()),
        session_hash: presented_session_hash(cookies, room_id),
        ..Default::default()
    }
}

/// The engine's answer to `request`: the place, or its lapse (also when the room is gone).
/// `Err` is an engine that could not answer, or an answer without an outcome.
pub(crate) async fn read_status(
    engine: &VisitorCalls,
    request: StatusRequest,
) -> Result<place_reply::Outcome, ApiError> {
    let outcome = match engine.status(request).await {
        Ok(reply) => reply.outcome,
        Err(status) => {
            let error = ApiError::from_status(&status);
            if error.code != ErrorCode::RoomNotFound {
                return Err(error);
            }
            Some(room_reset())
        }
    };
    outcome.ok_or_else(|| ApiError::internal("the engine answered a status without an outcome"))
}

fn room_reset() -> place_reply::Outcome {
    place_reply::Outcome::Lapsed(qm_proto::Lapsed {
        reason: "room_reset".into(),
    })
}
