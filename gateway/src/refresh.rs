//! Token refresh (QM-391, QM-469). A wait may outlast the visitor token and the queue cookies,
//! so once a presented token is TOKEN_REFRESH_AFTER_MS old (half the shorter of
//! TOKEN_MAX_AGE_SEC and QUEUE_COOKIE_MAX_AGE_SEC) `/api/status` and the event stream re-sign
//! the same place with a new iat and re-set both queue cookies. Only for a place the engine
//! still holds as waiting in the token's generation, and only when the request's ownership
//! cookie proves it (`bound`): a token alone never earns a longer life. A token already past
//! TOKEN_MAX_AGE_SEC never reaches here: it fails verification.

use http::HeaderMap;
use qm_core::ids::is_valid_session_id;
use qm_core::token::{VisitorClaims, VisitorPlace};
use qm_proto::{PlaceStatus, place_status};

use crate::GatewayState;
use crate::cookies::{CookiePolicy, RequestCookies, place_cookies, session_cookie_name};
use crate::request::is_https;

/// Whether a token with `claims` is due to be re-signed at `now_ms`.
pub(crate) fn is_due(claims: &VisitorClaims, now_ms: i64, refresh_after_ms: u64) -> bool {
    now_ms.saturating_sub(claims.iat) >= refresh_after_ms as i64
}

/// The instant (epoch ms) an open stream holding `claims` ends with `event: refresh`: the due
/// instant plus the place's jitter.
pub(crate) fn stream_refresh_at_ms(claims: &VisitorClaims, refresh_after_ms: u64) -> i64 {
    let delay_ms = refresh_after_ms + claims.refresh_jitter_ms(refresh_after_ms);
    claims.iat.saturating_add(delay_ms as i64)
}

/// Whether the engine's answer for `claims` would grant a refresh: the room exists in the
/// token's generation (the engine answered a place, not a lapse), the place still waits, and the
/// request's ownership cookie is the one the place is bound to.
pub(crate) fn engine_grants_refresh(claims: &VisitorClaims, answer: &PlaceStatus) -> bool {
    answer.generation == claims.generation && !answer.passed && answer.bound
}

/// The drawn ticket a pre-queue handle became, when the engine's answer for a handle names one:
/// the token is then re-signed for the ticket under the same rules as a refresh (QM-391).
pub(crate) fn drawn_place(claims: &VisitorClaims, answer: &PlaceStatus) -> Option<VisitorPlace> {
    match (claims.place, answer.place) {
        (VisitorPlace::Handle(_), Some(place_status::Place::Ticket(ticket))) => {
            Some(VisitorPlace::Ticket(ticket))
        }
        _ => None,
    }
}

/// A granted refresh: the re-signed token and the cookies that carry it.
pub(crate) struct Renewal {
    pub(crate) claims: VisitorClaims,
    pub(crate) token: String,
    pub(crate) set_cookies: Vec<String>,
}

impl Renewal {
    /// Re-signs `claims` at `now_ms` with the keyring in force (so TOKEN_SIGN_V2 and kid follow)
    /// and builds `qm_<room>` and `qms_<room>`, the latter with the session id presented. The
    /// caller has checked that the refresh is due and granted; `None` only if the request holds
    /// no well-formed session id, which a granted refresh cannot lack.
    pub(crate) fn issue(
        state: &GatewayState,
        claims: &VisitorClaims,
        request_cookies: &RequestCookies,
        request_headers: &HeaderMap,
        now_ms: i64,
    ) -> Option<Renewal> {
        let room_id = claims.room_id.as_str();
        let session_id = request_cookies
            .get(&session_cookie_name(room_id))
            .filter(|session_id| is_valid_session_id(session_id))?;
        let claims = VisitorClaims {
            iat: now_ms,
            ..claims.clone()
        };
        let token = state.keyring.sign_visitor(&claims);
        let policy = CookiePolicy {
            max_age_sec: state.config.queue_cookie_max_age_sec,
            secure: is_https(request_headers),
        };
        let set_cookies = place_cookies(
            &policy,
            request_cookies,
            room_id,
            &token,
            session_id,
            state.config.room_cookie_cap,
        );
        tracing::debug!(room_id, "visitor token refreshed");
        Some(Renewal {
            claims,
            token,
            set_cookies,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qm_core::token::VisitorPlace;
    use qm_proto::place_status;

    fn claims(iat: i64) -> VisitorClaims {
        VisitorClaims {
            room_id: "launch".into(),
            place: VisitorPlace::Ticket(5),
            generation: 2,
            iat,
        }
    }

    #[test]
    fn a_token_is_due_from_half_its_life_on() {
        assert!(!is_due(&claims(1_000), 30_999, 30_000));
        assert!(is_due(&claims(1_000), 31_000, 30_000));
        assert!(is_due(&claims(1_000), 90_000, 30_000));
    }

    #[test]
    fn a_stream_ends_at_the_due_instant_plus_the_place_jitter() {
        let place = claims(1_700_000_000_000);
        let jitter = place.refresh_jitter_ms(30_000);
        assert!(jitter <= 3_000);
        assert_eq!(
            stream_refresh_at_ms(&place, 30_000),
            1_700_000_030_000 + jitter as i64
        );
    }

    #[test]
    fn only_a_bound_waiting_place_of_the_same_generation_is_granted() {
        let waiting = PlaceStatus {
            generation: 2,
            place: Some(place_status::Place::Ticket(5)),
            bound: true,
            ..Default::default()
        };
        assert!(engine_grants_refresh(&claims(0), &waiting));
        let unbound = PlaceStatus {
            bound: false,
            ..waiting.clone()
        };
        let passed = PlaceStatus {
            passed: true,
            ..waiting.clone()
        };
        let other_generation = PlaceStatus {
            generation: 3,
            ..waiting.clone()
        };
        for answer in [unbound, passed, other_generation] {
            assert!(!engine_grants_refresh(&claims(0), &answer), "{answer:?}");
        }
    }
}
