//! The GPU engine's KV cache reused across requests, in every device profile forced on the
//! test adapter: a request that extends the cached tokens processes only the new ones
//! (batched prefill where the profile has it, then decode), one that diverges rewinds to
//! the common prefix and overwrites the rest; each continuation equals a fresh run of the
//! whole request on the CPU oracle (Q4 weights), greedy token for token. Session snapshots
//! of a GPU session (f16 rows, `pocketrt::session`) restore into a fresh GPU session that
//! continues exactly as the uninterrupted one, and into the CPU backend by a prefill.
//! Decoding pipelined one step ahead (natively in a loop, in the browser one awaited step
//! at a time; greedy and sampled with a seed) gives step-by-step decoding's tokens.

mod api_common;
mod gpu_common;

use gpu_common::{profiles, Rng};
use pocketrt::cpu::WeightMode;
use pocketrt::engine::{Backend, Engine};
use pocketrt::format::open;
use std::path::PathBuf;

const CONTEXT: usize = 128;
const NEW: usize = 6;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/oracle/llama")
}

/// The oracle's greedy continuation of the whole of `tokens`, from an empty cache.
fn fresh(tokens: &[u32]) -> Vec<u32> {
    let src = &mut *open(&fixture()).unwrap();
    let mut e = Engine::load(src, Backend::Reference, WeightMode::Q4, CONTEXT).unwrap();
    e.greedy(tokens, NEW, |_| true).unwrap()
}

#[test]
fn gpu_cache_reuse_and_rollback_continue_like_a_fresh_oracle_run() {
    let mut rng = Rng::new(3);
    let vocab = 512;
    let a: Vec<u32> = (0..40).map(|_| (rng.next_u64() % vocab) as u32).collect();
    for ctx in profiles() {
        let name = ctx.profile.name;
        let src = &mut *open(&fixture()).unwrap();
        let mut gpu = Engine::load_on_gpu(ctx.clone(), src, CONTEXT).unwrap();
        assert_eq!(gpu.config().vocab_size as u64, vocab);
        let first = gpu.greedy(&a, NEW, |_| true).unwrap();
        assert_eq!(first, fresh(&a), "{name}: first request");
        // The cache holds the prompt and the generated tokens that were fed back.
        assert_eq!(gpu.position(), a.len() + NEW - 1, "{name}");

        // Extend: only the tokens after the cached ones are processed.
        let mut b = a.clone();
        b.extend(&first[..NEW - 1]);
        b.extend([7, 11, 13]);
        let reused = gpu.position();
        let second = gpu.greedy(&b[reused..], NEW, |_| true).unwrap();
        assert_eq!(second, fresh(&b), "{name}: extended request");

        // Diverge after 20 tokens: rewind and overwrite the rest of the cache.
        let mut c = a[..20].to_vec();
        c.extend([3, 5, 8, 21, 34, 55, 89, 144]);
        gpu.rewind(20);
        let third = gpu.greedy(&c[20..], NEW, |_| true).unwrap();
        assert_eq!(third, fresh(&c), "{name}: diverging request");
        println!("{name}: {first:?} {second:?} {third:?}");
    }
}

/// Run `decode` (pipelined decoding from token 5 at position 0, its tokens handed to the
/// callback it gets) on `model` until it has `want.len()` tokens, and check them against
/// `want`, with every read made while the next step was already submitted (one submit
/// per token, plus the discarded step ahead of the last).
fn assert_pipelined(
    name: &str,
    mut model: pocketrt::gpu::GpuModel,
    want: &[u32],
    decode: impl FnOnce(
        &mut pocketrt::gpu::GpuModel,
        &mut dyn FnMut(u32, usize) -> pocketrt::Result<bool>,
    ) -> pocketrt::Result<usize>,
) {
    let n = want.len();
    let mut got = vec![];
    let kept = decode(&mut model, &mut |t, position| {
        got.push(t);
        assert_eq!(
            position,
            got.len(),
            "{name}: the cache length after the step"
        );
        Ok(got.len() < n)
    })
    .unwrap();
    assert_eq!((kept, &got[..]), (n, want), "{name}");
    assert_eq!(
        model.overlapped_reads(),
        n as u64,
        "{name}: every read overlapped"
    );
    assert_eq!(
        model.submits(),
        n as u64 + 1,
        "{name}: one step ahead of the last"
    );
}

/// Greedy decoding pipelined one step ahead gives step-by-step decoding's tokens in every
/// profile, with every token read while the next step is already submitted (one submit per
/// token, plus the discarded step ahead of the last); a stop discards that step without
/// harm to what follows; the end of the context is a typed error.
#[test]
fn pipelined_greedy_decoding_equals_step_by_step_and_never_waits_before_submitting() {
    const N: usize = 12;
    for ctx in profiles() {
        let name = ctx.profile.name;
        let load = |context| {
            let src = &mut *open(&fixture()).unwrap();
            pocketrt::gpu::GpuModel::load(ctx.clone(), src, context).unwrap()
        };
        let mut stepper = load(CONTEXT);
        let mut want = vec![stepper.decode(5, 0).unwrap()];
        for pos in 1..N {
            want.push(stepper.decode(want[pos - 1], pos).unwrap());
        }

        assert_pipelined(name, load(CONTEXT), &want, |m, on_token| {
            m.greedy_pipelined(5, 0, on_token)
        });

        // Stop after 4 tokens, then go on step by step from there: the step submitted
        // ahead (position 4, discarded) is overwritten.
        let mut model = load(CONTEXT);
        let mut head = vec![];
        let kept = model
            .greedy_pipelined(5, 0, |t, _| {
                head.push(t);
                Ok(head.len() < 4)
            })
            .unwrap();
        assert_eq!((kept, &head[..]), (4, &want[..4]), "{name}");
        for pos in 4..N {
            let t = model.decode(head[pos - 1], pos).unwrap();
            head.push(t);
        }
        assert_eq!(head, want, "{name}: decoding after a pipelined stop");

        // A 6-position context: the sixth token has no room to be fed.
        let mut short = load(6);
        let r = short.greedy_pipelined(5, 0, |_, _| Ok(true));
        assert!(
            matches!(r, Err(pocketrt::Error::ContextTooLong { context: 6, .. })),
            "{name}: {r:?}"
        );
        assert_eq!(
            short.overlapped_reads(),
            5,
            "{name}: no step ahead at the end"
        );
    }
}

/// Sampled decoding pipelined one step ahead (each token drawn on the GPU from its
/// top-k with the seeded generator's number) gives step-by-step sampled decoding's tokens
/// (the CPU's draw from the same GPU candidates) in every profile, with every token read
/// while the next step is already submitted; a stop discards the step ahead, and a
/// continuation with the generator advanced past the stopped steps' draws goes on alike.
#[test]
fn pipelined_sampled_decoding_equals_step_by_step_and_never_waits_before_submitting() {
    use pocketrt::sampler::Sampler;
    const N: usize = 16;
    let config = sampling(99);
    for ctx in profiles() {
        let name = ctx.profile.name;
        let load = || {
            let src = &mut *open(&fixture()).unwrap();
            pocketrt::gpu::GpuModel::load(ctx.clone(), src, CONTEXT).unwrap()
        };
        let mut stepper = load();
        let mut sampler = Sampler::new(config.clone()).unwrap();
        let mut want = vec![];
        let mut token = 5;
        for pos in 0..N {
            let (sorted, log_z) = stepper.decode_topk(token, pos, &mut sampler).unwrap();
            token = sampler.sample_sorted(&sorted, log_z).unwrap();
            want.push(token);
        }
        let draws = || Sampler::new(config.clone()).unwrap().gpu_draws(64).unwrap();

        assert_pipelined(name, load(), &want, |m, on_token| {
            m.sampled_pipelined(5, 0, &mut draws(), on_token)
        });

        let mut model = load();
        let mut head = vec![];
        let kept = model
            .sampled_pipelined(5, 0, &mut draws(), |t, _| {
                head.push(t);
                Ok(head.len() < 4)
            })
            .unwrap();
        assert_eq!((kept, &head[..]), (4, &want[..4]), "{name}");
        let mut rest = draws();
        (0..4).for_each(|_| {
            rest.next_uniform();
        });
        model
            .sampled_pipelined(head[3], 4, &mut rest, |t, _| {
                head.push(t);
                Ok(head.len() < N)
            })
            .unwrap();
        assert_eq!(head, want, "{name}: decoding after a pipelined stop");
        // Spread over many tokens: not greedy.
        let mut distinct = want.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert!(distinct.len() > N / 2, "{name}: {want:?}");
    }
}

/// The browser's prompt feeding (`feed_all_async`, awaited instead of blocking): after
/// every prompt step at most `MAX_IN_FLIGHT` command buffers are in flight, and the cache
/// ends as the blocking feed leaves it (the same next logits); batched prefill through
/// the awaited path continues like it too.
/// The browser's awaited pipelined step (`decode_ahead_async`, its readback awaited with
/// the next step already submitted): step by step it gives `decode`'s tokens with every
/// read overlapped; a step ahead made stale — another token at its position, a snapshot's
/// rows written under it, a prompt token fed — is never used: each continues as a model
/// that never had it.
#[test]
fn awaited_pipelined_steps_equal_decode_and_a_stale_step_ahead_is_never_used() {
    use pollster::block_on;
    const N: usize = 10;
    for ctx in profiles() {
        let name = ctx.profile.name;
        let load = || {
            let src = &mut *open(&fixture()).unwrap();
            pocketrt::gpu::GpuModel::load(ctx.clone(), src, CONTEXT).unwrap()
        };
        let (mut plain, mut model) = (load(), load());
        let (mut want, mut got) = (vec![5u32], vec![5u32]);
        for pos in 0..N {
            want.push(plain.decode(want[pos], pos).unwrap());
            got.push(block_on(model.decode_ahead_async(got[pos], pos)).unwrap());
        }
        assert_eq!(got, want, "{name}: pipelined steps");
        assert_eq!(
            model.overlapped_reads(),
            N as u64,
            "{name}: every read overlapped"
        );

        // Another token than the GPU's at the position ahead: computed afresh.
        let other = (want[N] + 1) % 512;
        let a = block_on(model.decode_ahead_async(other, N)).unwrap();
        assert_eq!(a, plain.decode(other, N).unwrap(), "{name}: another token");

        // Rows written under the step ahead (a snapshot restore): the rows of a model that
        // ran another history, then the step ahead's token and position: as that model
        // goes on, its token and its cache rows (a token may survive a stale row; its
        // K/V do not).
        let same_rows = |m: &pocketrt::gpu::GpuModel, e: &pocketrt::gpu::GpuModel, n| {
            block_on(m.read_kv_async(0, n)).unwrap() == block_on(e.read_kv_async(0, n)).unwrap()
        };
        let mut elsewhere = load();
        let mut t = 9;
        for pos in 0..=N {
            t = elsewhere.decode(t, pos).unwrap();
        }
        let rows = block_on(elsewhere.read_kv_async(0, N + 1)).unwrap();
        model.write_kv(0, N + 1, &rows).unwrap();
        let b = block_on(model.decode_ahead_async(a, N + 1)).unwrap();
        let want_b = elsewhere.decode(a, N + 1).unwrap();
        assert_eq!(b, want_b, "{name}: rows written");
        assert!(same_rows(&model, &elsewhere, N + 2), "{name}: rows written");

        // Another token fed at the last step's position (its row rewritten), then the
        // step ahead's own token and position.
        model.feed(7, N + 1).unwrap();
        elsewhere.feed(7, N + 1).unwrap();
        let c = block_on(model.decode_ahead_async(b, N + 2)).unwrap();
        assert_eq!(
            c,
            elsewhere.decode(b, N + 2).unwrap(),
            "{name}: a token fed"
        );
        assert!(same_rows(&model, &elsewhere, N + 3), "{name}: a token fed");
    }
}

/// The browser's awaited pipelined sampled step (`sampled_ahead_async`: each token drawn
/// on the GPU from its top-k with the sampler's next number, the next step submitted with
/// the number after before the token is awaited): with a seed it gives the non-pipelined
/// path's tokens (`decode_topk_async`, drawn on the host with the same generator) with
/// every read overlapped; a step ahead made stale — another sampler, another token at its
/// position, a snapshot's rows written under it, a greedy step — is never used.
#[test]
fn awaited_pipelined_sampled_steps_equal_host_draws_and_a_stale_draw_ahead_is_never_used() {
    use pocketrt::gpu::GpuModel;
    use pocketrt::sampler::{Sampler, SamplerConfig};
    use pollster::block_on;
    const N: usize = 12;
    let config = sampling(99);
    let sampler = |seed| {
        Sampler::new(SamplerConfig {
            seed,
            ..config.clone()
        })
        .unwrap()
    };
    // As the browser's step: drawn on the GPU, the sampler going on past the draw.
    let pipelined = |m: &mut GpuModel, s: &mut Sampler, token, pos| {
        let mut draws = s.gpu_draws(64).expect("plain sampling draws on the GPU");
        let t = block_on(m.sampled_ahead_async(token, pos, &mut draws)).unwrap();
        s.resume_after(draws);
        t
    };
    let host = |m: &mut GpuModel, s: &mut Sampler, token, pos| {
        let (sorted, log_z) = block_on(m.decode_topk_async(token, pos, s)).unwrap();
        s.sample_sorted(&sorted, log_z).unwrap()
    };
    for ctx in profiles() {
        let name = ctx.profile.name;
        let load = || {
            let src = &mut *open(&fixture()).unwrap();
            GpuModel::load(ctx.clone(), src, CONTEXT).unwrap()
        };
        let (mut plain, mut model) = (load(), load());
        let (mut s_plain, mut s_model) = (sampler(99), sampler(99));
        let (mut want, mut got) = (vec![5u32], vec![5u32]);
        for pos in 0..N {
            want.push(host(&mut plain, &mut s_plain, want[pos], pos));
            got.push(pipelined(&mut model, &mut s_model, got[pos], pos));
        }
        assert_eq!(got, want, "{name}: pipelined sampled steps");
        assert_eq!(
            model.overlapped_reads(),
            N as u64,
            "{name}: every read overlapped"
        );
        let mut distinct = want.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert!(distinct.len() > N / 2, "{name}: not greedy: {want:?}");

        // Another sampler (another seed) at the step ahead's token and position: its own
        // draw, not the one made ahead with the first sampler's number.
        let (mut other, mut other_plain) = (sampler(7), sampler(7));
        let a = pipelined(&mut model, &mut other, want[N], N);
        assert_eq!(
            a,
            host(&mut plain, &mut other_plain, want[N], N),
            "{name}: another sampler"
        );

        // The same sampler, another token than the GPU's at the position ahead.
        let t = (a + 1) % 512;
        let b = pipelined(&mut model, &mut other, t, N + 1);
        assert_eq!(
            b,
            host(&mut plain, &mut other_plain, t, N + 1),
            "{name}: another token"
        );

        // Rows written under the step ahead (a snapshot restore): as the model whose rows
        // they are goes on with the step ahead's token, position and sampler.
        let mut elsewhere = load();
        let mut e = 9;
        for pos in 0..N + 2 {
            e = elsewhere.decode(e, pos).unwrap();
        }
        let rows = block_on(elsewhere.read_kv_async(0, N + 2)).unwrap();
        model.write_kv(0, N + 2, &rows).unwrap();
        let mut other_elsewhere = other_plain.clone();
        let c = pipelined(&mut model, &mut other, b, N + 2);
        let want_c = host(&mut elsewhere, &mut other_elsewhere, b, N + 2);
        assert_eq!(c, want_c, "{name}: rows written");

        // A greedy step at the sampled step ahead's token and position: the argmax.
        let d = block_on(model.decode_ahead_async(c, N + 3)).unwrap();
        assert_eq!(
            d,
            elsewhere.decode(c, N + 3).unwrap(),
            "{name}: a greedy step"
        );
        // And a sampled step at the greedy step ahead's: drawn, with the sampler's number.
        let e = pipelined(&mut model, &mut other, d, N + 4);
        let want_e = host(&mut elsewhere, &mut other_elsewhere, d, N + 4);
        assert_eq!(e, want_e, "{name}: a sampled step after a greedy one");
    }
}

#[test]
fn awaited_prompt_feeding_keeps_at_most_max_in_flight_queued() {
    use pocketrt::gpu::forward::MAX_IN_FLIGHT;
    let ctx = &profiles()[0];
    let load = || {
        let src = &mut *open(&fixture()).unwrap();
        pocketrt::gpu::GpuModel::load(ctx.clone(), src, CONTEXT).unwrap()
    };
    let mut rng = Rng::new(9);
    let tokens: Vec<u32> = (0..3 * MAX_IN_FLIGHT)
        .map(|_| (rng.next_u64() % 512) as u32)
        .collect();
    let mut awaited = load();
    let mut most = 0;
    for (pos, &t) in tokens.iter().enumerate() {
        pollster::block_on(awaited.feed_async(t, pos)).unwrap();
        most = most.max(awaited.in_flight());
    }
    assert_eq!(most, MAX_IN_FLIGHT, "prompt steps in flight");
    let n = tokens.len();
    let (_, got) = awaited.decode_with_logits(7, n).unwrap();
    let mut blocking = load();
    for (pos, &t) in tokens.iter().enumerate() {
        blocking.feed(t, pos).unwrap();
    }
    let (_, want) = blocking.decode_with_logits(7, n).unwrap();
    assert_eq!(got, want, "the awaited feed's cache");
    let mut chunked = load();
    pollster::block_on(chunked.feed_all_async(&tokens, 0)).unwrap();
    assert!(chunked.in_flight() <= MAX_IN_FLIGHT);
    let (_, after) = chunked.decode_with_logits(7, n).unwrap();
    let rel = gpu_common::logits_rel(ctx.profile.shader_f16);
    gpu_common::assert_close("awaited prefill", &after, &want, rel, 1e-4);
}

/// A chat session on `engine` with the API fixtures' tokenizer and template.
fn chat_session(engine: Engine) -> pocketrt::generate::Session {
    let template = pocketrt::tokenizer::ChatTemplate::new(api_common::TEMPLATE).unwrap();
    pocketrt::generate::Session::new(engine, api_common::tokenizer(), Some(template))
}

fn gpu_chat_session() -> pocketrt::generate::Session {
    let mut src = api_common::weights(api_common::config(), 0.5).unwrap();
    chat_session(
        Engine::load_on_gpu(gpu_common::gpu().clone(), &mut src, api_common::CONTEXT).unwrap(),
    )
}

#[test]
fn a_gpu_snapshot_restores_its_f16_rows_and_continues_like_the_uninterrupted_session() {
    use pocketrt::engine::RowKind;
    use pocketrt::generate::GenerateOptions;
    use pocketrt::sampler::SamplerConfig;
    use pocketrt::session::RestoreOptions;
    let path = std::env::temp_dir().join(format!("pocketrt-gpu-{}.snap", std::process::id()));
    let greedy = GenerateOptions {
        max_tokens: 8,
        ..Default::default()
    };
    // Drawn on the GPU, pipelined (top-k within the GPU's).
    let sampled = GenerateOptions {
        max_tokens: 8,
        sampler: SamplerConfig {
            temperature: 0.9,
            top_k: 20,
            seed: 5,
            ..SamplerConfig::greedy()
        },
        ..Default::default()
    };
    let mut a = gpu_chat_session();
    assert_eq!(a.engine().kv_layout().rows, RowKind::F16Heads);
    a.chat("Name a colour.", &greedy, |_| true).unwrap();
    let saved = a.save(&path).unwrap();
    let per = a.engine().kv_layout().bytes_per_position();
    assert!(saved.file_bytes as usize > a.cached_tokens() * per);
    let want = a.chat("More?", &greedy, |_| true).unwrap();
    let want_sampled = a.chat("Again.", &sampled, |_| true).unwrap();

    let mut b = gpu_chat_session();
    let r = b.restore(&path, RestoreOptions::default()).unwrap();
    assert_eq!((r.prefilled, r.restored), (None, saved.tokens));
    let got = b.chat("More?", &greedy, |_| true).unwrap();
    assert_eq!(
        (&got.0, got.1.reused_tokens),
        (&want.0, want.1.reused_tokens)
    );
    let got = b.chat("Again.", &sampled, |_| true).unwrap();
    assert_eq!(
        (&got.0, got.1.reused_tokens),
        (&want_sampled.0, want_sampled.1.reused_tokens)
    );

    // On the CPU backend the f16 rows are not its own: its tokens are prefilled.
    let mut src = api_common::weights(api_common::config(), 0.5).unwrap();
    let cpu = Engine::load(&mut src, Backend::Cpu, WeightMode::Q4, 256).unwrap();
    let mut c = chat_session(cpu);
    let r = c.restore(&path, RestoreOptions::default()).unwrap();
    let why = r.prefilled.unwrap();
    assert!(why.contains("gpu/") && why.contains("cpu/int8"), "{why}");
    assert_eq!(r.tokens, saved.tokens);
}

/// The pipelined sampling tests' sampler: top-k, top-p and min-p together.
fn sampling(seed: u64) -> pocketrt::sampler::SamplerConfig {
    pocketrt::sampler::SamplerConfig {
        temperature: 1.2,
        top_k: 40,
        top_p: 0.97,
        min_p: 0.01,
        seed,
        ..pocketrt::sampler::SamplerConfig::greedy()
    }
}
