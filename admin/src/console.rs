//! The operator console: `GET /` serves the page, `GET /assets/:name` its stylesheet and scripts
//! under content-hashed names (`console-<hash>.css` and one `console-<part>-<hash>.js` per
//! script of [`SCRIPTS`]; the same hash as the waiting page's assets), cached forever: a new
//! build links new names, so a console never runs one build's markup with another build's
//! script.
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

/// The console's scripts in the order the page runs them, each with the placeholder of its
/// `<script src>` in console.html: the drawing, form and visitor-lookup helpers, the bot-protection panel, the alerts and
/// automatic-decisions panels; the shared
/// state and API call; who is signed in and what their role may use; the rooms list and
/// chart, the live stream, the session, the room controls and the audit, operator, share-link
/// and shutdown pages, each using only the ones before it; the keyboard and wiring last, which
/// starts it all.
const SCRIPTS: [(&str, &str, &str); 13] = [
    (
        "console-draw",
        "{{draw_js_path}}",
        include_str!("../assets/console-draw.js"),
    ),
    (
        "console-form",
        "{{form_js_path}}",
        include_str!("../assets/console-form.js"),
    ),
    (
        "console-visitors",
        "{{visitors_js_path}}",
        include_str!("../assets/console-visitors.js"),
    ),
    (
        "console-security",
        "{{security_js_path}}",
        include_str!("../assets/console-security.js"),
    ),
    (
        "console-signals",
        "{{signals_js_path}}",
        include_str!("../assets/console-signals.js"),
    ),
    (
        "console-core",
        "{{core_js_path}}",
        include_str!("../assets/console-core.js"),
    ),
    (
        "console-access",
        "{{access_js_path}}",
        include_str!("../assets/console-access.js"),
    ),
    (
        "console-rooms",
        "{{rooms_js_path}}",
        include_str!("../assets/console-rooms.js"),
    ),
    (
        "console-stream",
        "{{stream_js_path}}",
        include_str!("../assets/console-stream.js"),
    ),
    (
        "console-session",
        "{{session_js_path}}",
        include_str!("../assets/console-session.js"),
    ),
    (
        "console-controls",
        "{{controls_js_path}}",
        include_str!("../assets/console-controls.js"),
    ),
    (
        "console-admin",
        "{{admin_js_path}}",
        include_str!("../assets/console-admin.js"),
    ),
    (
        "console",
        "{{js_path}}",
        include_str!("../assets/console.js"),
    ),
];

/// Content type of the page.
const HTML_CONTENT_TYPE: &str = "text/html; charset=utf-8";

/// What the page may load and talk to: its own files and this origin's API, nothing inline,
/// no frames around it. `img-src data:` is for nothing today but keeps a pasted data: logo
/// preview from being a console error later; it cannot run code.
pub(crate) const CONTENT_SECURITY_POLICY_VALUE: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; \
     base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Hashed once per process: the names are a pure function of the embedded files. The
/// stylesheet first, then the scripts in [`SCRIPTS`] order.
static ASSETS: LazyLock<Vec<HashedAsset>> = LazyLock::new(|| {
    let stylesheet = HashedAsset::new("console", "css", qm_http::CSS_CONTENT_TYPE, CONSOLE_CSS);
    let scripts = SCRIPTS
        .iter()
        .map(|&(stem, _, body)| HashedAsset::new(stem, "js", qm_http::JS_CONTENT_TYPE, body));
    std::iter::once(stylesheet).chain(scripts).collect()
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
    let mut page =
        CONSOLE_HTML.replace("{{css_path}}", &format!("/assets/{}", ASSETS[0].file_name));
    for ((_, placeholder, _), asset) in SCRIPTS.iter().zip(&ASSETS[1..]) {
        page = page.replace(placeholder, &format!("/assets/{}", asset.file_name));
    }
    // Numbers only: nothing in it can close its script element.
    page.replace("{{defaults_json}}", &defaults.to_string())
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
        for (index, (stem, _, body)) in SCRIPTS.into_iter().enumerate() {
            let js = format!("{stem}-{}.js", qm_http::content_hash(body.as_bytes()));
            assert_eq!(ASSETS[index + 1].file_name, js);
            let linked = PAGE
                .find(&format!("src=\"/assets/{js}\""))
                .unwrap_or_else(|| panic!("the page links {js}"));
            assert!(
                linked > last_script,
                "each script loads after the ones it uses"
            );
            last_script = linked;
        }
        assert_eq!(
            ASSETS.len(),
            SCRIPTS.len() + 1,
            "the stylesheet and the scripts"
        );
        assert_eq!(
            PAGE.matches("<script src=").count(),
            SCRIPTS.len(),
            "every script is linked once, and nothing else"
        );
        assert!(!PAGE.contains("{{"), "every placeholder is filled");
    }

    /// The `window.QMConsole…` names a script defines (`window.X = `) and those it reads.
    fn namespaces(body: &str) -> (Vec<&str>, Vec<&str>) {
        let (mut defined, mut read) = (Vec::new(), Vec::new());
        for (index, _) in body.match_indices("window.QMConsole") {
            let name_start = index + "window.".len();
            let name_end = body[name_start..]
                .find(|c: char| !c.is_ascii_alphanumeric())
                .map_or(body.len(), |end| name_start + end);
            let name = &body[name_start..name_end];
            if body[name_end..].starts_with(" = ") {
                defined.push(name);
            } else {
                read.push(name);
            }
        }
        (defined, read)
    }

    #[test]
    fn each_script_reads_only_what_an_earlier_script_defined() {
        // The scripts share one namespace object each and run in page order, so a part read
        // before its script ran would be `undefined` at load.
        let mut defined_so_far: Vec<&str> = Vec::new();
        for (stem, _, body) in SCRIPTS {
            let (defined, read) = namespaces(body);
            for name in read {
                assert!(
                    defined_so_far.contains(&name),
                    "{stem}.js reads {name} before any script defines it"
                );
            }
            for name in defined {
                assert!(!defined_so_far.contains(&name), "{name} defined twice");
                defined_so_far.push(name);
            }
        }
        assert_eq!(
            defined_so_far.len(),
            SCRIPTS.len() - 1,
            "every script but the last, which wires them, defines its part"
        );
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
