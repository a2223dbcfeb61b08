//! `pocketrt`: the native command-line tool.

mod bench;
mod embed;
mod gpu_check;
mod gpu_check_kernels;
mod request;
mod run;
mod serve;
mod session;
mod spec;
mod synth;
mod tune;

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use pocketrt::convert::{convert, ConvertOptions, Progress};
use pocketrt::format::{self, ModelSource};
use pocketrt::prune::{convert_pruned, Corpus};
use pocketrt::tokenizer::{describe_tokens, ChatOptions, ChatTemplate, Message, Tokenizer};
use pocketrt::Result;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "pocketrt",
    version,
    about = "Small language models on the GPU, natively and in the browser"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Convert a GGUF file or an HF folder (config.json + safetensors) into a pocket package.
    Convert {
        /// GGUF file or HF model folder.
        input: PathBuf,
        /// Output folder (created).
        output: PathBuf,
        /// Quantization group along K (only 64 is supported).
        #[arg(long, default_value_t = 64)]
        group: usize,
        /// Shard size in MiB (at most 32).
        #[arg(long, default_value_t = 32)]
        shard_mb: u64,
        /// How each matrix is stored: keep (default: as the source is — Q4_0/Q4_1 as Q4
        /// g64, the rest as Q8 g32, so Q8_0 and Q5_0 stay exact), q4 (Q4 g64: half the
        /// bytes of Q8) or q8 (Q8 g32). Every backend runs both formats.
        #[arg(long, default_value = "keep")]
        weights: pocketrt::quant::WeightFormat,
        /// Prune the vocabulary to the tokens this corpus uses (a text file or a folder of
        /// text files; repeatable), closed under BPE merges. Needs --vocab-size.
        #[arg(long, value_name = "CORPUS", requires = "vocab_size")]
        prune_vocab: Vec<PathBuf>,
        /// Tokens the pruned vocabulary keeps. Needs --prune-vocab.
        #[arg(long, value_name = "N", requires = "prune_vocab")]
        vocab_size: Option<usize>,
    },
    /// Describe a model: architecture, dimensions, vocabulary, tensor table, total bytes.
    Inspect {
        /// GGUF file, HF model folder or pocket package folder.
        model: PathBuf,
        /// Print only the summary, not the tensor table.
        #[arg(long)]
        summary: bool,
        /// Print the GPU memory plan for this many context positions.
        #[arg(long)]
        context: Option<usize>,
        /// The memory budget the plan is checked against, in MiB.
        #[arg(long, default_value_t = pocketrt::gpu::plan::TABLET_BUDGET >> 20)]
        memory_budget_mb: u64,
    },
    /// Generate text from a prompt (streamed to stdout; speeds to stderr).
    Run(run::RunArgs),
    /// Chat with a model in its chat template (reads stdin line by line).
    Chat(run::ChatArgs),
    /// Embed texts (the final hidden state after the output norm, pooled, L2-normalised;
    /// like llama.cpp's --embedding); prints OpenAI's embeddings response JSON.
    Embed(embed::EmbedArgs),
    /// Serve the model over HTTP with the OpenAI API (`/v1/chat/completions`,
    /// `/v1/completions`, `/v1/models`), plus `/health`, `/metrics` and llama.cpp's slot
    /// API (`/slots`, with --slot-save-path).
    Serve(serve::ServeArgs),
    /// List the GPU adapters wgpu finds (names for --adapter).
    Adapters,
    /// Measure prompt processing and generation speed (like llama-bench).
    Bench {
        /// GGUF file, HF model folder or pocket package folder.
        model: PathBuf,
        #[arg(long, value_enum, default_value = "gpu")]
        backend: run::Backend,
        /// Prompt tokens per repetition (run one decode step each).
        #[arg(short = 'p', long, default_value_t = 128)]
        prompt_tokens: usize,
        /// Generated tokens per repetition.
        #[arg(short = 'n', long, default_value_t = 64)]
        gen_tokens: usize,
        /// Repetitions.
        #[arg(short = 'r', long, default_value_t = 3)]
        reps: usize,
        /// Skip the uncounted warm-up repetition.
        #[arg(long)]
        no_warmup: bool,
        /// GPU: fold the attention output projection into attention (4 dispatches per
        /// layer) or keep it a GEMV of its own (5); auto: the adapter's default.
        #[arg(long, value_enum, default_value = "auto")]
        fold_output: Fold,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Check the GPU: the Pocket-shape model's logits against the CPU oracle, then decode
    /// and prefill speed and each kernel's bandwidth against a read kernel's (one JSON
    /// document on stdout; the adapter, its profile and progress on stderr).
    GpuCheck(gpu_check::GpuCheckArgs),
    /// Tune the GPU profile on this adapter for a model: time its free constants (GEMV
    /// rows, x staged per workgroup, slot reduction, head rows, attention split, W_o fold)
    /// on the model's own weights and keep the fastest for every later load (prints the
    /// table; see POCKETRT_TUNE).
    Tune(tune::TuneArgs),
    /// Write a model with a preset's exact shapes and random weights (benchmark model).
    Synth {
        /// pocket-0.3b (MNN-Pocket-0.3B's shapes), tiny-qwen3, tiny-qwen2 or tiny-llama.
        #[arg(long, default_value = "pocket-0.3b")]
        preset: String,
        /// Output: a package folder, or a file with --gguf.
        out: PathBuf,
        /// Write a Q4_1 GGUF (as the published Pocket GGUF is stored) instead of a package.
        #[arg(long)]
        gguf: bool,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Tokenize TEXT with the model's tokenizer; prints ids and pieces (like llama-tokenize).
    Tokenize {
        /// GGUF file, HF model folder or pocket package folder.
        model: PathBuf,
        text: String,
        /// Apply the model's chat template to TEXT as a user message first.
        #[arg(long)]
        chat: bool,
        /// Print only the ids, as one line.
        #[arg(long)]
        ids_only: bool,
    },
}

/// `--fold-output`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Fold {
    Auto,
    On,
    Off,
}

impl Fold {
    fn choice(self) -> Option<bool> {
        match self {
            Fold::Auto => None,
            Fold::On => Some(true),
            Fold::Off => Some(false),
        }
    }
}

/// Mesa's implicit Vulkan device-select layer asks Wayland for the default GPU when the
/// instance is created; on a headless machine (no usable `XDG_RUNTIME_DIR`) that fails and
/// libwayland prints "error: XDG_RUNTIME_DIR is invalid or not set in the environment."
/// twice before every command's own output. There it can choose nothing anyway, so it is
/// turned off (`NODEVICE_SELECT=1`) unless the environment says otherwise. Called first
/// in `main`, before any thread exists.
fn quiet_headless_vulkan() {
    let runtime_dir = std::env::var_os("XDG_RUNTIME_DIR");
    let headless = runtime_dir.is_none_or(|d| !std::path::Path::new(&d).is_dir());
    if headless && std::env::var_os("NODEVICE_SELECT").is_none() {
        std::env::set_var("NODEVICE_SELECT", "1");
    }
}

fn main() -> ExitCode {
    quiet_headless_vulkan();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Convert {
            input,
            output,
            group,
            shard_mb,
            weights,
            prune_vocab,
            vocab_size,
        } => run_convert(
            &input,
            &output,
            (group, shard_mb, weights),
            &prune_vocab,
            vocab_size,
        ),
        Command::Inspect {
            model,
            summary,
            context,
            memory_budget_mb,
        } => run_inspect(&model, summary).and_then(|cfg| match context {
            Some(c) => print_plan(&cfg, c, memory_budget_mb),
            None => Ok(()),
        }),
        Command::Run(args) => run::run(args),
        Command::Chat(args) => run::chat(args),
        Command::Embed(args) => embed::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Adapters => run_adapters(),
        Command::Bench {
            model,
            backend,
            prompt_tokens,
            gen_tokens,
            reps,
            no_warmup,
            fold_output,
            json,
        } => bench::run(bench::BenchArgs {
            model: &model,
            backend,
            prompt_tokens,
            gen_tokens,
            reps,
            warmup: !no_warmup,
            step: pocketrt::gpu::forward::StepOptions {
                fold_output: fold_output.choice(),
            },
            json,
        }),
        Command::GpuCheck(args) => gpu_check::run(args),
        Command::Tune(args) => tune::run(args),
        Command::Synth {
            preset,
            out,
            gguf,
            seed,
        } => synth::run(&preset, &out, gguf, seed),
        Command::Tokenize {
            model,
            text,
            chat,
            ids_only,
        } => run_tokenize(&model, &text, chat, ids_only),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_convert(
    input: &std::path::Path,
    output: &std::path::Path,
    (group, shard_mb, weights): (usize, u64, pocketrt::quant::WeightFormat),
    prune_corpus: &[PathBuf],
    vocab_size: Option<usize>,
) -> Result<()> {
    if shard_mb == 0 || shard_mb > 32 {
        return Err(pocketrt::Error::InvalidArgument(format!(
            "--shard-mb {shard_mb}: shards must be 1..=32 MiB"
        )));
    }
    let mut src = format::open(input)?;
    let opts = ConvertOptions {
        group,
        shard_bytes: Some(shard_mb << 20),
        weights,
    };
    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:40} {bytes}/{total_bytes} {msg}",
        )
        .expect("static template"),
    );
    let mut progress = |p: &Progress| {
        bar.set_length(p.bytes_total);
        bar.set_position(p.bytes_done);
        bar.set_message(format!(
            "{} ({}/{})",
            p.tensor, p.tensors_done, p.tensors_total
        ));
    };
    let (report, pruned) = match vocab_size {
        Some(n) => {
            let corpus = Corpus::read(prune_corpus)?;
            let (r, p) = convert_pruned(src.as_mut(), output, &opts, &corpus, n, &mut progress)?;
            (r, Some(p))
        }
        None => (convert(src.as_mut(), output, &opts, &mut progress)?, None),
    };
    bar.finish_and_clear();
    println!(
        "wrote {} ({} tensors, {} shards, {})",
        output.display(),
        report.manifest.tensors.len(),
        report.manifest.shards.len(),
        human_bytes(report.package_bytes)
    );
    for (format, m) in [("q4 g64", report.merge), ("q8 g32", report.merge_q8)] {
        if m.groups_exact + m.groups_requantized > 0 {
            println!(
                "{format} groups: {} kept bit-exactly, {} requantized",
                m.groups_exact, m.groups_requantized
            );
        }
    }
    if let Some(p) = pruned {
        println!("{p}");
    }
    if !report.has_tokenizer {
        println!("note: the source has no tokenizer; the package has none");
    }
    if !report.skipped.is_empty() {
        println!(
            "skipped tensors the runtime does not use: {}",
            report.skipped.join(", ")
        );
    }
    Ok(())
}

fn run_inspect(path: &std::path::Path, summary: bool) -> Result<pocketrt::ModelConfig> {
    let src: Box<dyn ModelSource> = format::open(path)?;
    let c = src.config();
    println!("file:          {}", src.container());
    println!("architecture:  {}", c.arch.name());
    println!("layers:        {}", c.n_layers);
    println!("hidden:        {}", c.hidden_size);
    println!("ffn:           {}", c.ffn_size);
    println!(
        "heads:         {} (kv {}, head_dim {})",
        c.n_heads, c.n_kv_heads, c.head_dim
    );
    println!("vocab:         {}", c.vocab_size);
    println!("context:       {}", c.max_context);
    println!("rope theta:    {}", c.rope_theta);
    println!("tied head:     {}", c.tie_embeddings);
    println!("eos ids:       {:?}", c.eos_token_ids);
    let total: u64 = src.tensors().iter().map(|t| t.bytes).sum();
    if !summary {
        println!();
        println!(
            "{:<32} {:>8} {:>18} {:>12}",
            "tensor", "dtype", "shape", "bytes"
        );
        for t in src.tensors() {
            println!(
                "{:<32} {:>8} {:>18} {:>12}",
                t.name,
                t.dtype,
                format!("{:?}", t.shape),
                t.bytes
            );
        }
    }
    println!("tensors:       {}", src.tensors().len());
    println!("total bytes:   {} ({})", total, human_bytes(total));
    Ok(c.clone())
}

/// The memory planner's figures for `context` positions, and the largest context that
/// fits the budget.
fn print_plan(cfg: &pocketrt::ModelConfig, context: usize, budget_mb: u64) -> Result<()> {
    use pocketrt::gpu::plan::{Budget, MemoryPlan};
    let budget = Budget {
        total: budget_mb.saturating_mul(1 << 20),
        max_buffer: u64::MAX,
        max_binding: u64::MAX,
        code_textures: None,
        lanes_gemm_uniform: None,
        head_argmax_rows: None,
        q8_weights: false,
    };
    let p = MemoryPlan::new(cfg, context);
    let mib = |b: u64| format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64);
    println!();
    println!("GPU memory plan at context {context}:");
    println!("  weights (q4 g64):  {}", mib(p.weights));
    println!("  KV cache (f16):    {}", mib(p.kv_cache));
    println!("  scratch:           {}", mib(p.scratch));
    println!("  total:             {}", mib(p.total()));
    let binding = wgpu::Limits::defaults().max_storage_buffer_binding_size;
    println!(
        "  largest buffer:    {} ({} WebGPU's default binding limit of {})",
        mib(p.largest_buffer),
        if p.largest_buffer <= binding {
            "within"
        } else {
            "over"
        },
        mib(binding)
    );
    match p.check(&budget) {
        Ok(()) => println!("  fits the budget of {budget_mb} MiB"),
        Err(e) => println!("  does not fit: {e}"),
    }
    match MemoryPlan::choose(cfg, None, &budget) {
        Ok(best) => println!(
            "  largest context within {budget_mb} MiB: {} (total {})",
            best.context,
            mib(best.total())
        ),
        Err(e) => println!("  no context fits: {e}"),
    }
    Ok(())
}

fn run_tokenize(path: &std::path::Path, text: &str, chat: bool, ids_only: bool) -> Result<()> {
    let mut src = format::open(path)?;
    let json = src.tokenizer_json()?.ok_or_else(|| {
        pocketrt::Error::Tokenizer(format!("{} has no tokenizer", path.display()))
    })?;
    let tok = Tokenizer::from_hf_json(&json)?;
    let text = if chat {
        let template = src.chat_template().ok_or_else(|| {
            pocketrt::Error::ChatTemplate(format!("{} has no chat template", path.display()))
        })?;
        let opts = ChatOptions {
            add_generation_prompt: true,
            ..Default::default()
        };
        ChatTemplate::new(&template)?.render(&[Message::user(text)], &opts)?
    } else {
        text.to_string()
    };
    let ids = tok.encode(&text, true);
    if ids_only {
        let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
        println!("{}", ids.join(" "));
    } else {
        for (id, piece) in describe_tokens(&tok, &ids) {
            println!("{id:>8} -> '{piece}'");
        }
        println!("{} tokens", ids.len());
    }
    Ok(())
}

fn run_adapters() -> Result<()> {
    let adapters = pocketrt::gpu::profiled::list_adapters()?;
    if adapters.is_empty() {
        println!("no GPU adapters (install a Vulkan driver, e.g. mesa-vulkan-drivers)");
    }
    for (adapter, profile) in adapters {
        println!("{adapter}");
        match profile {
            Ok(p) => println!("  {p}"),
            Err(e) => println!("  no profile: {e}"),
        }
    }
    Ok(())
}

fn human_bytes(b: u64) -> String {
    if b >= 1 << 30 {
        format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MB", b as f64 / 1e6)
    }
}
