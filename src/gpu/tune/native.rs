//! The tuner at a native load: a design kept in the cache folder, else a sweep (blocking
//! on the device's futures), kept for the next load.

use super::{key, sweep, TunePolicy, Tuned, Tuning};
use crate::config::ModelConfig;
use crate::error::Result;
use crate::format::source::ModelSource;
use crate::gpu::forward::StepOptions;
use crate::gpu::weights::ModelWeights;
use crate::gpu::{GpuContext, GpuModel};
use crate::quant::WeightFormat;
use std::sync::Arc;
use web_time::Duration;

/// The file of the cache folder tuned designs are kept in (`crate::kept`).
const KEPT: &str = "gpu-tune.json";

/// The context the model over `weights` (uploaded on `ctx`) runs on: `ctx` in its tuned
/// profile where `policy` tunes it — remembered, else swept within `budget` and kept —
/// else `ctx` itself.
pub fn tuned_context(
    ctx: Arc<GpuContext>,
    config: &ModelConfig,
    weights: &ModelWeights,
    policy: TunePolicy,
    budget: Duration,
) -> Result<(Arc<GpuContext>, Option<Tuning>)> {
    if !policy.tunes(&ctx.profile) {
        return Ok((ctx, None));
    }
    let key = key(&ctx, config, weights);
    let kept = match policy {
        TunePolicy::Force => None,
        _ => crate::kept::remembered::<Tuned>(KEPT, &key),
    };
    let tuning = match kept {
        Some(tuned) => Tuning { tuned, sweep: None },
        None => {
            let s = pollster::block_on(sweep(&ctx, config, weights, budget))?;
            crate::kept::remember(KEPT, &key, &s.best);
            Tuning {
                tuned: s.best,
                sweep: Some(s),
            }
        }
    };
    let profile = tuning.tuned.apply(&ctx.profile);
    Ok((Arc::new(ctx.tuned_to(profile)), Some(tuning)))
}

/// [`GpuModel::load_as`] in the profile `policy` tunes ([`tuned_context`]).
pub fn load_tuned(
    ctx: Arc<GpuContext>,
    src: &mut dyn ModelSource,
    context: usize,
    format: WeightFormat,
    policy: TunePolicy,
    budget: Duration,
) -> Result<(GpuModel, Option<Tuning>)> {
    let weights = ModelWeights::upload(&ctx, src, format)?;
    let config = src.config().clone();
    let (ctx, tuning) = tuned_context(ctx, &config, &weights, policy, budget)?;
    let mut model = GpuModel::with_options(ctx, config, weights, context, StepOptions::default())?;
    model.weight_format = format;
    Ok((model, tuning))
}
