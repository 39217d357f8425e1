//! Two admin processes behind no sticky routing, each on its own engine, both engines on one
//! Valkey and one Postgres: a console signed in through one admin process is signed in on the
//! other, an event-stream ticket minted on one opens the stream on the other and is spent for
//! both, and signing out on one signs the console out everywhere. Sessions and tickets are
//! records the engines keep in Postgres (`admin_records`), not in any admin process's memory.

use std::time::Duration;

use qm_tests::process::{AdminProcess, EngineProcess, free_addr};
use qm_tests::servers::ValkeyOptions;
use qm_tests::{Backing, TEST_ADMIN_KEY, test_env};
use reqwest::StatusCode;
use serde_json::{Value, json};

const TEST_LIMIT: Duration = Duration::from_secs(120);

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("the http client builds")
}

/// The `qm_console=…` pair of a sign-in answer's Set-Cookie.
fn console_cookie(response: &reqwest::Response) -> String {
    let set_cookie = response
        .headers()
        .get(reqwest::header::SET_COOKIE)
        .and_then(|value| value.to_str().ok())
        .expect("the sign-in sets the console cookie");
    set_cookie
        .split(';')
        .next()
        .expect("a name=value pair")
        .to_owned()
}

async fn who(admin: &AdminProcess, cookie: &str) -> StatusCode {
    client()
        .get(format!("{}/api/admin/session", admin.url()))
        .header(reqwest::header::COOKIE, cookie)
        .send()
        .await
        .expect("the admin process answers")
        .status()
}

async fn mint_ticket(admin: &AdminProcess, cookie: &str) -> String {
    let minted: Value = client()
        .post(format!("{}/api/admin/sse-ticket", admin.url()))
        .header(reqwest::header::COOKIE, cookie)
        .header("X-QM-CSRF", "1")
        .send()
        .await
        .expect("the admin process answers")
        .json()
        .await
        .expect("a JSON ticket");
    minted["ticket"]
        .as_str()
        .unwrap_or_else(|| panic!("a ticket: {minted}"))
        .to_owned()
}

/// Opens the event stream with a ticket; answers the status (the body is left unread).
async fn open_stream(admin: &AdminProcess, ticket: &str) -> StatusCode {
    client()
        .get(format!("{}/api/admin/events?ticket={ticket}", admin.url()))
        .send()
        .await
        .expect("the admin process answers")
        .status()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_and_tickets_hold_on_whichever_admin_process_a_request_reaches() {
    tokio::time::timeout(TEST_LIMIT, shared_sessions())
        .await
        .expect("the admin-instances test finishes within its limit");
}

async fn shared_sessions() {
    let backing = Backing::start(ValkeyOptions { aof: false }).await;
    let mut env = test_env();
    env.extend(backing.env());
    let qm = env!("CARGO_BIN_EXE_qm");
    let engine_a = EngineProcess::start(qm, &env, free_addr()).await;
    let engine_b = EngineProcess::start(qm, &env, free_addr()).await;
    let admin_a = AdminProcess::start(qm, &env, engine_a.addr(), free_addr().port()).await;
    let admin_b = AdminProcess::start(qm, &env, engine_b.addr(), free_addr().port()).await;

    let signed_in = client()
        .post(format!("{}/api/admin/session", admin_a.url()))
        .header("X-QM-CSRF", "1")
        .json(&json!({ "key": TEST_ADMIN_KEY }))
        .send()
        .await
        .expect("the admin process answers");
    assert_eq!(signed_in.status(), 200, "sign-in through admin A");
    let cookie = console_cookie(&signed_in);

    // The session opened on A is known on B, and a console call through B acts.
    assert_eq!(who(&admin_a, &cookie).await, 200);
    assert_eq!(who(&admin_b, &cookie).await, 200, "B knows A's session");
    let created = client()
        .post(format!("{}/api/admin/rooms", admin_b.url()))
        .header(reqwest::header::COOKIE, &cookie)
        .header("X-QM-CSRF", "1")
        .json(&json!({ "id": "shared", "targetUrl": "https://shop.example/", "ratePerMinute": 10 }))
        .send()
        .await
        .expect("the admin process answers");
    assert_eq!(
        created.status(),
        200,
        "a console call through B with A's cookie"
    );

    // A ticket minted through B opens the stream on A, once: B cannot spend it again.
    let ticket = mint_ticket(&admin_b, &cookie).await;
    assert_eq!(
        open_stream(&admin_a, &ticket).await,
        200,
        "A redeems B's ticket"
    );
    assert_eq!(
        open_stream(&admin_b, &ticket).await,
        401,
        "a spent ticket is spent on every admin process"
    );
    // Two instances redeeming one ticket at the same moment: exactly one stream opens.
    let ticket = mint_ticket(&admin_a, &cookie).await;
    let (on_a, on_b) = tokio::join!(
        open_stream(&admin_a, &ticket),
        open_stream(&admin_b, &ticket)
    );
    let mut statuses = [on_a.as_u16(), on_b.as_u16()];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 401], "one redemption wins");

    // Signing out through B ends the session on A too, and a ticket it minted dies with it.
    let unspent = mint_ticket(&admin_a, &cookie).await;
    let signed_out = client()
        .delete(format!("{}/api/admin/session", admin_b.url()))
        .header(reqwest::header::COOKIE, &cookie)
        .header("X-QM-CSRF", "1")
        .send()
        .await
        .expect("the admin process answers");
    assert_eq!(signed_out.status(), 200);
    let body: Value = signed_out.json().await.expect("a JSON body");
    assert_eq!(body["revoked"], true, "{body}");
    assert_eq!(who(&admin_a, &cookie).await, 401, "signed out everywhere");
    assert_eq!(who(&admin_b, &cookie).await, 401);
    assert_eq!(
        open_stream(&admin_a, &unspent).await,
        401,
        "a ticket dies with the session that minted it"
    );

    // Sessions outlive the admin process that opened them: a console signs in through B, A is
    // killed, and a new admin process started in its place knows the console.
    let signed_in = client()
        .post(format!("{}/api/admin/session", admin_b.url()))
        .header("X-QM-CSRF", "1")
        .json(&json!({ "key": TEST_ADMIN_KEY }))
        .send()
        .await
        .expect("the admin process answers");
    let cookie = console_cookie(&signed_in);
    let mut admin_a = admin_a;
    admin_a.kill9();
    let admin_c = AdminProcess::start(qm, &env, engine_a.addr(), free_addr().port()).await;
    assert_eq!(
        who(&admin_c, &cookie).await,
        200,
        "a new admin process knows it"
    );
}

/// The credential lockout counts wrong credentials across admin processes: an address that
/// spreads its guesses over both reaches the limit once, and is then refused by both, a right
/// key too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_credential_lockout_counts_guesses_spread_over_admin_processes() {
    tokio::time::timeout(TEST_LIMIT, shared_lockout())
        .await
        .expect("the shared-lockout test finishes within its limit");
}

async fn shared_lockout() {
    const LIMIT: usize = 5;
    let backing = Backing::start(ValkeyOptions { aof: false }).await;
    let mut env = test_env();
    env.extend(backing.env());
    env.insert("ADMIN_AUTH_FAIL_PER_MIN".to_owned(), LIMIT.to_string());
    let qm = env!("CARGO_BIN_EXE_qm");
    let engine_a = EngineProcess::start(qm, &env, free_addr()).await;
    let engine_b = EngineProcess::start(qm, &env, free_addr()).await;
    let admins = [
        AdminProcess::start(qm, &env, engine_a.addr(), free_addr().port()).await,
        AdminProcess::start(qm, &env, engine_b.addr(), free_addr().port()).await,
    ];
    let rooms = |admin: &AdminProcess, key: &str| {
        client()
            .get(format!("{}/api/admin/rooms", admin.url()))
            .bearer_auth(key)
            .send()
    };
    // Guesses alternate between the two: neither alone sees the limit.
    for guess in 0..LIMIT {
        let admin = &admins[guess % 2];
        let answer = rooms(admin, "a-wrong-key-0123").await.expect("an answer");
        assert_eq!(
            answer.status(),
            401,
            "guess {guess} is refused, not yet locked out"
        );
    }
    for admin in &admins {
        let answer = rooms(admin, TEST_ADMIN_KEY).await.expect("an answer");
        assert_eq!(
            answer.status(),
            429,
            "the address is locked out on every admin process, the right key too"
        );
        let body: Value = answer.json().await.expect("a JSON refusal");
        assert_eq!(body["code"], "too_many_auth_failures", "{body}");
    }
}
