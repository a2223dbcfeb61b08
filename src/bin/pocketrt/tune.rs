//! `pocketrt tune MODEL`: a sweep of the GPU profile's free constants on the model's own
//! weights (`pocketrt::gpu::tune`), its table printed and its choice kept for later loads
//! on this adapter (what the first load does by itself, with `POCKETRT_TUNE=force`).

use crate::run::Weights;
use pocketrt::error::Error;
use pocketrt::gpu::tune::{tuned_context, TunePolicy, Tuned, TUNE_POS};
use pocketrt::gpu::weights::{holds_q8, limits_needed, ModelWeights};
use pocketrt::gpu::ProfiledContext;
use pocketrt::Result;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(clap::Args)]
pub struct TuneArgs {
    /// GGUF file, pocket package folder or HF folder.
    pub model: PathBuf,
    /// Use the GPU adapter whose name contains this (see `pocketrt adapters`).
    #[arg(long)]
    pub adapter: Option<String>,
    /// Weight precision, as the loads to tune for use it.
    #[arg(long, value_enum, default_value = "keep")]
    pub weights: Weights,
    /// The sweep's time budget in ms (the candidate running when it ends completes).
    #[arg(long, default_value_t = 2000)]
    pub budget_ms: u64,
    /// Print the sweep as JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: TuneArgs) -> Result<()> {
    if let Some(name) = &a.adapter {
        std::env::set_var("POCKETRT_ADAPTER", name);
    }
    let format = a.weights.mode().format().ok_or_else(|| {
        Error::InvalidArgument("the GPU runs q4, q8 or keep weights, not f32".into())
    })?;
    let mut src = pocketrt::format::open(&a.model)?;
    let config = src.config().clone();
    let q8 = holds_q8(src.as_mut(), format)?;
    let context = (TUNE_POS + 1).min(config.max_context);
    let ctx = Arc::new(ProfiledContext::open_blocking(limits_needed(
        &config, context, q8,
    ))?);
    eprintln!("adapter {}\n{}", ctx.adapter_label(), ctx.profile);
    if Tuned::of(&ctx.profile).is_none() {
        return Err(Error::InvalidArgument(format!(
            "profile {} has nothing to tune: a CPU adapter's profile reads the codes from \
             textures in its own order (force a GPU profile to tune it anyway: \
             POCKETRT_PROFILE=gpu)",
            ctx.profile.name
        )));
    }
    eprintln!("uploading the weights");
    let weights = ModelWeights::upload(&ctx, src.as_mut(), format)?;
    eprintln!("sweeping (budget {} ms)", a.budget_ms);
    let budget = Duration::from_millis(a.budget_ms);
    let (_, tuning) = tuned_context(ctx, &config, &weights, TunePolicy::Force, budget)?;
    let tuning = tuning.expect("a GPU profile is tuned");
    let sweep = tuning.sweep.as_ref().expect("forced: swept");
    if a.json {
        let report = serde_json::json!({ "tuned": tuning.tuned, "sweep": sweep });
        println!("{report:#}");
    } else {
        print!("{}", sweep.table());
        println!(
            "{}; kept for later loads on this adapter",
            tuning.describe()
        );
    }
    Ok(())
}
