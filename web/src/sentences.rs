//! Every sentence the server renders into the waiting page, in every locale the page speaks.
//! A sentence is added here in all of them at once: a visitor must never meet a gap in their
//! language where the fault is ours to explain (spec, Visitor: lapsed). `{name}` marks a value
//! filled in at render time.

use crate::view::Locale;

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
        for sentence in ALL {
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
