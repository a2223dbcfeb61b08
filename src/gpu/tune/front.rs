//! The one flow of the tuner's two front ends (a native load, `native.rs`; a browser
//! load, `web/tune.rs`): where the policy tunes the profile, the design kept for this
//! adapter, profile and model shape ([`key`]), else a sweep, then kept; the context in
//! the tuned profile. Each front end brings its store of designs ([`DesignStore`]: the
//! cache folder natively, Cache Storage in the browser).

use super::{key, sweep, TunePolicy, Tuned, Tuning};
use crate::config::ModelConfig;
use crate::error::Result;
use crate::gpu::weights::ModelWeights;
use crate::gpu::ProfiledContext;
use std::sync::Arc;
use web_time::Duration;

/// Where a front end keeps tuned designs across loads (best effort: one not kept is swept
/// again at the next load).
pub(crate) trait DesignStore {
    /// The design kept under `key`, if any.
    async fn kept(&self, key: &str) -> Option<Tuned>;
    /// Keep `design` under `key`.
    async fn keep(&self, key: &str, design: &Tuned);
}

/// The context the model over `weights` (uploaded on `ctx`) runs on: `ctx` in its tuned
/// profile where `policy` tunes it — kept in `store`, else swept within `budget` (told
/// first to `on_sweep`) and kept — else `ctx` itself; and what the tuner did.
// One `Arc` type on every target (in wasm the context is neither Send nor Sync).
#[allow(clippy::arc_with_non_send_sync)]
pub(crate) async fn tuned_with(
    store: &impl DesignStore,
    ctx: Arc<ProfiledContext>,
    config: &ModelConfig,
    weights: &ModelWeights,
    policy: TunePolicy,
    budget: Duration,
    on_sweep: impl FnOnce(),
) -> Result<(Arc<ProfiledContext>, Option<Tuning>)> {
    if !policy.tunes(&ctx.profile) {
        return Ok((ctx, None));
    }
    let key = key(&ctx, config, weights);
    let kept = match policy {
        TunePolicy::Force => None,
        _ => store.kept(&key).await,
    };
    let tuning = match kept {
        Some(tuned) => Tuning { tuned, sweep: None },
        None => {
            on_sweep();
            let s = sweep(&ctx, config, weights, budget).await?;
            store.keep(&key, &s.best).await;
            Tuning {
                tuned: s.best,
                sweep: Some(s),
            }
        }
    };
    let profile = tuning.tuned.apply(&ctx.profile);
    Ok((Arc::new(ctx.tuned_to(profile)), Some(tuning)))
}
