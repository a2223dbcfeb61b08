//! The decode GEMV's design for GPUs: row slots of lanes, each slot computing `rps`
//! consecutive output rows with x reused across them, its lanes' sums reduced by a tree
//! or the subgroup (shaders/gemv_rows_gpu.wgsl and its chunk, reduction and epilogue
//! fragments; with `x_shared`, shaders/gemv_rows_gpu_shared_x.wgsl stages x once per
//! workgroup). Q8 g32 matrices (`GemvSpec::format`) run it with the Q8 chunk
//! (shaders/gemv_q8_rows_gpu.wgsl) on every adapter. The wrapper that binds and
//! dispatches every GEMV design is `common::gemv::GemvQ4`; `gpu::forward::designs`
//! picks this design or the CPU adapters' (`soft::gemv_rows`).

use super::common::gemv_spec::{GpuRows, SlotReduce};
use super::common::wgsl::Q8_UNPACK_WGSL;
use super::MatrixFormat;
use crate::error::{Error, Result};
use crate::gpu::device::GpuContext;

const GPU_ROWS_WGSL: &str = include_str!("../../../shaders/gemv_rows_gpu.wgsl");
const GPU_ROWS_Q4_WGSL: &str = include_str!("../../../shaders/gemv_q4_rows_gpu.wgsl");
const GPU_TREE_WGSL: &str = include_str!("../../../shaders/gemv_q4_rows_gpu_tree.wgsl");
const GPU_SUBGROUP_WGSL: &str = include_str!("../../../shaders/gemv_q4_rows_gpu_subgroup.wgsl");
const GPU_ONE_BARRIER_WGSL: &str =
    include_str!("../../../shaders/gemv_q4_rows_gpu_one_barrier.wgsl");
const GPU_ROWS_SHARED_X_WGSL: &str = include_str!("../../../shaders/gemv_rows_gpu_shared_x.wgsl");
const GPU_X_F32_WGSL: &str = include_str!("../../../shaders/gemv_q4_rows_gpu_f32.wgsl");
const GPU_X_F16_WGSL: &str = include_str!("../../../shaders/gemv_q4_rows_gpu_f16.wgsl");
const GPU_ARGMAX_WGSL: &str = include_str!("../../../shaders/gemv_q4_rows_gpu_argmax.wgsl");
const GPU_ROWS_Q8_WGSL: &str = include_str!("../../../shaders/gemv_q8_rows_gpu.wgsl");

impl GpuRows {
    pub(crate) fn check(self, ctx: &GpuContext) -> Result<()> {
        if self.f16 && !ctx.adapter.features.shader_f16 {
            return Err(Error::InvalidArgument(format!(
                "GPU GEMV layout {self:?} holds x in f16, and adapter {:?} has no shader-f16",
                ctx.adapter.name
            )));
        }
        let ok = self.tpr.is_power_of_two()
            && self.slots > 0
            && (1..=Self::MAX_RPS).contains(&self.rps)
            && self.invocations() <= 256;
        if ok {
            return Ok(());
        }
        Err(Error::InvalidArgument(format!(
            "GPU GEMV layout {self:?}: lanes per slot a power of two, 1..={} rows per slot,              at most 256 invocations",
            Self::MAX_RPS
        )))
    }

    /// The WGSL constants and slot reduction of this layout, with the fused argmax
    /// epilogue when `argmax`, and the body for matrices in `format` (Q8: x in f32) of
    /// `k` inputs (x staged per workgroup when `x_shared`: the caller has
    /// [`GpuRows::fitted`] it).
    pub(crate) fn wgsl(self, argmax: bool, format: MatrixFormat, k: usize) -> String {
        let (tpr, slots, rps) = (self.tpr, self.slots, self.rps);
        let mut consts = format!(
            "const TPR: u32 = {tpr}u;\nconst SLOTS: u32 = {slots}u;\nconst RPS: u32 = {rps}u;\n\
             const WG: u32 = {}u;\nconst NV: u32 = {}u;\n",
            self.invocations(),
            self.values()
        );
        // The staged x's length: a constant (K is an override, and a workgroup array's
        // length must be known when the module is created).
        let main = if self.x_shared {
            consts += &format!("const XS: u32 = {}u;\n", k / 4);
            GPU_ROWS_SHARED_X_WGSL
        } else {
            GPU_ROWS_WGSL
        };
        let reduce = match self.reduce {
            SlotReduce::Tree => GPU_TREE_WGSL,
            SlotReduce::Subgroup => GPU_SUBGROUP_WGSL,
            SlotReduce::OneBarrier => GPU_ONE_BARRIER_WGSL,
        };
        let x = if self.f16 {
            GPU_X_F16_WGSL
        } else {
            GPU_X_F32_WGSL
        };
        let epilogue = if argmax {
            GPU_ARGMAX_WGSL
        } else {
            "fn argmax_epilogue(wg: u32, lid: u32, lane: u32, base: u32) {}\n"
        };
        let chunk = match format {
            MatrixFormat::Q4 => [x, GPU_ROWS_Q4_WGSL].concat(),
            MatrixFormat::Q8 => [Q8_UNPACK_WGSL, GPU_ROWS_Q8_WGSL].concat(),
        };
        [&consts, reduce, epilogue, &chunk, main].concat()
    }

    /// What must open the source (`enable f16;` for the f16 lanes).
    pub(crate) fn enables(self) -> &'static str {
        if self.f16 {
            "enable f16;\n"
        } else {
            ""
        }
    }
}
