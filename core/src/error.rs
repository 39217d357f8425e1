//! Every error code of the contract, mapped in this one place to an HTTP status, a gRPC code and
//! the `{error, code}` body. Handlers return [`ApiError`]; the engine sends the code to the edge in
//! the `qm-code` metadata of a tonic `Status`, and [`ApiError::from_status`] reads it back.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use http::StatusCode;

macro_rules! error_codes {
    ($($variant:ident => $code:literal, $status:literal;)+) => {
        /// A code of the contract. `as_str` is the wire spelling; clients branch on it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $($variant,)+
        }

        impl ErrorCode {
            /// Every code, for documentation and tests.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)+];

            /// The code as it appears in the `code` field.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $code,)+
                }
            }

            /// The HTTP status this code is answered with.
            pub fn http_status(self) -> StatusCode {
                let status: u16 = match self {
                    $(ErrorCode::$variant => $status,)+
                };
                StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
            }

            /// Parses a wire spelling back into a code.
            pub fn parse(code: &str) -> Option<ErrorCode> {
                match code {
                    $($code => Some(ErrorCode::$variant),)+
                    _ => None,
                }
            }
        }
    };
}

error_codes! {
    // Visitor line.
    RateLimited => "rate_limited", 429;
    InvalidRoomId => "invalid_room_id", 400;
    InvalidTokenField => "invalid_token_field", 400;
    RoomNotFound => "room_not_found", 404;
    BlockedByProtection => "blocked_by_protection", 403;
    QueueIdentityLimit => "queue_identity_limit", 429;
    PrequeueIdentityLimit => "prequeue_identity_limit", 429;
    PrequeueFull => "prequeue_full", 503;
    StorageUnavailable => "storage_unavailable", 503;
    InvalidToken => "invalid_token", 401;
    StaleTicket => "stale_ticket", 409;
    InvalidSession => "invalid_session", 400;
    SseCapacity => "sse_capacity", 503;
    SsePerIpLimit => "sse_per_ip_limit", 429;
    // Any route.
    MethodNotAllowed => "method_not_allowed", 405;
    NotFound => "not_found", 404;
    InvalidJson => "invalid_json", 400;
    PayloadTooLarge => "payload_too_large", 413;
    UnsupportedMediaType => "unsupported_media_type", 415;
    EngineUnavailable => "engine_unavailable", 503;
    Internal => "internal", 500;
    // The connection itself (answered below the routes, on both edges).
    BadRequest => "bad_request", 400;
    InvalidHost => "invalid_host", 400;
    RequestTimeout => "request_timeout", 408;
    UriTooLong => "uri_too_long", 414;
    RequestHeaderTooLarge => "request_header_too_large", 431;
    TooManyCookies => "too_many_cookies", 431;
    ServerBusy => "server_busy", 503;
    // Credentials.
    Unauthorized => "unauthorized", 401;
    CredentialInQuery => "credential_in_query", 401;
    InsufficientRole => "insufficient_role", 403;
    TooManyAuthFailures => "too_many_auth_failures", 429;
    CsrfRequired => "csrf_required", 403;
    // Operators and monitor tokens (GET/POST/DELETE /api/admin/operators, /api/admin/monitor-token).
    InvalidRole => "invalid_role", 400;
    InvalidOperatorName => "invalid_operator_name", 400;
    OperatorExists => "operator_exists", 409;
    OperatorNotFound => "operator_not_found", 404;
    InvalidLabel => "invalid_label", 400;
    InvalidExpiry => "invalid_expiry", 400;
    MonitorTokenNotFound => "monitor_token_not_found", 404;
    // Room documents and operator actions.
    UnknownField => "unknown_field", 400;
    ConflictingField => "conflicting_field", 400;
    RedactedShape => "redacted_shape", 400;
    MissingField => "missing_field", 400;
    NothingToChange => "nothing_to_change", 400;
    InvalidName => "invalid_name", 400;
    InvalidTargetUrl => "invalid_target_url", 400;
    InvalidProxyOrigin => "invalid_proxy_origin", 400;
    InvalidRate => "invalid_rate", 400;
    InvalidMaxConcurrent => "invalid_max_concurrent", 400;
    InvalidPassedTtlSec => "invalid_passed_ttl_sec", 400;
    InvalidSessionTtlSec => "invalid_session_ttl_sec", 400;
    InvalidSessionMaxSec => "invalid_session_max_sec", 400;
    InvalidBranding => "invalid_branding", 400;
    InvalidReturnOrigins => "invalid_return_origins", 400;
    InvalidTagOrigins => "invalid_tag_origins", 400;
    InvalidAutotune => "invalid_autotune", 400;
    InvalidProtection => "invalid_protection", 400;
    InvalidAutoActivate => "invalid_auto_activate", 400;
    InvalidUrlPattern => "invalid_url_pattern", 400;
    // URL scope: a page named in `url=` (the door check, the targeting dry run).
    InvalidUrl => "invalid_url", 400;
    InvalidOpensAt => "invalid_opens_at", 400;
    InvalidPreQueueMaxPerIp => "invalid_pre_queue_max_per_ip", 400;
    InvalidQueueMaxPerIp => "invalid_queue_max_per_ip", 400;
    InvalidPresenceSec => "invalid_presence_sec", 400;
    InvalidState => "invalid_state", 400;
    InvalidOnBackendDown => "invalid_on_backend_down", 400;
    InvalidCount => "invalid_count", 400;
    InvalidTicket => "invalid_ticket", 400;
    TicketNotFound => "ticket_not_found", 404;
    // Support lookup (GET /api/admin/rooms/:id/visitors).
    InvalidRef => "invalid_ref", 400;
    InvalidVisitorQuery => "invalid_visitor_query", 400;
    VisitorNotFound => "visitor_not_found", 404;
    AlertsDisabled => "alerts_disabled", 400;
    WebhookFailed => "webhook_failed", 502;
    VerifyFailed => "verify_failed", 424;
    InvalidConnector => "invalid_connector", 400;
    // Console charts (GET /api/admin/metrics).
    InvalidRange => "invalid_range", 400;
    // The audit trail (GET /api/admin/audit).
    InvalidAuditQuery => "invalid_audit_query", 400;
    // Reports (GET /api/admin/reports).
    InvalidReportQuery => "invalid_report_query", 400;
    // Turn notifications (POST /api/notify).
    InvalidEmail => "invalid_email", 400;
    NotifyDisabled => "notify_disabled", 400;
    PlaceLapsed => "place_lapsed", 409;
    // Inline mode (a host of INLINE_HOSTS).
    NotAdmitted => "not_admitted", 403;
    OriginUnavailable => "origin_unavailable", 502;
    InlineRoomUnavailable => "inline_room_unavailable", 502;
}

impl ErrorCode {
    /// The `Retry-After` seconds a refusal with this code carries when its maker gave none: a
    /// refusal that clears by itself says when to come back, so a client does not spin.
    pub fn default_retry_after_sec(self) -> Option<u64> {
        match self {
            ErrorCode::StorageUnavailable | ErrorCode::EngineUnavailable => Some(2),
            ErrorCode::PrequeueFull => Some(30),
            ErrorCode::SseCapacity | ErrorCode::ServerBusy => Some(5),
            _ => None,
        }
    }

    /// The gRPC code the engine answers this error with.
    pub fn grpc_code(self) -> tonic::Code {
        match self.http_status().as_u16() {
            400 | 413 | 415 => tonic::Code::InvalidArgument,
            401 => tonic::Code::Unauthenticated,
            403 => tonic::Code::PermissionDenied,
            404 => tonic::Code::NotFound,
            409 => tonic::Code::FailedPrecondition,
            429 => tonic::Code::ResourceExhausted,
            503 => tonic::Code::Unavailable,
            _ => tonic::Code::Internal,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error as the contract answers it: a code and a sentence for the human reading the body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    /// Seconds for a `Retry-After` header, where the code calls for one.
    pub retry_after_sec: Option<u64>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            code,
            message: message.into(),
            retry_after_sec: None,
        }
    }

    pub fn with_retry_after(mut self, seconds: u64) -> Self {
        self.retry_after_sec = Some(seconds);
        self
    }

    pub fn internal(message: impl Into<String>) -> Self {
        ApiError::new(ErrorCode::Internal, message)
    }

    /// The seconds for `Retry-After`: the error's own hint, else its code's default.
    pub fn retry_after(&self) -> Option<u64> {
        self.retry_after_sec
            .or_else(|| self.code.default_retry_after_sec())
    }

    /// The `{error, code}` body.
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({ "error": self.message, "code": self.code.as_str() })
    }

    /// The error as the engine sends it over gRPC. The message travels in the `grpc-message`
    /// header (percent-encoded, up to three bytes per byte), so it is cut to
    /// [`MAX_STATUS_MESSAGE_BYTES`]: a longer one would not fit the client's header-list limit
    /// and the answer would arrive as a broken transport (503) instead of the refusal it is.
    pub fn to_status(&self) -> tonic::Status {
        let message = crate::text::bounded(&self.message, MAX_STATUS_MESSAGE_BYTES);
        let mut status = tonic::Status::new(self.code.grpc_code(), message.into_owned());
        if let Ok(value) = self.code.as_str().parse() {
            status.metadata_mut().insert(CODE_METADATA_KEY, value);
        }
        // The hint crosses the process boundary beside the code: the edge answers Retry-After
        // with the engine's figure, not a guess of its own (nor one of another build's).
        if let Some(seconds) = self.retry_after()
            && let Ok(value) = seconds.to_string().parse()
        {
            status
                .metadata_mut()
                .insert(RETRY_AFTER_METADATA_KEY, value);
        }
        status
    }

    /// Reads an engine error back. A status without our code is the transport failing: the
    /// engine is unreachable or broke, which the edge answers as 503 `engine_unavailable`. That
    /// is the one place the edge makes `engine_unavailable`, so the cause is logged here, once
    /// per answer: the gRPC code, its message and the transport error under it (never request
    /// metadata, so never the engine credential).
    pub fn from_status(status: &tonic::Status) -> ApiError {
        let code = status
            .metadata()
            .get(CODE_METADATA_KEY)
            .and_then(|value| value.to_str().ok())
            .and_then(ErrorCode::parse);
        let retry_after_sec = status
            .metadata()
            .get(RETRY_AFTER_METADATA_KEY)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse::<u64>().ok());
        match code {
            Some(code) => ApiError {
                code,
                message: status.message().to_owned(),
                retry_after_sec,
            },
            None => {
                log_engine_unavailable(status);
                ApiError::new(
                    ErrorCode::EngineUnavailable,
                    "the queue engine is not reachable right now; try again shortly",
                )
                .with_retry_after(2)
            }
        }
    }
}

/// Logs why an engine call failed without an answer: the tonic code and message, and the chain
/// of errors under it (a transport's connect or protocol error), each cut to a bounded length.
fn log_engine_unavailable(status: &tonic::Status) {
    let mut causes = String::new();
    let mut source = std::error::Error::source(status);
    while let Some(error) = source {
        if !causes.is_empty() {
            causes.push_str(": ");
        }
        causes.push_str(&error.to_string());
        source = error.source();
    }
    // During an outage every call fails alike: one line a second for each gRPC code says why,
    // and how many answers it stands for, instead of one line per visitor.
    let slot = (status.code() as usize).min(ENGINE_UNAVAILABLE_LOGGED_SEC.len() - 1);
    let now_sec = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs());
    if ENGINE_UNAVAILABLE_LOGGED_SEC[slot].swap(now_sec, Ordering::Relaxed) == now_sec {
        ENGINE_UNAVAILABLE_UNLOGGED[slot].fetch_add(1, Ordering::Relaxed);
        return;
    }
    let also = ENGINE_UNAVAILABLE_UNLOGGED[slot].swap(0, Ordering::Relaxed);
    tracing::warn!(
        grpc_code = ?status.code(),
        grpc_message = %crate::text::bounded(status.message(), LOGGED_CAUSE_BYTES),
        transport = %crate::text::bounded(&causes, LOGGED_CAUSE_BYTES),
        unlogged_since_last = also,
        "engine unavailable"
    );
}

/// Per gRPC code (17 of them): the second of the last `engine unavailable` line, and the
/// answers since that had none.
static ENGINE_UNAVAILABLE_LOGGED_SEC: [AtomicU64; 17] = [const { AtomicU64::new(0) }; 17];
static ENGINE_UNAVAILABLE_UNLOGGED: [AtomicU64; 17] = [const { AtomicU64::new(0) }; 17];

/// Longest piece of an engine failure (message, transport chain) put in the log.
const LOGGED_CAUSE_BYTES: usize = 512;

impl From<ApiError> for tonic::Status {
    fn from(error: ApiError) -> tonic::Status {
        error.to_status()
    }
}

impl From<tonic::Status> for ApiError {
    fn from(status: tonic::Status) -> ApiError {
        ApiError::from_status(&status)
    }
}

/// Longest error message (bytes) the engine sends in a gRPC status: percent-encoded it stays
/// well inside the 16 KiB header list a tonic client accepts, beside the other headers.
pub const MAX_STATUS_MESSAGE_BYTES: usize = 1024;

/// Same key as `qm_proto::CODE_METADATA_KEY`, kept here so core does not depend on proto.
const CODE_METADATA_KEY: &str = "qm-code";
/// The seconds of an error's Retry-After hint, beside `qm-code`.
pub const RETRY_AFTER_METADATA_KEY: &str = "qm-retry-after";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_through_grpc() {
        for code in ErrorCode::ALL {
            let error = ApiError::new(*code, "x");
            assert_eq!(ApiError::from_status(&error.to_status()).code, *code);
            assert_eq!(ErrorCode::parse(code.as_str()), Some(*code));
        }
    }

    #[test]
    fn a_retry_hint_round_trips_through_grpc() {
        let error =
            ApiError::new(ErrorCode::StorageUnavailable, "journal down").with_retry_after(3);
        let status = error.to_status();
        assert_eq!(
            status
                .metadata()
                .get(RETRY_AFTER_METADATA_KEY)
                .and_then(|value| value.to_str().ok()),
            Some("3")
        );
        let back = ApiError::from_status(&status);
        assert_eq!(back, error);
        assert_eq!(back.retry_after(), Some(3));
        // Without a hint of its own, a code that clears by itself still says when to come back.
        let bare =
            ApiError::from_status(&ApiError::new(ErrorCode::PrequeueFull, "full").to_status());
        // The engine's default is the figure that travels.
        assert_eq!(bare.retry_after_sec, Some(30));
        assert_eq!(bare.retry_after(), Some(30));
        let refusal = ApiError::new(ErrorCode::InvalidRoomId, "x").to_status();
        assert!(refusal.metadata().get(RETRY_AFTER_METADATA_KEY).is_none());
        assert_eq!(
            ApiError::new(ErrorCode::StorageUnavailable, "x").retry_after(),
            Some(2)
        );
        assert_eq!(
            ApiError::new(ErrorCode::InvalidRoomId, "x").retry_after(),
            None
        );
        // A hint that is not a number is ignored, not an error.
        let mut odd = ApiError::new(ErrorCode::StorageUnavailable, "x").to_status();
        odd.metadata_mut()
            .insert(RETRY_AFTER_METADATA_KEY, "soon".parse().unwrap());
        assert_eq!(ApiError::from_status(&odd).retry_after_sec, None);
    }

    #[test]
    fn a_status_message_is_bounded_whatever_the_error_says() {
        let long = ApiError::new(ErrorCode::InvalidName, "\u{1F600}".repeat(100_000));
        let status = long.to_status();
        assert!(status.message().len() <= MAX_STATUS_MESSAGE_BYTES);
        assert!(status.message().ends_with('…'));
        let back = ApiError::from_status(&status);
        assert_eq!(back.code, ErrorCode::InvalidName);
        // A short message crosses unchanged.
        let short = ApiError::new(ErrorCode::InvalidName, "name: too long");
        assert_eq!(ApiError::from_status(&short.to_status()), short);
    }

    #[test]
    fn a_bare_transport_failure_reads_as_engine_unavailable() {
        let error = ApiError::from_status(&tonic::Status::unavailable("connection refused"));
        assert_eq!(error.code, ErrorCode::EngineUnavailable);
        assert_eq!(error.code.http_status(), StatusCode::SERVICE_UNAVAILABLE);
    }

    /// Collects what a closure logs.
    fn logs_of(action: impl FnOnce()) -> String {
        #[derive(Clone, Default)]
        struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl std::io::Write for Captured {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, action);
        let bytes = captured
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    #[test]
    fn an_engine_failure_logs_its_cause_once_and_an_engine_refusal_does_not() {
        let logs = logs_of(|| {
            let status = tonic::Status::unauthenticated("the engine needs its credential");
            ApiError::from_status(&status);
        });
        assert_eq!(logs.matches("engine unavailable").count(), 1, "{logs}");
        assert!(logs.contains("WARN"), "{logs}");
        assert!(logs.contains("Unauthenticated"), "{logs}");
        assert!(logs.contains("the engine needs its credential"), "{logs}");

        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "tcp connect refused");
        let logs = logs_of(|| {
            let status = tonic::Status::from_error(Box::new(io));
            ApiError::from_status(&status);
        });
        assert!(logs.contains("tcp connect refused"), "{logs}");

        let huge = tonic::Status::unavailable("y".repeat(100_000));
        let logs = logs_of(|| {
            ApiError::from_status(&huge);
        });
        assert!(
            logs.len() < 2_000,
            "the logged cause is bounded: {}",
            logs.len()
        );

        // An answer with the engine's own code is a refusal, not an outage: nothing logged.
        let logs = logs_of(|| {
            ApiError::from_status(&ApiError::new(ErrorCode::InvalidName, "name: x").to_status());
        });
        assert!(logs.is_empty(), "{logs}");
    }

    #[test]
    fn an_outage_logs_a_line_a_second_per_cause_not_one_per_answer() {
        // DeadlineExceeded: a code no other test here logs.
        let logs = logs_of(|| {
            for _ in 0..500 {
                ApiError::from_status(&tonic::Status::deadline_exceeded("engine call timed out"));
            }
        });
        let lines = logs.matches("engine unavailable").count();
        assert!(
            (1..=2).contains(&lines),
            "500 answers in well under two seconds: {lines} lines\n{logs}"
        );
    }
}
