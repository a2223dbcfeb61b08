//! HF folder reading: names mapped to canonical ones, values exact, bad files rejected
//! with typed errors.

use pocketrt::format::safetensors::{read_header, write_f32, HfSource};
use pocketrt::format::ModelSource;
use pocketrt::Error;
use std::path::Path;

const CONFIG: &str = r#"{"architectures":["Qwen2ForCausalLM"],"hidden_size":64,
  "num_hidden_layers":1,"num_attention_heads":2,"num_key_value_heads":1,
  "intermediate_size":128,"vocab_size":32,"rope_theta":10000.0,"rms_norm_eps":1e-6,
  "max_position_embeddings":256,"tie_word_embeddings":false,"eos_token_id":[3,4]}"#;

fn tmpdir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("pocketrt-st-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn ramp(n: usize, k: f32) -> Vec<f32> {
    (0..n).map(|i| (i as f32 * k).sin()).collect()
}

#[test]
fn hf_folder_maps_names_and_reads_values_exactly() {
    let d = tmpdir("map");
    std::fs::write(d.join("config.json"), CONFIG).unwrap();
    let emb = ramp(32 * 64, 0.1);
    let q = ramp(64 * 64, 0.2);
    let qb = ramp(64, 0.3);
    write_f32(
        &d.join("model.safetensors"),
        &[
            ("model.embed_tokens.weight", vec![32, 64], &emb),
            ("model.layers.0.self_attn.q_proj.weight", vec![64, 64], &q),
            ("model.layers.0.self_attn.q_proj.bias", vec![64], &qb),
            ("lm_head.weight", vec![32, 64], &emb),
            (
                "model.layers.0.self_attn.rotary_emb.inv_freq",
                vec![16],
                &qb[..16],
            ),
        ],
    )
    .unwrap();
    let mut src = HfSource::open(&d).unwrap();
    let names: Vec<&str> = src.tensors().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "token_embd.weight",
            "blk.0.attn_q.bias",
            "blk.0.attn_q.weight",
            "output.weight"
        ]
    );
    assert_eq!(src.read_f32("blk.0.attn_q.weight").unwrap(), q);
    assert_eq!(src.read_f32("blk.0.attn_q.bias").unwrap(), qb);
    assert_eq!(src.config().eos_token_ids, vec![3, 4]);
    assert!(matches!(
        src.read_f32("blk.0.ffn_up.weight"),
        Err(Error::MissingTensor(_))
    ));
}

fn write_raw(path: &Path, header: &str, data_len: usize) {
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.resize(out.len() + data_len, 0);
    std::fs::write(path, out).unwrap();
}

#[test]
fn bad_safetensors_files_give_typed_errors() {
    let d = tmpdir("bad");
    let p = d.join("x.safetensors");
    let ok = r#"{"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}}"#;

    write_raw(&p, ok, 24);
    assert_eq!(read_header(&p).unwrap()[0].shape, vec![2, 3]);

    write_raw(&p, ok, 23);
    assert!(
        matches!(read_header(&p), Err(Error::ModelTruncated { needed, .. }) if needed == 8 + ok.len() as u64 + 24)
    );

    std::fs::write(&p, [1, 2, 3]).unwrap();
    assert!(matches!(read_header(&p), Err(Error::ModelTruncated { .. })));

    std::fs::write(&p, u64::MAX.to_le_bytes()).unwrap();
    assert!(matches!(read_header(&p), Err(Error::CorruptModel { .. })));

    write_raw(
        &p,
        r#"{"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}}"#,
        24,
    );
    assert!(matches!(read_header(&p), Err(Error::CorruptModel { .. })));

    let overflow = r#"{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,24]}}"#;
    write_raw(&p, overflow, 24);
    assert!(matches!(read_header(&p), Err(Error::CorruptModel { .. })));

    write_raw(
        &p,
        r#"{"a":{"dtype":"I64","shape":[3],"data_offsets":[0,24]}}"#,
        24,
    );
    assert!(matches!(read_header(&p), Err(Error::Unsupported { .. })));

    write_raw(&p, "not json", 0);
    assert!(matches!(read_header(&p), Err(Error::CorruptModel { .. })));
}

#[test]
fn hf_folder_without_config_is_an_io_error_naming_the_file() {
    let d = tmpdir("noconfig");
    match HfSource::open(&d) {
        Err(e @ Error::Io { .. }) => assert!(e.to_string().contains("config.json")),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("opened a folder without config.json"),
    }
}
