//! Errors in OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`, so that
//! clients written for the OpenAI SDK show them as they show OpenAI's own: a bad request
//! names the field (`param`) it is about, a prompt that does not fit names the context.

use serde::{Deserialize, Serialize};

/// An error response: serializes to `{"error": {...}}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiError {
    pub error: ErrorBody,
}

/// The body of an [`ApiError`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub message: String,
    /// `invalid_request_error` (the request is at fault) or `server_error`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The request field at fault (`temperature`, `messages[1].role`), if one is.
    pub param: Option<String>,
    /// A machine-readable code: `context_length_exceeded`, `unsupported_value`, …
    pub code: Option<String>,
}

impl ApiError {
    fn new(kind: &str, param: Option<&str>, code: Option<&str>, message: String) -> ApiError {
        ApiError {
            error: ErrorBody {
                message,
                kind: kind.into(),
                param: param.map(Into::into),
                code: code.map(Into::into),
            },
        }
    }

    /// The request's `param` is wrong (a type, a range, a missing value).
    pub fn invalid(param: &str, message: impl Into<String>) -> ApiError {
        Self::new(
            "invalid_request_error",
            Some(param),
            Some("invalid_value"),
            message.into(),
        )
    }

    /// The request's `param` asks for something this runtime does not do (yet).
    pub fn unsupported(param: &str, message: impl Into<String>) -> ApiError {
        Self::new(
            "invalid_request_error",
            Some(param),
            Some("unsupported_value"),
            message.into(),
        )
    }

    /// The request is not JSON, or not a JSON object.
    pub fn malformed(message: impl Into<String>) -> ApiError {
        Self::new("invalid_request_error", None, None, message.into())
    }

    /// The prompt (+ room for the reply) does not fit the model's context.
    pub fn context_length(prompt_tokens: usize, reply_tokens: usize, context: usize) -> ApiError {
        Self::new(
            "invalid_request_error",
            Some("messages"),
            Some("context_length_exceeded"),
            format!(
                "This model's maximum context length is {context} tokens. However, you \
                 requested {} tokens ({prompt_tokens} in the messages, {reply_tokens} in the \
                 completion). Please reduce the length of the messages or completion, or set \
                 \"context_overflow\": \"truncate\".",
                prompt_tokens + reply_tokens
            ),
        )
    }

    /// The HTTP status a server answers this error with.
    pub fn status(&self) -> u16 {
        if self.error.kind == "invalid_request_error" {
            400
        } else if self.error.code.as_deref() == Some(GPU_LOST) {
            503
        } else {
            500
        }
    }

    /// The JSON text of the error response.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("an error serializes")
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.error.param {
            Some(p) => write!(f, "{} ({p})", self.error.message),
            None => write!(f, "{}", self.error.message),
        }
    }
}

impl std::error::Error for ApiError {}

/// The code of an error whose GPU device was lost ([`crate::Error::GpuLost`]): the model
/// must be reloaded (`Session::reload`); a server answers 503 meanwhile.
pub const GPU_LOST: &str = "gpu_lost";

/// The codes of a session snapshot that belongs elsewhere or is damaged
/// ([`crate::Error::SessionMismatch`], [`crate::Error::SessionCorrupt`]).
pub const SESSION_MISMATCH: &str = "session_mismatch";
pub const SESSION_CORRUPT: &str = "session_corrupt";

/// An engine error met while running a request: context errors and bad arguments are
/// the request's fault, the rest the server's.
impl From<crate::Error> for ApiError {
    fn from(e: crate::Error) -> ApiError {
        match e {
            crate::Error::ContextTooLong { position, context } => {
                ApiError::context_length(position, 0, context)
            }
            crate::Error::InvalidArgument(m) => {
                ApiError::new("invalid_request_error", None, Some("invalid_value"), m)
            }
            crate::Error::ChatTemplate(m) => {
                ApiError::new("invalid_request_error", Some("messages"), None, m)
            }
            e @ crate::Error::SessionMismatch { .. } => ApiError::new(
                "invalid_request_error",
                None,
                Some(SESSION_MISMATCH),
                e.to_string(),
            ),
            e @ crate::Error::SessionCorrupt { .. } => ApiError::new(
                "invalid_request_error",
                None,
                Some(SESSION_CORRUPT),
                e.to_string(),
            ),
            e @ crate::Error::GpuLost(_) => {
                ApiError::new("server_error", None, Some(GPU_LOST), e.to_string())
            }
            other => ApiError::new("server_error", None, None, other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_gpu_device_is_a_503_with_its_own_code() {
        let e = ApiError::from(crate::Error::GpuLost("destroyed".into()));
        assert_eq!(e.error.code.as_deref(), Some(GPU_LOST));
        assert_eq!(e.status(), 503);
        assert!(e.error.message.contains("destroyed"), "{e}");
        let other = ApiError::from(crate::Error::Aborted);
        assert_eq!((other.status(), other.error.code), (500, None));
    }
}
