//! The Cookie header parser (`RequestCookies::from_headers`): any number of Cookie headers of
//! any content.
//!
//! Input: lines, each one Cookie header value (lines that are not a valid header value are
//! what a client cannot send and are skipped; bytes that are not UTF-8 are kept, as a client can
//! send them).

#![no_main]

use std::collections::HashSet;

use http::{HeaderMap, HeaderValue};
use libfuzzer_sys::fuzz_target;

/// What the parser is meant to answer: every `name=value` item of every header in order, names
/// and values trimmed, one pair of surrounding quotes removed from a value, the first of a
/// repeated name kept. Written for clarity, not speed.
fn model(headers: &HeaderMap) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    for header in headers.get_all(http::header::COOKIE) {
        let Ok(text) = header.to_str() else { continue };
        for item in text.split(';') {
            let Some((name, value)) = item.split_once('=') else {
                continue;
            };
            let (name, value) = (name.trim(), value.trim());
            let value = value
                .strip_prefix('"')
                .and_then(|inner| inner.strip_suffix('"'))
                .unwrap_or(value);
            if !name.is_empty() && seen.insert(name.to_owned()) {
                pairs.push((name.to_owned(), value.to_owned()));
            }
        }
    }
    pairs
}

fuzz_target!(|data: &[u8]| {
    let mut headers = HeaderMap::new();
    for line in data.split(|byte| *byte == b'\n').take(32) {
        if let Ok(value) = HeaderValue::from_bytes(line) {
            headers.append(http::header::COOKIE, value);
        }
    }
    let parsed = qm_gateway::fuzzing::request_cookies(&headers);

    // Names are unique, non-empty and hold no separator; values hold no `;`.
    let mut names: HashSet<&str> = HashSet::new();
    for (name, value) in &parsed {
        assert!(!name.is_empty());
        assert!(!name.contains(';') && !name.contains('='), "{name:?}");
        assert!(!value.contains(';'), "{value:?}");
        assert!(names.insert(name), "{name:?} twice");
    }
    // `get` answers the pair the list holds for that name (a few names: each call re-parses).
    let step = (parsed.len() / 4).max(1);
    for (name, value) in parsed.iter().step_by(step).chain(parsed.last()) {
        assert_eq!(
            qm_gateway::fuzzing::request_cookie(&headers, name).as_deref(),
            Some(value.as_str())
        );
    }
    // Every pair read is one the model reads, in the model's order (a parser may stop early,
    // under a cap, but never invents, reorders or rewrites a cookie).
    let expected = model(&headers);
    let mut position = 0;
    for pair in &parsed {
        let found = expected[position..]
            .iter()
            .position(|candidate| candidate == pair);
        let Some(offset) = found else {
            panic!("{pair:?} is not what the header says (model {expected:?})");
        };
        position += offset + 1;
    }
});
