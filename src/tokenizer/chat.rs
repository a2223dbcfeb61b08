//! Chat templates: the model's own Jinja template, rendered with `minijinja` the way HF
//! transformers' `apply_chat_template` renders it (jinja2 with `trim_blocks`,
//! `lstrip_blocks`, loop controls, `raise_exception`, a Python-`json.dumps` `tojson`, and
//! Python string methods such as `.startswith` / `.split` / `.strip` through
//! `minijinja-contrib`'s pycompat).

use super::pyjson;
use crate::error::{Error, Result};
use minijinja::value::{Kwargs, Value};
use minijinja::{Environment, ErrorKind};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

const NAME: &str = "chat_template";

/// One chat message. Fields left `None` are absent in the template (`is defined` is false).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// OpenAI-style tool calls: `[{"type": "function", "function": {"name", "arguments"}}]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Json>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Message {
        Message {
            role: role.into(),
            content: content.into(),
            ..Message::default()
        }
    }
    pub fn system(content: impl Into<String>) -> Message {
        Message::new("system", content)
    }
    pub fn user(content: impl Into<String>) -> Message {
        Message::new("user", content)
    }
    pub fn assistant(content: impl Into<String>) -> Message {
        Message::new("assistant", content)
    }
    pub fn tool(content: impl Into<String>) -> Message {
        Message::new("tool", content)
    }
}

/// Options of one rendering (the keyword arguments of `apply_chat_template`).
#[derive(Clone, Debug, Default)]
pub struct ChatOptions {
    /// End with the assistant's turn opener so the model answers next.
    pub add_generation_prompt: bool,
    /// Qwen3's switch; `None` leaves the variable undefined (the template's default).
    pub enable_thinking: Option<bool>,
    /// Tool (function) schemas, a JSON list; `None` renders as `tools = none`.
    pub tools: Option<Json>,
    pub bos_token: Option<String>,
    pub eos_token: Option<String>,
    /// Any other template variables.
    pub extra: Map<String, Json>,
}

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
}

fn template_error(e: minijinja::Error) -> Error {
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(&e);
    while let Some(s) = src {
        msg.push_str(&format!(": {s}"));
        src = s.source();
    }
    if let Some(d) = e
        .display_debug_info()
        .to_string()
        .lines()
        .find(|l| l.contains('>'))
    {
        msg.push_str(&format!(" (at {})", d.trim()));
    }
    Error::ChatTemplate(msg)
}

fn raise_exception(msg: String) -> std::result::Result<Value, minijinja::Error> {
    Err(minijinja::Error::new(
        ErrorKind::InvalidOperation,
        format!("the template raised: {msg}"),
    ))
}

/// HF's `tojson`: `json.dumps(x, ensure_ascii=False, indent=None, separators=None,
/// sort_keys=False)`.
fn tojson(value: Value, kwargs: Kwargs) -> std::result::Result<Value, minijinja::Error> {
    let bad = |what: &str| minijinja::Error::new(ErrorKind::InvalidOperation, what.to_string());
    let indent = match kwargs.get::<Option<Value>>("indent")? {
        None => None,
        Some(v) if v.is_none() => None,
        Some(v) => Some(
            usize::try_from(v.clone())
                .map_err(|_| bad("tojson: indent must be a non-negative integer"))?,
        ),
    };
    let separators = match kwargs.get::<Option<Vec<String>>>("separators")? {
        None => None,
        Some(v) if v.len() == 2 => Some((v[0].clone(), v[1].clone())),
        Some(_) => return Err(bad("tojson: separators must be a pair of strings")),
    };
    let opts = pyjson::Options {
        indent,
        ensure_ascii: kwargs.get::<Option<bool>>("ensure_ascii")?.unwrap_or(false),
        sort_keys: kwargs.get::<Option<bool>>("sort_keys")?.unwrap_or(false),
        separators,
    };
    kwargs.assert_all_used()?;
    let json = serde_json::to_value(&value)
        .map_err(|e| bad(&format!("tojson: value cannot be serialized: {e}")))?;
    Ok(Value::from(pyjson::dumps(&json, &opts)))
}

impl ChatTemplate {
    /// Compiles a template; a syntax error is `Error::ChatTemplate` with minijinja's message.
    pub fn new(source: &str) -> Result<ChatTemplate> {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_filter("tojson", tojson);
        env.add_template_owned(NAME, source.to_string())
            .map_err(template_error)?;
        Ok(ChatTemplate { env })
    }

    /// Renders the conversation. Anything the template does not support or raises is
    /// `Error::ChatTemplate` with the reason.
    pub fn render(&self, messages: &[Message], opts: &ChatOptions) -> Result<String> {
        let mut ctx = opts.extra.clone();
        let json = |v| serde_json::to_value(v).map_err(|e| Error::ChatTemplate(e.to_string()));
        ctx.insert("messages".into(), json(messages)?);
        ctx.insert(
            "add_generation_prompt".into(),
            opts.add_generation_prompt.into(),
        );
        ctx.insert("tools".into(), opts.tools.clone().unwrap_or(Json::Null));
        ctx.insert("documents".into(), Json::Null);
        if let Some(t) = opts.enable_thinking {
            ctx.insert("enable_thinking".into(), t.into());
        }
        if let Some(b) = &opts.bos_token {
            ctx.insert("bos_token".into(), b.clone().into());
        }
        if let Some(e) = &opts.eos_token {
            ctx.insert("eos_token".into(), e.clone().into());
        }
        let tmpl = self.env.get_template(NAME).map_err(template_error)?;
        tmpl.render(Value::from_serialize(&ctx))
            .map_err(template_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_string_methods_slicing_namespace_and_loop_controls_render() {
        let src = "{% set ns = namespace(n=0) %}{% for m in messages[::-1] %}\
                   {% if m.content.startswith('skip') %}{% continue %}{% endif %}\
                   {% set ns.n = ns.n + 1 %}[{{ m.content.strip().split(',')[0] | upper }}]\
                   {% endfor %}{{ ns.n }}";
        let t = ChatTemplate::new(src).unwrap();
        let msgs = [
            Message::user("  a,b "),
            Message::user("skip me"),
            Message::user("c"),
        ];
        assert_eq!(t.render(&msgs, &ChatOptions::default()).unwrap(), "[C][A]2");
    }

    #[test]
    fn raise_exception_and_syntax_errors_are_chat_template_errors() {
        let t = ChatTemplate::new("{{ raise_exception('no system role') }}").unwrap();
        let e = t.render(&[], &ChatOptions::default()).unwrap_err();
        assert!(
            matches!(&e, Error::ChatTemplate(m) if m.contains("no system role")),
            "{e}"
        );
        let e = ChatTemplate::new("{% for x in %}").err().unwrap();
        assert!(matches!(e, Error::ChatTemplate(_)), "{e}");
        let t = ChatTemplate::new("{{ messages | frobnicate }}").err();
        let e = match t {
            Some(e) => e,
            None => ChatTemplate::new("{{ messages | frobnicate }}")
                .unwrap()
                .render(&[], &ChatOptions::default())
                .unwrap_err(),
        };
        assert!(
            matches!(&e, Error::ChatTemplate(m) if m.contains("frobnicate")),
            "{e}"
        );
    }

    #[test]
    fn tojson_writes_like_python_json_dumps_and_tolerates_hf_kwargs() {
        let t = ChatTemplate::new(
            "{{ tools | tojson }}|{{ tools[0] | tojson(indent=2, ensure_ascii=False) }}",
        )
        .unwrap();
        let opts = ChatOptions {
            tools: Some(serde_json::json!([{"name": "f", "a": [1, "<é>"]}])),
            ..ChatOptions::default()
        };
        assert_eq!(
            t.render(&[], &opts).unwrap(),
            "[{\"name\": \"f\", \"a\": [1, \"<é>\"]}]|{\n  \"name\": \"f\",\n  \"a\": [\n    1,\n    \"<é>\"\n  ]\n}"
        );
    }
}
