//! The tuner at a native load: its flow (`front.rs`) on the designs kept in the cache
//! folder, blocking on the device's futures.

use super::{tuned_with, DesignStore, TunePolicy, Tuned, Tuning};
use crate::config::ModelConfig;
use crate::error::Result;
use crate::format::source::ModelSource;
use crate::gpu::forward::StepOptions;
use crate::gpu::weights::ModelWeights;
use crate::gpu::{GpuModel, ProfiledContext};
use crate::quant::WeightFormat;
use std::sync::Arc;
use web_time::Duration;

/// The kind of kept decision a tuned design is (`crate::kept`; the browser's
/// `web/kept.rs`).
const KEPT: &str = "gpu-tune";

/// The cache folder's designs (`crate::kept`).
struct Folder;

impl DesignStore for Folder {
    async fn kept(&self, key: &str) -> Option<Tuned> {
        crate::kept::remembered(KEPT, key)
    }
    async fn keep(&self, key: &str, design: &Tuned) {
        crate::kept::remember(KEPT, key, design)
    }
}

/// The context the model over `weights` (uploaded on `ctx`) runs on: `ctx` in its tuned
/// profile where `policy` tunes it — remembered, else swept within `budget` and kept —
/// else `ctx` itself ([`tuned_with`], blocking on the device's futures).
pub fn tuned_context(
    ctx: Arc<ProfiledContext>,
    config: &ModelConfig,
    weights: &ModelWeights,
    policy: TunePolicy,
    budget: Duration,
) -> Result<(Arc<ProfiledContext>, Option<Tuning>)> {
    let tuned = tuned_with(&Folder, ctx, config, weights, policy, budget, || {});
    pollster::block_on(tuned)
}

/// How [`load_tuned`] loads: the weights' format, the step options, the tuning policy and
/// the sweep's budget.
#[derive(Clone, Copy, Debug)]
pub struct TunedLoad {
    pub format: WeightFormat,
    pub options: StepOptions,
    pub policy: TunePolicy,
    pub budget: Duration,
}

impl TunedLoad {
    /// `format`, the profile's step, [`TunePolicy::from_env`] and the default budget.
    pub fn from_env(format: WeightFormat) -> Result<TunedLoad> {
        Ok(TunedLoad {
            format,
            options: StepOptions::default(),
            policy: TunePolicy::from_env()?,
            budget: super::DEFAULT_BUDGET,
        })
    }
}

/// [`GpuModel::load_as`] in the profile the load's policy tunes ([`tuned_context`]).
pub fn load_tuned(
    ctx: Arc<ProfiledContext>,
    src: &mut dyn ModelSource,
    context: usize,
    load: TunedLoad,
) -> Result<(GpuModel, Option<Tuning>)> {
    let TunedLoad {
        format,
        options,
        policy,
        budget,
    } = load;
    let weights = ModelWeights::upload(&ctx, src, format)?;
    let config = src.config().clone();
    let (ctx, tuning) = tuned_context(ctx, &config, &weights, policy, budget)?;
    let mut model = GpuModel::with_options(ctx, config, weights, context, options)?;
    model.weight_format = format;
    Ok((model, tuning))
}
