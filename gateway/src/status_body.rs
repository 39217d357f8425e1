//! The visitor's status JSON, `{position, ahead, etaSec, state, passed, redirectUrl?, ...}`, built
//! in one place whether it comes from an engine answer or is computed at the edge from a room's
//! latest view, so the two can be compared frame to frame. `now` is added last, only to bodies
//! that carry a server instant (opensAt, messageAt), and is not part of the comparison.

use qm_core::clock::now_ms;
use qm_core::eta::{wait_after_opening, wait_for_position};
use qm_core::token::VisitorPlace;
use qm_proto::{PlaceStatus, RoomView, place_status};
use serde_json::{Map, Value, json};

/// The parts of a room's branding the status wire repeats.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Branding {
    pub(crate) message: Option<String>,
    pub(crate) message_at: Option<i64>,
}

impl Branding {
    /// Reads `{message?, messageAt?}` from the room's branding JSON; anything unreadable is none.
    pub(crate) fn parse(branding_json: &str) -> Branding {
        if branding_json.is_empty() || branding_json == "{}" {
            return Branding::default();
        }
        let Ok(Value::Object(branding)) = serde_json::from_str::<Value>(branding_json) else {
            return Branding::default();
        };
        let message = branding
            .get("message")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|message| !message.is_empty())
            .map(str::to_owned);
        let message_at = message
            .as_ref()
            .and(branding.get("messageAt").and_then(Value::as_i64));
        Branding {
            message,
            message_at,
        }
    }
}

/// A scheduled drop, as a status body shows it.
struct Scheduled {
    pre_queued: bool,
    pre_count: u64,
    opens_at_ms: Option<i64>,
}

struct StatusParts<'a> {
    position: Option<u64>,
    ahead: Option<u64>,
    eta_sec: Option<u64>,
    state: &'a str,
    passed: bool,
    redirect_url: Option<&'a str>,
    scheduled: Option<Scheduled>,
    branding: &'a Branding,
}

impl StatusParts<'_> {
    fn into_fields(self) -> Map<String, Value> {
        let mut fields = Map::new();
        fields.insert("position".into(), json!(self.position));
        fields.insert("ahead".into(), json!(self.ahead));
        fields.insert("etaSec".into(), json!(self.eta_sec));
        fields.insert("state".into(), json!(self.state));
        fields.insert("passed".into(), json!(self.passed));
        if let Some(redirect_url) = self.redirect_url {
            fields.insert("redirectUrl".into(), json!(redirect_url));
        }
        if let Some(scheduled) = self.scheduled {
            fields.insert("scheduled".into(), json!(true));
            fields.insert("preQueued".into(), json!(scheduled.pre_queued));
            fields.insert("preCount".into(), json!(scheduled.pre_count));
            if let Some(opens_at_ms) = scheduled.opens_at_ms {
                fields.insert("opensAt".into(), json!(opens_at_ms));
            }
        }
        if let Some(message) = &self.branding.message {
            fields.insert("message".into(), json!(message));
            if let Some(message_at) = self.branding.message_at {
                fields.insert("messageAt".into(), json!(message_at));
            }
        }
        fields
    }
}

/// The status body of an engine answer (without `now`).
pub(crate) fn place_fields(place: &PlaceStatus) -> Map<String, Value> {
    let branding = Branding::parse(&place.branding_json);
    let redirect_url =
        (place.passed && !place.redirect_url.is_empty()).then_some(place.redirect_url.as_str());
    // A handle is pre-queued until the draw, which can land a moment after opensAt.
    let pre_queued = matches!(place.place, Some(place_status::Place::Handle(_)));
    let scheduled = (place.state == "scheduled" || pre_queued).then_some(Scheduled {
        pre_queued,
        pre_count: place.pre_count,
        opens_at_ms: place.opens_at_ms,
    });
    StatusParts {
        position: place.position,
        ahead: place.ahead,
        eta_sec: place.eta_sec,
        state: &place.state,
        passed: place.passed,
        redirect_url,
        scheduled,
        branding: &branding,
    }
    .into_fields()
}

/// Adds `ref`, the support reference code of the place the body describes (spec, Admin:
/// visitors?ref=), keyed from SECRET so it neither reveals nor lets anyone guess the ticket.
pub(crate) fn with_support_ref(
    mut fields: Map<String, Value>,
    key: &[u8; 32],
    room_id: &str,
    generation: u64,
    place: VisitorPlace,
) -> Map<String, Value> {
    let code = qm_core::support_ref::support_ref_with_key(key, room_id, generation, place);
    fields.insert("ref".into(), json!(code));
    fields
}

/// The place an engine answer names, for its support reference code.
pub(crate) fn answered_place(place: &PlaceStatus) -> Option<VisitorPlace> {
    match place.place {
        Some(place_status::Place::Ticket(ticket)) => Some(VisitorPlace::Ticket(ticket)),
        Some(place_status::Place::Handle(handle)) => Some(VisitorPlace::Handle(handle)),
        None => None,
    }
}

/// An engine answer's body with its `ref` (without `now`).
pub(crate) fn place_fields_with_ref(
    place: &PlaceStatus,
    key: &[u8; 32],
    room_id: &str,
) -> Map<String, Value> {
    let fields = place_fields(place);
    match answered_place(place) {
        Some(visitor_place) => {
            with_support_ref(fields, key, room_id, place.generation, visitor_place)
        }
        None => fields,
    }
}

/// The body for a place that is no longer one.
pub(crate) fn lapsed_fields(reason: &str) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("expired".into(), json!(true));
    fields.insert("reason".into(), json!(reason));
    fields
}

/// The status body of a place still waiting, computed from the room's view alone; `None` when
/// the view cannot say (the place passed or lapsed, another generation, a bypass room): then
/// the engine is asked.
pub(crate) fn view_fields(
    view: &RoomView,
    branding: &Branding,
    generation: u64,
    place: VisitorPlace,
    now_ms: i64,
) -> Option<Map<String, Value>> {
    if !view.exists || view.generation != generation {
        return None;
    }
    let state = view.effective_state.as_str();
    // The room as configured admits once open unless an operator paused it.
    let admitting_once_open = view.state != "paused";
    let wait_after_opening = |position: u64| {
        let opens_at_ms = view.opens_at_ms?;
        wait_after_opening(
            opens_at_ms,
            now_ms,
            position,
            view.rate_per_minute,
            admitting_once_open,
        )
    };
    let (position, eta_sec, scheduled) = match (place, state) {
        (VisitorPlace::Ticket(ticket), "active" | "paused") => {
            let position = view.position_of(generation, ticket)?;
            (
                Some(position),
                wait_for_position(position, view.rate_per_minute, state == "active"),
                None,
            )
        }
        (VisitorPlace::Ticket(ticket), "scheduled") => {
            // A ticket held before the drop: the clock, then the drain ahead of it.
            let position = view.position_of(generation, ticket)?;
            let eta = wait_after_opening(position);
            (Some(position), eta, Some(scheduled_view(view, false)))
        }
        (VisitorPlace::Handle(_), "scheduled") => {
            // The draw decides where the entry lands: quote the floor, as estWaitSec does.
            let eta = wait_after_opening(view.waiting());
            (None, eta, Some(scheduled_view(view, true)))
        }
        _ => return None,
    };
    Some(
        StatusParts {
            position,
            ahead: position.map(|position| position - 1),
            eta_sec,
            state,
            passed: false,
            redirect_url: None,
            scheduled,
            branding,
        }
        .into_fields(),
    )
}

fn scheduled_view(view: &RoomView, pre_queued: bool) -> Scheduled {
    Scheduled {
        pre_queued,
        pre_count: view.pre_count,
        opens_at_ms: view.opens_at_ms,
    }
}

/// The body as sent: `fields` plus `now` when it carries a server instant.
pub(crate) fn with_now(mut fields: Map<String, Value>, now: i64) -> Map<String, Value> {
    if fields.contains_key("opensAt") || fields.contains_key("messageAt") {
        fields.insert("now".into(), json!(now));
    }
    fields
}

/// `with_now` at the gateway's clock.
pub(crate) fn with_now_here(fields: Map<String, Value>) -> Map<String, Value> {
    with_now(fields, now_ms())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting_view(state: &str, rate_per_minute: u32) -> RoomView {
        RoomView {
            room_id: "r".into(),
            exists: true,
            generation: 2,
            state: state.into(),
            effective_state: state.into(),
            rate_per_minute,
            head: 10,
            next_ticket: 20,
            holes: vec![12],
            ..Default::default()
        }
    }

    #[test]
    fn a_waiting_ticket_gets_position_ahead_and_eta_from_the_view() {
        let view = waiting_view("active", 60);
        let fields = view_fields(&view, &Branding::default(), 2, VisitorPlace::Ticket(13), 0)
            .expect("waiting");
        // Tickets 10, 11 and 13 wait (12 is a hole): 13 is third.
        assert_eq!(
            Value::Object(fields),
            json!({ "position": 3, "ahead": 2, "etaSec": 3, "state": "active", "passed": false })
        );
        let fast = waiting_view("active", 600);
        let fields = view_fields(&fast, &Branding::default(), 2, VisitorPlace::Ticket(13), 0)
            .expect("waiting");
        assert_eq!(fields["etaSec"], 1);
    }

    #[test]
    fn a_paused_or_stopped_room_quotes_no_wait() {
        for view in [waiting_view("paused", 60), waiting_view("active", 0)] {
            let fields = view_fields(&view, &Branding::default(), 2, VisitorPlace::Ticket(10), 0)
                .expect("waiting");
            assert_eq!(fields["position"], 1);
            assert_eq!(fields["etaSec"], Value::Null);
        }
    }

    #[test]
    fn the_view_defers_to_the_engine_when_it_cannot_say() {
        let view = waiting_view("active", 60);
        let branding = Branding::default();
        // Passed (below head), ejected (a hole), not yet issued, another generation.
        for (generation, ticket) in [(2, 9), (2, 12), (2, 20), (3, 13)] {
            assert!(
                view_fields(
                    &view,
                    &branding,
                    generation,
                    VisitorPlace::Ticket(ticket),
                    0
                )
                .is_none()
            );
        }
        assert!(
            view_fields(
                &waiting_view("bypass", 60),
                &branding,
                2,
                VisitorPlace::Ticket(13),
                0
            )
            .is_none()
        );
        let gone = RoomView {
            exists: false,
            ..waiting_view("active", 60)
        };
        assert!(view_fields(&gone, &branding, 2, VisitorPlace::Ticket(13), 0).is_none());
        // A pre-queue handle once the doors are open: the engine knows its drawn ticket.
        assert!(view_fields(&view, &branding, 2, VisitorPlace::Handle(4), 0).is_none());
    }

    #[test]
    fn a_pre_queue_entry_sees_the_clock_and_the_drop() {
        let view = RoomView {
            effective_state: "scheduled".into(),
            opens_at_ms: Some(100_500),
            pre_count: 7,
            head: 1,
            next_ticket: 1,
            holes: vec![],
            ..waiting_view("active", 60)
        };
        let fields = view_fields(
            &view,
            &Branding::default(),
            2,
            VisitorPlace::Handle(3),
            90_000,
        )
        .expect("pre-queued");
        assert_eq!(
            Value::Object(with_now(fields, 90_000)),
            json!({
                "position": null, "ahead": null, "etaSec": 11, "state": "scheduled", "passed": false,
                "scheduled": true, "preQueued": true, "preCount": 7, "opensAt": 100_500, "now": 90_000,
            })
        );
    }

    #[test]
    fn engine_answers_and_edge_answers_agree() {
        let view = waiting_view("active", 60);
        let engine = PlaceStatus {
            room_id: "r".into(),
            generation: 2,
            place: Some(place_status::Place::Ticket(13)),
            position: Some(3),
            ahead: Some(2),
            eta_sec: Some(3),
            state: "active".into(),
            branding_json: r#"{"message":"Hello","messageAt":5}"#.into(),
            ..Default::default()
        };
        let branding = Branding::parse(&engine.branding_json);
        assert_eq!(
            view_fields(&view, &branding, 2, VisitorPlace::Ticket(13), 0),
            Some(place_fields(&engine))
        );
    }

    #[test]
    fn passed_places_carry_their_redirect_and_lapsed_ones_their_reason() {
        let passed = PlaceStatus {
            passed: true,
            state: "active".into(),
            redirect_url: "https://shop.example/".into(),
            ..Default::default()
        };
        let fields = place_fields(&passed);
        assert_eq!(fields["passed"], true);
        assert_eq!(fields["redirectUrl"], "https://shop.example/");
        assert_eq!(
            Value::Object(lapsed_fields("room_reset")),
            json!({ "expired": true, "reason": "room_reset" })
        );
    }

    #[test]
    fn now_only_beside_a_server_instant() {
        let branding = Branding::parse(r#"{"message":"Back soon","messageAt":1700000000000}"#);
        assert_eq!(
            branding,
            Branding {
                message: Some("Back soon".into()),
                message_at: Some(1_700_000_000_000)
            }
        );
        let fields = view_fields(
            &waiting_view("paused", 0),
            &branding,
            2,
            VisitorPlace::Ticket(10),
            0,
        )
        .expect("waiting");
        let sent = with_now(fields, 42);
        assert_eq!(sent["message"], "Back soon");
        assert_eq!(sent["now"], 42);
        let plain = view_fields(
            &waiting_view("paused", 0),
            &Branding::default(),
            2,
            VisitorPlace::Ticket(10),
            0,
        )
        .unwrap();
        assert!(!with_now(plain, 42).contains_key("now"));
        assert_eq!(Branding::parse("not json"), Branding::default());
        assert_eq!(Branding::parse(r#"{"message":"  "}"#), Branding::default());
    }
}
