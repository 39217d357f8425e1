//! onBackendDown on the durable store: an inline host in front of a test origin, its Valkey
//! (private to this test) killed. While it is down, a `closed` room answers a visitor without a
//! pass with the waiting page in retry mode (503 + Retry-After, no place taken) or, for anything
//! but a page load, 503 `storage_unavailable`; an `open` room forwards unqueued. Valkey comes back
//! empty (no persistence): the engine loads its function library again, rebuilds both rooms
//! from the journal, and both queue again. The engine, gateway and admin run in this process.

use std::time::{Duration, Instant};

use qm_tests::origin::TestOrigin;
use qm_tests::servers::ValkeyOptions;
use qm_tests::{Backing, Reply, TestApp, room_body, spawn_app_on};
use reqwest::header::{ACCEPT, HOST};
use serde_json::json;

const TEST_LIMIT: Duration = Duration::from_secs(90);
/// How long the engine may take to notice Valkey going or coming back.
const NOTICE_WITHIN: Duration = Duration::from_secs(30);

async fn ask(app: &TestApp, host: &str, accept: &str) -> Reply {
    app.send(
        app.http
            .get(format!("{}/products", app.gateway))
            .header(HOST, host)
            .header(ACCEPT, accept),
    )
    .await
}

/// Asks until `done` holds for the answer, or fails the test after [`NOTICE_WITHIN`].
async fn until(app: &TestApp, host: &str, accept: &str, done: impl Fn(&Reply) -> bool) -> Reply {
    let deadline = Instant::now() + NOTICE_WITHIN;
    loop {
        let reply = ask(app, host, accept).await;
        if done(&reply) {
            return reply;
        }
        assert!(
            Instant::now() < deadline,
            "{host} never answered as expected; last: {} {}",
            reply.status,
            reply.text
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn is_site(reply: &Reply) -> bool {
    reply.status == 200 && reply.text.contains("site page /products")
}

fn is_waiting_page(reply: &Reply) -> bool {
    reply.status == 200 && reply.text.contains("\"inline\":true")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_shows_the_retry_page_and_open_forwards_while_valkey_is_down() {
    let test = async {
        let origin = TestOrigin::start().await;
        let backing = Backing::start(ValkeyOptions::default()).await;
        let mut app = spawn_app_on(
            Some(backing),
            &[("INLINE_HOSTS", "closed.test=closed,open.test=open")],
        )
        .await;
        for (room, mode) in [("closed", "closed"), ("open", "open")] {
            app.create_room(room_body(
                room,
                0,
                json!({ "proxyOrigin": origin.url, "onBackendDown": mode }),
            ))
            .await;
        }
        // Backend up: nobody is let through either room without a pass.
        for host in ["closed.test", "open.test"] {
            assert!(
                is_waiting_page(&ask(&app, host, "text/html").await),
                "{host}"
            );
        }
        assert_eq!(origin.hits(), 0);

        app.backing.as_mut().expect("durable").valkey.kill9();

        let retry = until(&app, "closed.test", "text/html", |reply| {
            reply.status == 503
        })
        .await;
        assert!(retry.header("retry-after").is_some(), "{:?}", retry.headers);
        assert_eq!(retry.header("cache-control"), Some("no-store"));
        assert!(retry.text.contains("\"retryAfterSec\":"), "{}", retry.text);
        assert!(retry.text.contains("\"inline\":true"));
        let api = ask(&app, "closed.test", "application/json").await;
        assert_eq!(
            (api.status, api.code()),
            (503, "storage_unavailable"),
            "{}",
            api.text
        );
        assert!(api.header("retry-after").is_some());
        assert_eq!(origin.hits(), 0, "closed kept everyone out");

        let open = until(&app, "open.test", "text/html", is_site).await;
        assert!(is_site(&open));
        assert!(is_site(&ask(&app, "open.test", "application/json").await));

        // No place was taken by the retry page.
        let room = app.room("closed").await;
        assert_eq!(room["waiting"], 0, "{room}");

        app.backing
            .as_mut()
            .expect("durable")
            .valkey
            .restart()
            .await;
        until(&app, "closed.test", "text/html", is_waiting_page).await;
        until(&app, "open.test", "text/html", is_waiting_page).await;
        app.stop().await;
    };
    if tokio::time::timeout(TEST_LIMIT, test).await.is_err() {
        panic!("the test did not finish within {TEST_LIMIT:?}");
    }
}
