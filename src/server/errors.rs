//! The server's own errors, in OpenAI's shape (`{"error": {"message", "type", "param",
//! "code"}}`), and the HTTP status each is answered with. The protocol's errors come
//! from [`crate::api`]; these are the ones only a server has: loading or stopping (503),
//! a request past its timeout (504), the slot API without `--slot-save-path` (501).

use crate::api::{ApiError, ErrorBody};
use axum::http::StatusCode;
use std::time::Duration;

/// An error of type `kind` with `code` (its HTTP status: [`status`]).
pub(super) fn api_error(kind: &str, code: &str, message: impl Into<String>) -> ApiError {
    ApiError {
        error: ErrorBody {
            message: message.into(),
            kind: kind.into(),
            param: None,
            code: Some(code.into()),
        },
    }
}

/// The model cannot answer now (loading, stopping): 503.
pub(super) fn unavailable(message: &str) -> ApiError {
    api_error("server_error", "unavailable", message)
}

/// `--slot-save-path` is not given: llama.cpp's answer (501).
pub(super) fn not_supported() -> ApiError {
    api_error(
        "not_supported_error",
        "not_supported",
        "This server does not support the slot API: start it with --slot-save-path DIR",
    )
}

/// The request did not finish within `timeout` (`--timeout`): 504.
pub(super) fn timed_out(timeout: Duration) -> ApiError {
    api_error(
        "server_error",
        "timeout",
        format!(
            "The request did not finish within this server's timeout of {} s.",
            timeout.as_secs_f64()
        ),
    )
}

/// The HTTP status of `e`: from its code (503, 504, 404, 401, 413, 405, 501), else from
/// its type.
pub(super) fn status(e: &ApiError) -> StatusCode {
    match e.error.code.as_deref() {
        Some("unavailable") => StatusCode::SERVICE_UNAVAILABLE,
        Some("timeout") => StatusCode::GATEWAY_TIMEOUT,
        Some("unknown_url" | "file_not_found") => StatusCode::NOT_FOUND,
        Some("not_supported") => StatusCode::NOT_IMPLEMENTED,
        Some("invalid_api_key") => StatusCode::UNAUTHORIZED,
        Some("request_too_large") => StatusCode::PAYLOAD_TOO_LARGE,
        Some("method_not_allowed") => StatusCode::METHOD_NOT_ALLOWED,
        _ => StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
    }
}
