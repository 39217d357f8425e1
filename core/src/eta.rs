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
}
