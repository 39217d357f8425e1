//! Operator text: which characters a stored operator string may hold, and how a refusal quotes
//! the value it refuses.
//!
//! Control characters are refused in every operator string (the room document's strings, the
//! schedule, and any operator-written text added later): a NUL or an escape sequence stored in a
//! room name or URL ends up in a log line, a terminal, an HTML page or a database that handles it
//! differently from the one that accepted it. "Control" is Unicode's Cc category: C0
//! (U+0000-U+001F), DEL (U+007F) and C1 (U+0080-U+009F). Free text shown as a paragraph (the
//! operator's message to visitors, the support text) may break lines, so it alone keeps tab,
//! line feed and carriage return.
//!
//! A refusal quotes at most [`ECHO_MAX_CHARS`] characters of what it was sent, escaped: an
//! unbounded echo of a 100 KB value once outgrew the engine's gRPC metadata and turned a 400 into
//! a 503.

use std::fmt::Write as _;

use serde_json::Value;

use crate::{ApiError, ErrorCode};

/// Most characters of a refused value quoted back in an error message.
pub const ECHO_MAX_CHARS: usize = 64;

/// What a string field may hold besides printable text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextKind {
    /// One line: no control character at all.
    Line,
    /// A paragraph: tab, line feed and carriage return allowed, every other control refused.
    Paragraph,
}

/// The first character `kind` refuses in `text`, with its position (in characters).
pub fn first_control_character(text: &str, kind: TextKind) -> Option<(usize, char)> {
    text.chars().enumerate().find(|(_, character)| {
        character.is_control()
            && !(kind == TextKind::Paragraph && matches!(character, '\t' | '\n' | '\r'))
    })
}

/// Refuses `text` with `code` when it holds a character `kind` does not allow. The message names
/// the field and the character (as U+XXXX), never the text around it.
pub fn check_operator_text(
    field: &str,
    text: &str,
    kind: TextKind,
    code: ErrorCode,
) -> Result<(), ApiError> {
    match first_control_character(text, kind) {
        None => Ok(()),
        Some((position, character)) => Err(ApiError::new(
            code,
            format!(
                "{field}: must not contain control characters (NUL, U+0001-U+001F, DEL, \
                 U+0080-U+009F{}); found U+{:04X} at character {}",
                match kind {
                    TextKind::Line => "",
                    TextKind::Paragraph => "; tab and line breaks are allowed",
                },
                u32::from(character),
                position + 1
            ),
        )),
    }
}

/// `text` quoted for an error message: Rust-escaped (a control character shows as `\u{0}`,
/// never raw) and cut after [`ECHO_MAX_CHARS`] characters of the original, marked with `…`.
pub fn echo(text: &str) -> String {
    let mut kept = text.char_indices();
    match kept.nth(ECHO_MAX_CHARS) {
        None => format!("{text:?}"),
        Some((cut, _)) => format!("{:?}…", &text[..cut]),
    }
}

/// A JSON value as an error message quotes it: strings through [`echo`], anything else as JSON
/// cut after [`ECHO_MAX_CHARS`] characters, marked with `…`.
pub fn echo_value(value: &Value) -> String {
    if let Value::String(text) = value {
        return echo(text);
    }
    let mut rendered = String::new();
    // A Value always renders; the write into a String cannot fail.
    let _ = write!(rendered, "{value}");
    match rendered.char_indices().nth(ECHO_MAX_CHARS) {
        None => rendered,
        Some((cut, _)) => {
            rendered.truncate(cut);
            rendered.push('…');
            rendered
        }
    }
}

/// `message` cut to at most `max_bytes` bytes on a character boundary, marked with `…` when cut.
/// For every error detail that crosses a process boundary in a header (gRPC status message).
pub fn bounded(message: &str, max_bytes: usize) -> std::borrow::Cow<'_, str> {
    if message.len() <= max_bytes {
        return std::borrow::Cow::Borrowed(message);
    }
    // Room for the three bytes of the ellipsis.
    let mut cut = max_bytes.saturating_sub('…'.len_utf8());
    while !message.is_char_boundary(cut) {
        cut -= 1;
    }
    std::borrow::Cow::Owned(format!("{}…", &message[..cut]))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_c0_c1_and_del_character_is_refused_in_a_line() {
        for code in (0x00..=0x1F).chain([0x7F]).chain(0x80..=0x9F) {
            let character = char::from_u32(code).expect("a scalar value");
            let text = format!("ab{character}c");
            assert_eq!(
                first_control_character(&text, TextKind::Line),
                Some((2, character)),
                "U+{code:04X}"
            );
        }
        for fine in [
            "plain",
            "ไทย é ü 日本",
            "a b",
            "emoji 🎟️",
            "\u{A0}nbsp",
            "\u{200B}",
        ] {
            assert_eq!(
                first_control_character(fine, TextKind::Line),
                None,
                "{fine}"
            );
        }
    }

    #[test]
    fn a_paragraph_keeps_tab_and_line_breaks_only() {
        assert_eq!(
            first_control_character("one\r\ntwo\tthree\n", TextKind::Paragraph),
            None
        );
        assert_eq!(
            first_control_character("one\ntwo", TextKind::Line),
            Some((3, '\n'))
        );
        for refused in ['\0', '\u{1B}', '\u{7F}', '\u{85}', '\u{0B}', '\u{0C}'] {
            let text = format!("x{refused}");
            assert_eq!(
                first_control_character(&text, TextKind::Paragraph),
                Some((1, refused))
            );
        }
    }

    #[test]
    fn a_refusal_names_the_field_and_the_character_not_the_text() {
        let error = check_operator_text(
            "name",
            "secret\0tail",
            TextKind::Line,
            ErrorCode::InvalidName,
        )
        .expect_err("NUL is refused");
        assert_eq!(error.code, ErrorCode::InvalidName);
        assert!(error.message.starts_with("name: "), "{}", error.message);
        assert!(
            error.message.contains("U+0000 at character 7"),
            "{}",
            error.message
        );
        assert!(!error.message.contains("secret"), "{}", error.message);
    }

    #[test]
    fn an_echo_is_bounded_and_escaped() {
        assert_eq!(echo("short"), "\"short\"");
        assert_eq!(echo("a\0b"), "\"a\\0b\"");
        let long = "x".repeat(100_000);
        let quoted = echo(&long);
        assert_eq!(quoted, format!("{:?}…", "x".repeat(ECHO_MAX_CHARS)));
        // Characters, not bytes: a multi-byte value is never cut inside a character.
        let thai = "ก".repeat(200);
        assert_eq!(echo(&thai).chars().count(), ECHO_MAX_CHARS + 3);
        assert_eq!(
            echo(&"x".repeat(ECHO_MAX_CHARS)).chars().count(),
            ECHO_MAX_CHARS + 2
        );
    }

    #[test]
    fn a_value_echo_is_bounded_whatever_its_type() {
        assert_eq!(echo_value(&json!(12)), "12");
        assert_eq!(echo_value(&json!(null)), "null");
        assert_eq!(echo_value(&json!("a")), "\"a\"");
        let big = json!(vec![1; 50_000]);
        let quoted = echo_value(&big);
        assert_eq!(quoted.chars().count(), ECHO_MAX_CHARS + 1);
        assert!(quoted.ends_with('…'));
        let nested = json!({"k": "v".repeat(10_000)});
        assert!(echo_value(&nested).chars().count() <= ECHO_MAX_CHARS + 1);
    }

    #[test]
    fn a_bounded_message_fits_and_keeps_characters_whole() {
        assert_eq!(bounded("short", 10), "short");
        let thai = "ก".repeat(1_000);
        let cut = bounded(&thai, 100);
        assert!(cut.len() <= 100, "{}", cut.len());
        assert!(cut.ends_with('…'));
        assert_eq!(bounded(&"a".repeat(2_000), 1_024).len(), 1_024);
    }
}
