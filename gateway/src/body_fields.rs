//! The fields visitor JSON bodies share, checked alike wherever they appear: `token` (in a join
//! and a notify body) and `roomId` (required in a join, optional in a notify). A field of the
//! wrong type or size is refused with its own code; absent or null is no value.

use qm_core::ids::is_valid_room_id;
use qm_core::{ApiError, ErrorCode};
use serde_json::{Map, Value};

/// The longest token a body may carry.
const MAX_TOKEN_FIELD_LEN: usize = 4096;

/// `token`: a string of at most [`MAX_TOKEN_FIELD_LEN`] bytes; empty counts as none.
pub(crate) fn token_field(body: &Map<String, Value>) -> Result<Option<String>, ApiError> {
    match body.get("token") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(token)) if token.len() <= MAX_TOKEN_FIELD_LEN => {
            Ok(Some(token.clone()).filter(|token| !token.is_empty()))
        }
        Some(_) => Err(ApiError::new(
            ErrorCode::InvalidTokenField,
            format!("token must be a string of at most {MAX_TOKEN_FIELD_LEN} characters"),
        )),
    }
}

/// `roomId` when the body names one: a well-formed room id, else `invalid_room_id`.
pub(crate) fn optional_room_id_field(
    body: &Map<String, Value>,
) -> Result<Option<String>, ApiError> {
    match body.get("roomId") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(room_id)) if is_valid_room_id(room_id) => Ok(Some(room_id.clone())),
        Some(_) => Err(invalid_room_id()),
    }
}

/// `roomId`, which the body must name.
pub(crate) fn room_id_field(body: &Map<String, Value>) -> Result<String, ApiError> {
    optional_room_id_field(body)?.ok_or_else(invalid_room_id)
}

fn invalid_room_id() -> ApiError {
    ApiError::new(
        ErrorCode::InvalidRoomId,
        "roomId must be 1-64 characters of letters, digits, '_' and '-'",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::object;
    use serde_json::json;

    #[test]
    fn a_token_is_an_optional_bounded_string() {
        assert_eq!(
            token_field(&object(json!({ "token": "t.s" }))),
            Ok(Some("t.s".into()))
        );
        for absent in [json!({}), json!({ "token": null }), json!({ "token": "" })] {
            assert_eq!(token_field(&object(absent.clone())), Ok(None), "{absent}");
        }
        let longest = "x".repeat(MAX_TOKEN_FIELD_LEN);
        assert_eq!(
            token_field(&object(json!({ "token": longest }))),
            Ok(Some(longest))
        );
        for refused in [
            json!({ "token": 5 }),
            json!({ "token": ["t"] }),
            json!({ "token": "x".repeat(MAX_TOKEN_FIELD_LEN + 1) }),
        ] {
            assert_eq!(
                token_field(&object(refused.clone())).unwrap_err().code,
                ErrorCode::InvalidTokenField,
                "{refused}"
            );
        }
    }

    #[test]
    fn a_room_id_is_checked_whether_or_not_it_is_required() {
        let named = object(json!({ "roomId": "launch" }));
        assert_eq!(optional_room_id_field(&named), Ok(Some("launch".into())));
        assert_eq!(room_id_field(&named), Ok("launch".into()));
        for absent in [json!({}), json!({ "roomId": null })] {
            assert_eq!(optional_room_id_field(&object(absent.clone())), Ok(None));
            assert_eq!(
                room_id_field(&object(absent)).unwrap_err().code,
                ErrorCode::InvalidRoomId
            );
        }
        for refused in [json!({ "roomId": 7 }), json!({ "roomId": "has space" })] {
            assert_eq!(
                optional_room_id_field(&object(refused.clone()))
                    .unwrap_err()
                    .code,
                ErrorCode::InvalidRoomId,
                "{refused}"
            );
        }
    }
}
