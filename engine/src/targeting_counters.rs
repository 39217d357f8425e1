//! The admin targeting page's counters: per room, how often each `urlPatterns` rule decided a
//! door check's scope (and when last), how many checks named a page no rule matched, and how
//! many came with no usable page. Counted by the Check RPC from the verdict, so both stores
//! share them; not journaled (they are a diagnostic, and a write per check would cost more than
//! the check). A room's counters start again from zero whenever its rule revision or its
//! generation changes, so a rule is never credited with matches of the rule that stood at its
//! index before.
//!
//! On the memory store one engine's counts are all there are. On the durable store several
//! engines answer checks, so each also keeps what it counted since its last flush and
//! [`run_flusher`] adds that to the room's shared counts in Valkey once a second; the page
//! reads the shared counts plus this engine's unflushed ones (another engine's last second may
//! not be in yet).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;

use crate::domain::{PageScope, PageVerdict};
use crate::store::Store;

/// How often an engine adds what it counted to the shared counts.
const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// One rule's count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RuleCount {
    pub(crate) matches: u64,
    pub(crate) last_matched_at_ms: Option<i64>,
}

/// A room's counters for one generation and rule revision.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoomCounts {
    generation: u64,
    rev: u64,
    /// One per rule, in the room's order.
    pub(crate) rules: Vec<RuleCount>,
    pub(crate) unmatched: u64,
    pub(crate) no_url: u64,
}

impl RoomCounts {
    pub(crate) fn fresh(generation: u64, rev: u64, rules: usize) -> RoomCounts {
        RoomCounts {
            generation,
            rev,
            rules: vec![RuleCount::default(); rules],
            unmatched: 0,
            no_url: 0,
        }
    }

    /// The generation and rule revision these counts are of.
    pub(crate) fn era(&self) -> (u64, u64) {
        (self.generation, self.rev)
    }

    /// These counts, moved on to `generation` and `rev` (from zero if they are of another).
    fn at(&mut self, generation: u64, rev: u64, rules: usize) -> &mut RoomCounts {
        if self.era() != (generation, rev) {
            *self = RoomCounts::fresh(generation, rev, rules);
        }
        self
    }

    fn count(&mut self, verdict: &PageVerdict, now: i64) {
        match (verdict.scope, verdict.rule) {
            (PageScope::Unknown, _) => self.no_url += 1,
            (_, None) => self.unmatched += 1,
            (_, Some(index)) => {
                if let Some(rule) = self.rules.get_mut(index) {
                    rule.matches += 1;
                    rule.last_matched_at_ms = Some(now);
                }
            }
        }
    }

    /// Adds `other`'s counts when they are of the same era (else leaves these as they are).
    pub(crate) fn add(&mut self, other: &RoomCounts) {
        if self.era() != other.era() {
            return;
        }
        self.unmatched += other.unmatched;
        self.no_url += other.no_url;
        for (mine, theirs) in self.rules.iter_mut().zip(&other.rules) {
            mine.matches += theirs.matches;
            mine.last_matched_at_ms = mine.last_matched_at_ms.max(theirs.last_matched_at_ms);
        }
    }

    fn is_empty(&self) -> bool {
        self.unmatched == 0 && self.no_url == 0 && self.rules.iter().all(|rule| rule.matches == 0)
    }
}

/// Every room's counters; one lock held for a few instructions per scoped check.
#[derive(Debug, Default)]
pub(crate) struct TargetingCounters {
    /// This engine's counts, since the room's era began.
    rooms: Mutex<HashMap<String, RoomCounts>>,
    /// What this engine counted since its last flush, kept only when the store shares counts.
    unflushed: Option<Mutex<HashMap<String, RoomCounts>>>,
    /// Held by a flush from taking the counts until the store has them, and by a read of the
    /// shared counts, so a read never sees counts in flight (missing, or twice).
    pub(crate) flush_gate: tokio::sync::Mutex<()>,
}

impl TargetingCounters {
    /// Counters that also keep what they have not yet flushed to a store shared by engines.
    pub(crate) fn shared() -> TargetingCounters {
        TargetingCounters {
            rooms: Mutex::default(),
            unflushed: Some(Mutex::default()),
            flush_gate: tokio::sync::Mutex::default(),
        }
    }

    /// Counts one check's verdict.
    pub(crate) fn record(&self, room_id: &str, generation: u64, verdict: &PageVerdict, now: i64) {
        let rules = verdict.patterns.len();
        let mut rooms = self.rooms.lock().unwrap_or_else(PoisonError::into_inner);
        let counts = rooms.entry(room_id.to_owned()).or_default();
        counts
            .at(generation, verdict.rev, rules)
            .count(verdict, now);
        drop(rooms);
        if let Some(unflushed) = &self.unflushed {
            let mut unflushed = unflushed.lock().unwrap_or_else(PoisonError::into_inner);
            let counts = unflushed.entry(room_id.to_owned()).or_default();
            counts
                .at(generation, verdict.rev, rules)
                .count(verdict, now);
        }
    }

    /// What was counted since the last flush, room by room; forgotten here.
    fn take_unflushed(&self) -> Vec<(String, RoomCounts)> {
        let Some(unflushed) = &self.unflushed else {
            return Vec::new();
        };
        let mut unflushed = unflushed.lock().unwrap_or_else(PoisonError::into_inner);
        unflushed
            .drain()
            .filter(|(_, counts)| !counts.is_empty())
            .collect()
    }

    /// Puts back counts a flush could not deliver, beside anything counted meanwhile.
    fn restore_unflushed(&self, room_id: String, counts: RoomCounts) {
        let Some(unflushed) = &self.unflushed else {
            return;
        };
        let mut unflushed = unflushed.lock().unwrap_or_else(PoisonError::into_inner);
        let held = unflushed.entry(room_id).or_insert_with(|| {
            RoomCounts::fresh(counts.generation, counts.rev, counts.rules.len())
        });
        if held.era() == counts.era() {
            held.add(&counts);
        }
    }

    /// What this engine counted for the room at `generation` and `rev` and has not flushed.
    pub(crate) fn unflushed(
        &self,
        room_id: &str,
        generation: u64,
        rev: u64,
        rules: usize,
    ) -> RoomCounts {
        let fresh = RoomCounts::fresh(generation, rev, rules);
        let Some(unflushed) = &self.unflushed else {
            return fresh;
        };
        let unflushed = unflushed.lock().unwrap_or_else(PoisonError::into_inner);
        match unflushed.get(room_id) {
            Some(counts) if counts.era() == (generation, rev) => counts.clone(),
            _ => fresh,
        }
    }

    /// The counters of a room at `generation` and rule revision `rev` with `rules` rules: zeros
    /// when nothing was counted since they changed.
    pub(crate) fn read(
        &self,
        room_id: &str,
        generation: u64,
        rev: u64,
        rules: usize,
    ) -> RoomCounts {
        let rooms = self.rooms.lock().unwrap_or_else(PoisonError::into_inner);
        match rooms.get(room_id) {
            Some(counts) if (counts.generation, counts.rev) == (generation, rev) => counts.clone(),
            _ => RoomCounts::fresh(generation, rev, rules),
        }
    }
}

/// Adds what this engine counted to the store's shared counts once a second, until `stop`.
pub(crate) async fn run_flusher(
    store: Arc<dyn Store>,
    counters: Arc<TargetingCounters>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = stop.wait_for(|stopped| *stopped) => return,
            () = tokio::time::sleep(FLUSH_EVERY) => {}
        }
        let _in_flight = counters.flush_gate.lock().await;
        let mut rooms = counters.take_unflushed().into_iter();
        while let Some((room_id, counts)) = rooms.next() {
            if let Err(error) = store.add_targeting(room_id.clone(), counts.clone()).await {
                // The store is unreachable: keep this room's counts and the rest for the next
                // flush rather than wait out a timeout per room.
                tracing::debug!(room_id, %error, "targeting counts kept for the next flush");
                counters.restore_unflushed(room_id, counts);
                for (room_id, counts) in rooms.by_ref() {
                    counters.restore_unflushed(room_id, counts);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn verdict(rev: u64, scope: PageScope, rule: Option<usize>) -> PageVerdict {
        PageVerdict {
            rev,
            scope,
            rule,
            patterns: Arc::from(vec!["/a".to_owned(), "!/a/b".to_owned()]),
        }
    }

    #[test]
    fn verdicts_are_counted_where_they_belong() {
        let counters = TargetingCounters::default();
        counters.record("r", 1, &verdict(1, PageScope::In, Some(0)), 10);
        counters.record("r", 1, &verdict(1, PageScope::In, Some(0)), 20);
        counters.record("r", 1, &verdict(1, PageScope::Out, Some(1)), 30);
        counters.record("r", 1, &verdict(1, PageScope::Out, None), 40);
        counters.record("r", 1, &verdict(1, PageScope::Unknown, None), 50);
        let counts = counters.read("r", 1, 1, 2);
        assert_eq!(
            counts.rules,
            vec![
                RuleCount {
                    matches: 2,
                    last_matched_at_ms: Some(20)
                },
                RuleCount {
                    matches: 1,
                    last_matched_at_ms: Some(30)
                },
            ]
        );
        assert_eq!((counts.unmatched, counts.no_url), (1, 1));
        assert_eq!(counters.read("other", 1, 1, 2).rules[0].matches, 0);
    }

    #[test]
    fn shared_counters_keep_what_is_unflushed_until_taken_and_take_back_a_failed_flush() {
        let counters = TargetingCounters::shared();
        counters.record("r", 1, &verdict(1, PageScope::In, Some(0)), 10);
        counters.record("r", 1, &verdict(1, PageScope::Out, None), 20);
        assert_eq!(counters.unflushed("r", 1, 1, 2).rules[0].matches, 1);
        let taken = counters.take_unflushed();
        assert_eq!(taken.len(), 1);
        assert_eq!(counters.unflushed("r", 1, 1, 2).unmatched, 0, "taken");
        assert_eq!(
            counters.read("r", 1, 1, 2).unmatched,
            1,
            "this engine's own stay"
        );
        counters.record("r", 1, &verdict(1, PageScope::In, Some(0)), 30);
        let (room_id, counts) = taken.into_iter().next().expect("one room");
        counters.restore_unflushed(room_id, counts);
        let held = counters.unflushed("r", 1, 1, 2);
        assert_eq!(
            held.rules[0].matches, 2,
            "the failed flush's and the new one"
        );
        assert_eq!(held.rules[0].last_matched_at_ms, Some(30));
        assert_eq!(held.unmatched, 1);
        assert!(
            TargetingCounters::default().take_unflushed().is_empty(),
            "unshared counters keep nothing to flush"
        );
    }

    #[test]
    fn a_new_revision_or_generation_starts_from_zero() {
        let counters = TargetingCounters::default();
        counters.record("r", 1, &verdict(1, PageScope::In, Some(0)), 10);
        assert_eq!(counters.read("r", 1, 2, 2).rules[0].matches, 0, "new rules");
        assert_eq!(
            counters.read("r", 2, 1, 2).rules[0].matches,
            0,
            "re-created"
        );
        counters.record("r", 1, &verdict(2, PageScope::In, Some(0)), 20);
        assert_eq!(counters.read("r", 1, 2, 2).rules[0].matches, 1);
        assert_eq!(
            counters.read("r", 1, 1, 2).rules[0].matches,
            0,
            "the old revision's counts are gone"
        );
    }
}
