//! The queue host's cookies: reading the request's Cookie headers, writing the per-room cookies
//! `qm_<room>` (the token) and `qms_<room>` (the HttpOnly ownership session), and the cookie cap
//! (QM-504): at most ROOM_COOKIE_CAP rooms' cookies per browser, the oldest expired first.

use std::collections::HashMap;

use http::header::{COOKIE, SET_COOKIE};
use http::{HeaderMap, HeaderValue};
use qm_core::ids::is_valid_room_id;
use qm_core::token::VisitorClaims;

/// Name of the cookie carrying a room's visitor token.
pub(crate) fn queue_cookie_name(room_id: &str) -> String {
    format!("qm_{room_id}")
}

/// Name of the HttpOnly cookie carrying a room's ownership session id.
pub(crate) fn session_cookie_name(room_id: &str) -> String {
    format!("qms_{room_id}")
}

/// The waiting page's remembered language (`?lang=`), Path=/, a year.
pub(crate) const LANGUAGE_COOKIE: &str = "qm_lang";
/// How long the language choice is remembered.
pub(crate) const LANGUAGE_COOKIE_MAX_AGE_SEC: u64 = 31_536_000;

/// Name of the door-session key cookie of an inline host.
pub(crate) fn door_cookie_name(room_id: &str) -> String {
    format!("qm_dk_{room_id}")
}

/// The cookies a request sent, in the order sent. A name sent twice keeps its first value, the
/// one a browser orders first (the most specific path). Reading is linear in the header's
/// length: every name is looked up in an index, never by scanning the pairs (10,000 cookies in
/// one header must cost what their bytes cost, not their square).
#[derive(Debug, Clone, Default)]
pub(crate) struct RequestCookies {
    pairs: Vec<(String, String)>,
    /// Position in `pairs` of each name's first value.
    index: HashMap<String, usize>,
}

impl RequestCookies {
    pub(crate) fn from_headers(headers: &HeaderMap) -> RequestCookies {
        let mut cookies = RequestCookies::default();
        for header in headers.get_all(COOKIE) {
            let Ok(text) = header.to_str() else { continue };
            for item in text.split(';') {
                let Some((name, value)) = item.split_once('=') else {
                    continue;
                };
                let name = name.trim();
                let value = value.trim();
                let value = value
                    .strip_prefix('"')
                    .and_then(|inner| inner.strip_suffix('"'))
                    .unwrap_or(value);
                if name.is_empty() || cookies.index.contains_key(name) {
                    continue;
                }
                cookies.index.insert(name.to_owned(), cookies.pairs.len());
                cookies.pairs.push((name.to_owned(), value.to_owned()));
            }
        }
        cookies
    }

    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        let position = *self.index.get(name)?;
        self.pairs.get(position).map(|(_, value)| value.as_str())
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
    }
}

/// Attributes shared by every cookie set on one response.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CookiePolicy {
    pub(crate) max_age_sec: u64,
    /// The browser came over https (X-Forwarded-Proto): the cookies say Secure.
    pub(crate) secure: bool,
}

impl CookiePolicy {
    /// `name=value; Path=/; Max-Age=..; SameSite=Lax[; HttpOnly][; Secure]`.
    pub(crate) fn set(&self, name: &str, value: &str, http_only: bool) -> String {
        let mut cookie = format!(
            "{name}={value}; Path=/; Max-Age={}; SameSite=Lax",
            self.max_age_sec
        );
        if http_only {
            cookie.push_str("; HttpOnly");
        }
        if self.secure {
            cookie.push_str("; Secure");
        }
        cookie
    }

    /// A Set-Cookie that removes `name` on Path=/.
    pub(crate) fn expire(&self, name: &str) -> String {
        let mut cookie = format!("{name}=; Path=/; Max-Age=0; SameSite=Lax");
        if self.secure {
            cookie.push_str("; Secure");
        }
        cookie
    }
}

/// Most rooms one response expires: with the two cookies it sets, a response carries at most
/// 2 + 3 × 16 = 50 Set-Cookie lines, whatever the request sent.
pub(crate) const EVICTIONS_PER_RESPONSE: usize = 16;

/// The rooms whose cookies must be expired so that setting `joining_room`'s cookies leaves at
/// most `cap` rooms' cookies in the browser: the oldest by the iat of their `qm_` token, rooms
/// without a readable token first (they are the least useful to keep). At most
/// [`EVICTIONS_PER_RESPONSE`] rooms per response: a real browser holds at most `cap` rooms, so it
/// is one over, and a request stuffed with room-named cookies must not buy a response of
/// thousands of Set-Cookie lines. Whatever is left over goes on the next join.
pub(crate) fn rooms_to_evict(
    cookies: &RequestCookies,
    joining_room: &str,
    cap: usize,
) -> Vec<String> {
    let mut rooms: HashMap<&str, Option<i64>> = HashMap::new();
    for (name, value) in cookies.iter() {
        if let Some(room) = name.strip_prefix("qms_") {
            rooms.entry(room).or_insert(None);
        } else if let Some(rest) = name.strip_prefix("qm_dk_") {
            // `qm_dk_X` is room X's door key, unless a room named `dk_X` owns it as its token
            // cookie (its ownership cookie `qms_dk_X` is the tell).
            if cookies.get(&format!("qms_dk_{rest}")).is_some() {
                record_token(&mut rooms, &name[3..], value);
            } else {
                rooms.entry(rest).or_insert(None);
            }
        } else if let Some(room) = name.strip_prefix("qm_") {
            // `qm_lang` is the waiting page's language, unless a room named `lang` owns it.
            if name == LANGUAGE_COOKIE && cookies.get("qms_lang").is_none() {
                continue;
            }
            record_token(&mut rooms, room, value);
        }
    }
    rooms.retain(|room, _| *room != joining_room && is_valid_room_id(room));
    let total_after_join = rooms.len() + 1;
    if total_after_join <= cap {
        return Vec::new();
    }
    let mut by_age: Vec<(Option<i64>, &str)> =
        rooms.into_iter().map(|(room, iat)| (iat, room)).collect();
    // None sorts before every Some: rooms without a token go first; ties break by id.
    by_age.sort_unstable();
    by_age
        .into_iter()
        .take((total_after_join - cap).min(EVICTIONS_PER_RESPONSE))
        .map(|(_, room)| room.to_owned())
        .collect()
}

fn record_token<'a>(rooms: &mut HashMap<&'a str, Option<i64>>, room: &'a str, token: &str) {
    let iat = VisitorClaims::peek_iat(token);
    let entry = rooms.entry(room).or_insert(None);
    if iat.is_some() {
        *entry = iat;
    }
}

/// Set-Cookie values expiring all three cookies of each evicted room.
pub(crate) fn eviction_cookies(policy: &CookiePolicy, rooms: &[String]) -> Vec<String> {
    rooms
        .iter()
        .flat_map(|room| {
            [
                queue_cookie_name(room),
                session_cookie_name(room),
                door_cookie_name(room),
            ]
        })
        .map(|name| policy.expire(&name))
        .collect()
}

/// The Set-Cookie values that give a browser a room's place: `qm_<room>` with the token,
/// HttpOnly `qms_<room>` with the ownership session id, and the cap's evictions. Join sets them,
/// and so does a token refresh (QM-391).
pub(crate) fn place_cookies(
    policy: &CookiePolicy,
    request_cookies: &RequestCookies,
    room_id: &str,
    token: &str,
    session_id: &str,
    cap: usize,
) -> Vec<String> {
    let evicted = rooms_to_evict(request_cookies, room_id, cap);
    let mut set_cookies = vec![
        policy.set(&queue_cookie_name(room_id), token, false),
        policy.set(&session_cookie_name(room_id), session_id, true),
    ];
    set_cookies.extend(eviction_cookies(policy, &evicted));
    set_cookies
}

/// Appends each cookie as a Set-Cookie header.
pub(crate) fn append_set_cookies(headers: &mut HeaderMap, set_cookies: &[String]) {
    for cookie in set_cookies {
        // Cookie values are base64url and ids from a checked alphabet: always a valid header.
        if let Ok(value) = HeaderValue::from_str(cookie) {
            headers.append(SET_COOKIE, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;

    /// A token-shaped value with the given iat (unsigned: the cap only peeks).
    fn token_with_iat(iat: i64) -> String {
        let payload = URL_SAFE_NO_PAD.encode(format!(r#"{{"r":"x","n":1,"g":1,"iat":{iat}}}"#));
        format!("{payload}.c2lnbmF0dXJl")
    }

    fn cookies(header: &str) -> RequestCookies {
        let mut headers = HeaderMap::new();
        headers.insert(COOKIE, header.parse().unwrap());
        RequestCookies::from_headers(&headers)
    }

    #[test]
    fn parses_pairs_and_keeps_the_first_of_a_name() {
        let jar = cookies(r#"qm_a=one; qms_a="quoted"; qm_a=two; junk; =empty"#);
        assert_eq!(jar.get("qm_a"), Some("one"));
        assert_eq!(jar.get("qms_a"), Some("quoted"));
        assert_eq!(jar.iter().count(), 2);
    }

    #[test]
    fn set_cookie_attributes() {
        let policy = CookiePolicy {
            max_age_sec: 86_400,
            secure: false,
        };
        assert_eq!(
            policy.set("qm_r", "t", false),
            "qm_r=t; Path=/; Max-Age=86400; SameSite=Lax"
        );
        let secure = CookiePolicy {
            max_age_sec: 60,
            secure: true,
        };
        assert_eq!(
            secure.set("qms_r", "s", true),
            "qms_r=s; Path=/; Max-Age=60; SameSite=Lax; HttpOnly; Secure"
        );
        assert_eq!(
            policy.expire("qm_r"),
            "qm_r=; Path=/; Max-Age=0; SameSite=Lax"
        );
    }

    #[test]
    fn the_language_cookie_is_not_a_room() {
        let header = format!("qm_lang=th; qm_a={}", token_with_iat(1));
        assert!(rooms_to_evict(&cookies(&header), "b", 2).is_empty());
        // A room named `lang` owns the name once its ownership cookie says so.
        let owned = format!("qm_lang={}; qms_lang=s", token_with_iat(1));
        assert_eq!(rooms_to_evict(&cookies(&owned), "b", 1), ["lang"]);
    }

    #[test]
    fn under_the_cap_nothing_is_evicted() {
        let header = format!(
            "qm_a={}; qms_a=s; qm_b={}",
            token_with_iat(1),
            token_with_iat(2)
        );
        assert!(rooms_to_evict(&cookies(&header), "c", 3).is_empty());
        // Re-joining a room already counted does not add one.
        assert!(rooms_to_evict(&cookies(&header), "a", 2).is_empty());
    }

    #[test]
    fn the_oldest_rooms_by_iat_go_first_and_tokenless_rooms_before_them() {
        let header = format!(
            "qm_new={}; qm_old={}; qm_mid={}; qms_orphan=s; qm_dk_keyonly=k",
            token_with_iat(300),
            token_with_iat(100),
            token_with_iat(200),
        );
        let jar = cookies(&header);
        // Five other rooms + the joining one, cap 4: two must go, the two without a token.
        assert_eq!(
            rooms_to_evict(&jar, "joining", 4),
            vec!["keyonly".to_owned(), "orphan".to_owned()]
        );
        // Cap 2: four go, then the oldest by iat.
        assert_eq!(
            rooms_to_evict(&jar, "joining", 2),
            vec!["keyonly", "orphan", "old", "mid"]
        );
    }

    #[test]
    fn a_room_named_dk_something_is_not_mistaken_for_a_door_key() {
        let header = format!(
            "qm_dk_x={}; qms_dk_x=s; qm_y={}",
            token_with_iat(500),
            token_with_iat(100)
        );
        // Rooms: dk_x (iat 500) and y (iat 100). Cap 2 with a third joining: y is the oldest.
        assert_eq!(
            rooms_to_evict(&cookies(&header), "z", 2),
            vec!["y".to_owned()]
        );
    }

    #[test]
    fn a_stuffed_jar_is_read_whole_and_evicts_a_bounded_number() {
        // 10,000 room-named cookies, read whole. How fast (the reading is linear; a quadratic
        // one took ~72 ms of CPU here) is measured by the hostile-client test, never asserted
        // as a time in a test.
        let header: Vec<String> = (0..10_000)
            .map(|index| format!("qm_room{index}={}", token_with_iat(index)))
            .collect();
        let header = header.join("; ");
        let jar = cookies(&header);
        let evicted = rooms_to_evict(&jar, "joining", 8);
        assert_eq!(jar.iter().count(), 10_000);
        assert_eq!(jar.get("qm_room9999"), Some(token_with_iat(9999).as_str()));
        // A bounded number of rooms per response, the oldest first.
        assert_eq!(evicted.len(), EVICTIONS_PER_RESPONSE);
        assert_eq!(evicted[0], "room0");
        let policy = CookiePolicy {
            max_age_sec: 60,
            secure: false,
        };
        let lines = place_cookies(&policy, &jar, "joining", "t", "s", 8);
        assert_eq!(lines.len(), 2 + 3 * EVICTIONS_PER_RESPONSE);
    }

    #[test]
    fn eviction_expires_all_three_cookies() {
        let policy = CookiePolicy {
            max_age_sec: 60,
            secure: false,
        };
        let expired = eviction_cookies(&policy, &["old".to_owned()]);
        assert_eq!(expired.len(), 3);
        assert!(expired[0].starts_with("qm_old=;"));
        assert!(expired[1].starts_with("qms_old=;"));
        assert!(expired[2].starts_with("qm_dk_old=;"));
        assert!(
            expired
                .iter()
                .all(|cookie| cookie.contains("Max-Age=0") && cookie.contains("Path=/"))
        );
    }
}
