//! Who is calling. Two credentials today: `Authorization: Bearer <ADMIN_KEY>`, and the console
//! session cookie `qm_console` (see [`crate::session`]). A request with an Authorization header
//! is judged on that alone; a request that relies on the cookie must send `X-QM-CSRF` on every
//! non-GET, because a browser attaches the cookie to a forged cross-site request but no page
//! elsewhere can add a custom header without a CORS preflight we never grant.
//!
//! A key is never accepted from a URL: query strings land in access logs and Referer headers, so
//! a request that carries one is refused with `credential_in_query` even if it also sends a valid
//! header.
//!
//! A credential that was presented and refused (a wrong key, an unknown console session, a
//! spent event ticket) is logged at warn with the client address and which kind it was — never
//! the credential — so repeated guessing shows in the log. A request that presents nothing is
//! not logged: the console asks who it is before anyone has signed in.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequestParts};
use http::request::Parts;
use http::{Extensions, HeaderMap, Method, Uri};
use qm_core::{ApiError, ErrorCode};
use secrecy::ExposeSecret;
use subtle::ConstantTimeEq;

use crate::AdminState;
use crate::session::{Principal, console_cookies};
use qm_http::AppError;

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

/// The header a cookie-authenticated write must carry.
pub(crate) const CSRF_HEADER: &str = "x-qm-csrf";

/// Why a request is not let in. Mapped to the contract's codes in one place, [`From`] below.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AuthError {
    #[error("credentials are never accepted in the URL; send Authorization: Bearer <key>")]
    CredentialInQuery,
    #[error("send Authorization: Bearer <ADMIN_KEY>, or sign the console in")]
    Missing,
    #[error("the credential is not valid")]
    WrongKey,
    #[error(
        "the console session is not valid (expired, signed out or from another server); sign in again"
    )]
    NoSession,
    #[error("a console request that changes something must send the X-QM-CSRF: 1 header")]
    CsrfRequired,
    #[error("the event-stream ticket is unknown, spent or expired; mint a new one")]
    BadTicket,
    #[error("too many event-stream tickets are outstanding; try again shortly")]
    TooManyTickets,
}

impl From<AuthError> for AppError {
    fn from(error: AuthError) -> AppError {
        let code = match error {
            AuthError::CredentialInQuery => ErrorCode::CredentialInQuery,
            AuthError::Missing
            | AuthError::WrongKey
            | AuthError::NoSession
            | AuthError::BadTicket => ErrorCode::Unauthorized,
            AuthError::CsrfRequired => ErrorCode::CsrfRequired,
            AuthError::TooManyTickets => ErrorCode::RateLimited,
        };
        let api = ApiError::new(code, error.to_string());
        match error {
            AuthError::TooManyTickets => AppError(api.with_retry_after(30)),
            _ => AppError(api),
        }
    }
}

/// Which kind of credential a refused request presented, as the log names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PresentedKind {
    /// `Authorization: Bearer ...` on an API call.
    BearerKey,
    /// The key typed into the console's sign-in form (`POST /session {key}`).
    SignInKey,
    /// A `qm_console` cookie.
    ConsoleSession,
    /// An event-stream ticket (`/events?ticket=`).
    EventTicket,
}

impl PresentedKind {
    fn as_str(self) -> &'static str {
        match self {
            PresentedKind::BearerKey => "bearer_key",
            PresentedKind::SignInKey => "sign_in_key",
            PresentedKind::ConsoleSession => "console_session",
            PresentedKind::EventTicket => "event_ticket",
        }
    }
}

/// The socket peer of a request, when the server recorded it (an in-process router without
/// connect info has none). Behind a proxy this is the proxy's address.
pub(crate) fn peer_of(extensions: &Extensions) -> Option<IpAddr> {
    extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(peer)| peer.ip().to_canonical())
}

/// Logs a refused credential: where it came from, what kind it was and why it was refused.
/// The credential itself is never passed here, so it cannot reach the log.
pub(crate) fn log_refused(kind: PresentedKind, client: Option<IpAddr>, error: &AuthError) {
    let client = client.map_or_else(|| "unknown".to_owned(), |ip| ip.to_string());
    tracing::warn!(
        client = %client,
        credential = kind.as_str(),
        reason = %error,
        "admin credential refused"
    );
}

/// Which credential let a request in: an SSE ticket is scoped to the one that minted it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Credential {
    AdminKey,
    /// A console session, by id.
    Session(String),
}

/// Proof that the request carried a valid admin credential, and whose.
#[derive(Debug, Clone)]
pub(crate) struct Authenticated {
    #[allow(dead_code)] // Read by role checks when operators arrive; logged meanwhile.
    pub(crate) principal: Principal,
    pub(crate) credential: Credential,
}

/// Refuses a request whose query string names a credential.
pub(crate) fn refuse_query_credential(uri: &Uri) -> Result<(), AuthError> {
    let Some(query) = uri.query() else {
        return Ok(());
    };
    let carries_credential = query
        .split('&')
        .filter_map(|pair| pair.split('=').next())
        .any(|name| CREDENTIAL_PARAMS.contains(&name));
    if carries_credential {
        Err(AuthError::CredentialInQuery)
    } else {
        Ok(())
    }
}

/// Whether the request sends `X-QM-CSRF: 1`.
pub(crate) fn has_csrf_header(headers: &HeaderMap) -> bool {
    headers
        .get(CSRF_HEADER)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.trim() == "1")
}

/// The whole decision, shared by the extractor and the event stream (which also takes a ticket).
/// `client` is only for the log line of a refused credential.
pub(crate) fn authenticate(
    state: &AdminState,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    client: Option<IpAddr>,
) -> Result<Authenticated, AuthError> {
    refuse_query_credential(uri)?;
    if let Some(authorization) = headers.get(http::header::AUTHORIZATION) {
        // Judged on the header alone: a wrong key is not rescued by a cookie beside it.
        let presented = authorization
            .to_str()
            .ok()
            .and_then(|value| value.strip_prefix("Bearer "))
            .map(str::trim);
        let expected = state.config.admin_key().expose_secret().as_bytes();
        return match presented {
            Some(presented) if bool::from(presented.as_bytes().ct_eq(expected)) => {
                Ok(Authenticated {
                    principal: Principal::owner(),
                    credential: Credential::AdminKey,
                })
            }
            _ => {
                log_refused(PresentedKind::BearerKey, client, &AuthError::WrongKey);
                Err(AuthError::WrongKey)
            }
        };
    }
    let cookies = console_cookies(headers);
    if cookies.is_empty() {
        return Err(AuthError::Missing);
    }
    let Some((session_id, principal, _)) = cookies
        .into_iter()
        .find_map(|value| state.sessions.resolve(value))
    else {
        log_refused(PresentedKind::ConsoleSession, client, &AuthError::NoSession);
        return Err(AuthError::NoSession);
    };
    let safe = *method == Method::GET || *method == Method::HEAD;
    if !safe && !has_csrf_header(headers) {
        return Err(AuthError::CsrfRequired);
    }
    Ok(Authenticated {
        principal,
        credential: Credential::Session(session_id),
    })
}

impl FromRequestParts<AdminState> for Authenticated {
    type Rejection = AppError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AdminState,
    ) -> Result<Self, Self::Rejection> {
        Ok(authenticate(
            state,
            &parts.method,
            &parts.uri,
            &parts.headers,
            peer_of(&parts.extensions),
        )?)
    }
}
