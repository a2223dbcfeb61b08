//! `embeddings.create` in the browser: an OpenAI embeddings request (its JSON text) on
//! the session's model, each input run as its own sequence ([`WebModel::hidden_states`],
//! the conversation's cache left as it was), pooled and normalised by the crate's
//! `embed` module; the response's JSON text is what a server would send.
//!
//! [`WebModel::hidden_states`]: super::model::WebModel::hidden_states

use super::errors::Failure;
use super::session::WebSession;
use crate::api::{embedding_input_error, EmbeddingRequest, EmbeddingResponse, DEFAULT_MODEL};

impl WebSession {
    /// Answer an embeddings request; the response's JSON text.
    pub async fn embeddings(&mut self, request: &str) -> Result<String, Failure> {
        let req = EmbeddingRequest::from_json(request)?;
        let lists = req.token_lists(&self.tokenizer)?;
        let hidden = self.model.config().hidden_size;
        let opts = req.options(hidden)?;
        let held = self.history().len();
        let mut embeddings = Vec::with_capacity(lists.len());
        for tokens in &lists {
            let rows = match self.model.hidden_states(tokens, held).await {
                Ok(rows) => rows,
                // A lost device keeps its engine code (GPU_LOST: reload and retry).
                Err(e @ crate::Error::GpuLost(_)) => return Err(Failure::Engine(e)),
                Err(e) => return Err(Failure::Api(embedding_input_error(e))),
            };
            embeddings.push(crate::embed::from_rows(&rows, hidden, self.pooling, &opts));
        }
        Ok(EmbeddingResponse::new(&req, embeddings, DEFAULT_MODEL).to_json())
    }
}
