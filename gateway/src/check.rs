//! GET /api/check: the door check a snippet or an edge connector runs before a protected page.
//! It answers pass or queue from the engine; an unknown room passes (fail open). The pass that
//! opens a door session answers its key as `sess`; later checks replay it (`X-QM-Session`,
//! `?sess=`, or the inline host's `qm_dk_<room>` cookie) instead of the token, and `clearToken`
//! tells the client to drop a token or key that is dead for good (see `door.rs` and the
//! engine's `domain/door.rs`). `?ip=&agent=` vouch for another client and need the Bearer public
//! API key (or ADMIN_KEY); no key is ever accepted from a URL. CHECK_LIMIT_PER_MIN limits
//! checks per client address: the vouched address when vouched, so a connector's colo is not
//! one shared budget. CORS: only the room's tag origins may read the answer, and the OPTIONS
//! preflight makes the same decision from the room's info. `url=` (else the Referer) names the
//! page, which a scoped room judges (`targeting.rs`).

use std::net::IpAddr;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::header::{
    ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_ALLOW_ORIGIN,
    ACCESS_CONTROL_MAX_AGE, AUTHORIZATION, CACHE_CONTROL, ORIGIN, VARY,
};
use http::{HeaderMap, HeaderValue, StatusCode, Uri};
use qm_core::ErrorCode;
use qm_core::config::Config;
use qm_core::ids::{is_valid_room_id, is_valid_session_id};
use qm_proto::RoomRef;
use secrecy::ExposeSecret;
use serde_json::{Map, Value, json};
use subtle::ConstantTimeEq;

use crate::GatewayState;
use crate::check_status;
use crate::cookies::{RequestCookies, door_cookie_name, queue_cookie_name};
use crate::door::{self, DoorQuestion};
use crate::places::presented_session_hash;
use crate::request::{ClientAddress, QueryParams, public_base};
use crate::targeting;
use qm_http::AppError;

/// The header the snippet replays a door-session key in.
pub(crate) const DOOR_SESSION_HEADER: &str = "x-qm-session";
/// The longest vouched address or agent taken from the query.
const MAX_VOUCHED_LEN: usize = 256;

/// GET /api/check?roomId=&token=&url=: the JSON answer, or with `answer=status` the status
/// form a reverse proxy's `auth_request` reads (see `check_status`).
pub(crate) async fn check(
    State(state): State<GatewayState>,
    ClientAddress(address): ClientAddress,
    query: QueryParams,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let status_form = query.get("answer") == Some(STATUS_FORM);
    match ask_door(&state, address, &query, &headers, &uri, status_form).await {
        Ok(checked) if status_form => check_status::status_answer(checked),
        Ok(checked) => json_answer(checked),
        Err(error) if status_form => check_status::status_refusal(error),
        Err(error) => error.into_response(),
    }
}

/// The `answer=` value that asks for the status form.
const STATUS_FORM: &str = "status";

/// What one door check found, before it is put in either form.
pub(crate) struct Checked {
    pub(crate) room_id: String,
    pub(crate) reply: qm_proto::CheckReply,
    pub(crate) new_key: Option<String>,
    /// The page the check was for (`url=`, else the Referer).
    pub(crate) page: Option<String>,
    pub(crate) waiting_room_url: String,
    /// The CORS origin the answer may name.
    pub(crate) origin: Option<HeaderValue>,
    /// The status form was sent a door-session key that is not a key's shape: it was checked
    /// as if absent, and the answer tells the proxy to expire the cookie.
    pub(crate) dropped_key: bool,
    /// `?targeting=1`: the answer lists the room's rules.
    pub(crate) want_rules: bool,
    /// A token came with the request (`token=`, or in the status form the page's `qm_token`).
    pub(crate) token_in_request: bool,
}

async fn ask_door(
    state: &GatewayState,
    address: IpAddr,
    query: &QueryParams,
    headers: &HeaderMap,
    uri: &Uri,
    status_form: bool,
) -> Result<Checked, AppError> {
    let identity = check_credentials(&state.config, query, headers, &address.to_string())?;
    // CHECK_LIMIT_PER_MIN counts the client the check is for: a connector vouching for many
    // visitors from one colo must not spend one shared budget, and a vouched visitor must not
    // escape theirs by going through a connector.
    let limited = limited_address(&identity, address);
    state.spend_check_budget(limited)?;
    let room_id = query.room_id()?;
    let page = targeting::page_named(query, headers)?;
    let want_rules = targeting::wants_rules(query);
    let cookies = RequestCookies::from_headers(headers);
    // A proxy's auth_request cannot drop a bad cookie and ask again, as a JSON client does on
    // `invalid_session`; and failing open on that refusal would let anyone in with a made-up
    // cookie. So the status form checks without the bad key and expires it.
    let (door_key, dropped_key) = match presented_door_key(query, headers, &cookies, &room_id) {
        Ok(key) => (key, false),
        Err(_) if status_form => (None, true),
        Err(error) => return Err(error),
    };
    // A proxy cannot pick the pass out of the page's query (nginx has no URL decoding), so
    // the status form finds it there itself when `token=` is not sent.
    let page_token = match query.non_empty("token") {
        None if status_form => page.as_deref().and_then(crate::return_trip::pass_in),
        _ => None,
    };
    let token_in_request = query.non_empty("token").is_some() || page_token.is_some();
    let question = DoorQuestion {
        room_id: &room_id,
        door_key,
        tokens: [
            query.non_empty("token"),
            page_token.as_deref(),
            cookies.get(&queue_cookie_name(&room_id)),
        ]
        .into_iter()
        .flatten()
        .collect(),
        ownership_hash: presented_session_hash(&cookies, &room_id),
        identity,
        url: page.clone(),
        want_rules,
    };
    let answer = door::ask(state, question).await?;
    let waiting_room_url = waiting_room_url(&state.config, headers, uri, &room_id);
    let origin = allowed_origin(headers, &answer.reply.tag_origins);
    Ok(Checked {
        room_id,
        reply: answer.reply,
        new_key: answer.new_key,
        page,
        waiting_room_url,
        origin,
        dropped_key,
        want_rules,
        token_in_request,
    })
}

/// `{action, reason?, sess?, clearToken?, waitingRoomUrl?, targeting?}`.
fn json_answer(checked: Checked) -> Response {
    let body = answer_body(&checked, checked.want_rules);
    finish(Json(Value::Object(body)).into_response(), checked.origin)
}

pub(crate) fn answer_body(checked: &Checked, want_rules: bool) -> Map<String, Value> {
    let reply = &checked.reply;
    let mut body = Map::new();
    if !reply.room_found {
        body.insert("action".into(), json!("pass"));
        body.insert("reason".into(), json!("no_room"));
        return body;
    }
    body.insert("action".into(), json!(reply.action));
    if !reply.reason.is_empty() {
        body.insert("reason".into(), json!(reply.reason));
    }
    if let Some(key) = &checked.new_key {
        body.insert("sess".into(), json!(key));
    }
    if reply.clear_token {
        body.insert("clearToken".into(), json!(true));
    }
    if reply.action == "queue" {
        body.insert("waitingRoomUrl".into(), json!(checked.waiting_room_url));
    }
    if let Some(verdict) = &reply.targeting {
        body.insert(
            "targeting".into(),
            targeting::check_json(verdict, want_rules),
        );
    }
    body
}

/// Every door-check answer: never cached, CORS only for the room's tag origins.
pub(crate) fn finish(mut response: Response, origin: Option<HeaderValue>) -> Response {
    let response_headers = response.headers_mut();
    response_headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    apply_cors(response_headers, origin);
    response
}

/// OPTIONS /api/check: the same origin decision as the GET, from the room's info.
pub(crate) async fn check_preflight(
    State(state): State<GatewayState>,
    query: QueryParams,
    headers: HeaderMap,
) -> Response {
    let tag_origins = match query
        .get("roomId")
        .filter(|room_id| is_valid_room_id(room_id))
    {
        Some(room_id) => match state
            .engine
            .clone()
            .room_info(RoomRef {
                room_id: room_id.to_owned(),
            })
            .await
        {
            Ok(info) => {
                let info = info.into_inner();
                if info.found {
                    info.tag_origins
                } else {
                    Vec::new()
                }
            }
            // The GET would fail too and carry no origin: so does its preflight.
            Err(_) => Vec::new(),
        },
        None => Vec::new(),
    };
    let origin = allowed_origin(&headers, &tag_origins);
    let mut response = StatusCode::NO_CONTENT.into_response();
    let response_headers = response.headers_mut();
    response_headers.insert(
        http::header::ALLOW,
        HeaderValue::from_static("GET, HEAD, OPTIONS"),
    );
    if origin.is_some() {
        response_headers.insert(
            ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET, OPTIONS"),
        );
        response_headers.insert(
            ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static("X-QM-Session"),
        );
        response_headers.insert(ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
    }
    apply_cors(response_headers, origin);
    response
}

/// The door-session key a check presents: the `X-QM-Session` header (what the snippet sends),
/// else `?sess=`, else the room's `qm_dk_` cookie (an inline host). A key that is not a key's
/// shape is refused rather than ignored, so a connector that mangles it finds out.
fn presented_door_key<'a>(
    query: &'a QueryParams,
    headers: &'a HeaderMap,
    cookies: &'a RequestCookies,
    room_id: &str,
) -> Result<Option<&'a str>, AppError> {
    let header = match headers.get(DOOR_SESSION_HEADER) {
        Some(value) => Some(value.to_str().map_err(|_| malformed_door_key())?),
        None => None,
    };
    let presented = header
        .or_else(|| query.non_empty("sess"))
        .or_else(|| cookies.get(&door_cookie_name(room_id)))
        .map(str::trim)
        .filter(|key| !key.is_empty());
    match presented {
        Some(key) if !is_valid_session_id(key) => Err(malformed_door_key()),
        key => Ok(key),
    }
}

fn malformed_door_key() -> AppError {
    AppError::new(
        ErrorCode::InvalidSession,
        "the door-session key (X-QM-Session, sess or qm_dk_) is not a key this server issues: drop it",
    )
}

/// The credential rules, in order: a key in the URL is refused outright; vouching for another
/// client needs the Bearer key. Returns the identity the check counts against.
fn check_credentials(
    config: &Config,
    query: &QueryParams,
    headers: &HeaderMap,
    peer: &str,
) -> Result<String, AppError> {
    if query.contains("key") {
        return Err(AppError::new(
            ErrorCode::CredentialInQuery,
            "a key in the URL lands in access logs and Referer headers; send it as Authorization: Bearer",
        ));
    }
    let vouched_ip = query.non_empty("ip");
    if vouched_ip.is_none() && query.non_empty("agent").is_none() {
        return Ok(peer.to_owned());
    }
    if !bearer_is_public_or_admin_key(config, headers) {
        return Err(AppError::new(
            ErrorCode::Unauthorized,
            "vouching for a client (?ip=, ?agent=) needs Authorization: Bearer <PUBLIC_API_KEY>",
        ));
    }
    let identity = vouched_ip
        .map(|ip| ip.trim())
        .filter(|ip| !ip.is_empty() && ip.len() <= MAX_VOUCHED_LEN);
    Ok(identity.unwrap_or(peer).to_owned())
}

/// The address a check's rate limit counts: the vouched (or peer) identity when it is an IP
/// address, else the peer. A vouched value that is not an address cannot buy a fresh budget:
/// it is counted against the caller.
fn limited_address(identity: &str, peer: IpAddr) -> IpAddr {
    identity
        .parse::<IpAddr>()
        .map(|address| address.to_canonical())
        .unwrap_or(peer)
}

pub(crate) fn bearer_is_public_or_admin_key(config: &Config, headers: &HeaderMap) -> bool {
    let Some(presented) = headers
        .get(AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim)
    else {
        return false;
    };
    let presented = presented.as_bytes();
    let public = config
        .public_api_key()
        .is_some_and(|key| constant_time_eq(key.expose_secret().as_bytes(), presented));
    let admin = constant_time_eq(config.admin_key().expose_secret().as_bytes(), presented);
    // Both are compared whatever the first says, so timing does not tell which key matched.
    public | admin
}

fn constant_time_eq(expected: &[u8], presented: &[u8]) -> bool {
    expected.len() == presented.len() && bool::from(expected.ct_eq(presented))
}

/// The request's Origin, if the room lets that origin read its door check. Never `*`.
pub(crate) fn allowed_origin(headers: &HeaderMap, tag_origins: &[String]) -> Option<HeaderValue> {
    let origin = headers.get(ORIGIN)?;
    let origin_text = origin.to_str().ok()?;
    let allowed = tag_origins
        .iter()
        .any(|allowed| origin_matches(allowed, origin_text));
    allowed.then(|| origin.clone())
}

/// Origins compare as scheme://host[:port], case-insensitively, without a trailing slash.
pub(crate) fn origin_matches(allowed: &str, origin: &str) -> bool {
    let allowed = allowed.trim().trim_end_matches('/');
    !allowed.is_empty() && allowed != "*" && allowed.eq_ignore_ascii_case(origin.trim())
}

fn apply_cors(headers: &mut HeaderMap, origin: Option<HeaderValue>) {
    // The answer depends on Origin whether or not it is allowed, so caches must key on it.
    headers.insert(VARY, HeaderValue::from_static("Origin"));
    if let Some(origin) = origin {
        headers.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    }
}

/// `<base>/w/<roomId>`: absolute from PUBLIC_URL or this server's own Host, else relative (see
/// [`public_base`]).
fn waiting_room_url(config: &Config, headers: &HeaderMap, uri: &Uri, room_id: &str) -> String {
    format!("{}/w/{room_id}", public_base(config, headers, uri))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::headers;
    use std::collections::HashMap;

    fn config() -> Config {
        let env: HashMap<&str, &str> = [
            ("ADMIN_KEY", "admin-key-for-tests"),
            ("PUBLIC_API_KEY", "public-key-for-tests"),
        ]
        .into_iter()
        .collect();
        Config::from_source(&env).unwrap()
    }

    #[test]
    fn only_listed_origins_are_echoed() {
        let tag_origins = vec![
            "https://tags.example".to_owned(),
            "https://shop.example/".to_owned(),
        ];
        let from = |origin: &str| allowed_origin(&headers(&[("origin", origin)]), &tag_origins);
        assert_eq!(
            from("https://tags.example")
                .as_ref()
                .and_then(|v| v.to_str().ok()),
            Some("https://tags.example")
        );
        assert!(
            from("https://shop.example").is_some(),
            "a trailing slash in the list does not matter"
        );
        assert!(from("https://evil.example").is_none());
        assert!(
            from("http://tags.example").is_none(),
            "the scheme is part of the origin"
        );
        assert!(
            from("https://tags.example:8443").is_none(),
            "so is the port"
        );
        assert!(
            allowed_origin(&HeaderMap::new(), &tag_origins).is_none(),
            "no Origin, no CORS"
        );
        assert!(
            allowed_origin(
                &headers(&[("origin", "https://any.example")]),
                &["*".to_owned()]
            )
            .is_none(),
            "never a wildcard"
        );
    }

    #[test]
    fn cors_headers_always_vary_on_origin() {
        let mut response_headers = HeaderMap::new();
        apply_cors(&mut response_headers, None);
        assert_eq!(response_headers.get(VARY).unwrap(), "Origin");
        assert!(response_headers.get(ACCESS_CONTROL_ALLOW_ORIGIN).is_none());
        apply_cors(
            &mut response_headers,
            Some(HeaderValue::from_static("https://tags.example")),
        );
        assert_eq!(
            response_headers.get(ACCESS_CONTROL_ALLOW_ORIGIN).unwrap(),
            "https://tags.example"
        );
    }

    #[test]
    fn credentials_for_vouching() {
        let config = config();
        let query = |text: &str| QueryParams::parse(Some(text));
        let none = HeaderMap::new();
        assert_eq!(
            check_credentials(&config, &query("roomId=r"), &none, "10.0.0.1").ok(),
            Some("10.0.0.1".into())
        );
        let in_url = check_credentials(
            &config,
            &query("roomId=r&key=public-key-for-tests"),
            &none,
            "p",
        )
        .unwrap_err();
        assert_eq!(in_url.0.code, ErrorCode::CredentialInQuery);
        let anonymous =
            check_credentials(&config, &query("roomId=r&ip=203.0.113.9"), &none, "p").unwrap_err();
        assert_eq!(anonymous.0.code, ErrorCode::Unauthorized);
        let wrong = headers(&[("authorization", "Bearer public-key-for-test")]);
        assert!(check_credentials(&config, &query("ip=203.0.113.9"), &wrong, "p").is_err());
        for key in ["public-key-for-tests", "admin-key-for-tests"] {
            let bearer = headers(&[("authorization", &format!("Bearer {key}"))]);
            assert_eq!(
                check_credentials(&config, &query("ip=203.0.113.9&agent=x"), &bearer, "p").ok(),
                Some("203.0.113.9".into())
            );
            assert_eq!(
                check_credentials(&config, &query("agent=x"), &bearer, "p").ok(),
                Some("p".into())
            );
        }
    }

    #[test]
    fn the_limit_counts_the_vouched_address_and_never_a_made_up_one() {
        let peer: IpAddr = "10.0.0.1".parse().unwrap();
        assert_eq!(
            limited_address("203.0.113.9", peer),
            "203.0.113.9".parse::<IpAddr>().unwrap()
        );
        assert_eq!(
            limited_address("::ffff:203.0.113.9", peer),
            "203.0.113.9".parse::<IpAddr>().unwrap(),
            "a mapped IPv4 address counts as the IPv4 address"
        );
        assert_eq!(limited_address("not-an-address", peer), peer);
        assert_eq!(limited_address("10.0.0.1", peer), peer);
    }

    #[test]
    fn the_waiting_room_url_follows_public_url_or_the_servers_own_host() {
        let uri: Uri = "/api/check?roomId=door".parse().unwrap();
        let defaults = Config::defaults();
        let plain = headers(&[("host", "127.0.0.1:8080")]);
        assert_eq!(
            waiting_room_url(&defaults, &plain, &uri, "door"),
            "http://127.0.0.1:8080/w/door"
        );
        let proxied = headers(&[("host", "localhost"), ("x-forwarded-proto", "https")]);
        assert_eq!(
            waiting_room_url(&defaults, &proxied, &uri, "door"),
            "https://localhost/w/door"
        );
        let foreign = headers(&[("host", "evil.example")]);
        assert_eq!(
            waiting_room_url(&defaults, &foreign, &uri, "door"),
            "/w/door"
        );
        let source: std::collections::HashMap<&str, &str> =
            [("PUBLIC_URL", "https://queue.example")]
                .into_iter()
                .collect();
        let public = Config::from_source(&source).unwrap();
        assert_eq!(
            waiting_room_url(&public, &foreign, &uri, "door"),
            "https://queue.example/w/door"
        );
    }
}
