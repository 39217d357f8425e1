//! Wall-clock time in epoch milliseconds, the unit of every instant on the wire.

use std::time::{SystemTime, UNIX_EPOCH};

/// Current time as epoch milliseconds.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_millis() as i64)
        .unwrap_or(0)
}
