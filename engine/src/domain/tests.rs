//! Unit tests of the room state machine, one behaviour of the contract each.

use qm_core::ErrorCode;
use qm_core::room::{MAX_FLUSH, RoomConfig, RoomState};
use serde_json::{Value, json};

use super::*;

const T0: i64 = 1_700_000_000_000;
const GENERATION: u64 = 1_700_000_000;

fn room_with(extra: Value) -> Room {
    let mut body =
        json!({"id": "drop", "targetUrl": "https://shop.example.com/", "ratePerMinute": 600});
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    let config = RoomConfig::apply_patch(None, &body, T0).expect("valid room");
    Room::create(config, GENERATION, 0, T0).0
}

fn join(room: &mut Room, session: &str, at: i64) -> PlaceStatus {
    let request = JoinRequest {
        claim: None,
        session_hash: session.to_owned(),
        identity: String::new(),
        ..JoinRequest::default()
    };
    room.join(&request, at, &mut rand::rng())
        .expect("join")
        .place
}

fn claim(ticket: u64) -> Claim {
    Claim {
        generation: GENERATION,
        place: ClaimedPlace::Ticket(ticket),
    }
}

fn place(answer: PlaceAnswer) -> PlaceStatus {
    match answer {
        PlaceAnswer::Place(place) => place,
        PlaceAnswer::Lapsed(reason) => panic!("expected a place, lapsed: {reason:?}"),
    }
}

fn passed_by_tick(room: &mut Room, at: i64) -> u64 {
    match room.tick(at).map(|record| record.event) {
        Some(RoomEvent::Passed { count, .. }) => count,
        _ => 0,
    }
}

#[test]
fn tickets_start_at_one_and_positions_follow_the_line() {
    let mut room = room_with(json!({}));
    let first = join(&mut room, "a", T0);
    let second = join(&mut room, "b", T0);
    assert_eq!(
        (first.ticket, first.position, first.ahead),
        (1, Some(1), Some(0))
    );
    assert_eq!(
        (second.ticket, second.position, second.ahead),
        (2, Some(2), Some(1))
    );
    assert!(first.new_place && first.bound);
    assert_eq!(second.eta_sec, Some(1));
    assert_eq!(room.seq(), 3, "created + two joins");
}

#[test]
fn outflow_admits_exact_slices_with_fractional_carry() {
    let mut room = room_with(json!({"ratePerMinute": 600}));
    for _ in 0..100 {
        join(&mut room, "", T0);
    }
    for second in 1..=5 {
        assert_eq!(passed_by_tick(&mut room, T0 + second * 1000), 10);
    }
    // A second tick within one calendar second does nothing.
    assert_eq!(passed_by_tick(&mut room, T0 + 5500), 0);

    let mut slow = room_with(json!({"ratePerMinute": 90}));
    for _ in 0..100 {
        join(&mut slow, "", T0);
    }
    let slices: Vec<u64> = (1..=4)
        .map(|second| passed_by_tick(&mut slow, T0 + second * 1000))
        .collect();
    assert_eq!(slices, vec![1, 2, 1, 2], "1.5 per second carries the half");

    let mut one_per_minute = room_with(json!({"ratePerMinute": 1}));
    join(&mut one_per_minute, "", T0);
    join(&mut one_per_minute, "", T0);
    let admitted: u64 = (1..=120)
        .map(|second| passed_by_tick(&mut one_per_minute, T0 + second * 1000))
        .sum();
    assert_eq!(admitted, 2, "rate 1/min admits one per minute");
}

#[test]
fn an_idle_room_does_not_bank_a_burst() {
    let mut room = room_with(json!({"ratePerMinute": 600}));
    for second in 1..=30 {
        assert_eq!(passed_by_tick(&mut room, T0 + second * 1000), 0);
    }
    for _ in 0..100 {
        join(&mut room, "", T0 + 30_500);
    }
    assert_eq!(
        passed_by_tick(&mut room, T0 + 31_000),
        11,
        "at most one carried visitor plus this slice"
    );
    assert_eq!(passed_by_tick(&mut room, T0 + 32_000), 10);
}

#[test]
fn a_rate_change_takes_effect_on_the_next_slice() {
    let mut room = room_with(json!({"ratePerMinute": 6000, "maxConcurrent": 1}));
    for _ in 0..300 {
        join(&mut room, "", T0);
    }
    // Blocked by maxConcurrent, the credit sits at its cap of one visitor.
    for second in 1..=3 {
        passed_by_tick(&mut room, T0 + second * 1000);
    }
    room.set_rate(600, T0 + 3500);
    room.update(
        RoomConfig {
            max_concurrent: None,
            ..room.config().clone()
        },
        T0 + 3600,
    );
    assert_eq!(
        passed_by_tick(&mut room, T0 + 4000),
        11,
        "the new rate plus the one carried visitor"
    );
    assert_eq!(passed_by_tick(&mut room, T0 + 5000), 10);
    room.set_rate(0, T0 + 5500);
    assert_eq!(passed_by_tick(&mut room, T0 + 6000), 0);
    room.set_rate(60, T0 + 6500);
    assert_eq!(passed_by_tick(&mut room, T0 + 7000), 1);
}

#[test]
fn max_concurrent_counts_unexpired_passes() {
    let mut room = room_with(json!({"ratePerMinute": 600, "maxConcurrent": 3, "passedTtlSec": 10}));
    for _ in 0..10 {
        join(&mut room, "", T0);
    }
    assert_eq!(passed_by_tick(&mut room, T0 + 1000), 3);
    assert_eq!(passed_by_tick(&mut room, T0 + 2000), 0);
    assert_eq!(room.active_passes(T0 + 2000), 3);
    // Passes granted at T0+1000 expire at T0+11000, freeing their slots.
    assert_eq!(passed_by_tick(&mut room, T0 + 11_000), 3);
}

#[test]
fn paused_and_scheduled_rooms_admit_nobody() {
    let mut paused = room_with(json!({"state": "paused"}));
    join(&mut paused, "", T0);
    assert_eq!(passed_by_tick(&mut paused, T0 + 1000), 0);
    let status = place(paused.status(&claim(1), "", T0 + 1000));
    assert_eq!(status.eta_sec, None);
    paused.set_state(RoomState::Active, T0 + 1500);
    assert_eq!(passed_by_tick(&mut paused, T0 + 2000), 1);

    let mut scheduled = room_with(json!({"opensAt": T0 + 10_000}));
    let entry = join(&mut scheduled, "", T0);
    assert_eq!(
        (entry.ticket, entry.handle.is_some(), entry.position),
        (0, true, None),
        "a join before opensAt enters the pre-queue"
    );
    assert_eq!(entry.state.as_str(), "scheduled");
    assert_eq!(passed_by_tick(&mut scheduled, T0 + 5000), 0);
    assert_eq!(
        passed_by_tick(&mut scheduled, T0 + 10_000),
        0,
        "nobody passes before the draw"
    );
    assert!(
        scheduled
            .draw_if_due(&mut rand::rng(), T0 + 10_000)
            .is_some()
    );
    assert_eq!(passed_by_tick(&mut scheduled, T0 + 11_000), 1);
}

#[test]
fn bypass_rooms_pass_everybody_with_ticket_zero() {
    let mut room = room_with(json!({}));
    join(&mut room, "a", T0);
    room.set_state(RoomState::Bypass, T0 + 1);
    let seq = room.seq();
    let pass = join(&mut room, "b", T0 + 2);
    assert_eq!((pass.ticket, pass.passed, pass.new_place), (0, true, true));
    assert_eq!(
        pass.redirect_url.as_deref(),
        Some("https://shop.example.com/")
    );
    assert_eq!(room.seq(), seq, "a bypass pass stores nothing");
    assert!(
        place(room.status(&claim(1), "a", T0 + 3)).passed,
        "waiting tickets read as passed"
    );
    let again = room
        .join(
            &JoinRequest {
                claim: Some(claim(0)),
                ..JoinRequest::default()
            },
            T0 + 4,
            &mut rand::rng(),
        )
        .expect("join");
    assert!(!again.place.new_place && again.place.passed);
    room.set_state(RoomState::Active, T0 + 5);
    assert_eq!(
        room.status(&claim(0), "", T0 + 6),
        PlaceAnswer::Lapsed(LapseReason::Expired)
    );
}

#[test]
fn join_keeps_a_bound_claim_and_replaces_the_rest() {
    let mut room = room_with(json!({"passedTtlSec": 10}));
    join(&mut room, "owner", T0);
    let keep = JoinRequest {
        claim: Some(claim(1)),
        session_hash: "owner".into(),
        identity: String::new(),
        ..JoinRequest::default()
    };
    let kept = room
        .join(&keep, T0 + 1, &mut rand::rng())
        .expect("join")
        .place;
    assert_eq!((kept.ticket, kept.new_place, kept.bound), (1, false, true));

    let thief = JoinRequest {
        claim: Some(claim(1)),
        session_hash: "thief".into(),
        identity: String::new(),
        ..JoinRequest::default()
    };
    let fresh = room
        .join(&thief, T0 + 2, &mut rand::rng())
        .expect("join")
        .place;
    assert_eq!(
        (fresh.ticket, fresh.replaced_reason),
        (2, Some(LapseReason::Unbound))
    );

    let other_generation = Claim {
        generation: GENERATION - 1,
        place: ClaimedPlace::Ticket(1),
    };
    let reset = room
        .join(
            &JoinRequest {
                claim: Some(other_generation),
                ..JoinRequest::default()
            },
            T0 + 3,
            &mut rand::rng(),
        )
        .expect("join");
    assert_eq!(reset.place.replaced_reason, Some(LapseReason::RoomReset));

    let handle = Claim {
        generation: GENERATION,
        place: ClaimedPlace::Handle(4),
    };
    let from_handle = room
        .join(
            &JoinRequest {
                claim: Some(handle),
                ..JoinRequest::default()
            },
            T0 + 3,
            &mut rand::rng(),
        )
        .expect("join");
    assert_eq!(
        from_handle.place.replaced_reason,
        Some(LapseReason::RoomReset)
    );

    room.flush(1, T0 + 4).expect("flush");
    let passed = room
        .join(&keep, T0 + 5, &mut rand::rng())
        .expect("join")
        .place;
    assert!(
        passed.passed && !passed.new_place,
        "an unexpired pass is kept"
    );
    let expired = room
        .join(&keep, T0 + 4 + 10_000, &mut rand::rng())
        .expect("join")
        .place;
    assert_eq!(expired.replaced_reason, Some(LapseReason::Expired));
}

#[test]
fn queue_max_per_ip_caps_waiting_places_per_identity() {
    let mut room = room_with(json!({"queueMaxPerIp": 2}));
    let from = |identity: &str| JoinRequest {
        claim: None,
        session_hash: "s".into(),
        identity: identity.into(),
        ..JoinRequest::default()
    };
    room.join(&from("10.0.0.1"), T0, &mut rand::rng())
        .expect("first");
    room.join(&from("10.0.0.1"), T0, &mut rand::rng())
        .expect("second");
    let refused = room
        .join(&from("10.0.0.1"), T0, &mut rand::rng())
        .expect_err("third");
    assert_eq!(refused.code, ErrorCode::QueueIdentityLimit);
    room.join(&from("10.0.0.2"), T0, &mut rand::rng())
        .expect("another address");
    room.join(&from(""), T0, &mut rand::rng())
        .expect("no identity is exempt");
    room.flush(1, T0).expect("flush");
    room.join(&from("10.0.0.1"), T0, &mut rand::rng())
        .expect("a place freed by admission");
}

#[test]
fn status_of_places_that_lapsed() {
    let mut room = room_with(json!({"passedTtlSec": 10}));
    for _ in 0..4 {
        join(&mut room, "s", T0);
    }
    assert_eq!(
        room.status(&claim(9), "s", T0),
        PlaceAnswer::Lapsed(LapseReason::RoomReset)
    );
    let other = Claim {
        generation: GENERATION + 1,
        place: ClaimedPlace::Ticket(1),
    };
    assert_eq!(
        room.status(&other, "s", T0),
        PlaceAnswer::Lapsed(LapseReason::RoomReset)
    );

    room.flush(1, T0 + 1000).expect("flush");
    let pass = place(room.status(&claim(1), "s", T0 + 2000));
    assert!(pass.passed && pass.bound);
    assert_eq!(pass.pass_expires_at_ms, T0 + 11_000);
    assert_eq!(
        room.status(&claim(1), "s", T0 + 11_000),
        PlaceAnswer::Lapsed(LapseReason::Expired)
    );
    assert!(!place(room.status(&claim(2), "other", T0)).bound);

    room.eject(3, T0).expect("eject");
    assert_eq!(
        room.status(&claim(3), "s", T0),
        PlaceAnswer::Lapsed(LapseReason::Ejected)
    );
    assert_eq!(
        place(room.status(&claim(4), "s", T0)).position,
        Some(2),
        "the hole no longer counts"
    );
    room.purge(T0);
    assert_eq!(
        room.status(&claim(4), "s", T0),
        PlaceAnswer::Lapsed(LapseReason::Purged)
    );
}

#[test]
fn eject_waiting_and_passed_tickets() {
    let mut room = room_with(json!({"maxConcurrent": 1}));
    for _ in 0..4 {
        join(&mut room, "", T0);
    }
    room.flush(1, T0).expect("flush");
    assert_eq!(room.free_slots(T0), 0);
    assert_eq!(room.eject(1, T0).expect("eject").0, EjectedFrom::Passed);
    assert_eq!(room.free_slots(T0), 1, "a revoked pass frees its slot");
    assert_eq!(room.eject(3, T0).expect("eject").0, EjectedFrom::Waiting);
    assert_eq!(room.holes(), &[3]);
    assert_eq!(room.eject(2, T0).expect("eject").0, EjectedFrom::Waiting);
    assert_eq!(
        (room.head(), room.holes()),
        (4, &[][..]),
        "head skips the holes behind it"
    );
    for gone in [1, 2, 0, 99] {
        assert_eq!(
            room.eject(gone, T0).expect_err("gone").code,
            ErrorCode::TicketNotFound
        );
    }
}

#[test]
fn purge_discards_the_line_without_passes() {
    let mut room = room_with(json!({}));
    for _ in 0..5 {
        join(&mut room, "", T0);
    }
    let (purged, record) = room.purge(T0 + 1);
    assert_eq!(purged.total(), 5);
    assert!(matches!(
        record.map(|record| record.event),
        Some(RoomEvent::Purged {
            count: 5,
            pre_queue: 0
        })
    ));
    assert_eq!(
        (room.waiting(), room.passed_total(), room.head()),
        (0, 0, 6)
    );
    assert_eq!(room.purge(T0 + 2), (Purged::default(), None));
    assert_eq!(join(&mut room, "", T0 + 3).position, Some(1));
}

#[test]
fn flush_overrides_state_and_checks_its_count() {
    let mut room = room_with(json!({"state": "paused", "maxConcurrent": 1}));
    for _ in 0..3 {
        join(&mut room, "", T0);
    }
    assert_eq!(room.flush(2, T0).expect("flush").0, 2);
    assert_eq!(room.flush(10, T0).expect("flush").0, 1);
    assert_eq!(room.flush(10, T0).expect("flush"), (0, None));
    for bad in [0, MAX_FLUSH + 1] {
        assert_eq!(
            room.flush(bad, T0).expect_err("bad count").code,
            ErrorCode::InvalidCount
        );
    }
    assert_eq!(room.passed_last_minute(T0 + 59_000), 3);
    assert_eq!(room.passed_last_minute(T0 + 60_000), 0);
}

#[test]
fn door_check_reasons() {
    let mut room = room_with(json!({"tagOrigins": ["https://tag.example"]}));
    join(&mut room, "", T0);
    join(&mut room, "", T0);
    room.flush(1, T0).expect("flush");
    let check = |room: &Room, claim: Option<Claim>| {
        let answer = room.check(claim.as_ref(), None, T0 + 1);
        (answer.action, answer.reason)
    };
    assert_eq!(check(&room, None), (CheckAction::Queue, "no_token"));
    assert_eq!(check(&room, Some(claim(1))), (CheckAction::Pass, "passed"));
    assert_eq!(
        check(&room, Some(claim(2))),
        (CheckAction::Queue, "waiting")
    );
    assert_eq!(
        check(&room, Some(claim(7))),
        (CheckAction::Queue, "room_reset")
    );
    assert_eq!(
        room.check(None, None, T0).tag_origins,
        vec!["https://shop.example.com", "https://tag.example"]
    );
    room.set_state(RoomState::Bypass, T0);
    assert_eq!(check(&room, None), (CheckAction::Pass, "bypass"));
}

#[test]
fn estimated_wait_follows_the_contract() {
    let estimate = |room: &Room, at: i64| {
        let stats = room.live_stats(at);
        (stats.est_wait_sec, stats.est_wait_floor)
    };
    let mut room = room_with(json!({"ratePerMinute": 60}));
    assert_eq!(
        estimate(&room, T0),
        (Some(0), false),
        "empty active room admits immediately"
    );
    for _ in 0..9 {
        join(&mut room, "", T0);
    }
    assert_eq!(
        estimate(&room, T0),
        (Some(10), false),
        "the tenth visitor at one per second"
    );
    assert_eq!(
        estimate(&room, T0 + 60_000),
        (None, false),
        "a minute with nobody admitted"
    );
    room.set_state(RoomState::Paused, T0);
    assert_eq!(estimate(&room, T0), (None, false));
    room.set_state(RoomState::Bypass, T0);
    assert_eq!(estimate(&room, T0), (Some(0), false));

    // Six tickets held before the drop was scheduled, and a pre-queue the draw will place.
    let mut scheduled = room_with(json!({"ratePerMinute": 60}));
    for _ in 0..6 {
        join(&mut scheduled, "", T0);
    }
    let mut config = scheduled.config().clone();
    config.opens_at = Some(T0 + 30_000);
    scheduled.schedule(&config, T0);
    join(&mut scheduled, "", T0);
    assert_eq!(
        estimate(&scheduled, T0),
        (Some(36), true),
        "30 s on the clock plus 6 s of drain"
    );
    let zero_rate = room_with(json!({"ratePerMinute": 0}));
    assert_eq!(estimate(&zero_rate, T0), (None, false));

    let json = room.admin_json(T0);
    for key in [
        "rate",
        "effectiveState",
        "generation",
        "seq",
        "createdAt",
        "waiting",
        "estWaitSec",
        "estWaitFloor",
        "targetUrl",
    ] {
        assert!(json.get(key).is_some(), "admin json carries {key}");
    }
    assert_eq!(json["waiting"], 9);
    assert_eq!(json["state"], "bypass");
}

#[test]
fn replay_rebuilds_the_same_room_and_refuses_gaps() {
    let config = RoomConfig::apply_patch(
        None,
        &json!({"id": "r", "targetUrl": "https://a.example/", "ratePerMinute": 120, "passedTtlSec": 10}),
        T0,
    )
    .expect("valid");
    let (mut room, created) = Room::create(config, GENERATION, 41, T0);
    assert_eq!(
        created.seq, 42,
        "seq continues after the id's previous life"
    );
    let mut records = vec![created];
    for index in 0..20 {
        let request = JoinRequest {
            claim: None,
            session_hash: format!("s{index}"),
            identity: format!("ip{index}"),
            ..JoinRequest::default()
        };
        records.extend(
            room.join(&request, T0 + index, &mut rand::rng())
                .expect("join")
                .record,
        );
    }
    records.extend(room.tick(T0 + 1000));
    records.extend(room.tick(T0 + 2000));
    records.push(room.eject(10, T0 + 2100).expect("eject").1);
    records.push(room.eject(5, T0 + 2200).expect("eject").1);
    records.extend(room.flush(3, T0 + 2300).expect("flush").1);
    records.push(room.set_rate(60, T0 + 2400));
    records.extend(room.purge(T0 + 2500).1);

    let json = serde_json::to_string(&records).expect("events serialise");
    let decoded: Vec<EventRecord> = serde_json::from_str(&json).expect("events deserialise");
    assert_eq!(decoded, records);
    for pair in records.windows(2) {
        assert_eq!(pair[1].seq, pair[0].seq + 1, "gap-free");
    }
    let mut rebuilt = Room::replay(&decoded).expect("replays");
    rebuilt.carry = room.carry;
    assert_eq!(rebuilt, room);

    let mut with_gap = decoded.clone();
    with_gap.remove(3);
    assert!(matches!(
        Room::replay(&with_gap),
        Err(ApplyError::Gap { .. })
    ));
    assert_eq!(Room::replay(&decoded[1..]), Err(ApplyError::NotCreated));
}
