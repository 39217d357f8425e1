//! The console's sign-in routes: `POST /api/admin/session {key}` signs a browser in with the
//! `qm_console` cookie, `DELETE /api/admin/session` signs it out, `GET /api/admin/session` says
//! who it is. The sessions themselves live in `crate::session`.

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::header::{CACHE_CONTROL, SET_COOKIE};
use http::{Extensions, HeaderMap, HeaderValue, Uri};
use secrecy::ExposeSecret;
use serde_json::{Value, json};
use subtle::ConstantTimeEq;

use crate::AdminState;
use crate::auth::{
    AuthError, PresentedKind, has_csrf_header, log_refused, peer_of, refuse_query_credential,
};
use crate::session::{COOKIE_NAME, Principal, SESSION_TTL, console_cookies, session_of};
use qm_http::AppError;

/// Whether the browser reached us over https, as the proxy in front reports it: the cookie is
/// then marked Secure (a plain-http loopback console could not send a Secure cookie back).
fn is_https(headers: &HeaderMap) -> bool {
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

/// POST /api/admin/session `{key}`: signs the browser in.
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
    let presented = body.get("key").and_then(Value::as_str).unwrap_or("");
    let expected = state.config.admin_key().expose_secret().as_bytes();
    if presented.is_empty() || !bool::from(presented.as_bytes().ct_eq(expected)) {
        let client = peer_of(&extensions);
        log_refused(PresentedKind::SignInKey, client, &AuthError::WrongKey);
        return Err(AuthError::WrongKey.into());
    }
    let principal = Principal::owner();
    let cookie = state.sessions.open(principal.clone());
    let mut response = Json(json!({
        "ok": true,
        "name": principal.name,
        "role": principal.role,
        "expiresInSec": SESSION_TTL.as_secs(),
    }))
    .into_response();
    if let Some(value) = cookie_header(&cookie, SESSION_TTL.as_secs(), is_https(&headers)) {
        response.headers_mut().insert(SET_COOKIE, value);
    }
    tracing::info!(name = %principal.name, role = principal.role, "console signed in");
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
    for value in console_cookies(&headers) {
        if let Some((session_id, _, _)) = state.sessions.resolve(value) {
            revoked |= state.sessions.revoke(&session_id);
        }
    }
    let mut response = Json(json!({ "ok": true, "revoked": revoked })).into_response();
    if let Some(value) = cookie_header("", 0, is_https(&headers)) {
        response.headers_mut().insert(SET_COOKIE, value);
    }
    if revoked {
        tracing::info!("console signed out");
    }
    Ok(no_store(response))
}

/// Who the console cookie speaks for: lets the console page decide between its sign-in form
/// and its dashboard without trying a real call first.
pub(crate) async fn who(
    State(state): State<AdminState>,
    headers: HeaderMap,
    extensions: Extensions,
) -> Result<Response, AppError> {
    let Some((_, principal, left)) = session_of(&state.sessions, &headers) else {
        // Asking with no cookie is how a console learns it must sign in; only a cookie that
        // does not resolve is a refused credential.
        if !console_cookies(&headers).is_empty() {
            let client = peer_of(&extensions);
            log_refused(PresentedKind::ConsoleSession, client, &AuthError::NoSession);
        }
        return Err(AuthError::NoSession.into());
    };
    Ok(no_store(
        Json(json!({
            "ok": true,
            "name": principal.name,
            "role": principal.role,
            "expiresInSec": left.as_secs(),
        }))
        .into_response(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::SessionStore;

    #[test]
    fn the_cookie_never_contains_the_key_and_has_its_attributes() {
        let store = SessionStore::new([7; 32]);
        let cookie = store.open(Principal::owner());
        assert!(!cookie.contains("admin"));
        let header = cookie_header(&cookie, 43_200, true).expect("header");
        let text = header.to_str().expect("ascii");
        assert!(text.contains("Path=/api/admin; Max-Age=43200; SameSite=Strict; HttpOnly; Secure"));
    }
}
