//! The gate's short memory of door sessions the engine just let through. A page with fifty
//! assets would otherwise ask the engine fifty times in a second for the same key; instead a
//! key the engine answered `pass` for (reason `session`) is let through again without asking
//! for up to [`REMEMBERED_FOR`], never past the session's own end. So an eject, or a room
//! deleted, reaches an inline visitor within that second, and the engine still sees each
//! session at least once a second (its idle clock is recorded per quarter of `sessionTtlSec`,
//! at least 2.5 s). Only the answer is remembered, never queue state: nothing here is decided.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use qm_core::clock::now_ms;

/// How long a `pass` for a door-session key is reused.
pub(super) const REMEMBERED_FOR: Duration = Duration::from_secs(1);
/// Most keys remembered; past it the expired ones are swept, and if that is not enough the
/// memory starts again (each key then costs one more engine call).
const MOST_KEYS: usize = 100_000;

#[derive(Default)]
pub(super) struct AdmittedKeys {
    /// `room_id` + NUL + key → until when the pass is reused.
    until: Mutex<HashMap<String, Instant>>,
}

fn slot(room_id: &str, key: &str) -> String {
    let mut slot = String::with_capacity(room_id.len() + 1 + key.len());
    slot.push_str(room_id);
    slot.push('\0');
    slot.push_str(key);
    slot
}

impl AdmittedKeys {
    /// Whether the engine let `key` through in `room_id` within the last [`REMEMBERED_FOR`].
    pub(super) fn admits(&self, room_id: &str, key: &str) -> bool {
        let until = self.until.lock().unwrap_or_else(PoisonError::into_inner);
        until
            .get(&slot(room_id, key))
            .is_some_and(|until| Instant::now() < *until)
    }

    /// The engine let `key` through; its session ends at `session_ends_at_ms` at the latest.
    pub(super) fn remember(&self, room_id: &str, key: &str, session_ends_at_ms: i64) {
        let left_ms = u64::try_from(session_ends_at_ms.saturating_sub(now_ms())).unwrap_or(0);
        let reuse = REMEMBERED_FOR.min(Duration::from_millis(left_ms));
        if reuse.is_zero() {
            return;
        }
        let now = Instant::now();
        let mut until = self.until.lock().unwrap_or_else(PoisonError::into_inner);
        if until.len() >= MOST_KEYS {
            until.retain(|_, until| now < *until);
            if until.len() >= MOST_KEYS {
                until.clear();
            }
        }
        until.insert(slot(room_id, key), now + reuse);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_reused_within_its_room_only_and_never_past_its_session() {
        let keys = AdmittedKeys::default();
        keys.remember("shop", "key-1", now_ms() + 60_000);
        assert!(keys.admits("shop", "key-1"));
        assert!(!keys.admits("other", "key-1"));
        assert!(!keys.admits("shop", "key-2"));
        keys.remember("shop", "ending", now_ms() - 1);
        assert!(!keys.admits("shop", "ending"), "a session already over");
    }

    #[test]
    fn a_remembered_pass_lapses_after_a_second() {
        let keys = AdmittedKeys::default();
        keys.remember("shop", "key", now_ms() + 60_000);
        std::thread::sleep(REMEMBERED_FOR + Duration::from_millis(50));
        assert!(!keys.admits("shop", "key"));
    }
}
