//! Bot scoring for joins (room `protection`). The gateway sees only the request, so the score
//! reads what a browser always sends and automation usually does not: a browser User-Agent, an
//! `Accept` and an `Accept-Language`. 0 looks like a browser, 100 like a script. The engine
//! decides with the room's mode: `enforce` refuses a new place at or above
//! [`qm_core::bot::BLOCK_AT`] with 403 `blocked_by_protection`; `monitor` admits.

use http::HeaderMap;
use http::header::{ACCEPT, ACCEPT_LANGUAGE, USER_AGENT};

/// User-Agent fragments of HTTP libraries, headless browsers and crawlers (lowercase).
const AUTOMATION_AGENTS: &[&str] = &[
    "curl/",
    "wget/",
    "python-requests",
    "python-urllib",
    "aiohttp",
    "httpx",
    "go-http-client",
    "okhttp",
    "java/",
    "libwww-perl",
    "node-fetch",
    "axios/",
    "headlesschrome",
    "phantomjs",
    "selenium",
    "puppeteer",
    "playwright",
    "scrapy",
    "bot",
    "crawler",
    "spider",
];

/// The score of a join request, 0..=100.
pub(crate) fn bot_score(headers: &HeaderMap) -> u32 {
    let header = |name| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::trim)
            .filter(|value| !value.is_empty())
    };
    let mut score = 0;
    match header(USER_AGENT).map(str::to_ascii_lowercase) {
        None => score += 60,
        Some(agent) if AUTOMATION_AGENTS.iter().any(|hint| agent.contains(hint)) => score += 60,
        Some(agent) if !agent.starts_with("mozilla/") => score += 30,
        Some(_) => {}
    }
    if header(ACCEPT_LANGUAGE).is_none() {
        score += 25;
    }
    if header(ACCEPT).is_none() {
        score += 15;
    }
    score.min(100)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(http::header::HeaderName, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(name.clone(), HeaderValue::from_static(value));
        }
        headers
    }

    const BROWSER: &str = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36";

    #[test]
    fn a_browser_scores_low_and_scripts_score_high() {
        let browser = headers(&[
            (USER_AGENT, BROWSER),
            (ACCEPT, "*/*"),
            (ACCEPT_LANGUAGE, "th-TH,th;q=0.9,en;q=0.8"),
        ]);
        assert_eq!(bot_score(&browser), 0);
        assert!(bot_score(&HeaderMap::new()) >= qm_core::bot::BLOCK_AT);
        let curl = headers(&[(USER_AGENT, "curl/8.5.0"), (ACCEPT, "*/*")]);
        assert!(bot_score(&curl) >= qm_core::bot::BLOCK_AT);
        let headless = headers(&[
            (USER_AGENT, "Mozilla/5.0 HeadlessChrome/120.0"),
            (ACCEPT, "*/*"),
            (ACCEPT_LANGUAGE, "en"),
        ]);
        assert!(bot_score(&headless) >= qm_core::bot::BLOCK_AT);
        // A real browser that sends no language is suspicious, not blocked.
        let no_language = headers(&[(USER_AGENT, BROWSER), (ACCEPT, "*/*")]);
        assert!(bot_score(&no_language) < qm_core::bot::BLOCK_AT);
    }
}
