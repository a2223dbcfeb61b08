//! Where each kernel's design is chosen: the wrappers whose design is either a GPU one
//! (`gpu::kernels`) or a CPU adapter's (`gpu::kernels::soft`), as the variant the device
//! profile picks names it. The two kernel families never import each other (they share
//! `gpu::kernels::common`), so this is the one place that sees both; the decode step
//! (`step.rs`) and the prefill chunk (`prefill.rs`) build their kernels through it.

mod attention;
mod attention_prefill;
mod gemm;
mod gemv;

pub use attention::{Attention, AttentionDispatch};
pub use gemm::{GemmDispatch, GemmQ4};
