use qm_core::room::RoomConfig;
use serde_json::{Value, json};

use super::*;
use crate::domain::{
    CheckAction, CheckAnswer, Claim, ClaimedPlace, Command, DoorInput, JoinRequest, Room,
};

/// The door's read answer for a token and a page (no door-session key).
fn check(room: &Room, claim: Option<&Claim>, page: Option<&str>, now_ms: i64) -> CheckAnswer {
    let input = DoorInput {
        claim: claim.copied(),
        page: page.map(str::to_owned),
        ..DoorInput::default()
    };
    room.door_decision(&input, now_ms).answer
}

const T0: i64 = 1_700_000_000_000;
const GENERATION: u64 = 7;

fn room(extra: Value) -> Room {
    let mut body = json!({"id": "shop", "targetUrl": "https://shop.example/", "ratePerMinute": 0});
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    let config = RoomConfig::apply_patch(None, &body, T0).expect("valid room");
    Room::create(config, GENERATION, 0, T0).0
}

fn update(room: &mut Room, patch: Value, at_ms: i64) {
    let mut body = json!({"id": "shop"});
    if let (Some(body), Some(patch)) = (body.as_object_mut(), patch.as_object()) {
        body.extend(patch.clone());
    }
    room.execute(&Command::Put(body), at_ms, &mut rand::rng())
        .outcome
        .expect("update");
}

fn scope_of(room: &Room, page: Option<&str>) -> Option<(PageScope, Option<String>)> {
    room.judge_page(page)
        .map(|verdict| (verdict.scope, verdict.rule_text().map(str::to_owned)))
}

#[test]
fn a_room_without_rules_is_unscoped_and_at_rev_zero() {
    let room = room(json!({}));
    assert_eq!(room.targeting().rev(), 0);
    assert_eq!(room.targeting().updated_at_ms(), T0);
    assert!(!room.targeting().is_scoped());
    assert_eq!(room.judge_page(Some("https://shop.example/x")), None);
    assert_eq!(room.judge_page(None), None);
    assert_eq!(check(&room, None, None, T0).targeting, None);
}

#[test]
fn the_revision_moves_only_when_the_rules_change() {
    let mut room = room(json!({"urlPatterns": ["/checkout/*"]}));
    assert_eq!(room.targeting().rev(), 1, "created with rules: rev 1");
    update(&mut room, json!({"ratePerMinute": 5}), T0 + 1_000);
    assert_eq!(room.targeting().rev(), 1, "another field leaves it alone");
    assert_eq!(room.targeting().updated_at_ms(), T0);
    update(
        &mut room,
        json!({"urlPatterns": ["/checkout/*"]}),
        T0 + 2_000,
    );
    assert_eq!(room.targeting().rev(), 1, "the same rules are no change");
    update(
        &mut room,
        json!({"urlPatterns": ["/checkout/*", "!/checkout/help"]}),
        T0 + 3_000,
    );
    assert_eq!(room.targeting().rev(), 2);
    assert_eq!(room.targeting().updated_at_ms(), T0 + 3_000);
    update(&mut room, json!({"urlPatterns": []}), T0 + 4_000);
    assert_eq!(room.targeting().rev(), 3, "clearing the rules is a change");
    assert!(!room.targeting().is_scoped());
}

#[test]
fn the_revision_is_the_same_after_a_replay() {
    let config = RoomConfig::apply_patch(
        None,
        &json!({"id": "shop", "targetUrl": "https://shop.example/", "ratePerMinute": 0,
                "urlPatterns": ["/a"]}),
        T0,
    )
    .expect("valid room");
    let (mut live, created) = Room::create(config, GENERATION, 0, T0);
    let mut records = vec![created];
    for (index, rules) in [json!(["/b"]), json!(["/b"]), json!(["/c", "!/c/x"])]
        .into_iter()
        .enumerate()
    {
        let body = json!({"id": "shop", "urlPatterns": rules});
        let executed = live.execute(&Command::Put(body), T0 + index as i64, &mut rand::rng());
        records.extend(executed.records);
    }
    let replayed = Room::replay(&records).expect("replay");
    assert_eq!(replayed.targeting(), live.targeting());
    assert_eq!(replayed.targeting().rev(), 3);
    assert_eq!(
        scope_of(&replayed, Some("https://shop.example/c/x")),
        Some((PageScope::Out, Some("!/c/x".to_owned())))
    );
}

#[test]
fn pages_are_in_out_or_unknown() {
    let room = room(json!({"urlPatterns": ["/checkout/*", "!/checkout/help"]}));
    assert_eq!(
        scope_of(&room, Some("https://shop.example/checkout/pay")),
        Some((PageScope::In, Some("/checkout/*".to_owned())))
    );
    assert_eq!(
        scope_of(&room, Some("https://shop.example/checkout/help")),
        Some((PageScope::Out, Some("!/checkout/help".to_owned()))),
        "the exception wins"
    );
    assert_eq!(
        scope_of(&room, Some("https://shop.example/about")),
        Some((PageScope::Out, None)),
        "a page no rule names is out"
    );
    for unknown in [None, Some(""), Some("not a url"), Some("/checkout/pay")] {
        assert_eq!(
            scope_of(&room, unknown),
            Some((PageScope::Unknown, None)),
            "{unknown:?} is unknown"
        );
    }
    assert_eq!(PageScope::Unknown.action(), "queue", "unknown fails closed");
    assert_eq!(PageScope::Out.action(), "pass");
    assert_eq!(pattern_action("!/x"), "pass");
    assert_eq!(pattern_action("/x"), "queue");
}

#[test]
fn an_out_of_scope_page_passes_whatever_the_claim_and_an_unknown_one_is_checked() {
    let mut room = room(json!({"urlPatterns": ["/checkout/*"]}));
    let request = JoinRequest::default();
    room.join(&request, T0, &mut rand::rng()).expect("join");
    let claim = Claim {
        generation: GENERATION,
        place: ClaimedPlace::Ticket(1),
    };
    let before = room.clone();
    let out = check(&room, Some(&claim), Some("https://shop.example/about"), T0);
    assert_eq!(
        (out.action, out.reason),
        (CheckAction::Pass, "out_of_scope")
    );
    assert_eq!(out.targeting.map(|v| v.scope), Some(PageScope::Out));
    assert_eq!(room, before, "the check minted nothing");

    let unknown = check(&room, Some(&claim), None, T0);
    assert_eq!(
        (unknown.action, unknown.reason),
        (CheckAction::Queue, "waiting")
    );
    assert_eq!(unknown.targeting.map(|v| v.scope), Some(PageScope::Unknown));
    let in_scope = check(&room, None, Some("https://shop.example/checkout/1"), T0);
    assert_eq!(
        (in_scope.action, in_scope.reason),
        (CheckAction::Queue, "no_token")
    );
    let verdict = in_scope.targeting.expect("scoped");
    assert_eq!((verdict.rev, verdict.rule), (1, Some(0)));
    assert_eq!(&*verdict.patterns, ["/checkout/*".to_owned()]);
}
