//! What the JavaScript caller passes, read from its option objects and checked: a load's
//! options (`LoadOptions`: the backend asked for, the profile, the tuner's policy, what a
//! load over the quota does, …), the context policy of its requests, and generation's
//! options, speculative decoding's included. A misspelt or mistyped option is an
//! `InvalidArgument` naming what it takes.

use super::fetch::CACHE_NAME;
use crate::api::ContextPolicy;
use crate::error::{Error, Result};
use crate::generate::{ContextOverflow, GenerateOptions};
use crate::gpu::profile::{DeviceProfile, PROFILE_NAMES};
use crate::gpu::tune::TunePolicy;
use crate::quant::WeightFormat;
use crate::sampler::SamplerConfig;
use crate::speculate::{SpecOptions, DRAFT_MAX_LIMIT};
use js_sys::Reflect;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::AbortSignal;

/// What the caller asked for.
pub struct LoadOptions {
    pub on_progress: Option<js_sys::Function>,
    pub signal: Option<AbortSignal>,
    pub context: Option<usize>,
    /// Shards fetched at once.
    pub parallel: usize,
    /// Cache Storage name; `None`: no caching.
    pub cache_name: Option<String>,
    /// Local files: an object mapping each package file name to a (blob) URL; the model
    /// URL is then only a label.
    pub files: Option<wasm_bindgen::JsValue>,
    /// The model hub's endpoint, for `owner/name` ids.
    pub hub_endpoint: String,
    /// The backend asked for (see `backend.rs`).
    pub backend: Choice,
    /// The device profile forced by name (one of `gpu::profile::PROFILE_NAMES`; `None`:
    /// the one `DeviceProfile::detect` picks). WebGPU only: the CPU backend has none.
    pub profile: Option<String>,
    /// The on-device tuner (`tune`: false → off, undefined → auto, true → on, or "off",
    /// "auto", "on", "force"; `gpu::tune::TunePolicy`).
    pub tune: TunePolicy,
    /// How a GGUF's matrices are held (`weights`: "q4" | "q8" | "keep", default keep:
    /// as its author quantized them, `WeightFormat`); packages run as stored.
    pub weights: WeightFormat,
    /// No requests at all: every file must be in the cache (`cache.rs`).
    pub offline: bool,
    /// What a load the storage quota cannot hold does.
    pub over_quota: OverQuota,
    /// Speculative decoding of the requests that set none (`speculative`; `None`: off).
    pub speculative: Option<SpecOptions>,
}

impl LoadOptions {
    /// Whether requests are forbidden (`offline`; local files are read all the same).
    pub fn no_requests(&self) -> bool {
        self.offline && self.files.is_none()
    }
}

/// The backend the caller asks for (the `backend` option; `backend.rs` decides).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Choice {
    WebGpu,
    Cpu,
    #[default]
    Auto,
}

impl Choice {
    /// `"webgpu"`, `"cpu"` or `"auto"` (default when absent).
    pub fn parse(name: Option<&str>) -> Result<Choice> {
        match name {
            None | Some("auto") => Ok(Choice::Auto),
            Some("webgpu") => Ok(Choice::WebGpu),
            Some("cpu") => Ok(Choice::Cpu),
            Some(other) => Err(Error::InvalidArgument(format!(
                "backend {other:?}: use \"webgpu\", \"cpu\" or \"auto\""
            ))),
        }
    }
}

/// Whether a load that overruns the quota fails (`QUOTA`) or loads without caching (the
/// `overQuota` option; `cache.rs` checks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OverQuota {
    Error,
    Uncached,
}

impl OverQuota {
    pub fn parse(name: Option<&str>) -> Result<OverQuota> {
        match name {
            None | Some("error") => Ok(OverQuota::Error),
            Some("uncached") => Ok(OverQuota::Uncached),
            Some(other) => Err(Error::InvalidArgument(format!(
                "overQuota must be \"error\" or \"uncached\", not {other:?}"
            ))),
        }
    }
}

/// `options[key]`, when set (not undefined/null).
fn opt(options: &JsValue, key: &str) -> Option<JsValue> {
    if !options.is_object() {
        return None;
    }
    Reflect::get(options, &key.into())
        .ok()
        .filter(|v| !v.is_undefined() && !v.is_null())
}

fn number(options: &JsValue, key: &str) -> Result<Option<f64>> {
    match opt(options, key) {
        None => Ok(None),
        Some(v) => v
            .as_f64()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .map(Some)
            .ok_or_else(|| Error::InvalidArgument(format!("{key} must be a number ≥ 0"))),
    }
}

fn count(options: &JsValue, key: &str) -> Result<Option<usize>> {
    Ok(number(options, key)?.map(|x| x as usize))
}

/// Generation options from `{ maxTokens, temperature, topK, topP, seed, contextOverflow,
/// keep, speculative }`; `speculative`, where not set, is the model's (`default`: the load
/// option's).
pub(super) fn generate_options(
    options: &JsValue,
    default: Option<SpecOptions>,
) -> Result<GenerateOptions> {
    let d = GenerateOptions::default();
    let s = SamplerConfig::greedy();
    let keep = count(options, "keep")?.unwrap_or(0);
    let overflow = match opt(options, "contextOverflow").map(|v| v.as_string()) {
        None => ContextOverflow::Error,
        Some(Some(s)) if s == "error" => ContextOverflow::Error,
        Some(Some(s)) if s == "slide" => ContextOverflow::SlidingWindow { keep },
        Some(_) => {
            return Err(Error::InvalidArgument(
                "contextOverflow must be \"error\" or \"slide\"".into(),
            ))
        }
    };
    Ok(GenerateOptions {
        overflow,
        max_tokens: count(options, "maxTokens")?.unwrap_or(d.max_tokens),
        sampler: SamplerConfig {
            temperature: number(options, "temperature")?.map_or(s.temperature, |x| x as f32),
            top_k: count(options, "topK")?.unwrap_or(s.top_k),
            top_p: number(options, "topP")?.map_or(s.top_p, |x| x as f32),
            seed: number(options, "seed")?.map_or(s.seed, |x| x as u64),
            ..s
        },
        speculative: speculative(options)?.unwrap_or(default),
        ..d
    })
}

/// What the `speculative` option of a load or a request takes.
const SPECULATIVE: &str = "\"lookup\", true, { draftMax } or false";

/// The `speculative` option (`crate::speculate`): `"lookup"` or true — drafts from the
/// request's own context (and the tokens a grammar forces), up to
/// [`crate::speculate::DEFAULT_DRAFT_MAX`] a step —, `{ draftMax: N }` — the same, up to
/// N (1 to [`DRAFT_MAX_LIMIT`]) —, or false: none. `None` when not set. A draft model
/// (`{ draft: url }`) is not supported in the browser yet (`UNSUPPORTED`).
pub(super) fn speculative(options: &JsValue) -> Result<Option<Option<SpecOptions>>> {
    let Some(v) = opt(options, "speculative") else {
        return Ok(None);
    };
    let bad =
        |what: String| Error::InvalidArgument(format!("speculative {what}: use {SPECULATIVE}"));
    if let Some(on) = v.as_bool() {
        return Ok(Some(on.then(SpecOptions::lookup)));
    }
    if let Some(name) = v.as_string() {
        return match name.as_str() {
            "lookup" => Ok(Some(Some(SpecOptions::lookup()))),
            other => Err(bad(format!("{other:?}"))),
        };
    }
    if !v.is_object() || js_sys::Array::is_array(&v) {
        return Err(bad("must be a string, a boolean or an object".into()));
    }
    for key in js_sys::Object::keys(v.unchecked_ref::<js_sys::Object>()).iter() {
        match key.as_string().unwrap_or_default().as_str() {
            "draftMax" => {}
            "draft" => {
                return Err(Error::Unsupported {
                    what: "speculative".into(),
                    kind: "option",
                    name: "{ draft } (a draft model: not in the browser yet)".into(),
                    supported: SPECULATIVE,
                })
            }
            other => return Err(bad(format!("has an unknown field {other:?}"))),
        }
    }
    let mut spec = SpecOptions::lookup();
    if let Some(n) = opt(&v, "draftMax") {
        spec.draft_max = n
            .as_f64()
            .filter(|n| n.fract() == 0.0 && (1.0..=DRAFT_MAX_LIMIT as f64).contains(n))
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "speculative.draftMax must be a whole number 1 to {DRAFT_MAX_LIMIT}"
                ))
            })? as usize;
    }
    Ok(Some(Some(spec)))
}

impl LoadOptions {
    /// `PocketModel.load`'s options, checked.
    pub fn from_js(options: &JsValue) -> Result<LoadOptions> {
        Ok(LoadOptions {
            on_progress: opt(options, "onProgress").and_then(|v| v.dyn_into().ok()),
            signal: opt(options, "signal").and_then(|v| v.dyn_into().ok()),
            context: count(options, "contextLength")?,
            parallel: count(options, "parallel")?.unwrap_or(4),
            cache_name: match opt(options, "cache").and_then(|v| v.as_bool()) {
                Some(false) => None,
                _ => Some(CACHE_NAME.to_string()),
            },
            files: opt(options, "files"),
            hub_endpoint: opt(options, "hubEndpoint")
                .and_then(|v| v.as_string())
                .unwrap_or_else(|| crate::hub::choose::DEFAULT_ENDPOINT.to_string()),
            backend: Choice::parse(
                opt(options, "backend")
                    .and_then(|v| v.as_string())
                    .as_deref(),
            )?,
            profile: profile(options)?,
            tune: tune(options)?,
            weights: match opt(options, "weights").and_then(|v| v.as_string()) {
                Some(name) => name.parse()?,
                None => WeightFormat::Keep,
            },
            offline: opt(options, "offline").and_then(|v| v.as_bool()) == Some(true),
            over_quota: OverQuota::parse(
                opt(options, "overQuota")
                    .and_then(|v| v.as_string())
                    .as_deref(),
            )?,
            speculative: speculative(options)?.flatten(),
        })
    }
}

/// The `tune` option: false (off), true (on: a GPU profile forced on a software adapter
/// too), a policy's name, or undefined (auto).
fn tune(options: &JsValue) -> Result<TunePolicy> {
    let Some(v) = opt(options, "tune") else {
        return Ok(TunePolicy::Auto);
    };
    match (v.as_bool(), v.as_string()) {
        (Some(false), _) => Ok(TunePolicy::Off),
        (Some(true), _) => Ok(TunePolicy::On),
        (_, Some(name)) => TunePolicy::parse(&name),
        _ => Err(Error::InvalidArgument(
            "tune must be a boolean or one of \"off\", \"auto\", \"on\", \"force\"".into(),
        )),
    }
}

/// The `profile` option: a device profile's name, checked here
/// (`DeviceProfile::check_name`) so that a misspelt name fails on every backend; whether
/// the adapter can run it is checked when the device opens (`DeviceProfile::named`).
fn profile(options: &JsValue) -> Result<Option<String>> {
    let Some(v) = opt(options, "profile") else {
        return Ok(None);
    };
    let name = v.as_string().ok_or_else(|| {
        let names = PROFILE_NAMES.join(", ");
        Error::InvalidArgument(format!("profile must be a string (profiles: {names})"))
    })?;
    match name.trim() {
        "" => Ok(None),
        n => Ok(Some(DeviceProfile::check_name(n)?.to_string())),
    }
}

/// The `contextOverflow` option: the context policy of requests that set none.
pub(super) fn context_overflow(options: &JsValue) -> Result<ContextPolicy> {
    match opt(options, "contextOverflow").map(|v| v.as_string()) {
        None => Ok(ContextPolicy::Error),
        Some(Some(s)) if s == "error" => Ok(ContextPolicy::Error),
        Some(Some(s)) if s == "truncate" => Ok(ContextPolicy::Truncate),
        Some(_) => Err(Error::InvalidArgument(
            "contextOverflow must be \"error\" or \"truncate\"".into(),
        )),
    }
}
