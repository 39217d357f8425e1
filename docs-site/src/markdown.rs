//! Markdown guides to HTML with pulldown-cmark, plus what a served guide needs beyond plain
//! CommonMark: ids and self-links on headings, intra-doc links rewritten to served pages, wide
//! tables that scroll on a phone, and the PROGRESS states as text badges.
//!
//! Raw HTML in a guide is shown as text, never passed through: the guides are ours, but a page
//! served from the admin origin must not run or style anything a markdown edit slipped in.

use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, TagEnd};
use qm_web::html::escape_html;

use super::links::{HeadingIds, LinkContext, is_safe_destination, resolve_guide_link};
use super::{Heading, Rendered, StateTally};

/// The states a PROGRESS row can be in, longest first so `not started` wins over a prefix.
const STATES: [(&str, &str, &str); 3] = [
    ("not started", "state-not-started", "○"),
    ("partial", "state-partial", "◐"),
    ("done", "state-done", "✓"),
];

/// Renders one markdown document; `anchor_label` is the self-link's accessible name in the
/// document's own language.
pub(crate) fn render_markdown(source: &str, context: LinkContext, anchor_label: &str) -> Rendered {
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH;
    let events: Vec<Event<'_>> = Parser::new_ext(source, options)
        .map(neutralize_raw_html)
        .collect();
    let headings = collect_headings(&events);
    let mut renderer = Renderer {
        context,
        anchor_label,
        headings: &headings,
        next_heading: 0,
        link_stack: Vec::new(),
        skipping_image: false,
        table: None,
        tally: StateTally::default(),
        out: Vec::with_capacity(events.len() + 64),
    };
    for event in events {
        renderer.push(event);
    }
    let mut html = String::with_capacity(source.len() * 2);
    pulldown_cmark::html::push_html(&mut html, renderer.out.into_iter());
    let title = headings
        .iter()
        .find(|heading| heading.level == 1)
        .map(|heading| heading.text.clone())
        .unwrap_or_default();
    Rendered {
        html,
        title,
        tally: renderer.tally,
        headings,
    }
}

/// Raw HTML becomes text (escaped by the writer); an HTML block becomes a paragraph of it.
fn neutralize_raw_html(event: Event<'_>) -> Event<'_> {
    match event {
        Event::Html(html) | Event::InlineHtml(html) => Event::Text(html),
        Event::Start(Tag::HtmlBlock) => Event::Start(Tag::Paragraph),
        Event::End(TagEnd::HtmlBlock) => Event::End(TagEnd::Paragraph),
        other => other,
    }
}

/// Every heading's level, text and unique id, in document order.
fn collect_headings(events: &[Event<'_>]) -> Vec<Heading> {
    let mut ids = HeadingIds::default();
    let mut headings = Vec::new();
    let mut current: Option<(u8, String)> = None;
    for event in events {
        match event {
            Event::Start(Tag::Heading { level, .. }) => {
                current = Some((*level as u8, String::new()));
            }
            Event::Text(text) | Event::Code(text) => {
                if let Some((_, heading_text)) = current.as_mut() {
                    heading_text.push_str(text);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some((level, text)) = current.take() {
                    let id = ids.next_id(&text);
                    headings.push(Heading { level, text, id });
                }
            }
            _ => {}
        }
    }
    headings
}

/// A table being rendered: which column is the `state` one.
struct TableState {
    in_head: bool,
    header_cells: Vec<String>,
    state_column: Option<usize>,
    column: usize,
    /// Whether the current cell has had no content yet (a badge only opens a cell).
    cell_is_empty: bool,
}

struct Renderer<'h, 'a> {
    context: LinkContext,
    anchor_label: &'h str,
    headings: &'h [Heading],
    next_heading: usize,
    /// One entry per open link: whether it was kept (an unsafe one renders as its text only).
    link_stack: Vec<bool>,
    /// Inside an image whose source was refused.
    skipping_image: bool,
    table: Option<TableState>,
    tally: StateTally,
    out: Vec<Event<'a>>,
}

impl<'a> Renderer<'_, 'a> {
    fn push(&mut self, event: Event<'a>) {
        match event {
            Event::Start(Tag::Heading { level, .. }) => {
                let id = self
                    .headings
                    .get(self.next_heading)
                    .map(|heading| heading.id.clone());
                self.out.push(Event::Start(Tag::Heading {
                    level,
                    id: id.map(CowStr::from),
                    classes: Vec::new(),
                    attrs: Vec::new(),
                }));
            }
            Event::End(TagEnd::Heading(level)) => {
                if let Some(heading) = self.headings.get(self.next_heading) {
                    self.out.push(Event::Html(CowStr::from(format!(
                        r##" <a class="anchor" href="#{id}" aria-label="{label}">#</a>"##,
                        id = escape_html(&heading.id),
                        label = escape_html(self.anchor_label),
                    ))));
                }
                self.next_heading += 1;
                self.out.push(Event::End(TagEnd::Heading(level)));
            }
            Event::Start(Tag::Table(alignments)) => {
                // A wide table scrolls inside its own box, which keyboard users can focus.
                let label = self
                    .next_heading
                    .checked_sub(1)
                    .and_then(|last| self.headings.get(last))
                    .map(|heading| heading.text.as_str())
                    .unwrap_or("table");
                self.out.push(Event::Html(CowStr::from(format!(
                    r#"<div class="table-wrap" tabindex="0" role="region" aria-label="{}">"#,
                    escape_html(label)
                ))));
                self.table = Some(TableState {
                    in_head: false,
                    header_cells: Vec::new(),
                    state_column: None,
                    column: 0,
                    cell_is_empty: true,
                });
                self.out.push(Event::Start(Tag::Table(alignments)));
            }
            Event::End(TagEnd::Table) => {
                self.table = None;
                self.out.push(Event::End(TagEnd::Table));
                self.out.push(Event::Html(CowStr::from("</div>\n")));
            }
            Event::Start(Tag::TableHead) => {
                if let Some(table) = self.table.as_mut() {
                    table.in_head = true;
                    table.column = 0;
                }
                self.out.push(Event::Start(Tag::TableHead));
            }
            Event::End(TagEnd::TableHead) => {
                if let Some(table) = self.table.as_mut() {
                    table.in_head = false;
                    table.state_column = table
                        .header_cells
                        .iter()
                        .position(|cell| cell.trim().eq_ignore_ascii_case("state"));
                }
                self.out.push(Event::End(TagEnd::TableHead));
            }
            Event::Start(Tag::TableRow) => {
                if let Some(table) = self.table.as_mut() {
                    table.column = 0;
                }
                self.out.push(Event::Start(Tag::TableRow));
            }
            Event::Start(Tag::TableCell) => {
                if let Some(table) = self.table.as_mut() {
                    table.cell_is_empty = true;
                    if table.in_head {
                        table.header_cells.push(String::new());
                    }
                }
                self.out.push(Event::Start(Tag::TableCell));
            }
            Event::End(TagEnd::TableCell) => {
                if let Some(table) = self.table.as_mut() {
                    table.column += 1;
                }
                self.out.push(Event::End(TagEnd::TableCell));
            }
            Event::Text(text) => self.push_text(text),
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            }) => {
                self.mark_cell_used();
                if !is_safe_destination(&dest_url) {
                    self.link_stack.push(false);
                    return;
                }
                self.link_stack.push(true);
                let dest_url = resolve_guide_link(&dest_url, self.context)
                    .map(CowStr::from)
                    .unwrap_or(dest_url);
                self.out.push(Event::Start(Tag::Link {
                    link_type,
                    dest_url,
                    title,
                    id,
                }));
            }
            Event::End(TagEnd::Link) => {
                if self.link_stack.pop().unwrap_or(false) {
                    self.out.push(Event::End(TagEnd::Link));
                }
            }
            Event::Start(Tag::Image { dest_url, .. }) if !is_safe_destination(&dest_url) => {
                // The image is dropped; its alt text follows as plain text events.
                self.skipping_image = true;
            }
            Event::End(TagEnd::Image) if self.skipping_image => {
                self.skipping_image = false;
            }
            Event::Code(code) => {
                self.mark_cell_used();
                // `docs/PROGRESS.md` in running text is a reference to that guide: link it.
                let target = (self.link_stack.is_empty() && code.ends_with(".md"))
                    .then(|| resolve_guide_link(&code, self.context))
                    .flatten();
                match target {
                    Some(target) => {
                        self.out.push(Event::Html(CowStr::from(format!(
                            r#"<a href="{}">"#,
                            escape_html(&target)
                        ))));
                        self.out.push(Event::Code(code));
                        self.out.push(Event::Html(CowStr::from("</a>")));
                    }
                    None => self.out.push(Event::Code(code)),
                }
            }
            other => {
                self.mark_cell_used();
                self.out.push(other);
            }
        }
    }

    fn mark_cell_used(&mut self) {
        if let Some(table) = self.table.as_mut() {
            table.cell_is_empty = false;
        }
    }

    fn push_text(&mut self, text: CowStr<'a>) {
        let Some(table) = self.table.as_mut() else {
            self.out.push(Event::Text(text));
            return;
        };
        let opens_cell = std::mem::replace(&mut table.cell_is_empty, false);
        if table.in_head {
            if let Some(cell) = table.header_cells.last_mut() {
                cell.push_str(&text);
            }
            self.out.push(Event::Text(text));
            return;
        }
        let in_state_column = table.state_column == Some(table.column);
        if !(opens_cell && in_state_column) {
            self.out.push(Event::Text(text));
            return;
        }
        match split_state(&text) {
            Some((state, rest)) => {
                let (name, class, mark) = STATES[state];
                self.tally.count(state);
                self.out.push(Event::Html(CowStr::from(format!(
                    r#"<span class="state {class}"><span aria-hidden="true">{mark}</span> {name}</span>"#
                ))));
                if !rest.is_empty() {
                    self.out.push(Event::Text(CowStr::from(rest.to_owned())));
                }
            }
            None => self.out.push(Event::Text(text)),
        }
    }
}

/// The state a cell opens with (index into [`STATES`]) and the text after it: `done: 26,600
/// joins/s` is done with a note, `donee` is not a state.
fn split_state(text: &str) -> Option<(usize, &str)> {
    let trimmed = text.trim_start();
    STATES.iter().enumerate().find_map(|(index, (name, _, _))| {
        let head = trimmed.get(..name.len())?;
        let rest = &trimmed[name.len()..];
        let at_boundary = rest
            .chars()
            .next()
            .is_none_or(|next| !next.is_alphanumeric());
        (head.eq_ignore_ascii_case(name) && at_boundary).then_some((index, rest))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Locale;

    const ENGLISH: LinkContext = LinkContext {
        page_locale: Locale::En,
        source_is_thai: false,
    };

    fn render(source: &str) -> Rendered {
        render_markdown(source, ENGLISH, "Link to this section")
    }

    #[test]
    fn tables_render_inside_a_scrolling_region() {
        let rendered = render("## Pages\n\n| a | b |\n|---|---|\n| 1 | `two` |\n");
        let html = &rendered.html;
        assert!(
            html.contains(
                r#"<div class="table-wrap" tabindex="0" role="region" aria-label="Pages">"#
            ),
            "{html}"
        );
        assert!(
            html.contains("<table>") && html.contains("<th>a</th>"),
            "{html}"
        );
        assert!(html.contains("<td><code>two</code></td>"), "{html}");
        assert!(html.contains("</table>\n</div>"), "{html}");
    }

    #[test]
    fn raw_html_is_shown_as_text_never_passed_through() {
        let source = "<script>alert(1)</script>\n\nText <img src=x onerror=alert(2)> and <b>bold</b>.\n\n<div onclick=\"x()\">block</div>\n";
        let html = render(source).html;
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(!html.contains("<b>"), "{html}");
        assert!(!html.contains("<div onclick"), "{html}");
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{html}"
        );
        assert!(
            html.contains("&lt;img src=x onerror=alert(2)&gt;"),
            "{html}"
        );
    }

    #[test]
    fn unsafe_links_keep_their_text_and_lose_the_link() {
        let html = render("[click](javascript:alert(1)) and ![x](data:text/html,y)").html;
        assert!(!html.contains("javascript:"), "{html}");
        assert!(!html.contains("data:"), "{html}");
        assert!(html.contains("click"), "{html}");
    }

    #[test]
    fn intra_doc_links_resolve_to_served_pages_keeping_the_anchor() {
        let source = "See [ops](OPERATIONS.md#readiness), [the spec](docs/SPEC.md), \
                      [a site](https://example.com/INTEGRATION.md) and `docs/PROGRESS.md`.";
        let html = render(source).html;
        assert!(
            html.contains(r#"<a href="/docs/operations#readiness">ops</a>"#),
            "{html}"
        );
        assert!(
            html.contains(r#"<a href="/docs/spec">the spec</a>"#),
            "{html}"
        );
        assert!(
            html.contains(r#"href="https://example.com/INTEGRATION.md""#),
            "{html}"
        );
        assert!(
            html.contains(r#"<a href="/docs/progress"><code>docs/PROGRESS.md</code></a>"#),
            "{html}"
        );
    }

    #[test]
    fn headings_get_unique_ids_and_a_self_link() {
        let rendered = render(
            "# Title\n\n## Two keys, two blast radii\n\n## Rebuild\n\n### Rebuild\n\n## `/api/join`\n",
        );
        let html = &rendered.html;
        assert_eq!(rendered.title, "Title");
        assert!(html.contains(r##"<h2 id="two-keys-two-blast-radii">Two keys, two blast radii <a class="anchor" href="#two-keys-two-blast-radii" aria-label="Link to this section">#</a></h2>"##), "{html}");
        assert!(
            html.contains(r#"<h2 id="rebuild">"#) && html.contains(r#"<h3 id="rebuild-1">"#),
            "{html}"
        );
        assert!(
            html.contains(r#"<h2 id="apijoin"><code>/api/join</code>"#),
            "{html}"
        );
        let ids: Vec<&str> = rendered
            .headings
            .iter()
            .map(|heading| heading.id.as_str())
            .collect();
        assert_eq!(
            ids,
            [
                "title",
                "two-keys-two-blast-radii",
                "rebuild",
                "rebuild-1",
                "apijoin"
            ]
        );
    }

    #[test]
    fn the_state_column_carries_text_badges_and_is_tallied() {
        let source = "| feature | state | proof |\n|---|---|---|\n\
                      | a | done | done elsewhere |\n\
                      | b | partial | x |\n\
                      | c | not started | — |\n\
                      | d | done: 26,600 joins/s | y |\n\
                      | e | undone | z |\n";
        let rendered = render(source);
        let html = &rendered.html;
        assert!(html.contains(r#"<td><span class="state state-done"><span aria-hidden="true">✓</span> done</span></td>"#), "{html}");
        assert!(html.contains(r#"<span class="state state-partial"><span aria-hidden="true">◐</span> partial</span>"#), "{html}");
        assert!(html.contains(r#"<span class="state state-not-started"><span aria-hidden="true">○</span> not started</span>"#), "{html}");
        assert!(html.contains("done</span>: 26,600 joins/s</td>"), "{html}");
        assert!(html.contains("<td>undone</td>"), "not a state: {html}");
        assert!(
            html.contains("<td>done elsewhere</td>"),
            "only the state column: {html}"
        );
        assert_eq!(
            (
                rendered.tally.done,
                rendered.tally.partial,
                rendered.tally.not_started
            ),
            (2, 1, 1)
        );
    }
}
