//! The context policy (`context_overflow`): a prompt that leaves no room for the reply is
//! an error naming the context length (`"error"`, the default), or is shortened
//! (`"truncate"`): a chat keeps its system messages and its newest turns whole and drops
//! the oldest turns (a turn: a user message and the replies and tool results after it);
//! a completion keeps its newest tokens. The dropped part is the oldest, so the KV cache
//! still holds the kept system prefix for the next request.

use super::error::ApiError;
use super::types::ContextPolicy;
use crate::tokenizer::Message;

/// A prompt that fits: its rendered text, tokens and how many messages were dropped.
#[derive(Clone, Debug)]
pub struct Fitted {
    pub text: String,
    pub tokens: Vec<u32>,
    pub dropped: usize,
}

/// Render `messages` with `encode` (text and tokens) so that `room` tokens of reply fit
/// after them in `context` positions.
pub fn fit_chat(
    messages: &[Message],
    room: usize,
    context: usize,
    policy: ContextPolicy,
    encode: impl Fn(&[Message]) -> Result<(String, Vec<u32>), ApiError>,
) -> Result<Fitted, ApiError> {
    let system = messages.iter().take_while(|m| m.role == "system").count();
    let mut start = system;
    loop {
        let kept: Vec<Message> = messages[..system]
            .iter()
            .chain(&messages[start..])
            .cloned()
            .collect();
        let (text, tokens) = encode(&kept)?;
        if tokens.len() + room <= context {
            return Ok(Fitted {
                text,
                tokens,
                dropped: start - system,
            });
        }
        let next = (start + 1..messages.len()).find(|&i| messages[i].role == "user");
        match (policy, next) {
            (ContextPolicy::Truncate, Some(next)) => start = next,
            _ => return Err(ApiError::context_length(tokens.len(), room, context)),
        }
    }
}

/// The completion prompt `tokens` fitted so that `room` tokens of reply follow.
pub fn fit_tokens(
    mut tokens: Vec<u32>,
    room: usize,
    context: usize,
    policy: ContextPolicy,
) -> Result<Vec<u32>, ApiError> {
    if tokens.len() + room <= context {
        return Ok(tokens);
    }
    let keep = context.saturating_sub(room);
    if policy == ContextPolicy::Error || keep == 0 {
        return Err(ApiError::context_length(tokens.len(), room, context));
    }
    tokens.drain(..tokens.len() - keep);
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One "token" per character of each message's content.
    fn encode(m: &[Message]) -> Result<(String, Vec<u32>), ApiError> {
        let text: String = m.iter().map(|m| m.content.as_str()).collect();
        Ok((text.clone(), text.chars().map(|c| c as u32).collect()))
    }

    fn conversation() -> Vec<Message> {
        vec![
            Message::system("SS"),
            Message::user("u1u1"),
            Message::assistant("a1a1"),
            Message::user("u2u2"),
            Message::assistant("a2"),
            Message::tool("t2"),
            Message::user("u3"),
        ]
    }

    #[test]
    fn truncate_drops_whole_oldest_turns_and_keeps_the_system_message() {
        let m = conversation();
        let all = fit_chat(&m, 4, 100, ContextPolicy::Truncate, encode).unwrap();
        assert_eq!(
            (all.dropped, all.text.as_str()),
            (0, "SSu1u1a1a1u2u2a2t2u3")
        );
        // 20 characters + 4 of room > 18: the first turn (u1, a1) goes.
        let cut = fit_chat(&m, 4, 18, ContextPolicy::Truncate, encode).unwrap();
        assert_eq!((cut.dropped, cut.text.as_str()), (2, "SSu2u2a2t2u3"));
        let cut = fit_chat(&m, 4, 10, ContextPolicy::Truncate, encode).unwrap();
        assert_eq!((cut.dropped, cut.text.as_str()), (5, "SSu3"));
    }

    #[test]
    fn what_cannot_fit_is_a_context_length_error() {
        let m = conversation();
        let e = fit_chat(&m, 4, 18, ContextPolicy::Error, encode).unwrap_err();
        assert_eq!(e.error.code.as_deref(), Some("context_length_exceeded"));
        assert!(
            e.error.message.contains("maximum context length is 18"),
            "{e}"
        );
        // The newest turn alone does not fit.
        let e = fit_chat(&m, 4, 7, ContextPolicy::Truncate, encode).unwrap_err();
        assert_eq!(e.error.param.as_deref(), Some("messages"));
    }

    #[test]
    fn completions_keep_their_newest_tokens() {
        let t: Vec<u32> = (0..10).collect();
        assert_eq!(
            fit_tokens(t.clone(), 2, 8, ContextPolicy::Truncate).unwrap(),
            (4..10).collect::<Vec<_>>()
        );
        assert!(fit_tokens(t.clone(), 2, 8, ContextPolicy::Error).is_err());
        assert_eq!(
            fit_tokens(t, 2, 12, ContextPolicy::Error).unwrap().len(),
            10
        );
    }
}
