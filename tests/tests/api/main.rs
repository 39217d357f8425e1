//! Black-box integration suite: every test starts the real engine, gateway and admin on
//! ephemeral loopback ports (`qm_tests::spawn_app`) and speaks HTTP (and, where the engine's own
//! API is the subject, gRPC) to them.

mod access;
mod admin_rooms;
mod alerts;
mod audit;
mod auto_activate;
mod autotune;
mod burst;
mod check;
mod check_status;
mod connectors;
mod console;
mod credentials;
mod docs_pages;
mod door;
mod drop;
mod events;
mod grants;
mod health;
mod identity;
mod inline;
mod log_capture;
mod metrics;
mod notify;
mod operator_input;
mod outflow;
mod pages;
mod presence;
mod protection;
mod refresh;
mod reports;
mod routing;
mod security_logs;
mod targeting;
mod verify;
mod visitor;
mod visitors;

use base64::Engine as _;

/// The ticket number `n` (or handle `q`) a visitor token carries, read without verifying.
pub(crate) fn token_ticket(token: &str) -> Option<u64> {
    let payload = token.split('.').next()?;
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .ok()?;
    let value: serde_json::Value = serde_json::from_slice(&json).ok()?;
    value["n"].as_u64()
}

/// The pre-queue handle `q` a visitor token carries, read without verifying.
pub(crate) fn token_handle(token: &str) -> Option<u64> {
    let payload = token.split('.').next()?;
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .ok()?;
    let value: serde_json::Value = serde_json::from_slice(&json).ok()?;
    value["q"].as_u64()
}

/// The generation `g` a visitor token carries.
pub(crate) fn token_generation(token: &str) -> Option<u64> {
    let payload = token.split('.').next()?;
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .ok()?;
    let value: serde_json::Value = serde_json::from_slice(&json).ok()?;
    value["g"].as_u64()
}
