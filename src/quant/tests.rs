use super::*;

/// Small deterministic generator (xorshift64*), so tests need no `rand`.
struct Rng(u64);

impl Rng {
    fn next_u32(&mut self) -> u32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u32
    }
    /// Uniform in [lo, hi).
    fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * (self.next_u32() as f32 / 4_294_967_296.0)
    }
    fn nibble(&mut self) -> u8 {
        (self.next_u32() & 0xF) as u8
    }
}

/// A ggml Q4_1 block: element j < 16 in the low nibble of qs[j], j + 16 in the high one.
fn q4_1_block(d: f16, m: f16, q: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(Q4_1_BLOCK_BYTES);
    b.extend_from_slice(&d.to_bits().to_le_bytes());
    b.extend_from_slice(&m.to_bits().to_le_bytes());
    b.extend((0..16).map(|j| q[j] | (q[j + 16] << 4)));
    b
}

/// The word that holds codes `q[0..8]`, written out byte by byte as DESIGN.md states it
/// (independent of `pack_codes8`).
fn expected_word(q: &[u8]) -> u32 {
    u32::from_le_bytes([
        q[0] | (q[4] << 4),
        q[1] | (q[5] << 4),
        q[2] | (q[6] << 4),
        q[3] | (q[7] << 4),
    ])
}

/// Per-group max |error| bound for requantized data: half a step of a range/15 grid
/// (1 % slack for f16 rounding of the scale) plus f16 rounding of min (1e-3 relative).
fn group_bound(vals: &[f32]) -> f32 {
    let lo = vals.iter().copied().fold(f32::INFINITY, f32::min);
    let hi = vals.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    (hi - lo) / 30.0 * 1.01 + 1e-3 * lo.abs().max(hi.abs()) + 1e-7
}

/// Check every group of `got` against `want` with [`group_bound`].
fn assert_groups_within_bound(want: &[f32], got: &[f32]) {
    assert_eq!(want.len(), got.len());
    for (g, (w, q)) in want.chunks(GROUP).zip(got.chunks(GROUP)).enumerate() {
        let bound = group_bound(w);
        for (a, b) in w.iter().zip(q) {
            assert!(
                (a - b).abs() <= bound,
                "group {g}: {a} vs {b}, bound {bound}"
            );
        }
    }
}

#[test]
fn nibble_order_matches_hand_written_words() {
    // Values 0..15 repeating: min 0, max 15 → scale 1, codes equal the values.
    let data: Vec<f32> = (0..128).map(|i| (i % 16) as f32).collect();
    let t = Q4Tensor::quantize(&data, 2, 64).unwrap();
    // Byte j = element j | element j+4 << 4.
    assert_eq!(t.codes[0], 0x7362_5140);
    assert_eq!(t.codes[1], 0xFBEA_D9C8);
    assert_eq!(t.codes[2], 0x7362_5140);
    // Scale 1.0 (f16 0x3C00) in the low half, min 0.0 in the high half.
    assert_eq!(t.qparams, vec![0x0000_3C00, 0x0000_3C00]);
    // What the shader does: unpack4xU8(x & 0x0F0F0F0F) = elements 0..4, then 4..8.
    let x = t.codes[1];
    assert_eq!((x & 0x0F0F_0F0F).to_le_bytes(), [8, 9, 10, 11]);
    assert_eq!(((x >> 4) & 0x0F0F_0F0F).to_le_bytes(), [12, 13, 14, 15]);
    assert_eq!(&t.codes_bytes()[4..8], &[0xC8, 0xD9, 0xEA, 0xFB]);
}

#[test]
fn min_is_stored_in_the_high_half() {
    // Range [-2, 13]: scale 1, min -2 (f16 0xC000).
    let data: Vec<f32> = (0..64).map(|i| (i % 16) as f32 - 2.0).collect();
    let t = Q4Tensor::quantize(&data, 1, 64).unwrap();
    assert_eq!(t.qparams, vec![0xC000_3C00]);
    assert_eq!(t.dequantize(), data);
}

#[test]
fn q4_1_pairs_survive_bit_exactly() {
    let (rows, cols) = (3, 192);
    let mut rng = Rng(7);
    let mut bytes = Vec::new();
    let (mut want_codes, mut want_params, mut want_vals) = (vec![], vec![], vec![]);
    for _ in 0..rows * cols / GROUP {
        let d = f16::from_f32(rng.uniform(1e-3, 0.05));
        let m = f16::from_f32(rng.uniform(-0.5, 0.0));
        let q: Vec<u8> = (0..GROUP).map(|_| rng.nibble()).collect();
        bytes.extend(q4_1_block(d, m, &q[..32]));
        bytes.extend(q4_1_block(d, m, &q[32..]));
        want_codes.extend(q.chunks(8).map(expected_word));
        want_params.push(u32::from(d.to_bits()) | (u32::from(m.to_bits()) << 16));
        want_vals.extend(q.iter().map(|&c| d.to_f32() * f32::from(c) + m.to_f32()));
    }
    let (t, stats) = Q4Tensor::from_ggml(GgmlType::Q4_1, &bytes, rows, cols).unwrap();
    assert_eq!(t.codes, want_codes);
    assert_eq!(t.qparams, want_params);
    assert_eq!(t.dequantize(), want_vals);
    assert_eq!(
        stats,
        MergeStats {
            groups_exact: (rows * cols / GROUP) as u64,
            groups_requantized: 0
        }
    );
}

#[test]
fn unequal_q4_1_pairs_are_requantized_within_bound() {
    let (rows, cols) = (2, 256);
    let mut rng = Rng(11);
    let (mut bytes, mut want) = (Vec::new(), Vec::new());
    let mut unequal = 0;
    for g in 0..rows * cols / GROUP {
        // Every third group gets a second block with different params.
        for half in 0..2 {
            let differ = g % 3 == 0 && half == 1;
            unequal += usize::from(differ);
            let d = f16::from_f32(if differ { 0.031 } else { 0.02 });
            let m = f16::from_f32(if differ { -0.2 } else { -0.15 });
            let q: Vec<u8> = (0..32).map(|_| rng.nibble()).collect();
            bytes.extend(q4_1_block(d, m, &q));
            want.extend(q.iter().map(|&c| d.to_f32() * f32::from(c) + m.to_f32()));
        }
    }
    let (t, stats) = Q4Tensor::from_ggml(GgmlType::Q4_1, &bytes, rows, cols).unwrap();
    assert_eq!(stats.groups_requantized, unequal as u64);
    assert_eq!(stats.groups_exact, (rows * cols / GROUP - unequal) as u64);
    let got = t.dequantize();
    assert_groups_within_bound(&want, &got);
    // The exactly-kept groups reproduce their values bit for bit.
    for g in (0..rows * cols / GROUP).filter(|g| g % 3 != 0) {
        assert_eq!(got[g * GROUP..][..GROUP], want[g * GROUP..][..GROUP]);
    }
}

#[test]
fn quantize_error_is_at_most_half_a_step_plus_f16_rounding() {
    // Bound per element: scale/2 (nearest code on the f16 grid) + (range + |min|)·2⁻¹¹
    // (f16 rounding of scale·15 and of min can shift the grid ends) + 1e-6·|x| (f32 math).
    let mut rng = Rng(3);
    let (rows, cols) = (16, 320);
    let data: Vec<f32> = (0..rows * cols)
        .map(|i| {
            let mag = [1e-3, 0.1, 1.0, 30.0][(i / GROUP) % 4];
            rng.uniform(-mag, mag)
                + if (i / GROUP).is_multiple_of(5) {
                    mag * 3.0
                } else {
                    0.0
                }
        })
        .collect();
    let t = Q4Tensor::quantize(&data, rows, cols).unwrap();
    let got = t.dequantize();
    for (g, (x, y)) in data.chunks(GROUP).zip(got.chunks(GROUP)).enumerate() {
        let lo = x.iter().copied().fold(f32::INFINITY, f32::min);
        let hi = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let (scale, _) = unpack_params(t.qparams[g]);
        for (a, b) in x.iter().zip(y) {
            let bound = scale / 2.0 + (hi - lo + lo.abs()) / 2048.0 + 1e-6 * a.abs();
            assert!(
                (a - b).abs() <= bound,
                "group {g}: {a} vs {b} (bound {bound})"
            );
        }
    }
}

#[test]
fn constant_groups_get_zero_scale() {
    let data = vec![0.375f32; 128];
    let t = Q4Tensor::quantize(&data, 1, 128).unwrap();
    assert!(t.qparams.iter().all(|&p| unpack_params(p) == (0.0, 0.375)));
    assert_eq!(t.dequantize(), data);
}

#[test]
fn bad_quantize_input_is_a_typed_error() {
    let inv = |r: Result<Q4Tensor>| matches!(r, Err(Error::InvalidArgument(_)));
    let mut nan = vec![0.0f32; 64];
    nan[5] = f32::NAN;
    assert!(inv(Q4Tensor::quantize(&nan, 1, 64)));
    nan[5] = f32::INFINITY;
    assert!(inv(Q4Tensor::quantize(&nan, 1, 64)));
    assert!(inv(Q4Tensor::quantize(&[0.0; 96], 1, 96)), "cols % 64");
    assert!(
        inv(Q4Tensor::quantize(&[0.0; 64], 2, 64)),
        "length mismatch"
    );
    assert!(
        inv(Q4Tensor::quantize(&[], usize::MAX, 128)),
        "rows*cols overflow"
    );
    assert!(
        inv(Q4Tensor::quantize(&[1e9; 64], 1, 64)),
        "beyond f16 range"
    );
}

#[test]
fn from_parts_round_trips_and_checks_lengths() {
    let mut rng = Rng(5);
    let data: Vec<f32> = (0..256).map(|_| rng.uniform(-1.0, 1.0)).collect();
    let t = Q4Tensor::quantize(&data, 2, 128).unwrap();
    let back = Q4Tensor::from_parts(2, 128, t.codes_bytes(), t.qparams_bytes()).unwrap();
    assert_eq!(back, t);
    let short = &t.codes_bytes()[1..];
    assert!(matches!(
        Q4Tensor::from_parts(2, 128, short, t.qparams_bytes()),
        Err(Error::InvalidArgument(_))
    ));
    assert!(Q4Tensor::from_parts(2, 128, t.codes_bytes(), &[0; 4]).is_err());
    assert!(Q4Tensor::from_parts(usize::MAX, 128, &[], &[]).is_err());
}

#[test]
fn q4_1_with_wrong_length_is_a_typed_error() {
    let r = Q4Tensor::from_ggml(GgmlType::Q4_1, &[0; 39], 1, 64);
    assert!(matches!(r, Err(Error::InvalidArgument(_))));
}

#[test]
fn ordinary_q4_1_requantizes_within_bound() {
    // Independent random params for every g32 block: no pair is equal.
    let (rows, cols) = (4, 128);
    let mut rng = Rng(13);
    let (mut bytes, mut want) = (Vec::new(), Vec::new());
    for b in 0..rows * cols / 32 {
        let d = f16::from_f32(0.01 + 0.001 * b as f32);
        let m = f16::from_f32(rng.uniform(-0.3, 0.1));
        let q: Vec<u8> = (0..32).map(|_| rng.nibble()).collect();
        want.extend(q.iter().map(|&c| d.to_f32() * f32::from(c) + m.to_f32()));
        bytes.extend(q4_1_block(d, m, &q));
    }
    let (t, stats) = Q4Tensor::from_ggml(GgmlType::Q4_1, &bytes, rows, cols).unwrap();
    assert_eq!(stats.groups_requantized, (rows * cols / GROUP) as u64);
    assert_groups_within_bound(&want, &t.dequantize());
}

#[test]
fn q8_0_requantizes_within_bound() {
    // Q8_0 block: f16 d, then 32 i8; value = d·q.
    let (rows, cols) = (3, 128);
    let mut rng = Rng(17);
    let (mut bytes, mut want) = (Vec::new(), Vec::new());
    for _ in 0..rows * cols / 32 {
        let d = f16::from_f32(rng.uniform(1e-3, 1e-2));
        bytes.extend_from_slice(&d.to_bits().to_le_bytes());
        for _ in 0..32 {
            let q = rng.next_u32() as i8;
            bytes.push(q as u8);
            want.push(d.to_f32() * f32::from(q));
        }
    }
    let (t, stats) = Q4Tensor::from_ggml(GgmlType::Q8_0, &bytes, rows, cols).unwrap();
    assert_eq!(stats.groups_requantized, (rows * cols / GROUP) as u64);
    assert_groups_within_bound(&want, &t.dequantize());
}

#[test]
fn f16_requantizes_within_bound() {
    let (rows, cols) = (5, 192);
    let mut rng = Rng(19);
    let want: Vec<f32> = (0..rows * cols)
        .map(|_| f16::from_f32(rng.uniform(-2.0, 1.5)).to_f32())
        .collect();
    let bytes: Vec<u8> = want
        .iter()
        .flat_map(|&v| f16::from_f32(v).to_bits().to_le_bytes())
        .collect();
    let (t, stats) = Q4Tensor::from_ggml(GgmlType::F16, &bytes, rows, cols).unwrap();
    assert_eq!(stats.groups_requantized, (rows * cols / GROUP) as u64);
    assert_groups_within_bound(&want, &t.dequantize());
}

#[test]
fn f32_batches_cover_every_row() {
    // More rows than one conversion batch holds, so the batching is exercised.
    let (rows, cols) = (CONVERT_CHUNK_ELEMS / 64 + 3, 64);
    let want: Vec<f32> = (0..rows * cols).map(|i| (i % 977) as f32 * 1e-3).collect();
    let bytes: Vec<u8> = want.iter().flat_map(|v| v.to_le_bytes()).collect();
    let (t, _) = Q4Tensor::from_ggml(GgmlType::F32, &bytes, rows, cols).unwrap();
    assert_eq!(t, Q4Tensor::quantize(&want, rows, cols).unwrap());
}

#[test]
fn every_ggml_type_in_the_gguf_fixture_requantizes_within_bound() {
    // tests/fixtures/dequant.gguf: per ggml type a 2 × 512 tensor of random blocks and its
    // dequantization by gguf-py (`<type>.expected`); see make_gguf_fixtures.py.
    use crate::format::gguf::Gguf;
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/dequant.gguf");
    let file = std::fs::read(path).unwrap();
    let g = Gguf::parse(&file).unwrap();
    let data = |name: &str| {
        let t = g.tensor(name).unwrap();
        let r = g.tensor_range(t).unwrap();
        (t.ty, t.shape(), &file[r.start as usize..r.end as usize])
    };
    let quantized = [
        "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K",
    ];
    for name in quantized {
        let (ty, shape, bytes) = data(name);
        let (t, stats) = Q4Tensor::from_ggml(ty, bytes, shape[0], shape[1]).unwrap();
        assert_eq!(
            stats.groups_requantized,
            (shape[0] * shape[1] / GROUP) as u64
        );
        let (_, _, expected) = data(&format!("{name}.expected"));
        let want: Vec<f32> = expected
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        assert_groups_within_bound(&want, &t.dequantize());
    }
    // The float fixtures hold ±inf (and BF16 values beyond f16): a typed error, no panic.
    for name in ["F32", "F16", "BF16"] {
        let (ty, shape, bytes) = data(name);
        let r = Q4Tensor::from_ggml(ty, bytes, shape[0], shape[1]);
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{name}: {r:?}");
    }
}
