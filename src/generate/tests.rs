//! Sessions on a random in-memory model (the reference backend): cache reuse equals a fresh run,
//! rollback on divergence, and every finish reason.

use super::*;
use crate::config::{Arch, ModelConfig};
use crate::cpu::{MemorySource, WeightMode};
use crate::engine::Backend;
use crate::sampler::Sampler;
use crate::tokenizer::{byte_level_json, StreamDecoder};

const SPECIALS: [&str; 4] = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|spare|>"];
const TEMPLATE: &str = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}\
<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

fn session(context: usize, eos: Option<u32>) -> Session {
    let mut tok = Tokenizer::from_hf_json(&byte_level_json(&SPECIALS)).unwrap();
    tok.set_eos_ids(eos.into_iter().collect()).unwrap();
    Session::new(
        engine(context),
        tok,
        Some(ChatTemplate::new(TEMPLATE).unwrap()),
    )
}

fn engine(context: usize) -> Engine {
    let config = ModelConfig {
        arch: Arch::Qwen3,
        hidden_size: 64,
        n_layers: 2,
        n_heads: 2,
        n_kv_heads: 1,
        head_dim: 32,
        ffn_size: 128,
        vocab_size: 256 + SPECIALS.len(),
        rope_theta: 1e6,
        rms_eps: 1e-6,
        max_context: 512,
        tie_embeddings: true,
        qkv_bias: false,
        qk_norm: true,
        bos_token_id: None,
        eos_token_ids: vec![],
        pad_token_id: None,
    };
    let mut src = MemorySource::random(config, 17, 0.5).unwrap();
    Engine::load(&mut src, Backend::Reference, WeightMode::F32, context).unwrap()
}

fn opts(max_tokens: usize) -> GenerateOptions {
    GenerateOptions {
        max_tokens,
        sampler: SamplerConfig::greedy(),
        ..Default::default()
    }
}

fn run(s: &mut Session, tokens: &[u32], n: usize) -> (String, GenerateStats) {
    s.generate(tokens, &opts(n), |_| true).unwrap()
}

#[test]
fn a_request_extending_the_cache_processes_only_new_tokens() {
    let mut s = session(128, None);
    let a: Vec<u32> = b"The quick brown fox"
        .iter()
        .map(|&b| u32::from(b))
        .collect();
    let (_, first) = run(&mut s, &a, 8);
    assert_eq!((first.reused_tokens, first.generated_tokens), (0, 8));
    // The cache holds the prompt and the 7 generated tokens that were fed back.
    assert_eq!(s.cached_tokens(), a.len() + 7);
    let mut b = s.cached.clone();
    b.extend([b'!', b'?'].map(u32::from));
    let (text, stats) = run(&mut s, &b, 6);
    assert_eq!(stats.reused_tokens, a.len() + 7);
    let (fresh_text, fresh) = run(&mut session(128, None), &b, 6);
    assert_eq!(fresh.reused_tokens, 0);
    assert_eq!(
        text, fresh_text,
        "reused cache must give the fresh run's tokens"
    );
}

#[test]
fn a_diverging_request_rolls_back_to_the_common_prefix() {
    let mut s = session(128, None);
    let ids = |t: &[u8]| t.iter().map(|&b| u32::from(b)).collect::<Vec<u32>>();
    run(&mut s, &ids(b"shared prefix, then one way"), 5);
    let other = ids(b"shared prefix, and another");
    let (text, stats) = run(&mut s, &other, 5);
    assert_eq!(stats.reused_tokens, b"shared prefix, ".len());
    assert_eq!(text, run(&mut session(128, None), &other, 5).0);
    // The very same request again reuses all but the last token.
    let (again, stats) = run(&mut s, &other, 5);
    assert_eq!((stats.reused_tokens, again), (other.len() - 1, text));
}

#[test]
fn generation_ends_with_the_right_reason() {
    let prompt: Vec<u32> = (40..52).collect();
    let (_, stats) = run(&mut session(64, None), &prompt, 5);
    assert_eq!(
        (stats.finish, stats.generated_tokens),
        (FinishReason::MaxTokens, 5)
    );
    // A context of prompt + 3 positions: 4 tokens come out (the last is never fed).
    let (_, stats) = run(&mut session(prompt.len() + 3, None), &prompt, 100);
    assert_eq!(
        (stats.finish, stats.generated_tokens),
        (FinishReason::ContextFull, 4)
    );
    // The callback stops it.
    let mut calls = 0;
    let (_, stats) = session(64, None)
        .generate(&prompt, &opts(50), |_| {
            calls += 1;
            calls < 3
        })
        .unwrap();
    assert_eq!(stats.finish, FinishReason::Stopped);
    // End of sequence: make the greedy first token the eos id.
    let mut engine = session(64, None).engine;
    let first = engine.greedy(&prompt, 1, |_| true).unwrap()[0];
    let mut s2 = session(64, Some(first));
    let (text, stats) = run(&mut s2, &prompt, 10);
    assert_eq!(
        (stats.finish, stats.generated_tokens, text.as_str()),
        (FinishReason::Eos, 0, "")
    );
}

#[test]
fn bad_requests_are_typed_errors() {
    let mut s = session(16, None);
    let long: Vec<u32> = (0..17).collect();
    assert!(matches!(
        s.generate(&long, &opts(4), |_| true),
        Err(Error::ContextTooLong {
            position: 17,
            context: 16
        })
    ));
    assert!(matches!(
        s.generate(&[], &opts(4), |_| true),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        s.generate(&[1], &opts(0), |_| true),
        Err(Error::InvalidArgument(_))
    ));
    let mut bad = opts(4);
    bad.sampler.temperature = f32::NAN;
    assert!(matches!(
        s.generate(&[1], &bad, |_| true),
        Err(Error::InvalidArgument(_))
    ));
    s.template = None;
    assert!(matches!(
        s.chat("hi", &opts(4), |_| true),
        Err(Error::ChatTemplate(_))
    ));
}

#[test]
fn a_second_chat_turn_reuses_the_first_turns_cache() {
    let mut s = session(256, None);
    let (reply, first) = s.chat("Hello there", &opts(6), |_| true).unwrap();
    assert_eq!(first.reused_tokens, 0);
    assert_eq!(s.messages().len(), 2);
    assert_eq!(s.messages()[1].content, reply.trim());
    let (_, second) = s.chat("And again", &opts(6), |_| true).unwrap();
    // Everything up to the first reply is reused (the reply itself re-renders into the
    // same tokens up to where it was cut).
    assert!(
        second.reused_tokens >= first.prompt_tokens,
        "reused {} of {} (first prompt {})",
        second.reused_tokens,
        second.prompt_tokens,
        first.prompt_tokens
    );
    assert!(second.prompt_tokens > second.reused_tokens);
}

#[test]
fn seeded_sampling_is_reproducible_and_differs_from_greedy() {
    let prompt: Vec<u32> = (60..70).collect();
    let sampled = |seed| {
        let o = GenerateOptions {
            max_tokens: 24,
            sampler: SamplerConfig {
                temperature: 1.5,
                top_k: 0,
                top_p: 1.0,
                seed,
                ..SamplerConfig::greedy()
            },
            ..Default::default()
        };
        session(64, None).generate(&prompt, &o, |_| true).unwrap().0
    };
    assert_eq!(sampled(1), sampled(1));
    assert_ne!(sampled(1), sampled(2));
    assert_ne!(sampled(1), run(&mut session(64, None), &prompt, 24).0);
}

#[test]
fn sliding_window_overflow_keeps_the_newest_tokens_and_the_default_is_an_error() {
    let long: Vec<u32> = (0..40).map(|i| 60 + i % 30).collect();
    // Default policy: the typed error.
    assert!(matches!(
        session(32, None).generate(&long, &opts(4), |_| true),
        Err(Error::ContextTooLong { context: 32, .. })
    ));
    // Sliding window: the newest 32 - 4 tokens are the prompt, as if sent alone.
    let slide = GenerateOptions {
        overflow: ContextOverflow::SlidingWindow { keep: 0 },
        ..opts(4)
    };
    let (text, stats) = session(32, None).generate(&long, &slide, |_| true).unwrap();
    assert_eq!(stats.prompt_tokens, 28);
    assert_eq!(stats.generated_tokens, 4);
    let (want, _) = run(&mut session(32, None), &long[12..], 4);
    assert_eq!(text, want);
    // max_tokens above half the context still keeps half the context as history.
    assert_eq!(
        GenerateOptions {
            max_tokens: 100,
            ..slide.clone()
        }
        .window(&long, 32)
        .len(),
        16
    );
    // A request that fits is untouched.
    assert_eq!(slide.window(&long[..20], 32).len(), 20);
}

#[test]
fn penalties_see_the_prompt_and_each_generated_token() {
    const N: usize = 24;
    let prompt: Vec<u32> = (60..70).chain(60..70).collect();
    let config = SamplerConfig {
        repetition_penalty: 1.5,
        presence_penalty: 2.0,
        penalty_last_n: 64,
        ..SamplerConfig::greedy()
    };
    let o = GenerateOptions {
        max_tokens: N,
        sampler: config.clone(),
        ..Default::default()
    };
    let mut s = session(64, None);
    let (text, _) = s.generate(&prompt, &o, |_| true).unwrap();
    // The same steps by hand, the sampler observing the prompt and the tokens (or not).
    let by_hand = |observe_prompt: bool, observe_tokens: bool| {
        let (mut e, mut sampler) = (engine(64), Sampler::new(config.clone()).unwrap());
        if observe_prompt {
            sampler.observe(&prompt);
        }
        let (&last, head) = prompt.split_last().unwrap();
        e.feed_all(head).unwrap();
        let mut token = last;
        let out: Vec<u32> = (0..N)
            .map(|_| {
                token = e.step_sampled(token, &mut sampler).unwrap();
                if observe_tokens {
                    sampler.observe(&[token]);
                }
                token
            })
            .collect();
        let bytes = s.tokenizer().decode_bytes(&out, true).unwrap();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    assert_eq!(text, by_hand(true, true));
    assert_ne!(text, by_hand(false, true));
    assert_ne!(text, by_hand(true, false));
}

/// What a sliding window over `prompt` generates, by hand: fresh greedy runs on the
/// oracle engine, each until the cache is full, the sequence then shortened as
/// [`ContextOverflow::SlidingWindow`] says (first `keep`, oldest half of the rest gone).
fn slid_by_hand(prompt: &[u32], keep: usize, n: usize, context: usize) -> Vec<u32> {
    let (mut seq, mut out) = (prompt.to_vec(), vec![]);
    while out.len() < n {
        // A run from `seq` fits `context + 1 - seq.len()` tokens (the last is not fed).
        let room = (context + 1 - seq.len()).min(n - out.len());
        let got = engine(context).greedy(&seq, room, |_| true).unwrap();
        seq.extend(&got);
        out.extend(&got);
        if seq.len() > context {
            let front = keep.min(context / 2);
            let drop = (seq.len() - front) / 2;
            seq.drain(front..front + drop);
        }
    }
    out
}

fn text_of(s: &Session, tokens: &[u32]) -> String {
    let mut d = StreamDecoder::new(true);
    let mut text: String = tokens
        .iter()
        .map(|&t| d.push(s.tokenizer(), t).unwrap())
        .collect();
    text.push_str(&d.flush());
    text
}

#[test]
fn a_sliding_window_shifts_the_context_and_generates_what_fresh_runs_would() {
    const CONTEXT: usize = 32;
    const N: usize = 100;
    let prompt: Vec<u32> = (70..80).collect();
    let slide = GenerateOptions {
        overflow: ContextOverflow::SlidingWindow { keep: 4 },
        ..opts(N)
    };
    let mut s = session(CONTEXT, None);
    let (text, stats) = s.generate(&prompt, &slide, |_| true).unwrap();
    assert_eq!(
        (stats.finish, stats.generated_tokens),
        (FinishReason::MaxTokens, N)
    );
    // The first shift after 23 tokens (10 + 23 = 33: the cache full and one token
    // waiting), then every 14 (4 + 14 kept, and the waiting one): 6 shifts by 100.
    assert_eq!(stats.context_shifts, 6);
    assert_eq!(
        &s.cached()[..4],
        &prompt[..4],
        "the first `keep` tokens stay"
    );
    assert!(s.cached_tokens() <= CONTEXT);
    let want = slid_by_hand(&prompt, 4, N, CONTEXT);
    assert_eq!(text, text_of(&s, &want));
    // Without keep the window slides over the prompt too.
    let slide0 = GenerateOptions {
        overflow: ContextOverflow::SlidingWindow { keep: 0 },
        ..opts(N)
    };
    let (text0, _) = session(CONTEXT, None)
        .generate(&prompt, &slide0, |_| true)
        .unwrap();
    assert_eq!(text0, text_of(&s, &slid_by_hand(&prompt, 0, N, CONTEXT)));
    assert_ne!(text0, text, "keep changes what the model sees");
}

#[test]
fn a_sampled_reply_slides_too_and_a_long_prompt_keeps_its_first_tokens() {
    let sampled = GenerateOptions {
        overflow: ContextOverflow::SlidingWindow { keep: 3 },
        sampler: SamplerConfig {
            temperature: 1.0,
            top_k: 8,
            seed: 5,
            ..SamplerConfig::greedy()
        },
        ..opts(80)
    };
    let (_, stats) = session(16, None)
        .generate(&[65, 66, 67], &sampled, |_| true)
        .unwrap();
    assert_eq!(
        (stats.generated_tokens, stats.finish),
        (80, FinishReason::MaxTokens)
    );
    assert!(stats.context_shifts > 5, "{stats:?}");
    // A prompt over the context: its first 3 tokens and the newest 32 - 4 - 3.
    let long: Vec<u32> = (0..40).map(|i| 60 + i % 30).collect();
    let w = GenerateOptions {
        overflow: ContextOverflow::SlidingWindow { keep: 3 },
        ..opts(4)
    };
    let window = w.window(&long, 32);
    assert_eq!(&window[..3], &long[..3]);
    assert_eq!(&window[3..], &long[40 - 25..]);
    // `keep` is at most half the window.
    let w = GenerateOptions {
        overflow: ContextOverflow::SlidingWindow { keep: 100 },
        ..opts(4)
    };
    assert_eq!(w.window(&long, 32).len(), 28);
    assert_eq!(&w.window(&long, 32)[..14], &long[..14]);
}
