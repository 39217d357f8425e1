//! The support lookup's reading of a room: each state in words, the binding only as a digest,
//! and a reference code resolved by comparison, ambiguity included (an injected comparison
//! stands in for a 30-bit collision nobody can find on demand).

use qm_core::room::RoomConfig;
use qm_core::support_ref::support_ref_with_key;
use qm_core::token::VisitorPlace;
use serde_json::{Value, json};

use super::*;

const T0: i64 = 1_700_000_000_000;
const GENERATION: u64 = 1_700_000_000;

fn keys() -> LookupKeys {
    LookupKeys {
        ref_keys: vec![[7; 32], [9; 32]],
        session_key: [3; 32],
    }
}

fn room() -> Room {
    let body = json!({"id": "drop", "targetUrl": "https://shop.example.com/",
        "ratePerMinute": 600, "passedTtlSec": 300});
    let config = RoomConfig::apply_patch(None, &body, T0).expect("valid room");
    Room::create(config, GENERATION, 0, T0).0
}

fn join(room: &mut Room, session: &str) -> u64 {
    // One address for the first few places; the long line's come from nowhere in particular
    // (engine-internal callers), so the per-address cap stays out of the way.
    let identity = if room.next_ticket() <= 3 {
        "203.0.113.9"
    } else {
        ""
    };
    let request = JoinRequest {
        session_hash: session.to_owned(),
        identity: identity.to_owned(),
        ..JoinRequest::default()
    };
    room.join(&request, T0, &mut rand::rng())
        .expect("join")
        .place
        .ticket
}

fn visitor(room: &Room, ticket: u64) -> Value {
    room.visitor_json(VisitorPlace::Ticket(ticket), &keys(), T0 + 1_000)
        .expect("a known ticket")
}

#[test]
fn each_state_reads_in_words_with_the_binding_as_a_digest_only() {
    let session = "a".repeat(64);
    let mut room = room();
    let first = join(&mut room, &session);
    let second = join(&mut room, &session);
    let third = join(&mut room, "");
    room.flush(1, T0).expect("flush");
    room.eject(third, T0).expect("eject");

    let passed = visitor(&room, first);
    assert_eq!(passed["state"], "passed");
    assert_eq!(passed["passExpiresAt"], T0 + 300_000);
    assert_eq!(passed["passTtlRemainingSec"], 299);
    assert_eq!(passed["bound"], true);

    let waiting = visitor(&room, second);
    assert_eq!(waiting["state"], "waiting");
    assert_eq!(
        (waiting["position"].clone(), waiting["ahead"].clone()),
        (json!(1), json!(0))
    );
    assert_eq!(
        waiting["session"], passed["session"],
        "one browser, one digest"
    );
    assert_eq!(waiting["session"].as_str().map(str::len), Some(12));
    assert_eq!(waiting["generation"], GENERATION);
    assert_eq!(
        waiting["ref"],
        support_ref_with_key(&[7; 32], "drop", GENERATION, VisitorPlace::Ticket(second)),
        "the code the page shows now, under SECRET"
    );

    let ejected = visitor(&room, third);
    assert_eq!(
        (ejected["state"].clone(), ejected["reason"].clone()),
        (json!("expired"), json!("ejected"))
    );
    assert_eq!(
        (ejected["bound"].clone(), ejected["session"].clone()),
        (json!(false), Value::Null)
    );

    for answer in [&passed, &waiting, &ejected] {
        let text = answer.to_string();
        assert!(!text.contains(&session), "raw session hash in {text}");
        assert!(!text.contains("203.0.113.9"), "address in {text}");
    }
    assert!(
        room.visitor_json(VisitorPlace::Ticket(99), &keys(), T0)
            .is_none()
    );
    assert!(
        room.visitor_json(VisitorPlace::Ticket(0), &keys(), T0)
            .is_none()
    );
}

#[test]
fn a_code_is_found_under_either_key_and_an_ambiguous_one_names_every_match() {
    let mut room = room();
    for _ in 0..50 {
        join(&mut room, "s");
    }
    let scan = room.ref_scan();
    assert_eq!(scan.last_ticket, 50);
    let keys = keys();
    let previous = support_ref_with_key(&[9; 32], "drop", GENERATION, VisitorPlace::Ticket(17));
    let found = matching_places(&scan, |place| {
        keys.shows(&scan.room_id, scan.generation, place, &previous)
    });
    assert_eq!(
        found,
        vec![VisitorPlace::Ticket(17)],
        "found under SECRET_PREVIOUS"
    );

    // A collision: two places that "show" the same code.
    let found = matching_places(&scan, |place| {
        matches!(place, VisitorPlace::Ticket(12 | 40))
    });
    assert_eq!(
        found,
        vec![VisitorPlace::Ticket(40), VisitorPlace::Ticket(12)]
    );
    let visitors: Vec<Value> = found
        .iter()
        .filter_map(|place| room.visitor_json(*place, &keys, T0))
        .collect();
    let answer = crate::visitors::answer_for(visitors, "K7F-3QX").expect("candidates");
    assert_eq!(answer["ambiguous"], true);
    assert_eq!(
        answer["candidates"],
        json!([{"ticket": 40, "state": "waiting"}, {"ticket": 12, "state": "waiting"}])
    );
    let none = crate::visitors::answer_for(Vec::new(), "K7F-3QX").expect_err("nothing");
    assert_eq!(none.code, qm_core::ErrorCode::VisitorNotFound);
}
