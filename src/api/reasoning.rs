//! Qwen3-style reasoning: text between `<think>` and `</think>` is the reply's
//! `reasoning_content`, streamed as its own delta field and never mixed into `content`.
//! The block counts only at the start of the reply (after whitespace), or from the first
//! token when the prompt itself ended by opening it (templates that force thinking).
//! The newlines Qwen writes inside and after the tags are not part of either text.

use super::scan::take_until;

const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";

/// One piece of the reply, sorted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Part {
    Reasoning(String),
    Content(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Nothing but whitespace yet: a `<think>` may still open.
    Start,
    Thinking,
    Answer,
}

/// Splits the reply into reasoning and content as it streams.
#[derive(Clone, Debug)]
pub struct ReasoningSplit {
    state: State,
    held: String,
    /// Drop whitespace until the next visible character (after a tag).
    skip_space: bool,
}

impl ReasoningSplit {
    /// A splitter for a reply to `prompt` (the rendered text): thinking from the first
    /// token when the prompt ends with an open `<think>`.
    pub fn new(prompt: &str) -> ReasoningSplit {
        let opened = prompt.trim_end().ends_with(OPEN);
        ReasoningSplit {
            state: if opened {
                State::Thinking
            } else {
                State::Start
            },
            held: String::new(),
            skip_space: opened,
        }
    }

    /// Take the next piece of reply text; returns the parts that are decided.
    pub fn push(&mut self, text: &str) -> Vec<Part> {
        let mut out = vec![];
        self.held.push_str(text);
        loop {
            match self.state {
                State::Start => {
                    let trimmed = self.held.trim_start();
                    if let Some(rest) = trimmed.strip_prefix(OPEN) {
                        self.held = rest.to_string();
                        self.state = State::Thinking;
                        self.skip_space = true;
                        continue;
                    }
                    if !OPEN.starts_with(trimmed) {
                        self.state = State::Answer;
                        continue;
                    }
                }
                State::Thinking => match take_until(&mut self.held, CLOSE) {
                    Ok((before, after)) => {
                        self.emit(&mut out, before, Part::Reasoning);
                        self.held = after;
                        self.state = State::Answer;
                        self.skip_space = true;
                        continue;
                    }
                    Err(release) => self.emit(&mut out, release, Part::Reasoning),
                },
                State::Answer => {
                    let text = std::mem::take(&mut self.held);
                    self.emit(&mut out, text, Part::Content);
                }
            }
            return out;
        }
    }

    /// The reply ended: what was held (an unclosed block stays reasoning).
    pub fn finish(&mut self) -> Vec<Part> {
        let mut out = vec![];
        let text = std::mem::take(&mut self.held);
        match self.state {
            State::Thinking => self.emit(&mut out, text, Part::Reasoning),
            State::Start | State::Answer => self.emit(&mut out, text, Part::Content),
        }
        out
    }

    fn emit(&mut self, out: &mut Vec<Part>, text: String, part: fn(String) -> Part) {
        let text = if self.skip_space {
            let t = text.trim_start();
            self.skip_space = t.is_empty();
            t.to_string()
        } else {
            text
        };
        if !text.is_empty() {
            out.push(part(text));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(prompt: &str, pieces: &[&str]) -> (String, String, Vec<Part>) {
        let mut s = ReasoningSplit::new(prompt);
        let mut parts = vec![];
        for p in pieces {
            parts.extend(s.push(p));
        }
        parts.extend(s.finish());
        let (mut r, mut c) = (String::new(), String::new());
        for p in &parts {
            match p {
                Part::Reasoning(t) => r.push_str(t),
                Part::Content(t) => c.push_str(t),
            }
        }
        (r, c, parts)
    }

    #[test]
    fn a_think_block_is_reasoning_and_the_rest_content() {
        let (r, c, _) = split("", &["<think>\nLet me see", ".\n</think>\n\nBlue."]);
        assert_eq!((r.as_str(), c.as_str()), ("Let me see.\n", "Blue."));
    }

    #[test]
    fn tags_split_across_tokens_never_reach_either_text() {
        let (r, c, parts) = split(
            "",
            &["<th", "ink", ">", "hmm", "</", "thi", "nk", ">", "\n\nOK"],
        );
        assert_eq!((r.as_str(), c.as_str()), ("hmm", "OK"));
        assert!(parts.iter().all(|p| !matches!(p,
            Part::Reasoning(t) | Part::Content(t) if t.contains('<') || t.contains('>'))));
    }

    #[test]
    fn a_reply_without_a_block_is_all_content_even_if_it_mentions_think_later() {
        let (r, c, _) = split("", &["Hi ", "<think>x</think>"]);
        assert_eq!((r.as_str(), c.as_str()), ("", "Hi <think>x</think>"));
        let (r, c, _) = split("", &["<thin", "g>"]);
        assert_eq!((r.as_str(), c.as_str()), ("", "<thing>"));
    }

    #[test]
    fn a_prompt_that_opened_the_block_starts_in_reasoning() {
        let prompt = "<|im_start|>assistant\n<think>\n";
        let (r, c, _) = split(prompt, &["step 1", "</think>", "\n\nDone"]);
        assert_eq!((r.as_str(), c.as_str()), ("step 1", "Done"));
        // Thinking switched off: the template closed the block, the reply is content.
        let closed = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
        let (r, c, _) = split(closed, &["Done"]);
        assert_eq!((r.as_str(), c.as_str()), ("", "Done"));
    }

    #[test]
    fn an_unclosed_block_stays_reasoning() {
        let (r, c, _) = split("", &["<think>", "still thinking </thi"]);
        assert_eq!((r.as_str(), c.as_str()), ("still thinking </thi", ""));
    }
}
