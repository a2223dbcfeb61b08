use super::*;

/// A deterministic stream of pseudo-random u32s (xorshift).
fn rng(seed: u32) -> impl FnMut() -> u32 {
    let mut s = seed.max(1);
    move || {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        s
    }
}

/// `blocks` ggml blocks of `ty` with random bytes and a finite positive f16 `d` first.
fn random_blocks(ty: GgmlType, blocks: usize, seed: u32) -> Vec<u8> {
    let mut next = rng(seed);
    let mut bytes: Vec<u8> = (0..blocks * ty.block_bytes())
        .map(|_| next() as u8)
        .collect();
    for b in bytes.chunks_exact_mut(ty.block_bytes()) {
        let d = f16::from_f32((next() % 1000 + 1) as f32 * 1e-5);
        b[..2].copy_from_slice(&d.to_bits().to_le_bytes());
    }
    bytes
}

/// The tensor as ggml Q8_0 blocks (f16 d, 32 int8 codes).
fn to_q8_0(t: &Q8Tensor) -> Vec<u8> {
    let mut out = Vec::new();
    for g in 0..t.groups() {
        out.extend(f16::from_f32(t.scale(g)).to_bits().to_le_bytes());
        out.extend(t.group_codes(g).iter().map(|&c| c as u8));
    }
    out
}

#[test]
fn q8_0_is_kept_bit_exactly() {
    let (rows, cols) = (3, 96);
    let bytes = random_blocks(GgmlType::Q8_0, rows * cols / 32, 7);
    let (t, stats) = Q8Tensor::from_ggml(GgmlType::Q8_0, &bytes, rows, cols).unwrap();
    assert_eq!(stats.groups_exact, 9);
    assert_eq!(stats.groups_requantized, 0);
    assert_eq!(to_q8_0(&t), bytes);
}

#[test]
fn q5_0_and_q4_0_are_kept_exactly() {
    for ty in [GgmlType::Q5_0, GgmlType::Q4_0] {
        let (rows, cols) = (4, 64);
        let bytes = random_blocks(ty, rows * cols / 32, 11);
        let (t, stats) = Q8Tensor::from_ggml(ty, &bytes, rows, cols).unwrap();
        assert_eq!(
            (stats.groups_exact, stats.groups_requantized),
            (8, 0),
            "{ty}"
        );
        let want = gguf_dequant::dequantize(ty, &bytes, rows * cols).unwrap();
        assert_eq!(t.dequantize(), want, "{ty}");
    }
}

#[test]
fn other_types_are_requantized_within_half_a_step_and_the_scale_rounding() {
    let (rows, cols) = (2, 256);
    for ty in [GgmlType::Q6_K, GgmlType::Q4_K, GgmlType::Q5_1] {
        let mut bytes = random_blocks(ty, rows * cols / ty.block_elems(), 3);
        // Small finite f16 super-scales: (d, dmin) / (d, m) first, Q6_K's d last.
        let small = f16::from_f32(1e-3).to_bits().to_le_bytes();
        for b in bytes.chunks_exact_mut(ty.block_bytes()) {
            let n = b.len();
            match ty {
                GgmlType::Q6_K => b[n - 2..].copy_from_slice(&small),
                _ => b[2..4].copy_from_slice(&small),
            }
        }
        let Ok(want) = gguf_dequant::dequantize(ty, &bytes, rows * cols) else {
            panic!("{ty} does not dequantize");
        };
        if want.iter().any(|v| !v.is_finite()) {
            continue;
        }
        let (t, stats) = Q8Tensor::from_ggml(ty, &bytes, rows, cols).unwrap();
        assert_eq!(stats.groups_exact + stats.groups_requantized, 16);
        assert!(
            stats.groups_requantized > 0,
            "{ty}: random data kept exactly?"
        );
        for (g, (got, want)) in t
            .dequantize()
            .chunks(Q8_GROUP)
            .zip(want.chunks(Q8_GROUP))
            .enumerate()
        {
            let step = t.scale(g);
            for (a, b) in got.iter().zip(want) {
                // Half a step, plus the f16 rounding of the step (2^-11) times 127.
                let bound = step * (0.5 + 127.0 / 2048.0);
                assert!((a - b).abs() <= bound, "{ty} group {g}: {a} vs {b}");
            }
        }
    }
}

#[test]
fn quantize_rounds_as_ggml_and_reaches_127() {
    let vals: Vec<f32> = (0..64).map(|i| (i as f32 - 20.0) * 0.37).collect();
    let t = Q8Tensor::quantize(&vals, 1, 64).unwrap();
    for g in 0..2 {
        let group = &vals[g * 32..][..32];
        let amax = group.iter().fold(0f32, |a, v| a.max(v.abs()));
        let d = amax / 127.0;
        assert_eq!(t.scale(g), f16::from_f32(d).to_f32());
        let codes = t.group_codes(g);
        assert!(codes.iter().any(|&c| c.abs() == 127));
        for (c, v) in codes.iter().zip(group) {
            assert_eq!(*c, (v * (1.0 / d)).round() as i8);
        }
    }
    // All zeros: zero scale, zero codes.
    let z = Q8Tensor::quantize(&[0.0; 32], 1, 32).unwrap();
    assert_eq!((z.scale(0), z.group_codes(0)), (0.0, [0; 32]));
}

#[test]
fn parts_round_trip_with_an_odd_group_count() {
    let vals: Vec<f32> = (0..96).map(|i| (i as f32).sin()).collect();
    let t = Q8Tensor::quantize(&vals, 1, 96).unwrap();
    assert_eq!((t.codes.len(), t.scales.len()), (24, 2));
    assert_eq!(t.scales[1] >> 16, 0, "the padding half is zero");
    let (c, s) = Q8Tensor::part_bytes(1, 96).unwrap();
    assert_eq!((c, s), (96, 8));
    let back = Q8Tensor::from_parts(1, 96, t.codes_bytes(), t.scales_bytes()).unwrap();
    assert_eq!(back, t);
}

#[test]
fn bad_input_is_a_typed_error() {
    let msg = |r: Result<Q8Tensor>| r.unwrap_err().to_string();
    assert!(msg(Q8Tensor::quantize(&[0.0; 48], 1, 48)).contains("multiple of 32"));
    assert!(msg(Q8Tensor::quantize(&[0.0; 32], 2, 32)).contains("32 values"));
    let mut inf = [0.0f32; 32];
    inf[3] = f32::INFINITY;
    assert!(msg(Q8Tensor::quantize(&inf, 1, 32)).contains("non-finite"));
    assert!(msg(Q8Tensor::quantize(&[1e9; 32], 1, 32)).contains("f16 scale"));
    let short = vec![0u8; 33];
    let e = Q8Tensor::from_ggml(GgmlType::Q8_0, &short, 1, 32).unwrap_err();
    assert!(e.to_string().contains("bytes"), "{e}");
    assert!(msg(Q8Tensor::from_parts(1, 32, &[0; 31], &[0; 4])).contains("codes"));
    // A NaN scale in a Q8_0 block: its values are not finite, an error, not a panic.
    let mut nan = random_blocks(GgmlType::Q8_0, 1, 5);
    nan[..2].copy_from_slice(&f16::NAN.to_bits().to_le_bytes());
    assert!(Q8Tensor::from_ggml(GgmlType::Q8_0, &nan, 1, 32).is_err());
}
