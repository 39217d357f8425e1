//! Every sentence of the waiting page, in every locale the page speaks: the ones the server
//! renders into the HTML, and the ones the script shows, which travel to it in the page config
//! for the chosen locale ([`script_sentences`]), so this is the one table. A sentence is added
//! here in all locales at once: a visitor must never meet a gap in their language where the
//! fault is ours to explain (spec, Visitor: lapsed). `{name}` marks a value filled in at render
//! time.

use crate::locale::Locale;

/// One sentence in every locale.
pub(crate) struct Sentence {
    pub(crate) en: &'static str,
    pub(crate) th: &'static str,
}

impl Sentence {
    pub(crate) fn get(&self, locale: Locale) -> &'static str {
        match locale {
            Locale::En => self.en,
            Locale::Th => self.th,
        }
    }
}

pub(crate) const JOIN_LEAD: Sentence = Sentence {
    en: "Join the line to hold your place.",
    th: "กดเข้าคิวเพื่อรับที่ของคุณในคิว",
};
pub(crate) const JOIN_BUTTON: Sentence = Sentence {
    en: "Join the line",
    th: "เข้าคิว",
};
pub(crate) const LAPSED_EXPIRED: Sentence = Sentence {
    en: "Your turn came, but the time to enter ran out.",
    th: "ถึงคิวของคุณแล้ว แต่หมดเวลาเข้าใช้งาน",
};
pub(crate) const LAPSED_RESET: Sentence = Sentence {
    en: "Your earlier place in line was cancelled on our side, not because of anything you did.",
    th: "ที่ของคุณในคิวก่อนหน้านี้ถูกยกเลิกโดยทางเรา ไม่ได้เกิดจากสิ่งที่คุณทำ",
};
pub(crate) const LAPSED_REJOIN: Sentence = Sentence {
    en: "Take a new place in line with the button below.",
    th: "กดปุ่มด้านล่างเพื่อรับที่ใหม่ในคิว",
};
pub(crate) const LAPSED_BUTTON: Sentence = Sentence {
    en: "Get a new place in line",
    th: "รับที่ใหม่ในคิว",
};
pub(crate) const WAITING_POSITION: Sentence = Sentence {
    en: "You are number {position} in line, with {ahead} ahead of you.",
    th: "คุณอยู่ลำดับที่ {position} ในคิว มีผู้รอก่อนหน้าคุณ {ahead} คน",
};
pub(crate) const WAITING_ETA: Sentence = Sentence {
    en: "Estimated wait: {wait}.",
    th: "เวลารอโดยประมาณ: {wait}",
};
pub(crate) const WAITING_PAUSED: Sentence = Sentence {
    en: "The line is paused for the moment. You keep your place.",
    th: "คิวหยุดชั่วคราว คุณยังคงได้ที่เดิมในคิว",
};
pub(crate) const WAITING_PRE_QUEUE: Sentence = Sentence {
    en: "You are in the pre-queue. The doors open in {wait}; places are drawn at random then, so there is no need to hurry.",
    th: "คุณอยู่ในคิวล่วงหน้า ประตูจะเปิดในอีก {wait} และจะสุ่มลำดับเมื่อเปิด จึงไม่ต้องรีบ",
};
pub(crate) const WAITING_REFRESH: Sentence = Sentence {
    en: "This page checks your place again every {seconds} seconds.",
    th: "หน้านี้จะตรวจสอบที่ของคุณอีกครั้งทุก {seconds} วินาที",
};
pub(crate) const WAIT_UNKNOWN: Sentence = Sentence {
    en: "not known yet",
    th: "ยังไม่ทราบ",
};
pub(crate) const WAIT_UNDER_A_MINUTE: Sentence = Sentence {
    en: "under a minute",
    th: "น้อยกว่า 1 นาที",
};
pub(crate) const WAIT_MINUTES: Sentence = Sentence {
    en: "about {minutes} min",
    th: "ประมาณ {minutes} นาที",
};
pub(crate) const PASSED_LEAD: Sentence = Sentence {
    en: "It is your turn.",
    th: "ถึงคิวของคุณแล้ว",
};
pub(crate) const PASSED_LINK: Sentence = Sentence {
    en: "Continue to the site",
    th: "ไปยังเว็บไซต์",
};
pub(crate) const UNAVAILABLE: Sentence = Sentence {
    en: "We cannot read your place just now. This page tries again shortly.",
    th: "ขณะนี้ไม่สามารถตรวจสอบที่ของคุณได้ หน้านี้จะลองใหม่ในอีกสักครู่",
};
pub(crate) const NO_ROOM: Sentence = Sentence {
    en: "This waiting room does not exist, or it has been closed.",
    th: "ไม่มีห้องรอคิวนี้ หรือห้องนี้ปิดไปแล้ว",
};
pub(crate) const NOTICE_RATE_LIMITED: Sentence = Sentence {
    en: "Too many attempts from this connection. Wait {seconds} seconds and try again.",
    th: "มีการลองหลายครั้งเกินไปจากการเชื่อมต่อนี้ โปรดรอ {seconds} วินาทีแล้วลองใหม่",
};
pub(crate) const NOTICE_BUSY: Sentence = Sentence {
    en: "We could not give you a place just now. Wait {seconds} seconds and try again.",
    th: "ขณะนี้ยังไม่สามารถให้ที่ในคิวได้ โปรดรอ {seconds} วินาทีแล้วลองใหม่",
};
pub(crate) const NOTICE_IDENTITY_LIMIT: Sentence = Sentence {
    en: "This connection already holds as many places in this line as allowed.",
    th: "การเชื่อมต่อนี้ถือที่ในคิวนี้ครบจำนวนที่อนุญาตแล้ว",
};
pub(crate) const NOTICE_BLOCKED: Sentence = Sentence {
    en: "We could not let this request join the line.",
    th: "ไม่สามารถให้คำขอนี้เข้าคิวได้",
};
pub(crate) const NOTICE_CROSS_SITE: Sentence = Sentence {
    en: "This form can only be sent from this waiting page.",
    th: "ส่งแบบฟอร์มนี้ได้จากหน้ารอคิวนี้เท่านั้น",
};
pub(crate) const NOTICE_FAILED: Sentence = Sentence {
    en: "Something went wrong. Please try again.",
    th: "เกิดข้อผิดพลาด โปรดลองอีกครั้ง",
};
pub(crate) const MESSAGE_HEADING: Sentence = Sentence {
    en: "Message from the organiser",
    th: "ข้อความจากผู้จัด",
};
pub(crate) const MESSAGE_JUST_NOW: Sentence = Sentence {
    en: "Posted just now",
    th: "ประกาศเมื่อสักครู่",
};
pub(crate) const MESSAGE_MINUTES_AGO: Sentence = Sentence {
    en: "Posted {minutes} min ago",
    th: "ประกาศเมื่อ {minutes} นาทีที่แล้ว",
};
pub(crate) const MESSAGE_HOURS_AGO: Sentence = Sentence {
    en: "Posted {hours} h ago",
    th: "ประกาศเมื่อ {hours} ชั่วโมงที่แล้ว",
};

// Labels of the page's markup.
pub(crate) const LABEL_POSITION: Sentence = Sentence {
    en: "Your position",
    th: "ลำดับของคุณ",
};
pub(crate) const LABEL_AHEAD: Sentence = Sentence {
    en: "Ahead of you",
    th: "ก่อนหน้าคุณ",
};
pub(crate) const LABEL_ETA: Sentence = Sentence {
    en: "Estimated wait",
    th: "เวลารอโดยประมาณ",
};
pub(crate) const LABEL_PROGRESS: Sentence = Sentence {
    en: "Progress through the line",
    th: "ความคืบหน้าในคิว",
};
pub(crate) const LABEL_COUNTDOWN: Sentence = Sentence {
    en: "Doors open in",
    th: "ประตูเปิดในอีก",
};
pub(crate) const LABEL_OPENS_AT: Sentence = Sentence {
    en: "Opening time",
    th: "เวลาเปิด",
};
pub(crate) const LABEL_REF: Sentence = Sentence {
    en: "Support reference",
    th: "รหัสอ้างอิงสำหรับฝ่ายช่วยเหลือ",
};
pub(crate) const REF_HINT: Sentence = Sentence {
    en: "If you contact support, read them this code. It does not reveal your place in line.",
    th: "หากติดต่อฝ่ายช่วยเหลือ ให้แจ้งรหัสนี้ รหัสนี้ไม่เปิดเผยลำดับของคุณในคิว",
};
pub(crate) const LABEL_LANGUAGE: Sentence = Sentence {
    en: "Language",
    th: "ภาษา",
};
pub(crate) const KEEP_OPEN_HINT: Sentence = Sentence {
    en: "Keep this page open. If you refresh or come back later in this browser, you keep your place.",
    th: "เปิดหน้านี้ไว้ หากรีเฟรชหรือกลับมาภายหลังในเบราว์เซอร์นี้ คุณยังคงได้ที่เดิมในคิว",
};
pub(crate) const LOGO_ALT: Sentence = Sentence {
    en: "Logo of the organiser",
    th: "โลโก้ของผู้จัด",
};
pub(crate) const NOTIFY_LABEL: Sentence = Sentence {
    en: "E-mail me when it is my turn",
    th: "ส่งอีเมลแจ้งเมื่อถึงคิวของฉัน",
};
pub(crate) const NOTIFY_BUTTON: Sentence = Sentence {
    en: "Notify me",
    th: "แจ้งเตือนฉัน",
};
pub(crate) const NOTIFY_HINT: Sentence = Sentence {
    en: "Optional. Leave it empty and save to stop the e-mail.",
    th: "ไม่บังคับ เว้นว่างแล้วกดบันทึกเพื่อยกเลิกอีเมล",
};

// Sentences only the script shows.
pub(crate) const LEAD_JOINING: Sentence = Sentence {
    en: "Joining the line…",
    th: "กำลังเข้าคิว…",
};
pub(crate) const LEAD_WAITING: Sentence = Sentence {
    en: "You are in line. When it is your turn, this page takes you through automatically.",
    th: "คุณอยู่ในคิวแล้ว เมื่อถึงคิวของคุณ หน้านี้จะพาคุณเข้าสู่เว็บไซต์โดยอัตโนมัติ",
};
pub(crate) const LEAD_SCHEDULED: Sentence = Sentence {
    en: "You are in the pre-queue. Places are drawn at random when the doors open, so there is no need to hurry.",
    th: "คุณอยู่ในคิวล่วงหน้า ลำดับจะถูกสุ่มเมื่อประตูเปิด จึงไม่ต้องรีบ",
};
pub(crate) const PRE_COUNT: Sentence = Sentence {
    en: "People in the pre-queue, you included: {count}",
    th: "จำนวนผู้อยู่ในคิวล่วงหน้า รวมคุณ: {count} คน",
};
pub(crate) const LEAD_DRAWING: Sentence = Sentence {
    en: "The doors are open. The draw is happening now; your place in line appears in a moment.",
    th: "ประตูเปิดแล้ว กำลังสุ่มลำดับ ลำดับของคุณจะปรากฏในอีกสักครู่",
};
pub(crate) const LEAD_PASSED: Sentence = Sentence {
    en: "It is your turn! Taking you through…",
    th: "ถึงคิวของคุณแล้ว! กำลังพาคุณเข้าสู่เว็บไซต์…",
};
pub(crate) const PASSED_FALLBACK: Sentence = Sentence {
    en: "If nothing happens in a few seconds, use this link:",
    th: "หากไม่มีอะไรเกิดขึ้นในไม่กี่วินาที ให้กดลิงก์นี้:",
};
pub(crate) const NO_ROOM_ID: Sentence = Sentence {
    en: "This page does not name a waiting room.",
    th: "หน้านี้ไม่ได้ระบุห้องรอคิว",
};
pub(crate) const WAIT_HOURS: Sentence = Sentence {
    en: "about {hours} h {minutes} min",
    th: "ประมาณ {hours} ชั่วโมง {minutes} นาที",
};
pub(crate) const CONNECTION_RECONNECTING: Sentence = Sentence {
    en: "Reconnecting…",
    th: "กำลังเชื่อมต่อใหม่…",
};
pub(crate) const CONNECTION_POLLING: Sentence = Sentence {
    en: "Live updates are not available here, so this page checks your place every few seconds.",
    th: "ไม่สามารถรับข้อมูลแบบสดได้ หน้านี้จึงตรวจสอบที่ของคุณทุกไม่กี่วินาที",
};
pub(crate) const CONNECTION_OFFLINE: Sentence = Sentence {
    en: "You are offline. You keep your place; this page reconnects when you are back online.",
    th: "คุณออฟไลน์อยู่ คุณยังคงได้ที่เดิม หน้านี้จะเชื่อมต่อใหม่เมื่อกลับมาออนไลน์",
};
pub(crate) const JOIN_RETRY: Sentence = Sentence {
    en: "We could not get you a place in line just now. Trying again in {seconds} seconds.",
    th: "ขณะนี้ยังไม่สามารถจัดที่ในคิวให้คุณได้ จะลองใหม่ในอีก {seconds} วินาที",
};
pub(crate) const JOIN_OFFLINE: Sentence = Sentence {
    en: "You seem to be offline. Trying again…",
    th: "ดูเหมือนคุณออฟไลน์อยู่ กำลังลองใหม่…",
};
pub(crate) const LAPSED_REJOINING: Sentence = Sentence {
    en: "Getting you a new place in line…",
    th: "กำลังจัดที่ใหม่ในคิวให้คุณ…",
};
pub(crate) const LAPSED_REJOINED: Sentence = Sentence {
    en: "You have a new place at the back of the line.",
    th: "คุณได้รับที่ใหม่ต่อท้ายคิวแล้ว",
};
pub(crate) const MESSAGE_POSTED_AT: Sentence = Sentence {
    en: "Posted at {time}",
    th: "ประกาศเมื่อเวลา {time}",
};
pub(crate) const ANNOUNCE_POSITION: Sentence = Sentence {
    en: "You are now number {position} in line.",
    th: "ตอนนี้คุณอยู่ลำดับที่ {position} ในคิว",
};
pub(crate) const NOTIFY_SAVING: Sentence = Sentence {
    en: "Saving…",
    th: "กำลังบันทึก…",
};
pub(crate) const NOTIFY_PENDING: Sentence = Sentence {
    en: "We will e-mail {email} when it is your turn.",
    th: "เราจะส่งอีเมลถึง {email} เมื่อถึงคิวของคุณ",
};
pub(crate) const NOTIFY_SENT: Sentence = Sentence {
    en: "We e-mailed {email} when your turn came.",
    th: "เราส่งอีเมลถึง {email} แล้วเมื่อถึงคิวของคุณ",
};
pub(crate) const NOTIFY_FAILED_DELIVERY: Sentence = Sentence {
    en: "We could not deliver the e-mail to {email}.",
    th: "ไม่สามารถส่งอีเมลถึง {email} ได้",
};
pub(crate) const NOTIFY_NONE: Sentence = Sentence {
    en: "No e-mail is set for this place.",
    th: "ยังไม่ได้ตั้งอีเมลสำหรับที่นี้",
};
pub(crate) const NOTIFY_INVALID_EMAIL: Sentence = Sentence {
    en: "That does not look like an e-mail address. Check it and try again.",
    th: "รูปแบบอีเมลไม่ถูกต้อง โปรดตรวจสอบแล้วลองอีกครั้ง",
};
pub(crate) const NOTIFY_RATE_LIMITED: Sentence = Sentence {
    en: "Too many attempts. Wait a moment and try again.",
    th: "ลองหลายครั้งเกินไป โปรดรอสักครู่แล้วลองใหม่",
};
pub(crate) const NOTIFY_PLACE_GONE: Sentence = Sentence {
    en: "This place in line is no longer valid, so no e-mail can be set for it.",
    th: "ที่ในคิวนี้ใช้ไม่ได้แล้ว จึงไม่สามารถตั้งอีเมลได้",
};
pub(crate) const NOTIFY_DISABLED: Sentence = Sentence {
    en: "E-mail notifications are not available for this line.",
    th: "คิวนี้ไม่มีบริการแจ้งเตือนทางอีเมล",
};
pub(crate) const NOTIFY_ERROR: Sentence = Sentence {
    en: "We could not save that just now. Please try again.",
    th: "ขณะนี้ไม่สามารถบันทึกได้ โปรดลองอีกครั้ง",
};

/// The script's sentences by the key it asks for them with (`t("leadWaiting")`).
pub(crate) const SCRIPT: &[(&str, &Sentence)] = &[
    ("leadJoining", &LEAD_JOINING),
    ("leadWaiting", &LEAD_WAITING),
    ("leadPaused", &WAITING_PAUSED),
    ("leadScheduled", &LEAD_SCHEDULED),
    ("preCount", &PRE_COUNT),
    ("leadDrawing", &LEAD_DRAWING),
    ("leadPassed", &LEAD_PASSED),
    ("passedFallback", &PASSED_FALLBACK),
    ("passedLink", &PASSED_LINK),
    ("noRoom", &NO_ROOM),
    ("unavailable", &UNAVAILABLE),
    ("noRoomId", &NO_ROOM_ID),
    ("waitUnknown", &WAIT_UNKNOWN),
    ("waitUnderMinute", &WAIT_UNDER_A_MINUTE),
    ("waitMinutes", &WAIT_MINUTES),
    ("waitHours", &WAIT_HOURS),
    ("connectionReconnecting", &CONNECTION_RECONNECTING),
    ("connectionPolling", &CONNECTION_POLLING),
    ("connectionOffline", &CONNECTION_OFFLINE),
    ("joinRetry", &JOIN_RETRY),
    ("joinRateLimited", &NOTICE_RATE_LIMITED),
    ("joinBusy", &NOTICE_BUSY),
    ("joinIdentityLimit", &NOTICE_IDENTITY_LIMIT),
    ("joinBlocked", &NOTICE_BLOCKED),
    ("joinOffline", &JOIN_OFFLINE),
    ("lapsedExpired", &LAPSED_EXPIRED),
    ("lapsedReset", &LAPSED_RESET),
    ("lapsedRejoining", &LAPSED_REJOINING),
    ("lapsedRejoined", &LAPSED_REJOINED),
    ("messagePostedAt", &MESSAGE_POSTED_AT),
    ("announcePosition", &ANNOUNCE_POSITION),
    ("notifySaving", &NOTIFY_SAVING),
    ("notifyPending", &NOTIFY_PENDING),
    ("notifySent", &NOTIFY_SENT),
    ("notifyFailed", &NOTIFY_FAILED_DELIVERY),
    ("notifyNone", &NOTIFY_NONE),
    ("notifyInvalidEmail", &NOTIFY_INVALID_EMAIL),
    ("notifyRateLimited", &NOTIFY_RATE_LIMITED),
    ("notifyPlaceGone", &NOTIFY_PLACE_GONE),
    ("notifyDisabled", &NOTIFY_DISABLED),
    ("notifyError", &NOTIFY_ERROR),
];

/// The script's sentences in one locale, as the page config carries them.
pub(crate) fn script_sentences(locale: Locale) -> serde_json::Map<String, serde_json::Value> {
    SCRIPT
        .iter()
        .map(|(key, sentence)| {
            (
                (*key).to_owned(),
                serde_json::Value::from(sentence.get(locale)),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: &[&Sentence] = &[
        &JOIN_LEAD,
        &JOIN_BUTTON,
        &LAPSED_EXPIRED,
        &LAPSED_RESET,
        &LAPSED_REJOIN,
        &LAPSED_BUTTON,
        &WAITING_POSITION,
        &WAITING_ETA,
        &WAITING_PAUSED,
        &WAITING_PRE_QUEUE,
        &WAITING_REFRESH,
        &WAIT_UNKNOWN,
        &WAIT_UNDER_A_MINUTE,
        &WAIT_MINUTES,
        &PASSED_LEAD,
        &PASSED_LINK,
        &UNAVAILABLE,
        &NO_ROOM,
        &NOTICE_RATE_LIMITED,
        &NOTICE_BUSY,
        &NOTICE_IDENTITY_LIMIT,
        &NOTICE_BLOCKED,
        &NOTICE_CROSS_SITE,
        &NOTICE_FAILED,
        &MESSAGE_HEADING,
        &MESSAGE_JUST_NOW,
        &MESSAGE_MINUTES_AGO,
        &MESSAGE_HOURS_AGO,
        &LABEL_POSITION,
        &LABEL_AHEAD,
        &LABEL_ETA,
        &LABEL_PROGRESS,
        &LABEL_COUNTDOWN,
        &LABEL_OPENS_AT,
        &LABEL_REF,
        &REF_HINT,
        &LABEL_LANGUAGE,
        &KEEP_OPEN_HINT,
        &LOGO_ALT,
        &NOTIFY_LABEL,
        &NOTIFY_BUTTON,
        &NOTIFY_HINT,
    ];

    /// The `{name}` placeholders of a sentence, in order.
    fn placeholders(text: &str) -> Vec<&str> {
        text.split('{')
            .skip(1)
            .filter_map(|rest| rest.split_once('}').map(|(name, _)| name))
            .collect()
    }

    #[test]
    fn every_sentence_is_written_in_every_locale_with_the_same_placeholders() {
        let script = SCRIPT.iter().map(|(_, sentence)| *sentence);
        for sentence in ALL.iter().copied().chain(script) {
            assert!(!sentence.en.trim().is_empty());
            assert!(!sentence.th.trim().is_empty(), "{}", sentence.en);
            assert_ne!(sentence.en, sentence.th, "not translated: {}", sentence.en);
            let mut en = placeholders(sentence.en);
            let mut th = placeholders(sentence.th);
            en.sort_unstable();
            th.sort_unstable();
            assert_eq!(en, th, "{}", sentence.en);
            assert_eq!(sentence.get(Locale::Th), sentence.th);
        }
    }
}

#[cfg(test)]
mod script_tests {
    use super::*;

    #[test]
    fn the_script_gets_every_key_once_in_the_chosen_locale() {
        let en = script_sentences(Locale::En);
        let th = script_sentences(Locale::Th);
        assert_eq!(en.len(), SCRIPT.len(), "no key twice");
        assert_eq!(en["connectionReconnecting"], "Reconnecting…");
        assert_eq!(th["connectionReconnecting"], "กำลังเชื่อมต่อใหม่…");
        assert_eq!(en.keys().collect::<Vec<_>>(), th.keys().collect::<Vec<_>>());
    }
}
