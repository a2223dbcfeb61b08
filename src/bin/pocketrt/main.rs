//! `pocketrt`: the native command-line tool.

mod bench;
mod run;
mod synth;

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use pocketrt::convert::{convert, ConvertOptions};
use pocketrt::format::{self, ModelSource};
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
    },
    /// Describe a model: architecture, dimensions, vocabulary, tensor table, total bytes.
    Inspect {
        /// GGUF file, HF model folder or pocket package folder.
        model: PathBuf,
        /// Print only the summary, not the tensor table.
        #[arg(long)]
        summary: bool,
    },
    /// Generate text from a prompt (streamed to stdout; speeds to stderr).
    Run {
        /// GGUF file, HF model folder or pocket package folder.
        model: PathBuf,
        /// The prompt.
        #[arg(short, long)]
        prompt: String,
        /// Most tokens to generate (stops earlier at end-of-sequence).
        #[arg(short = 'n', long, default_value_t = 128)]
        max_tokens: usize,
        /// Wrap the prompt in the model's chat template as a user message.
        #[arg(long)]
        chat: bool,
        #[arg(long, value_enum, default_value = "cpu")]
        backend: run::Backend,
        /// Weight precision (f32: CPU backend only).
        #[arg(long, value_enum, default_value = "q4")]
        weights: run::Weights,
        /// Print the backend, adapter and dispatches per token first.
        #[arg(short, long)]
        verbose: bool,
    },
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
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Convert {
            input,
            output,
            group,
            shard_mb,
        } => run_convert(&input, &output, group, shard_mb),
        Command::Inspect { model, summary } => run_inspect(&model, summary),
        Command::Run {
            model,
            prompt,
            max_tokens,
            chat,
            backend,
            weights,
            verbose,
        } => run::run(run::RunArgs {
            model: &model,
            prompt: &prompt,
            max_tokens,
            chat,
            backend,
            weights,
            verbose,
        }),
        Command::Bench {
            model,
            backend,
            prompt_tokens,
            gen_tokens,
            reps,
            json,
        } => bench::run(bench::BenchArgs {
            model: &model,
            backend,
            prompt_tokens,
            gen_tokens,
            reps,
            json,
        }),
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
    group: usize,
    shard_mb: u64,
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
    };
    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:40} {bytes}/{total_bytes} {msg}",
        )
        .expect("static template"),
    );
    let report = convert(src.as_mut(), output, &opts, &mut |p| {
        bar.set_length(p.bytes_total);
        bar.set_position(p.bytes_done);
        bar.set_message(format!(
            "{} ({}/{})",
            p.tensor, p.tensors_done, p.tensors_total
        ));
    })?;
    bar.finish_and_clear();
    let m = &report.merge;
    println!(
        "wrote {} ({} tensors, {} shards, {})",
        output.display(),
        report.manifest.tensors.len(),
        report.manifest.shards.len(),
        human_bytes(report.package_bytes)
    );
    println!(
        "q4 g64 groups: {} kept bit-exactly, {} requantized",
        m.groups_exact, m.groups_requantized
    );
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

fn run_inspect(path: &std::path::Path, summary: bool) -> Result<()> {
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

fn human_bytes(b: u64) -> String {
    if b >= 1 << 30 {
        format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MB", b as f64 / 1e6)
    }
}
