//! Chat-template rendering of an arbitrary template with arbitrary messages: input = flags
//! byte, template, NUL, then NUL-separated role / content pairs. Whatever the template
//! does, rendering ends (the bounds of `ChatTemplate`) with text or `Error::ChatTemplate`.

use super::split_nul;
use pocketrt::tokenizer::{ChatOptions, ChatTemplate, Message};
use pocketrt::Error;

pub fn run(input: &[u8]) {
    let Some((&flags, data)) = input.split_first() else {
        return;
    };
    let (src, rest) = split_nul(data);
    let Ok(src) = std::str::from_utf8(src) else {
        return;
    };
    let Ok(template) = ChatTemplate::new(src) else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let mut fields = text.split('\0');
    let mut messages = Vec::new();
    while let (Some(role), Some(content)) = (fields.next(), fields.next()) {
        messages.push(Message::new(role, content));
    }
    let opts = ChatOptions {
        add_generation_prompt: flags & 1 != 0,
        enable_thinking: (flags & 2 != 0).then_some(flags & 4 != 0),
        tools: (flags & 8 != 0).then(|| {
            serde_json::json!([{"type": "function", "function": {"name": "get_weather",
                "description": "Weather in a city", "parameters": {"type": "object",
                "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])
        }),
        bos_token: (flags & 16 != 0).then(|| "<s>".into()),
        eos_token: (flags & 16 != 0).then(|| "</s>".into()),
        ..ChatOptions::default()
    };
    match template.render(&messages, &opts) {
        Ok(_) | Err(Error::ChatTemplate(_)) => {}
        Err(e) => panic!("not a ChatTemplate error: {e}"),
    }
}
