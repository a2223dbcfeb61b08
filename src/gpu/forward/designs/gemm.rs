//! Which design computes a prefill GEMM ([`GemmQ4`]): the workgroup tiles on GPUs
//! (`kernels::gemm_q4`) or, on CPU adapters, where barriers and per-lane storage loads
//! are slow, one row per invocation reusing each weight across a tile of tokens read as
//! uniforms (`kernels::soft::gemm_q4_lanes`), as [`GemmVariant`] names it.

use crate::error::{Error, Result};
use crate::gpu::device::GpuContext;
use crate::gpu::kernels::common::gemm::{GemmBindings, GemmVariant};
use crate::gpu::kernels::common::gemv_spec::{GemvSpec, XLoads};
use crate::gpu::kernels::common::q4_codes::Codes;
use crate::gpu::kernels::gemm_q4::{TilesDispatch, TilesGemm};
use crate::gpu::kernels::soft::gemm_q4_lanes::{LanesDispatch, LanesGemm};
use crate::gpu::kernels::MatrixFormat;
use crate::gpu::profiled::ProfiledContext;

enum Kernel {
    Tiles(TilesGemm),
    Lanes(LanesGemm),
}

/// A GEMM of fixed N and K (the [`GemvSpec`] of the matching GEMV).
pub struct GemmQ4 {
    kernel: Kernel,
    pub spec: GemvSpec,
}

/// A bound GEMM, ready to encode for any M up to the `max_m` it was bound for.
pub struct GemmDispatch {
    inner: Inner,
}

enum Inner {
    Tiles(TilesDispatch),
    Lanes(LanesDispatch),
}

impl GemmQ4 {
    /// The GEMM of `spec` in the profile's variant ([`crate::gpu::DeviceProfile::gemm_for`]).
    pub fn new(ctx: &ProfiledContext, spec: GemvSpec) -> Result<GemmQ4> {
        let max_uniform = ctx.limits.max_uniform_buffer_binding_size;
        let variant = ctx.profile.gemm_for(spec.k, max_uniform, spec.format);
        Self::with_variant(ctx, variant, spec)
    }

    /// The GEMM of `spec` in `variant` (any variant runs on any adapter).
    pub fn with_variant(
        ctx: &ProfiledContext,
        variant: GemmVariant,
        spec: GemvSpec,
    ) -> Result<GemmQ4> {
        let (n, k) = (spec.n, spec.k);
        if n == 0 || k == 0 || k % 64 != 0 || n > u32::MAX as usize / 2 {
            return Err(Error::InvalidArgument(format!(
                "GEMM N {n} × K {k}: N must be positive and K a positive multiple of 64"
            )));
        }
        if spec.row0 > 0 {
            return Err(Error::InvalidArgument(format!(
                "GEMM N {n} × K {k}: prefill never computes a part of a split matrix"
            )));
        }
        let constants = spec.constants();
        let kernel = match variant {
            GemmVariant::RowLanesFromTexture(_) if spec.format == MatrixFormat::Q8 => {
                return Err(Error::InvalidArgument(format!(
                    "GEMM N {n} × K {k} of Q8 g32 weights: the workgroup-tiles design runs \
                     them ({} does not)",
                    variant.label()
                )))
            }
            GemmVariant::RowLanesFromTexture(order) => {
                let subgroup_size = ctx.profile.subgroup_size;
                Kernel::Lanes(LanesGemm::new(ctx, spec, &constants, order, subgroup_size)?)
            }
            GemmVariant::WorkgroupTiles(tiles) => {
                Kernel::Tiles(TilesGemm::new(ctx, spec, &constants, tiles)?)
            }
        };
        Ok(GemmQ4 { kernel, spec })
    }

    pub fn variant(&self) -> GemmVariant {
        match &self.kernel {
            Kernel::Tiles(t) => GemmVariant::WorkgroupTiles(t.tiles),
            Kernel::Lanes(l) => GemmVariant::RowLanesFromTexture(l.texture),
        }
    }

    /// How the row-lanes kernel loads x (none for the workgroup tiles).
    pub fn x_loads(&self) -> Option<XLoads> {
        match &self.kernel {
            Kernel::Lanes(l) => Some(l.x_loads),
            _ => None,
        }
    }

    /// Token rows a buffer bound as x must hold for `m` rows (the row-lanes variant reads
    /// whole tiles; rows past `m` are read but never affect an output).
    pub fn x_rows(&self, m: usize) -> usize {
        match &self.kernel {
            Kernel::Tiles(..) => m,
            Kernel::Lanes(l) => l.x_rows(m),
        }
    }

    /// Bind `chunk` ([`crate::gpu::kernels::common::gemm::ChunkUniform`]; its `count` is M), the matrix (`parts · n` rows of
    /// k; the codes as a texture exactly for [`GemmVariant::RowLanesFromTexture`]), `x` ([`GemmQ4::x_rows`]`(max_m)` × k floats; storage buffers of
    /// `GpuContext::storage`, which also allow uniform use), the norm weights (k floats;
    /// exactly when the spec fuses a norm), `bias` (`parts · n` floats, or any small
    /// buffer) and `out` (M × n floats), for up to `max_m` token rows.
    #[allow(clippy::too_many_arguments)]
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        chunk: &wgpu::Buffer,
        codes: Codes,
        qparams: &wgpu::Buffer,
        x: &wgpu::Buffer,
        norm_weight: Option<&wgpu::Buffer>,
        bias: &wgpu::Buffer,
        out: &wgpu::Buffer,
        max_m: usize,
    ) -> Result<GemmDispatch> {
        assert_eq!(
            norm_weight.is_some(),
            self.spec.norm_eps.is_some(),
            "gemm_q4: norm weights are bound exactly when the norm is fused"
        );
        let b = GemmBindings {
            chunk,
            codes,
            qparams,
            x,
            norm_weight,
            bias,
            out,
        };
        let inner = match &self.kernel {
            Kernel::Tiles(kernel) => Inner::Tiles(kernel.dispatch(ctx, &b, max_m)?),
            Kernel::Lanes(kernel) => Inner::Lanes(kernel.dispatch(ctx, &b, max_m)?),
        };
        Ok(GemmDispatch { inner })
    }
}

impl GemmDispatch {
    /// Encode the GEMM of `m` token rows (the chunk uniform's count; at most the bound
    /// `max_m`).
    pub fn encode(&self, pass: &mut wgpu::ComputePass<'_>, m: usize) -> Result<()> {
        match &self.inner {
            Inner::Tiles(d) => d.encode(pass, m),
            Inner::Lanes(d) => d.encode(pass, m),
        }
    }
    /// Encode for `m` rows in one pass of its own and submit it.
    pub fn run(&self, ctx: &GpuContext, m: usize) -> Result<()> {
        let mut enc = ctx.device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            self.encode(&mut pass, m)?;
        }
        ctx.queue.submit([enc.finish()]);
        Ok(())
    }
}
