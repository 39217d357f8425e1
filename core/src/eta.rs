//! The wait a room can back, in seconds. One rule for the visitor's `etaSec` and the operator's
//! `estWaitSec`: `None` (unbounded) when the room admits nobody, otherwise the time for the
//! room's outflow to reach the given position.

/// Seconds until the visitor at 1-based `position` is admitted at `rate_per_minute`, or `None`
/// when the room admits nobody (paused, or rate 0).
pub fn wait_for_position(position: u64, rate_per_minute: u32, admitting: bool) -> Option<u64> {
    if !admitting || rate_per_minute == 0 {
        return None;
    }
    // Ceiling of position / (rate / 60): a slice per second admits rate/60 visitors.
    Some((position * 60).div_ceil(u64::from(rate_per_minute)))
}

/// Seconds until the visitor at `position` is admitted in a room whose doors open at
/// `opens_at_ms`: the time left on the clock plus the drain of the line ahead (position 0: the
/// clock alone). `None` when the room will admit nobody once open. The visitor's `etaSec` and
/// the operator's `estWaitSec` both quote this sum.
pub fn wait_after_opening(
    opens_at_ms: i64,
    now_ms: i64,
    position: u64,
    rate_per_minute: u32,
    admitting: bool,
) -> Option<u64> {
    let until_open_sec = ((opens_at_ms - now_ms).max(0) as u64).div_ceil(1000);
    let drain = match position {
        0 if admitting => 0,
        _ => wait_for_position(position, rate_per_minute, admitting)?,
    };
    Some(until_open_sec + drain)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits() {
        assert_eq!(wait_for_position(1, 60, true), Some(1));
        assert_eq!(wait_for_position(10, 600, true), Some(1));
        assert_eq!(wait_for_position(11, 600, true), Some(2));
        assert_eq!(wait_for_position(0, 600, true), Some(0));
        assert_eq!(wait_for_position(5, 0, true), None);
        assert_eq!(wait_for_position(5, 60, false), None);
    }

    #[test]
    fn waits_after_opening_add_the_clock_to_the_drain() {
        assert_eq!(wait_after_opening(10_000, 0, 0, 60, true), Some(10));
        assert_eq!(wait_after_opening(10_001, 0, 5, 60, true), Some(16));
        assert_eq!(wait_after_opening(0, 5_000, 5, 60, true), Some(5));
        assert_eq!(wait_after_opening(10_000, 0, 5, 0, true), None);
        assert_eq!(wait_after_opening(10_000, 0, 0, 60, false), None);
    }
}
