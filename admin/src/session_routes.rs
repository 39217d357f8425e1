//! The console's sign-in routes: `POST /api/admin/session {key}` signs a browser in with the
//! `qm_console` cookie, `DELETE /api/admin/session` signs it out, `GET /api/admin/session` says
//! who it is. The sessions themselves live in `crate::session`.

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::header::{CACHE_CONTROL, SET_COOKIE};
use http::{Extensions, HeaderMap, HeaderValue, Uri};
use serde_json::{Value, json};

use crate::AdminState;
use crate::audit::AuditNote;
use crate::auth::{
    AuthError, Credential, PresentedKind, RefusedCredential, has_csrf_header, judge_key,
    log_refused, peer_of, refuse_query_credential, still_live,
};
use crate::session::{COOKIE_NAME, SESSION_TTL, console_cookies, session_of};
use qm_http::AppError;

/// Whether the browser reached us over https, as the proxy in front reports it: the cookie is
/// then marked Secure (a plain-http loopback console could not send a Secure cookie back).
pub(crate) fn is_https(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(',').next())
        .is_some_and(|scheme| scheme.trim().eq_ignore_ascii_case("https"))
}

fn cookie_header(value: &str, max_age_sec: u64, secure: bool) -> Option<HeaderValue> {
    let mut cookie = format!(
        "{COOKIE_NAME}={value}; Path=/api/admin; Max-Age={max_age_sec}; SameSite=Strict; HttpOnly"
    );
    if secure {
        cookie.push_str("; Secure");
    }
    HeaderValue::from_str(&cookie).ok()
}

type JsonBody = Result<Json<Value>, axum::extract::rejection::JsonRejection>;

fn no_store(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// A refusal of a credential the route judged itself: the gate counts it against the lockout
/// and records it in the audit trail.
fn refused(kind: PresentedKind, error: AuthError) -> Response {
    let mut response = AppError::from(error).into_response();
    response.extensions_mut().insert(RefusedCredential(kind));
    response
}

/// POST /api/admin/session `{key}`: signs the browser in with ADMIN_KEY, an operator key or a
/// monitor token; the session carries that principal.
pub(crate) async fn sign_in(
    State(state): State<AdminState>,
    uri: Uri,
    headers: HeaderMap,
    extensions: Extensions,
    body: JsonBody,
) -> Result<Response, AppError> {
    refuse_query_credential(&uri)?;
    // The sign-in itself is a cross-site-forgeable POST: a page elsewhere must not be able to
    // sign the browser in to a session of its choosing.
    if !has_csrf_header(&headers) {
        return Err(AuthError::CsrfRequired.into());
    }
    let Json(body) = body?;
    let presented = body.get("key").and_then(Value::as_str).unwrap_or("").trim();
    let (principal, credential) = match judge_key(&state, presented).await {
        Ok(judged) => judged,
        Err(error) if error.counts() => {
            log_refused(PresentedKind::SignInKey, peer_of(&extensions), &error);
            return Ok(refused(PresentedKind::SignInKey, error));
        }
        Err(error) => return Err(error.into()),
    };
    let recheck = match credential {
        Credential::Key(recheck) => Some(recheck),
        Credential::AdminKey | Credential::Session(_) => None,
    };
    let Some(cookie) = state.sessions.open(principal.clone(), recheck).await? else {
        return Err(AuthError::TooManySessions.into());
    };
    let mut response = Json(json!({
        "ok": true,
        "name": principal.name,
        "role": principal.role.as_str(),
        "expiresInSec": SESSION_TTL.as_secs(),
    }))
    .into_response();
    if let Some(value) = cookie_header(&cookie, SESSION_TTL.as_secs(), is_https(&headers)) {
        response.headers_mut().insert(SET_COOKIE, value);
    }
    tracing::info!(name = %principal.name, role = principal.role.as_str(), "console signed in");
    response
        .extensions_mut()
        .insert(AuditNote::actor(principal));
    Ok(no_store(response))
}

/// DELETE /api/admin/session: signs the browser out.
pub(crate) async fn sign_out(
    State(state): State<AdminState>,
    headers: HeaderMap,
) -> Result<Response, AppError> {
    if !has_csrf_header(&headers) {
        return Err(AuthError::CsrfRequired.into());
    }
    // Every session the browser presents ends, even past the first; signing out is idempotent.
    let mut revoked = false;
    let mut who = None;
    for value in console_cookies(&headers) {
        if let Some(session) = state.sessions.resolve(value).await? {
            revoked |= state.sessions.revoke(&session.id).await?;
            who.get_or_insert(session.principal);
        }
    }
    let mut response = Json(json!({ "ok": true, "revoked": revoked })).into_response();
    if let Some(value) = cookie_header("", 0, is_https(&headers)) {
        response.headers_mut().insert(SET_COOKIE, value);
    }
    if revoked {
        tracing::info!("console signed out");
    }
    if let Some(principal) = who {
        response
            .extensions_mut()
            .insert(AuditNote::actor(principal));
    }
    Ok(no_store(response))
}

/// Who the console cookie speaks for: lets the console page decide between its sign-in form
/// and its dashboard without trying a real call first. A session opened by an operator key or
/// monitor token is re-checked with the engine here too.
pub(crate) async fn who(
    State(state): State<AdminState>,
    headers: HeaderMap,
    extensions: Extensions,
) -> Result<Response, AppError> {
    let Some(session) = session_of(&state.sessions, &headers).await? else {
        // Asking with no cookie is how a console learns it must sign in; only a cookie that
        // does not resolve is a refused credential.
        if !console_cookies(&headers).is_empty() {
            let client = peer_of(&extensions);
            log_refused(PresentedKind::ConsoleSession, client, &AuthError::NoSession);
            return Ok(refused(PresentedKind::ConsoleSession, AuthError::NoSession));
        }
        return Err(AuthError::NoSession.into());
    };
    let credential = Credential::Session(session.id.clone());
    if !still_live(&state, &credential).await? {
        log_refused(
            PresentedKind::ConsoleSession,
            peer_of(&extensions),
            &AuthError::NoSession,
        );
        return Ok(refused(PresentedKind::ConsoleSession, AuthError::NoSession));
    }
    let principal = session.principal;
    Ok(no_store(
        Json(json!({
            "ok": true,
            "name": principal.name,
            "role": principal.role.as_str(),
            "expiresInSec": session.left.as_secs(),
        }))
        .into_response(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::CookieSigner;

    #[test]
    fn the_cookie_never_contains_the_key_and_has_its_attributes() {
        let cookie = CookieSigner::new([7; 32]).cookie("c2Vzc2lvbi1pZA");
        assert!(!cookie.contains("admin"));
        let header = cookie_header(&cookie, 43_200, true).expect("header");
        let text = header.to_str().expect("ascii");
        assert!(text.contains("Path=/api/admin; Max-Age=43200; SameSite=Strict; HttpOnly; Secure"));
    }
}
