//! The decode GEMV's wrapper, shared by its designs ([`GemvQ4`]): the checks, bindings,
//! per-pipeline header ([`gemv_header`]), label and dispatches are the same for every
//! design; only the body differs (the GPU rows design: `gemv_q4`; the CPU adapters':
//! `soft::gemv_rows`), and `gpu::forward::designs` passes the one the variant names.

use super::gemv_spec::{Epilogue, GemvSpec, GemvVariant, RowsLayout, XLoads};
use super::q4_codes::{Codes, CodesRead};
use super::wgsl::Q4_COMMON_WGSL;
use crate::error::{Error, Result};
use crate::gpu::device::GpuContext;
use crate::gpu::kernels::{Binding, Dispatch, KernelPipeline, MatrixFormat, Slot};
use crate::gpu::weights::MatrixPart;

/// What every GEMV design's body reads (the spec's buffers, shaders/common/gemv_q4_common.wgsl).
const GEMV_COMMON_WGSL: &str = include_str!("../../../../shaders/common/gemv_q4_common.wgsl");

/// The bias binding (its line in shaders/common/gemv_q4_common.wgsl), and what replaces it in the
/// GPU rows designs of a spec without bias: a private array the kernel never reads (it
/// adds a bias only `HAS_BIAS`), binding 4 then left out ([`Slot::Unused`]). One storage
/// binding of headroom (issue 41, part 5): the gate/up GEMV with the attention's parts
/// and the head's with the argmax would bind all 8 of WebGPU's default per stage.
const BIAS_BINDING: &str = "@group(0) @binding(4) var<storage, read> bias: array<f32>;";
const NO_BIAS: &str = "var<private> bias: array<f32, 1>;";
/// The input as x plus partial vectors (`GemvSpec::add_parts`).
const PARTS_WGSL: &str = include_str!("../../../../shaders/common/gemv_q4_parts.wgsl");

/// What a GEMV design's body is written for.
pub(crate) struct GemvDesignInputs {
    pub spec: GemvSpec,
    pub layout: RowsLayout,
    /// How the body reads the codes.
    pub codes: CodesRead,
    pub x_loads: XLoads,
    /// The fused argmax epilogue ([`Epilogue::StoreArgmax`]).
    pub argmax: bool,
}

/// A GEMV design's part of the source: what must open it (`enable f16;`) and its body
/// (after the header, shaders/common/q4_common.wgsl and shaders/common/gemv_q4_common.wgsl).
pub(crate) struct GemvDesignSource {
    pub enables: &'static str,
    pub body: String,
}

/// The partial vectors a [`GemvSpec::add_parts`] GEMV adds to x (`parts`: add_parts × k
/// floats), and where it stores the sum (`h_out`: k floats, a buffer the dispatch does
/// not otherwise bind).
#[derive(Clone, Copy)]
pub struct ResidualParts<'a> {
    pub parts: &'a wgpu::Buffer,
    pub h_out: &'a wgpu::Buffer,
}

/// The buffers of an [`Epilogue::StoreArgmax`] GEMV's fused argmax: `mask`, the
/// allowed-token mask ([`crate::gpu::kernels::argmax::mask_words`] words), and `partials`,
/// [`GemvQ4::workgroups`] × (index, value bits).
#[derive(Clone, Copy)]
pub struct HeadArgmax<'a> {
    pub mask: &'a wgpu::Buffer,
    pub partials: &'a wgpu::Buffer,
}

/// A GEMV of fixed shape.
pub struct GemvQ4 {
    kernel: KernelPipeline,
    variant: GemvVariant,
    layout: RowsLayout,
    pub spec: GemvSpec,
    /// How it reads the codes.
    codes: CodesRead,
    x_loads: XLoads,
}

/// The per-pipeline WGSL header: the rows variant's constants, the codes binding (read
/// as `codes` says) and the x / norm-weight bindings, as uniform
/// arrays of K/4 vec4 when `uniform_x`, else as storage arrays, and the input accessor `x_in`
/// (shaders/common/gemv_q4_parts.wgsl when the spec adds partial vectors, their binding uniform
/// when `uniform_parts`).
pub fn gemv_header(
    spec: &GemvSpec,
    layout: RowsLayout,
    (uniform_x, uniform_parts): (bool, bool),
    codes: &CodesRead,
) -> String {
    let uniform_decl = |binding: u32, name: &str, len: usize| {
        format!("@group(0) @binding({binding}) var<uniform> {name}: array<vec4<f32>, {len}>;\n")
    };
    let decl = |binding: u32, name: &str| {
        if uniform_x {
            uniform_decl(binding, name, spec.k / 4)
        } else {
            format!("@group(0) @binding({binding}) var<storage, read> {name}: array<vec4<f32>>;\n")
        }
    };
    let input = if spec.add_parts > 0 {
        let parts = if uniform_parts {
            uniform_decl(6, "add_vecs", spec.add_parts * spec.k / 4)
        } else {
            "@group(0) @binding(6) var<storage, read> add_vecs: array<vec4<f32>>;\n".to_string()
        };
        format!(
            "const ADD_PARTS: u32 = {}u;\n{parts}{PARTS_WGSL}",
            spec.add_parts
        )
    } else {
        "fn x_in(i: u32) -> vec4<f32> {\n    return x[i];\n}\n\
         fn store_residual(first: bool, lid: u32, stride: u32) {}\n"
            .to_string()
    };
    format!(
        "const ROWS: u32 = {}u;\nconst PARTS: u32 = {}u;\n{}{}{}{input}",
        layout.rows,
        spec.epilogue.parts(),
        codes.decl(0),
        decl(2, "x"),
        decl(3, "norm_w")
    )
}

impl GemvQ4 {
    /// The GEMV of `spec` in `variant` and rows layout `layout`, its design's part of the
    /// source from `design` (`gpu::forward::designs` passes the design of `variant`):
    /// the checks, bindings, header and label every design shares.
    pub(crate) fn build(
        ctx: &GpuContext,
        variant: GemvVariant,
        spec: GemvSpec,
        (layout, subgroup_size): (RowsLayout, Option<u32>),
        design: impl FnOnce(&GemvDesignInputs) -> Result<GemvDesignSource>,
    ) -> Result<GemvQ4> {
        let (n, k) = (spec.n, spec.k);
        let argmax = spec.epilogue == Epilogue::StoreArgmax;
        if argmax && (!matches!(variant, GemvVariant::GpuRows(_)) || spec.add_parts > 0) {
            return Err(Error::InvalidArgument(format!(
                "GEMV {n} × {k}: the fused argmax needs the GPU rows design ({variant:?}) \
                 and an input without partial vectors"
            )));
        }
        if n == 0 || k == 0 || k % 64 != 0 || n > u32::MAX as usize / 2 {
            return Err(Error::InvalidArgument(format!(
                "GEMV {n} × {k}: rows must be positive and K a positive multiple of 64"
            )));
        }
        let q8 = spec.format == MatrixFormat::Q8;
        if q8 && !matches!(variant, GemvVariant::GpuRows(g) if !g.f16) {
            return Err(Error::InvalidArgument(format!(
                "GEMV {n} × {k} of Q8 g32 weights: the GPU rows design with x in f32 runs \
                 them ({variant:?} does not)"
            )));
        }
        if layout.wg == 0 || layout.rows == 0 || layout.wg * layout.rows > 4096 {
            return Err(Error::InvalidArgument(format!(
                "GEMV layout {layout:?}: workgroup and rows must be positive"
            )));
        }
        // x as a uniform array where it fits the uniform binding limit (CPU adapters:
        // their loads from uniforms are broadcast; GPUs read storage through their caches).
        let rows = variant.reads_texture();
        let max_uniform = ctx.limits.max_uniform_buffer_binding_size;
        let uniform_x = rows && 4 * k as u64 <= max_uniform;
        // The partial vectors likewise (Pocket's 14 × 896 floats fit in 64 KiB).
        let uniform_parts = rows && 4 * (spec.add_parts * k) as u64 <= max_uniform;
        let uniform = (uniform_x, uniform_parts);
        let codes = CodesRead::in_layout(variant.texture_order(), &spec, layout);
        let header = gemv_header(&spec, layout, uniform, &codes);
        let x_loads = XLoads::pick(subgroup_size, variant, layout);
        let inputs = GemvDesignInputs {
            spec,
            layout,
            codes,
            x_loads,
            argmax,
        };
        let GemvDesignSource { enables, body } = design(&inputs)?;
        let no_bias = matches!(variant, GemvVariant::GpuRows(_)) && !spec.bias;
        let common = match no_bias {
            true => GEMV_COMMON_WGSL.replace(BIAS_BINDING, NO_BIAS),
            false => GEMV_COMMON_WGSL.to_string(),
        };
        let source = [enables, &header, Q4_COMMON_WGSL, &common, &body].concat();
        // The design in the label: `gemv_q4/gpu_rows/8x16x2/tree`, `gemv_q4/tiles/8x16`
        // (+ `/subgroup` for subgroup x loads).
        let label = match variant {
            GemvVariant::GpuRows(g) => {
                let fused = if argmax { "/argmax" } else { "" };
                let kernel = match spec.format {
                    MatrixFormat::Q4 => "gemv_q4",
                    MatrixFormat::Q8 => "gemv_q8",
                };
                format!("{kernel}/{}/{}{fused}", variant.name(), g.label())
            }
            _ => {
                let loads = if x_loads == XLoads::Subgroup {
                    "/subgroup"
                } else {
                    ""
                };
                let (wg, rows) = (layout.wg, layout.rows);
                format!("gemv_q4/{}/{wg}x{rows}{loads}", variant.name())
            }
        };
        let split = spec.row0 > 0;
        let whole_parts = matches!(variant, GemvVariant::GpuRows(g) if spec.row0.is_multiple_of(g.rows() as usize));
        if split
            && (!whole_parts
                || spec.bias
                || !matches!(spec.epilogue, Epilogue::Store | Epilogue::StoreArgmax))
        {
            return Err(Error::InvalidArgument(format!(
                "GEMV {n} × {k} from row {}: a part of a split matrix needs the GPU rows \
                 design, a first row on a workgroup's boundary, no bias and a store",
                spec.row0
            )));
        }
        let mut constants = spec.constants();
        if variant == GemvVariant::RowsFromTexture {
            constants.push(("WG", f64::from(layout.wg)));
        }
        let x_slot = if uniform_x { Slot::Uniform } else { Slot::Read };
        let bias_slot = if no_bias { Slot::Unused } else { Slot::Read };
        let mut slots = vec![
            codes.slot(),
            Slot::Read,
            x_slot,
            x_slot,
            bias_slot,
            Slot::ReadWrite,
        ];
        if spec.add_parts > 0 {
            let parts_slot = if uniform_parts {
                Slot::Uniform
            } else {
                Slot::Read
            };
            slots.extend([parts_slot, Slot::ReadWrite]);
        }
        if argmax {
            slots.extend([Slot::Read, Slot::ReadWrite]);
        }
        Ok(GemvQ4 {
            kernel: KernelPipeline::new(ctx, &label, &source, &slots, &constants),
            variant,
            layout,
            spec,
            codes,
            x_loads,
        })
    }

    pub fn variant(&self) -> GemvVariant {
        self.variant
    }

    /// How it loads x.
    pub fn x_loads(&self) -> XLoads {
        self.x_loads
    }

    /// How the kernel reads its codes (what [`crate::gpu::code_texture::MatrixCodes::upload`] needs).
    pub fn codes_read(&self) -> CodesRead {
        self.codes
    }

    /// Workgroups for one GEMV.
    pub fn workgroups(&self) -> u32 {
        let n = self.spec.n as u32;
        match self.variant {
            GemvVariant::RowsFromTexture | GemvVariant::RowsFromTiles => {
                n.div_ceil(self.layout.wg * self.layout.rows)
            }
            GemvVariant::GpuRows(g) => n.div_ceil(g.rows()),
        }
    }

    /// Bind `codes`/`qparams` (the matrix, `parts · n` rows; the codes as a texture
    /// exactly for the texture variants, in the order [`GemvQ4::codes_read`] says), `x`
    /// (k floats), the norm weights (k floats; required exactly when the spec fuses a
    /// norm), `bias` (`parts · n` floats, or any small buffer when there is none) and
    /// `out` (n floats). Buffers
    /// bound as x must allow uniform use on CPU adapters (`GpuContext::storage` buffers
    /// do).
    #[allow(clippy::too_many_arguments)]
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        codes: Codes,
        qparams: &wgpu::Buffer,
        x: &wgpu::Buffer,
        norm_weight: Option<&wgpu::Buffer>,
        bias: &wgpu::Buffer,
        out: &wgpu::Buffer,
    ) -> Dispatch {
        self.dispatch_adding(ctx, codes, qparams, x, norm_weight, bias, out, None)
    }

    /// [`GemvQ4::dispatch`] with the partial vectors added to x (`residual`: required
    /// exactly when the spec's `add_parts` is positive).
    #[allow(clippy::too_many_arguments)]
    pub fn dispatch_adding(
        &self,
        ctx: &GpuContext,
        codes: Codes,
        qparams: &wgpu::Buffer,
        x: &wgpu::Buffer,
        norm_weight: Option<&wgpu::Buffer>,
        bias: &wgpu::Buffer,
        out: &wgpu::Buffer,
        residual: Option<ResidualParts>,
    ) -> Dispatch {
        let extra = residual.map(|r| [r.parts, r.h_out]);
        let codes = codes.binding(self.variant.reads_texture(), "gemv_q4");
        let matrix = (codes, Binding::Buffer(qparams));
        self.dispatch_extra(ctx, matrix, x, norm_weight, bias, out, extra)
    }

    /// [`GemvQ4::dispatch`] of one part of a matrix bound in parts (the spec's `row0`
    /// is the part's first row; `out` the whole output), with the fused argmax's buffers
    /// exactly when the spec fuses it.
    pub fn dispatch_part(
        &self,
        ctx: &GpuContext,
        part: &MatrixPart,
        x: &wgpu::Buffer,
        norm_weight: Option<&wgpu::Buffer>,
        out: &wgpu::Buffer,
        argmax: Option<HeadArgmax>,
    ) -> Dispatch {
        assert_eq!(
            part.rows.start, self.spec.row0,
            "gemv_q4: the part's first row"
        );
        assert_eq!(part.rows.len(), self.spec.n * self.spec.epilogue.parts());
        let matrix = (
            Binding::Range(part.codes.clone()),
            Binding::Range(part.params.clone()),
        );
        let extra = argmax.map(|a| [a.mask, a.partials]);
        self.dispatch_extra(ctx, matrix, x, norm_weight, x, out, extra)
    }

    /// [`GemvQ4::dispatch`] for the [`Epilogue::StoreArgmax`] head, with its argmax's
    /// buffers.
    #[allow(clippy::too_many_arguments)]
    pub fn dispatch_argmax(
        &self,
        ctx: &GpuContext,
        codes: Codes,
        qparams: &wgpu::Buffer,
        x: &wgpu::Buffer,
        norm_weight: Option<&wgpu::Buffer>,
        bias: &wgpu::Buffer,
        out: &wgpu::Buffer,
        argmax: HeadArgmax,
    ) -> Dispatch {
        assert_eq!(self.spec.epilogue, Epilogue::StoreArgmax);
        let extra = Some([argmax.mask, argmax.partials]);
        let codes = codes.binding(self.variant.reads_texture(), "gemv_q4");
        let matrix = (codes, Binding::Buffer(qparams));
        self.dispatch_extra(ctx, matrix, x, norm_weight, bias, out, extra)
    }

    /// The dispatch of the matrix's (codes, qparams) bindings, with the bindings past
    /// `out` (6 and 7: the partial vectors and the next residual, or the mask and the
    /// argmax partials), checked against the spec.
    #[allow(clippy::too_many_arguments)]
    fn dispatch_extra(
        &self,
        ctx: &GpuContext,
        (codes, qparams): (Binding, Binding),
        x: &wgpu::Buffer,
        norm_weight: Option<&wgpu::Buffer>,
        bias: &wgpu::Buffer,
        out: &wgpu::Buffer,
        extra: Option<[&wgpu::Buffer; 2]>,
    ) -> Dispatch {
        let extras = self.spec.add_parts > 0 || self.spec.epilogue == Epilogue::StoreArgmax;
        assert_eq!(
            extra.is_some(),
            extras,
            "gemv_q4: partial vectors (or the argmax's buffers) are bound exactly when the \
             spec adds them (fuses it)"
        );
        assert_eq!(
            norm_weight.is_some(),
            self.spec.norm_eps.is_some(),
            "gemv_q4: norm weights are bound exactly when the norm is fused"
        );
        let norm = norm_weight.unwrap_or(x);
        let b = Binding::Buffer;
        let mut bindings = vec![codes, qparams, b(x), b(norm), b(bias), b(out)];
        if let Some([first, second]) = extra {
            bindings.extend([b(first), b(second)]);
        }
        self.kernel
            .dispatch_bindings(ctx, &bindings, self.workgroups())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A GPU rows GEMV without a bias replaces the bias binding's line: it must be there,
    /// once, as written (else the shader would still declare binding 4, which its layout
    /// leaves out).
    #[test]
    fn the_common_shader_declares_the_bias_binding_on_the_line_no_bias_replaces() {
        assert_eq!(GEMV_COMMON_WGSL.matches(BIAS_BINDING).count(), 1);
        assert!(!GEMV_COMMON_WGSL
            .replace(BIAS_BINDING, NO_BIAS)
            .contains("@binding(4)"));
    }
}
