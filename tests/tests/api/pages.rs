//! GET and POST /w/:roomId as a browser sees them: the `lapsed` key of the page config (from the
//! engine's own word for the refusal), the join form and server-rendered place of a browser
//! without JavaScript, the operator message with `now` beside `messageAt`, and the page's
//! language.

use std::time::Duration;

use qm_tests::{Reply, TestApp, room_body, spawn_app, spawn_app_with};
use serde_json::{Value, json};

use crate::{token_generation, token_ticket};

/// The page's `window.QM_CONFIG`, parsed from its JSON script element.
fn page_config(page: &Reply) -> Value {
    let marker = r#"<script id="qm-config" type="application/json">"#;
    let start = page.text.find(marker).expect("the page carries its config") + marker.len();
    let end = start
        + page.text[start..]
            .find("</script>")
            .expect("config element ends");
    serde_json::from_str(&page.text[start..end]).expect("the config is JSON")
}

/// GET /w/:roomId with a Cookie header (or none) and an Accept-Language.
async fn page(app: &TestApp, room_id: &str, cookies: Option<&str>, language: &str) -> Reply {
    let mut request = app
        .http
        .get(format!("{}/w/{room_id}", app.gateway))
        .header(reqwest::header::ACCEPT_LANGUAGE, language);
    if let Some(cookies) = cookies {
        request = request.header(reqwest::header::COOKIE, cookies);
    }
    let reply = app.send(request).await;
    assert_eq!(reply.status, 200, "page: {}", reply.text);
    reply
}

/// What `lapsed` the page config of a browser holding `cookies` says.
async fn lapsed_of(app: &TestApp, room_id: &str, cookies: Option<&str>) -> Value {
    page_config(&page(app, room_id, cookies, "en").await)["lapsed"].clone()
}

/// The form a browser without JavaScript posts, sent from the page itself.
async fn form_join(app: &TestApp, room_id: &str, cookies: Option<&str>) -> Reply {
    let mut request = app
        .http
        .post(format!("{}/w/{room_id}", app.gateway))
        .header(reqwest::header::ORIGIN, app.gateway.as_str())
        .header("sec-fetch-site", "same-origin")
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body("");
    if let Some(cookies) = cookies {
        request = request.header(reqwest::header::COOKIE, cookies);
    }
    app.send(request).await
}

/// The Cookie header a browser sends after a response that set both place cookies.
fn cookies_after(reply: &Reply, room_id: &str) -> String {
    format!(
        "qm_{room_id}={}; qms_{room_id}={}",
        reply
            .cookie(&format!("qm_{room_id}"))
            .expect("qm_ cookie set"),
        reply
            .cookie(&format!("qms_{room_id}"))
            .expect("qms_ cookie set"),
    )
}

fn cookie_token(cookies: &str, room_id: &str) -> String {
    let prefix = format!("qm_{room_id}=");
    cookies
        .split("; ")
        .find_map(|pair| pair.strip_prefix(&prefix))
        .expect("the token cookie")
        .to_owned()
}

#[tokio::test]
async fn an_ejected_or_purged_place_reads_reset_in_the_page_config() {
    let app = spawn_app().await;
    app.create_room(room_body("gone", 0, json!({}))).await;
    let (_, first) = app.join_as_new_visitor("gone").await;
    let (_, second) = app.join_as_new_visitor("gone").await;
    // A live place lost nothing.
    assert_eq!(lapsed_of(&app, "gone", Some(&first)).await, Value::Null);

    let eject = app
        .admin_post("/rooms/gone/eject", json!({ "ticket": 1 }))
        .await;
    assert_eq!(eject.status, 200, "{}", eject.text);
    assert_eq!(lapsed_of(&app, "gone", Some(&first)).await, "reset");
    assert_eq!(lapsed_of(&app, "gone", Some(&second)).await, Value::Null);

    let purge = app.admin_post("/rooms/gone/purge", json!({})).await;
    assert_eq!(purge.status, 200, "{}", purge.text);
    assert_eq!(lapsed_of(&app, "gone", Some(&second)).await, "reset");
    // The page without JavaScript says so too, and offers the replacement place.
    let shown = page(&app, "gone", Some(&second), "en").await;
    assert!(
        shown
            .text
            .contains("Your earlier place in line was cancelled on our side"),
        "{}",
        shown.text
    );
    assert!(shown.text.contains(r#"method="post" action="/w/gone""#));
}

#[tokio::test]
async fn a_pass_whose_entry_window_ran_out_reads_expired() {
    let app = spawn_app().await;
    app.create_room(room_body("ttl", 0, json!({ "passedTtlSec": 10 })))
        .await;
    let (_, cookies) = app.join_as_new_visitor("ttl").await;
    app.admin_post("/rooms/ttl/flush", json!({ "count": 1 }))
        .await;
    // Passed and still inside its window: nothing lost, and the page sends the visitor on,
    // handing the pass back to the site as qm_token.
    let passed = page(&app, "ttl", Some(&cookies), "en").await;
    assert_eq!(page_config(&passed)["lapsed"], Value::Null);
    let token = cookies
        .split("; ")
        .find_map(|cookie| cookie.strip_prefix("qm_ttl="))
        .expect("the queue cookie");
    assert!(
        passed.text.contains(&format!(
            r#"<noscript><meta http-equiv="refresh" content="0;url=https://shop.example/checkout?qm_token={token}"></noscript>"#
        )),
        "{}",
        passed.text
    );
    tokio::time::sleep(Duration::from_millis(10_500)).await;
    assert_eq!(lapsed_of(&app, "ttl", Some(&cookies)).await, "expired");
    let thai = page(&app, "ttl", Some(&cookies), "th-TH,th;q=0.9,en;q=0.5").await;
    assert!(thai.text.contains(r#"<html lang="th">"#));
    assert!(
        thai.text.contains("ถึงคิวของคุณแล้ว แต่หมดเวลาเข้าใช้งาน"),
        "{}",
        thai.text
    );
}

#[tokio::test]
async fn a_re_created_room_reads_reset_and_no_or_a_forged_cookie_reads_nothing() {
    let app = spawn_app().await;
    app.create_room(room_body("gen", 0, json!({}))).await;
    let (_, cookies) = app.join_as_new_visitor("gen").await;
    assert_eq!(lapsed_of(&app, "gen", None).await, Value::Null);
    // Nothing is known to be lost for a cookie that never verified.
    assert_eq!(
        lapsed_of(&app, "gen", Some("qm_gen=forged.token; qms_gen=x")).await,
        Value::Null
    );
    let deleted = app
        .admin_call(reqwest::Method::DELETE, "/rooms/gen", None)
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.text);
    app.create_room(room_body("gen", 0, json!({}))).await;
    assert_eq!(lapsed_of(&app, "gen", Some(&cookies)).await, "reset");
}

#[tokio::test]
async fn a_lapsed_token_in_the_body_or_the_cookie_gets_a_new_place_and_token() {
    let app = spawn_app().await;
    app.create_room(room_body("again", 0, json!({}))).await;
    let (first, first_cookies) = app.join_as_new_visitor("again").await;
    let (_, second_cookies) = app.join_as_new_visitor("again").await;
    let dead = first.body["token"].as_str().unwrap().to_owned();
    app.admin_post("/rooms/again/eject", json!({ "ticket": 1 }))
        .await;
    app.admin_post("/rooms/again/eject", json!({ "ticket": 2 }))
        .await;

    // The page sends the dead token in the body on the rejoin.
    let by_body = app.join("again", Some(&dead), Some(&first_cookies)).await;
    assert_eq!(by_body.status, 200, "{}", by_body.text);
    let new_token = by_body.body["token"].as_str().unwrap();
    assert_ne!(new_token, dead);
    assert_eq!(token_ticket(new_token), Some(3));
    assert_eq!(by_body.body["position"], 1);
    assert_eq!(
        by_body.cookie("qm_again").as_deref(),
        Some(new_token),
        "the cookie names the new place"
    );

    // Only the cookie carries the dead token.
    let by_cookie = app.join("again", None, Some(&second_cookies)).await;
    assert_eq!(by_cookie.status, 200, "{}", by_cookie.text);
    let cookie_token = by_cookie.body["token"].as_str().unwrap();
    assert_eq!(token_ticket(cookie_token), Some(4));
    assert_eq!(by_cookie.body["position"], 2);
}

#[tokio::test]
async fn the_no_script_form_holds_a_place_across_a_reload() {
    let app = spawn_app().await;
    app.create_room(room_body("plain", 0, json!({}))).await;
    app.join_as_new_visitor("plain").await;

    let fresh = page(&app, "plain", None, "en").await;
    assert!(fresh.text.contains("Join the line to hold your place."));
    assert!(
        fresh
            .text
            .contains(r#"<form class="join-form" method="post" action="/w/plain">"#)
    );

    let joined = form_join(&app, "plain", None).await;
    assert_eq!(joined.status, 303, "{}", joined.text);
    assert_eq!(joined.header("location"), Some("/w/plain"));
    let cookies = cookies_after(&joined, "plain");
    let session_cookie = joined
        .set_cookies()
        .into_iter()
        .find(|cookie| cookie.starts_with("qms_plain="))
        .expect("ownership cookie");
    assert!(session_cookie.contains("HttpOnly") && session_cookie.contains("Path=/"));
    let token = cookie_token(&cookies, "plain");
    assert_eq!(token_ticket(&token), Some(2));

    let shown = page(&app, "plain", Some(&cookies), "en").await;
    assert!(
        shown
            .text
            .contains("You are number 2 in line, with 1 ahead of you."),
        "{}",
        shown.text
    );
    assert!(
        shown
            .text
            .contains(r#"<meta http-equiv="refresh" content="30">"#)
    );
    assert_eq!(page_config(&shown)["lapsed"], Value::Null);

    // Posting again from that browser keeps the place and its token.
    let again = form_join(&app, "plain", Some(&cookies)).await;
    assert_eq!(again.status, 303, "{}", again.text);
    assert_eq!(
        cookie_token(&cookies_after(&again, "plain"), "plain"),
        token
    );
    // So does the JavaScript join of the same browser.
    let status = app.status(&token).await;
    assert_eq!(status.body["position"], 2, "{}", status.text);

    // A qm_return the form carries comes back on the redirect.
    let with_return = app
        .send(
            app.http
                .post(format!(
                    "{}/w/plain?qm_return=https%3A%2F%2Fshop.example%2Fcart",
                    app.gateway
                ))
                .header("sec-fetch-site", "same-origin")
                .header(reqwest::header::COOKIE, cookies.as_str()),
        )
        .await;
    assert_eq!(with_return.status, 303);
    assert_eq!(
        with_return.header("location"),
        Some("/w/plain?qm_return=https%3A%2F%2Fshop.example%2Fcart")
    );
}

#[tokio::test]
async fn a_lapsed_cookie_on_the_form_gets_a_new_place() {
    let app = spawn_app().await;
    app.create_room(room_body("relapse", 0, json!({}))).await;
    let joined = form_join(&app, "relapse", None).await;
    let cookies = cookies_after(&joined, "relapse");
    app.admin_post("/rooms/relapse/eject", json!({ "ticket": 1 }))
        .await;
    let lapsed = page(&app, "relapse", Some(&cookies), "en").await;
    assert_eq!(page_config(&lapsed)["lapsed"], "reset");
    assert!(lapsed.text.contains("Get a new place in line"));

    let rejoined = form_join(&app, "relapse", Some(&cookies)).await;
    assert_eq!(rejoined.status, 303, "{}", rejoined.text);
    let new_cookies = cookies_after(&rejoined, "relapse");
    assert_eq!(
        token_ticket(&cookie_token(&new_cookies, "relapse")),
        Some(2)
    );
    let shown = page(&app, "relapse", Some(&new_cookies), "en").await;
    assert_eq!(page_config(&shown)["lapsed"], Value::Null);
    assert!(
        shown
            .text
            .contains("You are number 1 in line, with 0 ahead of you."),
        "{}",
        shown.text
    );

    // The same for a room deleted and re-created under the visitor.
    app.admin_call(reqwest::Method::DELETE, "/rooms/relapse", None)
        .await;
    app.create_room(room_body("relapse", 0, json!({}))).await;
    let reset = form_join(&app, "relapse", Some(&new_cookies)).await;
    assert_eq!(reset.status, 303, "{}", reset.text);
    let reset_token = cookie_token(&cookies_after(&reset, "relapse"), "relapse");
    assert!(
        token_generation(&reset_token) > token_generation(&cookie_token(&new_cookies, "relapse"))
    );
}

#[tokio::test]
async fn the_form_answers_bad_input_clearly_and_never_with_a_500() {
    let app = spawn_app_with(&[("JOIN_LIMIT_PER_MIN", "2")]).await;
    app.create_room(room_body("strict", 0, json!({}))).await;

    let cross_site = app
        .send(
            app.http
                .post(format!("{}/w/strict", app.gateway))
                .header("sec-fetch-site", "cross-site"),
        )
        .await;
    assert_eq!(cross_site.status, 403, "{}", cross_site.text);
    assert!(
        cross_site
            .text
            .contains("This form can only be sent from this waiting page.")
    );
    assert!(cross_site.set_cookies().is_empty(), "nothing is handed out");
    let foreign_origin = app
        .send(
            app.http
                .post(format!("{}/w/strict", app.gateway))
                .header(reqwest::header::ORIGIN, "https://evil.example"),
        )
        .await;
    assert_eq!(foreign_origin.status, 403);

    let bad_id = form_join(&app, "no%20such", None).await;
    assert_eq!(bad_id.status, 404);
    let unknown = form_join(&app, "ghost", None).await;
    assert_eq!(unknown.status, 404, "{}", unknown.text);

    // JOIN_LIMIT_PER_MIN=2, and the ghost room spent one.
    assert_eq!(form_join(&app, "strict", None).await.status, 303);
    let limited = form_join(&app, "strict", None).await;
    assert_eq!(limited.status, 429, "{}", limited.text);
    let retry_after: u64 = limited
        .header("retry-after")
        .and_then(|value| value.parse().ok())
        .expect("Retry-After");
    assert!(retry_after >= 1);
    assert!(
        limited.text.contains(&format!(
            "Too many attempts from this connection. Wait {retry_after} seconds"
        )),
        "{}",
        limited.text
    );
    assert!(
        limited.text.contains(r#"method="post""#),
        "the form is offered again"
    );
}

#[tokio::test]
async fn the_operator_message_reaches_the_page_with_now_beside_its_instant() {
    let app = spawn_app().await;
    app.create_room(room_body(
        "news",
        0,
        json!({ "branding": { "message": "Doors <b>open</b> at six" } }),
    ))
    .await;
    let message_at = app.room("news").await["branding"]["messageAt"]
        .as_i64()
        .expect("the server stamps messageAt");

    let shown = page(&app, "news", None, "en").await;
    let config = page_config(&shown);
    assert_eq!(config["branding"]["message"], "Doors <b>open</b> at six");
    assert_eq!(config["branding"]["messageAt"], message_at);
    let now = config["now"].as_i64().expect("now beside messageAt");
    assert!(now >= message_at);
    // The pane is server-rendered (escaped) for every visitor, in a live region.
    assert!(
        shown
            .text
            .contains(r#"<p id="qm-message-text">Doors &lt;b&gt;open&lt;/b&gt; at six</p>"#),
        "{}",
        shown.text
    );
    assert!(shown.text.contains("Posted just now"));
    assert!(shown.text.contains(r#"role="status" aria-live="polite""#));

    // The join answer and the status read carry it with now too.
    let (joined, _) = app.join_as_new_visitor("news").await;
    assert_eq!(joined.body["messageAt"], message_at, "{}", joined.text);
    assert!(joined.body["now"].is_i64(), "{}", joined.text);
    let status = app.status(joined.body["token"].as_str().unwrap()).await;
    assert_eq!(status.body["message"], "Doors <b>open</b> at six");
    assert!(status.body["now"].is_i64(), "{}", status.text);

    // A room without a message or a clock names no instant and carries no now.
    app.create_room(room_body("quiet", 0, json!({}))).await;
    let quiet = page_config(&page(&app, "quiet", None, "en").await);
    assert!(quiet.get("now").is_none(), "{quiet}");
}

/// GET /w/:roomId with a query and a Cookie header (or none) and an Accept-Language.
async fn page_at(app: &TestApp, path: &str, cookies: Option<&str>, language: &str) -> Reply {
    let mut request = app
        .http
        .get(format!("{}{path}", app.gateway))
        .header(reqwest::header::ACCEPT_LANGUAGE, language);
    if let Some(cookies) = cookies {
        request = request.header(reqwest::header::COOKIE, cookies);
    }
    let reply = app.send(request).await;
    assert_eq!(reply.status, 200, "page: {}", reply.text);
    reply
}

#[tokio::test]
async fn the_language_comes_from_accept_language_then_lang_which_is_remembered() {
    let app = spawn_app().await;
    app.create_room(room_body("speak", 0, json!({}))).await;

    // Accept-Language picks the first time, markup and script sentences alike.
    let thai = page(&app, "speak", None, "th-TH,th;q=0.9,en;q=0.5").await;
    assert!(thai.text.contains(r#"<html lang="th">"#));
    assert!(
        thai.text.contains("ลำดับของคุณ"),
        "the figure labels are Thai"
    );
    let config = page_config(&thai);
    assert_eq!(config["locale"], "th");
    assert_eq!(
        config["sentences"]["connectionReconnecting"],
        "กำลังเชื่อมต่อใหม่…"
    );
    assert!(
        thai.cookie("qm_lang").is_none(),
        "nothing chosen, nothing remembered"
    );
    let english = page(&app, "speak", None, "en-GB,en;q=0.8").await;
    assert!(english.text.contains(r#"<html lang="en">"#));
    assert_eq!(
        page_config(&english)["sentences"]["connectionReconnecting"],
        "Reconnecting…"
    );

    // The switch: links for both locales, and ?lang= wins over Accept-Language.
    for tag in ["en", "th"] {
        assert!(
            english
                .text
                .contains(&format!(r#"href="/w/speak?lang={tag}" hreflang="{tag}""#)),
            "{}",
            english.text
        );
    }
    assert!(english.text.contains(r#"<nav id="qm-locale""#));
    let chosen = page_at(&app, "/w/speak?lang=th", None, "en").await;
    assert!(chosen.text.contains(r#"<html lang="th">"#));
    let set_cookie = chosen
        .set_cookies()
        .into_iter()
        .find(|cookie| cookie.starts_with("qm_lang="))
        .expect("the choice is remembered");
    assert_eq!(
        set_cookie,
        "qm_lang=th; Path=/; Max-Age=31536000; SameSite=Lax"
    );

    // The cookie then wins over Accept-Language, and a new ?lang= over the cookie.
    let remembered = page(&app, "speak", Some("qm_lang=th"), "en").await;
    assert!(remembered.text.contains(r#"<html lang="th">"#));
    let back = page_at(&app, "/w/speak?lang=en", Some("qm_lang=th"), "th").await;
    assert!(back.text.contains(r#"<html lang="en">"#));
    assert_eq!(back.cookie("qm_lang").as_deref(), Some("en"));

    // A tag the page does not speak is ignored, never echoed into the cookie.
    let unknown = page_at(&app, "/w/speak?lang=de", Some("qm_lang=xx"), "th").await;
    assert!(unknown.text.contains(r#"<html lang="th">"#));
    assert!(unknown.cookie("qm_lang").is_none());

    // The no-script form answers in the remembered language too.
    let refused = app
        .send(
            app.http
                .post(format!("{}/w/speak", app.gateway))
                .header(reqwest::header::ORIGIN, "https://elsewhere.example")
                .header(reqwest::header::COOKIE, "qm_lang=th")
                .header(reqwest::header::ACCEPT_LANGUAGE, "en")
                .header(
                    reqwest::header::CONTENT_TYPE,
                    "application/x-www-form-urlencoded",
                )
                .body(""),
        )
        .await;
    assert!(
        refused.text.contains(r#"<html lang="th">"#),
        "{}",
        refused.text
    );
}

#[tokio::test]
async fn the_language_cookie_survives_the_room_cookie_cap() {
    let app = spawn_app_with(&[("ROOM_COOKIE_CAP", "1")]).await;
    app.create_room(room_body("capped", 0, json!({}))).await;
    let joined = app.join("capped", None, Some("qm_lang=th")).await;
    assert_eq!(joined.status, 200, "{}", joined.text);
    assert!(
        !joined
            .set_cookies()
            .iter()
            .any(|cookie| cookie.starts_with("qm_lang=")),
        "the language is not a room to evict: {:?}",
        joined.set_cookies()
    );
}

#[tokio::test]
async fn the_support_reference_is_stable_per_place_and_differs_between_places() {
    let app = spawn_app().await;
    app.create_room(room_body("refs", 0, json!({}))).await;
    let (first, first_cookies) = app.join_as_new_visitor("refs").await;
    let (second, _) = app.join_as_new_visitor("refs").await;
    let code = first.body["ref"]
        .as_str()
        .expect("join answers ref")
        .to_owned();
    assert_eq!(code.len(), 7, "{code}");
    assert_eq!(&code[3..4], "-");
    assert!(
        code.chars()
            .filter(|c| *c != '-')
            .all(|c| "0123456789ABCDEFGHJKMNPQRSTVWXYZ".contains(c)),
        "{code}"
    );
    assert_ne!(
        second.body["ref"], first.body["ref"],
        "another place, another code"
    );
    let token = first.body["token"].as_str().expect("token").to_owned();
    assert!(!code.contains(&token[..6]));

    // The same place reads the same code on status, on a rejoin and in every stream frame.
    assert_eq!(app.status(&token).await.body["ref"], code.as_str());
    let rejoin = app.join("refs", Some(&token), Some(&first_cookies)).await;
    assert_eq!(rejoin.body["ref"], code.as_str(), "{}", rejoin.text);
    let mut stream = app.events("/events", &token).await.expect("stream opens");
    let frame = stream
        .next_frame(Duration::from_secs(5))
        .await
        .expect("a first frame");
    assert_eq!(frame.data["ref"], code.as_str(), "{:?}", frame.data);
    // A visitor without JavaScript reads the same code off the server-rendered place.
    let shown = page(&app, "refs", Some(&first_cookies), "en").await;
    assert!(
        shown.text.contains(&format!(
            r#"Support reference <span class="ref">{code}</span>"#
        )),
        "{}",
        shown.text
    );

    // A lapsed place has no code to read out.
    let eject = app
        .admin_post("/rooms/refs/eject", json!({ "ticket": 1 }))
        .await;
    assert_eq!(eject.status, 200, "{}", eject.text);
    let lapsed = app.status(&token).await;
    assert_eq!(lapsed.body["expired"], true, "{}", lapsed.text);
    assert!(lapsed.body.get("ref").is_none(), "{}", lapsed.text);
}

#[tokio::test]
async fn a_pre_queue_handle_has_its_own_reference() {
    let app = spawn_app().await;
    let opens_at = qm_core::clock::now_ms() + 3_600_000;
    app.create_room(room_body("early", 60, json!({ "opensAt": opens_at })))
        .await;
    let (first, _) = app.join_as_new_visitor("early").await;
    let (second, _) = app.join_as_new_visitor("early").await;
    assert_eq!(first.body["preQueued"], true, "{}", first.text);
    let code = first.body["ref"].as_str().expect("a handle has a code");
    assert_ne!(second.body["ref"].as_str(), Some(code));
    let token = first.body["token"].as_str().expect("token");
    assert_eq!(app.status(token).await.body["ref"], code);
}

#[tokio::test]
async fn the_page_config_says_whether_the_notify_form_is_offered() {
    let off = spawn_app().await;
    off.create_room(room_body("mail", 0, json!({}))).await;
    assert_eq!(
        page_config(&page(&off, "mail", None, "en").await)["notify"],
        false
    );
    off.stop().await;

    // EMAIL_NOTIFY needs an SMTP relay; none is contacted while nobody registers an address.
    let on = spawn_app_with(&[("EMAIL_NOTIFY", "1"), ("SMTP_URL", "smtp://127.0.0.1:9")]).await;
    on.create_room(room_body("mail", 0, json!({}))).await;
    let shown = page(&on, "mail", None, "en").await;
    assert_eq!(page_config(&shown)["notify"], true);
    assert!(shown.text.contains(r#"<form id="qm-notify""#));
    assert!(shown.text.contains(r#"type="email" id="qm-notify-email""#));
}

#[tokio::test]
async fn branding_colours_reach_the_page_only_when_well_formed() {
    let app = spawn_app().await;
    app.create_room(room_body(
        "brand",
        0,
        json!({ "branding": {
            "accentColor": "#c0392b",
            "backgroundColor": "#fdf6ec",
            "logoUrl": "https://cdn.example/logo.png"
        } }),
    ))
    .await;
    let shown = page(&app, "brand", None, "en").await;
    let config = page_config(&shown);
    assert_eq!(
        config["theme"],
        json!({ "accent": "#c0392b", "background": "#fdf6ec" })
    );
    assert!(
        shown
            .text
            .contains(r#"<img class="logo" src="https://cdn.example/logo.png""#),
        "{}",
        shown.text
    );
    // The room document itself refuses anything else, so nothing else can be inlined.
    let refused = app
        .admin_post(
            "/rooms",
            room_body("bad", 0, json!({ "branding": { "textColor": "red;}" } })),
        )
        .await;
    assert_eq!(refused.status, 400, "{}", refused.text);
}
