//! `/v1/embeddings` in OpenAI's shapes: the request (`input`: a text, texts, token ids or
//! lists of them; `encoding_format` `float` or `base64`; `dimensions`; and `pooling`, an
//! extension) checked into token lists and [`EmbedOptions`], and the response built from
//! the vectors ([`EmbeddingResponse::new`]). Every front end runs it: natively
//! [`Session::embeddings`], the browser package on its own session (`src/web/`).

use super::error::ApiError;
use super::run::DEFAULT_MODEL;
use crate::embed::{EmbedOptions, Embedding, Pooling};
use crate::generate::Session;
use crate::tokenizer::Tokenizer;
use serde::{Deserialize, Serialize};

/// Most inputs one request may hold (OpenAI's limit).
pub const MAX_INPUTS: usize = 2048;

/// An embeddings request.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct EmbeddingRequest {
    /// What to embed (required; an `Option` so that a missing one is named like a bad
    /// one).
    #[serde(default)]
    pub input: Option<EmbeddingInput>,
    #[serde(default)]
    pub model: Option<String>,
    /// `float` (the default) or `base64` (little-endian f32, what OpenAI's Python client
    /// asks for).
    #[serde(default)]
    pub encoding_format: Option<EncodingFormat>,
    /// Keep the first N values, normalised again.
    #[serde(default)]
    pub dimensions: Option<usize>,
    #[serde(default)]
    pub user: Option<String>,
    /// pocketrt's extension: `last`, `mean` or `cls` (default: the model's, else last).
    #[serde(default)]
    pub pooling: Option<Pooling>,
}

/// OpenAI's `input`: a text, texts, token ids, or lists of token ids.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum EmbeddingInput {
    Text(String),
    Texts(Vec<String>),
    Tokens(Vec<u32>),
    TokenLists(Vec<Vec<u32>>),
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EncodingFormat {
    #[default]
    Float,
    Base64,
}

impl EmbeddingRequest {
    /// A request of texts with the defaults (the CLI's).
    pub fn texts(texts: Vec<String>) -> EmbeddingRequest {
        EmbeddingRequest {
            input: Some(EmbeddingInput::Texts(texts)),
            ..Default::default()
        }
    }

    /// Each input's tokens (texts with the model's special tokens, as llama.cpp does).
    /// A missing, empty or too long list, and an empty input, are errors naming `input`.
    pub fn token_lists(&self, tokenizer: &Tokenizer) -> Result<Vec<Vec<u32>>, ApiError> {
        let texts = match &self.input {
            Some(EmbeddingInput::Text(t)) => std::slice::from_ref(t),
            Some(EmbeddingInput::Texts(t)) => &t[..],
            _ => &[],
        };
        if let Some(i) = texts.iter().position(String::is_empty) {
            return Err(ApiError::invalid(
                "input",
                format!("input {i} is an empty string: there is nothing to embed"),
            ));
        }
        let lists = match &self.input {
            None => return Err(ApiError::invalid("input", "'input' is required")),
            Some(EmbeddingInput::Text(t)) => vec![tokenizer.encode(t, true)],
            Some(EmbeddingInput::Texts(t)) => t.iter().map(|t| tokenizer.encode(t, true)).collect(),
            Some(EmbeddingInput::Tokens(t)) => vec![t.clone()],
            Some(EmbeddingInput::TokenLists(t)) => t.clone(),
        };
        if lists.is_empty() || lists.len() > MAX_INPUTS {
            return Err(ApiError::invalid(
                "input",
                format!(
                    "'input' must hold 1 to {MAX_INPUTS} inputs, not {}",
                    lists.len()
                ),
            ));
        }
        if let Some(i) = lists.iter().position(Vec::is_empty) {
            return Err(ApiError::invalid(
                "input",
                format!("input {i} is empty: there is nothing to embed"),
            ));
        }
        Ok(lists)
    }

    /// The options, `dimensions` checked against the model's `hidden` size.
    pub fn options(&self, hidden: usize) -> Result<EmbedOptions, ApiError> {
        crate::embed::check_dimensions(self.dimensions, hidden).map_err(|e| match e {
            crate::Error::InvalidArgument(m) => ApiError::invalid("dimensions", m),
            other => other.into(),
        })?;
        Ok(EmbedOptions {
            pooling: self.pooling,
            normalize: true,
            dimensions: self.dimensions,
        })
    }
}

/// The response: `{"object": "list", "data": [...], "model", "usage"}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmbeddingResponse {
    pub object: String,
    pub data: Vec<EmbeddingData>,
    pub model: String,
    pub usage: EmbeddingUsage,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmbeddingData {
    pub object: String,
    pub index: usize,
    pub embedding: EmbeddingVector,
}

/// The values, as the request's `encoding_format` asks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EmbeddingVector {
    Float(Vec<f32>),
    /// Base64 of the little-endian f32 values.
    Base64(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmbeddingUsage {
    pub prompt_tokens: usize,
    pub total_tokens: usize,
}

impl EmbeddingResponse {
    /// The response of `req` with `embeddings` (in the inputs' order), named `model`
    /// (the request's, else `model`).
    pub fn new(req: &EmbeddingRequest, embeddings: Vec<Embedding>, model: &str) -> Self {
        let tokens = embeddings.iter().map(|e| e.tokens).sum();
        let format = req.encoding_format.unwrap_or_default();
        let data = embeddings
            .into_iter()
            .enumerate()
            .map(|(index, e)| EmbeddingData {
                object: "embedding".into(),
                index,
                embedding: match format {
                    EncodingFormat::Float => EmbeddingVector::Float(e.vector),
                    EncodingFormat::Base64 => EmbeddingVector::Base64(base64_f32(&e.vector)),
                },
            })
            .collect();
        EmbeddingResponse {
            object: "list".into(),
            data,
            model: req.model.clone().unwrap_or_else(|| model.to_string()),
            usage: EmbeddingUsage {
                prompt_tokens: tokens,
                total_tokens: tokens,
            },
        }
    }

    /// The JSON text of the response.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a response serializes")
    }
}

/// Standard base64 (with padding) of `values` as little-endian f32 bytes.
pub fn base64_f32(values: &[f32]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

impl Session {
    /// Answer an embeddings request: each input embedded on its own ([`Session::embed`];
    /// the conversation the session holds is left as it was), named `model` unless the
    /// request names one.
    pub fn embeddings(
        &mut self,
        req: &EmbeddingRequest,
        model: &str,
    ) -> Result<EmbeddingResponse, ApiError> {
        let lists = req.token_lists(self.tokenizer())?;
        let opts = req.options(self.engine().config().hidden_size)?;
        let mut embeddings = Vec::with_capacity(lists.len());
        for tokens in &lists {
            embeddings.push(self.embed(&tokens[..], &opts).map_err(input_error)?);
        }
        let model = if model.is_empty() {
            DEFAULT_MODEL
        } else {
            model
        };
        Ok(EmbeddingResponse::new(req, embeddings, model))
    }
}

/// An engine error of one input: one longer than the context is OpenAI's
/// `context_length_exceeded` on `input`, a bad token id an invalid `input`.
pub fn input_error(e: crate::Error) -> ApiError {
    let body = |code: &str, message: String| ApiError {
        error: super::error::ErrorBody {
            message,
            kind: "invalid_request_error".into(),
            param: Some("input".into()),
            code: Some(code.into()),
        },
    };
    match e {
        crate::Error::ContextTooLong { position, context } => body(
            "context_length_exceeded",
            format!(
                "This model's maximum context length is {context} tokens, however you \
                 requested {position} tokens in an input. Please reduce the input's length."
            ),
        ),
        crate::Error::InvalidArgument(m) => body("invalid_value", m),
        other => other.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_is_the_little_endian_f32_bytes() {
        // [1.0, -2.5]: 00 00 80 3f 00 00 20 c0
        assert_eq!(base64_f32(&[1.0, -2.5]), "AACAPwAAIMA=");
        assert_eq!(base64_f32(&[1.0]), "AACAPw==");
        assert_eq!(base64_f32(&[]), "");
        assert_eq!(base64_f32(&[0.0, 0.0, 0.0]), "AAAAAAAAAAAAAAAA");
    }

    #[test]
    fn requests_parse_in_every_input_shape_and_bad_fields_are_named() {
        let tok = Tokenizer::from_hf_json(&crate::tokenizer::byte_level_json(&[])).unwrap();
        let lists = |body: &str| {
            EmbeddingRequest::from_json(body)
                .and_then(|r| r.token_lists(&tok))
                .map_err(|e| e.error.param.unwrap_or_default())
        };
        assert_eq!(lists(r#"{"input": "ab"}"#), Ok(vec![vec![97, 98]]));
        assert_eq!(
            lists(r#"{"input": ["a", "b"]}"#),
            Ok(vec![vec![97], vec![98]])
        );
        assert_eq!(lists(r#"{"input": [5, 6]}"#), Ok(vec![vec![5, 6]]));
        assert_eq!(
            lists(r#"{"input": [[5], [6, 7]]}"#),
            Ok(vec![vec![5], vec![6, 7]])
        );
        for bad in [
            r#"{}"#,
            r#"{"input": ""}"#,
            r#"{"input": []}"#,
            r#"{"input": ["a", ""]}"#,
            r#"{"input": 5}"#,
        ] {
            assert_eq!(lists(bad), Err("input".to_string()), "{bad}");
        }
        let e = EmbeddingRequest::from_json(r#"{"input": "a", "encoding_format": "hex"}"#);
        assert_eq!(
            e.unwrap_err().error.param.as_deref(),
            Some("encoding_format")
        );
        let e = EmbeddingRequest::from_json(r#"{"input": "a", "pooling": "max"}"#);
        assert_eq!(e.unwrap_err().error.param.as_deref(), Some("pooling"));
        for n in [0, 65] {
            let r = EmbeddingRequest {
                dimensions: Some(n),
                ..Default::default()
            };
            let e = r.options(64).unwrap_err();
            assert_eq!(
                (e.error.param.as_deref(), e.status()),
                (Some("dimensions"), 400)
            );
        }
    }

    #[test]
    fn the_response_has_openais_shape() {
        let mut req = EmbeddingRequest::texts(vec!["a".into(), "b".into()]);
        let e = |v: Vec<f32>| Embedding {
            vector: v,
            tokens: 2,
        };
        let r = EmbeddingResponse::new(&req, vec![e(vec![1.0]), e(vec![0.5])], "local");
        let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"object": "list", "model": "local",
                "data": [{"object": "embedding", "index": 0, "embedding": [1.0]},
                         {"object": "embedding", "index": 1, "embedding": [0.5]}],
                "usage": {"prompt_tokens": 4, "total_tokens": 4}})
        );
        req.encoding_format = Some(EncodingFormat::Base64);
        req.model = Some("mine".into());
        let r = EmbeddingResponse::new(&req, vec![e(vec![1.0])], "local");
        assert_eq!(r.model, "mine");
        assert_eq!(
            r.data[0].embedding,
            EmbeddingVector::Base64("AACAPw==".into())
        );
    }
}
