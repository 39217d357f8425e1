//! Identifiers: room ids (which also name cookies, so their alphabet is cookie-safe), ownership
//! session ids and their one-way digest, the only form of them the engine ever stores.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore;
use sha2::{Digest, Sha256};

/// The longest room id accepted.
pub const ROOM_ID_MAX_LEN: usize = 64;

/// A room id is 1–64 characters of `A–Z a–z 0–9 _ -`: it appears in URLs and cookie names.
pub fn is_valid_room_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= ROOM_ID_MAX_LEN
        && id
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-')
}

/// A fresh ownership session id: 32 random bytes, base64url (43 characters).
pub fn new_session_id() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Whether a presented session id has the spec's shape (16–128 characters, cookie-safe).
pub fn is_valid_session_id(id: &str) -> bool {
    (16..=128).contains(&id.len())
        && id
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-')
}

/// Lowercase hex SHA-256 of a session id: what binds a place to its browser engine-side.
pub fn session_hash(session_id: &str) -> String {
    hex::encode(Sha256::digest(session_id.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_ids() {
        assert!(is_valid_room_id("launch-2026_A"));
        assert!(!is_valid_room_id(""));
        assert!(!is_valid_room_id("has space"));
        assert!(!is_valid_room_id("semi;colon"));
        assert!(!is_valid_room_id(&"x".repeat(65)));
        assert!(is_valid_room_id(&"x".repeat(64)));
    }

    #[test]
    fn session_ids_are_fresh_and_well_formed() {
        let a = new_session_id();
        assert!(is_valid_session_id(&a));
        assert_ne!(a, new_session_id());
        assert_eq!(session_hash("abc").len(), 64);
    }
}
