//! The server-rendered half of the waiting page: what a visitor without JavaScript sees inside
//! `<noscript>` (their place, a join form, the way through), the operator's message pane that
//! both kinds of visitor see, and the sentences of both in every locale the page speaks.
//!
//! The script renders the same states live; this half exists because a visitor without
//! JavaScript has no second way to hold or recover a place (spec, Visitor: lapsed).

use crate::html::escape_html;
use crate::locale::Locale;
use crate::sentences::*;

/// How often a visitor without JavaScript sees their place re-read (meta refresh).
pub const NOSCRIPT_REFRESH_SEC: u64 = 30;
/// How soon a page that could not read the place tries again.
const UNAVAILABLE_REFRESH_SEC: u64 = 10;

/// What a lapsed place says to its visitor: `expired` when their own entry window ran out,
/// `reset` when the operator or the room discarded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lapsed {
    Expired,
    Reset,
}

impl Lapsed {
    /// The page config's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Lapsed::Expired => "expired",
            Lapsed::Reset => "reset",
        }
    }
}

/// What the server knows about the visitor's place when it renders the page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlaceView {
    /// No place this browser holds: the join form (after the lapse sentence, if one applies).
    Join { lapsed: Option<Lapsed> },
    /// A place in line (or the pre-queue).
    Waiting {
        position: Option<u64>,
        ahead: Option<u64>,
        eta_sec: Option<u64>,
        paused: bool,
        /// Seconds until the doors open, for a scheduled room.
        opens_in_sec: Option<u64>,
        /// The support reference code the visitor can read out (`XXX-XXX`).
        support_ref: Option<String>,
    },
    /// Through: the link (and the refresh) to the site.
    Passed { target_url: String },
    /// The place could not be read just now.
    Unavailable,
    /// The room does not exist (or no longer does).
    NoRoom,
}

/// Why a join from the form did not give a place, as the visitor is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinNotice {
    RateLimited { retry_after_sec: u64 },
    Busy { retry_after_sec: u64 },
    IdentityLimit,
    Blocked,
    CrossSite,
    Failed,
}

/// The operator's message as the server renders it; the script re-renders the time in the
/// device's frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorMessage {
    pub text: String,
    /// How long ago `messageAt` was, by the server's clock.
    pub age_sec: Option<u64>,
}

/// Everything the server renders into the page besides the config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageView {
    pub locale: Locale,
    pub place: PlaceView,
    pub notice: Option<JoinNotice>,
    pub message: Option<OperatorMessage>,
    /// Where the join form posts (the page's own path, with its `qm_return`).
    pub form_action: String,
}

impl Lapsed {
    /// The sentence naming what happened to the visitor's place.
    pub fn sentence(self, locale: Locale) -> &'static str {
        match self {
            Lapsed::Expired => LAPSED_EXPIRED.get(locale),
            Lapsed::Reset => LAPSED_RESET.get(locale),
        }
    }
}

fn fill(template: &str, name: &str, value: &str) -> String {
    template.replace(&format!("{{{name}}}"), value)
}

fn wait_text(seconds: Option<u64>, locale: Locale) -> String {
    match seconds {
        None => WAIT_UNKNOWN.get(locale).to_owned(),
        Some(seconds) if seconds < 60 => WAIT_UNDER_A_MINUTE.get(locale).to_owned(),
        Some(seconds) => fill(
            WAIT_MINUTES.get(locale),
            "minutes",
            &seconds.div_ceil(60).to_string(),
        ),
    }
}

/// A count as the locale writes it: both English and Thai group thousands with a comma.
pub(crate) fn group_digits(number: u64) -> String {
    let digits = number.to_string();
    let mut grouped = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    grouped
}

fn paragraph(class: &str, text: &str) -> String {
    format!("<p class=\"{class}\">{}</p>", escape_html(text))
}

fn join_form(action: &str, label: &str) -> String {
    format!(
        "<form class=\"join-form\" method=\"post\" action=\"{}\"><button type=\"submit\">{}</button></form>",
        escape_html(action),
        escape_html(label)
    )
}

impl PageView {
    /// The `<noscript>` content of `<head>`: the refresh that keeps a visitor without
    /// JavaScript moving (to the site once through).
    pub fn noscript_head(&self) -> String {
        let content = match &self.place {
            PlaceView::Waiting { .. } => NOSCRIPT_REFRESH_SEC.to_string(),
            PlaceView::Passed { target_url } => format!("0;url={target_url}"),
            PlaceView::Unavailable => UNAVAILABLE_REFRESH_SEC.to_string(),
            PlaceView::Join { .. } | PlaceView::NoRoom => return String::new(),
        };
        format!(
            "<noscript><meta http-equiv=\"refresh\" content=\"{}\"></noscript>",
            escape_html(&content)
        )
    }

    /// The `<noscript>` content of the card: the place as text, or the form that takes one.
    pub fn noscript_body(&self) -> String {
        let locale = self.locale;
        let mut html = String::from("<noscript><div class=\"noscript\">");
        if let Some(notice) = self.notice {
            html.push_str(&format!(
                "<p class=\"notice\" role=\"alert\">{}</p>",
                escape_html(&notice_text(notice, locale))
            ));
        }
        match &self.place {
            PlaceView::Join {
                lapsed: Some(lapsed),
            } => {
                html.push_str(&paragraph("lead", lapsed.sentence(locale)));
                html.push_str(&paragraph("lead", LAPSED_REJOIN.get(locale)));
                html.push_str(&join_form(&self.form_action, LAPSED_BUTTON.get(locale)));
            }
            PlaceView::Join { lapsed: None } => {
                html.push_str(&paragraph("lead", JOIN_LEAD.get(locale)));
                html.push_str(&join_form(&self.form_action, JOIN_BUTTON.get(locale)));
            }
            PlaceView::Waiting {
                position,
                ahead,
                eta_sec,
                paused,
                opens_in_sec,
                support_ref,
            } => {
                if let Some(opens_in_sec) = opens_in_sec {
                    let text = fill(
                        WAITING_PRE_QUEUE.get(locale),
                        "wait",
                        &wait_text(Some(*opens_in_sec), locale),
                    );
                    html.push_str(&paragraph("lead", &text));
                }
                if let Some(position) = position {
                    let ahead = ahead.unwrap_or(position.saturating_sub(1));
                    let text = fill(
                        &fill(
                            WAITING_POSITION.get(locale),
                            "position",
                            &group_digits(*position),
                        ),
                        "ahead",
                        &group_digits(ahead),
                    );
                    html.push_str(&paragraph("lead", &text));
                }
                if *paused {
                    html.push_str(&paragraph("lead", WAITING_PAUSED.get(locale)));
                } else if opens_in_sec.is_none() {
                    let text = fill(
                        WAITING_ETA.get(locale),
                        "wait",
                        &wait_text(*eta_sec, locale),
                    );
                    html.push_str(&paragraph("lead", &text));
                }
                if let Some(code) = support_ref {
                    html.push_str(&format!(
                        "<p class=\"hint\">{} <span class=\"ref\">{}</span></p>",
                        escape_html(LABEL_REF.get(locale)),
                        escape_html(code)
                    ));
                }
                let refresh = fill(
                    WAITING_REFRESH.get(locale),
                    "seconds",
                    &NOSCRIPT_REFRESH_SEC.to_string(),
                );
                html.push_str(&paragraph("hint", &refresh));
            }
            PlaceView::Passed { target_url } => {
                html.push_str(&paragraph("lead", PASSED_LEAD.get(locale)));
                html.push_str(&format!(
                    "<p class=\"lead\"><a href=\"{}\">{}</a></p>",
                    escape_html(target_url),
                    escape_html(PASSED_LINK.get(locale))
                ));
            }
            PlaceView::Unavailable => {
                html.push_str(&paragraph("lead", UNAVAILABLE.get(locale)));
            }
            PlaceView::NoRoom => {
                html.push_str(&paragraph("lead", NO_ROOM.get(locale)));
            }
        }
        html.push_str("</div></noscript>");
        html
    }

    /// The language switch: one link per locale to this page with `lang=` (which the gateway
    /// remembers in `qm_lang`), the current one marked.
    pub fn locale_links(&self) -> String {
        let separator = if self.form_action.contains('?') {
            '&'
        } else {
            '?'
        };
        Locale::ALL
            .iter()
            .map(|locale| {
                let current = if *locale == self.locale {
                    " aria-current=\"true\""
                } else {
                    ""
                };
                format!(
                    "<a href=\"{}\" hreflang=\"{tag}\" lang=\"{tag}\"{current}>{}</a>",
                    escape_html(&format!(
                        "{}{separator}lang={}",
                        self.form_action,
                        locale.tag()
                    )),
                    escape_html(locale.native_name()),
                    tag = locale.tag(),
                )
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The message pane's heading, text and time, escaped, and whether it is hidden.
    pub fn message_parts(&self) -> (String, String, String, bool) {
        let heading = escape_html(MESSAGE_HEADING.get(self.locale));
        match &self.message {
            Some(message) => (
                heading,
                escape_html(&message.text),
                escape_html(&posted_text(message.age_sec, self.locale)),
                false,
            ),
            None => (heading, String::new(), String::new(), true),
        }
    }
}

fn notice_text(notice: JoinNotice, locale: Locale) -> String {
    match notice {
        JoinNotice::RateLimited { retry_after_sec } => fill(
            NOTICE_RATE_LIMITED.get(locale),
            "seconds",
            &retry_after_sec.to_string(),
        ),
        JoinNotice::Busy { retry_after_sec } => fill(
            NOTICE_BUSY.get(locale),
            "seconds",
            &retry_after_sec.to_string(),
        ),
        JoinNotice::IdentityLimit => NOTICE_IDENTITY_LIMIT.get(locale).to_owned(),
        JoinNotice::Blocked => NOTICE_BLOCKED.get(locale).to_owned(),
        JoinNotice::CrossSite => NOTICE_CROSS_SITE.get(locale).to_owned(),
        JoinNotice::Failed => NOTICE_FAILED.get(locale).to_owned(),
    }
}

/// "Posted N min ago": relative, because without the script the page cannot know the device's
/// clock or time zone; the script replaces it with the device-frame time.
fn posted_text(age_sec: Option<u64>, locale: Locale) -> String {
    match age_sec {
        None => String::new(),
        Some(age) if age < 60 => MESSAGE_JUST_NOW.get(locale).to_owned(),
        Some(age) if age < 3600 => fill(
            MESSAGE_MINUTES_AGO.get(locale),
            "minutes",
            &(age / 60).to_string(),
        ),
        Some(age) => fill(
            MESSAGE_HOURS_AGO.get(locale),
            "hours",
            &(age / 3600).to_string(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(place: PlaceView, locale: Locale) -> PageView {
        PageView {
            locale,
            place,
            notice: None,
            message: None,
            form_action: "/w/drop?qm_return=https%3A%2F%2Fshop.example%2F".into(),
        }
    }

    #[test]
    fn counts_are_grouped_by_thousands() {
        assert_eq!(group_digits(7), "7");
        assert_eq!(group_digits(1234), "1,234");
        assert_eq!(group_digits(1_234_567), "1,234,567");
        assert_eq!(group_digits(100_000), "100,000");
    }

    #[test]
    fn every_sentence_exists_in_every_locale() {
        for locale in [Locale::En, Locale::Th] {
            for lapsed in [Lapsed::Expired, Lapsed::Reset] {
                let page = view(
                    PlaceView::Join {
                        lapsed: Some(lapsed),
                    },
                    locale,
                );
                let body = page.noscript_body();
                assert!(body.contains(lapsed.sentence(locale)), "{body}");
                assert!(body.contains("method=\"post\""));
                assert!(
                    body.contains("action=\"/w/drop?qm_return=https%3A%2F%2Fshop.example%2F\"")
                );
            }
        }
        assert_ne!(
            Lapsed::Expired.sentence(Locale::Th),
            Lapsed::Expired.sentence(Locale::En)
        );
        assert_ne!(
            Lapsed::Reset.sentence(Locale::Th),
            Lapsed::Reset.sentence(Locale::En)
        );
        for notice in [
            JoinNotice::RateLimited { retry_after_sec: 3 },
            JoinNotice::Busy { retry_after_sec: 2 },
            JoinNotice::IdentityLimit,
            JoinNotice::Blocked,
            JoinNotice::CrossSite,
            JoinNotice::Failed,
        ] {
            assert_ne!(
                notice_text(notice, Locale::En),
                notice_text(notice, Locale::Th)
            );
        }
    }

    #[test]
    fn a_waiting_place_reads_as_text_and_refreshes() {
        let page = view(
            PlaceView::Waiting {
                position: Some(3),
                ahead: Some(2),
                eta_sec: Some(125),
                paused: false,
                opens_in_sec: None,
                support_ref: Some("K7F-3QX".into()),
            },
            Locale::En,
        );
        let body = page.noscript_body();
        assert!(
            body.contains(r#"Support reference <span class="ref">K7F-3QX</span>"#),
            "{body}"
        );
        assert!(
            body.contains("You are number 3 in line, with 2 ahead of you."),
            "{body}"
        );
        assert!(body.contains("Estimated wait: about 3 min."), "{body}");
        assert!(!body.contains("<form"));
        assert_eq!(
            page.noscript_head(),
            "<noscript><meta http-equiv=\"refresh\" content=\"30\"></noscript>"
        );
    }

    #[test]
    fn a_passed_place_links_and_refreshes_to_the_site() {
        let page = view(
            PlaceView::Passed {
                target_url: "https://shop.example/a?b=1&c=\"2\"".into(),
            },
            Locale::Th,
        );
        assert_eq!(
            page.noscript_head(),
            "<noscript><meta http-equiv=\"refresh\" content=\"0;url=https://shop.example/a?b=1&amp;c=&quot;2&quot;\"></noscript>"
        );
        assert!(
            page.noscript_body()
                .contains("href=\"https://shop.example/a?b=1&amp;c=&quot;2&quot;\"")
        );
        assert!(page.noscript_body().contains(PASSED_LEAD.th));
    }

    #[test]
    fn the_message_pane_says_how_long_ago_by_the_server_clock() {
        let mut page = view(PlaceView::Unavailable, Locale::En);
        assert!(page.message_parts().3, "hidden without a message");
        page.message = Some(OperatorMessage {
            text: "Back <soon>".into(),
            age_sec: Some(600),
        });
        let (_, text, time, hidden) = page.message_parts();
        assert_eq!(text, "Back &lt;soon&gt;");
        assert_eq!(time, "Posted 10 min ago");
        assert!(!hidden);
        assert_eq!(posted_text(Some(7200), Locale::Th), "ประกาศเมื่อ 2 ชั่วโมงที่แล้ว");
        assert_eq!(posted_text(Some(5), Locale::En), "Posted just now");
    }
}
