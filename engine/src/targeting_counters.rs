//! The admin targeting page's counters: per room, how often each `urlPatterns` rule decided a
//! door check's scope (and when last), how many checks named a page no rule matched, and how
//! many came with no usable page. Counted by the Check RPC from the verdict, so both stores
//! share them; held in this engine's memory only (not journaled: they are a diagnostic, and a
//! write per check would cost more than the check). A room's counters start again from zero
//! whenever its rule revision or its generation changes, so a rule is never credited with
//! matches of the rule that stood at its index before.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::domain::{PageScope, PageVerdict};

/// One rule's count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RuleCount {
    pub(crate) matches: u64,
    pub(crate) last_matched_at_ms: Option<i64>,
}

/// A room's counters for one generation and rule revision.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RoomCounts {
    generation: u64,
    rev: u64,
    /// One per rule, in the room's order.
    pub(crate) rules: Vec<RuleCount>,
    pub(crate) unmatched: u64,
    pub(crate) no_url: u64,
}

impl RoomCounts {
    fn fresh(generation: u64, rev: u64, rules: usize) -> RoomCounts {
        RoomCounts {
            generation,
            rev,
            rules: vec![RuleCount::default(); rules],
            unmatched: 0,
            no_url: 0,
        }
    }
}

/// Every room's counters; one lock held for a few instructions per scoped check.
#[derive(Debug, Default)]
pub(crate) struct TargetingCounters {
    rooms: Mutex<HashMap<String, RoomCounts>>,
}

impl TargetingCounters {
    /// Counts one check's verdict.
    pub(crate) fn record(&self, room_id: &str, generation: u64, verdict: &PageVerdict, now: i64) {
        let mut rooms = self.rooms.lock().unwrap_or_else(PoisonError::into_inner);
        let counts = rooms.entry(room_id.to_owned()).or_default();
        if (counts.generation, counts.rev) != (generation, verdict.rev) {
            *counts = RoomCounts::fresh(generation, verdict.rev, verdict.patterns.len());
        }
        match (verdict.scope, verdict.rule) {
            (PageScope::Unknown, _) => counts.no_url += 1,
            (_, None) => counts.unmatched += 1,
            (_, Some(index)) => {
                if let Some(rule) = counts.rules.get_mut(index) {
                    rule.matches += 1;
                    rule.last_matched_at_ms = Some(now);
                }
            }
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
