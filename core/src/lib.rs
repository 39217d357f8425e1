//! Shared foundations of every Queue Manager process: the spec's error codes and their mapping
//! to HTTP and gRPC, the signing keyring and visitor tokens, typed configuration read from the
//! environment, identifiers, the clock, and the room document with its validation rules.

pub mod bot;
pub mod clock;
pub mod config;
pub mod error;
pub mod eta;
pub mod ids;
pub mod line;
pub mod room;
pub mod support_ref;
pub mod token;

pub use error::{ApiError, ErrorCode};
