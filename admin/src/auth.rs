//! Who is calling. Four credentials: `Authorization: Bearer <ADMIN_KEY>` (the owner), a named
//! operator key `Bearer qmo_…`, a monitor token `Bearer qmm_…` (see [`crate::keys`]), and the
//! console session cookie `qm_console` (see [`crate::session`]), which carries whichever of the
//! three signed it in. A request with an Authorization header is judged on that alone; a request
//! that relies on the cookie must send `X-QM-CSRF` on every non-GET, because a browser attaches
//! the cookie to a forged cross-site request but no page elsewhere can add a custom header
//! without a CORS preflight we never grant.
//!
//! An operator key or monitor token is checked in two steps: its signature here (a bad one is a
//! wrong credential, the engine is not asked), then the engine's FindCredential with its
//! verifiers (revoked or unknown: not found, a wrong credential). This runs on every request, and
//! a console session opened by such a key asks again on every request too, so a revocation on any
//! admin instance ends the key and its sessions at their next request.
//!
//! A key is never accepted from a URL: query strings land in access logs and Referer headers, so
//! a request that carries one is refused with `credential_in_query` even if it also sends a valid
//! header.
//!
//! A credential that was presented and refused (a wrong key, an unknown console session, a
//! spent event ticket) is logged at warn with the client address and which kind it was — never
//! the credential — so repeated guessing shows in the log, and it counts against the address's
//! lockout (`crate::lockout`). A request that presents nothing is neither: the console asks who
//! it is before anyone has signed in.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequestParts};
use http::request::Parts;
use http::{Extensions, HeaderMap, Method, Uri};
use qm_core::{ApiError, ErrorCode};
use qm_proto::FindCredentialRequest;
use qm_proto::find_credential_reply::Found;
use secrecy::ExposeSecret;
use subtle::ConstantTimeEq;

use crate::AdminState;
use crate::keys::{self, KeyKind};
use crate::principal::{Principal, PrincipalKind, Role};
use crate::session::{Recheck, console_cookies, session_of};
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
    "monitor",
];

/// The header a cookie-authenticated write must carry.
pub(crate) const CSRF_HEADER: &str = "x-qm-csrf";

/// Why a request is not let in. Mapped to the contract's codes in one place, [`From`] below.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AuthError {
    #[error("credentials are never accepted in the URL; send Authorization: Bearer <key>")]
    CredentialInQuery,
    #[error(
        "send Authorization: Bearer <key> (ADMIN_KEY, an operator key or a monitor token), or sign the console in"
    )]
    Missing,
    #[error("the credential is not valid")]
    WrongKey,
    #[error(
        "the console session is not valid (expired, signed out, revoked or from another server); sign in again"
    )]
    NoSession,
    #[error("a console request that changes something must send the X-QM-CSRF: 1 header")]
    CsrfRequired,
    #[error("the event-stream ticket is unknown, spent or expired; mint a new one")]
    BadTicket,
    #[error("too many event-stream tickets are outstanding; try again shortly")]
    TooManyTickets,
    #[error("too many console sessions are signed in; sign one out or try again later")]
    TooManySessions,
    /// The engine could not say whether a key is live: not the caller's fault, not counted.
    #[error("{}", .0.message)]
    Engine(ApiError),
}

impl AuthError {
    /// Whether this refusal is a wrong credential that counts against the lockout.
    pub(crate) fn counts(&self) -> bool {
        matches!(
            self,
            AuthError::WrongKey | AuthError::NoSession | AuthError::BadTicket
        )
    }
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
            AuthError::TooManyTickets | AuthError::TooManySessions => ErrorCode::RateLimited,
            AuthError::Engine(api) => return AppError(api),
        };
        let api = ApiError::new(code, error.to_string());
        match error {
            AuthError::TooManyTickets | AuthError::TooManySessions => {
                AppError(api.with_retry_after(30))
            }
            _ => AppError(api),
        }
    }
}

/// Which kind of credential a refused request presented, as the log and the audit trail name it.
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
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            PresentedKind::BearerKey => "bearer_key",
            PresentedKind::SignInKey => "sign_in_key",
            PresentedKind::ConsoleSession => "console_session",
            PresentedKind::EventTicket => "event_ticket",
        }
    }
}

/// Put on a response by a route that judged a credential itself and refused it (the sign-in
/// form, who-am-I with a dead cookie): the gate counts it against the lockout and records it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RefusedCredential(pub(crate) PresentedKind);

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

/// Which credential let a request in: an SSE ticket is scoped to the one that minted it, and
/// a stream re-checks it every tick.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum Credential {
    AdminKey,
    /// A console session, by its record name (a digest of the cookie's id, never the id).
    Session(String),
    /// An operator key or monitor token, by its verifiers (never the key).
    Key(Recheck),
}

/// Proof that the request carried a valid admin credential, and whose. Put in the request's
/// extensions by the gate (`crate::gate`); a route the gate did not let in has none, and the
/// extractor then refuses (fail closed).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Authenticated {
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

/// Judges a presented key (Bearer value or sign-in form): ADMIN_KEY, an operator key or a
/// monitor token. Answers the principal and how to re-check it later.
pub(crate) async fn judge_key(
    state: &AdminState,
    presented: &str,
) -> Result<(Principal, Credential), AuthError> {
    if presented.is_empty() {
        return Err(AuthError::WrongKey);
    }
    if let Some(kind) = KeyKind::of(presented) {
        let keyring = &state.config.keyring();
        if !keys::verify(keyring, kind, presented) {
            return Err(AuthError::WrongKey);
        }
        let recheck = Recheck {
            kind,
            verifiers: keys::verifiers(keyring, kind, presented),
        };
        return match find(state, &recheck).await.map_err(AuthError::Engine)? {
            Some(principal) => Ok((principal, Credential::Key(recheck))),
            None => Err(AuthError::WrongKey),
        };
    }
    let expected = state.config.admin_key().expose_secret().as_bytes();
    if bool::from(presented.as_bytes().ct_eq(expected)) {
        Ok((Principal::owner(), Credential::AdminKey))
    } else {
        Err(AuthError::WrongKey)
    }
}

/// The live operator or monitor token a key's verifiers belong to, asked of the engine.
pub(crate) async fn find(
    state: &AdminState,
    recheck: &Recheck,
) -> Result<Option<Principal>, ApiError> {
    let request = FindCredentialRequest {
        verifiers: recheck.verifiers.clone(),
    };
    let reply = state
        .engine
        .clone()
        .find_credential(request)
        .await?
        .into_inner();
    let principal = match reply.found {
        Some(Found::Operator(operator)) if recheck.kind == KeyKind::Operator => {
            Role::parse_operator_role(&operator.role).map(|role| Principal {
                kind: PrincipalKind::Operator,
                id: operator.id,
                name: operator.name,
                role,
            })
        }
        Some(Found::Monitor(token)) if recheck.kind == KeyKind::Monitor => {
            let expired =
                token.expires_at_ms != 0 && token.expires_at_ms <= qm_core::clock::now_ms();
            (!expired).then(|| Principal {
                kind: PrincipalKind::Monitor,
                name: if token.label.is_empty() {
                    "monitor".to_owned()
                } else {
                    token.label
                },
                id: token.id,
                role: Role::Monitor,
            })
        }
        _ => None,
    };
    Ok(principal)
}

/// Whether a credential that let a request in earlier still would (an event stream asks every
/// tick; a ticket asks when it is redeemed).
pub(crate) async fn still_live(
    state: &AdminState,
    credential: &Credential,
) -> Result<bool, ApiError> {
    match credential {
        Credential::AdminKey => Ok(true),
        Credential::Session(session) => {
            let Some(recheck) = state.sessions.live_recheck(session).await? else {
                return Ok(false);
            };
            match recheck {
                None => Ok(true),
                Some(recheck) => {
                    let live = find(state, &recheck).await?.is_some();
                    if !live {
                        state.sessions.revoke(session).await?;
                    }
                    Ok(live)
                }
            }
        }
        Credential::Key(recheck) => Ok(find(state, recheck).await?.is_some()),
    }
}

/// The whole decision for Bearer and cookie, used by the gate. `client` is only for the log
/// line of a refused credential.
pub(crate) async fn authenticate(
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
            .map(str::trim)
            .unwrap_or("");
        return match judge_key(state, presented).await {
            Ok((principal, credential)) => Ok(Authenticated {
                principal,
                credential,
            }),
            Err(error) => {
                if error.counts() {
                    log_refused(PresentedKind::BearerKey, client, &error);
                }
                Err(error)
            }
        };
    }
    if console_cookies(headers).is_empty() {
        return Err(AuthError::Missing);
    }
    let Some(session) = session_of(&state.sessions, headers)
        .await
        .map_err(AuthError::Engine)?
    else {
        log_refused(PresentedKind::ConsoleSession, client, &AuthError::NoSession);
        return Err(AuthError::NoSession);
    };
    if let Some(recheck) = &session.recheck
        && find(state, recheck)
            .await
            .map_err(AuthError::Engine)?
            .is_none()
    {
        // The key that signed this console in was revoked: the session ends with it.
        state
            .sessions
            .revoke(&session.id)
            .await
            .map_err(AuthError::Engine)?;
        log_refused(PresentedKind::ConsoleSession, client, &AuthError::NoSession);
        return Err(AuthError::NoSession);
    }
    let safe = *method == Method::GET || *method == Method::HEAD;
    if !safe && !has_csrf_header(headers) {
        return Err(AuthError::CsrfRequired);
    }
    Ok(Authenticated {
        principal: session.principal,
        credential: Credential::Session(session.id),
    })
}

impl FromRequestParts<AdminState> for Authenticated {
    type Rejection = AppError;

    async fn from_request_parts(
        parts: &mut Parts,
        _state: &AdminState,
    ) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Authenticated>()
            .cloned()
            .ok_or_else(|| {
                AppError(ApiError::internal(
                    "this route has no row in the grants table, so nobody is let in",
                ))
            })
    }
}
