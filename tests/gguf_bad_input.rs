//! Bad GGUF input gives the specific typed error, never a panic or a huge allocation.

use pocketrt::error::Error;
use pocketrt::format::gguf::Gguf;
use pocketrt::format::gguf_dequant::{dequantize, is_supported};
use std::io::Cursor;

macro_rules! assert_err {
    ($result:expr, $pat:pat) => {
        match $result {
            Err($pat) => {}
            other => panic!(
                "expected {}, got {:?}",
                stringify!($pat),
                other.map(|_| "Ok(..)")
            ),
        }
    };
}

fn fixture() -> Vec<u8> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/dequant.gguf");
    std::fs::read(path).expect("tests/fixtures/dequant.gguf")
}

/// A hand-built GGUF byte stream (the writer refuses to produce bad files).
struct Raw(Vec<u8>);

impl Raw {
    fn header(version: u32, n_tensors: u64, n_kv: u64) -> Raw {
        Raw(b"GGUF".to_vec()).u32(version).u64(n_tensors).u64(n_kv)
    }
    fn u8(mut self, v: u8) -> Raw {
        self.0.push(v);
        self
    }
    fn u32(mut self, v: u32) -> Raw {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(mut self, v: u64) -> Raw {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn bytes(mut self, b: &[u8]) -> Raw {
        self.0.extend_from_slice(b);
        self
    }
    fn str(self, s: &str) -> Raw {
        self.u64(s.len() as u64).bytes(s.as_bytes())
    }
    fn kv_u32(self, key: &str, v: u32) -> Raw {
        self.str(key).u32(4).u32(v)
    }
    fn tensor(self, name: &str, dims: &[u64], type_id: u32, offset: u64) -> Raw {
        let mut r = self.str(name).u32(dims.len() as u32);
        for &d in dims {
            r = r.u64(d);
        }
        r.u32(type_id).u64(offset)
    }
    /// Pad to 32 and append `n` data bytes.
    fn data(mut self, n: usize) -> Vec<u8> {
        let len = self.0.len().next_multiple_of(32) + n;
        self.0.resize(len, 0x3C);
        self.0
    }
}

/// One F32 tensor of `dims` at `offset` with `data` bytes after the header.
fn one_tensor(dims: &[u64], type_id: u32, offset: u64, data: usize) -> Vec<u8> {
    Raw::header(3, 1, 0)
        .tensor("t", dims, type_id, offset)
        .data(data)
}

#[test]
fn a_valid_hand_built_file_parses() {
    let bytes = one_tensor(&[4, 2], 0, 0, 32);
    let g = Gguf::parse(&bytes).unwrap();
    assert_eq!(g.version, 3);
    assert_eq!(
        g.tensor_range(&g.tensors[0]).unwrap().end,
        bytes.len() as u64
    );
    let v2 = Raw::header(2, 0, 1).kv_u32("k", 5).data(0);
    assert_eq!(Gguf::parse(&v2).unwrap().get_u64("k"), Some(5));
}

#[test]
fn wrong_magic_is_bad_magic() {
    let mut bytes = fixture();
    bytes[0] = b'X';
    assert_err!(Gguf::parse(&bytes), Error::BadMagic { .. });
    assert_err!(
        Gguf::parse(b"lmggABCDEFGHIJKLMNOPQRSTUVWX"),
        Error::BadMagic { .. }
    );
}

#[test]
fn versions_other_than_2_and_3_are_unsupported() {
    for version in [0, 1, 4, u32::MAX] {
        let bytes = Raw::header(version, 0, 0).data(0);
        assert_err!(
            Gguf::parse(&bytes),
            Error::Unsupported {
                kind: "GGUF version",
                ..
            }
        );
    }
}

#[test]
fn every_prefix_of_the_header_is_model_truncated() {
    let bytes = fixture();
    let data_offset = Gguf::parse(&bytes).unwrap().data_offset as usize;
    let mut first_streaming_ok = None;
    for k in 0..data_offset {
        let prefix = &bytes[..k];
        assert_err!(Gguf::parse(prefix), Error::ModelTruncated { .. });
        // Streaming (length unknown): truncated until the tensor table is complete.
        match Gguf::read_header(prefix, None) {
            Ok(_) => {
                first_streaming_ok.get_or_insert(k);
            }
            Err(Error::ModelTruncated {
                needed, available, ..
            }) => {
                assert!(
                    first_streaming_ok.is_none(),
                    "prefix {k} failed after a shorter one parsed"
                );
                assert_eq!(available, k as u64);
                assert!(needed > available);
            }
            Err(e) => panic!("prefix {k}: {e}"),
        }
    }
    let first_ok = first_streaming_ok.expect("the full tensor table parses when streaming");
    assert!(
        first_ok + 64 > data_offset,
        "only padding may be missing, got {first_ok}"
    );
}

#[test]
fn a_cut_inside_the_data_section_is_model_truncated() {
    let bytes = fixture();
    let full = Gguf::parse(&bytes).unwrap();
    let last = full
        .tensors
        .iter()
        .max_by_key(|t| t.offset)
        .unwrap()
        .clone();
    for cut in [
        full.data_offset as usize + 1,
        bytes.len() / 2,
        bytes.len() - 1,
    ] {
        let short = &bytes[..cut];
        assert_err!(Gguf::parse(short), Error::ModelTruncated { .. });
        // The streamed header parses; the data is then found missing.
        let mut g = Gguf::read_header(short, None).unwrap();
        assert_err!(
            g.read_tensor_bytes(&mut Cursor::new(short), &last),
            Error::ModelTruncated { .. }
        );
        g.file_len = Some(cut as u64);
        assert_err!(g.tensor_range(&last), Error::ModelTruncated { .. });
    }
}

#[test]
fn a_file_shrunk_after_open_is_model_truncated_on_read() {
    let path =
        std::env::temp_dir().join(format!("pocketrt-gguf-shrunk-{}.gguf", std::process::id()));
    let bytes = fixture();
    std::fs::write(&path, &bytes).unwrap();
    let (g, mut file) = Gguf::open(&path).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .and_then(|f| f.set_len(bytes.len() as u64 - 10))
        .unwrap();
    let last = g.tensors.iter().max_by_key(|t| t.offset).unwrap();
    let result = g.read_tensor_bytes(&mut file, last);
    let reopened = Gguf::open(&path).map(|_| ());
    std::fs::remove_file(&path).unwrap();
    assert_err!(result, Error::ModelTruncated { .. });
    assert_err!(reopened, Error::ModelTruncated { .. });
}

#[test]
fn overflowing_or_misaligned_tensor_geometry_is_corrupt() {
    // Element count overflows u64 / exceeds i64.
    assert_err!(
        Gguf::parse(&one_tensor(&[1 << 32, 1 << 32], 0, 0, 64)),
        Error::CorruptModel { .. }
    );
    assert_err!(
        Gguf::parse(&one_tensor(&[1 << 62, 2], 0, 0, 64)),
        Error::CorruptModel { .. }
    );
    // Element count fits, byte count (×4) does not.
    assert_err!(
        Gguf::parse(&one_tensor(&[1 << 62], 0, 0, 64)),
        Error::CorruptModel { .. }
    );
    // Row not a whole number of Q4_0 blocks.
    assert_err!(
        Gguf::parse(&one_tensor(&[33], 2, 0, 64)),
        Error::CorruptModel { .. }
    );
    // Offset not a multiple of the alignment.
    assert_err!(
        Gguf::parse(&one_tensor(&[4], 0, 16, 64)),
        Error::CorruptModel { .. }
    );
    // Offset + size overflow u64.
    assert_err!(
        Gguf::parse(&one_tensor(&[4], 0, u64::MAX - 31, 64)),
        Error::CorruptModel { .. }
    );
    // 0 and 5 dimensions.
    assert_err!(
        Gguf::parse(&one_tensor(&[], 0, 0, 64)),
        Error::CorruptModel { .. }
    );
    assert_err!(
        Gguf::parse(&one_tensor(&[1; 5], 0, 0, 64)),
        Error::CorruptModel { .. }
    );
}

#[test]
fn tensors_past_the_end_of_the_file_are_model_truncated() {
    assert_err!(
        Gguf::parse(&one_tensor(&[4, 2], 0, 0, 31)),
        Error::ModelTruncated { .. }
    );
    assert_err!(
        Gguf::parse(&one_tensor(&[4], 0, 1 << 40, 64)),
        Error::ModelTruncated { .. }
    );
}

#[test]
fn unknown_tensor_type_ids_are_unsupported() {
    for id in [4, 5, 16, 29, 99, u32::MAX] {
        assert_err!(
            Gguf::parse(&one_tensor(&[256], id, 0, 1024)),
            Error::Unsupported {
                kind: "tensor type id",
                ..
            }
        );
    }
}

#[test]
fn absurd_string_lengths_are_rejected_before_allocating() {
    let huge_key = Raw::header(3, 0, 1).u64(1 << 40).data(64);
    assert_err!(Gguf::parse(&huge_key), Error::CorruptModel { .. });
    assert_err!(
        Gguf::read_header(&huge_key[..], None),
        Error::CorruptModel { .. }
    );
    // Plausible length, but longer than the file.
    let long_key = Raw::header(3, 0, 1).u64(1000).data(64);
    assert_err!(Gguf::parse(&long_key), Error::ModelTruncated { .. });
    let long_name = Raw::header(3, 1, 0).u64(1 << 30).data(64);
    assert_err!(Gguf::parse(&long_name), Error::ModelTruncated { .. });
}

#[test]
fn absurd_counts_are_rejected_before_allocating() {
    for (n_tensors, n_kv) in [(0, u64::MAX), (u64::MAX, 0), (0, 1 << 40), (1 << 40, 0)] {
        let bytes = Raw::header(3, n_tensors, n_kv).data(64);
        match Gguf::parse(&bytes) {
            Err(Error::CorruptModel { .. } | Error::ModelTruncated { .. }) => {}
            other => panic!("counts {n_tensors}/{n_kv}: {:?}", other.map(|_| ())),
        }
        assert_err!(
            Gguf::read_header(&bytes[..], None),
            Error::CorruptModel { .. }
        );
    }
    // An array claiming 2^40 u8 elements in a 100-byte file.
    let arr = Raw::header(3, 0, 1)
        .str("a")
        .u32(9)
        .u32(0)
        .u64(1 << 40)
        .data(64);
    assert_err!(Gguf::parse(&arr), Error::ModelTruncated { .. });
    assert_err!(
        Gguf::read_header(&arr[..], None),
        Error::CorruptModel { .. }
    );
}

#[test]
fn bad_metadata_values_are_typed_errors() {
    let kv = |raw: Raw| raw.data(0);
    let h = || Raw::header(3, 0, 1);
    assert_err!(
        Gguf::parse(&kv(h().str("b").u32(7).u8(2))),
        Error::CorruptModel { .. }
    );
    assert_err!(
        Gguf::parse(&kv(h().str("x").u32(13).u64(0))),
        Error::Unsupported {
            kind: "metadata value type",
            ..
        }
    );
    assert_err!(
        Gguf::parse(&kv(h().u64(2).bytes(&[0xC3, 0x28]).u32(0).u8(0))),
        Error::CorruptModel { .. }
    );
    let dup = Raw::header(3, 0, 2).kv_u32("k", 1).kv_u32("k", 2).data(0);
    assert_err!(Gguf::parse(&dup), Error::CorruptModel { .. });
    // Arrays nested `levels` deep, the innermost empty (limit: 8 levels).
    let nested = |levels: usize| {
        let mut raw = h().str("deep").u32(9);
        for _ in 1..levels {
            raw = raw.u32(9).u64(1);
        }
        kv(raw.u32(0).u64(0))
    };
    assert!(Gguf::parse(&nested(8)).is_ok());
    assert_err!(Gguf::parse(&nested(9)), Error::CorruptModel { .. });
    // Duplicate tensor names.
    let two = Raw::header(3, 2, 0)
        .tensor("t", &[1], 0, 0)
        .tensor("t", &[1], 0, 32)
        .data(64);
    assert_err!(Gguf::parse(&two), Error::CorruptModel { .. });
}

#[test]
fn alignment_must_be_a_power_of_two_integer() {
    for a in [0u32, 3, 48] {
        let bytes = Raw::header(3, 0, 1).kv_u32("general.alignment", a).data(0);
        assert_err!(Gguf::parse(&bytes), Error::CorruptModel { .. });
    }
    let s = Raw::header(3, 0, 1)
        .str("general.alignment")
        .u32(8)
        .str("32")
        .data(0);
    assert_err!(Gguf::parse(&s), Error::CorruptModel { .. });
    let ok = Raw::header(3, 0, 1)
        .kv_u32("general.alignment", 256)
        .data(0);
    assert_eq!(Gguf::parse(&ok).unwrap().alignment, 256);
}

#[test]
fn random_byte_flips_in_the_header_never_panic() {
    let bytes = fixture();
    let header_len = Gguf::parse(&bytes).unwrap().data_offset as usize;
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        // xorshift64*
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let (mut ok, mut err) = (0, 0);
    for _ in 0..3000 {
        let mut b = bytes.clone();
        for _ in 0..1 + next() % 4 {
            let i = (next() % header_len as u64) as usize;
            b[i] ^= 1 << (next() % 8);
        }
        match Gguf::parse(&b) {
            Ok(g) => {
                ok += 1;
                // Whatever parsed must also be safe to read and dequantize.
                for t in &g.tensors {
                    let r = g.tensor_range(t).unwrap();
                    let data = &b[r.start as usize..r.end as usize];
                    if is_supported(t.ty) {
                        dequantize(t.ty, data, t.n_elements() as usize).unwrap();
                    }
                }
            }
            Err(_) => err += 1,
        }
        let _ = Gguf::read_header(&b[..header_len], None);
    }
    assert!(
        ok > 0 && err > 0,
        "flips should hit both kinds of bytes: {ok} ok, {err} err"
    );
}
