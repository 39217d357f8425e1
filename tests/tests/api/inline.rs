//! Inline mode (INLINE_HOSTS, a room's proxyOrigin) against a real origin started by the test
//! (`qm_tests::origin`): an admitted visitor's requests are forwarded (X-Forwarded-*, hop-by-hop
//! headers dropped both ways, the queue's cookies kept from the origin), a 5 MB upload and a slow
//! answer stream through, a visitor without a pass gets the waiting page in place and its
//! `/__qm` contract with cookies only, and an origin that is down answers 502 in the envelope.

use std::time::Duration;

use qm_tests::origin::TestOrigin;
use qm_tests::{Reply, SseStream, TestApp, room_body, spawn_app_with, spawn_edge, test_env};
use reqwest::header::{ACCEPT, COOKIE, HOST};
use serde_json::json;
use sha2::{Digest, Sha256};

const HOST_NAME: &str = "shop.test";
const ROOM: &str = "shop";

/// An app whose gateway stands in front of `origin` for `shop.test` (room `shop`, which lets
/// nobody through by itself), plus hosts whose rooms cannot be forwarded to.
async fn inline_app(origin: &TestOrigin) -> TestApp {
    let app = spawn_app_with(&[(
        "INLINE_HOSTS",
        "Shop.Test=shop,bare.test=bare,ghost.test=ghost,down.test=down",
    )])
    .await;
    app.create_room(room_body(ROOM, 0, json!({ "proxyOrigin": origin.url })))
        .await;
    app
}

fn on_host(app: &TestApp, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
    app.http
        .request(method, format!("{}{path}", app.gateway))
        .header(HOST, HOST_NAME)
}

/// Joins through the page's own route on the inline host; returns the Cookie header the
/// browser then holds (no token ever travels in a URL).
async fn join_inline(app: &TestApp) -> String {
    let reply = app
        .send(
            on_host(app, reqwest::Method::POST, "/__qm/api/join").json(&json!({ "roomId": ROOM })),
        )
        .await;
    assert_eq!(reply.status, 200, "inline join: {}", reply.text);
    let token = reply.cookie("qm_shop").expect("queue cookie");
    let session = reply.cookie("qms_shop").expect("ownership cookie");
    assert!(
        reply
            .set_cookies()
            .iter()
            .all(|cookie| cookie.contains("Path=/")),
        "the cookies cover the whole site"
    );
    format!("qm_shop={token}; qms_shop={session}")
}

async fn admit_everyone(app: &TestApp) {
    let flushed = app
        .admin_post(&format!("/rooms/{ROOM}/flush"), json!({ "count": 100 }))
        .await;
    assert_eq!(flushed.status, 200, "{}", flushed.text);
}

#[tokio::test]
async fn an_admitted_visitor_is_forwarded_with_forwarded_headers_and_without_queue_cookies() {
    let origin = TestOrigin::start().await;
    let app = inline_app(&origin).await;
    let cookies = join_inline(&app).await;
    admit_everyone(&app).await;

    let echoed = app
        .send(
            on_host(&app, reqwest::Method::GET, "/echo?x=1")
                .header(COOKIE, format!("{cookies}; cart=3; qm_lang=th"))
                .header("x-forwarded-for", "198.51.100.7")
                .header("connection", "x-drop-me")
                .header("x-drop-me", "1")
                .header("te", "trailers")
                .header("x-kept", "yes"),
        )
        .await;
    assert_eq!(echoed.status, 200, "{}", echoed.text);
    let headers = &echoed.body["headers"];
    assert_eq!(echoed.body["uri"], "/echo?x=1");
    assert_eq!(
        headers["x-forwarded-for"],
        json!(["198.51.100.7, 127.0.0.1"])
    );
    assert_eq!(headers["x-forwarded-proto"], json!(["http"]));
    assert_eq!(headers["x-forwarded-host"], json!([HOST_NAME]));
    assert_eq!(headers["host"], json!([origin.addr.to_string()]));
    assert_eq!(
        headers["cookie"],
        json!(["cart=3"]),
        "the queue's cookies stay here"
    );
    assert_eq!(headers["x-kept"], json!(["yes"]));
    assert!(
        headers.get("x-drop-me").is_none(),
        "named by Connection: {headers}"
    );
    assert!(headers.get("te").is_none(), "hop-by-hop: {headers}");

    // The same pass serves every later request of the page, on a pooled connection.
    for _ in 0..5 {
        let page = app
            .send(on_host(&app, reqwest::Method::GET, "/products").header(COOKIE, &cookies))
            .await;
        assert_eq!(page.status, 200);
        assert!(page.text.contains("site page /products"), "{}", page.text);
    }

    let hop = app
        .send(on_host(&app, reqwest::Method::GET, "/hop").header(COOKIE, &cookies))
        .await;
    assert_eq!(hop.text, "hop");
    assert_eq!(hop.header("x-origin-kept"), Some("1"));
    assert!(
        hop.header("x-origin-hop").is_none(),
        "named by the origin's Connection"
    );
    assert!(hop.header("keep-alive").is_none());

    // Other hosts are the gateway's own routes, untouched.
    let health = app.get(&format!("{}/healthz", app.gateway)).await;
    assert_eq!(health.status, 200);
    app.stop().await;
}

#[tokio::test]
async fn a_visitor_without_a_pass_gets_the_waiting_page_in_place_and_its_contract_under_qm() {
    let origin = TestOrigin::start().await;
    let app = inline_app(&origin).await;

    let page = app
        .send(
            on_host(&app, reqwest::Method::GET, "/products/42?colour=red")
                .header(ACCEPT, "text/html,application/xhtml+xml"),
        )
        .await;
    assert_eq!(page.status, 200, "{}", page.text);
    assert_eq!(page.header("cache-control"), Some("no-store"));
    assert!(page.text.contains("\"inline\":true"), "{}", page.text);
    assert!(page.text.contains("\"apiBase\":\"/__qm\""));
    assert!(
        !page.text.contains("site page"),
        "the origin's page is not shown"
    );
    let css = page
        .text
        .split('"')
        .find(|part| part.starts_with("/__qm/assets/waiting-") && part.ends_with(".css"))
        .expect("the stylesheet is linked under /__qm")
        .to_owned();
    let asset = app.send(on_host(&app, reqwest::Method::GET, &css)).await;
    assert_eq!(asset.status, 200);
    assert!(
        asset
            .header("content-type")
            .unwrap_or("")
            .starts_with("text/css")
    );

    // Anything but a page load is refused, not shown a page.
    let api = app
        .send(on_host(&app, reqwest::Method::GET, "/api/cart").header(ACCEPT, "application/json"))
        .await;
    assert_eq!(
        (api.status, api.code()),
        (403, "not_admitted"),
        "{}",
        api.text
    );
    let post = app
        .send(on_host(&app, reqwest::Method::POST, "/cart").header(ACCEPT, "text/html"))
        .await;
    assert_eq!((post.status, post.code()), (403, "not_admitted"));

    // The page's contract, cookies only.
    let cookies = join_inline(&app).await;
    let status = app
        .send(on_host(&app, reqwest::Method::GET, "/__qm/api/status").header(COOKIE, &cookies))
        .await;
    assert_eq!(status.status, 200, "{}", status.text);
    assert_eq!(status.body["position"], 1);
    let no_cookie = app
        .send(on_host(&app, reqwest::Method::GET, "/__qm/api/status"))
        .await;
    assert_eq!((no_cookie.status, no_cookie.code()), (401, "invalid_token"));
    // A token in the URL is ignored there: only the cookie counts.
    let token = cookies
        .split("; ")
        .find_map(|pair| pair.strip_prefix("qm_shop="))
        .expect("token")
        .to_owned();
    let in_url = app
        .send(on_host(
            &app,
            reqwest::Method::GET,
            &format!("/__qm/api/status?token={token}"),
        ))
        .await;
    assert_eq!((in_url.status, in_url.code()), (401, "invalid_token"));
    let mut stream: SseStream = SseStream::open(
        on_host(&app, reqwest::Method::GET, "/__qm/events").header(COOKIE, &cookies),
    )
    .await
    .map_err(|reply: Reply| reply.text)
    .expect("the event stream opens with cookies only");
    let frame = stream
        .next_frame(Duration::from_secs(5))
        .await
        .expect("a first frame");
    assert_eq!(frame.event, "status");
    assert_eq!(frame.data["position"], 1);
    let unknown = app
        .send(on_host(&app, reqwest::Method::GET, "/__qm/api/check"))
        .await;
    assert_eq!((unknown.status, unknown.code()), (404, "not_found"));

    // Still waiting: the page again, in place. Let through: the same URL reaches the site.
    let waiting = app
        .send(
            on_host(&app, reqwest::Method::GET, "/products/42")
                .header(ACCEPT, "text/html")
                .header(COOKIE, &cookies),
        )
        .await;
    assert!(waiting.text.contains("\"inline\":true"));
    assert_eq!(
        origin.hits(),
        0,
        "nothing reached the origin before the pass"
    );
    admit_everyone(&app).await;
    let through = app
        .send(
            on_host(&app, reqwest::Method::GET, "/products/42")
                .header(ACCEPT, "text/html")
                .header(COOKIE, &cookies),
        )
        .await;
    assert!(
        through.text.contains("site page /products/42"),
        "{}",
        through.text
    );
    app.stop().await;
}

#[tokio::test]
async fn a_five_megabyte_upload_and_a_slow_answer_stream_through() {
    let origin = TestOrigin::start().await;
    let app = inline_app(&origin).await;
    let cookies = join_inline(&app).await;
    admit_everyone(&app).await;

    let chunk: Vec<u8> = (0..64 * 1024).map(|index| (index % 251) as u8).collect();
    let chunks = 80; // 80 × 64 KiB = 5 MiB
    let mut expected = Sha256::new();
    for _ in 0..chunks {
        expected.update(&chunk);
    }
    let body_chunks = futures::stream::iter(
        (0..chunks).map(move |_| Ok::<_, std::io::Error>(bytes::Bytes::from(chunk.clone()))),
    );
    let uploaded = app
        .send(
            on_host(&app, reqwest::Method::POST, "/hash")
                .header(COOKIE, &cookies)
                .header("content-type", "application/octet-stream")
                .body(reqwest::Body::wrap_stream(body_chunks)),
        )
        .await;
    assert_eq!(uploaded.status, 200, "{}", uploaded.text);
    assert_eq!(uploaded.body["len"], 5 * 1024 * 1024);
    assert_eq!(
        uploaded.body["sha256"],
        hex::encode(expected.finalize()),
        "the origin got every byte, in order"
    );

    let mut slow = on_host(&app, reqwest::Method::GET, "/slow")
        .header(COOKIE, &cookies)
        .send()
        .await
        .expect("the slow answer starts");
    assert_eq!(slow.status(), 200);
    let first = tokio::time::timeout(Duration::from_secs(5), slow.chunk())
        .await
        .expect("the first chunk arrives while the origin still holds the last")
        .expect("readable");
    assert_eq!(first.as_deref(), Some(&b"first\n"[..]));
    origin.release_slow();
    let last = tokio::time::timeout(Duration::from_secs(5), slow.chunk())
        .await
        .expect("the last chunk follows")
        .expect("readable");
    assert_eq!(last.as_deref(), Some(&b"last\n"[..]));
    app.stop().await;
}

#[tokio::test]
async fn an_origin_that_is_down_or_a_room_that_cannot_forward_answers_in_the_envelope() {
    let origin = TestOrigin::start().await;
    let app = inline_app(&origin).await;
    // A port nothing listens on.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let closed_url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    app.create_room(room_body(
        "down",
        0,
        json!({ "proxyOrigin": closed_url, "state": "bypass" }),
    ))
    .await;
    app.create_room(room_body("bare", 0, json!({ "state": "bypass" })))
        .await;
    let ask = |host: &'static str| {
        app.http
            .get(format!("{}/anything", app.gateway))
            .header(HOST, host)
            .header(ACCEPT, "text/html")
    };
    let down = app.send(ask("down.test")).await;
    assert_eq!(
        (down.status, down.code()),
        (502, "origin_unavailable"),
        "{}",
        down.text
    );
    assert!(down.body["error"].as_str().unwrap_or("").contains("origin"));
    let bare = app.send(ask("bare.test")).await;
    assert_eq!((bare.status, bare.code()), (502, "inline_room_unavailable"));
    assert!(bare.text.contains("no proxyOrigin"), "{}", bare.text);
    let ghost = app.send(ask("ghost.test")).await;
    assert_eq!(
        (ghost.status, ghost.code()),
        (502, "inline_room_unavailable")
    );
    assert!(ghost.text.contains("does not exist"), "{}", ghost.text);

    // The site's own origin going down mid-way: the admitted visitor is told so, not hung.
    let cookies = join_inline(&app).await;
    admit_everyone(&app).await;
    origin.stop();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let gone = app
        .send(on_host(&app, reqwest::Method::GET, "/products").header(COOKIE, &cookies))
        .await;
    assert_eq!(
        (gone.status, gone.code()),
        (502, "origin_unavailable"),
        "{}",
        gone.text
    );
    app.stop().await;
}

#[tokio::test]
async fn on_backend_down_open_lets_nobody_through_while_the_backend_is_up() {
    let origin = TestOrigin::start().await;
    let app = spawn_app_with(&[("INLINE_HOSTS", "shop.test=shop")]).await;
    app.create_room(room_body(
        ROOM,
        0,
        json!({ "proxyOrigin": origin.url, "onBackendDown": "open" }),
    ))
    .await;
    let api = app
        .send(on_host(&app, reqwest::Method::GET, "/products").header(ACCEPT, "application/json"))
        .await;
    assert_eq!((api.status, api.code()), (403, "not_admitted"));
    let page = app
        .send(on_host(&app, reqwest::Method::GET, "/products").header(ACCEPT, "text/html"))
        .await;
    assert_eq!(page.status, 200);
    assert!(page.text.contains("\"inline\":true"));
    assert!(!page.text.contains("retryAfterSec"));
    assert_eq!(
        origin.hits(),
        0,
        "open only matters while the backend is down"
    );
    app.stop().await;
}

#[tokio::test]
async fn with_the_engine_unreachable_the_gate_keeps_the_site_closed() {
    let mut env = test_env();
    env.insert("INLINE_HOSTS".to_owned(), "shop.test=shop".to_owned());
    let app = spawn_edge(qm_tests::process::free_addr(), &env).await;
    let page = app
        .send(on_host(&app, reqwest::Method::GET, "/products").header(ACCEPT, "text/html"))
        .await;
    assert_eq!(page.status, 503, "{}", page.text);
    assert!(page.header("retry-after").is_some());
    assert!(page.text.contains("\"retryAfterSec\":"), "{}", page.text);
    let api = app
        .send(on_host(&app, reqwest::Method::GET, "/api/cart").header(ACCEPT, "application/json"))
        .await;
    assert_eq!(
        (api.status, api.code()),
        (503, "engine_unavailable"),
        "{}",
        api.text
    );
    app.stop().await;
}

#[tokio::test]
async fn the_no_javascript_form_joins_under_qm_and_returns_to_the_sites_page() {
    let origin = TestOrigin::start().await;
    let app = inline_app(&origin).await;
    let page = app
        .send(on_host(&app, reqwest::Method::GET, "/products/42").header(ACCEPT, "text/html"))
        .await;
    assert!(
        page.text.contains("action=\"/__qm/w\""),
        "the form posts under /__qm: {}",
        page.text
    );
    let joined = app
        .send(
            on_host(&app, reqwest::Method::POST, "/__qm/w")
                .header("sec-fetch-site", "same-origin")
                .header("referer", "http://shop.test/products/42?colour=red")
                .header("content-type", "application/x-www-form-urlencoded")
                .body(""),
        )
        .await;
    assert_eq!(joined.status, 303, "{}", joined.text);
    assert_eq!(joined.header("location"), Some("/products/42?colour=red"));
    assert!(joined.cookie("qm_shop").is_some());
    // A Referer from another host does not choose where the browser goes.
    let elsewhere = app
        .send(
            on_host(&app, reqwest::Method::POST, "/__qm/w")
                .header("sec-fetch-site", "same-origin")
                .header("referer", "https://evil.example/phish"),
        )
        .await;
    assert_eq!(elsewhere.header("location"), Some("/"));
    assert_eq!(origin.hits(), 0);
    app.stop().await;
}

/// The first page of an admitted visitor opens a door session whose key the gate keeps in the
/// HttpOnly `qm_dk_` cookie; later pages pass on the key alone (the token is spent), a copy of
/// the token without the browser's cookies is not forwarded, and an eject stops the key within
/// the gate's second of memory and clears the room's cookies.
#[tokio::test]
async fn an_inline_visitor_browses_on_a_door_session_cookie_until_ejected() {
    let origin = TestOrigin::start().await;
    let app = inline_app(&origin).await;
    let cookies = join_inline(&app).await;
    let token = cookies
        .split("; ")
        .find_map(|pair| pair.strip_prefix("qm_shop="))
        .expect("token cookie")
        .to_owned();
    admit_everyone(&app).await;

    let first = app
        .send(on_host(&app, reqwest::Method::GET, "/products").header(COOKIE, &cookies))
        .await;
    assert_eq!(first.status, 200, "{}", first.text);
    let key = first
        .cookie("qm_dk_shop")
        .expect("the first page opens a door session");
    let set = first
        .set_cookies()
        .into_iter()
        .find(|cookie| cookie.starts_with("qm_dk_shop="))
        .expect("Set-Cookie qm_dk_shop");
    assert!(set.contains("HttpOnly") && set.contains("Path=/"), "{set}");
    assert!(set.contains("Max-Age="), "{set}");

    // The key alone carries the visitor, page after page.
    let with_key = format!("qm_dk_shop={key}");
    for page in 0..20 {
        let reply = app
            .send(
                on_host(&app, reqwest::Method::GET, &format!("/page/{page}"))
                    .header(COOKIE, &with_key)
                    .header(ACCEPT, "text/html"),
            )
            .await;
        assert!(reply.text.contains("site page"), "{}", reply.text);
    }
    // The token copied into another browser (no ownership cookie, no key) is spent.
    let copied = app
        .send(
            on_host(&app, reqwest::Method::GET, "/products")
                .header(COOKIE, format!("qm_shop={token}"))
                .header(ACCEPT, "text/html"),
        )
        .await;
    assert!(
        !copied.text.contains("site page"),
        "a spent token is not forwarded"
    );
    assert!(
        copied
            .set_cookies()
            .iter()
            .any(|cookie| cookie.starts_with("qm_shop=") && cookie.contains("Max-Age=0")),
        "the dead token is cleared: {:?}",
        copied.set_cookies()
    );

    let ticket = crate::token_ticket(&token).expect("ticket");
    let ejected = app
        .admin_post(&format!("/rooms/{ROOM}/eject"), json!({ "ticket": ticket }))
        .await;
    assert_eq!(ejected.status, 200, "{}", ejected.text);
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let after = app
        .send(
            on_host(&app, reqwest::Method::GET, "/products")
                .header(COOKIE, &with_key)
                .header(ACCEPT, "text/html"),
        )
        .await;
    assert!(
        !after.text.contains("site page"),
        "an ejected session is not forwarded"
    );
    assert!(
        after
            .set_cookies()
            .iter()
            .any(|cookie| cookie.starts_with("qm_dk_shop=") && cookie.contains("Max-Age=0")),
        "the dead key is cleared: {:?}",
        after.set_cookies()
    );
}
