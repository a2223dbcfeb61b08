//! On-device tuning: the first load of a model shape on an adapter times a short sweep of
//! the profile's free constants on the model's own weights and keeps the fastest.
//!
//! Users' GPUs differ (Apple M1…M5, A-series, Adreno, Mali, Intel, NVIDIA) and none is
//! measured where the code is written, so the GPU profiles' constants are starting points
//! (`profile.rs`); the tuner measures them on the device that runs them:
//! - **What varies** ([`Tuned`]): the decode GEMVs' row layout (lanes per row, row slots,
//!   rows per slot), the LM head's, the attention split length, W_o folded into attention
//!   or not, and the folded W_o's rows per workgroup; and in every GPU rows GEMV, x staged
//!   once per workgroup or not and (tree profiles) the one-barrier slot reduction or the
//!   tree. Only designs that read the weights as
//!   uploaded: the CPU-adapter profiles (whose codes are copied into textures in their own
//!   order) have nothing to tune. x stays f32 in the GEMVs: f16 x moves the logits ~2e-3
//!   from the oracle, enough to change seeded sampled tokens, so speed alone cannot pick it.
//! - **How**: coordinate descent, one constant at a time in the order of its gain on a
//!   real GPU ([`Stage`]), each candidate a full model over the same weight buffers with a
//!   short cache, timed on decode steps at position [`TUNE_POS`] (GPU timestamps natively
//!   where the adapter has them, else wall clock from submit to done over a few queued
//!   steps) in turns with the best so far, after a warm-up that brings the GPU's clocks
//!   up (`race`: a GPU's clocks drop while the next candidate's pipelines are built); a
//!   candidate replaces the best only when [`MARGIN`] faster in that race, so noise keeps
//!   the default. The sweep stops when its budget (2 s by default) is spent, keeping the
//!   best so far, and a last race of the profile's own design against the chosen one keeps
//!   the chosen only if it is still faster.
//! - **Kept** per (pocketrt version, adapter, profile, model shape, weights): natively in
//!   the cache folder (`gpu-tune.json`, `crate::kept`), in the browser in Cache Storage;
//!   a later load applies it without a sweep. `POCKETRT_TUNE=off|auto|force` natively, the
//!   `tune` load option in the browser; `pocketrt tune MODEL` prints the table.
//!
//! Every candidate is a correct design (tests/gpu_tune.rs runs each against the oracle on
//! lavapipe), so the tuner only chooses how fast.

use super::kernels::common::gemv_spec::{GemvVariant, GpuRows, SlotReduce};
use super::kernels::common::rope_kv::HeadShape;
use super::{DeviceProfile, ProfiledContext};
use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::gpu::weights::ModelWeights;
use serde::{Deserialize, Serialize};
use web_time::{Duration, Instant};

mod front;
#[cfg(not(target_arch = "wasm32"))]
mod native;
mod race;
pub(crate) use front::{tuned_with, DesignStore};
#[cfg(not(target_arch = "wasm32"))]
pub use native::{load_tuned, tuned_context, TunedLoad};
use race::{Built, Timed};

/// The sweep's budget unless told otherwise.
pub const DEFAULT_BUDGET: Duration = Duration::from_secs(2);

/// The position the candidates decode at: a typical chat's history, past a split.
pub const TUNE_POS: usize = 1023;

/// How much faster a candidate must be to replace the best so far.
pub const MARGIN: f64 = 0.03;

/// The last trial's stage: the profile's own design raced against the chosen one.
pub const FINAL: &str = "final";

/// The native environment variable: `off`, `auto` (the default), `on` or `force`.
pub const TUNE_ENV: &str = "POCKETRT_TUNE";

/// What a load does about tuning.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TunePolicy {
    /// The profile as built.
    Off,
    /// On real GPUs (a GPU profile on a hardware adapter): a kept design, else a sweep,
    /// then kept.
    #[default]
    Auto,
    /// As `Auto` on any profile with something to tune, a GPU profile forced on a
    /// CPU adapter too (tests, lavapipe).
    On,
    /// A sweep wherever there is something to tune, even where a design is kept.
    Force,
}

impl TunePolicy {
    /// `off` / `false`, `auto`, `on` / `true`, or `force`.
    pub fn parse(s: &str) -> Result<TunePolicy> {
        match s.trim().to_ascii_lowercase().as_str() {
            "off" | "false" | "0" | "no" => Ok(TunePolicy::Off),
            "" | "auto" => Ok(TunePolicy::Auto),
            "on" | "true" | "1" | "yes" => Ok(TunePolicy::On),
            "force" => Ok(TunePolicy::Force),
            other => Err(Error::InvalidArgument(format!(
                "tune {other:?}: expected off, auto, on or force"
            ))),
        }
    }

    /// From [`TUNE_ENV`] (unset: auto).
    pub fn from_env() -> Result<TunePolicy> {
        std::env::var(TUNE_ENV).map_or(Ok(TunePolicy::Auto), |v| Self::parse(&v))
    }

    /// Does a load in `profile` tune (a kept design counts)?
    pub fn tunes(self, profile: &DeviceProfile) -> bool {
        let applies = Tuned::of(profile).is_some();
        match self {
            TunePolicy::Off => false,
            TunePolicy::Auto => applies && !profile.software,
            TunePolicy::On | TunePolicy::Force => applies,
        }
    }
}

/// One GPU GEMV row layout: `slots` row slots of `tpr` lanes, `rps` rows per slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotLayout {
    pub slots: u32,
    pub tpr: u32,
    pub rps: u32,
}

impl SlotLayout {
    fn of(g: GpuRows) -> SlotLayout {
        SlotLayout {
            slots: g.slots,
            tpr: g.tpr,
            rps: g.rps,
        }
    }

    /// `g` with this layout (its reduction and x type kept).
    fn on(self, g: GpuRows) -> GpuRows {
        GpuRows {
            slots: self.slots,
            tpr: self.tpr,
            rps: self.rps,
            ..g
        }
    }

    fn fits(self) -> bool {
        self.slots >= 1
            && self.tpr.is_power_of_two()
            && (1..=GpuRows::MAX_RPS).contains(&self.rps)
            && self.slots * self.tpr <= 256
    }
}

impl std::fmt::Display for SlotLayout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}x{}", self.slots, self.tpr, self.rps)
    }
}

/// The profile constants the tuner chooses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tuned {
    /// QKV, O, gate/up and down (and every Q8 matrix).
    pub gemv: SlotLayout,
    pub head: SlotLayout,
    pub split_len: usize,
    pub fold_output: bool,
    /// Rows of W_o per workgroup where it is folded into attention.
    pub wo_rows: u32,
    /// Every GPU rows GEMV stages x once per workgroup (`GpuRows::x_shared`; each GEMV
    /// where its K fits workgroup memory). Absent in designs kept before it: off.
    #[serde(default)]
    pub x_shared: bool,
    /// Every GPU rows GEMV reduces its slots in one barrier (`SlotReduce::OneBarrier`)
    /// instead of the tree; profiles whose slots reduce by subgroup keep theirs.
    #[serde(default)]
    pub one_barrier: bool,
}

impl Tuned {
    /// The constants of `p`; `None` where it has nothing to tune (a design other than the
    /// GPU rows GEMV, or codes copied into textures).
    pub fn of(p: &DeviceProfile) -> Option<Tuned> {
        let rows = |v| match v {
            GemvVariant::GpuRows(g) => Some(g),
            _ => None,
        };
        let [qkv, o, gate_up, down] = [p.gemv.qkv, p.gemv.o, p.gemv.gate_up, p.gemv.down];
        let gemv = rows(qkv)?;
        let same = [o, gate_up, down]
            .into_iter()
            .all(|v| rows(v) == Some(gemv));
        if !same || p.code_textures.is_some() {
            return None;
        }
        Some(Tuned {
            gemv: SlotLayout::of(gemv),
            head: SlotLayout::of(rows(p.gemv.head)?),
            split_len: p.split_len,
            fold_output: p.fold_output,
            wo_rows: p.wo_blocks.rows,
            x_shared: gemv.x_shared,
            one_barrier: gemv.reduce == SlotReduce::OneBarrier,
        })
    }

    /// `base` with these constants.
    pub fn apply(self, base: &DeviceProfile) -> DeviceProfile {
        let mut p = *base;
        // The staging and the reduction of every GPU rows GEMV (a subgroup reduction kept).
        let design = |g: GpuRows| {
            let reduce = match (g.reduce, self.one_barrier) {
                (SlotReduce::Subgroup, _) => SlotReduce::Subgroup,
                (_, true) => SlotReduce::OneBarrier,
                (_, false) => SlotReduce::Tree,
            };
            GpuRows {
                x_shared: self.x_shared,
                reduce,
                ..g
            }
        };
        let on = |layout: SlotLayout, v| match v {
            GemvVariant::GpuRows(g) => GemvVariant::GpuRows(design(layout.on(g))),
            other => other,
        };
        p.gemv.qkv = on(self.gemv, p.gemv.qkv);
        p.gemv.o = on(self.gemv, p.gemv.o);
        p.gemv.gate_up = on(self.gemv, p.gemv.gate_up);
        p.gemv.down = on(self.gemv, p.gemv.down);
        p.gemv.head = on(self.head, p.gemv.head);
        // Q8 matrices (any role) run the same GEMV on their own codes.
        p.q8.gemv = design(self.gemv.on(p.q8.gemv));
        p.split_len = self.split_len;
        p.fold_output = self.fold_output;
        p.wo_blocks.rows = self.wo_rows;
        p
    }
}

impl std::fmt::Display for Tuned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "gemv {}, head {}, split {}, fold W_o {}",
            self.gemv,
            self.head,
            self.split_len,
            if self.fold_output { "yes" } else { "no" }
        )?;
        if self.fold_output {
            write!(f, " ({} rows per block)", self.wo_rows)?;
        }
        if self.x_shared {
            write!(f, ", x staged per workgroup")?;
        }
        match self.one_barrier {
            true => write!(f, ", one-barrier slot reduction"),
            false => Ok(()),
        }
    }
}

/// The constants swept one at a time, in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Gemv,
    /// x staged once per workgroup in the GPU rows GEMVs, or not.
    SharedX,
    /// The GPU rows GEMVs' slot reduction: the tree or one barrier (not where slots
    /// reduce by subgroup).
    Reduce,
    Head,
    Split,
    Fold,
    WoRows,
}

impl Stage {
    /// In the order of the gains measured on a real GPU (an H200: the split length and
    /// W_o's fold moved a step most, then the GEMV layouts; docs/GPU.md), so a short
    /// budget spends itself on what matters most.
    pub const ALL: [Stage; 7] = [
        Stage::Fold,
        Stage::Split,
        Stage::WoRows,
        Stage::Gemv,
        Stage::SharedX,
        Stage::Reduce,
        Stage::Head,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Stage::Gemv => "gemv",
            Stage::SharedX => "shared_x",
            Stage::Reduce => "reduce",
            Stage::Head => "head",
            Stage::Split => "split",
            Stage::Fold => "fold",
            Stage::WoRows => "wo_rows",
        }
    }

    /// `cur` with this stage's constant set to each of its values (`cur`'s own first),
    /// those that fit `base` and `shape`.
    pub fn variants(self, cur: Tuned, base: &DeviceProfile, shape: HeadShape) -> Vec<Tuned> {
        let subgroup = base.subgroup_size.is_some();
        let t = cur.gemv.tpr;
        let layouts = |list: &[(u32, u32, u32)]| -> Vec<SlotLayout> {
            list.iter()
                .map(|&(slots, tpr, rps)| SlotLayout { slots, tpr, rps })
                // A subgroup reduction needs a slot to be exactly one subgroup.
                .filter(|l| l.fits() && (!subgroup || l.tpr == t))
                .collect()
        };
        let mut out = vec![cur];
        match self {
            Stage::Gemv => {
                let s = cur.gemv.slots;
                let list = [(8, 16, 2), (8, 16, 1), (8, 16, 4), (4, 32, 2), (16, 8, 2)];
                let sub = [(s, t, 1), (s, t, 4), (2 * s, t, 2), (s, t, 2)];
                let pick = if subgroup { &sub[..] } else { &list[..] };
                out.extend(layouts(pick).into_iter().map(|gemv| Tuned { gemv, ..cur }));
            }
            Stage::SharedX => out.push(Tuned {
                x_shared: !cur.x_shared,
                ..cur
            }),
            Stage::Reduce if !subgroup => out.push(Tuned {
                one_barrier: !cur.one_barrier,
                ..cur
            }),
            Stage::Reduce => {}
            Stage::Head => {
                let t = cur.head.tpr;
                let list = [(8, t, 2), (8, t, 4), (8, t, 8), (16, t, 4)];
                out.extend(layouts(&list).into_iter().map(|head| Tuned { head, ..cur }));
            }
            Stage::Split => {
                // From the shortest split (it sizes the partials buffer) up: short splits
                // fill a large GPU (an H200 ran a step at 1,023 positions 1.5x slower in
                // 512-position splits than in 256-position ones).
                let splits = [1, 2, 4, 8].map(|m| m * super::profile::GPU_MIN_SPLIT_LEN);
                out.extend(splits.map(|split_len| Tuned { split_len, ..cur }));
            }
            Stage::Fold if base.folds(shape) => out.push(Tuned {
                fold_output: !cur.fold_output,
                ..cur
            }),
            Stage::WoRows if cur.fold_output && base.folds(shape) => {
                out.extend([16, 32, 64].map(|wo_rows| Tuned { wo_rows, ..cur }));
            }
            Stage::Fold | Stage::WoRows => {}
        }
        let mut unique: Vec<Tuned> = vec![];
        for t in out {
            if !unique.contains(&t) {
                unique.push(t);
            }
        }
        unique
    }
}

/// Every design a sweep from `base` can time (tests run each against the oracle).
pub fn candidates(base: &DeviceProfile, config: &ModelConfig) -> Vec<DeviceProfile> {
    let Some(start) = Tuned::of(base) else {
        return vec![];
    };
    let shape = head_shape(config);
    let mut all = vec![start];
    for stage in Stage::ALL {
        for t in stage.variants(start, base, shape) {
            if !all.contains(&t) {
                all.push(t);
            }
        }
    }
    // The W_o rows also with the fold the sweep may have turned on.
    let folded = Tuned {
        fold_output: true,
        ..start
    };
    for t in Stage::WoRows.variants(folded, base, shape) {
        if !all.contains(&t) {
            all.push(t);
        }
    }
    all.into_iter().map(|t| t.apply(base)).collect()
}

fn head_shape(c: &ModelConfig) -> HeadShape {
    HeadShape {
        n_heads: c.n_heads,
        n_kv_heads: c.n_kv_heads,
        head_dim: c.head_dim,
        context: tune_context(c),
    }
}

/// The candidates' cache: up to [`TUNE_POS`], within the model's.
fn tune_context(c: &ModelConfig) -> usize {
    (TUNE_POS + 1).min(c.max_context.max(2))
}

/// One timed candidate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trial {
    /// The constant it varied (`start`: the profile as built; [`FINAL`]: the profile's
    /// own design raced against the chosen one).
    pub stage: String,
    pub design: Tuned,
    /// Best decode step, ms (`None`: it failed), by the sweep's timer.
    pub ms: Option<f64>,
    /// The best design so far (for [`FINAL`]: the chosen one) in the same race, ms: the
    /// candidate replaced it when [`MARGIN`] faster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs_ms: Option<f64>,
    /// Best awaited step by wall clock, submit to token read, ms: next to GPU timestamps
    /// it shows what the pass's timestamps leave out (launch gaps, the readback); by the
    /// wall clock timer, `ms` again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_ms: Option<f64>,
    /// Wall time of the whole trial (building the candidate's pipelines too), s.
    pub seconds: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Trial {
    fn timed(stage: &str, design: Tuned, t: Timed, vs: Option<Timed>, since: Instant) -> Trial {
        Trial {
            stage: stage.to_string(),
            design,
            ms: Some(t.seconds * 1e3),
            vs_ms: vs.map(|v| v.seconds * 1e3),
            wall_ms: Some(t.wall_seconds * 1e3),
            seconds: since.elapsed().as_secs_f64(),
            error: None,
        }
    }

    fn failed(stage: &str, design: Tuned, e: Error, since: Instant) -> Trial {
        Trial {
            stage: stage.to_string(),
            design,
            ms: None,
            vs_ms: None,
            wall_ms: None,
            seconds: since.elapsed().as_secs_f64(),
            error: Some(e.to_string()),
        }
    }
}

/// A sweep's outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sweep {
    pub best: Tuned,
    pub trials: Vec<Trial>,
    pub seconds: f64,
    /// `gpu timestamps` or `wall clock`.
    pub timer: String,
    /// Every stage ran within the budget.
    pub complete: bool,
}

impl Sweep {
    /// The chosen design's time and the profile's own, ms, from the final race (both
    /// timed in turns); the same time twice where the profile's own was kept.
    pub fn speedup(&self) -> Option<(f64, f64)> {
        match self.trials.iter().find(|t| t.stage == FINAL) {
            Some(f) if self.best != f.design => Some((f.vs_ms?, f.ms?)),
            Some(f) => Some((f.ms?, f.ms?)),
            None => self.trials.first()?.ms.map(|ms| (ms, ms)),
        }
    }

    /// The table, one line per trial.
    pub fn table(&self) -> String {
        let mut s = format!(
            "{:<8} {:>10} {:>8} {:>8} {:>8}  design ({}, {:.2} s{})\n",
            "stage",
            "ms/token",
            "vs best",
            "wall ms",
            "trial s",
            self.timer,
            self.seconds,
            if self.complete { "" } else { ", budget spent" }
        );
        for t in &self.trials {
            let ms = t.ms.map_or("failed".into(), |m| format!("{m:.3}"));
            let [vs, wall] =
                [t.vs_ms, t.wall_ms].map(|m| m.map_or("-".into(), |m| format!("{m:.3}")));
            let mark = if t.design == self.best && t.stage != FINAL {
                "  <- chosen"
            } else {
                ""
            };
            let err = t
                .error
                .as_deref()
                .map_or(String::new(), |e| format!(" ({e})"));
            s += &format!(
                "{:<8} {ms:>10} {vs:>8} {wall:>8} {:>8.2}  {}{mark}{err}\n",
                t.stage, t.seconds, t.design
            );
        }
        s
    }
}

/// What a load did about tuning, for the description.
#[derive(Clone, Debug, PartialEq)]
pub struct Tuning {
    pub tuned: Tuned,
    /// `None`: remembered from an earlier sweep.
    pub sweep: Option<Sweep>,
}

impl Tuning {
    /// `tuned on this adapter in 1.2 s over 9 designs (0.84 vs 1.02 ms/token): gemv …`.
    pub fn describe(&self) -> String {
        match &self.sweep {
            None => format!(
                "tuned design remembered from an earlier sweep: {}",
                self.tuned
            ),
            Some(s) => {
                let vs = s.speedup().map_or(String::new(), |(best, start)| {
                    format!(", {best:.3} vs {start:.3} ms/token")
                });
                format!(
                    "tuned on this adapter in {:.2} s over {} designs ({}{vs}): {}",
                    s.seconds,
                    s.trials.len(),
                    s.timer,
                    self.tuned
                )
            }
        }
    }
}

/// The key a design is kept under: version, adapter, profile, model shape and weights.
pub fn key(ctx: &ProfiledContext, config: &ModelConfig, weights: &ModelWeights) -> String {
    format!(
        "{}|{}|{}|{}|{}",
        env!("CARGO_PKG_VERSION"),
        ctx.adapter_label(),
        ctx.profile.name,
        config.shape_key(),
        weights.summary()
    )
}

/// Sweep the constants of `ctx`'s profile on `weights` within `budget`: each candidate
/// raced against the best so far ([`race`]), then the chosen against the profile's own.
pub async fn sweep(
    ctx: &ProfiledContext,
    config: &ModelConfig,
    weights: &ModelWeights,
    budget: Duration,
) -> Result<Sweep> {
    let base = ctx.profile;
    let Some(start) = Tuned::of(&base) else {
        return Err(Error::InvalidArgument(format!(
            "profile {} has nothing to tune (its GEMVs read textures)",
            base.name
        )));
    };
    let started = Instant::now();
    let shape = head_shape(config);
    let context = tune_context(config);
    let pos = context - 1;
    let build = |design| Built::new(ctx, config, weights, design, context);
    let own_failed = |e: Error| Error::Gpu(format!("the profile's own design failed to run: {e}"));
    let t = Instant::now();
    let mut best = build(start).map_err(own_failed)?;
    best.warm_up(pos).await.map_err(own_failed)?;
    let own = best.time(pos).await.map_err(own_failed)?;
    let timer = own.by;
    let mut trials = vec![Trial::timed("start", start, own, None, t)];
    let mut complete = true;
    'stages: for stage in Stage::ALL {
        for design in stage.variants(best.design, &base, shape) {
            if trials.iter().any(|t| t.design == design) {
                continue;
            }
            if started.elapsed() >= budget {
                complete = false;
                break 'stages;
            }
            let t = Instant::now();
            let mut candidate = match build(design) {
                Ok(c) => c,
                Err(e) => {
                    trials.push(Trial::failed(stage.name(), design, e, t));
                    continue;
                }
            };
            match race::race(&mut candidate, &mut best, pos).await {
                Ok((c, b)) => {
                    trials.push(Trial::timed(stage.name(), design, c, Some(b), t));
                    if c.seconds < b.seconds * (1.0 - MARGIN) {
                        std::mem::replace(&mut best, candidate).release();
                    } else {
                        candidate.release();
                    }
                }
                Err(e) => {
                    trials.push(Trial::failed(stage.name(), design, e, t));
                    candidate.release();
                }
            }
        }
    }
    // The chosen design against the profile's own, raced: kept only when still faster.
    let mut chosen = best.design;
    if chosen != start {
        let t = Instant::now();
        let mut own = build(start)?;
        let (o, b) = race::race(&mut own, &mut best, pos).await?;
        trials.push(Trial::timed(FINAL, start, o, Some(b), t));
        if b.seconds >= o.seconds * (1.0 - MARGIN) {
            chosen = start;
        }
        own.release();
    }
    best.release();
    Ok(Sweep {
        best: chosen,
        trials,
        seconds: started.elapsed().as_secs_f64(),
        timer: timer.to_string(),
        complete,
    })
}
