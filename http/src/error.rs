//! The error every HTTP handler returns, built from `qm_core::ApiError` so every code maps to its
//! status in one place.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::response::{IntoResponse, Response};
use http::HeaderValue;
use http::header::RETRY_AFTER;
use qm_core::{ApiError, ErrorCode};

/// Error type of every handler.
#[derive(Debug)]
pub struct AppError(pub ApiError);

impl AppError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> AppError {
        AppError(ApiError::new(code, message))
    }
}

impl From<ApiError> for AppError {
    fn from(error: ApiError) -> Self {
        AppError(error)
    }
}

impl From<tonic::Status> for AppError {
    fn from(status: tonic::Status) -> Self {
        AppError(ApiError::from_status(&status))
    }
}

impl From<JsonRejection> for AppError {
    fn from(rejection: JsonRejection) -> Self {
        let code = match rejection {
            JsonRejection::MissingJsonContentType(_) => ErrorCode::UnsupportedMediaType,
            JsonRejection::BytesRejection(_) => ErrorCode::PayloadTooLarge,
            _ => ErrorCode::InvalidJson,
        };
        AppError::new(code, rejection.body_text())
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let error = self.0;
        if error.code.http_status().is_server_error() {
            tracing::warn!(code = error.code.as_str(), message = %error.message, "request failed");
        }
        let mut response = (error.code.http_status(), Json(error.body())).into_response();
        // The error's own hint (carried from the engine in `qm-retry-after`), else its code's.
        if let Some(seconds) = error.retry_after() {
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// Any path the process does not serve.
pub async fn not_found() -> AppError {
    AppError::new(ErrorCode::NotFound, "no such route")
}

/// A known path with the wrong verb; axum adds the `Allow` header.
pub async fn method_not_allowed() -> AppError {
    AppError::new(
        ErrorCode::MethodNotAllowed,
        "this method is not allowed on this path; see the Allow header",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retry_after_of(error: AppError) -> Option<String> {
        error
            .into_response()
            .headers()
            .get(RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    }

    #[test]
    fn an_engine_refusal_answers_the_engines_retry_after() {
        // As the engine sends it and the gateway reads it back.
        let from_engine = |error: ApiError| AppError::from(error.to_status());
        let hinted =
            ApiError::new(ErrorCode::StorageUnavailable, "journal down").with_retry_after(7);
        assert_eq!(retry_after_of(from_engine(hinted)).as_deref(), Some("7"));
        let storage = ApiError::new(ErrorCode::StorageUnavailable, "journal down");
        assert_eq!(retry_after_of(from_engine(storage)).as_deref(), Some("2"));
        let full = ApiError::new(ErrorCode::PrequeueFull, "full");
        let response = from_engine(full).into_response();
        assert_eq!(response.status(), http::StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers().get(RETRY_AFTER).unwrap(), "30");
        let refusal = ApiError::new(ErrorCode::InvalidRoomId, "bad");
        assert_eq!(retry_after_of(from_engine(refusal)), None);
        let unreachable = AppError::from(tonic::Status::unavailable("connection refused"));
        assert_eq!(retry_after_of(unreachable).as_deref(), Some("2"));
    }
}
