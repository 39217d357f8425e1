//! Bot scoring for joins (room `protection`). The gateway sees only the request, so the score
//! reads what a browser always sends and automation usually does not: a browser User-Agent, an
//! `Accept` and an `Accept-Language`. 0 looks like a browser, 100 like a script. The engine
//! decides with the room's mode: `enforce` refuses a new place at or above
//! [`qm_core::bot::BLOCK_AT`] with 403 `blocked_by_protection`; `monitor` admits and counts it
//! as one enforce would refuse. The reasons travel with the score, for the engine's account of
//! both (`/api/admin/security`).

use http::HeaderMap;
use http::header::{ACCEPT, ACCEPT_LANGUAGE, USER_AGENT};
use qm_core::bot::Reason;

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

/// What a join request did that browsers do not, as `qm_core::bot::Reason` bits; the score
/// is `qm_core::bot::score_of` of them.
pub(crate) fn bot_reasons(headers: &HeaderMap) -> u32 {
    let header = |name| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::trim)
            .filter(|value| !value.is_empty())
    };
    let mut reasons = 0;
    match header(USER_AGENT).map(str::to_ascii_lowercase) {
        None => reasons |= Reason::NoUserAgent.bit(),
        Some(agent) if AUTOMATION_AGENTS.iter().any(|hint| agent.contains(hint)) => {
            reasons |= Reason::AutomationUserAgent.bit()
        }
        Some(agent) if !agent.starts_with("mozilla/") => reasons |= Reason::UnusualUserAgent.bit(),
        Some(_) => {}
    }
    if header(ACCEPT_LANGUAGE).is_none() {
        reasons |= Reason::NoAcceptLanguage.bit();
    }
    if header(ACCEPT).is_none() {
        reasons |= Reason::NoAccept.bit();
    }
    reasons
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use qm_core::bot::score_of;

    fn bot_score(headers: &HeaderMap) -> u32 {
        score_of(bot_reasons(headers))
    }

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

    #[test]
    fn each_reason_is_named_for_what_the_request_lacked() {
        let names = |headers: &HeaderMap| {
            Reason::of(bot_reasons(headers))
                .map(Reason::name)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(&HeaderMap::new()),
            ["no_user_agent", "no_accept_language", "no_accept"]
        );
        let curl = headers(&[(USER_AGENT, "curl/8.5.0"), (ACCEPT, "*/*")]);
        assert_eq!(
            names(&curl),
            ["automation_user_agent", "no_accept_language"]
        );
        let odd = headers(&[
            (USER_AGENT, "MyKiosk/2.0"),
            (ACCEPT, "*/*"),
            (ACCEPT_LANGUAGE, "en"),
        ]);
        assert_eq!(names(&odd), ["unusual_user_agent"]);
    }
}
