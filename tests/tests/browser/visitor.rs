//! The waiting page `/w/:roomId` in a real browser, through the hooks of the DOM contract
//! (`#qm-position`, `data-qm-state`, `data-qm-connection`, `#qm-connection`, `#qm-countdown`,
//! `#qm-ref`, `#qm-locale`, the ticket in `localStorage["qm_token_" + roomId]` and cookie
//! `qm_<roomId>`): joining, the line moving, the pass, a refresh, a second profile, a lost
//! network, a scheduled drop and the Thai locale. Every test also reads the browser console
//! (no errors) and the waiting-page tests run axe-core and save screenshots at both sizes.

use std::time::Duration;

use qm_tests::browser::{self, Browser, DESKTOP, Options, PHONE, TargetSite, wait_for};
use qm_tests::{SmtpSink, TestApp, room_body, spawn_app, spawn_app_with};
use serde_json::json;

/// How long the page may take to show what the server already knows.
const SHOWN: Duration = Duration::from_secs(15);

/// The number `#qm-position` shows, once it shows one (the contract: the figure only, formatted
/// by the locale, so group separators are dropped before parsing).
async fn position(browser: &Browser) -> Result<u64, String> {
    let text = browser.text("#qm-position").await?;
    let digits: String = text
        .chars()
        .filter(|c| !matches!(c, ',' | '.' | ' ' | '\u{a0}' | '\u{202f}'))
        .collect();
    digits
        .parse::<u64>()
        .map_err(|_| format!("#qm-position reads {text:?}"))
}

/// Waits until the page shows position `expected`.
async fn wait_position(browser: &Browser, expected: u64) {
    wait_for(
        &format!("#qm-position to read {expected}"),
        SHOWN,
        || async {
            match position(browser).await? {
                shown if shown == expected => Ok(()),
                shown => Err(format!("position {shown}")),
            }
        },
    )
    .await;
}

/// Waits until `<html data-qm-state>` is `expected`.
async fn wait_state(browser: &Browser, expected: &str) {
    wait_for(&format!("data-qm-state=\"{expected}\""), SHOWN, || async {
        match browser.html_attr("data-qm-state").await? {
            Some(state) if state == expected => Ok(()),
            other => Err(format!("data-qm-state is {other:?}")),
        }
    })
    .await;
}

/// Waits until `<html data-qm-connection>` is `expected`.
async fn wait_connection(browser: &Browser, expected: &str, limit: Duration) {
    wait_for(
        &format!("data-qm-connection=\"{expected}\""),
        limit,
        || async {
            match browser.html_attr("data-qm-connection").await? {
                Some(state) if state == expected => Ok(()),
                other => Err(format!("data-qm-connection is {other:?}")),
            }
        },
    )
    .await;
}

fn page_url(app: &TestApp, room_id: &str) -> String {
    format!("{}/w/{room_id}", app.gateway)
}

/// A room whose line does not move by itself (rate 0): the test moves it with flushes.
async fn still_room(app: &TestApp, room_id: &str, target_url: &str) {
    app.create_room(room_body(room_id, 0, json!({ "targetUrl": target_url })))
        .await;
}

async fn flush(app: &TestApp, room_id: &str, count: u32) {
    let reply = app
        .admin_post(
            &format!("/rooms/{room_id}/flush"),
            json!({ "count": count }),
        )
        .await;
    assert_eq!(reply.status, 200, "flush: {}", reply.text);
}

/// Whether the page's visible text holds Thai script.
async fn shows_thai(browser: &Browser) -> Result<bool, String> {
    let text = browser
        .js(
            "return document.body ? document.body.innerText : '';",
            vec![],
        )
        .await?;
    Ok(text
        .as_str()
        .unwrap_or("")
        .chars()
        .any(|c| ('\u{0e01}'..='\u{0e5b}').contains(&c)))
}

/// The page lays out within `width` CSS pixels: nothing makes the visitor scroll sideways.
async fn assert_fits_width(browser: &Browser, width: u32) {
    let scroll_width = browser
        .js("return document.documentElement.scrollWidth;", vec![])
        .await
        .expect("read the page width");
    assert!(
        scroll_width
            .as_u64()
            .is_some_and(|shown| shown <= u64::from(width)),
        "the page is {scroll_width} px wide in a {width} px viewport"
    );
}

#[tokio::test]
async fn a_visitor_sees_their_position_fall_and_is_sent_to_the_target_on_pass() {
    browser::run(120, async {
        let app = spawn_app().await;
        let target = TargetSite::start().await;
        still_room(&app, "fall", &target.url("/checkout")).await;
        // Someone is already in line, so the browser's visitor starts second.
        app.join_as_new_visitor("fall").await;

        let browser = Browser::open().await;
        browser.goto(&page_url(&app, "fall")).await;
        wait_position(&browser, 2).await;

        flush(&app, "fall", 1).await;
        wait_position(&browser, 1).await;
        let token = browser
            .local_storage("qm_token_fall")
            .await
            .expect("read the stored token")
            .expect("the page keeps its token");

        flush(&app, "fall", 1).await;
        let landed = wait_for("the page to go through to the target", SHOWN, || async {
            let url = browser.current_url().await?;
            if url.starts_with(&target.url("/checkout")) {
                Ok(url)
            } else {
                Err(format!("still at {url}"))
            }
        })
        .await;
        assert!(landed.starts_with("http://127.0.0.1:"), "{landed}");
        // The pass is handed back in the return URL, for a connector on the site to spend.
        assert_eq!(
            landed,
            format!("{}?qm_token={token}", target.url("/checkout")),
            "the way through carries the visitor's token as qm_token"
        );
        let spent = app
            .send(
                app.http
                    .get(format!("{}/api/v1/check", app.gateway))
                    .query(&[
                        ("roomId", "fall"),
                        ("token", token.as_str()),
                        ("url", landed.as_str()),
                    ]),
            )
            .await;
        assert_eq!(spent.body["action"], "pass", "{}", spent.text);
        assert!(
            spent.body["sess"].is_string(),
            "the pass opens a door session: {}",
            spent.text
        );
        browser.assert_no_console_errors().await;
    })
    .await;
}

#[tokio::test]
async fn a_refresh_keeps_the_same_ticket() {
    browser::run(90, async {
        let app = spawn_app().await;
        still_room(&app, "again", "https://shop.example/checkout").await;
        app.join_as_new_visitor("again").await;

        let browser = Browser::open().await;
        browser.goto(&page_url(&app, "again")).await;
        wait_position(&browser, 2).await;
        let cookie = browser
            .cookie("qm_again")
            .await
            .expect("read cookies")
            .expect("the page holds its ticket in cookie qm_again");

        browser.reload().await;
        wait_position(&browser, 2).await;
        let after = browser.cookie("qm_again").await.expect("read cookies");
        assert_eq!(
            after.as_deref(),
            Some(cookie.as_str()),
            "the ticket cookie changed"
        );
        // Still two in line: the reload did not take a second place.
        let (second, _) = app.join_as_new_visitor("again").await;
        assert_eq!(second.body["position"], 3, "{}", second.text);
        browser.assert_no_console_errors().await;
    })
    .await;
}

#[tokio::test]
async fn the_page_keeps_its_ticket_in_local_storage_across_a_refresh() {
    browser::run(90, async {
        let app = spawn_app().await;
        still_room(&app, "kept", "https://shop.example/checkout").await;

        let browser = Browser::open().await;
        browser.goto(&page_url(&app, "kept")).await;
        wait_position(&browser, 1).await;
        let token = wait_for("localStorage qm_token_kept", SHOWN, || async {
            browser
                .local_storage("qm_token_kept")
                .await?
                .ok_or_else(|| "no qm_token_kept in localStorage".to_owned())
        })
        .await;

        browser.reload().await;
        wait_position(&browser, 1).await;
        let after = browser
            .local_storage("qm_token_kept")
            .await
            .expect("read localStorage");
        assert_eq!(
            after.as_deref(),
            Some(token.as_str()),
            "the stored token changed"
        );
        browser.assert_no_console_errors().await;
    })
    .await;
}

#[tokio::test]
async fn a_second_profile_without_the_cookies_gets_a_new_place() {
    browser::run(120, async {
        let app = spawn_app().await;
        still_room(&app, "two", "https://shop.example/checkout").await;

        let first = Browser::open().await;
        first.goto(&page_url(&app, "two")).await;
        wait_position(&first, 1).await;

        let second = Browser::open().await;
        second.goto(&page_url(&app, "two")).await;
        wait_position(&second, 2).await;
        assert!(
            second
                .cookie("qm_two")
                .await
                .expect("read cookies")
                .is_some(),
            "the second profile holds a ticket of its own"
        );
        assert_ne!(
            first.cookie("qm_two").await.expect("read cookies"),
            second.cookie("qm_two").await.expect("read cookies"),
            "two profiles share one ticket"
        );
        // The first visitor is still first.
        first.reload().await;
        wait_position(&first, 1).await;
        first.assert_no_console_errors().await;
        second.assert_no_console_errors().await;
    })
    .await;
}

#[tokio::test]
async fn offline_shows_reconnecting_and_the_page_recovers() {
    browser::run(120, async {
        let app = spawn_app().await;
        still_room(&app, "net", "https://shop.example/checkout").await;
        app.join_as_new_visitor("net").await;

        let browser = Browser::open().await;
        browser.goto(&page_url(&app, "net")).await;
        wait_position(&browser, 2).await;
        wait_connection(&browser, "live", SHOWN).await;
        assert!(
            !browser.visible("#qm-connection").await.expect("query"),
            "#qm-connection shows while live"
        );

        browser.set_offline(true).await;
        wait_connection(&browser, "reconnecting", Duration::from_secs(30)).await;
        wait_for(
            "#qm-connection to say it is reconnecting",
            SHOWN,
            || async {
                let text = browser.text("#qm-connection").await?;
                if browser.visible("#qm-connection").await? && text.contains("Reconnecting") {
                    Ok(())
                } else {
                    Err(format!("#qm-connection {text:?}, visible or not"))
                }
            },
        )
        .await;
        browser.screenshot("waiting-reconnecting-1280x800").await;
        // The figures stay while the stream is down.
        assert_eq!(position(&browser).await, Ok(2));

        browser.set_offline(false).await;
        // The line moved meanwhile; the recovered page shows it.
        flush(&app, "net", 1).await;
        wait_connection(&browser, "live", Duration::from_secs(60)).await;
        wait_position(&browser, 1).await;
        assert!(
            !browser.visible("#qm-connection").await.expect("query"),
            "#qm-connection still shows once live again"
        );

        // Tolerated, by name: while offline the browser itself logs each request it could not
        // make (the stream's retries, the status polls) as a SEVERE network entry with
        // net::ERR_INTERNET_DISCONNECTED. That is the outage this test makes, not a page fault.
        let errors: Vec<_> = browser
            .console_errors()
            .await
            .into_iter()
            .filter(|entry| {
                !(entry.source == "network" && entry.message.contains("ERR_INTERNET_DISCONNECTED"))
            })
            .collect();
        assert!(errors.is_empty(), "console errors: {errors:#?}");
    })
    .await;
}

#[tokio::test]
async fn a_scheduled_room_counts_down_to_its_doors_opening() {
    browser::run(120, async {
        let app = spawn_app().await;
        let opens_at = qm_core::clock::now_ms() + 10 * 60 * 1000;
        app.create_room(room_body("drop", 60, json!({ "opensAt": opens_at })))
            .await;

        let browser = Browser::open().await;
        browser.goto(&page_url(&app, "drop")).await;
        wait_state(&browser, "scheduled").await;
        let first = wait_for("#qm-countdown to show", SHOWN, || async {
            let text = browser.text("#qm-countdown").await?;
            if browser.visible("#qm-countdown").await? && !text.is_empty() {
                Ok(text)
            } else {
                Err(format!("#qm-countdown {text:?}, visible or not"))
            }
        })
        .await;
        // Second to second: the text changes within a little more than a second.
        wait_for("#qm-countdown to tick", Duration::from_secs(3), || async {
            let text = browser.text("#qm-countdown").await?;
            if text != first {
                Ok(())
            } else {
                Err(format!("still {text:?}"))
            }
        })
        .await;
        assert!(
            browser.visible("#qm-opens-at").await.expect("query"),
            "#qm-opens-at shows the doors-open time"
        );

        browser.screenshot("waiting-scheduled-1280x800").await;
        browser
            .assert_accessible("the scheduled waiting page at 1280x800")
            .await;
        browser.resize(PHONE).await;
        browser.screenshot("waiting-scheduled-375x812").await;
        browser
            .assert_accessible("the scheduled waiting page at 375x812")
            .await;
        browser.assert_no_console_errors().await;
    })
    .await;
}

#[tokio::test]
async fn the_waiting_page_is_accessible_and_screenshotted_at_both_sizes() {
    browser::run(120, async {
        let app = spawn_app().await;
        still_room(&app, "look", "https://shop.example/checkout").await;
        for _ in 0..1233 {
            app.join_as_new_visitor("look").await;
        }

        let browser = Browser::open_with(Options {
            window: DESKTOP,
            lang: None,
            ..Options::default()
        })
        .await;
        browser.goto(&page_url(&app, "look")).await;
        wait_position(&browser, 1234).await;
        browser.screenshot("waiting-1280x800").await;
        browser
            .assert_accessible("the waiting page at 1280x800")
            .await;

        browser.resize(PHONE).await;
        browser.screenshot("waiting-375x812").await;
        browser
            .assert_accessible("the waiting page at 375x812")
            .await;
        assert_fits_width(&browser, PHONE.0).await;
        // The narrowest phone the page is made for.
        browser.resize((320, 640)).await;
        assert_fits_width(&browser, 320).await;
        browser.assert_no_console_errors().await;
    })
    .await;
}

#[tokio::test]
async fn the_page_states_its_state_connection_and_support_reference() {
    browser::run(90, async {
        let app = spawn_app().await;
        still_room(&app, "hooks", "https://shop.example/checkout").await;

        let browser = Browser::open().await;
        browser.goto(&page_url(&app, "hooks")).await;
        wait_position(&browser, 1).await;
        wait_state(&browser, "waiting").await;
        wait_connection(&browser, "live", SHOWN).await;
        let reference = wait_for("#qm-ref to show the support reference", SHOWN, || async {
            let text = browser.text("#qm-ref").await?;
            let well_formed =
                !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
            if browser.visible("#qm-ref").await? && well_formed {
                Ok(text)
            } else {
                Err(format!("#qm-ref {text:?}, visible or not"))
            }
        })
        .await;
        browser.reload().await;
        wait_position(&browser, 1).await;
        assert_eq!(
            browser.text("#qm-ref").await.as_deref(),
            Ok(reference.as_str()),
            "the reference changed on a reload"
        );
        browser.assert_no_console_errors().await;
    })
    .await;
}

#[tokio::test]
async fn a_thai_browser_gets_the_page_in_thai() {
    browser::run(90, async {
        let app = spawn_app().await;
        still_room(&app, "thai", "https://shop.example/checkout").await;
        for _ in 0..1233 {
            app.join_as_new_visitor("thai").await;
        }

        let browser = Browser::open_with(Options {
            window: DESKTOP,
            lang: Some("th".to_owned()),
            ..Options::default()
        })
        .await;
        browser.goto(&page_url(&app, "thai")).await;
        wait_position(&browser, 1234).await;
        assert_eq!(
            browser
                .html_attr("lang")
                .await
                .expect("read lang")
                .as_deref(),
            Some("th")
        );
        wait_for("Thai text on the page", SHOWN, || async {
            if shows_thai(&browser).await? {
                Ok(())
            } else {
                Err("no Thai script in the page's text".to_owned())
            }
        })
        .await;
        browser.screenshot("waiting-th-1280x800").await;
        browser
            .assert_accessible("the Thai waiting page at 1280x800")
            .await;
        browser.resize(PHONE).await;
        browser.screenshot("waiting-th-375x812").await;
        browser
            .assert_accessible("the Thai waiting page at 375x812")
            .await;
        assert_fits_width(&browser, PHONE.0).await;
        browser.assert_no_console_errors().await;
    })
    .await;
}

#[tokio::test]
async fn the_locale_switch_and_lang_query_choose_thai_and_it_is_remembered() {
    browser::run(90, async {
        let app = spawn_app().await;
        still_room(&app, "switch", "https://shop.example/checkout").await;

        // An English browser asks for Thai in the query.
        let browser = Browser::open().await;
        browser
            .goto(&format!("{}?lang=th", page_url(&app, "switch")))
            .await;
        wait_position(&browser, 1).await;
        assert_eq!(
            browser
                .html_attr("lang")
                .await
                .expect("read lang")
                .as_deref(),
            Some("th")
        );

        // A second English browser follows the switch; the choice outlives a plain reload.
        let other = Browser::open().await;
        other.goto(&page_url(&app, "switch")).await;
        wait_position(&other, 2).await;
        assert_eq!(
            other.html_attr("lang").await.expect("read lang").as_deref(),
            Some("en")
        );
        other
            .click("#qm-locale a[hreflang=\"th\"]")
            .await
            .expect("the locale switch has a Thai link");
        wait_for("the page to reload in Thai", SHOWN, || async {
            match other.html_attr("lang").await? {
                Some(lang) if lang == "th" => Ok(()),
                lang => Err(format!("lang {lang:?}")),
            }
        })
        .await;
        other.goto(&page_url(&app, "switch")).await;
        wait_position(&other, 2).await;
        assert_eq!(
            other.html_attr("lang").await.expect("read lang").as_deref(),
            Some("th"),
            "the chosen locale is not remembered"
        );
        assert!(
            other
                .cookie("qm_lang")
                .await
                .expect("read cookies")
                .is_some(),
            "no qm_lang cookie"
        );
        browser.assert_no_console_errors().await;
        other.assert_no_console_errors().await;
    })
    .await;
}

#[tokio::test]
async fn an_operator_message_and_a_pause_reach_an_open_page_live() {
    browser::run(90, async {
        let app = spawn_app().await;
        still_room(&app, "live", "https://shop.example/checkout").await;

        let browser = Browser::open().await;
        browser.goto(&page_url(&app, "live")).await;
        wait_position(&browser, 1).await;
        assert!(
            !browser.visible("#qm-message").await.expect("query"),
            "#qm-message shows with no message"
        );

        // The operator posts a message (rooms are written whole: the same body plus branding).
        app.create_room(room_body(
            "live",
            0,
            json!({
                "targetUrl": "https://shop.example/checkout",
                "branding": { "message": "Doors open at six" },
            }),
        ))
        .await;
        wait_for(
            "#qm-message to show the operator's message",
            SHOWN,
            || async {
                let text = browser.text("#qm-message-text").await?;
                if browser.visible("#qm-message").await? && text == "Doors open at six" {
                    Ok(())
                } else {
                    Err(format!("#qm-message-text {text:?}, visible or not"))
                }
            },
        )
        .await;

        let reply = app
            .admin_post("/rooms/live/state", json!({ "state": "paused" }))
            .await;
        assert_eq!(reply.status, 200, "pause: {}", reply.text);
        wait_state(&browser, "paused").await;
        // Paused, the visitor keeps the place.
        assert_eq!(position(&browser).await, Ok(1));
        let reply = app
            .admin_post("/rooms/live/state", json!({ "state": "active" }))
            .await;
        assert_eq!(reply.status, 200, "resume: {}", reply.text);
        wait_state(&browser, "waiting").await;
        browser.assert_no_console_errors().await;
    })
    .await;
}

#[tokio::test]
async fn an_ejected_visitor_is_told_and_gets_a_new_place() {
    browser::run(90, async {
        let app = spawn_app().await;
        still_room(&app, "out", "https://shop.example/checkout").await;
        app.join_as_new_visitor("out").await;

        let browser = Browser::open().await;
        browser.goto(&page_url(&app, "out")).await;
        wait_position(&browser, 2).await;
        let before = browser.cookie("qm_out").await.expect("read cookies");

        // Ticket 2 is the browser's: the room's second join.
        let reply = app
            .admin_post("/rooms/out/eject", json!({ "ticket": 2 }))
            .await;
        assert_eq!(reply.status, 200, "eject: {}", reply.text);
        wait_for(
            "#qm-lapsed to say the place was cancelled",
            SHOWN,
            || async {
                let text = browser.text("#qm-lapsed").await?;
                if browser.visible("#qm-lapsed").await? && text.contains("cancelled on our side") {
                    Ok(())
                } else {
                    Err(format!("#qm-lapsed {text:?}, visible or not"))
                }
            },
        )
        .await;
        // A new place at the back: behind the visitor who was first all along.
        wait_position(&browser, 2).await;
        wait_for("a new ticket cookie", SHOWN, || async {
            let now = browser.cookie("qm_out").await?;
            if now.is_some() && now != before {
                Ok(())
            } else {
                Err("the old ticket cookie".to_owned())
            }
        })
        .await;
        browser.assert_no_console_errors().await;
    })
    .await;
}

#[tokio::test]
async fn a_visitor_asks_to_be_mailed_and_the_mail_comes_on_their_turn() {
    browser::run(90, async {
        let sink = SmtpSink::start().await;
        let smtp_url = sink.url();
        let app = spawn_app_with(&[("EMAIL_NOTIFY", "1"), ("SMTP_URL", smtp_url.as_str())]).await;
        still_room(&app, "mail", "https://shop.example/checkout").await;
        app.join_as_new_visitor("mail").await;

        let browser = Browser::open().await;
        browser.goto(&page_url(&app, "mail")).await;
        wait_position(&browser, 2).await;
        wait_for("form#qm-notify to show", SHOWN, || async {
            if browser.visible("form#qm-notify").await? {
                Ok(())
            } else {
                Err("form#qm-notify hidden or missing".to_owned())
            }
        })
        .await;
        browser
            .fill("#qm-notify-email", "jane.doe@example.com")
            .await
            .expect("type the address");
        browser
            .click("form#qm-notify [type=submit]")
            .await
            .expect("submit the notification form");
        wait_for("#qm-notify-state to say the result", SHOWN, || async {
            let text = browser.text("#qm-notify-state").await?;
            if text.is_empty() {
                Err("#qm-notify-state is empty".to_owned())
            } else {
                Ok(())
            }
        })
        .await;
        browser.screenshot("waiting-notify-1280x800").await;
        assert!(sink.received().is_empty(), "mailed before the turn");

        // Both places pass: the page goes through, and the visitor who asked is mailed.
        flush(&app, "mail", 2).await;
        let received = sink.wait_for(1, Duration::from_secs(15)).await;
        assert_eq!(received.len(), 1, "{received:?}");
        assert_eq!(received[0].rcpt_to, vec!["jane.doe@example.com".to_owned()]);
        browser.assert_no_console_errors().await;
    })
    .await;
}

#[tokio::test]
async fn the_layout_holds_still_when_the_numbers_change() {
    browser::run(90, async {
        let app = spawn_app().await;
        still_room(&app, "still", "https://shop.example/checkout").await;
        for _ in 0..9 {
            app.join_as_new_visitor("still").await;
        }
        // Where the figures and the bar sit, and how tall the page is.
        let layout = r#"
            var rect = function (selector) {
              var e = document.querySelector(selector);
              return e ? Math.round(e.getBoundingClientRect().top) : null;
            };
            return [rect('#qm-ahead'), rect('#qm-eta'), rect('#qm-progress'),
                    document.documentElement.scrollHeight];"#;

        for window in [DESKTOP, PHONE] {
            let browser = Browser::open_with(Options {
                window,
                ..Options::default()
            })
            .await;
            browser.goto(&page_url(&app, "still")).await;
            let mut seen = None;
            // Two digits, then one: the change most likely to move what follows.
            for expected in [10, 9] {
                wait_position(&browser, expected).await;
                // Let the page finish whatever transition the change started.
                tokio::time::sleep(Duration::from_millis(600)).await;
                let now = browser.js(layout, vec![]).await.expect("measure the page");
                if let Some(before) = &seen {
                    assert_eq!(
                        &now, before,
                        "the layout moved at {window:?} when the position went to {expected}"
                    );
                }
                seen = Some(now);
                if expected == 10 {
                    flush(&app, "still", 1).await;
                }
            }
            browser.assert_no_console_errors().await;
            // The flush left nine in line (this browser's place among them), so the next
            // window's visitor starts tenth again.
        }
    })
    .await;
}
