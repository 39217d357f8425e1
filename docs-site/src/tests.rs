//! The pages as a whole: every guide in both languages, the notices, and every intra-doc link
//! landing on a heading that exists.

use super::*;

fn all_pages() -> Vec<(&'static str, Locale, &'static DocPage)> {
    let mut pages = vec![
        ("index", Locale::En, index(Locale::En)),
        ("index", Locale::Th, index(Locale::Th)),
    ];
    for guide in &GUIDES {
        for locale in [Locale::En, Locale::Th] {
            let page = super::guide(locale, guide.slug).expect("every guide is served");
            pages.push((guide.slug, locale, page));
        }
    }
    pages
}

/// Every `id="..."` of a page.
fn ids_of(html: &str) -> Vec<&str> {
    html.match_indices(" id=\"")
        .filter_map(|(start, found)| {
            let rest = &html[start + found.len()..];
            rest.find('"').map(|end| &rest[..end])
        })
        .collect()
}

/// Every `href="..."` of a page.
fn hrefs_of(html: &str) -> Vec<&str> {
    html.match_indices("href=\"")
        .filter_map(|(start, found)| {
            let rest = &html[start + found.len()..];
            rest.find('"').map(|end| &rest[..end])
        })
        .collect()
}

/// `%XX` sequences decoded as UTF-8 bytes, the way a browser reads a fragment it matches to an id.
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let escaped = (bytes[index] == b'%')
            .then(|| text.get(index + 1..index + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                decoded.push(byte);
                index += 3;
            }
            None => {
                decoded.push(bytes[index]);
                index += 1;
            }
        }
    }
    String::from_utf8(decoded).expect("an anchor decodes to UTF-8")
}

/// The page served at a `/docs...` or `/progress` path.
fn page_at(path: &str) -> Option<&'static DocPage> {
    match path {
        "/docs" => Some(index(Locale::En)),
        "/docs/th" => Some(index(Locale::Th)),
        "/progress" => Some(progress()),
        _ => match path.strip_prefix("/docs/th/") {
            Some(name) => super::guide(Locale::Th, name),
            None => super::guide(Locale::En, path.strip_prefix("/docs/")?),
        },
    }
}

#[test]
fn every_page_is_whole_scriptless_and_in_its_language() {
    for (name, locale, page) in all_pages() {
        let html = &page.html;
        assert!(
            !html.contains("{{"),
            "{name} {locale:?}: a placeholder is left"
        );
        assert!(
            !html.to_ascii_lowercase().contains("<script"),
            "{name} {locale:?}"
        );
        assert!(
            html.contains(&format!("<html lang=\"{}\">", locale.tag())),
            "{name}"
        );
        assert!(html.contains(&stylesheet_path()), "{name}");
        assert!(
            html.contains("<h1"),
            "{name} {locale:?} has a first heading"
        );
        assert!(page.etag.starts_with('"') && page.etag.ends_with('"'));
    }
}

#[test]
fn the_header_links_docs_progress_and_the_other_language() {
    let english = &super::guide(Locale::En, "operations").expect("served").html;
    assert!(
        english.contains("<a href=\"/docs\" aria-current=\"page\">Docs</a>"),
        "{english}"
    );
    assert!(english.contains("<a href=\"/progress\">Progress</a>"));
    assert!(
        english.contains("<a href=\"/docs/th/operations\" hreflang=\"th\" lang=\"th\">ไทย</a>")
    );
    let thai = &super::guide(Locale::Th, "operations").expect("served").html;
    assert!(thai.contains("<a href=\"/docs/operations\" hreflang=\"en\" lang=\"en\">English</a>"));
    assert!(thai.contains("<a href=\"/docs/th/progress\">ความคืบหน้า</a>"));
    assert!(
        progress()
            .html
            .contains("<a href=\"/progress\" aria-current=\"page\">Progress</a>")
    );
}

#[test]
fn a_missing_thai_translation_says_so_and_links_the_english_page() {
    // The live state stays English on purpose: a translation would lag every change.
    let page = &super::guide(Locale::Th, "PROGRESS.md")
        .expect("served")
        .html;
    assert!(page.contains("ยังไม่มีคำแปลภาษาไทย"), "{page}");
    assert!(
        page.contains("<a href=\"/docs/progress\" hreflang=\"en\">"),
        "{page}"
    );
    assert!(
        page.contains("<article class=\"doc\" lang=\"en\">"),
        "the English body says so"
    );
    assert!(page.contains("<h1 id=\"progress\">Progress"));
    let translated = &super::guide(Locale::Th, "integration")
        .expect("served")
        .html;
    assert!(
        !translated.contains("notice-translation"),
        "a whole translation carries no notice"
    );
    assert!(
        translated.contains("<article class=\"doc\">"),
        "in the page's language"
    );
    assert!(translated.contains("การตรวจที่ประตู"));
    assert!(
        translated.contains("<h2 id=\"รหัสข้อผิดพลาด\">"),
        "the error codes are translated too"
    );
    for slug in ["integration", "operations", "benchmarks"] {
        let translated = &super::guide(Locale::Th, slug).expect("served").html;
        assert!(
            !translated.contains("notice-translation"),
            "{slug}: a whole translation carries no notice"
        );
        assert!(translated.contains("<article class=\"doc\">"), "{slug}");
    }
    assert!(
        super::guide(Locale::Th, "operations")
            .expect("served")
            .html
            .contains("<h2 id=\"การระบุตัวไคลเอนต์\">"),
        "the Thai operations guide has Thai headings"
    );
    assert!(
        !super::guide(Locale::En, "operations")
            .expect("served")
            .html
            .contains("ยังไม่มีคำแปล")
    );
}

#[test]
fn names_are_forgiving_and_unknown_names_are_none() {
    for name in [
        "integration",
        "INTEGRATION.md",
        "Integration",
        "integration.MD",
        " integration ",
    ] {
        assert!(super::guide(Locale::En, name).is_some(), "{name}");
    }
    for name in [
        "spec",
        "SPEC.md",
        "queue-manager-spec.txt",
        "ops",
        "progress",
    ] {
        assert!(super::guide(Locale::En, name).is_some(), "{name}");
    }
    for name in ["", "nope", "README", "../INTEGRATION.md", "integration.txt"] {
        assert!(super::guide(Locale::En, name).is_none(), "{name}");
    }
}

#[test]
fn the_not_found_page_escapes_the_name_and_lists_the_guides() {
    let page = not_found(Locale::En, "<script>x</script>").html;
    assert!(!page.contains("<script>"), "{page}");
    assert!(page.contains("&lt;script&gt;x&lt;/script&gt;"));
    for guide in &GUIDES {
        assert!(
            page.contains(&format!("href=\"/docs/{}\"", guide.slug)),
            "{}",
            guide.slug
        );
    }
    let thai = not_found(Locale::Th, "x").html;
    assert!(thai.contains("<html lang=\"th\">") && thai.contains("ไม่พบคู่มือนี้"));
    assert!(thai.contains("href=\"/docs/th/integration\""));
}

#[test]
fn progress_rows_carry_state_badges_and_a_tally() {
    let page = &progress().html;
    assert!(page.contains(
        "<span class=\"state state-done\"><span aria-hidden=\"true\">✓</span> done</span>"
    ));
    assert!(page.contains("state state-partial"));
    assert!(page.contains("state state-not-started"));
    let tally = page.find("<p class=\"tally\"").expect("a tally");
    let title_end = page.find("</h1>").expect("a title");
    assert!(tally > title_end, "the tally sits under the title");
}

#[test]
fn the_spec_is_served_with_sections_and_links_into_the_guides() {
    let page = &super::guide(Locale::En, "spec").expect("served").html;
    assert!(
        page.contains("<h1 id=\"queue-manager--product-spec-contract\">"),
        "{page}"
    );
    assert!(page.contains("<h2 id=\"visitor\">"));
    assert!(page.contains("<li>POST /api/join {roomId, token?}"));
    assert!(
        page.contains("/docs/operations#two-keys-two-blast-radii"),
        "a named section is linked"
    );
    assert!(page.contains("superseded"), "the Stack notice");
}

#[test]
fn every_intra_doc_link_lands_on_a_page_and_heading_that_exist() {
    let mut checked = 0;
    for (name, locale, page) in all_pages() {
        for href in hrefs_of(&page.html) {
            let (path, fragment) = href.split_once('#').unwrap_or((href, ""));
            if !(path.starts_with("/docs") || path == "/progress")
                || path.starts_with("/docs/assets/")
            {
                continue;
            }
            let target = page_at(path)
                .unwrap_or_else(|| panic!("{name} {locale:?} links {href}: no such page"));
            if !fragment.is_empty() {
                // The renderer percent-encodes a Thai anchor in the href; a browser decodes it
                // before it looks for the id, so the test does too.
                let fragment = percent_decoded(fragment);
                assert!(
                    ids_of(&target.html).contains(&fragment.as_str()),
                    "{name} {locale:?} links {href}: no such heading"
                );
                checked += 1;
            }
        }
    }
    assert!(
        checked >= 6,
        "the Thai guide and the spec link sections: {checked}"
    );
}

#[test]
fn the_stylesheet_is_served_only_under_its_hash() {
    let name = stylesheet_path()
        .trim_start_matches("/docs/assets/")
        .to_owned();
    assert!(name.starts_with("docs-") && name.ends_with(".css"));
    assert_eq!(stylesheet(&name), Some(DOCS_CSS));
    assert_eq!(stylesheet("docs.css"), None);
}

#[test]
fn a_wholly_translated_guide_carries_no_notice() {
    let translated = Guide {
        slug: "operations",
        file: "OPERATIONS.md",
        aliases: &[],
        format: SourceFormat::Markdown,
        source: "# Operating\n",
        thai: Some(catalogue::ThaiGuide {
            source: "# การดูแลระบบ\n\nข้อความ\n",
            completeness: Translation::Complete,
        }),
        title_en: "Operating",
        title_th: "การดูแลระบบ",
        summary_en: "",
        summary_th: "",
    };
    let page = guide_page(&translated, Locale::Th, &[]).html;
    assert!(page.contains("<h1 id=\"การดูแลระบบ\">"), "{page}");
    assert!(!page.contains("notice"), "{page}");
    assert!(page.contains("<article class=\"doc\">"));
}

#[test]
fn a_partly_translated_guide_says_so_and_links_the_english_page() {
    let partial = Guide {
        slug: "operations",
        file: "OPERATIONS.md",
        aliases: &[],
        format: SourceFormat::Markdown,
        source: "# Operating\n",
        thai: Some(catalogue::ThaiGuide {
            source: "# การดูแลระบบ\n\nข้อความ\n",
            completeness: Translation::Partial,
        }),
        title_en: "Operating",
        title_th: "การดูแลระบบ",
        summary_en: "",
        summary_th: "",
    };
    let page = guide_page(&partial, Locale::Th, &[]).html;
    assert!(page.contains("แปลบางส่วน"), "{page}");
    assert!(
        page.contains("<a href=\"/docs/operations\" hreflang=\"en\">"),
        "{page}"
    );
    assert!(page.contains("<article class=\"doc\">"), "in Thai");
}
