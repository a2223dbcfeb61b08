//! The memory planner: its figures equal what the GPU engine allocates (all three fixture
//! architectures, every profile), it picks the largest context within a budget, and a plan that cannot
//! fit fails before any allocation.

mod gpu_common;

use gpu_common::{gpu, profiles};
use pocketrt::config::{Arch, ModelConfig};
use pocketrt::cpu::WeightMode;
use pocketrt::engine::{Backend, Engine};
use pocketrt::format::open;
use pocketrt::gpu::plan::{Budget, MemoryPlan, TABLET_BUDGET};
use pocketrt::gpu::GpuModel;
use pocketrt::Error;
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/oracle")
        .join(name)
}

/// MNN-Pocket-0.3B's shapes (DESIGN.md).
fn pocket() -> ModelConfig {
    ModelConfig {
        arch: Arch::Qwen3,
        hidden_size: 896,
        n_layers: 28,
        n_heads: 14,
        n_kv_heads: 2,
        head_dim: 64,
        ffn_size: 2560,
        vocab_size: 65_536,
        rope_theta: 1e6,
        rms_eps: 1e-6,
        max_context: 40_960,
        tie_embeddings: true,
        qkv_bias: false,
        qk_norm: true,
        bos_token_id: None,
        eos_token_ids: vec![65_512],
        pad_token_id: Some(65_510),
    }
}

fn unlimited(total: u64) -> Budget {
    Budget {
        total,
        max_buffer: u64::MAX,
        max_binding: u64::MAX,
        code_textures: None,
        lanes_gemm_uniform: None,
        head_argmax_rows: None,
        q8_weights: false,
    }
}

#[test]
fn the_plan_equals_the_bytes_the_engine_allocates() {
    for ctx in profiles() {
        for (name, context) in [("qwen3", 64), ("qwen2", 100), ("llama", 7)] {
            let mut src = open(&fixture(name)).unwrap();
            let budget = Budget::for_device(u64::MAX, ctx);
            let plan = MemoryPlan::for_budget(src.config(), context, &budget);
            let before = ctx.allocated_bytes();
            let model = GpuModel::load(ctx.clone(), &mut *src, context).unwrap();
            assert_eq!(
                ctx.allocated_bytes() - before,
                plan.total(),
                "{name} on profile {}: {plan:?}",
                ctx.profile.name
            );
            drop(model);
        }
    }
}

#[test]
fn pocket_at_4k_and_32k_and_the_largest_context_in_a_budget() {
    let cfg = pocket();
    let p4 = MemoryPlan::new(&cfg, 4096);
    let p32 = MemoryPlan::new(&cfg, 32_768);
    // Q4 g64 weights: 0.5625 bytes per weight plus the f32 norms.
    let matrices = 65_536 * 896 + 28 * (896 * 1152 + 896 * 896 + 2 * 2560 * 896 + 2560 * 896);
    assert!(p4.weights > matrices * 9 / 16 && p4.weights < matrices * 9 / 16 + (1 << 20));
    // KV: 28 layers × (K + V) × 2 kv heads × 64 × f16 per position.
    assert_eq!(p32.kv_cache, 32_768 * 28 * 2 * 128 * 2);
    assert_eq!(p32.kv_cache, 8 * p4.kv_cache);
    println!(
        "pocket: 4K {} MiB, 32K {} MiB",
        p4.total() >> 20,
        p32.total() >> 20
    );
    // The tablet budget holds the model's whole context.
    let all = MemoryPlan::choose(&cfg, None, &unlimited(TABLET_BUDGET)).unwrap();
    assert_eq!(all.context, cfg.max_context);
    // A 400 MiB budget: the chosen context fits and one more position would not.
    let budget = unlimited(400 << 20);
    let best = MemoryPlan::choose(&cfg, None, &budget).unwrap();
    assert!(best.context > 4096 && best.context < 32_768, "{best:?}");
    assert!(best.total() <= budget.total);
    assert!(MemoryPlan::new(&cfg, best.context + 1).total() > budget.total);
    // Asking for more than fits, or for more than the model's context, fails.
    assert!(matches!(
        MemoryPlan::choose(&cfg, Some(32_768), &budget),
        Err(Error::OverMemoryBudget {
            context: 32_768,
            ..
        })
    ));
    assert!(matches!(
        MemoryPlan::choose(&cfg, Some(50_000), &budget),
        Err(Error::InvalidArgument(_))
    ));
    // Not even the weights fit.
    assert!(matches!(
        MemoryPlan::choose(&cfg, None, &unlimited(100 << 20)),
        Err(Error::OverMemoryBudget { context: 1, .. })
    ));
    // A per-buffer limit below the embedding's codes.
    let small_buffers = Budget {
        max_binding: 16 << 20,
        ..unlimited(TABLET_BUDGET)
    };
    assert!(matches!(
        MemoryPlan::choose(&cfg, None, &small_buffers),
        Err(Error::ExceedsDeviceLimits { .. })
    ));
}

#[test]
fn the_engine_refuses_a_plan_over_budget_and_picks_a_context_when_asked() {
    let mut src = open(&fixture("qwen3")).unwrap();
    let budget = Budget::for_device(u64::MAX, gpu());
    let needed = MemoryPlan::for_budget(src.config(), 64, &budget).total();
    let r = Engine::load_planned(
        &mut *src,
        Backend::Gpu,
        WeightMode::Q4,
        Some(64),
        needed - 1,
    );
    assert!(
        matches!(r, Err(Error::OverMemoryBudget { .. })),
        "{:?}",
        r.err()
    );
    let e = Engine::load_planned(&mut *src, Backend::Gpu, WeightMode::Q4, None, needed).unwrap();
    assert!(
        e.context() >= 64 && e.context() < src.config().max_context,
        "{}",
        e.context()
    );
}
