//! Content-hashed assets: an embedded file served under a name that changes whenever its bytes
//! do (`<stem>-<hash>.<ext>`), and the answer that lets a browser cache it forever. The waiting
//! page's assets and the console's are both named and answered here, so the two processes agree
//! on the hash.

use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::HeaderValue;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS};
use sha2::{Digest, Sha256};

/// Content type of a stylesheet.
pub const CSS_CONTENT_TYPE: &str = "text/css; charset=utf-8";
/// Content type of a script.
pub const JS_CONTENT_TYPE: &str = "text/javascript; charset=utf-8";

/// One embedded asset and the hashed file name it is served under (`<stem>-<hash>.<ext>`).
pub struct HashedAsset {
    pub file_name: String,
    pub content_type: &'static str,
    pub body: &'static str,
}

impl HashedAsset {
    pub fn new(
        stem: &str,
        extension: &str,
        content_type: &'static str,
        body: &'static str,
    ) -> HashedAsset {
        HashedAsset {
            file_name: format!("{stem}-{}.{extension}", content_hash(body.as_bytes())),
            content_type,
            body,
        }
    }
}

/// The spec's asset hash: the first 22 characters of the unpadded base64url SHA-256 of the file.
pub fn content_hash(bytes: &[u8]) -> String {
    let mut encoded = URL_SAFE_NO_PAD.encode(Sha256::digest(bytes));
    encoded.truncate(22);
    encoded
}

/// `200` with the file, `immutable` for a year, and `nosniff`.
pub fn immutable_asset(content_type: &'static str, body: &'static [u8]) -> Response {
    (
        [
            (CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=31536000, immutable"),
            ),
            (X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        ],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_22_characters_of_base64url_sha256() {
        // SHA-256("") = e3b0c442...; base64url of it starts with 47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU.
        assert_eq!(content_hash(b""), "47DEQpj8HBSa-_TImW-5JC");
    }

    #[test]
    fn an_asset_is_named_by_the_hash_of_its_bytes() {
        let asset = HashedAsset::new("waiting-ui", "js", JS_CONTENT_TYPE, "");
        assert_eq!(asset.file_name, "waiting-ui-47DEQpj8HBSa-_TImW-5JC.js");
        assert_eq!(asset.content_type, JS_CONTENT_TYPE);
    }
}
