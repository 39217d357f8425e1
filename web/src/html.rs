//! Filling the HTML templates the pages are written as: one pass over `{{NAME}}` placeholders and
//! the escaping every text from a room or a guide goes through. The waiting page and the
//! documentation pages (crate `qm-docs`) are both built with these.

/// Fills every `{{NAME}}` of `template` in one pass, so text that came from a room (a title, a
/// message) is never itself scanned for placeholders. An unknown name is left as it is.
pub fn fill_template(template: &str, values: &[(&str, String)]) -> String {
    let mut filled = String::with_capacity(template.len() + 1024);
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        filled.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let value = after.find("}}").and_then(|end| {
            let name = &after[..end];
            values
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (value, end))
        });
        match value {
            Some((value, end)) => {
                filled.push_str(value);
                rest = &after[end + 2..];
            }
            None => {
                filled.push_str("{{");
                rest = after;
            }
        }
    }
    filled.push_str(rest);
    filled
}

/// Text made safe inside an element or a quoted attribute: `&`, `<`, `>`, `"` and `'` become
/// entities.
pub fn escape_html(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            other => escaped.push(other),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filled_value_is_not_scanned_again_and_an_unknown_name_stays() {
        let filled = fill_template(
            "<p>{{A}} {{B}} {{UNKNOWN}} {{</p>",
            &[("A", "{{B}}".to_owned()), ("B", "b".to_owned())],
        );
        assert_eq!(filled, "<p>{{B}} b {{UNKNOWN}} {{</p>");
    }

    #[test]
    fn markup_characters_become_entities() {
        assert_eq!(
            escape_html(r#"<a href="x">Tom & Jerry's</a>"#),
            "&lt;a href=&quot;x&quot;&gt;Tom &amp; Jerry&#39;s&lt;/a&gt;"
        );
    }
}
