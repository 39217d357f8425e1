//! The rules of operators, monitor tokens and the trail, on the memory store (the Postgres
//! store runs the same rules through gRPC in `tests/tests/api/access.rs`, on both stores).

use qm_core::ErrorCode;
use qm_proto::{AuditEntry, CreateMonitorTokenRequest, CreateOperatorRequest, ListAuditRequest};

use super::memory::AUDIT_KEPT;
use super::*;

fn verifier(tag: u8) -> Vec<u8> {
    vec![tag; 32]
}

fn operator_request(name: &str, role: &str, tags: &[u8]) -> CreateOperatorRequest {
    CreateOperatorRequest {
        name: name.to_owned(),
        role: role.to_owned(),
        verifiers: tags.iter().copied().map(verifier).collect(),
        created_by: "owner".to_owned(),
    }
}

fn monitor_request(label: &str, tags: &[u8], expires_at_ms: i64) -> CreateMonitorTokenRequest {
    CreateMonitorTokenRequest {
        label: label.to_owned(),
        verifiers: tags.iter().copied().map(verifier).collect(),
        created_by: "owner".to_owned(),
        expires_at_ms,
    }
}

async fn create(access: &Access, name: &str, role: &str, tags: &[u8]) -> Operator {
    let new = new_operator(operator_request(name, role, tags)).expect("valid request");
    access.create_operator(new).await.expect("created")
}

#[test]
fn roles_are_owner_operator_viewer_only() {
    for role in ["owner", "operator", "viewer"] {
        assert_eq!(Role::parse(role).map(Role::as_str).ok(), Some(role));
    }
    for role in ["", "Owner", "admin", "monitor", " viewer"] {
        let error = new_operator(operator_request("ann", role, &[1])).unwrap_err();
        assert_eq!(error.code, ErrorCode::InvalidRole, "{role:?}");
    }
}

#[test]
fn names_are_1_to_64_printable_characters() {
    assert!(check_operator_name("a").is_ok());
    assert!(
        check_operator_name(&"é".repeat(64)).is_ok(),
        "characters, not bytes"
    );
    assert!(check_operator_name("Ann Smith (night shift)").is_ok());
    for bad in [
        String::new(),
        "x".repeat(65),
        "tab\there".to_owned(),
        "new\nline".to_owned(),
        " padded".to_owned(),
        "padded ".to_owned(),
        "owner".to_owned(),
        "OWNER".to_owned(),
    ] {
        let error = new_operator(operator_request(&bad, "viewer", &[1])).unwrap_err();
        assert_eq!(error.code, ErrorCode::InvalidOperatorName, "{bad:?}");
    }
}

#[test]
fn a_credential_needs_one_to_eight_verifiers() {
    for tags in [&[][..], &[1, 2, 3, 4, 5, 6, 7, 8, 9][..]] {
        let error = new_operator(operator_request("ann", "viewer", tags)).unwrap_err();
        assert_eq!(error.code, ErrorCode::BadRequest);
    }
    let mut request = operator_request("ann", "viewer", &[1]);
    request.verifiers.push(Vec::new());
    assert_eq!(
        new_operator(request).unwrap_err().code,
        ErrorCode::BadRequest
    );
    let error = new_monitor_token(monitor_request("", &[], 0), 1_000).unwrap_err();
    assert_eq!(error.code, ErrorCode::BadRequest);
}

#[tokio::test]
async fn names_are_unique_among_live_operators_whatever_the_case() {
    let access = Access::memory();
    let ann = create(&access, "Ann", "operator", &[1]).await;
    let error = access
        .create_operator(new_operator(operator_request("ann", "viewer", &[2])).unwrap())
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::OperatorExists);
    // Revoked: the name is free again, for a new operator with a new id.
    access.revoke_operator(&ann.id).await.expect("revoked");
    let again = create(&access, "ann", "viewer", &[3]).await;
    assert_ne!(again.id, ann.id);
}

#[tokio::test]
async fn an_operator_is_found_by_any_of_its_verifiers_until_revoked() {
    let access = Access::memory();
    let ann = create(&access, "ann", "operator", &[1, 2]).await;
    assert!(ann.id.starts_with("op_"));
    assert_eq!(ann.role, Role::Operator);
    assert_eq!(ann.created_by, "owner");
    for lookup in [
        vec![verifier(1)],
        vec![verifier(2)],
        vec![verifier(9), verifier(2)],
    ] {
        assert_eq!(
            access.find_credential(&lookup).await.unwrap(),
            Some(Credential::Operator(ann.clone()))
        );
    }
    assert_eq!(access.find_credential(&[verifier(9)]).await.unwrap(), None);
    assert_eq!(access.find_credential(&[]).await.unwrap(), None);
    assert_eq!(access.list_operators().await.unwrap(), vec![ann.clone()]);

    assert_eq!(access.revoke_operator(&ann.id).await.unwrap(), ann);
    assert_eq!(access.find_credential(&[verifier(1)]).await.unwrap(), None);
    assert_eq!(access.find_credential(&[verifier(2)]).await.unwrap(), None);
    assert!(
        access.list_operators().await.unwrap().is_empty(),
        "a revoked operator is not listed"
    );
    let error = access.revoke_operator(&ann.id).await.unwrap_err();
    assert_eq!(error.code, ErrorCode::OperatorNotFound);
}

#[tokio::test]
async fn a_verifier_already_held_is_refused() {
    let access = Access::memory();
    create(&access, "ann", "operator", &[1]).await;
    let twice = new_operator(operator_request("bob", "viewer", &[2, 1])).unwrap();
    assert_eq!(
        access.create_operator(twice).await.unwrap_err().code,
        ErrorCode::Internal
    );
    assert_eq!(access.list_operators().await.unwrap().len(), 1);
    let found = access.find_credential(&[verifier(2)]).await.unwrap();
    assert_eq!(found, None, "nothing of the refused one was kept");
}

#[tokio::test]
async fn more_verifiers_than_a_keyring_holds_find_nothing() {
    let access = Access::memory();
    create(&access, "ann", "operator", &[1]).await;
    let lookup: Vec<Vec<u8>> = (1..=9).map(verifier).collect();
    assert_eq!(access.find_credential(&lookup).await.unwrap(), None);
}

#[tokio::test]
async fn monitor_tokens_are_live_until_revoked_or_expired() {
    let access = Access::memory();
    let now = qm_core::clock::now_ms();
    let forever = access
        .create_monitor_token(new_monitor_token(monitor_request("wall", &[1], 0), now).unwrap())
        .await
        .unwrap();
    assert!(forever.id.starts_with("mt_"));
    let brief = access
        .create_monitor_token(new_monitor_token(monitor_request("", &[2], now + 150), now).unwrap())
        .await
        .unwrap();
    assert_eq!(
        access.list_monitor_tokens().await.unwrap(),
        vec![forever.clone(), brief.clone()]
    );
    assert_eq!(
        access.find_credential(&[verifier(2)]).await.unwrap(),
        Some(Credential::Monitor(brief.clone()))
    );
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(
        access.find_credential(&[verifier(2)]).await.unwrap(),
        None,
        "expired"
    );
    assert_eq!(
        access.list_monitor_tokens().await.unwrap(),
        vec![forever.clone()]
    );
    let error = access
        .revoke_monitor_tokens(&brief.id, false)
        .await
        .unwrap_err();
    assert_eq!(
        error.code,
        ErrorCode::MonitorTokenNotFound,
        "an expired token is not live"
    );

    assert_eq!(
        access
            .revoke_monitor_tokens(&forever.id, false)
            .await
            .unwrap(),
        1
    );
    assert_eq!(access.find_credential(&[verifier(1)]).await.unwrap(), None);
    let error = access
        .revoke_monitor_tokens(&forever.id, false)
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::MonitorTokenNotFound);
    let error = access.revoke_monitor_tokens("", false).await.unwrap_err();
    assert_eq!(error.code, ErrorCode::MissingField);
}

#[tokio::test]
async fn revoking_all_monitor_tokens_leaves_operators_alone() {
    let access = Access::memory();
    let now = qm_core::clock::now_ms();
    for tag in 1..=3 {
        let new = new_monitor_token(monitor_request("", &[tag], 0), now).unwrap();
        access.create_monitor_token(new).await.unwrap();
    }
    let ann = create(&access, "ann", "viewer", &[9]).await;
    assert_eq!(access.revoke_monitor_tokens("", true).await.unwrap(), 3);
    assert!(access.list_monitor_tokens().await.unwrap().is_empty());
    assert_eq!(access.revoke_monitor_tokens("", true).await.unwrap(), 0);
    assert_eq!(
        access.find_credential(&[verifier(9)]).await.unwrap(),
        Some(Credential::Operator(ann))
    );
}

#[test]
fn a_monitor_token_expires_in_the_future_or_never() {
    let now = 1_000_000;
    for expires in [-1, 1, now] {
        let error = new_monitor_token(monitor_request("", &[1], expires), now).unwrap_err();
        assert_eq!(error.code, ErrorCode::InvalidExpiry, "{expires}");
    }
    assert!(new_monitor_token(monitor_request("", &[1], now + 1), now).is_ok());
    let error = new_monitor_token(monitor_request(&"x".repeat(65), &[1], 0), now).unwrap_err();
    assert_eq!(error.code, ErrorCode::InvalidLabel);
}

fn entry(action: &str, room_id: &str, actor: &str, at_ms: i64) -> AuditEntry {
    AuditEntry {
        id: 999,
        at_ms,
        actor_kind: "operator".to_owned(),
        actor_id: format!("op_{actor}"),
        actor_name: actor.to_owned(),
        action: action.to_owned(),
        room_id: room_id.to_owned(),
        route: "POST /api/admin/rooms/:id/rate".to_owned(),
        summary: "{}".to_owned(),
        client: "127.0.0.1".to_owned(),
        status: 200,
    }
}

fn query(request: ListAuditRequest) -> AuditQuery {
    audit_query(request).expect("a valid query")
}

fn ids(page: &AuditPage) -> Vec<u64> {
    page.entries.iter().map(|entry| entry.id).collect()
}

#[tokio::test]
async fn audit_ids_increase_and_the_list_is_newest_first() {
    let access = Access::memory();
    let mut last = 0;
    for at in 1..=5 {
        let id = access
            .append_audit(entry("room.rate", "r", "ann", at))
            .await
            .unwrap();
        assert!(
            id > last,
            "the engine assigns increasing ids (999 was ignored)"
        );
        last = id;
    }
    let page = access
        .list_audit(&query(ListAuditRequest::default()))
        .await
        .unwrap();
    assert_eq!(ids(&page), [5, 4, 3, 2, 1]);
    assert_eq!(page.next_before_id, 0);
    // An entry without a time is stamped by the engine.
    access.append_audit(entry("x", "", "ann", 0)).await.unwrap();
    let page = access
        .list_audit(&query(ListAuditRequest::default()))
        .await
        .unwrap();
    assert!(page.entries[0].at_ms > 1_600_000_000_000);
}

#[tokio::test]
async fn the_audit_list_filters_and_pages() {
    let access = Access::memory();
    for at in 1..=10 {
        let room = if at % 2 == 0 { "even" } else { "odd" };
        let actor = if at <= 5 { "ann" } else { "bob" };
        let action = if at % 3 == 0 {
            "room.state"
        } else {
            "room.rate"
        };
        access
            .append_audit(entry(action, room, actor, at * 1000))
            .await
            .unwrap();
    }
    let list = |request: ListAuditRequest| {
        let access = &access;
        async move { access.list_audit(&query(request)).await.unwrap() }
    };
    let room = list(ListAuditRequest {
        room_id: "even".to_owned(),
        ..ListAuditRequest::default()
    })
    .await;
    assert_eq!(ids(&room), [10, 8, 6, 4, 2]);
    let by_name = list(ListAuditRequest {
        operator: "bob".to_owned(),
        ..ListAuditRequest::default()
    })
    .await;
    assert_eq!(ids(&by_name), [10, 9, 8, 7, 6]);
    let by_id = list(ListAuditRequest {
        operator: "op_ann".to_owned(),
        ..ListAuditRequest::default()
    })
    .await;
    assert_eq!(ids(&by_id), [5, 4, 3, 2, 1]);
    let action = list(ListAuditRequest {
        action: "room.state".to_owned(),
        ..ListAuditRequest::default()
    })
    .await;
    assert_eq!(ids(&action), [9, 6, 3]);
    let window = list(ListAuditRequest {
        since_ms: 3000,
        until_ms: 6000,
        ..ListAuditRequest::default()
    })
    .await;
    assert_eq!(ids(&window), [6, 5, 4, 3]);
    let combined = list(ListAuditRequest {
        room_id: "odd".to_owned(),
        operator: "ann".to_owned(),
        action: "room.rate".to_owned(),
        ..ListAuditRequest::default()
    })
    .await;
    assert_eq!(ids(&combined), [5, 1]);

    // Pages of three, following next_before_id to the oldest.
    let mut seen = Vec::new();
    let mut before_id = 0;
    loop {
        let page = list(ListAuditRequest {
            limit: 3,
            before_id,
            ..ListAuditRequest::default()
        })
        .await;
        assert!(page.entries.len() <= 3);
        seen.extend(ids(&page));
        if page.next_before_id == 0 {
            break;
        }
        before_id = page.next_before_id;
    }
    assert_eq!(seen, (1..=10).rev().collect::<Vec<u64>>());
    // A page that ends exactly at the oldest says so.
    let last = list(ListAuditRequest {
        limit: 5,
        before_id: 6,
        ..ListAuditRequest::default()
    })
    .await;
    assert_eq!((ids(&last), last.next_before_id), (vec![5, 4, 3, 2, 1], 0));
}

#[test]
fn the_audit_limit_defaults_to_100_and_stops_at_500() {
    assert_eq!(query(ListAuditRequest::default()).limit, 100);
    let capped = query(ListAuditRequest {
        limit: 10_000,
        ..ListAuditRequest::default()
    });
    assert_eq!(capped.limit, 500);
    let error = audit_query(ListAuditRequest {
        since_ms: 10,
        until_ms: 5,
        ..ListAuditRequest::default()
    })
    .unwrap_err();
    assert_eq!(error.code, ErrorCode::InvalidAuditQuery);
}

#[tokio::test]
async fn the_memory_trail_keeps_the_newest_entries() {
    let memory = MemoryAccess::default();
    let total = AUDIT_KEPT as u64 + 5;
    for at in 1..=total {
        memory.append_audit(entry("a", "", "ann", at as i64));
    }
    let everything = AuditQuery {
        limit: AUDIT_MAX_LIMIT,
        since_ms: 0,
        ..AuditQuery::default()
    };
    let newest = memory.list_audit(&everything);
    assert_eq!(newest.entries[0].id, total);
    let oldest = memory.list_audit(&AuditQuery {
        before_id: 7,
        ..everything
    });
    assert_eq!(
        ids(&oldest),
        [6],
        "ids 1-5 were dropped, the oldest kept is 6"
    );
    assert_eq!(oldest.next_before_id, 0);
}

#[tokio::test]
async fn audit_fields_are_cut_never_refused() {
    let access = Access::memory();
    let mut long = entry("a", "r", "ann", 1);
    long.summary = "é".repeat(5000);
    long.route = "r".repeat(1000);
    access.append_audit(long).await.unwrap();
    let page = access
        .list_audit(&query(ListAuditRequest::default()))
        .await
        .unwrap();
    let kept = &page.entries[0];
    assert!(kept.summary.len() <= 4096 && kept.summary.chars().all(|c| c == 'é'));
    assert_eq!(kept.route.len(), 512);
}

#[tokio::test]
async fn operators_and_tokens_are_listed_in_creation_order_within_a_millisecond_too() {
    let access = Access::memory();
    let now = qm_core::clock::now_ms();
    let mut made = Vec::new();
    let mut tokens = Vec::new();
    for tag in 1..=30u8 {
        made.push(create(&access, &format!("op{tag}"), "viewer", &[tag]).await);
        let new = new_monitor_token(monitor_request("", &[100 + tag], 0), now).unwrap();
        tokens.push(access.create_monitor_token(new).await.unwrap());
    }
    assert_eq!(access.list_operators().await.unwrap(), made);
    assert_eq!(access.list_monitor_tokens().await.unwrap(), tokens);
}

#[test]
fn the_creator_is_kept_bounded() {
    let mut request = operator_request("ann", "viewer", &[1]);
    request.created_by = "é".repeat(1000);
    let new = new_operator(request).unwrap();
    assert!(new.created_by.len() <= 256 && new.created_by.starts_with('é'));
}
