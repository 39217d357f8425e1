//! Console sessions: the store of who is signed in, and reading the `qm_console` cookie that
//! names a session. The routes that sign a console in and out are `crate::session_routes`; this
//! module knows nothing of HTTP answers or of the credential check, so both of those can depend
//! on it and it on neither.
//!
//! The cookie is a random session id plus an HMAC over it, keyed by HKDF(SECRET, `qm:console`)
//! — a key of its own, so no other token this server signs can ever pass for a session. It never
//! contains the key that opened it. The session itself (who, until when) lives in this admin
//! process's memory: revoking it is removing the entry, so a revoked cookie is refused even if it
//! is replayed, and a restart of the admin process signs every console out.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use http::HeaderMap;
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::keys::KeyKind;
use crate::principal::Principal;

/// The console cookie's name.
pub(crate) const COOKIE_NAME: &str = "qm_console";
/// How long a console stays signed in.
pub(crate) const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// HKDF info of the session-reference key.
const KEY_INFO: &[u8] = b"qm:console";
/// Live sessions one admin process keeps; past it (after expired ones are dropped) a sign-in
/// evicts the session closest to expiry rather than grow without bound.
const MAX_SESSIONS: usize = 10_000;

type HmacSha256 = Hmac<Sha256>;

/// How a session opened by an operator key or monitor token is re-checked with the engine: the
/// key's verifiers (never the key) and which kind it was. A session opened by ADMIN_KEY has none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Recheck {
    pub(crate) kind: KeyKind,
    pub(crate) verifiers: Vec<Vec<u8>>,
}

/// A live session as a request sees it.
#[derive(Debug, Clone)]
pub(crate) struct SessionView {
    pub(crate) id: String,
    pub(crate) principal: Principal,
    pub(crate) left: Duration,
    pub(crate) recheck: Option<Recheck>,
}

#[derive(Debug, Clone)]
struct Session {
    principal: Principal,
    recheck: Option<Recheck>,
    expires_at: Instant,
}

/// The live console sessions of this process.
pub(crate) struct SessionStore {
    /// HMAC key of the cookie's signature (derived from SECRET for this purpose only).
    key: [u8; 32],
    /// Session id → session. A std mutex: it guards map operations and is never held across an
    /// `.await`.
    sessions: Mutex<HashMap<String, Session>>,
}

impl SessionStore {
    pub(crate) fn new(key: [u8; 32]) -> SessionStore {
        SessionStore {
            key,
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// The store keyed from the configuration's SECRET.
    pub(crate) fn from_config(config: &qm_core::config::Config) -> SessionStore {
        let key = config
            .keyring()
            .derived_keys(KEY_INFO)
            .first()
            .copied()
            .unwrap_or_else(rand::random);
        SessionStore::new(key)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        // A panic under this lock leaves a map of whole entries: still sound to use.
        self.sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn signature(&self, session_id: &str) -> Vec<u8> {
        // HMAC takes keys of any length; this cannot fail for a 32-byte key.
        let mut mac = HmacSha256::new_from_slice(&self.key).expect("hmac takes any key length");
        mac.update(session_id.as_bytes());
        mac.finalize().into_bytes().to_vec()
    }

    /// Opens a session for `principal`; answers the cookie value (`<id>.<signature>`).
    pub(crate) fn open(&self, principal: Principal, recheck: Option<Recheck>) -> String {
        let session_id = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>());
        let value = format!(
            "{session_id}.{}",
            URL_SAFE_NO_PAD.encode(self.signature(&session_id))
        );
        let now = Instant::now();
        let mut sessions = self.lock();
        sessions.retain(|_, session| session.expires_at > now);
        if sessions.len() >= MAX_SESSIONS
            && let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, session)| session.expires_at)
                .map(|(id, _)| id.clone())
        {
            sessions.remove(&oldest);
        }
        sessions.insert(
            session_id,
            Session {
                principal,
                recheck,
                expires_at: now + SESSION_TTL,
            },
        );
        value
    }

    /// The session a cookie value names, if its signature verifies and it is still live.
    pub(crate) fn resolve(&self, cookie_value: &str) -> Option<SessionView> {
        let (session_id, signature) = cookie_value.split_once('.')?;
        let presented = URL_SAFE_NO_PAD.decode(signature).ok()?;
        if !bool::from(presented.ct_eq(&self.signature(session_id))) {
            return None;
        }
        let now = Instant::now();
        let sessions = self.lock();
        let session = sessions.get(session_id)?;
        let left = session.expires_at.checked_duration_since(now)?;
        Some(SessionView {
            id: session_id.to_owned(),
            principal: session.principal.clone(),
            left,
            recheck: session.recheck.clone(),
        })
    }

    /// Whether a session id is still live (an SSE ticket minted by a session dies with it).
    #[cfg(test)]
    pub(crate) fn is_live(&self, session_id: &str) -> bool {
        self.live_recheck(session_id).is_some()
    }

    /// A live session's re-check (`Some(None)`: opened by ADMIN_KEY); `None` when the session
    /// is gone or expired.
    pub(crate) fn live_recheck(&self, session_id: &str) -> Option<Option<Recheck>> {
        let now = Instant::now();
        self.lock()
            .get(session_id)
            .filter(|session| session.expires_at > now)
            .map(|session| session.recheck.clone())
    }

    /// Ends a session; answers whether there was one.
    pub(crate) fn revoke(&self, session_id: &str) -> bool {
        self.lock().remove(session_id).is_some()
    }
}

/// The first [`CONSOLE_COOKIES_TRIED`] `qm_console` values the request's Cookie headers carry,
/// read in one linear pass.
pub(crate) fn console_cookies(headers: &HeaderMap) -> Vec<&str> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, value)| value.trim())
        .take(CONSOLE_COOKIES_TRIED)
        .collect()
}

/// How many `qm_console` values one request may have verified. A browser sends one (two while
/// an old path's cookie lingers); each costs an HMAC, so a header stuffed with thousands must not
/// buy thousands of verifications.
const CONSOLE_COOKIES_TRIED: usize = 4;

/// The first live session among the request's console cookies.
pub(crate) fn session_of(sessions: &SessionStore, headers: &HeaderMap) -> Option<SessionView> {
    console_cookies(headers)
        .into_iter()
        .find_map(|value| sessions.resolve(value))
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    #[test]
    fn a_reference_resolves_until_revoked() {
        let store = SessionStore::new([7; 32]);
        let cookie = store.open(Principal::owner(), None);
        let view = store.resolve(&cookie).expect("live session");
        let (session_id, left) = (view.id, view.left);
        assert_eq!(view.principal, Principal::owner());
        assert!(left <= SESSION_TTL && left > SESSION_TTL - Duration::from_secs(5));
        assert!(store.is_live(&session_id));
        assert!(store.revoke(&session_id));
        assert!(
            store.resolve(&cookie).is_none(),
            "a revoked reference is refused"
        );
        assert!(!store.revoke(&session_id));
    }

    #[test]
    fn a_forged_or_foreign_reference_is_refused() {
        let store = SessionStore::new([7; 32]);
        let other = SessionStore::new([8; 32]);
        let cookie = store.open(Principal::owner(), None);
        assert!(other.resolve(&cookie).is_none());
        let (session_id, _) = cookie.split_once('.').expect("id.signature");
        assert!(store.resolve(session_id).is_none());
        assert!(store.resolve(&format!("{session_id}.AAAA")).is_none());
        assert!(store.resolve("").is_none());
        // A well-signed id the store never opened is not a session.
        let unknown = "bm90LWEtc2Vzc2lvbg";
        let signed = format!(
            "{unknown}.{}",
            URL_SAFE_NO_PAD.encode(store.signature(unknown))
        );
        assert!(store.resolve(&signed).is_none());
    }

    #[test]
    fn cookies_are_read_from_every_cookie_header() {
        let mut headers = HeaderMap::new();
        headers.append(
            http::header::COOKIE,
            HeaderValue::from_static("a=1; qm_console=x.y"),
        );
        headers.append(
            http::header::COOKIE,
            HeaderValue::from_static("qm_console=z.w"),
        );
        assert_eq!(console_cookies(&headers), vec!["x.y", "z.w"]);
    }

    #[test]
    fn a_stuffed_header_yields_only_the_first_few_console_cookies() {
        let stuffed: Vec<String> = (0..10_000)
            .map(|index| format!("{COOKIE_NAME}=id{index}.sig"))
            .collect();
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::COOKIE,
            HeaderValue::from_str(&stuffed.join("; ")).unwrap(),
        );
        let values = console_cookies(&headers);
        assert_eq!(values.len(), CONSOLE_COOKIES_TRIED);
        assert_eq!(values[0], "id0.sig");
    }
}
