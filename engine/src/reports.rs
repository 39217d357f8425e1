//! `GET /api/admin/reports`: a room's history in hour or day rows (UTC), read from its events.
//!
//! [`ReportFold`] watches a room's events in order, each with the room as it stands once the
//! event is applied, and keeps per hour: arrivals (tickets issued and pre-queue entries), passes,
//! the line's peak depth, every pass's wait (the pass's instant less its ticket's join), passes
//! to a holder who had already left (the journal's ghost tickets: abandoned), ejects, purges, and
//! how each pass's wait compared with the wait quoted to that visitor when they joined — the
//! quote `/api/status` gave, read from the same `Room::waiting_place`. A day row merges its 24
//! hours, so a median is the median of the day's waits, not of hourly medians.
//!
//! On valkey+pg the fold replays the room's whole journal from Postgres at each request (the
//! current generation: a re-created room starts over). On memory the store feeds the fold as
//! it changes the room: what this boot saw, nothing before it.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Value, json};

use crate::domain::{EjectedFrom, EventRecord, Room, RoomEvent, TicketStatus};

const HOUR_MS: i64 = 3_600_000;
const DAY_MS: i64 = 86_400_000;
/// Rows one answer carries at most: the newest ones when the range holds more.
pub const MAX_ROWS: usize = 2_000;

/// The width of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bucket {
    Hour,
    Day,
}

impl Bucket {
    pub fn from_name(name: &str) -> Option<Bucket> {
        match name {
            "hour" => Some(Bucket::Hour),
            "day" => Some(Bucket::Day),
            _ => None,
        }
    }

    fn width_ms(self) -> i64 {
        match self {
            Bucket::Hour => HOUR_MS,
            Bucket::Day => DAY_MS,
        }
    }
}

/// One hour's figures.
#[derive(Debug, Clone, Default)]
struct Hour {
    joins: u64,
    passes: u64,
    peak_depth: u64,
    /// The line's depth when the hour's last event left it.
    end_depth: u64,
    /// Seconds each pass of the hour waited.
    waits: Vec<u32>,
    abandoned: u64,
    ejected: u64,
    purged: u64,
    /// For passes whose join was quoted a wait: actual less quoted, in seconds.
    eta_errors: Vec<i32>,
    /// Of those, the passes admitted within the quote's band (see [`within_band`]).
    eta_within: u64,
}

/// A pass counts as on time when it came within a quarter of the quote, or a minute, either way.
fn within_band(quoted: u64, actual: u64) -> bool {
    let band = (quoted / 4).max(60);
    actual.abs_diff(quoted) <= band
}

/// A room's events folded into hours.
#[derive(Debug, Clone, Default)]
pub struct ReportFold {
    hours: BTreeMap<i64, Hour>,
    /// The wait quoted to each waiting ticket when it joined.
    quotes: HashMap<u64, u64>,
}

impl ReportFold {
    /// Takes in `record`, with `room` as it stands once the record is applied.
    pub(crate) fn observe(&mut self, room: &Room, record: &EventRecord) {
        if matches!(record.event, RoomEvent::Created { .. }) {
            // A new generation is a new line: its history starts here.
            *self = ReportFold::default();
        }
        let at_ms = record.at_ms;
        let depth = room.waiting();
        let hour = self.hours.entry(at_ms.div_euclid(HOUR_MS)).or_default();
        match &record.event {
            RoomEvent::Joined { ticket, .. } => {
                hour.joins += 1;
                if let Some(quoted) = room.waiting_place(*ticket, false, at_ms).eta_sec {
                    self.quotes.insert(*ticket, quoted);
                }
            }
            RoomEvent::PreJoined { .. } => hour.joins += 1,
            RoomEvent::Passed {
                first,
                last,
                count,
                ns,
                ..
            } => {
                hour.passes += count;
                hour.abandoned += ns.len() as u64;
                // The tickets of the range this very event passed (the others had left it).
                let passed = (*first..=*last)
                    .filter_map(|ticket| room.ticket(ticket).map(|record| (ticket, record)))
                    .filter(|(_, record)| record.status == TicketStatus::Passed { at_ms });
                for (ticket, record) in passed {
                    let waited =
                        u64::try_from((at_ms - record.joined_at_ms).max(0) / 1000).unwrap_or(0);
                    hour.waits.push(u32::try_from(waited).unwrap_or(u32::MAX));
                    if let Some(quoted) = self.quotes.remove(&ticket) {
                        let error = i64::try_from(waited).unwrap_or(i64::MAX)
                            - i64::try_from(quoted).unwrap_or(i64::MAX);
                        hour.eta_errors
                            .push(i32::try_from(error).unwrap_or(if error < 0 {
                                i32::MIN
                            } else {
                                i32::MAX
                            }));
                        hour.eta_within += u64::from(within_band(quoted, waited));
                    }
                }
            }
            RoomEvent::Ejected { ticket, was } => {
                hour.ejected += 1;
                if *was == EjectedFrom::Waiting {
                    self.quotes.remove(ticket);
                }
            }
            RoomEvent::Purged { count, pre_queue } => {
                hour.purged += count + pre_queue;
                self.quotes.clear();
            }
            _ => {}
        }
        hour.peak_depth = hour.peak_depth.max(depth);
        hour.end_depth = depth;
    }

    /// Folds a room's journal (every record of its id, oldest first) into a report of its
    /// current generation; a record the room cannot take ends the fold there.
    pub(crate) fn replay(room_id: &str, records: &[EventRecord]) -> ReportFold {
        let mut fold = ReportFold::default();
        crate::durable::rebuild::fold_observed(room_id, records, |room, record| {
            fold.observe(room, record);
        });
        fold
    }

    /// The rows of `bucket` width whose start lies in `[since_ms, until_ms)`, oldest first, from
    /// the first hour with an event to the last; an hour with none carries the depth on.
    pub fn rows(&self, bucket: Bucket, since_ms: i64, until_ms: i64) -> Vec<Value> {
        let (Some(first), Some(last)) = (self.hours.keys().next(), self.hours.keys().last()) else {
            return Vec::new();
        };
        let width = bucket.width_ms();
        let first_bucket = (first * HOUR_MS)
            .div_euclid(width)
            .max(since_ms.div_euclid(width));
        let last_bucket = (last * HOUR_MS)
            .div_euclid(width)
            .min((until_ms - 1).div_euclid(width));
        if last_bucket < first_bucket {
            return Vec::new();
        }
        let count = usize::try_from(last_bucket - first_bucket + 1).unwrap_or(usize::MAX);
        let first_bucket =
            first_bucket + i64::try_from(count.saturating_sub(MAX_ROWS)).unwrap_or(0);
        // The depth an empty stretch carries: where the last hour before it left the line.
        let mut depth = self
            .hours
            .range(..(first_bucket * width).div_euclid(HOUR_MS))
            .next_back()
            .map_or(0, |(_, hour)| hour.end_depth);
        (first_bucket..=last_bucket)
            .map(|index| {
                let start_ms = index * width;
                let hours_in =
                    (start_ms.div_euclid(HOUR_MS))..((start_ms + width).div_euclid(HOUR_MS));
                let mut merged = Hour {
                    peak_depth: depth,
                    end_depth: depth,
                    ..Hour::default()
                };
                for (_, hour) in self.hours.range(hours_in) {
                    merge(&mut merged, hour);
                }
                depth = merged.end_depth;
                row(start_ms, &mut merged)
            })
            .collect()
    }
}

fn merge(into: &mut Hour, hour: &Hour) {
    into.joins += hour.joins;
    into.passes += hour.passes;
    into.peak_depth = into.peak_depth.max(hour.peak_depth);
    into.end_depth = hour.end_depth;
    into.waits.extend_from_slice(&hour.waits);
    into.abandoned += hour.abandoned;
    into.ejected += hour.ejected;
    into.purged += hour.purged;
    into.eta_errors.extend_from_slice(&hour.eta_errors);
    into.eta_within += hour.eta_within;
}

/// The value at quantile `q` of sorted `values` (nearest rank).
fn quantile<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

fn row(start_ms: i64, hour: &mut Hour) -> Value {
    hour.waits.sort_unstable();
    hour.eta_errors.sort_unstable();
    let quoted = hour.eta_errors.len() as u64;
    let accuracy = (quoted > 0).then(|| {
        let share = hour.eta_within as f64 * 100.0 / quoted as f64;
        (share * 10.0).round() / 10.0
    });
    json!({
        "start": iso(start_ms),
        "startMs": start_ms,
        "joins": hour.joins,
        "passes": hour.passes,
        "peakDepth": hour.peak_depth,
        "medianWaitSec": quantile(&hour.waits, 0.5),
        "p95WaitSec": quantile(&hour.waits, 0.95),
        "abandoned": hour.abandoned,
        "ejected": hour.ejected,
        "purged": hour.purged,
        "etaQuoted": quoted,
        "etaAccuracyPct": accuracy,
        "etaMedianErrorSec": quantile(&hour.eta_errors, 0.5),
    })
}

/// `2026-12-06T14:00:00Z`.
fn iso(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|at| at.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
