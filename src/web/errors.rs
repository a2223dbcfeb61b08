//! Errors as JavaScript `Error`s with a stable `code` (and the Rust message), a
//! request's too (its OpenAI body).

use crate::api::ApiError;
use crate::error::Error;
use crate::format::package::MANIFEST_FILE;
use wasm_bindgen::{JsCast, JsValue};

/// The `code` of an error: one per kind of thing that went wrong.
pub fn code(e: &Error) -> &'static str {
    match e {
        Error::Io { .. } => "IO",
        Error::BadMagic { .. } | Error::ModelTruncated { .. } | Error::CorruptModel { .. } => {
            "BAD_MODEL"
        }
        Error::Unsupported { .. } => "UNSUPPORTED",
        Error::MissingField { what, .. } if what == MANIFEST_FILE => "BAD_MANIFEST",
        Error::MissingField { .. } | Error::MissingTensor(_) | Error::ShapeMismatch { .. } => {
            "BAD_MODEL"
        }
        Error::ShardHashMismatch { .. } => "SHARD_HASH",
        Error::ShardSizeMismatch { .. } => "SHARD_SIZE",
        Error::Manifest(_) => "BAD_MANIFEST",
        Error::Tokenizer(_) => "TOKENIZER",
        Error::ChatTemplate(_) => "CHAT_TEMPLATE",
        Error::InvalidArgument(_) => "INVALID_ARGUMENT",
        Error::NoGpuAdapter { .. } | Error::NoWebGpu(_) => "NO_WEBGPU",
        Error::GpuDevice(_) | Error::Gpu(_) => "GPU",
        Error::ExceedsDeviceLimits { .. } | Error::OverMemoryBudget { .. } => "GPU_LIMITS",
        Error::ContextTooLong { .. } => "CONTEXT_FULL",
        Error::Hub(_) | Error::Fetch { .. } => "NETWORK",
        Error::Aborted => "ABORTED",
        Error::GpuLost(_) => "GPU_LOST",
        Error::Quota { .. } => "QUOTA",
        Error::NotCached { .. } => "NOT_CACHED",
        Error::SessionMismatch { .. } => "SESSION_MISMATCH",
        Error::SessionCorrupt { .. } => "SESSION_CORRUPT",
    }
}

/// A JS `Error` with `code` set.
pub fn to_js(e: Error) -> JsValue {
    let err = js_sys::Error::new(&e.to_string());
    let _ = js_sys::Reflect::set(&err, &"code".into(), &code(&e).into());
    err.into()
}

/// Why a request failed: its own fault (OpenAI's shape) or the engine's.
pub enum Failure {
    Api(ApiError),
    Engine(crate::Error),
}

impl From<ApiError> for Failure {
    fn from(e: ApiError) -> Failure {
        Failure::Api(e)
    }
}

impl From<crate::Error> for Failure {
    fn from(e: crate::Error) -> Failure {
        Failure::Engine(e)
    }
}

/// A request's error as a JS `Error`: the message, `code` (the engine error's, else
/// `INVALID_ARGUMENT`), and OpenAI's body as `openai` with the HTTP `status` a server
/// would answer (`web/src/completions.js` turns it into the SDK's error shape).
pub fn api_to_js(e: Failure) -> JsValue {
    let (code, body) = match e {
        Failure::Api(a) => ("INVALID_ARGUMENT", a),
        Failure::Engine(e) => (code(&e), ApiError::from(e)),
    };
    let err = js_sys::Error::new(&body.error.message);
    let set = |k: &str, v: &JsValue| js_sys::Reflect::set(&err, &k.into(), v);
    let _ = set("code", &code.into());
    let _ = set("status", &body.status().into());
    if let Ok(v) = js_sys::JSON::parse(&body.to_json()) {
        let _ = set("openai", &v);
    }
    err.into()
}

/// A thrown JS value as an [`Error`] (its message when it is an `Error`).
pub fn from_js(what: &str, v: JsValue) -> Error {
    let detail = match v.dyn_ref::<js_sys::Error>() {
        Some(e) if e.name() == "AbortError" => return Error::Aborted,
        Some(e) => String::from(e.message()),
        None => v.as_string().unwrap_or_else(|| format!("{v:?}")),
    };
    Error::Fetch {
        url: what.to_string(),
        detail,
    }
}
