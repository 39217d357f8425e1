//! The WordPress plugin in real WordPress (Debian's package, PHP's built-in server, MariaDB):
//! the journey every server-side connector carries a visitor through, the fail-closed mode, the
//! settings screen's install check as an administrator runs it, the updater's offer from the
//! registry's `update` answer with the download's SHA-256 checked, and the protocol's edges
//! against a scripted old server (the `/api/check` fallback, a relative waiting page,
//! `clearToken`).

mod site;

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::Query;
use axum::http::HeaderMap;
use axum::routing::get;
use futures::FutureExt;
use qm_tests::process::free_addr;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::journey::{self, API_KEY, GHOST_ROOM, ROOM};
use crate::support::StandInServer;
use site::{ADMIN_PASSWORD, PhpServer, PluginSettings, WordPress};

/// The plugin's sources.
fn plugin_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../connectors/wordpress")
}

/// The version `connector.json` publishes (what the registry serves and compares).
fn manifest_version() -> String {
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(plugin_dir().join("connector.json")).expect("connector.json"),
    )
    .expect("connector.json is JSON");
    manifest["version"].as_str().expect("a version").to_owned()
}

/// The plugin states its version three times (the manifest, the header WordPress reads, the
/// constant it reports on its install check); a release that bumps one must bump them all.
#[test]
fn wordpress_plugin_version_is_the_manifest_version() {
    let source =
        std::fs::read_to_string(plugin_dir().join("queue-manager.php")).expect("the plugin");
    let version = manifest_version();
    let header = source
        .lines()
        .find_map(|line| line.trim_start_matches([' ', '*']).strip_prefix("Version:"))
        .map(str::trim);
    assert_eq!(
        header,
        Some(version.as_str()),
        "the plugin header's Version"
    );
    assert!(
        source.contains(&format!("const QUEUE_MANAGER_VERSION = '{version}';")),
        "QUEUE_MANAGER_VERSION is {version}"
    );
    // What the updater tells WordPress the plugin needs is what the plugin's header says.
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(plugin_dir().join("connector.json")).expect("connector.json"),
    )
    .expect("connector.json is JSON");
    for (field, header) in [
        ("requires", "Requires at least:"),
        ("requiresPhp", "Requires PHP:"),
    ] {
        let stated = source
            .lines()
            .find_map(|line| line.trim_start_matches([' ', '*']).strip_prefix(header))
            .map(str::trim);
        assert_eq!(stated, manifest[field].as_str(), "{header} is {field}");
    }
}

/// Runs `check`; when it fails, prints what WordPress and its servers logged first.
async fn with_logs<F: std::future::Future<Output = ()>>(
    wordpress: &WordPress,
    servers: &[&PhpServer],
    check: F,
) {
    if let Err(panic) = AssertUnwindSafe(check).catch_unwind().await {
        eprintln!("wordpress debug.log:\n{}", wordpress.debug_log());
        for server in servers {
            eprintln!("php -S {} log:\n{}", server.url, server.log());
        }
        std::panic::resume_unwind(panic);
    }
}

#[tokio::test]
async fn wordpress_plugin_carries_a_visitor_through_the_journey() {
    let app = journey::start_app().await;
    let site_addr = free_addr();
    let ghost_addr = free_addr();
    let site = format!("http://{site_addr}");
    journey::prepare_room(&app, &site).await;
    let wordpress = WordPress::install(
        &site,
        PluginSettings {
            server: &app.gateway,
            room_id: ROOM,
            api_key: API_KEY,
        },
    )
    .await;
    let main = wordpress.serve(site_addr, &[]).await;
    // The same WordPress as a second site configured for a room the server does not know, and
    // to fail closed: the unknown room must still pass (the server says so), and once the
    // server is down it answers 503.
    let ghost = wordpress
        .serve(
            ghost_addr,
            &[("QM_WP_ROOM", GHOST_ROOM), ("QM_WP_FAIL_MODE", "closed")],
        )
        .await;

    with_logs(&wordpress, &[&main, &ghost], async {
        journey::run(app, &main.url, &ghost.url, true).await;

        // The queue server is stopped now: the site that fails closed answers 503 with
        // Retry-After, and serves nothing of the page.
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("a reqwest client");
        let closed = client
            .get(format!("{}/shop/item", ghost.url))
            .send()
            .await
            .expect("GET the fail-closed site");
        assert_eq!(closed.status(), 503, "fail closed answers 503");
        assert_eq!(
            closed
                .headers()
                .get("retry-after")
                .and_then(|value| value.to_str().ok()),
            Some("30")
        );
        let body = closed.text().await.unwrap_or_default();
        assert!(!body.contains("site page"), "no page behind a 503: {body}");
        assert!(
            wordpress
                .debug_log()
                .contains("queue manager: the door check failed"),
            "the outage is logged"
        );
    })
    .await;
}

/// The value of the hidden `_wpnonce` field in the form whose tag holds `form_marker`.
fn nonce_in(html: &str, form_marker: &str) -> String {
    let form = html
        .find(form_marker)
        .unwrap_or_else(|| panic!("the page has the form {form_marker}"));
    let field = "name=\"_wpnonce\" value=\"";
    let start = html[form..].find(field).expect("the form has a nonce") + form + field.len();
    let end = html[start..].find('"').expect("the nonce ends") + start;
    html[start..end].to_owned()
}

/// The status the settings screen shows for the install check `id` (its table row).
fn check_status(html: &str, id: &str) -> Option<String> {
    let marker = format!("data-check=\"{id}\" data-status=\"");
    let start = html.find(&marker)? + marker.len();
    let end = html[start..].find('"')? + start;
    Some(html[start..end].to_owned())
}

#[tokio::test]
async fn wordpress_settings_screen_runs_the_install_check() {
    let app = journey::start_app().await;
    let site_addr = free_addr();
    let site = format!("http://{site_addr}");
    journey::prepare_room(&app, &site).await;
    let wordpress = WordPress::install(
        &site,
        PluginSettings {
            server: &app.gateway,
            room_id: ROOM,
            api_key: API_KEY,
        },
    )
    .await;
    let server = wordpress.serve(site_addr, &[]).await;
    let settings_page = format!("{site}/wp-admin/options-general.php?page=queue-manager");

    with_logs(&wordpress, &[&server], async {
        // The administrator logs in, as a browser would.
        let admin = reqwest::Client::builder()
            .cookie_store(true)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("a reqwest client");
        admin
            .get(format!("{site}/wp-login.php"))
            .send()
            .await
            .expect("GET wp-login.php");
        let login = admin
            .post(format!("{site}/wp-login.php"))
            .form(&[
                ("log", "admin"),
                ("pwd", ADMIN_PASSWORD),
                ("testcookie", "1"),
                ("redirect_to", &format!("{site}/wp-admin/")),
            ])
            .send()
            .await
            .expect("POST wp-login.php");
        assert_eq!(login.status(), 302, "the administrator is logged in");

        let page = admin
            .get(&settings_page)
            .send()
            .await
            .expect("GET settings");
        assert_eq!(page.status(), 200, "Settings → Queue Manager");
        let html = page.text().await.expect("the settings page");
        assert!(html.contains(&app.gateway), "the saved server is shown");
        assert!(!html.contains(API_KEY), "the API key is never printed back");
        assert!(
            html.contains("A key ending in 0123 is saved"),
            "the screen says a key is saved"
        );

        // Check installation: the server's install check, every check listed.
        let verify = |html: String, page: String| {
            let admin = admin.clone();
            let settings_page = settings_page.clone();
            async move {
                let nonce = nonce_in(&html, "id=\"queue-manager-verify\"");
                let answer = admin
                    .post(&settings_page)
                    .form(&[
                        ("_wpnonce", nonce.as_str()),
                        (
                            "_wp_http_referer",
                            "/wp-admin/options-general.php?page=queue-manager",
                        ),
                        ("queue_manager_verify", "1"),
                        ("queue_manager_verify_url", page.as_str()),
                    ])
                    .send()
                    .await
                    .expect("POST Check installation");
                assert_eq!(answer.status(), 200);
                answer.text().await.expect("the report")
            }
        };
        // A protected page: every check passes.
        let report = verify(html, format!("{site}/shop/item")).await;
        for id in [
            "api_key",
            "room_exists",
            "room_live",
            "origin_allowed",
            "url_in_scope",
            "target_in_scope",
        ] {
            assert_eq!(
                check_status(&report, id).as_deref(),
                Some("pass"),
                "the check {id} is listed as passing"
            );
        }
        assert!(
            report.contains("data-ok=\"true\""),
            "the installation is ready"
        );
        assert!(check_status(&report, "connector_version").is_some());
        assert!(
            !report.contains(API_KEY),
            "the report does not print the key"
        );

        // The server recorded the plugin's check-in, with its version and the site's origin.
        let listed = app
            .admin_call(
                reqwest::Method::GET,
                &format!("/rooms/{ROOM}/connectors"),
                None,
            )
            .await;
        assert_eq!(listed.status, 200, "{}", listed.text);
        let connectors = listed.body["connectors"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            connectors
                .iter()
                .any(|entry| entry["connector"] == "wordpress"
                    && entry["version"] == manifest_version().as_str()
                    && entry["origin"] == site.as_str()),
            "the plugin checked in: {}",
            listed.text
        );

        // Saving the form with the key field empty keeps the saved key; the new room id is
        // saved and the install check now says the room does not exist.
        let page = admin
            .get(&settings_page)
            .send()
            .await
            .expect("GET settings");
        let html = page.text().await.expect("the settings page");
        let nonce = nonce_in(&html, "id=\"queue-manager-settings\"");
        let saved = admin
            .post(format!("{site}/wp-admin/options.php"))
            .form(&[
                ("option_page", "queue_manager"),
                ("action", "update"),
                ("_wpnonce", nonce.as_str()),
                (
                    "_wp_http_referer",
                    "/wp-admin/options-general.php?page=queue-manager",
                ),
                ("queue_manager_settings[server]", app.gateway.as_str()),
                ("queue_manager_settings[room_id]", "not-yet-created"),
                ("queue_manager_settings[api_key]", ""),
                ("queue_manager_settings[fail_mode]", "closed"),
            ])
            .send()
            .await
            .expect("POST options.php");
        assert_eq!(saved.status(), 302, "the settings are saved");
        let stored: Value = serde_json::from_str(
            &wordpress
                .run_php(
                    "echo json_encode(get_option('queue_manager_settings'));",
                    &[],
                )
                .await,
        )
        .expect("the option as JSON");
        assert_eq!(
            stored,
            json!({
                "server": app.gateway,
                "room_id": "not-yet-created",
                "api_key": API_KEY,
                "fail_mode": "closed",
            })
        );
        let html = admin
            .get(&settings_page)
            .send()
            .await
            .expect("GET settings")
            .text()
            .await
            .expect("the settings page");
        // The default page to check is the home page.
        let report = verify(html, String::new()).await;
        assert_eq!(
            check_status(&report, "room_exists").as_deref(),
            Some("fail")
        );
        assert!(
            report.contains("data-ok=\"false\""),
            "the installation needs a fix"
        );
        assert_eq!(check_status(&report, "api_key").as_deref(), Some("pass"));
    })
    .await;
}

/// The registry stand-in: `/api/connectors/wordpress/update` in the updater's shape naming
/// `version` and a package whose published SHA-256 is `sha256`, and the package itself.
async fn registry(version: &'static str, package: &'static [u8], sha256: String) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the registry");
    let base = format!("http://{}", listener.local_addr().expect("an address"));
    let update = json!({
        "name": "Queue Manager",
        "slug": "queue-manager",
        "version": version,
        "new_version": version,
        "package": format!("{base}/connectors/wordpress/latest.zip"),
        "download_url": format!("{base}/connectors/wordpress/latest.zip"),
        "url": format!("{base}/docs/integration"),
        "requires": "5.6",
        "tested": "6.1",
        "requires_php": "7.3",
        "sha256": sha256,
        "sections": {
            "description": "<p>The waiting room's door.</p><script>alert(1)</script>",
            "changelog": "<ul><li>1.1.0: faster checks</li></ul>",
        },
    });
    let app = Router::new()
        .route(
            "/api/connectors/wordpress/update",
            get(move || async move { axum::Json(update) }),
        )
        .route(
            "/connectors/wordpress/latest.zip",
            get(move || async move { package }),
        );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    base
}

/// What WordPress's update machinery makes of the registry at `server`: the update_plugins
/// transient's entry, the "View details" box, and the download's integrity check.
const UPDATE_PROBE: &str = r#"
delete_transient('queue_manager_update');
require_once ABSPATH . 'wp-admin/includes/plugin-install.php';
$transient = new stdClass();
$transient->last_checked = time();
$transient->response = array();
$transient->no_update = array();
set_site_transient('update_plugins', $transient);
$stored = get_site_transient('update_plugins');
$plugin = 'queue-manager/queue-manager.php';
$info = plugins_api('plugin_information', array('slug' => 'queue-manager'));
$download = apply_filters('upgrader_pre_download', false, isset($stored->response[$plugin]) ? $stored->response[$plugin]->package : '', null, array());
echo json_encode(array(
    'response' => isset($stored->response[$plugin]) ? $stored->response[$plugin] : null,
    'no_update' => isset($stored->no_update[$plugin]) ? $stored->no_update[$plugin] : null,
    'info' => is_wp_error($info) ? $info->get_error_message() : $info,
    'download' => is_wp_error($download) ? array('error' => $download->get_error_code()) : ($download === false ? null : array('bytes' => file_get_contents($download))),
));
"#;

#[tokio::test]
async fn wordpress_plugin_offers_the_registry_update_and_checks_its_sha256() {
    const PACKAGE: &[u8] = b"PK the plugin's zip";
    let good = hex::encode(Sha256::digest(PACKAGE));
    let newer = registry("1.1.0", PACKAGE, good.clone()).await;
    let tampered = registry(
        "1.1.0",
        PACKAGE,
        hex::encode(Sha256::digest(b"other bytes")),
    )
    .await;
    let same = registry("1.0.0", PACKAGE, good).await;
    let site = format!("http://{}", free_addr());
    let wordpress = WordPress::install(
        &site,
        PluginSettings {
            server: &newer,
            room_id: ROOM,
            api_key: API_KEY,
        },
    )
    .await;

    with_logs(&wordpress, &[], async {
        let probe = |server: String| {
            let wordpress = &wordpress;
            async move {
                let printed = wordpress
                    .run_php(UPDATE_PROBE, &[("QM_WP_SERVER", server.as_str())])
                    .await;
                serde_json::from_str::<Value>(&printed)
                    .unwrap_or_else(|error| panic!("the probe prints JSON ({error}): {printed}"))
            }
        };

        // A newer release is offered, with the registry's package, and its details shown.
        let offered = probe(newer.clone()).await;
        let response = &offered["response"];
        assert_eq!(response["new_version"], "1.1.0", "{offered}");
        assert_eq!(response["slug"], "queue-manager");
        assert_eq!(response["plugin"], "queue-manager/queue-manager.php");
        assert_eq!(
            response["package"],
            format!("{newer}/connectors/wordpress/latest.zip")
        );
        assert_eq!(response["requires_php"], "7.3");
        assert!(offered["no_update"].is_null());
        let info = &offered["info"];
        assert_eq!(info["version"], "1.1.0", "{offered}");
        assert_eq!(
            info["download_link"],
            format!("{newer}/connectors/wordpress/latest.zip")
        );
        let description = info["sections"]["description"].as_str().unwrap_or("");
        assert!(description.contains("The waiting room's door"), "{offered}");
        assert!(
            !description.contains("<script"),
            "the details are kses-filtered"
        );
        assert!(
            info["sections"]["changelog"]
                .as_str()
                .unwrap_or("")
                .contains("1.1.0")
        );
        // The package matches its SHA-256: WordPress gets the downloaded file.
        assert_eq!(
            offered["download"]["bytes"],
            String::from_utf8_lossy(PACKAGE).as_ref(),
            "{offered}"
        );

        // A package that does not match the published SHA-256 is refused.
        let refused = probe(tampered).await;
        assert_eq!(refused["response"]["new_version"], "1.1.0");
        assert_eq!(
            refused["download"]["error"], "queue_manager_integrity",
            "{refused}"
        );

        // The same version is no update: listed under no_update, nothing offered.
        let current = probe(same).await;
        assert!(current["response"].is_null(), "{current}");
        assert_eq!(current["no_update"]["new_version"], "1.0.0");

        // Deleting the plugin runs uninstall.php: its settings leave the database.
        let uninstalled = wordpress
            .run_php(
                "require_once ABSPATH . 'wp-admin/includes/plugin.php';\n\
                 deactivate_plugins('queue-manager/queue-manager.php');\n\
                 uninstall_plugin('queue-manager/queue-manager.php');\n\
                 echo json_encode(get_option('queue_manager_settings'));",
                &[],
            )
            .await;
        assert_eq!(uninstalled.trim(), "false", "the settings are deleted");
    })
    .await;
}

/// What the stand-in for an old queue server saw of the door checks that reached it.
#[derive(Clone, Default)]
struct OldServer {
    prefixed: Arc<AtomicUsize>,
    checks: Arc<Mutex<Vec<Value>>>,
}

/// A queue server older than the `/api/v1` prefix: `/api/v1/check` is its framework's plain
/// 404, `/api/check` answers as the contract says: a pass with a key for a token, a dead-key
/// queue (`clearToken`) for the key `FORGED_KEY`, else a queue to a relative waiting page.
async fn old_server() -> (String, OldServer) {
    let seen = OldServer::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the old server");
    let base = format!("http://{}", listener.local_addr().expect("an address"));
    let prefixed = seen.prefixed.clone();
    let checks = seen.checks.clone();
    let app = Router::new()
        .route(
            "/api/v1/check",
            get(move || async move {
                prefixed.fetch_add(1, Ordering::SeqCst);
                (axum::http::StatusCode::NOT_FOUND, "Not Found")
            }),
        )
        .route(
            "/api/check",
            get(
                move |Query(query): Query<HashMap<String, String>>, headers: HeaderMap| async move {
                    let header = |name: &str| {
                        headers
                            .get(name)
                            .and_then(|value| value.to_str().ok())
                            .map(str::to_owned)
                    };
                    let session = header("x-qm-session");
                    checks.lock().expect("the check log").push(json!({
                        "query": query,
                        "authorization": header("authorization"),
                        "session": session,
                    }));
                    let answer = if query.contains_key("token") {
                        json!({"action": "pass", "reason": "passed", "sess": NEW_KEY})
                    } else if session.as_deref() == Some(FORGED_KEY) {
                        json!({"action": "queue", "reason": "session_ended", "clearToken": true,
                               "waitingRoomUrl": "/w/launch"})
                    } else {
                        json!({"action": "queue", "reason": "no_token", "waitingRoomUrl": "/w/launch"})
                    };
                    axum::Json(answer)
                },
            ),
        );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (base, seen)
}

/// A key the old server says has ended.
const FORGED_KEY: &str = "forged-key-0123456789";
/// The key the old server hands out for a token.
const NEW_KEY: &str = "fresh-key-0123456789abcdef";

#[tokio::test]
async fn wordpress_plugin_falls_back_to_an_old_server_and_honours_clear_token() {
    let (server, seen) = old_server().await;
    let site_addr = free_addr();
    let site = format!("http://{site_addr}");
    let wordpress = WordPress::install(
        &site,
        PluginSettings {
            server: &server,
            room_id: ROOM,
            api_key: API_KEY,
        },
    )
    .await;
    let php = wordpress.serve(site_addr, &[]).await;

    with_logs(&wordpress, &[&php], async {
        // A fresh visitor: /api/v1/check is not there, /api/check is asked, vouched for the
        // visitor, and its relative waiting page is made absolute against the server.
        let page = format!("{site}/shop/item?colour=red");
        let first = journey::visit(&page, None).await;
        assert_eq!(first.status, 302, "{}", first.body);
        let waiting = format!(
            "{server}/w/launch?qm_return={}",
            url::form_urlencoded::byte_serialize(page.as_bytes())
                .collect::<String>()
                .replace('+', "%20")
        );
        assert_eq!(first.location.as_deref(), Some(waiting.as_str()));
        assert_eq!(first.cache_control.as_deref(), Some("no-store"));
        {
            let checks = seen.checks.lock().expect("the check log");
            let check = &checks[0];
            assert_eq!(check["query"]["roomId"], ROOM);
            assert_eq!(check["query"]["url"], page.as_str());
            assert_eq!(check["query"]["ip"], "127.0.0.1");
            assert_eq!(check["query"]["agent"], "Mozilla/5.0 (journey)");
            assert!(check["query"].get("key").is_none(), "no key in the URL");
            assert_eq!(check["authorization"], format!("Bearer {API_KEY}"));
            assert!(check["session"].is_null());
        }

        // The next page goes straight to /api/check: the old server is remembered.
        journey::visit(&format!("{site}/shop/other"), None).await;
        assert_eq!(
            seen.prefixed.load(Ordering::SeqCst),
            1,
            "asked /api/v1 once"
        );
        assert_eq!(seen.checks.lock().expect("the check log").len(), 2);

        // A returned pass: checked with token=, the page URL without qm_token (the other
        // parameters kept as sent), the key stored, and a 302 to the clean URL.
        let returned = journey::visit(
            &format!("{site}/shop/item?a=1&qm_token=tok.sig&b=%20x"),
            None,
        )
        .await;
        assert_eq!(returned.status, 302);
        assert_eq!(
            returned.location.as_deref(),
            Some(format!("{site}/shop/item?a=1&b=%20x").as_str())
        );
        let line = returned
            .cookie_line(&journey::session_cookie())
            .unwrap_or_default()
            .to_owned();
        assert!(
            line.starts_with(&format!("qm_dk_{ROOM}={NEW_KEY};")),
            "{line}"
        );
        let lower = line.to_ascii_lowercase();
        for attribute in ["httponly", "path=/", "samesite=lax"] {
            assert!(lower.contains(attribute), "{attribute} on {line}");
        }
        assert!(!lower.contains("secure"), "no Secure on plain http: {line}");
        {
            let checks = seen.checks.lock().expect("the check log");
            let check = checks.last().expect("a check");
            assert_eq!(check["query"]["token"], "tok.sig");
            assert_eq!(
                check["query"]["url"],
                format!("{site}/shop/item?a=1&b=%20x")
            );
        }

        // A key the server says is dead: sent as X-QM-Session, then dropped (Max-Age=0) as
        // the visitor is sent to the waiting page.
        let dead = journey::visit(
            &format!("{site}/shop/item"),
            Some(&format!("qm_dk_{ROOM}={FORGED_KEY}")),
        )
        .await;
        assert_eq!(dead.status, 302);
        assert_eq!(
            seen.checks
                .lock()
                .expect("the check log")
                .last()
                .expect("a check")["session"],
            FORGED_KEY
        );
        let expired = dead
            .cookie_line(&journey::session_cookie())
            .unwrap_or_default()
            .to_ascii_lowercase();
        assert!(
            expired.contains("max-age=0"),
            "the key is dropped: {expired}"
        );
    })
    .await;
}

/// WordPress's own upgrader installs the plugin from the server's registry, as "Upload Plugin"
/// or WP-CLI would: the zip the gateway serves is downloaded, unpacked into
/// `wp-content/plugins/queue-manager/` and activated, at the registry's version.
const INSTALL_FROM_REGISTRY: &str = r#"
require_once ABSPATH . 'wp-admin/includes/plugin.php';
require_once ABSPATH . 'wp-admin/includes/file.php';
require_once ABSPATH . 'wp-admin/includes/class-wp-upgrader.php';
$plugin = 'queue-manager/queue-manager.php';
deactivate_plugins($plugin);
$deleted = delete_plugins(array($plugin));
// A fresh site has no Queue Manager filters, and lets download_url reach only ports 80, 443
// and 8080 of its own host: the test's gateway listens on another.
remove_all_filters('upgrader_pre_download');
add_filter('http_allowed_safe_ports', function ($ports) { $ports[] = (int) getenv('QM_WP_REGISTRY_PORT'); return $ports; });
$skin = new Automatic_Upgrader_Skin();
$installed = (new Plugin_Upgrader($skin))->install(getenv('QM_WP_PACKAGE'));
$activated = activate_plugin($plugin);
$data = get_plugin_data(WP_PLUGIN_DIR . '/' . $plugin, false, false);
$files = array();
foreach (new RecursiveIteratorIterator(new RecursiveDirectoryIterator(WP_PLUGIN_DIR . '/queue-manager', FilesystemIterator::SKIP_DOTS)) as $file) {
    $files[] = substr($file->getPathname(), strlen(WP_PLUGIN_DIR . '/queue-manager/'));
}
sort($files);
echo json_encode(array(
    'deleted' => $deleted === true,
    'installed' => $installed === true,
    'messages' => $skin->get_upgrade_messages(),
    'activated' => !is_wp_error($activated) && is_plugin_active($plugin),
    'version' => $data['Version'],
    'files' => $files,
));
"#;

#[tokio::test]
async fn wordpress_installs_the_plugin_from_the_registry_and_sees_no_newer_version() {
    let app = journey::start_app().await;
    let site = format!("http://{}", free_addr());
    let wordpress = WordPress::install(
        &site,
        PluginSettings {
            server: &app.gateway,
            room_id: ROOM,
            api_key: API_KEY,
        },
    )
    .await;
    let listing = app
        .get(&format!("{}/api/connectors", app.gateway))
        .await
        .body;
    let entry = listing["connectors"]
        .as_array()
        .and_then(|entries| entries.iter().find(|entry| entry["name"] == "wordpress"))
        .cloned()
        .unwrap_or_else(|| panic!("the registry lists the plugin: {listing}"));
    let version = manifest_version();
    let package = format!("{}/connectors/wordpress/latest.zip", app.gateway);
    assert_eq!(entry["download"], package.as_str());

    with_logs(&wordpress, &[], async {
        // The registry's version is the installed one: listed under no_update, nothing
        // offered, the details box from the registry, and the served zip matches its SHA-256.
        let probe = wordpress
            .run_php(UPDATE_PROBE, &[("QM_WP_SERVER", app.gateway.as_str())])
            .await;
        let current: Value = serde_json::from_str(&probe)
            .unwrap_or_else(|error| panic!("the probe prints JSON ({error}): {probe}"));
        assert!(current["response"].is_null(), "{current}");
        assert_eq!(current["no_update"]["new_version"], version.as_str());
        assert_eq!(current["no_update"]["package"], package.as_str());
        assert_eq!(current["no_update"]["requires_php"], "7.3");
        assert_eq!(current["info"]["version"], version.as_str(), "{current}");
        assert!(
            current["info"]["sections"]["changelog"]
                .as_str()
                .unwrap_or("")
                .contains("The first release"),
            "{current}"
        );
        let checked = wordpress
            .run_php(
                "$file = queue_manager_verify_download(false, getenv('QM_WP_PACKAGE'), null);\n\
                 echo is_wp_error($file) ? $file->get_error_code() : hash_file('sha256', $file);",
                &[
                    ("QM_WP_SERVER", app.gateway.as_str()),
                    ("QM_WP_PACKAGE", package.as_str()),
                ],
            )
            .await;
        assert_eq!(checked, entry["sha256"].as_str().expect("sha256"));

        // WordPress's upgrader installs the served zip and the plugin activates from it.
        let port = url::Url::parse(&app.gateway)
            .expect("the gateway URL")
            .port()
            .expect("a port")
            .to_string();
        let printed = wordpress
            .run_php(
                INSTALL_FROM_REGISTRY,
                &[
                    ("QM_WP_PACKAGE", package.as_str()),
                    ("QM_WP_REGISTRY_PORT", port.as_str()),
                ],
            )
            .await;
        let installed: Value = serde_json::from_str(&printed)
            .unwrap_or_else(|error| panic!("the install prints JSON ({error}): {printed}"));
        assert_eq!(installed["deleted"], true, "{installed}");
        assert_eq!(installed["installed"], true, "{installed}");
        assert_eq!(installed["activated"], true, "{installed}");
        assert_eq!(installed["version"], version.as_str());
        assert_eq!(
            installed["files"],
            json!([
                "includes/settings.php",
                "includes/updates.php",
                "queue-manager.php",
                "uninstall.php"
            ])
        );
    })
    .await;
}

#[tokio::test]
async fn wordpress_plugin_fails_by_its_mode_when_the_server_answers_badly_or_not_at_all() {
    // A proxy in front of a dead queue server: 502 with an HTML page to everything.
    let broken = StandInServer::broken().await;
    let open_addr = free_addr();
    let closed_addr = free_addr();
    let site = format!("http://{open_addr}");
    let wordpress = WordPress::install(
        &site,
        PluginSettings {
            server: &broken.url,
            room_id: ROOM,
            api_key: API_KEY,
        },
    )
    .await;
    let open = wordpress.serve(open_addr, &[]).await;
    let closed = wordpress
        .serve(closed_addr, &[("QM_WP_FAIL_MODE", "closed")])
        .await;
    // A server that takes the connection and never answers: the 2 s timeout gives up on it.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the silent server");
    let silent_url = format!("http://{}", silent.local_addr().expect("an address"));
    let hung_addr = free_addr();
    let hung = wordpress
        .serve(hung_addr, &[("QM_WP_SERVER", silent_url.as_str())])
        .await;

    with_logs(&wordpress, &[&open, &closed, &hung], async {
        let served = journey::visit(&format!("{}/shop/item", open.url), None).await;
        assert!(
            journey::served(&served, "/shop/item"),
            "a 502 fails open by default: {} {}",
            served.status,
            served.body
        );
        assert!(
            !broken.seen_on("/api/v1/check").is_empty(),
            "the check reached the broken server"
        );
        assert!(
            broken.seen_on("/api/check").is_empty(),
            "a 502 is not the old-server 404: no fall back"
        );

        let refused = journey::visit(&format!("{}/shop/item", closed.url), None).await;
        assert_eq!(refused.status, 503, "a 502 fails closed when asked to");
        assert_eq!(refused.cache_control.as_deref(), Some("no-store"));
        assert!(!refused.body.contains("site page"));

        let started = std::time::Instant::now();
        let waited = journey::visit(&format!("{}/shop/item", hung.url), None).await;
        let elapsed = started.elapsed();
        assert!(
            journey::served(&waited, "/shop/item"),
            "a server that never answers fails open"
        );
        assert!(
            elapsed >= std::time::Duration::from_millis(1900)
                && elapsed < std::time::Duration::from_secs(6),
            "given up on after the 2 s timeout, took {elapsed:?}"
        );
    })
    .await;
    drop(silent);
}
