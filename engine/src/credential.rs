//! The engine's door: every call to the `Engine` service must carry the engine credential
//! (`qm_proto::client::wire_credential` of ENGINE_TOKEN, or of the key derived from SECRET),
//! checked here before any handler runs. Only the standard health service answers without it,
//! so load balancers and orchestrators can probe readiness.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use subtle::ConstantTimeEq;
use tonic::service::Interceptor;
use tonic::{Request, Status};

/// Refuses a call that does not present the expected credential.
#[derive(Clone)]
pub(crate) struct RequireCredential {
    expected: Arc<[u8]>,
    /// The second of the last refusal logged: a stranger hammering the port costs one log
    /// line a second, not one per call.
    last_logged_sec: Arc<AtomicU64>,
}

impl RequireCredential {
    /// Demands `wire_credential(token)`.
    pub(crate) fn new(token: &str) -> RequireCredential {
        let expected = qm_proto::client::wire_credential(token).into_bytes();
        RequireCredential {
            expected: expected.into(),
            last_logged_sec: Arc::new(AtomicU64::new(0)),
        }
    }
}

impl Interceptor for RequireCredential {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let presented = request
            .metadata()
            .get("authorization")
            .map(|value| value.as_bytes())
            .unwrap_or_default();
        if bool::from(presented.ct_eq(&self.expected)) {
            return Ok(request);
        }
        let now_sec = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_secs());
        if self.last_logged_sec.swap(now_sec, Ordering::Relaxed) != now_sec {
            let peer = request.remote_addr();
            tracing::warn!(
                ?peer,
                "engine call refused: missing or wrong credential (further refusals this second are not logged)"
            );
        }
        Err(Status::unauthenticated(
            "the engine needs its credential (ENGINE_TOKEN, or SECRET shared with the engine)",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call_with(credential: Option<&str>) -> Result<Request<()>, Status> {
        let mut request = Request::new(());
        if let Some(credential) = credential {
            request
                .metadata_mut()
                .insert("authorization", credential.parse().expect("ascii"));
        }
        RequireCredential::new("the-engine-token").call(request)
    }

    #[test]
    fn only_the_right_credential_passes() {
        let right = qm_proto::client::wire_credential("the-engine-token");
        assert!(call_with(Some(&right)).is_ok());
        let wrong = qm_proto::client::wire_credential("another-token!!");
        for refused in [None, Some(wrong.as_str()), Some("Bearer the-engine-token")] {
            let status = call_with(refused).expect_err("refused");
            assert_eq!(status.code(), tonic::Code::Unauthenticated);
        }
    }
}
