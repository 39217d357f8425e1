//! What the gateway and the admin process share at the HTTP edge: handlers' error type, which
//! answers the spec's `{error, code}` envelope with the code's status (and `Retry-After` where
//! the code calls for one), the server loop with a bounded drain on shutdown and bounded
//! connections (timeouts, caps on a request's head, a connection ceiling; see `serve`), and
//! content-hashed assets (their names and the answer that caches them forever).

mod asset;
mod client_address;
mod error;
mod gate;
mod guard;
mod options;
mod serve;
mod validators;

pub use asset::{CSS_CONTENT_TYPE, HashedAsset, JS_CONTENT_TYPE, content_hash, immutable_asset};
pub use client_address::client_address;
pub use error::{AppError, method_not_allowed, not_found};
pub use options::ServeOptions;
pub use serve::serve;
pub use validators::if_none_match;
