//! The decode step's bytes accounting (`GpuModel::step_reads`, what `bench --json` and
//! `gpu-check` divide by each kernel's time) against the buffers the model really holds:
//! every matrix's codes and qparams once per token (within the 256-byte padding of each
//! buffer, plus the f32 activations each GEMV reads), and the KV cache's bytes of the
//! positions attention reads.

mod gpu_common;

use gpu_common::profiles;
use pocketrt::format::open;
use pocketrt::gpu::forward::StepOptions;
use pocketrt::gpu::kernels::common::gemv_spec::GemvVariant;
use pocketrt::gpu::{GpuModel, KernelTime};
use std::path::PathBuf;

const CONTEXT: usize = 64;

fn model(ctx: &std::sync::Arc<pocketrt::gpu::ProfiledContext>, fold: bool) -> GpuModel {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/oracle/qwen2");
    let options = StepOptions {
        fold_output: Some(fold),
    };
    GpuModel::load_with(ctx.clone(), &mut *open(&dir).unwrap(), CONTEXT, options).unwrap()
}

fn total(reads: &[KernelTime], kernel: &str) -> u64 {
    reads
        .iter()
        .filter(|t| t.kernel == kernel || t.kernel.starts_with(&format!("{kernel}:")))
        .map(|t| t.bytes_read)
        .sum()
}

#[test]
fn step_reads_account_for_every_weight_buffer_and_the_kv_positions_read() {
    for ctx in profiles() {
        for fold in [false, true] {
            let m = model(ctx, fold);
            let name = format!("{} fold {fold}", ctx.profile.name);
            let cfg = &m.config;
            let reads = m.step_reads(0);
            let w = &m.weights;
            let size =
                |q: &pocketrt::gpu::weights::MatrixBuffers| q.codes.size() + q.qparams.size();
            // (kernel, the buffers of its matrices, the f32 activations it may read).
            let (h, f) = (cfg.hidden_size as u64, cfg.ffn_size as u64);
            let layer = |pick: fn(&pocketrt::gpu::weights::LayerWeights) -> u64| {
                w.layers.iter().map(pick).sum::<u64>()
            };
            let mut gemvs = vec![
                (
                    "qkv",
                    layer(|l| l.qkv.codes.size() + l.qkv.qparams.size()),
                    8 * h,
                ),
                (
                    "gate_up",
                    layer(|l| l.gate_up.codes.size() + l.gate_up.qparams.size()),
                    8 * h + 4 * cfg.n_heads as u64 * h,
                ),
                (
                    "down",
                    layer(|l| l.down.codes.size() + l.down.qparams.size()),
                    4 * (f + h),
                ),
                ("head", size(w.head()), 8 * h),
            ];
            let wo = layer(|l| l.attn_output.codes.size() + l.attn_output.qparams.size());
            if !fold {
                gemvs.push(("o", wo, 8 * h));
            }
            let layers = cfg.n_layers as u64;
            for (kernel, buffers, acts) in gemvs {
                let per = if kernel == "head" { 1 } else { layers };
                let got = total(&reads, kernel);
                // Buffers are padded to 256 bytes (two per matrix).
                let (lo, hi) = (buffers - 512 * per, buffers + acts * per);
                assert!(
                    (lo..=hi).contains(&got),
                    "{name} {kernel}: {got} bytes accounted, buffers {buffers} (+ activations ≤ {})",
                    acts * per
                );
            }
            // The argmax reads the logits, or (fused into the GPU design's head) 8 bytes
            // per head workgroup.
            let vocab = cfg.vocab_size as u64;
            let argmax = match ctx.profile.gemv.head {
                GemvVariant::GpuRows(g) => 8 * vocab.div_ceil(u64::from(g.rows())),
                _ => 4 * vocab,
            };
            assert_eq!(total(&reads, "argmax"), argmax, "{name}: argmax bytes");
            // Attention at position p reads p + 1 positions of f16 K and V per layer (and,
            // folded, W_o): the cache's bytes per position, exactly, per step of p.
            let per_position: u64 =
                m.kv.k.iter().chain(&m.kv.v).map(|b| b.size()).sum::<u64>() / CONTEXT as u64;
            let at = |p: usize| total(&m.step_reads(p), "attention");
            assert_eq!(
                at(9) - at(1),
                8 * per_position,
                "{name}: KV bytes per position"
            );
            let folded_wo = if fold { wo } else { 0 };
            let base = at(0) - per_position;
            assert!(
                (folded_wo.saturating_sub(512 * layers)..=folded_wo + 16 * h * layers)
                    .contains(&base),
                "{name}: attention reads {base} bytes besides the cache (W_o {folded_wo})"
            );
        }
    }
}
