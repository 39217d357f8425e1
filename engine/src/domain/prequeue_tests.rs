//! The scheduled drop: pre-queue entries, their caps, the draw and the exchange of handles.

use proptest::prelude::*;
use qm_core::ErrorCode;
use qm_core::room::RoomConfig;
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::{Value, json};

use super::*;
use crate::domain::{Claim, ClaimedPlace, Command, PlaceAnswer};

const T0: i64 = 1_700_000_000_000;
const OPENS: i64 = T0 + 60_000;
const GENERATION: u64 = 7;

fn drop_room(extra: Value) -> (Room, Vec<EventRecord>) {
    let mut body = json!({"id": "drop", "targetUrl": "https://shop.example.com/",
        "ratePerMinute": 600, "opensAt": OPENS});
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    let config = RoomConfig::apply_patch(None, &body, T0).expect("valid room");
    let (room, created) = Room::create(config, GENERATION, 0, T0);
    (room, vec![created])
}

fn visitor(session: &str, identity: &str) -> JoinRequest {
    JoinRequest {
        session_hash: session.to_owned(),
        identity: identity.to_owned(),
        ..JoinRequest::default()
    }
}

fn handle_claim(handle: u64) -> Claim {
    Claim {
        generation: GENERATION,
        place: ClaimedPlace::Handle(handle),
    }
}

/// Joins and keeps the record; answers the handle.
fn pre_join(room: &mut Room, records: &mut Vec<EventRecord>, request: &JoinRequest) -> u64 {
    let outcome = room
        .join(request, T0 + 1, &mut rand::rng())
        .expect("pre-queue join");
    records.extend(outcome.record);
    outcome.place.handle.expect("a handle")
}

#[test]
fn a_join_before_opens_at_enters_the_pre_queue_with_an_opaque_handle() {
    let (mut room, mut records) = drop_room(json!({}));
    let outcome = room
        .join(&visitor("s1", "10.0.0.1"), T0 + 1, &mut rand::rng())
        .expect("join");
    let place = outcome.place;
    assert_eq!(
        (place.ticket, place.position, place.ahead, place.new_place),
        (0, None, None, true)
    );
    assert_eq!(place.state.as_str(), "scheduled");
    assert_eq!(place.pre_count, 1);
    assert_eq!(place.opens_at_ms, Some(OPENS));
    assert_eq!(place.eta_sec, Some(60), "the clock to opensAt is the floor");
    let handle = place.handle.expect("a handle");
    assert!((1..1 << 53).contains(&handle));
    assert!(matches!(
        outcome.record.map(|record| record.event),
        Some(RoomEvent::PreJoined { handle: h, .. }) if h == handle
    ));
    records.clear();
    // Handles say nothing about arrival: a second one is not the first plus one.
    let second = pre_join(&mut room, &mut records, &visitor("s2", "10.0.0.2"));
    assert_ne!(second, handle + 1);
    assert_eq!(
        (room.next_ticket(), room.pre_count()),
        (1, 2),
        "no ticket minted"
    );
    let status = room.status(&handle_claim(handle), "s1", T0 + 2);
    let PlaceAnswer::Place(status) = status else {
        panic!("a pre-queued handle is a place")
    };
    assert_eq!((status.handle, status.bound), (Some(handle), true));
}

#[test]
fn the_pre_queue_caps_entries_per_identity_and_has_a_ceiling() {
    let (mut room, _) = drop_room(json!({"preQueueMaxPerIp": 2}));
    room.join(&visitor("a", "10.0.0.1"), T0, &mut rand::rng())
        .expect("first");
    room.join(&visitor("b", "10.0.0.1"), T0, &mut rand::rng())
        .expect("second");
    let seq = room.seq();
    let refused = room
        .join(&visitor("c", "10.0.0.1"), T0, &mut rand::rng())
        .expect_err("third from one address");
    assert_eq!(refused.code, ErrorCode::PrequeueIdentityLimit);
    assert_eq!(room.seq(), seq, "a refusal records nothing");
    room.join(&visitor("d", "10.0.0.2"), T0, &mut rand::rng())
        .expect("another address");
    room.join(&visitor("e", ""), T0, &mut rand::rng())
        .expect("no recorded holder is exempt");

    let full = JoinRequest {
        pre_queue_ceiling: Some(4),
        ..visitor("f", "10.0.0.3")
    };
    assert_eq!(
        room.join(&full, T0, &mut rand::rng())
            .expect_err("at the ceiling")
            .code,
        ErrorCode::PrequeueFull
    );
    assert_eq!(room.pre_count(), 4);
}

#[test]
fn the_draw_is_one_event_that_replays_to_the_same_line() {
    let (mut room, mut records) = drop_room(json!({}));
    for index in 0..50 {
        pre_join(
            &mut room,
            &mut records,
            &visitor(&format!("s{index}"), &format!("ip{}", index % 7)),
        );
    }
    assert!(
        room.draw_if_due(&mut rand::rng(), OPENS - 1).is_none(),
        "no draw before opensAt"
    );
    let tick = room.tick(OPENS);
    assert!(tick.is_none(), "nobody passes before the draw");
    let drawn = room
        .draw_if_due(&mut StdRng::seed_from_u64(1), OPENS)
        .expect("the doors open");
    let RoomEvent::Drawn {
        first_ticket,
        order,
    } = &drawn.event
    else {
        panic!("a drawn event")
    };
    assert_eq!((*first_ticket, order.len()), (1, 50));
    records.push(drawn.clone());
    assert!(
        room.draw_if_due(&mut rand::rng(), OPENS + 1).is_none(),
        "drawn once"
    );
    assert_eq!((room.waiting(), room.pre_count()), (50, 0));

    let mut replayed = Room::replay(&records).expect("replay");
    // The outflow carry (last second ticked) is deliberately not journaled.
    replayed.carry = room.carry;
    assert!(
        replayed == room,
        "the journal restores the draw, never redraws it"
    );
    // The drawn order is the order of the line: the n-th handle holds ticket n.
    for (index, handle) in order.iter().enumerate() {
        let PlaceAnswer::Place(place) = room.status(&handle_claim(*handle), "", OPENS) else {
            panic!("drawn handles are places")
        };
        assert_eq!(place.ticket, index as u64 + 1);
        assert_eq!(place.position, Some(index as u64 + 1));
        assert_eq!(place.handle, None, "exchanged for its ticket");
    }
}

#[test]
fn a_handle_is_exchanged_for_its_drawn_ticket_only_by_its_browser() {
    let (mut room, mut records) = drop_room(json!({}));
    let handle = pre_join(&mut room, &mut records, &visitor("owner", "10.0.0.1"));
    pre_join(&mut room, &mut records, &visitor("other", "10.0.0.2"));
    let early = room
        .join(&visitor("late", "10.0.0.3"), OPENS, &mut rand::rng())
        .expect_err("a join after opensAt waits for the draw");
    assert_eq!(early.code, ErrorCode::StorageUnavailable);
    room.draw_if_due(&mut rand::rng(), OPENS).expect("drawn");

    let keep = JoinRequest {
        claim: Some(handle_claim(handle)),
        ..visitor("owner", "10.0.0.1")
    };
    let kept = room
        .join(&keep, OPENS + 1, &mut rand::rng())
        .expect("rejoin")
        .place;
    assert!(!kept.new_place && kept.ticket >= 1 && kept.bound);
    let thief = JoinRequest {
        claim: Some(handle_claim(handle)),
        ..visitor("thief", "10.0.0.9")
    };
    let fresh = room
        .join(&thief, OPENS + 1, &mut rand::rng())
        .expect("join")
        .place;
    assert_eq!(
        (fresh.ticket, fresh.new_place, fresh.replaced_reason),
        (3, true, Some(LapseReason::Unbound)),
        "a latecomer joins behind the drawn pre-queue"
    );
}

#[test]
fn a_purge_empties_the_pre_queue_and_its_handles_read_purged() {
    let (mut room, mut records) = drop_room(json!({}));
    let handle = pre_join(&mut room, &mut records, &visitor("a", "10.0.0.1"));
    pre_join(&mut room, &mut records, &visitor("b", "10.0.0.2"));
    let (purged, record) = room.purge(T0 + 5);
    assert_eq!(
        (purged.waiting, purged.pre_queue, purged.total()),
        (0, 2, 2)
    );
    records.extend(record);
    assert_eq!(room.pre_count(), 0);
    assert_eq!(
        room.status(&handle_claim(handle), "a", T0 + 6),
        PlaceAnswer::Lapsed(LapseReason::Purged)
    );
    assert!(room.draw_if_due(&mut rand::rng(), OPENS).is_none());
    assert_eq!(Room::replay(&records).expect("replay"), room);
    let stranger = Claim {
        generation: GENERATION + 1,
        place: ClaimedPlace::Handle(handle),
    };
    assert_eq!(
        room.status(&stranger, "a", T0 + 6),
        PlaceAnswer::Lapsed(LapseReason::RoomReset)
    );
}

/// Spearman's rank correlation of two rankings of the same n items (no ties).
fn spearman(ranks: &[(usize, usize)]) -> f64 {
    let n = ranks.len() as f64;
    let squared: f64 = ranks
        .iter()
        .map(|(a, b)| (*a as f64 - *b as f64).powi(2))
        .sum();
    1.0 - 6.0 * squared / (n * (n * n - 1.0))
}

#[test]
fn arriving_early_buys_nothing() {
    // 2,000 entries from 200 addresses arriving in blocks and interleaved: the drawn position
    // does not follow the arrival order.
    let entries: Vec<PreEntry> = (0..2000u64)
        .map(|index| PreEntry {
            handle: index + 1,
            session_hash: format!("s{index}"),
            identity: if index < 1000 {
                format!("ip{}", index / 10)
            } else {
                format!("ip{}", 100 + index % 100)
            },
        })
        .collect();
    for seed in 0..5 {
        let order = draw_order(&entries, &mut StdRng::seed_from_u64(seed));
        let ranks: Vec<(usize, usize)> = order
            .iter()
            .enumerate()
            .map(|(position, handle)| (*handle as usize - 1, position))
            .collect();
        let rho = spearman(&ranks);
        assert!(rho.abs() < 0.1, "seed {seed}: rho {rho}");
    }
}

fn identity_entries() -> impl Strategy<Value = Vec<PreEntry>> {
    proptest::collection::vec(0u8..12, 0..300).prop_map(|identities| {
        identities
            .into_iter()
            .enumerate()
            .map(|(index, identity)| PreEntry {
                handle: index as u64 + 1,
                session_hash: String::new(),
                // Identity 0 stands for "no recorded identity": each such entry is its own.
                identity: if identity == 0 {
                    String::new()
                } else {
                    format!("ip{identity}")
                },
            })
            .collect()
    })
}

proptest! {
    #[test]
    fn the_draw_deals_every_identity_its_first_entry_before_anyone_a_second(
        entries in identity_entries(),
        seed in any::<u64>(),
    ) {
        let order = draw_order(&entries, &mut StdRng::seed_from_u64(seed));
        let mut sorted = order.clone();
        sorted.sort_unstable();
        let expected: Vec<u64> = (1..=entries.len() as u64).collect();
        prop_assert_eq!(sorted, expected, "a permutation of the handles");
        // Each entry's round: how many entries of its identity were drawn before it.
        let identity_of: HashMap<u64, &str> =
            entries.iter().map(|entry| (entry.handle, entry.identity.as_str())).collect();
        let mut seen: HashMap<&str, usize> = HashMap::new();
        let mut last_round = 0;
        for handle in &order {
            let identity = identity_of[handle];
            let round = if identity.is_empty() {
                0
            } else {
                let count = seen.entry(identity).or_default();
                *count += 1;
                *count - 1
            };
            prop_assert!(round >= last_round, "a later round never comes before an earlier one");
            last_round = round;
        }
    }
}

/// The doors opened on a pre-queue and the first join after them is refused (its address is
/// over `queueMaxPerIp` once the draw gave it a ticket): the draw still lands, as a store must
/// record it, and the refusal stands.
#[test]
fn a_join_refused_after_the_doors_open_still_lands_the_draw() {
    let (mut room, mut records) = drop_room(json!({"queueMaxPerIp": 1}));
    pre_join(&mut room, &mut records, &visitor("a", "10.0.0.1"));
    let late = Command::Join(visitor("b", "10.0.0.1"));
    let executed = room.execute(&late, OPENS + 1, &mut rand::rng());
    assert_eq!(
        executed.outcome.expect_err("over the cap").code,
        ErrorCode::QueueIdentityLimit
    );
    assert!(
        matches!(executed.records.as_slice(), [record] if matches!(record.event, RoomEvent::Drawn { .. })),
        "the draw is recorded: {:?}",
        executed.records
    );
    records.extend(executed.records);
    assert_eq!(Room::replay(&records).expect("replays"), room);
}
