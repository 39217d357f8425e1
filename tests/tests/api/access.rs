//! Operators, monitor tokens and the audit trail through the engine's gRPC API, on the store
//! `QM_TEST_STORE` names (memory or Valkey + Postgres), and what an engine restart keeps: all
//! of it on the durable store, none of it on the memory store.

use qm_core::{ApiError, ErrorCode};
use qm_proto::engine::find_credential_reply::Found;
use qm_proto::{
    AuditEntry, CreateMonitorTokenRequest, CreateOperatorRequest, EngineClient,
    FindCredentialRequest, ListAuditRequest, ListMonitorTokensRequest, ListOperatorsRequest,
    RevokeMonitorTokensRequest, RevokeOperatorRequest,
};
use qm_tests::servers::ValkeyOptions;
use qm_tests::{Backing, spawn_app, spawn_app_on, spawn_app_with};

fn verifier(tag: u8) -> Vec<u8> {
    vec![tag; 32]
}

fn code<T: std::fmt::Debug>(result: Result<T, ApiError>) -> ErrorCode {
    result.expect_err("refused").code
}

async fn create_operator(
    engine: &mut EngineClient,
    name: &str,
    role: &str,
    tags: &[u8],
) -> Result<qm_proto::Operator, ApiError> {
    engine
        .create_operator(CreateOperatorRequest {
            name: name.to_owned(),
            role: role.to_owned(),
            verifiers: tags.iter().copied().map(verifier).collect(),
            created_by: "owner".to_owned(),
        })
        .await
        .map(|reply| reply.into_inner())
        .map_err(|status| ApiError::from_status(&status))
}

async fn find(engine: &mut EngineClient, tags: &[u8]) -> Option<Found> {
    engine
        .find_credential(FindCredentialRequest {
            verifiers: tags.iter().copied().map(verifier).collect(),
        })
        .await
        .expect("find answers")
        .into_inner()
        .found
}

async fn operators(engine: &mut EngineClient) -> Vec<qm_proto::Operator> {
    engine
        .list_operators(ListOperatorsRequest {})
        .await
        .expect("list answers")
        .into_inner()
        .operators
}

async fn monitor_tokens(engine: &mut EngineClient) -> Vec<qm_proto::MonitorToken> {
    engine
        .list_monitor_tokens(ListMonitorTokensRequest {})
        .await
        .expect("list answers")
        .into_inner()
        .tokens
}

async fn create_monitor(
    engine: &mut EngineClient,
    label: &str,
    tag: u8,
    expires_at_ms: i64,
) -> Result<qm_proto::MonitorToken, ApiError> {
    engine
        .create_monitor_token(CreateMonitorTokenRequest {
            label: label.to_owned(),
            verifiers: vec![verifier(tag)],
            created_by: "ann".to_owned(),
            expires_at_ms,
        })
        .await
        .map(|reply| reply.into_inner())
        .map_err(|status| ApiError::from_status(&status))
}

fn audit(action: &str, room_id: &str, actor: &str, at_ms: i64) -> AuditEntry {
    AuditEntry {
        at_ms,
        actor_kind: "operator".to_owned(),
        actor_id: format!("op_{actor}"),
        actor_name: actor.to_owned(),
        action: action.to_owned(),
        room_id: room_id.to_owned(),
        route: "POST /api/admin/rooms/:id/rate".to_owned(),
        summary: r#"{"ratePerMinute":60}"#.to_owned(),
        client: "192.0.2.7".to_owned(),
        status: 200,
        ..AuditEntry::default()
    }
}

async fn append(engine: &mut EngineClient, entry: AuditEntry) -> u64 {
    engine
        .append_audit(entry)
        .await
        .expect("append answers")
        .into_inner()
        .id
}

async fn list_audit(
    engine: &mut EngineClient,
    request: ListAuditRequest,
) -> qm_proto::ListAuditReply {
    engine
        .list_audit(request)
        .await
        .expect("list answers")
        .into_inner()
}

fn ids(reply: &qm_proto::ListAuditReply) -> Vec<u64> {
    reply.entries.iter().map(|entry| entry.id).collect()
}

#[tokio::test]
async fn operators_are_created_found_listed_and_revoked_at_once() {
    let app = spawn_app().await;
    let mut engine = app.engine();
    let ann = create_operator(&mut engine, "Ann", "operator", &[1, 2])
        .await
        .expect("created");
    assert!(ann.id.starts_with("op_"), "{ann:?}");
    assert_eq!((ann.name.as_str(), ann.role.as_str()), ("Ann", "operator"));
    assert_eq!(ann.created_by, "owner");
    assert!(ann.created_at_ms > 0);
    let bob = create_operator(&mut engine, "bob", "viewer", &[3])
        .await
        .expect("created");

    assert_eq!(operators(&mut engine).await, vec![ann.clone(), bob.clone()]);
    // Any verifier of the keyring finds it (a rotation keeps keys working).
    assert_eq!(
        find(&mut engine, &[2]).await,
        Some(Found::Operator(ann.clone()))
    );
    assert_eq!(
        find(&mut engine, &[9, 1]).await,
        Some(Found::Operator(ann.clone()))
    );
    assert_eq!(find(&mut engine, &[9]).await, None);

    let refused = create_operator(&mut engine, "ANN", "viewer", &[4]).await;
    assert_eq!(code(refused), ErrorCode::OperatorExists);
    let refused = create_operator(&mut engine, "carol", "admin", &[5]).await;
    assert_eq!(code(refused), ErrorCode::InvalidRole);
    let refused = create_operator(&mut engine, "", "viewer", &[5]).await;
    assert_eq!(code(refused), ErrorCode::InvalidOperatorName);
    let refused = create_operator(&mut engine, &"x".repeat(65), "viewer", &[5]).await;
    assert_eq!(code(refused), ErrorCode::InvalidOperatorName);

    let revoked = engine
        .revoke_operator(RevokeOperatorRequest { id: ann.id.clone() })
        .await
        .expect("revoked")
        .into_inner();
    assert_eq!(revoked.operator, Some(ann.clone()));
    assert_eq!(
        find(&mut engine, &[1]).await,
        None,
        "revoked: never found again"
    );
    assert_eq!(find(&mut engine, &[2]).await, None);
    assert_eq!(operators(&mut engine).await, vec![bob.clone()]);
    let again = engine
        .revoke_operator(RevokeOperatorRequest { id: ann.id.clone() })
        .await
        .map_err(|status| ApiError::from_status(&status));
    assert_eq!(code(again), ErrorCode::OperatorNotFound);
    // The name is free again; the new operator is somebody else.
    let ann_again = create_operator(&mut engine, "ann", "viewer", &[6])
        .await
        .expect("created");
    assert_ne!(ann_again.id, ann.id);
    assert_eq!(find(&mut engine, &[1]).await, None);
}

#[tokio::test]
async fn monitor_tokens_are_created_listed_and_revoked_one_or_all() {
    let app = spawn_app().await;
    let mut engine = app.engine();
    let now = qm_core::clock::now_ms();
    let wall = create_monitor(&mut engine, "ops wall", 1, 0)
        .await
        .expect("created");
    assert!(wall.id.starts_with("mt_"));
    assert_eq!(
        (wall.label.as_str(), wall.created_by.as_str()),
        ("ops wall", "ann")
    );
    let brief = create_monitor(&mut engine, "", 2, now + 1500)
        .await
        .expect("created");
    let third = create_monitor(&mut engine, "tv", 3, 0)
        .await
        .expect("created");
    assert_eq!(
        monitor_tokens(&mut engine).await,
        vec![wall.clone(), brief.clone(), third.clone()]
    );
    assert_eq!(
        find(&mut engine, &[2]).await,
        Some(Found::Monitor(brief.clone()))
    );

    let past = create_monitor(&mut engine, "", 4, now - 1).await;
    assert_eq!(code(past), ErrorCode::InvalidExpiry);

    // Expired: no longer found or listed.
    tokio::time::sleep(std::time::Duration::from_millis(1600)).await;
    assert_eq!(find(&mut engine, &[2]).await, None);
    assert_eq!(
        monitor_tokens(&mut engine).await,
        vec![wall.clone(), third.clone()]
    );

    let one = engine
        .revoke_monitor_tokens(RevokeMonitorTokensRequest {
            id: wall.id.clone(),
            all: false,
        })
        .await
        .expect("revoked")
        .into_inner();
    assert_eq!(one.revoked, 1);
    assert_eq!(find(&mut engine, &[1]).await, None);
    let unknown = engine
        .revoke_monitor_tokens(RevokeMonitorTokensRequest {
            id: wall.id.clone(),
            all: false,
        })
        .await
        .map_err(|status| ApiError::from_status(&status));
    assert_eq!(code(unknown), ErrorCode::MonitorTokenNotFound);

    create_monitor(&mut engine, "", 5, 0)
        .await
        .expect("created");
    let all = engine
        .revoke_monitor_tokens(RevokeMonitorTokensRequest {
            id: String::new(),
            all: true,
        })
        .await
        .expect("revoked")
        .into_inner();
    assert_eq!(all.revoked, 2);
    assert!(monitor_tokens(&mut engine).await.is_empty());
    assert_eq!(find(&mut engine, &[3]).await, None);
    assert_eq!(find(&mut engine, &[5]).await, None);
}

#[tokio::test]
async fn the_audit_trail_appends_and_lists_newest_first_filtered_and_paged() {
    let app = spawn_app().await;
    let mut engine = app.engine();
    let mut appended = Vec::new();
    for at in 1..=12 {
        let room = if at % 2 == 0 { "even" } else { "odd" };
        let actor = if at <= 6 { "ann" } else { "bob" };
        let action = if at % 3 == 0 {
            "room.state"
        } else {
            "room.rate"
        };
        appended.push(append(&mut engine, audit(action, room, actor, at * 1000)).await);
    }
    assert!(
        appended.windows(2).all(|pair| pair[0] < pair[1]),
        "ids increase: {appended:?}"
    );
    let newest_first: Vec<u64> = appended.iter().rev().copied().collect();
    let all = list_audit(&mut engine, ListAuditRequest::default()).await;
    assert_eq!(ids(&all), newest_first);
    assert_eq!(all.next_before_id, 0);
    let first = &all.entries[all.entries.len() - 1];
    assert_eq!(first.at_ms, 1000);
    assert_eq!(first.route, "POST /api/admin/rooms/:id/rate");
    assert_eq!(first.summary, r#"{"ratePerMinute":60}"#);
    assert_eq!((first.client.as_str(), first.status), ("192.0.2.7", 200));
    assert_eq!(first.actor_kind, "operator");

    let pick =
        |positions: &[usize]| -> Vec<u64> { positions.iter().map(|at| appended[at - 1]).collect() };
    let room = list_audit(
        &mut engine,
        ListAuditRequest {
            room_id: "even".to_owned(),
            ..ListAuditRequest::default()
        },
    )
    .await;
    assert_eq!(ids(&room), pick(&[12, 10, 8, 6, 4, 2]));
    let by_name = list_audit(
        &mut engine,
        ListAuditRequest {
            operator: "ann".to_owned(),
            ..ListAuditRequest::default()
        },
    )
    .await;
    assert_eq!(ids(&by_name), pick(&[6, 5, 4, 3, 2, 1]));
    let by_id = list_audit(
        &mut engine,
        ListAuditRequest {
            operator: "op_bob".to_owned(),
            action: "room.state".to_owned(),
            ..ListAuditRequest::default()
        },
    )
    .await;
    assert_eq!(ids(&by_id), pick(&[12, 9]));
    let window = list_audit(
        &mut engine,
        ListAuditRequest {
            since_ms: 4000,
            until_ms: 7000,
            ..ListAuditRequest::default()
        },
    )
    .await;
    assert_eq!(ids(&window), pick(&[7, 6, 5, 4]));
    let backwards = engine
        .list_audit(ListAuditRequest {
            since_ms: 7000,
            until_ms: 4000,
            ..ListAuditRequest::default()
        })
        .await
        .map_err(|status| ApiError::from_status(&status));
    assert_eq!(code(backwards), ErrorCode::InvalidAuditQuery);

    let mut paged = Vec::new();
    let mut before_id = 0;
    let mut pages = 0;
    loop {
        let page = list_audit(
            &mut engine,
            ListAuditRequest {
                limit: 5,
                before_id,
                ..ListAuditRequest::default()
            },
        )
        .await;
        pages += 1;
        assert!(page.entries.len() <= 5);
        paged.extend(ids(&page));
        if page.next_before_id == 0 {
            break;
        }
        before_id = page.next_before_id;
    }
    assert_eq!((paged, pages), (newest_first, 3));

    // Paging keeps the filters: one room, two a page.
    let mut paged = Vec::new();
    let mut before_id = 0;
    loop {
        let page = list_audit(
            &mut engine,
            ListAuditRequest {
                room_id: "odd".to_owned(),
                limit: 2,
                before_id,
                ..ListAuditRequest::default()
            },
        )
        .await;
        paged.extend(ids(&page));
        if page.next_before_id == 0 {
            break;
        }
        before_id = page.next_before_id;
    }
    assert_eq!(paged, pick(&[11, 9, 7, 5, 3, 1]));
}

#[tokio::test]
async fn the_audit_list_answers_at_most_500_and_100_by_default() {
    let app = spawn_app().await;
    let mut engine = app.engine();
    for at in 1..=520 {
        append(&mut engine, audit("room.rate", "r", "ann", at)).await;
    }
    let default = list_audit(&mut engine, ListAuditRequest::default()).await;
    assert_eq!(default.entries.len(), 100);
    assert_eq!(default.next_before_id, default.entries[99].id);
    let capped = list_audit(
        &mut engine,
        ListAuditRequest {
            limit: 1000,
            ..ListAuditRequest::default()
        },
    )
    .await;
    assert_eq!(capped.entries.len(), 500);
    assert_ne!(capped.next_before_id, 0);
}

/// Fills a fresh engine with one operator, one monitor token and two audit entries.
async fn populate(engine: &mut EngineClient) -> (qm_proto::Operator, qm_proto::MonitorToken) {
    let ann = create_operator(engine, "ann", "operator", &[1])
        .await
        .expect("created");
    let gone = create_operator(engine, "gone", "viewer", &[2])
        .await
        .expect("created");
    engine
        .revoke_operator(RevokeOperatorRequest { id: gone.id })
        .await
        .expect("revoked");
    let wall = create_monitor(engine, "wall", 3, 0).await.expect("created");
    append(engine, audit("operator.create", "", "owner", 1)).await;
    append(engine, audit("room.rate", "r", "ann", 2)).await;
    (ann, wall)
}

#[tokio::test]
async fn operators_tokens_and_the_trail_survive_an_engine_restart_on_the_durable_store() {
    let backing = Backing::start(ValkeyOptions::default()).await;
    let mut app = spawn_app_on(Some(backing), &[]).await;
    let mut engine = app.engine();
    let (ann, wall) = populate(&mut engine).await;
    let before = list_audit(&mut engine, ListAuditRequest::default()).await;
    assert_eq!(before.entries.len(), 2);

    let backing = app.backing.take();
    app.stop().await;
    let app = spawn_app_on(backing, &[]).await;
    let mut engine = app.engine();
    assert_eq!(operators(&mut engine).await, vec![ann.clone()]);
    assert_eq!(find(&mut engine, &[1]).await, Some(Found::Operator(ann)));
    assert_eq!(find(&mut engine, &[2]).await, None, "still revoked");
    assert_eq!(monitor_tokens(&mut engine).await, vec![wall.clone()]);
    assert_eq!(find(&mut engine, &[3]).await, Some(Found::Monitor(wall)));
    let after = list_audit(&mut engine, ListAuditRequest::default()).await;
    assert_eq!(after.entries, before.entries);
    let next = append(&mut engine, audit("room.state", "r", "ann", 3)).await;
    assert!(
        next > before.entries[0].id,
        "ids keep increasing after the restart"
    );
}

#[tokio::test]
async fn a_memory_engine_restarts_with_no_operators_tokens_or_trail() {
    let app = spawn_app_with(&[("STORE", "memory")]).await;
    let mut engine = app.engine();
    populate(&mut engine).await;
    app.stop().await;
    let app = spawn_app_with(&[("STORE", "memory")]).await;
    let mut engine = app.engine();
    assert!(operators(&mut engine).await.is_empty());
    assert!(monitor_tokens(&mut engine).await.is_empty());
    assert_eq!(find(&mut engine, &[1]).await, None);
    let trail = list_audit(&mut engine, ListAuditRequest::default()).await;
    assert!(trail.entries.is_empty());
}

/// Two engines on one database: a revocation through one holds on the other at once.
#[tokio::test]
async fn a_revocation_holds_on_every_engine_of_the_durable_store_at_once() {
    let backing = Backing::start(ValkeyOptions::default()).await;
    let env = backing.env();
    let first = spawn_app_on(Some(backing), &[]).await;
    let overrides: Vec<(&str, &str)> = env
        .iter()
        .map(|(key, value)| (key.as_str(), value.as_str()))
        .collect();
    let second = spawn_app_on(None, &overrides).await;
    let (mut one, mut two) = (first.engine(), second.engine());
    let ann = create_operator(&mut one, "ann", "operator", &[1])
        .await
        .expect("created");
    create_monitor(&mut one, "wall", 2, 0)
        .await
        .expect("created");
    assert_eq!(
        find(&mut two, &[1]).await,
        Some(Found::Operator(ann.clone()))
    );
    assert!(find(&mut two, &[2]).await.is_some());
    two.revoke_operator(RevokeOperatorRequest { id: ann.id })
        .await
        .expect("revoked");
    two.revoke_monitor_tokens(RevokeMonitorTokensRequest {
        id: String::new(),
        all: true,
    })
    .await
    .expect("revoked");
    assert_eq!(find(&mut one, &[1]).await, None);
    assert_eq!(find(&mut one, &[2]).await, None);
    let refused = create_operator(&mut two, "ANN", "viewer", &[3]).await;
    assert!(refused.is_ok(), "the name is free on both");
    let again = create_operator(&mut one, "ann", "viewer", &[4]).await;
    assert_eq!(code(again), ErrorCode::OperatorExists);
}

/// The trail is append-only in the database itself, whatever a stray statement tries.
#[tokio::test]
async fn the_durable_trail_refuses_update_delete_and_truncate() {
    let backing = Backing::start(ValkeyOptions::default()).await;
    let database = backing.database.url();
    let app = spawn_app_on(Some(backing), &[]).await;
    let mut engine = app.engine();
    append(&mut engine, audit("room.rate", "r", "ann", 1)).await;
    let mut connection = <sqlx::PgConnection as sqlx::Connection>::connect(&database)
        .await
        .expect("connect to the test database");
    for statement in [
        "UPDATE audit SET action = 'nothing'",
        "DELETE FROM audit",
        "TRUNCATE audit",
    ] {
        let error = sqlx::query(statement)
            .execute(&mut connection)
            .await
            .expect_err(statement);
        assert!(
            error.to_string().contains("append-only"),
            "{statement}: {error}"
        );
    }
    let trail = list_audit(&mut engine, ListAuditRequest::default()).await;
    assert_eq!(trail.entries.len(), 1);
    assert_eq!(trail.entries[0].action, "room.rate");
}

#[tokio::test]
async fn operators_are_listed_in_the_order_they_were_created() {
    let app = spawn_app().await;
    let mut engine = app.engine();
    let mut made = Vec::new();
    for tag in 1..=12u8 {
        let name = format!("op {tag}");
        made.push(
            create_operator(&mut engine, &name, "viewer", &[tag])
                .await
                .expect("created"),
        );
    }
    assert_eq!(operators(&mut engine).await, made);
}
