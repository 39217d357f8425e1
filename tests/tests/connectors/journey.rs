//! The one journey every server-side connector (Worker, nginx, WordPress, Node) must carry a
//! visitor through, as the "Done means" lists it: a fresh visitor to a protected page
//! is sent to the waiting room; once passed, the `qm_token` the waiting page hands back opens a
//! door session and the visitor reaches the page; the session carries them across five more
//! pages without a new place; an out-of-scope page is never queued; an unknown room fails open;
//! and with the queue server stopped, the connector fails open.
//!
//! A connector test starts the components ([`start_app`]), creates the room ([`prepare_room`])
//! naming the origin its runtime listens on, starts the runtime twice — once for [`ROOM`], once
//! for [`GHOST_ROOM`] — in front of a [`TestOrigin`], and hands both to [`run`].
#![allow(dead_code)] // each connector module uses the part it needs

use std::time::Duration;

use qm_tests::{TestApp, room_body, spawn_app_with};
use reqwest::header::{CACHE_CONTROL, COOKIE, LOCATION, SET_COOKIE};
use serde_json::json;

/// The room the connector protects.
pub(crate) const ROOM: &str = "launch";
/// A room the server does not know: a connector configured with it fails open.
pub(crate) const GHOST_ROOM: &str = "no-such-room";
/// The Public API key the server-side connectors vouch with.
pub(crate) const API_KEY: &str = "connector-public-key-0123";
/// The room's one URL rule: only the shop is queued.
pub(crate) const IN_SCOPE: &str = "/shop/*";
/// The cookie a server-side connector keeps the door-session key in.
pub(crate) fn session_cookie() -> String {
    format!("qm_dk_{ROOM}")
}

/// The components, with the Public API key the connectors send.
pub(crate) async fn start_app() -> TestApp {
    spawn_app_with(&[("PUBLIC_API_KEY", API_KEY)]).await
}

/// The room [`ROOM`]: no automatic flow (the journey admits its visitor by a flush), its
/// target and return origin the connector's own (`site`, e.g. `http://127.0.0.1:8080`), and
/// only [`IN_SCOPE`] queued.
pub(crate) async fn prepare_room(app: &TestApp, site: &str) {
    app.create_room(room_body(
        ROOM,
        0,
        json!({
            "targetUrl": format!("{site}/shop/"),
            "returnOrigins": [site],
            "urlPatterns": [IN_SCOPE],
        }),
    ))
    .await;
}

/// A visitor's browser, reduced to what the journey needs: no redirects followed, cookies
/// carried by hand so the test sees every `Set-Cookie`.
fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .build()
        .expect("a reqwest client")
}

/// What the connector answered one request.
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) location: Option<String>,
    pub(crate) set_cookies: Vec<String>,
    pub(crate) cache_control: Option<String>,
    pub(crate) body: String,
}

impl Answer {
    /// The value the answer sets `name` to (`None` when it does not set it).
    pub(crate) fn cookie(&self, name: &str) -> Option<String> {
        let prefix = format!("{name}=");
        self.set_cookies.iter().find_map(|cookie| {
            cookie
                .strip_prefix(&prefix)
                .map(|rest| rest.split(';').next().unwrap_or("").to_owned())
        })
    }

    /// The `Set-Cookie` line for `name`, attributes and all.
    pub(crate) fn cookie_line(&self, name: &str) -> Option<&str> {
        let prefix = format!("{name}=");
        self.set_cookies
            .iter()
            .find(|cookie| cookie.starts_with(&prefix))
            .map(String::as_str)
    }
}

/// GET `url` as a visitor with these cookies (a `Cookie` header value, or none).
pub(crate) async fn visit(url: &str, cookies: Option<&str>) -> Answer {
    let mut request = browser()
        .get(url)
        .header("user-agent", "Mozilla/5.0 (journey)");
    if let Some(cookies) = cookies {
        request = request.header(COOKIE, cookies);
    }
    let response = request
        .send()
        .await
        .unwrap_or_else(|error| panic!("GET {url} through the connector: {error}"));
    let header = |name: reqwest::header::HeaderName| {
        response
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    let location = header(LOCATION);
    let cache_control = header(CACHE_CONTROL);
    let set_cookies = response
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok().map(str::to_owned))
        .collect();
    let status = response.status().as_u16();
    let body = response.text().await.unwrap_or_default();
    Answer {
        status,
        location,
        set_cookies,
        cache_control,
        body,
    }
}

/// The origin's page for `path`, as [`TestOrigin`] renders it (`site page <path>`; a site
/// that is not a `TestOrigin`, such as WordPress, renders the same line): proof the visitor
/// reached the site itself, not a page of the connector's.
pub(crate) fn served(answer: &Answer, path: &str) -> bool {
    answer.status == 200 && answer.body.contains(&format!("site page {path}"))
}

fn assert_served(answer: &Answer, path: &str, what: &str) {
    assert!(
        served(answer, path),
        "{what}: expected the origin's page for {path}, got {} (Location {:?}): {}",
        answer.status,
        answer.location,
        answer.body.chars().take(300).collect::<String>()
    );
}

/// Asserts `answer` sends the visitor to [`ROOM`]'s waiting page, asking to come back to
/// `page`.
pub(crate) fn assert_queued(app: &TestApp, answer: &Answer, page: &str, what: &str) {
    assert_eq!(
        answer.status,
        302,
        "{what}: a visitor without a pass is sent to the waiting room; got {}: {}",
        answer.status,
        answer.body.chars().take(300).collect::<String>()
    );
    let location = answer.location.as_deref().unwrap_or("");
    let waiting = format!("{}/w/{ROOM}", app.gateway);
    assert!(
        location.starts_with(&waiting),
        "{what}: Location {location} is not the waiting page {waiting}"
    );
    let parsed = url::Url::parse(location).expect("an absolute Location");
    let back = parsed
        .query_pairs()
        .find(|(name, _)| name == "qm_return")
        .map(|(_, value)| value.into_owned());
    assert_eq!(
        back.as_deref(),
        Some(page),
        "{what}: the waiting page is asked to send the visitor back to the page"
    );
    assert_eq!(
        answer.cache_control.as_deref(),
        Some("no-store"),
        "{what}: a redirect that depends on the visitor must not be cached"
    );
}

/// The room's `nextTicket`: the places minted so far.
async fn minted(app: &TestApp) -> u64 {
    app.room(ROOM).await["nextTicket"]
        .as_u64()
        .expect("nextTicket")
}

/// Drives the journey. `site` is the connector in front of the origin for [`ROOM`] (its base
/// URL, no trailing slash), `ghost` the same connector configured for [`GHOST_ROOM`].
/// `strips_token` says whether the connector answers the `qm_token` return with a redirect to
/// the clean URL (all but nginx's plain `auth_request` config, which serves the page at once).
/// Stops the app at the end, to see the connector fail open.
pub(crate) async fn run(app: TestApp, site: &str, ghost: &str, strips_token: bool) {
    let cookie_name = session_cookie();

    // A fresh visitor to a protected page is sent to the waiting room.
    let page = format!("{site}/shop/item");
    let first = visit(&page, None).await;
    assert_queued(&app, &first, &page, "a fresh visitor");
    let places = minted(&app).await;

    // The visitor waits at the waiting page and is let through.
    let (joined, _) = app.join_as_new_visitor(ROOM).await;
    let token = joined.body["token"].as_str().expect("token").to_owned();
    let flushed = app
        .admin_post(&format!("/rooms/{ROOM}/flush"), json!({ "count": 1 }))
        .await;
    assert_eq!(flushed.status, 200, "{}", flushed.text);
    let places = places + 1;

    // The waiting page sends them back with the pass; the connector spends it into a door
    // session and keeps the key in an HttpOnly cookie.
    let returned = visit(&format!("{page}?qm_token={token}"), None).await;
    let key = returned
        .cookie(&cookie_name)
        .filter(|key| !key.is_empty())
        .unwrap_or_else(|| {
            panic!(
                "the return with qm_token sets {cookie_name}; got {} {:?} {:?}",
                returned.status, returned.location, returned.set_cookies
            )
        });
    let line = returned.cookie_line(&cookie_name).unwrap_or("");
    let lower = line.to_ascii_lowercase();
    assert!(
        lower.contains("httponly") && lower.contains("path=/"),
        "the key's cookie is HttpOnly on Path=/: {line}"
    );
    let cookies = format!("{cookie_name}={key}");
    if strips_token {
        assert_eq!(returned.status, 302, "the pass is stripped from the URL");
        assert_eq!(
            returned.location.as_deref(),
            Some(page.as_str()),
            "the clean URL"
        );
        assert_served(&visit(&page, Some(&cookies)).await, "/shop/item", "passed");
    } else {
        assert_served(&returned, "/shop/item", "passed");
    }

    // The door session carries them across five more pages without a new place.
    for n in 1..=5 {
        let path = format!("/shop/page-{n}");
        let answer = visit(&format!("{site}{path}"), Some(&cookies)).await;
        assert_served(&answer, &path, "a page on the door session");
    }
    assert_eq!(
        minted(&app).await,
        places,
        "the session minted no new place"
    );

    // The same pass, replayed without the key (a copied link), admits nobody.
    let replayed = visit(&format!("{site}/shop/other?qm_token={token}"), None).await;
    assert_eq!(
        replayed.status, 302,
        "a spent pass sends the copier to the waiting room"
    );

    // An out-of-scope page is never queued, and mints nothing.
    assert_served(
        &visit(&format!("{site}/about"), None).await,
        "/about",
        "out of scope",
    );
    assert_eq!(
        minted(&app).await,
        places,
        "an out-of-scope page minted a place"
    );

    // An unknown room fails open.
    assert_served(
        &visit(&format!("{ghost}/shop/item"), None).await,
        "/shop/item",
        "an unknown room",
    );

    // The queue server stopped: the documented default is to fail open, for a fresh visitor
    // and for one on a door session alike.
    app.stop().await;
    assert_served(
        &visit(&page, None).await,
        "/shop/item",
        "the queue server down, a fresh visitor",
    );
    assert_served(
        &visit(&format!("{site}/shop/page-6"), Some(&cookies)).await,
        "/shop/page-6",
        "the queue server down, a visitor on a session",
    );
}
