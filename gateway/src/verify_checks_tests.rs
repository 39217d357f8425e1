//! Every verdict of the install checks, from facts built by hand.

use qm_proto::TargetingPattern;

use super::*;

/// A registry of one connector, `node` 1.0.0, whose upgrade step names the server.
static REGISTRY: [Connector; 1] = [Connector {
    name: "node",
    title: "Node middleware",
    version: "1.0.0",
    artifact: qm_registry::ArtifactKind::Tgz,
    files: &["index.js"],
    bytes: b"",
    sha256_hex: "",
    integrity: "",
    install: "npm install {server}/connectors/node/latest.tgz",
    upgrade: "npm install {server}/connectors/node/latest.tgz again",
    verify: "npx queue-manager-connector verify --room {roomId}",
    changelog: None,
    requires: None,
    tested: None,
    requires_php: None,
}];

fn info(state: &str) -> RoomInfoReply {
    RoomInfoReply {
        found: true,
        room_id: "shop".into(),
        target_url: "https://shop.example/sale".into(),
        tag_origins: vec!["https://shop.example".into()],
        effective_state: state.into(),
        ..RoomInfoReply::default()
    }
}

fn targeting(scope: &str, rule: Option<&str>, url: &str) -> TargetingReply {
    TargetingReply {
        room_id: "shop".into(),
        scoped: true,
        patterns: ["/sale*", "!/sale/faq"]
            .iter()
            .map(|pattern| TargetingPattern {
                pattern: (*pattern).into(),
                action: String::new(),
            })
            .collect(),
        dry_run: Some(TargetingDryRun {
            url: url.into(),
            scope: scope.into(),
            rule: rule.map(str::to_owned),
            action: String::new(),
        }),
        ..TargetingReply::default()
    }
}

fn find<'a>(checks: &'a [Check], id: &str) -> &'a Check {
    checks
        .iter()
        .find(|check| check.id == id)
        .unwrap_or_else(|| panic!("no check {id}"))
}

#[test]
fn a_good_install_passes_and_a_missing_room_fails_open() {
    let info = info("active");
    let target = targeting("in", Some("/sale*"), "https://shop.example/sale");
    let page = targeting("in", Some("/sale*"), "https://shop.example/sale/1");
    let origin = OriginFact::Known("https://shop.example".into());
    let facts = Facts {
        room_id: "shop",
        room: Some(RoomFacts {
            info: &info,
            page: Some(&page),
            target: &target,
        }),
        origin: &origin,
        key: KeyFact::Right,
        key_in_query: false,
        connector: Some("node"),
        version: Some("1.0.0"),
        registry: &REGISTRY,
        server: Some("https://q.example"),
        now_ms: 0,
    };
    let all = checks(&facts);
    for id in [
        "key_in_query",
        "api_key",
        "room_exists",
        "room_live",
        "origin_allowed",
        "url_in_scope",
        "target_in_scope",
        "connector_version",
    ] {
        assert_eq!(find(&all, id).status, Status::Pass, "{id}");
    }
    let missing = checks(&Facts {
        room: None,
        ..facts
    });
    assert_eq!(find(&missing, "room_exists").status, Status::Fail);
    assert!(
        missing.iter().all(|check| check.id != "room_live"),
        "no room, no room checks"
    );
}

#[test]
fn paused_fails_bypass_warns_scheduled_informs() {
    assert_eq!(room_live(&info("paused"), 0).status, Status::Fail);
    let fix = room_live(&info("paused"), 0).fix.unwrap_or_default();
    assert!(fix.contains("/state") && fix.contains("active"), "{fix}");
    assert_eq!(room_live(&info("bypass"), 0).status, Status::Warn);
    let scheduled = RoomInfoReply {
        opens_at_ms: Some(30 * 60_000),
        ..info("scheduled")
    };
    let check = room_live(&scheduled, 60_000);
    assert_eq!(check.status, Status::Info);
    let detail = check.detail.unwrap_or_default();
    assert!(detail.contains("in about 29 min"), "{detail}");
}

#[test]
fn a_foreign_origin_fails_with_the_exact_body_only_when_privileged() {
    let origin = OriginFact::Known("https://blog.example".into());
    let privileged = origin_allowed(&info("active"), &origin, KeyFact::Right);
    assert_eq!(privileged.status, Status::Fail);
    let fix = privileged.fix.unwrap_or_default();
    assert!(
        fix.contains(
            r#"{"id":"shop","tagOrigins":["https://shop.example","https://blog.example"]}"#
        ),
        "{fix}"
    );
    let anonymous = origin_allowed(&info("active"), &origin, KeyFact::Absent);
    let fix = anonymous.fix.unwrap_or_default();
    assert!(!fix.contains("https://shop.example"), "{fix}");
    assert!(fix.contains("https://blog.example"), "{fix}");
    assert_eq!(
        origin_allowed(&info("active"), &OriginFact::Unknown, KeyFact::Absent).status,
        Status::Warn
    );
    assert_eq!(
        origin_allowed(
            &info("active"),
            &OriginFact::Malformed("null".into()),
            KeyFact::Absent
        )
        .status,
        Status::Fail
    );
}

#[test]
fn an_excluded_page_names_the_rule_and_the_fix_drops_it() {
    let excluded = targeting("out", Some("!/sale/faq"), "https://shop.example/sale/faq");
    let check = in_scope("url_in_scope", "The page", &info("active"), &excluded);
    assert_eq!(check.status, Status::Fail);
    assert!(check.detail.unwrap_or_default().contains("!/sale/faq"));
    let fix = check.fix.unwrap_or_default();
    assert!(fix.contains(r#""urlPatterns":["/sale*"]"#), "{fix}");

    let unnamed = targeting("out", None, "https://shop.example/blog/post");
    let fix = in_scope("target_in_scope", "x", &info("active"), &unnamed)
        .fix
        .unwrap_or_default();
    assert!(
        fix.contains(r#""urlPatterns":["/sale*","!/sale/faq","/blog/post"]"#),
        "{fix}"
    );
}

#[test]
fn key_checks() {
    assert_eq!(key_in_query(true).status, Status::Fail);
    assert_eq!(key_in_query(false).status, Status::Pass);
    assert_eq!(api_key(KeyFact::Wrong).status, Status::Fail);
    assert_eq!(api_key(KeyFact::Absent).status, Status::Info);
}

/// Facts about no room, naming `connector` at `version`.
fn connector_facts<'a>(
    connector: Option<&'a str>,
    version: Option<&'a str>,
    server: Option<&'a str>,
) -> Facts<'a> {
    Facts {
        room_id: "shop",
        room: None,
        origin: &OriginFact::Unknown,
        key: KeyFact::Absent,
        key_in_query: false,
        connector,
        version,
        registry: &REGISTRY,
        server,
        now_ms: 0,
    }
}

#[test]
fn the_version_is_compared_with_the_registry() {
    let server = Some("https://q.example");
    let verdict =
        |connector, version| connector_version(&connector_facts(connector, version, server));
    assert_eq!(verdict(Some("node"), Some("1.0.0")).status, Status::Pass);
    assert_eq!(
        verdict(Some("node"), Some("v1.0.0+b.1")).status,
        Status::Pass
    );

    let older = verdict(Some("node"), Some("0.9.2"));
    assert_eq!(older.status, Status::Warn);
    assert_eq!(
        older.fix.as_deref(),
        Some("npm install https://q.example/connectors/node/latest.tgz again"),
        "an old version's fix is the upgrade step, with this server filled in"
    );
    assert_eq!(
        verdict(Some("node"), Some("1.0.0-rc.1")).status,
        Status::Warn
    );

    let newer = verdict(Some("node"), Some("2.0.0"));
    assert_eq!(newer.status, Status::Warn);
    assert!(
        newer.title.contains("newer than this server's 1.0.0"),
        "{}",
        newer.title
    );
    assert!(
        newer
            .fix
            .unwrap_or_default()
            .contains("upgrade the queue server")
    );

    let unknown = verdict(Some("nodejs"), Some("1.0.0"));
    assert_eq!(unknown.status, Status::Fail, "an unknown name fails");
    assert!(
        unknown
            .detail
            .unwrap_or_default()
            .contains("this server ships node")
    );
    assert!(
        unknown
            .fix
            .unwrap_or_default()
            .contains("leaves connector= out")
    );

    let unversioned = verdict(Some("node"), None);
    assert_eq!(unversioned.status, Status::Warn);
    assert_eq!(verdict(Some("node"), Some("latest")).status, Status::Warn);
    assert_eq!(verdict(None, None).status, Status::Info);
    assert_eq!(verdict(None, Some("1.0.0")).status, Status::Info);

    // Without a known base the step keeps its placeholder for the reader.
    let unplaced = connector_version(&connector_facts(Some("node"), Some("0.1.0"), None));
    assert!(
        unplaced
            .fix
            .unwrap_or_default()
            .contains("{server}/connectors")
    );
}

#[test]
fn the_real_registry_passes_its_own_versions() {
    for connector in qm_registry::all() {
        let facts = Facts {
            registry: qm_registry::all(),
            ..connector_facts(Some(connector.name), Some(connector.version), None)
        };
        assert_eq!(
            connector_version(&facts).status,
            Status::Pass,
            "{}",
            connector.name
        );
    }
}
