//! The `urlPatterns` matcher: any rules against any page. Besides never panicking (and never
//! hanging: rules are up to 300 characters with up to 10 `*`, pages as long as a URL gets), the
//! verdict does not depend on the rules' order, a matching exception always wins, and a rule
//! pinned to an origin never puts a page of another origin in scope.
//!
//! Input: lines; the first is the page URL, read by the door's own parser (`page_url`: what it
//! accepts is an http(s) URL with a host, at most 4096 characters; anything else is skipped),
//! every other line is one rule (at most 25, each cut to 300 bytes, as the room document allows).

#![no_main]

use libfuzzer_sys::fuzz_target;
use qm_core::scope::{Scope, UrlScope, page_url};
use url::Url;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut lines = text.split('\n');
    let Some(first) = lines.next() else {
        return;
    };
    let Some(page) = page_url(first) else {
        return;
    };
    assert!(first.len() <= 4096 && matches!(page.scheme(), "http" | "https"));
    assert!(page.host_str().is_some_and(|host| !host.is_empty()));
    let rules: Vec<String> = lines
        .take(25)
        .map(|rule| rule.chars().take(300).collect())
        .collect();
    if rules.is_empty() {
        return;
    }
    let verdict = UrlScope::new(&rules).judge(&page);

    let mut reversed = rules.clone();
    reversed.reverse();
    assert_eq!(UrlScope::new(&reversed).judge(&page).scope, verdict.scope);

    if let Some(rule) = verdict.rule {
        let named = &rules[rule];
        match verdict.scope {
            Scope::Out => assert!(named.starts_with('!'), "{named}"),
            Scope::In => assert!(!named.starts_with('!'), "{named}"),
        }
    }
    // Each rule alone: an exception alone never puts its own match in scope, and a pinned rule
    // alone never includes a page of another origin.
    for rule in &rules {
        let alone = UrlScope::new(std::slice::from_ref(rule)).judge(&page);
        if let Some(rest) = rule.strip_prefix("https://")
            && alone.scope == Scope::In
            && alone.rule.is_some()
        {
            let host = rest.split('/').next().unwrap_or_default();
            let pinned = Url::parse(&format!("https://{host}/"))
                .map(|url| url.origin().ascii_serialization().to_lowercase());
            assert_eq!(
                pinned.ok(),
                Some(page.origin().ascii_serialization().to_lowercase()),
                "{rule} put {page} in scope"
            );
        }
    }
});
