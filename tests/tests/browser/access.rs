//! Who may do what, in the console: a viewer signs in with an operator key and reads, while
//! every control it may not use stays on the page, marked `aria-disabled`, described by the
//! reason (the role it needs) and showing that reason in a tooltip on keyboard focus and on
//! hover, and a click on it changes nothing; an operator changes a rate and the audit page
//! shows the change under their name; an owner creates an operator and a share link in the console and revokes
//! the operator after a confirm, and the link opens a read-only view of the rooms with their
//! redacted fields saying so and no controls at all. Each runs axe-core and saves screenshots.

use std::time::Duration;

use qm_tests::browser::{Browser, PHONE, run, wait_for};
use qm_tests::{TestApp, room_body, spawn_app};
use reqwest::Method;
use serde_json::{Value, json};

use crate::console::{
    assert_no_console_errors_but, click, sign_in, type_into, wait_console, wait_open, wait_text,
};

/// How long the page may take to show what the server already knows.
const SHOWN: Duration = Duration::from_secs(15);

/// Creates an operator through the API as the owner; answers its key.
async fn create_operator(app: &TestApp, name: &str, role: &str) -> String {
    let reply = app
        .admin_post("/operators", json!({ "name": name, "role": role }))
        .await;
    assert_eq!(reply.status, 200, "create operator: {}", reply.text);
    let key = reply.body["key"]
        .as_str()
        .expect("the key, once")
        .to_owned();
    assert!(key.starts_with("qmo_"), "an operator key: {key}");
    key
}

async fn sign_in_with(browser: &Browser, app: &TestApp, key: &str) {
    browser.goto(&format!("{}/", app.admin)).await;
    wait_console(browser, "signed-out").await;
    type_into(browser, "#signin-key", key).await;
    click(browser, "#signin button[type=submit]").await;
    wait_console(browser, "ready").await;
}

/// For every `[data-needs]` control on the page that the role may not use: its needed role,
/// `aria-disabled`, and the text of its description.
async fn refused_controls(browser: &Browser) -> Value {
    browser
        .js(
            "return Array.from(document.querySelectorAll('[data-needs]'))\
               .filter((e) => e.getClientRects().length > 0)\
               .map((e) => ({ needs: e.dataset.needs, label: (e.textContent || e.name || '').trim(),\
                 disabled: e.getAttribute('aria-disabled'),\
                 why: (e.getAttribute('aria-describedby') || '').split(/\\s+/)\
                   .map((id) => document.getElementById(id)).filter(Boolean)\
                   .map((d) => d.textContent).join(' '),\
                 focusable: e.tabIndex >= 0 && !e.disabled }));",
            vec![],
        )
        .await
        .expect("read the controls")
}

#[tokio::test]
async fn a_viewer_reads_and_every_control_says_why_it_is_unavailable() {
    run(180, async {
        let app = spawn_app().await;
        app.create_room(room_body("show", 7, json!({}))).await;
        let key = create_operator(&app, "Vera", "viewer").await;
        let browser = Browser::open().await;
        sign_in_with(&browser, &app, &key).await;
        wait_text(&browser, "#who-name", "who is signed in", |text| {
            text == "Vera"
        })
        .await;
        wait_text(&browser, "#who-role", "the role", |text| text == "viewer").await;
        let row = "#rooms [data-room-id=\"show\"]";
        wait_text(&browser, &format!("{row} .room-rate"), "the rate", |text| {
            text == "7"
        })
        .await;

        // Every control that changes something is there, focusable, refused and says why.
        let controls = refused_controls(&browser).await;
        let controls = controls.as_array().expect("a list");
        assert!(
            controls.len() >= 10,
            "the room's controls and New room: {controls:?}"
        );
        for control in controls {
            assert_eq!(control["disabled"], json!("true"), "{control}");
            assert_eq!(control["focusable"], json!(true), "{control}");
            let why = control["why"].as_str().unwrap_or("");
            let needs = control["needs"].as_str().unwrap_or("");
            assert!(
                why.starts_with(&format!("Needs the {needs} role"))
                    && why.contains("Vera, a viewer"),
                "{control}"
            );
        }

        // Keyboard focus shows the reason in a tooltip.
        browser
            .js(
                "document.querySelector(arguments[0]).focus();",
                vec![json!(format!("{row} button[data-action=rate]"))],
            )
            .await
            .expect("focus the rate button");
        assert_eq!(browser.visible("#access-tip").await, Ok(true));
        wait_text(&browser, "#access-tip", "the tooltip", |text| {
            text.starts_with("Needs the operator role or higher")
        })
        .await;
        browser.screenshot("console-viewer-tooltip-1280x800").await;
        // The pointer resting on one shows it too (the focus elsewhere first hides it).
        let hovered = browser
            .js(
                "document.activeElement.blur();\
                 var hidden = document.querySelector('#access-tip').hidden;\
                 document.querySelector(arguments[0])\
                   .dispatchEvent(new MouseEvent('mouseover', { bubbles: true }));\
                 var tip = document.querySelector('#access-tip');\
                 return [hidden, tip.hidden, tip.textContent];",
                vec![json!(format!("{row} button[data-action=delete]"))],
            )
            .await
            .expect("hover the delete button");
        assert_eq!(hovered[0], json!(true), "blurred, the tooltip went away");
        assert_eq!(hovered[1], json!(false), "hovered, the tooltip shows");
        assert!(
            hovered[2]
                .as_str()
                .is_some_and(|text| text.starts_with("Needs the owner role:")),
            "{hovered}"
        );

        // A click is refused in the page, with the reason; the room is unchanged.
        click(&browser, &format!("{row} button[data-action=rate]")).await;
        wait_text(&browser, "#console-status", "the refusal", |text| {
            text.starts_with("Needs the operator role")
        })
        .await;
        click(&browser, &format!("{row} button[data-action=delete]")).await;
        wait_text(&browser, "#console-status", "the owner refusal", |text| {
            text.starts_with("Needs the owner role")
        })
        .await;
        assert_eq!(
            browser
                .js("return document.querySelector('#confirm').open;", vec![])
                .await,
            Ok(json!(false)),
            "no confirm opens for a refused delete"
        );
        assert_eq!(app.room("show").await["ratePerMinute"], json!(7));
        browser.assert_accessible("the console of a viewer").await;

        // A viewer reads the audit trail.
        click(&browser, "#console-nav button[data-page=audit]").await;
        wait_text(
            &browser,
            "#audit-rows",
            "the viewer's own sign-in",
            |text| text.contains("Vera"),
        )
        .await;
        browser
            .assert_accessible("the audit page of a viewer")
            .await;
        browser.resize(PHONE).await;
        browser.screenshot("console-viewer-audit-375x812").await;
        browser.assert_accessible("the audit page at 375x812").await;
        assert_no_console_errors_but(&browser, &[]).await;
    })
    .await;
}

#[tokio::test]
async fn an_operator_changes_a_rate_and_the_audit_page_shows_it_with_their_name() {
    run(180, async {
        let app = spawn_app().await;
        app.create_room(room_body("drop", 5, json!({}))).await;
        let key = create_operator(&app, "Ana", "operator").await;
        let browser = Browser::open().await;
        sign_in_with(&browser, &app, &key).await;
        wait_text(&browser, "#who-role", "the role", |text| text == "operator").await;
        let row = "#rooms [data-room-id=\"drop\"]";
        wait_text(&browser, &format!("{row} .room-rate"), "the rate", |text| {
            text == "5"
        })
        .await;
        // An operator's room controls work; delete is the owner's.
        let delete = browser
            .js(
                "var b = document.querySelector(arguments[0]); return [b.getAttribute('aria-disabled'),\
                 document.querySelector(arguments[1]).getAttribute('aria-disabled')];",
                vec![
                    json!(format!("{row} button[data-action=delete]")),
                    json!(format!("{row} button[data-action=rate]")),
                ],
            )
            .await
            .expect("read the buttons");
        assert_eq!(delete, json!(["true", null]));

        type_into(&browser, &format!("{row} input[name=ratePerMinute]"), "42").await;
        click(&browser, &format!("{row} button[data-action=rate]")).await;
        wait_text(&browser, "#console-status", "the new rate", |text| {
            text == "Room drop now lets in 42 people a minute."
        })
        .await;
        assert_eq!(app.room("drop").await["ratePerMinute"], json!(42));

        click(&browser, "#console-nav button[data-page=audit]").await;
        type_into(&browser, "#audit-filters input[name=room]", "drop").await;
        click(&browser, "#audit-filters button[type=submit]").await;
        let rows = wait_text(&browser, "#audit-rows", "the rate change by Ana", |text| {
            text.contains("Ana") && text.contains("rate") && text.contains("drop")
        })
        .await;
        assert!(!rows.contains(&key), "no key in the audit page");
        let first = browser
            .text("#audit-rows tr:first-child")
            .await
            .expect("the newest entry");
        assert!(
            first.contains("Ana") && first.contains("42"),
            "the newest entry is the change, with its value: {first}"
        );
        browser.screenshot("console-audit-1280x800").await;
        browser.assert_accessible("the audit page").await;
        assert_no_console_errors_but(&browser, &[]).await;

        // Revoked by the owner, the operator's console is refused at a next request and goes
        // back to the sign-in form, saying why.
        let operators = app.admin_call(Method::GET, "/operators", None).await;
        let id = operators.body["operators"][0]["id"]
            .as_str()
            .expect("Ana's id")
            .to_owned();
        let revoked = app
            .admin_call(Method::DELETE, &format!("/operators/{id}"), None)
            .await;
        assert_eq!(revoked.status, 200, "{}", revoked.text);
        wait_for("the revoked operator signed out", SHOWN, || async {
            // Each press of Show is a request; the first one after the revocation is refused.
            browser.click("#audit-filters button[type=submit]").await.ok();
            match browser.html_attr("data-console").await? {
                Some(state) if state == "signed-out" => Ok(()),
                other => Err(format!("data-console is {other:?}")),
            }
        })
        .await;
        wait_text(&browser, "#signin-notice", "why the console signed out", |text| {
            text.contains("was revoked")
        })
        .await;
        // The refusals that ended it are the only errors: the browser logs each 401.
        assert_no_console_errors_but(
            &browser,
            &["the server responded with a status of 401"],
        )
        .await;
    })
    .await;
}

#[tokio::test]
async fn the_monitor_link_opens_a_read_only_view_with_redacted_rooms() {
    run(180, async {
        let app = spawn_app().await;
        app.create_room(room_body(
            "wall",
            3,
            json!({
                "proxyOrigin": "http://10.0.0.5:8080",
                "returnOrigins": ["https://shop.example.com"],
                "urlPatterns": ["/drop/*"],
            }),
        ))
        .await;
        for _ in 0..2 {
            app.join_as_new_visitor("wall").await;
        }
        let browser = Browser::open().await;
        sign_in(&browser, &app).await;

        // The owner creates an operator and a share link in the console; each is shown once.
        click(&browser, "#console-nav button[data-page=access]").await;
        type_into(&browser, "#operator-form input[name=name]", "Olu").await;
        click(&browser, "#operator-form button[type=submit]").await;
        wait_text(&browser, "#operators-rows", "the new operator", |text| {
            text.contains("Olu")
        })
        .await;
        let key = browser
            .js("return document.querySelector('#operator-key').value;", vec![])
            .await
            .expect("read the key");
        assert!(key.as_str().is_some_and(|key| key.starts_with("qmo_")), "{key}");
        type_into(&browser, "#link-form input[name=label]", "Lobby").await;
        click(&browser, "#link-form button[type=submit]").await;
        wait_text(&browser, "#links-rows", "the new link", |text| {
            text.contains("Lobby")
        })
        .await;
        let link = browser
            .js("return document.querySelector('#link-url').value;", vec![])
            .await
            .expect("read the link");
        let link = link.as_str().expect("a link").to_owned();
        let token = link
            .split_once("#monitor=")
            .map(|(_, token)| token.to_owned())
            .unwrap_or_else(|| panic!("the token rides in the fragment: {link}"));
        assert!(token.starts_with("qmm_"), "{link}");
        browser.screenshot("console-access-1280x800").await;
        // Revoking asks first; confirmed, the operator is gone from the list and the server.
        click(&browser, "#operators-rows button").await;
        wait_open(&browser, "#confirm", true).await;
        click(&browser, "#confirm button[value=confirm]").await;
        wait_text(&browser, "#console-status", "the revoked operator", |text| {
            text == "The key of Olu is revoked."
        })
        .await;
        let operators = app.admin_call(Method::GET, "/operators", None).await;
        assert_eq!(operators.body["operators"], json!([]), "{}", operators.text);
        browser.assert_accessible("the operators and share links page").await;
        click(&browser, "#signout").await;
        wait_console(&browser, "signed-out").await;
        // A chart refresh or room poll in flight as the session ends is refused 401 (the page
        // stops asking at sign-out, but cannot recall a request already sent); nothing else may
        // have been logged, and the shared view below is checked on its own.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_no_console_errors_but(&browser, &["the server responded with a status of 401"])
            .await;
        browser.forget_console_log().await;

        // The link signs in read-only; the fragment leaves the address bar.
        browser
            .goto(&format!("{}/#monitor={token}", app.admin))
            .await;
        wait_console(&browser, "ready").await;
        assert_eq!(browser.html_attr("data-view").await, Ok(Some("monitor".to_owned())));
        let url = browser.current_url().await.expect("the address");
        assert!(!url.contains("monitor="), "the token left the address bar: {url}");
        let row = "#rooms [data-room-id=\"wall\"]";
        wait_text(&browser, &format!("{row} .room-depth"), "2 waiting", |text| {
            text == "2"
        })
        .await;
        wait_text(&browser, &format!("{row} .room-redacted"), "the redacted fields", |text| {
            text.matches("hidden in a shared view").count() == 3
        })
        .await;
        // No controls at all: nothing that changes anything is shown or reachable.
        let shown = browser
            .js(
                "return Array.from(document.querySelectorAll('#app [data-needs], #app .room-controls,\
                   #console-nav, #visitor-lookup, #page-audit, #page-access'))\
                   .filter((e) => e.getClientRects().length > 0).map((e) => e.id || e.className);",
                vec![],
            )
            .await
            .expect("read the controls");
        assert_eq!(shown, json!([]), "no control in a shared view");
        assert_eq!(browser.visible("#monitor-banner").await, Ok(true));
        browser.screenshot("console-monitor-1280x800").await;
        browser.assert_accessible("the shared monitor view").await;
        browser.resize(PHONE).await;
        browser.screenshot("console-monitor-375x812").await;
        browser.assert_accessible("the shared monitor view at 375x812").await;

        assert_no_console_errors_but(&browser, &[]).await;

        // Revoked, the link stops working: a fresh open lands on the sign-in form, saying why.
        // Whatever the open page reads meanwhile (its chart, its stream) is refused 401 too.
        let revoked = app
            .admin_call(Method::DELETE, "/monitor-token?all=1", None)
            .await;
        assert_eq!(revoked.status, 200, "{}", revoked.text);
        browser
            .goto(&format!("{}/#monitor={token}", app.admin))
            .await;
        wait_console(&browser, "signed-out").await;
        wait_text(&browser, "#signin-notice", "why the link failed", |text| {
            text.starts_with("This share link no longer works")
        })
        .await;
        assert_no_console_errors_but(
            &browser,
            &["the server responded with a status of 401"],
        )
        .await;
    })
    .await;
}
