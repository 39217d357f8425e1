//! What a room route takes from its request before its one engine call: [`RoomTarget`] (the
//! caller is let in, the room id in the path is well formed) and [`ObjectBody`] (the body is a
//! JSON object). As extractors they run in the order the refusals are answered — credential,
//! then room id, then body — and every room route shares that order because it shares them.

use axum::Json;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::response::{IntoResponse, Response};
use http::request::Parts;
use qm_core::{ApiError, ErrorCode};
use qm_proto::EngineClient;
use serde_json::Value;

use crate::AdminState;
use crate::auth::Authenticated;
use qm_http::AppError;

/// An authenticated request on the room its path names (`/rooms/{id}/...`), with the engine
/// handle its one call goes through.
pub(crate) struct RoomTarget {
    /// The room id the path names, well formed.
    pub(crate) id: String,
    /// The engine, for the route's one call.
    pub(crate) engine: EngineClient,
}

impl FromRequestParts<AdminState> for RoomTarget {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AdminState,
    ) -> Result<Self, Self::Rejection> {
        Authenticated::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let Path(id) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        if !qm_core::ids::is_valid_room_id(&id) {
            let refusal = ApiError::new(
                ErrorCode::InvalidRoomId,
                "room ids are 1-64 characters of A-Z a-z 0-9 _ -",
            );
            return Err(AppError(refusal).into_response());
        }
        Ok(RoomTarget {
            id,
            engine: state.engine.clone(),
        })
    }
}

/// A JSON body that is an object. Anything else is refused in the `{error, code}` envelope:
/// `unsupported_media_type` without the JSON content type, `payload_too_large`, and
/// `invalid_json` for unreadable JSON or JSON that is not an object.
pub(crate) struct ObjectBody(pub(crate) Value);

impl<S: Send + Sync> FromRequest<S> for ObjectBody {
    type Rejection = AppError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let Json(value) = Json::<Value>::from_request(request, state).await?;
        if value.is_object() {
            Ok(ObjectBody(value))
        } else {
            Err(AppError::new(
                ErrorCode::InvalidJson,
                "the body must be a JSON object",
            ))
        }
    }
}
