//! The Tag Manager template (`connectors/gtm/template.tpl`): validated against the exported
//! template format (its sections, the JSON ones parsed, every `require`d API a permitted one and
//! covered by a permission whose URLs name only the configured server, no browser global in the
//! sandboxed code), then its sandboxed code run in headless Chromium through a harness
//! (`gtm_harness.js`) that gives `require` ONLY the permitted APIs and enforces the template's
//! own permissions. Run that way it injects the snippet, which carries a visitor through the
//! connector journey; its install check loads `verify.gif` (200 for a good setup, 424 for an
//! origin the room does not list) and logs the verdict.

use std::collections::BTreeMap;
use std::sync::Arc;

use qm_tests::browser::{self, Browser, wait_for};
use serde_json::{Value, json};

use super::journey::{prepare_room, start_app};
use super::snippet::{SHOWN, Site, assert_stays, journey, room_of};

/// The origin the template ships with in its permissions, which an installer replaces with
/// their queue server's.
const PLACEHOLDER_SERVER: &str = "https://queue.example.com";

/// The APIs the template may `require`, and the permission each needs (`None`: none).
const PERMITTED_APIS: &[(&str, Option<&str>)] = &[
    ("injectScript", Some("inject_script")),
    ("sendPixel", Some("send_pixel")),
    ("logToConsole", Some("logging")),
    ("getUrl", Some("get_url")),
    ("encodeUriComponent", None),
    ("queryPermission", None),
];

/// Names the sandboxed code must never reach for: the sandbox has no browser globals.
const BROWSER_GLOBALS: &[&str] = &[
    "window",
    "document",
    "location",
    "navigator",
    "globalThis",
    "XMLHttpRequest",
    "fetch",
    "localStorage",
    "sessionStorage",
    "setTimeout",
    "console",
    "eval",
];

const SECTIONS: &[&str] = &[
    "___TERMS_OF_SERVICE___",
    "___INFO___",
    "___TEMPLATE_PARAMETERS___",
    "___SANDBOXED_JS_FOR_WEB_TEMPLATE___",
    "___WEB_PERMISSIONS___",
    "___TESTS___",
    "___NOTES___",
];

fn template() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../connectors/gtm/template.tpl"
    );
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("read {path}: {error}"))
}

/// The template's sections by name (a line `___NAME___` opens one).
fn sections(text: &str) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.len() > 6
            && trimmed.starts_with("___")
            && trimmed.ends_with("___")
            && trimmed.chars().all(|c| c.is_ascii_uppercase() || c == '_')
        {
            if let Some((name, body)) = current.take() {
                found.insert(name, body);
            }
            current = Some((trimmed.to_owned(), String::new()));
        } else if let Some((_, body)) = current.as_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    if let Some((name, body)) = current {
        found.insert(name, body);
    }
    found
}

/// The sandboxed code with its comments and string literals blanked, so only code is searched.
pub(crate) fn code_only(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut chars = code.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for next in chars.by_ref() {
                    if next == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                for next in chars.by_ref() {
                    if last == '*' && next == '/' {
                        break;
                    }
                    last = next;
                }
                out.push(' ');
            }
            '\'' | '"' => {
                let quote = c;
                let mut escaped = false;
                for next in chars.by_ref() {
                    if escaped {
                        escaped = false;
                    } else if next == '\\' {
                        escaped = true;
                    } else if next == quote {
                        break;
                    }
                }
                out.push_str("''");
            }
            _ => out.push(c),
        }
    }
    out
}

/// The identifiers of `code` (letters, digits, `_`, `$`), each with whether a `.` comes right
/// before it (a property, not a variable).
fn identifiers(code: &str) -> Vec<(String, bool)> {
    let mut found = Vec::new();
    let mut current = String::new();
    let mut after_dot = false;
    let mut last_significant = ' ';
    for c in code.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_alphanumeric() || c == '_' || c == '$' {
            if current.is_empty() {
                after_dot = last_significant == '.';
            }
            current.push(c);
        } else {
            if !current.is_empty() {
                found.push((std::mem::take(&mut current), after_dot));
                last_significant = 'a';
            }
            if !c.is_whitespace() {
                last_significant = c;
            }
        }
    }
    found
}

/// The APIs the code `require`s.
fn required_apis(code: &str) -> Vec<String> {
    code.split("require(")
        .skip(1)
        .map(|rest| {
            let quote = rest.chars().next().expect("require( is followed by a name");
            assert!(
                quote == '\'' || quote == '"',
                "require takes a literal name: {rest:.40}"
            );
            rest[1..]
                .split(quote)
                .next()
                .expect("a closed literal")
                .to_owned()
        })
        .collect()
}

/// The permissions of `___WEB_PERMISSIONS___`, by public id, with the URL patterns of each
/// (`urls`), after replacing the placeholder server with `server`.
fn permissions(section: &str, server: &str) -> BTreeMap<String, Vec<String>> {
    let parsed: Value = serde_json::from_str(section).expect("___WEB_PERMISSIONS___ is JSON");
    let mut found = BTreeMap::new();
    for permission in parsed.as_array().expect("a list of permissions") {
        let id = permission["instance"]["key"]["publicId"]
            .as_str()
            .expect("a permission names its publicId")
            .to_owned();
        let mut urls = Vec::new();
        for param in permission["instance"]["param"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if param["key"] == "urls" {
                for item in param["value"]["listItem"].as_array().into_iter().flatten() {
                    let pattern = item["string"].as_str().expect("a URL pattern");
                    urls.push(pattern.replacen(PLACEHOLDER_SERVER, server, 1));
                }
            }
        }
        found.insert(id, urls);
    }
    found
}

#[test]
fn the_template_is_a_well_formed_sandboxed_template_reaching_only_its_server() {
    let text = template();
    let found = sections(&text);
    for name in SECTIONS {
        assert!(found.contains_key(*name), "the template has {name}");
    }
    for name in [
        "___INFO___",
        "___TEMPLATE_PARAMETERS___",
        "___WEB_PERMISSIONS___",
    ] {
        serde_json::from_str::<Value>(&found[name])
            .unwrap_or_else(|error| panic!("{name} is JSON: {error}"));
    }
    let info: Value = serde_json::from_str(&found["___INFO___"]).expect("JSON");
    assert_eq!(info["type"], "TAG");
    assert_eq!(info["containerContexts"], json!(["WEB"]));
    let parameters: Value =
        serde_json::from_str(&found["___TEMPLATE_PARAMETERS___"]).expect("JSON");
    let names: Vec<&str> = parameters
        .as_array()
        .expect("a list of parameters")
        .iter()
        .filter_map(|parameter| parameter["name"].as_str())
        .collect();
    assert_eq!(names, ["server", "roomId", "failMode", "checkInstall"]);
    assert!(found["___TESTS___"].contains("scenarios:"));

    let code = &found["___SANDBOXED_JS_FOR_WEB_TEMPLATE___"];
    let stripped = code_only(code);
    let granted = permissions(&found["___WEB_PERMISSIONS___"], PLACEHOLDER_SERVER);
    let required = required_apis(code);
    assert!(!required.is_empty(), "the code requires its APIs");
    for api in &required {
        let Some((_, permission)) = PERMITTED_APIS.iter().find(|(name, _)| name == api) else {
            panic!("{api} is not one of the APIs the template may use");
        };
        if let Some(permission) = permission {
            assert!(
                granted.contains_key(*permission),
                "{api} needs the {permission} permission"
            );
        }
    }
    for id in granted.keys() {
        assert!(
            PERMITTED_APIS
                .iter()
                .any(|(api, permission)| *permission == Some(id.as_str())
                    && required.iter().any(|name| name == api)),
            "the permission {id} is asked for but no required API needs it"
        );
    }
    // The URLs the template may reach are its server's two, and nothing else.
    assert_eq!(
        granted["inject_script"],
        [format!("{PLACEHOLDER_SERVER}/snippet/latest.js")]
    );
    assert_eq!(
        granted["send_pixel"],
        [format!("{PLACEHOLDER_SERVER}/api/verify.gif")]
    );
    for (name, after_dot) in identifiers(&stripped) {
        assert!(
            after_dot || !BROWSER_GLOBALS.contains(&name.as_str()),
            "the sandboxed code names the browser global {name}"
        );
    }
    assert!(
        stripped.contains("data.gtmOnSuccess()") && stripped.contains("data.gtmOnFailure()"),
        "the tag reports its outcome"
    );
    let manifest_path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../connectors/gtm/connector.json"
    );
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(manifest_path).expect("read the gtm manifest"),
    )
    .expect("connector.json is JSON");
    let version = manifest["version"].as_str().expect("a version");
    assert!(
        code.contains(&format!("const VERSION = '{version}';")),
        "the template's version is its manifest's ({version})"
    );
}

/// The harness tags for a page: the tag's fields for the page's room, `failMode` closed under
/// `/closed/`, the install check under `/check/`.
fn gtm_tags(server: &str, path: &str) -> String {
    let found = sections(&template());
    let code = &found["___SANDBOXED_JS_FOR_WEB_TEMPLATE___"];
    let granted = permissions(&found["___WEB_PERMISSIONS___"], server);
    let mut allowed = serde_json::Map::new();
    for (id, urls) in granted {
        allowed.insert(
            id,
            if urls.is_empty() {
                json!(true)
            } else {
                json!(urls)
            },
        );
    }
    let data = json!({
        "server": server,
        "roomId": room_of(path),
        "failMode": if path.starts_with("/closed/") { "closed" } else { "open" },
        "checkInstall": path.starts_with("/check/"),
    });
    // JSON is a JavaScript literal; `</` is escaped so no string can close the script element.
    let literal = |value: &Value| value.to_string().replace("</", "<\\/");
    format!(
        "<script src=\"/gtm-harness.js\"></script><script>QMGTM.run({}, {}, {});</script>",
        literal(&json!(code)),
        literal(&data),
        literal(&Value::Object(allowed))
    )
}

async fn gtm_site(server: String) -> Site {
    Site::start(
        Arc::new(move |path: &str| gtm_tags(&server, path)),
        vec![(
            "/gtm-harness.js".to_owned(),
            "text/javascript; charset=utf-8",
            include_str!("gtm_harness.js").to_owned(),
        )],
    )
    .await
}

/// What the harness recorded: `QMGTM[field]`.
async fn recorded(browser: &Browser, field: &str) -> Value {
    browser
        .js(
            "return window.QMGTM ? window.QMGTM[arguments[0]] : null;",
            vec![json!(field)],
        )
        .await
        .expect("read the harness")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_template_run_in_the_sandbox_carries_a_visitor_through_the_journey() {
    browser::run(180, async {
        let app = start_app().await;
        let site = gtm_site(app.gateway.clone()).await;
        prepare_room(&app, &site.url).await;
        journey(app, &site).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_install_check_passes_for_a_listed_origin_and_fails_for_another() {
    browser::run(120, async {
        let app = start_app().await;
        let site = gtm_site(app.gateway.clone()).await;
        prepare_room(&app, &site.url).await;
        let browser = Browser::open().await;

        // A good setup: the site's origin is the room's; verify.gif answers 200.
        let good = format!("{}/check/about", site.url);
        browser.goto(&good).await;
        assert_stays(&browser, &good, "pass", Some("out_of_scope")).await;
        let log = wait_for("the install check to pass", SHOWN, || async {
            let log = recorded(&browser, "log").await;
            if log.to_string().contains("install check passed") {
                Ok(log)
            } else {
                Err(format!("log {log}"))
            }
        })
        .await;
        assert!(!log.to_string().contains("FAILED"), "{log}");
        assert_eq!(recorded(&browser, "outcome").await, json!("success"));
        let pixels = recorded(&browser, "pixels").await;
        let pixel = pixels[0].as_str().expect("one pixel").to_owned();
        assert!(
            pixel.starts_with(&format!(
                "{}/api/verify.gif?roomId=launch&origin=",
                app.gateway
            )) && pixel.contains("connector=gtm&version=1.0.0"),
            "{pixel}"
        );
        let injected = recorded(&browser, "injected").await;
        assert_eq!(
            injected,
            json!([format!("{}/snippet/latest.js?room=launch", app.gateway)])
        );
        let answered = app.send(app.http.get(&pixel)).await;
        assert_eq!(answered.status, 200, "{}", answered.text);

        // The same page on an origin the room does not list: 424, the failure is logged.
        let port = site.url.rsplit(':').next().expect("a port");
        let other = format!("http://127.0.0.1:{port}/check/about");
        browser.goto(&other).await;
        let log = wait_for("the install check to fail", SHOWN, || async {
            let log = recorded(&browser, "log").await;
            if log.to_string().contains("install check FAILED") {
                Ok(log)
            } else {
                Err(format!("log {log}"))
            }
        })
        .await;
        assert!(
            log.to_string().contains("/api/verify?roomId=launch"),
            "{log}"
        );
        let pixels = recorded(&browser, "pixels").await;
        let pixel = pixels[0].as_str().expect("one pixel").to_owned();
        let answered = app.send(app.http.get(&pixel)).await;
        assert_eq!(answered.status, 424, "{}", answered.text);
        assert!(
            answered
                .headers
                .get("x-qm-verify")
                .and_then(|value| value.to_str().ok())
                .is_some_and(|ids| ids.contains("origin_allowed")),
            "{:?}",
            answered.headers
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sandbox_refuses_a_server_outside_the_templates_permissions() {
    browser::run(60, async {
        let app = start_app().await;
        // The permissions name the gateway; the tag is configured with another server.
        let server = app.gateway.clone();
        let site = Site::start(
            Arc::new(move |path: &str| {
                gtm_tags(&server, path).replace(
                    &format!("\"server\":\"{server}\""),
                    "\"server\":\"http://127.0.0.1:9\"",
                )
            }),
            vec![(
                "/gtm-harness.js".to_owned(),
                "text/javascript; charset=utf-8",
                include_str!("gtm_harness.js").to_owned(),
            )],
        )
        .await;
        let browser = Browser::open().await;
        browser.goto(&format!("{}/shop/item", site.url)).await;
        wait_for("the tag to fail", SHOWN, || async {
            match recorded(&browser, "outcome").await {
                Value::String(outcome) if outcome == "failure" => Ok(()),
                other => Err(format!("outcome {other}")),
            }
        })
        .await;
        assert_eq!(recorded(&browser, "injected").await, json!([]));
        let log = recorded(&browser, "log").await;
        assert!(log.to_string().contains("not allowed"), "{log}");
    })
    .await;
}
