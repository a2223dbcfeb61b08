//! Requests from JSON, with OpenAI-shaped errors that name the field at fault: serde says
//! what is wrong (`invalid type: string "hot", expected f64`) but not where, so the
//! failing field is found by deserializing the request one field at a time (and a bad
//! message one field of it at a time: `messages[1].role`).

use super::error::ApiError;
use super::types::{ChatCompletionRequest, ChatMessage, CompletionRequest};
use serde::de::DeserializeOwned;
use serde_json::{json, Map, Value as Json};

impl ChatCompletionRequest {
    /// Parse a request body.
    pub fn from_json(text: &str) -> Result<ChatCompletionRequest, ApiError> {
        from_json(text)
    }

    /// A request from parsed JSON.
    pub fn from_value(value: Json) -> Result<ChatCompletionRequest, ApiError> {
        from_value(value)
    }
}

impl CompletionRequest {
    pub fn from_json(text: &str) -> Result<CompletionRequest, ApiError> {
        from_json(text)
    }

    pub fn from_value(value: Json) -> Result<CompletionRequest, ApiError> {
        from_value(value)
    }
}

impl super::embeddings::EmbeddingRequest {
    pub fn from_json(text: &str) -> Result<Self, ApiError> {
        from_json(text)
    }

    pub fn from_value(value: Json) -> Result<Self, ApiError> {
        from_value(value)
    }
}

fn from_json<T: DeserializeOwned>(text: &str) -> Result<T, ApiError> {
    let value: Json = serde_json::from_str(text)
        .map_err(|e| ApiError::malformed(format!("The request body is not valid JSON: {e}")))?;
    from_value(value)
}

fn from_value<T: DeserializeOwned>(value: Json) -> Result<T, ApiError> {
    let Json::Object(fields) = &value else {
        return Err(ApiError::malformed(
            "The request body must be a JSON object",
        ));
    };
    serde_json::from_value(value.clone()).map_err(|e| {
        let param = bad_field::<T>(fields).unwrap_or_default();
        ApiError::invalid(&param, format!("Invalid value for '{param}': {e}"))
    })
}

/// The first field of `fields` that `T` rejects on its own.
fn bad_field<T: DeserializeOwned>(fields: &Map<String, Json>) -> Option<String> {
    let (key, value) = fields
        .iter()
        .find(|(k, v)| serde_json::from_value::<T>(json!({ *k: v })).is_err())?;
    match (key.as_str(), value) {
        ("messages", Json::Array(msgs)) => Some(bad_message(msgs).unwrap_or_else(|| key.clone())),
        _ => Some(key.clone()),
    }
}

/// `messages[i]` or `messages[i].field` of the first message that does not parse.
fn bad_message(msgs: &[Json]) -> Option<String> {
    let (i, m) = msgs
        .iter()
        .enumerate()
        .find(|(_, m)| serde_json::from_value::<ChatMessage>((*m).clone()).is_err())?;
    let Json::Object(m) = m else {
        return Some(format!("messages[{i}]"));
    };
    if !m.contains_key("role") {
        return Some(format!("messages[{i}].role"));
    }
    // Each field on a message that is otherwise fine.
    let field = m.iter().find(|(k, v)| {
        let mut probe = json!({"role": "user", "content": ""});
        probe[k.as_str()] = (*v).clone();
        serde_json::from_value::<ChatMessage>(probe).is_err()
    });
    Some(match field {
        Some((k, _)) => format!("messages[{i}].{k}"),
        None => format!("messages[{i}]"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param(body: &str) -> Option<String> {
        ChatCompletionRequest::from_json(body)
            .unwrap_err()
            .error
            .param
    }

    #[test]
    fn wrong_types_name_their_field() {
        let msgs = r#""messages": [{"role": "user", "content": "hi"}]"#;
        assert_eq!(
            param(&format!(r#"{{{msgs}, "temperature": "hot"}}"#)).as_deref(),
            Some("temperature")
        );
        assert_eq!(
            param(&format!(r#"{{{msgs}, "stop": 5}}"#)).as_deref(),
            Some("stop")
        );
        assert_eq!(
            param(&format!(
                r#"{{{msgs}, "stream_options": {{"include_usage": 1}}}}"#
            ))
            .as_deref(),
            Some("stream_options")
        );
        assert_eq!(
            param(r#"{"messages": [{"role": "user", "content": "a"}, {"role": "robot", "content": "b"}]}"#).as_deref(),
            Some("messages[1].role")
        );
        assert_eq!(
            param(r#"{"messages": [{"content": "a"}]}"#).as_deref(),
            Some("messages[0].role")
        );
        assert_eq!(
            param(r#"{"messages": [{"role": "user", "content": 3}]}"#).as_deref(),
            Some("messages[0].content")
        );
        assert_eq!(param(r#"{"messages": "hi"}"#).as_deref(), Some("messages"));
    }

    #[test]
    fn unknown_fields_are_ignored_and_bad_json_is_malformed() {
        let r = ChatCompletionRequest::from_json(
            r#"{"messages": [{"role": "user", "content": "hi", "extra": 1}], "user": "x", "frobnicate": true, "top_k": 5}"#,
        )
        .unwrap();
        assert_eq!(r.params.top_k, Some(5));
        let e = ChatCompletionRequest::from_json("{not json").unwrap_err();
        assert_eq!(
            (e.error.kind.as_str(), e.error.param),
            ("invalid_request_error", None)
        );
        assert!(ChatCompletionRequest::from_json("[1]").is_err());
        let c =
            CompletionRequest::from_json(r#"{"prompt": "x", "max_tokens": "ten"}"#).unwrap_err();
        assert_eq!(c.error.param.as_deref(), Some("max_tokens"));
    }
}
