//! Bot protection's account (`GET /api/admin/security`): per room, how the joins this engine
//! ran scored, how many `enforce` refused, how many `monitor` let in that `enforce` would have
//! refused, the reasons behind those, and the latest of them as examples with the client
//! address shown only as a keyed one-way digest. Counted by the Join RPC from the request and
//! its outcome, so both stores share it; held in this engine's memory only (a diagnostic: a
//! journal write per join would cost more than the join), from the engine's start. A room's
//! account starts again when the room is created anew.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

use qm_core::bot::{BLOCK_AT, Reason};
use serde_json::{Value, json};

/// Examples kept per room, newest first.
pub(crate) const RECENT_EXAMPLES: usize = 20;
/// Score bands of the report: browser-like, suspect, script-like (at or over [`BLOCK_AT`]).
const SUSPECT_AT: u32 = 30;

/// What happened to a join that scored at or over [`BLOCK_AT`] in a protected room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flagged {
    /// `enforce` refused it a new place.
    Refused,
    /// `monitor` admitted it; `enforce` would have refused it.
    WouldRefuse,
}

impl Flagged {
    fn name(self) -> &'static str {
        match self {
            Flagged::Refused => "refused",
            Flagged::WouldRefuse => "would_refuse",
        }
    }
}

/// One scored join, as the Join RPC saw it.
#[derive(Debug, Clone)]
pub(crate) struct ScoredJoin<'a> {
    pub(crate) score: u32,
    pub(crate) reasons: u32,
    /// The keyed digest of the client address; `None` when the gateway sent none.
    pub(crate) client: Option<String>,
    pub(crate) flagged: Option<Flagged>,
    pub(crate) at_ms: i64,
    pub(crate) room_id: &'a str,
}

#[derive(Debug, Clone)]
struct Example {
    at_ms: i64,
    score: u32,
    reasons: u32,
    client: Option<String>,
    outcome: Flagged,
}

/// One room's account.
#[derive(Debug, Clone, Default)]
struct RoomAccount {
    scored: u64,
    /// Joins per score band: under 30, 30 to 59, 60 and over.
    bands: [u64; 3],
    refused: u64,
    would_refuse: u64,
    /// Per [`Reason::ALL`] entry: how often it was behind a refused or would-refuse join.
    reasons: [u64; Reason::ALL.len()],
    recent: VecDeque<Example>,
}

/// Every room's account in this engine.
#[derive(Debug, Default)]
pub(crate) struct SecurityLedger {
    rooms: Mutex<HashMap<String, RoomAccount>>,
}

impl SecurityLedger {
    pub(crate) fn record(&self, join: ScoredJoin<'_>) {
        let mut rooms = self.rooms.lock().unwrap_or_else(PoisonError::into_inner);
        let account = match rooms.get_mut(join.room_id) {
            Some(account) => account,
            None => rooms.entry(join.room_id.to_owned()).or_default(),
        };
        account.scored += 1;
        let band = match join.score {
            score if score >= BLOCK_AT => 2,
            score if score >= SUSPECT_AT => 1,
            _ => 0,
        };
        account.bands[band] += 1;
        let Some(outcome) = join.flagged else {
            return;
        };
        match outcome {
            Flagged::Refused => account.refused += 1,
            Flagged::WouldRefuse => account.would_refuse += 1,
        }
        for (index, reason) in Reason::ALL.iter().enumerate() {
            if join.reasons & reason.bit() != 0 {
                account.reasons[index] += 1;
            }
        }
        if account.recent.len() == RECENT_EXAMPLES {
            account.recent.pop_back();
        }
        account.recent.push_front(Example {
            at_ms: join.at_ms,
            score: join.score,
            reasons: join.reasons,
            client: join.client,
            outcome,
        });
    }

    /// Forgets a room (deleted, or created anew).
    pub(crate) fn forget(&self, room_id: &str) {
        self.rooms
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(room_id);
    }

    /// The report entry of `room_id` in `mode` (the room's `protection.mode`, `off` when unset).
    pub(crate) fn room_report(&self, room_id: &str, mode: &str) -> Value {
        let rooms = self.rooms.lock().unwrap_or_else(PoisonError::into_inner);
        let empty = RoomAccount::default();
        let account = rooms.get(room_id).unwrap_or(&empty);
        let mut reasons: Vec<(Reason, u64)> = Reason::ALL
            .into_iter()
            .zip(account.reasons)
            .filter(|(_, count)| *count > 0)
            .collect();
        // Most frequent first; ties in the fixed order of `Reason::ALL` (the sort is stable).
        reasons.sort_by_key(|(_, count)| std::cmp::Reverse(*count));
        json!({
            "roomId": room_id,
            "mode": mode,
            "blockAt": BLOCK_AT,
            "scored": account.scored,
            "scores": {
                "browserLike": account.bands[0],
                "suspect": account.bands[1],
                "scriptLike": account.bands[2],
            },
            "refused": account.refused,
            "wouldRefuse": account.would_refuse,
            "topReasons": reasons
                .iter()
                .map(|(reason, count)| json!({ "reason": reason.name(), "count": count }))
                .collect::<Vec<_>>(),
            "recent": account
                .recent
                .iter()
                .map(|example| json!({
                    "at": example.at_ms,
                    "score": example.score,
                    "reasons": Reason::of(example.reasons).map(Reason::name).collect::<Vec<_>>(),
                    "client": example.client,
                    "outcome": example.outcome.name(),
                }))
                .collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn join(room_id: &str, reasons: u32, flagged: Option<Flagged>, at_ms: i64) -> ScoredJoin<'_> {
        ScoredJoin {
            score: qm_core::bot::score_of(reasons),
            reasons,
            client: Some("abc".into()),
            flagged,
            at_ms,
            room_id,
        }
    }

    #[test]
    fn flagged_joins_are_counted_with_their_reasons_and_kept_newest_first() {
        let ledger = SecurityLedger::default();
        let script = Reason::NoUserAgent.bit() | Reason::NoAcceptLanguage.bit();
        ledger.record(join("r", 0, None, 1));
        ledger.record(join("r", Reason::UnusualUserAgent.bit(), None, 2));
        ledger.record(join("r", script, Some(Flagged::WouldRefuse), 3));
        ledger.record(join(
            "r",
            Reason::NoUserAgent.bit(),
            Some(Flagged::Refused),
            4,
        ));
        let report = ledger.room_report("r", "monitor");
        assert_eq!(report["scored"], 4);
        assert_eq!(report["scores"]["browserLike"], 1);
        assert_eq!(report["scores"]["suspect"], 1);
        assert_eq!(report["scores"]["scriptLike"], 2);
        assert_eq!(
            (report["refused"].clone(), report["wouldRefuse"].clone()),
            (json!(1), json!(1))
        );
        assert_eq!(
            report["topReasons"],
            json!([
                { "reason": "no_user_agent", "count": 2 },
                { "reason": "no_accept_language", "count": 1 },
            ])
        );
        assert_eq!(report["recent"][0]["at"], 4);
        assert_eq!(report["recent"][0]["outcome"], "refused");
        assert_eq!(
            report["recent"][1]["reasons"],
            json!(["no_user_agent", "no_accept_language"])
        );
        assert_eq!(ledger.room_report("other", "off")["scored"], 0);
    }

    #[test]
    fn only_the_latest_examples_are_kept_and_a_forgotten_room_starts_again() {
        let ledger = SecurityLedger::default();
        let bits = Reason::NoUserAgent.bit();
        for at in 0..(RECENT_EXAMPLES as i64 + 5) {
            ledger.record(join("r", bits, Some(Flagged::Refused), at));
        }
        let report = ledger.room_report("r", "enforce");
        let recent = report["recent"].as_array().map(Vec::len);
        assert_eq!(recent, Some(RECENT_EXAMPLES));
        assert_eq!(report["recent"][0]["at"], RECENT_EXAMPLES as i64 + 4);
        assert_eq!(report["refused"], RECENT_EXAMPLES as u64 + 5);
        ledger.forget("r");
        assert_eq!(ledger.room_report("r", "enforce")["refused"], 0);
    }
}
