//! The admin credentials this process signs: operator keys (`qmo_` + a token signed for
//! purpose `qm:operator`) and monitor tokens (`qmm_` + a token for `qm:monitor`). Both are
//! signed with the keyring (`qm_core::token`: legacy or v2 by TOKEN_SIGN_V2, SECRET_PREVIOUS
//! verifying during a rotation); the payload is a kind and a random nonce, so two keys never
//! collide and a token signed for anything else never has the shape.
//!
//! The engine never sees a key. It stores verifiers: HMAC-SHA256 of the whole key text under
//! the key `Keyring::derived_keys` derives for the purpose from each SECRET in force (current
//! first). Looking a key up sends every verifier, so a key minted before a rotation is still
//! found by its previous-SECRET verifier.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use qm_core::token::{Keyring, Purpose};
use serde_json::{Map, Value, json};
use sha2::Sha256;

/// Prefix of an operator key.
pub(crate) const OPERATOR_PREFIX: &str = "qmo_";
/// Prefix of a monitor token.
pub(crate) const MONITOR_PREFIX: &str = "qmm_";

/// Which of the two credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum KeyKind {
    Operator,
    Monitor,
}

impl KeyKind {
    fn prefix(self) -> &'static str {
        match self {
            KeyKind::Operator => OPERATOR_PREFIX,
            KeyKind::Monitor => MONITOR_PREFIX,
        }
    }

    fn purpose(self) -> Purpose {
        match self {
            KeyKind::Operator => Purpose::Operator,
            KeyKind::Monitor => Purpose::Monitor,
        }
    }

    fn payload_kind(self) -> &'static str {
        match self {
            KeyKind::Operator => "operator",
            KeyKind::Monitor => "monitor",
        }
    }

    fn verifier_info(self) -> &'static [u8] {
        match self {
            KeyKind::Operator => b"qm:operator",
            KeyKind::Monitor => b"qm:monitor",
        }
    }

    /// The kind a presented Bearer value claims by its prefix.
    pub(crate) fn of(presented: &str) -> Option<KeyKind> {
        if presented.starts_with(OPERATOR_PREFIX) {
            Some(KeyKind::Operator)
        } else if presented.starts_with(MONITOR_PREFIX) {
            Some(KeyKind::Monitor)
        } else {
            None
        }
    }
}

type HmacSha256 = Hmac<Sha256>;

/// A fresh key of `kind`: the text handed out once, never stored.
pub(crate) fn mint(keyring: &Keyring, kind: KeyKind) -> String {
    let mut payload = Map::new();
    payload.insert("k".to_owned(), json!(kind.payload_kind()));
    payload.insert(
        "n".to_owned(),
        json!(URL_SAFE_NO_PAD.encode(rand::random::<[u8; 24]>())),
    );
    payload.insert("iat".to_owned(), json!(qm_core::clock::now_ms()));
    format!(
        "{}{}",
        kind.prefix(),
        keyring.sign(kind.purpose(), &payload)
    )
}

/// Whether `presented` is a key of `kind` this keyring signed: the prefix, the signature (for
/// the purpose, kid rules included) and the payload's kind.
pub(crate) fn verify(keyring: &Keyring, kind: KeyKind, presented: &str) -> bool {
    let Some(token) = presented.strip_prefix(kind.prefix()) else {
        return false;
    };
    keyring
        .verify(kind.purpose(), token)
        .is_ok_and(|payload| payload.get("k") == Some(&Value::from(kind.payload_kind())))
}

/// The verifiers of a key, one per SECRET in force (current first): what the engine stores and
/// is asked for.
pub(crate) fn verifiers(keyring: &Keyring, kind: KeyKind, key: &str) -> Vec<Vec<u8>> {
    keyring
        .derived_keys(kind.verifier_info())
        .iter()
        .map(|derived| {
            // HMAC takes keys of any length; this cannot fail for a 32-byte key.
            let mut mac = HmacSha256::new_from_slice(derived).expect("hmac takes any key length");
            mac.update(key.as_bytes());
            mac.finalize().into_bytes().to_vec()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use secrecy::SecretString;

    use super::*;

    fn keyring(secret: &str, previous: Option<&str>, v2: bool) -> Keyring {
        Keyring::new(
            SecretString::from(secret.to_owned()),
            previous.map(|previous| SecretString::from(previous.to_owned())),
            v2,
        )
    }

    #[test]
    fn a_key_verifies_for_its_own_kind_only() {
        for v2 in [false, true] {
            let ring = keyring("secret-one-0123456789", None, v2);
            let operator = mint(&ring, KeyKind::Operator);
            let monitor = mint(&ring, KeyKind::Monitor);
            assert!(operator.starts_with("qmo_") && monitor.starts_with("qmm_"));
            assert!(verify(&ring, KeyKind::Operator, &operator));
            assert!(verify(&ring, KeyKind::Monitor, &monitor));
            assert!(!verify(&ring, KeyKind::Monitor, &operator));
            // The monitor token's body under the operator prefix: the payload's kind refuses it.
            let swapped = monitor.replacen("qmm_", "qmo_", 1);
            assert!(!verify(&ring, KeyKind::Operator, &swapped));
            let other = keyring("secret-two-0123456789", None, v2);
            assert!(!verify(&other, KeyKind::Operator, &operator));
        }
    }

    #[test]
    fn a_rotation_keeps_the_key_and_its_verifier() {
        let before = keyring("secret-one-0123456789", None, true);
        let key = mint(&before, KeyKind::Operator);
        let stored = verifiers(&before, KeyKind::Operator, &key);
        assert_eq!(stored.len(), 1);
        let after = keyring("secret-two-0123456789", Some("secret-one-0123456789"), true);
        assert!(verify(&after, KeyKind::Operator, &key));
        let sent = verifiers(&after, KeyKind::Operator, &key);
        assert_eq!(sent.len(), 2);
        assert_eq!(
            sent[1], stored[0],
            "the previous SECRET's verifier finds the key"
        );
        assert_ne!(sent[0], stored[0]);
        // A v2 key is never read as legacy once the previous secret is gone.
        let later = keyring("secret-two-0123456789", None, false);
        assert!(!verify(&later, KeyKind::Operator, &key));
    }

    #[test]
    fn verifiers_differ_by_kind_and_never_contain_the_key() {
        let ring = keyring("secret-one-0123456789", None, false);
        let key = mint(&ring, KeyKind::Operator);
        let operator = verifiers(&ring, KeyKind::Operator, &key);
        let monitor = verifiers(&ring, KeyKind::Monitor, &key);
        assert_ne!(operator, monitor);
        assert_eq!(operator[0].len(), 32);
    }
}
