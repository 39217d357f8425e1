//! The arithmetic of a line: tickets `head..next_ticket` minus `holes` (the ejected tickets above
//! the head, ascending) are waiting, in ticket order. The engine's room and the gateway's view of
//! it (a room's `Watch` frame) both answer positions by these two functions, so a visitor's
//! position reads the same wherever it is computed.

/// 1-based position of `ticket` among the waiting tickets, or `None` if it is not waiting.
pub fn position_of(head: u64, next_ticket: u64, holes: &[u64], ticket: u64) -> Option<u64> {
    if ticket < head || ticket >= next_ticket {
        return None;
    }
    let holes_ahead = holes.partition_point(|hole| *hole < ticket);
    if holes.get(holes_ahead) == Some(&ticket) {
        return None;
    }
    Some(ticket - head - holes_ahead as u64 + 1)
}

/// How many tickets are waiting.
pub fn waiting(head: u64, next_ticket: u64, holes: &[u64]) -> u64 {
    next_ticket.saturating_sub(head) - holes.len() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_skip_the_holes_ahead() {
        let holes = [5, 7];
        assert_eq!(position_of(3, 10, &holes, 3), Some(1));
        assert_eq!(position_of(3, 10, &holes, 6), Some(3));
        assert_eq!(position_of(3, 10, &holes, 8), Some(4));
        assert_eq!(position_of(3, 10, &holes, 5), None, "a hole is not waiting");
        assert_eq!(position_of(3, 10, &holes, 2), None, "below the head");
        assert_eq!(position_of(3, 10, &holes, 10), None, "never minted");
        assert_eq!(waiting(3, 10, &holes), 5);
    }
}
