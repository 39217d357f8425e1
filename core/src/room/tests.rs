//! One test (or more) per rule of the room document.

use serde_json::{Value, json};

use super::*;

const NOW: i64 = 1_700_000_000_000;

fn create(body: Value) -> Result<RoomConfig, ApiError> {
    RoomConfig::apply_patch(None, &body, NOW)
}

fn base() -> RoomConfig {
    create(
        json!({"id": "launch", "targetUrl": "https://shop.example.com/drop", "ratePerMinute": 60}),
    )
    .expect("the base room is valid")
}

fn update(body: Value) -> Result<RoomConfig, ApiError> {
    RoomConfig::apply_patch(Some(&base()), &body, NOW)
}

fn code_of(result: Result<RoomConfig, ApiError>) -> ErrorCode {
    match result {
        Ok(room) => panic!("expected a refusal, got {room:?}"),
        Err(error) => error.code,
    }
}

#[test]
fn create_fills_defaults_and_name_from_id() {
    let room = base();
    assert_eq!(room.name, "launch");
    assert_eq!(room.rate_per_minute, 60);
    assert_eq!(room.passed_ttl_sec, 600);
    assert_eq!(room.pre_queue_max_per_ip, Some(16));
    assert_eq!(room.queue_max_per_ip, Some(16));
    assert_eq!(room.presence_sec, Some(30));
    assert_eq!(room.state, RoomState::Active);
    assert_eq!(room.on_backend_down, BackendDownPolicy::Closed);
    assert!(room.url_patterns.is_empty());
}

#[test]
fn create_requires_id_target_url_and_rate() {
    for (body, field) in [
        (json!({"targetUrl": "https://a.example/", "rate": 1}), "id"),
        (json!({"id": "a", "rate": 1}), "targetUrl"),
        (
            json!({"id": "a", "targetUrl": "https://a.example/"}),
            "ratePerMinute",
        ),
    ] {
        let error = create(body).expect_err("missing field");
        assert_eq!(error.code, ErrorCode::MissingField);
        assert!(
            error.message.contains(field),
            "{} names {field}",
            error.message
        );
    }
}

#[test]
fn body_must_be_an_object() {
    assert_eq!(code_of(create(json!([1, 2]))), ErrorCode::InvalidJson);
    assert_eq!(code_of(create(json!("room"))), ErrorCode::InvalidJson);
}

#[test]
fn unknown_keys_are_refused_by_name() {
    let error = update(json!({"ratePerMinut": 5})).expect_err("typo");
    assert_eq!(error.code, ErrorCode::UnknownField);
    assert!(error.message.contains("ratePerMinut"));
}

#[test]
fn redacted_reads_are_refused_with_their_own_code() {
    let error = update(json!({"redacted": true, "name": "x"})).expect_err("redacted");
    assert_eq!(error.code, ErrorCode::RedactedShape);
    assert!(error.message.contains("monitor link"));
    assert_eq!(
        code_of(update(json!({"redacted": false}))),
        ErrorCode::UnknownField
    );
}

#[test]
fn read_only_keys_round_trip() {
    let mut read = serde_json::to_value(base()).expect("serialises");
    let object = read.as_object_mut().expect("object");
    for key in READ_ONLY_KEYS {
        object.insert((*key).to_owned(), json!(1));
    }
    object.insert("rate".to_owned(), json!(60));
    object.insert("name".to_owned(), json!("Launch day"));
    let room = update(read).expect("a read-edit-write round trip is accepted");
    assert_eq!(room.name, "Launch day");
    assert_eq!(room.rate_per_minute, 60);
}

#[test]
fn rate_alias_and_conflicts() {
    assert_eq!(
        update(json!({"rate": 90})).expect("alias").rate_per_minute,
        90
    );
    assert_eq!(
        update(json!({"rate": 90, "ratePerMinute": 90}))
            .expect("agree")
            .rate_per_minute,
        90
    );
    assert_eq!(
        code_of(update(json!({"rate": 90, "ratePerMinute": 91}))),
        ErrorCode::ConflictingField
    );
    assert_eq!(
        code_of(update(json!({"ratePerMinute": -1}))),
        ErrorCode::InvalidRate
    );
    assert_eq!(
        code_of(update(json!({"ratePerMinute": 1.5}))),
        ErrorCode::InvalidRate
    );
    assert_eq!(
        code_of(update(json!({"rate": 1_000_001}))),
        ErrorCode::InvalidRate
    );
    assert_eq!(update(json!({"rate": 0})).expect("zero").rate_per_minute, 0);
}

#[test]
fn id_rules() {
    assert_eq!(
        code_of(create(
            json!({"id": "bad id", "targetUrl": "https://a.example/", "rate": 1})
        )),
        ErrorCode::InvalidRoomId
    );
    assert_eq!(
        code_of(update(json!({"id": "other"}))),
        ErrorCode::InvalidRoomId
    );
    assert!(update(json!({"id": "launch"})).is_ok());
}

#[test]
fn name_rules() {
    assert_eq!(
        update(json!({"name": "  Drop  "})).expect("trimmed").name,
        "Drop"
    );
    assert_eq!(code_of(update(json!({"name": ""}))), ErrorCode::InvalidName);
    assert_eq!(
        code_of(update(json!({"name": "x".repeat(121)}))),
        ErrorCode::InvalidName
    );
    assert_eq!(code_of(update(json!({"name": 5}))), ErrorCode::InvalidName);
}

#[test]
fn target_url_rules() {
    assert!(update(json!({"targetUrl": "http://localhost:3000/shop"})).is_ok());
    for bad in [
        json!("ftp://a.example/"),
        json!("/relative"),
        json!("https://"),
        json!(12),
        json!(format!("https://a.example/{}", "x".repeat(2048))),
    ] {
        assert_eq!(
            code_of(update(json!({"targetUrl": bad}))),
            ErrorCode::InvalidTargetUrl,
            "{bad}"
        );
    }
}

#[test]
fn proxy_origin_rules() {
    let room = update(json!({"proxyOrigin": "HTTP://10.0.0.5:8080/"})).expect("origin");
    assert_eq!(room.proxy_origin.as_deref(), Some("http://10.0.0.5:8080"));
    assert_eq!(
        update(json!({"proxyOrigin": null}))
            .expect("null")
            .proxy_origin,
        None
    );
    for bad in [
        "http://10.0.0.5/app",
        "http://a.example/?x=1",
        "ftp://a.example",
        "nope",
    ] {
        assert_eq!(
            code_of(update(json!({"proxyOrigin": bad}))),
            ErrorCode::InvalidProxyOrigin,
            "{bad}"
        );
    }
}

#[test]
fn numeric_ranges() {
    assert_eq!(
        update(json!({"maxConcurrent": 5}))
            .expect("ok")
            .max_concurrent,
        Some(5)
    );
    assert_eq!(
        update(json!({"maxConcurrent": null}))
            .expect("ok")
            .max_concurrent,
        None
    );
    assert_eq!(
        code_of(update(json!({"maxConcurrent": 0}))),
        ErrorCode::InvalidMaxConcurrent
    );
    assert_eq!(
        code_of(update(json!({"maxConcurrent": 10_000_001}))),
        ErrorCode::InvalidMaxConcurrent
    );
    assert_eq!(
        update(json!({"passedTtlSec": 10}))
            .expect("ok")
            .passed_ttl_sec,
        10
    );
    assert_eq!(
        code_of(update(json!({"passedTtlSec": 9}))),
        ErrorCode::InvalidPassedTtlSec
    );
    assert_eq!(
        code_of(update(json!({"passedTtlSec": null}))),
        ErrorCode::InvalidPassedTtlSec
    );
    assert_eq!(
        code_of(update(json!({"passedTtlSec": 86_401}))),
        ErrorCode::InvalidPassedTtlSec
    );
    assert_eq!(
        update(json!({"presenceSec": null}))
            .expect("ok")
            .presence_sec,
        None
    );
    assert_eq!(
        code_of(update(json!({"presenceSec": 4}))),
        ErrorCode::InvalidPresenceSec
    );
    assert_eq!(
        code_of(update(json!({"presenceSec": 3601}))),
        ErrorCode::InvalidPresenceSec
    );
}

#[test]
fn session_bounds() {
    let room = update(json!({"sessionTtlSec": 600, "sessionMaxSec": 3600})).expect("ok");
    assert_eq!(
        (room.session_ttl_sec, room.session_max_sec),
        (Some(600), Some(3600))
    );
    assert_eq!(
        code_of(update(json!({"sessionTtlSec": 9}))),
        ErrorCode::InvalidSessionTtlSec
    );
    assert_eq!(
        code_of(update(json!({"sessionMaxSec": 86_401}))),
        ErrorCode::InvalidSessionMaxSec
    );
    assert_eq!(
        code_of(update(json!({"sessionTtlSec": 600, "sessionMaxSec": 300}))),
        ErrorCode::InvalidSessionMaxSec
    );
    // The cross-field rule also holds against the stored value.
    let stored = update(json!({"sessionTtlSec": 600})).expect("ok");
    let result = RoomConfig::apply_patch(Some(&stored), &json!({"sessionMaxSec": 120}), NOW);
    assert_eq!(code_of(result), ErrorCode::InvalidSessionMaxSec);
}

#[test]
fn per_ip_caps() {
    let room = update(json!({"preQueueMaxPerIp": null, "queueMaxPerIp": 100_000})).expect("ok");
    assert_eq!(
        (room.pre_queue_max_per_ip, room.queue_max_per_ip),
        (None, Some(100_000))
    );
    assert_eq!(
        code_of(update(json!({"preQueueMaxPerIp": 0}))),
        ErrorCode::InvalidPreQueueMaxPerIp
    );
    assert_eq!(
        code_of(update(json!({"queueMaxPerIp": 100_001}))),
        ErrorCode::InvalidQueueMaxPerIp
    );
    assert_eq!(
        code_of(update(json!({"queueMaxPerIp": "5"}))),
        ErrorCode::InvalidQueueMaxPerIp
    );
}

#[test]
fn branding_rules_and_message_stamp() {
    let body = json!({"branding": {"title": "Drop", "primaryColor": "#0af", "textColor": "#00AAFF", "logoUrl": "/logo.svg", "message": "Hello", "messageAt": 5}});
    let room = update(body).expect("valid branding");
    let branding = room.branding.clone().expect("branding");
    assert_eq!(branding.message_at, Some(NOW));
    // Same text later: the stamp stays; new text: restamped; cleared: removed.
    let same = RoomConfig::apply_patch(
        Some(&room),
        &json!({"branding": {"message": "Hello"}}),
        NOW + 1000,
    )
    .expect("ok");
    assert_eq!(same.branding.as_ref().and_then(|b| b.message_at), Some(NOW));
    let changed = RoomConfig::apply_patch(
        Some(&room),
        &json!({"branding": {"message": "Bye"}}),
        NOW + 1000,
    )
    .expect("ok");
    assert_eq!(
        changed.branding.as_ref().and_then(|b| b.message_at),
        Some(NOW + 1000)
    );
    let cleared = RoomConfig::apply_patch(
        Some(&room),
        &json!({"branding": {"message": ""}}),
        NOW + 1000,
    )
    .expect("ok");
    assert_eq!(cleared.branding.as_ref().and_then(|b| b.message_at), None);
    assert_eq!(
        update(json!({"branding": null})).expect("ok").branding,
        None
    );

    for bad in [
        json!("x"),
        json!({"font": "serif"}),
        json!({"primaryColor": "red"}),
        json!({"accentColor": "#12345"}),
        json!({"logoUrl": "javascript:alert(1)"}),
        json!({"logoUrl": "//evil.example/x.png"}),
        json!({"title": "x".repeat(121)}),
        json!({"message": "x".repeat(2001)}),
        json!({"supportText": "x".repeat(501)}),
        json!({"title": 5}),
    ] {
        assert_eq!(
            code_of(update(json!({"branding": bad}))),
            ErrorCode::InvalidBranding,
            "{bad}"
        );
    }
    assert!(update(json!({"branding": {"logoUrl": "https://cdn.example/logo.png"}})).is_ok());
}

#[test]
fn origin_lists_normalise() {
    let room = update(json!({"returnOrigins": ["HTTPS://Shop.Example.com/", "https://shop.example.com", "http://localhost:3000"]}))
        .expect("ok");
    assert_eq!(
        room.return_origins,
        Some(vec![
            "https://shop.example.com".to_owned(),
            "http://localhost:3000".to_owned()
        ])
    );
    assert_eq!(
        code_of(update(json!({"returnOrigins": ["https://a.example/path"]}))),
        ErrorCode::InvalidReturnOrigins
    );
    assert_eq!(
        code_of(update(json!({"tagOrigins": "https://a.example"}))),
        ErrorCode::InvalidTagOrigins
    );
    let too_many: Vec<String> = (0..51)
        .map(|index| format!("https://h{index}.example"))
        .collect();
    assert_eq!(
        code_of(update(json!({"tagOrigins": too_many}))),
        ErrorCode::InvalidTagOrigins
    );
    assert_eq!(
        update(json!({"tagOrigins": null})).expect("ok").tag_origins,
        None
    );
}

#[test]
fn effective_origins_include_the_target_origin() {
    let room = base();
    assert_eq!(
        room.effective_tag_origins(),
        vec!["https://shop.example.com"]
    );
    let room = update(json!({"returnOrigins": ["https://a.example"]})).expect("ok");
    assert_eq!(
        room.effective_return_origins(),
        vec!["https://shop.example.com", "https://a.example"]
    );
    assert_eq!(
        room.effective_tag_origins(),
        vec!["https://shop.example.com", "https://a.example"]
    );
    let room = RoomConfig::apply_patch(
        Some(&room),
        &json!({"tagOrigins": ["https://b.example", "https://shop.example.com"]}),
        NOW,
    )
    .expect("ok");
    assert_eq!(
        room.effective_tag_origins(),
        vec!["https://shop.example.com", "https://b.example"]
    );
}

#[test]
fn autotune_protection_auto_activate() {
    assert!(update(json!({"autotune": {"enabled": true, "minRate": 10, "maxRate": 100, "targetP95Ms": 800, "healthUrl": "http://10.0.0.5:8080/health", "coolDownSec": 5}})).is_ok());
    assert!(update(json!({"autotune": {"enabled": false, "minRate": 10}})).is_ok());
    for bad in [
        json!({"enabled": true, "minRate": 10}),
        json!({"enabled": true, "healthUrl": "https://origin/health"}),
        json!({"enabled": true, "healthUrl": "/health"}),
        json!({"enabled": true, "healthUrl": "http://o/h", "coolDownSec": 0}),
        json!({"enabled": true, "healthUrl": "http://o/h", "coolDownSec": 3601}),
        json!({"minRate": 1}),
        json!({"enabled": true, "minRate": 10, "maxRate": 5}),
        json!({"enabled": true, "targetP95Ms": 0}),
        json!({"enabled": true, "x": 1}),
    ] {
        assert_eq!(
            code_of(update(json!({"autotune": bad}))),
            ErrorCode::InvalidAutotune,
            "{bad}"
        );
    }
    // An inline room's controller needs no health URL: it reads the answers the gate forwards;
    // taking the proxyOrigin away from it takes its source away, and is refused.
    let inline = json!({"proxyOrigin": "http://10.0.0.5:8080", "autotune": {"enabled": true, "minRate": 10}});
    let inline_room = update(inline).expect("an inline room tunes from its answers");
    assert_eq!(
        code_of(RoomConfig::apply_patch(
            Some(&inline_room),
            &json!({"proxyOrigin": null}),
            NOW
        )),
        ErrorCode::InvalidAutotune
    );
    assert!(
        RoomConfig::apply_patch(
            Some(&inline_room),
            &json!({"proxyOrigin": null, "autotune": {"enabled": true, "healthUrl": "http://o/h"}}),
            NOW
        )
        .is_ok()
    );
    assert!(update(json!({"protection": {"mode": "enforce"}})).is_ok());
    assert_eq!(
        code_of(update(json!({"protection": {"mode": "strict"}}))),
        ErrorCode::InvalidProtection
    );
    assert_eq!(
        code_of(update(json!({"protection": "off"}))),
        ErrorCode::InvalidProtection
    );
    assert!(update(json!({"autoActivate": {"enabled": false, "threshold": 1}})).is_ok());
    assert_eq!(
        code_of(update(
            json!({"autoActivate": {"enabled": true, "threshold": 0}})
        )),
        ErrorCode::InvalidAutoActivate
    );
    assert_eq!(
        code_of(update(json!({"autoActivate": {"threshold": 5}}))),
        ErrorCode::InvalidAutoActivate
    );
    assert!(
        update(json!({"autoActivate": {"enabled": true, "threshold": 5, "calmSec": 60}})).is_ok()
    );
    for calm in [json!(0), json!(86_401), json!("60"), json!(1.5)] {
        assert_eq!(
            code_of(update(
                json!({"autoActivate": {"enabled": true, "threshold": 5, "calmSec": calm}})
            )),
            ErrorCode::InvalidAutoActivate,
            "{calm}"
        );
    }
}

#[test]
fn url_pattern_rules() {
    let good = json!([
        "/checkout/*",
        "*",
        "!/checkout/help",
        "https://shop.example.com/cart"
    ]);
    assert_eq!(
        update(json!({"urlPatterns": good}))
            .expect("ok")
            .url_patterns
            .len(),
        4
    );
    assert_eq!(
        update(json!({"urlPatterns": []}))
            .expect("ok")
            .url_patterns
            .len(),
        0
    );
    let too_many: Vec<String> = (0..26).map(|index| format!("/p{index}")).collect();
    for (bad, why) in [
        (json!(too_many), "at most 25"),
        (json!([format!("/{}", "x".repeat(300))]), "longer than 300"),
        (json!(["/*/*/*/*/*/*/*/*/*/*/*"]), "wildcards"),
        (json!(["checkout"]), "must start with"),
        (json!(["!"]), "exception"),
        (json!([""]), "is empty"),
        (json!(["https://shop.example.com"]), "path"),
        (json!(["http://shop.example.com/x"]), "https"),
        (json!(["/a b"]), "whitespace"),
        (json!([5]), "string"),
        (json!("/x"), "array"),
    ] {
        let error = update(json!({"urlPatterns": bad})).expect_err("bad rule");
        assert_eq!(error.code, ErrorCode::InvalidUrlPattern, "{bad}");
        assert!(error.message.contains(why), "{} says {why}", error.message);
    }
}

#[test]
fn opens_at_forms() {
    assert_eq!(
        update(json!({"opensAt": NOW})).expect("ms").opens_at,
        Some(NOW)
    );
    assert_eq!(
        update(json!({"opensAt": "2023-11-14T22:13:20Z"}))
            .expect("iso")
            .opens_at,
        Some(NOW)
    );
    assert_eq!(
        update(json!({"opensAt": "2023-11-15T00:13:20+02:00"}))
            .expect("offset")
            .opens_at,
        Some(NOW)
    );
    assert_eq!(
        update(json!({"opensAt": null})).expect("null").opens_at,
        None
    );
    for bad in [
        json!("tomorrow"),
        json!(-1),
        json!(1.5),
        json!(true),
        json!("2023-11-14"),
    ] {
        assert_eq!(
            code_of(update(json!({"opensAt": bad}))),
            ErrorCode::InvalidOpensAt,
            "{bad}"
        );
    }
}

#[test]
fn state_and_backend_policy() {
    assert_eq!(
        update(json!({"state": "bypass"})).expect("ok").state,
        RoomState::Bypass
    );
    assert_eq!(
        code_of(update(json!({"state": "closed"}))),
        ErrorCode::InvalidState
    );
    assert_eq!(
        update(json!({"onBackendDown": "open"}))
            .expect("ok")
            .on_backend_down,
        BackendDownPolicy::Open
    );
    assert_eq!(
        code_of(update(json!({"onBackendDown": "fail"}))),
        ErrorCode::InvalidOnBackendDown
    );
    assert_eq!(
        code_of(update(json!({"onBackendDown": null}))),
        ErrorCode::InvalidOnBackendDown
    );
}

#[test]
fn effective_state_is_scheduled_before_opens_at() {
    let room = update(json!({"opensAt": NOW + 1, "state": "paused"})).expect("ok");
    assert_eq!(room.effective_state(NOW), EffectiveState::Scheduled);
    assert_eq!(room.effective_state(NOW + 1), EffectiveState::Paused);
}

#[test]
fn a_failing_patch_changes_nothing() {
    let room = base();
    let result = RoomConfig::apply_patch(
        Some(&room),
        &json!({"name": "New", "ratePerMinute": -5}),
        NOW,
    );
    assert!(result.is_err());
    assert_eq!(room, base());
}

#[test]
fn serialises_camel_case_with_nulls() {
    let value = serde_json::to_value(base()).expect("serialises");
    assert_eq!(value["targetUrl"], "https://shop.example.com/drop");
    assert_eq!(value["ratePerMinute"], 60);
    assert!(value["maxConcurrent"].is_null());
    assert!(value["opensAt"].is_null());
    assert_eq!(value["onBackendDown"], "closed");
    let back: RoomConfig = serde_json::from_value(value).expect("deserialises");
    assert_eq!(back, base());
}

#[test]
fn rate_body() {
    assert_eq!(
        parse_rate_body(&json!({"ratePerMinute": 120})).expect("ok"),
        120
    );
    assert_eq!(parse_rate_body(&json!({"rate": 0})).expect("ok"), 0);
    assert_eq!(
        parse_rate_body(&json!({"rate": 5, "ratePerMinute": 6})).map_err(|e| e.code),
        Err(ErrorCode::ConflictingField)
    );
    assert_eq!(
        parse_rate_body(&json!({})).map_err(|e| e.code),
        Err(ErrorCode::MissingField)
    );
    assert_eq!(
        parse_rate_body(&json!({"rate": "fast"})).map_err(|e| e.code),
        Err(ErrorCode::InvalidRate)
    );
    assert_eq!(
        parse_rate_body(&json!({"rate": 5, "x": 1})).map_err(|e| e.code),
        Err(ErrorCode::UnknownField)
    );
    assert_eq!(
        parse_rate_body(&json!(5)).map_err(|e| e.code),
        Err(ErrorCode::InvalidJson)
    );
    assert_eq!(
        check_rate(1_000_001).map_err(|e| e.code),
        Err(ErrorCode::InvalidRate)
    );
}

#[test]
fn schedule_body() {
    let room = base();
    let scheduled = apply_schedule(&room, &json!({"opensAt": NOW + 60_000})).expect("ok");
    assert_eq!(scheduled.opens_at, Some(NOW + 60_000));
    let capped = apply_schedule(&scheduled, &json!({"preQueueMaxPerIp": 3})).expect("ok");
    assert_eq!(
        (capped.opens_at, capped.pre_queue_max_per_ip),
        (Some(NOW + 60_000), Some(3))
    );
    assert_eq!(
        apply_schedule(&capped, &json!({"opensAt": null}))
            .expect("ok")
            .opens_at,
        None
    );
    assert_eq!(
        apply_schedule(&room, &json!({})).map_err(|e| e.code),
        Err(ErrorCode::NothingToChange)
    );
    assert_eq!(
        apply_schedule(&room, &json!({"opensAt": 1, "when": 2})).map_err(|e| e.code),
        Err(ErrorCode::UnknownField)
    );
    assert_eq!(
        apply_schedule(&room, &json!({"opensAt": "soon"})).map_err(|e| e.code),
        Err(ErrorCode::InvalidOpensAt)
    );
    assert_eq!(
        apply_schedule(&room, &json!({"preQueueMaxPerIp": 0})).map_err(|e| e.code),
        Err(ErrorCode::InvalidPreQueueMaxPerIp)
    );
}

/// A field family of the control-character test: the field, a body holding the given text in
/// it, and the code its refusal carries.
type Family = (&'static str, Box<dyn Fn(&str) -> Value>, ErrorCode);

/// Every string the room document stores, with the code its refusal carries. A control
/// character in any of them is refused with that code, and the message names the character.
#[test]
fn control_characters_are_refused_in_every_operator_string() {
    let families: Vec<Family> = vec![
        (
            "name",
            Box::new(|text| json!({"name": format!("Big {text}drop")})),
            ErrorCode::InvalidName,
        ),
        (
            "targetUrl",
            Box::new(|text| json!({"targetUrl": format!("https://shop.example.com/a{text}b")})),
            ErrorCode::InvalidTargetUrl,
        ),
        (
            "proxyOrigin",
            Box::new(|text| json!({"proxyOrigin": format!("https://in{text}ternal.example")})),
            ErrorCode::InvalidProxyOrigin,
        ),
        (
            "returnOrigins",
            Box::new(|text| json!({"returnOrigins": [format!("https://a{text}.example")]})),
            ErrorCode::InvalidReturnOrigins,
        ),
        (
            "tagOrigins",
            Box::new(|text| json!({"tagOrigins": [format!("https://a{text}.example")]})),
            ErrorCode::InvalidTagOrigins,
        ),
        (
            "urlPatterns",
            Box::new(|text| json!({"urlPatterns": [format!("/checkout{text}")]})),
            ErrorCode::InvalidUrlPattern,
        ),
        (
            "opensAt",
            Box::new(|text| json!({"opensAt": format!("2030-01-01T00:00:00Z{text}")})),
            ErrorCode::InvalidOpensAt,
        ),
        (
            "state",
            Box::new(|text| json!({"state": format!("active{text}")})),
            ErrorCode::InvalidState,
        ),
        (
            "onBackendDown",
            Box::new(|text| json!({"onBackendDown": format!("open{text}")})),
            ErrorCode::InvalidOnBackendDown,
        ),
    ];
    let mut branding_keys: Vec<Family> = Vec::new();
    for key in ["title", "logoUrl", "message", "supportText", "primaryColor"] {
        branding_keys.push((
            key,
            Box::new(move |text| {
                let value = match key {
                    "logoUrl" => format!("/logo{text}.png"),
                    "primaryColor" => format!("#abc{text}"),
                    _ => format!("Doors at {text}six"),
                };
                json!({"branding": {key: value}})
            }),
            ErrorCode::InvalidBranding,
        ));
    }
    for (field, body, code) in families.iter().chain(branding_keys.iter()) {
        for refused in ["\0", "\u{1}", "\u{1B}[31m", "\u{7F}", "\u{85}", "\u{9F}"] {
            let error = update(body(refused)).expect_err("a control character is refused");
            assert_eq!(
                error.code, *code,
                "{field} with {refused:?}: {}",
                error.message
            );
            assert!(
                !error.message.contains(refused),
                "{field}: the raw character is never echoed: {:?}",
                error.message
            );
        }
        // The same body without the character is accepted (the character was the fault).
        assert!(update(body("")).is_ok(), "{field} is fine without it");
    }
    // Only the two paragraph texts keep line breaks and tabs.
    for key in ["message", "supportText"] {
        let room = update(json!({"branding": {key: "Line one\r\nLine two\tend"}}))
            .expect("a paragraph may break lines");
        assert!(room.branding.is_some());
    }
    for line in [
        json!({"branding": {"title": "a\nb"}}),
        json!({"name": "a\nb"}),
    ] {
        assert!(update(line.clone()).is_err(), "{line}");
    }
    // A NUL in a name says which character and where, not the name.
    let error = update(json!({"name": "secret\0name"})).expect_err("NUL");
    assert!(
        error.message.contains("U+0000 at character 7"),
        "{}",
        error.message
    );
    assert!(!error.message.contains("secret"), "{}", error.message);
    // The schedule route reads the same fields with the same rules.
    let error = apply_schedule(&base(), &json!({"opensAt": "2030-01-01\0"})).expect_err("NUL");
    assert_eq!(error.code, ErrorCode::InvalidOpensAt);
}

/// A refusal quotes at most 64 characters of the value it refuses, whatever its size or type.
#[test]
fn a_refused_value_is_echoed_bounded() {
    let huge = "x".repeat(100_000);
    let bodies = [
        json!({"ratePerMinute": huge}),
        json!({"maxConcurrent": huge}),
        json!({"passedTtlSec": vec![huge.clone()]}),
        json!({"queueMaxPerIp": huge}),
        json!({"presenceSec": huge}),
        json!({"proxyOrigin": huge}),
        json!({"returnOrigins": [huge]}),
        json!({"urlPatterns": [huge]}),
        json!({"opensAt": huge}),
        json!({"state": huge}),
        json!({"onBackendDown": huge}),
        json!({"id": huge}),
        json!({"targetUrl": huge}),
        json!({"name": huge}),
        json!({"branding": {huge.clone(): 1}}),
        json!({"branding": {"message": huge}}),
        json!({"autotune": {huge.clone(): true}}),
        json!({huge.clone(): 1}),
    ];
    for body in bodies {
        let error = update(body).expect_err("refused");
        assert!(
            error.message.len() < 400,
            "{:?}: a {}-byte message",
            error.code,
            error.message.len()
        );
    }
    let error = apply_schedule(&base(), &json!({"preQueueMaxPerIp": huge})).expect_err("refused");
    assert!(error.message.len() < 400, "{}", error.message.len());
    let error = RoomState::parse(&huge).expect_err("refused");
    assert!(error.message.len() < 400, "{}", error.message.len());
}
