//! Unit tests of the presence rule (ghost tickets, QM-345), one behaviour each.

use qm_core::room::RoomConfig;
use serde_json::{Value, json};

use super::*;

const T0: i64 = 1_700_000_000_000;
const GENERATION: u64 = 1_700_000_000;

/// A room created at `T0` and the records it has produced so far.
struct Fixture {
    room: Room,
    records: Vec<EventRecord>,
}

impl Fixture {
    fn new(extra: Value) -> Fixture {
        let mut body =
            json!({"id": "ghosts", "targetUrl": "https://shop.example.com/", "ratePerMinute": 60});
        if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
            body.extend(extra.clone());
        }
        let config = RoomConfig::apply_patch(None, &body, T0).expect("valid room");
        let (room, created) = Room::create(config, GENERATION, 0, T0);
        Fixture {
            room,
            records: vec![created],
        }
    }

    fn join(&mut self, session: &str, at: i64) -> u64 {
        let request = JoinRequest {
            claim: None,
            session_hash: session.to_owned(),
            identity: String::new(),
            ..JoinRequest::default()
        };
        let outcome = self
            .room
            .join(&request, at, &mut rand::rng())
            .expect("join");
        self.records.extend(outcome.record);
        outcome.place.ticket
    }

    /// The `Passed` event of the slice at `at`, if any.
    fn tick(&mut self, at: i64) -> Option<RoomEvent> {
        let record = self.room.tick(at)?;
        self.records.push(record.clone());
        Some(record.event)
    }

    fn passed(&self, ticket: u64, at: i64) -> bool {
        let claim = Claim {
            generation: GENERATION,
            place: ClaimedPlace::Ticket(ticket),
        };
        matches!(self.room.status(&claim, "", at), PlaceAnswer::Place(place) if place.passed)
    }

    /// The room folded from its records, with the unjournaled parts copied from the live room.
    fn replayed(&self) -> Room {
        let mut rebuilt = Room::replay(&self.records).expect("the events fold back");
        rebuilt.carry = self.room.carry;
        rebuilt.presence = self.room.presence.clone();
        rebuilt
    }
}

/// (first, last, count, ns) of a `Passed` event.
fn batch(event: Option<RoomEvent>) -> (u64, u64, u64, Vec<u64>) {
    match event {
        Some(RoomEvent::Passed {
            first,
            last,
            count,
            ns,
            ..
        }) => (first, last, count, ns),
        other => panic!("expected a pass, got {other:?}"),
    }
}

#[test]
fn absent_holders_pass_in_order_free_and_slotless() {
    let mut fixture = Fixture::new(json!({"maxConcurrent": 2, "presenceSec": 5}));
    for session in ["a", "b", "c", "d"] {
        fixture.join(session, T0);
    }
    // Six seconds on, only b and d are still there.
    fixture.room.see(2, T0 + 5_500);
    fixture.room.see(4, T0 + 5_500);
    assert!(!fixture.room.is_present(1, T0 + 6_000));
    assert!(fixture.room.is_present(2, T0 + 6_000));

    // One visitor of credit: a and c pass free around b, d waits for the next slice's credit.
    let (first, last, count, ns) = batch(fixture.tick(T0 + 6_000));
    assert_eq!((first, last, count, ns), (1, 3, 3, vec![1, 3]));
    assert_eq!(
        fixture.room.carry.credit_sixtieths, 0,
        "only b was paid for"
    );
    assert_eq!(
        fixture.room.active_passes(T0 + 6_000),
        1,
        "ghosts hold no slot"
    );
    assert_eq!(fixture.room.slotless_passes(T0 + 6_000), 2);
    assert!(fixture.passed(1, T0 + 6_000) && fixture.passed(3, T0 + 6_000));
    assert_eq!(fixture.room.position_of(4), Some(1));

    let (first, last, count, ns) = batch(fixture.tick(T0 + 7_000));
    assert_eq!((first, last, count, ns), (4, 4, 1, vec![]));
    assert_eq!(fixture.room.free_slots(T0 + 7_000), 0);
}

#[test]
fn a_line_of_ghosts_does_not_block_the_ones_behind_a_full_room() {
    let mut fixture = Fixture::new(json!({"maxConcurrent": 1, "presenceSec": 5}));
    let holder = fixture.join("holder", T0);
    assert_eq!(batch(fixture.tick(T0 + 1_000)).2, 1);
    fixture.room.see(holder, T0 + 1_500);
    for _ in 0..3 {
        fixture.join("gone", T0 + 2_000);
    }
    let present = fixture.join("here", T0 + 8_000);
    // The room is full (the holder was told), the ghosts pass for free, `here` waits.
    let (first, last, _, ns) = batch(fixture.tick(T0 + 8_000));
    assert_eq!((first, last, ns), (2, 4, vec![2, 3, 4]));
    assert_eq!(fixture.room.position_of(present), Some(1));
}

#[test]
fn the_replay_restores_ghost_passes_slotless() {
    let mut fixture = Fixture::new(json!({"maxConcurrent": 5, "presenceSec": 5}));
    for session in ["a", "b", "c"] {
        fixture.join(session, T0);
    }
    fixture.room.see(2, T0 + 9_000);
    fixture.tick(T0 + 9_000);
    fixture.tick(T0 + 10_000);
    let rebuilt = fixture.replayed();
    assert_eq!(rebuilt, fixture.room, "the fold equals the live room");
    assert_eq!(rebuilt.active_passes(T0 + 10_000), 1);
    assert!(
        rebuilt
            .passes
            .iter()
            .any(|pass| pass.ticket == 1 && pass.slotless)
    );

    // Even without the sightings (a rebuild knows none), ghosts stay slotless.
    let bare = Room::replay(&fixture.records).expect("fold");
    assert!(bare.passes.iter().filter(|pass| pass.slotless).count() >= 1);
}

#[test]
fn a_pass_never_told_gives_its_slot_back_after_presence_sec() {
    let mut fixture =
        Fixture::new(json!({"ratePerMinute": 600, "maxConcurrent": 1, "presenceSec": 5}));
    let untold = fixture.join("a", T0);
    let next = fixture.join("b", T0);
    assert_eq!(batch(fixture.tick(T0 + 1_000)).0, untold);
    fixture.room.see(next, T0 + 4_000);
    assert_eq!(fixture.tick(T0 + 5_000), None, "the slot is taken");
    assert_eq!(fixture.room.free_slots(T0 + 5_999), 0);
    assert_eq!(
        fixture.room.free_slots(T0 + 6_000),
        1,
        "never told: slot back"
    );
    assert!(
        fixture.passed(untold, T0 + 6_000),
        "still a pass at the door"
    );
    // Told too late: the slot stays given back, so a returning holder cannot overfill the room.
    assert!(!fixture.room.see(untold, T0 + 6_500));
    assert_eq!(fixture.room.free_slots(T0 + 6_500), 1);
    assert_eq!(batch(fixture.tick(T0 + 6_000)).0, next);
}

#[test]
fn a_pass_told_in_time_keeps_its_slot() {
    let mut fixture =
        Fixture::new(json!({"ratePerMinute": 600, "maxConcurrent": 1, "presenceSec": 5}));
    let told = fixture.join("a", T0);
    let next = fixture.join("b", T0);
    fixture.tick(T0 + 1_000);
    fixture.room.see(told, T0 + 2_000);
    for second in 2..=20 {
        fixture.room.see(next, T0 + second * 1_000);
        assert_eq!(fixture.tick(T0 + second * 1_000), None);
    }
    assert_eq!(fixture.room.active_passes(T0 + 20_000), 1);
}

#[test]
fn tickets_without_a_holder_are_always_present() {
    let mut fixture = Fixture::new(json!({"maxConcurrent": 1, "presenceSec": 5}));
    let internal = fixture.join("", T0);
    fixture.join("", T0);
    assert!(fixture.room.is_present(internal, T0 + 3_600_000));
    assert!(!fixture.room.see(internal, T0 + 1_000), "nothing to record");
    let (_, last, count, ns) = batch(fixture.tick(T0 + 60_000));
    assert_eq!(
        (last, count, ns),
        (1, 1, vec![]),
        "paid and holding its slot"
    );
    assert_eq!(fixture.room.active_passes(T0 + 120_000), 1);
    assert_eq!(fixture.tick(T0 + 120_000), None);
}

#[test]
fn presence_sec_null_is_the_rule_before_ghosts() {
    let mut fixture = Fixture::new(json!({"maxConcurrent": 2, "presenceSec": null}));
    for session in ["a", "b", "c", "d"] {
        fixture.join(session, T0);
    }
    assert!(fixture.room.is_present(1, T0 + 3_600_000));
    let (first, last, count, ns) = batch(fixture.tick(T0 + 600_000));
    assert_eq!((first, last, count, ns), (1, 1, 1, vec![]));
    batch(fixture.tick(T0 + 601_000));
    assert_eq!(fixture.tick(T0 + 602_000), None, "two slots, both held");
    assert_eq!(fixture.room.active_passes(T0 + 602_000), 2);
    assert_eq!(fixture.room.slotless_passes(T0 + 602_000), 0);
}

#[test]
fn a_flush_promotes_its_count_and_records_the_ghosts() {
    let mut fixture = Fixture::new(json!({"maxConcurrent": 1, "presenceSec": 5}));
    for session in ["a", "b", "c"] {
        fixture.join(session, T0);
    }
    fixture.room.see(2, T0 + 9_000);
    let (promoted, record) = fixture.room.flush(3, T0 + 10_000).expect("flush");
    assert_eq!(promoted, 3);
    let (_, _, _, ns) = batch(record.map(|record| record.event));
    assert_eq!(ns, vec![1, 3]);
    assert_eq!(fixture.room.active_passes(T0 + 10_000), 1);
}

#[test]
fn a_sighting_counts_only_for_a_place_still_held() {
    let mut fixture = Fixture::new(json!({"presenceSec": 5}));
    let ticket = fixture.join("a", T0);
    assert!(fixture.room.see(ticket, T0 + 1_000));
    assert!(!fixture.room.see(99, T0 + 1_000), "never minted");
    fixture.room.eject(ticket, T0 + 2_000).expect("eject");
    assert!(!fixture.room.see(ticket, T0 + 3_000), "ejected");
    // Sightings only move forward.
    let other = fixture.join("b", T0 + 4_000);
    fixture.room.see(other, T0 + 8_000);
    fixture.room.see(other, T0 + 5_000);
    assert!(fixture.room.is_present(other, T0 + 12_999));
    assert!(!fixture.room.is_present(other, T0 + 13_000));
}

#[test]
fn the_ns_field_is_optional_on_the_journal() {
    let old = r#"{"seq":5,"atMs":1,"event":{"type":"passed","first":1,"last":2,"count":2,"by":"outflow","creditAfter":0}}"#;
    let record: EventRecord = serde_json::from_str(old).expect("an old row parses");
    assert!(matches!(record.event, RoomEvent::Passed { ref ns, .. } if ns.is_empty()));
    let written = serde_json::to_string(&record).expect("serializes");
    assert!(!written.contains("\"ns\""), "{written}");
    let ghost = RoomEvent::Passed {
        first: 1,
        last: 2,
        count: 2,
        by: PassedBy::Flush,
        credit_after: None,
        ns: vec![2],
    };
    let written = serde_json::to_string(&ghost).expect("serializes");
    assert!(written.contains("\"ns\":[2]"), "{written}");
}

#[test]
fn a_room_at_rate_zero_promotes_no_ghost() {
    let mut fixture = Fixture::new(json!({"ratePerMinute": 0, "presenceSec": 5}));
    fixture.join("gone", T0);
    assert_eq!(fixture.tick(T0 + 60_000), None);
    assert_eq!(fixture.room.waiting(), 1);
}
