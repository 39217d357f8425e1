//! Reading a visitor token as a test sees it: the ticket it carries, without verifying it.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;

/// The ticket (`n`) in a visitor token's payload, unverified.
pub fn token_ticket(token: &str) -> Option<u64> {
    let payload = token.split('.').next()?;
    let json: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()?;
    json["n"].as_u64()
}
