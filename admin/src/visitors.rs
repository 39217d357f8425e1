//! The support lookup, GET /api/admin/rooms/:id/visitors?ticket= or ?ref=: where one visitor's
//! place stands (state, position, the pass's expiry, presence, generation) and whether it is
//! bound to a browser, shown only as a one-way digest — never the raw session hash, an address
//! or a token. `ref` is the code the waiting page shows the visitor, read the way they meant it
//! (case, dashes, spaces, O/I/L for 0/1), so what they read down the phone is what goes in the
//! box; a code two places share answers the candidates rather than guessing.
//!
//! Grants: any console credential may read it (the spec's viewer and above). The monitor token,
//! which is refused visitors, does not exist yet; when it does, it must be turned away here.

use axum::Json;
use axum::extract::Query;
use axum::extract::rejection::QueryRejection;
use qm_core::{ApiError, ErrorCode};
use qm_proto::LookupVisitorsRequest;
use qm_proto::engine::lookup_visitors_request::Query as Lookup;
use serde_json::Value;

use crate::extract::RoomTarget;
use qm_http::AppError;

fn query_error(message: &str) -> AppError {
    ApiError::new(ErrorCode::InvalidVisitorQuery, message.to_owned()).into()
}

/// Exactly one of `ticket` and `ref`, each once, checked and normalised.
fn parse_query(pairs: &[(String, String)]) -> Result<Lookup, AppError> {
    let tickets: Vec<&str> = pairs
        .iter()
        .filter(|(name, _)| name == "ticket")
        .map(|(_, value)| value.as_str())
        .collect();
    let refs: Vec<&str> = pairs
        .iter()
        .filter(|(name, _)| name == "ref")
        .map(|(_, value)| value.as_str())
        .collect();
    match (tickets.as_slice(), refs.as_slice()) {
        ([ticket], []) => ticket
            .trim()
            .parse::<u64>()
            .map(Lookup::Ticket)
            .map_err(|_| {
                ApiError::new(
                    ErrorCode::InvalidTicket,
                    "ticket must be a ticket number (a whole number from 0)",
                )
                .into()
            }),
        ([], [code]) => qm_core::support_ref::normalize(code)
            .map(Lookup::SupportRef)
            .ok_or_else(|| {
                ApiError::new(
                    ErrorCode::InvalidRef,
                    "a reference is six characters of 0-9 and A-Z (no I, L, O or U), like K7F-3QX",
                )
                .into()
            }),
        ([], []) => Err(query_error(
            "name the visitor: ?ticket=<number> or ?ref=<the code their page shows>",
        )),
        _ => Err(query_error(
            "give exactly one ticket or one ref, not both and not twice",
        )),
    }
}

/// GET /api/admin/rooms/:id/visitors.
pub(crate) async fn lookup(
    mut room: RoomTarget,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Result<Json<Value>, AppError> {
    let Query(pairs) = query.map_err(|_| query_error("the query string cannot be read"))?;
    let lookup = parse_query(&pairs)?;
    let request = LookupVisitorsRequest {
        room_id: room.id,
        query: Some(lookup),
    };
    let reply = room.engine.lookup_visitors(request).await?.into_inner();
    let answer = serde_json::from_str(&reply.answer_json).map_err(|error| {
        AppError::from(ApiError::internal(format!(
            "engine sent an unreadable lookup: {error}"
        )))
    })?;
    Ok(Json(answer))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(query: &[(&str, &str)]) -> Vec<(String, String)> {
        query
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect()
    }

    fn code(query: &[(&str, &str)]) -> Option<ErrorCode> {
        parse_query(&pairs(query))
            .err()
            .map(|AppError(error)| error.code)
    }

    #[test]
    fn exactly_one_well_formed_name_is_accepted() {
        assert!(matches!(
            parse_query(&pairs(&[("ticket", "42")])),
            Ok(Lookup::Ticket(42))
        ));
        assert!(matches!(
            parse_query(&pairs(&[("ref", "k7f3qx")])),
            Ok(Lookup::SupportRef(code)) if code == "K7F-3QX"
        ));
        assert_eq!(code(&[("ticket", "-1")]), Some(ErrorCode::InvalidTicket));
        assert_eq!(code(&[("ticket", "4x")]), Some(ErrorCode::InvalidTicket));
        assert_eq!(code(&[("ref", "K7F-3QU")]), Some(ErrorCode::InvalidRef));
        assert_eq!(code(&[]), Some(ErrorCode::InvalidVisitorQuery));
        assert_eq!(
            code(&[("ticket", "1"), ("ref", "K7F-3QX")]),
            Some(ErrorCode::InvalidVisitorQuery)
        );
        assert_eq!(
            code(&[("ticket", "1"), ("ticket", "2")]),
            Some(ErrorCode::InvalidVisitorQuery)
        );
    }
}
