//! Property: any interleaving of joins, outflow ticks, flushes, ejects, purges, rate and state
//! changes, holder sightings and absences (QM-345) keeps the line strictly FIFO, keeps positions
//! exact, keeps seq gap-free, and folds back to the same room from its events.

use proptest::prelude::*;
use qm_core::room::{RoomConfig, RoomState};
use serde_json::json;

use super::*;

const T0: i64 = 1_700_000_000_000;

#[derive(Debug, Clone)]
enum Operation {
    Join {
        identity: u8,
        holder: bool,
    },
    /// A sighting of a ticket's holder (status, kept join, stream heartbeat).
    See {
        pick: u64,
    },
    Tick,
    Advance {
        ms: i64,
    },
    Flush {
        count: u64,
    },
    Eject {
        pick: u64,
    },
    Purge,
    SetRate {
        rate: u32,
    },
    SetState {
        state: RoomState,
    },
}

fn operation() -> impl Strategy<Value = Operation> {
    prop_oneof![
        6 => (0u8..4, prop::bool::weighted(0.8)).prop_map(|(identity, holder)| Operation::Join { identity, holder }),
        3 => any::<u64>().prop_map(|pick| Operation::See { pick }),
        4 => Just(Operation::Tick),
        // Now and then long enough for holders to go absent and never-told passes to lapse.
        2 => prop_oneof![4 => 1i64..5_000, 1 => 5_000i64..15_000].prop_map(|ms| Operation::Advance { ms }),
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
    fn the_line_stays_strictly_fifo(
        operations in proptest::collection::vec(operation(), 1..200),
        presence_sec in prop_oneof![Just(None), Just(Some(5u64)), Just(Some(8u64))],
    ) {
        let body = json!({"id": "p", "targetUrl": "https://a.example/", "ratePerMinute": 600, "maxConcurrent": 5, "passedTtlSec": 30, "queueMaxPerIp": 6, "presenceSec": presence_sec});
        let config = RoomConfig::apply_patch(None, &body, T0).expect("valid room");
        let (mut room, created) = Room::create(config, 1, 0, T0);
        let mut records = vec![created];
        let mut now = T0;
        let mut highest_passed = 0u64;

        for operation in operations {
            let before = room.clone();
            let record = match operation {
                Operation::Join { identity, holder } => {
                    let session_hash = if holder { format!("s{identity}") } else { String::new() };
                    let request = JoinRequest { claim: None, session_hash, identity: format!("id{identity}"), ..JoinRequest::default() };
                    room.join(&request, now, &mut rand::rng()).ok().and_then(|outcome| outcome.record)
                }
                Operation::See { pick } => {
                    let ticket = pick % room.next_ticket().max(1);
                    room.see(ticket, now);
                    None
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
                if let RoomEvent::Passed { first, last, count, by, ns, .. } = &record.event {
                    if *by == PassedBy::Outflow {
                        let paid = *count - ns.len() as u64;
                        prop_assert!(paid <= before.free_slots(now), "outflow respects maxConcurrent");
                        // Only the paid ones took a slot (a flush may already have overfilled).
                        prop_assert_eq!(room.active_passes(now), before.active_passes(now) + paid, "ghosts hold no slot");
                    }
                    // The batch is exactly the lowest `count` tickets that were waiting.
                    let waiting_before: Vec<u64> = (1..before.next_ticket())
                        .filter(|ticket| before.ticket_status(*ticket) == Some(TicketStatus::Waiting))
                        .collect();
                    let batch = &waiting_before[..*count as usize];
                    // Its ghosts are exactly the holders absent at the promotion.
                    let absent: Vec<u64> = batch
                        .iter()
                        .copied()
                        .filter(|ticket| !before.is_present(*ticket, now))
                        .collect();
                    prop_assert_eq!(ns, &absent);
                    if presence_sec.is_none() {
                        prop_assert!(ns.is_empty(), "no ghosts with the rule off");
                    }
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
        // Sightings are not journaled; everything they decided is (the events' `ns`).
        rebuilt.presence = room.presence.clone();
        prop_assert_eq!(rebuilt, room);
    }
}
