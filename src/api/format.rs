//! Structured output: `response_format` (OpenAI's `json_object` / `json_schema`) and
//! pocketrt's `grammar` (`lark` / `regex`) checked and compiled for the tokenizer before
//! any token is generated ([`crate::constrain`]); a schema or grammar llguidance rejects
//! is an `invalid_request_error` naming the field.

use super::error::ApiError;
use super::types::Params;
use crate::constrain::{Constraint, Grammar};
use crate::tokenizer::Tokenizer;
use serde_json::Value as Json;

/// The grammar a request asks for and the field it came from, or `None` (free text).
pub fn grammar(p: &Params) -> Result<Option<(Grammar, &'static str)>, ApiError> {
    let format = match &p.response_format {
        None => None,
        Some(f) => match f.kind.as_str() {
            "text" => None,
            "json_object" => Some((Grammar::JsonObject, "response_format")),
            "json_schema" => Some((
                schema(f.json_schema.as_ref())?,
                "response_format.json_schema.schema",
            )),
            other => {
                return Err(ApiError::invalid(
                    "response_format.type",
                    format!(
                        "unknown response_format type {other:?} (text, json_object or json_schema)"
                    ),
                ))
            }
        },
    };
    let grammar = match &p.grammar {
        None => None,
        Some(g) => Some(match g.kind.as_str() {
            "lark" => (Grammar::Lark(g.value.clone()), "grammar.value"),
            "regex" => (Grammar::Regex(g.value.clone()), "grammar.value"),
            other => {
                return Err(ApiError::invalid(
                    "grammar.type",
                    format!("unknown grammar type {other:?} (lark or regex)"),
                ))
            }
        }),
    };
    match (format, grammar) {
        (Some(_), Some(_)) => Err(ApiError::invalid(
            "grammar",
            "grammar and a JSON response_format cannot both be given",
        )),
        (f, g) => Ok(f.or(g)),
    }
}

/// `json_schema: {name, schema, strict}`: the schema (`strict` changes nothing: the
/// output always follows the schema).
fn schema(json_schema: Option<&Json>) -> Result<Grammar, ApiError> {
    let param = "response_format.json_schema";
    let Some(Json::Object(js)) = json_schema else {
        return Err(ApiError::invalid(
            param,
            "response_format json_schema needs a json_schema object with a schema",
        ));
    };
    match js.get("schema") {
        Some(s @ (Json::Object(_) | Json::Bool(_))) => Ok(Grammar::JsonSchema(s.clone())),
        Some(_) => Err(ApiError::invalid(
            "response_format.json_schema.schema",
            "the schema must be a JSON object",
        )),
        // OpenAI's default: any JSON object.
        None => Ok(Grammar::JsonObject),
    }
}

/// The request's constraint compiled for `tokenizer` (its trie built once and kept).
pub fn constraint(p: &Params, tokenizer: &Tokenizer) -> Result<Option<Constraint>, ApiError> {
    let Some((grammar, param)) = grammar(p)? else {
        return Ok(None);
    };
    let compiled = tokenizer
        .token_trie(&[])
        .and_then(|trie| trie.constrain(&grammar));
    compiled.map(Some).map_err(|e| {
        let why = match e {
            crate::error::Error::InvalidArgument(m) => m,
            other => other.to_string(),
        };
        ApiError::invalid(param, format!("{param} is not a valid grammar: {why}"))
    })
}
