//! What the processes log when something is refused or fails: a refused admin credential is a
//! warn line with the client address and the credential's kind, never the credential; every
//! `engine_unavailable` answer logs its cause (the gRPC code, message and transport error),
//! never the engine credential.

use crate::log_capture::Captured;
use qm_tests::{TEST_ADMIN_KEY, TestApp, spawn_app, spawn_edge, test_env};

#[tokio::test]
async fn a_refused_admin_credential_is_logged_without_the_credential() {
    let (captured, _guard) = Captured::start(tracing::Level::DEBUG);
    let app = spawn_app().await;
    let api = format!("{}/api/admin", app.admin);

    let bearer = app
        .send(
            app.http
                .get(format!("{api}/rooms"))
                .bearer_auth("wrong-key-AAAA-presented"),
        )
        .await;
    assert_eq!(bearer.status, 401);
    let sign_in = app
        .send(
            app.http
                .post(format!("{api}/session"))
                .header("x-qm-csrf", "1")
                .json(&serde_json::json!({ "key": "typed-wrong-key-BBBB" })),
        )
        .await;
    assert_eq!(sign_in.status, 401);
    let cookie = app
        .send(
            app.http
                .get(format!("{api}/rooms"))
                .header("cookie", "qm_console=forged-session-CCCC"),
        )
        .await;
    assert_eq!(cookie.status, 401);
    let ticket = app
        .get(&format!("{api}/events?ticket=forged-ticket-DDDD"))
        .await;
    assert_eq!(ticket.status, 401);
    // Presenting nothing is not a refused credential: the console asks before signing in.
    let nothing = app.get(&format!("{api}/session")).await;
    assert_eq!(nothing.status, 401);
    let good = app
        .send(
            app.http
                .get(format!("{api}/rooms"))
                .bearer_auth(TEST_ADMIN_KEY),
        )
        .await;
    assert_eq!(good.status, 200);
    app.stop().await;

    let logs = captured.text();
    let refused: Vec<&str> = logs
        .lines()
        .filter(|line| line.contains("admin credential refused"))
        .collect();
    assert_eq!(refused.len(), 4, "one line per refused credential:\n{logs}");
    for (line, kind) in refused.iter().zip([
        "bearer_key",
        "sign_in_key",
        "console_session",
        "event_ticket",
    ]) {
        assert!(line.contains(" WARN "), "{line}");
        assert!(
            line.contains(&format!("credential=\"{kind}\""))
                || line.contains(&format!("credential={kind}")),
            "{kind}: {line}"
        );
        assert!(line.contains("client=127.0.0.1"), "{line}");
    }
    for secret in ["AAAA", "BBBB", "CCCC", "DDDD", TEST_ADMIN_KEY] {
        assert!(!logs.contains(secret), "{secret:?} appears in the logs");
    }
}

#[tokio::test]
async fn every_engine_unavailable_logs_its_cause_without_the_credential() {
    let (captured, _guard) = Captured::start(tracing::Level::DEBUG);
    // An edge whose engine credential is wrong: the engine refuses it before any handler.
    let app = spawn_app().await;
    let mut env = test_env();
    env.insert("ENGINE_TOKEN".into(), "wrong-engine-token-EEEE-0123".into());
    let edge = spawn_edge(app.engine_addr, &env).await;
    answers_engine_unavailable_until_logged(&edge, &captured, "Unauthenticated").await;
    edge.stop().await;

    // An edge whose engine is not there at all: the transport error is the cause. The port is
    // held by a bound socket that never listens, so a connect is refused and no parallel test
    // can be handed the same port (a freed one was, once, and the edge reached its server).
    let gone = tokio::net::TcpSocket::new_v4().expect("a socket");
    gone.bind("127.0.0.1:0".parse().expect("an address"))
        .expect("bind");
    let gone_addr = gone.local_addr().expect("address");
    let edge = spawn_edge(gone_addr, &test_env()).await;
    answers_engine_unavailable_until_logged(&edge, &captured, "Unavailable").await;
    edge.stop().await;
    drop(gone);
    app.stop().await;

    let logs = captured.text();
    let causes: Vec<&str> = logs
        .lines()
        .filter(|line| line.contains("engine unavailable"))
        .collect();
    assert!(
        causes.iter().any(|line| line.contains("Unauthenticated")),
        "the refused credential is the logged cause:\n{logs}"
    );
    assert!(
        causes
            .iter()
            .any(|line| line.contains("Unavailable") && line.to_lowercase().contains("connect")),
        "the transport error is the logged cause:\n{logs}"
    );
    for secret in ["EEEE", "integration-test-secret", TEST_ADMIN_KEY] {
        assert!(!logs.contains(secret), "{secret:?} appears in the logs");
    }
}

/// Asks `edge` for the room list, which answers 503 `engine_unavailable`, until a line of that
/// cause with `code` is captured. The cause is logged once a second per gRPC code, process-wide,
/// so another test's failure in the same second may have taken this second's line.
async fn answers_engine_unavailable_until_logged(edge: &TestApp, captured: &Captured, code: &str) {
    for _ in 0..3 {
        let answer = edge
            .send(
                edge.http
                    .get(format!("{}/api/admin/rooms", edge.admin))
                    .bearer_auth(TEST_ADMIN_KEY),
            )
            .await;
        assert_eq!((answer.status, answer.code()), (503, "engine_unavailable"));
        let logged = captured
            .text()
            .lines()
            .any(|line| line.contains("engine unavailable") && line.contains(code));
        if logged {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    }
}
