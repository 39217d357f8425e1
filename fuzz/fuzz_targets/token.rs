//! The visitor token: parsing and verifying whatever a client presents, payload rules on any
//! payload a keyring signs, and the age rule at the edges of the clock.
//!
//! Input: `now_ms` (8 bytes LE), `max_age_sec` (8 bytes LE), a selector byte, then the rest as a
//! token text and as a payload object to sign.

#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use qm_core::token::{Keyring, Purpose, TokenError, VisitorClaims, check_age};
use secrecy::SecretString;
use serde_json::Value;

/// Legacy, v2, and v2 during a rotation (SECRET_PREVIOUS set).
static KEYRINGS: LazyLock<[Keyring; 3]> = LazyLock::new(|| {
    let secret = |text: &str| SecretString::from(text.to_owned());
    [
        Keyring::new(secret("fuzz-secret-one"), None, false),
        Keyring::new(secret("fuzz-secret-one"), None, true),
        Keyring::new(
            secret("fuzz-secret-two"),
            Some(secret("fuzz-secret-one")),
            true,
        ),
    ]
});

const PURPOSES: [Purpose; 4] = [
    Purpose::Visitor,
    Purpose::Monitor,
    Purpose::Session,
    Purpose::Operator,
];

/// The age rule computed in i128, where nothing can wrap.
fn age_rule_model(iat: i64, now_ms: i64, max_age_sec: u64) -> Result<(), TokenError> {
    let (iat, now) = (i128::from(iat), i128::from(now_ms));
    if iat > (now + 60_000).min(i128::from(i64::MAX)) {
        return Err(TokenError::FromTheFuture);
    }
    let max_age_ms =
        (i128::from(max_age_sec.min(i64::MAX as u64)) * 1000).min(i128::from(i64::MAX));
    if now - iat <= max_age_ms {
        Ok(())
    } else {
        Err(TokenError::TooOld)
    }
}

fn read_i64(bytes: &[u8]) -> i64 {
    let mut buffer = [0u8; 8];
    buffer.copy_from_slice(&bytes[..8]);
    i64::from_le_bytes(buffer)
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 17 {
        return;
    }
    let now_ms = read_i64(&data[0..8]);
    let max_age_sec = read_i64(&data[8..16]) as u64;
    let selector = usize::from(data[16]);
    let rest = &data[17..];

    // Whatever a client presents: never a panic, and whatever verifies obeys the age rule.
    let text = String::from_utf8_lossy(rest);
    for keyring in KEYRINGS.iter() {
        for purpose in PURPOSES {
            let _ = keyring.verify(purpose, &text);
        }
        if let Ok(claims) = keyring.verify_visitor(&text, now_ms, max_age_sec) {
            assert_eq!(check_age(claims.iat, now_ms, max_age_sec), Ok(()));
        }
    }
    let _ = VisitorClaims::peek_iat(&text);

    // Any payload a keyring signs: the signature always verifies, so what is exercised is the
    // payload rules and the age rule; a payload that passes re-signs to the same claims.
    if let Ok(Value::Object(payload)) = serde_json::from_slice::<Value>(rest) {
        let keyring = &KEYRINGS[selector % KEYRINGS.len()];
        let token = keyring.sign(Purpose::Visitor, &payload);
        assert!(
            keyring.verify(Purpose::Visitor, &token).is_ok(),
            "own signature"
        );
        match keyring.verify_visitor(&token, now_ms, max_age_sec) {
            Ok(claims) => {
                assert_eq!(check_age(claims.iat, now_ms, max_age_sec), Ok(()));
                let again = keyring.sign_visitor(&claims);
                assert_eq!(
                    keyring.verify_visitor(&again, now_ms, max_age_sec),
                    Ok(claims.clone())
                );
                let _ = claims.refresh_jitter_ms(max_age_sec);
            }
            Err(TokenError::TooOld | TokenError::FromTheFuture | TokenError::BadPayload) => {}
            Err(other) => panic!("a token this keyring signed failed with {other:?}"),
        }
    }

    // The age rule against the wide-integer model, with an iat from the input.
    if rest.len() >= 8 {
        let iat = read_i64(&rest[..8]);
        assert_eq!(
            check_age(iat, now_ms, max_age_sec),
            age_rule_model(iat, now_ms, max_age_sec),
            "iat {iat} now {now_ms} max {max_age_sec}"
        );
    }
});
