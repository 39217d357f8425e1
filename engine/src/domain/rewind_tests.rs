//! Property: a batch of joins (into the line or the pre-queue) executed and then rewound leaves
//! the room exactly as it was, whatever stood in it before; anything else is refused.

use proptest::prelude::*;
use serde_json::json;

use super::super::{Command, EventRecord, JoinRequest, Room};

const T0: i64 = 1_700_000_000_000;

fn request(identity: u8, holder: bool) -> JoinRequest {
    JoinRequest {
        session_hash: if holder {
            format!("s-{identity}")
        } else {
            String::new()
        },
        identity: if identity == 0 {
            String::new()
        } else {
            format!("198.51.100.{identity}")
        },
        ..JoinRequest::default()
    }
}

/// Runs a command that must succeed; answers its records.
fn run(room: &mut Room, command: Command, at_ms: i64) -> Vec<EventRecord> {
    let executed = room.execute(&command, at_ms, &mut rand::rng());
    executed.outcome.expect("the command succeeds");
    executed.records
}

/// A room with `before` joins, some flushed and one ejected, so the line has a head and a hole.
fn room(scheduled: bool, before: &[(u8, bool)]) -> Room {
    let mut room = Room::unborn("r");
    let mut body = json!({"id": "r", "targetUrl": "https://shop.example.com/", "ratePerMinute": 60,
        "queueMaxPerIp": 3, "preQueueMaxPerIp": 2});
    if scheduled {
        body["opensAt"] = json!(T0 + 3_600_000);
    }
    run(&mut room, Command::Put(body), T0);
    for (identity, holder) in before {
        let _ = room.execute(
            &Command::Join(request(*identity, *holder)),
            T0,
            &mut rand::rng(),
        );
    }
    if !scheduled && room.waiting() > 3 {
        run(&mut room, Command::Flush(1), T0);
        run(&mut room, Command::Eject(3), T0);
    }
    room
}

proptest! {
    #[test]
    fn a_rewound_batch_of_joins_leaves_the_room_as_it_was(
        scheduled in any::<bool>(),
        before in prop::collection::vec((0u8..4, any::<bool>()), 0..12),
        batch in prop::collection::vec((0u8..4, any::<bool>()), 1..12),
    ) {
        let mut room = room(scheduled, &before);
        let original = room.clone();
        let mark = room.mark();
        let mut records = Vec::new();
        for (identity, holder) in batch {
            // Refusals (an identity over its cap) record nothing and change nothing.
            let join = Command::Join(request(identity, holder));
            records.extend(room.execute(&join, T0 + 5, &mut rand::rng()).records);
        }
        prop_assert!(room.rewind(&mark, &records));
        prop_assert_eq!(room, original);
    }
}

#[test]
fn a_batch_with_any_other_change_is_not_rewound() {
    let mut room = room(false, &[(1, true), (2, true)]);
    let before = room.clone();
    let mark = room.mark();
    let mut records = run(&mut room, Command::Join(request(3, true)), T0 + 5);
    records.extend(run(&mut room, Command::Flush(1), T0 + 5));
    let after = room.clone();
    assert!(!room.rewind(&mark, &records));
    assert_eq!(room, after, "a refused rewind changes nothing");
    assert_ne!(room, before);
}

#[test]
fn records_that_do_not_follow_the_mark_are_not_rewound() {
    let mut room = room(false, &[(1, true)]);
    let mark = room.mark();
    let first = run(&mut room, Command::Join(request(2, true)), T0 + 5);
    run(&mut room, Command::Join(request(3, true)), T0 + 5);
    // Only one of the two joins since the mark is offered back.
    assert!(!room.rewind(&mark, &first));
}
