//! The GGUF reader and dequantizers against tests/fixtures/dequant.gguf, made by
//! tests/fixtures/make_gguf_fixtures.py with the `gguf` PyPI package 0.19.0: metadata of
//! every value type, and per ggml type a random tensor plus gguf-py's dequantization of it.

use pocketrt::error::Error;
use pocketrt::format::gguf::{GgmlType, Gguf, MetaValue};
use pocketrt::format::gguf_dequant::{dequantize, dequantize_into};
use pocketrt::format::gguf_write::GgufWriter;
use std::path::PathBuf;

const TYPES: [GgmlType; 11] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
];

fn fixture_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/dequant.gguf")
}

fn fixture() -> (Vec<u8>, Gguf) {
    let bytes = std::fs::read(fixture_path()).expect("tests/fixtures/dequant.gguf");
    let g = Gguf::parse(&bytes).expect("fixture parses");
    (bytes, g)
}

fn tensor_bytes<'a>(bytes: &'a [u8], g: &Gguf, name: &str) -> &'a [u8] {
    let t = g
        .tensor(name)
        .unwrap_or_else(|| panic!("fixture lacks {name}"));
    let r = g.tensor_range(t).unwrap();
    &bytes[r.start as usize..r.end as usize]
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Index of the first element whose bits differ (NaN matches any NaN), if any.
pub fn first_bit_mismatch(ours: &[f32], expected: &[f32]) -> Option<usize> {
    assert_eq!(ours.len(), expected.len());
    ours.iter()
        .zip(expected)
        .position(|(a, b)| a.to_bits() != b.to_bits() && !(a.is_nan() && b.is_nan()))
}

#[test]
fn fixture_metadata_of_every_value_type_reads_back() {
    let (_, g) = fixture();
    use MetaValue::*;
    assert_eq!(g.version, 3);
    assert_eq!(g.alignment, 64);
    assert_eq!(g.data_offset % 64, 0);
    assert_eq!(g.get_str("general.architecture"), Some("pocketrt-test"));
    assert_eq!(g.get("general.alignment"), Some(&U32(64)));
    let expect = [
        ("test.u8", U8(200)),
        ("test.i8", I8(-100)),
        ("test.u16", U16(60000)),
        ("test.i16", I16(-30000)),
        ("test.u32", U32(4_000_000_000)),
        ("test.i32", I32(-2_000_000_000)),
        ("test.f32", F32(0.1)),
        ("test.bool", Bool(true)),
        ("test.string", String("héllo ✓".into())),
        ("test.u64", U64(18_000_000_000_000_000_000)),
        ("test.i64", I64(-9_000_000_000_000_000_000)),
        ("test.f64", F64(1e-300)),
        (
            "test.strings",
            Array(
                ["a", "", "Ġb", "<|im_end|>"]
                    .map(|s| String(s.into()))
                    .to_vec(),
            ),
        ),
        ("test.u64s", Array(vec![U64(1), U64(2), U64(1 << 40)])),
        ("test.f32s", Array(vec![F32(0.5), F32(-1.5)])),
        (
            "test.nested",
            Array(vec![
                Array(vec![I32(1), I32(2), I32(3)]),
                Array(vec![I32(-4)]),
                Array(vec![Array(vec![
                    String("deep".into()),
                    String("er".into()),
                ])]),
            ]),
        ),
    ];
    for (key, value) in expect {
        assert_eq!(g.get(key), Some(&value), "{key}");
    }
    assert_eq!(g.get_u64("test.i8"), None);
    assert_eq!(g.get_f64("test.i64"), Some(-9e18));
}

#[test]
fn fixture_tensor_table_has_types_shapes_and_aligned_offsets() {
    let (bytes, g) = fixture();
    assert_eq!(g.tensors.len(), 2 * TYPES.len());
    for ty in TYPES {
        let t = g.tensor(ty.name()).unwrap();
        assert_eq!((t.ty, t.dims.as_slice()), (ty, &[512u64, 2][..]), "{ty}");
        assert_eq!(t.shape(), vec![2, 512]);
        let e = g.tensor(&format!("{ty}.expected")).unwrap();
        assert_eq!((e.ty, e.dims.as_slice()), (GgmlType::F32, &[512u64, 2][..]));
        for t in [t, e] {
            assert_eq!(t.offset % 64, 0);
            let r = g.tensor_range(t).unwrap();
            assert!(r.end <= bytes.len() as u64);
        }
    }
}

#[test]
fn dequantization_matches_gguf_py_bit_exactly_for_every_type() {
    let (bytes, g) = fixture();
    for ty in TYPES {
        let ours = dequantize(ty, tensor_bytes(&bytes, &g, ty.name()), 1024).unwrap();
        let expected = f32s(tensor_bytes(&bytes, &g, &format!("{ty}.expected")));
        if let Some(i) = first_bit_mismatch(&ours, &expected) {
            panic!(
                "{ty}: element {i}: ours {} expected {}",
                ours[i], expected[i]
            );
        }
        // The fixture is meant to exercise real values, not zeros.
        assert!(expected.iter().filter(|x| **x != 0.0).count() > 900, "{ty}");
    }
}

#[test]
fn dequantize_into_by_rows_equals_whole_tensor() {
    let (bytes, g) = fixture();
    for ty in TYPES {
        let data = tensor_bytes(&bytes, &g, ty.name());
        let whole = dequantize(ty, data, 1024).unwrap();
        let row_bytes = Gguf::row_bytes(g.tensor(ty.name()).unwrap()).unwrap() as usize;
        let mut row = vec![0f32; 512];
        for r in 0..2 {
            dequantize_into(ty, &data[r * row_bytes..][..row_bytes], &mut row).unwrap();
            assert_eq!(
                first_bit_mismatch(&row, &whole[r * 512..][..512]),
                None,
                "{ty}"
            );
        }
    }
}

#[test]
fn open_and_read_tensor_helpers_agree_with_the_byte_slices() {
    let (bytes, g) = fixture();
    let (g2, mut file) = Gguf::open(fixture_path()).unwrap();
    assert_eq!(g2.tensors, g.tensors);
    assert_eq!(g2.file_len, Some(bytes.len() as u64));
    let t = g2.tensor("Q6_K").unwrap();
    assert_eq!(
        g2.read_tensor_bytes(&mut file, t).unwrap(),
        tensor_bytes(&bytes, &g, "Q6_K")
    );
    let row1 = g2.read_rows(&mut file, t, 1..2).unwrap();
    assert_eq!(row1, tensor_bytes(&bytes, &g, "Q6_K")[210 * 2..]);
    assert!(matches!(
        g2.read_rows(&mut file, t, 1..3),
        Err(Error::InvalidArgument(_))
    ));
    let x = g2.read_tensor_f32(&mut file, t).unwrap();
    let expected = f32s(tensor_bytes(&bytes, &g, "Q6_K.expected"));
    assert_eq!(first_bit_mismatch(&x, &expected), None);
}

#[test]
fn fixture_rewritten_by_our_writer_is_byte_identical() {
    let (bytes, g) = fixture();
    let mut w = GgufWriter::new();
    for (k, v) in &g.metadata {
        w.meta(k, v.clone());
    }
    for t in &g.tensors {
        w.tensor(&t.name, &t.dims, t.ty, tensor_bytes(&bytes, &g, &t.name))
            .unwrap();
    }
    let mut out = Vec::new();
    w.write_to(&mut out).unwrap();
    // gguf-py lays the file out exactly as we do: same bytes.
    assert!(
        out == bytes,
        "rewritten fixture differs from gguf-py's file"
    );
    let g2 = Gguf::parse(&out).unwrap();
    assert_eq!(g2.metadata, g.metadata);
    assert_eq!(g2.tensors, g.tensors); // same order, sizes and alignment → same offsets
    assert_eq!(g2.data_offset % 64, 0);
    for t in &g.tensors {
        assert_eq!(
            tensor_bytes(&out, &g2, &t.name),
            tensor_bytes(&bytes, &g, &t.name)
        );
    }
}
