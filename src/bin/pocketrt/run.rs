//! `pocketrt run` (one prompt, text streamed to stdout, speeds to stderr) and
//! `pocketrt chat` (an interactive chat in the model's template, on stdin/stdout), both
//! with speculative decoding under `--spec` (`spec.rs`).

use crate::request::{self, cli_error, print_chat, print_completion, SamplingArgs};
use crate::session as snapshot;
use crate::spec::{self, SpecArgs};
use indicatif::{ProgressBar, ProgressStyle};
use pocketrt::api::{
    ApiError, ChatCompletionRequest, ChatMessage, ChatRun, CompletionRequest, CompletionRun,
    ContextPolicy, Prompt, Role,
};
use pocketrt::cpu::WeightMode;
use pocketrt::engine::{self, Engine};
use pocketrt::format::{self, ModelSource};
use pocketrt::generate::{reply_options, GenerateStats, Session};
use pocketrt::speculate::SpecOptions;
use pocketrt::tokenizer::{ChatTemplate, Message, Tokenizer};
use pocketrt::{hub, Error, Result};
use std::io::BufRead;

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Backend {
    /// The GPU on a real adapter, the CPU without one, the faster of the two (timed) on
    /// a software adapter; f32 weights: the reference.
    Auto,
    /// wgpu: Vulkan, Metal or DX12 (lavapipe on machines without a GPU).
    Gpu,
    /// The fast CPU backend: SIMD int8 kernels on all cores (Q4 weights).
    Cpu,
    /// The plain-Rust reference forward pass (the oracle; f32 or Q4 weights).
    Reference,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Weights {
    /// Q4 g64 (kept bit-exactly from packages and Q4_1-pair GGUFs).
    Q4,
    /// f32 (quantized sources dequantized): the exact reference (reference backend only).
    F32,
    /// Q8 g32 (Q8_0 and Q5_0 kept exactly; every backend: auto runs the CPU backend on a
    /// software GPU adapter, where its Q8 kernels are slower).
    Q8,
    /// As the source stores them: Q4_0/Q4_1 as Q4 g64, the rest as Q8 g32 (backends as
    /// q8).
    Keep,
}

impl Weights {
    pub fn mode(self) -> WeightMode {
        match self {
            Weights::Q4 => WeightMode::Q4,
            Weights::F32 => WeightMode::F32,
            Weights::Q8 => WeightMode::Q8,
            Weights::Keep => WeightMode::Keep,
        }
    }
}

/// Which model, where to run it.
#[derive(clap::Args)]
pub struct ModelArgs {
    /// GGUF file, pocket package folder, HF folder, or a hub id (owner/name: downloaded
    /// once into ~/.cache/pocketrt/hub).
    pub model: String,
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: Backend,
    /// Use the GPU adapter whose name contains this (see `pocketrt adapters`).
    #[arg(long)]
    pub adapter: Option<String>,
    /// Weight precision (default keep: each matrix as its source stores it; f32:
    /// reference backend only).
    #[arg(long, value_enum, default_value = "keep")]
    pub weights: Weights,
    /// KV cache positions (default: run: prompt + -n; chat: the largest context that fits
    /// the memory budget on the GPU, 4096 on the CPU; with --session FILE, run: at least
    /// FILE's, chat: FILE's).
    #[arg(long)]
    pub context: Option<usize>,
    /// GPU memory budget in MiB (default: sized for a tablet).
    #[arg(long, default_value_t = pocketrt::gpu::plan::TABLET_BUDGET >> 20)]
    pub memory_budget_mb: u64,
    /// Print the backend, adapter and dispatches per token first.
    #[arg(short, long)]
    pub verbose: bool,
}

#[derive(clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// The prompt.
    #[arg(short, long)]
    pub prompt: String,
    /// Most tokens to generate (stops earlier at end-of-sequence).
    #[arg(short = 'n', long, default_value_t = 128)]
    pub max_tokens: usize,
    /// Wrap the prompt in the model's chat template as a user message.
    #[arg(long)]
    pub chat: bool,
    /// Keep the KV cache in this session file: restored first when it exists (a prompt
    /// that begins with its tokens reuses them), saved when done.
    #[arg(long, value_name = "FILE")]
    pub session: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    #[command(flatten)]
    pub spec: SpecArgs,
}

#[derive(clap::Args)]
pub struct ChatArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// A system message opening the chat.
    #[arg(long)]
    pub system: Option<String>,
    /// Most tokens per reply.
    #[arg(short = 'n', long, default_value_t = 512)]
    pub max_tokens: usize,
    /// Keep the chat in this session file: restored first when it exists (the chat goes
    /// on where it stopped), saved after every reply.
    #[arg(long, value_name = "FILE")]
    pub session: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    #[command(flatten)]
    pub spec: SpecArgs,
}

/// An opened model: its file or folder, source, tokenizer and chat template.
pub struct Opened {
    path: std::path::PathBuf,
    src: Box<dyn ModelSource>,
    tokenizer: Tokenizer,
    template: Option<ChatTemplate>,
}

impl Opened {
    /// The model's file or folder (a hub id resolved to its download).
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    pub fn config(&self) -> &pocketrt::ModelConfig {
        self.src.config()
    }
}

pub fn open(a: &ModelArgs) -> Result<Opened> {
    if let Some(name) = &a.adapter {
        // Read by the GPU device code when it picks the adapter.
        std::env::set_var("POCKETRT_ADAPTER", name);
    }
    open_model(&a.model)
}

/// Open `model` (a GGUF file, a package or HF folder, a hub id: downloaded first).
pub fn open_model(model: &str) -> Result<Opened> {
    let bar = ProgressBar::hidden();
    let path = hub::resolve_model(model, &mut |p| {
        if bar.is_hidden() {
            bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template(
                    "{msg} {bar:40} {bytes}/{total_bytes} {bytes_per_sec}",
                )
                .expect("static template"),
            );
        }
        bar.set_message(p.file.to_string());
        bar.set_length(p.total.unwrap_or(p.done));
        bar.set_position(p.done);
    })?;
    bar.finish_and_clear();
    let mut src = format::open(&path)?;
    let json = src
        .tokenizer_json()?
        .ok_or_else(|| Error::Tokenizer(format!("{} has no tokenizer", path.display())))?;
    let tokenizer = Tokenizer::from_hf_json(&json)?;
    let template = src
        .chat_template()
        .map(|t| ChatTemplate::new(&t))
        .transpose()?;
    Ok(Opened {
        path,
        src,
        tokenizer,
        template,
    })
}

pub fn session(a: &ModelArgs, mut o: Opened, context: Option<usize>) -> Result<Session> {
    let engine = load(a, &mut o, context)?;
    if a.verbose {
        eprintln!(
            "backend: {}; context {}",
            engine.description(),
            engine.context()
        );
    }
    Ok(Session::new(engine, o.tokenizer, o.template))
}

/// `o`'s engine on the backend, weights and memory budget of `a`.
pub fn load(a: &ModelArgs, o: &mut Opened, context: Option<usize>) -> Result<Engine> {
    let backend = match a.backend {
        Backend::Auto => engine::Backend::Auto,
        Backend::Cpu => engine::Backend::Cpu,
        Backend::Reference => engine::Backend::Reference,
        Backend::Gpu => engine::Backend::Gpu,
    };
    let weights = a.weights.mode();
    let budget = a.memory_budget_mb.saturating_mul(1 << 20);
    Engine::load_planned(o.src.as_mut(), backend, weights, context, budget)
}

fn print_stats(s: &GenerateStats, session: &Session) {
    eprintln!(
        "prompt {} tokens ({} reused), {:.1} tok/s | generated {} tokens, {:.1} tok/s | {:?} | {}",
        s.prompt_tokens,
        s.reused_tokens,
        s.prompt_tok_s(),
        s.generated_tokens,
        s.generate_tok_s(),
        s.finish,
        session.engine().description(),
    );
}

pub fn run(a: RunArgs) -> Result<()> {
    let opened = open(&a.model)?;
    // The context fits the prompt as rendered without a thinking block (no shorter than
    // with one) and the reply.
    let text = match (&opened.template, a.chat) {
        (Some(t), true) => t.render(&[Message::user(&a.prompt)], &reply_options())?,
        (None, true) => {
            return Err(Error::ChatTemplate(format!(
                "{} has no chat template",
                a.model.model
            )))
        }
        (_, false) => a.prompt.clone(),
    };
    let prompt_tokens = opened.tokenizer.encode(&text, true).len();
    let max_context = opened.src.config().max_context;
    // A saved session keeps the context it was written with, if that is larger.
    let saved = a.session.as_deref().and_then(snapshot::saved_context);
    let context = a.model.context.unwrap_or_else(|| {
        (prompt_tokens + a.max_tokens)
            .max(saved.unwrap_or(0))
            .min(max_context)
    });
    let mut session = session(&a.model, opened, Some(context))?;
    let speculative = a.spec.load(&a.model, &mut session)?;
    if let Some(path) = &a.session {
        snapshot::restore(&mut session, path, a.model.verbose)?;
    }
    let params = a
        .sampling
        .params(&request::RUN, a.max_tokens)
        .map_err(cli_error)?;
    let context = session.engine().context();
    let stats = if a.chat {
        let req = ChatCompletionRequest {
            messages: vec![ChatMessage::new(Role::User, &a.prompt)],
            chat_template_kwargs: a.sampling.template_kwargs(),
            params,
            ..Default::default()
        };
        let template = session.template().expect("checked above");
        let mut run =
            ChatRun::new(&req, session.tokenizer(), template, context).map_err(cli_error)?;
        run.apply_speculation(speculative);
        session.drive(run, print_chat).map_err(cli_error)?.1
    } else {
        let req = CompletionRequest {
            prompt: Some(Prompt::Text(a.prompt.clone())),
            params,
            ..Default::default()
        };
        let mut run = CompletionRun::new(&req, session.tokenizer(), context).map_err(cli_error)?;
        run.apply_speculation(speculative);
        session.drive(run, print_completion).map_err(cli_error)?.1
    };
    println!();
    print_stats(&stats, &session);
    if a.model.verbose {
        spec::print_stats(speculative, &stats);
    }
    if let Some(path) = &a.session {
        snapshot::save(&mut session, path, None, a.model.verbose)?;
    }
    Ok(())
}

/// One turn of `chat`: the reply to the conversation `history` ends with. A lost GPU
/// device (a driver reset, the GPU taken away) is said on stderr; the model is loaded
/// again from `path`, its KV cache refilled with the conversation, and the turn answered
/// again (once: a second loss is the error).
fn reply_recovering(
    session: &mut Session,
    a: &ChatArgs,
    history: &[ChatMessage],
    (path, speculative): (&std::path::Path, Option<SpecOptions>),
) -> std::result::Result<Reply, ApiError> {
    match reply(session, a, history, speculative) {
        Err(e) if e.error.code.as_deref() == Some(pocketrt::api::GPU_LOST) => {
            println!();
            eprintln!("{e}\nloading the model again, then answering again");
            let t0 = std::time::Instant::now();
            let mut src = format::open(path)?;
            session.reload(src.as_mut())?;
            eprintln!(
                "reloaded in {:.1} s ({} tokens of the chat back in the cache)",
                t0.elapsed().as_secs_f64(),
                session.cached_tokens()
            );
            reply(session, a, history, speculative)
        }
        other => other,
    }
}

/// A turn's reply: its text, stats, and how many of the oldest messages no longer fit
/// the context (dropped from the front, the system message kept).
struct Reply {
    text: String,
    stats: GenerateStats,
    dropped: usize,
}

/// One turn of `chat`: the reply to the conversation `history` ends with (with the drafts
/// of `speculative`). A chat longer than the context goes on without its oldest turns
/// (`context_overflow: truncate`).
fn reply(
    session: &mut Session,
    a: &ChatArgs,
    history: &[ChatMessage],
    speculative: Option<SpecOptions>,
) -> std::result::Result<Reply, ApiError> {
    let mut params = a.sampling.params(&request::CHAT, a.max_tokens)?;
    params.context_overflow = Some(ContextPolicy::Truncate);
    let req = ChatCompletionRequest {
        messages: history.to_vec(),
        chat_template_kwargs: a.sampling.template_kwargs(),
        params,
        ..Default::default()
    };
    let template = session.template().expect("checked at the start");
    let mut run = ChatRun::new(
        &req,
        session.tokenizer(),
        template,
        session.engine().context(),
    )?;
    run.apply_speculation(speculative);
    let dropped = run.dropped_messages();
    let lose = lose_device_hook(session);
    let mut chunks = 0;
    let (response, stats) = session.drive(run, |chunk| {
        chunks += 1;
        if let Some((at, device)) = &lose {
            if chunks == *at {
                device.destroy();
            }
        }
        print_chat(chunk)
    })?;
    let text = response.choices[0]
        .message
        .content
        .clone()
        .unwrap_or_default();
    Ok(Reply {
        text,
        stats,
        dropped,
    })
}

/// The test hook `POCKETRT_TEST_LOSE_GPU_AT=N`: the GPU device destroyed once, when the
/// N-th chunk of a reply streams, as a driver reset would (what `tests/cli.rs` recovers
/// from).
fn lose_device_hook(session: &Session) -> Option<(usize, wgpu::Device)> {
    static DONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let at = std::env::var("POCKETRT_TEST_LOSE_GPU_AT")
        .ok()?
        .parse()
        .ok()?;
    let device = session.engine().gpu_context()?.device.clone();
    (!DONE.swap(true, std::sync::atomic::Ordering::Relaxed)).then_some((at, device))
}

pub fn chat(a: ChatArgs) -> Result<()> {
    let opened = open(&a.model)?;
    let path = opened.path.clone();
    if opened.template.is_none() {
        return Err(Error::ChatTemplate(format!(
            "{} has no chat template; use `pocketrt run` for plain completion",
            a.model.model
        )));
    }
    // A saved chat keeps the context it was written with, unless --context says.
    let saved = a.session.as_deref().and_then(snapshot::saved_context);
    let mut session = session(&a.model, opened, a.model.context.or(saved))?;
    let speculative = a.spec.load(&a.model, &mut session)?;
    let mut history: Vec<ChatMessage> = a
        .system
        .iter()
        .map(|s| ChatMessage::new(Role::System, s))
        .collect();
    let mut restored = String::new();
    if let Some(path) = &a.session {
        if snapshot::restore(&mut session, path, a.model.verbose)? {
            let mut saved = snapshot::history(&session);
            if !history.is_empty() {
                // --system replaces the saved chat's system message.
                saved.retain(|m| m.role != Role::System);
            }
            history.extend(saved);
            restored = format!(", {} messages restored", history.len());
        }
    }
    eprintln!(
        "chat with {} ({} positions{restored}). /reset clears the chat, /quit or Ctrl-D ends it.",
        a.model.model,
        session.engine().context()
    );
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    loop {
        request::emit("> ", false);
        let Some(line) = lines.next() else { break };
        let line = line.map_err(|e| Error::io("stdin", e))?;
        match line.trim() {
            "" => continue,
            "/quit" | "/exit" => break,
            "/reset" => {
                history.retain(|m| m.role == Role::System);
                println!("(chat cleared)");
                continue;
            }
            user => {
                history.push(ChatMessage::new(Role::User, user));
                match reply_recovering(&mut session, &a, &history, (&path, speculative)) {
                    Ok(r) => {
                        println!();
                        if r.dropped > 0 {
                            let system = history.iter().take_while(|m| m.role == Role::System);
                            let first = system.count();
                            history.drain(first..first + r.dropped);
                            eprintln!(
                                "({} oldest messages no longer fit the context of {}: dropped)",
                                r.dropped,
                                session.engine().context()
                            );
                        }
                        history.push(ChatMessage::new(Role::Assistant, r.text.trim()));
                        if a.model.verbose {
                            print_stats(&r.stats, &session);
                            spec::print_stats(speculative, &r.stats);
                        }
                        if let Some(path) = &a.session {
                            let v = a.model.verbose;
                            snapshot::save(&mut session, path, Some(&history), v)?;
                        }
                    }
                    // The chat is unchanged: say why and go on.
                    Err(e) if e.error.code.as_deref() == Some("context_length_exceeded") => {
                        history.pop();
                        println!();
                        eprintln!("error: {e}; /reset starts a new chat");
                    }
                    Err(e) => return Err(cli_error(e)),
                }
            }
        }
    }
    println!();
    Ok(())
}
