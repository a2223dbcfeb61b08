//! Writes the seed corpora, `corpus/<target>/<seed>`, from a synthetic model small enough
//! to commit (1 layer, width 64, 300 tokens: ~40 KB as GGUF), the crate's template fixture
//! and a few hand-made inputs. Built like the targets (scripts/fuzz --seeds), so it reuses
//! their build; it links libFuzzer only for the coverage hooks, and runs its own `main`.

extern crate libfuzzer_sys;

use pocketrt::config::ModelConfig;
use pocketrt::convert::{convert, ConvertOptions};
use pocketrt::format::gguf_source::GgufSource;
use pocketrt::format::package::{shard_file_name, MANIFEST_FILE};
use pocketrt::format::safetensors;
use pocketrt::synth::SynthSource;
use pocketrt::tokenizer::byte_level_json;
use std::fs;
use std::path::Path;

const TINY: &str = r#"{"architectures":["Qwen3ForCausalLM"],"hidden_size":64,
    "num_hidden_layers":1,"num_attention_heads":2,"num_key_value_heads":1,"head_dim":32,
    "intermediate_size":64,"vocab_size":300,"rope_theta":1000000.0,"rms_norm_eps":1e-6,
    "max_position_embeddings":128,"tie_word_embeddings":true,"eos_token_id":257}"#;

const QWEN3_TEMPLATE: &str =
    include_str!("../../tests/fixtures/tokenizer/qwen3_chat_template.jinja");

fn put(target: &str, name: &str, bytes: &[u8]) {
    let dir = Path::new("corpus").join(target);
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join(name), bytes).unwrap();
}

/// A small byte-level BPE with a few merges, NFC and Qwen2's split regex.
fn small_bpe() -> String {
    let mut t: serde_json::Value =
        serde_json::from_str(&byte_level_json(&["<|im_start|>", "<|im_end|>"])).unwrap();
    let model = &mut t["model"];
    for (i, tok) in ["Ġt", "he", "Ġthe", "in", "Ġa"].iter().enumerate() {
        model["vocab"][tok] = (258 + i).into();
    }
    model["merges"] = serde_json::json!(["Ġ t", "h e", "Ġt he", "i n", ["Ġ", "a"]]);
    t["normalizer"] = serde_json::json!({"type": "NFC"});
    t["pre_tokenizer"] = serde_json::json!({"type": "Sequence", "pretokenizers": [
        {"type": "Split", "behavior": "Isolated", "invert": false, "pattern": {"Regex":
         "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
        {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false,
         "use_regex": false}]});
    t.to_string()
}

fn main() {
    let tmp = std::env::temp_dir().join(format!("pocketrt-seeds-{}", std::process::id()));
    fs::create_dir_all(&tmp).unwrap();

    // GGUF: the tiny model (with its byte-level tokenizer in the metadata).
    let config = ModelConfig::from_hf_json(TINY).unwrap();
    let gguf = SynthSource::new(config, 7)
        .unwrap()
        .gguf_writer()
        .unwrap()
        .to_bytes()
        .unwrap();
    put("gguf_header", "tiny-qwen3.gguf", &gguf);
    // The stream target's first byte picks the chunk sizes.
    put("gguf_stream", "tiny-qwen3", &[&[0u8][..], &gguf].concat());

    // Package: the same model converted, in 8 KiB shards.
    let path = tmp.join("tiny.gguf");
    fs::write(&path, &gguf).unwrap();
    let pkg = tmp.join("pkg");
    let opts = ConvertOptions {
        shard_bytes: Some(8 << 10),
        ..ConvertOptions::default()
    };
    let report = convert(
        &mut GgufSource::open(&path).unwrap(),
        &pkg,
        &opts,
        &mut |_| {},
    )
    .unwrap();
    let mut input = fs::read(pkg.join(MANIFEST_FILE)).unwrap();
    input.push(0);
    for i in 0..report.manifest.shards.len() {
        input.extend(fs::read(pkg.join(shard_file_name(i))).unwrap());
    }
    put("package", "tiny-qwen3", &input);

    // Safetensors: a few small tensors of each rank.
    let st = tmp.join("small.safetensors");
    let v: Vec<f32> = (0..24).map(|i| i as f32).collect();
    safetensors::write_f32(
        &st,
        &[
            ("model.norm.weight", vec![8], &v[..8]),
            ("lm_head.weight", vec![3, 8], &v[..]),
            ("scalar", vec![], &v[..1]),
        ],
    )
    .unwrap();
    put("safetensors", "small.safetensors", &fs::read(&st).unwrap());

    // tokenizer.json: the smallest one, and one with merges, NFC and a split regex.
    put(
        "tokenizer_json",
        "byte-level.json",
        byte_level_json(&["<|endoftext|>"]).as_bytes(),
    );
    put("tokenizer_json", "small-bpe.json", small_bpe().as_bytes());

    // Chat templates: flags byte, template, NUL, role NUL content pairs.
    let chat = |flags: u8, template: &str, messages: &[(&str, &str)]| {
        let mut b = vec![flags];
        b.extend_from_slice(template.as_bytes());
        for (role, content) in messages {
            b.push(0);
            b.extend_from_slice(role.as_bytes());
            b.push(0);
            b.extend_from_slice(content.as_bytes());
        }
        b
    };
    let talk = [
        ("system", "Be brief."),
        ("user", "Hi <think>?</think>"),
        ("assistant", "<think>\nhm\n</think>\n\nHello."),
        ("tool", "{\"t\": 21}"),
        ("user", "More"),
    ];
    put(
        "chat_template",
        "qwen3",
        &chat(0b1011, QWEN3_TEMPLATE, &talk),
    );
    put(
        "chat_template",
        "qwen3-nothink",
        &chat(0b0011, QWEN3_TEMPLATE, &talk[1..2]),
    );
    let small = [
        "{% for m in messages %}{{ '<|' + m.role + '|>' }}{{ m.content | trim }}\n{% endfor %}\
         {% if add_generation_prompt %}<|assistant|>{% endif %}",
        "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}\
         {{ tools | tojson(indent=2) }}{% set ns = namespace(x=0) %}{{ ns.x }}",
        "{{ bos_token }}{% for m in messages[::-1] %}{{ m.content.split(' ')[0] | upper }}\
         {{ loop.index }}{% if loop.last %}{{ raise_exception('x') }}{% endif %}{% endfor %}",
    ];
    for (i, t) in small.iter().enumerate() {
        put(
            "chat_template",
            &format!("small-{i}"),
            &chat(0b10001, t, &talk[..2]),
        );
    }

    // OpenAI requests: every request of the API fixtures (tests/fixtures/api), each with
    // a reply that thinks, calls a tool and says a stop string, and the constrained
    // decoding fixtures' schemas and grammars as response formats.
    let reply = "<think>\nhm\n</think>\n\nDone.\n<tool_call>\n{\"name\": \"get_weather\", \
                 \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    let request =
        |json: &serde_json::Value| [json.to_string().as_bytes(), b"\0", reply.as_bytes()].concat();
    let api = Path::new("../tests/fixtures/api");
    let mut names: Vec<_> = fs::read_dir(api)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".json") && !n.ends_with("_expected.json"))
        .collect();
    names.sort();
    for name in names {
        let doc: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(api.join(&name)).unwrap()).unwrap();
        for (i, req) in doc["requests"].as_array().into_iter().flatten().enumerate() {
            let stem = name.trim_end_matches(".json");
            put("openai_request", &format!("{stem}-{i}"), &request(req));
        }
    }
    let constrained = Path::new("../tests/fixtures/constrained");
    let schemas: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(constrained.join("schemas.json")).unwrap())
            .unwrap();
    let user = serde_json::json!([{"role": "user", "content": "JSON please"}]);
    for (name, schema) in schemas.as_object().unwrap() {
        let req = serde_json::json!({"messages": user, "response_format": {"type":
            "json_schema", "json_schema": {"name": name, "schema": schema}}});
        put("openai_request", &format!("schema-{name}"), &request(&req));
    }
    let grammars: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(constrained.join("grammars.json")).unwrap())
            .unwrap();
    for (name, grammar) in grammars.as_object().unwrap() {
        let req = serde_json::json!({"prompt": "x", "grammar": grammar});
        put("openai_request", &format!("grammar-{name}"), &request(&req));
    }
    fs::remove_dir_all(&tmp).unwrap();
    session_seeds();
}

/// Session snapshots: records appended, a rollback, the chat; in both row layouts.
fn session_seeds() {
    use pocketrt::engine::{KvLayout, RowKind};
    use pocketrt::session::{encode_header, encode_kv, encode_meta, Header};
    for (name, rows) in [("f32", RowKind::F32), ("f16", RowKind::F16Heads)] {
        let layout = KvLayout {
            rows,
            layers: 1,
            kv_heads: 2,
            head_dim: 2,
        };
        let header = Header {
            format: pocketrt::session::FORMAT.into(),
            model: "a".repeat(64),
            tokenizer: "b".repeat(64),
            backend: "cpu/int8".into(),
            layout,
            context: 64,
            sliding_window_keep: None,
        };
        let per = layout.bytes_per_position();
        let rows = |n: usize, seed: u8| -> Vec<u8> { (0..n * per).map(|i| i as u8 ^ seed).collect() };
        let mut f = encode_header(&header);
        f.extend(encode_kv(0, &[1, 2, 3], &rows(3, 0)));
        f.extend(encode_meta(r#"[{"role":"user","content":"hi"}]"#));
        f.extend(encode_kv(2, &[9, 8], &rows(2, 7)));
        put("session_snapshot", name, &f);
    }
}
