//! The operator console's room controls in a real browser, the ones the main console tests
//! leave alone: flush, eject (a refused ticket first), the schedule dialog (the server's refusal
//! at its field, a drop saved, then cancelled) and the confirmed delete, each checked both on
//! the page (`#console-status`, the row) and against the admin API.

use std::time::{SystemTime, UNIX_EPOCH};

use qm_tests::browser::{Browser, run};
use qm_tests::{room_body, spawn_app};
use serde_json::{Value, json};

use crate::console::{
    assert_no_console_errors_but, click, sign_in, type_into, wait_open, wait_text,
};

const HOUR_MS: u64 = 3_600_000;

/// `[aria-invalid, whether it holds the focus, its value]` of the control at `selector`.
async fn control_state(browser: &Browser, selector: &str) -> Value {
    browser
        .js(
            "var i = document.querySelector(arguments[0]);\
             return [i.getAttribute('aria-invalid'), document.activeElement === i, i.value];",
            vec![json!(selector)],
        )
        .await
        .expect("read the control")
}

fn now_ms() -> u64 {
    let elapsed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is past 1970");
    u64::try_from(elapsed.as_millis()).expect("milliseconds fit in u64")
}

#[tokio::test]
async fn the_console_flushes_ejects_schedules_and_deletes_a_room() {
    run(180, async {
        let app = spawn_app().await;
        app.create_room(room_body("ctl", 0, json!({}))).await;
        app.create_room(room_body("spare", 0, json!({}))).await;
        for _ in 0..4 {
            app.join_as_new_visitor("ctl").await;
        }
        let browser = Browser::open().await;
        sign_in(&browser, &app).await;
        let row = "#rooms [data-room-id=\"ctl\"]";
        wait_text(&browser, &format!("{row} .room-depth"), "4 waiting", |text| {
            text == "4"
        })
        .await;

        // Flush lets the first in line through.
        type_into(&browser, &format!("{row} input[name=count]"), "1").await;
        click(&browser, &format!("{row} button[data-action=flush]")).await;
        wait_text(&browser, "#console-status", "the flush result", |text| {
            text == "Let 1 person into ctl now."
        })
        .await;
        wait_text(&browser, &format!("{row} .room-depth"), "3 waiting", |text| {
            text == "3"
        })
        .await;
        assert_eq!(app.room("ctl").await["waiting"], json!(3));

        // A ticket never issued is refused: the box is marked and keeps the focus.
        let ticket_box = format!("{row} input[name=ticket]");
        type_into(&browser, &ticket_box, "999").await;
        click(&browser, &format!("{row} button[data-action=eject]")).await;
        wait_text(&browser, "#console-status", "the eject refusal", |text| {
            text.starts_with("Nothing was ejected from ctl: ") && text.ends_with("(ticket_not_found)")
        })
        .await;
        assert_eq!(
            control_state(&browser, &ticket_box).await,
            json!(["true", true, "999"])
        );
        // The last in line is ejected; the box is cleared and no longer marked.
        type_into(&browser, &ticket_box, "4").await;
        click(&browser, &format!("{row} button[data-action=eject]")).await;
        wait_text(&browser, "#console-status", "the eject result", |text| {
            text.starts_with("Ticket 4 in ctl is ejected (it was waiting)")
        })
        .await;
        let ejected = control_state(&browser, &ticket_box).await;
        assert_eq!((&ejected[0], &ejected[2]), (&Value::Null, &json!("")));
        assert_eq!(app.room("ctl").await["waiting"], json!(2));

        // The schedule dialog: the server's refusal of the cap at its field, then a drop an
        // hour ahead with a cap of 2, shown on the row.
        let spare = "#rooms [data-room-id=\"spare\"]";
        click(&browser, &format!("{spare} button[data-action=schedule]")).await;
        wait_open(&browser, "#schedule-dialog", true).await;
        let typed = browser
            .js(
                "var d = new Date(Date.now() + 3600000); var p = (n) => String(n).padStart(2, '0');\
                 var i = document.querySelector('#schedule-opens-at');\
                 i.value = d.getFullYear() + '-' + p(d.getMonth() + 1) + '-' + p(d.getDate()) + 'T'\
                   + p(d.getHours()) + ':' + p(d.getMinutes()) + ':' + p(d.getSeconds());\
                 return i.value;",
                vec![],
            )
            .await
            .expect("type the opening time");
        assert_ne!(typed, json!(""), "the browser took the local time");
        type_into(&browser, "#schedule-cap", "100001").await;
        click(&browser, "#schedule-form button[type=submit]").await;
        wait_text(
            &browser,
            "#schedule-form [data-error-for=\"schedule.preQueueMaxPerIp\"]",
            "the cap's error at its field",
            |text| text.starts_with("preQueueMaxPerIp"),
        )
        .await;
        assert_eq!(
            control_state(&browser, "#schedule-cap").await,
            json!(["true", true, "100001"])
        );
        assert_eq!(app.room("spare").await["opensAt"], Value::Null);
        type_into(&browser, "#schedule-cap", "2").await;
        click(&browser, "#schedule-form button[type=submit]").await;
        wait_open(&browser, "#schedule-dialog", false).await;
        wait_text(&browser, "#console-status", "the scheduled sentence", |text| {
            text.starts_with("The doors of spare open ")
        })
        .await;
        let room = app.room("spare").await;
        let opens_at = room["opensAt"].as_u64().expect("opensAt is set");
        // Typed a moment ago, to the second, in this device's time zone.
        let now = now_ms();
        assert!(
            opens_at > now + HOUR_MS - 120_000 && opens_at <= now + HOUR_MS,
            "about an hour ahead of {now}: {opens_at}"
        );
        assert_eq!(room["preQueueMaxPerIp"], json!(2));
        wait_text(&browser, &format!("{spare} .room-schedule"), "the drop on the row", |text| {
            text.starts_with("Doors open ") && text.ends_with("up to 2 per address")
        })
        .await;
        // Opened again it reads the drop back; "Cancel the drop" sends an explicit null.
        click(&browser, &format!("{spare} button[data-action=schedule]")).await;
        wait_open(&browser, "#schedule-dialog", true).await;
        assert_eq!(control_state(&browser, "#schedule-cap").await[2], json!("2"));
        click(&browser, "#schedule-clear").await;
        wait_open(&browser, "#schedule-dialog", false).await;
        wait_text(&browser, "#console-status", "the cancelled drop", |text| {
            text == "Room spare has no scheduled drop; it admits while active."
        })
        .await;
        assert_eq!(app.room("spare").await["opensAt"], Value::Null);

        // Delete asks first; cancelling keeps the room, confirming removes it and its row, and
        // the focus goes to the room selected next.
        click(&browser, &format!("{row} button[data-action=delete]")).await;
        wait_open(&browser, "#confirm", true).await;
        click(&browser, "#confirm button[value=cancel]").await;
        wait_text(&browser, "#console-status", "the kept room", |text| {
            text == "Room ctl kept; nothing changed."
        })
        .await;
        click(&browser, &format!("{row} button[data-action=delete]")).await;
        wait_open(&browser, "#confirm", true).await;
        click(&browser, "#confirm button[value=confirm]").await;
        wait_text(&browser, "#console-status", "the deleted room", |text| {
            text == "Room ctl deleted."
        })
        .await;
        let after = browser
            .js(
                "return [document.querySelector(arguments[0]) === null,\
                 document.activeElement.closest('[data-room-id]').dataset.roomId];",
                vec![json!(row)],
            )
            .await
            .expect("read the rows");
        assert_eq!(after, json!([true, "spare"]));
        assert_eq!(
            app.admin_call(reqwest::Method::GET, "/rooms/ctl", None)
                .await
                .status,
            404
        );
        assert_no_console_errors_but(
            &browser,
            &[
                "/api/admin/rooms/ctl/eject - Failed to load resource: the server responded with a status of 404",
                "/api/admin/rooms/spare/schedule - Failed to load resource: the server responded with a status of 400",
            ],
        )
        .await;
    })
    .await;
}
