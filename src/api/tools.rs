//! Qwen's tool calls: the model writes `<tool_call>\n{"name": …, "arguments": {…}}\n
//! </tool_call>` (one block per call); they become the reply's `tool_calls`, with an id
//! (`call_…`), the function name and the arguments as JSON text. Streamed as OpenAI
//! streams them: once the name is known a first delta with id and name, then fragments of
//! the arguments as they arrive (held back only where they could be the block's end).
//! A block that is not such a JSON object is returned as text, as written.

use super::ids;
use super::response::{FunctionCall, ToolCall};
use super::scan::take_until;

const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";

/// One decided piece of the reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolEvent {
    Text(String),
    /// A call begins (its first delta).
    Start {
        index: u32,
        id: String,
        name: String,
    },
    /// More of a call's arguments.
    Args {
        index: u32,
        text: String,
    },
}

/// A call being written.
#[derive(Clone, Debug, Default)]
struct Open {
    /// The block's text so far (up to a possible start of `</tool_call>`).
    body: String,
    /// What might be `</tool_call>`.
    pending: String,
    /// Where the arguments start in `body`, once the name is known.
    args_start: Option<usize>,
    /// Bytes of the arguments already streamed.
    emitted: usize,
}

/// Parses tool calls out of the reply's content as it streams.
#[derive(Clone, Debug)]
pub struct ToolCallParser {
    enabled: bool,
    seed: u64,
    held: String,
    open: Option<Open>,
    calls: Vec<ToolCall>,
}

/// How far the start of a block is understood.
enum Head {
    /// `{"name": "…", "arguments":` read; the arguments start at this byte.
    Args { name: String, at: usize },
    /// Too little text yet.
    Undecided,
    /// Not in that order (the whole block is parsed at its end instead).
    Other,
}

impl ToolCallParser {
    /// A parser; `enabled` false passes all text through (no tools in the request).
    /// `seed` makes the call ids.
    pub fn new(enabled: bool, seed: u64) -> ToolCallParser {
        ToolCallParser {
            enabled,
            seed,
            held: String::new(),
            open: None,
            calls: vec![],
        }
    }

    /// The calls so far (their arguments as streamed).
    pub fn calls(&self) -> &[ToolCall] {
        &self.calls
    }

    /// Take the next piece of content; returns the decided events.
    pub fn push(&mut self, text: &str) -> Vec<ToolEvent> {
        let mut out = vec![];
        if !self.enabled {
            if !text.is_empty() {
                out.push(ToolEvent::Text(text.to_string()));
            }
            return out;
        }
        let mut text = text.to_string();
        loop {
            match &mut self.open {
                None => {
                    self.held.push_str(&text);
                    match take_until(&mut self.held, OPEN) {
                        Ok((before, after)) => {
                            self.text(&mut out, before.trim_end());
                            self.open = Some(Open::default());
                            text = after;
                            continue;
                        }
                        Err(release) => {
                            // Trailing whitespace waits: it is dropped before a call.
                            let visible = release.trim_end();
                            self.held.insert_str(0, &release[visible.len()..]);
                            self.text(&mut out, visible);
                        }
                    }
                }
                Some(open) => {
                    open.pending.push_str(&text);
                    match take_until(&mut open.pending, CLOSE) {
                        Ok((before, after)) => {
                            open.body.push_str(&before);
                            let open = self.open.take().expect("open");
                            self.close(&mut out, open);
                            text = after;
                            continue;
                        }
                        Err(release) => {
                            open.body.push_str(&release);
                            self.stream_args(&mut out, false);
                        }
                    }
                }
            }
            return out;
        }
    }

    /// The reply ended: what was held; an unfinished call keeps what it has.
    pub fn finish(&mut self) -> Vec<ToolEvent> {
        let mut out = vec![];
        match self.open.take() {
            None => {
                let held = std::mem::take(&mut self.held);
                let rest = if self.calls.is_empty() {
                    held.as_str()
                } else {
                    held.trim()
                };
                self.text(&mut out, rest);
            }
            Some(mut open) => {
                let pending = std::mem::take(&mut open.pending);
                open.body.push_str(&pending);
                let whole = serde_json::from_str::<serde_json::Value>(open.body.trim()).is_ok();
                if whole {
                    self.close(&mut out, open);
                } else if open.args_start.is_some() {
                    self.open = Some(open);
                    self.stream_args(&mut out, true);
                    self.open = None;
                } else {
                    self.text(&mut out, &format!("{OPEN}{}", open.body));
                }
            }
        }
        out
    }

    fn text(&self, out: &mut Vec<ToolEvent>, text: &str) {
        let text = if self.calls.is_empty() {
            text
        } else {
            text.trim_start()
        };
        if !text.is_empty() {
            out.push(ToolEvent::Text(text.to_string()));
        }
    }

    fn start(&mut self, out: &mut Vec<ToolEvent>, name: String) -> u32 {
        let index = self.calls.len() as u32;
        let id = ids::random_id("call_", self.seed.wrapping_add(u64::from(index)));
        self.calls.push(ToolCall {
            id: id.clone(),
            kind: "function".into(),
            function: FunctionCall {
                name: name.clone(),
                arguments: String::new(),
            },
        });
        out.push(ToolEvent::Start { index, id, name });
        index
    }

    fn args(&mut self, out: &mut Vec<ToolEvent>, index: u32, text: &str) {
        if !text.is_empty() {
            self.calls[index as usize].function.arguments.push_str(text);
            out.push(ToolEvent::Args {
                index,
                text: text.to_string(),
            });
        }
    }

    /// Stream the open call's arguments: up to its last `}` (which may close the block's
    /// object) or, at `last`, all of them.
    fn stream_args(&mut self, out: &mut Vec<ToolEvent>, last: bool) {
        let Some(open) = &mut self.open else { return };
        if open.args_start.is_none() {
            match head(&open.body) {
                Head::Args { name, at } => {
                    open.args_start = Some(at);
                    self.start(out, name);
                }
                Head::Undecided | Head::Other => return,
            }
        }
        let open = self.open.as_mut().expect("open");
        let args = &open.body[open.args_start.expect("started")..];
        let end = match (last, args.rfind('}')) {
            (true, _) => args.trim_end().len(),
            (false, Some(brace)) => args[..brace].trim_end().len(),
            (false, None) => args.len(),
        };
        if end > open.emitted {
            let text = args[open.emitted..end].to_string();
            open.emitted = end;
            let index = self.calls.len() as u32 - 1;
            self.args(out, index, &text);
        }
    }

    /// The block ended: finish its streamed arguments, or parse it whole.
    fn close(&mut self, out: &mut Vec<ToolEvent>, mut open: Open) {
        if open.args_start.is_none() {
            if let Head::Args { name, at } = head(&open.body) {
                open.args_start = Some(at);
                self.start(out, name);
            }
        }
        if let Some(at) = open.args_start {
            let args = &open.body[at..];
            let end = args.rfind('}').unwrap_or(args.len());
            let args = args[..end].trim_end();
            let index = self.calls.len() as u32 - 1;
            if args.len() > open.emitted {
                self.args(out, index, &args[open.emitted..]);
            }
            return;
        }
        let parsed: Option<serde_json::Value> = serde_json::from_str(open.body.trim()).ok();
        let name = parsed.as_ref().and_then(|v| v["name"].as_str());
        match (name, parsed.as_ref()) {
            (Some(name), Some(v)) => {
                let arguments = match &v["arguments"] {
                    serde_json::Value::String(s) => s.clone(),
                    serde_json::Value::Null => "{}".into(),
                    other => other.to_string(),
                };
                let index = self.start(out, name.to_string());
                self.args(out, index, &arguments);
            }
            _ => {
                let raw = format!("{OPEN}{}{CLOSE}", open.body);
                self.text(out, &raw);
            }
        }
    }
}

/// Read `{"name": "…", "arguments":` at the start of a block.
fn head(s: &str) -> Head {
    let mut i = 0;
    let step = |i: &mut usize, lit: &str| -> Result<(), Head> {
        let rest = s[*i..].trim_start();
        *i = s.len() - rest.len();
        if rest.starts_with(lit) {
            *i += lit.len();
            Ok(())
        } else if lit.starts_with(rest) {
            Err(Head::Undecided)
        } else {
            Err(Head::Other)
        }
    };
    let name = (|| {
        step(&mut i, "{")?;
        step(&mut i, "\"name\"")?;
        step(&mut i, ":")?;
        step(&mut i, "\"")?;
        let start = i - 1;
        let close = string_end(&s[i..]).ok_or(Head::Undecided)?;
        i += close + 1;
        let name: String = serde_json::from_str(&s[start..i]).map_err(|_| Head::Other)?;
        step(&mut i, ",")?;
        step(&mut i, "\"arguments\"")?;
        step(&mut i, ":")?;
        Ok(name)
    })();
    match name {
        Err(h) => h,
        Ok(_) if s[i..].trim_start().is_empty() => Head::Undecided,
        Ok(name) => Head::Args {
            name,
            at: s.len() - s[i..].trim_start().len(),
        },
    }
}

/// The byte index of the `"` that ends a JSON string whose opening quote came before `s`.
fn string_end(s: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return Some(i),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests;
