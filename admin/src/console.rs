//! The operator console: `GET /` serves the page, `GET /assets/:name` its stylesheet and scripts
//! under content-hashed names (`console-<hash>.css`, `console-draw-<hash>.js`,
//! `console-form-<hash>.js`, `console-visitors-<hash>.js`, `console-<hash>.js`; the same hash as the waiting page's assets),
//! cached forever: a new build links new names, so a console never runs one build's
//! markup with another build's script.
//!
//! The page is plain HTML, CSS and JavaScript embedded at build time, and it carries no
//! credential: it asks `GET /api/admin/session` whether the browser is signed in and signs in
//! with `POST /api/admin/session`, whose cookie the script can never read (HttpOnly). It runs
//! under a policy that allows only this origin's own files and connections, with no inline
//! script or style.

use std::sync::LazyLock;

use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use http::HeaderValue;
use http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
    X_FRAME_OPTIONS,
};
use qm_core::ErrorCode;
use qm_http::HashedAsset;
use serde_json::json;

use crate::AppError;

const CONSOLE_HTML: &str = include_str!("../assets/console.html");
const CONSOLE_CSS: &str = include_str!("../assets/console.css");
const CONSOLE_JS: &str = include_str!("../assets/console.js");
const CONSOLE_DRAW_JS: &str = include_str!("../assets/console-draw.js");
const CONSOLE_FORM_JS: &str = include_str!("../assets/console-form.js");
const CONSOLE_VISITORS_JS: &str = include_str!("../assets/console-visitors.js");

/// Content type of the page.
const HTML_CONTENT_TYPE: &str = "text/html; charset=utf-8";

/// What the page may load and talk to: its own files and this origin's API, nothing inline,
/// no frames around it. `img-src data:` is for nothing today but keeps a pasted data: logo
/// preview from being a console error later; it cannot run code.
pub(crate) const CONTENT_SECURITY_POLICY_VALUE: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; \
     base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Hashed once per process: the names are a pure function of the embedded files. The scripts
/// run in the order the page lists them: the drawing, form and visitor-lookup helpers, then the
/// console.
static ASSETS: LazyLock<[HashedAsset; 5]> = LazyLock::new(|| {
    [
        HashedAsset::new("console", "css", qm_http::CSS_CONTENT_TYPE, CONSOLE_CSS),
        HashedAsset::new(
            "console-draw",
            "js",
            qm_http::JS_CONTENT_TYPE,
            CONSOLE_DRAW_JS,
        ),
        HashedAsset::new(
            "console-form",
            "js",
            qm_http::JS_CONTENT_TYPE,
            CONSOLE_FORM_JS,
        ),
        HashedAsset::new(
            "console-visitors",
            "js",
            qm_http::JS_CONTENT_TYPE,
            CONSOLE_VISITORS_JS,
        ),
        HashedAsset::new("console", "js", qm_http::JS_CONTENT_TYPE, CONSOLE_JS),
    ]
});

/// The page with its asset links and the server's defaults for a new room filled in.
static PAGE: LazyLock<String> = LazyLock::new(|| {
    // The create form starts from the same defaults the engine applies to an omitted field, so
    // an operator who leaves them alone gets exactly what the API documents.
    let defaults = json!({
        "passedTtlSec": qm_core::room::DEFAULT_PASSED_TTL_SEC,
        "presenceSec": qm_core::room::DEFAULT_PRESENCE_SEC,
        "queueMaxPerIp": qm_core::room::DEFAULT_PER_IP_CAP,
        "preQueueMaxPerIp": qm_core::room::DEFAULT_PER_IP_CAP,
    });
    // Numbers only: nothing in it can close its script element.
    CONSOLE_HTML
        .replace("{{css_path}}", &format!("/assets/{}", ASSETS[0].file_name))
        .replace(
            "{{draw_js_path}}",
            &format!("/assets/{}", ASSETS[1].file_name),
        )
        .replace(
            "{{form_js_path}}",
            &format!("/assets/{}", ASSETS[2].file_name),
        )
        .replace(
            "{{visitors_js_path}}",
            &format!("/assets/{}", ASSETS[3].file_name),
        )
        .replace("{{js_path}}", &format!("/assets/{}", ASSETS[4].file_name))
        .replace("{{defaults_json}}", &defaults.to_string())
});

/// GET /. `no-cache`: a deploy is seen at the next load, and the page names the new assets.
pub(crate) async fn page() -> Response {
    (
        [
            (CONTENT_TYPE, HeaderValue::from_static(HTML_CONTENT_TYPE)),
            (CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (
                CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(CONTENT_SECURITY_POLICY_VALUE),
            ),
            (X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
            (X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
            (REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
        ],
        PAGE.as_str(),
    )
        .into_response()
}

/// GET /assets/:name: an asset of this build by its hashed name, cached forever.
pub(crate) async fn asset(Path(name): Path<String>) -> Result<Response, AppError> {
    let asset = ASSETS
        .iter()
        .find(|asset| asset.file_name == name)
        .ok_or_else(|| AppError::new(ErrorCode::NotFound, "no such asset in this build"))?;
    Ok(qm_http::immutable_asset(
        asset.content_type,
        asset.body.as_bytes(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assets_are_named_by_their_content_hash_and_linked_from_the_page() {
        let css = format!(
            "console-{}.css",
            qm_http::content_hash(CONSOLE_CSS.as_bytes())
        );
        assert_eq!(ASSETS[0].file_name, css);
        assert!(PAGE.contains(&format!("href=\"/assets/{css}\"")));
        let mut last_script = 0;
        for (index, (stem, body)) in [
            ("console-draw", CONSOLE_DRAW_JS),
            ("console-form", CONSOLE_FORM_JS),
            ("console-visitors", CONSOLE_VISITORS_JS),
            ("console", CONSOLE_JS),
        ]
        .into_iter()
        .enumerate()
        {
            let js = format!("{stem}-{}.js", qm_http::content_hash(body.as_bytes()));
            assert_eq!(ASSETS[index + 1].file_name, js);
            let linked = PAGE
                .find(&format!("src=\"/assets/{js}\""))
                .unwrap_or_else(|| panic!("the page links {js}"));
            assert!(linked > last_script, "the helpers load before the console");
            last_script = linked;
        }
        assert!(!PAGE.contains("{{"), "every placeholder is filled");
    }

    #[test]
    fn the_page_has_no_inline_script_or_style() {
        // The policy forbids them; the page must not need them.
        let page = PAGE.as_str();
        assert!(!page.contains(" style="), "no style attributes");
        assert!(!page.contains("<style"), "no style elements");
        assert!(!page.contains("javascript:"));
        for attribute in [
            " onclick=",
            " onload=",
            " onsubmit=",
            " onchange=",
            " oninput=",
        ] {
            assert!(!page.contains(attribute), "no {attribute} handler");
        }
        // Every script element either loads a file or is inert JSON data.
        for (index, _) in page.match_indices("<script") {
            let tag_end = page[index..]
                .find('>')
                .map_or(page.len(), |end| index + end);
            let tag = &page[index..tag_end];
            assert!(
                tag.contains(" src=") || tag.contains("type=\"application/json\""),
                "inline script: {tag}"
            );
        }
    }

    #[test]
    fn the_defaults_are_the_engines() {
        let start = PAGE
            .find("id=\"qm-console-defaults\">")
            .map(|index| index + "id=\"qm-console-defaults\">".len())
            .expect("defaults element");
        let end = start + PAGE[start..].find("</script>").expect("closed");
        let defaults: serde_json::Value =
            serde_json::from_str(&PAGE[start..end]).expect("JSON defaults");
        assert_eq!(
            defaults["passedTtlSec"],
            json!(qm_core::room::DEFAULT_PASSED_TTL_SEC)
        );
        assert_eq!(
            defaults["queueMaxPerIp"],
            json!(qm_core::room::DEFAULT_PER_IP_CAP)
        );
    }
}
