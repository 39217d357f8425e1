//! The pages and assets visitors see, embedded in the binary. Each linked asset is served under a
//! content-hashed name (`waiting-<hash>.css`), so it can be cached forever: a new build links new
//! names, and a page never mixes one build's markup with another build's script.

use std::sync::LazyLock;

use qm_http::{CSS_CONTENT_TYPE, HashedAsset, JS_CONTENT_TYPE};

use crate::html::{escape_html, fill_template};

pub mod html;
mod locale;
pub(crate) mod sentences;
mod view;

pub use locale::Locale;
pub use view::{JoinNotice, Lapsed, NOSCRIPT_REFRESH_SEC, OperatorMessage, PageView, PlaceView};

const WAITING_HTML: &str = include_str!("../assets/waiting.html");
const WAITING_CSS: &str = include_str!("../assets/waiting.css");
const WAITING_JS: &str = include_str!("../assets/waiting.js");
const WAITING_UI_JS: &str = include_str!("../assets/waiting-ui.js");
const WAITING_NOTIFY_JS: &str = include_str!("../assets/waiting-notify.js");
const NOT_FOUND_HTML: &str = include_str!("../assets/not-found.html");

/// Hashed once per process: the names are a pure function of the embedded files.
static ASSETS: LazyLock<[HashedAsset; 4]> = LazyLock::new(|| {
    [
        HashedAsset::new("waiting", "css", CSS_CONTENT_TYPE, WAITING_CSS),
        HashedAsset::new("waiting", "js", JS_CONTENT_TYPE, WAITING_JS),
        HashedAsset::new("waiting-ui", "js", JS_CONTENT_TYPE, WAITING_UI_JS),
        HashedAsset::new("waiting-notify", "js", JS_CONTENT_TYPE, WAITING_NOTIFY_JS),
    ]
});

/// An asset by its served file name (`waiting-<hash>.css`): its content type and bytes.
pub fn asset(name: &str) -> Option<(&'static str, &'static [u8])> {
    ASSETS
        .iter()
        .find(|asset| asset.file_name == name)
        .map(|asset| (asset.content_type, asset.body.as_bytes()))
}

/// An asset by its served name, or by a name of an earlier build listed in `kept`
/// (WAITING_ASSETS_KEEP): that name answers this build's file of the same stem and kind, so a
/// page an older instance handed out during a rolling deploy still gets a style and a script.
pub fn asset_or_kept(name: &str, kept: &[String]) -> Option<(&'static str, &'static [u8])> {
    if let Some(found) = asset(name) {
        return Some(found);
    }
    if !kept.iter().any(|kept_name| kept_name == name) {
        return None;
    }
    let kind = |file_name: &str| {
        // `<stem>-<22-character hash>.<extension>`; the hash may itself contain '-'.
        let (base, extension) = file_name.rsplit_once('.')?;
        let stem = base.get(..base.len().checked_sub(23)?)?;
        Some((stem.to_owned(), extension.to_owned()))
    };
    let wanted = kind(name)?;
    ASSETS
        .iter()
        .find(|asset| kind(&asset.file_name).as_ref() == Some(&wanted))
        .map(|asset| (asset.content_type, asset.body.as_bytes()))
}

/// Every hashed asset name this build serves, for logs and tests.
pub fn asset_names() -> Vec<&'static str> {
    ASSETS
        .iter()
        .map(|asset| asset.file_name.as_str())
        .collect()
}

/// The served path of the waiting page's stylesheet.
pub fn waiting_css_path() -> String {
    format!("/assets/{}", ASSETS[0].file_name)
}

/// The served path of the waiting page's script.
pub fn waiting_js_path() -> String {
    format!("/assets/{}", ASSETS[1].file_name)
}

/// The served path of the waiting page's rendering helpers (loaded before the script).
pub fn waiting_ui_js_path() -> String {
    format!("/assets/{}", ASSETS[2].file_name)
}

/// The served path of the waiting page's e-mail form (loaded before the script).
pub fn waiting_notify_js_path() -> String {
    format!("/assets/{}", ASSETS[3].file_name)
}

/// The waiting page for one room. `config_json` is what the script reads as `window.QM_CONFIG`
/// (roomId, name, branding, ...); it travels in a JSON script element, never as inline code, so
/// the page runs under a CSP without `unsafe-inline`. The page adds the chosen `locale` and the
/// script's `sentences` in it, from the one table. `view` is the server-rendered half: the
/// operator's message, the language switch and what a visitor without JavaScript sees.
pub fn waiting_page(config_json: &serde_json::Value, view: &PageView) -> String {
    waiting_page_under(config_json, view, "")
}

/// [`waiting_page`] with its assets linked under `asset_base` (`/__qm` on an inline host, where
/// every other path belongs to the site).
pub fn waiting_page_under(
    config_json: &serde_json::Value,
    view: &PageView,
    asset_base: &str,
) -> String {
    use sentences::*;
    let locale = view.locale;
    let title = page_title(config_json);
    let (message_heading, message_text, message_time, message_hidden) = view.message_parts();
    let mut config = config_json.clone();
    if let serde_json::Value::Object(fields) = &mut config {
        fields.insert("locale".into(), serde_json::Value::from(locale.tag()));
        fields.insert(
            "sentences".into(),
            serde_json::Value::Object(script_sentences(locale)),
        );
    }
    let text = |sentence: &Sentence| escape_html(sentence.get(locale));
    fill_template(
        WAITING_HTML,
        &[
            ("LANG", locale.tag().to_owned()),
            ("TITLE", escape_html(&title)),
            ("CSS_HREF", format!("{asset_base}{}", waiting_css_path())),
            ("JS_HREF", format!("{asset_base}{}", waiting_js_path())),
            (
                "UI_JS_HREF",
                format!("{asset_base}{}", waiting_ui_js_path()),
            ),
            (
                "NOTIFY_JS_HREF",
                format!("{asset_base}{}", waiting_notify_js_path()),
            ),
            ("NOSCRIPT_HEAD", view.noscript_head()),
            ("LOGO", logo_html(config_json, locale)),
            ("LABEL_LANGUAGE", text(&LABEL_LANGUAGE)),
            ("LOCALE_LINKS", view.locale_links()),
            (
                "MESSAGE_HIDDEN",
                if message_hidden { " hidden" } else { "" }.to_owned(),
            ),
            ("MESSAGE_HEADING", message_heading),
            ("MESSAGE_TEXT", message_text),
            ("MESSAGE_TIME", message_time),
            ("LEAD_JOINING", text(&LEAD_JOINING)),
            ("LABEL_COUNTDOWN", text(&LABEL_COUNTDOWN)),
            ("LABEL_OPENS_AT", text(&LABEL_OPENS_AT)),
            ("LABEL_POSITION", text(&LABEL_POSITION)),
            ("LABEL_AHEAD", text(&LABEL_AHEAD)),
            ("LABEL_ETA", text(&LABEL_ETA)),
            ("LABEL_PROGRESS", text(&LABEL_PROGRESS)),
            ("PASSED_FALLBACK", text(&PASSED_FALLBACK)),
            ("PASSED_LINK", text(&PASSED_LINK)),
            ("NOSCRIPT_BODY", view.noscript_body()),
            ("NOTIFY_LABEL", text(&NOTIFY_LABEL)),
            ("NOTIFY_BUTTON", text(&NOTIFY_BUTTON)),
            ("NOTIFY_HINT", text(&NOTIFY_HINT)),
            ("LABEL_REF", text(&LABEL_REF)),
            ("REF_HINT", text(&REF_HINT)),
            ("KEEP_OPEN_HINT", text(&KEEP_OPEN_HINT)),
            ("CONFIG_JSON", json_for_script_element(&config)),
        ],
    )
}

/// The brand's logo, when the room has one: an https URL (the room document allows no other).
fn logo_html(config_json: &serde_json::Value, locale: Locale) -> String {
    let logo_url = config_json
        .pointer("/branding/logoUrl")
        .and_then(serde_json::Value::as_str)
        .filter(|url| url.starts_with("https://"));
    match logo_url {
        Some(url) => format!(
            "<img class=\"logo\" src=\"{}\" alt=\"{}\" height=\"40\">",
            escape_html(url),
            escape_html(sentences::LOGO_ALT.get(locale))
        ),
        None => String::new(),
    }
}

/// The page for a path that names no room (an invalid room id).
pub fn not_found_page() -> String {
    NOT_FOUND_HTML.replace("{{CSS_HREF}}", &waiting_css_path())
}

/// Branding title, else the room's name, else a neutral heading.
fn page_title(config_json: &serde_json::Value) -> String {
    let branding_title = config_json
        .pointer("/branding/title")
        .and_then(serde_json::Value::as_str);
    let name = config_json.get("name").and_then(serde_json::Value::as_str);
    branding_title
        .or(name)
        .map(str::trim)
        .filter(|title| !title.is_empty())
        .unwrap_or("Waiting room")
        .to_owned()
}

/// JSON that cannot end its `<script>` element or open a comment inside it: `<`, `>` and `&`
/// become `\u003c`, `\u003e`, `\u0026`, which `JSON.parse` reads back unchanged.
fn json_for_script_element(value: &serde_json::Value) -> String {
    value
        .to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

#[cfg(test)]
mod tests {
    use super::*;
    use qm_http::content_hash;
    use serde_json::json;

    fn plain_view() -> PageView {
        PageView {
            locale: Locale::En,
            place: PlaceView::Join { lapsed: None },
            notice: None,
            message: None,
            form_action: "/w/launch".into(),
        }
    }

    fn render(config: &serde_json::Value) -> String {
        waiting_page(config, &plain_view())
    }

    #[test]
    fn assets_are_served_under_their_content_hash() {
        let css_name = waiting_css_path().trim_start_matches("/assets/").to_owned();
        let expected = format!("waiting-{}.css", content_hash(WAITING_CSS.as_bytes()));
        assert_eq!(css_name, expected);
        let (content_type, body) = asset(&css_name).expect("css is served");
        assert_eq!(content_type, CSS_CONTENT_TYPE);
        assert_eq!(body, WAITING_CSS.as_bytes());
        let js_name = waiting_js_path().trim_start_matches("/assets/").to_owned();
        assert_eq!(
            asset(&js_name).map(|(content_type, _)| content_type),
            Some(JS_CONTENT_TYPE)
        );
        assert!(asset("waiting.css").is_none());
        assert!(asset("waiting-AAAAAAAAAAAAAAAAAAAAAA.css").is_none());
        assert_eq!(asset_names().len(), 4);
    }

    #[test]
    fn a_kept_name_of_an_earlier_build_answers_this_builds_file_of_its_kind() {
        let old_css = "waiting-AAAAAAAAAAAAAAAAAAAAAA.css".to_owned();
        let old_js = "waiting-BBBBBBBBBBBBBBBBBBBBBB.js".to_owned();
        let old_ui = "waiting-ui-B-BBBBBBBBBBBBBBBBBBBB.js".to_owned();
        let kept = [old_css.clone(), old_js.clone(), old_ui.clone()];
        assert_eq!(
            asset_or_kept(&old_ui, &kept),
            Some((JS_CONTENT_TYPE, WAITING_UI_JS.as_bytes()))
        );
        assert_eq!(
            asset_or_kept(&old_css, &kept),
            Some((CSS_CONTENT_TYPE, WAITING_CSS.as_bytes()))
        );
        assert_eq!(
            asset_or_kept(&old_js, &kept),
            Some((JS_CONTENT_TYPE, WAITING_JS.as_bytes()))
        );
        assert!(asset_or_kept("waiting-CCCCCCCCCCCCCCCCCCCCCC.css", &kept).is_none());
        assert!(asset_or_kept(&old_css, &[]).is_none());
        let current = waiting_css_path().trim_start_matches("/assets/").to_owned();
        assert!(asset_or_kept(&current, &[]).is_some());
    }

    #[test]
    fn the_page_links_its_assets_and_carries_the_config_as_data() {
        let page = render(&json!({ "roomId": "launch", "name": "Launch <day>" }));
        assert!(page.contains(&waiting_css_path()));
        assert!(page.contains(&waiting_js_path()));
        assert!(page.contains(r#"<script id="qm-config" type="application/json">"#));
        assert!(page.contains(r#""roomId":"launch""#));
        assert!(page.contains("<title>Launch &lt;day&gt;</title>"));
        assert!(!page.contains("<style"), "no inline style");
        assert!(!page.contains("{{"), "every placeholder is filled");
    }

    #[test]
    fn config_text_cannot_close_its_script_element() {
        let hostile =
            json!({ "roomId": "r", "branding": { "title": "</script><script>alert(1)</script>" } });
        let page = render(&hostile);
        let start = page
            .find(r#"<script id="qm-config""#)
            .expect("config element");
        let rest = &page[start..];
        let element_end = rest.find("</script>").expect("element closes");
        let inside = &rest[..element_end];
        assert!(
            !inside[1..].contains('<'),
            "no '<' inside the config element: {inside}"
        );
        let json_text = &inside[inside.find('>').expect("open tag ends") + 1..];
        let parsed: serde_json::Value = serde_json::from_str(json_text).expect("still valid json");
        assert_eq!(parsed["branding"], hostile["branding"]);
    }

    #[test]
    fn branding_title_wins_over_the_room_name() {
        let page = render(&json!({ "name": "Room", "branding": { "title": "The big drop" } }));
        assert!(page.contains("<title>The big drop</title>"));
        let page = render(&json!({}));
        assert!(page.contains("<title>Waiting room</title>"));
    }

    #[test]
    fn room_text_is_never_scanned_for_placeholders() {
        let view = PageView {
            message: Some(OperatorMessage {
                text: "{{NOSCRIPT_BODY}} & {{CSS_HREF}}".into(),
                age_sec: None,
            }),
            ..plain_view()
        };
        let page = waiting_page(&json!({ "name": "{{JS_HREF}}" }), &view);
        assert!(page.contains("<title>{{JS_HREF}}</title>"));
        assert!(page.contains("{{NOSCRIPT_BODY}} &amp; {{CSS_HREF}}"));
        assert_eq!(page.matches("<noscript><div").count(), 1);
    }

    #[test]
    fn the_page_speaks_the_chosen_language_and_renders_the_no_script_place() {
        let view = PageView {
            locale: Locale::Th,
            place: PlaceView::Join {
                lapsed: Some(Lapsed::Reset),
            },
            ..plain_view()
        };
        let page = waiting_page(&json!({ "roomId": "launch" }), &view);
        assert!(page.contains(r#"<html lang="th">"#));
        assert!(page.contains(Lapsed::Reset.sentence(Locale::Th)));
        assert!(page.contains(r#"<form class="join-form" method="post" action="/w/launch">"#));
        assert!(page.contains(r#"id="qm-message""#) && page.contains(r#"role="status""#));
        assert!(!page.contains("{{"), "every placeholder is filled");
    }

    #[test]
    fn every_sentence_the_scripts_ask_for_is_in_the_table() {
        // The scripts ask with `t("key"` (and a few keys through a map of error codes).
        let known: Vec<&str> = sentences::SCRIPT.iter().map(|(key, _)| *key).collect();
        let mut asked = Vec::new();
        for script in [WAITING_JS, WAITING_UI_JS, WAITING_NOTIFY_JS] {
            for (start, _) in script.match_indices("t(\"") {
                // `t(` itself, not the end of `split(` or `parseInt(`.
                let before = script[..start].chars().next_back().unwrap_or(' ');
                if before.is_ascii_alphanumeric() || before == '.' {
                    continue;
                }
                let rest = &script[start + 3..];
                if let Some((key, _)) = rest.split_once('"') {
                    asked.push(key.to_owned());
                }
            }
            for piece in script.split(": \"notify").skip(1) {
                if let Some((rest, _)) = piece.split_once('"') {
                    asked.push(format!("notify{rest}"));
                }
            }
        }
        assert!(asked.len() >= 20, "{asked:?}");
        for key in &asked {
            assert!(
                known.contains(&key.as_str()),
                "{key} is not in the sentence table"
            );
        }
        let page = render(&json!({ "roomId": "r" }));
        assert!(page.contains(r#""sentences":{"#) && page.contains(r#""locale":"en""#));
    }

    #[test]
    fn the_switch_links_every_locale_and_the_logo_is_https_only() {
        let page = render(
            &json!({ "roomId": "r", "branding": { "logoUrl": "https://cdn.example/l.png" } }),
        );
        assert!(
            page.contains(r#"href="/w/launch?lang=th" hreflang="th""#),
            "{page}"
        );
        assert!(page.contains(r#"hreflang="en" lang="en" aria-current="true""#));
        assert!(page.contains(r#"<img class="logo" src="https://cdn.example/l.png""#));
        let page = render(&json!({ "roomId": "r", "branding": { "logoUrl": "javascript:x" } }));
        assert!(!page.contains("<img"));
        let view = PageView {
            form_action: "/w/launch?qm_return=x".into(),
            ..plain_view()
        };
        assert!(
            view.locale_links()
                .contains("/w/launch?qm_return=x&amp;lang=th")
        );
    }
}
