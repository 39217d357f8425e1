//! The spec to HTML. `docs/SPEC.md` is the contract exactly as it was handed to us: plain text
//! with `•` bullets, one per line, and short unpunctuated lines as section titles. Read as
//! markdown it would run into one paragraph, so it gets its own light conversion: title, section
//! headings with ids, bullet lists, paragraphs, everything escaped, and the guides it names
//! (`OPERATIONS.md, Two keys, two blast radii`) linked to their served pages and sections.

use qm_web::html::escape_html;

use super::links::{HeadingIds, LinkContext, resolve_guide_link};
use super::{Heading, Rendered, StateTally};

/// A guide the spec may name in running text, with its headings (for `GUIDE.md, Section`).
pub(crate) struct NamedGuide<'a> {
    pub(crate) file: &'a str,
    pub(crate) headings: &'a [Heading],
}

/// Longest line still read as a section title; the spec's titles are all far shorter than its
/// shortest sentence-paragraph.
const TITLE_MAX_CHARS: usize = 90;

pub(crate) fn render_plain_spec(
    text: &str,
    context: LinkContext,
    guides: &[NamedGuide<'_>],
    anchor_label: &str,
) -> Rendered {
    let mut html = String::with_capacity(text.len() * 2);
    let mut ids = HeadingIds::default();
    let mut headings = Vec::new();
    let mut in_list = false;
    for line in text.lines().map(str::trim_end) {
        let trimmed = line.trim_start();
        if trimmed.is_empty() {
            close_list(&mut html, &mut in_list);
            continue;
        }
        if let Some(bullet) = trimmed.strip_prefix('•') {
            if !in_list {
                html.push_str("<ul>\n");
                in_list = true;
            }
            html.push_str("<li>");
            html.push_str(&inline(bullet.trim(), context, guides));
            html.push_str("</li>\n");
            continue;
        }
        close_list(&mut html, &mut in_list);
        let level = if headings.is_empty() {
            Some(1)
        } else if is_section_title(trimmed) {
            Some(2)
        } else {
            None
        };
        match level {
            Some(level) => {
                let id = ids.next_id(trimmed);
                html.push_str(&format!(
                    "<h{level} id=\"{id}\">{text} <a class=\"anchor\" href=\"#{id}\" aria-label=\"{label}\">#</a></h{level}>\n",
                    id = escape_html(&id),
                    text = escape_html(trimmed),
                    label = escape_html(anchor_label),
                ));
                headings.push(Heading {
                    level,
                    text: trimmed.to_owned(),
                    id,
                });
            }
            None => {
                html.push_str("<p>");
                html.push_str(&inline(trimmed, context, guides));
                html.push_str("</p>\n");
            }
        }
    }
    close_list(&mut html, &mut in_list);
    Rendered {
        title: headings
            .first()
            .map(|heading| heading.text.clone())
            .unwrap_or_default(),
        html,
        tally: StateTally::default(),
        headings,
    }
}

fn close_list(html: &mut String, in_list: &mut bool) {
    if *in_list {
        html.push_str("</ul>\n");
        *in_list = false;
    }
}

fn is_section_title(line: &str) -> bool {
    line.chars().count() <= TITLE_MAX_CHARS && !line.ends_with(['.', ':', ';', ','])
}

/// One line of running text, escaped, with every guide it names linked (and the section after
/// `GUIDE.md, ` when it is one of that guide's headings).
fn inline(text: &str, context: LinkContext, guides: &[NamedGuide<'_>]) -> String {
    let mut html = String::with_capacity(text.len() + 64);
    let mut rest = text;
    while let Some((start, guide)) = next_guide_mention(rest, guides) {
        html.push_str(&escape_html(&rest[..start]));
        let after = &rest[start + guide.file.len()..];
        let section = after.strip_prefix(", ").and_then(|tail| {
            guide
                .headings
                .iter()
                .filter(|heading| heading.level > 1 && tail.starts_with(heading.text.as_str()))
                .max_by_key(|heading| heading.text.len())
        });
        let (destination, label_len) = match section {
            Some(heading) => (
                format!("{}#{}", guide.file, heading.id),
                guide.file.len() + 2 + heading.text.len(),
            ),
            None => (guide.file.to_owned(), guide.file.len()),
        };
        let label = &rest[start..start + label_len];
        match resolve_guide_link(&destination, context) {
            Some(href) => html.push_str(&format!(
                "<a href=\"{}\">{}</a>",
                escape_html(&href),
                escape_html(label)
            )),
            None => html.push_str(&escape_html(label)),
        }
        rest = &rest[start + label_len..];
    }
    html.push_str(&escape_html(rest));
    html
}

/// The first whole-word mention of a guide's file name in `text`.
fn next_guide_mention<'g, 'a>(
    text: &str,
    guides: &'g [NamedGuide<'a>],
) -> Option<(usize, &'g NamedGuide<'a>)> {
    guides
        .iter()
        .filter_map(|guide| {
            text.match_indices(guide.file)
                .find(|(start, _)| {
                    let before = text[..*start].chars().next_back();
                    let after = text[start + guide.file.len()..].chars().next();
                    before.is_none_or(|c| !c.is_alphanumeric() && c != '/')
                        && after.is_none_or(|c| !c.is_alphanumeric())
                })
                .map(|(start, _)| (start, guide))
        })
        .min_by_key(|(start, _)| *start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Locale;

    const ENGLISH: LinkContext = LinkContext {
        page_locale: Locale::En,
        source_is_thai: false,
    };

    fn operations_headings() -> Vec<Heading> {
        vec![
            Heading {
                level: 1,
                text: "Operating Queue Manager".into(),
                id: "operating-queue-manager".into(),
            },
            Heading {
                level: 2,
                text: "Two keys, two blast radii".into(),
                id: "two-keys-two-blast-radii".into(),
            },
        ]
    }

    #[test]
    fn titles_sections_bullets_and_paragraphs() {
        let text = "Queue Manager — Spec\n\nA <product>.\n\nVisitor\n\n• POST /api/join {roomId, token?} → {token}\n• GET /w/:roomId → page\n\nQuality bar (what critics judge)\n\n• calm\n";
        let rendered = render_plain_spec(text, ENGLISH, &[], "Link");
        let html = &rendered.html;
        assert_eq!(rendered.title, "Queue Manager — Spec");
        assert!(
            html.starts_with("<h1 id=\"queue-manager--spec\">Queue Manager — Spec"),
            "{html}"
        );
        assert!(html.contains("<p>A &lt;product&gt;.</p>"), "{html}");
        assert!(html.contains("<h2 id=\"visitor\">Visitor"), "{html}");
        assert!(html.contains("<ul>\n<li>POST /api/join {roomId, token?} → {token}</li>\n<li>GET /w/:roomId → page</li>\n</ul>"), "{html}");
        assert!(
            html.contains("<h2 id=\"quality-bar-what-critics-judge\">"),
            "{html}"
        );
        assert!(html.ends_with("<li>calm</li>\n</ul>\n"), "{html}");
    }

    #[test]
    fn guides_named_in_the_text_are_linked_with_their_section() {
        let headings = operations_headings();
        let guides = [NamedGuide {
            file: "OPERATIONS.md",
            headings: &headings,
        }];
        let text = "Title\n\n• See OPERATIONS.md, Two keys, two blast radii, and OPERATIONS.md, Nothing like it. Not XOPERATIONS.md or docs/OPERATIONS.mdx.\n";
        let html = render_plain_spec(text, ENGLISH, &guides, "Link").html;
        assert!(html.contains("See <a href=\"/docs/operations#two-keys-two-blast-radii\">OPERATIONS.md, Two keys, two blast radii</a>, and <a href=\"/docs/operations\">OPERATIONS.md</a>, Nothing"), "{html}");
        assert!(
            html.contains("XOPERATIONS.md or docs/OPERATIONS.mdx."),
            "{html}"
        );
    }
}
