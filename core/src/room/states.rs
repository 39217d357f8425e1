//! The room's states: what an operator configures, what visitors see (which adds
//! `scheduled` while the doors are still shut), and the inline gate's backend-down policy.

use serde::{Deserialize, Serialize};

use crate::{ApiError, ErrorCode};

/// The state an operator configures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RoomState {
    #[default]
    Active,
    Paused,
    /// Queue off: everybody passes.
    Bypass,
}

impl RoomState {
    pub fn as_str(self) -> &'static str {
        match self {
            RoomState::Active => "active",
            RoomState::Paused => "paused",
            RoomState::Bypass => "bypass",
        }
    }

    /// Reads a wire state; anything else is 400 `invalid_state`.
    pub fn parse(text: &str) -> Result<RoomState, ApiError> {
        match text {
            "active" => Ok(RoomState::Active),
            "paused" => Ok(RoomState::Paused),
            "bypass" => Ok(RoomState::Bypass),
            _ => Err(ApiError::new(
                ErrorCode::InvalidState,
                format!(
                    "state: {} is not a room state; use active, paused or bypass",
                    crate::text::echo(text)
                ),
            )),
        }
    }
}

/// The state visitors see: the configured one, or `scheduled` while `opensAt` is ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EffectiveState {
    Active,
    Paused,
    Bypass,
    Scheduled,
}

impl EffectiveState {
    pub fn as_str(self) -> &'static str {
        match self {
            EffectiveState::Active => "active",
            EffectiveState::Paused => "paused",
            EffectiveState::Bypass => "bypass",
            EffectiveState::Scheduled => "scheduled",
        }
    }
}

/// What an inline room's gate does while the backend is down.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendDownPolicy {
    #[default]
    Closed,
    Open,
}

impl BackendDownPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendDownPolicy::Closed => "closed",
            BackendDownPolicy::Open => "open",
        }
    }
}
