//! Which place a request presents. A visitor token counts only when it verifies (signature, age,
//! the 60 s future rule) and names the room in question; anything else is no claim. The
//! ownership cookie `qms_<room>` travels to the engine only as its one-way hash.

use qm_core::ids::{is_valid_session_id, session_hash};
use qm_core::token::{Keyring, VisitorClaims, VisitorPlace};
use qm_core::{ApiError, ErrorCode};
use qm_proto::{Claim, claim};

use crate::cookies::{RequestCookies, queue_cookie_name, session_cookie_name};
use crate::request::QueryParams;

/// A verified token and what it claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PresentedPlace {
    pub(crate) token: String,
    pub(crate) claims: VisitorClaims,
}

impl PresentedPlace {
    /// The claim as the engine takes it.
    pub(crate) fn engine_claim(&self) -> Claim {
        engine_claim(&self.claims)
    }
}

pub(crate) fn engine_claim(claims: &VisitorClaims) -> Claim {
    let place = match claims.place {
        VisitorPlace::Ticket(ticket) => claim::Place::Ticket(ticket),
        VisitorPlace::Handle(handle) => claim::Place::Handle(handle),
    };
    Claim {
        generation: claims.generation,
        place: Some(place),
    }
}

/// What verifying a token needs: the keyring, the clock and TOKEN_MAX_AGE_SEC.
pub(crate) struct TokenCheck<'a> {
    pub(crate) keyring: &'a Keyring,
    pub(crate) now_ms: i64,
    pub(crate) max_age_sec: u64,
}

impl TokenCheck<'_> {
    /// The place `token` claims, if it verifies and (when `room_id` is given) names that room.
    pub(crate) fn verify(&self, token: &str, room_id: Option<&str>) -> Option<PresentedPlace> {
        let claims = self
            .keyring
            .verify_visitor(token, self.now_ms, self.max_age_sec)
            .ok()?;
        if room_id.is_some_and(|room_id| room_id != claims.room_id) {
            return None;
        }
        Some(PresentedPlace {
            token: token.to_owned(),
            claims,
        })
    }

    /// The place a join presents: the body token, else the room's queue cookie.
    pub(crate) fn for_join(
        &self,
        room_id: &str,
        body_token: Option<&str>,
        cookies: &RequestCookies,
    ) -> Option<PresentedPlace> {
        let cookie_token = cookies.get(&queue_cookie_name(room_id));
        [body_token, cookie_token]
            .into_iter()
            .flatten()
            .find_map(|token| self.verify(token, Some(room_id)))
    }

    /// The place a status read or a stream presents: `?token=`, else the `qm_<roomId>` cookie
    /// when `roomId` is given, else the one `qm_*` cookie whose token verifies.
    pub(crate) fn for_status(
        &self,
        query_token: Option<&str>,
        room_id: Option<&str>,
        cookies: &RequestCookies,
    ) -> Result<PresentedPlace, ApiError> {
        if let Some(place) = query_token.and_then(|token| self.verify(token, room_id)) {
            return Ok(place);
        }
        if let Some(room_id) = room_id {
            return cookies
                .get(&queue_cookie_name(room_id))
                .and_then(|token| self.verify(token, Some(room_id)))
                .ok_or_else(invalid_token);
        }
        let mut verified = cookies
            .iter()
            .filter(|(name, _)| name.starts_with("qm_"))
            .filter_map(|(name, token)| {
                // A token counts only under its own room's cookie name.
                self.verify(token, None)
                    .filter(|place| name == queue_cookie_name(&place.claims.room_id))
            });
        match (verified.next(), verified.next()) {
            (Some(place), None) => Ok(place),
            (Some(_), Some(_)) => Err(ApiError::new(
                ErrorCode::InvalidToken,
                "this browser holds places in several rooms; name one with ?roomId= or send ?token=",
            )),
            _ => Err(invalid_token()),
        }
    }

    /// [`TokenCheck::for_status`] with the request's `?token=` and `?roomId=` (empty ones are
    /// none), as `/api/status` and the event stream take them.
    pub(crate) fn for_status_query(
        &self,
        query: &QueryParams,
        cookies: &RequestCookies,
    ) -> Result<PresentedPlace, ApiError> {
        self.for_status(query.non_empty("token"), query.non_empty("roomId"), cookies)
    }
}

fn invalid_token() -> ApiError {
    ApiError::new(
        ErrorCode::InvalidToken,
        "no valid visitor token: send ?token= or join the room first",
    )
}

/// The hash of the request's ownership cookie for `room_id`, empty when it sent none (or a value
/// that cannot be one).
pub(crate) fn presented_session_hash(cookies: &RequestCookies, room_id: &str) -> String {
    cookies
        .get(&session_cookie_name(room_id))
        .filter(|session_id| is_valid_session_id(session_id))
        .map(session_hash)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderMap;
    use http::header::COOKIE;
    use secrecy::SecretString;

    const NOW: i64 = 1_700_000_000_000;

    fn keyring() -> Keyring {
        Keyring::new(
            SecretString::from("gateway-test-secret-0123".to_owned()),
            None,
            false,
        )
    }

    fn token(keyring: &Keyring, room_id: &str, ticket: u64) -> String {
        keyring.sign_visitor(&VisitorClaims {
            room_id: room_id.to_owned(),
            place: VisitorPlace::Ticket(ticket),
            generation: 1,
            iat: NOW,
        })
    }

    fn cookies(header: &str) -> RequestCookies {
        let mut headers = HeaderMap::new();
        if !header.is_empty() {
            headers.insert(COOKIE, header.parse().unwrap());
        }
        RequestCookies::from_headers(&headers)
    }

    /// Verification at `now_ms` with a one-hour TOKEN_MAX_AGE_SEC.
    fn check_at(keyring: &Keyring, now_ms: i64) -> TokenCheck<'_> {
        TokenCheck {
            keyring,
            now_ms,
            max_age_sec: 3600,
        }
    }

    fn ticket_of(place: &PresentedPlace) -> VisitorPlace {
        place.claims.place
    }

    #[test]
    fn join_takes_the_body_token_then_the_cookie_and_ignores_other_rooms() {
        let keyring = keyring();
        let check = check_at(&keyring, NOW);
        let body = token(&keyring, "a", 1);
        let cookie = token(&keyring, "a", 2);
        let jar = cookies(&format!("qm_a={cookie}"));
        assert_eq!(
            check
                .for_join("a", Some(&body), &jar)
                .map(|p| ticket_of(&p)),
            Some(VisitorPlace::Ticket(1))
        );
        // A body token that fails verification falls back to the cookie.
        assert_eq!(
            check
                .for_join("a", Some("garbage"), &jar)
                .map(|p| ticket_of(&p)),
            Some(VisitorPlace::Ticket(2))
        );
        // A token of another room is no claim here.
        let other_room = token(&keyring, "b", 3);
        assert_eq!(check.for_join("a", Some(&other_room), &cookies("")), None);
        assert_eq!(check.for_join("a", None, &cookies("")), None);
    }

    #[test]
    fn status_prefers_the_query_then_the_named_cookie_then_the_single_cookie() {
        let keyring = keyring();
        let check = check_at(&keyring, NOW);
        let a = token(&keyring, "a", 1);
        let b = token(&keyring, "b", 2);
        let both = cookies(&format!("qm_a={a}; qm_b={b}"));

        let by_query = check
            .for_status(Some(&b), None, &both)
            .expect("query token");
        assert_eq!(by_query.claims.room_id, "b");
        let by_room = check
            .for_status(None, Some("a"), &both)
            .expect("named cookie");
        assert_eq!(by_room.token, a);
        let ambiguous = check.for_status(None, None, &both).unwrap_err();
        assert_eq!(ambiguous.code, ErrorCode::InvalidToken);
        let single = check
            .for_status(None, None, &cookies(&format!("qm_a={a}; qm_dk_a=key")))
            .expect("single");
        assert_eq!(single.claims.room_id, "a");
        // A token filed under another room's cookie name does not count.
        assert!(
            check
                .for_status(None, None, &cookies(&format!("qm_b={a}")))
                .is_err()
        );
        assert_eq!(
            check.for_status(None, None, &cookies("")).unwrap_err().code,
            ErrorCode::InvalidToken
        );
        assert!(
            check
                .for_status(Some("forged"), None, &cookies(""))
                .is_err()
        );
        // ?roomId= and a token of another room: the cookie of the named room decides.
        assert!(check.for_status(Some(&b), Some("a"), &cookies("")).is_err());
    }

    #[test]
    fn expired_and_future_tokens_are_no_claim() {
        let keyring = keyring();
        let valid = token(&keyring, "a", 1);
        let late = check_at(&keyring, NOW + 3_601_000);
        assert!(late.verify(&valid, Some("a")).is_none());
        let early = check_at(&keyring, NOW - 61_000);
        assert!(early.verify(&valid, Some("a")).is_none());
    }

    #[test]
    fn session_hash_only_for_well_formed_ids() {
        let id = "abcdefghijklmnopqrstuvwxyz012345";
        let jar = cookies(&format!("qms_a={id}; qms_b=short"));
        assert_eq!(presented_session_hash(&jar, "a"), session_hash(id));
        assert_eq!(presented_session_hash(&jar, "b"), "");
        assert_eq!(presented_session_hash(&jar, "c"), "");
    }

    #[test]
    fn claims_map_to_engine_claims() {
        let claims = VisitorClaims {
            room_id: "a".into(),
            place: VisitorPlace::Handle(4),
            generation: 9,
            iat: NOW,
        };
        assert_eq!(
            engine_claim(&claims),
            Claim {
                generation: 9,
                place: Some(claim::Place::Handle(4))
            }
        );
    }
}
