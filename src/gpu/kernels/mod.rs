//! One typed wrapper per shader. Each wrapper owns its pipeline and bind-group layout,
//! takes the per-model constants as WGSL `override`s, and turns buffers into a
//! [`Dispatch`]: a bind group plus the workgroup grid, built once and encoded every step.
//!
//! Two families of designs, which never import each other: the GPU designs (the modules
//! here) and the CPU adapters' (`soft`). What both use is in `common` (shared types and
//! WGSL fragments) and here (pipelines, bindings, dispatches); where a kernel has a design
//! in each family, `gpu::forward::designs` picks one (tests/kernel_families.rs checks
//! the rule).

pub mod argmax;
pub mod argmax_partials;
pub mod attention;
pub mod attention_group;
pub mod attention_prefill;
pub mod common;
pub mod embed_prefill;
pub mod embed_q4;
pub mod gemm_q4;
pub mod gemv_q4;
pub mod logit_adjust;
pub mod logsumexp;
pub mod read_bench;
pub mod rmsnorm;
pub mod rope_kv_prefill;
pub mod sample_draw;
pub mod soft;
pub mod topk;

use super::device::GpuContext;
use super::pipeline_cache::{Compiled, PipelineKey};
use std::sync::Arc;

/// How a weight matrix is stored on the GPU. Both hold `codes` and a second buffer of
/// u32 per two 32-value halves of a 64-value block, so the buffers, bindings and
/// indexing of a matrix are alike and only the kernels' unpacking differs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MatrixFormat {
    /// Q4 g64 (`quant::Q4Tensor`): codes u32[rows][cols/8], qparams u32[rows][cols/64] =
    /// pack2x16float(scale, min).
    #[default]
    Q4,
    /// Q8 g32 (`quant::Q8Tensor`): codes u32[rows][cols/4] (4 int8 each), scales
    /// u32[rows][cols/64] = the two f16 scales of its 32-value groups (cols a multiple
    /// of 64, so a row's groups pair up within the row).
    Q8,
}

impl MatrixFormat {
    pub fn name(self) -> &'static str {
        match self {
            MatrixFormat::Q4 => "q4",
            MatrixFormat::Q8 => "q8",
        }
    }

    /// Bytes of the codes of a `rows` × `cols` matrix.
    pub fn code_bytes(self, rows: usize, cols: usize) -> u64 {
        let per_value = match self {
            MatrixFormat::Q4 => 1,
            MatrixFormat::Q8 => 2,
        };
        rows as u64 * cols as u64 * per_value / 2
    }

    /// Bytes of the qparams (Q4) or scales (Q8): one u32 per 64 values.
    pub fn param_bytes(rows: usize, cols: usize) -> u64 {
        rows as u64 * cols as u64 / 16
    }
}

/// The environment variable naming a folder for every assembled shader source.
pub const DUMP_WGSL_ENV: &str = "POCKETRT_DUMP_WGSL";

/// Write `source` to `$POCKETRT_DUMP_WGSL/<label>-<hash>.wgsl` (`/` in the label as `.`),
/// its override values in a header comment: one file per distinct pipeline (a failed
/// write is reported on stderr, never fatal: it is a debugging aid).
fn dump_wgsl(label: &str, source: &str, constants: &[(&str, f64)]) {
    #[cfg(not(target_arch = "wasm32"))]
    if let Some(dir) = std::env::var_os(DUMP_WGSL_ENV).filter(|d| !d.is_empty()) {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        source.hash(&mut h);
        constants
            .iter()
            .for_each(|(k, v)| (k, v.to_bits()).hash(&mut h));
        let name = format!("{}-{:08x}.wgsl", label.replace('/', "."), h.finish() as u32);
        let overrides: String = constants
            .iter()
            .map(|(k, v)| format!("// override {k} = {v}\n"))
            .collect();
        let path = std::path::Path::new(&dir).join(name);
        let written = std::fs::create_dir_all(&dir)
            .and_then(|_| std::fs::write(&path, format!("// {label}\n{overrides}{source}")));
        if let Err(e) = written {
            eprintln!("{DUMP_WGSL_ENV}: cannot write {}: {e}", path.display());
        }
    }
    #[cfg(target_arch = "wasm32")]
    let _ = (label, source, constants);
}

/// Most workgroups a dispatch may have in one dimension (WebGPU default limit).
pub const MAX_GROUPS_PER_DIM: u32 = 65_535;

/// How a kernel binds one resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    Uniform,
    Read,
    ReadWrite,
    /// A `texture_2d<u32>` read with `textureLoad` (row-major Q4 codes on CPU adapters
    /// other than lavapipe, `q4_codes::TextureOrder`).
    TextureU32,
    /// A `texture_2d<f32>` read with `textureLoad` (activations on CPU adapters).
    TextureF32,
    /// A read-only `texture_storage_2d<rgba32uint, read>` (Q4 codes in tile order on
    /// lavapipe, `q4_codes::TextureOrder`).
    StorageTextureU32,
    /// Not bound: the shader declares no such binding (a design without that input), so
    /// the layout leaves the number out and what the caller passes for it is ignored.
    Unused,
}

impl Slot {
    /// A storage buffer (WebGPU's default limit: 8 per stage).
    pub fn is_storage_buffer(self) -> bool {
        matches!(self, Slot::Read | Slot::ReadWrite)
    }
}

/// What fills one slot at dispatch.
#[derive(Clone)]
pub enum Binding<'a> {
    Buffer(&'a wgpu::Buffer),
    /// A range of a buffer (offset and size).
    Range(wgpu::BufferBinding<'a>),
    Texture(&'a wgpu::TextureView),
}

/// The layout's entry type of `slot`; `None` for [`Slot::Unused`].
fn binding_type(slot: Slot) -> Option<wgpu::BindingType> {
    let buffer = |ty| wgpu::BindingType::Buffer {
        ty,
        has_dynamic_offset: false,
        min_binding_size: None,
    };
    let texture = |sample_type| wgpu::BindingType::Texture {
        sample_type,
        view_dimension: wgpu::TextureViewDimension::D2,
        multisampled: false,
    };
    Some(match slot {
        Slot::Uniform => buffer(wgpu::BufferBindingType::Uniform),
        Slot::Read => buffer(wgpu::BufferBindingType::Storage { read_only: true }),
        Slot::ReadWrite => buffer(wgpu::BufferBindingType::Storage { read_only: false }),
        Slot::TextureU32 => texture(wgpu::TextureSampleType::Uint),
        Slot::TextureF32 => texture(wgpu::TextureSampleType::Float { filterable: false }),
        Slot::StorageTextureU32 => wgpu::BindingType::StorageTexture {
            access: wgpu::StorageTextureAccess::ReadOnly,
            format: wgpu::TextureFormat::Rgba32Uint,
            view_dimension: wgpu::TextureViewDimension::D2,
        },
        Slot::Unused => return None,
    })
}

/// A compute pipeline with its explicit bind-group layout.
pub struct KernelPipeline {
    /// The kernel and its design, e.g. `gemv_q4/tiles/8x16` (in wgpu's validation errors
    /// and the per-kernel profile).
    pub label: Arc<str>,
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
    slots: Vec<Slot>,
}

/// Compile `source` into a pipeline over bindings `entries` (entry point `main`).
fn compile(
    ctx: &GpuContext,
    label: &str,
    source: &str,
    entries: &[wgpu::BindGroupLayoutEntry],
    constants: &[(&str, f64)],
) -> Compiled {
    let device = &ctx.device;
    let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some(label),
        entries,
    });
    let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some(label),
        bind_group_layouts: &[Some(&layout)],
        immediate_size: 0,
    });
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some(label),
        source: wgpu::ShaderSource::Wgsl(source.into()),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(label),
        layout: Some(&pipeline_layout),
        module: &module,
        entry_point: Some("main"),
        compilation_options: wgpu::PipelineCompilationOptions {
            constants,
            // Every kernel writes its workgroup memory before reading it.
            zero_initialize_workgroup_memory: false,
        },
        cache: None,
    });
    Compiled { pipeline, layout }
}

impl KernelPipeline {
    /// Compile `source` (entry point `main`) with `constants` as override values, as the
    /// device takes it ([`common::wgsl_compat::wgsl_for`]: builtins it lacks polyfilled), or take
    /// the device's kept pipeline of the same key (`gpu::pipeline_cache`); `label` names
    /// the kernel and its design. With `POCKETRT_DUMP_WGSL=DIR` the compiled
    /// source is also written to DIR (natively).
    pub fn new(
        ctx: &GpuContext,
        label: &str,
        source: &str,
        slots: &[Slot],
        constants: &[(&str, f64)],
    ) -> KernelPipeline {
        let source = common::wgsl_compat::wgsl_for(ctx.adapter.features.packed_4x8, source);
        let source = source.as_ref();
        dump_wgsl(label, source, constants);
        let entries: Vec<wgpu::BindGroupLayoutEntry> = slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                Some(wgpu::BindGroupLayoutEntry {
                    binding: i as u32,
                    visibility: wgpu::ShaderStages::COMPUTE,
                    ty: binding_type(*s)?,
                    count: None,
                })
            })
            .collect();
        let key = PipelineKey {
            label: label.into(),
            source: source.into(),
            bindings: format!("{entries:?}"),
            constants: constants
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_bits()))
                .collect(),
            storage_buffers: slots.iter().filter(|s| s.is_storage_buffer()).count(),
        };
        let Compiled { pipeline, layout } = ctx
            .pipelines
            .get_or_compile(key, || compile(ctx, label, source, &entries, constants));
        KernelPipeline {
            label: label.into(),
            pipeline,
            layout,
            slots: slots.to_vec(),
        }
    }

    /// Bind whole buffers, one per slot, and pair them with a workgroup count.
    pub fn dispatch(&self, ctx: &GpuContext, buffers: &[&wgpu::Buffer], groups: u32) -> Dispatch {
        let bindings: Vec<Binding> = buffers.iter().map(|b| Binding::Buffer(b)).collect();
        self.dispatch_bindings(ctx, &bindings, groups)
    }

    /// [`KernelPipeline::dispatch`] with buffer ranges (offset and size) per slot.
    pub fn dispatch_ranges(
        &self,
        ctx: &GpuContext,
        buffers: &[wgpu::BufferBinding],
        groups: u32,
    ) -> Dispatch {
        let bindings: Vec<Binding> = buffers.iter().cloned().map(Binding::Range).collect();
        self.dispatch_bindings(ctx, &bindings, groups)
    }

    /// [`KernelPipeline::dispatch`] with textures or buffer ranges among the resources.
    pub fn dispatch_bindings(
        &self,
        ctx: &GpuContext,
        bindings: &[Binding],
        groups: u32,
    ) -> Dispatch {
        assert_eq!(
            bindings.len(),
            self.slots.len(),
            "{}: {} resources for {} slots",
            self.label,
            bindings.len(),
            self.slots.len()
        );
        let entries: Vec<wgpu::BindGroupEntry> = bindings
            .iter()
            .enumerate()
            .filter(|(i, _)| self.slots[*i] != Slot::Unused)
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: match b {
                    Binding::Buffer(b) => b.as_entire_binding(),
                    Binding::Range(r) => wgpu::BindingResource::Buffer(r.clone()),
                    Binding::Texture(t) => wgpu::BindingResource::TextureView(t),
                },
            })
            .collect();
        let bind_group = ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(&self.label),
            layout: &self.layout,
            entries: &entries,
        });
        Dispatch {
            label: self.label.clone(),
            pipeline: self.pipeline.clone(),
            bind_group,
            grid: grid(groups),
        }
    }
}

/// `groups` workgroups as a grid: 1-D up to 65,535, else 2-D (x full rows of 65,535).
/// Shaders recover the linear index as `id.x + id.y * num_workgroups.x` and skip
/// indices past their total.
pub fn grid(groups: u32) -> [u32; 3] {
    if groups <= MAX_GROUPS_PER_DIM {
        [groups, 1, 1]
    } else {
        [MAX_GROUPS_PER_DIM, groups.div_ceil(MAX_GROUPS_PER_DIM), 1]
    }
}

/// One kernel invocation, ready to encode: built at load, encoded every step.
pub struct Dispatch {
    /// Its pipeline's label (kernel and design).
    pub label: Arc<str>,
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    pub grid: [u32; 3],
}

impl Dispatch {
    pub fn encode(&self, pass: &mut wgpu::ComputePass<'_>) {
        self.encode_grid(pass, self.grid);
    }

    /// [`Dispatch::encode`] with a grid chosen per step (attention splits by position,
    /// prefill chunks shorter than the longest).
    pub fn encode_grid(&self, pass: &mut wgpu::ComputePass<'_>, grid: [u32; 3]) {
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind_group, &[]);
        pass.dispatch_workgroups(grid[0], grid[1], grid[2]);
    }
}

/// Encode `dispatches` in one compute pass of one command buffer and submit it.
pub fn run(ctx: &GpuContext, dispatches: &[&Dispatch]) {
    let mut enc = ctx.device.create_command_encoder(&Default::default());
    {
        let mut pass = enc.begin_compute_pass(&Default::default());
        for d in dispatches {
            d.encode(&mut pass);
        }
    }
    ctx.queue.submit([enc.finish()]);
}
