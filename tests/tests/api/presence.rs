//! Ghost tickets (QM-345): a pass reserves a `maxConcurrent` slot only for a holder seen within
//! `presenceSec`. Visitors who keep polling `/api/status` (or keep a stream open) hold their
//! slots; a visitor who went away is promoted in order but slotless and blocks nobody; a pass
//! whose holder was never told gives its slot back after `presenceSec`; an engine restart keeps
//! ghost passes slotless. Rooms use the shortest window (`presenceSec` 5) and a fast outflow.

use std::time::Duration;

use qm_tests::servers::ValkeyOptions;
use qm_tests::{Backing, TestApp, room_body, spawn_app, spawn_app_on};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::token_ticket;

/// A visitor's browser: its token, its cookies and the ticket the token names.
struct Visitor {
    token: String,
    cookies: String,
    ticket: u64,
}

impl Visitor {
    async fn join(app: &TestApp, room_id: &str) -> Visitor {
        let (reply, cookies) = app.join_as_new_visitor(room_id).await;
        let token = reply.body["token"].as_str().expect("a token").to_owned();
        let ticket = token_ticket(&token).expect("a ticket");
        Visitor {
            token,
            cookies,
            ticket,
        }
    }

    /// GET /api/status as this browser (token and ownership cookie): a sighting.
    async fn status(&self, app: &TestApp) -> Value {
        let reply = app
            .send(
                app.http
                    .get(format!("{}/api/status", app.gateway))
                    .query(&[("token", self.token.as_str())])
                    .header(reqwest::header::COOKIE, &self.cookies),
            )
            .await;
        assert_eq!(reply.status, 200, "status: {}", reply.text);
        reply.body
    }

    async fn passed(&self, app: &TestApp) -> bool {
        self.status(app).await["passed"] == true
    }
}

/// A paused room with one slot, the shortest presence window and a fast outflow.
async fn one_slot_room(app: &TestApp, room_id: &str, presence_sec: u64) {
    app.create_room(room_body(
        room_id,
        600,
        json!({
            "state": "paused",
            "maxConcurrent": 1,
            "presenceSec": presence_sec,
            "passedTtlSec": 600,
        }),
    ))
    .await;
}

async fn set_state(app: &TestApp, room_id: &str, state: &str) {
    let reply = app
        .admin_post(
            &format!("/rooms/{room_id}/state"),
            json!({ "state": state }),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
}

/// Polls `visitors`' status every 700 ms for `duration` (they stay present).
async fn keep_polling(app: &TestApp, visitors: &[&Visitor], duration: Duration) {
    let until = Instant::now() + duration;
    while Instant::now() < until {
        for visitor in visitors {
            visitor.status(app).await;
        }
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
}

/// Polls `visitors` every 500 ms until `watched` has passed; answers how long that took.
async fn poll_until_passed(
    app: &TestApp,
    watched: &Visitor,
    visitors: &[&Visitor],
    limit: Duration,
) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < limit {
        for visitor in visitors {
            visitor.status(app).await;
        }
        if watched.passed(app).await {
            return Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    None
}

/// The room's ghost passes and slot-holding passes, as the operator sees them.
async fn pass_counts(app: &TestApp, room_id: &str) -> (u64, u64) {
    let room = app.room(room_id).await;
    (
        room["slotlessPasses"].as_u64().unwrap_or(u64::MAX),
        room["activePasses"].as_u64().unwrap_or(u64::MAX),
    )
}

/// Three visitors in a one-slot room: `gone` stops polling at once, `kept` and `behind` keep
/// polling for longer than the presence window; then the room opens. `gone` and `kept` pass
/// in the first slice (`gone` slotless), `behind` waits for the slot `kept` holds.
async fn ghost_at_the_head(app: &TestApp, room_id: &str) -> [Visitor; 3] {
    one_slot_room(app, room_id, 5).await;
    let gone = Visitor::join(app, room_id).await;
    let kept = Visitor::join(app, room_id).await;
    let behind = Visitor::join(app, room_id).await;
    keep_polling(app, &[&kept, &behind], Duration::from_millis(6500)).await;
    set_state(app, room_id, "active").await;
    let took = poll_until_passed(app, &kept, &[&kept, &behind], Duration::from_secs(5)).await;
    assert!(took.is_some(), "the present holder behind the ghost passed");
    [gone, kept, behind]
}

#[tokio::test]
async fn an_absent_visitor_passes_slotless_in_order_and_blocks_nobody() {
    let app = spawn_app().await;
    let [gone, kept, behind] = ghost_at_the_head(&app, "ghosts").await;
    assert!(gone.ticket < kept.ticket && kept.ticket < behind.ticket);
    // The ghost passed in FIFO order (it was ahead), and it is still a pass at the door.
    let status = gone.status(&app).await;
    assert_eq!(status["passed"], true, "{status}");
    assert!(status["redirectUrl"].is_string(), "{status}");
    assert_eq!(pass_counts(&app, "ghosts").await, (1, 1));
    // The one slot is the present holder's: the visitor behind keeps waiting for it, even
    // after the ghost was told it is through.
    keep_polling(&app, &[&kept, &behind], Duration::from_secs(3)).await;
    let status = behind.status(&app).await;
    assert_eq!(status["passed"], false, "{status}");
    assert_eq!(status["position"], 1, "{status}");
    assert_eq!(pass_counts(&app, "ghosts").await, (1, 1));
}

#[tokio::test]
async fn a_pass_never_told_gives_its_slot_back_after_presence_sec() {
    let app = spawn_app().await;
    one_slot_room(&app, "untold", 5).await;
    let untold = Visitor::join(&app, "untold").await;
    let next = Visitor::join(&app, "untold").await;
    set_state(&app, "untold", "active").await;
    // The first slice admits `untold` (present: it joined just now) into the one slot; its
    // holder never asks again. `next` polls and waits until that slot comes back.
    let took = poll_until_passed(&app, &next, &[&next], Duration::from_secs(12)).await;
    let took = took.expect("the never-told pass gave its slot back");
    assert!(
        took >= Duration::from_millis(3500),
        "the slot came back only after presenceSec: {took:?}"
    );
    assert!(untold.passed(&app).await, "still usable at the door");
    assert_eq!(pass_counts(&app, "untold").await, (1, 1));
}

#[tokio::test]
async fn an_open_stream_keeps_its_holder_present() {
    let app = spawn_app().await;
    // The gateway reports open streams every 5 s heartbeat: a window of 8 s spans one.
    one_slot_room(&app, "streamed", 8).await;
    let gone = Visitor::join(&app, "streamed").await;
    let streaming = Visitor::join(&app, "streamed").await;
    let mut stream = qm_tests::SseStream::open(
        app.http
            .get(format!("{}/api/events", app.gateway))
            .query(&[("token", streaming.token.as_str())])
            .header(reqwest::header::COOKIE, &streaming.cookies),
    )
    .await
    .unwrap_or_else(|reply| panic!("stream opens: {}", reply.text));
    // Past the window with only the stream's heartbeats speaking for `streaming`.
    let until = Instant::now() + Duration::from_millis(11_000);
    while Instant::now() < until {
        stream.next_frame(Duration::from_millis(500)).await;
    }
    set_state(&app, "streamed", "active").await;
    let passed = stream
        .frame_where(Duration::from_secs(8), |frame| frame.data["passed"] == true)
        .await;
    assert!(passed.is_some(), "the streaming visitor passed");
    assert!(gone.passed(&app).await, "the ghost ahead passed too");
    assert_eq!(
        pass_counts(&app, "streamed").await.0,
        1,
        "the ghost is slotless, the streaming visitor is not"
    );
}

#[tokio::test]
async fn an_engine_restart_keeps_ghost_passes_slotless() {
    // A restart is a durable-store matter (the memory store boots empty): a private Valkey and
    // a fresh database whatever QM_TEST_STORE says.
    let backing = Backing::start(ValkeyOptions::default()).await;
    let mut app = spawn_app_on(Some(backing), &[]).await;
    let [gone, kept, behind] = ghost_at_the_head(&app, "restart").await;
    // Told after the fact: a ghost's pass stays slotless all the same.
    assert!(gone.passed(&app).await);
    assert_eq!(pass_counts(&app, "restart").await, (1, 1));

    let backing = app.backing.take();
    app.stop().await;
    let app = spawn_app_on(backing, &[]).await;
    assert_eq!(
        pass_counts(&app, "restart").await,
        (1, 1),
        "the ghost pass is still slotless after the restart"
    );
    // The slot is still `kept`'s: `behind` waits.
    keep_polling(&app, &[&behind], Duration::from_secs(3)).await;
    assert!(!behind.passed(&app).await, "the slot is still held");
    assert!(gone.passed(&app).await && kept.passed(&app).await);

    // Revoking the one slot holder frees the slot for `behind`: the ghost holds none, also
    // after the restart (were it holding one, `behind` would stay blocked).
    let ejected = app
        .admin_post("/rooms/restart/eject", json!({ "ticket": kept.ticket }))
        .await;
    assert_eq!(ejected.status, 200, "{}", ejected.text);
    let took = poll_until_passed(&app, &behind, &[&behind], Duration::from_secs(5)).await;
    assert!(took.is_some(), "the freed slot went to the visitor behind");

    // Valkey losing everything: the rebuild from the journal restores the ghost slotless.
    let mut app = app;
    let backing = app.backing.take();
    app.stop().await;
    let backing = backing.expect("durable");
    backing.valkey.flushall().await;
    let app = spawn_app_on(Some(backing), &[]).await;
    assert_eq!(
        pass_counts(&app, "restart").await.0,
        1,
        "the rebuilt room keeps the ghost slotless: {}",
        app.room("restart").await
    );
    assert!(
        gone.passed(&app).await,
        "and its pass still admits at the door"
    );
    assert!(
        pass_counts(&app, "restart").await.0 >= 1,
        "{}",
        app.room("restart").await
    );
}
