//! The door's one question to the engine: may this visitor in, given what they present (a
//! token, a door-session key, the ownership cookie, the page they are on)? `/api/check` asks it
//! for a snippet or a connector; the inline gate asks it for every request on an inline host.
//! The engine decides; this module only verifies what can be verified at the edge and draws the
//! key a newly opened door session is bound to.

use qm_core::ids::{new_session_id, session_hash};
use qm_proto::{CheckReply, CheckRequest};

use crate::GatewayState;
use qm_http::AppError;

/// What a visitor presents at the door.
#[derive(Debug)]
pub(crate) struct DoorQuestion<'a> {
    pub(crate) room_id: &'a str,
    /// Tokens in order of preference (the query's, then the cookie's); the first that verifies
    /// for this room is the claim.
    pub(crate) tokens: Vec<&'a str>,
    /// A well-formed door-session key, if one was presented.
    pub(crate) door_key: Option<&'a str>,
    /// SHA-256 of the ownership cookie, "" without one.
    pub(crate) ownership_hash: String,
    /// The client the check is for (the vouched address when vouched).
    pub(crate) identity: String,
    /// The page being visited (`url=`, else the Referer; inline, the request's own URL).
    pub(crate) url: Option<String>,
    /// Answer the room's full rule list (`?targeting=1`).
    pub(crate) want_rules: bool,
}

/// The engine's answer, with the key of a door session this check opened.
#[derive(Debug)]
pub(crate) struct DoorAnswer {
    pub(crate) reply: CheckReply,
    /// The door-session key to hand out (`sess`), only when the check opened or reclaimed one.
    pub(crate) new_key: Option<String>,
}

/// Asks the engine whether the visitor may in.
pub(crate) async fn ask(
    state: &GatewayState,
    question: DoorQuestion<'_>,
) -> Result<DoorAnswer, AppError> {
    let token_check = state.token_check();
    let presented = question
        .tokens
        .iter()
        .find_map(|token| token_check.verify(token, Some(question.room_id)));
    // A fresh key is drawn only when a session could open: a verified claim to spend.
    let new_key = presented.as_ref().map(|_| new_session_id());
    let request = CheckRequest {
        room_id: question.room_id.to_owned(),
        claim: presented.as_ref().map(|place| place.engine_claim()),
        session_hash: question.ownership_hash,
        identity: question.identity,
        door_key_hash: question.door_key.map(session_hash).unwrap_or_default(),
        new_door_key_hash: new_key.as_deref().map(session_hash).unwrap_or_default(),
        url: question.url.unwrap_or_default(),
        want_rules: question.want_rules,
    };
    let reply = state.visitor_calls.check(request).await?;
    if !reply.room_found {
        state.metrics.failed_open();
    }
    let new_key = new_key.filter(|_| reply.session_opened);
    Ok(DoorAnswer { reply, new_key })
}
