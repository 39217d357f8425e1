//! A visitor's e-mail address: checked, masked for display, and sealed at rest. The plain
//! address exists only between a Notify call and its sealing, and between unsealing and the
//! SMTP envelope; it is never logged and never stored.
//!
//! Sealing is ChaCha20-Poly1305 under a key derived from SECRET (HKDF-SHA256, info
//! `qm:notify-email`), so a database dump alone reveals no address. SECRET_PREVIOUS's key still
//! opens what was sealed before a rotation; a record sealed under a secret the engine no longer
//! holds cannot be opened and is marked failed.

use std::str::FromStr;

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use lettre::Address;
use qm_core::token::Keyring;
use qm_core::{ApiError, ErrorCode};
use rand::RngCore;

/// HKDF info of the address key: its own, so no token key can open an address.
const KEY_INFO: &[u8] = b"qm:notify-email";
/// Bound into every ciphertext: a sealed address is only ever an address of this format.
const ASSOCIATED_DATA: &[u8] = b"qm:notify-email:v1";
/// First byte of a sealed address: the format, so a later one can be told apart.
const FORMAT_V1: u8 = 1;
const NONCE_LEN: usize = 12;
/// RFC 5321's limit on a forward path.
const MAX_ADDRESS_LEN: usize = 254;

/// An address that parsed; its text is deliberately not `Debug` or `Display`.
pub(crate) struct EmailAddress(Address);

impl EmailAddress {
    /// Checks a presented address: `local@domain`, at most 254 characters, no spaces or
    /// control characters. The error never repeats the address.
    pub(crate) fn parse(text: &str) -> Result<EmailAddress, ApiError> {
        let text = text.trim();
        let refuse = || {
            ApiError::new(
                ErrorCode::InvalidEmail,
                "email must be an e-mail address (local-part@domain), at most 254 characters",
            )
        };
        if text.len() > MAX_ADDRESS_LEN || text.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(refuse());
        }
        let address = Address::from_str(text).map_err(|_| refuse())?;
        // A domain without a dot (`a@localhost`) cannot be delivered on the public Internet,
        // but an operator's test relay can; lettre's syntax check is the rule.
        Ok(EmailAddress(address))
    }

    pub(crate) fn as_str(&self) -> &str {
        self.0.as_ref()
    }

    pub(crate) fn into_address(self) -> Address {
        self.0
    }

    /// The form shown back to the visitor: first letter of the local part and of the domain,
    /// the top-level domain kept, e.g. `j***@e***.com`.
    pub(crate) fn masked(&self) -> String {
        mask(self.0.user(), self.0.domain())
    }
}

fn first_char(text: &str) -> String {
    text.chars().next().map(String::from).unwrap_or_default()
}

fn mask(local: &str, domain: &str) -> String {
    let domain_shown = match domain.rsplit_once('.') {
        Some((name, tld)) if !name.is_empty() && !tld.is_empty() => {
            format!("{}***.{tld}", first_char(name))
        }
        _ => format!("{}***", first_char(domain)),
    };
    format!("{}***@{domain_shown}", first_char(local))
}

/// Why a sealed address could not be opened.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UnsealError {
    #[error("sealed address has an unknown format")]
    Format,
    #[error("no key this engine holds opens the sealed address (SECRET rotated past it?)")]
    NoKey,
    #[error("sealed address is not valid text")]
    Text,
}

/// Seals and opens addresses with the keys derived from SECRET (and SECRET_PREVIOUS).
pub(crate) struct AddressCipher {
    /// The current key first: new seals use it; opening tries each in turn.
    ciphers: Vec<ChaCha20Poly1305>,
}

impl AddressCipher {
    pub(crate) fn from_keyring(keyring: &Keyring) -> AddressCipher {
        let ciphers = keyring
            .derived_keys(KEY_INFO)
            .iter()
            .map(|key| ChaCha20Poly1305::new(Key::from_slice(key)))
            .collect();
        AddressCipher { ciphers }
    }

    /// `1 || nonce || ciphertext+tag`, under a fresh random nonce.
    pub(crate) fn seal(&self, address: &EmailAddress) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        rand::rng().fill_bytes(&mut nonce);
        let payload = Payload {
            msg: address.as_str().as_bytes(),
            aad: ASSOCIATED_DATA,
        };
        // The key ring always holds SECRET's key, and encryption into a Vec cannot fail for
        // inputs this small (the only error is a message past ChaCha20's 256 GiB limit).
        let sealed = self.ciphers[0]
            .encrypt(Nonce::from_slice(&nonce), payload)
            .expect("an address of at most 254 bytes seals");
        let mut out = Vec::with_capacity(1 + NONCE_LEN + sealed.len());
        out.push(FORMAT_V1);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        out
    }

    pub(crate) fn open(&self, sealed: &[u8]) -> Result<EmailAddress, UnsealError> {
        if sealed.len() <= 1 + NONCE_LEN || sealed[0] != FORMAT_V1 {
            return Err(UnsealError::Format);
        }
        let (nonce, ciphertext) = sealed[1..].split_at(NONCE_LEN);
        let plain = self
            .ciphers
            .iter()
            .find_map(|cipher| {
                cipher
                    .decrypt(
                        Nonce::from_slice(nonce),
                        Payload {
                            msg: ciphertext,
                            aad: ASSOCIATED_DATA,
                        },
                    )
                    .ok()
            })
            .ok_or(UnsealError::NoKey)?;
        let text = String::from_utf8(plain).map_err(|_| UnsealError::Text)?;
        EmailAddress::parse(&text).map_err(|_| UnsealError::Text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::SecretString;

    fn keyring(secret: &str, previous: Option<&str>) -> Keyring {
        Keyring::new(
            SecretString::from(secret.to_owned()),
            previous.map(|text| SecretString::from(text.to_owned())),
            false,
        )
    }

    #[test]
    fn addresses_are_checked_without_echoing_them() {
        assert!(EmailAddress::parse(" jane@example.com ").is_ok());
        for bad in [
            "",
            "jane",
            "jane@",
            "@example.com",
            "ja ne@example.com",
            "jane@exa\nmple.com",
            &format!("{}@example.com", "x".repeat(250)),
        ] {
            let error = EmailAddress::parse(bad).err().expect(bad);
            assert_eq!(error.code, ErrorCode::InvalidEmail, "{bad:?}");
            if !bad.is_empty() {
                assert!(!error.message.contains(bad), "{bad:?}");
            }
        }
    }

    #[test]
    fn masking_keeps_first_letters_and_the_top_level_domain() {
        let masked = |text: &str| EmailAddress::parse(text).unwrap().masked();
        assert_eq!(masked("jane.doe@example.com"), "j***@e***.com");
        assert_eq!(masked("x@mail.shop.co.uk"), "x***@m***.uk");
        assert_eq!(masked("ops@localhost"), "o***@l***");
        assert_eq!(mask("", ""), "***@***");
        assert!(!masked("jane.doe@example.com").contains("doe"));
    }

    #[test]
    fn sealing_round_trips_and_hides_the_address() {
        let cipher = AddressCipher::from_keyring(&keyring("a-secret-of-sixteen-chars", None));
        let address = EmailAddress::parse("jane@example.com").unwrap();
        let sealed = cipher.seal(&address);
        assert!(
            !sealed
                .windows(b"jane".len())
                .any(|window| window == b"jane")
        );
        // A fresh nonce each time: the same address never seals to the same bytes.
        assert_ne!(sealed, cipher.seal(&address));
        assert_eq!(cipher.open(&sealed).unwrap().as_str(), "jane@example.com");

        let mut tampered = sealed.clone();
        let last = tampered.len() - 1;
        tampered[last] ^= 1;
        assert!(matches!(cipher.open(&tampered), Err(UnsealError::NoKey)));
        assert!(matches!(cipher.open(&[2; 40]), Err(UnsealError::Format)));
        assert!(matches!(cipher.open(&[1; 5]), Err(UnsealError::Format)));
    }

    #[test]
    fn a_rotated_secret_still_opens_what_the_previous_one_sealed() {
        let old = AddressCipher::from_keyring(&keyring("the-old-secret-0123456", None));
        let sealed = old.seal(&EmailAddress::parse("jane@example.com").unwrap());
        let rotated = AddressCipher::from_keyring(&keyring(
            "the-new-secret-0123456",
            Some("the-old-secret-0123456"),
        ));
        assert_eq!(rotated.open(&sealed).unwrap().as_str(), "jane@example.com");
        let forgotten = AddressCipher::from_keyring(&keyring("the-new-secret-0123456", None));
        assert!(matches!(forgotten.open(&sealed), Err(UnsealError::NoKey)));
    }
}
