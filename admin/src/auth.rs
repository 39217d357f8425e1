//! Who is calling. For now one credential: `Authorization: Bearer <ADMIN_KEY>`. A key is never
//! accepted from a URL: query strings land in access logs and Referer headers, so a request that
//! carries one is refused with `credential_in_query` even if it also sends a valid header.

use axum::extract::FromRequestParts;
use http::request::Parts;
use qm_core::{ApiError, ErrorCode};
use secrecy::ExposeSecret;
use subtle::ConstantTimeEq;

use crate::AdminState;
use qm_edge::AppError;

/// Query parameters that look like a credential.
const CREDENTIAL_PARAMS: &[&str] = &[
    "key",
    "token",
    "adminKey",
    "admin_key",
    "apiKey",
    "api_key",
    "access_token",
];

/// Proof that the request carried a valid admin credential.
pub(crate) struct Authenticated;

impl FromRequestParts<AdminState> for Authenticated {
    type Rejection = AppError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AdminState,
    ) -> Result<Self, Self::Rejection> {
        if let Some(query) = parts.uri.query() {
            let carries_credential = query
                .split('&')
                .filter_map(|pair| pair.split('=').next())
                .any(|name| CREDENTIAL_PARAMS.contains(&name));
            if carries_credential {
                return Err(ApiError::new(
                    ErrorCode::CredentialInQuery,
                    "credentials are never accepted in the URL; send Authorization: Bearer <key>",
                )
                .into());
            }
        }
        let presented = parts
            .headers
            .get(http::header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .map(str::trim);
        let Some(presented) = presented else {
            return Err(ApiError::new(
                ErrorCode::Unauthorized,
                "send Authorization: Bearer <ADMIN_KEY>",
            )
            .into());
        };
        let expected = state.config.admin_key().expose_secret().as_bytes();
        if bool::from(presented.as_bytes().ct_eq(expected)) {
            Ok(Authenticated)
        } else {
            Err(ApiError::new(ErrorCode::Unauthorized, "the credential is not valid").into())
        }
    }
}
