//! The bodies of the two live controls that name a number: `POST /api/admin/rooms/:id/flush
//! {count}` and `POST /api/admin/rooms/:id/eject {ticket}`. The admin process reads them with
//! these functions; the engine checks a count that arrives already typed with
//! [`check_flush_count`], so the two can never disagree on the bound.
//!
//! Unlike the rate and schedule bodies, these ignore keys they do not read, as these routes
//! always have: refusing them now would break callers that work today.

use serde_json::Value;

use super::body_object;
use crate::{ApiError, ErrorCode};

/// Most tickets one flush may promote.
pub const MAX_FLUSH: u64 = 1_000_000;

/// Reads the body of `POST /api/admin/rooms/:id/flush`: `count`, a whole number from 1 to
/// [`MAX_FLUSH`]; missing, not a whole number, or out of range is 400 `invalid_count`.
pub fn parse_flush_body(body: &Value) -> Result<u64, ApiError> {
    let count = body_object(body)?
        .get("count")
        .and_then(Value::as_u64)
        .ok_or_else(flush_count_refusal)?;
    check_flush_count(count)?;
    Ok(count)
}

/// Refuses a flush count outside `1..=MAX_FLUSH`.
pub fn check_flush_count(count: u64) -> Result<(), ApiError> {
    if (1..=MAX_FLUSH).contains(&count) {
        Ok(())
    } else {
        Err(flush_count_refusal())
    }
}

fn flush_count_refusal() -> ApiError {
    ApiError::new(
        ErrorCode::InvalidCount,
        format!("count must be a whole number from 1 to {MAX_FLUSH}"),
    )
}

/// Reads the body of `POST /api/admin/rooms/:id/eject`: `ticket`, a ticket number (a whole
/// number from 1); anything else is 400 `invalid_ticket`. Whether the ticket is waiting or
/// holds a pass is the engine's to say.
pub fn parse_eject_body(body: &Value) -> Result<u64, ApiError> {
    match body_object(body)?.get("ticket").and_then(Value::as_u64) {
        Some(ticket) if ticket >= 1 => Ok(ticket),
        _ => Err(ApiError::new(
            ErrorCode::InvalidTicket,
            "ticket must be a ticket number (a whole number from 1)",
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn code<T>(answer: Result<T, ApiError>) -> Option<ErrorCode> {
        answer.err().map(|error| error.code)
    }

    #[test]
    fn a_flush_count_is_a_whole_number_from_one_to_the_bound() {
        assert_eq!(parse_flush_body(&json!({"count": 1})).ok(), Some(1));
        assert_eq!(
            parse_flush_body(&json!({"count": MAX_FLUSH})).ok(),
            Some(MAX_FLUSH)
        );
        // Keys the flush does not read are ignored.
        assert_eq!(
            parse_flush_body(&json!({"count": 2, "ticket": 9})).ok(),
            Some(2)
        );
        for bad in [
            json!({}),
            json!({"count": 0}),
            json!({"count": MAX_FLUSH + 1}),
            json!({"count": -1}),
            json!({"count": 2.5}),
            json!({"count": "2"}),
            json!({"count": null}),
        ] {
            assert_eq!(
                code(parse_flush_body(&bad)),
                Some(ErrorCode::InvalidCount),
                "{bad}"
            );
        }
        let refusal = parse_flush_body(&json!({}))
            .err()
            .map(|error| error.message);
        assert_eq!(
            refusal.as_deref(),
            Some("count must be a whole number from 1 to 1000000")
        );
        assert_eq!(
            code(parse_flush_body(&json!([1]))),
            Some(ErrorCode::InvalidJson)
        );
    }

    #[test]
    fn the_typed_count_check_agrees_with_the_body_parser() {
        assert!(check_flush_count(1).is_ok());
        assert!(check_flush_count(MAX_FLUSH).is_ok());
        for bad in [0, MAX_FLUSH + 1, u64::MAX] {
            assert_eq!(code(check_flush_count(bad)), Some(ErrorCode::InvalidCount));
        }
    }

    #[test]
    fn an_eject_names_a_ticket_from_one() {
        assert_eq!(parse_eject_body(&json!({"ticket": 1})).ok(), Some(1));
        assert_eq!(
            parse_eject_body(&json!({"ticket": 42, "count": 0})).ok(),
            Some(42)
        );
        for bad in [
            json!({}),
            json!({"ticket": 0}),
            json!({"ticket": -3}),
            json!({"ticket": 1.5}),
            json!({"ticket": "7"}),
        ] {
            assert_eq!(
                code(parse_eject_body(&bad)),
                Some(ErrorCode::InvalidTicket),
                "{bad}"
            );
        }
        assert_eq!(
            code(parse_eject_body(&json!("ticket"))),
            Some(ErrorCode::InvalidJson)
        );
    }
}
