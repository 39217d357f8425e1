//! GET /api/connectors and GET /api/connectors/wordpress/update: the connector registry as a
//! connector's installer, its CLI or the WordPress updater reads it. Every link is absolute
//! against this server's public base (PUBLIC_URL, else its own Host, as `waitingRoomUrl`), and
//! the digests are those of the bytes `/connectors/<name>/latest.*` serves (`artifacts.rs`),
//! both read from the one static table of `qm-registry`. Both routes spend the caller's
//! CHECK_LIMIT_PER_MIN budget, like every route a connector calls.

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::header::{CACHE_CONTROL, ETAG};
use http::{HeaderMap, HeaderValue, StatusCode, Uri};
use qm_core::ErrorCode;
use qm_http::AppError;
use qm_registry::Connector;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::GatewayState;
use crate::request::{ClientAddress, QueryParams, public_base};

/// The WordPress plugin's slug: its folder in the zip and its key in the update transient.
const WORDPRESS_SLUG: &str = "queue-manager";
/// What the updater shows when the manifest names no WordPress or PHP version.
const WORDPRESS_REQUIRES: &str = "6.0";
const WORDPRESS_TESTED: &str = "6.8";
const WORDPRESS_REQUIRES_PHP: &str = "7.4";

/// GET /api/connectors[?roomId=]: every connector with its download, digests and steps.
pub(crate) async fn list(
    State(state): State<GatewayState>,
    ClientAddress(address): ClientAddress,
    query: QueryParams,
    headers: HeaderMap,
    uri: Uri,
) -> Result<Response, AppError> {
    state.spend_check_budget(address)?;
    // `?roomId=` fills the steps' placeholder; without it `{roomId}` stays for the reader.
    let room_id = match query.non_empty("roomId") {
        Some(_) => Some(query.room_id()?),
        None => None,
    };
    let base = public_base(&state.config, &headers, &uri);
    let body = listing(qm_registry::all(), &base, room_id.as_deref());
    Ok(revalidated(&headers, &body))
}

/// GET /api/connectors/wordpress/update: the plugin-updater answer a WordPress site's
/// `pre_set_site_transient_update_plugins` and `plugins_api` filters consume.
pub(crate) async fn wordpress_update(
    State(state): State<GatewayState>,
    ClientAddress(address): ClientAddress,
    headers: HeaderMap,
    uri: Uri,
) -> Result<Response, AppError> {
    state.spend_check_budget(address)?;
    let Some(wordpress) = qm_registry::find("wordpress") else {
        return Err(AppError::new(
            ErrorCode::NotFound,
            "this server ships no WordPress plugin",
        ));
    };
    let base = public_base(&state.config, &headers, &uri);
    Ok(revalidated(&headers, &wordpress_body(wordpress, &base)))
}

/// The listing: `download` and `pinned` absolute against `base` (relative when the base is not
/// known), `{server}` filled with `base` when known.
pub(crate) fn listing(connectors: &[Connector], base: &str, room_id: Option<&str>) -> Value {
    let server = Some(base).filter(|base| !base.is_empty());
    let entries: Vec<Value> = connectors
        .iter()
        .map(|connector| {
            let fill = |text: &str| qm_registry::fill(text, server, room_id);
            let mut entry = json!({
                "name": connector.name,
                "title": connector.title,
                "version": connector.version,
                "artifact": connector.artifact.extension(),
                "download": format!("{base}{}", connector.download_path()),
                "sha256": connector.sha256_hex,
                "integrity": connector.integrity,
                "files": connector.files,
                "install": fill(connector.install),
                "upgrade": fill(connector.upgrade),
                "verify": fill(connector.verify),
            });
            if connector.name == "snippet" {
                // The content-addressed name: a page that pins it never runs other bytes.
                entry["pinned"] = json!(format!("{base}/snippet/{}", connector.pinned_file_name()));
            }
            entry
        })
        .collect();
    json!({ "connectors": entries })
}

/// The updater's shape, with the WordPress and PHP versions from the manifest when it names
/// them.
pub(crate) fn wordpress_body(wordpress: &Connector, base: &str) -> Value {
    let package = format!("{base}{}", wordpress.download_path());
    let main_file = wordpress
        .files
        .iter()
        .find(|file| file.ends_with(".php") && !file.contains('/'))
        .copied()
        .unwrap_or("queue-manager.php");
    let changelog = wordpress.changelog.map_or_else(
        || {
            format!(
                "<h4>{}</h4><p>See the integration guide.</p>",
                wordpress.version
            )
        },
        |text| format!("<h4>{}</h4><p>{}</p>", wordpress.version, html_escape(text)),
    );
    json!({
        "name": "Queue Manager",
        "slug": WORDPRESS_SLUG,
        "plugin": format!("{WORDPRESS_SLUG}/{main_file}"),
        "version": wordpress.version,
        "new_version": wordpress.version,
        "package": package,
        "download_url": package,
        "url": format!("{base}/docs/integration"),
        "requires": wordpress.requires.unwrap_or(WORDPRESS_REQUIRES),
        "tested": wordpress.tested.unwrap_or(WORDPRESS_TESTED),
        "requires_php": wordpress.requires_php.unwrap_or(WORDPRESS_REQUIRES_PHP),
        "sha256": wordpress.sha256_hex,
        "sections": {
            "description": format!(
                "<p>{}: sends the visitors of protected pages through the Queue Manager waiting room.</p>",
                html_escape(wordpress.title)
            ),
            "changelog": changelog,
        },
    })
}

/// `body` as JSON with a strong ETag of its bytes: `304` when the client has it, and
/// `no-cache` so a cache asks every time (a new release must show at once).
fn revalidated(headers: &HeaderMap, body: &Value) -> Response {
    let bytes = body.to_string();
    let digest = hex::encode(Sha256::digest(bytes.as_bytes()));
    let etag = format!("\"{}\"", digest.get(..32).unwrap_or(&digest));
    let mut response = if qm_http::if_none_match(headers, &etag) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        Json(body).into_response()
    };
    let response_headers = response.headers_mut();
    response_headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(value) = HeaderValue::from_str(&etag) {
        response_headers.insert(ETAG, value);
    }
    response
}

fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_absolute_when_the_base_is_known_and_placeholders_stay_otherwise() {
        let listed = listing(qm_registry::all(), "https://q.example", Some("sale"));
        let entries = listed["connectors"].as_array().cloned().unwrap_or_default();
        assert_eq!(entries.len(), qm_registry::all().len());
        for entry in &entries {
            let download = entry["download"].as_str().unwrap_or("");
            assert!(
                download.starts_with("https://q.example/connectors/"),
                "{entry}"
            );
            for step in ["install", "upgrade", "verify"] {
                let text = entry[step].as_str().unwrap_or("");
                assert!(
                    !text.contains("{server}") && !text.contains("{roomId}"),
                    "{text}"
                );
            }
        }
        let relative = listing(qm_registry::all(), "", None);
        let snippet = relative["connectors"]
            .as_array()
            .and_then(|entries| entries.iter().find(|entry| entry["name"] == "snippet"))
            .cloned()
            .unwrap_or_default();
        assert!(
            snippet["pinned"]
                .as_str()
                .unwrap_or("")
                .starts_with("/snippet/qm."),
            "{snippet}"
        );
        assert!(
            snippet["install"]
                .as_str()
                .unwrap_or("")
                .contains("{server}"),
            "an unknown base stays a placeholder: {snippet}"
        );
    }

    #[test]
    fn the_wordpress_answer_names_the_zip_and_the_slug() {
        let Some(wordpress) = qm_registry::find("wordpress") else {
            panic!("the registry ships the WordPress plugin");
        };
        let body = wordpress_body(wordpress, "https://q.example");
        assert_eq!(body["slug"], "queue-manager");
        assert_eq!(body["new_version"], wordpress.version);
        assert_eq!(
            body["package"],
            "https://q.example/connectors/wordpress/latest.zip"
        );
        assert_eq!(body["download_url"], body["package"]);
        assert!(body["sections"]["changelog"].is_string());
        assert_eq!(html_escape("<a&\">"), "&lt;a&amp;&quot;&gt;");
    }
}
