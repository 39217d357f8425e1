//! What the gateway and the admin process share at the HTTP edge: handlers' error type, which
//! answers the spec's `{error, code}` envelope with the code's status (and `Retry-After` where
//! the code calls for one), and the server loop with a bounded drain on shutdown.

mod error;
mod serve;

pub use error::{AppError, method_not_allowed, not_found};
pub use serve::serve;
