//! Where a link written in a guide goes once the guide is served: heading ids (the anchors other
//! guides link to) and intra-doc links rewritten from file paths to served pages.
//!
//! The guides are written to read well in the repository, so they link files
//! (`docs/OPERATIONS.md`, `OPERATIONS.md#readiness`, `../INTEGRATION.md` from `docs/th/`). A reader
//! of the running server has no repository: each such link becomes its page under `/docs`,
//! keeping the anchor, and ids are made the way GitHub makes them so the same anchors work in
//! both places.

use std::collections::HashMap;

use crate::Locale;

/// How links of one rendered document resolve.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LinkContext {
    /// The language of the page the document is shown on: a plain `OPERATIONS.md` keeps the
    /// reader in it (a Thai reader of an English fallback stays on Thai pages).
    pub(crate) page_locale: Locale,
    /// Whether the source file lives in `docs/th/`, where `../X.md` is the English original.
    pub(crate) source_is_thai: bool,
}

/// The served path of the docs index for `locale`.
pub(crate) fn index_path(locale: Locale) -> &'static str {
    match locale {
        Locale::En => "/docs",
        Locale::Th => "/docs/th",
    }
}

/// The served path of guide `slug` for `locale`.
pub(crate) fn guide_path(locale: Locale, slug: &str) -> String {
    format!("{}/{slug}", index_path(locale))
}

/// The served URL of a link destination that names a guide file, anchor kept; `None` for
/// anything else (other sites, routes, bare anchors, files this build does not serve).
pub(crate) fn resolve_guide_link(destination: &str, context: LinkContext) -> Option<String> {
    let (path, fragment) = match destination.split_once('#') {
        Some((path, fragment)) => (path, Some(fragment)),
        None => (destination, None),
    };
    if path.is_empty() || path.starts_with('/') || has_scheme(path) {
        return None;
    }
    let mut rest = path.trim_start_matches("./");
    let mut locale = context.page_locale;
    if context.source_is_thai && rest.starts_with("../") {
        // Up from docs/th/ is the English original.
        locale = Locale::En;
    }
    while let Some(stripped) = rest.strip_prefix("../") {
        rest = stripped;
    }
    rest = rest.strip_prefix("docs/").unwrap_or(rest);
    if let Some(thai) = rest.strip_prefix("th/") {
        locale = Locale::Th;
        rest = thai;
    }
    if rest.contains('/') {
        return None;
    }
    let target = if rest.eq_ignore_ascii_case("README.md") {
        index_path(locale).to_owned()
    } else {
        let slug = super::slug_of_file(rest)?;
        let names_english_heading = !context.source_is_thai && fragment.is_some();
        if locale == Locale::Th && names_english_heading && super::has_thai_translation(slug) {
            // The anchor is an English heading: a translated page has Thai ones instead, while
            // an untranslated Thai page shows the English text with its headings.
            locale = Locale::En;
        }
        guide_path(locale, slug)
    };
    Some(match fragment {
        Some(fragment) if !fragment.is_empty() => format!("{target}#{fragment}"),
        _ => target,
    })
}

/// Whether a link may be rendered at all: relative paths, anchors and http(s)/mailto only, so no
/// `javascript:` or `data:` URL ever becomes a live link.
pub(crate) fn is_safe_destination(destination: &str) -> bool {
    let trimmed = destination.trim();
    if !has_scheme(trimmed) {
        return true;
    }
    let scheme = trimmed
        .split(':')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    matches!(scheme.as_str(), "http" | "https" | "mailto")
}

/// `scheme:` before any `/`, `?` or `#`, as a browser reads it.
fn has_scheme(destination: &str) -> bool {
    let end = destination
        .find(['/', '?', '#'])
        .unwrap_or(destination.len());
    destination[..end].contains(':')
}

/// A heading's anchor, as GitHub makes it: lowercase, punctuation dropped, spaces as hyphens.
/// Thai vowel and tone marks are combining marks, not alphanumerics to `char`, so the Thai block
/// is kept whole; otherwise a Thai heading would lose half its letters.
pub(crate) fn slugify(text: &str) -> String {
    let mut slug = String::with_capacity(text.len());
    for character in text.trim().chars().flat_map(char::to_lowercase) {
        if character.is_alphanumeric()
            || character == '-'
            || character == '_'
            || ('\u{0E00}'..='\u{0E7F}').contains(&character)
        {
            slug.push(character);
        } else if character == ' ' {
            slug.push('-');
        }
    }
    slug
}

/// Unique ids for the headings of one document: a repeated heading gets `-1`, `-2`, ... as on
/// GitHub, and a heading of punctuation only still gets an id.
#[derive(Default)]
pub(crate) struct HeadingIds {
    seen: HashMap<String, usize>,
}

impl HeadingIds {
    pub(crate) fn next_id(&mut self, heading_text: &str) -> String {
        let mut base = slugify(heading_text);
        if base.is_empty() {
            base = "section".to_owned();
        }
        let count = self.seen.entry(base.clone()).or_insert(0);
        let id = if *count == 0 {
            base.clone()
        } else {
            format!("{base}-{count}")
        };
        *count += 1;
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENGLISH: LinkContext = LinkContext {
        page_locale: Locale::En,
        source_is_thai: false,
    };
    const THAI_SOURCE: LinkContext = LinkContext {
        page_locale: Locale::Th,
        source_is_thai: true,
    };

    #[test]
    fn guide_files_become_their_pages_with_the_anchor_kept() {
        let cases = [
            ("docs/OPERATIONS.md", "/docs/operations"),
            ("OPERATIONS.md#readiness", "/docs/operations#readiness"),
            ("./INTEGRATION.md", "/docs/integration"),
            ("docs/PROGRESS.md#pages", "/docs/progress#pages"),
            ("SPEC.md", "/docs/spec"),
            ("th/INTEGRATION.md", "/docs/th/integration"),
            ("benchmarks.md", "/docs/benchmarks"),
        ];
        for (destination, expected) in cases {
            assert_eq!(
                resolve_guide_link(destination, ENGLISH).as_deref(),
                Some(expected),
                "{destination}"
            );
        }
    }

    #[test]
    fn a_thai_source_links_its_siblings_in_thai_and_up_to_english() {
        assert_eq!(
            resolve_guide_link("INTEGRATION.md#tokens", THAI_SOURCE).as_deref(),
            Some("/docs/th/integration#tokens")
        );
        assert_eq!(
            resolve_guide_link("../INTEGRATION.md#tokens", THAI_SOURCE).as_deref(),
            Some("/docs/integration#tokens")
        );
        assert_eq!(
            resolve_guide_link("README.md", THAI_SOURCE).as_deref(),
            Some("/docs/th")
        );
        // An English guide shown on a Thai page keeps the reader on Thai pages.
        let english_on_thai_page = LinkContext {
            page_locale: Locale::Th,
            source_is_thai: false,
        };
        assert_eq!(
            resolve_guide_link("PROGRESS.md#pages", english_on_thai_page).as_deref(),
            Some("/docs/th/progress#pages")
        );
        // Unless the anchor is an English heading of a guide whose Thai page is translated.
        assert_eq!(
            resolve_guide_link("INTEGRATION.md#error-codes", english_on_thai_page).as_deref(),
            Some("/docs/integration#error-codes")
        );
        assert_eq!(
            resolve_guide_link("INTEGRATION.md", english_on_thai_page).as_deref(),
            Some("/docs/th/integration")
        );
    }

    #[test]
    fn other_destinations_are_left_alone() {
        for destination in [
            "https://example.com/OPERATIONS.md",
            "/api/join",
            "#readiness",
            "",
            "docs/unknown.md",
            "deploy/nginx.conf",
            "src/OPERATIONS.md",
        ] {
            assert_eq!(
                resolve_guide_link(destination, ENGLISH),
                None,
                "{destination}"
            );
        }
    }

    #[test]
    fn only_web_and_mail_schemes_are_safe() {
        for safe in [
            "https://example.com",
            "HTTP://x",
            "mailto:a@b",
            "/docs",
            "#x",
            "a/b:c",
        ] {
            assert!(is_safe_destination(safe), "{safe}");
        }
        for unsafe_destination in [
            "javascript:alert(1)",
            " JavaScript:alert(1)",
            "data:text/html,x",
            "vbscript:x",
        ] {
            assert!(
                !is_safe_destination(unsafe_destination),
                "{unsafe_destination}"
            );
        }
    }

    #[test]
    fn slugs_follow_githubs_rule_and_keep_thai_marks() {
        assert_eq!(
            slugify("Two keys, two blast radii"),
            "two-keys-two-blast-radii"
        );
        assert_eq!(slugify("POST /api/notify"), "post-apinotify");
        assert_eq!(
            slugify("Stack (fixed — do not change)"),
            "stack-fixed--do-not-change"
        );
        assert_eq!(
            slugify("The waiting page: /w/:roomId"),
            "the-waiting-page-wroomid"
        );
        assert_eq!(slugify("การตรวจที่ประตู"), "การตรวจที่ประตู");
        let mut ids = HeadingIds::default();
        assert_eq!(ids.next_id("Rebuild"), "rebuild");
        assert_eq!(ids.next_id("Rebuild"), "rebuild-1");
        assert_eq!(ids.next_id("Rebuild"), "rebuild-2");
        assert_eq!(ids.next_id("!!"), "section");
    }
}
