//! `pocketrt embed MODEL TEXT...`: each text's embedding, printed as OpenAI's embeddings
//! response (`{"object": "list", "data": [...], "model", "usage"}`) on stdout.

use crate::request::cli_error;
use crate::run::{open, session, ModelArgs};
use pocketrt::api::{EmbeddingRequest, EncodingFormat};
use pocketrt::embed::Pooling;
use pocketrt::Result;

#[derive(clap::Args)]
pub struct EmbedArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// The texts to embed (one vector each, in order).
    #[arg(required = true)]
    pub texts: Vec<String>,
    /// How the tokens' final hidden states become one vector (default: the model's,
    /// from its GGUF `pooling_type` or sentence-transformers folder, else last).
    #[arg(long, value_parser = ["last", "mean", "cls"])]
    pub pooling: Option<String>,
    /// Keep the first N values (then normalised again): OpenAI's `dimensions`.
    #[arg(long)]
    pub dimensions: Option<usize>,
    /// Print the values as base64 of little-endian f32 (OpenAI's `encoding_format`).
    #[arg(long)]
    pub base64: bool,
}

pub fn run(a: EmbedArgs) -> Result<()> {
    let opened = open(&a.model)?;
    let model_pooling = Pooling::of_model(opened.path())?;
    let name = opened
        .path()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // By default the cache holds the longest text (within the model's context; a
    // longer text is then the error that names the context).
    let longest = a
        .texts
        .iter()
        .map(|t| opened.tokenizer().encode(t, true).len());
    let max_context = opened.config().max_context;
    let fit = longest.max().unwrap_or(1).clamp(1, max_context);
    let mut session = session(&a.model, opened, a.model.context.or(Some(fit)))?;
    session.pooling = model_pooling;
    let req = EmbeddingRequest {
        pooling: a.pooling.as_deref().map(Pooling::from_name).transpose()?,
        dimensions: a.dimensions,
        encoding_format: a.base64.then_some(EncodingFormat::Base64),
        ..EmbeddingRequest::texts(a.texts)
    };
    let response = session.embeddings(&req, &name).map_err(cli_error)?;
    println!("{}", response.to_json());
    Ok(())
}
