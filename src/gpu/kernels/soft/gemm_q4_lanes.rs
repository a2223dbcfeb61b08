//! The CPU-adapter design of the Q4 GEMM (shaders/soft/gemm_q4_lanes.wgsl): 8 matrix rows per
//! invocation, each code texel loaded once per tile of [`TOKENS`] token rows and reused
//! for all of them, each x value loaded once and reused for the 8 rows (on CPU adapters
//! loads go lane by lane, so loads per multiply-add set the speed). The codes come from
//! their texture copy (`gpu::code_texture`).
//! One dispatch per token tile, each binding its tile of x as two uniform ranges of 4
//! rows; with a fused norm a small pass first writes every row's RMSNorm factor into the
//! tiles' uniform records.

use crate::error::{Error, Result};
use crate::gpu::device::GpuContext;
use crate::gpu::kernels::common::gemm::{GemmBindings, MAX_LANE_TOKENS};
use crate::gpu::kernels::common::gemv_spec::{GemvSpec, TextureOrder, XLoads};
use crate::gpu::kernels::common::q4_codes::CodesRead;
use crate::gpu::kernels::common::wgsl::{CHUNK_WGSL, GEMM_COMMON_WGSL, Q4_COMMON_WGSL};
use crate::gpu::kernels::{grid, Binding, Dispatch, KernelPipeline, Slot, MAX_GROUPS_PER_DIM};

const LANES_WGSL: &str = include_str!("../../../../shaders/soft/gemm_q4_lanes.wgsl");
const X_EACH_WGSL: &str = include_str!("../../../../shaders/soft/gemm_q4_lanes_x.wgsl");
const X_SUBGROUP_WGSL: &str =
    include_str!("../../../../shaders/soft/gemm_q4_lanes_x_subgroup.wgsl");
const RMS_WGSL: &str = include_str!("../../../../shaders/soft/gemm_q4_rms.wgsl");

/// Invocations per workgroup: one 256-bit SIMD batch of f32 lanes.
const WG: usize = 8;
/// Matrix rows per invocation (`ROWS` in the shader).
const ROWS: usize = 8;
/// Token rows per tile: two uniform bindings of 4 rows.
pub const TOKENS: usize = MAX_LANE_TOKENS;
/// Bytes between the tiles' uniform records (the uniform offset alignment).
const TILE_STRIDE: u64 = 256;
/// Bytes of one tile record (`struct Tile`: start, padding, 8 scales).
const TILE_BYTES: u64 = 48;

/// Token rows per tile for K inputs ([`TOKENS`]) when half a tile of x fits a uniform
/// binding (`None` otherwise).
pub(crate) fn tokens_for(ctx: &GpuContext, k: usize) -> Option<usize> {
    tokens_for_limit(ctx.limits.max_uniform_buffer_binding_size, k)
}

/// [`tokens_for`] with a uniform binding limit of `limit` bytes.
pub fn tokens_for_limit(limit: u64, k: usize) -> Option<usize> {
    (half_tile_bytes(k) <= limit).then_some(TOKENS)
}

/// Bytes of x one of the two uniform bindings holds (4 rows of K).
fn half_tile_bytes(k: usize) -> u64 {
    (4 * TOKENS / 2 * k) as u64
}

/// Bytes of the tile records one lanes GEMM bound for `max_m` rows allocates, with
/// `tokens` rows per tile (for the memory plan).
pub fn records_bytes(max_m: usize, tokens: usize) -> u64 {
    max_m.div_ceil(tokens) as u64 * TILE_STRIDE
}

pub(crate) struct LanesGemm {
    main: KernelPipeline,
    rms: Option<KernelPipeline>,
    /// Token rows per tile.
    pub tokens: usize,
    spec: GemvSpec,
    /// Codes bound as a texture in this order.
    pub texture: TextureOrder,
    /// How the invocations load x.
    pub x_loads: XLoads,
}

/// The dispatches of one bound lanes GEMM.
pub(crate) struct LanesDispatch {
    /// The norm factors pass (fused norm only).
    rms: Option<Dispatch>,
    /// One per token tile of the largest M.
    tiles: Vec<Dispatch>,
    tokens: usize,
    /// The tile records (bound by every dispatch; kept alive with them).
    _records: wgpu::Buffer,
}

/// shaders/soft/gemm_q4_lanes.wgsl with the x loads `loads` makes.
fn lanes_wgsl(loads: XLoads) -> String {
    let (x, lane) = match loads {
        XLoads::Each => (X_EACH_WGSL, "    let lane = lid;\n"),
        XLoads::Subgroup => (X_SUBGROUP_WGSL, "    let lane = sid;\n"),
    };
    let main = LANES_WGSL
        .replace("//#subgroup_lane\n", loads.lane_param())
        .replace("//#lane\n", lane);
    [&main, x].concat()
}

impl LanesGemm {
    pub(crate) fn new(
        ctx: &GpuContext,
        spec: GemvSpec,
        constants: &[(&str, f64)],
        texture: TextureOrder,
        subgroup_size: Option<u32>,
    ) -> Result<Self> {
        let (n, k) = (spec.n, spec.k);
        let tokens = tokens_for(ctx, k).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "GEMM K {k}: four token rows do not fit a uniform binding"
            ))
        })?;
        if Self::groups(&spec) > MAX_GROUPS_PER_DIM {
            return Err(Error::InvalidArgument(format!(
                "GEMM N {n}: too many rows for one dispatch"
            )));
        }
        // A codes texture is in the decode GEMV's order (the model's shared copy).
        let codes = CodesRead::new(Some(texture), &spec);
        let uniform = |binding: u32, name: &str, len: usize| {
            format!("@group(0) @binding({binding}) var<uniform> {name}: array<vec4<f32>, {len}>;\n")
        };
        let header = [
            format!("const TOKENS: u32 = {tokens}u;\n"),
            codes.decl(2),
            uniform(4, "x0", tokens / 2 * k / 4),
            uniform(5, "x1", tokens / 2 * k / 4),
            uniform(6, "norm_w", k / 4),
        ]
        .concat();
        let x_loads = XLoads::for_workgroup(subgroup_size, WG as u32);
        let source = [
            &header,
            CHUNK_WGSL,
            Q4_COMMON_WGSL,
            GEMM_COMMON_WGSL,
            &lanes_wgsl(x_loads),
        ]
        .concat();
        let mut main_constants = constants.to_vec();
        main_constants.push(("WG", WG as f64));
        let slots = [
            Slot::Uniform,
            Slot::Uniform,
            codes.slot(),
            Slot::Read,
            Slot::Uniform,
            Slot::Uniform,
            Slot::Uniform,
            Slot::Read,
            Slot::ReadWrite,
        ];
        let label = format!(
            "gemm_q4/lanes/{}{}",
            texture.name(),
            if x_loads == XLoads::Subgroup {
                "/subgroup"
            } else {
                ""
            }
        );
        let main = KernelPipeline::new(ctx, &label, &source, &slots, &main_constants);
        let rms = spec.norm_eps.map(|eps| {
            let source = [CHUNK_WGSL, RMS_WGSL].concat();
            let constants = [
                ("K", k as f64),
                ("EPS", f64::from(eps)),
                ("TOKENS", tokens as f64),
            ];
            let slots = [Slot::Uniform, Slot::Read, Slot::ReadWrite];
            KernelPipeline::new(ctx, "gemm_q4_rms", &source, &slots, &constants)
        });
        Ok(LanesGemm {
            main,
            rms,
            tokens,
            spec,
            texture,
            x_loads,
        })
    }

    /// Workgroups of one tile's dispatch.
    fn groups(spec: &GemvSpec) -> u32 {
        let outs_per_group = WG * ROWS / spec.epilogue.parts();
        spec.n.div_ceil(outs_per_group).min(u32::MAX as usize) as u32
    }

    /// x rows a buffer bound as x must hold for `m` token rows (whole tiles).
    pub(crate) fn x_rows(&self, m: usize) -> usize {
        m.div_ceil(self.tokens) * self.tokens
    }

    pub(crate) fn dispatch(
        &self,
        ctx: &GpuContext,
        b: &GemmBindings,
        max_m: usize,
    ) -> Result<LanesDispatch> {
        let (t, k) = (self.tokens as u64, self.spec.k as u64);
        let tiles = max_m.div_ceil(self.tokens);
        let x_bytes = 4 * k * self.x_rows(max_m) as u64;
        if b.x.size() < x_bytes {
            return Err(Error::InvalidArgument(format!(
                "GEMM x buffer of {} bytes: {max_m} rows need {x_bytes} (whole tiles of {t})",
                b.x.size()
            )));
        }
        // Tile records: the first row of each tile; the scales are written by the rms pass.
        let mut records = vec![0u32; records_bytes(max_m, self.tokens) as usize / 4];
        for (i, r) in records.chunks_mut(TILE_STRIDE as usize / 4).enumerate() {
            r[0] = (i * self.tokens) as u32;
        }
        let tile_buf = ctx.storage_init("gemm tiles", &records)?;
        let range = |buffer, offset, size| wgpu::BufferBinding {
            buffer,
            offset,
            size: std::num::NonZeroU64::new(size),
        };
        let norm = match b.norm_weight {
            Some(w) => range(w, 0, 4 * k),
            None => range(b.x, 0, 4 * k),
        };
        let codes = b.codes.binding(true, "gemm_q4_lanes");
        let groups = Self::groups(&self.spec);
        let half = half_tile_bytes(self.spec.k);
        let tile_dispatches = (0..tiles as u64)
            .map(|i| {
                let bindings = [
                    Binding::Buffer(b.chunk),
                    Binding::Range(range(&tile_buf, i * TILE_STRIDE, TILE_BYTES)),
                    codes.clone(),
                    Binding::Buffer(b.qparams),
                    Binding::Range(range(b.x, i * 4 * t * k, half)),
                    Binding::Range(range(b.x, i * 4 * t * k + half, half)),
                    Binding::Range(norm.clone()),
                    Binding::Buffer(b.bias),
                    Binding::Buffer(b.out),
                ];
                self.main.dispatch_bindings(ctx, &bindings, groups)
            })
            .collect();
        let rms = self
            .rms
            .as_ref()
            .map(|p| p.dispatch(ctx, &[b.chunk, b.x, &tile_buf], max_m.div_ceil(WG) as u32));
        Ok(LanesDispatch {
            rms,
            tiles: tile_dispatches,
            tokens: self.tokens,
            _records: tile_buf,
        })
    }
}

impl LanesDispatch {
    /// Encode the GEMM of `m` token rows (at most the dispatch's `max_m`).
    pub(crate) fn encode(&self, pass: &mut wgpu::ComputePass<'_>, m: usize) -> Result<()> {
        let tiles = m.div_ceil(self.tokens);
        if tiles > self.tiles.len() {
            return Err(Error::InvalidArgument(format!(
                "GEMM of {m} token rows: bound for at most {}",
                self.tiles.len() * self.tokens
            )));
        }
        if let Some(rms) = &self.rms {
            rms.encode_grid(pass, grid(m.div_ceil(WG) as u32));
        }
        for d in &self.tiles[..tiles] {
            d.encode(pass);
        }
        Ok(())
    }
}
