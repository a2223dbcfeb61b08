//! [`Session::embed`]: an embedding of a text or of tokens (`crate::embed`), run as its
//! own sequence from position 0; the conversation (its KV cache, tokens and messages) is
//! left as it was ([`Engine::hidden_states`](crate::engine::Engine::hidden_states)), so a
//! chat goes on after an embedding as if none had run.

use super::Session;
use crate::embed::{self, EmbedInput, EmbedOptions, Embedding};
use crate::error::{Error, Result};

impl Session {
    /// The embedding of `input` (a text is tokenized with the model's special tokens, as
    /// llama.cpp does): the normed final hidden states pooled by `opts.pooling`, else
    /// the model's ([`Session::pooling`]), else the last token's; then L2-normalised and
    /// cut to `opts.dimensions`. Empty input, input longer than the context and
    /// `dimensions` outside `1..=hidden_size` are errors.
    pub fn embed<'a>(
        &mut self,
        input: impl Into<EmbedInput<'a>>,
        opts: &EmbedOptions,
    ) -> Result<Embedding> {
        let tokens = match input.into() {
            EmbedInput::Text("") => {
                return Err(Error::InvalidArgument("the text to embed is empty".into()))
            }
            EmbedInput::Text(text) => self.tokenizer.encode(text, true),
            EmbedInput::Tokens(tokens) => tokens.to_vec(),
        };
        let hidden = self.engine.config().hidden_size;
        embed::check(&tokens, self.engine.context(), hidden, opts)?;
        let rows = self.engine.hidden_states(&tokens)?;
        Ok(embed::from_rows(&rows, hidden, self.pooling, opts))
    }
}
