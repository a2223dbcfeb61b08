//! `pocketrt serve`: the model behind an OpenAI-compatible HTTP server
//! ([`pocketrt::server`]); this file only turns the flags into its options.

use crate::run::{open, session, ModelArgs};
use crate::spec::SpecArgs;
use pocketrt::server::{serve, Reopen, ServeOptions};
use pocketrt::Result;
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Address to listen on (127.0.0.1: this machine only; 0.0.0.0: every interface).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on (0: any free port, printed).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Require `Authorization: Bearer KEY` on /v1/* and /metrics.
    #[arg(long, value_name = "KEY")]
    pub api_key: Option<String>,
    /// Browser origins allowed to call the server (CORS; `*` for any). None by default.
    #[arg(long, value_name = "ORIGIN", num_args = 1..)]
    pub cors: Vec<String>,
    /// KV cache slots: conversations kept cached at once, on one copy of the weights
    /// (CPU backends; refused when their caches do not fit the memory available).
    #[arg(long, default_value_t = 1)]
    pub parallel: usize,
    /// Longest a request may take, queue time included, in seconds.
    #[arg(long, default_value_t = 600.0)]
    pub timeout: f64,
    /// Largest request body, in MiB.
    #[arg(long, default_value_t = 4)]
    pub max_body_mb: usize,
    /// The model id /v1/models reports (default: the model's file or folder name).
    #[arg(long)]
    pub alias: Option<String>,
    /// Enable llama.cpp's slot API (`POST /slots/{id}?action=save|restore|erase` with
    /// `{"filename": NAME}`): slots are saved to and restored from session snapshots in
    /// DIR (created).
    #[arg(long, value_name = "DIR")]
    pub slot_save_path: Option<PathBuf>,
    /// Keep snapshots of long system prompts in DIR (created), across restarts: a chat
    /// whose system prompt was seen before starts from its snapshot instead of a prefill.
    #[arg(long, value_name = "DIR")]
    pub prefix_cache: Option<PathBuf>,
    /// The shortest system prompt, in tokens, --prefix-cache keeps.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub prefix_cache_min_tokens: usize,
    /// The default of requests that do not say (their `"speculative"` field: false, true
    /// or {"n_max": N}).
    #[command(flatten)]
    pub spec: SpecArgs,
}

pub fn run(a: ServeArgs) -> Result<()> {
    let model_name = a.alias.clone().unwrap_or_else(|| {
        let name = a.model.model.trim_end_matches('/');
        std::path::Path::new(name)
            .file_name()
            .map_or(name.to_string(), |n| n.to_string_lossy().into_owned())
    });
    let opts = ServeOptions {
        host: a.host,
        port: a.port,
        api_key: a.api_key,
        cors: a.cors,
        parallel: a.parallel,
        timeout: Duration::try_from_secs_f64(a.timeout)
            .ok()
            .filter(|t| !t.is_zero())
            .ok_or_else(|| {
                pocketrt::Error::InvalidArgument(format!(
                    "--timeout {}: a number of seconds above 0",
                    a.timeout
                ))
            })?,
        body_limit: a.max_body_mb.saturating_mul(1 << 20),
        model_name,
        verbose: a.model.verbose,
        slot_save_path: a.slot_save_path,
        prefix_cache: a.prefix_cache,
        prefix_cache_min_tokens: a.prefix_cache_min_tokens,
        speculative: a.spec.options()?,
    };
    let (model, spec) = (a.model, a.spec);
    serve(
        opts,
        Box::new(move || {
            let opened = open(&model)?;
            let path = opened.path().to_path_buf();
            let context = model.context;
            let pooling = pocketrt::embed::Pooling::of_model(&path)?;
            let reopen: Reopen = Box::new(move || pocketrt::format::open(&path));
            let mut session = session(&model, opened, context)?;
            spec.load(&model, &mut session)?;
            session.pooling = pooling;
            Ok((session, reopen))
        }),
    )
}
