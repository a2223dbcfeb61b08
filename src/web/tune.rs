//! The on-device tuner at a browser load (`gpu::tune`): the design kept in Cache Storage
//! for this adapter, profile and model shape, else a sweep (the load's "tuning" progress
//! phase, within its budget), then kept. The load's report says what it chose
//! (`info().tuned`, and the end of `info().backendReason`).

use super::kept;
use super::load::Progress;
use crate::config::ModelConfig;
use crate::error::Result;
use crate::gpu::tune::{tuned_with, DesignStore, TunePolicy, Tuned, Tuning, DEFAULT_BUDGET};
use crate::gpu::weights::ModelWeights;
use crate::gpu::ProfiledContext;
use std::sync::Arc;

/// The kind of kept decision a tuned design is (`kept.rs`; natively `gpu/tune/native.rs`'s).
const KEPT: &str = "gpu-tune";

/// The designs kept in the load's Cache Storage (`None`: no cache).
struct Cached<'a>(Option<&'a str>);

impl DesignStore for Cached<'_> {
    async fn kept(&self, key: &str) -> Option<Tuned> {
        kept::remembered(self.0, KEPT, key).await
    }
    async fn keep(&self, key: &str, design: &Tuned) {
        kept::remember(self.0, KEPT, key, design).await
    }
}

/// The context the model over `weights` (uploaded on `ctx`) runs on: `ctx` in its tuned
/// profile where `policy` tunes it (`tuned_with`: its sweep the load's "tuning" phase),
/// else `ctx` itself; the report says what was chosen.
pub(super) async fn tuned(
    ctx: Arc<ProfiledContext>,
    config: &ModelConfig,
    weights: &ModelWeights,
    policy: TunePolicy,
    progress: &Progress<'_>,
) -> Result<(Arc<ProfiledContext>, Option<Tuning>)> {
    let cache = progress.opts.cache_name.as_deref();
    // `auto` sweeps only what it can keep: without Cache Storage (`cache: false`) every
    // load would pay the sweep again.
    let policy = match policy == TunePolicy::Auto && cache.is_none() {
        true => TunePolicy::Off,
        false => policy,
    };
    let sweeping = || progress.emit("tuning", None);
    let store = Cached(cache);
    let (ctx, tuning) = tuned_with(
        &store,
        ctx,
        config,
        weights,
        policy,
        DEFAULT_BUDGET,
        sweeping,
    )
    .await?;
    if let Some(tuning) = &tuning {
        let mut report = progress.report.borrow_mut();
        report.set_device(&ctx);
        report.tuned = Some(serde_json::json!({
            "design": tuning.tuned,
            "summary": tuning.tuned.to_string(),
            "sweep": tuning.sweep,
        }));
    }
    Ok((ctx, tuning))
}
