//! Console sessions: the store of who is signed in, and reading the `qm_console` cookie that
//! names a session. The routes that sign a console in and out are `crate::session_routes`; this
//! module knows nothing of HTTP answers or of the credential check, so both of those can depend
//! on it and it on neither.
//!
//! The cookie is a random session id plus an HMAC over it, keyed by HKDF(SECRET, `qm:console`)
//! — a key of its own, so no other token this server signs can ever pass for a session. It never
//! contains the key that opened it. A forged cookie is refused here, before anything is asked.
//! The session itself (who, until when) is a record the engine keeps for every admin process
//! (`PutRecord`, kind `session`, on Postgres with the durable store), named by a digest of the
//! session id — never the id itself — so any admin instance behind a load balancer knows it,
//! and revoking it is deleting the record: a revoked cookie is refused everywhere, even replayed.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use http::HeaderMap;
use qm_core::ApiError;
use qm_proto::{EngineClient, GetRecordRequest, PutRecordRequest, RecordRef};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::keys::KeyKind;
use crate::principal::Principal;

/// The console cookie's name.
pub(crate) const COOKIE_NAME: &str = "qm_console";
/// How long a console stays signed in.
pub(crate) const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// HKDF info of the session-reference key.
const KEY_INFO: &[u8] = b"qm:console";
/// Live sessions the engine keeps for the admin processes; past it a sign-in is refused until
/// some expire or sign out.
const MAX_SESSIONS: u32 = 10_000;
/// The engine's name for a session record.
const RECORD_KIND: &str = "session";

type HmacSha256 = Hmac<Sha256>;

/// How a session opened by an operator key or monitor token is re-checked with the engine: the
/// key's verifiers (never the key) and which kind it was. A session opened by ADMIN_KEY has none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Recheck {
    pub(crate) kind: KeyKind,
    pub(crate) verifiers: Vec<Vec<u8>>,
}

/// A live session as a request sees it.
#[derive(Debug, Clone)]
pub(crate) struct SessionView {
    /// The session's record name (a digest of its id), by which it is re-checked and revoked.
    pub(crate) id: String,
    pub(crate) principal: Principal,
    pub(crate) left: Duration,
    pub(crate) recheck: Option<Recheck>,
}

/// What the engine keeps of a session.
#[derive(Debug, Serialize, Deserialize)]
struct Stored {
    principal: Principal,
    recheck: Option<Recheck>,
}

/// Signs and verifies the cookie's session id.
pub(crate) struct CookieSigner {
    /// HMAC key of the cookie's signature (derived from SECRET for this purpose only).
    key: [u8; 32],
}

impl CookieSigner {
    pub(crate) fn new(key: [u8; 32]) -> CookieSigner {
        CookieSigner { key }
    }

    fn signature(&self, session_id: &str) -> Vec<u8> {
        // HMAC takes keys of any length; this cannot fail for a 32-byte key.
        let mut mac = HmacSha256::new_from_slice(&self.key).expect("hmac takes any key length");
        mac.update(session_id.as_bytes());
        mac.finalize().into_bytes().to_vec()
    }

    /// The cookie value of a session id: `<id>.<signature>`.
    pub(crate) fn cookie(&self, session_id: &str) -> String {
        format!(
            "{session_id}.{}",
            URL_SAFE_NO_PAD.encode(self.signature(session_id))
        )
    }

    /// The session id a cookie value carries, if this key signed it.
    pub(crate) fn verified<'a>(&self, cookie_value: &'a str) -> Option<&'a str> {
        let (session_id, signature) = cookie_value.split_once('.')?;
        let presented = URL_SAFE_NO_PAD.decode(signature).ok()?;
        bool::from(presented.ct_eq(&self.signature(session_id))).then_some(session_id)
    }
}

/// The name of a session's record: a digest of its id, so the store never holds a bearer secret.
fn record_name(session_id: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(session_id.as_bytes()))
}

fn record_ref(name: &str) -> RecordRef {
    RecordRef {
        kind: RECORD_KIND.to_owned(),
        id: URL_SAFE_NO_PAD.decode(name).unwrap_or_default(),
    }
}

/// The console sessions every admin process shares, kept by the engine.
pub(crate) struct SessionStore {
    signer: CookieSigner,
    engine: EngineClient,
}

impl SessionStore {
    /// The store keyed from the configuration's SECRET.
    pub(crate) fn from_config(
        config: &qm_core::config::Config,
        engine: EngineClient,
    ) -> SessionStore {
        let key = config
            .keyring()
            .derived_keys(KEY_INFO)
            .first()
            .copied()
            .unwrap_or_else(rand::random);
        SessionStore {
            signer: CookieSigner::new(key),
            engine,
        }
    }

    /// Opens a session for `principal`; answers the cookie value, or `None` when the engine
    /// already keeps as many live sessions as it may.
    pub(crate) async fn open(
        &self,
        principal: Principal,
        recheck: Option<Recheck>,
    ) -> Result<Option<String>, ApiError> {
        let session_id = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>());
        let payload = serde_json::to_vec(&Stored { principal, recheck })
            .map_err(|error| ApiError::internal(format!("a session record: {error}")))?;
        let reply = self
            .engine
            .clone()
            .put_record(PutRecordRequest {
                record: Some(record_ref(&record_name(&session_id))),
                payload,
                ttl_ms: SESSION_TTL.as_millis() as u64,
                max_of_kind: MAX_SESSIONS,
            })
            .await?
            .into_inner();
        Ok((!reply.full).then(|| self.signer.cookie(&session_id)))
    }

    /// The session a cookie value names, if its signature verifies and it is still live.
    pub(crate) async fn resolve(
        &self,
        cookie_value: &str,
    ) -> Result<Option<SessionView>, ApiError> {
        let Some(session_id) = self.signer.verified(cookie_value) else {
            return Ok(None);
        };
        let name = record_name(session_id);
        let Some((stored, left)) = self.read(&name).await? else {
            return Ok(None);
        };
        Ok(Some(SessionView {
            id: name,
            principal: stored.principal,
            left,
            recheck: stored.recheck,
        }))
    }

    /// A live session's re-check (`Some(None)`: opened by ADMIN_KEY); `None` when the session
    /// is gone or expired.
    pub(crate) async fn live_recheck(
        &self,
        name: &str,
    ) -> Result<Option<Option<Recheck>>, ApiError> {
        Ok(self.read(name).await?.map(|(stored, _)| stored.recheck))
    }

    async fn read(&self, name: &str) -> Result<Option<(Stored, Duration)>, ApiError> {
        let reply = self
            .engine
            .clone()
            .get_record(GetRecordRequest {
                record: Some(record_ref(name)),
                take: false,
            })
            .await?
            .into_inner();
        if !reply.found {
            return Ok(None);
        }
        // A record this version cannot read is no session: the console signs in again.
        Ok(serde_json::from_slice::<Stored>(&reply.payload)
            .ok()
            .map(|stored| (stored, Duration::from_millis(reply.left_ms))))
    }

    /// Ends a session (by its record name); answers whether there was one.
    pub(crate) async fn revoke(&self, name: &str) -> Result<bool, ApiError> {
        let reply = self
            .engine
            .clone()
            .delete_record(record_ref(name))
            .await?
            .into_inner();
        Ok(reply.existed)
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
pub(crate) async fn session_of(
    sessions: &SessionStore,
    headers: &HeaderMap,
) -> Result<Option<SessionView>, ApiError> {
    for value in console_cookies(headers) {
        if let Some(session) = sessions.resolve(value).await? {
            return Ok(Some(session));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    #[test]
    fn a_signed_id_verifies_and_a_forged_or_foreign_one_does_not() {
        let signer = CookieSigner::new([7; 32]);
        let other = CookieSigner::new([8; 32]);
        let cookie = signer.cookie("c2Vzc2lvbi1pZA");
        assert_eq!(signer.verified(&cookie), Some("c2Vzc2lvbi1pZA"));
        assert_eq!(other.verified(&cookie), None);
        assert_eq!(signer.verified("c2Vzc2lvbi1pZA"), None);
        assert_eq!(signer.verified("c2Vzc2lvbi1pZA.AAAA"), None);
        assert_eq!(signer.verified(""), None);
    }

    #[test]
    fn a_record_is_named_by_a_digest_never_by_the_id() {
        let name = record_name("c2Vzc2lvbi1pZA");
        assert!(!name.contains("c2Vzc2lvbi1pZA"));
        assert_eq!(record_ref(&name).id.len(), 32, "a SHA-256 digest");
        assert_eq!(record_ref(&name).kind, "session");
        assert_ne!(record_name("another"), name);
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
