//! Shared foundations of every Queue Manager process: the spec's error codes and their mapping
//! to HTTP and gRPC, the signing keyring and visitor tokens, typed configuration read from the
//! environment, identifiers, the clock, the room document with its validation rules, and the one
//! shutdown signal every process stops on.

pub mod bot;
pub mod clock;
pub mod config;
pub mod error;
pub mod eta;
pub mod ids;
pub mod line;
pub mod room;
pub mod scope;
pub mod shutdown;
pub mod support_ref;
pub mod text;
pub mod token;

pub use error::{ApiError, ErrorCode};
