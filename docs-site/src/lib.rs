//! The guides of `docs/` as web pages: `/docs` (an index), `/docs/<name>` (a guide), `/progress`
//! (PROGRESS.md) and the Thai pages under `/docs/th`. Everything is embedded at build time and
//! rendered once per process, so serving a page never touches the filesystem and every build
//! serves the guides it was built with. The admin process serves these pages; this crate only
//! renders them.
//!
//! A Thai page whose guide has no translation in `docs/th/` shows the English guide under a Thai
//! notice that says so and links the English page: a reader is never sent a 404 for a page the
//! English side has.

use std::sync::LazyLock;

use qm_http::content_hash;
use qm_web::html::{escape_html, fill_template};

/// The languages the pages are served in: the waiting page's own locales, one type for both.
pub use qm_web::Locale;

mod catalogue;
mod links;
mod markdown;
mod plain;
mod serve;

pub use serve::routes;

use catalogue::{GUIDES, Guide, SourceFormat, THAI_OVERVIEW, Translation};
use links::{LinkContext, guide_path, index_path};

const DOCS_HTML: &str = include_str!("../assets/docs.html");
const DOCS_CSS: &str = include_str!("../assets/docs.css");

/// A rendered page and its validator.
#[derive(Debug, Clone)]
pub struct DocPage {
    pub html: String,
    /// A strong ETag (quoted) of `html`: the pages change only with a build.
    pub etag: String,
}

impl DocPage {
    fn new(html: String) -> DocPage {
        let etag = format!("\"{}\"", content_hash(html.as_bytes()));
        DocPage { html, etag }
    }
}

/// One heading of a rendered document.
#[derive(Debug, Clone)]
pub(crate) struct Heading {
    pub(crate) level: u8,
    pub(crate) text: String,
    pub(crate) id: String,
}

/// How many rows of each state a document's `state` columns hold.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StateTally {
    pub(crate) done: usize,
    pub(crate) partial: usize,
    pub(crate) not_started: usize,
}

impl StateTally {
    /// Counts a state by its index in the renderer's table (not started, partial, done).
    fn count(&mut self, state: usize) {
        match state {
            0 => self.not_started += 1,
            1 => self.partial += 1,
            _ => self.done += 1,
        }
    }

    fn is_empty(&self) -> bool {
        self.done + self.partial + self.not_started == 0
    }
}

/// A document rendered to an HTML fragment.
#[derive(Debug, Clone)]
pub(crate) struct Rendered {
    pub(crate) html: String,
    /// The first-level heading's text, for `<title>`.
    pub(crate) title: String,
    pub(crate) tally: StateTally,
    pub(crate) headings: Vec<Heading>,
}

/// Every page, rendered on first use.
struct Pages {
    index: [DocPage; 2],
    /// Per guide of [`GUIDES`], in order: English, Thai.
    guides: Vec<[DocPage; 2]>,
}

static PAGES: LazyLock<Pages> = LazyLock::new(render_all);

static STYLESHEET_NAME: LazyLock<String> =
    LazyLock::new(|| format!("docs-{}.css", content_hash(DOCS_CSS.as_bytes())));

/// Content type of the pages.
pub const HTML_CONTENT_TYPE: &str = "text/html; charset=utf-8";

/// The policy the pages are written to: no script at all, only their own stylesheet.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; img-src 'self' data:; \
     base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The served path of the pages' stylesheet, content-hashed so it can be cached forever.
pub fn stylesheet_path() -> String {
    format!("/docs/assets/{}", *STYLESHEET_NAME)
}

/// The stylesheet by its served file name (`docs-<hash>.css`).
pub fn stylesheet(file_name: &str) -> Option<&'static str> {
    (file_name == STYLESHEET_NAME.as_str()).then_some(DOCS_CSS)
}

/// `/docs` or `/docs/th`.
pub fn index(locale: Locale) -> &'static DocPage {
    &PAGES.index[locale_slot(locale)]
}

/// `/docs/<name>` or `/docs/th/<name>`. Names are forgiving: `integration`, `INTEGRATION.md`
/// and `Integration` are one guide. `None` for a name no guide has.
pub fn guide(locale: Locale, name: &str) -> Option<&'static DocPage> {
    let position = GUIDES.iter().position(|guide| guide.answers_to(name))?;
    Some(&PAGES.guides[position][locale_slot(locale)])
}

/// `/progress`: PROGRESS.md.
pub fn progress() -> &'static DocPage {
    let position = GUIDES
        .iter()
        .position(|guide| guide.slug == "progress")
        .unwrap_or_default();
    &PAGES.guides[position][0]
}

/// The 404 page for a guide name nobody has, in the reader's language, listing the guides.
pub fn not_found(locale: Locale, name: &str) -> DocPage {
    let (heading, sentence) = match locale {
        Locale::En => ("No such guide", "There is no guide named"),
        Locale::Th => ("ไม่พบคู่มือนี้", "ไม่มีคู่มือชื่อ"),
    };
    let shown_name: String = name.chars().take(80).collect();
    let body = format!(
        "<h1>{heading}</h1>\n<p>{sentence} <code>{}</code>.</p>\n{}",
        escape_html(&shown_name),
        guide_list(locale)
    );
    DocPage::new(page(Chrome {
        locale,
        title: heading.to_owned(),
        current: Section::Docs,
        switch_href: index_path(other(locale)).to_owned(),
        notice: String::new(),
        article_lang: None,
        body: &body,
        footer: String::new(),
    }))
}

fn locale_slot(locale: Locale) -> usize {
    match locale {
        Locale::En => 0,
        Locale::Th => 1,
    }
}

fn other(locale: Locale) -> Locale {
    match locale {
        Locale::En => Locale::Th,
        Locale::Th => Locale::En,
    }
}

/// Which navigation entry the page is.
#[derive(Clone, Copy, PartialEq)]
enum Section {
    Docs,
    Progress,
}

/// The parts of one page around its body.
struct Chrome<'a> {
    locale: Locale,
    title: String,
    current: Section,
    /// The same page in the other language.
    switch_href: String,
    /// Shown above the article (a translation notice, a tally).
    notice: String,
    /// The article's own language when it differs from the page's (an English fallback).
    article_lang: Option<&'static str>,
    body: &'a str,
    footer: String,
}

fn page(chrome: Chrome<'_>) -> String {
    let locale = chrome.locale;
    let (docs_label, progress_label, nav_label, skip_label, switch_label, switch_lang) =
        match locale {
            Locale::En => (
                "Docs",
                "Progress",
                "Documentation",
                "Skip to the content",
                "ไทย",
                "th",
            ),
            Locale::Th => (
                "เอกสาร",
                "ความคืบหน้า",
                "เอกสาร",
                "ข้ามไปยังเนื้อหา",
                "English",
                "en",
            ),
        };
    let progress_href = match locale {
        Locale::En => "/progress".to_owned(),
        Locale::Th => guide_path(Locale::Th, "progress"),
    };
    let current = |section: Section| {
        if chrome.current == section {
            r#" aria-current="page""#
        } else {
            ""
        }
    };
    let nav = format!(
        "<a href=\"{docs}\"{docs_current}>{docs_label}</a>\n<a href=\"{progress}\"{progress_current}>{progress_label}</a>\n<a href=\"{switch}\" hreflang=\"{switch_lang}\" lang=\"{switch_lang}\">{switch_label}</a>",
        docs = index_path(locale),
        docs_current = current(Section::Docs),
        progress = escape_html(&progress_href),
        progress_current = current(Section::Progress),
        switch = escape_html(&chrome.switch_href),
    );
    fill_template(
        DOCS_HTML,
        &[
            ("LANG", locale.tag().to_owned()),
            ("TITLE", escape_html(&chrome.title)),
            ("CSS_HREF", stylesheet_path()),
            ("ALTERNATE_LANG", switch_lang.to_owned()),
            ("ALTERNATE_HREF", escape_html(&chrome.switch_href)),
            ("SKIP_LABEL", skip_label.to_owned()),
            ("HOME_HREF", index_path(locale).to_owned()),
            ("NAV_LABEL", nav_label.to_owned()),
            ("NAV", nav),
            ("NOTICE", chrome.notice),
            (
                "ARTICLE_LANG",
                chrome
                    .article_lang
                    .map(|lang| format!(" lang=\"{lang}\""))
                    .unwrap_or_default(),
            ),
            ("BODY", chrome.body.to_owned()),
            ("FOOTER", chrome.footer),
        ],
    )
}

fn render_all() -> Pages {
    // The markdown guides first: the spec links into their sections by heading.
    let english: Vec<Option<Rendered>> = GUIDES
        .iter()
        .map(|guide| match guide.format {
            SourceFormat::Markdown => Some(render_guide_source(guide, Locale::En)),
            SourceFormat::PlainSpec => None,
        })
        .collect();
    let named: Vec<plain::NamedGuide<'_>> = GUIDES
        .iter()
        .zip(&english)
        .filter_map(|(guide, rendered)| {
            rendered.as_ref().map(|rendered| plain::NamedGuide {
                file: guide.file,
                headings: &rendered.headings,
            })
        })
        .collect();
    let guides = GUIDES
        .iter()
        .map(|guide| {
            [
                guide_page(guide, Locale::En, &named),
                guide_page(guide, Locale::Th, &named),
            ]
        })
        .collect();
    Pages {
        index: [index_page(Locale::En), index_page(Locale::Th)],
        guides,
    }
}

fn anchor_label(locale: Locale) -> &'static str {
    match locale {
        Locale::En => "Link to this section",
        Locale::Th => "ลิงก์ไปยังหัวข้อนี้",
    }
}

/// A markdown guide's English source rendered for a page in `page_locale`.
fn render_guide_source(guide: &Guide, page_locale: Locale) -> Rendered {
    let context = LinkContext {
        page_locale,
        source_is_thai: false,
    };
    markdown::render_markdown(guide.source, context, anchor_label(Locale::En))
}

fn render_english(guide: &Guide, page_locale: Locale, named: &[plain::NamedGuide<'_>]) -> Rendered {
    match guide.format {
        SourceFormat::Markdown => render_guide_source(guide, page_locale),
        SourceFormat::PlainSpec => plain::render_plain_spec(
            guide.source,
            LinkContext {
                page_locale,
                source_is_thai: false,
            },
            named,
            anchor_label(Locale::En),
        ),
    }
}

fn guide_page(guide: &Guide, locale: Locale, named: &[plain::NamedGuide<'_>]) -> DocPage {
    let thai_translation = match (locale, &guide.thai) {
        (Locale::Th, Some(translation)) => Some(translation),
        _ => None,
    };
    let (rendered, article_lang, source_file) = match thai_translation {
        Some(translation) => {
            let context = LinkContext {
                page_locale: Locale::Th,
                source_is_thai: true,
            };
            (
                markdown::render_markdown(translation.source, context, anchor_label(Locale::Th)),
                None,
                format!("docs/th/{}", guide.file),
            )
        }
        None => {
            let article_lang = (locale == Locale::Th).then_some("en");
            (
                render_english(guide, locale, named),
                article_lang,
                format!("docs/{}", guide.file),
            )
        }
    };
    let english_href = guide_path(Locale::En, guide.slug);
    let mut notice = match (locale, thai_translation) {
        (Locale::En, _) => String::new(),
        (Locale::Th, Some(translation)) => match translation.completeness {
            Translation::Complete => String::new(),
            Translation::Partial => catalogue::thai_partial_notice(&english_href),
        },
        (Locale::Th, None) => catalogue::thai_missing_notice(&english_href),
    };
    notice.push_str(&guide.notice(locale));
    let mut body = rendered.html;
    if !rendered.tally.is_empty() {
        // Under the title, where a reader looks for the summary of what follows.
        let tally = tally_line(rendered.tally, locale);
        match body.find("</h1>") {
            Some(end) => body.insert_str(end + "</h1>".len(), &format!("\n{tally}")),
            None => body.insert_str(0, &tally),
        }
    }
    let title = match locale {
        Locale::En => rendered.title,
        Locale::Th => guide.title_th.to_owned(),
    };
    let footer = match locale {
        Locale::En => format!(
            "Rendered from <code>{}</code>, embedded in this build.",
            escape_html(&source_file)
        ),
        Locale::Th => format!(
            "แสดงจาก <code>{}</code> ซึ่งฝังมากับรุ่นนี้ของโปรแกรม",
            escape_html(&source_file)
        ),
    };
    DocPage::new(page(Chrome {
        locale,
        title,
        current: if guide.slug == "progress" {
            Section::Progress
        } else {
            Section::Docs
        },
        switch_href: guide_path(other(locale), guide.slug),
        notice,
        article_lang,
        body: &body,
        footer,
    }))
}

/// `41 done · 6 partial · 9 not started`, with the same badges as the rows.
fn tally_line(tally: StateTally, locale: Locale) -> String {
    let label = match locale {
        Locale::En => "Rows by state",
        Locale::Th => "จำนวนแถวตามสถานะ",
    };
    format!(
        "<p class=\"tally\" lang=\"en\"><span class=\"visually-hidden\" lang=\"{lang}\">{label}: </span>\
         <span class=\"state state-done\"><span aria-hidden=\"true\">✓</span> {} done</span> \
         <span class=\"state state-partial\"><span aria-hidden=\"true\">◐</span> {} partial</span> \
         <span class=\"state state-not-started\"><span aria-hidden=\"true\">○</span> {} not started</span></p>\n",
        tally.done,
        tally.partial,
        tally.not_started,
        lang = locale.tag(),
    )
}

fn guide_list(locale: Locale) -> String {
    let mut list = String::from("<ul class=\"guides\">\n");
    for guide in &GUIDES {
        let (title, summary) = guide.index_entry(locale);
        list.push_str(&format!(
            "<li><a href=\"{href}\">{title}</a> <code>{file}</code><br>{summary}{status}</li>\n",
            href = escape_html(&guide_path(locale, guide.slug)),
            title = escape_html(title),
            file = escape_html(guide.file),
            summary = escape_html(summary),
            status = match locale {
                Locale::En => String::new(),
                Locale::Th => format!(
                    " <span class=\"translation\">({})</span>",
                    guide.thai_status()
                ),
            },
        ));
    }
    list.push_str("</ul>\n");
    list
}

fn index_page(locale: Locale) -> DocPage {
    let intro = match locale {
        Locale::En => catalogue::ENGLISH_OVERVIEW_HTML.to_owned(),
        Locale::Th => {
            let context = LinkContext {
                page_locale: Locale::Th,
                source_is_thai: true,
            };
            markdown::render_markdown(THAI_OVERVIEW, context, anchor_label(Locale::Th)).html
        }
    };
    let list_heading = match locale {
        Locale::En => "<h2 id=\"the-guides\">The guides</h2>",
        Locale::Th => "<h2 id=\"คู่มือทั้งหมด\">คู่มือทั้งหมด</h2>",
    };
    let body = format!("{intro}{list_heading}\n{}", guide_list(locale));
    let (title, footer) = match locale {
        Locale::En => (
            "Queue Manager documentation",
            "Every guide is embedded in this build: what you read here is what this server runs.",
        ),
        Locale::Th => (
            "เอกสาร Queue Manager",
            "คู่มือทุกฉบับฝังมากับรุ่นนี้ของโปรแกรม: สิ่งที่อ่านที่นี่ตรงกับเซิร์ฟเวอร์ที่กำลังทำงานอยู่",
        ),
    };
    DocPage::new(page(Chrome {
        locale,
        title: title.to_owned(),
        current: Section::Docs,
        switch_href: index_path(other(locale)).to_owned(),
        notice: String::new(),
        article_lang: None,
        body: &body,
        footer: footer.to_owned(),
    }))
}

/// The guide slug a file name (`OPERATIONS.md`, any case) is served under.
pub(crate) fn slug_of_file(file_name: &str) -> Option<&'static str> {
    GUIDES
        .iter()
        .find(|guide| guide.file.eq_ignore_ascii_case(file_name))
        .map(|guide| guide.slug)
}

/// Whether `docs/th/` holds a translation of guide `slug`.
pub(crate) fn has_thai_translation(slug: &str) -> bool {
    GUIDES
        .iter()
        .any(|guide| guide.slug == slug && guide.thai.is_some())
}

#[cfg(test)]
mod tests;
