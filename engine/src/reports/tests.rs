//! A scripted day of one room, executed command by command as a store would: the report fed
//! as the memory store feeds it must equal the report replayed from the records (the journal),
//! and both must say what the script did, hour by hour and for the day.

use serde_json::{Value, json};

use super::*;
use crate::domain::{Command, JoinRequest};

/// 2026-12-06T00:00:00Z.
const DAY: i64 = 1_796_515_200_000;
const MINUTE: i64 = 60_000;

/// The script's room as a store runs it: every change's records, in order.
struct Script {
    room: Room,
    fed: ReportFold,
    journal: Vec<EventRecord>,
}

impl Script {
    fn new() -> Script {
        Script {
            room: Room::unborn("day"),
            fed: ReportFold::default(),
            journal: Vec::new(),
        }
    }

    fn run(&mut self, command: Command, at_ms: i64) {
        let executed = self.room.execute(&command, at_ms, &mut rand::rng());
        assert!(
            executed.outcome.is_ok(),
            "{command:?}: {:?}",
            executed.outcome
        );
        for record in &executed.records {
            self.fed.observe(&self.room, record);
        }
        self.journal.extend(executed.records);
    }

    fn join(&mut self, visitors: usize, at_ms: i64) {
        for _ in 0..visitors {
            self.run(Command::Join(JoinRequest::default()), at_ms);
        }
    }

    fn tick_each_second(&mut self, from_ms: i64, seconds: i64) {
        for second in 1..=seconds {
            self.run(Command::Tick, from_ms + second * 1000);
        }
    }
}

fn scripted_day() -> Script {
    let mut script = Script::new();
    let body = json!({"id": "day", "targetUrl": "https://shop.example/", "ratePerMinute": 60});
    script.run(Command::Put(body), DAY);
    // 00:10 — ten visitors at once, one admitted a second: ticket k waits k s, as quoted.
    script.join(10, DAY + 10 * MINUTE);
    script.tick_each_second(DAY + 10 * MINUTE, 10);
    // 01:00–01:59 — nothing happens.
    // 02:00 — four join, nobody is admitted; one is ejected, the rest purged.
    script.run(
        Command::SetState(qm_core::room::RoomState::Paused),
        DAY + 120 * MINUTE,
    );
    script.join(4, DAY + 120 * MINUTE);
    script.run(Command::Eject(12), DAY + 121 * MINUTE);
    script.run(Command::Purge, DAY + 150 * MINUTE);
    script
}

fn fields(row: &Value, names: &[&str]) -> Vec<Value> {
    names.iter().map(|name| row[*name].clone()).collect()
}

#[test]
fn the_report_fed_as_the_room_changes_equals_the_journal_replayed() {
    let script = scripted_day();
    let replayed = ReportFold::replay("day", &script.journal);
    for bucket in [Bucket::Hour, Bucket::Day] {
        assert_eq!(
            script.fed.rows(bucket, 0, i64::MAX),
            replayed.rows(bucket, 0, i64::MAX),
            "{bucket:?}"
        );
    }
}

#[test]
fn hour_rows_say_what_the_script_did() {
    let rows = ReportFold::replay("day", &scripted_day().journal).rows(Bucket::Hour, 0, i64::MAX);
    let starts: Vec<&str> = rows
        .iter()
        .filter_map(|row| row["start"].as_str())
        .collect();
    assert_eq!(
        starts,
        [
            "2026-12-06T00:00:00Z",
            "2026-12-06T01:00:00Z",
            "2026-12-06T02:00:00Z"
        ]
    );
    let names = [
        "joins",
        "passes",
        "peakDepth",
        "medianWaitSec",
        "p95WaitSec",
        "ejected",
        "purged",
        "etaQuoted",
        "etaAccuracyPct",
        "etaMedianErrorSec",
    ];
    assert_eq!(
        fields(&rows[0], &names),
        [
            json!(10),
            json!(10),
            json!(10),
            json!(5),
            json!(10),
            json!(0),
            json!(0),
            json!(10),
            json!(100.0),
            json!(0)
        ]
    );
    // An hour without an event: the line as the last one left it, no waits to measure.
    assert_eq!(
        fields(&rows[1], &names),
        [
            json!(0),
            json!(0),
            json!(0),
            Value::Null,
            Value::Null,
            json!(0),
            json!(0),
            json!(0),
            Value::Null,
            Value::Null
        ]
    );
    // Paused: nobody quoted a number, nobody admitted; one ejected, three purged.
    assert_eq!(
        fields(&rows[2], &names),
        [
            json!(4),
            json!(0),
            json!(4),
            Value::Null,
            Value::Null,
            json!(1),
            json!(3),
            json!(0),
            Value::Null,
            Value::Null
        ]
    );
}

#[test]
fn a_day_row_merges_its_hours() {
    let rows = ReportFold::replay("day", &scripted_day().journal).rows(Bucket::Day, 0, i64::MAX);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["start"], "2026-12-06T00:00:00Z");
    assert_eq!(
        fields(
            &rows[0],
            &[
                "joins",
                "passes",
                "peakDepth",
                "medianWaitSec",
                "ejected",
                "purged"
            ]
        ),
        [
            json!(14),
            json!(10),
            json!(10),
            json!(5),
            json!(1),
            json!(3)
        ]
    );
}

#[test]
fn since_and_until_bound_the_rows_by_their_start() {
    let fold = ReportFold::replay("day", &scripted_day().journal);
    let rows = fold.rows(Bucket::Hour, DAY + 60 * MINUTE, DAY + 120 * MINUTE);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["start"], "2026-12-06T01:00:00Z");
    assert!(
        fold.rows(Bucket::Hour, DAY + 180 * MINUTE, i64::MAX)
            .is_empty()
    );
}

#[test]
fn a_recreated_room_reports_its_new_line_only() {
    let mut script = scripted_day();
    script.run(Command::Delete, DAY + 200 * MINUTE);
    let body = json!({"id": "day", "targetUrl": "https://shop.example/", "ratePerMinute": 60});
    script.run(Command::Put(body), DAY + 24 * 60 * MINUTE);
    script.join(2, DAY + 24 * 60 * MINUTE);
    let rows = ReportFold::replay("day", &script.journal).rows(Bucket::Day, 0, i64::MAX);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["start"], "2026-12-07T00:00:00Z");
    assert_eq!(rows[0]["joins"], 2);
}

#[test]
fn quantiles_are_nearest_rank() {
    assert_eq!(quantile::<u32>(&[], 0.5), None);
    assert_eq!(quantile(&[7], 0.95), Some(7));
    let hundred: Vec<u32> = (1..=100).collect();
    assert_eq!(quantile(&hundred, 0.5), Some(50));
    assert_eq!(quantile(&hundred, 0.95), Some(95));
    assert!(within_band(10, 70) && !within_band(10, 71));
    assert!(within_band(1000, 1250) && !within_band(1000, 1251));
}
