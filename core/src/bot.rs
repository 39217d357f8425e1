//! The bot score a join carries from the gateway to the engine (0 looks like a browser, 100
//! like a script), the reasons it is made of, and the line where a room in
//! `protection: {mode: "enforce"}` refuses it. The gateway finds the reasons in a request; the
//! score is always their weights added here, so the gateway's score and the engine's account
//! of it (`/api/admin/security`) cannot disagree.

/// A join scoring at least this is refused in `enforce` mode and counted as one enforce would
/// refuse in `monitor` mode.
pub const BLOCK_AT: u32 = 60;

/// The HKDF info of the key under which a flagged join's client address is shown, as a one-way
/// digest, in the security report.
pub const CLIENT_DIGEST_INFO: &[u8] = b"qm:security-client";

/// One thing a request did that browsers do not. A join carries its reasons as a bit set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// No `User-Agent` at all.
    NoUserAgent,
    /// A `User-Agent` of an HTTP library, a headless browser or a crawler.
    AutomationUserAgent,
    /// A `User-Agent` that is not a browser's (`Mozilla/…`) nor a known automation one.
    UnusualUserAgent,
    /// No `Accept-Language`.
    NoAcceptLanguage,
    /// No `Accept`.
    NoAccept,
}

impl Reason {
    /// Every reason, in the order the security report lists ties.
    pub const ALL: [Reason; 5] = [
        Reason::NoUserAgent,
        Reason::AutomationUserAgent,
        Reason::UnusualUserAgent,
        Reason::NoAcceptLanguage,
        Reason::NoAccept,
    ];

    /// The reason's bit in a join's set.
    pub const fn bit(self) -> u32 {
        1 << self as u32
    }

    /// The reason's name in `/api/admin/security`.
    pub const fn name(self) -> &'static str {
        match self {
            Reason::NoUserAgent => "no_user_agent",
            Reason::AutomationUserAgent => "automation_user_agent",
            Reason::UnusualUserAgent => "unusual_user_agent",
            Reason::NoAcceptLanguage => "no_accept_language",
            Reason::NoAccept => "no_accept",
        }
    }

    /// What the reason adds to the score.
    pub const fn weight(self) -> u32 {
        match self {
            Reason::NoUserAgent | Reason::AutomationUserAgent => 60,
            Reason::UnusualUserAgent => 30,
            Reason::NoAcceptLanguage => 25,
            Reason::NoAccept => 15,
        }
    }

    /// The reasons in a bit set; bits no reason owns are ignored.
    pub fn of(bits: u32) -> impl Iterator<Item = Reason> {
        Reason::ALL
            .into_iter()
            .filter(move |reason| bits & reason.bit() != 0)
    }
}

/// The score of a set of reasons, 0..=100.
pub fn score_of(bits: u32) -> u32 {
    Reason::of(bits).map(Reason::weight).sum::<u32>().min(100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_score_is_the_weights_of_the_reasons_capped_at_100() {
        assert_eq!(score_of(0), 0);
        assert_eq!(score_of(Reason::NoAccept.bit()), 15);
        let script = Reason::NoUserAgent.bit() | Reason::NoAcceptLanguage.bit();
        assert_eq!(score_of(script), 85);
        let all = Reason::ALL
            .iter()
            .fold(0, |bits, reason| bits | reason.bit());
        assert_eq!(score_of(all), 100);
        assert_eq!(score_of(1 << 30), 0, "a bit no reason owns adds nothing");
    }

    #[test]
    fn every_reason_has_its_own_bit_and_name() {
        for (index, reason) in Reason::ALL.iter().enumerate() {
            assert_eq!(Reason::of(reason.bit()).collect::<Vec<_>>(), vec![*reason]);
            for other in &Reason::ALL[index + 1..] {
                assert_ne!(reason.bit(), other.bit());
                assert_ne!(reason.name(), other.name());
            }
        }
    }
}
