//! Chat templates: the model's own Jinja template, rendered with `minijinja` the way HF
//! transformers' `apply_chat_template` renders it (jinja2 with `trim_blocks`,
//! `lstrip_blocks`, loop controls, `raise_exception`, a Python-`json.dumps` `tojson`, and
//! Python string methods such as `.startswith` / `.split` / `.strip` through
//! `minijinja-contrib`'s pycompat).
//!
//! A model's template comes from a stranger, so one rendering is bounded: at most
//! [`TEMPLATE_FUEL`] template instructions, [`TEMPLATE_RECURSION`] levels of nesting and
//! [`TEMPLATE_OUTPUT`] bytes written (the result and everything printed into macro results
//! and `{% set %}` blocks); past a bound it is `Error::ChatTemplate` naming that bound.
//! Not bounded, for minijinja has no hook there: values built without being printed. One
//! instruction may make a 100 MB string (`'x' * n`, minijinja's own cap) or join two
//! (`~`, `+`), so a loop doubling a namespace string still runs out of memory.

use super::pyjson;
use crate::error::{Error, Result};
use minijinja::value::{Kwargs, Object, Value};
use minijinja::{AutoEscape, Environment, ErrorKind, Output, State};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};

const NAME: &str = "chat_template";

/// Template instructions one rendering may execute (minijinja's fuel). The real Qwen3
/// template takes ~75 per message (300 per agent turn: user, assistant with reasoning and a
/// tool call, tool result, answer): 1,000 messages with tools take 75 K, so 1 M renders
/// ~13 K messages (more text than any context holds), while a runaway loop stops in
/// ~0.1 s (~0.4 s on a loaded 2-core machine).
pub const TEMPLATE_FUEL: u64 = 1_000_000;
/// Nesting depth (minijinja counts a loop or `if` as 1, a macro call as ~5: this allows
/// ~35 nested macro calls). Real templates nest a handful of levels (a recursive macro
/// rendering a JSON schema: its depth), and 200 stays well inside a 1 MiB (wasm) stack.
pub const TEMPLATE_RECURSION: usize = 200;
/// Bytes one rendering may write. A 128K-token prompt is well under 1 MiB of text.
pub const TEMPLATE_OUTPUT: usize = 8 << 20;
/// Longest `tojson(indent=…)`: Python allows any, but a huge one is only a way to make
/// gigabytes of spaces.
const MAX_JSON_INDENT: usize = 64;

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

/// The bytes written so far in one rendering, shared by its macro calls (a render temp).
#[derive(Debug, Default)]
struct Written(AtomicUsize);
impl Object for Written {}
const WRITTEN: &str = "pocketrt.written";

fn output_bound() -> String {
    format!("the template wrote more than its output bound ({TEMPLATE_OUTPUT} bytes)")
}

/// Which bound an error from minijinja hit, if any.
fn bound_hit(e: &minijinja::Error) -> Option<String> {
    if e.kind() == ErrorKind::OutOfFuel {
        return Some(format!(
            "the template ran past its fuel bound ({TEMPLATE_FUEL} instructions)"
        ));
    }
    let detail = e.detail().unwrap_or_default();
    if detail.contains("recursion limit exceeded") {
        return Some(format!(
            "the template nested past its recursion bound ({TEMPLATE_RECURSION})"
        ));
    }
    (detail == output_bound()).then(output_bound)
}

/// minijinja's default formatter (`{{ value }}`), counting what it writes against
/// [`TEMPLATE_OUTPUT`]. It sees every print, also inside captures (macro results, `{% set
/// %}` blocks), which the final writer does not: a macro returning its result twice
/// doubles without ever reaching the output.
fn bounded_formatter(
    out: &mut Output,
    state: &State,
    value: &Value,
) -> std::result::Result<(), minijinja::Error> {
    struct Capped<'a> {
        text: String,
        written: &'a Written,
    }
    impl std::fmt::Write for Capped<'_> {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            let total = self.written.0.fetch_add(s.len(), Ordering::Relaxed) + s.len();
            if total > TEMPLATE_OUTPUT {
                return Err(std::fmt::Error);
            }
            self.text.push_str(s);
            Ok(())
        }
    }
    let written = state.get_or_set_temp_object(WRITTEN, Written::default);
    let mut capped = Capped {
        text: String::new(),
        written: &written,
    };
    if write!(capped, "{value}").is_err() {
        return Err(minijinja::Error::new(
            ErrorKind::InvalidOperation,
            output_bound(),
        ));
    }
    match state.auto_escape() {
        AutoEscape::None => out.write_str(&capped.text).map_err(minijinja::Error::from),
        // `{% autoescape %}` blocks: the escaped text is at most a few times as long.
        _ => minijinja::escape_formatter(out, state, value),
    }
}

/// The final output, refusing to grow past [`TEMPLATE_OUTPUT`] (raw template text between
/// tags does not pass through the formatter).
struct CappedOutput {
    bytes: Vec<u8>,
    over: bool,
}

impl std::io::Write for CappedOutput {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() + b.len() > TEMPLATE_OUTPUT {
            self.over = true;
            return Err(std::io::Error::other(output_bound()));
        }
        self.bytes.extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The error as `Error::ChatTemplate`: minijinja's message and causes, and the template
/// line it points at (quoted from `source`).
fn template_error(e: minijinja::Error, source: &str) -> Error {
    if let Some(bound) = bound_hit(&e) {
        return Error::ChatTemplate(bound);
    }
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(&e);
    while let Some(s) = src {
        msg.push_str(&format!(": {s}"));
        src = s.source();
    }
    // Not minijinja's `display_debug_info`: found by fuzzing, it panics (2.24, debug.rs:
    // an underflow, then a `repeat` of ~2^64) on a span ending before it starts.
    let line = e
        .line()
        .and_then(|n| Some((n, source.lines().nth(n.checked_sub(1)?)?)));
    if let Some((n, text)) = line {
        msg.push_str(&format!(" (at line {n}: {})", text.trim()));
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
                .ok()
                .filter(|&n| n <= MAX_JSON_INDENT)
                .ok_or_else(|| bad("tojson: indent must be an integer from 0 to 64"))?,
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
        env.set_fuel(Some(TEMPLATE_FUEL));
        env.set_recursion_limit(TEMPLATE_RECURSION);
        env.set_formatter(bounded_formatter);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_filter("tojson", tojson);
        env.add_template_owned(NAME, source.to_string())
            .map_err(|e| template_error(e, source))?;
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
        let tmpl = self
            .env
            .get_template(NAME)
            .map_err(|e| template_error(e, ""))?;
        let mut out = CappedOutput {
            bytes: Vec::new(),
            over: false,
        };
        // minijinja 2.24 panics on some inputs (a reverse slice of an empty list or string,
        // `messages[::-1]` with no messages: ops.rs indexes past the end); natively that is a
        // ChatTemplate error. The web build aborts on panics, so there it still ends the
        // module (needs a minijinja fix).
        let rendered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            tmpl.render_captured_to(Value::from_serialize(&ctx), &mut out)
                .map(drop)
        }))
        .map_err(|panic| {
            let msg = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("");
            Error::ChatTemplate(format!(
                "the template engine failed (a minijinja bug): {msg}"
            ))
        })?;
        match rendered {
            Ok(()) => String::from_utf8(out.bytes).map_err(|e| Error::ChatTemplate(e.to_string())),
            Err(_) if out.over => Err(Error::ChatTemplate(output_bound())),
            Err(e) => Err(template_error(e, tmpl.source())),
        }
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

    /// Renders a hostile template: it must stop with the bound named in `want`, fast.
    fn assert_bounded(src: &str, want: &str) {
        let t = ChatTemplate::new(src).unwrap();
        let start = std::time::Instant::now();
        let e = t
            .render(&[Message::user("hi")], &ChatOptions::default())
            .unwrap_err();
        let took = start.elapsed();
        assert!(
            matches!(&e, Error::ChatTemplate(m) if m.contains(want)),
            "{src}: {e}"
        );
        assert!(took.as_secs_f64() < 1.0, "{src}: took {took:?}");
    }

    #[test]
    fn hostile_templates_end_at_a_named_bound_within_a_second() {
        // A loop of 10^10 iterations.
        assert_bounded(
            "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
            "fuel bound",
        );
        // Output doubling through a macro's result, never printed at the top.
        assert_bounded(
            "{% macro f(n) %}{% if n %}{% set x = f(n - 1) %}{{ x }}{{ x }}{% else %}ab\
             {% endif %}{% endmacro %}{% set y = f(30) %}",
            "output bound",
        );
        // Plain output: 10^13 bytes of raw text.
        assert_bounded(
            &format!(
                "{{% for a in range(100000) %}}{{% for b in range(100000) %}}{}\
                 {{% endfor %}}{{% endfor %}}",
                "x".repeat(1000)
            ),
            "output bound",
        );
        // A macro calling itself, and a recursive loop over itself.
        assert_bounded(
            "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
            "recursion bound",
        );
        assert_bounded(
            "{% for m in messages recursive %}{{ loop(messages) }}{% endfor %}",
            "recursion bound",
        );
    }

    /// Found by fuzzing (chat_template): minijinja panics reversing an empty sequence.
    #[test]
    fn reverse_slice_of_nothing_is_a_chat_template_error_not_a_panic() {
        for src in [
            "{% for m in messages[::-1] %}{% endfor %}",
            "{{ ''[::-1] }}",
        ] {
            let e = ChatTemplate::new(src)
                .unwrap()
                .render(&[], &ChatOptions::default())
                .unwrap_err();
            assert!(
                matches!(&e, Error::ChatTemplate(m) if m.contains("minijinja")),
                "{e}"
            );
        }
        // The same slice of something works.
        let t = ChatTemplate::new("{% for m in messages[::-1] %}{{ m.content }}{% endfor %}");
        let msgs = [Message::user("a"), Message::user("b")];
        assert_eq!(
            t.unwrap().render(&msgs, &ChatOptions::default()).unwrap(),
            "ba"
        );
    }

    /// Found by fuzzing (chat_template): quoting where this template fails (a `for` with
    /// no loop variable) made minijinja's debug printer panic; the error names the line.
    #[test]
    fn error_in_a_template_with_odd_spans_is_quoted_without_panicking() {
        let src = "{{ bos_tokexceptionn }}{% for  in  messages[::-1] %}{{ m.content.split('}}}}}}}}}}}}}}}}}}}}}}}}}}}} ')[0] | upper }}{{ loop.index }}{% if loop.last %}{{ raise_.xception('x') }}{% endif %}{% endfor %}";
        let content = "Hi <t}}}}}}}}}}}}g}}}}}}}}}}}}}} ')[0] | upper }}{{ loop.index }}{%\u{fffd}if loop.last %}{{ raise_.xception('x') }}{% endif %}{% en\u{fffd}for %}";
        let msgs = [
            Message::system("Be brief."),
            Message::new("usGGGGGGGGGGGGGG", content),
            Message::system("Be brief."),
            Message::new(
                "userGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGG",
                "Hi <t}}}}}}}}}}}}g}}",
            ),
        ];
        let opts = ChatOptions {
            add_generation_prompt: true,
            bos_token: Some("<s>".into()),
            eos_token: Some("</s>".into()),
            ..ChatOptions::default()
        };
        let e = ChatTemplate::new(src)
            .unwrap()
            .render(&msgs, &opts)
            .unwrap_err();
        assert!(
            matches!(&e, Error::ChatTemplate(m) if m.contains("unpack") && m.contains("(at line 1: {{ bos_tok")),
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
        // A gigabyte of indent per line is refused.
        let t = ChatTemplate::new("{{ tools | tojson(indent=1000000000) }}").unwrap();
        let e = t.render(&[], &opts).unwrap_err();
        assert!(
            matches!(&e, Error::ChatTemplate(m) if m.contains("indent")),
            "{e}"
        );
    }
}
