//! Dequantization of ggml blocks to f32: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
//! Q4_K, Q5_K, Q6_K — bit-for-bit what the `gguf` Python package's numpy code computes
//! (gguf/quants.py, checked against gguf 0.19.0 by tests/gguf.rs).
//!
//! Bit-exactness rests on doing the same f32 operations in the same order as numpy:
//! e.g. Q4_1 is `(d * q) + m` (two roundings, never fused), the K-quants first form the
//! sub-block scale `d * sc` and then `scale * q - d_min * m`. Rust never contracts
//! `a * b + c` into an FMA, so writing the expression as numpy does is enough.
//!
//! Each block function gets exactly one block of bytes and one block of outputs
//! (`chunks_exact` guarantees the sizes), so its fixed indices cannot go out of bounds.

use super::gguf_types::GgmlType;
use crate::error::{Error, Result};
use half::{bf16, f16};

/// Dequantize `n` elements of type `ty` from `bytes` (exactly `ty.bytes_for(n)` bytes).
pub fn dequantize(ty: GgmlType, bytes: &[u8], n: usize) -> Result<Vec<f32>> {
    check_supported(ty)?;
    check_len(ty, bytes.len(), n)?;
    let mut out = vec![0f32; n];
    dequantize_into(ty, bytes, &mut out)?;
    Ok(out)
}

/// Dequantize into `out`; `bytes` must hold exactly `out.len()` elements of type `ty`
/// (e.g. one row of a weight matrix).
pub fn dequantize_into(ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<()> {
    check_supported(ty)?;
    check_len(ty, bytes.len(), out.len())?;
    let f: fn(&[u8], &mut [f32]) = match ty {
        GgmlType::F32 => f32_block,
        GgmlType::F16 => f16_block,
        GgmlType::BF16 => bf16_block,
        GgmlType::Q4_0 => q4_0_block,
        GgmlType::Q4_1 => q4_1_block,
        GgmlType::Q5_0 => q5_0_block,
        GgmlType::Q5_1 => q5_1_block,
        GgmlType::Q8_0 => q8_0_block,
        GgmlType::Q4_K => q4_k_block,
        GgmlType::Q5_K => q5_k_block,
        GgmlType::Q6_K => q6_k_block,
        _ => return Err(unsupported(ty)),
    };
    let (bb, be) = (ty.block_bytes(), ty.block_elems());
    for (block, out) in bytes.chunks_exact(bb).zip(out.chunks_exact_mut(be)) {
        f(block, out);
    }
    Ok(())
}

/// Whether `dequantize` handles `ty`.
pub fn is_supported(ty: GgmlType) -> bool {
    !matches!(
        ty,
        GgmlType::Q8_1 | GgmlType::Q2_K | GgmlType::Q3_K | GgmlType::Q8_K
    )
}

fn unsupported(ty: GgmlType) -> Error {
    Error::Unsupported {
        what: "GGUF dequantization".into(),
        kind: "tensor type",
        name: ty.name().into(),
        supported: "F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K",
    }
}

fn check_supported(ty: GgmlType) -> Result<()> {
    if is_supported(ty) {
        Ok(())
    } else {
        Err(unsupported(ty))
    }
}

fn check_len(ty: GgmlType, n_bytes: usize, n: usize) -> Result<()> {
    let need = ty.bytes_for(n as u64)?;
    if need != n_bytes as u64 {
        return Err(Error::InvalidArgument(format!(
            "{n} {ty} elements take {need} bytes, got {n_bytes}"
        )));
    }
    Ok(())
}

fn f16_at(b: &[u8], i: usize) -> f32 {
    f16::from_le_bytes([b[i], b[i + 1]]).to_f32()
}

/// The 4-bit value `k` (0..32) of a 32-element block packed as 16 bytes: the first 16
/// values are the low nibbles, the last 16 the high nibbles.
fn nibble32(qs: &[u8], k: usize) -> u8 {
    (qs[k % 16] >> (4 * (k / 16))) & 0x0F
}

/// Bit `k` of a little-endian u32 (the fifth bit of Q5 values).
fn bit5(qh: &[u8], k: usize) -> u8 {
    let h = u32::from_le_bytes([qh[0], qh[1], qh[2], qh[3]]);
    ((h >> k) & 1) as u8
}

fn f32_block(b: &[u8], out: &mut [f32]) {
    out[0] = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
}

fn f16_block(b: &[u8], out: &mut [f32]) {
    out[0] = f16_at(b, 0);
}

fn bf16_block(b: &[u8], out: &mut [f32]) {
    out[0] = bf16::from_le_bytes([b[0], b[1]]).to_f32();
}

/// d: f16, qs: 16 bytes; x = d · (q − 8).
fn q4_0_block(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    let qs = &b[2..18];
    for (k, o) in out.iter_mut().enumerate() {
        *o = d * (nibble32(qs, k) as i8 - 8) as f32;
    }
}

/// d, m: f16, qs: 16 bytes; x = (d · q) + m.
fn q4_1_block(b: &[u8], out: &mut [f32]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    let qs = &b[4..20];
    for (k, o) in out.iter_mut().enumerate() {
        *o = (d * nibble32(qs, k) as f32) + m;
    }
}

/// d: f16, qh: u32 (fifth bits), qs: 16 bytes; x = d · (q − 16).
fn q5_0_block(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    let (qh, qs) = (&b[2..6], &b[6..22]);
    for (k, o) in out.iter_mut().enumerate() {
        let q = nibble32(qs, k) | (bit5(qh, k) << 4);
        *o = d * (q as i8 - 16) as f32;
    }
}

/// d, m: f16, qh: u32, qs: 16 bytes; x = (d · q) + m.
fn q5_1_block(b: &[u8], out: &mut [f32]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    let (qh, qs) = (&b[4..8], &b[8..24]);
    for (k, o) in out.iter_mut().enumerate() {
        let q = nibble32(qs, k) | (bit5(qh, k) << 4);
        *o = (d * q as f32) + m;
    }
}

/// d: f16, qs: 32 × i8; x = q · d.
fn q8_0_block(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    for (o, &q) in out.iter_mut().zip(&b[2..34]) {
        *o = (q as i8) as f32 * d;
    }
}

/// The eight 6-bit (scale, min) pairs of a Q4_K/Q5_K super-block, from 12 bytes:
/// bytes 0..4 hold scales 0..4 (low 6 bits) and the top 2 bits of scales 4..8,
/// bytes 4..8 the same for mins, bytes 8..12 the low 4 bits of scales/mins 4..8.
fn k_scales_mins(s: &[u8]) -> ([u8; 8], [u8; 8]) {
    let (mut sc, mut mn) = ([0u8; 8], [0u8; 8]);
    for j in 0..4 {
        sc[j] = s[j] & 0x3F;
        mn[j] = s[j + 4] & 0x3F;
        sc[j + 4] = (s[j + 8] & 0x0F) | ((s[j] >> 2) & 0x30);
        mn[j + 4] = (s[j + 8] >> 4) | ((s[j + 4] >> 2) & 0x30);
    }
    (sc, mn)
}

/// The shared K-quant layout of Q4_K and Q5_K: 8 sub-blocks of 32; sub-block j takes the
/// low (j even) or high (j odd) nibbles of qs[32·(j/2) ..][..32], plus `high(j, l)` << 4.
/// x = (d · sc_j) · q − (dmin · m_j).
fn k_quant_block(b: &[u8], qs: &[u8], out: &mut [f32], high: impl Fn(usize, usize) -> u8) {
    let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
    let (sc, mn) = k_scales_mins(&b[4..16]);
    for (j, sub) in out.chunks_exact_mut(32).enumerate() {
        let dl = d * sc[j] as f32;
        let ml = dmin * mn[j] as f32;
        let quads = &qs[32 * (j / 2)..][..32];
        for (l, o) in sub.iter_mut().enumerate() {
            let q = ((quads[l] >> (4 * (j % 2))) & 0x0F) | (high(j, l) << 4);
            *o = dl * q as f32 - ml;
        }
    }
}

/// d, dmin: f16, scales: 12 bytes, qs: 128 bytes.
fn q4_k_block(b: &[u8], out: &mut [f32]) {
    k_quant_block(b, &b[16..144], out, |_, _| 0);
}

/// d, dmin: f16, scales: 12 bytes, qh: 32 bytes (bit j of qh[l] → sub-block j), qs: 128.
fn q5_k_block(b: &[u8], out: &mut [f32]) {
    let qh = &b[16..48];
    k_quant_block(b, &b[48..176], out, |j, l| (qh[l] >> j) & 1);
}

/// ql: 128 bytes, qh: 64 bytes, scales: 16 × i8, d: f16. Two halves of 128 values; in
/// half h, value r takes nibble r/64 of ql[64h + r%64] and bit pair r/32 of qh[32h + r%32].
/// x = (d · scale_{i/16}) · (q − 32).
fn q6_k_block(b: &[u8], out: &mut [f32]) {
    let (ql, qh, scales) = (&b[0..128], &b[128..192], &b[192..208]);
    let d = f16_at(b, 208);
    for (i, o) in out.iter_mut().enumerate() {
        let (h, r) = (i / 128, i % 128);
        let lo = (ql[64 * h + r % 64] >> (4 * (r / 64))) & 0x0F;
        let hi = (qh[32 * h + r % 32] >> (2 * (r / 32))) & 0x03;
        let q = (lo | (hi << 4)) as i8 - 32;
        let scale = d * (scales[i / 16] as i8) as f32;
        *o = scale * q as f32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q4_0_block_matches_hand_computation() {
        // d = 0.5, nibbles: value k = k % 16 for the first half, 15 - k%16 for the second.
        let mut b = vec![0u8; 18];
        b[..2].copy_from_slice(&f16::from_f32(0.5).to_le_bytes());
        for i in 0..16 {
            b[2 + i] = (i as u8) | ((15 - i as u8) << 4);
        }
        let x = dequantize(GgmlType::Q4_0, &b, 32).unwrap();
        assert_eq!(x[0], -4.0);
        assert_eq!(x[15], 3.5);
        assert_eq!(x[16], 3.5);
        assert_eq!(x[31], -4.0);
    }

    #[test]
    fn wrong_length_and_unsupported_types_are_errors() {
        assert!(matches!(
            dequantize(GgmlType::Q8_0, &[0u8; 33], 32),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            dequantize(GgmlType::Q8_0, &[0u8; 34], 31),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            dequantize(GgmlType::Q2_K, &[0u8; 84], 256),
            Err(Error::Unsupported { .. })
        ));
    }
}
