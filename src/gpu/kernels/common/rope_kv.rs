//! What the kernels that rope and cache q/k share: the attention head shape, the RoPE
//! frequencies, their inputs' bindings (`rope_inputs_wgsl`; the head shape's overrides,
//! qkv and sin_cos in shaders/common/rope_common.wgsl) and a layer's KV-cache buffers. The kernels
//! that norm, rope and write the KV cache: the decode attention kernels (`attention`:
//! fused in every design) and the prefill chunk's (`rope_kv_prefill`).

use crate::error::{Error, Result};

/// What the RoPE kernels share: the head shape's and norm's overrides, qkv (binding 1) and
/// sin_cos.
pub(crate) const ROPE_COMMON_WGSL: &str =
    include_str!("../../../../shaders/common/rope_common.wgsl");

/// A head of the QKV output normed and roped 4 elements at a time (rope_elem, rope4,
/// qkv4), shared by the decode attention kernels that hold heads as vec4s.
pub(crate) const ROPE_VEC4_WGSL: &str = include_str!("../../../../shaders/common/rope_vec4.wgsl");

/// Largest head dimension the attention kernels hold in registers / workgroup memory.
pub const MAX_HEAD_DIM: usize = 256;

/// Attention shape shared by the rope/KV-write and attention kernels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HeadShape {
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    /// Positions the KV cache holds.
    pub context: usize,
}

impl HeadShape {
    pub fn check(&self) -> Result<()> {
        let ok = self.n_heads > 0
            && self.n_kv_heads > 0
            && self.n_heads.is_multiple_of(self.n_kv_heads)
            && self.head_dim.is_multiple_of(2)
            && (2..=MAX_HEAD_DIM).contains(&self.head_dim)
            && self.context > 0;
        if ok {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!(
                "attention shape {self:?}: heads must be a multiple of KV heads, head_dim even and at most {MAX_HEAD_DIM}, context positive"
            )))
        }
    }

    /// Bytes of one layer's K (or V) cache: f16 values.
    pub fn cache_bytes(&self) -> u64 {
        (self.n_kv_heads * self.context * self.head_dim * 2) as u64
    }

    pub(crate) fn constants(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("N_HEADS", self.n_heads as f64),
            ("N_KV", self.n_kv_heads as f64),
            ("HD", self.head_dim as f64),
            ("CTX", self.context as f64),
        ]
    }
}

/// `θ^(-2i/d)` for i in 0..d/2, computed in f64 and rounded to f32.
pub fn rope_inv_freq(theta: f32, head_dim: usize) -> Vec<f32> {
    (0..head_dim / 2)
        .map(|i| (f64::from(theta)).powf(-2.0 * i as f64 / head_dim as f64) as f32)
        .collect()
}

/// The RoPE kernels' small inputs (bindings 2-4: q_norm, k_norm, inv_freq) with
/// accessors `NAME_at(i)`: storage arrays, or (`uniform`: when the workgroup attention's
/// W_o fold takes 3 more storage slots) uniform arrays of vec4, q/k norm `hd` floats long
/// with `qk_norm` (else a 16-byte stand-in), inv_freq hd / 2 (the fold makes hd a
/// multiple of 8).
pub(crate) fn rope_inputs_wgsl(uniform: bool, qk_norm: bool, hd: usize) -> String {
    let norm_len = if qk_norm { hd / 4 } else { 1 };
    let inputs = [
        ("q_norm", 2, norm_len),
        ("k_norm", 3, norm_len),
        ("inv_freq", 4, hd / 8),
    ];
    inputs
        .iter()
        .map(|(name, binding, len)| {
            if uniform {
                format!(
                    "@group(0) @binding({binding}) var<uniform> {name}: array<vec4<f32>, {len}>;\n\
                     fn {name}_at(i: u32) -> f32 {{ return {name}[i / 4u][i % 4u]; }}\n"
                )
            } else {
                format!(
                    "@group(0) @binding({binding}) var<storage, read> {name}: array<f32>;\n\
                     fn {name}_at(i: u32) -> f32 {{ return {name}[i]; }}\n"
                )
            }
        })
        .collect()
}

/// One layer's K and V cache buffers.
#[derive(Clone, Copy)]
pub struct KvBuffers<'a> {
    pub k: &'a wgpu::Buffer,
    pub v: &'a wgpu::Buffer,
}
