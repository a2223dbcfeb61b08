//! The per-role design records a [`super::DeviceProfile`] holds: the decode GEMV of each
//! matrix role, the GPU top-k, and the designs for Q8 g32 matrices.

use crate::gpu::kernels::common::gemm::GemmTiles;
use crate::gpu::kernels::common::gemv_spec::{GemvVariant, GpuRows};

/// The decode GEMV design of each matrix role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemvDesigns {
    /// Norm + QKV.
    pub qkv: GemvVariant,
    /// The attention output projection (when not folded into attention).
    pub o: GemvVariant,
    /// Norm + gate/up + SwiGLU.
    pub gate_up: GemvVariant,
    /// Down + residual.
    pub down: GemvVariant,
    /// Final norm + LM head.
    pub head: GemvVariant,
}

impl GemvDesigns {
    pub(super) fn all(v: GemvVariant) -> GemvDesigns {
        GemvDesigns {
            qkv: v,
            o: v,
            gate_up: v,
            down: v,
            head: v,
        }
    }

    /// (role, design) in step order.
    pub fn roles(&self) -> [(&'static str, GemvVariant); 5] {
        [
            ("qkv", self.qkv),
            ("o", self.o),
            ("gate_up", self.gate_up),
            ("down", self.down),
            ("head", self.head),
        ]
    }
}

/// How the sampler's candidates are found on the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopKDesign {
    /// Radix select in workgroups of 256: about √(n/64) workgroups each select the 64
    /// best of a chunk, one selects and sorts the 64 best of theirs (shaders/topk.wgsl);
    /// greedy decoding runs argmax alone (shaders/argmax.wgsl).
    Radix,
}

/// How Q8 g32 matrices are computed (one design per profile for every role: the GPU rows
/// GEMV and the workgroup-tiles GEMM, x in f32; CPU adapters run them too, slower than
/// their Q4 designs, which read the codes from textures).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Q8Designs {
    /// Decode GEMVs (x in f32: `f16` is false).
    pub gemv: GpuRows,
    /// Prefill GEMMs.
    pub gemm: GemmTiles,
}
