//! How the gateway answers an error: the spec's `{error, code}` envelope with the code's HTTP
//! status and `Retry-After` where the code calls for one, built from `qm_core::ApiError` so every
//! code maps in one place.

use axum::Json;
use axum::response::{IntoResponse, Response};
use http::HeaderValue;
use http::header::RETRY_AFTER;
use qm_core::{ApiError, ErrorCode};

/// Error type of every gateway handler.
#[derive(Debug)]
pub struct AppError(pub ApiError);

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

impl AppError {
    pub(crate) fn new(code: ErrorCode, message: impl Into<String>) -> AppError {
        AppError(ApiError::new(code, message))
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let error = self.0;
        if error.code.http_status().is_server_error() {
            tracing::warn!(code = error.code.as_str(), message = %error.message, "visitor request failed");
        }
        let mut response = (error.code.http_status(), Json(error.body())).into_response();
        if let Some(seconds) = error.retry_after_sec {
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// Any path this process does not serve.
pub(crate) async fn not_found() -> AppError {
    AppError::new(ErrorCode::NotFound, "no such route")
}

/// A known path with the wrong verb; axum adds the `Allow` header.
pub(crate) async fn method_not_allowed() -> AppError {
    AppError::new(
        ErrorCode::MethodNotAllowed,
        "this method is not allowed on this path; see the Allow header",
    )
}
