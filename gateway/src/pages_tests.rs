//! Tests of the waiting page's rendering: the place view, the page config, themes and return URLs.

use super::*;

fn info() -> RoomInfoReply {
    RoomInfoReply {
        found: true,
        room_id: "drop".into(),
        name: "The drop".into(),
        return_origins: vec!["https://shop.example".into()],
        branding_json: r#"{"title":"Big drop"}"#.into(),
        effective_state: "active".into(),
        ..Default::default()
    }
}

#[test]
fn return_urls_keep_only_allowed_origins() {
    let origins = vec![
        "https://shop.example".to_owned(),
        "https://other.example:8443/".to_owned(),
    ];
    assert!(return_url_allowed(
        "https://shop.example/cart?x=1",
        &origins
    ));
    assert!(return_url_allowed("https://other.example:8443/", &origins));
    assert!(
        !return_url_allowed("https://other.example/", &origins),
        "the port is part of the origin"
    );
    assert!(!return_url_allowed("https://evil.example/", &origins));
    assert!(!return_url_allowed("javascript:alert(1)", &origins));
    assert!(!return_url_allowed("/relative", &origins));
}

#[test]
fn the_page_config_carries_the_room_and_strips_a_refused_return() {
    let config = page_config("drop", &info(), Some("https://shop.example/cart"), 7);
    assert_eq!(config["roomId"], "drop");
    assert_eq!(config["name"], "The drop");
    assert_eq!(config["branding"]["title"], "Big drop");
    assert_eq!(config["returnUrl"], "https://shop.example/cart");
    let refused = page_config("drop", &info(), Some("https://evil.example/"), 7);
    assert!(refused.get("returnUrl").is_none());
    let unknown = page_config("nope", &RoomInfoReply::default(), None, 7);
    assert_eq!(unknown, json!({ "roomId": "nope", "found": false }));
}

#[test]
fn now_travels_beside_every_server_instant_of_the_config() {
    let plain = page_config("drop", &info(), None, 7);
    assert!(plain.get("now").is_none(), "no instant, no now");
    let message = RoomInfoReply {
        branding_json: r#"{"message":"Doors at six","messageAt":1700000000000}"#.into(),
        ..info()
    };
    let config = page_config("drop", &message, None, 7);
    assert_eq!(config["branding"]["messageAt"], 1_700_000_000_000_i64);
    assert_eq!(config["now"], 7);
    let scheduled = RoomInfoReply {
        opens_at_ms: Some(99),
        ..info()
    };
    let config = page_config("drop", &scheduled, None, 7);
    assert_eq!(
        (config["opensAt"].clone(), config["now"].clone()),
        (json!(99), json!(7))
    );
}

#[test]
fn the_engines_word_maps_to_expired_or_reset() {
    assert_eq!(lapsed_of("expired"), Some(Lapsed::Expired));
    for reason in ["ejected", "purged", "room_reset"] {
        assert_eq!(lapsed_of(reason), Some(Lapsed::Reset), "{reason}");
    }
    assert_eq!(lapsed_of("something_new"), None);
}

#[test]
fn the_lapse_reaches_the_config_only_when_the_engine_said_so() {
    let lapsed = |place: &PlaceRead| {
        render_page("drop", Some(&info()), place, None, Locale::En, None, false)
    };
    assert!(lapsed(&PlaceRead::Lapsed(Some(Lapsed::Expired))).contains(r#""lapsed":"expired""#));
    assert!(lapsed(&PlaceRead::Lapsed(Some(Lapsed::Reset))).contains(r#""lapsed":"reset""#));
    for nothing_lost in [
        PlaceRead::NoToken,
        PlaceRead::Unknown,
        PlaceRead::Lapsed(None),
    ] {
        assert!(
            !lapsed(&nothing_lost).contains(r#""lapsed""#),
            "{nothing_lost:?}"
        );
    }
    let gone = render_page(
        "drop",
        Some(&RoomInfoReply::default()),
        &PlaceRead::NoToken,
        None,
        Locale::En,
        None,
        false,
    );
    assert!(gone.contains(r#""found":false"#));
    assert!(gone.contains("This waiting room does not exist"));
    assert!(
        !gone.contains(r#"<form class="join-form""#),
        "no place to take in a room that is not there"
    );
}

fn waiting(bound: bool, passed: bool) -> PlaceRead {
    PlaceRead::Place(
        Box::new(PlaceStatus {
            place: Some(place_status::Place::Ticket(4)),
            position: (!passed).then_some(2),
            ahead: (!passed).then_some(1),
            eta_sec: Some(30),
            state: "active".into(),
            passed,
            bound,
            redirect_url: "https://shop.example/checkout".into(),
            ..Default::default()
        }),
        None,
    )
}

#[test]
fn only_an_owned_place_is_shown_as_the_visitors() {
    assert!(matches!(
        place_view(&waiting(true, false), None, None, 0),
        PlaceView::Waiting {
            position: Some(2),
            ..
        }
    ));
    assert_eq!(
        place_view(&waiting(false, false), None, None, 0),
        PlaceView::Join { lapsed: None }
    );
    assert_eq!(
        place_view(
            &waiting(true, true),
            Some("https://shop.example/cart"),
            None,
            0
        ),
        PlaceView::Passed {
            target_url: "https://shop.example/cart".into()
        }
    );
    assert_eq!(
        place_view(&waiting(true, true), None, None, 0),
        PlaceView::Passed {
            target_url: "https://shop.example/checkout".into()
        }
    );
    assert_eq!(
        place_view(&waiting(false, true), None, None, 0),
        PlaceView::Join { lapsed: None }
    );
}

#[test]
fn only_well_formed_colours_reach_the_theme() {
    let branding = RoomInfoReply {
        branding_json: r##"{"accentColor":"#0a7","textColor":"red;}body{x","primaryColor":"#123456","backgroundColor":7}"##.into(),
        ..info()
    };
    let config = page_config("drop", &branding, None, 7);
    assert_eq!(
        config["theme"],
        json!({ "accent": "#0a7", "primary": "#123456" })
    );
    assert!(page_config("drop", &info(), None, 7).get("theme").is_none());
}

#[test]
fn the_config_says_whether_the_notify_form_is_offered() {
    for enabled in [true, false] {
        let page = render_page(
            "drop",
            Some(&info()),
            &PlaceRead::NoToken,
            None,
            Locale::Th,
            None,
            enabled,
        );
        assert!(
            page.contains(&format!(r#""notify":{enabled}"#)),
            "{enabled}"
        );
        assert!(page.contains(r#""locale":"th""#));
    }
}

#[test]
fn the_page_path_keeps_the_return_encoded() {
    assert_eq!(page_path("drop", None), "/w/drop");
    assert_eq!(
        page_path("drop", Some("https://shop.example/a?b=1&c=2")),
        "/w/drop?qm_return=https%3A%2F%2Fshop.example%2Fa%3Fb%3D1%26c%3D2"
    );
}

#[test]
fn the_way_through_hands_the_pass_back_in_the_return_url() {
    assert_eq!(
        place_view(
            &waiting(true, true),
            Some("https://shop.example/cart?b=1&qm_token=old#top"),
            Some("tok.sig"),
            0
        ),
        PlaceView::Passed {
            target_url: "https://shop.example/cart?b=1&qm_token=tok.sig#top".into()
        }
    );
    assert_eq!(
        place_view(&waiting(true, true), None, Some("tok.sig"), 0),
        PlaceView::Passed {
            target_url: "https://shop.example/checkout?qm_token=tok.sig".into()
        }
    );
    assert_eq!(
        place_view(&waiting(false, false), None, Some("tok.sig"), 0),
        PlaceView::Join { lapsed: None },
        "no pass for a place that is not through"
    );
}

#[test]
fn the_server_rendered_way_through_carries_the_pass() {
    let place = waiting(true, true);
    let page = render_page_in(
        &PageFrame::default(),
        PageParts {
            room_id: "drop",
            info: Some(&info()),
            place: &place,
            return_url: Some("https://shop.example/cart"),
            pass_token: Some("tok.sig"),
            locale: Locale::En,
            notice: None,
            notify_enabled: false,
        },
    );
    assert!(
        page.contains("content=\"0;url=https://shop.example/cart?qm_token=tok.sig\""),
        "the refresh carries the pass"
    );
    assert!(
        page.contains("href=\"https://shop.example/cart?qm_token=tok.sig\""),
        "the link carries the pass"
    );
}
