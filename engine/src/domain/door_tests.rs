//! Door sessions: opening spends a pass, a key carries the visitor, idle and absolute ends,
//! eject, reclaim by the browser that queued, and the `maxConcurrent` slot a session keeps.

use serde_json::{Value, json};

use super::*;
use qm_core::room::RoomConfig;

const T0: i64 = 1_700_000_000_000;
const GENERATION: u64 = 1_700_000_000;
const OWNER: &str = "owner-hash";

fn room_with(extra: Value) -> Room {
    let mut body = json!({"id": "door", "targetUrl": "https://shop.example.com/",
        "ratePerMinute": 0, "sessionTtlSec": 60, "sessionMaxSec": 600});
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    let config = RoomConfig::apply_patch(None, &body, T0).expect("valid room");
    Room::create(config, GENERATION, 0, T0).0
}

/// A room with ticket 1 (held by `OWNER`) passed at T0.
fn passed_room(extra: Value) -> Room {
    let mut room = room_with(extra);
    let request = JoinRequest {
        session_hash: OWNER.to_owned(),
        ..JoinRequest::default()
    };
    room.join(&request, T0, &mut rand::rng()).expect("join");
    room.flush(1, T0).expect("flush");
    room
}

fn token(ticket: u64) -> Option<Claim> {
    Some(Claim {
        generation: GENERATION,
        place: ClaimedPlace::Ticket(ticket),
    })
}

fn input(claim: Option<Claim>, key: &str, new_key: &str, owner: &str) -> DoorInput {
    DoorInput {
        claim,
        ownership_hash: owner.to_owned(),
        key_hash: key.to_owned(),
        new_key_hash: new_key.to_owned(),
        page: None,
    }
}

/// Runs the check as a store does: the command, whose change is committed.
fn check(room: &mut Room, input: &DoorInput, at: i64) -> (CheckAnswer, Vec<EventRecord>) {
    let executed = room.execute(&Command::Door(input.clone()), at, &mut rand::rng());
    match executed.outcome {
        Ok(Outcome::Door(answer)) => (answer, executed.records),
        other => panic!("a door check answers a door outcome, got {other:?}"),
    }
}

fn verdict(answer: &CheckAnswer) -> (CheckAction, &'static str, bool) {
    (answer.action, answer.reason, answer.clear_token)
}

#[test]
fn a_pass_opens_one_session_and_its_key_carries_the_visitor_without_a_new_place() {
    let mut room = passed_room(json!({}));
    let (opened, records) = check(&mut room, &input(token(1), "", "k1", ""), T0 + 1000);
    assert_eq!(verdict(&opened), (CheckAction::Pass, "passed", false));
    assert!(opened.session_opened);
    assert_eq!(records.len(), 1, "the opening is journaled");
    let next_ticket = room.next_ticket();
    for page in 0..50 {
        let at = T0 + 2000 + page * 1000;
        let (answer, _) = check(&mut room, &input(None, "k1", "", ""), at);
        assert_eq!(verdict(&answer), (CheckAction::Pass, "session", false));
        assert!(!answer.session_opened);
    }
    assert_eq!(
        room.next_ticket(),
        next_ticket,
        "no page check minted a place"
    );
}

#[test]
fn a_spent_pass_does_not_admit_anybody_else() {
    let mut room = passed_room(json!({}));
    check(&mut room, &input(token(1), "", "k1", ""), T0 + 1000);
    // The token copied to another client: no key, no ownership cookie.
    let (copied, records) = check(&mut room, &input(token(1), "", "k2", ""), T0 + 2000);
    assert_eq!(verdict(&copied), (CheckAction::Queue, "pass_spent", true));
    assert!(records.is_empty() && !copied.session_opened);
    // The same with another browser's ownership cookie.
    let (other, _) = check(&mut room, &input(token(1), "", "k2", "other"), T0 + 2000);
    assert_eq!(verdict(&other), (CheckAction::Queue, "pass_spent", true));
    // The first key still works.
    let (first, _) = check(&mut room, &input(None, "k1", "", ""), T0 + 3000);
    assert_eq!(first.action, CheckAction::Pass);
}

#[test]
fn the_browser_that_queued_reclaims_its_live_session_under_a_new_key() {
    let mut room = passed_room(json!({}));
    check(&mut room, &input(token(1), "", "k1", OWNER), T0 + 1000);
    let (reclaimed, _) = check(&mut room, &input(token(1), "", "k2", OWNER), T0 + 2000);
    assert_eq!(verdict(&reclaimed), (CheckAction::Pass, "passed", false));
    assert!(reclaimed.session_opened);
    let (old, _) = check(&mut room, &input(None, "k1", "", ""), T0 + 3000);
    assert_eq!(verdict(&old), (CheckAction::Queue, "session_ended", true));
    let (new, _) = check(&mut room, &input(None, "k2", "", ""), T0 + 3000);
    assert_eq!(new.action, CheckAction::Pass);
}

#[test]
fn an_idle_session_ends_after_its_ttl_and_use_keeps_it_alive() {
    let mut room = passed_room(json!({}));
    check(&mut room, &input(token(1), "", "k1", ""), T0);
    // Used every 20 s for five minutes: alive throughout (60 s idle window).
    let mut at = T0;
    for _ in 0..15 {
        at += 20_000;
        let (answer, _) = check(&mut room, &input(None, "k1", "", ""), at);
        assert_eq!(
            answer.action,
            CheckAction::Pass,
            "at +{} s",
            (at - T0) / 1000
        );
    }
    // Idle a little over the window and its quarter of slack: ended, for good.
    let (late, _) = check(&mut room, &input(None, "k1", "", ""), at + 75_001);
    assert_eq!(verdict(&late), (CheckAction::Queue, "session_ended", true));
    let (token_again, _) = check(&mut room, &input(token(1), "", "k3", OWNER), at + 76_000);
    assert_eq!(token_again.action, CheckAction::Queue);
    assert!(token_again.clear_token);
}

#[test]
fn use_is_journaled_at_most_once_a_quarter_of_the_idle_window() {
    let mut room = passed_room(json!({}));
    check(&mut room, &input(token(1), "", "k1", ""), T0);
    let written: usize = (1..=60)
        .map(|second| {
            check(&mut room, &input(None, "k1", "", ""), T0 + second * 1000)
                .1
                .len()
        })
        .sum();
    assert_eq!(written, 4, "one record of use per 15 s over a minute");
}

#[test]
fn a_session_ends_at_its_absolute_limit_however_busy() {
    let mut room = passed_room(json!({"sessionMaxSec": 120}));
    check(&mut room, &input(token(1), "", "k1", OWNER), T0);
    for second in (10..120).step_by(10) {
        let (answer, _) = check(&mut room, &input(None, "k1", "", ""), T0 + second * 1000);
        assert_eq!(answer.action, CheckAction::Pass);
        assert!(answer.session_expires_at_ms <= T0 + 120_000);
    }
    let (ended, _) = check(&mut room, &input(None, "k1", "", ""), T0 + 120_000);
    assert_eq!(verdict(&ended), (CheckAction::Queue, "session_ended", true));
    // Nor can the browser that queued reclaim it: the absolute end is absolute.
    let (reclaim, _) = check(&mut room, &input(token(1), "", "k2", OWNER), T0 + 121_000);
    assert_eq!(reclaim.action, CheckAction::Queue);
}

#[test]
fn eject_ends_a_live_session() {
    let mut room = passed_room(json!({}));
    check(&mut room, &input(token(1), "", "k1", ""), T0);
    room.eject(1, T0 + 1000).expect("eject");
    let (answer, _) = check(&mut room, &input(None, "k1", "", ""), T0 + 2000);
    assert_eq!(
        verdict(&answer),
        (CheckAction::Queue, "session_ended", true)
    );
    let (token_again, _) = check(&mut room, &input(token(1), "", "k2", OWNER), T0 + 2000);
    assert_eq!(verdict(&token_again), (CheckAction::Queue, "ejected", true));
}

#[test]
fn a_forged_key_is_refused_and_a_waiting_token_keeps_its_place() {
    let mut room = passed_room(json!({}));
    let request = JoinRequest::default();
    room.join(&request, T0, &mut rand::rng()).expect("join");
    let (forged, _) = check(&mut room, &input(None, "forged", "", ""), T0);
    assert_eq!(
        verdict(&forged),
        (CheckAction::Queue, "session_ended", true)
    );
    // A dead key beside a waiting token: the visitor queues on that token's place.
    let (waiting, _) = check(&mut room, &input(token(2), "forged", "k", ""), T0);
    assert_eq!(verdict(&waiting), (CheckAction::Queue, "waiting", false));
    let (no_token, _) = check(&mut room, &input(None, "", "", ""), T0);
    assert_eq!(verdict(&no_token), (CheckAction::Queue, "no_token", false));
}

#[test]
fn a_session_keeps_its_slot_past_the_pass_window_and_gives_it_back_when_it_ends() {
    let mut room = passed_room(json!({"maxConcurrent": 1, "passedTtlSec": 10,
        "presenceSec": null}));
    assert_eq!(room.free_slots(T0), 0);
    check(&mut room, &input(token(1), "", "k1", ""), T0 + 1000);
    // The pass's own window (10 s) is long over; the session (60 s idle) still holds the slot.
    let (alive, _) = check(&mut room, &input(None, "k1", "", ""), T0 + 30_000);
    assert_eq!(alive.action, CheckAction::Pass);
    assert_eq!(room.free_slots(T0 + 31_000), 0);
    // Idle past its end: the slot is free again.
    assert_eq!(room.free_slots(T0 + 30_000 + 75_001), 1);
}

#[test]
fn a_session_outliving_its_pass_window_leaves_no_pass_slotless() {
    // The store differential's minimal case: more slot holders than live passes.
    let mut room = passed_room(json!({"passedTtlSec": 30}));
    check(&mut room, &input(token(1), "", "k1", ""), T0);
    assert_eq!(room.slotless_passes(T0 + 30_001), 0);
    assert_eq!(room.admin_json(T0 + 30_001)["slotlessPasses"], 0);
}

#[test]
fn a_session_opened_from_a_slotless_pass_takes_no_slot() {
    // Rate 60/min with presence on: a holder never seen is a ghost whose pass owns no slot.
    let mut room = room_with(json!({"maxConcurrent": 5, "ratePerMinute": 60,
        "presenceSec": 10}));
    let request = JoinRequest {
        session_hash: OWNER.to_owned(),
        ..JoinRequest::default()
    };
    room.join(&request, T0, &mut rand::rng()).expect("join");
    // Unseen for longer than presenceSec, then promoted by the clock: a ghost.
    room.tick(T0 + 20_000);
    assert_eq!(room.slotless_passes(T0 + 20_000), 1);
    check(&mut room, &input(token(1), "", "k1", ""), T0 + 21_000);
    assert_eq!(room.free_slots(T0 + 22_000), 5);
}

#[test]
fn a_bypass_room_passes_everybody_without_a_session() {
    let mut room = room_with(json!({"state": "bypass"}));
    let (answer, records) = check(&mut room, &input(None, "", "k", ""), T0);
    assert_eq!(verdict(&answer), (CheckAction::Pass, "bypass", false));
    assert!(records.is_empty() && !answer.session_opened);
}

#[test]
fn a_replay_restores_sessions_exactly() {
    let mut room = passed_room(json!({}));
    let mut journal = Vec::new();
    for (input, at) in [
        (input(token(1), "", "k1", ""), T0 + 1000),
        (input(None, "k1", "", ""), T0 + 30_000),
    ] {
        journal.extend(check(&mut room, &input, at).1);
    }
    let mut replayed = passed_room(json!({}));
    for record in &journal {
        replayed.apply(record).expect("apply");
    }
    assert_eq!(replayed.door, room.door);
    let (answer, _) = check(&mut replayed, &input(None, "k1", "", ""), T0 + 60_000);
    assert_eq!(answer.action, CheckAction::Pass);
}
