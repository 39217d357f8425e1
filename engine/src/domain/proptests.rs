//! Property: any interleaving of joins, outflow ticks, flushes, ejects, purges, rate and state
//! changes keeps the line strictly FIFO, keeps positions exact, keeps seq gap-free, and folds
//! back to the same room from its events.

use proptest::prelude::*;
use qm_core::room::{RoomConfig, RoomState};
use serde_json::json;

use super::*;

const T0: i64 = 1_700_000_000_000;

#[derive(Debug, Clone)]
enum Operation {
    Join { identity: u8 },
    Tick,
    Advance { ms: i64 },
    Flush { count: u64 },
    Eject { pick: u64 },
    Purge,
    SetRate { rate: u32 },
    SetState { state: RoomState },
}

fn operation() -> impl Strategy<Value = Operation> {
    prop_oneof![
        6 => (0u8..4).prop_map(|identity| Operation::Join { identity }),
        4 => Just(Operation::Tick),
        2 => (1i64..5_000).prop_map(|ms| Operation::Advance { ms }),
        1 => (1u64..8).prop_map(|count| Operation::Flush { count }),
        2 => any::<u64>().prop_map(|pick| Operation::Eject { pick }),
        1 => Just(Operation::Purge),
        1 => prop_oneof![Just(0u32), Just(1), Just(90), Just(600), Just(6_000)].prop_map(|rate| Operation::SetRate { rate }),
        1 => prop_oneof![Just(RoomState::Active), Just(RoomState::Paused), Just(RoomState::Bypass)]
            .prop_map(|state| Operation::SetState { state }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn the_line_stays_strictly_fifo(operations in proptest::collection::vec(operation(), 1..200)) {
        let body = json!({"id": "p", "targetUrl": "https://a.example/", "ratePerMinute": 600, "maxConcurrent": 5, "passedTtlSec": 10, "queueMaxPerIp": 6});
        let config = RoomConfig::apply_patch(None, &body, T0).expect("valid room");
        let (mut room, created) = Room::create(config, 1, 0, T0);
        let mut records = vec![created];
        let mut now = T0;
        let mut highest_passed = 0u64;

        for operation in operations {
            let before = room.clone();
            let record = match operation {
                Operation::Join { identity } => {
                    let request = JoinRequest { claim: None, session_hash: "s".into(), identity: format!("id{identity}"), ..JoinRequest::default() };
                    room.join(&request, now).ok().and_then(|outcome| outcome.record)
                }
                Operation::Tick => {
                    now = (now.div_euclid(1000) + 1) * 1000;
                    room.tick(now)
                }
                Operation::Advance { ms } => {
                    now += ms;
                    None
                }
                Operation::Flush { count } => room.flush(count, now).ok().and_then(|(_, record)| record),
                Operation::Eject { pick } => {
                    let ticket = pick % room.next_ticket().max(1);
                    room.eject(ticket, now).ok().map(|(_, record)| record)
                }
                Operation::Purge => room.purge(now).1,
                Operation::SetRate { rate } => Some(room.set_rate(rate, now)),
                Operation::SetState { state } => Some(room.set_state(state, now)),
            };

            if let Some(record) = record {
                prop_assert_eq!(record.seq, records.last().map_or(0, |last| last.seq) + 1);
                if let RoomEvent::Passed { first, last, count, by, .. } = &record.event {
                    if *by == PassedBy::Outflow {
                        prop_assert!(*count <= before.free_slots(now), "outflow respects maxConcurrent");
                    }
                    // The batch is exactly the lowest `count` tickets that were waiting.
                    let waiting_before: Vec<u64> = (1..before.next_ticket())
                        .filter(|ticket| before.ticket_status(*ticket) == Some(TicketStatus::Waiting))
                        .collect();
                    let batch = &waiting_before[..*count as usize];
                    prop_assert_eq!(batch.first(), Some(first));
                    prop_assert_eq!(batch.last(), Some(last));
                    prop_assert!(*first > highest_passed, "tickets pass in increasing order");
                    highest_passed = *last;
                }
                records.push(record);
            }

            let waiting: Vec<u64> = (1..room.next_ticket())
                .filter(|ticket| room.ticket_status(*ticket) == Some(TicketStatus::Waiting))
                .collect();
            prop_assert_eq!(room.waiting(), waiting.len() as u64);
            for (index, ticket) in waiting.iter().enumerate() {
                prop_assert!(*ticket > highest_passed, "nobody waits behind an admitted later ticket");
                prop_assert_eq!(room.position_of(*ticket), Some(index as u64 + 1));
            }
        }

        let mut rebuilt = Room::replay(&records).expect("the events fold back");
        rebuilt.carry = room.carry;
        prop_assert_eq!(rebuilt, room);
    }
}
