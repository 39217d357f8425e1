//! The support lookup over a store (the `LookupVisitors` RPC): a ticket is read straight from
//! the room; a reference code is resolved by comparing codes (`domain::visitors`): one short
//! read copies the room's places, the codes are computed on a blocking thread with no lock
//! held, and a second read describes the matches. A generation change between the reads (the
//! room was deleted and re-created) leaves the old generation's matches unanswered.

use std::sync::Arc;

use qm_core::{ApiError, ErrorCode};
use serde_json::{Value, json};

use crate::domain::{LookupKeys, RefScan, matching_places, ticket_not_found};
use crate::store::Store;
use qm_core::token::VisitorPlace;

/// Most candidates an ambiguous answer lists (30-bit codes: more than two is already freak luck).
const MAX_CANDIDATES: usize = 20;

/// The lookup of one ticket: `{visitor: {...}}`.
pub(crate) async fn by_ticket(
    store: &dyn Store,
    keys: &LookupKeys,
    room_id: String,
    ticket: u64,
) -> Result<Value, ApiError> {
    let mut found = None;
    store
        .read_room(
            room_id,
            Box::new(|room, now| {
                found = room.visitor_json(VisitorPlace::Ticket(ticket), keys, now);
            }),
        )
        .await?;
    let visitor = found.ok_or_else(|| ticket_not_found(ticket))?;
    Ok(json!({ "visitor": visitor }))
}

/// The lookup of a normalised reference code: `{visitor}` for one match, `{ambiguous: true,
/// candidates}` for several, `visitor_not_found` for none.
pub(crate) async fn by_ref(
    store: &dyn Store,
    keys: Arc<LookupKeys>,
    room_id: String,
    code: String,
) -> Result<Value, ApiError> {
    let mut scan: Option<RefScan> = None;
    store
        .read_room(
            room_id.clone(),
            Box::new(|room, _| scan = Some(room.ref_scan())),
        )
        .await?;
    let scan = scan.ok_or_else(|| ApiError::internal("the room read answered nothing"))?;
    let generation = scan.generation;
    let matches = {
        let keys = keys.clone();
        let code = code.clone();
        tokio::task::spawn_blocking(move || {
            matching_places(&scan, |place| {
                keys.shows(&scan.room_id, scan.generation, place, &code)
            })
        })
        .await
        .map_err(|error| ApiError::internal(format!("the code scan failed: {error}")))?
    };
    let mut visitors = Vec::new();
    store
        .read_room(
            room_id,
            Box::new(|room, now| {
                if room.generation() != generation {
                    return;
                }
                visitors = matches
                    .iter()
                    .take(MAX_CANDIDATES)
                    .filter_map(|place| room.visitor_json(*place, &keys, now))
                    .collect();
            }),
        )
        .await?;
    answer_for(visitors, &code)
}

/// One visitor, the candidates, or `visitor_not_found`.
pub(crate) fn answer_for(mut visitors: Vec<Value>, code: &str) -> Result<Value, ApiError> {
    match visitors.len() {
        0 => Err(ApiError::new(
            ErrorCode::VisitorNotFound,
            format!("no place in this room shows the reference {code}"),
        )),
        1 => Ok(json!({ "visitor": visitors.remove(0) })),
        _ => {
            let candidates: Vec<Value> = visitors
                .iter()
                .map(|visitor| {
                    json!({
                        "ticket": visitor["ticket"],
                        "state": visitor["state"],
                    })
                })
                .collect();
            Ok(json!({ "ambiguous": true, "ref": code, "candidates": candidates }))
        }
    }
}
