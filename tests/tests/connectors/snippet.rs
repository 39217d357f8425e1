//! The browser snippet (`connectors/snippet/qm.js`) in headless Chromium, on the pages of a second
//! origin: a small site at `http://localhost:<port>` (the gateway is on 127.0.0.1, and a different
//! host is what makes the site a true second origin, whose scripts cannot read the queue host's
//! cookies or storage), whose pages load the snippet as the install guide says, from the gateway's
//! `/snippet/latest.js` (the registry's bytes of `connectors/snippet/qm.js`, the server defaulting
//! to the origin it was loaded from). The journey is the one every connector owes ("Done means"): a
//! fresh visitor is sent to the waiting room; the waiting page hands the pass back as `qm_token`,
//! the snippet spends it into a door session and strips it from the address bar; five more pages
//! ride the session without a new place; an out-of-scope page and a page of an unknown room never
//! leave the site; with the queue server stopped the page stays (fail open), or is replaced by a
//! notice when the tag says `data-fail="closed"`.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, Uri, header};
use axum::response::{IntoResponse, Response};
use qm_tests::TestApp;
use qm_tests::browser::{self, Browser, wait_for};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use super::journey::{GHOST_ROOM, ROOM, prepare_room, start_app};

/// How long a page may take to reach the verdict the server already knows.
pub(crate) const SHOWN: Duration = Duration::from_secs(15);

/// The snippet as shipped.
pub(crate) fn snippet_source() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../connectors/snippet/qm.js");
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("read {path}: {error}"))
}

/// What the site puts in a page's `<head>`, given the page's path.
pub(crate) type HeadTags = Arc<dyn Fn(&str) -> String + Send + Sync>;

#[derive(Clone)]
struct SiteState {
    head: HeadTags,
    /// Static files (path, content type, body), e.g. the snippet or a harness script.
    files: Arc<Vec<(String, &'static str, String)>>,
}

/// The protected site: every path answers a small page saying `site page <path>` with the
/// tags `head` gives it, except the static files it serves.
pub(crate) struct Site {
    /// `http://localhost:<port>`.
    pub(crate) url: String,
    task: JoinHandle<()>,
}

impl Site {
    pub(crate) async fn start(head: HeadTags, files: Vec<(String, &'static str, String)>) -> Site {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the site");
        let port = listener.local_addr().expect("site address").port();
        let state = SiteState {
            head,
            files: Arc::new(files),
        };
        let app = Router::new().fallback(site_page).with_state(state);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Site {
            url: format!("http://localhost:{port}"),
            task,
        }
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn site_page(State(state): State<SiteState>, uri: Uri) -> Response {
    let path = uri.path();
    if let Some((_, content_type, body)) = state.files.iter().find(|(name, _, _)| name == path) {
        return ([(header::CONTENT_TYPE, *content_type)], body.clone()).into_response();
    }
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <link rel=\"icon\" href=\"data:,\"><title>Site</title>{}</head>\
         <body><main><h1 id=\"site\">site page {path}</h1></main></body></html>",
        (state.head)(path)
    );
    let mut response = axum::response::Html(html).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The room a page of the test site protects: pages under `/ghost/` name a room the server
/// does not know.
pub(crate) fn room_of(path: &str) -> &'static str {
    if path.starts_with("/ghost/") {
        GHOST_ROOM
    } else {
        ROOM
    }
}

/// The snippet's verdict on the page now showing: `(state, reason)` once it has one.
pub(crate) async fn verdict(browser: &Browser) -> Result<(String, Option<String>), String> {
    let answer = browser
        .js(
            "return window.QueueManager ? [QueueManager.state, QueueManager.reason] : null;",
            vec![],
        )
        .await?;
    match answer {
        Value::Array(parts) => Ok((
            parts[0].as_str().unwrap_or("").to_owned(),
            parts[1].as_str().map(str::to_owned),
        )),
        _ => Err("no QueueManager on the page".to_owned()),
    }
}

/// Waits until the page at exactly `url` has the snippet's verdict `state` (and `reason`, when
/// given), and checks it stays there: the page was not left for the waiting room.
pub(crate) async fn assert_stays(browser: &Browser, url: &str, state: &str, reason: Option<&str>) {
    wait_for(
        &format!("{url} to settle on {state} {reason:?}"),
        SHOWN,
        || async {
            let now = browser.current_url().await?;
            if now != url {
                return Err(format!("at {now}"));
            }
            match verdict(browser).await? {
                (shown, shown_reason)
                    if shown == state
                        && (reason.is_none() || shown_reason.as_deref() == reason) =>
                {
                    Ok(())
                }
                other => Err(format!("verdict {other:?}")),
            }
        },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        browser.current_url().await.expect("the current URL"),
        url,
        "the page stays"
    );
}

/// Waits until the browser is at the room's waiting page, asked to send the visitor back to
/// `page`.
pub(crate) async fn assert_sent_to_waiting_room(app: &TestApp, browser: &Browser, page: &str) {
    let waiting = format!("{}/w/{ROOM}", app.gateway);
    let at = wait_for("the waiting room", SHOWN, || async {
        let now = browser.current_url().await?;
        if now.starts_with(&waiting) {
            Ok(now)
        } else {
            Err(format!("at {now}"))
        }
    })
    .await;
    let parsed = url::Url::parse(&at).expect("the waiting page's URL");
    let back = parsed
        .query_pairs()
        .find(|(name, _)| name == "qm_return")
        .map(|(_, value)| value.into_owned());
    assert_eq!(back.as_deref(), Some(page), "qm_return names the page");
}

/// The room's `nextTicket`: the places minted so far.
pub(crate) async fn minted(app: &TestApp) -> u64 {
    app.room(ROOM).await["nextTicket"]
        .as_u64()
        .expect("nextTicket")
}

/// Waits until the waiting page shows the visitor at `position`: they hold a place.
pub(crate) async fn wait_position(browser: &Browser, position: u64) {
    let expected = position.to_string();
    wait_for(
        &format!("#qm-position to read {position}"),
        SHOWN,
        || async {
            match browser.text("#qm-position").await?.trim() {
                shown if shown == expected => Ok(()),
                other => Err(format!("#qm-position reads {other:?}")),
            }
        },
    )
    .await;
}

async fn session_storage(browser: &Browser, key: &str) -> Option<String> {
    browser
        .js(
            "return window.sessionStorage.getItem(arguments[0]);",
            vec![json!(key)],
        )
        .await
        .expect("read sessionStorage")
        .as_str()
        .map(str::to_owned)
}

/// The journey, on a site whose pages load the snippet (by its own tag, or through the Tag
/// Manager template). Stops the app at the end.
pub(crate) async fn journey(app: TestApp, site: &Site) {
    let visitor = Browser::open().await;

    // A fresh visitor to a protected page is sent to the waiting room.
    let page = format!("{}/shop/item", site.url);
    visitor.goto(&page).await;
    assert_sent_to_waiting_room(&app, &visitor, &page).await;
    wait_position(&visitor, 1).await;
    let token = visitor
        .local_storage(&format!("qm_token_{ROOM}"))
        .await
        .expect("read the waiting page's storage")
        .expect("the waiting page holds a token");
    let places = minted(&app).await;

    // Let through: the waiting page sends them back with the pass, the snippet spends it into
    // a door session, keeps the key and takes the pass out of the address bar.
    let flushed = app
        .admin_post(&format!("/rooms/{ROOM}/flush"), json!({ "count": 1 }))
        .await;
    assert_eq!(flushed.status, 200, "{}", flushed.text);
    assert_stays(&visitor, &page, "pass", Some("passed")).await;
    let key = session_storage(&visitor, &format!("qm_sess_{ROOM}")).await;
    assert!(
        key.as_deref().is_some_and(|key| key.len() >= 16),
        "the door-session key is kept in sessionStorage: {key:?}"
    );

    // Five more pages on the door session (sent as X-QM-Session, through the CORS preflight),
    // no new place.
    for n in 1..=5 {
        let next = format!("{}/shop/page-{n}", site.url);
        visitor.goto(&next).await;
        assert_stays(&visitor, &next, "pass", Some("session")).await;
    }
    assert_eq!(
        minted(&app).await,
        places,
        "the session minted no new place"
    );
    visitor.assert_no_console_errors().await;

    // The spent pass in a copied link admits nobody, and the waiting page is asked to send
    // them back to the page without it.
    let copier = Browser::open().await;
    let other = format!("{}/shop/other", site.url);
    copier.goto(&format!("{other}?qm_token={token}")).await;
    assert_sent_to_waiting_room(&app, &copier, &other).await;
    wait_position(&copier, 1).await;
    let places = minted(&app).await;

    // An out-of-scope page never leaves the site, and mints nothing.
    let stranger = Browser::open().await;
    let about = format!("{}/about", site.url);
    stranger.goto(&about).await;
    assert_stays(&stranger, &about, "pass", Some("out_of_scope")).await;
    assert_eq!(
        minted(&app).await,
        places,
        "an out-of-scope page minted a place"
    );

    stranger.assert_no_console_errors().await;

    // A page of an unknown room stays. The server would answer pass/no_room, but a room it
    // does not know has no tag origins, so the browser keeps the answer from the page (CORS)
    // and the snippet fails open: the same verdict, reached one step earlier.
    let ghost = format!("{}/ghost/shop/item", site.url);
    stranger.goto(&ghost).await;
    assert_stays(&stranger, &ghost, "failed-open", None).await;

    // The queue server stopped: the page stays, for a visitor on a session and a fresh one.
    // Both loaded the snippet before, so their browsers run it from cache (`max-age=300`) and
    // its check fails; a browser that never loaded it loads no snippet and the page stays too.
    app.stop().await;
    let later = format!("{}/shop/page-6", site.url);
    visitor.goto(&later).await;
    assert_stays(&visitor, &later, "failed-open", None).await;
    stranger.goto(&page).await;
    assert_stays(&stranger, &page, "failed-open", None).await;
    let newcomer = Browser::open().await;
    newcomer.goto(&page).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        newcomer.current_url().await.expect("the current URL"),
        page,
        "without the snippet the page stays"
    );
    assert_eq!(
        newcomer.text("#site").await.as_deref(),
        Ok("site page /shop/item"),
        "the site's own page"
    );
}

/// The snippet's tag for a page of the test site, as the install instructions give it.
fn snippet_tag(snippet_url: &str, path: &str) -> String {
    let fail = if path.starts_with("/closed/") {
        " data-fail=\"closed\""
    } else {
        ""
    };
    let hide = if path.starts_with("/ghost/") {
        // One page hides itself until the verdict, to see the style is taken away again.
        " data-hide=\"true\""
    } else {
        ""
    };
    format!(
        "<script src=\"{snippet_url}\" data-room=\"{}\"{fail}{hide}></script>",
        room_of(path)
    )
}

async fn snippet_site(snippet_url: String) -> Site {
    Site::start(
        Arc::new(move |path: &str| snippet_tag(&snippet_url, path)),
        Vec::new(),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_snippet_carries_a_visitor_through_the_journey() {
    browser::run(180, async {
        let app = start_app().await;
        let site = snippet_site(format!("{}/snippet/latest.js", app.gateway)).await;
        prepare_room(&app, &site.url).await;
        journey(app, &site).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_snippet_hides_the_page_only_until_the_verdict_and_fails_closed_when_told() {
    browser::run(120, async {
        let app = start_app().await;
        let site = snippet_site(format!("{}/snippet/latest.js", app.gateway)).await;
        prepare_room(&app, &site.url).await;
        let browser = Browser::open().await;

        // A hidden page is shown again once the verdict is in.
        let ghost = format!("{}/ghost/about", site.url);
        browser.goto(&ghost).await;
        assert_stays(&browser, &ghost, "failed-open", None).await;
        let visibility = browser
            .js(
                "return getComputedStyle(document.documentElement).visibility;",
                vec![],
            )
            .await
            .expect("read the page's visibility");
        assert_eq!(visibility, json!("visible"), "the page is shown again");

        // One global: what the page's window has beyond a fresh frame's is QueueManager alone
        // (chromedriver's own helpers, ret_nodes and cdc_*, set by the test's own scripts).
        let added = browser
            .js(
                "var frame = document.createElement('iframe');\
                 document.body.appendChild(frame);\
                 var fresh = frame.contentWindow;\
                 var added = Object.getOwnPropertyNames(window).filter(function (name) {\
                   return !(name in fresh) && !/^\\d+$/.test(name)\
                     && name !== 'ret_nodes' && !/^\\$?cdc_/.test(name);\
                 });\
                 document.body.removeChild(frame);\
                 return added;",
                vec![],
            )
            .await
            .expect("list the page's globals");
        assert_eq!(added, json!(["QueueManager"]), "the snippet's globals");

        // The queue server stopped: a tag that says data-fail="closed" replaces the page with
        // a notice (and tries again later), instead of serving it unqueued.
        app.stop().await;
        let closed = format!("{}/closed/shop/item", site.url);
        browser.goto(&closed).await;
        assert_stays(&browser, &closed, "failed-closed", None).await;
        let notice = wait_for("the unavailable notice", SHOWN, || async {
            browser.text("#qm-unavailable").await
        })
        .await;
        assert!(notice.contains("not available"), "{notice}");
        let site_text = browser.text("#site").await;
        assert!(
            site_text.is_err(),
            "the page's own content is gone: {site_text:?}"
        );
    })
    .await;
}

#[test]
fn the_snippet_is_plain_es5_and_assigns_one_global() {
    let source = snippet_source();
    let code = super::gtm::code_only(&source);
    for modern in [
        "=>", "`", "let ", "const ", "class ", "async ", "await ", "fetch(", "...",
    ] {
        assert!(!code.contains(modern), "qm.js is ES5: it uses {modern:?}");
    }
    let assigned: Vec<&str> = code
        .split("window.")
        .skip(1)
        .filter_map(|rest| {
            let name_end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
                .unwrap_or(rest.len());
            let after = rest[name_end..].trim_start();
            (after.starts_with('=') && !after.starts_with("==")).then(|| &rest[..name_end])
        })
        .collect();
    assert_eq!(assigned, ["QueueManager"], "the one global qm.js sets");
    assert!(
        code.trim_start()
            .starts_with("(function (window, document) {"),
        "everything else lives in one function scope"
    );
    assert!(
        source.contains(&format!("var VERSION = \"{}\";", snippet_version())),
        "the snippet's version is its manifest's"
    );
}

/// The snippet's version as its manifest (connector.json) gives it.
fn snippet_version() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../connectors/snippet/connector.json"
    );
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(path).unwrap_or_else(|error| panic!("read {path}: {error}")),
    )
    .expect("connector.json is JSON");
    manifest["version"].as_str().expect("a version").to_owned()
}
