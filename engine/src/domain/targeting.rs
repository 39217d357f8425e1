//! A room's URL targeting: its `urlPatterns` compiled once, the revision connectors poll, and the
//! verdict on the page a door check names. The revision is derived in the fold (it moves when an
//! update changes the rules), so every engine and every rebuild agrees on it without an event of
//! its own. The matching itself is `qm_core::scope`, the one matcher.

use std::sync::Arc;

use qm_core::scope::{Scope, UrlScope, page_url};

use super::place::{CheckAction, CheckAnswer};
use super::room::Room;

/// The room's rules as the checks read them. Cloning shares the compiled rules.
#[derive(Debug, Clone, Default)]
pub struct Targeting {
    /// 0 for a room that never had rules; 1 for one created with rules; +1 per change.
    rev: u64,
    /// When the rules last changed (the room's creation when they never did), epoch ms.
    updated_at_ms: i64,
    patterns: Arc<[String]>,
    scope: Arc<UrlScope>,
}

/// Two rooms hold the same targeting when they hold the same rules at the same revision; the
/// compiled form follows from the rules.
impl PartialEq for Targeting {
    fn eq(&self, other: &Targeting) -> bool {
        self.rev == other.rev
            && self.updated_at_ms == other.updated_at_ms
            && self.patterns == other.patterns
    }
}

/// Where a page stands for a scoped room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageScope {
    In,
    Out,
    /// No page came with the check, or one that is not a web URL (an unreadable Referer): it
    /// is queued, never let through unprotected.
    Unknown,
}

impl PageScope {
    pub fn as_str(self) -> &'static str {
        match self {
            PageScope::In => "in",
            PageScope::Out => "out",
            PageScope::Unknown => "unknown",
        }
    }

    /// What the scope means for the page: an excluded page passes, anything else queues.
    pub fn action(self) -> &'static str {
        match self {
            PageScope::Out => "pass",
            PageScope::In | PageScope::Unknown => "queue",
        }
    }
}

/// The verdict on one page of a scoped room, with what a check's answer reports beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageVerdict {
    pub rev: u64,
    pub scope: PageScope,
    /// The index of the rule that decided, when one did.
    pub rule: Option<usize>,
    /// The room's rules, shared (for the rule's text and `?targeting=1`).
    pub patterns: Arc<[String]>,
}

impl PageVerdict {
    /// The text of the deciding rule.
    pub fn rule_text(&self) -> Option<&str> {
        self.rule
            .and_then(|index| self.patterns.get(index))
            .map(String::as_str)
    }
}

/// What a rule gives the pages it matches: `!` rules are exceptions, which pass.
pub fn pattern_action(pattern: &str) -> &'static str {
    match pattern.starts_with('!') {
        true => "pass",
        false => "queue",
    }
}

impl Targeting {
    /// Follows a configuration change: a new rule list bumps the revision and is compiled now,
    /// not per check. The first configuration stamps the time even without rules, so an
    /// unscoped room still reads when its (empty) rules were set.
    pub(crate) fn follow(&mut self, patterns: &[String], at_ms: i64) {
        if *self.patterns != *patterns {
            self.rev += 1;
            self.updated_at_ms = at_ms;
            self.patterns = patterns.into();
            self.scope = Arc::new(UrlScope::new(patterns));
        } else if self.updated_at_ms == 0 {
            self.updated_at_ms = at_ms;
        }
    }

    pub fn rev(&self) -> u64 {
        self.rev
    }

    pub fn updated_at_ms(&self) -> i64 {
        self.updated_at_ms
    }

    pub fn patterns(&self) -> &Arc<[String]> {
        &self.patterns
    }

    pub fn is_scoped(&self) -> bool {
        self.scope.is_scoped()
    }

    /// The verdict on `page` (`url=` or a Referer, unparsed), `None` on an unscoped room.
    pub fn judge(&self, page: Option<&str>) -> Option<PageVerdict> {
        if !self.is_scoped() {
            return None;
        }
        let (scope, rule) = match page.and_then(page_url) {
            None => (PageScope::Unknown, None),
            Some(url) => {
                let verdict = self.scope.judge(&url);
                let scope = match verdict.scope {
                    Scope::In => PageScope::In,
                    Scope::Out => PageScope::Out,
                };
                (scope, verdict.rule)
            }
        };
        Some(PageVerdict {
            rev: self.rev,
            scope,
            rule,
            patterns: self.patterns.clone(),
        })
    }
}

impl Room {
    /// The room's targeting: its rules, their revision and compiled form.
    pub fn targeting(&self) -> &Targeting {
        &self.targeting
    }

    /// The door check's verdict on the page it names; `None` on an unscoped room, whose check
    /// behaves exactly as it did before URL targeting existed.
    pub fn judge_page(&self, page: Option<&str>) -> Option<PageVerdict> {
        self.targeting.judge(page)
    }

    /// The door check's answer for a page the rules exclude: it is not the room's business, so
    /// it passes and nothing is minted (no place, no door session).
    pub(crate) fn out_of_scope(&self, verdict: PageVerdict, now_ms: i64) -> CheckAnswer {
        let state = self.effective_state(now_ms);
        let mut answer = self.check_answer(CheckAction::Pass, "out_of_scope", state);
        answer.targeting = Some(verdict);
        answer
    }
}

#[cfg(test)]
#[path = "targeting_tests.rs"]
mod tests;
