//! The browser tests' models (scripts/test-web): `web_fixture DIR [LARGE_DIR]` writes
//! - DIR: a tiny qwen3 package (20 KiB shards, a byte-level tokenizer, a chat template)
//!   and `expected.json` with the native engine's greedy tokens for a prompt (on the GPU,
//!   and on the fast CPU backend: `cpu_tokens`), and its seeded sampled tokens on the GPU
//!   in the `gpu` profile (`sampled_tokens` with `sampled_options`, the browser's
//!   `generateTokens` options: drawn on the GPU, pipelined; `sampled_host_tokens`: the same
//!   drawn on the host step by step);
//! - DIR/q8: the same model converted with `--weights q8` (every matrix Q8 g32), and in
//!   `expected.json` the fast CPU backend's and the GPU's (`swiftshader` profile, the
//!   browser's) greedy tokens for it as stored (`q8_tokens`, `q8_gpu_tokens`);
//! - DIR/tiny.gguf: the same model as a Q4_1 GGUF (tokenizer and template in its
//!   metadata), and in `expected.json` the native engine's greedy tokens for it (on the
//!   GPU, and on the fast CPU backend: `gguf_cpu_tokens`);
//! - DIR/tiny-q8.gguf: the same with three matrices Q8_0, and the GPU's (`swiftshader`
//!   profile) and the fast CPU backend's greedy tokens for it with keep weights
//!   (`gguf_q8_tokens`, `gguf_q8_cpu_tokens`);
//! - DIR/api: the OpenAI request fixtures' tiny Qwen3-shaped model (tests/api_common: the
//!   real Qwen3 template) as a package, and `DIR/api_expected.json`: every fixture's
//!   outcomes (responses, chunks) natively on the GPU (in the `swiftshader` profile, the
//!   browser's) and on the fast CPU backend, which the browser must reproduce, and the
//!   embeddings of [`EMBEDDINGS_REQUEST`] on both (`embeddings`);
//! - LARGE_DIR (when given): a random package of MNN-Pocket-0.3B's shapes (≈ 170 MB) and the same
//!   model as LARGE_DIR/large.gguf (≈ 190 MB, a 65,536-token vocabulary in its header) for
//!   the memory tests, with `bench-tokenizer.json` (every id decodes) for the browser
//!   decode bench.

use pocketrt::convert::{convert, ConvertOptions};
use pocketrt::cpu::WeightMode;
use pocketrt::engine::{Backend, Engine};
use pocketrt::format::gguf::{Gguf, MetaValue};
use pocketrt::gpu::ProfiledContext;
use pocketrt::quant::WeightFormat;
use pocketrt::sampler::{Sampler, SamplerConfig};
use pocketrt::synth::{write_package, SynthSource};
use pocketrt::tokenizer::{byte_level_json, Tokenizer};
use std::path::Path;

#[path = "../tests/api_common/mod.rs"]
mod api_common;

const TEMPLATE: &str = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}\
<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
const PROMPT: &str = "Hello, pocket!";
const TOKENS: usize = 12;
/// The seeded sampling of `sampled_tokens`: temperature, top-k, top-p, seed (the browser's
/// `generateTokens` options of the same names; its other controls off). A seed none of
/// whose draws lies within lavapipe's and SwiftShader's rounding of a boundary between two
/// tokens (seeds 1, 7 and 4242 have one, on this model).
const SAMPLED: (f32, usize, f32, u64) = (1.1, 40, 0.97, 2);
const BENCH_TOKENIZER: &str = "bench-tokenizer.json";
/// The embeddings request the browser repeats on the API fixtures' model: two texts,
/// mean pooling (every position's hidden state counts).
const EMBEDDINGS_REQUEST: &str = r#"{"input": ["Hello, pocket!", "A second text, longer than the first one."], "pooling": "mean"}"#;
/// Weight scale of the API fixtures' model (as tests/api_fixtures.rs).
const API_SCALE: f32 = 1.0;

fn main() -> pocketrt::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (dir, large) = match args.as_slice() {
        [dir] => (dir, None),
        [dir, large] => (dir, Some(large)),
        _ => {
            eprintln!("usage: web_fixture DIR [LARGE_DIR]");
            std::process::exit(2);
        }
    };
    let json = vocabulary_json(pocketrt::synth::preset("tiny-qwen3")?.vocab_size);
    let mut tiny = SynthSource::preset("tiny-qwen3", 7)?
        .with_tokenizer(json.clone(), Some(TEMPLATE.to_string()));
    let opts = ConvertOptions {
        shard_bytes: Some(20 << 10),
        ..Default::default()
    };
    convert(&mut tiny, Path::new(dir), &opts, &mut |_| {})?;

    let tok = Tokenizer::from_hf_json(&json)?;
    let greedy = |path: &Path, backend, weights| native_greedy(path, &tok, backend, weights);
    let (prompt_ids, tokens, engine) = greedy(Path::new(dir), Backend::Gpu, WeightMode::Q4)?;
    let (_, cpu_tokens, cpu_engine) = greedy(Path::new(dir), Backend::Cpu, WeightMode::Q4)?;
    let [sampled_tokens, sampled_host_tokens] = native_sampled(Path::new(dir), &tok)?;
    let (temperature, top_k, top_p, seed) = SAMPLED;
    let sampled_options = serde_json::json!({
        "temperature": temperature, "topK": top_k, "topP": top_p, "seed": seed,
        "maxTokens": TOKENS,
    });

    // The same model with every matrix in Q8 g32, run as stored (keep).
    let q8 = Path::new(dir).join("q8");
    let q8_opts = ConvertOptions {
        weights: WeightFormat::Q8,
        ..opts.clone()
    };
    convert(&mut tiny, &q8, &q8_opts, &mut |_| {})?;
    let (_, q8_tokens, q8_engine) = greedy(&q8, Backend::Cpu, WeightMode::Keep)?;
    let (_, q8_gpu_tokens, q8_gpu_engine) =
        native_greedy_swiftshader(&q8, &tok, WeightFormat::Keep)?;

    // The same model as a GGUF, its tokenizer and template in the metadata.
    let gguf = Path::new(dir).join("tiny.gguf");
    write_gguf(&tiny, &tok, &gguf)?;
    let (g, _) = Gguf::open(&gguf)?;
    let gguf_tok = Tokenizer::from_gguf(&g)?;
    let (gguf_prompt_ids, gguf_tokens, _) =
        native_greedy(&gguf, &gguf_tok, Backend::Gpu, WeightMode::Q4)?;
    let (_, gguf_cpu_tokens, _) = native_greedy(&gguf, &gguf_tok, Backend::Cpu, WeightMode::Keep)?;
    // A GGUF of mixed types, as a Q4_K_M file's: Q8_0 where the names say (q|k|v of
    // layer 0 then Q8 on the GPU), Q4_1 elsewhere; natively on the GPU as stored.
    let gguf_q8 = Path::new(dir).join("tiny-q8.gguf");
    let q8_0 = [
        "token_embd.weight",
        "blk.0.attn_v.weight",
        "blk.1.ffn_down.weight",
    ];
    write_gguf_with_q8_0(&tiny, &tok, &gguf_q8, &q8_0)?;
    let (_, gguf_q8_tokens, gguf_q8_engine) =
        native_greedy_swiftshader(&gguf_q8, &gguf_tok, WeightFormat::Keep)?;
    let (_, gguf_q8_cpu_tokens, gguf_q8_cpu_engine) =
        native_greedy(&gguf_q8, &gguf_tok, Backend::Cpu, WeightMode::Keep)?;

    let expected = serde_json::json!({
        "prompt": PROMPT, "prompt_ids": prompt_ids, "tokens": tokens, "engine": engine,
        "cpu_tokens": cpu_tokens, "cpu_engine": cpu_engine,
        "sampled_tokens": sampled_tokens, "sampled_host_tokens": sampled_host_tokens,
        "sampled_options": sampled_options,
        "q8_tokens": q8_tokens, "q8_engine": q8_engine,
        "q8_gpu_tokens": q8_gpu_tokens, "q8_gpu_engine": q8_gpu_engine,
        "gguf_q8_tokens": gguf_q8_tokens, "gguf_q8_engine": gguf_q8_engine,
        "gguf_q8_cpu_tokens": gguf_q8_cpu_tokens, "gguf_q8_cpu_engine": gguf_q8_cpu_engine,
        "gguf_prompt_ids": gguf_prompt_ids, "gguf_tokens": gguf_tokens,
        "gguf_cpu_tokens": gguf_cpu_tokens,
    });
    std::fs::write(Path::new(dir).join("expected.json"), expected.to_string())
        .map_err(|e| pocketrt::Error::io(dir, e))?;
    api_fixtures(Path::new(dir))?;

    let Some(large) = large else {
        return Ok(());
    };
    // The package gets a 256-byte tokenizer; the GGUF a full 65,536-token vocabulary (a
    // tokenizer.json of 65K added tokens alone takes ~60 MB of wasm heap to parse).
    let mut big = SynthSource::preset("pocket-0.3b", 1)?.with_tokenizer(byte_level_json(&[]), None);
    write_package(&mut big, Path::new(large))?;
    let vocab_size = pocketrt::synth::preset("pocket-0.3b")?.vocab_size;
    let vocab_json = vocabulary_json(vocab_size);
    write_gguf(
        &big,
        &Tokenizer::from_hf_json(&vocab_json)?,
        &Path::new(large).join("large.gguf"),
    )?;
    // The browser decode bench serves the package with the full vocabulary, so every id
    // it generates decodes (the memory test keeps the small tokenizer).
    std::fs::write(Path::new(large).join(BENCH_TOKENIZER), vocab_json)
        .map_err(|e| pocketrt::Error::io(large, e))?;
    Ok(())
}

/// The API fixtures' model as the package DIR/api, and their native outcomes on the GPU
/// and the fast CPU backend in DIR/api_expected.json (ids and times removed).
fn api_fixtures(dir: &Path) -> pocketrt::Result<()> {
    use pocketrt::generate::Session;
    use pocketrt::tokenizer::ChatTemplate;
    let pkg = dir.join("api");
    let mut config = api_common::config();
    let im_end = api_common::tokenizer()
        .token_to_id("<|im_end|>")
        .expect("a chat marker");
    config.eos_token_ids = vec![im_end];
    let template = Some(api_common::TEMPLATE.to_string());
    let mut src = api_common::weights(config, API_SCALE)?
        .with_tokenizer(api_common::tokenizer_json(), template);
    convert(&mut src, &pkg, &ConvertOptions::default(), &mut |_| {})?;
    let outcomes = |backend| -> pocketrt::Result<(serde_json::Value, serde_json::Value)> {
        let mut m = pocketrt::format::open(&pkg)?;
        let context = api_common::CONTEXT;
        let engine = match backend {
            // The browser's WebGPU is SwiftShader: its profile's kernels, for the same sums.
            Backend::Gpu => {
                let need = pocketrt::gpu::weights::limits_needed(m.config(), context, false);
                let ctx = ProfiledContext::open_blocking(need)?.with_profile("swiftshader")?;
                Engine::load_on_gpu(std::sync::Arc::new(ctx), m.as_mut(), context)?
            }
            _ => Engine::load(m.as_mut(), backend, WeightMode::Q4, context)?,
        };
        let template = ChatTemplate::new(api_common::TEMPLATE)?;
        // The package's tokenizer as the browser reads it (its end tokens included).
        let tokenizer = Tokenizer::from_hf_json(&api_common::tokenizer_json())?;
        let mut session = Session::new(engine, tokenizer, Some(template));
        let request = serde_json::from_str(EMBEDDINGS_REQUEST).expect("a valid request");
        let embeddings = session
            .embeddings(&request, "")
            .map_err(|e| pocketrt::Error::InvalidArgument(format!("embeddings: {e:?}")))?;
        let embeddings = serde_json::from_str(&embeddings.to_json()).expect("JSON");
        let fixtures = api_common::run_all(session)
            .into_iter()
            .map(|(f, outs)| {
                let outs: Vec<_> = outs
                    .iter()
                    .map(|o| serde_json::json!({"response": o.response, "chunks": o.chunks}))
                    .collect();
                serde_json::json!({"name": f.name, "doc": f.doc, "outcomes": api_common::normalized(&outs.into())})
            })
            .collect();
        Ok((fixtures, embeddings))
    };
    let (gpu, gpu_embeddings) = outcomes(Backend::Gpu)?;
    let (cpu, cpu_embeddings) = outcomes(Backend::Cpu)?;
    let expected = serde_json::json!({
        "gpu": gpu,
        "cpu": cpu,
        "embeddings": {
            "request": serde_json::from_str::<serde_json::Value>(EMBEDDINGS_REQUEST).expect("JSON"),
            "gpu": gpu_embeddings,
            "cpu": cpu_embeddings,
        },
    });
    std::fs::write(dir.join("api_expected.json"), expected.to_string())
        .map_err(|e| pocketrt::Error::io(dir, e))
}

/// A byte-level tokenizer.json: byte tokens, the chat specials, then placeholders up to
/// `vocab` tokens, so every id a model can produce decodes.
fn vocabulary_json(vocab: usize) -> String {
    let mut names: Vec<String> = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]
        .map(String::from)
        .to_vec();
    names.extend((256 + names.len()..vocab).map(|i| format!("<|extra_{i}|>")));
    let specials: Vec<&str> = names.iter().map(String::as_str).collect();
    byte_level_json(&specials)
}

/// `src` as a Q4_1 GGUF at `path`, with `tok` and the chat template in its metadata.
fn write_gguf(src: &SynthSource, tok: &Tokenizer, path: &Path) -> pocketrt::Result<()> {
    write_gguf_with_q8_0(src, tok, path, &[])
}

/// [`write_gguf`] with the matrices named in `q8_0` as Q8_0.
fn write_gguf_with_q8_0(
    src: &SynthSource,
    tok: &Tokenizer,
    path: &Path,
    q8_0: &[&str],
) -> pocketrt::Result<()> {
    let mut writer = src.gguf_writer_with_q8_0(q8_0)?;
    for (key, value) in tokenizer_metadata(tok, TEMPLATE) {
        writer.meta(&key, value);
    }
    let file = std::fs::File::create(path).map_err(|e| pocketrt::Error::io(path, e))?;
    writer.write_to(std::io::BufWriter::new(file))
}

/// The native engine's greedy continuation of the prompt for the model at `path` on
/// `backend`, up to the first end-of-sequence token: (prompt ids, tokens, engine
/// description).
fn native_greedy(
    path: &Path,
    tok: &Tokenizer,
    backend: Backend,
    weights: WeightMode,
) -> pocketrt::Result<(Vec<u32>, Vec<u32>, String)> {
    native_greedy_on(path, tok, |src| Engine::load(src, backend, weights, 64))
}

/// [`native_greedy`] on the GPU in the `swiftshader` profile (the browser's WebGPU is
/// SwiftShader: its profile's kernels, for the same sums), `weights` as stored.
fn native_greedy_swiftshader(
    path: &Path,
    tok: &Tokenizer,
    weights: WeightFormat,
) -> pocketrt::Result<(Vec<u32>, Vec<u32>, String)> {
    native_greedy_on(path, tok, |src| {
        let need = pocketrt::gpu::weights::limits_needed(src.config(), 64, true);
        let ctx = ProfiledContext::open_blocking(need)?.with_profile("swiftshader")?;
        Engine::load_on_gpu_as(std::sync::Arc::new(ctx), src, 64, weights)
    })
}

/// [`native_greedy`] on the engine `load` makes.
fn native_greedy_on(
    path: &Path,
    tok: &Tokenizer,
    load: impl FnOnce(&mut dyn pocketrt::format::ModelSource) -> pocketrt::Result<Engine>,
) -> pocketrt::Result<(Vec<u32>, Vec<u32>, String)> {
    let prompt_ids = tok.encode(PROMPT, true);
    let mut src = pocketrt::format::open(path)?;
    let mut eos = src.config().eos_token_ids.clone();
    eos.extend_from_slice(tok.eos_ids());
    let mut engine = load(src.as_mut())?;
    let mut tokens = engine.greedy(&prompt_ids, TOKENS, |_| true)?;
    if let Some(end) = tokens.iter().position(|t| eos.contains(t)) {
        tokens.truncate(end);
    }
    Ok((prompt_ids, tokens, engine.description().to_string()))
}

/// The native GPU engine's tokens for the prompt sampled with [`SAMPLED`] in the `gpu`
/// profile (the browser test forces it on SwiftShader), up to [`TOKENS`] and before an
/// end of sequence: drawn on the GPU from the top-k, pipelined ([`Engine::sampled_from`],
/// as the browser's plain sampling), and drawn on the host step by step
/// ([`Engine::step_sampled`]); equal but where f32 rounding moves a draw across a
/// boundary.
fn native_sampled(path: &Path, tok: &Tokenizer) -> pocketrt::Result<[Vec<u32>; 2]> {
    let (temperature, top_k, top_p, seed) = SAMPLED;
    let config = SamplerConfig {
        temperature,
        top_k,
        top_p,
        seed,
        ..SamplerConfig::greedy()
    };
    let prompt_ids = tok.encode(PROMPT, true);
    let (&last, head) = prompt_ids.split_last().expect("a prompt");
    let mut src = pocketrt::format::open(path)?;
    let mut eos = src.config().eos_token_ids.clone();
    eos.extend_from_slice(tok.eos_ids());
    let need = pocketrt::gpu::weights::limits_needed(src.config(), 64, true);
    let ctx = std::sync::Arc::new(ProfiledContext::open_blocking(need)?.with_profile("gpu")?);
    let mut runs = [vec![], vec![]];
    for (i, tokens) in runs.iter_mut().enumerate() {
        let mut engine = Engine::load_on_gpu(ctx.clone(), src.as_mut(), 64)?;
        engine.feed_all(head)?;
        let mut sampler = Sampler::new(config.clone())?;
        // Take `t` unless it ends the sequence; go on while short of TOKENS.
        let mut keep = |t: u32| {
            if eos.contains(&t) {
                return false;
            }
            tokens.push(t);
            tokens.len() < TOKENS
        };
        match i {
            0 => {
                let mut draws = engine.gpu_draws(&sampler).expect("plain sampling");
                engine.sampled_from(last, &mut draws, |t, _| Ok(keep(t)))?;
            }
            _ => {
                let mut t = last;
                loop {
                    t = engine.step_sampled(t, &mut sampler)?;
                    if !keep(t) {
                        break;
                    }
                }
            }
        }
    }
    Ok(runs)
}

/// `tokenizer.ggml.*` metadata for a byte-level tokenizer without merges (llama.cpp's
/// "gpt2" model; special tokens as control tokens) and the chat template (the end-of-text
/// id is the synthetic config's, already in the metadata).
fn tokenizer_metadata(tok: &Tokenizer, template: &str) -> Vec<(String, MetaValue)> {
    let ids = 0..tok.vocab_size() as u32;
    let tokens = ids
        .clone()
        .map(|i| MetaValue::String(tok.id_to_token(i).unwrap_or_default().to_string()))
        .collect();
    let types = ids
        .map(|i| MetaValue::I32(if tok.is_special(i) { 3 } else { 1 }))
        .collect();
    let s = |v: &str| MetaValue::String(v.to_string());
    vec![
        ("tokenizer.ggml.model".to_string(), s("gpt2")),
        ("tokenizer.ggml.pre".to_string(), s("qwen2")),
        (
            "tokenizer.ggml.tokens".to_string(),
            MetaValue::Array(tokens),
        ),
        (
            "tokenizer.ggml.token_type".to_string(),
            MetaValue::Array(types),
        ),
        (
            "tokenizer.ggml.merges".to_string(),
            MetaValue::Array(Vec::new()),
        ),
        ("tokenizer.chat_template".to_string(), s(template)),
    ]
}
