//! A chat request's messages, tools and template switches checked and turned into what
//! the model's chat template renders ([`Message`], [`ChatOptions`]).

use super::error::ApiError;
use super::types::{ChatCompletionRequest, ChatMessage, Content, Role, ToolChoice};
use crate::tokenizer::{ChatOptions, Message};
use serde_json::{json, Value as Json};

/// The template's messages for the request's, checked.
pub fn template_messages(msgs: &[ChatMessage]) -> Result<Vec<Message>, ApiError> {
    if msgs.is_empty() {
        return Err(ApiError::invalid(
            "messages",
            "messages must hold at least one message",
        ));
    }
    msgs.iter()
        .enumerate()
        .map(|(i, m)| template_message(i, m))
        .collect()
}

fn template_message(i: usize, m: &ChatMessage) -> Result<Message, ApiError> {
    let content = match &m.content {
        Some(Content::Text(t)) => Some(t.clone()),
        Some(Content::Parts(parts)) => {
            let mut texts = vec![];
            for (j, p) in parts.iter().enumerate() {
                match (p.kind.as_str(), &p.text) {
                    ("text", Some(t)) => texts.push(t.as_str()),
                    ("text", None) => {
                        return Err(ApiError::invalid(
                            &format!("messages[{i}].content[{j}].text"),
                            "a text part needs its text",
                        ))
                    }
                    (kind, _) => {
                        return Err(ApiError::unsupported(
                            &format!("messages[{i}].content[{j}].type"),
                            format!(
                                "content parts of type {kind:?} are not supported (only \"text\")"
                            ),
                        ))
                    }
                }
            }
            Some(texts.join("\n"))
        }
        None => None,
    };
    let has_calls = m.tool_calls.as_ref().is_some_and(|c| !c.is_empty());
    if content.is_none() && !(m.role == Role::Assistant && has_calls) {
        return Err(ApiError::invalid(
            &format!("messages[{i}].content"),
            format!("a {} message needs content", m.role.template_name()),
        ));
    }
    if m.tool_calls.is_some() && m.role != Role::Assistant {
        return Err(ApiError::invalid(
            &format!("messages[{i}].tool_calls"),
            "only assistant messages have tool_calls",
        ));
    }
    let tool_calls = m.tool_calls.as_ref().map(|calls| {
        Json::Array(
            calls
                .iter()
                .map(|c| {
                    let mut call = json!({
                        "type": c.kind.as_deref().unwrap_or("function"),
                        "function": {"name": c.function.name, "arguments": c.function.arguments},
                    });
                    if let Some(id) = &c.id {
                        call["id"] = id.clone().into();
                    }
                    call
                })
                .collect(),
        )
    });
    Ok(Message {
        role: m.role.template_name().into(),
        content: content.unwrap_or_default(),
        reasoning_content: m.reasoning_content.clone(),
        tool_calls,
        name: m.name.clone(),
        tool_call_id: m.tool_call_id.clone(),
    })
}

/// The template options of a request: the generation prompt, `chat_template_kwargs`
/// (`enable_thinking` left to the template unless given) and the tools it may call.
pub fn chat_options(req: &ChatCompletionRequest) -> Result<ChatOptions, ApiError> {
    let mut opts = ChatOptions {
        add_generation_prompt: true,
        ..ChatOptions::default()
    };
    for (key, value) in req.chat_template_kwargs.iter().flatten() {
        if key == "enable_thinking" {
            opts.enable_thinking = Some(value.as_bool().ok_or_else(|| {
                ApiError::invalid(
                    "chat_template_kwargs.enable_thinking",
                    "enable_thinking must be true or false",
                )
            })?);
        } else {
            opts.extra.insert(key.clone(), value.clone());
        }
    }
    opts.tools = tools(req)?;
    Ok(opts)
}

/// The tools the template is given: none with `tool_choice: "none"`, only the named
/// one with a named choice. (`"required"` is passed like `"auto"`: the template has no
/// way to force a call.)
fn tools(req: &ChatCompletionRequest) -> Result<Option<Json>, ApiError> {
    let tools = req.tools.as_deref().unwrap_or_default();
    for (i, t) in tools.iter().enumerate() {
        if t["type"] != "function" {
            return Err(ApiError::invalid(
                &format!("tools[{i}].type"),
                "only tools of type \"function\" are supported",
            ));
        }
        if !t["function"]["name"].is_string() {
            return Err(ApiError::invalid(
                &format!("tools[{i}].function.name"),
                "a function tool needs a name",
            ));
        }
    }
    let chosen: Vec<Json> = match &req.tool_choice {
        None => tools.to_vec(),
        Some(ToolChoice::Mode(m)) => match m.as_str() {
            "none" => vec![],
            "auto" | "required" => tools.to_vec(),
            other => {
                return Err(ApiError::invalid(
                    "tool_choice",
                    format!(
                    "tool_choice {other:?}: must be \"none\", \"auto\", \"required\" or a function"
                ),
                ))
            }
        },
        Some(ToolChoice::Function { function }) => {
            let named: Vec<Json> = tools
                .iter()
                .filter(|t| t["function"]["name"] == function.name.as_str())
                .cloned()
                .collect();
            if named.is_empty() {
                return Err(ApiError::invalid(
                    "tool_choice",
                    format!(
                        "tool_choice names {:?}, which is not in tools",
                        function.name
                    ),
                ));
            }
            named
        }
    };
    Ok((!chosen.is_empty()).then_some(Json::Array(chosen)))
}
