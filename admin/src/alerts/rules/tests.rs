//! The rules with a scripted clock: each fires once, resolves once, and does not flap.

use super::*;

const SETTINGS: AlertSettings = AlertSettings {
    eval_ms: 1000,
    surge_per_min: 100,
    surge_window_sec: 60,
    stall_sec: 30,
    resolve_sec: 10,
};

fn room(id: &str, waiting: u64, joined: u64, passed: u64) -> RoomSeen {
    RoomSeen {
        id: id.to_owned(),
        state: "active".to_owned(),
        effective_state: "active".to_owned(),
        rate_per_minute: 60,
        waiting,
        pre_queue: 0,
        joined_total: joined,
        passed_total: passed,
        created_at_ms: 0,
    }
}

fn answered(rooms: Vec<RoomSeen>) -> EngineSeen {
    EngineSeen::Answered {
        storage_ready: true,
        store: "valkey".to_owned(),
        rooms,
    }
}

fn names(transitions: &[Transition]) -> Vec<(&'static str, bool)> {
    transitions
        .iter()
        .map(|transition| (transition.rule.name(), transition.firing))
        .collect()
}

#[test]
fn a_surge_fires_at_the_threshold_holds_above_half_and_resolves_after_the_hold() {
    let mut rules = Evaluator::new(SETTINGS);
    let mut log = Vec::new();
    // Arrivals per second: 0 for 10 s, 3/s (180/min) for 60 s, 1/s (60/min) for 60 s, 0 after.
    let mut joined = 0;
    for second in 0..300_i64 {
        joined += match second {
            10..70 => 3,
            70..130 => 1,
            _ => 0,
        };
        // Everyone is admitted at once: nobody waits, so nothing stalls.
        let seen = answered(vec![room("r", 0, joined, joined)]);
        for transition in rules.observe(second * 1000, &seen) {
            log.push((second, transition));
        }
    }
    let fired: Vec<_> = log.iter().map(|(at, t)| (*at, t.firing)).collect();
    assert_eq!(fired.len(), 2, "one fire, one resolve: {log:?}");
    let (fired_at, resolved_at) = (fired[0].0, fired[1].0);
    // The window is a minute: 100 arrivals in it take 34 s of 3/s.
    assert_eq!(fired_at, 43);
    // 60/min for the next minute is over half the threshold: still firing. The last arrival
    // is at t=129; at t=140 the window (80, 140] holds 49 (under half), then ten clear seconds.
    assert_eq!(resolved_at, 150);
    assert!(log[0].1.summary.contains("arrivals/min"), "{:?}", log[0]);
}

#[test]
fn a_stalled_room_fires_after_stall_sec_and_resolves_once_the_line_moves() {
    let mut rules = Evaluator::new(SETTINGS);
    let mut log = Vec::new();
    for second in 0..120_i64 {
        // Nobody admitted until t=60, then one admission every 2 s.
        let passed = if second < 60 { 0 } else { (second - 60) / 2 };
        let mut seen_room = room("r", 10, 10, passed as u64);
        seen_room.rate_per_minute = if second < 60 { 0 } else { 30 };
        for transition in rules.observe(second * 1000, &answered(vec![seen_room])) {
            log.push((second, transition));
        }
    }
    assert_eq!(
        log.iter()
            .map(|(at, t)| (*at, t.firing))
            .collect::<Vec<_>>(),
        vec![(30, true), (72, false)],
        "{log:?}"
    );
    assert!(log[0].1.summary.contains("rate is 0/min"), "{:?}", log[0]);
    assert_eq!(log[1].1.started_at_ms, 30_000);
}

#[test]
fn a_room_whose_doors_are_shut_or_that_is_in_bypass_never_stalls() {
    let mut rules = Evaluator::new(SETTINGS);
    for second in 0..100_i64 {
        let mut scheduled = room("drop", 5, 5, 0);
        scheduled.effective_state = "scheduled".to_owned();
        let mut bypass = room("open", 5, 5, 0);
        bypass.state = "bypass".to_owned();
        let transitions = rules.observe(second * 1000, &answered(vec![scheduled, bypass]));
        assert!(transitions.is_empty(), "{transitions:?}");
    }
}

#[test]
fn storage_and_readiness_fire_once_and_a_blip_within_the_hold_keeps_one_alert() {
    let mut rules = Evaluator::new(SETTINGS);
    let down = EngineSeen::Answered {
        storage_ready: false,
        store: "valkey".to_owned(),
        rooms: vec![],
    };
    let mut log = Vec::new();
    for second in 0..100_i64 {
        let seen = match second {
            10..20 | 25..30 => down.clone(),
            40..50 => EngineSeen::Unreachable("connection refused".to_owned()),
            _ => answered(vec![]),
        };
        for transition in rules.observe(second * 1000, &seen) {
            log.push((second, transition.rule.name(), transition.firing));
        }
    }
    // Storage: down at 10, up at 20 (clear 5 s, under the 10 s hold), down again at 25 (the
    // same alert keeps firing), up at 30. At 40 the engine stops answering: storage cannot be
    // seen and keeps its state; readiness fires. At 50 storage is seen clear again, its clear
    // run (from 30) past the hold: resolved. Readiness has been clear since 50: resolved at 60.
    assert_eq!(
        log,
        vec![
            (10, "storage", true),
            (40, "readiness", true),
            (50, "storage", false),
            (60, "readiness", false),
        ]
    );
}

#[test]
fn a_deleted_room_resolves_its_alerts_after_the_hold() {
    let mut rules = Evaluator::new(SETTINGS);
    let mut log = Vec::new();
    for second in 0..80_i64 {
        let rooms = if second < 40 {
            vec![room("gone", 3, 3, 0)]
        } else {
            vec![]
        };
        log.extend(rules.observe(second * 1000, &answered(rooms)));
    }
    assert_eq!(names(&log), vec![("stalled", true), ("stalled", false)]);
    assert_eq!(log[1].at_ms, 50_000);
    assert!(rules.firing().is_empty());
}

#[test]
fn the_doors_opening_is_not_counted_as_arrivals() {
    let mut rules = Evaluator::new(SETTINGS);
    // 500 in the pre-queue of a room made long ago, then the draw turns them all into tickets.
    let mut before = room("drop", 0, 0, 0);
    before.pre_queue = 500;
    before.effective_state = "scheduled".to_owned();
    before.created_at_ms = -3_600_000;
    assert!(rules.observe(0, &answered(vec![before.clone()])).is_empty());
    let after = RoomSeen {
        pre_queue: 0,
        joined_total: 500,
        passed_total: 500,
        effective_state: "active".to_owned(),
        ..before
    };
    assert!(rules.observe(1000, &answered(vec![after])).is_empty());
}

#[test]
fn a_room_flooded_before_its_first_evaluation_still_surges() {
    let mut rules = Evaluator::new(SETTINGS);
    let mut flooded = room("new", 0, 150, 150);
    flooded.created_at_ms = 500;
    assert_eq!(
        names(&rules.observe(1000, &answered(vec![flooded]))),
        vec![("surge", true)]
    );
    // A room the evaluator first sees long after its creation: its past is not a surge.
    let mut old = room("old", 0, 150, 150);
    old.created_at_ms = -3_600_000;
    assert!(rules.observe(2000, &answered(vec![old])).is_empty());
}
