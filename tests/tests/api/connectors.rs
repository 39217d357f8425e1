//! The connector registry as served: `GET /api/connectors` lists every shipped connector with
//! absolute links and the digests of the bytes `/connectors/<name>/latest.*` really serves; the
//! archives unpack to the layout their installers expect; the snippet is served under a stable
//! and a content-addressed name; the WordPress updater's shape; the shared CHECK_LIMIT_PER_MIN
//! budget; /api/v1 and /api alike; unknown names 404.

use std::io::Read as _;

use base64::Engine as _;
use qm_tests::{TestApp, spawn_app, spawn_app_with};
use serde_json::Value;
use sha2::{Digest, Sha256};

const SIX: [&str; 6] = ["gtm", "nginx", "node", "snippet", "wordpress", "worker"];

/// A served file: status, headers and the exact bytes.
struct Served {
    status: u16,
    headers: reqwest::header::HeaderMap,
    bytes: Vec<u8>,
}

impl Served {
    fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("")
    }
}

async fn fetch(app: &TestApp, url: &str, if_none_match: Option<&str>) -> Served {
    let mut request = app.http.get(url);
    if let Some(etag) = if_none_match {
        request = request.header(reqwest::header::IF_NONE_MATCH, etag);
    }
    let response = request.send().await.expect("request reaches the server");
    Served {
        status: response.status().as_u16(),
        headers: response.headers().clone(),
        bytes: response
            .bytes()
            .await
            .map(|b| b.to_vec())
            .unwrap_or_default(),
    }
}

async fn listing(app: &TestApp) -> Vec<Value> {
    let reply = app.get(&format!("{}/api/connectors", app.gateway)).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.body["connectors"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn entry<'a>(entries: &'a [Value], name: &str) -> &'a Value {
    entries
        .iter()
        .find(|entry| entry["name"] == name)
        .unwrap_or_else(|| panic!("no connector {name} in {entries:?}"))
}

fn entries_of(value: &Value) -> Vec<Value> {
    value.as_array().cloned().unwrap_or_default()
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|item| item.as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn the_registry_lists_all_six_with_absolute_links_and_steps() {
    let app = spawn_app().await;
    let entries = listing(&app).await;
    let names: Vec<&str> = entries
        .iter()
        .filter_map(|entry| entry["name"].as_str())
        .collect();
    assert_eq!(names, SIX);
    for entry in &entries {
        let name = entry["name"].as_str().unwrap_or("");
        let artifact = entry["artifact"].as_str().unwrap_or("");
        assert_eq!(
            entry["download"],
            format!("{}/connectors/{name}/latest.{artifact}", app.gateway),
            "absolute against the server's own host"
        );
        assert!(entry["version"].is_string() && entry["title"].is_string());
        for step in ["install", "upgrade", "verify"] {
            let text = entry[step].as_str().unwrap_or("");
            assert!(!text.is_empty() && !text.contains("{server}"), "{text}");
        }
    }
    let snippet = entry(&entries, "snippet");
    assert!(
        snippet["install"]
            .as_str()
            .unwrap_or("")
            .contains(&format!("{}/snippet/latest.js", app.gateway)),
        "{snippet}"
    );
    assert!(
        snippet["install"]
            .as_str()
            .unwrap_or("")
            .contains("{roomId}"),
        "no roomId asked: the placeholder stays"
    );

    let for_room = app
        .get(&format!("{}/api/connectors?roomId=sale", app.gateway))
        .await;
    let room_entries = entries_of(&for_room.body["connectors"]);
    let install = entry(&room_entries, "snippet")["install"]
        .as_str()
        .unwrap_or("");
    assert!(install.contains(r#"data-room="sale""#), "{install}");
    let bad = app
        .get(&format!(
            "{}/api/connectors?roomId=Not%20A%20Room",
            app.gateway
        ))
        .await;
    assert_eq!(bad.status, 400, "{}", bad.text);
    assert_eq!(bad.code(), "invalid_room_id");
}

#[tokio::test]
async fn public_url_makes_every_link_and_the_listing_revalidates() {
    let app = spawn_app_with(&[("PUBLIC_URL", "https://queue.example")]).await;
    let reply = app.get(&format!("{}/api/connectors", app.gateway)).await;
    for entry in reply.body["connectors"].as_array().into_iter().flatten() {
        let download = entry["download"].as_str().unwrap_or("");
        assert!(
            download.starts_with("https://queue.example/connectors/"),
            "{download}"
        );
    }
    assert_eq!(reply.header("cache-control"), Some("no-cache"));
    let etag = reply.header("etag").unwrap_or("").to_owned();
    assert!(etag.starts_with('"'), "{etag}");
    let again = fetch(
        &app,
        &format!("{}/api/connectors", app.gateway),
        Some(&etag),
    )
    .await;
    assert_eq!(again.status, 304);
    assert!(again.bytes.is_empty());
    assert_eq!(again.header("etag"), etag);
}

#[tokio::test]
async fn every_artifact_hashes_to_its_published_digest_and_unpacks_as_listed() {
    let app = spawn_app().await;
    for entry in listing(&app).await {
        let name = entry["name"].as_str().unwrap_or("").to_owned();
        let download = entry["download"].as_str().unwrap_or("");
        let served = fetch(&app, download, None).await;
        assert_eq!(served.status, 200, "{name}");
        let digest = Sha256::digest(&served.bytes);
        let sha256 = hex_of(&digest);
        assert_eq!(entry["sha256"], sha256, "{name}: the served bytes' SHA-256");
        let integrity = format!(
            "sha256-{}",
            base64::engine::general_purpose::STANDARD.encode(digest)
        );
        assert_eq!(entry["integrity"], integrity, "{name}");
        assert_eq!(served.header("etag"), format!("\"{sha256}\""), "{name}");
        assert_eq!(served.header("cache-control"), "public, max-age=300");
        assert_eq!(served.header("access-control-allow-origin"), "*");
        let files = strings(&entry["files"]);
        match entry["artifact"].as_str().unwrap_or("") {
            "js" => {
                assert_eq!(
                    served.header("content-type"),
                    "application/javascript; charset=utf-8"
                );
                assert_eq!(served.header("content-disposition"), "");
            }
            "tgz" => {
                assert_eq!(served.header("content-type"), "application/gzip");
                assert!(
                    served
                        .header("content-disposition")
                        .starts_with("attachment; filename=\""),
                    "{name}"
                );
                let mut archive =
                    tar::Archive::new(flate2::read::GzDecoder::new(served.bytes.as_slice()));
                let mut unpacked = Vec::new();
                for item in archive.entries().expect("a tar") {
                    let mut item = item.expect("an entry");
                    let path = item.path().expect("a path").display().to_string();
                    let mut body = Vec::new();
                    item.read_to_end(&mut body).expect("a body");
                    assert!(!body.is_empty(), "{path}");
                    unpacked.push(path);
                }
                let expected: Vec<String> =
                    files.iter().map(|file| format!("package/{file}")).collect();
                assert_eq!(unpacked, expected, "{name}: npm pack's layout");
            }
            "zip" => {
                assert_eq!(served.header("content-type"), "application/zip");
                let folder = if name == "wordpress" {
                    "queue-manager".to_owned()
                } else {
                    name.clone()
                };
                assert!(
                    served
                        .header("content-disposition")
                        .contains(&format!("filename=\"{folder}-")),
                    "{name}"
                );
                let archive = zip::ZipArchive::new(std::io::Cursor::new(served.bytes.clone()))
                    .expect("a zip");
                let listed: Vec<&str> = archive.file_names().collect();
                for file in &files {
                    let path = format!("{folder}/{file}");
                    assert!(listed.contains(&path.as_str()), "{path} in {listed:?}");
                }
                assert!(
                    listed
                        .iter()
                        .all(|path| path.starts_with(&format!("{folder}/"))),
                    "one top folder: {listed:?}"
                );
            }
            other => panic!("{name}: unknown artifact {other}"),
        }
        let cached = fetch(&app, download, Some(&format!("\"{sha256}\""))).await;
        assert_eq!(cached.status, 304, "{name}");
        assert!(cached.bytes.is_empty());
    }
}

#[tokio::test]
async fn the_snippet_is_served_latest_and_pinned_with_the_same_bytes() {
    let app = spawn_app().await;
    let entries = listing(&app).await;
    let snippet = entry(&entries, "snippet");
    let sha256 = snippet["sha256"].as_str().unwrap_or("").to_owned();
    let pinned = snippet["pinned"].as_str().unwrap_or("");
    assert_eq!(
        pinned,
        format!("{}/snippet/qm.{}.js", app.gateway, &sha256[..16])
    );
    let latest = fetch(&app, &format!("{}/snippet/latest.js", app.gateway), None).await;
    let hashed = fetch(&app, pinned, None).await;
    let download = fetch(&app, snippet["download"].as_str().unwrap_or(""), None).await;
    assert_eq!(latest.status, 200);
    assert_eq!(hashed.status, 200);
    assert_eq!(latest.bytes, hashed.bytes);
    assert_eq!(latest.bytes, download.bytes);
    assert_eq!(hex_of(&Sha256::digest(&latest.bytes)), sha256);
    assert_eq!(latest.header("cache-control"), "public, max-age=300");
    assert_eq!(
        hashed.header("cache-control"),
        "public, max-age=31536000, immutable"
    );
    for served in [&latest, &hashed] {
        assert_eq!(
            served.header("content-type"),
            "application/javascript; charset=utf-8"
        );
        assert_eq!(served.header("etag"), format!("\"{sha256}\""));
        assert_eq!(served.header("access-control-allow-origin"), "*");
        assert_eq!(served.header("x-content-type-options"), "nosniff");
    }
    let revalidated = fetch(
        &app,
        &format!("{}/snippet/latest.js", app.gateway),
        Some(&format!("W/\"{sha256}\"")),
    )
    .await;
    assert_eq!(revalidated.status, 304);
    for other in ["qm.0000000000000000.js", "qm.js", "latest.tgz", "worker.js"] {
        let missing = app.get(&format!("{}/snippet/{other}", app.gateway)).await;
        assert_eq!(missing.status, 404, "{other}");
        assert_eq!(missing.code(), "not_found", "{other}");
    }
}

#[tokio::test]
async fn unknown_connectors_and_wrong_extensions_are_not_found() {
    let app = spawn_app().await;
    for path in [
        "/connectors/nosuch/latest.js",
        "/connectors/nginx/latest.zip",
        "/connectors/snippet/qm.js",
        "/connectors/wordpress/latest.tgz",
        "/connectors/node/package.json",
    ] {
        let reply = app.get(&format!("{}{path}", app.gateway)).await;
        assert_eq!(reply.status, 404, "{path}: {}", reply.text);
        assert_eq!(reply.code(), "not_found", "{path}");
        assert!(reply.body["error"].is_string(), "{path}");
    }
}

#[tokio::test]
async fn the_wordpress_updater_gets_its_shape() {
    let app = spawn_app().await;
    let entries = listing(&app).await;
    let wordpress = entry(&entries, "wordpress");
    let reply = app
        .get(&format!("{}/api/connectors/wordpress/update", app.gateway))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let body = &reply.body;
    assert_eq!(body["slug"], "queue-manager");
    assert_eq!(body["plugin"], "queue-manager/queue-manager.php");
    assert_eq!(body["version"], wordpress["version"]);
    assert_eq!(body["new_version"], wordpress["version"]);
    assert_eq!(body["package"], wordpress["download"]);
    assert_eq!(body["download_url"], wordpress["download"]);
    assert_eq!(body["sha256"], wordpress["sha256"]);
    for field in ["name", "url", "requires", "tested", "requires_php"] {
        assert!(
            body[field].as_str().is_some_and(|text| !text.is_empty()),
            "{field}: {body}"
        );
    }
    assert!(body["sections"]["description"].is_string());
    assert!(body["sections"]["changelog"].is_string());
    let package = fetch(&app, body["package"].as_str().unwrap_or(""), None).await;
    assert_eq!(hex_of(&Sha256::digest(&package.bytes)), body["sha256"]);
}

#[tokio::test]
async fn api_v1_and_api_answer_the_same_bytes() {
    let app = spawn_app().await;
    for path in ["/connectors", "/connectors/wordpress/update"] {
        let v1 = app.get(&format!("{}/api/v1{path}", app.gateway)).await;
        let plain = app.get(&format!("{}/api{path}", app.gateway)).await;
        assert_eq!(v1.status, 200, "{path}: {}", v1.text);
        assert_eq!(v1.text, plain.text, "{path}");
        assert_eq!(v1.header("etag"), plain.header("etag"), "{path}");
    }
    let posted = app
        .send(app.http.post(format!("{}/api/connectors", app.gateway)))
        .await;
    assert_eq!(posted.status, 405);
}

#[tokio::test]
async fn the_connector_routes_share_the_check_budget() {
    let app = spawn_app_with(&[("CHECK_LIMIT_PER_MIN", "3")]).await;
    let spend = |path: &str| app.send(app.http.get(format!("{}{path}", app.gateway)));
    assert_eq!(spend("/api/verify?roomId=budget").await.status, 200);
    assert_eq!(spend("/api/verify.gif?roomId=budget").await.status, 424);
    assert_eq!(spend("/api/connectors").await.status, 200);
    for path in [
        "/api/connectors",
        "/api/v1/connectors",
        "/api/connectors/wordpress/update",
        "/api/verify?roomId=budget",
        "/api/check?roomId=budget",
    ] {
        let refused = spend(path).await;
        assert_eq!(refused.status, 429, "{path}: {}", refused.text);
        assert_eq!(refused.code(), "rate_limited");
        assert!(refused.header("retry-after").is_some(), "{path}");
    }
    // The files themselves are not budgeted: a CDN or an installer fetches them freely.
    for path in ["/snippet/latest.js", "/connectors/node/latest.tgz"] {
        let served = fetch(&app, &format!("{}{path}", app.gateway), None).await;
        assert_eq!(served.status, 200, "{path}");
    }
}

fn hex_of(bytes: &[u8]) -> String {
    hex::encode(bytes)
}
