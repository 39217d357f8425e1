//! The operator console `/` in a real browser, through the hooks of the DOM contract
//! (`form#signin`, `data-console`, `#rooms [data-room-id]` with `.room-depth` and its controls,
//! `#chart` with `data-points`/`data-room-id`/`data-updated`, `form#room-form` with
//! `[data-error-for]`, `dialog#confirm`, `#shortcuts`, `#console-status`): signing in, creating
//! a room through the form (a field error first), changing its rate and watching the row and
//! the chart move as visitors join through the gateway, the confirmed purge, the keyboard
//! shortcuts, a session revoked mid-use and signing out. Every test reads the browser console; the main one runs axe-core
//! and saves screenshots at both sizes.
//!
//! The only console errors a test accepts are the network lines of refusals it provoked on
//! purpose (a 400 for the bad field, a 401 for the wrong key): chromium logs every non-2xx
//! fetch, and those refusals are the behaviour under test.

use std::time::Duration;

use fantoccini::Locator;
use fantoccini::key::Key;
use qm_tests::browser::{self, Browser, PHONE, wait_for};
use qm_tests::{TEST_ADMIN_KEY, TestApp, room_body, spawn_app};
use serde_json::{Value, json};

/// How long the page may take to show what the server already knows (a stream tick is 2 s).
const SHOWN: Duration = Duration::from_secs(15);
/// Long enough for the engine to take a few 10 s samples of a room.
const LINE_BUILDS: Duration = Duration::from_secs(45);

fn console_url(app: &TestApp) -> String {
    format!("{}/", app.admin)
}

/// The harness's input helpers, failing the test with their own message.
pub(super) async fn click(browser: &Browser, selector: &str) {
    browser
        .click(selector)
        .await
        .unwrap_or_else(|error| panic!("{error}"));
}

pub(super) async fn type_into(browser: &Browser, selector: &str, text: &str) {
    browser
        .fill(selector, text)
        .await
        .unwrap_or_else(|error| panic!("{error}"));
}

/// Presses a key with the focus wherever it is (the shortcuts listen on the document).
async fn press(browser: &Browser, key: &str) {
    browser
        .press(key)
        .await
        .unwrap_or_else(|error| panic!("{error}"));
}

pub(super) async fn wait_console(browser: &Browser, expected: &str) {
    wait_for(&format!("data-console=\"{expected}\""), SHOWN, || async {
        match browser.html_attr("data-console").await? {
            Some(state) if state == expected => Ok(()),
            other => Err(format!("data-console is {other:?}")),
        }
    })
    .await;
}

/// Waits until the trimmed text of `selector` satisfies `accept`; returns it.
pub(super) async fn wait_text(
    browser: &Browser,
    selector: &str,
    what: &str,
    accept: impl Fn(&str) -> bool,
) -> String {
    wait_for(what, SHOWN, || async {
        let text = browser.text(selector).await?;
        if accept(&text) {
            Ok(text)
        } else {
            Err(format!("{selector} reads {text:?}"))
        }
    })
    .await
}

pub(super) async fn wait_open(browser: &Browser, dialog: &str, open: bool) {
    wait_for(&format!("{dialog} open={open}"), SHOWN, || async {
        let value = browser
            .js(
                "var d = document.querySelector(arguments[0]); return d ? d.open : null;",
                vec![json!(dialog)],
            )
            .await?;
        if value == json!(open) {
            Ok(())
        } else {
            Err(format!("open is {value}"))
        }
    })
    .await;
}

pub(super) async fn sign_in(browser: &Browser, app: &TestApp) {
    browser.goto(&console_url(app)).await;
    wait_console(browser, "signed-out").await;
    type_into(browser, "#signin-key", TEST_ADMIN_KEY).await;
    click(browser, "#signin button[type=submit]").await;
    wait_console(browser, "ready").await;
}

/// The chart's `data-*` hooks.
async fn chart(browser: &Browser) -> Result<Value, String> {
    browser
        .js(
            "var c = document.querySelector('#chart');\
             return { room: c.getAttribute('data-room-id'), points: Number(c.getAttribute('data-points')),\
                      updated: Number(c.getAttribute('data-updated')), desc: c.querySelector('desc').textContent };",
            vec![],
        )
        .await
}

/// Fails on any console error except the network lines of the refusals listed in `provoked`
/// (each a fragment of the message, e.g. `/api/admin/rooms - Failed to load resource: the
/// server responded with a status of 400`).
pub(super) async fn assert_no_console_errors_but(browser: &Browser, provoked: &[&str]) {
    let unexpected: Vec<String> = browser
        .console_errors()
        .await
        .into_iter()
        .filter(|entry| {
            !(entry.source == "network"
                && provoked
                    .iter()
                    .any(|fragment| entry.message.contains(fragment)))
        })
        .map(|entry| format!("  {} {}: {}", entry.level, entry.source, entry.message))
        .collect();
    assert!(
        unexpected.is_empty(),
        "the browser console logged errors:\n{}",
        unexpected.join("\n")
    );
}

#[tokio::test]
async fn the_console_creates_a_room_changes_its_rate_and_the_row_and_chart_follow_the_line() {
    browser::run(240, async {
        let app = spawn_app().await;
        let browser = Browser::open().await;
        sign_in(&browser, &app).await;
        wait_text(&browser, "#connection", "the stream to be live", |text| {
            text == "Live"
        })
        .await;

        // The form first shows the server's refusal at the field.
        click(&browser, "#new-room").await;
        wait_open(&browser, "#room-dialog", true).await;
        type_into(&browser, "#room-form [name=id]", "gala").await;
        type_into(&browser, "#room-form [name=name]", "Gala night").await;
        type_into(
            &browser,
            "#room-form [name=targetUrl]",
            "ftp://tickets.example.com/",
        )
        .await;
        type_into(&browser, "#room-form [name=ratePerMinute]", "0").await;
        // An advanced field: the presence rule off (an empty box is null), so the visitors
        // below, who never poll, hold real passes however long the test takes.
        click(&browser, "#room-form details summary").await;
        browser
            .client
            .find(Locator::Css("#room-form [name=presenceSec]"))
            .await
            .expect("the presence field")
            .clear()
            .await
            .expect("clear the presence field");
        click(&browser, "#room-form-submit").await;
        let error = wait_text(
            &browser,
            "#room-form [data-error-for=targetUrl]",
            "the targetUrl error at its field",
            |text| !text.is_empty(),
        )
        .await;
        assert_eq!(error, "targetUrl: must use http or https", "the server's words");
        let marked = browser
            .js(
                "var i = document.querySelector('#room-form [name=targetUrl]');\
                 return [i.getAttribute('aria-invalid'), document.activeElement === i];",
                vec![],
            )
            .await
            .expect("read the field");
        assert_eq!(marked, json!(["true", true]), "marked invalid and focused");
        assert_eq!(
            app.admin_call(reqwest::Method::GET, "/rooms/gala", None)
                .await
                .status,
            404,
            "nothing was created"
        );

        type_into(
            &browser,
            "#room-form [name=targetUrl]",
            "https://tickets.example.com/",
        )
        .await;
        click(&browser, "#room-form-submit").await;
        wait_open(&browser, "#room-dialog", false).await;
        wait_text(
            &browser,
            "#console-status",
            "the created sentence",
            |text| text.contains("gala created"),
        )
        .await;
        let room = app.room("gala").await;
        assert_eq!(
            (room["name"].clone(), room["ratePerMinute"].clone()),
            (json!("Gala night"), json!(0))
        );
        // The whole writable set went through, the defaults untouched.
        assert_eq!(room["passedTtlSec"], json!(600));
        assert_eq!(room["queueMaxPerIp"], json!(16));
        assert_eq!(room["presenceSec"], Value::Null);

        // Visitors join through the gateway; at rate 0 they stay in line.
        let row = "#rooms [data-room-id=\"gala\"]";
        for _ in 0..5 {
            app.join_as_new_visitor("gala").await;
        }
        wait_text(
            &browser,
            &format!("{row} .room-depth"),
            "the row to show 5 waiting",
            |text| text == "5",
        )
        .await;
        // A few of the engine's 10 s samples, so the chart shows the line standing before it
        // drains (and the screenshots show a chart, not a dot).
        let before = wait_for("the chart to draw 5 waiting over 4 samples", LINE_BUILDS, || async {
            let chart = chart(&browser).await?;
            let desc = chart["desc"].as_str().unwrap_or("");
            if chart["room"] == json!("gala")
                && chart["points"].as_u64().unwrap_or(0) >= 4
                && desc.contains(": 5 waiting")
            {
                Ok(chart)
            } else {
                Err(chart.to_string())
            }
        })
        .await;
        let sparkline_points = browser
            .js(
                &format!(
                    "return document.querySelector('{row} svg.sparkline polyline') !== null;"
                ),
                vec![],
            )
            .await
            .expect("read the sparkline");
        assert_eq!(sparkline_points, json!(true), "the sparkline draws the stream's measurements");

        // The rate applies at once and the line drains: row and chart follow.
        type_into(&browser, &format!("{row} input[name=ratePerMinute]"), "600").await;
        click(&browser, &format!("{row} button[data-action=rate]")).await;
        wait_text(
            &browser,
            &format!("{row} .room-rate"),
            "the row to show rate 600",
            |text| text == "600",
        )
        .await;
        assert_eq!(app.room("gala").await["ratePerMinute"], json!(600));
        wait_text(
            &browser,
            &format!("{row} .room-depth"),
            "the row to show the line drained",
            |text| text == "0",
        )
        .await;
        wait_text(
            &browser,
            &format!("{row} .room-passed"),
            "the row to count the passes",
            |text| text == "5",
        )
        .await;
        wait_for("the chart to move to 0 waiting", SHOWN, || async {
            let chart = chart(&browser).await?;
            let desc = chart["desc"].as_str().unwrap_or("");
            if desc.contains(": 0 waiting") && chart["updated"].as_f64() > before["updated"].as_f64()
            {
                Ok(())
            } else {
                Err(chart.to_string())
            }
        })
        .await;

        browser.screenshot("console-1280x800").await;
        browser.assert_accessible("the console at 1280x800").await;
        browser.resize(PHONE).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        browser.screenshot("console-375x812").await;
        browser.assert_accessible("the console at 375x812").await;
        assert_no_console_errors_but(
            &browser,
            &["/api/admin/rooms - Failed to load resource: the server responded with a status of 400"],
        )
        .await;
    })
    .await;
}

#[tokio::test]
async fn the_console_refuses_a_wrong_key_purges_with_a_confirm_and_answers_the_keyboard() {
    browser::run(180, async {
        let app = spawn_app().await;
        let autotune = json!({
            "enabled": false, "minRate": 5, "healthUrl": "http://127.0.0.1:9/health", "coolDownSec": 45
        });
        app.create_room(room_body("keys", 0, json!({ "autotune": autotune })))
            .await;
        app.create_room(room_body("other", 0, json!({}))).await;
        for _ in 0..3 {
            app.join_as_new_visitor("keys").await;
        }
        let browser = Browser::open().await;
        browser.goto(&console_url(&app)).await;
        wait_console(&browser, "signed-out").await;
        browser.screenshot("console-signed-out-1280x800").await;
        type_into(&browser, "#signin-key", "not-the-key").await;
        click(&browser, "#signin button[type=submit]").await;
        wait_text(&browser, "#signin-error", "the refusal", |text| {
            text.contains("not the admin key")
        })
        .await;
        assert_eq!(
            browser.html_attr("data-console").await,
            Ok(Some("signed-out".to_owned()))
        );
        type_into(&browser, "#signin-key", TEST_ADMIN_KEY).await;
        click(&browser, "#signin button[type=submit]").await;
        wait_console(&browser, "ready").await;
        let row = "#rooms [data-room-id=\"keys\"]";
        wait_text(&browser, &format!("{row} .room-depth"), "3 waiting", |text| {
            text == "3"
        })
        .await;

        // `?` lists the shortcuts, Esc closes the list.
        click(&browser, "#rooms-heading").await;
        press(&browser, "?").await;
        wait_open(&browser, "#shortcuts", true).await;
        assert!(browser.visible("#shortcuts").await.unwrap_or(false));
        press(&browser, &char::from(Key::Escape).to_string()).await;
        wait_open(&browser, "#shortcuts", false).await;
        // j/k move the selection the chart follows.
        press(&browser, "j").await;
        press(&browser, "j").await;
        wait_for("the chart to follow the selection to `other`", SHOWN, || async {
            let chart = chart(&browser).await?;
            if chart["room"] == json!("other") {
                Ok(())
            } else {
                Err(chart.to_string())
            }
        })
        .await;
        press(&browser, "k").await;
        wait_for("the chart to come back to `keys`", SHOWN, || async {
            let chart = chart(&browser).await?;
            if chart["room"] == json!("keys") {
                Ok(())
            } else {
                Err(chart.to_string())
            }
        })
        .await;
        // `n` opens the empty form, Esc closes it.
        press(&browser, "n").await;
        wait_open(&browser, "#room-dialog", true).await;
        press(&browser, &char::from(Key::Escape).to_string()).await;
        wait_open(&browser, "#room-dialog", false).await;
        // `e` opens the selected room's form filled from the server, `4` the hour range, `r`
        // the selected room's rate box.
        press(&browser, "e").await;
        wait_open(&browser, "#room-dialog", true).await;
        let id = browser
            .js(
                "return document.querySelector('#room-form [name=id]').value;",
                vec![],
            )
            .await
            .expect("read the form");
        assert_eq!(id, json!("keys"), "the form edits the selected room");
        let tuning = browser
            .js(
                "var f = document.querySelector('#room-form');\
                 return [f.elements['autotune.healthUrl'].value, f.elements['autotune.coolDownSec'].value];",
                vec![],
            )
            .await
            .expect("read the autotune fields");
        assert_eq!(tuning, json!(["http://127.0.0.1:9/health", "45"]));
        // Saved unchanged, the room keeps every autotune setting the form shows.
        click(&browser, "#room-form-submit").await;
        wait_open(&browser, "#room-dialog", false).await;
        wait_for("the saved room", SHOWN, || async {
            let room = app.room("keys").await;
            if room["autotune"] == autotune {
                Ok(())
            } else {
                Err(room["autotune"].to_string())
            }
        })
        .await;
        press(&browser, "4").await;
        wait_for("the chart to switch to the hour range", SHOWN, || async {
            let pressed = browser
                .js(
                    "return document.querySelector('.ranges button[data-range=\"1h\"]').getAttribute('aria-pressed');",
                    vec![],
                )
                .await?;
            if pressed == json!("true") {
                Ok(())
            } else {
                Err(format!("aria-pressed {pressed}"))
            }
        })
        .await;
        press(&browser, "r").await;
        let focused = browser
            .js(
                "var e = document.activeElement; return [e.name, e.closest('[data-room-id]').dataset.roomId];",
                vec![],
            )
            .await
            .expect("read the focus");
        assert_eq!(focused, json!(["ratePerMinute", "keys"]));
        press(&browser, &char::from(Key::Escape).to_string()).await;

        // Purge asks first; cancelling changes nothing, confirming empties the line.
        click(&browser, &format!("{row} button[data-action=purge]")).await;
        wait_open(&browser, "#confirm", true).await;
        click(&browser, "#confirm button[value=cancel]").await;
        wait_open(&browser, "#confirm", false).await;
        assert_eq!(app.room("keys").await["waiting"], json!(3));
        click(&browser, &format!("{row} button[data-action=purge]")).await;
        wait_open(&browser, "#confirm", true).await;
        click(&browser, "#confirm button[value=confirm]").await;
        wait_text(&browser, "#console-status", "the purge result", |text| {
            text.contains("Purged 3 tickets")
        })
        .await;
        wait_text(&browser, &format!("{row} .room-depth"), "0 waiting", |text| {
            text == "0"
        })
        .await;
        assert_eq!(app.room("keys").await["waiting"], json!(0));

        // The state control applies at once.
        let state = browser
            .client
            .find(Locator::Css(&format!("{row} select[name=state]")))
            .await
            .expect("the state control");
        state
            .select_by_value("paused")
            .await
            .expect("choose paused");
        wait_text(&browser, &format!("{row} .room-state"), "paused", |text| {
            text == "paused"
        })
        .await;
        assert_eq!(app.room("keys").await["state"], json!("paused"));

        // The session revoked behind the page's back: the next call (this flush, or the chart's
        // own refresh if it comes first and the row is already gone) lands on the sign-in form
        // with a sentence saying why.
        browser
            .js(
                "fetch('/api/admin/session', { method: 'DELETE', headers: { 'X-QM-CSRF': '1' } });",
                vec![],
            )
            .await
            .expect("revoke the session");
        tokio::time::sleep(Duration::from_millis(300)).await;
        browser
            .js(
                "var b = document.querySelector(arguments[0]); if (b) { b.click(); }",
                vec![json!(format!("{row} button[data-action=flush]"))],
            )
            .await
            .expect("press flush if the row is still there");
        wait_console(&browser, "signed-out").await;
        wait_text(&browser, "#signin-notice", "the session-ended sentence", |text| {
            text.contains("session ended")
        })
        .await;

        sign_in(&browser, &app).await;
        click(&browser, "#signout").await;
        wait_console(&browser, "signed-out").await;
        wait_text(&browser, "#signin-notice", "the signed-out sentence", |text| {
            text == "You are signed out."
        })
        .await;
        // Reloaded, the page stays signed out.
        browser.reload().await;
        wait_console(&browser, "signed-out").await;
        assert_no_console_errors_but(
            &browser,
            &[
                "/api/admin/session - Failed to load resource: the server responded with a status of 401",
                "/api/admin/rooms/keys/flush - Failed to load resource: the server responded with a status of 401",
                "/api/admin/metrics?roomId=keys&range=1h - Failed to load resource: the server responded with a status of 401",
                "/api/admin/sse-ticket - Failed to load resource: the server responded with a status of 401",
            ],
        )
        .await;
    })
    .await;
}

#[tokio::test]
async fn the_reference_on_a_waiting_page_typed_into_the_console_finds_that_visitor() {
    browser::run(120, async {
        let app = spawn_app().await;
        app.create_room(room_body("phone", 0, json!({}))).await;
        for _ in 0..2 {
            app.join_as_new_visitor("phone").await;
        }
        let browser = Browser::open().await;
        // The visitor: a waiting page, third in line, reading out its code.
        browser.goto(&format!("{}/w/phone", app.gateway)).await;
        let reference = wait_text(&browser, "#qm-ref", "the waiting page's code", |text| {
            text.len() == 7 && text.as_bytes()[3] == b'-'
        })
        .await;
        wait_text(&browser, "#qm-position", "position 3", |text| text == "3").await;

        // Support: the code as heard (lower case, no dash) goes in the console's box.
        sign_in(&browser, &app).await;
        let typed = reference.replace('-', " ").to_lowercase();
        type_into(&browser, "#visitor-query", &typed).await;
        click(&browser, "#visitor-lookup button[type=submit]").await;
        let result = wait_text(&browser, "#visitor-result", "the visitor's place", |text| {
            text.contains("Ticket 3")
        })
        .await;
        assert!(result.contains("waiting at position 3"), "{result}");
        assert!(result.contains(&reference), "{result}");
        assert!(result.contains("Held by a browser"), "{result}");
        browser
            .screenshot("console-find-a-visitor-found-1280x800")
            .await;

        // A code nobody holds is a sentence, not a stack trace.
        type_into(&browser, "#visitor-query", "ZZZ-ZZZ").await;
        click(&browser, "#visitor-lookup button[type=submit]").await;
        if reference != "ZZZ-ZZZ" {
            wait_text(&browser, "#visitor-result", "not found", |text| {
                text.contains("No place in phone shows the code ZZZ-ZZZ")
            })
            .await;
        }
        browser.screenshot("console-find-a-visitor-1280x800").await;
        assert_no_console_errors_but(&browser, &["status of 404"]).await;
    })
    .await;
}

#[tokio::test]
async fn a_connector_that_ran_its_install_check_shows_in_the_rooms_detail() {
    browser::run(120, async {
        let app = spawn_app().await;
        app.create_room(room_body("wired", 0, json!({}))).await;
        let browser = Browser::open().await;
        sign_in(&browser, &app).await;
        click(&browser, "#rooms [data-room-id=\"wired\"] .room-select").await;
        wait_text(&browser, "#check-ins-empty", "the empty list's sentence", |text| {
            text.contains("No connector has run an install check")
        })
        .await;

        let verify = app
            .get(&format!(
                "{}/api/verify?roomId=wired&connector=node&version=1.2.0&origin=https%3A%2F%2Fshop.example",
                app.gateway
            ))
            .await;
        assert_eq!(verify.status, 200, "{}", verify.text);
        click(&browser, "#check-ins-refresh").await;
        let rows = wait_text(&browser, "#check-ins-rows", "the connector's row", |text| {
            text.contains("node")
        })
        .await;
        assert!(rows.contains("1.2.0"), "{rows}");
        assert!(rows.contains("https://shop.example"), "{rows}");
        browser.screenshot("console-connectors-1280x800").await;
        assert_no_console_errors_but(&browser, &[]).await;
    })
    .await;
}

#[tokio::test]
async fn the_bot_protection_panel_shows_what_monitor_would_have_refused() {
    browser::run(120, async {
        let app = spawn_app().await;
        app.create_room(room_body(
            "watched",
            0,
            json!({ "protection": { "mode": "monitor" } }),
        ))
        .await;
        let script = app
            .send(
                app.http
                    .post(format!("{}/api/join", app.gateway))
                    .header("user-agent", "python-requests/2.32")
                    .json(&json!({ "roomId": "watched" })),
            )
            .await;
        assert_eq!(script.status, 200, "monitor admits: {}", script.text);
        let browser = Browser::open().await;
        sign_in(&browser, &app).await;
        click(&browser, "#rooms [data-room-id=\"watched\"] .room-select").await;
        wait_text(
            &browser,
            "#security-refusals",
            "the would-refuse count",
            |text| text.contains("1 would have been refused under enforce"),
        )
        .await;
        let mode = wait_text(&browser, "#security-mode", "the mode", |text| {
            !text.is_empty()
        })
        .await;
        assert!(mode.starts_with("Monitor"), "{mode}");
        let reasons = wait_text(&browser, "#security-reasons", "the reasons", |text| {
            text.contains("an HTTP library, headless browser or crawler: 1")
        })
        .await;
        assert!(reasons.contains("no Accept-Language: 1"), "{reasons}");
        let rows = wait_text(&browser, "#security-rows", "the example", |text| {
            text.contains("would be refused")
        })
        .await;
        assert!(
            !rows.contains("127.0.0.1"),
            "the address is shown as a digest: {rows}"
        );
        browser
            .js(
                "document.querySelector('#security-heading').scrollIntoView({block: 'start'})",
                vec![],
            )
            .await
            .expect("scroll to the panel");
        browser.screenshot("console-bot-protection-1280x800").await;
        browser
            .assert_accessible("the console's bot-protection panel")
            .await;
        assert_no_console_errors_but(&browser, &[]).await;
    })
    .await;
}
