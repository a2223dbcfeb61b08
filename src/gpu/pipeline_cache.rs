//! Compiled compute pipelines kept per device, keyed by everything that makes one (label,
//! assembled source, bindings, override constants). The tuner's candidates differ from
//! each other in one kernel or two, and a reload or a second model on the device rebuilds
//! the same kernels: each is compiled once. A shader compile costs ~0.25 s on SwiftShader
//! and tens of ms on Metal, and a model builds a few dozen.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// What makes a pipeline: two requests with equal keys get the same compiled pipeline.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PipelineKey {
    pub label: String,
    pub source: String,
    /// The bind group layout's entries, as written by `Debug`.
    pub bindings: String,
    /// Override constants: name and the value's bits.
    pub constants: Vec<(String, u64)>,
    /// Storage buffers among the bindings (WebGPU's default limit per stage: 8).
    pub storage_buffers: usize,
}

/// A compiled pipeline and its bind group layout (handles: cloning shares them).
#[derive(Clone, Debug)]
pub struct Compiled {
    pub pipeline: wgpu::ComputePipeline,
    pub layout: wgpu::BindGroupLayout,
}

/// The device's pipelines, shared by every context on the device
/// (`ProfiledContext::with_device_profile`, `ProfiledContext::tuned_to`).
#[derive(Clone, Debug, Default)]
pub struct PipelineCache(Arc<Mutex<HashMap<PipelineKey, Compiled>>>);

impl PipelineCache {
    /// The pipeline of `key`: kept, else made by `compile` and kept.
    pub fn get_or_compile(&self, key: PipelineKey, compile: impl FnOnce() -> Compiled) -> Compiled {
        if let Some(c) = self.0.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return c;
        }
        let compiled = compile();
        if let Ok(mut m) = self.0.lock() {
            m.insert(key, compiled.clone());
        }
        compiled
    }

    /// Each kept pipeline's label and storage buffers, most first.
    pub fn storage_buffers(&self) -> Vec<(String, usize)> {
        let mut all: Vec<_> = self.0.lock().map_or(vec![], |m| {
            m.keys()
                .map(|k| (k.label.clone(), k.storage_buffers))
                .collect()
        });
        all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        all.dedup();
        all
    }

    /// Pipelines kept.
    pub fn len(&self) -> usize {
        self.0.lock().map_or(0, |m| m.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
