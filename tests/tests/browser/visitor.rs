//! The waiting page `/w/:roomId` in a real browser, through the hooks of the DOM contract
//! (`#qm-position`, `data-qm-state`, `data-qm-connection`, `#qm-connection`, `#qm-countdown`,
//! `#qm-ref`, `#qm-locale`, the ticket in `localStorage["qm_token_" + roomId]` and cookie
//! `qm_<roomId>`): joining, the line moving, the pass, a refresh, a second profile, a lost
//! network, a scheduled drop and the Thai locale. Every test also reads the browser console
//! (no errors) and the waiting-page tests run axe-core and save screenshots at both sizes.

use std::time::Duration;

use qm_tests::browser::{self, Browser, DESKTOP, Options, PHONE, TargetSite, wait_for};
use qm_tests::{TestApp, room_body, spawn_app};
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
        browser.assert_accessible("the Thai waiting page").await;
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
            .js(
                "document.querySelector('#qm-locale a[hreflang=\"th\"]').click(); return true;",
                vec![],
            )
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
