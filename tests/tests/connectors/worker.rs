//! The Cloudflare Worker (`connectors/worker/worker.js`) in workerd, Cloudflare's own runtime,
//! in front of a test origin: the shared journey, failing closed when told to, the one-time
//! fall back from `/api/v1` to `/api` on an old server, and what it sends the door check.

mod workerd;

use qm_tests::origin::TestOrigin;

use crate::journey::{self, API_KEY, GHOST_ROOM, ROOM};
use crate::support::{self, RuntimeChild, StandInServer};
use workerd::WorkerConfig;

/// The Worker for `room_id` on `server`, in front of `origin`.
async fn worker(
    server: &str,
    room_id: &str,
    origin: &TestOrigin,
    fail_mode: Option<&str>,
) -> RuntimeChild {
    workerd::start(WorkerConfig {
        server,
        room_id,
        api_key: API_KEY,
        fail_mode,
        timeout_ms: None,
        origin: origin.addr,
    })
    .await
}

#[tokio::test]
async fn the_worker_carries_a_visitor_through_the_journey() {
    let app = journey::start_app().await;
    let origin = TestOrigin::start().await;
    let site = worker(&app.gateway, ROOM, &origin, None).await;
    let ghost = worker(&app.gateway, GHOST_ROOM, &origin, None).await;
    journey::prepare_room(&app, &site.url).await;
    journey::run(app, &site.url, &ghost.url, true).await;
}

#[tokio::test]
async fn the_worker_fails_closed_when_told_to_and_the_server_cannot_answer() {
    let origin = TestOrigin::start().await;
    // Nothing listens on this address: the queue server is down.
    let down = format!("http://{}", qm_tests::process::free_addr());
    let closed = worker(&down, ROOM, &origin, Some("closed")).await;
    let answer = journey::visit(&format!("{}/shop/item", closed.url), None).await;
    assert_eq!(
        answer.status,
        503,
        "failMode closed, the server down: {}",
        closed.log_tail()
    );
    assert_eq!(answer.cache_control.as_deref(), Some("no-store"));
    let retry_after = retry_after(&closed.url).await;
    assert_eq!(retry_after.as_deref(), Some("30"));
    assert_eq!(
        origin.hits(),
        0,
        "a closed connector keeps visitors off the site"
    );

    // A server that answers, but not the check (a 502 page from a proxy): the same.
    let broken = StandInServer::broken().await;
    let closed = worker(&broken.url, ROOM, &origin, Some("closed")).await;
    let answer = journey::visit(&format!("{}/shop/item", closed.url), None).await;
    assert_eq!(answer.status, 503, "failMode closed, the server broken");
    // And by default the broken server fails open.
    let open = worker(&broken.url, ROOM, &origin, None).await;
    let answer = journey::visit(&format!("{}/shop/item", open.url), None).await;
    assert!(
        journey::served(&answer, "/shop/item"),
        "failMode open, the server broken: {} {}",
        answer.status,
        answer.body
    );
}

/// The `Retry-After` a fresh visitor to `/shop/item` on `site` is answered with.
async fn retry_after(site: &str) -> Option<String> {
    let response = reqwest::get(format!("{site}/shop/item"))
        .await
        .expect("the Worker answers");
    response
        .headers()
        .get("retry-after")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
}

#[tokio::test]
async fn the_worker_falls_back_to_api_once_on_an_old_server_and_vouches_for_the_visitor() {
    let app = journey::start_app().await;
    let origin = TestOrigin::start().await;
    let old = StandInServer::old_release(&app.gateway).await;
    let site = worker(&old.url, ROOM, &origin, None).await;
    journey::prepare_room(&app, &site.url).await;

    support::assert_falls_back_once(&old, &site.url, || site.log_tail()).await;

    // Cloudflare names the visitor's address in CF-Connecting-IP; the Worker vouches for it.
    reqwest::Client::new()
        .get(format!("{}/about", site.url))
        .header("cf-connecting-ip", "203.0.113.7")
        .send()
        .await
        .expect("the Worker answers");
    let checks = old.seen_on("/api/check");
    assert_eq!(
        checks.last().and_then(|seen| seen.param("ip")),
        Some("203.0.113.7")
    );
    support::assert_key_never_in_a_url(&old);
}
