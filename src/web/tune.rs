//! The on-device tuner at a browser load (`gpu::tune`): the design kept in Cache Storage
//! for this adapter, profile and model shape, else a sweep (the load's "tuning" progress
//! phase, within its budget), then kept. The load's report says what it chose
//! (`info().tuned`, and the end of `info().backendReason`).

use super::kept;
use super::load::Progress;
use crate::config::ModelConfig;
use crate::error::Result;
use crate::gpu::tune::{key, sweep, TunePolicy, Tuned, Tuning, DEFAULT_BUDGET};
use crate::gpu::weights::ModelWeights;
use crate::gpu::GpuContext;
use std::sync::Arc;

/// The kind of kept decision a tuned design is (`kept.rs`; natively `gpu/tune/native.rs`'s).
const KEPT: &str = "gpu-tune";

/// The context the model over `weights` (uploaded on `ctx`) runs on: `ctx` in its tuned
/// profile where `policy` tunes it, else `ctx` itself.
// One `Arc` type on every target (in wasm the context is neither Send nor Sync).
#[allow(clippy::arc_with_non_send_sync)]
pub(super) async fn tuned(
    ctx: Arc<GpuContext>,
    config: &ModelConfig,
    weights: &ModelWeights,
    policy: TunePolicy,
    progress: &Progress<'_>,
) -> Result<(Arc<GpuContext>, Option<Tuning>)> {
    let cache = progress.opts.cache_name.as_deref();
    // `auto` sweeps only what it can keep: without Cache Storage (`cache: false`) every
    // load would pay the sweep again.
    let unkept = policy == TunePolicy::Auto && cache.is_none();
    if !policy.tunes(&ctx.profile) || unkept {
        return Ok((ctx, None));
    }
    let key = key(&ctx, config, weights);
    let kept = match policy {
        TunePolicy::Force => None,
        _ => kept::remembered::<Tuned>(cache, KEPT, &key).await,
    };
    let tuning = match kept {
        Some(tuned) => Tuning { tuned, sweep: None },
        None => {
            progress.emit("tuning", None);
            let s = sweep(&ctx, config, weights, DEFAULT_BUDGET).await?;
            kept::remember(cache, KEPT, &key, &s.best).await;
            Tuning {
                tuned: s.best,
                sweep: Some(s),
            }
        }
    };
    let ctx = Arc::new(ctx.tuned_to(tuning.tuned.apply(&ctx.profile)));
    let mut report = progress.report.borrow_mut();
    report.set_device(&ctx);
    report.tuned = Some(serde_json::json!({
        "design": tuning.tuned,
        "summary": tuning.tuned.to_string(),
        "sweep": tuning.sweep,
    }));
    Ok((ctx, Some(tuning)))
}
