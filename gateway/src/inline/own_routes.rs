//! `/__qm/*` on an inline host: the waiting page's contract, served by the gateway's own
//! handlers after a rewrite. The room is the one the host is mapped to, and `?token=` is dropped
//! before any handler sees it: on an inline host the place travels only in its cookies, so a
//! token never lands in the site's access or CDN logs.

use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use http::header::{LOCATION, REFERER};
use http::{HeaderValue, Method, StatusCode, Uri};
use qm_core::ErrorCode;
use qm_http::AppError;

use super::{InlineFront, OWN_PREFIX};
use crate::request::request_host;

/// Where a `/__qm` path goes among the gateway's routes, if anywhere.
enum Target {
    /// The same path (the assets are served under `/__qm/assets` already).
    Same,
    /// A visitor route; the room comes from the host, the place from the cookies.
    Contract(&'static str),
    /// The no-JavaScript join form (`POST /__qm/w`).
    JoinForm,
}

fn target(path: &str) -> Option<Target> {
    let rest = path.strip_prefix(OWN_PREFIX)?;
    match rest {
        "/api/join" => Some(Target::Contract("/api/join")),
        "/api/notify" => Some(Target::Contract("/api/notify")),
        "/api/status" => Some(Target::Contract("/api/status")),
        "/api/events" | "/events" => Some(Target::Contract("/api/events")),
        "/w" => Some(Target::JoinForm),
        _ if rest.starts_with("/assets/") => Some(Target::Same),
        _ => None,
    }
}

pub(super) async fn serve(front: &InlineFront, mut request: Request, room_id: &str) -> Response {
    let Some(target) = target(request.uri().path()) else {
        return AppError::new(ErrorCode::NotFound, "no such route under /__qm").into_response();
    };
    let path = match target {
        Target::Same => request.uri().path().to_owned(),
        Target::Contract(path) => path.to_owned(),
        Target::JoinForm => format!("/w/{room_id}"),
    };
    let query = inline_query(request.uri().query(), room_id);
    let Ok(uri) = format!("{path}?{query}").parse::<Uri>() else {
        return AppError::new(ErrorCode::BadRequest, "the request URL cannot be read")
            .into_response();
    };
    let is_form = matches!(target, Target::JoinForm) && request.method() == Method::POST;
    let back_to = is_form.then(|| page_url_of(&request)).flatten();
    *request.uri_mut() = uri;
    let mut response = front.own(request).await;
    if is_form && response.status() == StatusCode::SEE_OTHER {
        // The form's answer sends the browser back to its page: on an inline host that is the
        // site's URL the waiting page stood in for, not the queue host's `/w/<room>`.
        let location = back_to.unwrap_or_else(|| "/".to_owned());
        if let Ok(value) = HeaderValue::from_str(&location) {
            response.headers_mut().insert(LOCATION, value);
        }
    }
    response
}

/// The query with `token` dropped and `roomId` fixed to the host's room.
fn inline_query(query: Option<&str>, room_id: &str) -> String {
    let kept = url::form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .filter(|(name, _)| name != "token" && name != "roomId");
    let mut out = url::form_urlencoded::Serializer::new(String::new());
    out.append_pair("roomId", room_id);
    for (name, value) in kept {
        out.append_pair(&name, &value);
    }
    out.finish()
}

/// The path and query of the page a form was posted from, when its Referer is on this host.
fn page_url_of(request: &Request) -> Option<String> {
    let referer = request.headers().get(REFERER)?.to_str().ok()?;
    let referer = url::Url::parse(referer).ok()?;
    let host = request_host(request.headers(), request.uri())?;
    let referer_host = match referer.port() {
        Some(port) => format!("{}:{port}", referer.host_str()?),
        None => referer.host_str()?.to_owned(),
    };
    if !referer_host.eq_ignore_ascii_case(&host) || referer.path().starts_with(OWN_PREFIX) {
        return None;
    }
    Some(match referer.query() {
        Some(query) => format!("{}?{query}", referer.path()),
        None => referer.path().to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_never_survives_the_rewrite_and_the_room_is_the_hosts() {
        assert_eq!(
            inline_query(Some("token=abc&roomId=other&lang=th"), "drop"),
            "roomId=drop&lang=th"
        );
        assert_eq!(inline_query(None, "drop"), "roomId=drop");
    }

    #[test]
    fn only_the_page_contract_is_served_under_the_prefix() {
        assert!(matches!(
            target("/__qm/api/join"),
            Some(Target::Contract("/api/join"))
        ));
        assert!(matches!(
            target("/__qm/events"),
            Some(Target::Contract("/api/events"))
        ));
        assert!(matches!(
            target("/__qm/assets/waiting-x.css"),
            Some(Target::Same)
        ));
        assert!(matches!(target("/__qm/w"), Some(Target::JoinForm)));
        for path in [
            "/__qm",
            "/__qm/api/check",
            "/__qm/healthz",
            "/__qm/api/admin/rooms",
        ] {
            assert!(target(path).is_none(), "{path}");
        }
    }
}
