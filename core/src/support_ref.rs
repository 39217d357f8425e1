//! The support reference code the waiting page shows a visitor: six characters they can read
//! down the phone (`K7F-3QX`), derived one way from the place they hold so support can find it
//! without the visitor ever seeing (or being able to forge) their ticket.
//!
//! The code is HMAC-SHA256 under its own key, HKDF-SHA256(SECRET, salt empty, `qm:support-ref`),
//! over the room, its generation and the place (ticket `n` or pre-queue handle `q`), cut to 30
//! bits and written in Crockford base32 (no I, L, O or U, so nothing reads as another
//! character). Without SECRET nobody can compute or guess the code of a given ticket, and the
//! code says nothing about the ticket's number.
//!
//! GET /api/admin/rooms/:id/visitors?ref= resolves a code by computing the codes of the room's
//! places (under SECRET, then SECRET_PREVIOUS during a rotation) and comparing: 30 bits make a
//! collision rare but possible in a very long line, so an ambiguous code answers the candidate
//! tickets rather than guessing. [`normalize`] reads what an operator types the way the visitor
//! meant it (case, dashes, spaces, and O/I/L for 0/1).

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::token::{Keyring, VisitorPlace};

/// The HKDF purpose of the code's key.
pub const SUPPORT_REF_INFO: &[u8] = b"qm:support-ref";
/// The HKDF purpose of the key the support lookup digests a place's session binding under.
pub const SUPPORT_SESSION_INFO: &[u8] = b"qm:support-session";
/// Characters in a code, without its dash.
pub const SUPPORT_REF_LEN: usize = 6;
/// Crockford base32: digits and letters without I, L, O and U.
const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// The code for a place under one key, as shown: `XXX-XXX`.
pub fn support_ref_with_key(
    key: &[u8; 32],
    room_id: &str,
    generation: u64,
    place: VisitorPlace,
) -> String {
    // `new_from_slice` takes any key length; a 32-byte key cannot fail.
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("hmac takes any key length");
    // Fields joined with a byte no room id contains, so two inputs never read the same.
    let place = match place {
        VisitorPlace::Ticket(ticket) => format!("n{ticket}"),
        VisitorPlace::Handle(handle) => format!("q{handle}"),
    };
    mac.update(format!("{room_id}\n{generation}\n{place}").as_bytes());
    let digest = mac.finalize().into_bytes();
    let bits = u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]) >> 2;
    let mut code = String::with_capacity(SUPPORT_REF_LEN + 1);
    for index in 0..SUPPORT_REF_LEN {
        if index == SUPPORT_REF_LEN / 2 {
            code.push('-');
        }
        let shift = 5 * (SUPPORT_REF_LEN - 1 - index);
        code.push(char::from(ALPHABET[((bits >> shift) & 31) as usize]));
    }
    code
}

/// The code for a place under the keyring's current SECRET: what the page shows now.
pub fn support_ref(
    keyring: &Keyring,
    room_id: &str,
    generation: u64,
    place: VisitorPlace,
) -> String {
    let keys = keyring.derived_keys(SUPPORT_REF_INFO);
    // The keyring always holds SECRET first.
    support_ref_with_key(&keys[0], room_id, generation, place)
}

/// Every code a place may have been shown under (SECRET, then SECRET_PREVIOUS), for a lookup.
pub fn support_refs(
    keyring: &Keyring,
    room_id: &str,
    generation: u64,
    place: VisitorPlace,
) -> Vec<String> {
    keyring
        .derived_keys(SUPPORT_REF_INFO)
        .iter()
        .map(|key| support_ref_with_key(key, room_id, generation, place))
        .collect()
}

/// What the support lookup shows of a place's binding: 12 hex characters of
/// HMAC-SHA256(`key`, session hash). Support can tell whether two places are bound to the same
/// browser, but the digest neither is nor leads back to the hash the ownership cookie proves.
pub fn session_digest(key: &[u8; 32], session_hash: &str) -> String {
    // `new_from_slice` takes any key length; a 32-byte key cannot fail.
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("hmac takes any key length");
    mac.update(session_hash.as_bytes());
    mac.finalize().into_bytes()[..6]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// A typed code read the way the visitor meant it, as `XXX-XXX`; `None` when it cannot be one.
pub fn normalize(input: &str) -> Option<String> {
    let mut characters = Vec::with_capacity(SUPPORT_REF_LEN);
    for character in input.chars() {
        let character = match character.to_ascii_uppercase() {
            '-' | ' ' => continue,
            'O' => '0',
            'I' | 'L' => '1',
            other => other,
        };
        if !ALPHABET.contains(&u8::try_from(character).ok()?) {
            return None;
        }
        characters.push(character);
    }
    if characters.len() != SUPPORT_REF_LEN {
        return None;
    }
    characters.insert(SUPPORT_REF_LEN / 2, '-');
    Some(characters.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::SecretString;

    fn keyring(secret: &str, previous: Option<&str>) -> Keyring {
        Keyring::new(
            SecretString::from(secret.to_owned()),
            previous.map(|previous| SecretString::from(previous.to_owned())),
            false,
        )
    }

    #[test]
    fn a_code_is_six_unambiguous_characters_stable_per_place() {
        let keys = keyring("s3cret", None);
        let code = support_ref(&keys, "drop", 1, VisitorPlace::Ticket(42));
        assert_eq!(code.len(), 7);
        assert_eq!(&code[3..4], "-");
        assert!(
            code.chars()
                .filter(|c| *c != '-')
                .all(|c| ALPHABET.contains(&(c as u8))),
            "{code}"
        );
        assert!(!code.contains(['I', 'L', 'O', 'U']));
        assert_eq!(
            code,
            support_ref(&keys, "drop", 1, VisitorPlace::Ticket(42))
        );
        assert_eq!(normalize(&code), Some(code.clone()));
    }

    #[test]
    fn every_input_and_the_secret_change_the_code() {
        let keys = keyring("s3cret", None);
        let code = support_ref(&keys, "drop", 1, VisitorPlace::Ticket(42));
        for other in [
            support_ref(&keys, "drop", 1, VisitorPlace::Ticket(43)),
            support_ref(&keys, "drop", 2, VisitorPlace::Ticket(42)),
            support_ref(&keys, "drap", 1, VisitorPlace::Ticket(42)),
            support_ref(&keys, "drop", 1, VisitorPlace::Handle(42)),
            support_ref(&keyring("other", None), "drop", 1, VisitorPlace::Ticket(42)),
        ] {
            assert_ne!(code, other);
        }
        // 1000 consecutive tickets: codes spread, nearly all distinct (30 bits).
        let codes: std::collections::HashSet<String> = (1..=1000)
            .map(|ticket| support_ref(&keys, "drop", 1, VisitorPlace::Ticket(ticket)))
            .collect();
        assert!(codes.len() >= 999, "{}", codes.len());
    }

    #[test]
    fn a_rotation_keeps_the_code_shown_before_it_findable() {
        let before = support_ref(&keyring("old", None), "drop", 1, VisitorPlace::Handle(3));
        let rotated = keyring("new", Some("old"));
        let codes = support_refs(&rotated, "drop", 1, VisitorPlace::Handle(3));
        assert_eq!(codes.len(), 2);
        assert_eq!(codes[1], before);
        assert_eq!(
            codes[0],
            support_ref(&rotated, "drop", 1, VisitorPlace::Handle(3))
        );
    }

    #[test]
    fn typed_codes_are_read_as_meant() {
        assert_eq!(normalize("k7f 3qx"), Some("K7F-3QX".into()));
        assert_eq!(normalize("o1l-iab"), Some("011-1AB".into()));
        assert_eq!(normalize("K7F3QX"), Some("K7F-3QX".into()));
        assert_eq!(normalize("K7F-3Q"), None);
        assert_eq!(normalize("K7F-3QXX"), None);
        assert_eq!(normalize("K7F-3QU"), None, "U is not in the alphabet");
        assert_eq!(normalize("K7F-3Q€"), None);
    }
}
